//! Idempotent runs end to end: the real `idem` binary, real .wasm guests,
//! real Parquet inputs, real Delta tables read back by an independent reader
//! (PyPI deltalake + polars).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{field, read_table, wait};

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
    fn table(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

/// `idem run` of `example` over partition `date` of the fixture into `table`.
fn run(
    fx: &Fixture,
    module: &Path,
    date: &str,
    table: &Path,
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
        s(table),
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

fn manifest_path(table: &Path, stdout: &str) -> PathBuf {
    let url = field(stdout, "manifest:");
    let name = url.rsplit('/').next().unwrap();
    table.join("_idem/manifests").join(name)
}

#[test]
fn a_rerun_commits_nothing_and_yields_a_byte_identical_manifest() {
    let fx = Fixture::new(&["2026-10-01"], 5_000);
    let module = common::guest("examples/daily_revenue");
    let table = fx.table("revenue");
    let first = ok(run(&fx, &module, "2026-10-01", &table, &[]));
    assert_eq!(field(&first, "result:"), "committed version 1");
    let m1 = std::fs::read(manifest_path(&table, &first)).unwrap();
    let view1 = read_table(&table, None);
    assert_eq!(view1.version, 1);
    assert!(!view1.rows.is_empty());

    let again = ok(run(&fx, &module, "2026-10-01", &table, &[]));
    assert!(
        field(&again, "result:").starts_with("unchanged since version 1"),
        "{again}"
    );
    assert_eq!(field(&again, "manifest:"), field(&first, "manifest:"));
    // --force executes again; the output is the same, so still no commit and
    // the same manifest, byte for byte.
    let forced = ok(run(&fx, &module, "2026-10-01", &table, &["--force"]));
    assert_eq!(field(&forced, "result:"), "unchanged since version 1");
    assert_eq!(std::fs::read(manifest_path(&table, &forced)).unwrap(), m1);
    assert_eq!(read_table(&table, None), view1, "a rerun changed the table");
    // No wall-clock field in the manifest.
    let text = String::from_utf8(m1).unwrap();
    assert!(
        text.contains("\"_type\":\"https://in-toto.io/Statement/v1\""),
        "{text}"
    );
    for word in ["time", "Time", "date\":\"20"] {
        assert!(
            !text.contains(&format!("\"{word}")),
            "manifest has a `{word}` field: {text}"
        );
    }
}

#[test]
fn changing_one_input_recommits_only_that_slice() {
    let fx = Fixture::new(&["2026-10-01", "2026-10-02"], 4_000);
    let module = common::guest("examples/daily_revenue");
    let table = fx.table("revenue");
    ok(run(&fx, &module, "2026-10-01", &table, &[]));
    ok(run(&fx, &module, "2026-10-02", &table, &[]));
    // daily_revenue declares the 3 columns it reads: the manifest says so.
    let (code, shown, err) = common::idem(&[
        "show",
        &format!("{}#date=2026-10-01", table.display()),
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let m: serde_json::Value = serde_json::from_str(&shown).unwrap();
    assert_eq!(
        m["predicate"]["result"]["columns"],
        serde_json::json!(["customer", "amount", "quantity"]),
        "{m}"
    );
    let before = read_table(&table, None);
    assert_eq!(before.version, 2);
    let day2 = |v: &common::TableView| {
        v.rows
            .iter()
            .filter(|r| r.contains("\"date\": \"2026-10-02\""))
            .cloned()
            .collect::<Vec<_>>()
    };

    // One file of day 1 gets new contents (a late-arriving correction).
    let f = fx.data().join("date=2026-10-01/part-00001.parquet");
    let mut w = parquet::arrow::ArrowWriter::try_new(
        std::fs::File::create(&f).unwrap(),
        idem::sample::orders_schema(),
        None,
    )
    .unwrap();
    w.write(&idem::sample::orders_batch(42, 0, 1_500)).unwrap();
    w.close().unwrap();

    let out = ok(run(&fx, &module, "2026-10-01", &table, &[]));
    assert_eq!(field(&out, "result:"), "committed version 3");
    let out2 = ok(run(&fx, &module, "2026-10-02", &table, &[]));
    assert!(
        field(&out2, "result:").starts_with("unchanged since version 2"),
        "{out2}"
    );
    let after = read_table(&table, None);
    assert_eq!(after.version, 3);
    assert_eq!(
        day2(&after),
        day2(&before),
        "the other partition was touched"
    );
    // The partition holds exactly the new output: the native build of the
    // same transform over the corrected files, row by row (not merely a
    // changed row count), and the manifest's digest is the native digest.
    let day1: Vec<String> = after
        .rows
        .iter()
        .filter(|r| r.contains("\"date\": \"2026-10-01\""))
        .map(|r| without_date(r))
        .collect();
    let native_file = fx.dir.path().join("native.parquet");
    let mut inputs: Vec<PathBuf> = std::fs::read_dir(fx.data().join("date=2026-10-01"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    inputs.sort();
    let digest = common::native_output::<daily_revenue::DailyRevenue>(
        &inputs,
        "{}",
        Some("2026-10-01"),
        1000,
        &native_file,
    );
    let mut native: Vec<String> = common::read_parquet_rows(&native_file)
        .iter()
        .map(|r| without_date(r))
        .collect();
    native.sort();
    let mut day1_sorted = day1.clone();
    day1_sorted.sort();
    assert_eq!(
        day1_sorted, native,
        "the partition is not exactly the new output"
    );
    assert_eq!(
        field(&out, "output:").split(' ').next().unwrap(),
        digest.as_str()
    );
}

/// A row (sorted-key JSON) without its `date` partition column.
fn without_date(row: &str) -> String {
    let mut v: serde_json::Map<String, serde_json::Value> = serde_json::from_str(row).unwrap();
    v.remove("date");
    serde_json::to_string(&v).unwrap()
}

/// The same component with a custom section appended: a new module version
/// (new digest, new run key) whose behaviour is identical.
fn rebuilt(module: &Path, dir: &Path) -> PathBuf {
    let mut bytes = std::fs::read(module).unwrap();
    let name = b"idem-test-build-id";
    let payload = b"build 2";
    let body_len = 1 + name.len() + payload.len();
    bytes.push(0); // custom section
    bytes.push(body_len as u8);
    bytes.push(name.len() as u8);
    bytes.extend_from_slice(name);
    bytes.extend_from_slice(payload);
    let p = dir.join("daily_revenue-v2.wasm");
    std::fs::write(&p, bytes).unwrap();
    p
}

#[test]
fn a_new_module_version_with_identical_output_commits_nothing() {
    let fx = Fixture::new(&["2026-10-01"], 3_000);
    let module = common::guest("examples/daily_revenue");
    let table = fx.table("revenue");
    let first = ok(run(&fx, &module, "2026-10-01", &table, &[]));
    let v2 = rebuilt(&module, fx.dir.path());
    let out = ok(run(&fx, &v2, "2026-10-01", &table, &[]));
    assert_ne!(
        field(&out, "run key:"),
        field(&first, "run key:"),
        "new module, same run key?"
    );
    assert_eq!(field(&out, "output:"), field(&first, "output:"));
    assert_eq!(field(&out, "result:"), "unchanged since version 1");
    assert_eq!(read_table(&table, None).version, 1);
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
    let (a, b) = (read_table(&thrice, None), read_table(&once, None));
    assert_eq!(a.version, 2, "{example} {extra:?}: reruns committed");
    assert_eq!(
        a.rows.len(),
        b.rows.len(),
        "{example} {extra:?}: row counts differ"
    );
    assert_eq!(a.rows, b.rows, "{example} {extra:?}: rows differ");
}

#[test]
fn overwrite_partition_three_runs_equal_one() {
    three_times_equals_once("examples/daily_revenue", &[]);
}

#[test]
fn merge_three_runs_equal_one() {
    three_times_equals_once(
        "examples/dedup_events",
        &["--mode", "merge", "--key", "event_id"],
    );
}

#[test]
fn append_three_runs_equal_one() {
    three_times_equals_once(
        "examples/clean_orders",
        &["--mode", "append", "--params", r#"{"min_amount": 100}"#],
    );
}

#[test]
fn merge_upserts_on_the_key() {
    let fx = Fixture::new(&["2026-10-01"], 2_000);
    let module = common::guest("examples/dedup_events");
    let table = fx.table("events");
    let merge = ["--mode", "merge", "--key", "event_id"];
    ok(run(&fx, &module, "2026-10-01", &table, &merge));
    let before = read_table(&table, None);
    // The same events re-delivered with corrected amounts: updates, not new rows.
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
    let out = ok(run(&fx, &module, "2026-10-01", &table, &merge));
    assert_eq!(field(&out, "result:"), "committed version 2");
    let after = read_table(&table, None);
    assert_eq!(
        after.rows.len(),
        before.rows.len(),
        "merge inserted duplicates"
    );
    assert!(
        after
            .rows
            .iter()
            .filter(|r| r.contains("\"amount\": 1.0,"))
            .count()
            > 500
    );
}

#[test]
fn a_merge_key_that_repeats_in_the_output_is_a_clear_error() {
    let fx = Fixture::new(&["2026-10-01"], 2_000);
    let module = common::guest("examples/clean_orders");
    let table = fx.table("t");
    // clean_orders keeps re-delivered events, so event_id repeats.
    let (code, _, err) = run(
        &fx,
        &module,
        "2026-10-01",
        &table,
        &["--mode", "merge", "--key", "event_id"],
    );
    assert_eq!(
        code, 3,
        "output that breaks the merge contract is a guest failure"
    );
    assert!(err.contains("merge key (event_id) is not unique"), "{err}");
}

fn spawn_run(
    fx: &Fixture,
    module: &Path,
    table: &Path,
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
        "date=2026-10-01",
        "--logical-date",
        "2026-10-01",
        "--batch-rows",
        "1000",
        "--table",
    ]);
    cmd.arg(table)
        .args(extra)
        .env("IDEM_CACHE_DIR", common::test_cache());
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
    for (mode, example) in [
        ("append", "examples/clean_orders"),
        ("overwrite-partition", "examples/daily_revenue"),
    ] {
        let fx = Fixture::new(&["2026-10-01"], 3_000);
        let module = common::guest(example);
        let table = fx.table("t");
        // Both execute, then both reach the commit together (a barrier
        // proves it, where a pause only hoped so).
        let gate = tempfile::tempdir().unwrap();
        let barrier = format!("before-commit:2:{}", gate.path().display());
        let hold = [("IDEM_FAULT_BARRIER", barrier.as_str())];
        let a = spawn_run(&fx, &module, &table, &["--mode", mode], &hold);
        let b = spawn_run(&fx, &module, &table, &["--mode", mode], &hold);
        let (ra, rb) = (wait(a), wait(b));
        assert_eq!(
            std::fs::read_dir(gate.path()).unwrap().count(),
            2,
            "{mode}: both must reach the commit"
        );
        assert_eq!(ra.0, 0, "{mode}: {}", ra.2);
        assert_eq!(rb.0, 0, "{mode}: {}", rb.2);
        let mut results = vec![field(&ra.1, "result:"), field(&rb.1, "result:")];
        results.sort();
        assert_eq!(results[0], "committed version 1", "{mode}: {results:?}");
        assert!(
            results[1].starts_with("unchanged since version 1"),
            "{mode}: {results:?}"
        );
        let clean = fx.table("clean");
        ok(run(&fx, &module, "2026-10-01", &clean, &["--mode", mode]));
        let (got, want) = (read_table(&table, None), read_table(&clean, None));
        assert_eq!(got.version, 1, "{mode}");
        assert_eq!(got.rows, want.rows, "{mode}: duplicate or missing rows");
    }
}

#[test]
fn a_kill_in_the_middle_leaves_the_previous_version_and_the_next_run_recovers() {
    let fx = Fixture::new(&["2026-10-01"], 20_000);
    let module = common::guest("examples/clean_orders");
    let table = fx.table("t");
    let first = ["--mode", "append", "--params", r#"{"min_amount": 900}"#];
    // Version 1 holds an earlier output of the slice.
    ok(run(&fx, &module, "2026-10-01", &table, &first));
    let before = read_table(&table, None);
    // Killed after executing and storing the manifest, just before the commit.
    let child = spawn_run(
        &fx,
        &module,
        &table,
        &["--mode", "append"],
        &[("IDEM_FAULT_SLEEP_MS", "before-commit:30000")],
    );
    let t = Instant::now();
    while std::fs::read_dir(table.join("_idem/manifests"))
        .unwrap()
        .count()
        < 2
    {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "run never reached the commit"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut child = child;
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(
        read_table(&table, None),
        before,
        "a killed run changed the table"
    );
    // Killed at many points of a run, commit included: the table is always
    // readable and either before or after the commit, never in between.
    for delay_ms in [150u64, 300, 450, 600, 800, 1000, 1300] {
        let mut child = spawn_run(&fx, &module, &table, &["--mode", "append"], &[]);
        std::thread::sleep(Duration::from_millis(delay_ms));
        let _ = child.kill();
        let _ = child.wait();
        let now = read_table(&table, None);
        assert!(
            now.version == 1 || now.version == 2,
            "version {} after a kill",
            now.version
        );
        if now.version == 1 {
            assert_eq!(now.rows, before.rows);
        }
    }
    // The next run completes, and the table holds exactly one copy.
    let out = ok(run(
        &fx,
        &module,
        "2026-10-01",
        &table,
        &["--mode", "append"],
    ));
    assert!(field(&out, "result:").contains("version 2"), "{out}");
    let after = read_table(&table, None);
    let clean = fx.table("clean");
    ok(run(&fx, &module, "2026-10-01", &clean, &first));
    ok(run(
        &fx,
        &module,
        "2026-10-01",
        &clean,
        &["--mode", "append"],
    ));
    assert_eq!(after.rows, read_table(&clean, None).rows);
}

#[test]
fn verify_matches_a_good_manifest_and_names_what_changed() {
    let fx = Fixture::new(&["2026-10-01"], 3_000);
    let module = common::guest("examples/dedup_events");
    let table = fx.table("t");
    let out = ok(run(
        &fx,
        &module,
        "2026-10-01",
        &table,
        &["--mode", "append"],
    ));
    let manifest = manifest_path(&table, &out);
    let (code, stdout, err) = common::idem(&["verify", &s(&manifest)]);
    assert_eq!(code, 0, "{stdout}{err}");
    assert!(
        stdout.contains(&format!(
            "match: re-run produced {}",
            field(&out, "output:").split(' ').next().unwrap()
        )),
        "{stdout}"
    );

    // The stored module is swapped for another transform.
    let stored = std::fs::read_dir(table.join("_idem/modules"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let original = std::fs::read(&stored).unwrap();
    std::fs::copy(common::guest("examples/clean_orders"), &stored).unwrap();
    let (code, stdout, _) = common::idem(&["verify", &s(&manifest)]);
    assert_eq!(code, 1, "{stdout}");
    assert!(
        stdout.contains("does not match its digest") && stdout.contains("swapped"),
        "{stdout}"
    );
    std::fs::write(&stored, original).unwrap();

    // An input file is modified.
    let f = fx.data().join("date=2026-10-01/part-00000.parquet");
    let mut bytes = std::fs::read(&f).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xff;
    std::fs::write(&f, bytes).unwrap();
    let (code, stdout, _) = common::idem(&["verify", &s(&manifest)]);
    assert_eq!(code, 1, "{stdout}");
    assert!(
        stdout.contains("input date=2026-10-01/part-00000.parquet changed"),
        "{stdout}"
    );
}

#[test]
fn bad_input_is_a_clear_error_and_commits_nothing() {
    let fx = Fixture::new(&["2026-10-01", "2026-10-02"], 1_000);
    let module = common::guest("examples/daily_revenue");
    let table = fx.table("t");
    ok(run(&fx, &module, "2026-10-02", &table, &[]));
    let before = read_table(&table, None);

    std::fs::write(
        fx.data().join("date=2026-10-01/part-00002.parquet"),
        b"PAR1 garbage PAR1",
    )
    .unwrap();
    let (code, _, err) = run(&fx, &module, "2026-10-01", &table, &[]);
    assert_eq!(code, 2);
    assert!(
        err.contains("part-00002.parquet") && err.contains("not a readable Parquet file"),
        "{err}"
    );

    let (code, _, err) = run(&fx, &module, "2099-01-01", &table, &[]);
    assert_eq!(code, 2);
    assert!(
        err.contains("no partition directory date=2099-01-01"),
        "{err}"
    );

    std::fs::create_dir_all(fx.data().join("date=2026-12-31")).unwrap();
    let (code, _, err) = run(&fx, &module, "2026-12-31", &table, &[]);
    assert_eq!(code, 2);
    assert!(
        err.contains("matches no input files") && err.contains("no *.parquet files"),
        "{err}"
    );
    assert_eq!(
        read_table(&table, None),
        before,
        "a failed run changed the table"
    );

    // A place that cannot be written is a storage failure (4); a location
    // that is no location at all, a usage error (2).
    let (code, _, err) = run(
        &fx,
        &module,
        "2026-10-02",
        Path::new("/proc/idem-no-such/table"),
        &[],
    );
    assert_eq!(code, 4, "{err}");
    assert!(err.contains("cannot be reached"), "{err}");
    let bad = "nosuchscheme://bucket/table";
    let (code, _, err) = run(&fx, &module, "2026-10-02", Path::new(bad), &[]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains(bad) && err.contains("not a usable location"),
        "{err}"
    );
}

#[test]
fn a_pinned_delta_version_is_a_slice_and_log_lists_the_runs() {
    let fx = Fixture::new(&["2026-10-01"], 3_000);
    let dedup = common::guest("examples/dedup_events");
    let revenue = common::guest("examples/daily_revenue");
    let events = fx.table("events");
    ok(run(&fx, &dedup, "2026-10-01", &events, &[]));
    // Read the deduplicated events at version 1 and aggregate them.
    let target = fx.table("revenue");
    let args = [
        "run",
        "--module",
        &s(&revenue),
        "--input",
        &s(&events),
        "--delta-version",
        "1",
        "--partition",
        "date=2026-10-01",
        "--table",
        &s(&target),
        "--logical-date",
        "2026-10-01",
    ];
    let out = ok(common::idem(&args));
    assert_eq!(field(&out, "result:"), "committed version 1");
    assert_eq!(field(&out, "slice:"), "date=2026-10-01");
    // The replay reads the pinned snapshot again, partition values included.
    let manifest = field(&out, "manifest:");
    let verified = ok(common::idem(&["verify", &manifest]));
    assert!(verified.contains("match: re-run produced"), "{verified}");
    // A new version of the source does not change what version 1 pins.
    let again = ok(common::idem(&args));
    assert!(field(&again, "result:").starts_with("unchanged"), "{again}");

    let (code, log, _) = common::idem(&["log", &s(&target)]);
    assert_eq!(code, 0);
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| l.starts_with("date=2026-10-01"))
        .collect();
    assert_eq!(lines.len(), 2, "{log}");
    assert!(
        lines[0].contains("committed v1") && lines[1].contains("unchanged since v1"),
        "{log}"
    );
}

/// `idem publish` stores a module beside the table; a run names it by its
/// digest anywhere the table is reachable, reads it from `_idem/modules/`
/// and refuses it unless it hashes to that digest. `--origin` is kept in
/// the run log and hashed nowhere.
#[test]
fn a_published_module_runs_by_digest_and_a_swapped_one_is_refused() {
    let fx = Fixture::new(&["2026-10-01", "2026-10-02"], 2_000);
    let module = common::guest("examples/clean_orders");
    let table = fx.table("orders_clean");
    let (code, out, err) = common::idem(&["publish", &s(&module), "--table", &s(&table), "--json"]);
    assert_eq!(code, 0, "{out}{err}");
    let published: serde_json::Value = serde_json::from_str(&out).unwrap();
    common::check_schemas(&[("publish", &out)]).unwrap_or_else(|e| panic!("{e}"));
    let digest = published["module"].as_str().unwrap().to_string();
    let stored = table
        .join("_idem/modules")
        .join(format!("{}.wasm", &digest[7..]));
    assert_eq!(
        std::fs::read(&stored).unwrap(),
        std::fs::read(&module).unwrap()
    );

    // By digest and by path: the same run key (a memo hit the other way).
    let by_digest = ok(run(
        &fx,
        Path::new(&digest),
        "2026-10-01",
        &table,
        &["--origin", "pod-a"],
    ));
    assert_eq!(field(&by_digest, "result:"), "committed version 1");
    let by_path = ok(run(
        &fx,
        &module,
        "2026-10-01",
        &table,
        &["--origin", "pod-b"],
    ));
    assert!(field(&by_path, "result:").contains("(memo"), "{by_path}");
    assert_eq!(field(&by_digest, "run key:"), field(&by_path, "run key:"));
    let (_, log, _) = common::idem(&["log", &s(&table), "--json"]);
    common::check_schemas(&[("log", &log)]).unwrap_or_else(|e| panic!("{e}"));
    let log: serde_json::Value = serde_json::from_str(&log).unwrap();
    let origins: Vec<&str> = log["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["origin"].as_str().unwrap())
        .collect();
    assert_eq!(origins, ["pod-a", "pod-b"]);

    // A digest nothing was published under names the fix.
    let unknown = format!("sha256:{}", "0".repeat(64));
    let (code, _, err) = run(&fx, Path::new(&unknown), "2026-10-02", &table, &[]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("is not stored at") && err.contains("idem publish"),
        "{err}"
    );
    // Nor on a table that does not exist yet.
    let (code, _, err) = run(&fx, Path::new(&digest), "2026-10-02", &fx.table("new"), &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("is not stored at"), "{err}");
    // A malformed digest.
    let (code, _, err) = run(&fx, Path::new("sha256:abc"), "2026-10-02", &table, &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("64 lowercase hex"), "{err}");

    // Someone who can write `_idem/` swaps the stored module for another
    // (valid) one: the run refuses it, naming both digests.
    let other = common::guest("examples/daily_revenue");
    std::fs::copy(&other, &stored).unwrap();
    let (code, _, err) = run(&fx, Path::new(&digest), "2026-10-02", &table, &[]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("was swapped or corrupted") && err.contains(&digest),
        "{err}"
    );
    // Junk, WAT text and an object over the module limit are the same
    // finding, found before anything parses them.
    for (junk, what) in [
        (b"not a module at all".to_vec(), "it hashes to"),
        (b"(component)".to_vec(), "it hashes to"),
        (vec![0u8; 65 << 20], "over the 64 MiB module limit"),
    ] {
        std::fs::write(&stored, &junk).unwrap();
        let (code, _, err) = run(&fx, Path::new(&digest), "2026-10-02", &table, &[]);
        assert_eq!(code, 2, "{err}");
        assert!(
            err.contains("was swapped or corrupted") && err.contains(what),
            "{err}"
        );
    }
    // An origin label that would size a log line unchecked is refused.
    let long = "o".repeat(513);
    let (code, _, err) = run(&fx, &module, "2026-10-02", &table, &["--origin", &long]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("origin label is 513 bytes"), "{err}");
    // Publishing again puts the right bytes back.
    let (code, out, err) = common::idem(&["publish", &s(&module), "--table", &s(&table)]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains(&digest), "{out}");
    let again = ok(run(&fx, Path::new(&digest), "2026-10-02", &table, &[]));
    assert_eq!(field(&again, "result:"), "committed version 2");
    // A module that cannot run is refused before anything is stored.
    let clock = common::root().join("tests/wat/import-wall-clock.wat");
    let (code, _, err) = common::idem(&["publish", &s(&clock), "--table", &s(&table)]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("module rejected"), "{err}");
    let kept = std::fs::read_dir(table.join("_idem/modules"))
        .unwrap()
        .count();
    assert_eq!(kept, 1, "only the published module is stored");
}

#[test]
fn a_new_output_column_is_refused_unless_appended_and_earlier_slices_stay_current() {
    let fx = Fixture::new(&["2026-10-01", "2026-10-02", "2026-10-03"], 3_000);
    let module = common::guest("examples/clean_orders");
    let table = fx.table("clean");
    let append = ["--on-schema-change", "append-new-columns"];
    assert_eq!(
        field(&ok(run(&fx, &module, "2026-10-01", &table, &[])), "result:"),
        "committed version 1"
    );
    // Upstream added a column; clean_orders passes it through.
    common::change_input_columns(&fx.data(), "2026-10-02", false);
    let (code, _, err) = run(&fx, &module, "2026-10-02", &table, &[]);
    assert_eq!(code, 3, "{err}");
    assert!(
        err.contains("`coupon`") && err.contains("--on-schema-change append-new-columns"),
        "{err}"
    );
    assert_eq!(read_table(&table, None).version, 1, "nothing committed");
    let out = ok(run(&fx, &module, "2026-10-02", &table, &append));
    assert_eq!(field(&out, "result:"), "committed version 2");
    // The policy is in the run spec (and so in the run key).
    let manifest = std::fs::read_to_string(manifest_path(&table, &out)).unwrap();
    assert!(
        manifest.contains(r#""onSchemaChange":"append-new-columns""#),
        "{manifest}"
    );
    // One commit: the new schema and the rows that have the column.
    let log = std::fs::read_to_string(table.join("_delta_log/00000000000000000002.json")).unwrap();
    assert!(
        log.contains("\"metaData\"") && log.contains("\"add\""),
        "{log}"
    );
    let first_id = |v: &str| {
        v.lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .find_map(|a| a["metaData"]["id"].as_str().map(str::to_string))
    };
    let created =
        std::fs::read_to_string(table.join("_delta_log/00000000000000000000.json")).unwrap();
    assert_eq!(first_id(&log), first_id(&created), "the table keeps its id");
    // Both independent readers: day 1's rows read null in the new column.
    let view = read_table(&table, None);
    let rows: Vec<serde_json::Value> = view
        .rows
        .iter()
        .map(|r| serde_json::from_str(r).unwrap())
        .collect();
    let (day1, day2): (Vec<_>, Vec<_>) = rows.iter().partition(|r| r["date"] == "2026-10-01");
    assert!(!day1.is_empty() && !day2.is_empty());
    assert!(day1.iter().all(|r| r["coupon"].is_null()));
    assert!(day2.iter().any(|r| r["coupon"].is_string()));
    assert!(day2.iter().any(|r| r["coupon"].is_null()));
    // Day 1 is still current: its rows read as committed (a memo hit, no
    // recommit as drift), and audit proves both slices.
    let out = ok(run(&fx, &module, "2026-10-01", &table, &[]));
    assert!(field(&out, "result:").contains("memo"), "{out}");
    // Executed again, its output lacks the new column: only the policy
    // lets it in (null there), and then it is unchanged.
    let (code, _, err) = run(&fx, &module, "2026-10-01", &table, &["--force"]);
    assert_eq!(code, 3, "{err}");
    assert!(
        err.contains("--on-schema-change append-new-columns"),
        "{err}"
    );
    let forced = [&append[..], &["--force"]].concat();
    let out = ok(run(&fx, &module, "2026-10-01", &table, &forced));
    assert_eq!(field(&out, "result:"), "unchanged since version 1", "{out}");
    let (code, out, err) = common::idem(&["audit", &s(&table)]);
    assert_eq!(code, 0, "{out}\n{err}");
    // Rerunning the changed day commits nothing either.
    let out = ok(run(&fx, &module, "2026-10-02", &table, &append));
    assert!(field(&out, "result:").contains("memo"), "{out}");
    // A column whose type changed is refused whatever the policy.
    common::change_input_columns(&fx.data(), "2026-10-03", true);
    let (code, _, err) = run(&fx, &module, "2026-10-03", &table, &append);
    assert_eq!(code, 3, "{err}");
    assert!(
        err.contains("`order_id`") && err.contains("never changes a column's type"),
        "{err}"
    );
    assert_eq!(read_table(&table, None).version, 2);
}

#[test]
fn a_later_read_of_files_from_both_sides_of_an_append_reads_the_new_columns_null() {
    let fx = Fixture::new(&["2026-10-01", "2026-10-02"], 1_000);
    let clean_orders = common::guest("examples/clean_orders");
    let dedup = common::guest("examples/dedup_events");
    let clean = fx.table("clean");
    ok(run(&fx, &clean_orders, "2026-10-01", &clean, &[]));
    common::change_input_columns(&fx.data(), "2026-10-02", false);
    let append = ["--on-schema-change", "append-new-columns"];
    ok(run(&fx, &clean_orders, "2026-10-02", &clean, &append));
    // The whole table at version 2: day 1's files lack `coupon`, day 2's
    // have it. Read as the table's columns, as every engine reads it.
    let read = |version: &str, slice: &[&str], target: &Path, extra: &[&str]| {
        let mut args = vec![
            "run",
            "--module",
            &s(&dedup),
            "--input",
            &s(&clean),
            "--table-version",
            version,
            "--table",
            &s(target),
        ]
        .into_iter()
        .map(str::to_string)
        .collect::<Vec<String>>();
        args.extend(slice.iter().chain(extra).map(|a| a.to_string()));
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        common::idem(&refs)
    };
    let whole = fx.table("whole");
    let out = ok(read("2", &[], &whole, &["--mode", "append"]));
    let json = |rows: &[String]| -> Vec<serde_json::Value> {
        rows.iter()
            .map(|r| serde_json::from_str(r).unwrap())
            .collect()
    };
    let upstream = json(&read_table(&clean, None).rows);
    let got = json(&read_table(&whole, None).rows);
    assert!(!got.is_empty() && got.iter().all(|r| upstream.contains(r)));
    let (day1, day2): (Vec<_>, Vec<_>) = got.iter().partition(|r| r["date"] == "2026-10-01");
    assert!(!day1.is_empty() && day1.iter().all(|r| r["coupon"].is_null()));
    assert!(day2.iter().any(|r| r["coupon"].is_string()));
    // Its manifest replays: the same files read as the same columns.
    let (code, stdout, err) = common::idem(&["verify", &s(&manifest_path(&whole, &out))]);
    assert_eq!(code, 0, "{stdout}{err}");
    // Day 1 alone, at version 2, has the column (all null); at version 1,
    // before it was appended, it has not.
    let day = ["--partition", "date=2026-10-01"];
    let at2 = fx.table("day1-at-2");
    ok(read("2", &day, &at2, &[]));
    let rows = json(&read_table(&at2, None).rows);
    assert!(
        !rows.is_empty()
            && rows
                .iter()
                .all(|r| r["coupon"].is_null() && r.get("coupon").is_some())
    );
    let at1 = fx.table("day1-at-1");
    ok(read("1", &day, &at1, &[]));
    let rows = json(&read_table(&at1, None).rows);
    assert!(!rows.is_empty() && rows.iter().all(|r| r.get("coupon").is_none()));
    // The table read whole as a side input, beside a slice.
    let sided = fx.table("sided");
    let side = format!("upstream={}", s(&clean));
    ok(run(&fx, &dedup, "2026-10-01", &sided, &["--side", &side]));
}

#[test]
fn a_merge_that_would_add_columns_to_a_delta_table_is_refused_by_name() {
    let fx = Fixture::new(&["2026-10-01", "2026-10-02"], 500);
    let module = common::guest("examples/dedup_events");
    let table = fx.table("merged");
    let merge = ["--mode", "merge", "--key", "event_id"];
    ok(run(&fx, &module, "2026-10-01", &table, &merge));
    common::change_input_columns(&fx.data(), "2026-10-02", false);
    let mut args = merge.to_vec();
    args.extend(["--on-schema-change", "append-new-columns"]);
    let (code, _, err) = run(&fx, &module, "2026-10-02", &table, &args);
    assert_eq!(code, 3, "{err}");
    assert!(
        err.contains("not supported for Delta merge tables") && err.contains("`coupon`"),
        "{err}"
    );
    assert_eq!(read_table(&table, None).version, 1);
}

#[test]
fn a_slice_an_older_idem_committed_stays_current_after_columns_are_appended() {
    let fx = Fixture::new(&["2026-10-01", "2026-10-02"], 1_000);
    let module = common::guest("examples/clean_orders");
    let table = fx.table("clean");
    ok(run(&fx, &module, "2026-10-01", &table, &[]));
    // An idem before column lists recorded the shape alone.
    let first = table.join("_delta_log/00000000000000000001.json");
    let lines: Vec<String> = std::fs::read_to_string(&first)
        .unwrap()
        .lines()
        .map(|l| {
            let mut a: serde_json::Value = serde_json::from_str(l).unwrap();
            if let Some(c) = a.get_mut("commitInfo").and_then(|c| c.as_object_mut()) {
                assert!(c.remove("idem.columns").is_some(), "{l}");
            }
            a.to_string()
        })
        .collect();
    std::fs::write(&first, lines.join("\n") + "\n").unwrap();
    common::change_input_columns(&fx.data(), "2026-10-02", false);
    let append = ["--on-schema-change", "append-new-columns"];
    ok(run(&fx, &module, "2026-10-02", &table, &append));
    // The table at the slice's version gives its columns: still current.
    let out = ok(run(&fx, &module, "2026-10-01", &table, &[]));
    assert!(field(&out, "result:").contains("memo"), "{out}");
    let (code, out, err) = common::idem(&["audit", &s(&table)]);
    assert_eq!(code, 0, "{out}\n{err}");
}

/// Run `code` with the tests' Python (PyPI deltalake + pyarrow), `args`
/// as its `sys.argv[1:]`; its stdout.
fn python(code: &str, args: &[&str]) -> String {
    let out = Command::new(common::python())
        .arg("-c")
        .arg(code)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "python failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn a_table_that_declares_its_date_partition_a_date_gets_dates() {
    let fx = Fixture::new(&["2026-10-01", "2026-10-02"], 800);
    let module = common::guest("examples/clean_orders");
    let table = fx.table("typed");
    // As Spark's CREATE TABLE ... (..., date DATE) PARTITIONED BY (date).
    python(
        r#"
import sys, pyarrow as pa
from deltalake import DeltaTable
schema = pa.schema([
    pa.field("event_id", pa.string(), False), pa.field("order_id", pa.int64(), False),
    pa.field("customer", pa.string(), False), pa.field("amount", pa.float64(), True),
    pa.field("quantity", pa.int64(), False), pa.field("status", pa.string(), False),
    pa.field("total", pa.float64(), True), pa.field("date", pa.date32(), True),
])
DeltaTable.create(sys.argv[1], schema=schema, partition_by=["date"])
"#,
        &[&s(&table)],
    );
    for day in ["2026-10-01", "2026-10-02"] {
        let out = ok(run(&fx, &module, day, &table, &[]));
        assert!(field(&out, "result:").starts_with("committed"), "{out}");
    }
    let read = python(
        r#"
import sys, json
import polars as pl
t = pl.read_delta(sys.argv[1])
dates = sorted({d.isoformat() for d in t["date"].to_list()})
print(json.dumps({"type": str(t.schema["date"]), "dates": dates, "rows": t.height}))
"#,
        &[&s(&table)],
    );
    let read: serde_json::Value = serde_json::from_str(&read).unwrap();
    assert_eq!(read["type"], "Date", "{read}");
    assert_eq!(
        read["dates"],
        serde_json::json!(["2026-10-01", "2026-10-02"])
    );
    assert!(read["rows"].as_u64().unwrap() > 0);
    // The slices own their partitions as text-partitioned ones do.
    let out = ok(run(&fx, &module, "2026-10-01", &table, &[]));
    assert!(field(&out, "result:").contains("memo"), "{out}");
    let out = ok(run(&fx, &module, "2026-10-01", &table, &["--force"]));
    assert!(field(&out, "result:").starts_with("unchanged"), "{out}");
    let (code, out, err) = common::idem(&["audit", &s(&table)]);
    assert_eq!(code, 0, "{out}\n{err}");
}
