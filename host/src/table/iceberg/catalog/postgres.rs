//! The SQL catalog in PostgreSQL, shared by many hosts: the same tables
//! as in SQLite; a commit is one `UPDATE ... WHERE metadata_location =
//! <base>` (PostgreSQL re-checks the condition on the row it locked, so of
//! two racing swaps from one base exactly one lands), a new table one
//! `INSERT ... ON CONFLICT DO NOTHING` transaction.
//!
//! Each call opens a connection and closes it: a run touches the catalog
//! a few times, and no host holds a connection between runs. The user is
//! the location's, else `PGUSER`, else the OS user; the password is
//! `PGPASSWORD` (never in a location). The connection is plain TCP.
//!
//! A write whose answer never came (the connection broke, or no answer in
//! time, after the statement was sent) may have landed: it is reported as
//! [`Swapped::Unknown`], and the commit keeps its files and re-reads the
//! table rather than deleting what the catalog may now name.

use std::time::Duration;

use tokio_postgres::error::SqlState;
use tokio_postgres::{Client, NoTls, Row};

use super::super::location::{Location, Server};
use super::Swapped;
use crate::table::error::TableError;

/// Waiting for the server: connecting (TCP, and the start-up and password
/// exchange), and each statement (also set as the session's
/// `statement_timeout`, so the server stops too).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const STATEMENT_TIMEOUT_MS: u32 = 30_000;
/// How long a closing connection may wait for replies still owed.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(2);
/// The longest metadata location read back (another writer's row must
/// not size what idem reads).
const MAX_LOCATION: usize = 4096;
/// The advisory lock that makes creating the catalog's tables one at a
/// time (`CREATE TABLE IF NOT EXISTS` races with itself in PostgreSQL).
const CREATE_LOCK: i64 = 0x6964_656d_6963_6562; // "idemiceb"

/// Why a call failed: surely without effect (refused before or by the
/// server), or with an unknown effect (no answer after the request).
enum Failure {
    Sure(TableError),
    Unknown(TableError),
}

impl Failure {
    fn error(self) -> TableError {
        match self {
            Failure::Sure(e) | Failure::Unknown(e) => e,
        }
    }
}

fn failed(server: &Server, detail: String) -> TableError {
    TableError::Location {
        location: format!("postgres://{}", server.address()),
        detail: format!("Iceberg catalog: {detail}"),
    }
}

/// A failure while doing `what`, naming what the server said.
fn err(server: &Server, what: &str, e: &tokio_postgres::Error) -> TableError {
    failed(server, format!("{what}: {}", said(e)))
}

/// What the server (or the connection) said.
fn said(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!(
            "{}: {} (SQLSTATE {})",
            db.severity(),
            db.message(),
            db.code().code()
        ),
        None => {
            let mut detail = e.to_string();
            let mut source = std::error::Error::source(e);
            while let Some(s) = source {
                detail.push_str(&format!(": {s}"));
                source = s.source();
            }
            detail
        }
    }
}

/// A statement's failure: the server's refusal (severity ERROR) is sure:
/// the statement, and its transaction, had no effect. A broken
/// connection, a FATAL or PANIC (a shutdown or failover may come after a
/// commit landed), a connection-class (08) or operator-intervention (57P)
/// state, or `40003` (the statement's completion is unknown) is not.
fn statement_failure(server: &Server, what: &str, e: &tokio_postgres::Error) -> Failure {
    let sure = e.as_db_error().is_some_and(|db| {
        let code = db.code().code();
        db.severity() == "ERROR"
            && !code.starts_with("08")
            && !code.starts_with("57P")
            && code != "40003"
    });
    match sure {
        true => Failure::Sure(err(server, what, e)),
        false => Failure::Unknown(err(server, what, e)),
    }
}

/// Connect: every step bounded, the session's timeouts set.
async fn connect(server: &Server) -> Result<(Client, tokio::task::JoinHandle<()>), TableError> {
    let mut config = tokio_postgres::Config::new();
    config
        .host(&server.host)
        .port(server.port)
        .dbname(&server.dbname)
        .application_name("idem")
        .connect_timeout(CONNECT_TIMEOUT)
        .keepalives_idle(Duration::from_secs(30))
        .tcp_user_timeout(Duration::from_secs(30));
    if let Some(user) = server.user.clone().or_else(|| std::env::var("PGUSER").ok()) {
        config.user(user);
    }
    if let Ok(password) = std::env::var("PGPASSWORD") {
        config.password(password);
    }
    let hint = " (is PostgreSQL running there, does its pg_hba.conf admit this host and user without TLS, and are PGUSER and PGPASSWORD set if it asks for them?)";
    let (client, connection) =
        match tokio::time::timeout(CONNECT_TIMEOUT, config.connect(NoTls)).await {
            Ok(Ok(c)) => c,
            Ok(Err(e)) => {
                return Err(failed(server, format!("connecting: {}{hint}", said(&e))));
            }
            Err(_) => {
                return Err(failed(
                    server,
                    format!(
                        "connecting: no answer in {} s{hint}",
                        CONNECT_TIMEOUT.as_secs()
                    ),
                ));
            }
        };
    let connection = tokio::spawn(async move {
        let _ = connection.await;
    });
    // Set after connecting, not as start-up options (which PgBouncer and
    // RDS Proxy refuse).
    let set = format!(
        "SET statement_timeout = {STATEMENT_TIMEOUT_MS}; SET lock_timeout = {STATEMENT_TIMEOUT_MS}"
    );
    if let Err(e) = client.batch_execute(&set).await {
        connection.abort();
        return Err(err(server, "setting the session's timeouts", &e));
    }
    Ok((client, connection))
}

/// Run `f` on a fresh connection, bounded in time; the connection is
/// closed after (abandoned if the server owes replies for long).
async fn with_client<T, F>(server: &Server, what: &str, f: F) -> Result<T, Failure>
where
    F: AsyncFnOnce(&mut Client) -> Result<T, tokio_postgres::Error>,
{
    let (mut client, connection) = connect(server).await.map_err(Failure::Sure)?;
    let limit = Duration::from_millis(u64::from(STATEMENT_TIMEOUT_MS) + 5_000);
    let out = tokio::time::timeout(limit, f(&mut client)).await;
    drop(client);
    let abort = connection.abort_handle();
    if tokio::time::timeout(CLOSE_TIMEOUT, connection)
        .await
        .is_err()
    {
        abort.abort();
    }
    match out {
        Ok(r) => r.map_err(|e| statement_failure(server, what, &e)),
        Err(_) => Err(Failure::Unknown(failed(
            server,
            format!(
                "{what}: no answer in {} s (is the server overloaded or a lock held?)",
                limit.as_secs()
            ),
        ))),
    }
}

/// Column `i` of `row`, or why it is not what the catalog holds.
fn column<'a, T: tokio_postgres::types::FromSql<'a>>(
    server: &Server,
    row: &'a Row,
    i: usize,
) -> Result<T, TableError> {
    row.try_get(i)
        .map_err(|e| err(server, "reading the catalog's row", &e))
}

/// The table's current metadata file, `None` when it (or the catalog) is
/// not there. A catalog made by an older JdbcCatalog or by PyIceberg may
/// lack `iceberg_type`: the row's JSON has no such key then.
pub(super) async fn load(server: &Server, loc: &Location) -> Result<Option<String>, TableError> {
    let sql = format!(
        "SELECT left(metadata_location, {}), left(row_to_json(t)->>'iceberg_type', 16)
         FROM iceberg_tables t
         WHERE catalog_name = $1 AND table_namespace = $2 AND table_name = $3",
        MAX_LOCATION + 1
    );
    let row = with_client(server, "reading the table's entry", async |c| {
        match c
            .query_opt(&sql, &[&loc.catalog, &loc.namespace, &loc.name])
            .await
        {
            Err(e) if e.code() == Some(&SqlState::UNDEFINED_TABLE) => Ok(None),
            r => r,
        }
    })
    .await
    .map_err(Failure::error)?;
    let Some(row) = row else { return Ok(None) };
    let kind: Option<String> = column(server, &row, 1)?;
    if kind.as_deref().is_some_and(|k| k != "TABLE") {
        return Ok(None);
    }
    let location: Option<String> = column(server, &row, 0)?;
    if location.as_ref().is_some_and(|l| l.len() > MAX_LOCATION) {
        return Err(failed(
            server,
            format!(
                "the entry of {}.{} names a metadata file longer than {MAX_LOCATION} bytes (not a table this catalog wrote)",
                loc.namespace, loc.name
            ),
        ));
    }
    Ok(location)
}

/// Make the catalog's tables if missing (creating them needs the right
/// to create tables; using them only to read and write rows). Tables this
/// user cannot see (another schema than its `search_path` reaches, or no
/// `USAGE` on it) are not made again beside them: that is refused.
pub(super) async fn ensure(server: &Server) -> Result<(), TableError> {
    let hidden = with_client(server, "making the catalog's tables", async |c| {
        if visible(c.query_one(VISIBLE, &[]).await?)? == (true, true) {
            return Ok(None);
        }
        // Under the lock, looked at again: another host may have made them
        // since (it held the lock until its commit). Read from pg_class,
        // which each statement reads afresh: to_regclass goes through a
        // catalog cache that a transaction renews only when it starts, so
        // here it could miss a table made while this one waited for the
        // lock. One statement, so no creator that takes no lock (PyIceberg,
        // JdbcCatalog) slips in between two looks.
        let tx = c.transaction().await?;
        tx.query("SELECT pg_advisory_xact_lock($1)", &[&CREATE_LOCK])
            .await?;
        let found = tx.query(FOUND, &[]).await?;
        let seen = |name: &str, visible: bool| {
            found.iter().any(|r| {
                r.try_get::<_, String>(0).is_ok_and(|n| n == name)
                    && r.try_get::<_, bool>(2).is_ok_and(|v| v == visible)
            })
        };
        if seen("iceberg_tables", true) && seen("iceberg_namespace_properties", true) {
            return Ok(None);
        }
        // An older JdbcCatalog made iceberg_tables alone: the other table
        // is made beside it. One this user cannot see is named instead.
        if !seen("iceberg_tables", true)
            && let Some(row) = found.iter().find(|r| {
                r.try_get::<_, String>(0)
                    .is_ok_and(|n| n == "iceberg_tables")
            })
        {
            return Ok(Some(row.try_get::<_, String>(1)?));
        }
        tx.batch_execute(super::CREATE_TABLES).await?;
        tx.commit().await.map(|_| None)
    })
    .await
    .map_err(Failure::error)?;
    match hidden {
        None => Ok(()),
        Some(schema) => Err(failed(
            server,
            format!(
                "the catalog's table iceberg_tables is in schema `{schema}`, which this user's search_path does not reach: GRANT USAGE ON SCHEMA {schema} to it, or set its search_path (ALTER ROLE ... SET search_path), rather than making a second catalog"
            ),
        )),
    }
}

/// The catalog's tables wherever they are: name, schema, and whether
/// this user's search_path reaches them.
const FOUND: &str = "SELECT c.relname::text, left(n.nspname, 64), pg_table_is_visible(c.oid)
     FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE c.relname IN ('iceberg_tables', 'iceberg_namespace_properties')
       AND c.relkind IN ('r', 'p')";

/// Whether this user's search_path reaches each of the catalog's tables.
fn visible(row: Row) -> Result<(bool, bool), tokio_postgres::Error> {
    Ok((row.try_get(0)?, row.try_get(1)?))
}

const VISIBLE: &str = "SELECT to_regclass('iceberg_tables') IS NOT NULL,
                              to_regclass('iceberg_namespace_properties') IS NOT NULL";

/// A write's outcome from its call's result.
fn outcome(r: Result<bool, Failure>) -> Result<Swapped, TableError> {
    match r {
        Ok(true) if crate::fault::fails("catalog-answer-lost") => Ok(Swapped::Unknown(
            "the catalog's answer was lost (IDEM_FAULT_FAIL=catalog-answer-lost)".into(),
        )),
        Ok(true) => Ok(Swapped::Landed),
        Ok(false) => Ok(Swapped::Lost),
        Err(Failure::Sure(e)) => Err(e),
        Err(Failure::Unknown(e)) => Ok(Swapped::Unknown(e.to_string())),
    }
}

/// Register a new table (and its namespace) in one transaction.
pub(super) async fn create(
    server: &Server,
    loc: &Location,
    metadata: &str,
) -> Result<Swapped, TableError> {
    let r = with_client(server, "registering the table", async |c| {
        let tx = c.transaction().await?;
        tx.execute(
            "INSERT INTO iceberg_namespace_properties
             (catalog_name, namespace, property_key, property_value)
             VALUES ($1, $2, 'exists', 'true') ON CONFLICT DO NOTHING",
            &[&loc.catalog, &loc.namespace],
        )
        .await?;
        // The table the INSERT below resolves to, whichever schema.
        let typed: bool = tx
            .query_one(
                "SELECT EXISTS (SELECT 1 FROM pg_attribute
                 WHERE attrelid = to_regclass('iceberg_tables') AND attname = 'iceberg_type'
                   AND NOT attisdropped)",
                &[],
            )
            .await?
            .try_get(0)?;
        let sql = if typed {
            "INSERT INTO iceberg_tables
             (catalog_name, table_namespace, table_name, metadata_location, previous_metadata_location, iceberg_type)
             VALUES ($1, $2, $3, $4, NULL, 'TABLE') ON CONFLICT DO NOTHING"
        } else {
            "INSERT INTO iceberg_tables
             (catalog_name, table_namespace, table_name, metadata_location, previous_metadata_location)
             VALUES ($1, $2, $3, $4, NULL) ON CONFLICT DO NOTHING"
        };
        let n = tx
            .execute(sql, &[&loc.catalog, &loc.namespace, &loc.name, &metadata])
            .await?;
        tx.commit().await?;
        Ok(n == 1)
    })
    .await;
    let landed = outcome(r)?;
    if matches!(landed, Swapped::Lost) {
        view_in_the_way(server, loc).await?;
    }
    Ok(landed)
}

/// A registration that lost to a row of the same name: refused by name
/// when that row is a view (else another writer registered the table).
async fn view_in_the_way(server: &Server, loc: &Location) -> Result<(), TableError> {
    let kind = with_client(server, "reading the table's entry", async |c| {
        let row = c
            .query_opt(
                "SELECT left(row_to_json(t)->>'iceberg_type', 16) FROM iceberg_tables t
                 WHERE catalog_name = $1 AND table_namespace = $2 AND table_name = $3",
                &[&loc.catalog, &loc.namespace, &loc.name],
            )
            .await?;
        row.map(|r| r.try_get::<_, Option<String>>(0))
            .transpose()
            .map(Option::flatten)
    })
    .await
    .map_err(Failure::error)?;
    match kind.as_deref() {
        Some(k) if k != "TABLE" => Err(failed(
            server,
            format!(
                "{}.{} is a {} in this catalog, not a table: name another table",
                loc.namespace,
                loc.name,
                k.to_lowercase()
            ),
        )),
        _ => Ok(()),
    }
}

/// Point the table at `new` if it still points at `base`.
pub(super) async fn swap(
    server: &Server,
    loc: &Location,
    base: &str,
    new: &str,
) -> Result<Swapped, TableError> {
    let r = with_client(server, "swapping the table's metadata", async |c| {
        let n = c
            .execute(
                "UPDATE iceberg_tables SET metadata_location = $1, previous_metadata_location = $2
                 WHERE catalog_name = $3 AND table_namespace = $4 AND table_name = $5
                   AND metadata_location = $2",
                &[&new, &base, &loc.catalog, &loc.namespace, &loc.name],
            )
            .await?;
        Ok(n == 1)
    })
    .await;
    outcome(r)
}
