//! Slice ownership and proofs that read the table: every row of an idem
//! table belongs to exactly one slice, in every mode; a slice's new output
//! replaces exactly its own rows; memo/unchanged are answered only when the
//! table still holds what idem committed; `idem audit` and `idem verify`
//! check the table, not only the manifest. Real `idem` binary, real .wasm
//! guests, real Delta tables, other writers played by PyPI `deltalake`.

mod common;

use std::path::Path;

use common::{field, read_table};

fn s(p: &Path) -> String {
    p.to_str().unwrap().to_string()
}

fn ok(r: (i32, String, String)) -> String {
    assert_eq!(r.0, 0, "idem failed:\n{}\n{}", r.1, r.2);
    r.1
}

/// `idem run --files FILE --slice-id ID --table T ...extra`.
fn run_files(
    module: &Path,
    file: &Path,
    id: &str,
    table: &Path,
    extra: &[&str],
) -> (i32, String, String) {
    let mut args = vec![
        "run".to_string(),
        "--module".into(),
        s(module),
        "--files".into(),
        s(file),
        "--slice-id".into(),
        id.into(),
        "--table".into(),
        s(table),
        "--batch-rows".into(),
        "1000".into(),
    ];
    args.extend(extra.iter().map(|a| a.to_string()));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    common::idem(&refs)
}

/// `idem run --input ROOT --partition date=D --table T ...extra`.
fn run_day(
    module: &Path,
    root: &Path,
    date: &str,
    table: &Path,
    extra: &[&str],
) -> (i32, String, String) {
    let args = day_args(module, root, date, table, extra);
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    common::idem(&refs)
}

/// The arguments of `idem run --input ROOT --partition date=D --table T
/// --batch-rows 1000 ...extra`.
fn day_args(module: &Path, root: &Path, date: &str, table: &Path, extra: &[&str]) -> Vec<String> {
    common::day_args(&s(module), &s(root), date, &s(table), extra)
}

/// The manifest file a run's stdout names.
fn manifest_file(table: &Path, stdout: &str) -> std::path::PathBuf {
    let url = field(stdout, "manifest:");
    table
        .join("_idem/manifests")
        .join(url.rsplit('/').next().unwrap())
}

/// Another writer: a Python snippet over PyPI `deltalake` with `t` bound to
/// the table.
fn python_writer(table: &Path, code: &str) {
    python(&format!(
        "from deltalake import DeltaTable\nt = DeltaTable({:?})\n{code}\n",
        s(table)
    ));
}

/// Run a Python snippet with the tests' packages; its stdout.
fn python(script: &str) -> String {
    let out = std::process::Command::new(common::python())
        .args(["-c", script])
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "python failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// One day's orders as a single Parquet file at `to` (a slice input whose
/// content the test swaps).
fn day_file(dir: &Path, date: &str, rows: u64, to: &Path) {
    let files = common::orders(&dir.join(format!("src-{date}")), date, rows, 1);
    std::fs::create_dir_all(to.parent().unwrap()).unwrap();
    std::fs::copy(&files[0], to).unwrap();
}

#[test]
fn append_with_a_changed_output_replaces_the_slices_own_rows() {
    let dir = tempfile::tempdir().unwrap();
    let module = common::guest("examples/clean_orders");
    let input = dir.path().join("in/orders.parquet");
    let (table, clean_a) = (dir.path().join("t"), dir.path().join("clean_a"));
    let append = ["--mode", "append"];
    // Output A, then B, then A again, for one slice.
    day_file(dir.path(), "2026-10-01", 3_000, &input);
    ok(run_files(&module, &input, "s", &table, &append));
    ok(run_files(&module, &input, "s", &clean_a, &append));
    day_file(dir.path(), "2026-10-02", 2_000, &input);
    let out = ok(run_files(&module, &input, "s", &table, &append));
    assert!(field(&out, "result:").starts_with("committed"), "{out}");
    day_file(dir.path(), "2026-10-01", 3_000, &input);
    let out = ok(run_files(&module, &input, "s", &table, &append));
    assert!(field(&out, "result:").starts_with("committed"), "{out}");
    // A second slice's rows are untouched by the first slice's changes.
    let other = dir.path().join("in2/orders.parquet");
    day_file(dir.path(), "2026-10-03", 1_000, &other);
    ok(run_files(&module, &other, "t", &table, &append));
    ok(run_files(&module, &other, "t", &clean_a, &append));
    let (got, want) = (read_table(&table, None), read_table(&clean_a, None));
    assert_eq!(got.rows.len(), want.rows.len(), "rows duplicated or lost");
    assert_eq!(got.rows, want.rows);
}

#[test]
fn a_partition_has_one_owning_slice_id() {
    let dir = tempfile::tempdir().unwrap();
    let module = common::guest("examples/daily_revenue");
    let (a, b) = (dir.path().join("a.parquet"), dir.path().join("b.parquet"));
    day_file(dir.path(), "2026-10-01", 2_000, &a);
    day_file(dir.path(), "2026-10-02", 3_000, &b);
    let table = dir.path().join("t");
    let part = [
        "--partition",
        "date=2026-10-01",
        "--mode",
        "overwrite-partition",
    ];
    ok(run_files(&module, &a, "a", &table, &part));
    let before = read_table(&table, None);
    let (code, out, err) = run_files(&module, &b, "b", &table, &part);
    assert_eq!(
        code, 2,
        "a second slice id took the partition:\n{out}\n{err}"
    );
    assert!(err.contains("owned by slice `a`"), "{err}");
    assert_eq!(
        read_table(&table, None),
        before,
        "the refused run changed the table"
    );
    let out = ok(run_files(&module, &a, "a", &table, &part));
    assert!(field(&out, "result:").starts_with("unchanged"), "{out}");
}

#[test]
fn an_empty_output_commits_and_empties_the_slice() {
    let dir = tempfile::tempdir().unwrap();
    let module = common::guest("examples/clean_orders");
    let root = dir.path().join("orders");
    common::orders(&root, "2026-10-01", 2_000, 2);
    common::orders(&root, "2026-10-02", 2_000, 2);
    let table = dir.path().join("t");
    ok(run_day(&module, &root, "2026-10-01", &table, &[]));
    ok(run_day(&module, &root, "2026-10-02", &table, &[]));
    let other_day: Vec<String> = read_table(&table, None)
        .rows
        .into_iter()
        .filter(|r| r.contains("2026-10-02"))
        .collect();
    // The corrected transform keeps nothing for 2026-10-01.
    let none = ["--params", r#"{"min_amount": 1e300}"#];
    let out = ok(run_day(&module, &root, "2026-10-01", &table, &none));
    assert!(field(&out, "result:").starts_with("committed"), "{out}");
    assert_eq!(
        field(&out, "output:").split(' ').nth(1),
        Some("(0"),
        "{out}"
    );
    let view = read_table(&table, None);
    assert!(
        view.rows.iter().all(|r| !r.contains("2026-10-01")),
        "stale rows kept"
    );
    assert_eq!(view.rows, other_day, "another slice's rows changed");
    let out = ok(run_day(&module, &root, "2026-10-01", &table, &none));
    assert!(field(&out, "result:").starts_with("unchanged"), "{out}");
}

#[test]
fn null_merge_keys_are_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let module = common::guest("examples/dedup_events");
    let root = dir.path().join("orders");
    common::orders(&root, "2026-10-01", 3_000, 1);
    let table = dir.path().join("t");
    let (code, out, err) = run_day(
        &module,
        &root,
        "2026-10-01",
        &table,
        &["--mode", "merge", "--key", "order_id,amount"],
    );
    assert_eq!(code, 3, "{out}\n{err}");
    assert!(
        err.contains("merge key column `amount` is null in"),
        "{err}"
    );
    assert!(
        !table.join("_delta_log").exists(),
        "the refused run created the table"
    );
}

#[test]
fn a_foreign_delete_is_noticed_and_the_slice_recommitted() {
    let dir = tempfile::tempdir().unwrap();
    let module = common::guest("examples/clean_orders");
    let root = dir.path().join("orders");
    common::orders(&root, "2026-10-01", 3_000, 2);
    common::orders(&root, "2026-10-02", 3_000, 2);
    let (table, clean) = (dir.path().join("t"), dir.path().join("clean"));
    for d in ["2026-10-01", "2026-10-02"] {
        ok(run_day(&module, &root, d, &table, &[]));
        ok(run_day(&module, &root, d, &clean, &[]));
    }
    let want = read_table(&clean, None).rows;
    python_writer(
        &table,
        "t.delete(\"\\\"date\\\" = '2026-10-01' AND amount > 50\")",
    );
    assert_ne!(
        read_table(&table, None).rows,
        want,
        "the DELETE did nothing"
    );
    // Audit sees it.
    let (code, out, _) = common::idem(&["audit", &s(&table)]);
    assert_eq!(code, 1, "audit missed the DELETE:\n{out}");
    assert!(
        out.contains("date=2026-10-01") && out.contains("FAILED"),
        "{out}"
    );
    // The same run (memo path) must recommit, and say why.
    let out = ok(run_day(&module, &root, "2026-10-01", &table, &[]));
    let result = field(&out, "result:");
    assert!(
        result.starts_with("committed") && result.contains("recommitted"),
        "{out}"
    );
    assert_eq!(read_table(&table, None).rows, want);
    let (code, out, _) = common::idem(&["audit", &s(&table)]);
    assert_eq!(code, 0, "{out}");
    let out = ok(run_day(&module, &root, "2026-10-01", &table, &[]));
    assert!(field(&out, "result:").contains("memo"), "{out}");
}

#[test]
fn a_restore_behind_idems_back_is_noticed() {
    let dir = tempfile::tempdir().unwrap();
    let module = common::guest("examples/clean_orders");
    let input = dir.path().join("in/orders.parquet");
    let (table, clean) = (dir.path().join("t"), dir.path().join("clean"));
    let append = ["--mode", "append"];
    day_file(dir.path(), "2026-10-01", 2_000, &input);
    ok(run_files(&module, &input, "s", &table, &append));
    day_file(dir.path(), "2026-10-02", 2_000, &input);
    ok(run_files(&module, &input, "s", &table, &append));
    ok(run_files(&module, &input, "s", &clean, &append));
    python_writer(&table, "t.restore(1)");
    // Output B is "current" by the app transactions, but the table holds A.
    let out = ok(run_files(&module, &input, "s", &table, &append));
    assert!(field(&out, "result:").contains("recommitted"), "{out}");
    assert_eq!(read_table(&table, None).rows, read_table(&clean, None).rows);
}

#[test]
fn audit_proves_every_slice_and_catches_an_edited_manifest() {
    let dir = tempfile::tempdir().unwrap();
    let module = common::guest("examples/daily_revenue");
    let root = dir.path().join("orders");
    for d in ["2026-10-01", "2026-10-02"] {
        common::orders(&root, d, 2_000, 2);
    }
    let table = dir.path().join("t");
    let mut manifests = Vec::new();
    for d in ["2026-10-01", "2026-10-02"] {
        let out = ok(run_day(&module, &root, d, &table, &[]));
        manifests.push(manifest_file(&table, &out));
    }
    let (code, out, err) = common::idem(&["audit", &s(&table), "--replay"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert_eq!(out.matches(" proven ").count(), 2, "{out}");
    assert!(out.contains("replay reproduced it"), "{out}");
    // An edited manifest (valid JSON, consistent run key is not required to
    // fool a digest check) is caught by its digest.
    let text = std::fs::read_to_string(&manifests[0]).unwrap();
    std::fs::write(
        &manifests[0],
        text.replacen("\"rowsIn\":", "\"rowsIn\": ", 1),
    )
    .unwrap();
    let (code, out, _) = common::idem(&["audit", &s(&table)]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("was edited"), "{out}");
    let (code, out, _) = common::idem(&["verify", &s(&manifests[0])]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("was edited"), "{out}");
}

/// A self-consistent manifest (its run key matches its content) that no
/// commit of the table names: verify used to say "match".
#[test]
fn verify_refuses_a_forged_manifest_and_another_engine() {
    let dir = tempfile::tempdir().unwrap();
    let module = common::guest("examples/daily_revenue");
    let root = dir.path().join("orders");
    common::orders(&root, "2026-10-01", 2_000, 2);
    let table = dir.path().join("t");
    let out = ok(run_day(&module, &root, "2026-10-01", &table, &[]));
    let real = manifest_file(&table, &out);
    let (code, out, err) = common::idem(&["verify", &s(&real)]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("table: commit v1"), "{out}");

    let m = idem::manifest::Manifest::from_bytes(&std::fs::read(&real).unwrap()).unwrap();
    // A genuine rerun with a new run key and the same output (committed
    // nothing) is not a forgery.
    let out = ok(run_day(
        &module,
        &root,
        "2026-10-01",
        &table,
        &["--params", r#"{"note": "rerun"}"#],
    ));
    assert!(field(&out, "result:").starts_with("unchanged"), "{out}");
    let rerun = manifest_file(&table, &out);
    let (code, out, err) = common::idem(&["verify", &s(&rerun)]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        out.contains("describes the slice's current output"),
        "{out}"
    );
    // A forgery: a real run over other inputs (so its replay matches),
    // retargeted at this table, whose slice never held that output.
    let other = dir.path().join("other");
    common::orders(&other, "2026-10-01", 1_500, 1);
    let t2 = dir.path().join("t2");
    let out = ok(run_day(&module, &other, "2026-10-01", &t2, &[]));
    let m2_path = manifest_file(&t2, &out);
    let m2 = idem::manifest::Manifest::from_bytes(&std::fs::read(&m2_path).unwrap()).unwrap();
    let mut spec = m2.spec.clone();
    spec.target = m.spec.target.clone();
    let forged = idem::manifest::Manifest::new(spec, m2.result.clone());
    let forged_path = dir.path().join("forged.json");
    std::fs::write(&forged_path, forged.to_bytes()).unwrap();
    let (code, out, _) = common::idem(&["verify", &s(&forged_path)]);
    assert_eq!(code, 1, "a forged manifest verified:\n{out}");
    assert!(out.contains("no commit of table"), "{out}");

    let mut spec = m.spec.clone();
    spec.engine = "idem/0.0.1 wasmtime/1 profile/strict".into();
    let other = idem::manifest::Manifest::new(spec, m.result.clone());
    let other_path = dir.path().join("other-engine.json");
    std::fs::write(&other_path, other.to_bytes()).unwrap();
    let (code, _, err) = common::idem(&["verify", &s(&other_path)]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--allow-engine"), "{err}");
    let (code, out, err) = common::idem(&["verify", "--allow-engine", &s(&other_path)]);
    assert_ne!(code, 2, "{out}\n{err}");
    assert!(out.contains("engine differs"), "{out}");

    // A manifest naming an input outside its root is refused, not read.
    let mut spec = m.spec.clone();
    spec.slice.inputs[0].path = "../../etc/passwd".into();
    let evil = idem::manifest::Manifest::new(spec, m.result.clone());
    let evil_path = dir.path().join("evil.json");
    std::fs::write(&evil_path, evil.to_bytes()).unwrap();
    let (code, out, err) = common::idem(&["verify", &s(&evil_path)]);
    assert_eq!(
        code, 1,
        "an edited manifest fails verification: {out}\n{err}"
    );
    assert!(
        out.contains("MISMATCH") && out.contains("not a plain path below the slice root"),
        "{out}"
    );
}

#[test]
fn a_first_output_with_no_rows_creates_the_table_from_the_guests_schema() {
    let dir = tempfile::tempdir().unwrap();
    let module = common::guest("examples/clean_orders");
    let root = dir.path().join("orders");
    common::orders(&root, "2026-10-01", 1_000, 1);
    let table = dir.path().join("t");
    let none = ["--params", r#"{"min_amount": 1e300}"#];
    let out = ok(run_day(&module, &root, "2026-10-01", &table, &none));
    assert!(
        field(&out, "result:").starts_with("committed version 1"),
        "{out}"
    );
    let view = read_table(&table, None);
    assert!(view.rows.is_empty());
    let out = ok(run_day(&module, &root, "2026-10-01", &table, &none));
    assert!(field(&out, "result:").contains("memo"), "{out}");
}

/// Two hosts at the log write of the same slice at the same moment (a
/// barrier inside the commit proves both got there after reading the log):
/// exactly one commits, the other loses the race, re-reads and reports the
/// output current; the table equals one clean run.
#[test]
fn two_hosts_at_the_log_write_at_once_one_commits_one_recovers() {
    for mode in ["overwrite-partition", "append"] {
        let dir = tempfile::tempdir().unwrap();
        let module = common::guest("examples/clean_orders");
        let root = dir.path().join("orders");
        common::orders(&root, "2026-10-01", 2_000, 2);
        let (table, clean) = (dir.path().join("t"), dir.path().join("clean"));
        // Version 0 (the CREATE) first, so both race on the slice commit.
        let other = dir.path().join("other");
        common::orders(&other, "2026-10-02", 500, 1);
        ok(run_day(
            &module,
            &other,
            "2026-10-02",
            &table,
            &["--mode", mode],
        ));
        ok(run_day(
            &module,
            &other,
            "2026-10-02",
            &clean,
            &["--mode", mode],
        ));
        ok(run_day(
            &module,
            &root,
            "2026-10-01",
            &clean,
            &["--mode", mode],
        ));
        let barrier = dir.path().join("barrier");
        let spawn = || {
            let args = day_args(&module, &root, "2026-10-01", &table, &["--mode", mode]);
            common::idem_at_barrier(&args, "before-log-write", 2, &barrier)
        };
        let (a, b) = (spawn(), spawn());
        let outs: Vec<String> = [a, b]
            .into_iter()
            .map(|c| {
                let o = c.wait_with_output().unwrap();
                let err = String::from_utf8_lossy(&o.stderr).into_owned();
                // A race idem resolves is not an error: nothing on stderr
                // says ERROR, and no colour codes go to a pipe.
                assert!(!err.contains("ERROR"), "{mode}: {err}");
                assert!(!err.contains('\x1b'), "{mode}: {err:?}");
                ok((
                    o.status.code().unwrap_or(-1),
                    String::from_utf8_lossy(&o.stdout).into_owned(),
                    err,
                ))
            })
            .collect();
        assert_eq!(
            std::fs::read_dir(&barrier).unwrap().count(),
            2,
            "both must reach the barrier"
        );
        let results: Vec<String> = outs.iter().map(|o| field(o, "result:")).collect();
        let committed = results
            .iter()
            .filter(|r| r.starts_with("committed"))
            .count();
        let recovered = results
            .iter()
            .filter(|r| r.starts_with("unchanged") && r.contains("another host committed it first"))
            .count();
        assert_eq!((committed, recovered), (1, 1), "{mode}: {results:?}");
        assert_eq!(
            read_table(&table, None).rows,
            read_table(&clean, None).rows,
            "{mode}"
        );
    }
}

/// Start `idem run` that announces itself at fault point `point` (a file in
/// `flag`) and then sleeps there; wait for the announcement and kill it.
fn kill_at(module: &Path, root: &Path, table: &Path, extra: &[&str], point: &str, flag: &Path) {
    let args = day_args(module, root, "2026-10-01", table, extra);
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_idem"))
        .args(&args)
        .env("IDEM_CACHE_DIR", common::test_cache())
        .env("IDEM_FAULT_BARRIER", format!("{point}:1:{}", s(flag)))
        .env("IDEM_FAULT_SLEEP_MS", format!("{point}:60000"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let t = std::time::Instant::now();
    while std::fs::read_dir(flag).map(|d| d.count()).unwrap_or(0) == 0 {
        assert!(t.elapsed().as_secs() < 120, "the run never reached {point}");
        assert!(
            child.try_wait().unwrap().is_none(),
            "the run ended before {point}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
}

/// Killed after the data files are written but before the log names them:
/// the table is untouched and the next run commits once. Killed after the
/// log write but before the memo index and run log: the next run finds the
/// output current and commits nothing. Rows compared exactly each time.
#[test]
fn kills_between_data_files_log_and_sidecars_lose_nothing_and_duplicate_nothing() {
    for mode in ["append", "overwrite-partition"] {
        let dir = tempfile::tempdir().unwrap();
        let module = common::guest("examples/clean_orders");
        let root = dir.path().join("orders");
        common::orders(&root, "2026-10-01", 3_000, 2);
        let (table, clean) = (dir.path().join("t"), dir.path().join("clean"));
        let m = ["--mode", mode];
        let a = ["--mode", mode, "--params", r#"{"min_amount": 900}"#];
        ok(run_day(&module, &root, "2026-10-01", &table, &a));
        ok(run_day(&module, &root, "2026-10-01", &clean, &m));
        let before = read_table(&table, None);

        kill_at(
            &module,
            &root,
            &table,
            &m,
            "before-log-write",
            &dir.path().join("f1"),
        );
        assert_eq!(
            read_table(&table, None),
            before,
            "{mode}: a kill before the log write changed the table"
        );
        let out = ok(run_day(&module, &root, "2026-10-01", &table, &m));
        assert_eq!(
            field(&out, "result:"),
            "committed version 2",
            "{mode}: {out}"
        );
        assert_eq!(
            read_table(&table, None).rows,
            read_table(&clean, None).rows,
            "{mode}"
        );

        // Back to output A, killed after its log write.
        kill_at(
            &module,
            &root,
            &table,
            &a,
            "after-log-write",
            &dir.path().join("f2"),
        );
        let v3 = read_table(&table, None);
        assert_eq!(
            v3.version, 3,
            "{mode}: the commit before the kill is not in the log"
        );
        assert_eq!(v3.rows, before.rows, "{mode}");
        let out = ok(run_day(&module, &root, "2026-10-01", &table, &a));
        assert!(
            field(&out, "result:").starts_with("unchanged since version 3"),
            "{mode}: {out}"
        );
        assert_eq!(read_table(&table, None), v3, "{mode}");
    }
}

/// Reruns: without flags they are memo (nothing executes: the `execute`
/// fault point is never reached); with --force they execute and the
/// commit-level digest check answers "unchanged". Every mode.
#[test]
fn memo_executes_nothing_and_force_reaches_the_commit_check_in_every_mode() {
    for (example, extra) in [
        ("examples/daily_revenue", vec![]),
        (
            "examples/dedup_events",
            vec!["--mode", "merge", "--key", "event_id"],
        ),
        ("examples/clean_orders", vec!["--mode", "append"]),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let module = common::guest(example);
        let root = dir.path().join("orders");
        common::orders(&root, "2026-10-01", 2_000, 2);
        let table = dir.path().join("t");
        ok(run_day(&module, &root, "2026-10-01", &table, &extra));
        let once = read_table(&table, None);
        let probe = |name: &str, force: bool| {
            let flag = dir.path().join(name);
            let mut args = day_args(&module, &root, "2026-10-01", &table, &extra);
            if force {
                args.push("--force".into());
            }
            let refs: Vec<&str> = args.iter().map(String::as_str).collect();
            let barrier = format!("execute:1:{}", s(&flag));
            let out = ok(common::idem_env(&refs, &[("IDEM_FAULT_BARRIER", &barrier)]));
            let executed = std::fs::read_dir(&flag).map(|d| d.count()).unwrap_or(0) > 0;
            (field(&out, "result:"), executed)
        };
        let (memo, executed) = probe("memo", false);
        assert!(memo.contains("memo"), "{example}: {memo}");
        assert!(!executed, "{example}: a memo run executed the transform");
        let (forced, executed) = probe("force", true);
        assert!(executed, "{example}: --force did not execute");
        assert!(
            forced.starts_with("unchanged since version 1") && !forced.contains("memo"),
            "{example}: {forced}"
        );
        assert_eq!(
            read_table(&table, None),
            once,
            "{example}: a rerun changed the table"
        );
    }
}

/// Merge slices own their rows too (the `_idem_slice` column): a slice's
/// new output removes its keys that vanished, and a key another slice
/// committed is refused, not silently taken over.
#[test]
fn merge_slices_own_their_keys() {
    let dir = tempfile::tempdir().unwrap();
    let module = common::guest("examples/dedup_events");
    let x = dir.path().join("in/x.parquet");
    let (table, clean) = (dir.path().join("t"), dir.path().join("clean"));
    let merge = ["--mode", "merge", "--key", "event_id"];
    day_file(dir.path(), "2026-10-01", 2_000, &x);
    ok(run_files(&module, &x, "a", &table, &merge));
    // The corrected input has half the events: the other half must go.
    day_file(dir.path(), "2026-10-01", 1_000, &x);
    let out = ok(run_files(&module, &x, "a", &table, &merge));
    assert!(field(&out, "result:").starts_with("committed"), "{out}");
    ok(run_files(&module, &x, "a", &clean, &merge));
    let want = read_table(&clean, None).rows;
    assert!(
        want.iter().all(|r| r.contains("\"_idem_slice\": \"a\"")),
        "{}",
        want[0]
    );
    assert_eq!(read_table(&table, None).rows, want, "vanished keys stayed");
    // Another slice with the same keys is refused, and changes nothing.
    let y = dir.path().join("in/y.parquet");
    day_file(dir.path(), "2026-10-01", 1_000, &y);
    let (code, out, err) = run_files(&module, &y, "b", &table, &merge);
    assert_eq!(code, 2, "{out}\n{err}");
    assert!(err.contains("belongs to slice `a`"), "{err}");
    assert_eq!(read_table(&table, None).rows, want);
}

/// The replay's "output differs" branch and verify's exit code 2.
#[test]
fn replay_names_a_different_output_and_verify_exits_2_on_garbage() {
    let dir = tempfile::tempdir().unwrap();
    let module = common::guest("examples/daily_revenue");
    let root = dir.path().join("orders");
    common::orders(&root, "2026-10-01", 1_000, 1);
    let table = dir.path().join("t");
    let out = ok(run_day(&module, &root, "2026-10-01", &table, &[]));
    let real = manifest_file(&table, &out);
    let m = idem::manifest::Manifest::from_bytes(&std::fs::read(&real).unwrap()).unwrap();
    // Same run (the result is not in the run key), another output digest.
    let mut result = m.result.clone();
    result.output_digest = idem::digest::Digest::of_bytes(b"not this output");
    let claimed = idem::manifest::Manifest::new(m.spec.clone(), result);
    assert_eq!(claimed.run_key, m.run_key);
    let sandbox = common::sandbox_with(idem::sandbox::Limits::default());
    match idem::run::replay(&claimed.to_bytes(), &sandbox).unwrap() {
        idem::run::Verdict::Mismatch(why) => {
            assert!(why.starts_with("output differs"), "{why}");
            assert!(why.contains(m.result.output_digest.as_str()), "{why}");
        }
        v => panic!("a different output matched: {v:?}"),
    }
    let garbage = dir.path().join("garbage.json");
    std::fs::write(&garbage, b"{\"not\": \"a manifest\"}").unwrap();
    let (code, _, err) = common::idem(&["verify", &s(&garbage)]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("not an idem run manifest"), "{err}");
}

/// A slice that moves to another partition gives its old one up (another
/// slice may then take it), and a partition column that is not the table's
/// partitioning is refused (its files would land in other slices'
/// partitions).
#[test]
fn partitions_follow_a_slices_latest_commit_and_the_tables_partitioning() {
    let dir = tempfile::tempdir().unwrap();
    let module = common::guest("examples/daily_revenue");
    let (a, b) = (dir.path().join("a.parquet"), dir.path().join("b.parquet"));
    day_file(dir.path(), "2026-10-01", 1_000, &a);
    day_file(dir.path(), "2026-10-02", 1_000, &b);
    let table = dir.path().join("t");
    let part = |p: &'static str| ["--partition", p, "--mode", "overwrite-partition"];
    ok(run_files(&module, &a, "s", &table, &part("date=d1")));
    ok(run_files(&module, &a, "s", &table, &part("date=d2")));
    let out = ok(run_files(&module, &b, "t", &table, &part("date=d1")));
    assert!(field(&out, "result:").starts_with("committed"), "{out}");
    let rows = read_table(&table, None).rows;
    assert!(rows.iter().any(|r| r.contains("\"date\": \"d1\"")));
    let before = read_table(&table, None);
    let (code, out, err) = run_files(&module, &b, "u", &table, &part("region=eu"));
    assert_eq!(code, 2, "{out}\n{err}");
    assert!(err.contains("partitioned by [date]"), "{err}");
    assert_eq!(read_table(&table, None), before);
}

/// Finding of the second review: a partition's app transaction
/// (`idem:partition:<p>`) holds its owner's sequence number, which two
/// slices can share. The owner of a partition that slices with empty
/// outputs named in turn is the latest of them, not the first to set that
/// number: a third slice is refused, naming it.
#[test]
fn an_empty_partition_belongs_to_the_latest_slice_that_named_it() {
    let dir = tempfile::tempdir().unwrap();
    let module = common::guest("examples/daily_revenue");
    let (empty, full) = (
        dir.path().join("empty.parquet"),
        dir.path().join("full.parquet"),
    );
    day_file(dir.path(), "2026-10-01", 0, &empty);
    day_file(dir.path(), "2026-10-02", 1_000, &full);
    let table = dir.path().join("t");
    let part = |p: &'static str| ["--partition", p, "--mode", "overwrite-partition"];
    ok(run_files(&module, &empty, "a", &table, &part("date=d1")));
    // a moves on (its sequence number 2), b takes d1 with number 1.
    let out = ok(run_files(&module, &full, "a", &table, &part("date=d2")));
    assert!(field(&out, "result:").starts_with("committed"), "{out}");
    ok(run_files(&module, &empty, "b", &table, &part("date=d1")));
    assert!(
        !files_on_disk(&table)
            .iter()
            .any(|f| f.starts_with("date=d1")),
        "d1's outputs were empty"
    );
    let (code, out, err) = run_files(&module, &empty, "c", &table, &part("date=d1"));
    assert_eq!(code, 2, "{out}\n{err}");
    assert!(err.contains("owned by slice `b`"), "{err}");
}

/// A commit that landed but whose response was lost (a retried log PUT
/// that finds the entry it wrote) is reported as this run's commit, not as
/// another host's: the commit carries the process's own id.
#[test]
fn a_commit_whose_response_was_lost_is_reported_as_committed() {
    for mode in ["overwrite-partition", "append", "merge"] {
        let dir = tempfile::tempdir().unwrap();
        let module = common::guest("examples/dedup_events");
        let root = dir.path().join("orders");
        common::orders(&root, "2026-10-01", 1_000, 1);
        let table = dir.path().join("t");
        let mut extra = vec!["--mode", mode];
        if mode == "merge" {
            extra.extend(["--key", "event_id"]);
        }
        let args = day_args(&module, &root, "2026-10-01", &table, &extra);
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = ok(common::idem_env(
            &refs,
            &[("IDEM_FAULT_FAIL", "lost-commit-response")],
        ));
        assert_eq!(
            field(&out, "result:"),
            "committed version 1",
            "{mode}: {out}"
        );
        assert_eq!(
            read_table(&table, None).version,
            1,
            "{mode}: committed once"
        );
    }
    // A twin host's identical commit is still "another host committed it
    // first": two_hosts_at_the_log_write_at_once_one_commits_one_recovers.
}

/// Every data file under `table` (outside `_delta_log/` and `_idem/`),
/// relative to it.
fn files_on_disk(table: &Path) -> std::collections::BTreeSet<String> {
    fn walk(root: &Path, dir: &Path, out: &mut std::collections::BTreeSet<String>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            if name == "_delta_log" || name == "_idem" {
                continue;
            }
            if p.is_dir() {
                walk(root, &p, out);
            } else {
                out.insert(p.strip_prefix(root).unwrap().to_string_lossy().into_owned());
            }
        }
    }
    let mut out = std::collections::BTreeSet::new();
    walk(table, table, &mut out);
    out
}

/// The data files the table's current version names (PyPI `deltalake`).
fn files_in_log(table: &Path) -> std::collections::BTreeSet<String> {
    python(&format!(
        "import os\nfrom deltalake import DeltaTable\nroot = os.path.realpath({:?})\nfor f in DeltaTable(root).file_uris():\n    f = f[len('file://'):] if f.startswith('file://') else f\n    print(os.path.relpath(os.path.realpath(f), root))\n",
        s(table)
    ))
    .lines()
    .map(|l| l.to_string())
    .collect()
}

/// Start `idem ARGS` that waits at fault point `point` until a second
/// entry appears in `gate` ([`release`]); returns once it is there.
fn paused_at(args: &[String], point: &str, gate: &Path) -> std::process::Child {
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_idem"))
        .args(args)
        .env("IDEM_CACHE_DIR", common::test_cache())
        .env("IDEM_FAULT_BARRIER", format!("{point}:2:{}", s(gate)))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let t = std::time::Instant::now();
    while std::fs::read_dir(gate).map(|d| d.count()).unwrap_or(0) == 0 {
        assert!(t.elapsed().as_secs() < 120, "never reached {point}");
        assert!(child.try_wait().unwrap().is_none(), "ended before {point}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child
}

/// Let a run started by [`paused_at`] go on.
fn release(gate: &Path) {
    std::fs::write(gate.join("go"), b"").unwrap();
}

/// The output's data files are written once, while the transform runs:
/// paused at the commit's doorstep (`before-commit`, after execution), the
/// files are in the table's folder, invisible (the log names none of them),
/// and they are exactly the files the commit then adds. A run that fails
/// after writing output (a failed `--expect`, an output over its limit),
/// or that finds its output already committed (`--force`), leaves no file
/// behind, and readers see the table unchanged.
#[test]
fn output_files_are_written_once_while_the_run_executes_and_never_left_behind() {
    for mode in ["overwrite-partition", "append"] {
        let dir = tempfile::tempdir().unwrap();
        let module = common::guest("examples/clean_orders");
        let root = dir.path().join("orders");
        common::orders(&root, "2026-10-01", 40_000, 2);
        let table = dir.path().join("t");
        let m = ["--mode", mode];

        let gate = dir.path().join("gate");
        let args = day_args(&module, &root, "2026-10-01", &table, &m);
        let child = paused_at(&args, "before-commit", &gate);
        let ahead = files_on_disk(&table);
        assert!(
            ahead.iter().any(|f| f.ends_with(".parquet")),
            "{mode}: no data file written while the run executed: {ahead:?}"
        );
        assert!(
            !table.join("_delta_log").exists(),
            "{mode}: the table exists before the commit"
        );
        release(&gate);
        let o = child.wait_with_output().unwrap();
        assert!(
            o.status.success(),
            "{mode}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert_eq!(
            files_in_log(&table),
            ahead,
            "{mode}: the commit wrote other files"
        );
        assert_eq!(files_on_disk(&table), ahead, "{mode}");
        let committed = read_table(&table, None);

        // Fails after its whole output was written: a failed expectation.
        let (code, _, err) = run_day(
            &module,
            &root,
            "2026-10-01",
            &table,
            &[
                "--mode",
                mode,
                "--params",
                r#"{"min_amount": 500}"#,
                "--expect",
                "rows(1..10)",
            ],
        );
        assert_eq!(code, 1, "{mode}: {err}");
        // Fails midway: the output outgrows its limit.
        let (code, _, err) = run_day(
            &module,
            &root,
            "2026-10-01",
            &table,
            &[
                "--mode",
                mode,
                "--params",
                r#"{"min_amount": 0}"#,
                "--max-output-mb",
                "1",
            ],
        );
        assert_eq!(code, 3, "{mode}: {err}");
        assert!(err.contains("output"), "{mode}: {err}");
        // Fails inside the commit before its log write (a storage error
        // reading the table): the files written ahead are deleted.
        let args = day_args(
            &module,
            &root,
            "2026-10-01",
            &table,
            &["--mode", mode, "--params", r#"{"min_amount": 500}"#],
        );
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, _, err) = common::idem_env(&refs, &[("IDEM_FAULT_FAIL", "commit-read")]);
        assert_eq!(code, 4, "{mode}: {err}");
        assert!(err.contains("commit-read"), "{mode}: {err}");
        // Executes, and finds the same output committed.
        let out = ok(run_day(
            &module,
            &root,
            "2026-10-01",
            &table,
            &["--mode", mode, "--force"],
        ));
        assert!(
            field(&out, "result:").starts_with("unchanged"),
            "{mode}: {out}"
        );
        assert_eq!(files_on_disk(&table), ahead, "{mode}: files left behind");
        assert_eq!(read_table(&table, None), committed, "{mode}");
    }
}

/// A table another writer creates at the location while a run writes its
/// output ahead (into what was no table) is checked at the commit: files
/// written for a schema the table does not have are refused, named, and
/// deleted; the other writer's table is left as it made it.
#[test]
fn a_table_created_by_another_writer_during_a_run_must_fit_its_files() {
    let dir = tempfile::tempdir().unwrap();
    let module = common::guest("examples/clean_orders");
    let root = dir.path().join("orders");
    common::orders(&root, "2026-10-01", 5_000, 1);
    let table = dir.path().join("t");
    let gate = dir.path().join("gate");
    let args = day_args(&module, &root, "2026-10-01", &table, &[]);
    let child = paused_at(&args, "before-commit", &gate);
    let ahead = files_on_disk(&table);
    let written = ahead.iter().next().expect("a file written ahead").clone();
    // The other writer: the run's columns, one more, and the partition.
    let script = format!(
        r#"
import pyarrow as pa, pyarrow.parquet as pq
from deltalake import write_deltalake
schema = pq.read_schema({file:?})
schema = schema.append(pa.field("note", pa.string())).append(pa.field("date", pa.string()))
rows = {{f.name: [] for f in schema}}
write_deltalake({table:?}, pa.table(rows, schema=schema), partition_by=["date"])
"#,
        file = s(&table.join(&written)),
        table = s(&table),
    );
    python(&script);
    let theirs = read_table(&table, None);
    let theirs_files = files_in_log(&table);
    release(&gate);
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(
        o.status.code(),
        Some(4),
        "committed into a table of another schema, or not as a commit failure (exit 4)"
    );
    assert!(
        err.contains("schema changed while this run wrote its output") && err.contains("note"),
        "{err}"
    );
    assert_eq!(read_table(&table, None), theirs);
    assert_eq!(files_on_disk(&table), theirs_files, "files left behind");
}

/// Output larger than one data file (`IDEM_DATA_FILE_MB`, here 1 MiB): the
/// writer cuts it into several files, the commit adds them in output order
/// (`idem audit` re-reads the slice's files in their recorded order and
/// must get the manifest's output digest), and readers see exactly the
/// rows of a run that wrote one file. A bad size is refused by name.
#[test]
fn output_cut_into_many_data_files_commits_them_in_order() {
    for mode in ["overwrite-partition", "append"] {
        let dir = tempfile::tempdir().unwrap();
        let module = common::guest("examples/clean_orders");
        let root = dir.path().join("orders");
        common::orders(&root, "2026-10-01", 150_000, 1);
        let (table, one) = (dir.path().join("t"), dir.path().join("one"));
        let args = day_args(&module, &root, "2026-10-01", &table, &["--mode", mode]);
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, out, err) = common::idem_env(&refs, &[("IDEM_DATA_FILE_MB", "1")]);
        assert_eq!(code, 0, "{mode}: {out}\n{err}");
        ok(run_day(
            &module,
            &root,
            "2026-10-01",
            &one,
            &["--mode", mode],
        ));
        let (many, single) = (files_in_log(&table), files_in_log(&one));
        assert!(many.len() >= 3, "{mode}: {many:?}");
        assert_eq!(single.len(), 1, "{mode}: {single:?}");
        assert_eq!(
            read_table(&table, None).rows,
            read_table(&one, None).rows,
            "{mode}"
        );
        let (code, out, err) = common::idem(&["audit", &s(&table)]);
        assert_eq!(code, 0, "{mode}: {out}\n{err}");
        assert!(out.contains(" proven "), "{mode}: {out}");

        let args = day_args(
            &module,
            &root,
            "2026-10-01",
            &table,
            &["--mode", mode, "--force"],
        );
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, _, err2) = common::idem_env(&refs, &[("IDEM_DATA_FILE_MB", "lots")]);
        assert_eq!(code, 2, "{mode}: {err2}");
        assert!(err2.contains("IDEM_DATA_FILE_MB"), "{mode}: {err2}");
    }
}

/// Finding: with write access to `_idem/` only, a forged memo entry (a
/// manifest with the new run's spec and the old run's result, which the
/// run key does not cover) made `idem run` answer "memo" and never read a
/// new input file. A memo hit now needs the slice's current commit to name
/// that very manifest.
#[test]
fn a_forged_memo_entry_does_not_skip_new_input() {
    forged_memo_entry(false);
}

/// The same forgery, its copied commit also claiming to be the commit made
/// for its own version (`idem:at:<slice>` edited): still not the slice's
/// commit, which is the first to carry the slice's transaction.
#[test]
fn a_forged_commit_naming_its_own_version_is_not_the_slices() {
    forged_memo_entry(true);
}

fn forged_memo_entry(edit_at: bool) {
    let dir = tempfile::tempdir().unwrap();
    let module = common::guest("examples/daily_revenue");
    let root = dir.path().join("orders");
    common::orders(&root, "2026-10-01", 2_000, 1);
    let table = dir.path().join("t");
    let first = ok(run_day(&module, &root, "2026-10-01", &table, &[]));
    let old = manifest_file(&table, &first);
    // A new input file in the partition: a new run key. Run it for real to
    // get its manifest and memo entry, then take the commit back out of the
    // log (the attacker's table: new spec on disk, old output committed).
    common::orders(&dir.path().join("more"), "2026-10-01", 700, 1);
    std::fs::copy(
        dir.path().join("more/date=2026-10-01/part-00000.parquet"),
        root.join("date=2026-10-01/part-extra.parquet"),
    )
    .unwrap();
    let second = ok(run_day(&module, &root, "2026-10-01", &table, &[]));
    assert!(
        field(&second, "result:").starts_with("committed"),
        "{second}"
    );
    let new = manifest_file(&table, &second);
    let last = std::fs::read_dir(table.join("_delta_log"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .max()
        .unwrap();
    std::fs::remove_file(last).unwrap();
    // The forgery: the new manifest's spec and run key, the old result,
    // stored canonically under its own digest, and the memo entry of the
    // new run key pointed at it.
    let forged = python(&format!(
        r#"
import hashlib, json, os
old = json.load(open({old:?}))
new = json.load(open({new:?}))
new["predicate"]["result"] = old["predicate"]["result"]
new["subject"] = old["subject"]
body = json.dumps(new, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
digest = hashlib.sha256(body).hexdigest()
open(os.path.join({manifests:?}, digest + ".json"), "wb").write(body)
key = new["predicate"]["runKey"].split(":")[1]
open(os.path.join({runs:?}, key + ".json"), "w").write(json.dumps({{"manifest": "sha256:" + digest}}))
print(digest)
"#,
        old = s(&old),
        new = s(&new),
        manifests = s(&table.join("_idem/manifests")),
        runs = s(&table.join("_idem/runs")),
    ));
    assert_eq!(forged.trim().len(), 64, "{forged}");
    // And a raw commit by the attacker: a copy of the slice's commit (its
    // commitInfo and app transactions, nothing else) naming the forged
    // manifest. commitInfo is anyone's to write; only the first commit
    // carrying the slice's transaction is idem's.
    python(&format!(
        r#"
import glob, json, os
log = {log:?}
commits = sorted(glob.glob(os.path.join(log, "*.json")))
lines = [json.loads(l) for l in open(commits[-1])]
out = []
for a in lines:
    if "commitInfo" in a:
        a["commitInfo"]["idem.manifestDigest"] = "sha256:" + {digest:?}
        out.append(a)
    elif "txn" in a:
        if {edit_at} and a["txn"]["appId"].startswith("idem:at:"):
            a["txn"]["version"] = len(commits)
        out.append(a)
with open(os.path.join(log, "%020d.json" % len(commits)), "x") as f:
    for a in out:
        f.write(json.dumps(a) + "\n")
"#,
        log = s(&table.join("_delta_log")),
        digest = forged.trim(),
        edit_at = if edit_at { "True" } else { "False" },
    ));
    // The run reads the new file and commits its output.
    let out = ok(run_day(&module, &root, "2026-10-01", &table, &[]));
    let result = field(&out, "result:");
    assert!(
        result.starts_with("committed"),
        "memo taken from a forged entry:\n{out}"
    );
    assert_eq!(field(&out, "output:"), field(&second, "output:"), "{out}");
    let (code, out, err) = common::idem(&["audit", &s(&table)]);
    assert_eq!(code, 0, "{out}\n{err}");
}

/// Finding: a raw `add` of an untagged file under a partition no slice
/// owns passed `idem audit` ("all slices proven") while readers saw its
/// rows. Audit accounts for every live file.
#[test]
fn a_foreign_file_where_no_slice_owns_the_partition_fails_audit() {
    let dir = tempfile::tempdir().unwrap();
    let module = common::guest("examples/daily_revenue");
    let root = dir.path().join("orders");
    let table = dir.path().join("t");
    for d in ["2026-10-01", "2026-10-02"] {
        common::orders(&root, d, 1_000, 1);
        ok(run_day(&module, &root, d, &table, &[]));
    }
    let (code, out, _) = common::idem(&["audit", &s(&table)]);
    assert_eq!(code, 0, "{out}");
    python_writer(
        &table,
        r#"
import pyarrow as pa
from deltalake import write_deltalake
rows = t.to_pyarrow_table().slice(0, 1)
i = rows.schema.get_field_index("date")
rows = rows.set_column(i, rows.schema.field(i), pa.array(["2099-01-01"], rows.schema.field(i).type))
write_deltalake(t, rows, mode="append")
"#,
    );
    let (code, out, _) = common::idem(&["audit", &s(&table)]);
    assert_eq!(code, 1, "the foreign file passed audit:\n{out}");
    assert!(
        out.contains("date=2099-01-01/") && out.contains("(no slice)"),
        "{out}"
    );
    assert!(out.contains("belongs to no slice"), "{out}");
    // One slice's audit is about that slice only.
    let (code, out, _) = common::idem(&["audit", &s(&table), "--slice", "date=2026-10-01"]);
    assert_eq!(code, 0, "{out}");
    // Removed again, the table is proven again.
    python_writer(&table, "t.delete(\"\\\"date\\\" = '2099-01-01'\")");
    let (code, out, _) = common::idem(&["audit", &s(&table)]);
    assert_eq!(code, 0, "{out}");
}

/// Finding: a foreign metadata-only commit (renaming a column: no file
/// added or removed) left reruns memo hits and audit proving the table,
/// while every reader saw the renamed column null. Memo and audit now
/// check the table's schema is still the one idem committed with.
#[test]
fn a_foreign_metadata_only_commit_is_noticed_by_memo_and_audit() {
    let dir = tempfile::tempdir().unwrap();
    let module = common::guest("examples/daily_revenue");
    let root = dir.path().join("orders");
    let table = dir.path().join("t");
    common::orders(&root, "2026-10-01", 1_000, 1);
    ok(run_day(&module, &root, "2026-10-01", &table, &[]));
    let out = ok(run_day(&module, &root, "2026-10-01", &table, &[]));
    assert!(field(&out, "result:").contains("memo"), "{out}");
    // A raw commit: the latest metaData with `revenue` renamed.
    python(&format!(
        r#"
import glob, json, os
log = {log:?}
commits = sorted(glob.glob(os.path.join(log, "*.json")))
meta = None
for c in commits:
    for line in open(c):
        a = json.loads(line)
        if "metaData" in a:
            meta = a["metaData"]
schema = json.loads(meta["schemaString"])
for f in schema["fields"]:
    if f["name"] == "revenue":
        f["name"] = "revenue_total"
meta["schemaString"] = json.dumps(schema)
n = len(commits)
with open(os.path.join(log, "%020d.json" % n), "x") as out:
    out.write(json.dumps({{"commitInfo": {{"operation": "RENAME COLUMN", "timestamp": 1}}}}) + "\n")
    out.write(json.dumps({{"metaData": meta}}) + "\n")
"#,
        log = s(&table.join("_delta_log")),
    ));
    // What a reader sees now (PyPI deltalake): the renamed column, null.
    let seen = python(&format!(
        "import polars as pl\nt = pl.read_delta({:?})\nprint(t.height > 0 and t['revenue_total'].null_count() == t.height)",
        s(&table)
    ));
    assert_eq!(seen.trim(), "True", "{seen}");
    // (idem made the table keep its log ten years: the proofs read it.)
    let created =
        std::fs::read_to_string(table.join("_delta_log/00000000000000000000.json")).unwrap();
    assert!(
        created.contains(r#""delta.logRetentionDuration":"interval 3650 days""#),
        "{created}"
    );
    let (code, out, _) = common::idem(&["audit", &s(&table)]);
    assert_eq!(code, 1, "audit proved a renamed column:\n{out}");
    assert!(out.contains("changed the table's schema"), "{out}");
    let (code, out, err) = run_day(&module, &root, "2026-10-01", &table, &[]);
    assert!(
        !out.contains("memo"),
        "a memo hit on a renamed table:\n{out}"
    );
    // The output no longer fits the table: refused, naming the column.
    assert_eq!(code, 3, "{out}\n{err}");
    assert!(err.contains("revenue"), "{err}");
}

/// Other writers behind idem's back, end to end (the unit test of
/// `ownership::drift` had these only in memory): a foreign append into an
/// owned partition, and a foreign delete on a merge table. Audit fails
/// naming the slice; the next run recommits and says why; then all is
/// proven again.
#[test]
fn foreign_appends_and_merge_deletes_are_noticed_by_audit_and_the_next_run() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("orders");
    common::orders(&root, "2026-10-01", 2_000, 1);
    let cases: [(&str, Vec<&str>, &str); 2] = [
        (
            "examples/daily_revenue",
            vec![],
            r#"
import pyarrow as pa
from deltalake import write_deltalake
rows = t.to_pyarrow_table().slice(0, 1)
write_deltalake(t, rows, mode="append")
"#,
        ),
        (
            "examples/dedup_events",
            vec!["--mode", "merge", "--key", "event_id"],
            "t.delete(\"amount > 50\")",
        ),
    ];
    for (example, extra, foreign) in cases {
        let module = common::guest(example);
        let (table, clean) = (
            dir.path().join(format!("t-{}", extra.len())),
            dir.path().join(format!("c-{}", extra.len())),
        );
        ok(run_day(&module, &root, "2026-10-01", &table, &extra));
        ok(run_day(&module, &root, "2026-10-01", &clean, &extra));
        python_writer(&table, foreign);
        assert_ne!(
            read_table(&table, None).rows,
            read_table(&clean, None).rows,
            "{example}: the foreign write did nothing"
        );
        let (code, out, _) = common::idem(&["audit", &s(&table)]);
        assert_eq!(code, 1, "{example}: audit missed it:\n{out}");
        assert!(
            out.contains("date=2026-10-01") && out.contains("FAILED"),
            "{example}: {out}"
        );
        let out = ok(run_day(&module, &root, "2026-10-01", &table, &extra));
        let result = field(&out, "result:");
        assert!(
            result.starts_with("committed") && result.contains("recommitted"),
            "{example}: {out}"
        );
        assert_eq!(
            read_table(&table, None).rows,
            read_table(&clean, None).rows,
            "{example}"
        );
        let (code, out, _) = common::idem(&["audit", &s(&table)]);
        assert_eq!(code, 0, "{example}: {out}");
    }
}

/// Audit reads the rows back: one data file rewritten in place (same
/// path, same row count, one value changed) fails the slice's proof.
#[test]
fn audit_reads_the_rows_back_and_catches_a_file_rewritten_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let module = common::guest("examples/daily_revenue");
    let root = dir.path().join("orders");
    common::orders(&root, "2026-10-01", 2_000, 1);
    let table = dir.path().join("t");
    ok(run_day(&module, &root, "2026-10-01", &table, &[]));
    let file = files_on_disk(&table).into_iter().next().unwrap();
    python(&format!(
        r#"
import pyarrow as pa, pyarrow.parquet as pq, pyarrow.compute as pc
p = {path:?}
t = pq.read_table(p)
i = t.schema.get_field_index("orders")
col = t.column(i).to_pylist()
col[0] = col[0] + 1
t = t.set_column(i, t.schema.field(i), pa.array(col, t.schema.field(i).type))
pq.write_table(t, p)
"#,
        path = s(&table.join(&file)),
    ));
    let (code, out, _) = common::idem(&["audit", &s(&table)]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("date=2026-10-01") && out.contains("the table's rows for the slice digest to"),
        "{out}"
    );
}

/// Two slice ids racing for one partition, both at the log write at once
/// (a barrier proves it): exactly one commits, the other is refused naming
/// the owner, and the table holds the winner's rows only.
#[test]
fn two_slice_ids_racing_for_one_partition_one_commits_one_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let module = common::guest("examples/daily_revenue");
    let (a, b) = (dir.path().join("a.parquet"), dir.path().join("b.parquet"));
    day_file(dir.path(), "2026-10-01", 2_000, &a);
    day_file(dir.path(), "2026-10-02", 3_000, &b);
    let table = dir.path().join("t");
    let part = [
        "--partition",
        "date=2026-10-01",
        "--mode",
        "overwrite-partition",
    ];
    // Version 0 (the CREATE) first, from a third slice in another
    // partition, so both race on their slice commit.
    let c = dir.path().join("c.parquet");
    day_file(dir.path(), "2026-10-03", 500, &c);
    ok(run_files(
        &module,
        &c,
        "c",
        &table,
        &[
            "--partition",
            "date=2026-10-03",
            "--mode",
            "overwrite-partition",
        ],
    ));
    let barrier = dir.path().join("barrier");
    let spawn = |file: &Path, id: &str| {
        let mut args = vec![
            "run".to_string(),
            "--module".into(),
            s(&module),
            "--files".into(),
            s(file),
            "--slice-id".into(),
            id.into(),
            "--table".into(),
            s(&table),
        ];
        args.extend(part.iter().map(|p| p.to_string()));
        std::process::Command::new(env!("CARGO_BIN_EXE_idem"))
            .args(args)
            .env("IDEM_CACHE_DIR", common::test_cache())
            .env(
                "IDEM_FAULT_BARRIER",
                format!("before-log-write:2:{}", s(&barrier)),
            )
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (ca, cb) = (spawn(&a, "a"), spawn(&b, "b"));
    let outs: Vec<(Option<i32>, String, String)> = [ca, cb]
        .into_iter()
        .map(|c| {
            let o = c.wait_with_output().unwrap();
            (
                o.status.code(),
                String::from_utf8_lossy(&o.stdout).into_owned(),
                String::from_utf8_lossy(&o.stderr).into_owned(),
            )
        })
        .collect();
    assert_eq!(
        std::fs::read_dir(&barrier).unwrap().count(),
        2,
        "both must reach the log write"
    );
    let won: Vec<usize> = (0..2).filter(|i| outs[*i].0 == Some(0)).collect();
    assert_eq!(won.len(), 1, "{outs:?}");
    let (winner, loser) = (["a", "b"][won[0]], &outs[1 - won[0]]);
    assert_eq!(loser.0, Some(2), "{loser:?}");
    assert!(
        loser.2.contains(&format!("owned by slice `{winner}`")),
        "{}",
        loser.2
    );
    let clean = dir.path().join("clean");
    ok(run_files(
        &module,
        &c,
        "c",
        &clean,
        &[
            "--partition",
            "date=2026-10-03",
            "--mode",
            "overwrite-partition",
        ],
    ));
    ok(run_files(
        &module,
        if winner == "a" { &a } else { &b },
        winner,
        &clean,
        &part,
    ));
    assert_eq!(read_table(&table, None).rows, read_table(&clean, None).rows);
}

/// Whoever can write `_idem/` can leave a file of any size there: idem
/// does not read one whole past 256 MiB (here a sparse 300 MiB memo entry).
/// An unreadable memo entry is a miss: the run executes, finds its output
/// unchanged, and writes the entry again.
#[test]
fn an_oversized_sidecar_is_refused_before_it_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let module = common::guest("examples/daily_revenue");
    let root = dir.path().join("orders");
    common::orders(&root, "2026-10-01", 500, 1);
    let table = dir.path().join("t");
    let out = ok(run_day(&module, &root, "2026-10-01", &table, &[]));
    let key = field(&out, "run key:");
    let entry = table
        .join("_idem/runs")
        .join(format!("{}.json", key.trim_start_matches("sha256:")));
    std::fs::File::create(&entry)
        .unwrap()
        .set_len(300 << 20)
        .unwrap();
    let args = day_args(&module, &root, "2026-10-01", &table, &[]);
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let ran = common::idem_measured(&refs);
    assert_eq!(ran.code, 0, "{}\n{}", ran.out, ran.err);
    assert!(
        field(&ran.out, "result:").starts_with("unchanged"),
        "{}",
        ran.out
    );
    assert!(
        ran.peak_kib < 250 << 10,
        "read it whole: peak {} MiB",
        ran.peak_kib >> 10
    );
    assert!(
        std::fs::metadata(&entry).unwrap().len() < 4096,
        "the entry was not rewritten"
    );
    let out = ok(run_day(&module, &root, "2026-10-01", &table, &[]));
    assert!(field(&out, "result:").contains("memo"), "{out}");
}

/// A deletion vector on a slice's own file (another engine's DELETE in
/// place; here a raw commit, as delta-rs writes none): audit fails naming
/// the file, the next run recommits and says why, then all is proven.
#[test]
fn a_deletion_vector_on_an_owned_file_is_noticed_and_recommitted() {
    let dir = tempfile::tempdir().unwrap();
    let module = common::guest("examples/daily_revenue");
    let root = dir.path().join("orders");
    common::orders(&root, "2026-10-01", 1_000, 1);
    let table = dir.path().join("t");
    ok(run_day(&module, &root, "2026-10-01", &table, &[]));
    python(&format!(
        r#"
import glob, json, os
log = {log:?}
commits = sorted(glob.glob(os.path.join(log, "*.json")))
add = None
for c in commits:
    for line in open(c):
        a = json.loads(line)
        if "add" in a:
            add = a["add"]
remove = {{"path": add["path"], "deletionTimestamp": 1, "dataChange": True,
          "partitionValues": add["partitionValues"], "size": add["size"], "tags": add.get("tags")}}
marked = dict(add, deletionVector={{"storageType": "p", "pathOrInlineDv": "file:///nowhere/dv.bin",
                                    "offset": 1, "sizeInBytes": 10, "cardinality": 1}})
protocol = {{"minReaderVersion": 3, "minWriterVersion": 7,
            "readerFeatures": ["deletionVectors"], "writerFeatures": ["deletionVectors"]}}
with open(os.path.join(log, "%020d.json" % len(commits)), "x") as f:
    for a in [{{"commitInfo": {{"operation": "DELETE", "timestamp": 1}}}}, {{"protocol": protocol}},
              {{"remove": remove}}, {{"add": marked}}]:
        f.write(json.dumps(a) + "\n")
"#,
        log = s(&table.join("_delta_log")),
    ));
    let (code, out, _) = common::idem(&["audit", &s(&table)]);
    assert_eq!(code, 1, "audit missed the deletion vector:\n{out}");
    assert!(out.contains("has a deletion vector"), "{out}");
    let out = ok(run_day(&module, &root, "2026-10-01", &table, &[]));
    let result = field(&out, "result:");
    assert!(
        result.starts_with("committed") && result.contains("deletion vector"),
        "{out}"
    );
    let (code, out, _) = common::idem(&["audit", &s(&table)]);
    assert_eq!(code, 0, "{out}");
}
