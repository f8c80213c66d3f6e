//! The SQL catalog in a SQLite file: one row per table naming its
//! current metadata file; a commit is a compare-and-swap of that row.

use std::path::Path;

use super::super::location::Location;
use crate::table::error::TableError;

fn err(db: &Path, e: impl std::fmt::Display) -> TableError {
    TableError::Location {
        location: db.display().to_string(),
        detail: format!("Iceberg catalog: {e}"),
    }
}

fn open(db: &Path, create: bool) -> Result<rusqlite::Connection, TableError> {
    use rusqlite::OpenFlags;
    let mut flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    if create {
        if let Some(dir) = db.parent() {
            std::fs::create_dir_all(dir).map_err(|e| err(db, e))?;
        }
        flags |= OpenFlags::SQLITE_OPEN_CREATE;
    } else if !db.exists() {
        return Err(TableError::NoTable {
            location: db.display().to_string(),
        });
    }
    let conn = rusqlite::Connection::open_with_flags(db, flags).map_err(|e| err(db, e))?;
    conn.busy_timeout(std::time::Duration::from_secs(30))
        .map_err(|e| err(db, e))?;
    if create {
        // The tables PyIceberg's SqlCatalog and Java's JdbcCatalog use.
        conn.execute_batch(super::CREATE_TABLES)
            .map_err(|e| err(db, e))?;
    }
    Ok(conn)
}

/// Whether the catalog has the `iceberg_type` column (its V1 schema; a
/// V0 catalog made by an older JdbcCatalog or PyIceberg lacks it and holds
/// tables only).
fn has_type_column(conn: &rusqlite::Connection) -> bool {
    conn.prepare("SELECT iceberg_type FROM iceberg_tables LIMIT 0")
        .is_ok()
}

/// The table's current metadata file, `None` when it is not in the
/// catalog (a view of that name is not a table).
pub(super) fn load(db: &Path, loc: &Location) -> Result<Option<String>, TableError> {
    let conn = open(db, false)?;
    let typed = if has_type_column(&conn) {
        " AND (iceberg_type = 'TABLE' OR iceberg_type IS NULL)"
    } else {
        ""
    };
    let row = conn.query_row(
        &format!(
            "SELECT metadata_location FROM iceberg_tables
             WHERE catalog_name = ?1 AND table_namespace = ?2 AND table_name = ?3{typed}"
        ),
        (&loc.catalog, &loc.namespace, &loc.name),
        |r| r.get::<_, Option<String>>(0),
    );
    match row {
        Ok(m) => Ok(m),
        Err(rusqlite::Error::QueryReturnedNoRows) => Ok(None),
        // A catalog file without the tables has no table either.
        Err(rusqlite::Error::SqliteFailure(_, Some(m))) if m.contains("no such table") => Ok(None),
        Err(e) => Err(err(db, e)),
    }
}

/// Make the catalog file (and its tables) if missing.
pub(super) fn ensure(db: &Path) -> Result<(), TableError> {
    open(db, true).map(|_| ())
}

/// Register a new table; `false` when another writer registered it
/// first.
pub(super) fn create(db: &Path, loc: &Location, metadata: &str) -> Result<bool, TableError> {
    let conn = open(db, true)?;
    conn.execute(
        "INSERT OR IGNORE INTO iceberg_namespace_properties
         (catalog_name, namespace, property_key, property_value) VALUES (?1, ?2, 'exists', 'true')",
        (&loc.catalog, &loc.namespace),
    )
    .map_err(|e| err(db, e))?;
    let sql = if has_type_column(&conn) {
        "INSERT OR IGNORE INTO iceberg_tables
         (catalog_name, table_namespace, table_name, metadata_location, previous_metadata_location, iceberg_type)
         VALUES (?1, ?2, ?3, ?4, NULL, 'TABLE')"
    } else {
        "INSERT OR IGNORE INTO iceberg_tables
         (catalog_name, table_namespace, table_name, metadata_location, previous_metadata_location)
         VALUES (?1, ?2, ?3, ?4, NULL)"
    };
    let n = conn
        .execute(sql, (&loc.catalog, &loc.namespace, &loc.name, metadata))
        .map_err(|e| err(db, e))?;
    Ok(n == 1)
}

/// Point the table at `new` if it still points at `base`; `false` when
/// another writer moved it (a lost race).
pub(super) fn swap(db: &Path, loc: &Location, base: &str, new: &str) -> Result<bool, TableError> {
    let conn = open(db, false)?;
    let n = conn
        .execute(
            "UPDATE iceberg_tables SET metadata_location = ?1, previous_metadata_location = ?2
             WHERE catalog_name = ?3 AND table_namespace = ?4 AND table_name = ?5
               AND metadata_location = ?2",
            (new, base, &loc.catalog, &loc.namespace, &loc.name),
        )
        .map_err(|e| err(db, e))?;
    Ok(n == 1)
}
