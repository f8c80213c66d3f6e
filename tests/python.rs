//! The Python package (`import idem`, built from python/ by maturin and
//! installed by scripts/test into the tests' virtual environment), tested
//! from Python by tests/python/ with pytest against real guests, real
//! Parquet and real tables, read back by the PyPI deltalake reader and
//! compared with what the `idem` CLI does on the same slices.

mod common;

use std::process::Command;

#[test]
fn the_python_package_is_the_cli_library_called_in_process() {
    let python = common::python();
    let import = Command::new(&python)
        .args(["-c", "import idem, pytest; print(idem.__file__)"])
        .output()
        .unwrap();
    assert!(
        import.status.success(),
        "`import idem` failed in {}: run the suite with scripts/test, which builds python/ with maturin and installs it there\n{}",
        python.display(),
        String::from_utf8_lossy(&import.stderr)
    );
    installed_is_current(&python);
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("orders");
    for date in ["2026-10-01", "2026-10-02", "2026-10-03"] {
        common::orders(&data, date, 3_000, 2);
    }
    // A bigger day: long enough a run for the GIL test to see it work.
    common::orders(&data, "2026-10-04", 400_000, 4);
    // The example pipeline (examples/airflow/idem.toml) with its modules
    // and two days of data beside it.
    let pipeline = dir.path().join("pipeline");
    std::fs::create_dir_all(pipeline.join("wasm")).unwrap();
    for m in ["clean_orders", "dedup_events", "daily_revenue"] {
        let module = common::guest(&format!("examples/{m}"));
        std::fs::copy(module, pipeline.join("wasm").join(format!("{m}.wasm"))).unwrap();
    }
    for date in ["2026-10-01", "2026-10-02"] {
        common::orders(&pipeline.join("data/orders"), date, 2_000, 2);
    }
    let toml = common::root().join("examples/airflow/idem.toml");
    std::fs::copy(toml, pipeline.join("idem.toml")).unwrap();
    let out = Command::new(&python)
        .args([
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/python",
        ])
        .current_dir(common::root())
        .env("IDEM_TEST_PIPELINE", pipeline.join("idem.toml"))
        .env("IDEM_TEST_MODULE", common::guest("examples/clean_orders"))
        .env("IDEM_TEST_HOSTILE", common::guest("tests/guests/hostile"))
        .env("IDEM_TEST_DATA", &data)
        .env("IDEM_TEST_BIN", env!("CARGO_BIN_EXE_idem"))
        .env("IDEM_CACHE_DIR", common::test_cache())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprintln!("{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        out.status.success(),
        "pytest tests/python failed:\n{stdout}"
    );
    assert!(
        stdout.contains(" passed") && !stdout.contains("skipped"),
        "every Python test must run: {stdout}"
    );
}

/// The installed package was built from this checkout as it is now: no
/// source of the library or of the package is newer than the installed
/// native module (else the test would compare an old package with the
/// CLI just built).
fn installed_is_current(python: &std::path::Path) {
    let out = Command::new(python)
        .args(["-c", "import idem._idem as m; print(m.__file__)"])
        .output()
        .unwrap();
    let module = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let built = std::fs::metadata(&module).and_then(|m| m.modified());
    let built = built.unwrap_or_else(|e| panic!("the installed native module {module}: {e}"));
    let mut newest = Vec::new();
    for dir in ["host/src", "python/src", "python/idem"] {
        newer_than(&common::root().join(dir), built, &mut newest);
    }
    assert!(
        newest.is_empty(),
        "the installed package ({module}) is older than {newest:?}: rebuild and install it (scripts/test does: maturin build --profile dev --manifest-path python/Cargo.toml, then pip install the wheel)"
    );
}

fn newer_than(dir: &std::path::Path, t: std::time::SystemTime, out: &mut Vec<String>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            newer_than(&p, t, out);
        } else if e.metadata().and_then(|m| m.modified()).is_ok_and(|m| m > t) {
            out.push(p.display().to_string());
        }
    }
}
