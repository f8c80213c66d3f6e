//! The SQL catalog: one row per table naming its current metadata file
//! (the `iceberg_tables` schema of Java's `JdbcCatalog` and PyIceberg's
//! `SqlCatalog`, so both open the tables idem writes); a commit is a
//! compare-and-swap of that row. In a SQLite file for one machine, or in
//! PostgreSQL for many hosts.

mod postgres;
mod sqlite;

use super::location::{Backend, Location};
use crate::table::error::TableError;

/// The catalog's two tables, in the V1 schema of Java's JdbcCatalog and
/// PyIceberg's SqlCatalog (the same SQL on SQLite and PostgreSQL).
const CREATE_TABLES: &str = "CREATE TABLE IF NOT EXISTS iceberg_tables (
                catalog_name VARCHAR(255) NOT NULL,
                table_namespace VARCHAR(255) NOT NULL,
                table_name VARCHAR(255) NOT NULL,
                metadata_location VARCHAR(1000),
                previous_metadata_location VARCHAR(1000),
                iceberg_type VARCHAR(5),
                PRIMARY KEY (catalog_name, table_namespace, table_name));
             CREATE TABLE IF NOT EXISTS iceberg_namespace_properties (
                catalog_name VARCHAR(255) NOT NULL,
                namespace VARCHAR(255) NOT NULL,
                property_key VARCHAR(255) NOT NULL,
                property_value VARCHAR(1000),
                PRIMARY KEY (catalog_name, namespace, property_key));";

/// What a catalog write did.
pub(super) enum Swapped {
    /// It landed: the table names the new metadata.
    Landed,
    /// Another writer came first: nothing changed.
    Lost,
    /// No answer came after it was sent (why): it may have landed.
    Unknown(String),
}

fn landed(yes: bool) -> Swapped {
    if yes { Swapped::Landed } else { Swapped::Lost }
}

/// The table's current metadata file, `None` when it is not in the
/// catalog (a view of that name is not a table).
pub(super) async fn load(loc: &Location) -> Result<Option<String>, TableError> {
    match &loc.db {
        Backend::Sqlite(db) => sqlite::load(db, loc),
        Backend::Postgres(server) => postgres::load(server, loc).await,
    }
}

/// Make the catalog (its tables) if missing.
pub(super) async fn ensure(loc: &Location) -> Result<(), TableError> {
    match &loc.db {
        Backend::Sqlite(db) => sqlite::ensure(db),
        Backend::Postgres(server) => postgres::ensure(server).await,
    }
}

/// Register a new table (`Lost` when another writer registered it
/// first).
pub(super) async fn create(loc: &Location, metadata: &str) -> Result<Swapped, TableError> {
    match &loc.db {
        Backend::Sqlite(db) => sqlite::create(db, loc, metadata).map(landed),
        Backend::Postgres(server) => postgres::create(server, loc, metadata).await,
    }
}

/// Point the table at `new` if it still points at `base` (`Lost` when
/// another writer moved it: a lost race).
pub(super) async fn swap(loc: &Location, base: &str, new: &str) -> Result<Swapped, TableError> {
    match &loc.db {
        Backend::Sqlite(db) => sqlite::swap(db, loc, base, new).map(landed),
        Backend::Postgres(server) => postgres::swap(server, loc, base, new).await,
    }
}
