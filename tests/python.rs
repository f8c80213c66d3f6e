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
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("orders");
    for date in ["2026-10-01", "2026-10-02", "2026-10-03"] {
        common::orders(&data, date, 3_000, 2);
    }
    // A bigger day: long enough a run for the GIL test to see it work.
    common::orders(&data, "2026-10-04", 400_000, 4);
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
