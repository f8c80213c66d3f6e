//! What a data team runs every day on top of single idempotent runs:
//! backfills over date ranges, interrupted and restarted.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn backfill_args<'a>(module: &'a str, data: &'a str, table: &'a str, to: &'a str) -> Vec<&'a str> {
    vec![
        "backfill",
        "--module",
        module,
        "--input",
        data,
        "--table",
        table,
        "--from",
        "2026-10-01",
        "--to",
        to,
        "--jobs",
        "2",
        "--batch-rows",
        "1000",
    ]
}

/// `idem ARGS --json`: (code, parsed stdout, raw stdout, stderr).
fn idem_json(args: &[&str]) -> (i32, Value, String, String) {
    let mut all = args.to_vec();
    all.push("--json");
    let (code, out, err) = common::idem(&all);
    let v = serde_json::from_str(&out).unwrap_or_else(|e| panic!("no JSON ({e}):\n{out}\n{err}"));
    (code, v, out, err)
}

/// How many commits of the Delta log name each idem slice.
fn commits_per_slice(table: &Path) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(table.join("_delta_log")).unwrap() {
        let path = e.unwrap().path();
        if path.extension().is_none_or(|x| x != "json") {
            continue;
        }
        for line in std::fs::read_to_string(&path).unwrap().lines() {
            let v: Value = serde_json::from_str(line).unwrap();
            if let Some(slice) = v["commitInfo"]["idem.slice"].as_str() {
                *out.entry(slice.to_string()).or_default() += 1;
            }
        }
    }
    out
}

fn ten_days(dir: &Path) -> std::path::PathBuf {
    let data = dir.join("orders");
    for d in 1..=10 {
        common::orders(&data, &format!("2026-10-{d:02}"), 2_000, 2);
    }
    data
}

/// A 10-day backfill SIGKILLed partway and started again ends with every
/// partition committed exactly once, and the table (read back by the
/// independent readers) equal to an uninterrupted backfill's.
#[test]
fn a_killed_backfill_restarted_equals_an_uninterrupted_one() {
    let dir = tempfile::tempdir().unwrap();
    let module = common::guest("examples/daily_revenue");
    let data = ten_days(dir.path());
    let clean = dir.path().join("clean");
    let (code, v, raw, err) = idem_json(&backfill_args(
        s(&module),
        s(&data),
        s(&clean),
        "2026-10-10",
    ));
    assert_eq!(code, 0, "{raw}{err}");
    assert_eq!(v["counts"]["committed"], 10, "{raw}");

    // Each slice sleeps just before its commit: kill the backfill once
    // three slices are committed, while others sit at that point.
    let killed = dir.path().join("killed");
    let log = killed.join("_idem/log");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_idem"))
        .args(backfill_args(
            s(&module),
            s(&data),
            s(&killed),
            "2026-10-10",
        ))
        .env("IDEM_CACHE_DIR", common::test_cache())
        .env("IDEM_FAULT_SLEEP_MS", "before-commit:400")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let committed = || std::fs::read_dir(&log).map(|d| d.count()).unwrap_or(0);
    while committed() < 3 {
        if start.elapsed() > Duration::from_secs(120) || child.try_wait().unwrap().is_some() {
            let _ = child.kill();
            panic!("the backfill ended or stalled before the kill");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    // Slices with a run-log entry have their memo entry too (it is written
    // first): those must be memo hits, not executed again.
    let logged = committed();
    let before = commits_per_slice(&killed);
    assert!(
        before.len() >= 3 && before.len() < 10,
        "the kill was not partway: {before:?}"
    );

    let (code, v, raw, err) = idem_json(&backfill_args(
        s(&module),
        s(&data),
        s(&killed),
        "2026-10-10",
    ));
    assert_eq!(code, 0, "{raw}{err}");
    assert_eq!(v["ok"], true);
    let c = &v["counts"];
    let n = |k: &str| c[k].as_u64().unwrap() as usize;
    assert_eq!(n("committed") + n("memo") + n("unchanged"), 10, "{raw}");
    assert!(n("memo") + n("unchanged") >= before.len(), "{raw}");
    assert!(n("memo") >= logged, "{logged} slices were logged: {raw}");
    assert_eq!(
        n("committed"),
        10 - before.len(),
        "redid committed slices: {raw}"
    );
    // Every slice committed once, and nothing else.
    let after = commits_per_slice(&killed);
    assert_eq!(after.len(), 10, "{after:?}");
    assert!(
        after.values().all(|n| *n == 1),
        "a slice committed twice: {after:?}"
    );
    let (a, b) = (
        common::read_table(&clean, None),
        common::read_table(&killed, None),
    );
    assert_eq!(a.rows, b.rows, "the restarted backfill's table differs");
    assert_eq!(a.version, b.version);
    common::check_schemas(&[("backfill", &raw)]).unwrap_or_else(|e| panic!("{e}"));
}

/// A Parquet file whose `amount` is text: clean_orders refuses it in
/// `open` (a guest failure, exit 3).
fn text_amounts(path: &Path) {
    use arrow::array::{Int64Array, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};
    use std::sync::Arc;
    let schema = Arc::new(Schema::new(vec![
        Field::new("order_id", DataType::Int64, false),
        Field::new("amount", DataType::Utf8, true),
        Field::new("quantity", DataType::Int64, false),
    ]));
    let batch = arrow::array::RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(Int64Array::from(vec![1, 2])),
            Arc::new(StringArray::from(vec!["1.5", "2.5"])),
            Arc::new(Int64Array::from(vec![1, 1])),
        ],
    )
    .unwrap();
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let mut w =
        parquet::arrow::ArrowWriter::try_new(std::fs::File::create(path).unwrap(), schema, None)
            .unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
}

/// A malformed slice, a guest failure and a missing date do not stop the
/// others; each slice gets a line, the summary counts them, the exit code
/// is the most severe failure's; rerun, nothing committed is redone. On a
/// terminal the live bar shows slices, their results and an ETA.
#[test]
fn a_failing_slice_does_not_stop_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let module = common::guest("examples/clean_orders");
    let data = dir.path().join("orders");
    for d in ["2026-10-01", "2026-10-02", "2026-10-04"] {
        common::orders(&data, d, 1_000, 1);
    }
    // 10-03 has no partition; 10-04 gets a file that is not Parquet inside;
    // 10-05's amounts are text, which the transform refuses.
    std::fs::write(
        data.join("date=2026-10-04/part-00009.parquet"),
        b"PAR1 this is not a parquet file PAR1",
    )
    .unwrap();
    text_amounts(&data.join("date=2026-10-05/part-00000.parquet"));
    let table = dir.path().join("t");
    let args = backfill_args(s(&module), s(&data), s(&table), "2026-10-05");
    let (code, out, err) = common::idem(&args);
    assert_eq!(
        code, 3,
        "the guest failure (3) outranks the input ones (2):\n{out}{err}"
    );
    for (d, want) in [
        ("2026-10-01", "committed version"),
        ("2026-10-02", "committed version"),
        ("2026-10-03", "FAILED"),
        ("2026-10-04", "FAILED"),
        ("2026-10-05", "FAILED"),
    ] {
        let line = err
            .lines()
            .find(|l| l.starts_with(&format!("date={d}")))
            .unwrap_or_else(|| panic!("no line for {d}:\n{err}"));
        assert!(line.contains(want), "{line}");
    }
    assert!(err.contains("not a readable Parquet file"), "{err}");
    assert!(err.contains("`amount` must be Float64"), "{err}");
    assert!(
        out.contains("SLICE") && out.contains("5 slices: 2 committed"),
        "{out}"
    );
    assert!(
        out.contains("1 missing") && out.contains("2 failed"),
        "{out}"
    );

    // Rerun with --skip-missing: nothing committed is redone; two still fail.
    let mut skip = args.clone();
    skip.push("--skip-missing");
    let (code, v, raw, err) = idem_json(&skip);
    assert_eq!(code, 3, "{raw}{err}");
    assert_eq!(v["counts"]["memo"], 2, "{raw}");
    assert_eq!(v["counts"]["committed"], 0, "{raw}");
    assert_eq!(v["slices"][3]["status"], "failed");
    common::check_schemas(&[("backfill", &raw)]).unwrap_or_else(|e| panic!("{e}"));

    // Fixed: the last slices commit, the exit code is 0.
    std::fs::remove_file(data.join("date=2026-10-04/part-00009.parquet")).unwrap();
    std::fs::remove_file(data.join("date=2026-10-05/part-00000.parquet")).unwrap();
    common::orders(&data, "2026-10-05", 1_000, 1);
    let (code, v, raw, err) = idem_json(&skip);
    assert_eq!(code, 0, "{raw}{err}");
    assert_eq!(v["counts"]["committed"], 2, "{raw}");
    assert_eq!(v["counts"]["missing"], 1, "{raw}");

    // A wrong partition column: every date is missing, which is no success.
    let mut wrong = skip.clone();
    wrong.extend(["--column", "day"]);
    let (code, v, raw, _) = idem_json(&wrong);
    assert_eq!(code, 2, "{raw}");
    assert_eq!(v["ok"], false);

    // On a terminal: the live bar.
    let cmd = format!(
        "{} {} --skip-missing",
        env!("CARGO_BIN_EXE_idem"),
        args.join(" ")
    );
    let tty = std::process::Command::new("script")
        .args(["-q", "-e", "-c", &cmd, "/dev/null"])
        .env("TERM", "xterm-256color")
        .env("IDEM_CACHE_DIR", common::test_cache())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&tty.stdout);
    assert!(tty.status.success(), "{text}");
    for want in [
        "5/5 slices",
        "ETA",
        "4 memo",
        "rows/s",
        "5 slices: 0 committed, 4 memo",
    ] {
        assert!(text.contains(want), "`{want}` not on the terminal:\n{text}");
    }
}

/// Ctrl-C: the running slice finishes, no new one starts, exit 130; the
/// same command then finishes the rest.
#[test]
fn an_interrupted_backfill_stops_starting_slices_and_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let module = common::guest("examples/clean_orders");
    let data = dir.path().join("orders");
    for d in 1..=6 {
        common::orders(&data, &format!("2026-10-{d:02}"), 500, 1);
    }
    let table = dir.path().join("t");
    let mut args = backfill_args(s(&module), s(&data), s(&table), "2026-10-06");
    assert_eq!(args[11], "--jobs");
    args[12] = "1";
    args.push("--json");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_idem"))
        .args(&args)
        .env("IDEM_CACHE_DIR", common::test_cache())
        .env("IDEM_FAULT_SLEEP_MS", "before-commit:300")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let log = table.join("_idem/log");
    let start = Instant::now();
    while std::fs::read_dir(&log).map(|d| d.count()).unwrap_or(0) < 1 {
        if start.elapsed() > Duration::from_secs(120) || child.try_wait().unwrap().is_some() {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "no slice finished:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    // SAFETY: a signal to our own child.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    let out = child.wait_with_output().unwrap();
    let raw = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(130),
        "{raw}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_str(&raw).unwrap();
    let ns = v["counts"]["not-started"].as_u64().unwrap();
    let done = v["counts"]["committed"].as_u64().unwrap();
    assert!(ns >= 1 && done >= 1 && ns + done == 6, "{raw}");
    common::check_schemas(&[("backfill", &raw)]).unwrap_or_else(|e| panic!("{e}"));

    args.pop();
    let (code, v, raw, err) = idem_json(&args);
    assert_eq!(code, 0, "{raw}{err}");
    assert_eq!(v["counts"]["memo"].as_u64().unwrap(), done, "{raw}");
    assert_eq!(v["counts"]["committed"].as_u64().unwrap(), ns, "{raw}");
}

/// Every file below the table except idem's own `_idem/` folder: the
/// Delta log and the data files.
fn published(table: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut todo = vec![table.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.ends_with("_idem") {
                continue;
            }
            if p.is_dir() {
                todo.push(p);
            } else {
                out.push(p.display().to_string());
            }
        }
    }
    out.sort();
    out
}

/// Write-audit-publish: an output that fails an expectation publishes
/// nothing (no version, no data file), the report names the expectation
/// and offending rows; fixed input, the same command publishes. Passing
/// verdicts are in the manifest.
#[test]
fn an_output_that_fails_an_expectation_publishes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let module = common::guest("examples/clean_orders");
    let data = dir.path().join("orders");
    common::orders(&data, "2026-10-01", 1_000, 2);
    common::orders(&data, "2026-10-02", 3_000, 2);
    let table = dir.path().join("t");
    let run = |date: &str, expect: &[&str]| {
        let partition = format!("date={date}");
        let mut args = vec![
            "run",
            "--module",
            s(&module),
            "--input",
            s(&data),
            "--partition",
            &partition,
            "--table",
            s(&table),
        ];
        for e in expect {
            args.extend(["--expect", e]);
        }
        let mut json = args.clone();
        json.push("--json");
        let (code, out, err) = common::idem(&json);
        (code, out, err)
    };
    let (code, out, err) = run("2026-10-01", &["not_null(customer)", "rows(1..)"]);
    assert_eq!(code, 0, "{out}{err}");
    let first: Value = serde_json::from_str(&out).unwrap();
    let manifest = first["manifest"]
        .as_str()
        .unwrap()
        .trim_start_matches("file://")
        .to_string();
    let (_, stored, _) = common::idem(&["show", &manifest, "--json"]);
    let stored: Value = serde_json::from_str(&stored).unwrap();
    assert_eq!(
        stored["predicate"]["run"]["expectations"],
        serde_json::json!(["not_null(customer)", "rows(1..)"])
    );
    let audits = &stored["predicate"]["result"]["audits"];
    assert_eq!(audits[0]["passed"], true, "{stored}");
    assert_eq!(audits[0]["observed"], "0 null row(s)");
    common::check_schemas(&[("manifest", &stored.to_string())]).unwrap_or_else(|e| panic!("{e}"));

    let before = published(&table);
    let version = common::read_table(&table, None).version;
    let (code, out, err) = run(
        "2026-10-02",
        &["rows(..2000)", "in(status, paid)", "not_null(order_id)"],
    );
    assert_eq!(code, 1, "a failed expectation is exit 1:\n{out}{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["error"]["kind"], "check", "{out}");
    common::check_schemas(&[("error", &out)]).unwrap_or_else(|e| panic!("{e}"));
    assert!(err.contains("failed 2 of 3 expectation(s)"), "{err}");
    assert!(
        err.contains("rows(..2000): ") && err.contains("nothing was published"),
        "{err}"
    );
    let example = err
        .lines()
        .find(|l| l.trim_start().starts_with("e.g. {"))
        .unwrap_or_else(|| panic!("no example row:\n{err}"));
    assert!(
        example.contains("status: ") && !example.contains("status: paid"),
        "{example}"
    );
    assert!(
        !err.contains("not_null(order_id):"),
        "a passing expectation reported:\n{err}"
    );
    assert_eq!(
        published(&table),
        before,
        "a failed audit wrote to the table"
    );
    assert_eq!(common::read_table(&table, None).version, version);

    // The input fixed (fewer rows, only paid orders are not what sample
    // makes, so that check goes): the same audit-gated run publishes.
    common::orders(&data, "2026-10-02", 1_500, 2);
    let (code, out, err) = run("2026-10-02", &["rows(..2000)", "not_null(order_id)"]);
    assert_eq!(code, 0, "{out}{err}");
    let after = common::read_table(&table, None);
    assert_eq!(after.version, version + 1);
}

/// Write-audit-publish with an audit module: a transform that reads the
/// staged output and returns `pass`/`reason` rows. Failing, it publishes
/// nothing and exits 1 with its reason; passing, its verdict and digest
/// are in the manifest.
#[test]
fn an_audit_module_gates_publishing() {
    let dir = tempfile::tempdir().unwrap();
    let module = common::guest("examples/clean_orders");
    let audit = common::guest("examples/audit_totals");
    let data = dir.path().join("orders");
    common::orders(&data, "2026-10-01", 2_000, 2);
    let table = dir.path().join("t");
    let run = |audit_params: &str| {
        common::idem(&[
            "run",
            "--module",
            s(&module),
            "--input",
            s(&data),
            "--partition",
            "date=2026-10-01",
            "--table",
            s(&table),
            "--audit-module",
            s(&audit),
            "--audit-params",
            audit_params,
            "--json",
        ])
    };
    // Totals of sample orders go well above 10: the audit fails.
    let (code, out, err) = run(r#"{"max_total": 10}"#);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        err.contains("audit module sha256:") && err.contains("totals outside [0, 10]"),
        "{err}"
    );
    assert!(
        !table.join("_delta_log").exists(),
        "a failed audit created the table"
    );
    // No limit: it passes and publishes; the manifest names the audit.
    let (code, out, err) = run("{}");
    assert_eq!(code, 0, "{out}{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["outcome"]["kind"], "committed");
    let manifest = v["manifest"]
        .as_str()
        .unwrap()
        .trim_start_matches("file://")
        .to_string();
    let (_, stored, _) = common::idem(&["show", &manifest, "--json"]);
    let stored: Value = serde_json::from_str(&stored).unwrap();
    let digest = idem::digest::Digest::of_bytes(&std::fs::read(&audit).unwrap());
    assert_eq!(
        stored["predicate"]["run"]["audit"]["module"],
        digest.as_str()
    );
    let verdict = &stored["predicate"]["result"]["audits"][0];
    assert_eq!(verdict["passed"], true);
    assert!(
        verdict["observed"]
            .as_str()
            .unwrap()
            .contains("totals within bounds"),
        "{verdict}"
    );
    common::check_schemas(&[("manifest", &stored.to_string())]).unwrap_or_else(|e| panic!("{e}"));
    let (_, human, _) = common::idem(&["show", &manifest]);
    assert!(
        human.contains("audit module: sha256:") && human.contains("passed audit module"),
        "{human}"
    );
}

/// A MERGE backfill with slices in parallel: this process's commits to
/// one table take turns (a MERGE reads the whole table, so a neighbour's
/// commit during it would force a retry), and every slice commits.
#[test]
fn a_parallel_merge_backfill_commits_every_slice() {
    let dir = tempfile::tempdir().unwrap();
    let module = common::guest("examples/dedup_events");
    let data = dir.path().join("orders");
    for d in 1..=6 {
        common::orders(&data, &format!("2026-10-{d:02}"), 1_000, 1);
    }
    let table = dir.path().join("t");
    let mut args = backfill_args(s(&module), s(&data), s(&table), "2026-10-06");
    args[12] = "4";
    args.extend(["--mode", "merge", "--key", "event_id"]);
    let (code, v, raw, err) = idem_json(&args);
    assert_eq!(code, 0, "{raw}{err}");
    assert_eq!(v["counts"]["committed"], 6, "{raw}");
    let per_slice = commits_per_slice(&table);
    assert_eq!(per_slice.len(), 6);
    assert!(per_slice.values().all(|n| *n == 1), "{per_slice:?}");
    let rows = common::read_table(&table, None).rows.len();
    assert_eq!(rows as u64, v["rows"].as_u64().unwrap());
}

/// Writes `n` sample order files `NNNN.parquet` (from `from`) into an
/// append-only source prefix.
fn append_objects(source: &Path, from: usize, n: usize) {
    let scratch = tempfile::tempdir().unwrap();
    for i in from..from + n {
        let f = common::orders(
            scratch.path(),
            &format!("2026-11-{:02}", 1 + i % 28),
            300 + i as u64,
            1,
        );
        std::fs::create_dir_all(source).unwrap();
        std::fs::copy(&f[0], source.join(format!("{i:04}.parquet"))).unwrap();
    }
}

/// The table's rows as the independent readers see them, without idem's
/// slice-owner column (ranges and a one-shot run name slices differently).
fn rows_without_owner(table: &Path) -> Vec<String> {
    let mut rows: Vec<String> = common::read_table(table, None)
        .rows
        .iter()
        .map(|r| {
            let mut v: serde_json::Map<String, Value> = serde_json::from_str(r).unwrap();
            v.remove("_idem_slice");
            Value::Object(v).to_string()
        })
        .collect();
    rows.sort();
    rows
}

/// Run `args` with a long sleep at fault point `point`, and SIGKILL it
/// once it is there.
fn killed_at(args: &[&str], point: &str, flag: &Path) {
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_idem"))
        .args(args)
        .env("IDEM_CACHE_DIR", common::test_cache())
        .env(
            "IDEM_FAULT_BARRIER",
            format!("{point}:1:{}", flag.display()),
        )
        .env("IDEM_FAULT_SLEEP_MS", format!("{point}:60000"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while std::fs::read_dir(flag).map(|d| d.count()).unwrap_or(0) == 0 {
        if start.elapsed() > Duration::from_secs(120) || child.try_wait().unwrap().is_some() {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "never reached {point}:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    child.kill().unwrap();
    child.wait().unwrap();
}

/// `idem run --module M --input SOURCE --next --table T ...extra`.
fn next_args<'a>(
    module: &'a str,
    source: &'a str,
    table: &'a str,
    extra: &[&'a str],
) -> Vec<&'a str> {
    let mut a = vec![
        "run", "--module", module, "--input", source, "--next", "--table", table,
    ];
    a.extend_from_slice(extra);
    a
}

/// The run's slice is range `first-last` of some source (`next-TAG-...`).
fn assert_range(v: &Value, range: &str, text: &str) {
    let slice = v["slice"].as_str().unwrap_or_default();
    assert!(
        slice.starts_with("next-") && slice.ends_with(&format!("-{range}")),
        "not range {range}: {text}"
    );
}

/// Tracked progress: `--next` consumes an append-only prefix range by
/// range, each object exactly once, across a kill before the commit and
/// one after it (the position is committed with the output); nothing new
/// is "up to date" (exit 0); a late object sorting before the position is
/// named, never skipped.
#[test]
fn next_consumes_each_object_exactly_once_across_crashes() {
    let dir = tempfile::tempdir().unwrap();
    let module = common::guest("examples/clean_orders");
    let source = dir.path().join("raw/events");
    append_objects(&source, 1, 5);
    let table = dir.path().join("bronze");
    let args = next_args(
        s(&module),
        s(&source),
        s(&table),
        &["--max-objects", "2", "--json"],
    );
    let next = || -> (i32, Value, String) {
        let (code, out, err) = common::idem(&args);
        let v = serde_json::from_str(&out).unwrap_or(Value::Null);
        (code, v, format!("{out}{err}"))
    };
    let mut docs = Vec::new();
    let (code, v, text) = next();
    assert_eq!(code, 0, "{text}");
    assert_range(&v, "000001-000002", &text);
    docs.push(v.to_string());

    // Killed just before its commit: the position did not move, so the
    // next run takes the same range again.
    killed_at(&args, "before-commit", &dir.path().join("flag1"));
    let (code, v, text) = next();
    assert_eq!(code, 0, "{text}");
    assert_range(&v, "000003-000004", &text);
    assert_eq!(v["outcome"]["kind"], "committed", "{text}");

    // Killed after its commit (before its memo entry and run log): the
    // position moved with the output, so nothing is taken twice.
    killed_at(&args, "after-log-write", &dir.path().join("flag2"));
    let (code, v, text) = next();
    assert_eq!(code, 0, "{text}");
    assert_eq!(
        v["upToDate"], true,
        "object 5 was consumed by the killed run: {text}"
    );
    assert_eq!(v["through"], "0005.parquet");
    docs.push(v.to_string());

    append_objects(&source, 6, 2);
    let (code, v, text) = next();
    assert_eq!(code, 0, "{text}");
    assert_range(&v, "000006-000007", &text);
    let refs: Vec<(&str, &str)> = docs.iter().map(|d| ("run", d.as_str())).collect();
    common::check_schemas(&refs).unwrap_or_else(|e| panic!("{e}"));

    // Every object exactly once: the same rows as one run over all seven.
    let once = dir.path().join("once");
    let all = next_args(s(&module), s(&source), s(&once), &[]);
    let (code, _, err) = common::idem(&all);
    assert_eq!(code, 0, "{err}");
    assert_eq!(rows_without_owner(&table), rows_without_owner(&once));

    // A late object, sorting before the position, even after consumed ones
    // were deleted (a lifecycle rule): named, nothing run.
    std::fs::remove_file(source.join("0001.parquet")).unwrap();
    append_objects(&source, 0, 1);
    let version = common::read_table(&table, None).version;
    let (code, _, text) = next();
    assert_eq!(code, 2, "{text}");
    assert!(
        text.contains("0000.parquet") && text.contains("never consumed"),
        "{text}"
    );
    assert_eq!(common::read_table(&table, None).version, version);
}

/// Two `--next` runs at once with different range sizes (overlapping
/// ranges), both held at their commit until both are there: one commits,
/// the other finds the position moved and commits nothing (exit 4, a
/// retry takes the next range); no object is consumed twice.
#[test]
fn concurrent_next_runs_never_consume_an_object_twice() {
    let dir = tempfile::tempdir().unwrap();
    let module = common::guest("examples/clean_orders");
    let source = dir.path().join("raw");
    append_objects(&source, 1, 3);
    let table = dir.path().join("bronze");
    let barrier = dir.path().join("barrier");
    let spawn = |max: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_idem"))
            .args([
                "run",
                "--module",
                s(&module),
                "--input",
                s(&source),
                "--next",
                "--max-objects",
                max,
                "--table",
                s(&table),
            ])
            .env("IDEM_CACHE_DIR", common::test_cache())
            .env(
                "IDEM_FAULT_BARRIER",
                format!("before-commit:2:{}", barrier.display()),
            )
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    // The table exists first, so both runs race on one log.
    let (code, _, err) = common::idem(&next_args(
        s(&module),
        s(&source),
        s(&table),
        &["--max-objects", "1"],
    ));
    assert_eq!(code, 0, "{err}");
    let (a, b) = (spawn("1"), spawn("2"));
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    let codes = [a.status.code(), b.status.code()];
    let text = format!(
        "{}{}{}{}",
        String::from_utf8_lossy(&a.stdout),
        String::from_utf8_lossy(&a.stderr),
        String::from_utf8_lossy(&b.stdout),
        String::from_utf8_lossy(&b.stderr)
    );
    assert!(
        codes.contains(&Some(0)) && codes.contains(&Some(4)),
        "{codes:?}\n{text}"
    );
    assert!(text.contains("another run consumed from"), "{text}");
    // Catch up, then compare with one run over everything.
    loop {
        let (code, out, err) = common::idem(&next_args(s(&module), s(&source), s(&table), &[]));
        assert_eq!(code, 0, "{out}{err}");
        if out.contains("up to date") {
            break;
        }
    }
    let once = dir.path().join("once");
    let (code, _, err) = common::idem(&next_args(s(&module), s(&source), s(&once), &[]));
    assert_eq!(code, 0, "{err}");
    assert_eq!(rows_without_owner(&table), rows_without_owner(&once));
}

/// Two append-only sources into one table: their ranges are different
/// slices, so neither replaces the other's rows.
#[test]
fn two_sources_into_one_table_keep_both() {
    let dir = tempfile::tempdir().unwrap();
    let module = common::guest("examples/clean_orders");
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    append_objects(&a, 1, 2);
    append_objects(&b, 3, 2);
    let table = dir.path().join("t");
    for src in [&a, &b] {
        let (code, out, err) = common::idem(&next_args(s(&module), s(src), s(&table), &[]));
        assert_eq!(code, 0, "{out}{err}");
    }
    let both = rows_without_owner(&table);
    let mut each = Vec::new();
    for (src, name) in [(&a, "ra"), (&b, "rb")] {
        let t = dir.path().join(name);
        let (code, _, err) = common::idem(&next_args(s(&module), s(src), s(&t), &[]));
        assert_eq!(code, 0, "{err}");
        each.extend(rows_without_owner(&t));
    }
    each.sort();
    assert_eq!(both, each, "one source's rows replaced the other's");
}
