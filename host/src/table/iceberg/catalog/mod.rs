//! The SQL catalog: one row per table naming its current metadata file
//! (the `iceberg_tables` schema of Java's `JdbcCatalog` and PyIceberg's
//! `SqlCatalog`, so both open the tables idem writes); a commit is a
//! compare-and-swap of that row. In a SQLite file for one machine, or in
//! PostgreSQL for many hosts.

mod postgres;
mod sqlite;

use super::location::{Backend, Location};
use crate::table::error::TableError;

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
