//! Iceberg tables in a SQL catalog on PostgreSQL (a real server started
//! by the test): the catalog is the one PyIceberg's SqlCatalog and Java's
//! JdbcCatalog use, so PyIceberg opens what idem commits and idem commits
//! into a catalog another tool made; the runs equal the same runs into a
//! SQLite catalog row for row; a server that is down, a wrong password and
//! a password in the location are clear errors. (Many hosts at once with
//! kills: tests/hosts.rs.)

mod common;

use std::path::Path;

use common::postgres::{DB, Postgres};
use serde_json::Value;

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// What PyIceberg reads in `ident` of the catalog `db` (a SQLAlchemy URI
/// or a SQLite file).
fn read(db: &str, warehouse: &Path, ident: &str) -> Value {
    common::read_iceberg(db, warehouse, ident)
}

fn run(
    pg: &Postgres,
    module: &Path,
    data: &Path,
    date: &str,
    table: &str,
    extra: &[&str],
) -> (i32, String, String) {
    let mut args = vec![
        "run",
        "--module",
        s(module),
        "--input",
        s(data),
        "--partition",
        &format!("date={date}"),
        "--table",
        table,
        "--logical-date",
        date,
    ]
    .into_iter()
    .map(String::from)
    .collect::<Vec<_>>();
    args.extend(extra.iter().map(|a| a.to_string()));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let env = pg.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    common::idem_env(&refs, &env)
}

fn ok(r: (i32, String, String)) -> String {
    assert_eq!(r.0, 0, "idem failed:\n{}\n{}", r.1, r.2);
    r.1
}

#[test]
fn a_catalog_in_postgres_is_shared_with_pyiceberg_and_equals_sqlite() {
    let pg = Postgres::start();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("orders");
    let days = ["2026-10-01", "2026-10-02"];
    for d in days {
        common::orders(&data, d, 2000, 2);
    }
    let module = common::guest("examples/clean_orders");
    // The catalog's tables made beforehand by another tool, in the schema
    // older JdbcCatalogs and PyIceberg made (no `iceberg_type` column).
    pg.psql(
        DB,
        "CREATE TABLE iceberg_tables (catalog_name VARCHAR(255) NOT NULL, \
         table_namespace VARCHAR(255) NOT NULL, table_name VARCHAR(255) NOT NULL, \
         metadata_location VARCHAR(1000), previous_metadata_location VARCHAR(1000), \
         PRIMARY KEY (catalog_name, table_namespace, table_name)); \
         CREATE TABLE iceberg_namespace_properties (catalog_name VARCHAR(255) NOT NULL, \
         namespace VARCHAR(255) NOT NULL, property_key VARCHAR(255) NOT NULL, \
         property_value VARCHAR(1000), PRIMARY KEY (catalog_name, namespace, property_key));",
    );
    let warehouse = dir.path().join("warehouse");
    let table = pg.table(s(&warehouse), "sales.orders");
    let sqlite = format!(
        "iceberg+sqlite://{}#sales.orders",
        s(&dir.path().join("ref/catalog.db"))
    );
    for d in days {
        ok(run(&pg, &module, &data, d, &table, &[]));
        ok(run(&pg, &module, &data, d, &sqlite, &[]));
    }
    // A rerun is a memo hit; other params replace one slice.
    let again = ok(run(&pg, &module, &data, days[0], &table, &[]));
    assert!(again.contains("unchanged"), "{again}");
    for t in [&table, &sqlite] {
        ok(run(
            &pg,
            &module,
            &data,
            days[1],
            t,
            &["--params", r#"{"min_amount": 40}"#],
        ));
    }
    let got = read(&pg.sqlalchemy_uri(), &warehouse, "sales.orders");
    let want = read(
        s(&dir.path().join("ref/catalog.db")),
        &dir.path().join("ref/warehouse"),
        "sales.orders",
    );
    assert!(!want["rows"].as_array().unwrap().is_empty());
    assert_eq!(
        got["rows"], want["rows"],
        "the PostgreSQL catalog's table differs from SQLite's"
    );
    assert_eq!(got["version"], 3, "{got}");
    // The catalog migrated to the V1 schema (what PyIceberg does with
    // schema_version=v1): the existing row's type is NULL (a table), a new
    // table is registered as TABLE, and idem goes on committing to both.
    pg.psql(
        DB,
        "ALTER TABLE iceberg_tables ADD COLUMN iceberg_type VARCHAR(5)",
    );
    let more = pg.table(s(&warehouse), "sales.more");
    ok(run(&pg, &module, &data, days[0], &more, &[]));
    let kinds = pg.psql(
        DB,
        "SELECT table_name || ':' || coalesce(iceberg_type, 'null') FROM iceberg_tables ORDER BY table_name",
    );
    assert_eq!(kinds.trim(), "more:TABLE\norders:null", "{kinds}");
    let more_rows = read(&pg.sqlalchemy_uri(), &warehouse, "sales.more");
    assert_eq!(more_rows["version"], 1, "{more_rows}");
    let third = ok(run(
        &pg,
        &module,
        &data,
        days[0],
        &table,
        &["--params", r#"{"min_amount": 40}"#],
    ));
    assert!(third.contains("committed version 4"), "{third}");
    let env = pg.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let (code, out, err) = common::idem_env(&["audit", &table], &env);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("all 2 slices proven"), "{out}");
    let (code, out, err) = common::idem_env(&["log", &table], &env);
    assert_eq!(code, 0, "{err}");
    // Four commits and the memo hit, each under its slice.
    assert_eq!(out.matches("committed v").count(), 4, "{out}");
    assert_eq!(out.matches("memo, unchanged since v1").count(), 1, "{out}");
    // The row names the newest metadata file (the fourth snapshot's,
    // numbered from the table's first at 00000) and the one before it.
    let row = pg.psql(
        DB,
        "SELECT metadata_location, previous_metadata_location FROM iceberg_tables WHERE table_name = 'orders'",
    );
    let (current, previous) = row.trim().split_once('|').unwrap();
    assert!(
        current.contains("/sales.db/orders/metadata/00003-"),
        "{row}"
    );
    assert!(
        previous.contains("/sales.db/orders/metadata/00002-"),
        "{row}"
    );
    // The run spec records the table without its user: another user of
    // the same catalog, who may write its rows but not create tables
    // (PostgreSQL 15's default for `public`), names the same table: its
    // run is a memo hit, its commit lands.
    pg.psql(
        DB,
        "CREATE ROLE ana LOGIN PASSWORD 'ana-pw'; \
         GRANT SELECT, INSERT, UPDATE ON iceberg_tables, iceberg_namespace_properties TO ana",
    );
    let as_ana = table.replace("://idem@", "://ana@");
    let ana = |extra: &[&str]| {
        let mut args = vec![
            "run",
            "--module",
            s(&module),
            "--input",
            s(&data),
            "--partition",
            "date=2026-10-01",
            "--table",
            &as_ana,
            "--logical-date",
            "2026-10-01",
        ];
        args.extend_from_slice(extra);
        common::idem_env(&args, &[("PGPASSWORD", "ana-pw")])
    };
    let memo = ok(ana(&["--params", r#"{"min_amount": 40}"#]));
    assert!(memo.contains("unchanged"), "{memo}");
    let landed = ok(ana(&[]));
    assert!(landed.contains("committed version 5"), "{landed}");
    let (code, out, err) = common::idem_env(&["show", &format!("{table}#date={}", days[0])], &env);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(&format!(
            "iceberg+postgres://127.0.0.1:{}/{DB}?warehouse=",
            pg.port
        )),
        "{out}"
    );
    assert!(
        !out.contains(&format!("{}@", common::postgres::USER)),
        "{out}"
    );
}

#[test]
fn an_unreachable_server_a_wrong_password_and_a_password_in_the_location_are_clear() {
    let pg = Postgres::start();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("orders");
    common::orders(&data, "2026-10-01", 200, 1);
    let module = common::guest("examples/clean_orders");
    let wh = dir.path().join("wh");
    let idem = |table: &str, env: &[(&str, &str)]| {
        let args = [
            "run",
            "--module",
            s(&module),
            "--input",
            s(&data),
            "--partition",
            "date=2026-10-01",
            "--table",
            table,
        ];
        common::idem_env(&args, env)
    };
    // Nothing listens on a port just freed.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let down = format!(
        "iceberg+postgres://idem@127.0.0.1:{port}/{DB}?warehouse={}#a.t",
        s(&wh)
    );
    let (code, _, err) = idem(&down, &[("PGPASSWORD", "x")]);
    assert_ne!(code, 0);
    assert!(
        err.contains(&format!("postgres://127.0.0.1:{port}/{DB}")),
        "{err}"
    );
    assert!(
        err.contains("connecting") && err.contains("is PostgreSQL running there"),
        "{err}"
    );
    // The server asks for a password and gets a wrong one.
    let (code, _, err) = idem(&pg.table(s(&wh), "a.t"), &[("PGPASSWORD", "wrong")]);
    assert_ne!(code, 0);
    assert!(err.contains("password authentication failed"), "{err}");
    assert!(err.contains("PGPASSWORD"), "{err}");
    // A password in the location is refused before anything connects,
    // and not echoed.
    let with_pw = format!(
        "iceberg+postgres://idem:hunter22@127.0.0.1:{}/{DB}?warehouse={}#a.t",
        pg.port,
        s(&wh)
    );
    let (code, _, err) = idem(&with_pw, &[]);
    assert_ne!(code, 0);
    assert!(err.contains("set PGPASSWORD instead"), "{err}");
    assert!(!err.contains("hunter22"), "{err}");
    // Nor is it sent as the failed run's lineage job name.
    let events = dir.path().join("events");
    let args = [
        "run",
        "--module",
        s(&module),
        "--input",
        s(&data),
        "--partition",
        "date=2026-10-01",
        "--table",
        &with_pw,
        "--lineage",
        &format!("file://{}", s(&events)),
    ];
    let (code, _, err) = common::idem_env(&args, &[]);
    assert_ne!(code, 0, "{err}");
    let sent = common::lineage_events(&events);
    assert_eq!(sent.len(), 2, "START and FAIL: {sent:?}");
    for e in &sent {
        assert!(!e.to_string().contains("hunter22"), "{e}");
    }
    // No warehouse: where would the files go?
    let (code, _, err) = idem(
        &format!("iceberg+postgres://idem@127.0.0.1:{}/{DB}#a.t", pg.port),
        &[],
    );
    assert_ne!(code, 0);
    assert!(err.contains("needs ?warehouse=URL"), "{err}");
    // A view of the table's name is named as such.
    let db_url = |db: &str| {
        format!(
            "iceberg+postgres://idem@127.0.0.1:{}/{db}?warehouse={}#a.v",
            pg.port,
            s(&wh)
        )
    };
    pg.psql("postgres", "CREATE DATABASE views");
    pg.psql(
        "views",
        "CREATE TABLE iceberg_tables (catalog_name VARCHAR(255) NOT NULL, \
         table_namespace VARCHAR(255) NOT NULL, table_name VARCHAR(255) NOT NULL, \
         metadata_location VARCHAR(1000), previous_metadata_location VARCHAR(1000), \
         iceberg_type VARCHAR(5), PRIMARY KEY (catalog_name, table_namespace, table_name)); \
         CREATE TABLE iceberg_namespace_properties (catalog_name VARCHAR(255) NOT NULL, \
         namespace VARCHAR(255) NOT NULL, property_key VARCHAR(255) NOT NULL, \
         property_value VARCHAR(1000), PRIMARY KEY (catalog_name, namespace, property_key)); \
         INSERT INTO iceberg_tables VALUES ('idem', 'a', 'v', 's3://x/v.metadata.json', NULL, 'VIEW')",
    );
    let env = pg.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let (code, _, err) = idem(&db_url("views"), &env);
    assert_ne!(code, 0);
    assert!(
        err.contains("a.v is a view in this catalog, not a table"),
        "{err}"
    );
    // A catalog in a schema this user's search_path does not reach is
    // named, not made a second time beside it.
    pg.psql("postgres", "CREATE DATABASE hidden");
    pg.psql(
        "hidden",
        "CREATE SCHEMA cat; CREATE TABLE cat.iceberg_tables (catalog_name VARCHAR(255))",
    );
    let (code, _, err) = idem(&db_url("hidden"), &env);
    assert_ne!(code, 0);
    assert!(err.contains("iceberg_tables is in schema `cat`"), "{err}");
    assert_eq!(
        pg.psql(
            "hidden",
            "SELECT count(*) FROM pg_tables WHERE tablename = 'iceberg_tables'"
        )
        .trim(),
        "1"
    );
    // Nothing was registered by the failed runs.
    assert_eq!(
        pg.psql(
            DB,
            "SELECT count(*) FROM pg_tables WHERE tablename = 'iceberg_tables'"
        )
        .trim(),
        "0"
    );
}

#[test]
fn a_catalog_answer_lost_after_it_landed_keeps_the_commit() {
    let pg = Postgres::start();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("orders");
    let days = ["2026-10-01", "2026-10-02"];
    for d in days {
        common::orders(&data, d, 1000, 1);
    }
    let module = common::guest("examples/clean_orders");
    let warehouse = dir.path().join("warehouse");
    let table = pg.table(s(&warehouse), "sales.lost");
    // The registration (first commit) and a swap (second) both land, and
    // both answers are lost: each run re-reads the table, finds its own
    // commit and reports it; nothing it wrote is deleted.
    let mut env = pg.env();
    env.push(("IDEM_FAULT_FAIL", "catalog-answer-lost".into()));
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    for (i, d) in days.iter().enumerate() {
        let args = [
            "run",
            "--module",
            s(&module),
            "--input",
            s(&data),
            "--partition",
            &format!("date={d}"),
            "--table",
            &table,
        ];
        let (code, out, err) = common::idem_env(&args, &env);
        assert_eq!(code, 0, "{out}{err}");
        assert!(
            out.contains(&format!("committed version {}", i + 1)),
            "{out}"
        );
    }
    let got = read(&pg.sqlalchemy_uri(), &warehouse, "sales.lost");
    assert_eq!(got["version"], 2, "{got}");
    assert!(got["rows"].as_array().unwrap().len() > 1000, "{got}");
    let env = pg.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let (code, out, err) = common::idem_env(&["audit", &table], &env);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("all 2 slices proven"), "{out}");
}
