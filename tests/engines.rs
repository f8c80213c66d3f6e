//! The engines users read idem's tables with, reading every kind of table
//! idem writes: ClickHouse (PyPI chdb: `deltaLakeLocal`, `deltaLake` on
//! S3, `icebergLocal`) and DuckDB (its delta and iceberg extensions'
//! wheels: `delta_scan`, `iceberg_scan`), through tests/read_engines.py,
//! from the environments scripts/test installs (/var/tmp/idem-engines,
//! and /var/tmp/idem-engines-iceberg for DuckDB 1.4.4's Iceberg).
//! Each must see exactly the rows the two independent readers of
//! tests/common see (and the manifests count): after a rerun that replaced
//! a slice, an empty output, a merge that deleted rows, an append that
//! replaced its own rows, locally and on the loopback S3 server.

mod common;

use std::path::{Path, PathBuf};

use serde_json::Value;

fn s(p: &Path) -> String {
    p.to_str().unwrap().to_string()
}

/// An engines' Python: `var` (scripts/test's environment) or `default`.
fn engines_python(var: &str, default: &str) -> PathBuf {
    let python = std::env::var_os(var)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(default));
    assert!(
        python.exists(),
        "{} is missing: run the suite with scripts/test, which installs the engines there",
        python.display()
    );
    python
}

/// tests/read_engines.py `args` run by `python`: engine -> its rows.
fn read_with(python: &Path, args: &[&str], env: &[(&'static str, String)]) -> Value {
    let out = std::process::Command::new(python)
        .arg(common::root().join("tests/read_engines.py"))
        .args(args)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Each engine's rows (in `got`, engine -> rows or error) equal `want`
/// (the independent readers'), and there are `rows` of them (the
/// manifests' count).
fn agree(got: &Value, engines: &[&str], want: &[String], rows: u64, what: &str) {
    assert_eq!(
        want.len() as u64,
        rows,
        "{what}: the readers and the manifests disagree"
    );
    for engine in engines {
        let got = &got[*engine];
        let Some(got) = got["rows"].as_array() else {
            panic!("{engine} could not read {what}: {}", got["error"]);
        };
        let got: Vec<&str> = got.iter().map(|r| r.as_str().unwrap()).collect();
        if got != want {
            let extra: Vec<_> = got
                .iter()
                .filter(|r| !want.contains(&r.to_string()))
                .take(3)
                .collect();
            let missing: Vec<_> = want
                .iter()
                .filter(|r| !got.contains(&r.as_str()))
                .take(3)
                .collect();
            panic!(
                "{engine} reads {what} otherwise: {} rows for {}; rows it has that idem did not commit: {extra:?}; rows it lacks: {missing:?}",
                got.len(),
                want.len()
            );
        }
    }
}

/// Both engines read the Delta table `table` as `want` (`rows` rows).
fn engines_agree(
    table: &str,
    env: &[(&'static str, String)],
    want: &[String],
    rows: u64,
    what: &str,
) {
    let python = engines_python("IDEM_ENGINES_PYTHON", "/var/tmp/idem-engines/bin/python");
    let got = read_with(&python, &[table], env);
    agree(&got, &["clickhouse", "duckdb"], want, rows, what);
}

/// The metadata file the SQLite catalog names for `sales.<name>`.
fn metadata_of(catalog: &Path, name: &str) -> String {
    let conn = rusqlite::Connection::open(catalog).unwrap();
    conn.query_row(
        "SELECT metadata_location FROM iceberg_tables WHERE table_namespace = 'sales' AND table_name = ?1",
        [name],
        |r| r.get(0),
    )
    .unwrap()
}

/// Both engines read the Iceberg table `name` of the catalog `catalog`
/// (its files under `warehouse`, a folder or `s3://...` with `env`) as
/// PyIceberg does, `rows` rows: ClickHouse from the engines'
/// environment, DuckDB from its Iceberg one (1.4.4).
fn iceberg_engines_agree(
    catalog: &Path,
    warehouse: &str,
    env: &[(&'static str, String)],
    name: &str,
    rows: u64,
    what: &str,
) {
    let out = std::process::Command::new(common::python())
        .arg(common::root().join("tests/read_iceberg.py"))
        .args([s(catalog), warehouse.to_string(), format!("sales.{name}")])
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let want: Vec<String> = v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap().to_string())
        .collect();
    let dir = format!("{}/sales.db/{name}", warehouse.trim_end_matches('/'));
    let metadata = metadata_of(catalog, name);
    for (var, default, engine) in [
        (
            "IDEM_ENGINES_PYTHON",
            "/var/tmp/idem-engines/bin/python",
            "clickhouse",
        ),
        (
            "IDEM_ENGINES_ICEBERG_PYTHON",
            "/var/tmp/idem-engines-iceberg/bin/python",
            "duckdb",
        ),
    ] {
        let got = read_with(
            &engines_python(var, default),
            &[
                &dir,
                "--iceberg",
                "--metadata",
                &metadata,
                "--engines",
                engine,
            ],
            env,
        );
        agree(&got, &[engine], &want, rows, what);
    }
}

struct Fixture {
    dir: tempfile::TempDir,
    clean: String,
    dedup: String,
    env: Vec<(&'static str, String)>,
}

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        for d in ["2026-10-01", "2026-10-02"] {
            common::orders(&dir.path().join("orders"), d, 1_500, 2);
        }
        Fixture {
            dir,
            clean: s(&common::guest("examples/clean_orders")),
            dedup: s(&common::guest("examples/dedup_events")),
            env: Vec::new(),
        }
    }
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
    /// `idem run` of `date` through `module` into `table`; its rows out.
    fn run(&self, module: &str, date: &str, table: &str, extra: &[&str]) -> u64 {
        let mut extra = extra.to_vec();
        extra.push("--json");
        let args = common::day_args(module, &s(&self.path("orders")), date, table, &extra);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let env: Vec<(&str, &str)> = self.env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let (code, out, err) = common::idem_env(&args, &env);
        assert_eq!(code, 0, "{out}{err}");
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["outcome"]["kind"], "committed", "{v}");
        v["rowsOut"].as_u64().unwrap()
    }
    /// New input for `date`: `rows` rows (the same two files, rewritten).
    fn new_input(&self, date: &str, rows: u64) {
        common::orders(&self.path("orders"), date, rows, 2);
    }
}

/// Overwrite-partition: a slice replaced by a rerun on new input, and a
/// slice whose rerun output is empty.
fn overwrite(fx: &Fixture, table: &str) -> u64 {
    fx.run(&fx.clean, "2026-10-01", table, &[]);
    fx.run(&fx.clean, "2026-10-02", table, &[]);
    fx.new_input("2026-10-01", 900);
    let replaced = fx.run(&fx.clean, "2026-10-01", table, &[]);
    let empty = fx.run(
        &fx.clean,
        "2026-10-02",
        table,
        &["--params", r#"{"min_amount": 1e12}"#],
    );
    assert_eq!(empty, 0);
    replaced
}

/// Merge on a key: the corrected input has fewer events, so the slice's
/// vanished keys are deleted. The rows the manifests count.
fn merged(fx: &Fixture, table: &str) -> u64 {
    let merge = ["--mode", "merge", "--key", "event_id"];
    fx.new_input("2026-10-01", 1_500);
    fx.run(&fx.dedup, "2026-10-01", table, &merge);
    let other = fx.run(&fx.dedup, "2026-10-02", table, &merge);
    fx.new_input("2026-10-01", 600);
    fx.run(&fx.dedup, "2026-10-01", table, &merge) + other
}

/// Append: a rerun with new output replaces the slice's own rows. The
/// rows the manifests count.
fn appended(fx: &Fixture, table: &str) -> u64 {
    let append = ["--mode", "append"];
    fx.new_input("2026-10-01", 1_500);
    fx.run(&fx.clean, "2026-10-01", table, &append);
    let other = fx.run(&fx.clean, "2026-10-02", table, &append);
    fx.new_input("2026-10-01", 700);
    fx.run(&fx.clean, "2026-10-01", table, &append) + other
}

#[test]
fn clickhouse_and_duckdb_read_every_kind_of_delta_table_idem_writes() {
    let fx = Fixture::new();
    for (name, write, what) in [
        (
            "overwrite",
            overwrite as fn(&Fixture, &str) -> u64,
            "an overwritten table (a replaced slice, an empty one)",
        ),
        ("merge", merged, "a merged table whose merge deleted rows"),
        (
            "append",
            appended,
            "an appended table whose slice was replaced",
        ),
    ] {
        let table = fx.path(name);
        let rows = write(&fx, &s(&table));
        let want = common::read_table(&table, None).rows;
        engines_agree(&s(&table), &[], &want, rows, what);
    }
}

#[test]
fn clickhouse_and_duckdb_read_idems_delta_tables_on_s3() {
    let mut fx = Fixture::new();
    let s3 = common::S3::start("lake");
    fx.env = s3.env();
    let table = s3.url("tables/overwrite");
    let rows = overwrite(&fx, &table);
    let want = common::read_table_s3(&table, &s3, None).rows;
    engines_agree(&table, &fx.env, &want, rows, "an overwritten table on S3");
}

#[test]
fn clickhouse_and_duckdb_read_every_kind_of_iceberg_table_idem_writes() {
    let fx = Fixture::new();
    let catalog = fx.path("catalog.db");
    for (name, write, what) in [
        (
            "overwrite",
            overwrite as fn(&Fixture, &str) -> u64,
            "an overwritten Iceberg table",
        ),
        (
            "merge",
            merged,
            "a merged Iceberg table whose merge deleted rows",
        ),
        (
            "append",
            appended,
            "an appended Iceberg table whose slice was replaced",
        ),
    ] {
        let rows = write(
            &fx,
            &format!("iceberg+sqlite://{}#sales.{name}", s(&catalog)),
        );
        let warehouse = s(&fx.path("warehouse"));
        iceberg_engines_agree(&catalog, &warehouse, &[], name, rows, what);
    }
}

#[test]
fn clickhouse_and_duckdb_read_idems_iceberg_tables_on_s3() {
    let mut fx = Fixture::new();
    let s3 = common::S3::start("lake");
    fx.env = s3.env();
    let catalog = fx.path("catalog.db");
    let warehouse = s3.url("wh");
    let table = format!(
        "iceberg+sqlite://{}?warehouse={warehouse}#sales.overwrite",
        s(&catalog)
    );
    let rows = overwrite(&fx, &table);
    let env = fx.env.clone();
    iceberg_engines_agree(
        &catalog,
        &warehouse,
        &env,
        "overwrite",
        rows,
        "an overwritten Iceberg table on S3",
    );
}
