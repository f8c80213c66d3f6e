//! Scale (issue 31): what a run reads does not grow with the table's
//! history. Counted, not timed: the requests a run makes to a real
//! S3-compatible server (tests/s3_server.py counts them by method and
//! folder), on two tables that differ only in how long their history is.

mod common;

use common::{S3, field};

fn ok(r: (i32, String, String)) -> String {
    assert_eq!(r.0, 0, "idem failed:\n{}\n{}", r.1, r.2);
    r.1
}

/// A request count of `counts` (see `S3::take_requests`): by method, or
/// by method and folder ("GET tables/t/_delta_log/").
fn count(counts: &serde_json::Value, key: &str) -> u64 {
    counts
        .get(key)
        .or_else(|| counts["keys"].get(key))
        .and_then(|v| v.as_u64())
        .unwrap_or(0)
}

/// What one command made of the server: GETs in all (a LIST is a GET of
/// the bucket with a query), GETs of the Delta log, PUTs, and the entries
/// its LISTs answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Reads {
    gets: u64,
    log_gets: u64,
    puts: u64,
    listed: u64,
}

fn reads_of(s3: &S3, table: &str, args: &[&str]) -> (Reads, String) {
    s3.take_requests();
    let out = ok(s3.idem(args, &[]));
    let c = s3.take_requests();
    eprintln!("{args:?}: {c}");
    let reads = Reads {
        gets: count(&c, "GET"),
        log_gets: count(&c, &format!("GET {table}/_delta_log/")),
        puts: count(&c, "PUT"),
        listed: count(&c, "LISTED"),
    };
    (reads, out)
}

/// A table committed by one real run of slice 2026-10-01, then `extra`
/// sample commits (`idem sample-history`: other slices' commits, written
/// fast). delta-rs writes a checkpoint every 100 versions (at 99, 199,
/// ...), so tables of versions 0..=121 and 0..=321 both have 22 commits
/// after their latest checkpoint: what a run may read (checkpoint + the
/// commits since) is the same for both, and only the history before it
/// differs.
fn table_with_history(s3: &S3, module: &str, input: &str, name: &str, extra: u64) -> String {
    let table = s3.url(&format!("tables/{name}"));
    let args = common::day_args(module, input, "2026-10-01", &table, &[]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = ok(s3.idem(&args, &[]));
    assert!(field(&out, "result:").starts_with("committed"), "{out}");
    let commits = extra.to_string();
    ok(s3.idem(
        &["sample-history", "--table", &table, "--commits", &commits],
        &[("IDEM_SAMPLE_HISTORY", "yes")],
    ));
    table
}

#[test]
fn a_run_reads_as_much_of_a_long_history_as_of_a_short_one() {
    let s3 = S3::start("lake");
    let module = common::guest("examples/daily_revenue");
    let module = module.to_str().unwrap();
    let input = s3.url("orders");
    ok(s3.idem(
        &[
            "sample",
            "--out",
            &input,
            "--rows",
            "300",
            "--files",
            "1",
            "--dates",
            "2026-10-01",
            "2026-10-02",
        ],
        &[],
    ));
    let mut seen = Vec::new();
    for (name, extra) in [("short", 120), ("long", 320)] {
        let table = table_with_history(&s3, module, &input, name, extra);
        let run = common::day_args(module, &input, "2026-10-01", &table, &[]);
        let run: Vec<&str> = run.iter().map(String::as_str).collect();
        let folder = format!("tables/{name}");
        let (memo, out) = reads_of(&s3, &folder, &run);
        assert!(field(&out, "result:").contains("memo"), "{out}");
        let mut forced = run.clone();
        forced.push("--force");
        let (force, out) = reads_of(&s3, &folder, &forced);
        assert!(field(&out, "result:").starts_with("unchanged"), "{out}");
        let (audit, out) = reads_of(
            &s3,
            &folder,
            &["audit", &table, "--slice", "date=2026-10-01"],
        );
        assert!(out.contains("proven"), "{out}");
        let next = common::day_args(module, &input, "2026-10-02", &table, &[]);
        let next: Vec<&str> = next.iter().map(String::as_str).collect();
        let (commit, out) = reads_of(&s3, &folder, &next);
        assert!(field(&out, "result:").starts_with("committed"), "{out}");
        seen.push((name, extra, memo, force, audit, commit));
    }
    eprintln!(
        "requests (table, commits added, memo, --force, audit --slice, committing run): {seen:?}"
    );
    let (short, long) = (&seen[0], &seen[1]);
    // 200 more versions of history: not one more read of the log, and
    // not more than a handful of other requests (a LIST page).
    for (what, s, l) in [
        ("memo rerun", short.2, long.2),
        ("--force rerun", short.3, long.3),
        ("audit --slice", short.4, long.4),
        ("committing run", short.5, long.5),
    ] {
        // Not one more entry listed either: a listing starts at the latest
        // checkpoint, and a commit does not list the log to clean it up
        // (delta-rs' default, every commit; idem cleans up at checkpoints).
        assert!(
            l.log_gets <= s.log_gets + 2
                && l.gets <= s.gets + 4
                && l.puts == s.puts
                && l.listed <= s.listed + 4,
            "{what} read more of the longer history: {s:?} on {} versions, {l:?} on {}",
            short.1 + 2,
            long.1 + 2
        );
        // And what it reads is bounded by the commits since the checkpoint
        // (22), not the history (122 or 322 versions).
        assert!(l.log_gets < 100 && l.listed < 100, "{what}: {l:?}");
    }
}

/// Finding of the review: delta-rs lands a commit past every commit that
/// won the race without conflicting with it, however many (not within its
/// retry count). A slice's commit that landed 20 versions after the one it
/// was made for is still found (the memo hits, audit proves it), also once
/// a checkpoint lies after it (it is then found from `idem:at`, not from
/// the commits after the checkpoint).
#[test]
fn a_commit_that_landed_far_past_the_version_it_was_made_for_is_found() {
    let dir = tempfile::tempdir().unwrap();
    let s = |p: &std::path::Path| p.display().to_string();
    let module = s(&common::guest("examples/daily_revenue"));
    let root = dir.path().join("orders");
    for d in ["2026-10-01", "2026-10-02"] {
        common::orders(&root, d, 300, 1);
    }
    let table = dir.path().join("t");
    let day = |d: &str| common::day_args(&module, &s(&root), d, &s(&table), &[]);
    let run = |d: &str| {
        let args = day(d);
        ok(common::idem(
            &args.iter().map(String::as_str).collect::<Vec<_>>(),
        ))
    };
    run("2026-10-01");
    // The second slice's run stops before its log write (made for
    // version 2) while another writer commits versions 2..=21 (commitInfo
    // only: nothing to conflict with).
    let barrier = dir.path().join("barrier");
    let child = common::idem_at_barrier(&day("2026-10-02"), "before-log-write", 2, &barrier);
    let t = std::time::Instant::now();
    while std::fs::read_dir(&barrier).map(|d| d.count()).unwrap_or(0) == 0 {
        assert!(
            t.elapsed().as_secs() < 120,
            "the run never reached its log write"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    for v in 2..=21 {
        let path = table.join(format!("_delta_log/{v:020}.json"));
        std::fs::write(
            path,
            br#"{"commitInfo":{"timestamp":1,"operation":"FOREIGN"}}"#,
        )
        .unwrap();
    }
    std::fs::write(barrier.join("test"), b"").unwrap();
    let o = child.wait_with_output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(field(&out, "result:"), "committed version 22", "{out}");
    let found = |when: &str| {
        let out = run("2026-10-02");
        assert!(field(&out, "result:").contains("memo"), "{when}: {out}");
        let (code, out, _) = common::idem(&["audit", &s(&table), "--slice", "date=2026-10-02"]);
        assert_eq!(code, 0, "{when}: {out}");
        assert!(out.contains(" v22 "), "{when}: {out}");
    };
    found("22 commits after the checkpoint-less start");
    // 80 more commits: delta-rs checkpoints version 99, after the slice's.
    ok(common::idem_env(
        &["sample-history", "--table", &s(&table), "--commits", "80"],
        &[("IDEM_SAMPLE_HISTORY", "yes")],
    ));
    assert!(
        table
            .join("_delta_log/00000000000000000099.checkpoint.parquet")
            .exists()
    );
    found("before the checkpoint");
}

/// A merge slice's rows are shared by key: any commit another writer made
/// after the slice's and that touched files may have changed them. A
/// rerun finds such a commit without reading the history: every 100
/// versions a merge commit seals what came before it (the version it read
/// through, and the latest foreign commit up to it), and a rerun reads
/// the commits after the seal and takes its word for those before, also
/// once log cleanup removed them.
#[test]
fn a_foreign_delete_in_a_merge_table_is_seen_through_the_seal() {
    let dir = tempfile::tempdir().unwrap();
    let s = |p: &std::path::Path| p.display().to_string();
    let module = s(&common::guest("examples/dedup_events"));
    let root = dir.path().join("orders");
    for d in ["2026-10-01", "2026-10-02"] {
        common::orders(&root, d, 2_000, 1);
    }
    let table = dir.path().join("t");
    let merge = ["--mode", "merge", "--key", "event_id"];
    let run = |d: &str| {
        let args = common::day_args(&module, &s(&root), d, &s(&table), &merge);
        ok(common::idem(
            &args.iter().map(String::as_str).collect::<Vec<_>>(),
        ))
    };
    run("2026-10-01");
    // Another writer deletes rows of the slice (version 2), then 110 of
    // idem's merge commits follow, the last of them sealing.
    let delete = format!(
        "from deltalake import DeltaTable\nDeltaTable({:?}).delete(\"amount > 50\")",
        s(&table)
    );
    let o = std::process::Command::new(common::python())
        .args(["-c", &delete])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    ok(common::idem_env(
        &["sample-history", "--table", &s(&table), "--commits", "110"],
        &[("IDEM_SAMPLE_HISTORY", "yes")],
    ));
    let out = run("2026-10-02");
    assert_eq!(field(&out, "result:"), "committed version 113", "{out}");
    let sealed =
        std::fs::read_to_string(table.join("_delta_log/00000000000000000113.json")).unwrap();
    assert!(
        sealed.contains(r#""appId":"idem:seal","version":112"#)
            && sealed.contains(r#""appId":"idem:seal-foreign","version":3"#),
        "no seal naming version 2 in {sealed}"
    );
    // 100 more commits (a checkpoint at 199), then log cleanup takes the
    // commits before it: the foreign delete and the sealing commit among
    // them (the slice's own commit, 1, kept). The seal's values outlive
    // them. The slice of 2026-10-01 is no longer what idem committed:
    // rerun, it commits again.
    ok(common::idem_env(
        &[
            "sample-history",
            "--table",
            &s(&table),
            "--commits",
            "100",
            "--prefix",
            "more",
        ],
        &[("IDEM_SAMPLE_HISTORY", "yes")],
    ));
    assert!(
        table
            .join("_delta_log/00000000000000000199.checkpoint.parquet")
            .exists()
    );
    for v in 2..199 {
        std::fs::remove_file(table.join(format!("_delta_log/{v:020}.json"))).unwrap();
    }
    let out = run("2026-10-01");
    let result = field(&out, "result:");
    assert!(
        result.starts_with("committed") && result.contains("recommitted"),
        "{out}"
    );
    assert!(out.contains("version 2 changed data"), "{out}");
}

/// Opening a table to read it finds out whether there is one from
/// delta-rs' load (the latest checkpoint and the commits after it), not by
/// listing the log (on S3 a page of up to 1,000 of its files): a missing
/// folder, a `_delta_log/` without commits and a missing prefix on S3 are
/// each named, for `idem audit` and `idem log` alike.
#[test]
fn reading_a_table_that_is_not_there_names_it() {
    let s3 = S3::start("lake");
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty");
    std::fs::create_dir_all(empty.join("_delta_log")).unwrap();
    let tables = [
        dir.path().join("absent").display().to_string(),
        empty.display().to_string(),
        s3.url("tables/absent"),
    ];
    for table in &tables {
        for command in ["audit", "log"] {
            let (code, out, err) = s3.idem(&[command, table], &[]);
            assert_ne!(code, 0, "idem {command} {table}: {out}");
            assert!(
                err.contains(&format!("there is no Delta table at `{table}`")),
                "idem {command} {table}: {err}"
            );
        }
    }
}

/// The commit files in `table`'s `_delta_log`, by version.
fn commit_versions(table: &std::path::Path) -> Vec<u64> {
    let mut v: Vec<u64> = std::fs::read_dir(table.join("_delta_log"))
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            name.strip_suffix(".json")?.parse().ok()
        })
        .collect();
    v.sort();
    v
}

/// Log cleanup happens when a checkpoint is written, as in Delta Lake (and
/// not, as delta-rs does on its own, after every commit): on a table whose
/// log retention is one second, the commit that lands on version 199
/// (where delta-rs writes a checkpoint) removes the expired commit files
/// before the latest checkpoint that leaves every commit of the retention
/// period readable (99: the commits of the last second are after it); with
/// `delta.enableExpiredLogCleanup=false` every one is kept. Both tables
/// read the same (the cleaned one by delta-rs' Python reader: the raw one
/// replays JSON commits only).
#[test]
fn the_log_is_cleaned_up_when_a_checkpoint_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let s = |p: &std::path::Path| p.display().to_string();
    let module = s(&common::guest("examples/daily_revenue"));
    let input = s(&dir.path().join("orders"));
    let sample = [
        "sample",
        "--out",
        &input,
        "--rows",
        "50",
        "--files",
        "1",
        "--dates",
        "2026-10-01",
    ];
    ok(common::idem(&sample));
    let mut views = Vec::new();
    for (name, cleanup) in [("kept", "false"), ("cleaned", "true")] {
        let table = dir.path().join(name);
        let run = common::day_args(&module, &input, "2026-10-01", &s(&table), &[]);
        ok(common::idem(
            &run.iter().map(String::as_str).collect::<Vec<_>>(),
        ));
        let alter = format!(
            "import deltalake, sys; deltalake.DeltaTable(sys.argv[1]).alter.set_table_properties({{'delta.logRetentionDuration': 'interval 1 second', 'delta.enableExpiredLogCleanup': '{cleanup}'}})"
        );
        let o = std::process::Command::new(common::python())
            .args(["-c", &alter, &s(&table)])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let before = commit_versions(&table);
        assert!(before.ends_with(&[2]), "{before:?}");
        std::thread::sleep(std::time::Duration::from_millis(1500));
        ok(common::idem_env(
            &["sample-history", "--table", &s(&table), "--commits", "200"],
            &[("IDEM_SAMPLE_HISTORY", "yes")],
        ));
        let after = commit_versions(&table);
        let checkpoint = |v: u64| {
            table
                .join(format!("_delta_log/{v:020}.checkpoint.parquet"))
                .exists()
        };
        assert!(checkpoint(199), "{name}: no checkpoint at 199");
        assert_eq!(after.last(), Some(&202), "{name}: {after:?}");
        match cleanup {
            "false" => {
                assert!(checkpoint(99), "{name}: no checkpoint at 99");
                assert_eq!(after, (0..=202).collect::<Vec<_>>(), "{name}")
            }
            // The log now starts at the latest checkpoint all of whose
            // earlier commits expired: 99 when the sample's last 100
            // commits took under the second of retention (the usual
            // case), 199 when a loaded machine took longer.
            _ => {
                let first = after.first().copied().unwrap_or_default();
                assert!(
                    [99, 199].contains(&first) && checkpoint(first),
                    "{name}: the expired commits before a checkpoint are removed: {after:?}"
                );
                assert_eq!(after, (first..=202).collect::<Vec<_>>(), "{name}");
            }
        }
        views.push(match cleanup {
            "false" => common::read_table(&table, None),
            _ => common::read_table_from_checkpoint(&table),
        });
    }
    assert_eq!(
        views[0].rows, views[1].rows,
        "both tables hold the same rows"
    );
    assert_eq!(views[1].version, 202);
}
