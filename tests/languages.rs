//! Transforms written in JavaScript and Python: built by `idem build` with
//! the toolchains it installs (componentize-js, componentize-py), admitted
//! by the strict profile, and giving the Rust examples' output digests and
//! schemas on the same input, run after run.

mod common;

use std::path::{Path, PathBuf};

use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

/// `idem exec` of `module` over `inputs`; returns (code, stdout, stderr).
fn exec(
    module: &Path,
    inputs: &[PathBuf],
    out: &Path,
    params: &str,
    extra: &[&str],
) -> (i32, String, String) {
    let mut args: Vec<String> = vec![
        "exec".into(),
        "--module".into(),
        module.display().to_string(),
        "--output".into(),
        out.display().to_string(),
        "--params".into(),
        params.into(),
        "--batch-rows".into(),
        "1000".into(),
        // A ~15 MB JS or Python engine compiles once per suite (then the
        // compiled cache serves); on 2 busy cores that can pass 60 s.
        "--compile-deadline-ms".into(),
        "600000".into(),
        "--input".into(),
    ];
    args.extend(inputs.iter().map(|p| p.display().to_string()));
    args.extend(extra.iter().map(|a| a.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    common::idem(&args)
}

/// The output digest `idem exec` printed; panics with its output otherwise.
fn exec_digest(
    module: &Path,
    inputs: &[PathBuf],
    out: &Path,
    params: &str,
    extra: &[&str],
) -> String {
    let (code, stdout, stderr) = exec(module, inputs, out, params, extra);
    assert_eq!(code, 0, "{} failed:\n{stdout}\n{stderr}", module.display());
    digest_of(&stdout)
}

/// The digest of `idem exec`'s `output:` line (which also names the file).
fn digest_of(stdout: &str) -> String {
    let line = common::field(stdout, "output:");
    line.split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string()
}

/// (name, type, nullable) of every field of a Parquet file's Arrow schema.
fn schema_of(file: &Path) -> Vec<(String, String, bool)> {
    let f = std::fs::File::open(file).unwrap();
    let b = ParquetRecordBatchReaderBuilder::try_new(f).unwrap();
    b.schema()
        .fields()
        .iter()
        .map(|f| (f.name().clone(), f.data_type().to_string(), f.is_nullable()))
        .collect()
}

/// Orders with the sample's schema and the values where languages differ:
/// a leading byte-order mark, non-ASCII and astral customer names (sorted
/// by UTF-8 bytes, not UTF-16 units), NaN, -0.0, infinities, nulls, and
/// quantities past 2^53 (rounded to f64 as Rust's `as` does).
fn edge_orders(dir: &Path) -> PathBuf {
    use arrow::array::{Float64Array, Int64Array, RecordBatch, StringArray};
    use std::sync::Arc;
    let customers = [
        "\u{feff}alice",
        "alice",
        "zoë",
        "\u{1F600}grin",
        "\u{FFFF}x",
        "",
        "Ångström",
        "bob",
    ];
    let amounts = [
        Some(f64::NAN),
        Some(-0.0),
        Some(0.0),
        None,
        Some(1e308),
        Some(-5.5),
        Some(250.0),
        Some(300.25),
        Some(f64::INFINITY),
        Some(251.0),
        Some(-0.0),
    ];
    let quantities = [(1i64 << 53) + 1, -3, 0, 1, i64::MAX, 7, 2, i64::MIN + 1, 3];
    let n = 5_000usize;
    let batch = RecordBatch::try_new(
        idem::sample::orders_schema(),
        vec![
            Arc::new(StringArray::from_iter_values(
                (0..n).map(|i| format!("e{i}")),
            )),
            Arc::new(Int64Array::from_iter_values((0..n).map(|i| i as i64))),
            Arc::new(StringArray::from_iter_values(
                (0..n).map(|i| customers[i % customers.len()]),
            )),
            Arc::new(Float64Array::from_iter(
                (0..n).map(|i| amounts[(i / 3) % amounts.len()]),
            )),
            Arc::new(Int64Array::from_iter_values(
                (0..n).map(|i| quantities[(i / 2) % quantities.len()]),
            )),
            Arc::new(StringArray::from_iter_values(
                (0..n).map(|i| ["paid", "refunded"][i % 2]),
            )),
        ],
    )
    .unwrap();
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join("edge.parquet");
    let mut w = parquet::arrow::ArrowWriter::try_new(
        std::fs::File::create(&path).unwrap(),
        batch.schema(),
        None,
    )
    .unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    path
}

#[test]
fn js_and_python_examples_give_the_rust_digests_and_schemas_run_after_run() {
    let dir = tempfile::tempdir().unwrap();
    let sample = common::orders(&dir.path().join("orders"), "2026-10-01", 20_000, 3);
    let edge = vec![edge_orders(&dir.path().join("edge"))];
    for (example, params, inputs) in [
        ("clean_orders", r#"{"min_amount": 250}"#, &sample),
        ("daily_revenue", "{}", &sample),
        ("clean_orders", r#"{"min_amount": -1}"#, &edge),
        ("daily_revenue", "{}", &edge),
    ] {
        let inputs: &[PathBuf] = inputs;
        let extra = ["--logical-date", "2026-10-01"];
        let rust_out = dir.path().join(format!("{example}.parquet"));
        let rust = exec_digest(
            &common::guest(&format!("examples/{example}")),
            inputs,
            &rust_out,
            params,
            &extra,
        );
        for lang in ["js", "py"] {
            let module = common::guest(&format!("examples/{example}_{lang}"));
            // Three fresh processes, each with its own engine and instance.
            for run in 0..3 {
                let out = dir.path().join(format!("{example}_{lang}_{run}.parquet"));
                let digest = exec_digest(&module, inputs, &out, params, &extra);
                assert_eq!(
                    digest, rust,
                    "{example}_{lang} run {run}: output differs from Rust's"
                );
                assert_eq!(
                    schema_of(&out),
                    schema_of(&rust_out),
                    "{example}_{lang}: output schema differs from Rust's"
                );
            }
        }
    }
}

/// A project folder under `dir` with `files` (relative path, text).
fn project(dir: &Path, files: &[(&str, &str)]) -> PathBuf {
    for (rel, text) in files {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    dir.to_path_buf()
}

#[test]
fn build_names_what_is_wrong_with_a_project() {
    let dir = tempfile::tempdir().unwrap();
    let build = |p: &Path, extra: &[&str]| {
        let path = p.display().to_string();
        let out = dir.path().join("out.wasm").display().to_string();
        let mut args = vec!["build", path.as_str(), "--out", out.as_str()];
        args.extend(extra);
        common::idem(&args)
    };
    // Nothing to build.
    let empty = project(&dir.path().join("empty"), &[("README.md", "hi")]);
    let (code, _, err) = build(&empty, &[]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("no Cargo.toml") && err.contains("idem new"),
        "{err}"
    );
    // Two languages in one folder: asks for --lang.
    let both = project(
        &dir.path().join("both"),
        &[("package.json", "{}"), ("app.py", "")],
    );
    let (code, _, err) = build(&both, &[]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("package.json and app.py") && err.contains("--lang"),
        "{err}"
    );
    // A JavaScript package whose entry module is missing.
    let js = project(
        &dir.path().join("js"),
        &[("package.json", r#"{"main": "lib/t.js"}"#)],
    );
    let (code, _, err) = build(&js, &[]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("lib/t.js") && err.contains("\"main\""),
        "{err}"
    );
    // A Python project naming a module it does not have.
    let py = project(
        &dir.path().join("py"),
        &[("pyproject.toml", "[tool.idem]\nmodule = \"clean\"\n")],
    );
    let (code, _, err) = build(&py, &[]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("`clean`") && err.contains("[tool.idem]"),
        "{err}"
    );
    // --lang picks one when both are there; a module that exports no
    // transform fails the build, naming what to add.
    let (code, _, err) = build(&both, &["--lang", "python"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("no transform") && err.contains("idem_guest.export("),
        "{err}"
    );
    assert!(!dir.path().join("out.wasm").exists());
}

#[test]
fn a_javascript_syntax_error_is_named_with_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let js = project(
        dir.path(),
        &[
            ("package.json", r#"{"name": "broken"}"#),
            (
                "src/index.js",
                "import { exportTransform } from 'idem-guest';\nclass T {\n  push(b) { return b +; }\n}\nexport const transform = exportTransform(T);\n",
            ),
        ],
    );
    let out = dir.path().join("out.wasm");
    let (code, _, err) = common::idem(&[
        "build",
        &js.display().to_string(),
        "--out",
        &out.display().to_string(),
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("index.js:3"), "{err}");
    assert!(!out.exists());
}

#[test]
fn a_missing_node_or_python_is_named_with_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let js = project(
        &dir.path().join("js"),
        &[
            ("package.json", "{}"),
            ("index.js", "export const transform = {};\n"),
        ],
    );
    let py = project(&dir.path().join("py"), &[("app.py", "")]);
    // A PATH with nothing on it: neither node nor python3 can be found.
    let empty = dir.path().join("bin");
    std::fs::create_dir_all(&empty).unwrap();
    let path = empty.display().to_string();
    for (p, program) in [(&js, "`node`"), (&py, "`python3`")] {
        let (code, _, err) = common::idem_env(
            &[
                "build",
                &p.display().to_string(),
                "--out",
                "/dev/null/x.wasm",
            ],
            &[("PATH", &path)],
        );
        assert_eq!(code, 2, "{err}");
        assert!(err.contains(program) && err.contains("install"), "{err}");
    }
}

#[test]
fn a_toolchain_that_cannot_be_installed_leaves_nothing_half_installed() {
    let dir = tempfile::tempdir().unwrap();
    let py = project(&dir.path().join("py"), &[("app.py", "")]);
    let tools = dir.path().join("toolchains");
    // An index that refuses connections: pip fails at once.
    let (code, _, err) = common::idem_env(
        &[
            "build",
            &py.display().to_string(),
            "--out",
            &dir.path().join("x.wasm").display().to_string(),
        ],
        &[
            ("IDEM_TOOLCHAIN_DIR", &tools.display().to_string()),
            ("PIP_INDEX_URL", "http://127.0.0.1:9/simple"),
            ("PIP_RETRIES", "0"),
            ("PIP_NO_CACHE_DIR", "1"),
        ],
    );
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("installing the Python toolchain") && err.contains("PyPI"),
        "{err}"
    );
    let left: Vec<_> = std::fs::read_dir(&tools)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(left.is_empty(), "a failed install left {left:?}");
}

/// The values of Float64 column `name` in a Parquet file.
fn floats(file: &Path, name: &str) -> Vec<f64> {
    use arrow::array::AsArray;
    use arrow::datatypes::Float64Type;
    let f = std::fs::File::open(file).unwrap();
    let reader = ParquetRecordBatchReaderBuilder::try_new(f)
        .unwrap()
        .build()
        .unwrap();
    reader
        .flat_map(|b| {
            let b = b.unwrap();
            b.column_by_name(name)
                .unwrap()
                .as_primitive::<Float64Type>()
                .values()
                .to_vec()
        })
        .collect()
}

/// The first 4 numbers of an SDK's random generator after its reset at
/// `open`, computed natively (node with the JS SDK; CPython's
/// `random.Random(0)`, which the Python SDK seeds), as a JSON list.
fn expected_random(lang: &str) -> String {
    let root = common::root().canonicalize().unwrap();
    let (program, flag, script) = match lang {
        "js" => (
            "node",
            "-e",
            format!(
                "import({:?}).then(m => {{ m.installSandbox(); m.resetRandom(); process.stdout.write(JSON.stringify([Math.random(), Math.random(), Math.random(), Math.random()])); }})",
                root.join("guest-sdk/js/src/sandbox.js").display().to_string()
            ),
        ),
        _ => (
            "python3",
            "-c",
            "import json, random; r = random.Random(0); print(json.dumps([r.random() for _ in range(4)]))".to_string(),
        ),
    };
    let out = std::process::Command::new(program)
        .args([flag, &script])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn guests_that_throw_read_the_clock_or_draw_random_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let inputs = common::orders(&dir.path().join("orders"), "2026-10-01", 3_000, 1);
    for (lang, clock, date) in [
        ("js", "Date.now", "new Date"),
        ("py", "time.time", "datetime.now"),
    ] {
        let module = common::guest(&format!("tests/guests/probe_{lang}"));
        let out = dir.path().join(format!("{lang}.parquet"));
        let run = |mode: &str, extra: &[&str]| {
            exec(
                &module,
                &inputs,
                &out,
                &format!(r#"{{"mode":"{mode}"}}"#),
                extra,
            )
        };
        // An exception is a guest error carrying its message, not a trap.
        let (code, _, err) = run("throw", &[]);
        assert_eq!(code, 3, "{lang}: {err}");
        assert!(
            err.contains("boom at a batch of 1000 rows"),
            "{lang}: {err}"
        );
        assert!(!err.contains("unreachable"), "{lang}: {err}");
        // The clock does not exist: reading it is an error naming it and
        // the logical date, every time.
        let mut modes = vec![("clock", clock), ("date", date)];
        if lang == "py" {
            // `from time import time` at the top of the module, before
            // `import idem_guest`: still the guarded function.
            modes.push(("clock-from", clock));
        }
        for (mode, call) in modes {
            let (code, _, err) = run(mode, &[]);
            assert_eq!(code, 3, "{lang} {mode}: {err}");
            assert!(
                err.contains("clock") && err.contains(call),
                "{lang} {mode}: {err}"
            );
            assert!(err.contains("logical"), "{lang} {mode}: {err}");
        }
        // Randomness is a fixed-seed generator: the same values in every
        // fresh process, and still random-looking within a run.
        let mut seen = Vec::new();
        for _ in 0..2 {
            let (code, stdout, err) = run("random", &[]);
            assert_eq!(code, 0, "{lang}: {err}");
            let r = floats(&out, "r");
            assert_eq!(r.len(), 4, "{lang}");
            assert!(r.iter().all(|x| (0.0..1.0).contains(x)), "{lang}: {r:?}");
            assert!(r.windows(2).all(|w| w[0] != w[1]), "{lang}: {r:?}");
            seen.push((digest_of(&stdout), r));
        }
        assert_eq!(
            seen[0], seen[1],
            "{lang}: random values differ between runs"
        );
        // ... and they are the SDK's fixed-seed generator's, not a seed
        // frozen into the module when it was built: the same generator run
        // outside the sandbox gives the same numbers.
        let expected: Vec<f64> = serde_json::from_str(&expected_random(lang)).unwrap();
        assert_eq!(
            seen[0].1, expected,
            "{lang}: not the SDK's seeded generator"
        );
        // Printing goes to the run log (never to the output or a digest).
        let (code, _, err) = run("log", &["-v"]);
        assert_eq!(code, 0, "{lang}: {err}");
        assert!(err.contains("hello from a"), "{lang}: {err}");
    }
}

#[test]
fn js_and_python_components_import_only_the_host_interface() {
    let sandbox = common::sandbox_with(idem::sandbox::Limits {
        compile_deadline_ms: 600_000,
        ..Default::default()
    });
    for rel in ["examples/clean_orders_js", "examples/daily_revenue_py"] {
        let module = sandbox.load(&common::guest_bytes(rel)).unwrap();
        let imports: Vec<&str> = module
            .admission
            .imports
            .iter()
            .map(|(n, _)| n.as_str())
            .collect();
        assert_eq!(imports, ["idem:transform/host@0.2.0"], "{rel}");
        assert!(module.admission.verdict().is_ok(), "{rel}");
    }
}

/// `program args` in the workspace root; panics with its output unless it
/// succeeded.
fn run_ok(program: &Path, args: &[&str], env: &[(&str, &Path)]) -> String {
    let mut cmd = std::process::Command::new(program);
    cmd.args(args).current_dir(common::root());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", program.display()));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "{} {args:?} failed:\n{text}",
        program.display()
    );
    text
}

#[test]
fn the_sdks_own_unit_tests_pass_against_independent_arrow_implementations() {
    // JavaScript: the SDK's IPC reader and writer against the apache-arrow
    // npm package (installed by scripts/test).
    let modules = std::env::var_os("IDEM_NODE_MODULES")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/tmp/idem-node/node_modules"));
    assert!(
        modules.join("apache-arrow").is_dir(),
        "no apache-arrow under {}: run the suite with scripts/test (it installs tests/node into /var/tmp/idem-node)",
        modules.display()
    );
    let text = run_ok(
        Path::new("node"),
        &["--test", "guest-sdk/js/test/"],
        &[("NODE_PATH", &modules)],
    );
    assert!(
        !text.contains("# skipped") || text.contains("# skipped 0"),
        "{text}"
    );
    // Python: the SDK's IPC reader and writer against pyarrow (in the
    // tests' virtual environment).
    let text = run_ok(
        &common::python(),
        &[
            "-m",
            "unittest",
            "discover",
            "-s",
            "guest-sdk/python/tests",
            "-t",
            "guest-sdk/python",
        ],
        &[("PYTHONDONTWRITEBYTECODE", Path::new("1"))],
    );
    assert!(text.contains("OK") && !text.contains("skipped"), "{text}");
}

#[test]
fn new_js_and_python_projects_build_and_run_unedited() {
    let dir = tempfile::tempdir().unwrap();
    let inputs = common::orders(&dir.path().join("orders"), "2026-10-01", 2_000, 1);
    for (lang, name) in [("js", "daily-totals"), ("python", "daily_totals")] {
        let project = dir.path().join(lang);
        let (code, stdout, err) = common::idem(&[
            "new",
            name,
            "--lang",
            lang,
            "--dir",
            &project.display().to_string(),
        ]);
        assert_eq!(code, 0, "{lang}: {err}");
        assert!(stdout.contains("idem build"), "{stdout}");
        // It refuses to write over itself.
        let (code, _, err) = common::idem(&[
            "new",
            name,
            "--lang",
            lang,
            "--dir",
            &project.display().to_string(),
        ]);
        assert_eq!(code, 2, "{lang}: {err}");
        let module = dir.path().join(format!("{lang}.wasm"));
        let (code, stdout, err) = common::idem(&[
            "build",
            &project.display().to_string(),
            "--out",
            &module.display().to_string(),
            "--json",
        ]);
        assert_eq!(code, 0, "{lang}: {err}");
        let built: serde_json::Value = serde_json::from_str(&stdout).unwrap();
        assert_eq!(built["language"], lang, "{stdout}");
        let out = dir.path().join(format!("{lang}.parquet"));
        let (code, stdout, err) = exec(&module, &inputs, &out, r#"{"min_amount": 250}"#, &["-v"]);
        assert_eq!(code, 0, "{lang}: {err}");
        let rows = common::field(&stdout, "rows:");
        assert!(
            rows.starts_with("2000 in, ") && !rows.ends_with(" 2000 out"),
            "{lang}: {rows}"
        );
        assert!(
            err.contains("kept ") && err.contains(" of 2000 rows"),
            "{lang}: {err}"
        );
        // Built again unchanged: the same component (reused, same digest).
        let build_digest = |tag: &str| {
            let (code, stdout, err) = common::idem(&[
                "build",
                &project.display().to_string(),
                "--out",
                &dir.path()
                    .join(format!("{lang}-{tag}.wasm"))
                    .display()
                    .to_string(),
                "--json",
            ]);
            assert_eq!(code, 0, "{lang}: {err}");
            serde_json::from_str::<serde_json::Value>(&stdout).unwrap()["module"].clone()
        };
        assert_eq!(
            build_digest("again"),
            built["module"],
            "{lang}: an unchanged project rebuilt"
        );
        // Edited: rebuilt, and the edit is in the new component.
        let source = project.join(if lang == "js" {
            "src/index.js"
        } else {
            "app.py"
        });
        let text = std::fs::read_to_string(&source).unwrap();
        let edited = text
            .replace("`kept ${this.rowsOut}", "`held ${this.rowsOut}")
            .replace("f\"kept {self.rows_out}", "f\"held {self.rows_out}");
        assert_ne!(edited, text, "{lang}: the template's log line moved");
        std::fs::write(&source, edited).unwrap();
        let edited = build_digest("edited");
        assert_ne!(
            edited, built["module"],
            "{lang}: an edited project was not rebuilt"
        );
        let module = dir.path().join(format!("{lang}-edited.wasm"));
        let (code, _, err) = exec(&module, &inputs, &out, r#"{"min_amount": 250}"#, &["-v"]);
        assert_eq!(code, 0, "{lang}: {err}");
        assert!(
            err.contains("held ") && !err.contains("kept "),
            "{lang}: {err}"
        );
    }
}

/// `idem run` of `module` over `files` into `table` (append) with `params`.
fn run_with_params(
    module: &Path,
    files: &[PathBuf],
    table: &Path,
    params: &str,
) -> (i32, String, String) {
    let mut args: Vec<String> = vec![
        "run".into(),
        "--module".into(),
        module.display().to_string(),
        "--table".into(),
        table.display().to_string(),
        "--mode".into(),
        "append".into(),
        "--params".into(),
        params.into(),
        "--compile-deadline-ms".into(),
        "600000".into(),
        "--files".into(),
    ];
    args.extend(files.iter().map(|p| p.display().to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    common::idem(&args)
}

#[test]
fn a_misspelled_or_ill_typed_param_fails_the_run_naming_it_in_every_language() {
    // Issue 28, finding 15: `gap_minute` for `gap_minutes` was silently
    // ignored and the default used. clean_orders declares `min_amount`
    // (number, default 0) in each SDK; the SDK refuses anything else
    // before `open`, and the host reports it as the transform's failure.
    let dir = tempfile::tempdir().unwrap();
    let files = common::orders(&dir.path().join("orders"), "2026-10-01", 2_000, 1);
    for example in ["clean_orders", "clean_orders_js", "clean_orders_py"] {
        let module = common::guest(&format!("examples/{example}"));
        let table = dir.path().join(example);
        let (code, out, err) = run_with_params(&module, &files, &table, r#"{"min_amont": 10}"#);
        assert_eq!(code, 3, "{example}: {out}{err}");
        assert!(
            err.contains("unknown parameter `min_amont` (did you mean `min_amount`?)")
                && err.contains("this transform takes `min_amount` (number, default 0"),
            "{example}: {err}"
        );
        let (code, out, err) = run_with_params(&module, &files, &table, r#"{"min_amount": "ten"}"#);
        assert_eq!(code, 3, "{example}: {out}{err}");
        assert!(
            err.contains(r#"parameter `min_amount` must be a number, got "ten" (a string)"#),
            "{example}: {err}"
        );
        assert!(
            !table.join("_delta_log").exists(),
            "{example}: a refused run created the table"
        );
        // The right param still commits; leaving it out is its default, 0.
        let (code, out, err) = run_with_params(&module, &files, &table, r#"{"min_amount": 10}"#);
        assert_eq!(code, 0, "{example}: {out}{err}");
        assert!(
            common::field(&out, "result:").starts_with("committed"),
            "{example}: {out}"
        );
        let out = dir.path().join(format!("{example}.parquet"));
        assert_eq!(
            exec_digest(&module, &files, &out, "{}", &[]),
            exec_digest(&module, &files, &out, r#"{"min_amount": 0}"#, &[]),
            "{example}: the default is not 0"
        );
    }
}

/// One guest build cache per user: with nothing set but idem's cache dir,
/// `idem build t` from the parent folder and `idem build .` from inside
/// the project share one target dir under it (the second build reuses
/// the first: the same digest, the same file; no `target/` appears in
/// either folder); a copy of the project elsewhere, whose package has the
/// same name, gets a component file of its own; builds of both at once
/// each end with their own whole component.
#[test]
fn guest_builds_share_one_cache_per_user_whatever_the_folder() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    std::fs::create_dir_all(&a).unwrap();
    let (code, _, err) = common::idem(&["new", "t", "--lang", "js", "--dir", &s(&a.join("t"))]);
    assert_eq!(code, 0, "{err}");
    let build = |cwd: &Path, path: &str| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_idem"));
        cmd.args(["build", path, "--json"])
            .current_dir(cwd)
            .env("IDEM_CACHE_DIR", &cache)
            .env_remove("IDEM_GUEST_TARGET_DIR")
            .env_remove("CARGO_TARGET_DIR")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        cmd
    };
    let json = |cmd: &mut std::process::Command| -> serde_json::Value {
        let out = cmd.output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_str(&stdout).unwrap()
    };
    let first = json(&mut build(&a, "t"));
    let path = PathBuf::from(first["path"].as_str().unwrap());
    assert!(path.starts_with(cache.join("guests/components")), "{first}");
    let name = path.file_name().unwrap().to_str().unwrap().to_string();
    assert!(name.starts_with("t-") && name.ends_with(".wasm"), "{name}");
    let inside = json(&mut build(&a.join("t"), "."));
    assert_eq!(inside["module"], first["module"], "{inside}");
    assert_eq!(inside["path"], first["path"], "{inside}");
    assert!(!a.join("target").exists() && !a.join("t/target").exists());
    let reused: Vec<_> = std::fs::read_dir(cache.join("guests/reuse"))
        .unwrap()
        .collect();
    assert_eq!(reused.len(), 1, "{reused:?}");
    // The same package name in another folder: its own file.
    copy_dir(&a.join("t"), &b.join("t"));
    let other = json(&mut build(&b, "t"));
    assert_eq!(other["module"], first["module"]);
    assert_ne!(other["path"], first["path"], "{other}");
    // Both at once: each its own whole component.
    let (mut x, mut y) = (build(&a, "t"), build(&b, "t"));
    let (x, y) = (x.spawn().unwrap(), y.spawn().unwrap());
    for (child, p) in [(x, &first["path"]), (y, &other["path"])] {
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let bytes = std::fs::read(p.as_str().unwrap()).unwrap();
        let digest = idem::digest::Digest::of_bytes(&bytes);
        assert_eq!(digest.as_str(), first["module"].as_str().unwrap());
    }
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

fn copy_dir(from: &Path, to: &Path) {
    for f in common::files_below(from) {
        let dst = to.join(f.strip_prefix(from).unwrap());
        std::fs::create_dir_all(dst.parent().unwrap()).unwrap();
        std::fs::copy(&f, &dst).unwrap();
    }
}

/// Two Rust crates of one name in two folders, built one after another in
/// one guest target dir (A, B, A): each build hands out its own crate's
/// component (cargo leaves a cdylib's `.wasm` at one path for both and
/// would call A fresh against B's newer file); each at its own default
/// path.
#[test]
fn two_rust_crates_of_one_name_each_get_their_own_build() {
    let dir = tempfile::tempdir().unwrap();
    let target = common::guest_target();
    let mut built = Vec::new();
    for tag in ["a", "b"] {
        let project = dir.path().join(tag).join("t");
        let (code, _, err) = common::idem(&["new", "t", "--dir", &s(&project)]);
        assert_eq!(code, 0, "{err}");
        let lib = project.join("src/lib.rs");
        let text = std::fs::read_to_string(&lib).unwrap();
        let edited = text.replace(
            "\"kept {} of {} rows\"",
            &format!("\"{tag}: kept {{}} of {{}} rows\""),
        );
        assert_ne!(edited, text, "the template's log line moved");
        std::fs::write(&lib, edited).unwrap();
        built.push(project);
    }
    let build = |project: &Path| -> serde_json::Value {
        let (code, out, err) =
            common::idem(&["build", &s(project), "--target-dir", &s(&target), "--json"]);
        assert_eq!(code, 0, "{err}");
        serde_json::from_str(&out).unwrap()
    };
    let a = build(&built[0]);
    let b = build(&built[1]);
    assert_ne!(a["module"], b["module"], "two different crates built alike");
    assert_ne!(a["path"], b["path"]);
    let again = build(&built[0]);
    assert_eq!(
        again["module"], a["module"],
        "A's build handed out B's component"
    );
    let bytes = std::fs::read(again["path"].as_str().unwrap()).unwrap();
    assert_eq!(
        idem::digest::Digest::of_bytes(&bytes).as_str(),
        a["module"].as_str().unwrap()
    );
}

/// Side inputs in the JavaScript and Python SDKs: `ctx.sideInput(name)` /
/// `ctx.side_input(name)` holds the whole side input (a Parquet file here),
/// every row, in order; a run that does not give it fails naming it.
#[test]
fn javascript_and_python_guests_read_side_inputs_whole() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("orders");
    common::orders(&data, "2026-10-01", 50, 1);
    let dim = common::orders(&dir.path().join("dim"), "2026-10-02", 2_500, 1)[0].clone();
    let first = {
        let b = idem::sample::orders_batch(idem::sample::seed_of("2026-10-02"), 0, 1);
        let c = b.column_by_name("customer").unwrap();
        arrow::array::AsArray::as_string::<i32>(c)
            .value(0)
            .to_string()
    };
    for lang in ["js", "py"] {
        let module = common::guest(&format!("tests/guests/probe_{lang}"));
        let table = dir.path().join(format!("t_{lang}"));
        let run = |extra: &[&str]| {
            let mut args = common::day_args(
                module.to_str().unwrap(),
                data.to_str().unwrap(),
                "2026-10-01",
                table.to_str().unwrap(),
                &["--params", r#"{"mode":"side"}"#],
            );
            args.extend(extra.iter().map(|a| a.to_string()));
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            common::idem(&args)
        };
        let (code, _, err) = run(&[]);
        assert_eq!(code, 3, "{lang}: {err}");
        assert!(
            err.contains("no side input `customers` (it gives none)"),
            "{lang}: {err}"
        );
        let side = format!("customers={}", dim.display());
        let other = format!("other={}", dim.display());
        let (code, out, err) = run(&["--side", &side, "--side", &other]);
        assert_eq!(code, 0, "{lang}: {out}\n{err}");
        let rows = common::read_table(&table, None).rows;
        assert_eq!(rows.len(), 1, "{lang}: {rows:?}");
        let row: serde_json::Value = serde_json::from_str(&rows[0]).unwrap();
        assert_eq!(row["names"], "customers,other", "{lang}");
        assert_eq!(row["rows"], 2500.0, "{lang}");
        assert_eq!(row["first"], first.as_str(), "{lang}");
    }
}
