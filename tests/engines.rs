//! The engines users read idem's tables with, reading every kind of Delta
//! table idem writes: ClickHouse (PyPI chdb: `deltaLakeLocal`,
//! `deltaLake` on S3) and DuckDB (its delta extension's wheel:
//! `delta_scan`), through tests/read_engines.py, from the environment
//! scripts/test installs (/var/tmp/idem-engines, tests/engines-requirements.txt).
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

/// The engines' Python (scripts/test's environment, or IDEM_ENGINES_PYTHON).
fn engines_python() -> PathBuf {
    std::env::var_os("IDEM_ENGINES_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/tmp/idem-engines/bin/python"))
}

/// Every engine's rows of `table` equal `want` (the independent readers'),
/// and there are `rows` of them (the manifests' count).
fn engines_agree(
    table: &str,
    env: &[(&'static str, String)],
    want: &[String],
    rows: u64,
    what: &str,
) {
    let python = engines_python();
    assert!(
        python.exists(),
        "{} is missing: run the suite with scripts/test, which installs tests/engines-requirements.txt there",
        python.display()
    );
    let out = std::process::Command::new(&python)
        .arg(common::root().join("tests/read_engines.py"))
        .arg(table)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        want.len() as u64,
        rows,
        "{what}: the readers and the manifests disagree"
    );
    for engine in ["clickhouse", "duckdb"] {
        let got = &v[engine];
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

#[test]
fn clickhouse_and_duckdb_read_every_kind_of_delta_table_idem_writes() {
    let fx = Fixture::new();
    // Overwrite-partition, locally.
    let table = fx.path("overwrite");
    let rows = overwrite(&fx, &s(&table));
    let want = common::read_table(&table, None).rows;
    engines_agree(
        &s(&table),
        &[],
        &want,
        rows,
        "an overwritten table (a replaced slice, an empty one)",
    );

    // Merge on a key: the corrected input has fewer events, so the
    // slice's vanished keys are deleted.
    let table = fx.path("merge");
    let merge = ["--mode", "merge", "--key", "event_id"];
    fx.new_input("2026-10-01", 1_500);
    fx.run(&fx.dedup, "2026-10-01", &s(&table), &merge);
    let b = fx.run(&fx.dedup, "2026-10-02", &s(&table), &merge);
    fx.new_input("2026-10-01", 600);
    let a = fx.run(&fx.dedup, "2026-10-01", &s(&table), &merge);
    let want = common::read_table(&table, None).rows;
    engines_agree(
        &s(&table),
        &[],
        &want,
        a + b,
        "a merged table whose merge deleted rows",
    );

    // Append: a rerun with new output replaces the slice's own rows.
    let table = fx.path("append");
    let append = ["--mode", "append"];
    fx.new_input("2026-10-01", 1_500);
    fx.run(&fx.clean, "2026-10-01", &s(&table), &append);
    let other = fx.run(&fx.clean, "2026-10-02", &s(&table), &append);
    fx.new_input("2026-10-01", 700);
    let mine = fx.run(&fx.clean, "2026-10-01", &s(&table), &append);
    let want = common::read_table(&table, None).rows;
    engines_agree(
        &s(&table),
        &[],
        &want,
        mine + other,
        "an appended table whose slice was replaced",
    );
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
