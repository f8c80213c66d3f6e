//! The `idem` command line, run as a user would: real binary, real files.

mod common;

use idem::digest::{Digest, of_batches};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

fn s(p: &std::path::Path) -> &str {
    p.to_str().unwrap()
}

fn read_parquet(path: &std::path::Path) -> Vec<arrow::array::RecordBatch> {
    let file = std::fs::File::open(path).unwrap();
    ParquetRecordBatchReaderBuilder::try_new(file)
        .unwrap()
        .build()
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

fn field(stdout: &str, label: &str) -> String {
    common::field(stdout, label)
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn inspect_reports_imports_exports_and_verdict() {
    let clock = common::root().join("tests/wat/import-wall-clock.wat");
    let (code, out, _) = common::idem(&["inspect", s(&clock)]);
    assert_eq!(code, 3, "a rejected module is exit 3: {out}");
    assert!(
        out.contains("wasi:clocks/wall-clock@0.2.0  (FORBIDDEN: clock"),
        "{out}"
    );
    assert!(out.contains("verdict: rejected"), "{out}");

    let good = common::guest("examples/clean_orders");
    let (code, out, err) = common::idem(&["inspect", s(&good)]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("idem:transform/host@0.2.0  (allowed)"),
        "{out}"
    );
    assert!(out.contains("idem:transform/transform@0.2.0"), "{out}");
    assert!(out.contains("verdict: admitted"), "{out}");
    let digest = field(&out, "digest:");
    assert_eq!(
        digest,
        Digest::of_bytes(&std::fs::read(&good).unwrap()).as_str()
    );
}

#[test]
fn build_writes_a_component_and_prints_its_digest() {
    let dir = tempfile::tempdir().unwrap();
    let out_path = dir.path().join("dedup.wasm");
    let crate_dir = common::root().join("examples/dedup_events");
    let target = common::guest_target();
    let (code, out, err) = common::idem(&[
        "build",
        s(&crate_dir),
        "--out",
        s(&out_path),
        "--target-dir",
        s(&target),
    ]);
    assert_eq!(code, 0, "{err}");
    let bytes = std::fs::read(&out_path).unwrap();
    assert!(bytes.starts_with(b"\0asm\x0d\0\x01\0"), "not a component");
    assert_eq!(
        out.split_whitespace().next().unwrap(),
        Digest::of_bytes(&bytes).as_str()
    );
}

#[test]
fn exec_streams_parquet_through_a_transform_and_prints_the_output_digest() {
    let dir = tempfile::tempdir().unwrap();
    let files = common::orders(&dir.path().join("in"), "2026-10-02", 20_000, 2);
    let out_path = dir.path().join("out/clean.parquet");
    let module = common::guest("examples/clean_orders");
    let mut args = vec![
        "exec",
        "--module",
        s(&module),
        "--output",
        s(&out_path),
        "--params",
        r#"{"min_amount": 300}"#,
    ];
    args.push("--input");
    args.extend(files.iter().map(|f| s(f)));
    args.extend(["--batch-rows", "777"]);
    let (code, out, err) = common::idem(&args);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("rows:    20000 in,"), "{out}");
    // Each input, hashed as it was read: its sha256 and its name, in order.
    let inputs: Vec<&str> = out.lines().filter(|l| l.starts_with("input:")).collect();
    assert_eq!(inputs.len(), files.len(), "{out}");
    for (line, f) in inputs.iter().zip(&files) {
        let (digest, _) = Digest::of_file(f).unwrap();
        let name = f.file_name().unwrap().to_str().unwrap();
        assert_eq!(
            line.split_whitespace().collect::<Vec<_>>(),
            ["input:", digest.as_str(), name]
        );
    }
    // Snappy-compressed, as Delta data files and other engines' output are.
    let meta = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(&out_path).unwrap())
        .unwrap()
        .metadata()
        .clone();
    for rg in meta.row_groups() {
        for c in rg.columns() {
            assert_eq!(c.compression(), parquet::basic::Compression::SNAPPY);
        }
    }
    // The printed digest is the logical digest of what the file holds.
    let batches = read_parquet(&out_path);
    assert!(batches.iter().map(|b| b.num_rows()).sum::<usize>() > 0);
    assert_eq!(
        field(&out, "output:"),
        of_batches(&batches).unwrap().as_str()
    );
    // Batch size changes the pushes, not the result of a stateless transform.
    let out2 = dir.path().join("out/clean2.parquet");
    let mut args2 = args.clone();
    let n = args2.len();
    args2[n - 1] = "5000";
    args2[4] = s(&out2);
    let (code, again, err) = common::idem(&args2);
    assert_eq!(code, 0, "{err}");
    assert_eq!(field(&again, "output:"), field(&out, "output:"));
}

#[test]
fn exec_names_a_malformed_parquet_file_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut files = common::orders(dir.path(), "2026-10-01", 1_000, 1);
    let bad = dir.path().join("date=2026-10-01/zz-broken.parquet");
    std::fs::write(&bad, b"PAR1 this is not parquet PAR1").unwrap();
    files.push(bad);
    let out_path = dir.path().join("out.parquet");
    let module = common::guest("examples/clean_orders");
    let mut args = vec![
        "exec",
        "--module",
        s(&module),
        "--output",
        s(&out_path),
        "--input",
    ];
    args.extend(files.iter().map(|f| s(f)));
    let (code, _, err) = common::idem(&args);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("zz-broken.parquet") && err.contains("not a readable Parquet file"),
        "{err}"
    );
    assert!(!out_path.exists(), "half-written output left behind");
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        1,
        "temporary files left behind"
    );
}

#[test]
fn exec_stops_a_runaway_guest_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let files = common::orders(dir.path(), "2026-10-01", 1_000, 1);
    let out_path = dir.path().join("out.parquet");
    let module = common::guest("tests/guests/hostile");
    let (code, _, err) = common::idem(&[
        "exec",
        "--module",
        s(&module),
        "--output",
        s(&out_path),
        "--input",
        s(&files[0]),
        "--params",
        r#"{"mode": "spin"}"#,
        "--deadline-ms",
        "300",
    ]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("wall-clock deadline of 300 ms"), "{err}");
    assert!(!out_path.exists());
    // Nor any staging left beside it.
    let left: Vec<_> = std::fs::read_dir(out_path.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".idem-"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn exec_rejects_a_module_with_a_forbidden_import() {
    let dir = tempfile::tempdir().unwrap();
    let files = common::orders(dir.path(), "2026-10-01", 100, 1);
    let module = common::root().join("tests/wat/import-sockets.wat");
    let out_path = dir.path().join("out.parquet");
    let (code, _, err) = common::idem(&[
        "exec",
        "--module",
        s(&module),
        "--output",
        s(&out_path),
        "--input",
        s(&files[0]),
    ]);
    assert_eq!(code, 3);
    assert!(
        err.contains("imports `wasi:sockets/tcp@0.2.0` (socket"),
        "{err}"
    );
}

/// The quick start: three days committed, then every rerun is a memo hit
/// (the demo itself fails if a rerun commits); the table has 3 versions.
#[test]
fn the_demo_commits_three_days_and_its_reruns_commit_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_idem"))
        .args(["demo", "--dir"])
        .arg(dir.path())
        .env("IDEM_CACHE_DIR", common::test_cache())
        .env("IDEM_GUEST_TARGET_DIR", common::guest_target())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stdout.matches("committed version").count(), 3, "{stdout}");
    assert_eq!(
        stdout
            .lines()
            .filter(|l| l.starts_with("rerun") && l.contains("memo"))
            .count(),
        3,
        "{stdout}"
    );
    let view = common::read_table(&dir.path().join("daily_revenue"), None);
    assert_eq!(view.version, 3);
}

/// The README's first command as a user runs it: `idem demo` with no flag
/// (its default `./idem-demo`, the default compiled-code cache and guest
/// target), in an empty folder, then again in the same folder: the second
/// time every run, first pass included, is a memo hit.
#[test]
fn the_quick_start_runs_as_written_twice_in_one_folder() {
    let dir = tempfile::tempdir().unwrap();
    let demo = || {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_idem"))
            .arg("demo")
            .current_dir(dir.path())
            .env_remove("IDEM_CACHE_DIR")
            .env_remove("IDEM_GUEST_TARGET_DIR")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        stdout
    };
    let first = demo();
    assert_eq!(first.matches("committed version").count(), 3, "{first}");
    assert!(
        dir.path()
            .join("idem-demo/daily_revenue/_delta_log")
            .is_dir()
    );
    let second = demo();
    assert_eq!(second.matches("committed version").count(), 0, "{second}");
    assert_eq!(second.matches("memo").count(), 6, "{second}");
    assert_eq!(
        common::read_table(&dir.path().join("idem-demo/daily_revenue"), None).version,
        3
    );
}

/// `idem sample` writes the same bytes every time: N rows over K files.
#[test]
fn sample_data_is_deterministic() {
    let dir = tempfile::tempdir().unwrap();
    let write = |d: &std::path::Path| {
        let (code, out, err) = common::idem(&[
            "sample",
            "--out",
            d.to_str().unwrap(),
            "--dates",
            "2026-10-01",
            "--rows",
            "1000",
            "--files",
            "2",
        ]);
        assert_eq!(code, 0, "{err}");
        out.lines()
            .map(std::path::PathBuf::from)
            .collect::<Vec<_>>()
    };
    let (a, b) = (write(&dir.path().join("a")), write(&dir.path().join("b")));
    assert_eq!(a.len(), 2);
    let rows: usize = a.iter().map(|f| common::read_parquet_rows(f).len()).sum();
    assert_eq!(rows, 1000);
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(std::fs::read(x).unwrap(), std::fs::read(y).unwrap());
    }
}

#[test]
fn exec_refuses_a_module_over_the_size_limit_naming_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let files = common::orders(dir.path(), "2026-10-01", 100, 1);
    let module = common::guest("examples/clean_orders");
    let out_path = dir.path().join("out.parquet");
    let (code, _, err) = common::idem(&[
        "exec",
        "--module",
        s(&module),
        "--output",
        s(&out_path),
        "--input",
        s(&files[0]),
        "--max-module-mb",
        "1",
    ]);
    assert_eq!(code, 3, "{err}");
    assert!(
        err.contains("over the 1 MiB limit: raise --max-module-mb"),
        "{err}"
    );
    assert!(!out_path.exists());
}

#[cfg(unix)]
#[test]
fn exec_warns_about_and_skips_a_cache_directory_others_can_write() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let files = common::orders(&dir.path().join("in"), "2026-10-01", 1_000, 1);
    let cache = dir.path().join("cache");
    std::fs::create_dir(&cache).unwrap();
    std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o777)).unwrap();
    let module = common::guest("examples/clean_orders");
    let out_path = dir.path().join("out.parquet");
    let (code, _, err) = common::idem(&[
        "exec",
        "--module",
        s(&module),
        "--output",
        s(&out_path),
        "--input",
        s(&files[0]),
        "--cache-dir",
        s(&cache),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("not using the compiled-code cache") && err.contains("chmod go-w"),
        "{err}"
    );
    assert!(std::fs::read_dir(&cache).unwrap().next().is_none());
    assert!(out_path.exists());
}

/// A Parquet file with the nested columns real datasets have: a map and a
/// list of structs, with nulls at every level.
fn nested_parquet(path: &std::path::Path, rows: usize) {
    use arrow::array::{
        ArrayRef, Int32Builder, Int64Array, Int64Builder, ListBuilder, MapBuilder, RecordBatch,
        StringBuilder, StructBuilder,
    };
    use arrow::datatypes::{DataType, Field, Fields};
    use std::sync::Arc;
    let ids = Int64Array::from_iter_values(0..rows as i64);
    let mut tags = MapBuilder::new(None, StringBuilder::new(), Int64Builder::new());
    let item = Fields::from(vec![
        Field::new("sku", DataType::Utf8, true),
        Field::new("qty", DataType::Int32, true),
    ]);
    let mut items = ListBuilder::new(StructBuilder::from_fields(item, 0));
    for i in 0..rows {
        for k in 0..i % 3 {
            tags.keys().append_value(format!("k{k}"));
            if (i + k) % 5 == 0 {
                tags.values().append_null();
            } else {
                tags.values().append_value((i * k) as i64);
            }
        }
        tags.append(i % 7 != 0).unwrap();
        let entries = items.values();
        for k in 0..i % 4 {
            let sku = entries.field_builder::<StringBuilder>(0).unwrap();
            if (i + k) % 6 == 0 {
                sku.append_null();
            } else {
                sku.append_value(format!("sku-{}", i + k));
            }
            let qty = entries.field_builder::<Int32Builder>(1).unwrap();
            qty.append_option(((i + k) % 4 != 0).then_some(k as i32));
            entries.append((i + k) % 9 != 0);
        }
        items.append(i % 11 != 0);
    }
    let columns: Vec<(&str, ArrayRef)> = vec![
        ("id", Arc::new(ids)),
        ("tags", Arc::new(tags.finish())),
        ("items", Arc::new(items.finish())),
    ];
    let batch = RecordBatch::try_from_iter(columns).unwrap();
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let file = std::fs::File::create(path).unwrap();
    let mut w = parquet::arrow::ArrowWriter::try_new(file, batch.schema(), None).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
}

#[test]
fn exec_echoes_map_and_list_of_struct_columns_and_digests_them() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in/nested.parquet");
    nested_parquet(&input, 2_000);
    let module = common::guest("tests/guests/hostile");
    let mut digests = Vec::new();
    for batch_rows in ["500", "333"] {
        let out_path = dir.path().join(format!("out/echo-{batch_rows}.parquet"));
        let (code, out, err) = common::idem(&[
            "exec",
            "--module",
            s(&module),
            "--output",
            s(&out_path),
            "--input",
            s(&input),
            "--batch-rows",
            batch_rows,
        ]);
        assert_ne!(code, 101, "the host panicked:\n{err}");
        assert_eq!(code, 0, "{err}");
        assert!(out.contains("rows:    2000 in, 2000 out"), "{out}");
        // The printed digest is the logical digest of what the file holds.
        let batches = read_parquet(&out_path);
        assert_eq!(
            field(&out, "output:"),
            of_batches(&batches).unwrap().as_str()
        );
        digests.push(field(&out, "output:"));
    }
    // Batch boundaries do not change the digest of the same rows.
    assert_eq!(digests[0], digests[1]);
}

/// The sandbox limits through the CLI: each flag stops the hostile guest
/// with a message naming the flag, and writes nothing.
#[test]
fn exec_limit_flags_stop_a_hostile_guest_and_name_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let module = common::guest("tests/guests/hostile");
    let files = common::orders(dir.path(), "2026-10-01", 3_000, 1);
    for (mode, flags, word) in [
        ("oom", vec!["--max-memory-mb", "32"], "--max-memory-mb"),
        ("big", vec!["--max-output-mb", "1"], "--max-output-mb"),
        ("spin", vec!["--fuel", "100000"], "--fuel"),
    ] {
        let out = dir.path().join(format!("{mode}.parquet"));
        let params = if mode == "big" {
            r#"{"mode": "big", "bytes": 2000000}"#.to_string()
        } else {
            format!(r#"{{"mode": "{mode}"}}"#)
        };
        let mut args = vec![
            "exec".to_string(),
            "--module".into(),
            module.to_str().unwrap().into(),
            "--input".into(),
            files[0].to_str().unwrap().into(),
            "--output".into(),
            out.to_str().unwrap().into(),
            "--params".into(),
            params,
            "--batch-rows".into(),
            "1000".into(),
        ];
        args.extend(flags.iter().map(|f| f.to_string()));
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, _, err) = common::idem(&refs);
        assert_eq!(code, 3, "{mode}: {err}");
        assert!(err.contains(word), "{mode}: {err}");
        assert!(!out.exists(), "{mode}: output written");
    }
}

/// Logs: quiet by default (no library chatter, no colour into a pipe),
/// `-v` shows what idem handled itself, `-vv` everything, `RUST_LOG` sets
/// the filter exactly.
#[test]
fn log_levels_follow_verbosity_and_pipes_get_no_colour() {
    let dir = tempfile::tempdir().unwrap();
    let module = common::guest("examples/clean_orders");
    let data = dir.path().join("data");
    common::orders(&data, "2026-10-01", 500, 1);
    let run = |table: &str, extra: &[&str], env: &[(&str, &str)]| {
        let t = dir.path().join(table);
        let mut args: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        args.extend(
            [
                "run",
                "--module",
                module.to_str().unwrap(),
                "--input",
                data.to_str().unwrap(),
                "--partition",
                "date=2026-10-01",
                "--table",
                t.to_str().unwrap(),
            ]
            .map(String::from),
        );
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, out, err) = common::idem_env(&refs, env);
        assert_eq!(code, 0, "{out}{err}");
        err
    };
    let quiet = run("a", &[], &[]);
    assert!(
        !quiet.contains("INFO") && !quiet.contains("DEBUG") && !quiet.contains("ERROR"),
        "{quiet}"
    );
    let loud = run("b", &["-vv"], &[]);
    assert!(loud.contains("DEBUG"), "-vv shows debug logs: {loud}");
    assert!(!loud.contains('\x1b'), "colour codes into a pipe: {loud:?}");
    let exact = run("c", &[], &[("RUST_LOG", "idem=info")]);
    assert!(!exact.contains("DEBUG"), "{exact}");
    assert!(!exact.contains("deltalake"), "{exact}");
}

/// Every subcommand's help ends with an example of its use; completions
/// and the man page are generated from the same definitions.
#[test]
fn every_subcommand_has_an_example_and_completions_and_a_man_page_exist() {
    for cmd in [
        "build",
        "inspect",
        "exec",
        "run",
        "verify",
        "audit",
        "log",
        "sample",
        "demo",
        "backfill",
        "show",
        "explain",
        "new",
        "completions",
        "man",
    ] {
        let (code, out, err) = common::idem(&[cmd, "--help"]);
        assert_eq!(code, 0, "{cmd}: {err}");
        assert!(
            (out.contains("Example:") || out.contains("Examples:"))
                && out.contains(&format!("  idem {cmd}")),
            "{cmd} --help has no example:\n{out}"
        );
    }
    let (code, out, _) = common::idem(&["completions", "bash"]);
    assert_eq!(code, 0);
    assert!(out.contains("_idem()") && out.contains("verify"), "{out}");
    let (code, out, _) = common::idem(&["man"]);
    assert_eq!(code, 0);
    assert!(out.contains(".TH idem") && out.contains("audit"), "{out}");
}

/// Bad scheduler input is refused before anything runs (exit 2), naming
/// the fix: a logical date that is no ISO 8601 date or timestamp, params
/// that are not a JSON object. A date partition run without
/// `--logical-date` takes the partition's date, so adding the flag later
/// (`{{ ds }}`) is the same run: a memo hit.
#[test]
fn bad_scheduler_input_is_refused_and_a_date_partition_implies_its_date() {
    let dir = tempfile::tempdir().unwrap();
    let module = common::guest("examples/clean_orders");
    let root = dir.path().join("orders");
    common::orders(&root, "2026-10-01", 500, 1);
    let table = dir.path().join("t");
    let run = |extra: &[&str]| {
        let args = common::day_args(
            module.to_str().unwrap(),
            root.to_str().unwrap(),
            "2026-10-01",
            table.to_str().unwrap(),
            extra,
        );
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        common::idem(&refs)
    };
    for (flags, says) in [
        (vec!["--logical-date", "2026-13-45"], "not an ISO 8601 date"),
        (vec!["--logical-date", "yesterday"], "not an ISO 8601 date"),
        (vec!["--logical-date", "2026-02-30"], "not an ISO 8601 date"),
        (vec!["--params", "60"], "must be a JSON object"),
        (vec!["--params", "[1]"], "must be a JSON object"),
    ] {
        let (code, out, err) = run(&flags);
        assert_eq!(code, 2, "{flags:?} was accepted:\n{out}\n{err}");
        assert!(err.contains(says), "{flags:?}: {err}");
    }
    assert!(!table.exists(), "a refused run created the table");
    let (code, out, err) = run(&[]);
    assert_eq!(code, 0, "{err}");
    assert!(
        common::field(&out, "result:").starts_with("committed"),
        "{out}"
    );
    let (code, out, err) = run(&["--logical-date", "2026-10-01"]);
    assert_eq!(code, 0, "{err}");
    assert!(common::field(&out, "result:").contains("memo"), "{out}");
    let (code, out, err) = run(&["--logical-date", "2026-10-01T00:00:00+00:00"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        !common::field(&out, "result:").contains("memo"),
        "another logical date is another run: {out}"
    );
}

/// `idem inspect` uses the compiled-code cache as `idem build` and `idem
/// run` do: it used to compile every time without it, and a freshly built
/// 19 MB JavaScript component then missed the 60 s compile budget on a
/// loaded machine right after `idem build` had compiled it.
#[test]
fn inspect_reads_and_fills_the_compiled_code_cache() {
    let cache = tempfile::tempdir().unwrap();
    let module = common::guest("examples/clean_orders");
    let entries = || -> Vec<std::path::PathBuf> {
        let mut v: Vec<_> = walk(cache.path())
            .into_iter()
            .filter(|p| p.extension().is_some_and(|e| e == "cwasm"))
            .collect();
        v.sort();
        v
    };
    use common::files_below as walk;
    let inspect = || {
        let (code, out, err) = common::idem_env(
            &["inspect", module.to_str().unwrap()],
            &[("IDEM_CACHE_DIR", cache.path().to_str().unwrap())],
        );
        assert_eq!(code, 0, "{out}\n{err}");
        out
    };
    let first = inspect();
    let cached = entries();
    assert_eq!(cached.len(), 1, "inspect did not use the cache: {cached:?}");
    let modified = std::fs::metadata(&cached[0]).unwrap().modified().unwrap();
    assert_eq!(inspect(), first);
    assert_eq!(entries(), cached);
    assert_eq!(
        std::fs::metadata(&cached[0]).unwrap().modified().unwrap(),
        modified,
        "the second inspect compiled again"
    );
}

/// The messages a new user met first (issue 34), each naming the cause
/// and the fix, once.
#[test]
fn the_first_mistakes_get_messages_that_name_what_is_there_and_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let data = d.join("data");
    for day in [
        "2026-10-01",
        "2026-10-02",
        "2026-10-03",
        "2026-10-05",
        "2026-10-06",
        "2026-10-07",
        "2026-10-08",
    ] {
        common::orders(&data, day, 50, 1);
    }
    let module = common::guest("examples/clean_orders");
    let run = |input: &str, partition: &str, table: &str| {
        common::idem(&[
            "run",
            "--module",
            s(&module),
            "--input",
            input,
            "--partition",
            partition,
            "--table",
            table,
        ])
    };
    let table = d.join("t");
    // A missing module is said once.
    let (code, _, err) = common::idem(&[
        "run",
        "--module",
        s(&d.join("nope.wasm")),
        "--input",
        s(&data),
        "--partition",
        "date=2026-10-01",
        "--table",
        s(&table),
    ]);
    assert_ne!(code, 0);
    assert_eq!(err.matches("does not exist").count(), 1, "{err}");
    // A missing partition names the partitions around it, and no flag
    // (backfill and the service have no --partition).
    let (code, _, err) = run(s(&data), "date=2026-10-04", s(&table));
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("run from date=2026-10-01 to date=2026-10-08 (7 in all; around date=2026-10-04: date=2026-10-03, date=2026-10-05)"),
        "{err}"
    );
    assert!(!err.contains("--partition"), "{err}");
    // Another column: what is there.
    let (_, _, err) = run(s(&data), "day=2026-10-01", s(&table));
    assert!(
        err.contains("it holds no day= directories (it holds date=2026-10-01/"),
        "{err}"
    );
    // The partition directory itself, or one file of it, as the input.
    let day = data.join("date=2026-10-01");
    let (_, _, err) = run(s(&day), "date=2026-10-01", s(&table));
    assert!(
        err.contains(
            "the input is itself the partition directory date=2026-10-01/: give the dataset root"
        ),
        "{err}"
    );
    let file = std::fs::read_dir(&day)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let (_, _, err) = run(s(&file), "date=2026-10-01", s(&table));
    assert!(
        err.contains(
            "is refused: it is a file, not a dataset root. Nothing was run or committed; to read files, give them with --files"
        ),
        "{err}"
    );
    // A JSON file (not JSON lines) is called one.
    let json = d.join("orders.json");
    std::fs::write(&json, "[{\"order_id\": 1}]").unwrap();
    let (code, _, err) = common::idem(&[
        "run",
        "--module",
        s(&module),
        "--files",
        s(&json),
        "--mode",
        "append",
        "--table",
        s(&table),
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("it is a JSON file (by its name): idem reads JSON lines, one object per line, named .jsonl, .ndjson or .json.gz"), "{err}");
    // A dataset's folder is not made a table; a new folder is, and then
    // `idem show TABLE` lists its slices.
    let (code, _, err) = run(s(&data), "date=2026-10-01", s(&data));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("has no Delta log but holds data (date=2026-10-01, date=2026-10-02, date=2026-10-03, ...): it is a dataset, not a table"), "{err}");
    assert!(!data.join("_delta_log").exists() && !data.join("_idem").exists());
    for day in ["date=2026-10-02", "date=2026-10-01"] {
        let (code, _, err) = run(s(&data), day, s(&table));
        assert_eq!(code, 0, "{err}");
    }
    let (code, out, err) = common::idem(&["show", s(&table)]);
    assert_eq!(code, 0, "{err}");
    let rows: Vec<&str> = out.lines().filter(|l| l.starts_with("date=")).collect();
    assert_eq!(rows.len(), 2, "{out}");
    assert!(
        rows[0].starts_with("date=2026-10-01") && rows[1].contains("overwrite-partition"),
        "{out}"
    );
    // A guest's trap names its batch, and its panic message is said once.
    let hostile = common::guest("tests/guests/hostile");
    let (code, _, err) = common::idem(&[
        "run",
        "--module",
        s(&hostile),
        "--input",
        s(&data),
        "--partition",
        "date=2026-10-01",
        "--table",
        s(&d.join("h")),
        "--params",
        r#"{"mode": "panic"}"#,
        "--batch-rows",
        "20",
    ]);
    assert_ne!(code, 0);
    assert!(
        err.contains("guest trapped in `push` (input batch 1, rows 1-20 of its input)"),
        "{err}"
    );
    assert_eq!(
        err.matches("deliberate panic in batch 1").count(),
        1,
        "{err}"
    ); // A Rust transform that reads the wall clock is told what to use.
    let (code, _, err) = common::idem(&[
        "run",
        "--module",
        s(&hostile),
        "--input",
        s(&data),
        "--partition",
        "date=2026-10-01",
        "--table",
        s(&d.join("h")),
        "--params",
        r#"{"mode": "clock"}"#,
    ]);
    assert_ne!(code, 0);
    assert!(
        err.contains("time not implemented on this platform"),
        "{err}"
    );
    assert!(
        err.contains("use ctx.logical_date, not SystemTime/Instant::now()"),
        "{err}"
    );
}

/// An installed idem (the binary alone, as `cargo install` leaves it, run
/// with `IDEM_IGNORE_CHECKOUT=1`: as if no checkout were there) runs the
/// quick start in an empty folder, and `idem new` writes a crate that
/// builds, both against the Rust SDK inside the binary (written once into
/// idem's cache), not the checkout.
#[test]
fn an_installed_binary_runs_the_demo_and_new_crates_without_a_checkout() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin/idem");
    std::fs::create_dir_all(bin.parent().unwrap()).unwrap();
    std::fs::copy(env!("CARGO_BIN_EXE_idem"), &bin).unwrap();
    let cache = dir.path().join("cache");
    let empty = dir.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let idem = |args: &[&str]| {
        let out = std::process::Command::new(&bin)
            .args(args)
            .current_dir(&empty)
            .env("IDEM_IGNORE_CHECKOUT", "1")
            .env("IDEM_CACHE_DIR", &cache)
            // Arrow compiled for wasm once per suite, not once per test.
            .env("IDEM_GUEST_TARGET_DIR", common::guest_target())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{args:?}\n{stdout}\n{stderr}");
        stdout
    };
    let first = idem(&["demo"]);
    assert_eq!(first.matches("committed version").count(), 3, "{first}");
    assert!(empty.join("idem-demo/daily_revenue/_delta_log").is_dir());
    let sdk: Vec<_> = std::fs::read_dir(&cache)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("rust-sdk-"))
        .collect();
    assert_eq!(sdk.len(), 1, "the SDK is written into the cache once");
    let sdk = sdk[0].path();
    // A new crate depends on that copy, and builds.
    idem(&["new", "t"]);
    let manifest = std::fs::read_to_string(empty.join("t/Cargo.toml")).unwrap();
    assert!(
        manifest.contains(&sdk.join("guest-sdk").display().to_string()),
        "{manifest}"
    );
    assert!(
        !manifest.contains(&common::root().display().to_string()),
        "{manifest}"
    );
    let built = idem(&["build", "t", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&built).unwrap();
    assert_eq!(v["language"], "rust", "{built}");
}
