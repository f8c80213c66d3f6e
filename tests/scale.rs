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

/// What one command made of the server: GETs in all, GETs of the Delta
/// log, and LISTs (listing is a GET of the bucket with a query, counted
/// under the bucket's root folder).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Reads {
    gets: u64,
    log_gets: u64,
    puts: u64,
}

fn reads_of(s3: &S3, table: &str, args: &[&str]) -> (Reads, String) {
    s3.take_requests();
    let out = ok(s3.idem(args, &[]));
    let c = s3.take_requests();
    let reads = Reads {
        gets: count(&c, "GET"),
        log_gets: count(&c, &format!("GET {table}/_delta_log/")),
        puts: count(&c, "PUT"),
    };
    (reads, out)
}

/// A table committed by one real run of slice 2026-10-01, then `extra`
/// sample commits (`idem sample-history`: other slices' commits, written
/// fast). delta-rs writes a checkpoint every 100 versions, so tables of
/// 1 + 120 and 1 + 320 commits both have 21 commits after their latest
/// checkpoint: what a run may read (checkpoint + the commits since) is the
/// same for both, and only the history before it differs.
fn table_with_history(s3: &S3, module: &str, input: &str, name: &str, extra: u64) -> String {
    let table = s3.url(&format!("tables/{name}"));
    let args = common::day_args(module, input, "2026-10-01", &table, &[]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = ok(s3.idem(&args, &[]));
    assert!(field(&out, "result:").starts_with("committed"), "{out}");
    let commits = extra.to_string();
    ok(s3.idem(
        &["sample-history", "--table", &table, "--commits", &commits],
        &[],
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
        seen.push((name, extra, memo, force, audit));
    }
    eprintln!("requests (table, commits added, memo, --force, audit --slice): {seen:?}");
    let (short, long) = (&seen[0], &seen[1]);
    // 200 more versions of history: not one more read of the log, and
    // not more than a handful of other requests (a LIST page).
    for (what, s, l) in [
        ("memo rerun", short.2, long.2),
        ("--force rerun", short.3, long.3),
        ("audit --slice", short.4, long.4),
    ] {
        assert!(
            l.log_gets <= s.log_gets + 2 && l.gets <= s.gets + 4 && l.puts == s.puts,
            "{what} read more of the longer history: {s:?} on {} versions, {l:?} on {}",
            short.1 + 2,
            long.1 + 2
        );
        // And what it reads is bounded by the commits since the checkpoint
        // (21), not the history (122 or 322 versions).
        assert!(l.log_gets < 100, "{what}: {l:?}");
    }
}
