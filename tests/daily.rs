//! The daily CLI, driven as a user drives it: `idem new` -> `build` ->
//! `run`, `show`, `explain`, `--json` against the published schemas, exit
//! codes, and progress bars on a terminal but never in a pipe.

mod common;

use std::path::Path;

use serde_json::Value;

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `idem ARGS --json`: (exit code, parsed stdout, raw stdout, stderr).
fn idem_json(args: &[&str]) -> (i32, Value, String, String) {
    let mut all: Vec<&str> = args.to_vec();
    all.push("--json");
    let (code, out, err) = common::idem(&all);
    let v = serde_json::from_str(&out).unwrap_or_else(|e| {
        panic!(
            "`idem {}` printed no JSON ({e}):\n{out}\n{err}",
            args.join(" ")
        )
    });
    (code, v, out, err)
}

fn run_args<'a>(module: &'a str, data: &'a str, table: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut a = vec![
        "run",
        "--module",
        module,
        "--input",
        data,
        "--partition",
        "date=2026-10-01",
        "--table",
        table,
    ];
    a.extend_from_slice(extra);
    a
}

/// A new transform crate builds into an admitted component without edits,
/// runs and reruns idempotently (its host.log line shown, prefixed with the
/// module), and its own native test passes under `cargo test`.
#[test]
fn a_new_transform_builds_runs_and_passes_its_own_test() {
    let dir = tempfile::tempdir().unwrap();
    let krate = dir.path().join("daily_totals");
    let (code, out, err) = common::idem(&["new", "daily_totals", "--dir", s(&krate)]);
    assert_eq!(code, 0, "{out}{err}");
    for f in ["Cargo.toml", "src/lib.rs", "README.md"] {
        assert!(krate.join(f).is_file(), "{f} missing");
    }
    // The directory is now taken: a second `new` refuses and keeps it.
    let (code, _, err) = common::idem(&["new", "daily_totals", "--dir", s(&krate)]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("already exists"), "{err}");
    let (code, _, err) = common::idem(&["new", "Bad Name", "--dir", s(&dir.path().join("x"))]);
    assert_eq!(code, 2, "{err}");

    let module = dir.path().join("daily_totals.wasm");
    let target = common::guest_target();
    let (code, out, err) = common::idem(&[
        "build",
        s(&krate),
        "--out",
        s(&module),
        "--target-dir",
        s(&target),
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, _) = common::idem(&["inspect", s(&module)]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("verdict: admitted"), "{out}");

    let data = dir.path().join("orders");
    common::orders(&data, "2026-10-01", 3_000, 2);
    let table = dir.path().join("lake/daily_totals");
    let args = run_args(
        s(&module),
        s(&data),
        s(&table),
        &["--params", r#"{"min_amount": 50}"#],
    );
    let (code, out, err) = common::idem(&args);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("committed version 1"), "{out}");
    // The guest's host.log line, at the default log level, with the module.
    let kept = err
        .lines()
        .find(|l| l.contains("[daily_totals.wasm date=2026-10-01]") && l.contains("kept "))
        .unwrap_or_else(|| panic!("no guest log line on stderr:\n{err}"));
    assert!(kept.contains("of 3000 rows"), "{kept}");
    let (code, out, err) = common::idem(&args);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("memo"), "the rerun executed again:\n{out}");
    let rows = common::read_table(&table, None).rows.len();
    assert!(
        rows > 0 && rows < 3_000,
        "min_amount filtered nothing: {rows}"
    );

    // Its unit test, natively, as the crate's README says.
    let test = std::process::Command::new(std::env::var_os("CARGO").unwrap_or("cargo".into()))
        .args(["test", "--quiet", "--manifest-path"])
        .arg(krate.join("Cargo.toml"))
        .env("CARGO_TARGET_DIR", target.join("scaffold-native"))
        .env_remove("RUSTFLAGS")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&test.stdout),
        String::from_utf8_lossy(&test.stderr)
    );
    assert!(test.status.success(), "{text}");
    assert!(text.contains("2 passed"), "{text}");
}

/// `idem show` finds a run by TABLE#SLICE, by a run-key prefix and by its
/// manifest file; `--json` is the stored manifest byte for byte.
#[test]
fn show_prints_a_stored_run_and_its_version() {
    let dir = tempfile::tempdir().unwrap();
    let module = common::guest("examples/clean_orders");
    let data = dir.path().join("orders");
    common::orders(&data, "2026-10-01", 2_000, 2);
    let table = dir.path().join("t");
    let (code, run, _, err) = idem_json(&run_args(s(&module), s(&data), s(&table), &[]));
    assert_eq!(code, 0, "{err}");
    let run_key = run["runKey"].as_str().unwrap();
    let manifest_hex = run["manifestDigest"]
        .as_str()
        .unwrap()
        .trim_start_matches("sha256:");
    let manifest_file = table.join(format!("_idem/manifests/{manifest_hex}.json"));
    let stored = std::fs::read(&manifest_file).unwrap();

    let by_slice = format!("{}#date=2026-10-01", s(&table));
    let prefix = &run_key[..19];
    for (reference, extra) in [
        (by_slice.as_str(), None),
        (prefix, Some(s(&table))),
        (s(&manifest_file), None),
    ] {
        let mut args = vec!["show", reference];
        if let Some(t) = extra {
            args.extend(["--table", t]);
        }
        let (code, out, err) = common::idem(&args);
        assert_eq!(code, 0, "{reference}: {out}{err}");
        assert!(out.contains(&format!("run key:      {run_key}")), "{out}");
        assert!(
            out.contains("held by:      version 1, the slice's current commit"),
            "{out}"
        );
        assert!(out.contains("date=2026-10-01/part-00001.parquet"), "{out}");
        args.push("--json");
        let (code, json, _) = common::idem(&args);
        assert_eq!(code, 0);
        assert_eq!(
            json.trim_end().as_bytes(),
            stored.as_slice(),
            "not the stored bytes"
        );
    }
    // A run key needs its table; an unknown one is named.
    let (code, _, err) = common::idem(&["show", prefix]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--table"), "{err}");
    let (code, _, err) = common::idem(&["show", "sha256:00000000", "--table", s(&table)]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("no run key or manifest"), "{err}");

    // A later run with another output: the first manifest is no longer
    // held by the slice's current version.
    let (code, _, err) = common::idem(&run_args(
        s(&module),
        s(&data),
        s(&table),
        &["--params", r#"{"min_amount": 30}"#],
    ));
    assert_eq!(code, 0, "{err}");
    let (_, out, _) = common::idem(&["show", s(&manifest_file)]);
    assert!(
        out.contains("version 2") && out.contains("holds another output"),
        "{out}"
    );
}

/// Every file below `dir` with its size and modification time.
fn tree(dir: &Path) -> Vec<(String, u64, std::time::SystemTime)> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let m = e.metadata().unwrap();
            if m.is_dir() {
                todo.push(e.path());
            } else {
                out.push((
                    e.path().display().to_string(),
                    m.len(),
                    m.modified().unwrap(),
                ));
            }
        }
    }
    out.sort();
    out
}

/// `idem explain` names the field that changed for a changed input, param,
/// module and batch size, says "memo hit" when nothing did, and compares
/// two stored runs.
#[test]
fn explain_names_what_changed_in_the_run_key() {
    let dir = tempfile::tempdir().unwrap();
    let module = common::guest("examples/clean_orders");
    let other_module = common::guest("examples/daily_revenue");
    let data = dir.path().join("orders");
    common::orders(&data, "2026-10-01", 2_000, 2);
    let table = dir.path().join("t");
    let params: &[&str] = &["--params", r#"{"min_amount": 10}"#];
    let (code, first, _, err) = idem_json(&run_args(s(&module), s(&data), s(&table), params));
    assert_eq!(code, 0, "{err}");

    let explain = |module: &Path, extra: &[&str]| -> (Value, String) {
        let mut args = run_args(s(module), s(&data), s(&table), extra);
        args[0] = "explain";
        let (code, json, _, err) = idem_json(&args);
        assert_eq!(code, 0, "{err}");
        let (code, human, err) = common::idem(&args);
        assert_eq!(code, 0, "{err}");
        let fields: Vec<&str> = json["changes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["field"].as_str().unwrap())
            .collect();
        for f in &fields {
            assert!(human.contains(f), "{f} not in:\n{human}");
        }
        (json, human)
    };
    let fields = |v: &Value| -> Vec<String> {
        v["changes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["field"].as_str().unwrap().to_string())
            .collect()
    };

    // Nothing changed: a memo hit, and explain executed and wrote nothing.
    let before = tree(&table);
    let (same, human) = explain(&module, params);
    assert_eq!(same["memo"], true, "{same}");
    assert_eq!(same["sameRunKey"], true);
    assert!(fields(&same).is_empty(), "{same}");
    assert!(human.contains("memo hit"), "{human}");
    assert_eq!(same["a"]["runKey"], first["runKey"]);

    let (p, _) = explain(&module, &["--params", r#"{"min_amount": 20}"#]);
    assert_eq!(fields(&p), ["params.min_amount"]);
    assert_eq!(p["changes"][0]["before"], serde_json::json!(10));
    assert_eq!(p["changes"][0]["after"], serde_json::json!(20));
    assert_eq!(p["memo"], false);

    let (m, _) = explain(&other_module, params);
    assert_eq!(fields(&m), ["module"]);

    let (b, _) = explain(
        &module,
        &["--params", r#"{"min_amount": 10}"#, "--batch-rows", "100"],
    );
    assert_eq!(fields(&b), ["batchRows"]);

    // New bytes in one input file (same name).
    common::orders(&data, "2026-10-01", 2_001, 2);
    let (i, human) = explain(&module, params);
    let f = fields(&i);
    assert!(
        f.iter()
            .any(|f| f == "slice.inputs[date=2026-10-01/part-00000.parquet].digest"),
        "{f:?}"
    );
    assert!(f.iter().all(|f| f.starts_with("slice.inputs[")), "{f:?}");
    assert!(human.contains("would execute"), "{human}");
    assert_eq!(tree(&table), before, "explain wrote to the table");
    // Nor does it create a table that is not there.
    let absent = dir.path().join("absent");
    let mut args = run_args(s(&module), s(&data), s(&absent), params);
    args[0] = "explain";
    let (code, v, _, err) = idem_json(&args);
    assert_eq!(code, 0, "{err}");
    assert_eq!(v["a"], Value::Null);
    assert_eq!(v["memo"], false);
    assert!(!absent.exists(), "explain created the table's directory");

    // Two stored runs, by run-key prefix.
    let (code, second, _, err) = idem_json(&run_args(
        s(&module),
        s(&data),
        s(&table),
        &["--params", r#"{"min_amount": 10}"#, "--batch-rows", "500"],
    ));
    assert_eq!(code, 0, "{err}");
    let a = &first["runKey"].as_str().unwrap()[..20];
    let b = &second["runKey"].as_str().unwrap()[..20];
    let (code, two, _, err) = idem_json(&["explain", a, b, "--table", s(&table)]);
    assert_eq!(code, 0, "{err}");
    let f = fields(&two);
    assert!(f.contains(&"batchRows".to_string()), "{f:?}");
    assert!(f.iter().any(|f| f.ends_with(".digest")), "{f:?}");
    assert_eq!(two["sameRunKey"], false);
}

/// Every command's `--json` output validates against its schema; the
/// schemas are strict enough that a wrong shape fails.
#[test]
fn json_outputs_match_their_schemas() {
    let dir = tempfile::tempdir().unwrap();
    let mut docs: Vec<(&str, String)> = Vec::new();
    let mut json = |schema: &'static str, args: &[&str], want: i32| -> Value {
        let (code, v, raw, err) = idem_json(args);
        assert_eq!(code, want, "{args:?}: {raw}{err}");
        docs.push((schema, raw));
        v
    };
    let data = dir.path().join("orders");
    let sample = json(
        "sample",
        &[
            "sample",
            "--out",
            s(&data),
            "--rows",
            "1000",
            "--dates",
            "2026-10-01",
        ],
        0,
    );
    assert_eq!(sample["files"].as_array().unwrap().len(), 2);
    let module = dir.path().join("clean_orders.wasm");
    let target = common::guest_target();
    json(
        "build",
        &[
            "build",
            s(&common::root().join("examples/clean_orders")),
            "--out",
            s(&module),
            "--target-dir",
            s(&target),
        ],
        0,
    );
    json("inspect", &["inspect", s(&module)], 0);
    let clock = common::root().join("tests/wat/import-wall-clock.wat");
    let rejected = json("inspect", &["inspect", s(&clock)], 3);
    assert_eq!(rejected["admitted"], false);
    let file = format!("{}/date=2026-10-01/part-00000.parquet", s(&data));
    let exec = json(
        "exec",
        &[
            "exec",
            "--module",
            s(&module),
            "--input",
            &file,
            "--output",
            s(&dir.path().join("o.parquet")),
        ],
        0,
    );
    // Each input as it was read: its name, size and sha256.
    let (digest, size) = idem::digest::Digest::of_file(std::path::Path::new(&file)).unwrap();
    assert_eq!(
        exec["inputs"],
        serde_json::json!([{"path": "part-00000.parquet", "size": size, "digest": digest.as_str()}])
    );
    let table = dir.path().join("t");
    let run = run_args(s(&module), s(&data), s(&table), &[]);
    let committed = json("run", &run, 0);
    assert_eq!(committed["outcome"]["kind"], "committed");
    let memo = json("run", &run, 0);
    assert_eq!(memo["outcome"]["kind"], "memo");
    let mut forced = run.clone();
    forced.push("--force");
    let unchanged = json("run", &forced, 0);
    assert_eq!(unchanged["outcome"]["kind"], "unchanged");
    let manifest = committed["manifest"]
        .as_str()
        .unwrap()
        .trim_start_matches("file://")
        .to_string();
    json("verify", &["verify", &manifest], 0);
    json("audit", &["audit", s(&table)], 0);
    let log = json("log", &["log", s(&table)], 0);
    assert_eq!(log["runs"].as_array().unwrap().len(), 3);
    // Each run's params are logged; the log filters by slice, time and count.
    assert!(
        log["runs"][0]["params"].as_str().unwrap().starts_with('{'),
        "{log}"
    );
    let last = json(
        "log",
        &[
            "log",
            s(&table),
            "--slice",
            "date=2026-10-01",
            "--limit",
            "1",
        ],
        0,
    );
    assert_eq!(last["runs"].as_array().unwrap().len(), 1, "{last}");
    assert_eq!(last["runs"][0]["outcome"], "unchanged", "{last}");
    let none = json("log", &["log", s(&table), "--since", "2100-01-01"], 0);
    assert_eq!(none["runs"].as_array().unwrap().len(), 0, "{none}");
    let other = json("log", &["log", s(&table), "--slice", "date=1999-01-01"], 0);
    assert_eq!(other["runs"].as_array().unwrap().len(), 0, "{other}");
    let by_slice = format!("{}#date=2026-10-01", s(&table));
    json("manifest", &["show", &by_slice], 0);
    // verify takes TABLE#SLICE as show does.
    let verified = json("verify", &["verify", &by_slice], 0);
    assert_eq!(verified["match"], true, "{verified}");
    // The table alone: its slices' current commits.
    let shown = json("show-table", &["show", s(&table)], 0);
    assert_eq!(shown["slices"][0]["slice"], "date=2026-10-01", "{shown}");
    assert_eq!(shown["slices"][0]["runKey"], committed["runKey"], "{shown}");
    let mut explain = run.clone();
    explain[0] = "explain";
    json("explain", &explain, 0);
    json("explain", &["explain", &by_slice, &manifest], 0);
    json("new", &["new", "t2", "--dir", s(&dir.path().join("t2"))], 0);
    let err = json(
        "error",
        &[
            "run",
            "--module",
            s(&module),
            "--input",
            s(&dir.path().join("nope")),
            "--partition",
            "date=1",
            "--table",
            s(&table),
        ],
        2,
    );
    assert_eq!(err["error"]["kind"], "input");
    let demo = json("demo", &["demo", "--dir", s(&dir.path().join("demo"))], 0);
    assert_eq!(demo["runs"].as_array().unwrap().len(), 6);
    // daily_revenue takes `customer` dictionary-encoded: its manifest
    // records that, and still validates.
    let demo_table = dir.path().join("demo").join("daily_revenue");
    let shown = json(
        "manifest",
        &["show", &format!("{}#date=2026-10-01", s(&demo_table))],
        0,
    );
    assert_eq!(
        shown["predicate"]["result"]["dictionaries"],
        serde_json::json!(["customer"])
    );

    let refs: Vec<(&str, &str)> = docs.iter().map(|(n, d)| (*n, d.as_str())).collect();
    common::check_schemas(&refs).unwrap_or_else(|e| panic!("{e}"));
    // The check can fail: a run without its outcome, an extra field, a
    // manifest with a short digest.
    let mut broken: Value =
        serde_json::from_str(&docs.iter().find(|d| d.0 == "run").unwrap().1).unwrap();
    broken.as_object_mut().unwrap().remove("outcome");
    assert!(common::check_schemas(&[("run", &broken.to_string())]).is_err());
    assert!(
        common::check_schemas(&[("log", r#"{"table": "t", "runs": [], "extra": 1}"#)]).is_err()
    );
    assert!(
        common::check_schemas(&[(
            "error",
            r#"{"error": {"kind": "guest", "exitCode": 4, "message": "m"}}"#
        )])
        .is_err()
    );
    let short = docs
        .iter()
        .find(|d| d.0 == "manifest")
        .unwrap()
        .1
        .replacen("sha256:", "sha256:0", 1);
    assert!(common::check_schemas(&[("manifest", &short)]).is_err());
}

/// Each exit code `idem --help` lists is what the CLI returns, with a
/// `--json` error of the matching kind.
#[test]
fn each_exit_code_means_what_the_help_says() {
    let (code, help, _) = common::idem(&["--help"]);
    assert_eq!(code, 0);
    for line in [
        "0  ok",
        "1  a check did not pass",
        "2  usage or input",
        "3  the sandbox rejected",
        "4  storage or commit",
    ] {
        assert!(help.contains(line), "`{line}` not in --help:\n{help}");
    }
    let dir = tempfile::tempdir().unwrap();
    let module = common::guest("examples/clean_orders");
    let data = dir.path().join("orders");
    common::orders(&data, "2026-10-01", 1_000, 1);
    let table = dir.path().join("t");
    let mut errors = Vec::new();
    let mut expect = |args: &[&str], want: i32, kind: Option<&str>| {
        let (code, v, raw, err) = idem_json(args);
        assert_eq!(code, want, "{args:?}:\n{raw}\n{err}");
        if let Some(kind) = kind {
            assert_eq!(v["error"]["kind"], kind, "{raw}");
            assert_eq!(v["error"]["exitCode"], want, "{raw}");
            assert!(err.contains("error: "), "{err}");
            errors.push(raw);
        }
    };
    // 0: a run, and its rerun (memo).
    expect(&run_args(s(&module), s(&data), s(&table), &[]), 0, None);
    expect(&run_args(s(&module), s(&data), s(&table), &[]), 0, None);
    // 1: a manifest whose bytes were edited under its name.
    let manifests = table.join("_idem/manifests");
    let original = std::fs::read_dir(&manifests)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let edited_dir = dir.path().join("edited");
    std::fs::create_dir_all(&edited_dir).unwrap();
    let edited = edited_dir.join(original.file_name().unwrap());
    let text = std::fs::read_to_string(&original).unwrap();
    std::fs::write(&edited, text.replacen("\"rowsOut\":", "\"rowsOut\":1", 1)).unwrap();
    expect(&["verify", s(&edited)], 1, None);
    // 2: usage and input errors.
    expect(
        &run_args(s(&module), s(&dir.path().join("missing")), s(&table), &[]),
        2,
        Some("input"),
    );
    expect(
        &run_args(s(&module), s(&data), s(&table), &["--params", "{not json"]),
        2,
        Some("input"),
    );
    expect(&["run", "--no-such-flag"], 2, Some("input"));
    expect(
        &run_args(
            s(&module),
            s(&data),
            s(&dir.path().join("t2")),
            &["--mode", "merge", "--key", "no_such_col"],
        ),
        2,
        Some("input"),
    );
    // 3: a rejected module, a guest that traps.
    let clock = common::root().join("tests/wat/import-wall-clock.wat");
    expect(
        &run_args(s(&clock), s(&data), s(&dir.path().join("t3")), &[]),
        3,
        Some("guest"),
    );
    let hostile = common::guest("tests/guests/hostile");
    expect(
        &run_args(
            s(&hostile),
            s(&data),
            s(&dir.path().join("t4")),
            &["--params", r#"{"mode": "panic"}"#],
        ),
        3,
        Some("guest"),
    );
    // 4: the table's place cannot be written (its parent is a file).
    let blocker = dir.path().join("blocker");
    std::fs::write(&blocker, "a file").unwrap();
    expect(
        &run_args(s(&module), s(&data), s(&blocker.join("t")), &[]),
        4,
        Some("storage"),
    );
    let mut refs: Vec<(&str, &str)> = errors.iter().map(|d| ("error", d.as_str())).collect();
    // 1 again: an audit whose replay fails (the guest runs out of a tiny
    // fuel budget) reports that slice as failed, not the audit as an error.
    let (code, audit, raw, err) = idem_json(&["audit", s(&table), "--replay", "--fuel", "1"]);
    assert_eq!(code, 1, "{raw}{err}");
    assert_eq!(audit["slices"][0]["proof"], "failed", "{raw}");
    let detail = audit["slices"][0]["detail"].as_str().unwrap();
    assert!(
        detail.contains("replay failed") && detail.contains("fuel"),
        "{raw}"
    );
    refs.push(("audit", &raw));
    common::check_schemas(&refs).unwrap_or_else(|e| panic!("{e}"));
}

/// Progress bars (hashing, running with rows/s, committing) on a terminal;
/// none in a pipe, and none with -q.
#[test]
fn progress_bars_show_on_a_terminal_only() {
    let dir = tempfile::tempdir().unwrap();
    let module = common::guest("examples/clean_orders");
    let data = dir.path().join("orders");
    common::orders(&data, "2026-10-01", 20_000, 2);
    let idem = env!("CARGO_BIN_EXE_idem");
    // `script` runs the command on a pseudo-terminal and copies what it
    // draws to stdout.
    let on_terminal = |table: &str, quiet: bool| -> String {
        let cmd = format!(
            "{idem} run --module {} --input {} --partition date=2026-10-01 --table {} --batch-rows 1000{}",
            s(&module),
            s(&data),
            s(&dir.path().join(table)),
            if quiet { " -q" } else { "" }
        );
        let out = std::process::Command::new("script")
            .args(["-q", "-e", "-c", &cmd, "/dev/null"])
            .env("TERM", "xterm-256color")
            .env_remove("NO_COLOR")
            .env("IDEM_CACHE_DIR", common::test_cache())
            .output()
            .expect("`script` (util-linux) runs a command on a pseudo-terminal");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        text
    };
    let tty = on_terminal("a", false);
    // Each bar's last frame stays as the step's summary: bytes hashed and
    // bytes/s, rows run and rows/s, the commit.
    for want in [
        "hashed",
        "iB/s",
        "running",
        "rows/s",
        "20,000 rows",
        "committing",
        "result:   committed",
    ] {
        assert!(tty.contains(want), "`{want}` not on the terminal:\n{tty}");
    }
    let quiet = on_terminal("b", true);
    assert!(quiet.contains("result:   committed"), "{quiet}");
    assert!(
        !quiet.contains("rows/s") && !quiet.contains("hashed"),
        "-q drew bars:\n{quiet}"
    );

    let (code, out, err) = common::idem(&run_args(
        s(&module),
        s(&data),
        s(&dir.path().join("c")),
        &[],
    ));
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("result:   committed"), "{out}");
    for noise in ["rows/s", "hashed", "\x1b[", "\r"] {
        assert!(
            !err.contains(noise) && !out.contains(noise),
            "{noise:?} in a pipe:\n{err}"
        );
    }
}
