//! Iceberg tables: the same slice commits as Delta, on the other
//! lakehouse format.
//!
//! A table is named by its catalog: `iceberg+sqlite://PATH#NAMESPACE.TABLE`
//! (a SQL catalog in a SQLite file, the schema PyIceberg's `SqlCatalog`
//! and Java's `JdbcCatalog` use), optionally `?warehouse=URL` (default: the
//! folder `warehouse` beside the catalog file) and `&catalog=NAME`
//! (default `idem`); or the same catalog in PostgreSQL, shared by many
//! hosts: `iceberg+postgres://[USER@]HOST[:PORT]/DB?warehouse=URL#NAMESPACE.TABLE`.
//! The table lives at `WAREHOUSE/NAMESPACE.db/TABLE/`.
//!
//! A commit is one snapshot: its data files added, the slice's earlier
//! files (and, for overwrite-partition, every file of its partition)
//! deleted, in manifests idem writes itself (the `iceberg` crate's
//! transactions only fast-append). It lands by a compare-and-swap of the
//! table's metadata pointer in the catalog: `UPDATE ... WHERE
//! metadata_location = <the one this commit was planned on>`. No row
//! changed means another writer committed first: re-read, re-plan.
//!
//! Slice state lives in the table's properties, written in the same
//! metadata file as the snapshot (so atomically with it):
//! `idem.slice.<slice>` holds the slice's sequence number, its current
//! output digest, the snapshot that committed it and a digest of its data
//! files' names; `idem.partition.<column>=<value>` names the slice that
//! owns a partition. Each snapshot's summary carries `idem.slice`,
//! `idem.seq`, `idem.runKey`, `idem.manifestDigest`, `idem.outputDigest`
//! (what `idem log` lists). A slice owns the data files whose names start
//! with `idem-<16 hex of sha256(slice)>-`; files with other names are
//! another writer's.
//!
//! One file per step: [`Location`] names the table and its `catalog`
//! entry; `open` reads its metadata, `live` the files of its current
//! snapshot, `properties` each slice's record and `state` whether an
//! output is current. A `commit` passes its `checks`, builds a new
//! table's metadata (`create`), writes the output's data files (`files`,
//! `write`; a merge rewrites files in `merge`), and `replace`s the slice's
//! files with one snapshot: its `manifests`, its `summary`, the catalog
//! swap. `ownership` tells a slice's files by name, `proof` answers audit
//! and verify, `inputs` reads a snapshot as a slice input, `history` lists
//! the snapshots, `schema` maps types between Arrow and Iceberg,
//! `partition_value` a slice's partition value in its column's type, `io`
//! reaches the files on idem's storage layer. `wap` writes a slice's
//! snapshot to a branch and publishes it by fast-forwarding `main`
//! (write-audit-publish); `branches` keeps those branches tidy.

mod branches;
mod catalog;
mod checks;
mod commit;
mod create;
mod evolve;
mod files;
mod history;
mod inputs;
mod io;
mod live;
pub(crate) mod location;
mod manifests;
mod merge;
mod open;
mod ownership;
mod partition_value;
mod proof;
mod properties;
mod replace;
mod schema;
mod sidecar;
mod state;
mod summary;
mod wap;
mod write;

use std::sync::Arc;

use iceberg::io::FileIO;
use iceberg::spec::TableMetadata;
use object_store::ObjectStore;
use url::Url;

pub use location::{Location, PREFIX, is_iceberg};
pub use wap::Wrote;

use crate::table::error::TableError;

/// Table property: the commit mode the table was created with.
const MODE_PROP: &str = "idem.mode";
/// Table property: the catalog entry the table was created for.
const TABLE_PROP: &str = "idem.table";

/// An Iceberg table that idem commits to (it may not exist yet).
pub struct Iceberg {
    loc: Location,
    location: String,
    io: FileIO,
    /// The table's folder: where its metadata says it is once it exists
    /// (another tool may have created it elsewhere), else where idem will
    /// create it. Sidecars (`_idem/`) live there too.
    url: Url,
    store: Arc<dyn ObjectStore>,
    prefix: object_store::path::Path,
    /// The current metadata file and what it says.
    current: Option<(String, TableMetadata)>,
    /// Read at this snapshot instead of the current one (a pinned input).
    pinned: Option<i64>,
    attempt: String,
    /// This handle's last write to a branch (write-audit-publish), which
    /// `publish` fast-forwards `main` to.
    branched: Option<branches::WapRecord>,
    /// How many commits this handle has begun (names its data files).
    commits: u32,
}

/// An `iceberg` crate failure while doing `what`.
fn ice_err(what: impl std::fmt::Display) -> impl Fn(iceberg::Error) -> TableError {
    let what = what.to_string();
    move |e| TableError::Iceberg {
        what: what.clone(),
        detail: e.to_string(),
    }
}
