//! Iceberg tables end to end: the real `idem` binary and real .wasm guests
//! commit to an Iceberg table in a SQLite catalog; every table is read back
//! by PyPI pyiceberg (tests/read_iceberg.py, its own SqlCatalog on the same
//! file) and compared row by row with a clean run, or with the same runs
//! committed to a Delta table.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{field, read_table, wait};
use serde_json::Value;

fn s(p: &Path) -> String {
    p.to_str().unwrap().to_string()
}

struct Fixture {
    dir: tempfile::TempDir,
}

impl Fixture {
    fn new(dates: &[&str], rows: u64) -> Self {
        let dir = tempfile::tempdir().unwrap();
        for d in dates {
            common::orders(&dir.path().join("orders"), d, rows, 2);
        }
        Fixture { dir }
    }
    fn data(&self) -> PathBuf {
        self.dir.path().join("orders")
    }
    fn catalog(&self) -> PathBuf {
        self.dir.path().join("lake/catalog.db")
    }
    fn warehouse(&self) -> PathBuf {
        self.dir.path().join("lake/warehouse")
    }
    /// `iceberg+sqlite://<dir>/lake/catalog.db#sales.<name>`.
    fn table(&self, name: &str) -> String {
        format!("iceberg+sqlite://{}#sales.{name}", s(&self.catalog()))
    }
    /// What pyiceberg reads in table `sales.<name>`.
    fn read(&self, name: &str) -> Value {
        self.read_planning(name, "")
    }
    /// The same, with how many data files a scan filtered by `filter`
    /// plans (`planned`).
    fn read_planning(&self, name: &str, filter: &str) -> Value {
        self.read_with(name, &[("IDEM_PLAN_FILTER", filter)])
    }
    /// What pyiceberg reads on branch `branch` of `sales.<name>`.
    fn read_branch(&self, name: &str, branch: &str) -> Value {
        self.read_with(name, &[("IDEM_READ_REF", branch)])
    }
    fn read_with(&self, name: &str, env: &[(&str, &str)]) -> Value {
        let out = Command::new(common::python())
            .envs(env.iter().copied())
            .arg(common::root().join("tests/read_iceberg.py"))
            .arg(self.catalog())
            .arg(self.warehouse())
            .arg(format!("sales.{name}"))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "pyiceberg could not read sales.{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }
}

/// `dedup_events` (which passes every column through) over table `input`
/// at `version`, into `target`: a later read of a table.
fn read_into(input: &str, version: &str, target: &str, extra: &[&str]) -> String {
    let dedup = s(&common::guest("examples/dedup_events"));
    let mut args = vec!["run", "--module", &dedup, "--input", input];
    args.extend(["--table-version", version, "--table", target]);
    args.extend(extra);
    let (code, out, err) = common::idem(&args);
    assert_eq!(code, 0, "{out}{err}");
    out
}

fn rows(v: &Value) -> Vec<String> {
    v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap().to_string())
        .collect()
}

fn version(v: &Value) -> i64 {
    v["version"].as_i64().unwrap()
}

/// `idem run` of `module` over partition `date` into `table`.
fn run(
    fx: &Fixture,
    module: &Path,
    date: &str,
    table: &str,
    extra: &[&str],
) -> (i32, String, String) {
    let mut args = vec![
        "run".to_string(),
        "--module".into(),
        s(module),
        "--input".into(),
        s(&fx.data()),
        "--partition".into(),
        format!("date={date}"),
        "--table".into(),
        table.into(),
        "--logical-date".into(),
        date.into(),
        "--batch-rows".into(),
        "1000".into(),
    ];
    args.extend(extra.iter().map(|a| a.to_string()));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    common::idem(&refs)
}

fn ok(r: (i32, String, String)) -> String {
    assert_eq!(r.0, 0, "idem run failed:\n{}\n{}", r.1, r.2);
    r.1
}

#[test]
fn runs_commit_one_snapshot_per_new_output_and_match_delta_row_for_row() {
    let fx = Fixture::new(&["2026-10-01", "2026-10-02"], 4_000);
    let module = common::guest("examples/daily_revenue");
    let ice = fx.table("revenue");
    let delta = fx.dir.path().join("delta_revenue");
    for d in ["2026-10-01", "2026-10-02"] {
        let out = ok(run(&fx, &module, d, &ice, &[]));
        assert!(
            field(&out, "result:").starts_with("committed version"),
            "{out}"
        );
        ok(run(&fx, &module, d, &s(&delta), &[]));
    }
    let first = fx.read("revenue");
    assert_eq!(version(&first), 2);
    // The same runs into Delta: the same rows, read by another reader.
    assert_eq!(rows(&first), read_table(&delta, None).rows);
    assert!(!rows(&first).is_empty());
    // The table is partitioned by the slice's column, identity.
    assert_eq!(first["partition"].as_array().unwrap().len(), 1, "{first}");
    assert!(
        first["partition"][0].as_str().unwrap().contains("date"),
        "{first}"
    );
    // Each snapshot names its slice, run and digests.
    let snaps = first["snapshots"].as_array().unwrap();
    assert_eq!(snaps.len(), 2);
    for (snap, d) in snaps.iter().zip(["2026-10-01", "2026-10-02"]) {
        assert_eq!(
            snap["idem.slice"],
            Value::from(format!("date={d}")),
            "{snap}"
        );
        assert_eq!(snap["idem.seq"], "1");
        for k in ["idem.runKey", "idem.manifestDigest", "idem.outputDigest"] {
            assert!(
                snap[k].as_str().unwrap().starts_with("sha256:"),
                "{k}: {snap}"
            );
        }
    }

    // A rerun commits nothing (the memo, and the commit's own check).
    let out = ok(run(&fx, &module, "2026-10-01", &ice, &[]));
    assert!(
        field(&out, "result:").starts_with("unchanged since version 1"),
        "{out}"
    );
    let out = ok(run(&fx, &module, "2026-10-01", &ice, &["--force"]));
    assert!(
        field(&out, "result:").starts_with("unchanged since version 1"),
        "{out}"
    );
    assert_eq!(fx.read("revenue")["snapshots"], first["snapshots"]);

    // A corrected input file recommits exactly that slice, as an overwrite.
    let f = fx.data().join("date=2026-10-01/part-00001.parquet");
    let mut w = parquet::arrow::ArrowWriter::try_new(
        std::fs::File::create(&f).unwrap(),
        idem::sample::orders_schema(),
        None,
    )
    .unwrap();
    w.write(&idem::sample::orders_batch(42, 0, 1_500)).unwrap();
    w.close().unwrap();
    let out = ok(run(&fx, &module, "2026-10-01", &ice, &[]));
    assert_eq!(field(&out, "result:"), "committed version 3");
    let out = ok(run(&fx, &module, "2026-10-02", &ice, &[]));
    assert!(
        field(&out, "result:").starts_with("unchanged since version 2"),
        "{out}"
    );
    ok(run(&fx, &module, "2026-10-01", &s(&delta), &[]));
    let after = fx.read("revenue");
    assert_eq!(version(&after), 3);
    assert_eq!(rows(&after), read_table(&delta, None).rows);
    assert_ne!(rows(&after), rows(&first));
    let last = after["snapshots"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["operation"], "overwrite", "{last}");
    assert_eq!(last["idem.slice"], "date=2026-10-01");
    assert_eq!(last["idem.seq"], "2");
    assert_eq!(
        last["idem.outputDigest"].as_str().unwrap(),
        field(&out_digest_line(&fx, &module, &ice), "output:")
            .split(' ')
            .next()
            .unwrap()
    );
}

/// The output line of a memo rerun of 2026-10-01 (its digest is the
/// committed one).
fn out_digest_line(fx: &Fixture, module: &Path, table: &str) -> String {
    ok(run(fx, module, "2026-10-01", table, &[]))
}

fn three_times_equals_once(example: &str, extra: &[&str]) {
    let fx = Fixture::new(&["2026-10-01", "2026-10-02"], 3_000);
    let module = common::guest(example);
    let (thrice, once) = (fx.table("thrice"), fx.table("once"));
    for _ in 0..3 {
        for d in ["2026-10-01", "2026-10-02"] {
            ok(run(&fx, &module, d, &thrice, extra));
        }
    }
    for d in ["2026-10-01", "2026-10-02"] {
        ok(run(&fx, &module, d, &once, extra));
    }
    let (a, b) = (fx.read("thrice"), fx.read("once"));
    assert_eq!(version(&a), 2, "{example} {extra:?}: reruns committed");
    assert!(!rows(&a).is_empty());
    assert_eq!(rows(&a), rows(&b), "{example} {extra:?}: rows differ");
}

#[test]
fn overwrite_partition_and_append_three_runs_equal_one() {
    three_times_equals_once("examples/daily_revenue", &[]);
    three_times_equals_once(
        "examples/clean_orders",
        &["--mode", "append", "--params", r#"{"min_amount": 100}"#],
    );
}

#[test]
fn an_append_slice_replaces_only_its_own_rows() {
    let fx = Fixture::new(&["2026-10-01", "2026-10-02"], 3_000);
    let module = common::guest("examples/clean_orders");
    let ice = fx.table("orders");
    let delta = fx.dir.path().join("delta_orders");
    let lo = ["--mode", "append", "--params", r#"{"min_amount": 100}"#];
    let hi = ["--mode", "append", "--params", r#"{"min_amount": 700}"#];
    let none = ["--mode", "append", "--params", r#"{"min_amount": 1e12}"#];
    for t in [ice.clone(), s(&delta)] {
        ok(run(&fx, &module, "2026-10-01", &t, &lo));
        ok(run(&fx, &module, "2026-10-02", &t, &lo));
        // New parameters for one slice: its rows are replaced, not added to.
        let out = ok(run(&fx, &module, "2026-10-01", &t, &hi));
        assert_eq!(field(&out, "result:"), "committed version 3");
    }
    let got = fx.read("orders");
    assert_eq!(rows(&got), read_table(&delta, None).rows);
    let last = got["snapshots"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["operation"], "overwrite", "{last}");
    // Data files carry column bounds: a reader skips files by value.
    let nothing = fx.read_planning("orders", "amount > 1000000000.0");
    assert_eq!(nothing["planned"], 0, "files planned that hold no such row");
    let hi_only = fx.read_planning("orders", "amount < 650.0");
    assert_eq!(
        hi_only["planned"], 1,
        "day 1 (amounts >= 700) was not skipped"
    );
    let all = fx.read_planning("orders", "amount > 0.0");
    assert_eq!(all["planned"], 2);
    // An empty output commits too, and empties the slice (the other
    // slice's rows stay).
    for t in [ice.clone(), s(&delta)] {
        let out = ok(run(&fx, &module, "2026-10-02", &t, &none));
        assert_eq!(field(&out, "result:"), "committed version 4", "{out}");
        let out = ok(run(&fx, &module, "2026-10-02", &t, &none));
        assert!(field(&out, "result:").contains("version 4"), "{out}");
    }
    let emptied = fx.read("orders");
    assert_eq!(version(&emptied), 4);
    assert!(!rows(&emptied).is_empty() && rows(&emptied).len() < rows(&got).len());
    assert_eq!(rows(&emptied), read_table(&delta, None).rows);
}

fn spawn_run(
    fx: &Fixture,
    module: &Path,
    table: &str,
    extra: &[&str],
    env: &[(&str, &str)],
) -> std::process::Child {
    spawn_day(fx, module, "2026-10-01", table, extra, env)
}

/// `idem run` of date `day` started, not awaited.
fn spawn_day(
    fx: &Fixture,
    module: &Path,
    day: &str,
    table: &str,
    extra: &[&str],
    env: &[(&str, &str)],
) -> std::process::Child {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_idem"));
    cmd.args(["run", "--module"])
        .arg(module)
        .arg("--input")
        .arg(fx.data());
    cmd.args([
        "--partition",
        &format!("date={day}"),
        "--logical-date",
        day,
        "--batch-rows",
        "1000",
        "--table",
        table,
    ]);
    cmd.args(extra).env("IDEM_CACHE_DIR", common::test_cache());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn two_hosts_committing_the_same_slice_at_once_commit_once() {
    for mode in ["append", "overwrite-partition"] {
        let fx = Fixture::new(&["2026-10-01"], 3_000);
        let module = common::guest("examples/clean_orders");
        let table = fx.table("t");
        let first = ["--mode", mode, "--params", r#"{"min_amount": 900}"#];
        let second = ["--mode", mode, "--params", r#"{"min_amount": 100}"#];
        // Both race to create the table with the slice's first output, then
        // both race to replace it with a new output (the same snapshot as
        // base, manifests rewritten with the old files deleted).
        for (args, want) in [(first, 1), (second, 2)] {
            // Both at the catalog swap at once (a barrier, not a pause).
            let gate = tempfile::tempdir().unwrap();
            let barrier = format!("before-log-write:2:{}", gate.path().display());
            let hold = [("IDEM_FAULT_BARRIER", barrier.as_str())];
            let a = spawn_run(&fx, &module, &table, &args, &hold);
            let b = spawn_run(&fx, &module, &table, &args, &hold);
            let (ra, rb) = (wait(a), wait(b));
            assert_eq!(
                std::fs::read_dir(gate.path()).unwrap().count(),
                2,
                "{mode}: both must reach the swap\n[a: exit {}] {}\n[b: exit {}] {}",
                ra.0,
                ra.2,
                rb.0,
                rb.2
            );
            assert_eq!(ra.0, 0, "{mode}: {}", ra.2);
            assert_eq!(rb.0, 0, "{mode}: {}", rb.2);
            let mut results = vec![field(&ra.1, "result:"), field(&rb.1, "result:")];
            results.sort();
            assert_eq!(
                results[0],
                format!("committed version {want}"),
                "{mode}: {results:?}"
            );
            assert!(
                results[1].starts_with(&format!("unchanged since version {want}")),
                "{mode}: {results:?}"
            );
        }
        let clean = fx.table("clean");
        ok(run(&fx, &module, "2026-10-01", &clean, &first));
        ok(run(&fx, &module, "2026-10-01", &clean, &second));
        let (got, want) = (fx.read("t"), fx.read("clean"));
        assert_eq!(version(&got), 2, "{mode}");
        assert_eq!(rows(&got), rows(&want), "{mode}: duplicate or missing rows");
        assert_eq!(
            got["snapshots"][1]["operation"], "overwrite",
            "{mode}: {got}"
        );
        // The losers' data files were deleted: only the winners' remain
        // (the first output's files stay, named by the first snapshot).
        let files = walk(&fx.warehouse().join("sales.db/t/data"));
        let named: usize = got["snapshots"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["idem.files"].as_str().unwrap().parse::<usize>().unwrap())
            .sum();
        assert_eq!(files.len(), named, "{mode}: {files:?}");
    }
}

use common::files_below as walk;

#[test]
fn a_kill_before_the_catalog_swap_leaves_the_table_as_it_was() {
    let fx = Fixture::new(&["2026-10-01"], 20_000);
    let module = common::guest("examples/clean_orders");
    let table = fx.table("t");
    let first = ["--mode", "append", "--params", r#"{"min_amount": 900}"#];
    // A first run killed before its catalog INSERT leaves no table (the
    // table is created by its first snapshot's commit), and the next run
    // is not stopped by what it left in the folder.
    let meta = fx.warehouse().join("sales.db/t/metadata");
    let count = || {
        walk(&meta)
            .iter()
            .filter(|p| s(p).ends_with(".metadata.json"))
            .count()
    };
    let child = spawn_run(
        &fx,
        &module,
        &table,
        &first,
        &[("IDEM_FAULT_SLEEP_MS", "before-log-write:30000")],
    );
    let t = Instant::now();
    while count() == 0 {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "the first run never reached the commit"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut child = child;
    child.kill().unwrap();
    child.wait().unwrap();
    let (code, _, err) = common::idem(&["log", &table]);
    assert_ne!(code, 0, "a killed first run left a table: {err}");
    ok(run(&fx, &module, "2026-10-01", &table, &first));
    let before = fx.read("t");
    assert_eq!(version(&before), 1);

    // Killed with data files, manifests and the next metadata file
    // written, before the catalog points at it.
    let child = spawn_run(
        &fx,
        &module,
        &table,
        &["--mode", "append"],
        &[("IDEM_FAULT_SLEEP_MS", "before-log-write:30000")],
    );
    let n0 = count();
    let t = Instant::now();
    while count() == n0 {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "the run never reached the swap"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut child = child;
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(fx.read("t"), before, "a killed run changed the table");
    // Killed at many points of a run: always before or after, never between.
    for delay_ms in [150u64, 300, 450, 600, 800, 1000, 1300] {
        let mut child = spawn_run(&fx, &module, &table, &["--mode", "append"], &[]);
        std::thread::sleep(Duration::from_millis(delay_ms));
        let _ = child.kill();
        let _ = child.wait();
        let now = fx.read("t");
        assert!(
            version(&now) == 1 || version(&now) == 2,
            "version {} after a kill",
            version(&now)
        );
        if version(&now) == 1 {
            assert_eq!(rows(&now), rows(&before));
        }
    }
    let out = ok(run(
        &fx,
        &module,
        "2026-10-01",
        &table,
        &["--mode", "append"],
    ));
    assert!(field(&out, "result:").contains("version 2"), "{out}");
    ok(run(&fx, &module, "2026-10-01", &fx.table("clean"), &first));
    ok(run(
        &fx,
        &module,
        "2026-10-01",
        &fx.table("clean"),
        &["--mode", "append"],
    ));
    assert_eq!(rows(&fx.read("t")), rows(&fx.read("clean")));
}

#[test]
fn merge_upserts_on_the_key_like_delta_and_slices_own_their_keys() {
    let fx = Fixture::new(&["2026-10-01", "2026-10-02"], 2_000);
    let module = common::guest("examples/dedup_events");
    let ice = fx.table("events");
    let delta = fx.dir.path().join("delta_events");
    let merge = ["--mode", "merge", "--key", "event_id"];
    for t in [ice.clone(), s(&delta)] {
        for d in ["2026-10-01", "2026-10-02"] {
            ok(run(&fx, &module, d, &t, &merge));
        }
    }
    let before = fx.read("events");
    assert_eq!(rows(&before), read_table(&delta, None).rows);
    assert!(
        rows(&before)[0].contains("\"_idem_slice\": \"date="),
        "{}",
        rows(&before)[0]
    );
    // Day 1's events re-delivered with corrected amounts, half of them
    // only: updates (not new rows), and the vanished keys deleted.
    let f = fx.data().join("date=2026-10-01/part-00000.parquet");
    let b = idem::sample::orders_batch(idem::sample::seed_of("2026-10-01"), 0, 1_000);
    let amount = arrow::array::Float64Array::from(vec![Some(1.0); 1_000]);
    let mut cols = b.columns().to_vec();
    cols[3] = std::sync::Arc::new(amount);
    let b = arrow::array::RecordBatch::try_new(b.schema(), cols).unwrap();
    let mut w =
        parquet::arrow::ArrowWriter::try_new(std::fs::File::create(&f).unwrap(), b.schema(), None)
            .unwrap();
    w.write(&b).unwrap();
    w.close().unwrap();
    std::fs::remove_file(fx.data().join("date=2026-10-01/part-00001.parquet")).unwrap();
    for t in [ice.clone(), s(&delta)] {
        let out = ok(run(&fx, &module, "2026-10-01", &t, &merge));
        assert_eq!(field(&out, "result:"), "committed version 3", "{out}");
        let out = ok(run(&fx, &module, "2026-10-01", &t, &merge));
        assert!(field(&out, "result:").contains("version 3"), "{out}");
    }
    let after = fx.read("events");
    assert_eq!(
        rows(&after),
        read_table(&delta, None).rows,
        "Iceberg and Delta merged differently"
    );
    assert!(
        rows(&after).len() < rows(&before).len(),
        "vanished keys stayed"
    );
    assert!(
        rows(&after)
            .iter()
            .filter(|r| r.contains("\"amount\": 1.0,"))
            .count()
            > 500
    );
    let last = after["snapshots"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["operation"], "overwrite", "{last}");
    // Audit: the chain of the merge slices (rows are shared by key).
    let (code, audit, err) = common::idem(&["audit", &ice]);
    assert_eq!(code, 0, "{audit}{err}");
    assert_eq!(audit.matches("chain-proven").count(), 2, "{audit}");
    // Another slice with day 2's keys is refused, and changes nothing.
    let copy = fx.data().join("date=2026-10-09");
    std::fs::create_dir_all(&copy).unwrap();
    for e in std::fs::read_dir(fx.data().join("date=2026-10-02")).unwrap() {
        let e = e.unwrap().path();
        std::fs::copy(&e, copy.join(e.file_name().unwrap())).unwrap();
    }
    let (code, out, err) = run(&fx, &module, "2026-10-09", &ice, &merge);
    assert_eq!(code, 2, "{out}\n{err}");
    assert!(err.contains("belongs to slice `date=2026-10-02`"), "{err}");
    assert_eq!(fx.read("events"), after);
    // Another writer's snapshot: the merge slices are recommitted, and
    // the table again holds exactly what Delta holds.
    foreign_delete(&fx, "events", "amount > 900");
    assert_ne!(rows(&fx.read("events")), rows(&after));
    for d in ["2026-10-01", "2026-10-02"] {
        let out = ok(run(&fx, &module, d, &ice, &merge));
        assert!(field(&out, "result:").contains("recommitted"), "{out}");
    }
    assert_eq!(rows(&fx.read("events")), read_table(&delta, None).rows);
}

#[test]
fn a_lost_catalog_response_is_reported_as_committed_and_loses_nothing() {
    for mode in ["overwrite-partition", "append", "merge"] {
        let fx = Fixture::new(&["2026-10-01"], 1_000);
        let module = common::guest("examples/dedup_events");
        let mut extra = vec!["--mode", mode];
        if mode == "merge" {
            extra.extend(["--key", "event_id"]);
        }
        // The swap lands, its outcome is "lost": twice (a table's first
        // snapshot, then a second output replacing it).
        let lost = [("IDEM_FAULT_FAIL", "lost-commit-response")];
        for (want, date_rows) in [(1, None), (2, Some(600))] {
            if let Some(n) = date_rows {
                let f = fx.data().join("date=2026-10-01/part-00000.parquet");
                let b = idem::sample::orders_batch(idem::sample::seed_of("2026-10-01"), 0, n);
                let mut w = parquet::arrow::ArrowWriter::try_new(
                    std::fs::File::create(&f).unwrap(),
                    b.schema(),
                    None,
                )
                .unwrap();
                w.write(&b).unwrap();
                w.close().unwrap();
                std::fs::remove_file(fx.data().join("date=2026-10-01/part-00001.parquet")).ok();
            }
            let args = common::day_args(
                s(&module).as_str(),
                s(&fx.data()).as_str(),
                "2026-10-01",
                &fx.table("t"),
                &extra,
            );
            let refs: Vec<&str> = args.iter().map(String::as_str).collect();
            let out = ok(common::idem_env(&refs, &lost));
            assert_eq!(
                field(&out, "result:"),
                format!("committed version {want}"),
                "{mode}: {out}"
            );
        }
        ok(run(&fx, &module, "2026-10-01", &fx.table("clean"), &extra));
        let (got, want) = (fx.read("t"), fx.read("clean"));
        assert_eq!(version(&got), 2, "{mode}: committed once per output");
        assert_eq!(rows(&got), rows(&want), "{mode}");
        // Every file the current snapshot names is there (an audit reads
        // them all).
        let (code, audit, err) = common::idem(&["audit", &fx.table("t")]);
        assert_eq!(code, 0, "{mode}: {audit}{err}");
    }
}

#[test]
fn merges_racing_and_merges_across_many_files_match_delta() {
    let fx = Fixture::new(&["2026-10-01", "2026-10-02"], 120_000);
    let module = common::guest("examples/dedup_events");
    let ice = fx.table("events");
    let delta = fx.dir.path().join("delta_events");
    let merge = ["--mode", "merge", "--key", "event_id"];
    // Files cut at 1 MiB: a merge rewrites some files, keeps others.
    let small = [("IDEM_DATA_FILE_MB", "1")];
    let go = |t: &str, d: &str| {
        let args = common::day_args(s(&module).as_str(), s(&fx.data()).as_str(), d, t, &merge);
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        ok(common::idem_env(&refs, &small))
    };
    // Two hosts merging two slices at once, at the catalog swap together (a
    // barrier, not a pause), then two merging the same one.
    let gates = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let spawn = |d: &str, gate: &Path| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_idem"));
        cmd.args(common::day_args(
            s(&module).as_str(),
            s(&fx.data()).as_str(),
            d,
            &ice,
            &merge,
        ))
        .env("IDEM_CACHE_DIR", common::test_cache())
        .env("IDEM_DATA_FILE_MB", "1")
        .env(
            "IDEM_FAULT_BARRIER",
            format!("before-log-write:2:{}", gate.display()),
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
        cmd.spawn().unwrap()
    };
    let arrived = |gate: &tempfile::TempDir| std::fs::read_dir(gate.path()).unwrap().count();
    let (a, b) = (
        spawn("2026-10-01", gates[0].path()),
        spawn("2026-10-02", gates[0].path()),
    );
    let (a, b) = (wait(a), wait(b));
    assert_eq!(arrived(&gates[0]), 2, "both must reach the swap");
    assert_eq!((a.0, b.0), (0, 0), "{}\n{}", a.2, b.2);
    let mut results = vec![field(&a.1, "result:"), field(&b.1, "result:")];
    results.sort();
    assert_eq!(results, ["committed version 1", "committed version 2"]);
    // The same slice again, from two hosts: both find it already run (no
    // swap to race at: the barrier is never reached).
    let (a, b) = (
        spawn("2026-10-01", gates[1].path()),
        spawn("2026-10-01", gates[1].path()),
    );
    let (a, b) = (wait(a), wait(b));
    assert_eq!(arrived(&gates[1]), 0);
    assert_eq!((a.0, b.0), (0, 0), "{}\n{}", a.2, b.2);
    for r in [&a, &b] {
        assert!(field(&r.1, "result:").starts_with("unchanged"), "{}", r.1);
    }
    go(&s(&delta), "2026-10-01");
    go(&s(&delta), "2026-10-02");
    assert_eq!(rows(&fx.read("events")), read_table(&delta, None).rows);
    let n = walk(&fx.warehouse().join("sales.db/events/data")).len();
    assert!(n > 4, "{n} data files");
    // Day 1 corrected: part of its files rewritten, day 2's kept.
    let f = fx.data().join("date=2026-10-01/part-00000.parquet");
    let b = idem::sample::orders_batch(idem::sample::seed_of("2026-10-01"), 0, 5_000);
    let mut w =
        parquet::arrow::ArrowWriter::try_new(std::fs::File::create(&f).unwrap(), b.schema(), None)
            .unwrap();
    w.write(&b).unwrap();
    w.close().unwrap();
    for t in [ice.clone(), s(&delta)] {
        assert_eq!(
            field(&go(&t, "2026-10-01"), "result:"),
            "committed version 3"
        );
    }
    assert_eq!(rows(&fx.read("events")), read_table(&delta, None).rows);
}

#[test]
fn a_folder_holding_another_catalogs_table_is_not_taken_over() {
    let fx = Fixture::new(&["2026-10-01"], 500);
    let module = common::guest("examples/daily_revenue");
    let other = format!(
        "iceberg+sqlite://{}?catalog=other#sales.t",
        s(&fx.catalog())
    );
    ok(run(&fx, &module, "2026-10-01", &other, &[]));
    let (code, _, err) = run(&fx, &module, "2026-10-01", &fx.table("t"), &[]);
    assert_ne!(code, 0);
    assert!(
        err.contains("already holds another table's Iceberg metadata"),
        "{err}"
    );
    assert!(err.contains("?catalog=NAME"), "{err}");
}

#[test]
fn merge_three_runs_equal_one() {
    three_times_equals_once(
        "examples/dedup_events",
        &["--mode", "merge", "--key", "event_id"],
    );
}

#[test]
fn bad_locations_are_clear_errors() {
    let fx = Fixture::new(&["2026-10-01"], 500);
    let module = common::guest("examples/daily_revenue");
    let bad = format!("iceberg+sqlite://{}", s(&fx.catalog()));
    let (code, _, err) = run(&fx, &module, "2026-10-01", &bad, &[]);
    assert_ne!(code, 0);
    assert!(err.contains("#NAMESPACE.TABLE"), "{err}");
}

/// PyIceberg deletes the rows `filter` selects from table `sales.<name>`.
fn foreign_delete(fx: &Fixture, name: &str, filter: &str) {
    foreign(fx, name, &["delete", filter]);
}

/// Another writer (PyIceberg) does `op` on table `sales.<name>`.
fn foreign(fx: &Fixture, name: &str, op: &[&str]) {
    let w = Command::new(common::python())
        .arg(common::root().join("tests/write_iceberg.py"))
        .arg(fx.catalog())
        .arg(fx.warehouse())
        .arg(format!("sales.{name}"))
        .args(op)
        .output()
        .unwrap();
    assert!(w.status.success(), "{}", String::from_utf8_lossy(&w.stderr));
}

/// A table another engine created with `date DATE`, partitioned by it (as
/// Spark's `CREATE TABLE ... PARTITIONED BY (date)`): the slice's date
/// lands as a date in the data files and as a date literal in the
/// manifests, so PyIceberg prunes by it; a rerun is a memo hit, a forced
/// one `unchanged`, audit proves the slices, and a read of one date
/// selects its files.
#[test]
fn an_iceberg_table_that_declares_its_date_partition_a_date_gets_dates() {
    let fx = Fixture::new(&["2026-10-01", "2026-10-02"], 800);
    let module = common::guest("examples/clean_orders");
    std::fs::create_dir_all(fx.warehouse()).unwrap();
    foreign(&fx, "typed", &["create-date-partitioned"]);
    let table = fx.table("typed");
    for day in ["2026-10-01", "2026-10-02"] {
        let out = ok(run(&fx, &module, day, &table, &[]));
        assert!(field(&out, "result:").starts_with("committed"), "{out}");
    }
    let probe = r#"
import sys, json
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.expressions import EqualTo
c = SqlCatalog("idem", uri=f"sqlite:///{sys.argv[1]}", warehouse=f"file://{sys.argv[2]}")
t = c.load_table("sales.typed")
day = t.scan(row_filter=EqualTo("date", "2026-10-01"))
print(json.dumps({
    "type": str(t.schema().find_field("date").field_type),
    "partitions": sorted({str(task.file.partition[0]) for task in t.scan().plan_files()}),
    "files": len(list(t.scan().plan_files())),
    "day_files": len(list(day.plan_files())),
    "day_rows": day.to_arrow().num_rows,
    "rows": t.scan().to_arrow().num_rows,
}))
"#;
    let (catalog, warehouse) = (fx.catalog(), fx.warehouse());
    let out = common::python_stdout(probe, &[catalog.as_os_str(), warehouse.as_os_str()]);
    let got: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(got["type"], "date", "{got}");
    // A date literal is days since 1970: 2026-10-01 is 20727.
    assert_eq!(
        got["partitions"],
        serde_json::json!(["20727", "20728"]),
        "{got}"
    );
    let (files, day_files) = (
        got["files"].as_i64().unwrap(),
        got["day_files"].as_i64().unwrap(),
    );
    assert!(day_files >= 1 && day_files < files, "{got}");
    let (all, day_rows) = (
        got["rows"].as_i64().unwrap(),
        got["day_rows"].as_i64().unwrap(),
    );
    assert!(day_rows > 0 && day_rows < all, "{got}");
    // Rerun: a memo hit; forced: unchanged; audit proves both slices.
    let out = ok(run(&fx, &module, "2026-10-01", &table, &[]));
    assert!(field(&out, "result:").contains("memo"), "{out}");
    let out = ok(run(&fx, &module, "2026-10-01", &table, &["--force"]));
    assert!(field(&out, "result:").starts_with("unchanged"), "{out}");
    let (code, audit, err) = common::idem(&["audit", &table]);
    assert_eq!(code, 0, "{audit}{err}");
    // Read back as an input, one date: its files only, the date a date.
    let copy = fx.table("copy");
    let day = ["--partition", "date=2026-10-01", "--mode", "append"];
    read_into(&table, "2", &copy, &day);
    let copied = rows(&fx.read("copy"));
    assert!(!copied.is_empty() && copied.len() as i64 <= day_rows);
    assert!(
        copied.iter().all(|r| r.contains(r#""date": "2026-10-01""#)),
        "{}",
        copied[0]
    );
    // An output that carries the partition column itself, as text (a
    // table's slice read with its `date`), published through
    // write-audit-publish into a second such table: cast to the date,
    // and the publish records idem's mode, so audit proves it.
    let delta = s(&fx.dir.path().join("delta_clean"));
    ok(run(&fx, &module, "2026-10-01", &delta, &[]));
    foreign(&fx, "typed2", &["create-date-partitioned"]);
    let typed2 = fx.table("typed2");
    read_into(
        &delta,
        "1",
        &typed2,
        &["--partition", "date=2026-10-01", "--wap"],
    );
    let read = rows(&fx.read("typed2"));
    assert!(!read.is_empty() && read.iter().all(|r| r.contains(r#""date": "2026-10-01""#)));
    let (code, audit, err) = common::idem(&["audit", &typed2]);
    assert_eq!(code, 0, "{audit}{err}");
}

/// A table whose partitioning changed holds files of an earlier spec,
/// whose values are not the current fields': an overwrite of a partition
/// is refused naming such a file (it could hold the partition's rows, or
/// others), and so is a read of a partition.
#[test]
fn a_partition_of_a_table_whose_partitioning_changed_is_refused() {
    let fx = Fixture::new(&["2026-10-01"], 300);
    let module = common::guest("examples/clean_orders");
    std::fs::create_dir_all(fx.warehouse()).unwrap();
    foreign(&fx, "moved", &["create-repartitioned"]);
    let table = fx.table("moved");
    let (code, _, err) = run(&fx, &module, "2026-10-01", &table, &[]);
    assert_ne!(code, 0, "{err}");
    assert!(
        err.contains("earlier partition spec") && err.contains("rewrite_data_files"),
        "{err}"
    );
    assert_eq!(rows(&fx.read("moved")).len(), 1, "nothing committed");
    let dedup = s(&common::guest("examples/dedup_events"));
    let (code, _, err) = common::idem(&[
        "run",
        "--module",
        &dedup,
        "--input",
        &table,
        "--table-version",
        "1",
        "--partition",
        "date=2026-10-01",
        "--table",
        &fx.table("copy"),
    ]);
    assert_ne!(code, 0, "{err}");
    assert!(err.contains("another partition spec"), "{err}");
}

/// The Iceberg side of two findings: a foreign append where no slice owns
/// the partition fails a whole-table audit naming the file, and a foreign
/// column rename (a schema change, no data file touched) fails the slice's
/// proof and its memo.
#[test]
fn a_foreign_file_anywhere_and_a_foreign_rename_are_caught() {
    let fx = Fixture::new(&["2026-10-01"], 2_000);
    let module = common::guest("examples/clean_orders");
    let ice = fx.table("orders");
    ok(run(&fx, &module, "2026-10-01", &ice, &[]));
    let (code, audit, err) = common::idem(&["audit", &ice]);
    assert_eq!(code, 0, "{audit}{err}");
    foreign(&fx, "orders", &["append-copy", "date", "2099-01-01"]);
    let (code, audit, _) = common::idem(&["audit", &ice]);
    assert_eq!(code, 1, "a foreign file passed audit:\n{audit}");
    assert!(
        audit.contains("(no slice)") && audit.contains("belongs to no slice"),
        "{audit}"
    );
    let (code, audit, _) = common::idem(&["audit", &ice, "--slice", "date=2026-10-01"]);
    assert_eq!(code, 0, "{audit}");

    let renamed = fx.table("renamed");
    ok(run(&fx, &module, "2026-10-01", &renamed, &[]));
    foreign(&fx, "renamed", &["rename", "total", "total_amount"]);
    let (code, audit, _) = common::idem(&["audit", &renamed]);
    assert_eq!(code, 1, "audit proved a renamed column:\n{audit}");
    assert!(audit.contains("schema"), "{audit}");
    // Another writer's snapshot after the rename: a read of that version
    // takes idem's file from before the rename and the new one, matched
    // by field id, so the older file gives `total_amount` its values, as
    // PyIceberg reads them.
    foreign(
        &fx,
        "renamed",
        &["append-copy", "event_id", "copied-after-rename"],
    );
    let copy = fx.table("renamed_copy");
    let at = version(&fx.read("renamed")).to_string();
    read_into(&renamed, &at, &copy, &["--mode", "append"]);
    let theirs = rows(&fx.read("renamed"));
    let ours = rows(&fx.read("renamed_copy"));
    assert!(
        ours.iter().all(|r| theirs.contains(r)),
        "{:?}",
        ours.first()
    );
    let events = |rows: &[String]| -> std::collections::BTreeSet<String> {
        rows.iter()
            .map(|r| serde_json::from_str::<Value>(r).unwrap()["event_id"].to_string())
            .collect()
    };
    assert_eq!(events(&ours), events(&theirs));
    // Not vacuous: both files read, and the older one's rows have values
    // to lose.
    assert!(ours.iter().any(|r| r.contains("copied-after-rename")));
    let null = r#""total_amount": null"#;
    let older = theirs.iter().filter(|r| !r.contains("copied-after-rename"));
    assert!(older.clone().count() > 1 && older.clone().any(|r| !r.contains(null)));
    let (_, out, _) = run(&fx, &module, "2026-10-01", &renamed, &[]);
    assert!(
        !out.contains("memo"),
        "a memo hit on a renamed table:\n{out}"
    );
}

#[test]
fn log_audit_verify_work_and_a_foreign_delete_is_seen_and_repaired() {
    let fx = Fixture::new(&["2026-10-01", "2026-10-02"], 3_000);
    let module = common::guest("examples/clean_orders");
    let ice = fx.table("orders");
    let out = ok(run(&fx, &module, "2026-10-01", &ice, &[]));
    ok(run(&fx, &module, "2026-10-02", &ice, &[]));
    let clean = fx.read("orders");

    // log lists both runs; audit proves both slices from the table's own
    // metadata and data files, and replays them; verify re-executes a
    // manifest; show finds a slice's run by TABLE#SLICE.
    let (code, log, err) = common::idem(&["log", &ice]);
    assert_eq!(code, 0, "{log}{err}");
    assert!(
        log.contains("date=2026-10-01") && log.contains("date=2026-10-02"),
        "{log}"
    );
    let (code, audit, err) = common::idem(&["audit", &ice, "--replay"]);
    assert_eq!(code, 0, "{audit}{err}");
    let proven = audit
        .lines()
        .filter(|l| {
            l.split_whitespace().nth(2) == Some("proven") && l.contains("replay reproduced it")
        })
        .count();
    assert_eq!(proven, 2, "{audit}");
    let manifest = field(&out, "manifest:");
    let manifest = manifest.trim_start_matches("file://");
    let (code, verified, err) = common::idem(&["verify", manifest]);
    assert_eq!(code, 0, "{verified}{err}");
    assert!(verified.contains("match"), "{verified}");
    let (code, shown, err) = common::idem(&["show", &format!("{ice}#date=2026-10-01")]);
    assert_eq!(code, 0, "{shown}{err}");
    assert!(shown.contains(field(&out, "run key:").as_str()), "{shown}");

    // Another writer deletes rows of the first day (PyIceberg rewrites its
    // data file): audit fails that slice, the memo does not hold, and the
    // next run recommits exactly the slice's output, saying why.
    foreign_delete(&fx, "orders", "date = '2026-10-01' AND amount > 50");
    assert_ne!(
        rows(&fx.read("orders")),
        rows(&clean),
        "the DELETE did nothing"
    );
    let (code, audit, _) = common::idem(&["audit", &ice]);
    assert_eq!(code, 1, "audit missed the DELETE:\n{audit}");
    assert!(
        audit.contains("date=2026-10-01") && audit.contains("FAILED"),
        "{audit}"
    );
    let out = ok(run(&fx, &module, "2026-10-01", &ice, &[]));
    let result = field(&out, "result:");
    assert!(
        result.starts_with("committed") && result.contains("recommitted"),
        "{out}"
    );
    assert_eq!(
        rows(&fx.read("orders")),
        rows(&clean),
        "the slice's rows were not restored exactly"
    );
    let (code, audit, err) = common::idem(&["audit", &ice]);
    assert_eq!(code, 0, "{audit}{err}");
    let out = ok(run(&fx, &module, "2026-10-01", &ice, &[]));
    assert!(field(&out, "result:").contains("memo"), "{out}");

    // In an append table a foreign rewrite leaves files no slice owns:
    // refused, naming the cause and the fix, and nothing is committed.
    let app = fx.table("appended");
    let mode = ["--mode", "append"];
    ok(run(&fx, &module, "2026-10-01", &app, &mode));
    foreign_delete(&fx, "appended", "amount > 50");
    let before = fx.read("appended");
    let (code, _, err) = run(&fx, &module, "2026-10-01", &app, &mode);
    assert_ne!(code, 0, "{err}");
    assert!(
        err.contains("idem did not write") && err.contains("new table"),
        "{err}"
    );
    assert_eq!(fx.read("appended"), before);
}

#[test]
fn a_warehouse_on_s3_holds_the_same_table() {
    let s3 = common::S3::start("lake");
    let fx = Fixture::new(&["2026-10-01", "2026-10-02"], 2_000);
    let module = common::guest("examples/daily_revenue");
    let warehouse = s3.url("wh");
    let ice = format!(
        "iceberg+sqlite://{}?warehouse={warehouse}#sales.revenue_s3",
        s(&fx.catalog())
    );
    let local = fx.table("revenue");
    let s3run = |date: &str| {
        let args = common::day_args(s(&module).as_str(), s(&fx.data()).as_str(), date, &ice, &[]);
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        s3.idem(&refs, &[])
    };
    for d in ["2026-10-01", "2026-10-02"] {
        let out = ok(s3run(d));
        assert!(
            field(&out, "result:").starts_with("committed version"),
            "{out}"
        );
        let args = common::day_args(s(&module).as_str(), s(&fx.data()).as_str(), d, &local, &[]);
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        ok(common::idem(&refs));
    }
    let out = ok(s3run("2026-10-01"));
    assert!(
        field(&out, "result:").starts_with("unchanged since version 1"),
        "{out}"
    );
    // Nothing of the table is on local disk: data, metadata and idem's
    // sidecars are in the bucket.
    assert!(!fx.dir.path().join("warehouse").exists());
    let mut cmd = Command::new(common::python());
    cmd.arg(common::root().join("tests/read_iceberg.py"))
        .arg(fx.catalog())
        .arg(&warehouse)
        .arg("sales.revenue_s3");
    for (k, v) in s3.env() {
        cmd.env(k, v);
    }
    let got = cmd.output().unwrap();
    assert!(
        got.status.success(),
        "{}",
        String::from_utf8_lossy(&got.stderr)
    );
    let got: Value = serde_json::from_slice(&got.stdout).unwrap();
    assert_eq!(version(&got), 2);
    assert_eq!(rows(&got), rows(&fx.read("revenue")));
    let (code, audit, err) = s3.idem(&["audit", &ice], &[]);
    assert_eq!(code, 0, "{audit}{err}");
}

#[test]
fn an_iceberg_table_at_a_pinned_version_is_a_slice_input() {
    let fx = Fixture::new(&["2026-10-01", "2026-10-02"], 2_000);
    let clean = common::guest("examples/clean_orders");
    let revenue = common::guest("examples/daily_revenue");
    let ice = fx.table("bronze");
    let delta = fx.dir.path().join("delta_bronze");
    for t in [ice.clone(), s(&delta)] {
        for d in ["2026-10-01", "2026-10-02"] {
            ok(run(&fx, &clean, d, &t, &[]));
        }
    }
    // Silver from each bronze, pinned at version 2, day 1's rows only.
    let silver = |from: &str, to: &Path, version: &str, day: &str| {
        common::idem(&[
            "run",
            "--module",
            s(&revenue).as_str(),
            "--input",
            from,
            "--delta-version",
            version,
            "--delta-slice",
            &format!("date={day}"),
            "--partition",
            &format!("date={day}"),
            "--table",
            s(to).as_str(),
        ])
    };
    let (a, b) = (
        fx.dir.path().join("silver_a"),
        fx.dir.path().join("silver_b"),
    );
    let from_ice = ok(silver(&ice, &a, "2", "2026-10-01"));
    let from_delta = ok(silver(&s(&delta), &b, "2", "2026-10-01"));
    assert_eq!(field(&from_ice, "output:"), field(&from_delta, "output:"));
    let got = read_table(&a, None);
    assert!(!got.rows.is_empty());
    assert_eq!(got.rows, read_table(&b, None).rows);
    // The same run again reads the same pinned files: nothing to do.
    let again = ok(silver(&ice, &a, "2", "2026-10-01"));
    assert!(field(&again, "result:").contains("version 1"), "{again}");
    // Version 1 holds no commit of day 2: refused, naming it.
    let (code, _, err) = silver(&ice, &a, "1", "2026-10-02");
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("holds no commit of slice `date=2026-10-02`"),
        "{err}"
    );
    // A version the table never had is a clear error.
    let (code, _, err) = silver(&ice, &a, "9", "2026-10-01");
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("no snapshot with that sequence number"),
        "{err}"
    );
    // The same snapshot named by its id (PyIceberg's), with the
    // format-neutral flags: the same pinned input, so the same run key
    // (nothing to do); the former flags above still work.
    let snapshots = fx.read("bronze")["snapshots"].clone();
    let id_of = |seq: i64| {
        snapshots
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["sequence"] == seq)
            .unwrap()["id"]
            .as_i64()
            .unwrap()
            .to_string()
    };
    let by_id = |from: &str, id: &str, day: &str| {
        common::idem(&[
            "run",
            "--module",
            s(&revenue).as_str(),
            "--input",
            from,
            "--iceberg-snapshot",
            id,
            "--table-slice",
            &format!("date={day}"),
            "--partition",
            &format!("date={day}"),
            "--table",
            s(&a).as_str(),
        ])
    };
    let same = ok(by_id(&ice, &id_of(2), "2026-10-01"));
    assert_eq!(
        field(&same, "run key:"),
        field(&from_ice, "run key:"),
        "{same}"
    );
    assert!(field(&same, "result:").contains("version 1"), "{same}");
    // Snapshot 1 holds no commit of day 2, as version 1 did not.
    let (code, _, err) = by_id(&ice, &id_of(1), "2026-10-02");
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("holds no commit of slice `date=2026-10-02`"),
        "{err}"
    );
    // An id the table never had, a Delta table, and both pins at once
    // are clear errors.
    let (code, _, err) = by_id(&ice, "12345", "2026-10-01");
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("no snapshot with that id"), "{err}");
    let (code, _, err) = by_id(&s(&delta), &id_of(2), "2026-10-01");
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("is a Delta table: it has versions, not snapshot ids"),
        "{err}"
    );
    let (code, _, err) = common::idem(&[
        "run",
        "--module",
        s(&revenue).as_str(),
        "--input",
        &ice,
        "--iceberg-snapshot",
        &id_of(2),
        "--table-version",
        "2",
        "--partition",
        "date=2026-10-01",
        "--table",
        s(&a).as_str(),
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("cannot be used with"), "{err}");
}

/// Write-audit-publish on a branch: a failed audit (an expectation, then
/// the audit module) leaves main as it was and the output on the branch,
/// which pyiceberg reads and `idem show` names; a passing run replaces
/// it, fast-forwards main to the audited snapshot (the branch's own, not
/// a new one) and drops the branch; a rerun is a memo hit.
#[test]
fn a_branch_holds_the_output_until_its_audit_passes() {
    let fx = Fixture::new(&["2026-10-01", "2026-10-02"], 2_000);
    let module = common::guest("examples/clean_orders");
    let audit = common::guest("examples/audit_totals");
    let (table, branch) = (fx.table("wap"), "wap/date=2026-10-01");
    ok(run(&fx, &module, "2026-10-01", &fx.table("clean1"), &[]));
    let clean1 = rows(&fx.read("clean1"));
    let failed = run(
        &fx,
        &module,
        "2026-10-01",
        &table,
        &["--wap", "--expect", "rows(..5)"],
    );
    assert_eq!(failed.0, 1, "{}{}", failed.1, failed.2);
    for want in [
        "rows(..5)",
        "Nothing was published: main is unchanged",
        &format!("branch `{branch}`"),
    ] {
        assert!(failed.2.contains(want), "{want}: {}", failed.2);
    }
    let main = fx.read("wap");
    assert!(rows(&main).is_empty() && version(&main) == -1, "{main}");
    let first = fx.read_branch("wap", branch);
    assert_eq!(rows(&first), clean1, "the branch holds the output");
    let shown = |code: i32| {
        let r = common::idem(&["show", &format!("{table}#date=2026-10-01")]);
        assert_eq!(r.0, code, "{}{}", r.1, r.2);
        r.1
    };
    assert!(shown(0).contains(&format!("unpublished:  branch {branch}")));
    // The audit module fails the next run: a new branch snapshot, main
    // still empty.
    let a = s(&audit);
    let strict = [
        "--wap",
        "--audit-module",
        &a,
        "--audit-params",
        r#"{"max_total": 10}"#,
    ];
    let failed = run(&fx, &module, "2026-10-01", &table, &strict);
    assert_eq!(failed.0, 1, "{}", failed.2);
    assert!(
        failed.2.contains("totals outside [0, 10]") && failed.2.contains(branch),
        "{}",
        failed.2
    );
    let second = fx.read_branch("wap", branch);
    assert_ne!(second["snapshot"], first["snapshot"]);
    assert!(rows(&fx.read("wap")).is_empty());
    // Passing: main is fast-forwarded to the audited snapshot.
    let pass = [
        "--wap",
        "--expect",
        "rows(1..)",
        "--audit-module",
        &a,
        "--json",
    ];
    let out: Value =
        serde_json::from_str(&ok(run(&fx, &module, "2026-10-01", &table, &pass))).unwrap();
    assert_eq!(out["outcome"]["kind"], "committed", "{out}");
    let main = fx.read("wap");
    assert_eq!(rows(&main), clean1);
    assert_eq!(
        main["refs"].as_object().unwrap().len(),
        1,
        "branch dropped: {main}"
    );
    let head = main["snapshots"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(
        head["idem.wapBranch"], branch,
        "main's head is the branch's snapshot: {head}"
    );
    assert_eq!(main["snapshot"], head["id"]);
    assert!(!shown(0).contains("unpublished"));
    // The manifest holds both verdicts, read from the branch's rows.
    let manifest = out["manifest"]
        .as_str()
        .unwrap()
        .trim_start_matches("file://");
    let stored: Value =
        serde_json::from_str(&common::idem(&["show", manifest, "--json"]).1).unwrap();
    let audits = &stored["predicate"]["result"]["audits"];
    assert_eq!(
        audits[0]["observed"],
        format!("{} rows", clean1.len()),
        "{audits}"
    );
    assert_eq!(audits[1]["passed"], true, "{audits}");
    // Memo, audit, verify and the log see an ordinary commit.
    let again = ok(run(
        &fx,
        &module,
        "2026-10-01",
        &table,
        &["--wap", "--expect", "rows(1..)", "--audit-module", &a],
    ));
    assert!(field(&again, "result:").contains("memo"), "{again}");
    let slice_ref = format!("{table}#date=2026-10-01");
    for cmd in [vec!["audit", &table], vec!["verify", &slice_ref]] {
        let r = common::idem(&cmd);
        assert_eq!(r.0, 0, "{cmd:?}: {}{}", r.1, r.2);
    }
    let log = common::idem(&["log", &table, "--json"]).1;
    assert!(
        log.contains(out["manifestDigest"].as_str().unwrap()),
        "{log}"
    );
    // Superseded by a commit to main, the manifest is still the one a
    // snapshot of the table published (not "forged").
    ok(run(
        &fx,
        &module,
        "2026-10-01",
        &table,
        &["--params", r#"{"min_amount": 900}"#],
    ));
    let r = common::idem(&["verify", manifest]);
    assert_eq!(r.0, 0, "{}{}", r.1, r.2);
    assert!(!format!("{}{}", r.1, r.2).contains("forged"), "{}", r.1);
}

/// A second slice publishes on top of the first (a fast-forward from a
/// parent); two runs of one slice auditing on branches at once end with
/// one publish and no branch left; a named branch; what has no branch is
/// refused by name.
#[test]
fn branches_race_stack_and_are_refused_where_they_cannot_work() {
    let fx = Fixture::new(&["2026-10-01", "2026-10-02"], 2_000);
    let module = common::guest("examples/clean_orders");
    let table = fx.table("wap");
    let clean = fx.table("clean");
    for d in ["2026-10-01", "2026-10-02"] {
        ok(run(&fx, &module, d, &clean, &[]));
    }
    let gate = tempfile::tempdir().unwrap();
    // Both written and audited before either publishes.
    let barrier = format!("before-commit:2:{}", gate.path().display());
    let hold = [("IDEM_FAULT_BARRIER", barrier.as_str())];
    let args = ["--wap", "--expect", "rows(1..)"];
    let a = spawn_run(&fx, &module, &table, &args, &hold);
    let b = spawn_run(&fx, &module, &table, &args, &hold);
    let (ra, rb) = (wait(a), wait(b));
    assert_eq!((ra.0, rb.0), (0, 0), "{}\n{}", ra.2, rb.2);
    let mut results = vec![field(&ra.1, "result:"), field(&rb.1, "result:")];
    results.sort();
    assert!(results[0].starts_with("committed version"), "{results:?}");
    assert!(
        results[1].starts_with("unchanged since version"),
        "{results:?}"
    );
    // The loser dropped its own branch write.
    let raced = fx.read("wap");
    assert_eq!(raced["refs"].as_object().unwrap().len(), 1, "{raced}");
    let named = ["--wap-branch", "audit/oct-02", "--expect", "rows(1..)"];
    ok(run(&fx, &module, "2026-10-02", &table, &named));
    let got = fx.read("wap");
    assert_eq!(rows(&got), rows(&fx.read("clean")));
    assert_eq!(got["refs"].as_object().unwrap().len(), 1, "{got}");
    // Main's head is the named branch's snapshot, whose parent is the
    // race winner's branch snapshot: two fast-forwards.
    let snaps = got["snapshots"].as_array().unwrap();
    let by_id = |id: &Value| snaps.iter().find(|s| &s["id"] == id).unwrap().clone();
    let head = by_id(&got["snapshot"]);
    assert_eq!(head["idem.wapBranch"], "audit/oct-02", "{got}");
    let parent = by_id(&head["parent"]);
    assert_eq!(parent["idem.wapBranch"], "wap/date=2026-10-01", "{got}");
    assert_eq!(parent["idem.slice"], "date=2026-10-01", "{got}");
    let shown = common::idem(&["show", &format!("{table}#date=2026-10-01")]).1;
    assert!(!shown.contains("unpublished"), "{shown}");
    // A branch holding another slice's waiting output is not taken over.
    let hold = [
        "--wap-branch",
        "hold",
        "--expect",
        "rows(..0)",
        "--params",
        r#"{"min_amount": 1}"#,
    ];
    assert_eq!(run(&fx, &module, "2026-10-02", &table, &hold).0, 1);
    assert!(!rows(&fx.read_branch("wap", "hold")).is_empty());
    // Refused by name: Delta (no branches), a merge, `main`.
    let delta = s(&fx.dir.path().join("delta"));
    let fresh = fx.table("fresh");
    let refusals = [
        (
            table.as_str(),
            vec!["--wap-branch", "hold", "--params", r#"{"min_amount": 2}"#],
            "`date=2026-10-02`'s output waiting",
        ),
        (
            delta.as_str(),
            vec!["--wap"],
            "a Delta table has no branches",
        ),
        (
            &fresh,
            vec!["--wap", "--mode", "merge", "--key", "order_id"],
            "does not take a merge",
        ),
        (&table, vec!["--wap-branch", "main"], "cannot be `main`"),
        (
            &table,
            vec!["--wap-branch", "two words"],
            "is not a branch name",
        ),
    ];
    for (t, extra, want) in refusals {
        let r = run(&fx, &module, "2026-10-01", t, &extra);
        assert_ne!(r.0, 0, "{extra:?}");
        assert!(r.2.contains(want), "{extra:?}: {}", r.2);
    }
    assert!(!fx.dir.path().join("delta/_delta_log").exists());
}

/// A branch write whose catalog answers are lost is still published once;
/// `main` moving between the audit and the publish makes the run write
/// and audit again on top of it; a plain commit of the slice makes its
/// waiting branch stale and drops it; an unpublished snapshot is no
/// version to read.
#[test]
fn a_branch_write_survives_lost_answers_and_moves_of_main() {
    let fx = Fixture::new(&["2026-10-01", "2026-10-02"], 2_000);
    let module = common::guest("examples/clean_orders");
    let table = fx.table("wap");
    let high = ["--params", r#"{"min_amount": 900}"#];
    ok(run(&fx, &module, "2026-10-01", &fx.table("clean"), &high));
    ok(run(&fx, &module, "2026-10-02", &fx.table("clean"), &[]));
    let lost = [("IDEM_FAULT_FAIL", "lost-commit-response")];
    let r = wait(spawn_run(&fx, &module, &table, &["--wap"], &lost));
    assert_eq!(r.0, 0, "{}", r.2);
    assert!(
        field(&r.1, "result:").starts_with("committed version"),
        "{}",
        r.1
    );
    // A (slice 1, new output) waits after its audit until B (slice 2) has
    // committed to main.
    let gate = tempfile::tempdir().unwrap();
    let at = |point: &str| format!("{point}:2:{}", gate.path().display());
    let (a_at, b_at) = (at("before-commit"), at("after-record"));
    let a = spawn_run(
        &fx,
        &module,
        &table,
        &["--wap", high[0], high[1]],
        &[("IDEM_FAULT_BARRIER", &a_at)],
    );
    // B starts once A waits at the barrier (written and audited).
    let parked = Instant::now();
    while std::fs::read_dir(gate.path())
        .map(|d| d.count())
        .unwrap_or(0)
        == 0
    {
        assert!(
            parked.elapsed() < Duration::from_secs(120),
            "A never reached its barrier"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let b = spawn_day(
        &fx,
        &module,
        "2026-10-02",
        &table,
        &[],
        &[("IDEM_FAULT_BARRIER", &b_at)],
    );
    let (ra, rb) = (wait(a), wait(b));
    assert_eq!((ra.0, rb.0), (0, 0), "{}\n{}", ra.2, rb.2);
    let got = fx.read("wap");
    assert_eq!(rows(&got), rows(&fx.read("clean")));
    let snaps = got["snapshots"].as_array().unwrap();
    let by_id = |id: &Value| snaps.iter().find(|s| &s["id"] == id).unwrap().clone();
    let head = by_id(&got["snapshot"]);
    assert_eq!(head["idem.wapBranch"], "wap/date=2026-10-01", "{got}");
    assert_eq!(
        by_id(&head["parent"])["idem.slice"],
        "date=2026-10-02",
        "written again on B's commit: {got}"
    );
    // Each write its own data file: the second round did not write over
    // the first's (which its snapshot still names).
    let slice_files = walk(&fx.warehouse().join("sales.db/wap/data/date=2026-10-01"));
    assert_eq!(slice_files.len(), 3, "{slice_files:?}");
    assert_eq!(got["refs"].as_object().unwrap().len(), 1, "{got}");
    // A failed audit, then a plain commit of the slice: the branch goes.
    let fail = ["--wap", "--expect", "rows(..0)", high[0], high[1]];
    assert_eq!(run(&fx, &module, "2026-10-02", &table, &fail).0, 1);
    let waiting = fx.read("wap");
    let id = &waiting["refs"]["wap/date=2026-10-02"];
    let seq = by_id_in(&waiting, id)["sequence"]
        .as_i64()
        .unwrap()
        .to_string();
    let pinned = common::idem(&[
        "run",
        "--module",
        &s(&module),
        "--input",
        &table,
        "--table-version",
        &seq,
        "--mode",
        "append",
        "--table",
        &s(&fx.dir.path().join("x")),
    ]);
    assert!(
        pinned.0 != 0 && pinned.2.contains("never published"),
        "{}",
        pinned.2
    );
    ok(run(&fx, &module, "2026-10-02", &table, &high));
    let after = fx.read("wap");
    assert_eq!(after["refs"].as_object().unwrap().len(), 1, "{after}");
    let shown = common::idem(&["show", &format!("{table}#date=2026-10-02")]).1;
    assert!(!shown.contains("unpublished"), "{shown}");
}

fn by_id_in(read: &Value, id: &Value) -> Value {
    read["snapshots"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| &s["id"] == id)
        .unwrap()
        .clone()
}

#[test]
fn new_columns_join_an_iceberg_table_in_the_slices_own_snapshot() {
    let fx = Fixture::new(&["2026-10-01", "2026-10-02"], 2_000);
    let clean = common::guest("examples/clean_orders");
    let dedup = common::guest("examples/dedup_events");
    let (over, merged) = (fx.table("clean"), fx.table("events"));
    let merge = ["--mode", "merge", "--key", "event_id"];
    let append = ["--on-schema-change", "append-new-columns"];
    let merge_append: Vec<&str> = merge.iter().chain(&append).copied().collect();
    ok(run(&fx, &clean, "2026-10-01", &over, &[]));
    ok(run(&fx, &dedup, "2026-10-01", &merged, &merge));
    common::change_input_columns(&fx.data(), "2026-10-02", false);
    let (code, _, err) = run(&fx, &clean, "2026-10-02", &over, &[]);
    assert_eq!(code, 3, "{err}");
    assert!(
        err.contains("`coupon`") && err.contains("append-new-columns"),
        "{err}"
    );
    assert_eq!(version(&fx.read("clean")), 1, "nothing committed");
    // A write-audit-publish branch cannot add them: the schema is the
    // whole table's, main would show them before the audit.
    let wap = [&append[..], &["--wap"]].concat();
    let (code, _, err) = run(&fx, &clean, "2026-10-02", &over, &wap);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("branch cannot add them"), "{err}");
    assert_eq!(version(&fx.read("clean")), 1, "nothing committed");
    for (name, module, extra) in [
        ("clean", &clean, &append[..]),
        ("events", &dedup, &merge_append[..]),
    ] {
        let table = fx.table(name);
        let out = ok(run(&fx, module, "2026-10-02", &table, extra));
        assert_eq!(field(&out, "result:"), "committed version 2", "{name}");
        // PyIceberg: day 1's rows read null in the new column.
        let read = fx.read(name);
        let rows: Vec<Value> = rows(&read)
            .iter()
            .map(|r| serde_json::from_str(r).unwrap())
            .collect();
        let (day1, day2): (Vec<&Value>, Vec<&Value>) = rows
            .iter()
            .partition(|r| r["date"] == "2026-10-01" || r["_idem_slice"] == "date=2026-10-01");
        assert!(!day1.is_empty() && !day2.is_empty(), "{name}");
        assert!(day1.iter().all(|r| r["coupon"].is_null()), "{name}");
        assert!(day2.iter().any(|r| r["coupon"].is_string()), "{name}");
        // Day 1 is still current (no recommit as drift); audit proves both.
        let forced = [extra, &["--force"][..]].concat();
        let out = ok(run(&fx, module, "2026-10-01", &table, &forced));
        assert_eq!(
            field(&out, "result:"),
            "unchanged since version 1",
            "{name}: {out}"
        );
        let (code, audit, err) = common::idem(&["audit", &table]);
        assert_eq!(code, 0, "{name}: {audit}\n{err}");
    }
    // A merge that rewrites files written before the column existed: their
    // rows take it as null (day 1's own rows are replaced by its new output).
    common::change_input_columns(&fx.data(), "2026-10-01", false);
    let out = ok(run(&fx, &dedup, "2026-10-01", &merged, &merge_append));
    assert_eq!(field(&out, "result:"), "committed version 3", "{out}");
    let read = fx.read("events");
    let day1: Vec<Value> = rows(&read)
        .iter()
        .map(|r| serde_json::from_str::<Value>(r).unwrap())
        .filter(|r| r["_idem_slice"] == "date=2026-10-01")
        .collect();
    assert!(
        day1.iter().any(|r| r["coupon"].is_string()),
        "day 1 now has coupons"
    );
    let (code, audit, err) = common::idem(&["audit", &merged]);
    assert_eq!(code, 0, "{audit}\n{err}");
    // A later read of the whole table at version 2 takes files from both
    // sides of the append: day 1's read null in the new column.
    let whole = fx.table("whole");
    read_into(&over, "2", &whole, &["--mode", "append"]);
    let got: Vec<Value> = rows(&fx.read("whole"))
        .iter()
        .map(|r| serde_json::from_str(r).unwrap())
        .collect();
    let (day1, day2): (Vec<&Value>, Vec<&Value>) =
        got.iter().partition(|r| r["date"] == "2026-10-01");
    assert!(!day1.is_empty() && day1.iter().all(|r| r["coupon"].is_null()));
    assert!(day2.iter().any(|r| r["coupon"].is_string()));
}

/// An Iceberg table as a side input: pinned at its snapshot's sequence
/// number under its catalog location, so a new snapshot of it reruns
/// the slice, and `idem verify` reads the pinned snapshot again.
#[test]
fn an_iceberg_table_is_a_side_input_pinned_at_its_snapshot() {
    let fx = Fixture::new(&["2026-10-01", "2026-10-02"], 300);
    let module = common::guest("examples/clean_orders");
    let dim = fx.table("dim");
    ok(run(&fx, &module, "2026-10-01", &dim, &[]));
    let target = fx.table("t");
    let side = format!("orders={dim}");
    let out = ok(run(
        &fx,
        &module,
        "2026-10-02",
        &target,
        &["--side", &side, "--json"],
    ));
    let v: Value = serde_json::from_str(&out).unwrap();
    let manifest = std::fs::read_to_string(
        url::Url::parse(v["manifest"].as_str().unwrap())
            .unwrap()
            .to_file_path()
            .unwrap(),
    )
    .unwrap();
    let m: Value = serde_json::from_str(&manifest).unwrap();
    let recorded = &m["predicate"]["run"]["sides"][0];
    assert_eq!(recorded["name"], "orders");
    assert!(
        recorded["table"]
            .as_str()
            .unwrap()
            .starts_with("iceberg+sqlite://"),
        "{recorded}"
    );
    assert_eq!(recorded["input"]["deltaVersion"], 1, "{recorded}");
    // Another snapshot of the side table: the slice runs again (its
    // output, which does not read it, is unchanged).
    ok(run(&fx, &module, "2026-10-02", &dim, &[]));
    let out = ok(run(&fx, &module, "2026-10-02", &target, &["--side", &side]));
    assert!(out.contains("unchanged"), "{out}");
    assert!(!out.contains("memo"), "{out}");
    let (code, out, err) = common::idem(&["verify", &format!("{target}#date=2026-10-02")]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("match"), "{out}");
}
