//! What a data team runs every day on top of single idempotent runs:
//! backfills over date ranges, interrupted and restarted.

mod common;

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
    let before = common::commits_per_slice(&killed);
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
    let after = common::commits_per_slice(&killed);
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
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_idem"));
    cmd.args(&args)
        .env("IDEM_CACHE_DIR", common::test_cache())
        .env("IDEM_FAULT_SLEEP_MS", "before-commit:300")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    // Ctrl-C as a terminal's foreground job gets it: a test runner started
    // in the background (CI) passes SIGINT on ignored, and idem keeps a
    // signal it was started ignoring.
    // SAFETY: signal() is async-signal-safe, as pre_exec requires.
    unsafe {
        use std::os::unix::process::CommandExt as _;
        cmd.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            Ok(())
        });
    }
    let mut child = cmd.spawn().unwrap();
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
    // The run key covers the expectations as a set: reordered, a memo hit;
    // changed, another run (executed, its verdicts in its own manifest).
    let outcome = |expect: &[&str]| {
        let (code, out, err) = run("2026-10-01", expect);
        assert_eq!(code, 0, "{out}{err}");
        let v: Value = serde_json::from_str(&out).unwrap();
        v["outcome"]["kind"].as_str().unwrap().to_string()
    };
    assert_eq!(outcome(&["rows(1..)", "not_null(customer)"]), "memo");
    assert_ne!(outcome(&["not_null(customer)", "rows(2..)"]), "memo");

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
    let per_slice = common::commits_per_slice(&table);
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

/// bronze (append) -> silver (merge on event_id) -> gold (daily revenue,
/// partition overwrite), as an idem.toml in `dir` over `data`.
fn pipeline_file(dir: &Path, data: &Path, gold_expect: &str) -> std::path::PathBuf {
    let m = |rel: &str| common::guest(rel).display().to_string();
    let text = format!(
        r#"[pipeline]
name = "orders"

[[stage]]
name = "bronze"
module = "{clean}"
input = "{data}"
partition = "date"
table = "lake/bronze"
mode = "append"
batch-rows = 1000

[[stage]]
name = "silver"
module = "{dedup}"
from = "bronze"
table = "lake/silver"
mode = "merge"
key = ["event_id"]
params = {{ key = "event_id" }}

[[stage]]
name = "gold"
module = "{revenue}"
from = "silver"
table = "lake/gold"
partition = "date"
expect = ["not_null(customer)", "unique(customer)"{gold_expect}]
"#,
        clean = m("examples/clean_orders"),
        dedup = m("examples/dedup_events"),
        revenue = m("examples/daily_revenue"),
        data = data.display(),
    );
    let path = dir.join("idem.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// `idem pipeline backfill FILE --from 2026-10-01 --to TO --json`.
fn pipeline_backfill(file: &str, to: &str) -> (i32, Value, String, String) {
    idem_json(&[
        "pipeline",
        "backfill",
        file,
        "--from",
        "2026-10-01",
        "--to",
        to,
    ])
}

/// `(date, stage, status, version, input version)`.
type StageRow = (String, String, String, Option<u64>, Option<u64>);

/// A [`StageRow`] per stage of each date.
fn stages(v: &Value) -> Vec<StageRow> {
    let mut out = Vec::new();
    for d in v["dates"].as_array().unwrap() {
        for st in d["stages"].as_array().unwrap() {
            out.push((
                d["date"].as_str().unwrap().to_string(),
                st["stage"].as_str().unwrap().to_string(),
                st["status"].as_str().unwrap().to_string(),
                st["version"].as_u64(),
                st["input"]["version"].as_u64(),
            ));
        }
    }
    out
}

/// `(event_id, amount)` of every row of a Parquet file, in file order.
fn events(file: &Path) -> Vec<(String, Option<f64>)> {
    use arrow::array::{Array, AsArray};
    use arrow::datatypes::Float64Type;
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
        std::fs::File::open(file).unwrap(),
    )
    .unwrap()
    .build()
    .unwrap();
    let mut out = Vec::new();
    for b in reader {
        let b = b.unwrap();
        let ids = b.column_by_name("event_id").unwrap().as_string::<i32>();
        let amounts = b
            .column_by_name("amount")
            .unwrap()
            .as_primitive::<Float64Type>();
        for r in 0..b.num_rows() {
            let a = (!amounts.is_null(r)).then(|| amounts.value(r));
            out.push((ids.value(r).to_string(), a));
        }
    }
    out
}

/// Rewrite one Parquet file with `amount` of row `row` raised by 1000.
fn raise_amount(file: &Path, row: usize) {
    use arrow::array::{Array, AsArray, Float64Array};
    use arrow::datatypes::Float64Type;
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
        std::fs::File::open(file).unwrap(),
    )
    .unwrap()
    .build()
    .unwrap();
    let batches: Vec<_> = reader.map(|b| b.unwrap()).collect();
    let schema = batches[0].schema();
    let all = arrow::compute::concat_batches(&schema, &batches).unwrap();
    let i = all.schema().index_of("amount").unwrap();
    let amount = all.column(i).as_primitive::<Float64Type>();
    let raised: Float64Array = (0..amount.len())
        .map(|r| {
            (!amount.is_null(r)).then(|| amount.value(r) + if r == row { 1000.0 } else { 0.0 })
        })
        .collect();
    let mut cols = all.columns().to_vec();
    cols[i] = std::sync::Arc::new(raised);
    let changed = arrow::array::RecordBatch::try_new(schema.clone(), cols).unwrap();
    let mut w =
        parquet::arrow::ArrowWriter::try_new(std::fs::File::create(file).unwrap(), schema, None)
            .unwrap();
    w.write(&changed).unwrap();
    w.close().unwrap();
}

/// Raise the amount of one row of the day's second file by 1000: an event
/// that occurs once that day and has an amount (so bronze keeps it and it
/// is silver's key's only row). The changed row, as the reader sees it.
fn raise_one(day: &Path) -> Value {
    let file1 = day.join("part-00001.parquet");
    let mut all = events(&day.join("part-00000.parquet"));
    let mine = events(&file1);
    all.extend(mine.iter().cloned());
    let target = mine
        .iter()
        .position(|(id, amount)| {
            amount.is_some() && all.iter().filter(|(o, _)| o == id).count() == 1
        })
        .unwrap();
    raise_amount(&file1, target);
    let changed_id = &mine[target].0;
    let changed = common::read_parquet_rows(&file1)
        .iter()
        .map(|r| row(r))
        .find(|r| r["event_id"] == changed_id.as_str())
        .unwrap();
    assert_eq!(
        changed["amount"].as_f64(),
        mine[target].1.map(|a| a + 1000.0)
    );
    changed
}

/// The rows only `a` has and the rows only `b` has.
fn moved(a: &[String], b: &[String]) -> (Vec<String>, Vec<String>) {
    let gone = a.iter().filter(|r| !b.contains(r)).cloned().collect();
    let new = b.iter().filter(|r| !a.contains(r)).cloned().collect();
    (gone, new)
}

/// A row's fields.
fn row(r: &str) -> Value {
    serde_json::from_str(r).unwrap()
}

/// The pipeline's promise: each stage reads the version its upstream
/// committed (pinned in the manifest), a rerun is a memo hit everywhere,
/// and a changed bronze row moves exactly its silver key and its gold
/// partition's row — nothing of the other dates.
#[test]
fn a_pipeline_rerun_is_a_no_op_and_a_changed_row_moves_only_what_depends_on_it() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("orders");
    for d in 1..=3 {
        common::orders(&data, &format!("2026-10-{d:02}"), 2_000, 2);
    }
    let file = pipeline_file(dir.path(), &data, "");
    let lake = |t: &str| dir.path().join("lake").join(t);
    let tables = ["bronze", "silver", "gold"];
    let f = s(&file);

    let (code, v, raw, err) = pipeline_backfill(f, "2026-10-03");
    assert_eq!(code, 0, "{raw}\n{err}");
    common::check_schemas(&[("pipeline", &raw)]).unwrap_or_else(|e| panic!("{e}"));
    let first = stages(&v);
    assert_eq!(first.len(), 9);
    // Each stage reads its upstream at the version that committed the
    // same date; every version is recorded in the downstream manifest.
    for date in ["2026-10-01", "2026-10-02", "2026-10-03"] {
        let of = |stage: &str| first.iter().find(|r| r.0 == date && r.1 == stage).unwrap();
        for (up, down) in [("bronze", "silver"), ("silver", "gold")] {
            assert_eq!(of(down).4, of(up).3, "{date}: {down} pins {up}");
        }
        assert!(
            first
                .iter()
                .filter(|r| r.0 == date)
                .all(|r| r.2 == "committed")
        );
        let (code, out, err) =
            common::idem(&["show", &format!("{}#date={date}", s(&lake("gold")))]);
        assert_eq!(code, 0, "{err}");
        assert!(
            out.contains(&format!("table version {}", of("silver").3.unwrap())),
            "{out}"
        );
    }
    let before: Vec<_> = tables
        .iter()
        .map(|t| common::read_table(&lake(t), None))
        .collect();
    // Gold read exactly silver's rows of its date (other dates' rows are
    // in the same merge table files).
    let silver_rows: Vec<Value> = before[1].rows.iter().map(|r| row(r)).collect();
    for d in v["dates"].as_array().unwrap() {
        let slice = format!("date={}", d["date"].as_str().unwrap());
        let gold = &d["stages"][2];
        let want = silver_rows
            .iter()
            .filter(|r| r["_idem_slice"] == slice.as_str())
            .count();
        assert_eq!(gold["rowsIn"].as_u64(), Some(want as u64), "{slice}");
    }

    // A rerun (one date, then the range) commits nothing anywhere.
    let (code, v, raw, err) = idem_json(&["pipeline", "run", f, "--logical-date", "2026-10-02"]);
    assert_eq!(code, 0, "{raw}\n{err}");
    assert!(stages(&v).iter().all(|r| r.2 == "memo"), "{raw}");
    let (code, v, raw, _) = pipeline_backfill(f, "2026-10-03");
    assert_eq!(code, 0);
    assert!(stages(&v).iter().all(|r| r.2 == "memo"), "{raw}");
    for (t, b) in tables.iter().zip(&before) {
        assert_eq!(&common::read_table(&lake(t), None), b, "{t}");
    }

    // Change one bronze row of 2026-10-02.
    let changed = raise_one(&data.join("date=2026-10-02"));

    let (code, v, raw, err) = pipeline_backfill(f, "2026-10-03");
    assert_eq!(code, 0, "{raw}\n{err}");
    for r in stages(&v) {
        let want = if r.0 == "2026-10-02" {
            "committed"
        } else {
            "memo"
        };
        assert_eq!(r.2, want, "{r:?}");
    }
    let after: Vec<_> = tables
        .iter()
        .map(|t| common::read_table(&lake(t), None))
        .collect();
    for ((t, b), a) in tables.iter().zip(&before).zip(&after) {
        assert_eq!(a.version, b.version + 1, "{t}: one new version");
        assert_eq!(
            common::commits_per_slice(&lake(t))["date=2026-10-02"],
            2,
            "{t}"
        );
        assert_eq!(
            common::commits_per_slice(&lake(t))["date=2026-10-01"],
            1,
            "{t}"
        );
    }
    // Bronze and silver: exactly the changed event's row moved.
    for (i, t) in ["bronze", "silver"].iter().enumerate() {
        let (gone, new) = moved(&before[i].rows, &after[i].rows);
        assert_eq!((gone.len(), new.len()), (1, 1), "{t}: {gone:?} -> {new:?}");
        let (g, n) = (row(&gone[0]), row(&new[0]));
        assert_eq!(g["event_id"], changed["event_id"], "{t}");
        assert_eq!(n["event_id"], changed["event_id"], "{t}");
        assert_eq!(n["amount"], changed["amount"], "{t}");
    }
    // Gold: only the changed customer's row of that date.
    let (gone, new) = moved(&before[2].rows, &after[2].rows);
    assert_eq!((gone.len(), new.len()), (1, 1), "gold: {gone:?} -> {new:?}");
    for r in gone.iter().chain(&new).map(|r| row(r)) {
        assert_eq!(r["date"], "2026-10-02");
        assert_eq!(r["customer"], changed["customer"]);
    }
    let delta =
        row(&new[0])["revenue"].as_f64().unwrap() - row(&gone[0])["revenue"].as_f64().unwrap();
    let qty = changed["quantity"].as_f64().unwrap();
    assert!(
        (delta - 1000.0 * qty).abs() < 1e-6,
        "revenue moved by {delta}"
    );

    // One stage alone reads its upstream's current output for the date;
    // a stage whose upstream never ran the date is refused, naming it.
    let (code, v, raw, _) = idem_json(&[
        "pipeline",
        "run",
        f,
        "--logical-date",
        "2026-10-03",
        "--stage",
        "gold",
    ]);
    assert_eq!(code, 0, "{raw}");
    assert_eq!(stages(&v).len(), 1);
    assert_eq!(stages(&v)[0].2, "memo");
    let (code, _, err) = common::idem(&[
        "pipeline",
        "run",
        f,
        "--logical-date",
        "2026-10-04",
        "--stage",
        "silver",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("stage `bronze` has no committed run for date=2026-10-04"),
        "{err}"
    );

    // Replay proves the pinned inputs: the gold run re-executes from
    // silver's pinned version and gives the same bytes.
    let (code, out, err) = common::idem(&["audit", s(&lake("gold")), "--replay"]);
    assert_eq!(code, 0, "{out}\n{err}");
}

/// A failing stage skips the later stages of its date and not the other
/// dates; the exit code is the failure's; fixing it and rerunning
/// finishes the chain without redoing the rest.
#[test]
fn a_failing_stage_stops_its_date_only() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("orders");
    for d in [1, 3] {
        common::orders(&data, &format!("2026-10-{d:02}"), 2_000, 2);
    }
    // Gold refuses more than 5 customers a day: every date fails there.
    let file = pipeline_file(dir.path(), &data, ", \"rows(0..5)\"");
    let f = s(&file);
    let (code, v, raw, err) = pipeline_backfill(f, "2026-10-03");
    // 2026-10-02 has no partition (exit 2) and outranks the failed gold
    // expectations (1).
    assert_eq!(code, 2, "{raw}\n{err}");
    common::check_schemas(&[("pipeline", &raw)]).unwrap_or_else(|e| panic!("{e}"));
    let got: Vec<(String, String, String)> =
        stages(&v).into_iter().map(|r| (r.0, r.1, r.2)).collect();
    let want: Vec<(String, String, String)> = [
        ("2026-10-01", "bronze", "committed"),
        ("2026-10-01", "silver", "committed"),
        ("2026-10-01", "gold", "failed"),
        ("2026-10-02", "bronze", "missing"),
        ("2026-10-02", "silver", "skipped"),
        ("2026-10-02", "gold", "skipped"),
        ("2026-10-03", "bronze", "committed"),
        ("2026-10-03", "silver", "committed"),
        ("2026-10-03", "gold", "failed"),
    ]
    .iter()
    .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
    .collect();
    assert_eq!(got, want);
    assert!(
        !dir.path().join("lake/gold/_delta_log").exists()
            || common::read_table(&dir.path().join("lake/gold"), None)
                .rows
                .is_empty()
    );
    let (code, _, _) = common::idem(&["pipeline", "run", f, "--logical-date", "2026-10-01"]);
    assert_eq!(code, 1, "a failed expectation exits 1");
    // Fixed: gold runs, bronze and silver are memo hits.
    pipeline_file(dir.path(), &data, "");
    let (code, v, raw, _) = idem_json(&["pipeline", "run", f, "--logical-date", "2026-10-01"]);
    assert_eq!(code, 0, "{raw}");
    let got: Vec<String> = stages(&v).into_iter().map(|r| r.2).collect();
    assert_eq!(got, ["memo", "memo", "committed"]);
}

/// The example DAG (examples/airflow/) with Airflow itself (`airflow dags
/// test`, which runs a DAG run in-process with retries), calling the
/// `idem` Python package in process: the shipped idem.toml for two days;
/// the gold stage of the second fails inside its commit on its first try
/// with a storage error (tests/airflow_fault/, idem's own fault hook),
/// Airflow retries it (StorageError retries, the other kinds fail), and
/// the tables equal a clean `idem pipeline backfill` of the same dates,
/// row by row.
#[test]
fn the_airflow_dag_runs_each_date_and_retries_a_failed_stage() {
    let Some(airflow) = common::airflow() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // The shipped pipeline file, with its modules and data beside it.
    let setup = |at: &Path| {
        std::fs::create_dir_all(at.join("wasm")).unwrap();
        for m in ["clean_orders", "dedup_events", "daily_revenue"] {
            std::fs::copy(
                common::guest(&format!("examples/{m}")),
                at.join("wasm").join(format!("{m}.wasm")),
            )
            .unwrap();
        }
        for d in ["2026-10-01", "2026-10-02"] {
            common::orders(&at.join("data/orders"), d, 2_000, 2);
        }
        std::fs::copy(
            common::root().join("examples/airflow/idem.toml"),
            at.join("idem.toml"),
        )
        .unwrap();
        at.join("idem.toml")
    };
    let scheduled = setup(&dir.path().join("scheduled"));
    let clean = setup(&dir.path().join("clean"));

    let home = dir.path().join("airflow-home");
    let calls = dir.path().join("calls");
    let env: Vec<(&str, String)> = vec![
        ("AIRFLOW_HOME", home.display().to_string()),
        ("AIRFLOW__CORE__LOAD_EXAMPLES", "False".into()),
        (
            "AIRFLOW__CORE__DAGS_FOLDER",
            common::root()
                .join("examples/airflow")
                .display()
                .to_string(),
        ),
        (
            "PYTHONPATH",
            common::root()
                .join("tests/airflow_fault")
                .display()
                .to_string(),
        ),
        ("IDEM_CACHE_DIR", common::test_cache().display().to_string()),
        ("IDEM_PIPELINE", scheduled.display().to_string()),
        ("CALLS", calls.display().to_string()),
        ("MARK", dir.path().join("mark").display().to_string()),
        ("FAIL_DATE", "2026-10-02".into()),
        ("FAIL_STAGE", "gold".into()),
        // The DAG's first retry waits this long (default: a minute).
        ("IDEM_RETRY_DELAY_SECONDS", "1".into()),
    ];
    let run = |args: &[&str]| {
        let out = std::process::Command::new(&airflow)
            .args(args)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .output()
            .expect("running airflow");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "airflow {args:?}:\n{text}");
        text
    };
    run(&["db", "migrate"]);
    // Each task is idem's operator, with a realistic retry policy:
    // exponential backoff from the configured delay, up to 30 minutes.
    let python = airflow.with_file_name("python");
    let dag = common::root().join("examples/airflow/idem_pipeline_dag.py");
    let probe = std::process::Command::new(&python)
        .args([
            "-c",
            "import json, runpy, sys; d = runpy.run_path(sys.argv[1])['dag']; print(json.dumps([[t.task_id, type(t).__name__, t.retries, t.retry_delay.total_seconds(), t.retry_exponential_backoff, t.max_retry_delay.total_seconds()] for t in d.tasks]))",
        ])
        .arg(&dag)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&probe.stdout);
    assert!(
        probe.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&probe.stderr)
    );
    let tasks: serde_json::Value =
        serde_json::from_str(text.trim().lines().last().unwrap()).unwrap();
    assert_eq!(tasks.as_array().unwrap().len(), 3, "{tasks}");
    for t in tasks.as_array().unwrap() {
        assert_eq!(t[1], "IdemPipelineOperator", "{t}");
        assert_eq!(t[2], 3, "{t}");
        assert_eq!(t[3], 1.0, "{t}");
        assert_eq!(t[4], 2.0, "{t}");
        assert_eq!(t[5], 1800.0, "{t}");
    }
    // A manual run at D covers the day that ended then: its data interval
    // is D-1..D, and the DAG processes D-1 (never the day just begun).
    for (at, day) in [("2026-10-02", "2026-10-01"), ("2026-10-03", "2026-10-02")] {
        let log = run(&["dags", "test", "idem_pipeline", at]);
        assert!(log.contains("state=success"), "{at}:\n{log}");
        for stage in ["bronze", "silver", "gold"] {
            assert!(
                log.contains(&format!("{stage} date={day}: committed")),
                "{at}:\n{log}"
            );
        }
        if day == "2026-10-02" {
            assert!(
                log.contains("idem storage failure (exit 4), retrying is safe"),
                "{log}"
            );
            assert!(log.contains("IDEM_FAULT_FAIL=commit-read"), "{log}");
            assert!(log.contains("up_for_retry"), "{log}");
        }
    }
    // Each stage ran once per date, gold of 2026-10-02 twice (failed, retried).
    let calls = std::fs::read_to_string(&calls).unwrap();
    for date in ["2026-10-01", "2026-10-02"] {
        for stage in ["bronze", "silver", "gold"] {
            let n = calls
                .lines()
                .filter(|l| *l == format!("{date} {stage}"))
                .count();
            let want = if (date, stage) == ("2026-10-02", "gold") {
                2
            } else {
                1
            };
            assert_eq!(n, want, "{date} {stage}:\n{calls}");
        }
    }
    // The failed try left data files but no log entry; the tables equal
    // one clean run's.
    let (code, out, err) = common::idem(&[
        "pipeline",
        "backfill",
        s(&clean),
        "--from",
        "2026-10-01",
        "--to",
        "2026-10-02",
        "--jobs",
        "1",
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    for t in ["bronze", "silver", "gold"] {
        let a = common::read_table(&dir.path().join("scheduled/lake").join(t), None);
        let b = common::read_table(&dir.path().join("clean/lake").join(t), None);
        assert_eq!(a.rows, b.rows, "{t}");
        assert_eq!(a.version, b.version, "{t}: one version per date and stage");
        assert!(!a.rows.is_empty());
    }
}

/// `--delta-slice` by hand: the rows one slice owns in a merge table, at a
/// pinned version, without idem's owner column (bookkeeping, not data).
#[test]
fn delta_slice_reads_one_slices_rows_of_a_merge_table() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("orders");
    for d in 1..=2 {
        common::orders(&data, &format!("2026-10-{d:02}"), 1_000, 1);
    }
    let file = pipeline_file(dir.path(), &data, "");
    let (code, v, raw, _) = pipeline_backfill(s(&file), "2026-10-02");
    assert_eq!(code, 0, "{raw}");
    let silver = dir.path().join("lake/silver");
    let version = stages(&v)
        .iter()
        .filter(|r| r.1 == "silver")
        .filter_map(|r| r.3)
        .max()
        .unwrap()
        .to_string();
    let clean = common::guest("examples/dedup_events");
    let copy = dir.path().join("copy");
    let (code, out, err) = common::idem(&[
        "run",
        "--module",
        s(&clean),
        "--input",
        s(&silver),
        "--delta-version",
        &version,
        "--delta-slice",
        "date=2026-10-01",
        "--table",
        s(&copy),
        "--mode",
        "append",
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    let want: Vec<Value> = common::read_table(&silver, None)
        .rows
        .iter()
        .map(|r| row(r))
        .filter(|r| r["_idem_slice"] == "date=2026-10-01")
        .collect();
    let got: Vec<Value> = common::read_table(&copy, None)
        .rows
        .iter()
        .map(|r| row(r))
        .collect();
    assert!(!want.is_empty());
    assert_eq!(got.len(), want.len());
    for r in &got {
        assert!(r.get("_idem_slice").is_none(), "{r}");
        assert!(want.iter().any(|w| w["event_id"] == r["event_id"]), "{r}");
    }
    // A slice the pinned version does not hold is refused, naming it.
    let (code, _, err) = common::idem(&[
        "run",
        "--module",
        s(&clean),
        "--input",
        s(&silver),
        "--delta-version",
        &version,
        "--delta-slice",
        "date=2026-10-09",
        "--table",
        s(&copy),
        "--mode",
        "append",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("holds no commit of slice `date=2026-10-09`"),
        "{err}"
    );
}

/// A day whose bronze output is empty (every amount null: clean_orders
/// drops them all) is a committed slice like any other: silver and gold
/// read zero rows, commit empty outputs, and a rerun is a memo hit; the
/// earlier day's rows stay.
#[test]
fn an_empty_upstream_slice_flows_down_as_zero_rows() {
    use arrow::array::Float64Array;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("orders");
    for f in common::orders(&data, "2026-10-05", 500, 2) {
        let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
            std::fs::File::open(&f).unwrap(),
        )
        .unwrap()
        .build()
        .unwrap();
        let batches: Vec<_> = reader.map(|b| b.unwrap()).collect();
        let schema = batches[0].schema();
        let all = arrow::compute::concat_batches(&schema, &batches).unwrap();
        let i = schema.index_of("amount").unwrap();
        let mut cols = all.columns().to_vec();
        cols[i] = std::sync::Arc::new(Float64Array::from(vec![None; all.num_rows()]));
        let nulls = arrow::array::RecordBatch::try_new(schema.clone(), cols).unwrap();
        let mut w =
            parquet::arrow::ArrowWriter::try_new(std::fs::File::create(&f).unwrap(), schema, None)
                .unwrap();
        w.write(&nulls).unwrap();
        w.close().unwrap();
    }
    // The tables exist (an empty first output has no schema to create
    // one with: that run fails and says so).
    common::orders(&data, "2026-10-04", 500, 1);
    let file = pipeline_file(dir.path(), &data, "");
    let f = s(&file);
    let (code, _, raw, _) = idem_json(&["pipeline", "run", f, "--logical-date", "2026-10-04"]);
    assert_eq!(code, 0, "{raw}");
    let (code, v, raw, err) = idem_json(&["pipeline", "run", f, "--logical-date", "2026-10-05"]);
    assert_eq!(code, 0, "{raw}\n{err}");
    let rows: Vec<(String, u64, u64)> = v["dates"][0]["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|st| {
            (
                st["status"].as_str().unwrap().to_string(),
                st["rowsIn"].as_u64().unwrap(),
                st["rows"].as_u64().unwrap(),
            )
        })
        .collect();
    let want = [
        ("committed", 500, 0),
        ("committed", 0, 0),
        ("committed", 0, 0),
    ];
    let want: Vec<(String, u64, u64)> = want
        .iter()
        .map(|(a, b, c)| (a.to_string(), *b, *c))
        .collect();
    assert_eq!(rows, want);
    let (code, v, raw, _) = idem_json(&["pipeline", "run", f, "--logical-date", "2026-10-05"]);
    assert_eq!(code, 0, "{raw}");
    assert!(stages(&v).iter().all(|r| r.2 == "memo"), "{raw}");
}

/// A stage pinned to its upstream's version while another process reruns
/// the upstream and the stage on a newer one: the stale run commits last,
/// sees that the upstream moved, and runs again on the new version, so
/// the table ends as one clean run on the new data.
#[test]
fn a_stage_whose_upstream_moved_during_its_run_runs_again() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("orders");
    common::orders(&data, "2026-10-01", 2_000, 2);
    let file = pipeline_file(dir.path(), &data, "");
    let f = s(&file);
    for stage in ["bronze", "silver"] {
        let (code, out, err) = common::idem(&[
            "pipeline",
            "run",
            f,
            "--logical-date",
            "2026-10-01",
            "--stage",
            stage,
        ]);
        assert_eq!(code, 0, "{out}\n{err}");
    }
    // A: gold pins silver's version, then waits inside its run.
    let at = dir.path().join("at");
    let a = std::process::Command::new(env!("CARGO_BIN_EXE_idem"))
        .args([
            "pipeline",
            "run",
            f,
            "--logical-date",
            "2026-10-01",
            "--stage",
            "gold",
            "--json",
        ])
        .env("IDEM_CACHE_DIR", common::test_cache())
        // A waits at its run until the test adds a second entry (after B).
        .env("IDEM_FAULT_BARRIER", format!("execute:2:{}", at.display()))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while std::fs::read_dir(&at).map(|d| d.count()).unwrap_or(0) == 0 {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "A never reached its run"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // B: a bronze row changes; the whole chain reruns and commits.
    raise_one(&data.join("date=2026-10-01"));
    let (code, v, raw, _) = idem_json(&["pipeline", "run", f, "--logical-date", "2026-10-01"]);
    assert_eq!(code, 0, "{raw}");
    assert!(stages(&v).iter().all(|r| r.2 == "committed"), "{raw}");
    // B finished while A waited (A is released only now, not after a
    // guessed pause B had to beat).
    std::fs::write(at.join("released"), b"").unwrap();
    let out = a.wait_with_output().unwrap();
    let (ja, ea) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{ja}\n{ea}");
    let va: Value = serde_json::from_str(&ja).unwrap();
    let silver_now = stages(&v).iter().find(|r| r.1 == "silver").unwrap().3;
    assert_eq!(
        stages(&va)[0].4,
        silver_now,
        "A ends pinned to the new silver"
    );
    // The same data, run once cleanly elsewhere.
    let clean = dir.path().join("clean");
    std::fs::create_dir_all(&clean).unwrap();
    let clean_file = pipeline_file(&clean, &data, "");
    let (code, _, _) = common::idem(&[
        "pipeline",
        "run",
        s(&clean_file),
        "--logical-date",
        "2026-10-01",
    ]);
    assert_eq!(code, 0);
    for t in ["bronze", "silver", "gold"] {
        assert_eq!(
            common::read_table(&dir.path().join("lake").join(t), None).rows,
            common::read_table(&clean.join("lake").join(t), None).rows,
            "{t}"
        );
    }
}
