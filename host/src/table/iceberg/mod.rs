//! Iceberg tables: the same slice commits as Delta, on the other
//! lakehouse format.
//!
//! A table is named by its catalog: `iceberg+sqlite://PATH#NAMESPACE.TABLE`
//! (a SQL catalog in a SQLite file, the schema PyIceberg's `SqlCatalog`
//! and Java's `JdbcCatalog` use), optionally `?warehouse=URL` (default: the
//! folder `warehouse` beside the catalog file) and `&catalog=NAME`
//! (default `idem`). The table lives at `WAREHOUSE/NAMESPACE.db/TABLE/`.
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

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use futures::TryStreamExt as _;
use iceberg::io::FileIO;
use iceberg::spec::{
    DataContentType, DataFile, FormatVersion, Literal, ManifestContentType, ManifestFile,
    ManifestList, ManifestListWriter, ManifestWriterBuilder, NestedField, Operation, PrimitiveType,
    Snapshot, Summary, TableMetadata, TableMetadataBuilder, Transform, Type, UnboundPartitionSpec,
};
use iceberg::{MetadataLocation, TableCreation};
use object_store::{ObjectStore, ObjectStoreExt as _, PutPayload};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use url::Url;

use super::{
    CommitOutcome, CommitRequest, LogCommit, MAX_ATTEMPTS, Mode, OWNER_COLUMN, Output, SliceCommit,
    SliceState, TableError,
};
use crate::digest::{Digest, OutputDigester};
use crate::fault::{fails as fault_fails, point as fault_point};

/// The scheme prefix of Iceberg table locations.
pub const PREFIX: &str = "iceberg+sqlite://";

/// Whether `location` names an Iceberg table.
pub fn is_iceberg(location: &str) -> bool {
    location.starts_with("iceberg+")
}

/// Table property prefix of a slice's state.
const SLICE_PROP: &str = "idem.slice.";
/// Table property prefix of a partition's owner.
const PARTITION_PROP: &str = "idem.partition.";
/// Table property: the commit mode the table was created with.
const MODE_PROP: &str = "idem.mode";
/// Table property: the catalog entry the table was created for.
const TABLE_PROP: &str = "idem.table";

/// Where an Iceberg table is: its catalog and its name there.
#[derive(Debug, Clone)]
pub struct Location {
    /// The SQLite catalog file.
    db: PathBuf,
    /// `catalog_name` in the catalog's tables.
    catalog: String,
    namespace: String,
    name: String,
    /// The table's folder (ends with `/`).
    table_url: Url,
}

fn bad(location: &str, why: impl std::fmt::Display) -> TableError {
    TableError::Location {
        location: location.into(),
        detail: format!(
            "{why} (an Iceberg table is iceberg+sqlite://CATALOG.db#NAMESPACE.TABLE, optionally ?warehouse=URL&catalog=NAME)"
        ),
    }
}

impl Location {
    /// The table's folder.
    pub fn url(&self) -> &Url {
        &self.table_url
    }

    /// The location in one spelling (absolute catalog path, warehouse
    /// URL, catalog name): what a manifest records; it parses back to
    /// this table.
    pub fn canonical(&self) -> String {
        const QUERY: &percent_encoding::AsciiSet = &percent_encoding::CONTROLS
            .add(b' ')
            .add(b'#')
            .add(b'&')
            .add(b'%')
            .add(b'?')
            .add(b'=');
        let warehouse = self
            .table_url
            .join("../..")
            .map(|u| u.to_string())
            .unwrap_or_default();
        format!(
            "{PREFIX}{}?warehouse={}&catalog={}#{}.{}",
            self.db.display(),
            percent_encoding::utf8_percent_encode(&warehouse, QUERY),
            percent_encoding::utf8_percent_encode(&self.catalog, QUERY),
            self.namespace,
            self.name
        )
    }

    /// Parse `iceberg+sqlite://PATH[?warehouse=URL&catalog=NAME]#NS.TABLE`.
    pub fn parse(location: &str) -> Result<Self, TableError> {
        let Some(rest) = location.strip_prefix(PREFIX) else {
            return Err(bad(
                location,
                "only SQL catalogs on SQLite are supported (iceberg+sqlite://)",
            ));
        };
        let (rest, ident) = rest
            .rsplit_once('#')
            .ok_or_else(|| bad(location, "no table name after `#`"))?;
        let (namespace, name) = ident
            .rsplit_once('.')
            .filter(|(n, t)| !n.is_empty() && !t.is_empty())
            .ok_or_else(|| bad(location, format!("`{ident}` is not NAMESPACE.TABLE")))?;
        let ok = |s: &str| {
            s.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.')
        };
        if !ok(namespace) || !ok(name) {
            return Err(bad(
                location,
                format!("`{ident}`: names may use letters, digits, `_`, `-` and `.`"),
            ));
        }
        let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
        if path.is_empty() {
            return Err(bad(location, "no catalog file"));
        }
        // One spelling per file (symlinks and `..` resolved where the
        // folder exists): the run key records it.
        let db = std::path::absolute(path).map_err(|e| bad(location, e))?;
        let db = match (db.parent(), db.file_name()) {
            (Some(dir), Some(name)) => crate::storage::canonical_best_effort(dir).join(name),
            _ => db,
        };
        let mut warehouse = None;
        let mut catalog = "idem".to_string();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let v = percent_encoding::percent_decode_str(v)
                .decode_utf8()
                .map_err(|e| bad(location, e))?
                .to_string();
            match k {
                "warehouse" => warehouse = Some(v),
                "catalog" if !v.is_empty() => catalog = v,
                _ => return Err(bad(location, format!("unknown option `{k}`"))),
            }
        }
        let warehouse = match warehouse {
            Some(w) => crate::storage::locate(&w)?,
            None => crate::storage::locate(
                db.parent()
                    .unwrap_or(std::path::Path::new("/"))
                    .join("warehouse")
                    .to_str()
                    .ok_or_else(|| bad(location, "the catalog path is not UTF-8"))?,
            )?,
        };
        let table_url = crate::storage::as_dir(&warehouse)
            .join(&format!("{namespace}.db/{name}/"))
            .map_err(|e| bad(location, e))?;
        Ok(Location {
            db,
            catalog,
            namespace: namespace.to_string(),
            name: name.to_string(),
            table_url,
        })
    }
}

mod catalog;
mod io;
mod merge;
mod write;

use write::{FileSpec, Sink};

/// What a table's properties say about one slice.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct SliceRecord {
    /// Commit sequence number of the slice (1 for its first commit).
    seq: i64,
    /// Its current output digest.
    output: String,
    /// The table sequence number of the snapshot that committed it.
    version: u64,
    /// How many data files hold its rows.
    files: usize,
    /// sha256 of their names, sorted, one per line.
    names: String,
    /// The commit's random id (which process made it).
    attempt: String,
    /// `column=value` it owns (overwrite-partition).
    #[serde(default)]
    partition: Option<String>,
    /// The run that made it current and its manifest: kept here as well as
    /// in the snapshot's summary, which snapshot expiry removes.
    #[serde(default)]
    run_key: String,
    #[serde(default)]
    manifest: String,
    /// The output's column names, in order.
    #[serde(default)]
    columns: Option<Vec<String>>,
    /// The snapshot that committed it (a merge slice is current only while
    /// that snapshot is an ancestor of the current one).
    #[serde(default)]
    snapshot: i64,
    /// The schema id its snapshot was written with (kept here because
    /// snapshot expiry removes the snapshot).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    schema: Option<i32>,
}

/// Data files written for a commit, and the schema and partition spec
/// they were written for.
struct Written {
    files: Vec<DataFile>,
    schema_id: i32,
    spec_id: i32,
    /// The table they were written for (a lost creation race means
    /// another table than the one planned).
    table: (String, String),
}

/// Whether `metadata/<name>` under the table folder `url` is a first
/// metadata file an idem commit wrote (its table properties carry the
/// idem mode, it has no history) and no catalog registered.
async fn orphan_first_metadata(io: &FileIO, url: &Url, name: &str, table: &str) -> bool {
    let path = match url.to_file_path() {
        Ok(dir) if url.scheme() == "file" => format!("file://{}/metadata/{name}", dir.display()),
        _ => format!("{url}metadata/{name}"),
    };
    match TableMetadata::read_from(io, &path).await {
        Ok(m) => {
            m.properties().get(TABLE_PROP).map(String::as_str) == Some(table)
                && m.metadata_log().is_empty()
        }
        Err(_) => false,
    }
}

impl Written {
    fn new(files: Vec<DataFile>, m: &TableMetadata) -> Self {
        Written {
            files,
            schema_id: m.current_schema_id(),
            spec_id: m.default_partition_spec_id(),
            table: (m.uuid().to_string(), m.location().to_string()),
        }
    }

    /// Whether the files were written for the table `m` describes.
    fn fits(&self, m: &TableMetadata) -> bool {
        self.schema_id == m.current_schema_id()
            && self.spec_id == m.default_partition_spec_id()
            && self.table == (m.uuid().to_string(), m.location().to_string())
    }
}

/// Delete data files no snapshot names (best effort: an orphan is
/// harmless, and expire/orphan-file cleanup removes it).
async fn discard(io: &FileIO, files: &[DataFile]) {
    for f in files {
        if let Err(e) = io.delete(f.file_path()).await {
            tracing::warn!(
                "could not delete the uncommitted data file {}: {e}",
                f.file_path()
            );
        }
    }
}

/// One live data or delete file of the current snapshot.
#[derive(Debug, Clone)]
struct Live {
    file: DataFile,
    /// Its data sequence number.
    seq: i64,
    /// The manifest that lists it.
    manifest: String,
}

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
}

fn ice_err(what: impl std::fmt::Display) -> impl Fn(iceberg::Error) -> TableError {
    let what = what.to_string();
    move |e| TableError::Iceberg {
        what: what.clone(),
        detail: e.to_string(),
    }
}

/// The first 16 hex digits of sha256(slice): the prefix of its files.
fn slice_tag(slice: &str) -> String {
    Digest::of_bytes(slice.as_bytes()).hex()[..16].to_string()
}

fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

fn owned_by(path: &str, tag: &str) -> bool {
    file_name(path).starts_with(&format!("idem-{tag}-"))
}

/// The position of a slice's file in its output (from its name).
fn file_index(path: &str) -> u64 {
    file_name(path)
        .split('-')
        .nth(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or(u64::MAX)
}

fn names_digest(paths: &mut [String]) -> String {
    paths.sort();
    Digest::of_bytes(paths.join("\n").as_bytes())
        .hex()
        .to_string()
}

impl Iceberg {
    pub async fn open(location: &str, create: bool) -> Result<Self, TableError> {
        let loc = Location::parse(location)?;
        if create {
            catalog::ensure(&loc)?;
        }
        let (store, prefix) = crate::storage::object_store_for(&loc.table_url)?;
        let mut t = Iceberg {
            location: location.to_string(),
            io: io::file_io(),
            url: loc.table_url.clone(),
            store,
            prefix,
            current: None,
            pinned: None,
            attempt: super::attempt_id(location)?,
            loc,
        };
        t.refresh().await?;
        if !create && t.current.is_none() {
            return Err(TableError::NoTable {
                location: location.into(),
            });
        }
        Ok(t)
    }

    /// The table's folder.
    pub fn url(&self) -> &Url {
        &self.url
    }

    /// The current snapshot's sequence number (`None` before the first).
    pub fn version(&self) -> Option<u64> {
        self.current
            .as_ref()
            .map(|(_, m)| m.last_sequence_number().max(0) as u64)
    }

    pub async fn refresh(&mut self) -> Result<(), TableError> {
        let Some(path) = catalog::load(&self.loc)? else {
            self.current = None;
            return Ok(());
        };
        if self.current.as_ref().is_some_and(|(p, _)| *p == path) {
            return Ok(());
        }
        let m = TableMetadata::read_from(&self.io, &path)
            .await
            .map_err(ice_err(format!("reading {path}")))?;
        let url = folder_url(m.location()).map_err(|e| TableError::Location {
            location: m.location().to_string(),
            detail: format!("the table's location in {path}: {e}"),
        })?;
        if url != self.url {
            (self.store, self.prefix) = crate::storage::object_store_for(&url)?;
            self.url = url;
        }
        self.current = Some((path, m));
        Ok(())
    }

    fn metadata(&self) -> Option<&TableMetadata> {
        self.current.as_ref().map(|(_, m)| m)
    }

    /// Why the table's schema is no longer the one the slice's snapshot
    /// was committed with (a column renamed, added or retyped by another
    /// writer; `None` when it is, or when that snapshot has expired).
    fn shape_drift(&self, rec: &SliceRecord) -> Option<String> {
        let m = self.metadata()?;
        // The record's own schema id; for records written before it was
        // kept, the snapshot's (unknown once the snapshot has expired:
        // routine maintenance, so no verdict rather than drift on every
        // rerun).
        let then = match rec.schema {
            Some(id) => id,
            None => m.snapshot_by_id(rec.snapshot)?.schema_id()?,
        };
        (then != m.current_schema_id()).then(|| {
            format!(
                "the table's current schema (id {}) is not the one the slice's commit wrote (id {then}): another writer changed its columns, and readers no longer see the columns idem committed",
                m.current_schema_id()
            )
        })
    }

    /// Data files of the current snapshot that belong to no slice's current
    /// commit (by the slice tag in their names). Empty for a merge table,
    /// whose files are shared by key.
    pub async fn unowned_files(&self, commits: &[SliceCommit]) -> Result<Vec<String>, TableError> {
        let mode = self.metadata().and_then(|m| m.properties().get(MODE_PROP));
        if mode.map(String::as_str) == Some("merge") {
            return Ok(Vec::new());
        }
        let tags: Vec<String> = commits
            .iter()
            .filter(|c| c.current)
            .map(|c| slice_tag(&c.slice))
            .collect();
        Ok(self
            .live_files()
            .await?
            .into_iter()
            .filter(|l| l.file.content_type() == DataContentType::Data)
            .map(|l| l.file.file_path().to_string())
            .filter(|p| !tags.iter().any(|t| owned_by(p, t)))
            .collect())
    }

    /// The manifest the slice's current commit names.
    pub fn current_manifest(&self, slice: &str) -> Option<Digest> {
        Digest::parse(&self.record(slice)?.manifest).ok()
    }

    /// [`Self::shape_drift`] of slice `c`, for audit.
    pub fn slice_shape_drift(&self, c: &SliceCommit) -> Option<String> {
        self.shape_drift(&self.record(&c.slice)?)
    }

    fn record(&self, slice: &str) -> Option<SliceRecord> {
        let m = self.metadata()?;
        let v = m.properties().get(&format!("{SLICE_PROP}{slice}"))?;
        serde_json::from_str(v).ok()
    }

    /// Every live file of the current snapshot (data and deletes).
    async fn live_files(&self) -> Result<Vec<Live>, TableError> {
        let Some(m) = self.metadata() else {
            return Ok(Vec::new());
        };
        let snap = match self.pinned {
            Some(id) => m.snapshot_by_id(id),
            None => m.current_snapshot(),
        };
        let Some(snap) = snap else {
            return Ok(Vec::new());
        };
        let list = self.manifest_list(snap.manifest_list()).await?;
        let mut out = Vec::new();
        for mf in list.entries() {
            let manifest = mf
                .load_manifest(&self.io)
                .await
                .map_err(ice_err(format!("reading manifest {}", mf.manifest_path)))?;
            for e in manifest.entries() {
                if !e.is_alive() {
                    continue;
                }
                out.push(Live {
                    file: e.data_file().clone(),
                    seq: e.sequence_number().unwrap_or(snap.sequence_number()),
                    manifest: mf.manifest_path.clone(),
                });
            }
        }
        Ok(out)
    }

    async fn manifest_list(&self, path: &str) -> Result<ManifestList, TableError> {
        let bytes = self
            .io
            .new_input(path)
            .map_err(ice_err(format!("reading {path}")))?
            .read()
            .await
            .map_err(ice_err(format!("reading {path}")))?;
        ManifestList::parse_with_version(&bytes, FormatVersion::V2)
            .map_err(ice_err(format!("reading {path}")))
    }

    /// Why the table no longer holds exactly the slice's committed files
    /// (`None` when it does).
    fn drift(
        live: &[Live],
        slice: &str,
        rec: &SliceRecord,
        partition: Option<(&str, &str)>,
    ) -> Option<String> {
        let tag = slice_tag(slice);
        let data: Vec<&Live> = live
            .iter()
            .filter(|l| l.file.content_type() == DataContentType::Data)
            .collect();
        let mut mine: Vec<String> = data
            .iter()
            .filter(|l| owned_by(l.file.file_path(), &tag))
            .map(|l| file_name(l.file.file_path()).to_string())
            .collect();
        if let Some((column, value)) = partition {
            let foreign = data
                .iter()
                .find(|l| in_partition(&l.file, value) && !owned_by(l.file.file_path(), &tag));
            if let Some(f) = foreign {
                return Some(format!(
                    "another writer added {} to partition {column}={value}",
                    f.file.file_path()
                ));
            }
        }
        if mine.len() != rec.files || names_digest(&mut mine) != rec.names {
            return Some(format!(
                "the table holds {} of the slice's data files, not the {} its commit added (another writer removed or rewrote them)",
                mine.len(),
                rec.files
            ));
        }
        // Row-level deletes written after the slice's commit may hide its
        // rows (idem never writes delete files): position deletes that name
        // one data file count for that file's slice only; the others (an
        // equality delete, a position delete over many files) for every
        // slice they may reach.
        if let Some(d) = live.iter().find(|l| {
            l.file.content_type() != DataContentType::Data
                && l.seq as u64 > rec.version
                && match deleted_file(&l.file) {
                    Some(target) => owned_by(&target, &tag),
                    None => partition.is_none_or(|(_, v)| {
                        in_partition(&l.file, v) || l.file.partition().fields().is_empty()
                    }),
                }
        }) {
            return Some(format!(
                "another writer added the delete file {} after the slice's commit",
                d.file.file_path()
            ));
        }
        None
    }

    pub async fn slice_state(
        &self,
        slice: &str,
        digest: &Digest,
        mode: &Mode,
    ) -> Result<SliceState, TableError> {
        let Some(rec) = self.record(slice) else {
            return Ok(SliceState::Other);
        };
        if rec.output != digest.as_str() {
            return Ok(SliceState::Other);
        }
        if let Some(reason) = self.shape_drift(&rec) {
            return Ok(SliceState::Drifted { reason });
        }
        let partition = match mode {
            Mode::OverwritePartition { column, value } => Some((column.as_str(), value.as_str())),
            Mode::Merge { .. } => {
                let id = (rec.snapshot != 0).then_some(rec.snapshot);
                return Ok(match self.foreign_since(rec.version, id) {
                    None => SliceState::Current {
                        since: Some(rec.version),
                    },
                    Some(reason) => SliceState::Drifted { reason },
                });
            }
            Mode::Append => None,
        };
        let live = self.live_files().await?;
        Ok(match Self::drift(&live, slice, &rec, partition) {
            None => SliceState::Current {
                since: Some(rec.version),
            },
            Some(reason) => SliceState::Drifted { reason },
        })
    }

    /// Merge slices share files, so their rows cannot be told apart by
    /// file: a snapshot after `since` that idem did not make may have
    /// changed them (the current snapshot's ancestry; an expired one is
    /// not seen).
    pub fn foreign_commit_since(&self, since: Option<u64>) -> Option<String> {
        self.foreign_since(since.unwrap_or(0), None)
    }

    /// The first snapshot, walking back from the current one to the one at
    /// sequence `since` (or to snapshot `id`, when known), that another
    /// writer made and that changed data (a `replace`, i.e. compaction,
    /// does not). Not reaching snapshot `id` (a rollback past it, or its
    /// expiry) counts as a change too.
    fn foreign_since(&self, since: u64, id: Option<i64>) -> Option<String> {
        let m = self.metadata()?;
        let mut next = m.current_snapshot().cloned();
        let mut first = None;
        let mut reached = id.is_none();
        while let Some(s) = next {
            if Some(s.snapshot_id()) == id {
                reached = true;
                break;
            }
            if (s.sequence_number() as u64) <= since {
                break;
            }
            if !s.summary().additional_properties.contains_key("idem.slice")
                && s.summary().operation != Operation::Replace
            {
                first = Some(s.sequence_number());
            }
            next = s
                .parent_snapshot_id()
                .and_then(|p| m.snapshot_by_id(p).cloned());
        }
        if let Some(v) = first {
            return Some(format!(
                "snapshot {v} was committed by another writer after the slice's commit (sequence {since})"
            ));
        }
        (!reached).then(|| {
            format!(
                "the slice's commit (sequence {since}) is no longer an ancestor of the table's current snapshot (rolled back, or expired)"
            )
        })
    }

    pub fn slice_seq(&self, slice: &str) -> i64 {
        let Some(id) = self.pinned else {
            return self.record(slice).map(|r| r.seq).unwrap_or(0);
        };
        // At a pinned snapshot: the slice's latest commit in its ancestry.
        let Some(m) = self.metadata() else {
            return 0;
        };
        let mut next = m.snapshot_by_id(id).cloned();
        while let Some(s) = next {
            let p = &s.summary().additional_properties;
            if p.get("idem.slice").map(String::as_str) == Some(slice) {
                return p.get("idem.seq").and_then(|v| v.parse().ok()).unwrap_or(1);
            }
            next = s
                .parent_snapshot_id()
                .and_then(|p| m.snapshot_by_id(p).cloned());
        }
        0
    }

    /// Read the table as of the snapshot with sequence number `version`
    /// (what `committed version N` names).
    pub fn load_version(&mut self, version: u64) -> Result<(), TableError> {
        let m = self.metadata().ok_or_else(|| TableError::NoTable {
            location: self.location.clone(),
        })?;
        let id = m
            .snapshots()
            .find(|s| s.sequence_number() as u64 == version)
            .map(|s| s.snapshot_id())
            .ok_or_else(|| TableError::Iceberg {
                what: format!("reading version {version}"),
                detail: "the table has no snapshot with that sequence number (see `idem log`; expired snapshots cannot be read)".into(),
            })?;
        self.pinned = Some(id);
        Ok(())
    }

    /// The data files of the pinned (or current) snapshot as a slice
    /// input, relative to the table's folder, optionally only partition
    /// `column = value`, or only slice `owner`'s (its files; in a merge
    /// table every file, and `true`: keep the rows its owner column names).
    /// idem's files hold their partition column, so no values are added.
    pub async fn input_files(
        &self,
        partition: Option<(&str, &str)>,
        owner: Option<&str>,
    ) -> Result<(Vec<super::InputFile>, bool), TableError> {
        let m = self.metadata().ok_or_else(|| TableError::NoTable {
            location: self.location.clone(),
        })?;
        let unsupported = |detail: String| TableError::Iceberg {
            what: format!("reading {} as a slice", self.location),
            detail,
        };
        let mode = m.properties().get(MODE_PROP).map(String::as_str);
        let rows_of = match (owner, mode) {
            (None, _) => false,
            (Some(_), Some("merge")) => true,
            (Some(_), Some(_)) => false,
            (Some(owner), None) => {
                return Err(unsupported(format!(
                    "the rows of slice `{owner}` can only be selected in a table idem writes; this table was not created by idem. Read a version or a partition of it instead"
                )));
            }
        };
        let base = self.url.as_str();
        let mut out = Vec::new();
        for l in self.live_files().await? {
            if l.file.content_type() != DataContentType::Data {
                return Err(unsupported(format!(
                    "the snapshot has row-level delete files (e.g. {}), which idem cannot apply yet: compact the table first",
                    l.file.file_path()
                )));
            }
            let path = l.file.file_path();
            if let Some((_, v)) = partition
                && !in_partition(&l.file, v)
            {
                continue;
            }
            if let Some(owner) = owner
                && !rows_of
                && !owned_by(path, &slice_tag(owner))
            {
                continue;
            }
            // Relative to the table's folder, as the object is named.
            let url = folder_url(path).map_err(|e| unsupported(format!("{path}: {e}")))?;
            let rel = url
                .as_str()
                .trim_end_matches('/')
                .strip_prefix(base)
                .map(|r| {
                    percent_encoding::percent_decode_str(r)
                        .decode_utf8_lossy()
                        .to_string()
                })
                .ok_or_else(|| {
                    unsupported(format!(
                        "data file {path} lies outside the table's folder {base}"
                    ))
                })?;
            out.push(super::InputFile {
                path: rel,
                partition_values: Vec::new(),
            });
        }
        // In output order for a slice's files (their names number them).
        out.sort_by(|a, b| (file_index(&a.path), &a.path).cmp(&(file_index(&b.path), &b.path)));
        Ok((out, rows_of))
    }

    pub fn version_of_current(&self, slice: &str) -> Option<u64> {
        self.record(slice).map(|r| r.version)
    }

    /// The table's schema as Arrow (the types idem writes for each
    /// Iceberg type).
    pub fn arrow_schema(&self) -> Result<SchemaRef, TableError> {
        let m = self.metadata().ok_or(TableError::NoSchema)?;
        if let Some(schema) = self
            .pinned
            .and_then(|id| m.snapshot_by_id(id))
            .and_then(|s| s.schema_id())
            .and_then(|id| m.schema_by_id(id))
        {
            return arrow_fields_of(schema.as_ref());
        }
        arrow_schema_of(m)
    }

    /// Every slice's current commit (from the table's properties) with
    /// the snapshot summaries' details.
    pub async fn slice_commits(&self) -> Result<Vec<SliceCommit>, TableError> {
        let Some(m) = self.metadata() else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        // From the slices' records alone: the snapshots that made them
        // current may have been expired.
        for (k, v) in m.properties() {
            let Some(slice) = k.strip_prefix(SLICE_PROP) else {
                continue;
            };
            let Ok(rec) = serde_json::from_str::<SliceRecord>(v) else {
                continue;
            };
            out.push(SliceCommit {
                slice: slice.to_string(),
                seq: rec.seq,
                version: rec.version,
                mode: m.properties().get(MODE_PROP).cloned().unwrap_or_default(),
                partition: rec.partition.clone(),
                manifest_digest: Digest::parse(&rec.manifest).ok(),
                output_digest: Digest::parse(&rec.output).ok(),
                run_key: Digest::parse(&rec.run_key).ok(),
                output_columns: rec.columns.clone(),
                current: true,
            });
        }
        out.sort_by(|a, b| a.slice.cmp(&b.slice));
        Ok(out)
    }

    pub async fn slice_drift(&self, c: &SliceCommit) -> Result<Option<String>, TableError> {
        let Some(rec) = self.record(&c.slice) else {
            return Ok(Some("the table no longer records the slice".into()));
        };
        let partition = rec.partition.as_deref().and_then(|p| p.split_once('='));
        let live = self.live_files().await?;
        Ok(Self::drift(&live, &c.slice, &rec, partition))
    }

    /// Read the slice's rows back from its data files, in output order,
    /// and digest them as a run digests its output.
    pub async fn digest_slice_rows(&self, c: &SliceCommit) -> Result<(Digest, u64), TableError> {
        let tag = slice_tag(&c.slice);
        let mut files: Vec<String> = self
            .live_files()
            .await?
            .into_iter()
            .filter(|l| {
                l.file.content_type() == DataContentType::Data && owned_by(l.file.file_path(), &tag)
            })
            .map(|l| l.file.file_path().to_string())
            .collect();
        files.sort_by_key(|p| file_index(p));
        let mut digester = OutputDigester::new();
        for path in files {
            let err = |e: &dyn std::fmt::Display| TableError::Iceberg {
                what: format!("reading data file {path}"),
                detail: e.to_string(),
            };
            let bytes = self
                .io
                .new_input(&path)
                .map_err(|e| err(&e))?
                .read()
                .await
                .map_err(|e| err(&e))?;
            super::proof::digest_file(
                bytes,
                c.output_columns.as_deref(),
                None,
                strip_field_ids,
                &mut digester,
            )
            .map_err(|e| err(&e))?;
        }
        let rows = digester.rows();
        Ok((digester.finish(), rows))
    }

    /// Every snapshot's idem fields, newest first (`version` is the
    /// snapshot's sequence number).
    pub fn idem_history(&self) -> Vec<LogCommit> {
        let Some(m) = self.metadata() else {
            return Vec::new();
        };
        let mut out: Vec<LogCommit> = m
            .snapshots()
            .map(|s| {
                let props = &s.summary().additional_properties;
                let idem: HashMap<String, serde_json::Value> = props
                    .iter()
                    .filter(|(k, _)| k.starts_with("idem."))
                    .map(|(k, v)| {
                        // Summaries hold text; these fields are numbers
                        // and JSON in a Delta commitInfo.
                        let typed = match k.as_str() {
                            "idem.seq" | "idem.files" | "idem.outputColumns" => {
                                serde_json::from_str(v).ok()
                            }
                            _ => None,
                        };
                        (k.clone(), typed.unwrap_or_else(|| v.clone().into()))
                    })
                    .collect();
                LogCommit {
                    version: s.sequence_number().max(0) as u64,
                    data_change: true,
                    idem,
                    shape: None,
                    touches_files: true,
                    txns: Vec::new(),
                }
            })
            .collect();
        out.sort_by_key(|c| std::cmp::Reverse(c.version));
        out
    }

    fn sidecar_path(&self, rel: &str) -> object_store::path::Path {
        let mut p = self.prefix.clone();
        for part in format!("_idem/{rel}").split('/') {
            p = p.clone().join(part);
        }
        p
    }

    pub async fn put_sidecar(&self, rel: &str, bytes: Vec<u8>) -> Result<(), TableError> {
        self.store
            .put(&self.sidecar_path(rel), PutPayload::from(bytes))
            .await
            .map_err(|e| TableError::Sidecar {
                path: rel.into(),
                detail: e.to_string(),
            })?;
        Ok(())
    }

    pub async fn get_sidecar(&self, rel: &str) -> Result<Option<Vec<u8>>, TableError> {
        let err = |e: object_store::Error| TableError::Sidecar {
            path: rel.into(),
            detail: e.to_string(),
        };
        match self.store.get(&self.sidecar_path(rel)).await {
            Ok(r) => Ok(Some(
                crate::table::sidecar::whole(r)
                    .await
                    .map_err(|detail| TableError::Sidecar {
                        path: rel.into(),
                        detail,
                    })?
                    .to_vec(),
            )),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(err(e)),
        }
    }

    pub async fn list_sidecar(&self, prefix: &str) -> Result<Vec<String>, TableError> {
        let metas: Vec<_> = self
            .store
            .list(Some(&self.sidecar_path(prefix)))
            .try_collect()
            .await
            .map_err(|e| TableError::Sidecar {
                path: prefix.into(),
                detail: e.to_string(),
            })?;
        let base = self.prefix.to_string();
        let mut names: Vec<String> = metas
            .into_iter()
            .map(|m| {
                let s = m.location.to_string();
                s.strip_prefix(&base)
                    .map(|r| r.trim_start_matches('/').to_string())
                    .unwrap_or(s)
            })
            .collect();
        names.sort();
        Ok(names)
    }

    /// Commit the slice's output as one snapshot unless it is current.
    pub async fn commit(&mut self, req: CommitRequest<'_>) -> Result<CommitOutcome, TableError> {
        let staged = match &req.output {
            Output::Staged(paths) => paths.clone(),
            Output::Written(_) => {
                return Err(TableError::Output(
                    "an Iceberg commit takes staged output".into(),
                ));
            }
        };
        let mut written: Option<Written> = None;
        let mut swapped = false;
        let result = self
            .commit_attempts(&req, &staged, &mut written, &mut swapped)
            .await;
        // Data files no snapshot names are deleted (a lost race, an
        // unchanged output, an error before the catalog swap).
        let keep = matches!(result, Ok(CommitOutcome::Committed { .. })) || swapped;
        if let (Some(w), false) = (&written, keep) {
            discard(&self.io, &w.files).await;
        }
        result
    }

    async fn commit_attempts(
        &mut self,
        req: &CommitRequest<'_>,
        staged: &[PathBuf],
        written: &mut Option<Written>,
        swapped: &mut bool,
    ) -> Result<CommitOutcome, TableError> {
        if req.progress.is_some() {
            return Err(TableError::Partitioning(
                "tracked progress (--next) is not yet supported for Iceberg tables: use a Delta table".into(),
            ));
        }
        let mut raced = false;
        let mut last_conflict = String::new();
        for attempt in 0..MAX_ATTEMPTS {
            if fault_fails("commit-read") {
                return Err(TableError::Iceberg {
                    what: "refreshing the table".into(),
                    detail: "IDEM_FAULT_FAIL=commit-read".into(),
                });
            }
            self.refresh().await?;
            let drift = match self
                .slice_state(req.slice, req.output_digest, req.mode)
                .await?
            {
                SliceState::Current { since } => {
                    if raced
                        && let Some(rec) = self.record(req.slice)
                        && rec.attempt == self.attempt
                    {
                        return Ok(CommitOutcome::Committed {
                            version: rec.version,
                            drift: None,
                        });
                    }
                    return Ok(CommitOutcome::Unchanged { since, raced });
                }
                SliceState::Drifted { reason } => Some(reason),
                SliceState::Other => None,
            };
            // A new table is created by the commit of its first snapshot
            // (one catalog INSERT): a failed first run leaves no table.
            let (base, m) = match &self.current {
                Some((path, m)) => (Some(path.clone()), m.clone()),
                None => (None, self.new_metadata(req).await?),
            };
            self.check_table(req, &m)?;
            let merge_removed = match req.mode {
                // A merge rewrites files of the table as it is now: planned
                // again on every attempt.
                Mode::Merge { keys } => {
                    if let Some(w) = written.take() {
                        discard(&self.io, &w.files).await;
                    }
                    let merged = self
                        .plan_merge(req, base.is_some(), &m, staged, keys, attempt)
                        .await?;
                    *written = Some(Written::new(merged.added, &m));
                    Some(merged.removed)
                }
                _ => {
                    // Files written for an earlier attempt carry that
                    // schema's field ids and that spec: another writer may
                    // have changed them since.
                    if let Some(w) = written.take_if(|w| !w.fits(&m)) {
                        discard(&self.io, &w.files).await;
                    }
                    if written.is_none() {
                        let files = self.write_files(req, staged, &m, attempt).await?;
                        *written = Some(Written::new(files, &m));
                    }
                    None
                }
            };
            let files = written.as_ref().map(|w| w.files.as_slice()).unwrap_or(&[]);
            match self
                .replace(
                    req,
                    base.as_deref(),
                    &m,
                    files,
                    merge_removed.as_ref(),
                    swapped,
                )
                .await
            {
                Ok(version) => return Ok(CommitOutcome::Committed { version, drift }),
                Err(TableError::Conflict(_)) if *swapped => {
                    return self.after_swap(req).await;
                }
                Err(TableError::Conflict(detail)) => {
                    tracing::info!(
                        "commit of slice {} lost a race ({detail}); re-reading",
                        req.slice
                    );
                    last_conflict = detail;
                    raced = true;
                }
                Err(e) => return Err(e),
            }
        }
        Err(TableError::Conflict(format!(
            "gave up after {MAX_ATTEMPTS} attempts; other writers keep committing slice {} ({last_conflict})",
            req.slice
        )))
    }

    /// Rewrite the table's files for a merge of the staged output (see
    /// [`merge`]) against the table as `m` describes it.
    async fn plan_merge(
        &self,
        req: &CommitRequest<'_>,
        exists: bool,
        m: &TableMetadata,
        staged: &[PathBuf],
        keys: &[String],
        attempt: usize,
    ) -> Result<merge::Merged, TableError> {
        let live = if exists {
            self.live_files().await?
        } else {
            Vec::new()
        };
        if let Some(d) = live
            .iter()
            .find(|l| l.file.content_type() != DataContentType::Data)
        {
            return Err(TableError::Partitioning(format!(
                "the table has row-level delete files (e.g. {}): idem's copy-on-write merge cannot rewrite rows under them; compact the table (rewrite_data_files) first",
                d.file.file_path()
            )));
        }
        let paths: Vec<String> = live
            .iter()
            .map(|l| l.file.file_path().to_string())
            .collect();
        let spec = self.file_spec(req, m, attempt)?;
        let (staged, keys, slice) = (staged.to_vec(), keys.to_vec(), req.slice.to_string());
        let merged =
            tokio::task::spawn_blocking(move || merge::merge(spec, &staged, &paths, &keys, &slice))
                .await
                .map_err(|e| TableError::Output(format!("merging: {e}")))?;
        match merged {
            Ok(m) => Ok(m),
            Err(failed) => {
                let (e, files) = *failed;
                discard(&self.io, &files).await;
                Err(e)
            }
        }
    }

    /// The catalog swap landed but its outcome was not seen (a lost
    /// response): the commit is ours if the slice's record names this
    /// process's commit. Nothing is retried (a retry could plan against
    /// our own commit and delete its files).
    async fn after_swap(&mut self, req: &CommitRequest<'_>) -> Result<CommitOutcome, TableError> {
        self.refresh().await?;
        match self.record(req.slice) {
            Some(rec) if rec.attempt == self.attempt => Ok(CommitOutcome::Committed {
                version: rec.version,
                drift: None,
            }),
            _ => Err(TableError::Iceberg {
                what: "committing".into(),
                detail: "the catalog swap's outcome was lost and the table does not show this commit: run again".into(),
            }),
        }
    }

    /// The table's schema, partitioning and mode must be the run's.
    fn check_table(&self, req: &CommitRequest<'_>, m: &TableMetadata) -> Result<(), TableError> {
        if let Some(created) = m.properties().get(MODE_PROP)
            && created != req.mode.name()
        {
            return Err(TableError::ModeMismatch {
                table: req.mode.name().to_string(),
                created: created.clone(),
            });
        }
        // idem writes format-v2 manifests and manifest lists.
        if m.format_version() != FormatVersion::V2 {
            return Err(TableError::Partitioning(format!(
                "the table is Iceberg format {}, but idem writes format 2: upgrade it (table property format-version=2) or use a new table",
                m.format_version()
            )));
        }
        let schema = m.current_schema();
        // The slice's partition value is text (as in Delta): a table
        // partitioned on a column of another type would get values of the
        // wrong type in its manifests.
        if let Some(f) = m.default_partition_spec().fields().first()
            && !matches!(
                schema
                    .field_by_id(f.source_id)
                    .map(|s| s.field_type.as_ref()),
                Some(Type::Primitive(PrimitiveType::String))
            )
        {
            return Err(TableError::Partitioning(format!(
                "the table's partition column `{}` is not a string column: idem writes a slice's partition value as text; use a table partitioned on a string column",
                f.name
            )));
        }
        let parts: Vec<String> = m
            .default_partition_spec()
            .fields()
            .iter()
            .map(|f| {
                let src = schema
                    .field_by_id(f.source_id)
                    .map(|s| s.name.clone())
                    .unwrap_or_default();
                if f.transform == Transform::Identity {
                    src
                } else {
                    format!("{}({src})", f.transform)
                }
            })
            .collect();
        let wanted: Vec<String> = match req.mode {
            Mode::OverwritePartition { column, .. } => vec![column.clone()],
            _ => Vec::new(),
        };
        // A merge table names each row's slice: without that column no
        // slice's rows can be told apart (its vanished keys would stay,
        // other writers' rows would be overwritten silently).
        if matches!(req.mode, Mode::Merge { .. })
            && !matches!(
                schema
                    .field_by_name(OWNER_COLUMN)
                    .map(|f| f.field_type.as_ref()),
                Some(Type::Primitive(PrimitiveType::String))
            )
        {
            return Err(TableError::Partitioning(format!(
                "the table has no string column `{OWNER_COLUMN}` (the slice owning each row), which a merge needs: merge into a table idem created, or add the column"
            )));
        }
        if parts != wanted {
            return Err(TableError::Partitioning(format!(
                "the table is partitioned by [{}], but this run writes partition [{}]: give --partition with the table's partition column, or use another table",
                parts.join(", "),
                wanted.join(", ")
            )));
        }
        if let Some(out) = &req.schema {
            super::files::check_types(&plain_schema(out), arrow_schema_of(m)?.as_ref())?;
        }
        Ok(())
    }

    /// The metadata of a new table for this output (written and
    /// registered only with its first snapshot, by [`Self::replace`]).
    async fn new_metadata(&self, req: &CommitRequest<'_>) -> Result<TableMetadata, TableError> {
        // A folder that holds a table already (registered under another
        // catalog name, or in another catalog) is not taken over: two
        // tables in one folder would delete each other's files. What a
        // first commit of idem's own left when it was killed before its
        // catalog INSERT (a first metadata file, idem's manifests) is not
        // a table and does not count.
        let metas: Vec<_> = self
            .store
            .list(Some(&self.prefix.clone().join("metadata")))
            .try_collect()
            .await
            .map_err(|e| TableError::Location {
                location: self.location.clone(),
                detail: e.to_string(),
            })?;
        for meta in metas {
            let name = meta.location.filename().unwrap_or_default().to_string();
            let ours = if name.ends_with(".metadata.json") {
                name.starts_with("00000-")
                    && orphan_first_metadata(&self.io, &self.url, &name, &self.loc.canonical())
                        .await
            } else {
                name.starts_with("idem-") || name.contains("-idem-")
            };
            if !ours {
                return Err(TableError::Location {
                    location: self.location.clone(),
                    detail: format!(
                        "the catalog has no table {}.{} (catalog name `{}`), but {} already holds another table's Iceberg metadata ({name}): name that table's catalog with ?catalog=NAME, or use another table name or warehouse",
                        self.loc.namespace, self.loc.name, self.loc.catalog, self.url
                    ),
                });
            }
        }
        let out = req.schema.clone().ok_or(TableError::NoSchema)?;
        let mut fields: Vec<Field> = plain_schema(&out)
            .fields()
            .iter()
            .map(|f| f.as_ref().clone())
            .collect();
        if let Mode::OverwritePartition { column, .. } = req.mode
            && !fields.iter().any(|f| f.name() == column)
        {
            fields.push(Field::new(column, DataType::Utf8, false));
        }
        if let Mode::Merge { .. } = req.mode {
            if fields.iter().any(|f| f.name() == OWNER_COLUMN) {
                return Err(TableError::Output(format!(
                    "the output has a column named `{OWNER_COLUMN}`, which idem keeps for itself in merge tables (the slice owning each row): rename it"
                )));
            }
            fields.push(Field::new(OWNER_COLUMN, DataType::Utf8, false));
        }
        let mut nested = Vec::new();
        for (i, f) in fields.iter().enumerate() {
            let t = iceberg_type(f.data_type()).ok_or_else(|| {
                TableError::Output(format!(
                    "the output's column `{}` is {}, which has no exact Iceberg type: cast it in the transform (to Int32/Int64, Float32/Float64, Utf8, Binary, Boolean, Date32, Timestamp(µs) without a zone or in \"UTC\", Decimal128)",
                    f.name(),
                    f.data_type()
                ))
            })?;
            let id = i as i32 + 1;
            nested.push(Arc::new(if f.is_nullable() {
                NestedField::optional(id, f.name(), Type::Primitive(t))
            } else {
                NestedField::required(id, f.name(), Type::Primitive(t))
            }));
        }
        let schema = iceberg::spec::Schema::builder()
            .with_fields(nested)
            .build()
            .map_err(|e| TableError::Output(format!("output schema: {e}")))?;
        let mut spec = UnboundPartitionSpec::builder();
        if let Mode::OverwritePartition { column, .. } = req.mode {
            let id = fields.iter().position(|f| f.name() == column).unwrap_or(0) as i32 + 1;
            spec = spec
                .add_partition_field(id, column, Transform::Identity)
                .map_err(ice_err("partition spec"))?;
        }
        // Local paths as `file://` + the path, unencoded: what PyIceberg
        // writes, and what every reader opens as is.
        let location = match self.loc.table_url.to_file_path() {
            Ok(dir) if self.loc.table_url.scheme() == "file" => format!("file://{}", dir.display()),
            _ => self
                .loc
                .table_url
                .as_str()
                .trim_end_matches('/')
                .to_string(),
        };
        let creation = TableCreation::builder()
            .name(self.loc.name.clone())
            .location(location)
            .schema(schema)
            .partition_spec(spec.build())
            .properties([
                (MODE_PROP.to_string(), req.mode.name().to_string()),
                // Which catalog entry this table is for: what tells a first
                // commit's leftovers from another catalog's table here.
                (TABLE_PROP.to_string(), self.loc.canonical()),
            ])
            .build();
        Ok(TableMetadataBuilder::from_table_creation(creation)
            .map_err(ice_err("creating the table"))?
            .build()
            .map_err(ice_err("creating the table"))?
            .metadata)
    }

    /// How this commit's data files are written into the table `m`.
    fn file_spec(
        &self,
        req: &CommitRequest<'_>,
        m: &TableMetadata,
        attempt: usize,
    ) -> Result<FileSpec, TableError> {
        // The folder is cosmetic (the partition value is in the manifest):
        // characters a path or URL would need escaped are replaced.
        let safe = |v: &str| -> String {
            v.chars()
                .map(|ch| {
                    if ch.is_ascii_alphanumeric() || "-_.".contains(ch) {
                        ch
                    } else {
                        '_'
                    }
                })
                .collect()
        };
        let (dir, partition) = match req.mode {
            Mode::OverwritePartition { column, value } => (
                format!("data/{}={}/", safe(column), safe(value)),
                Some(value.clone()),
            ),
            _ => ("data/".to_string(), None),
        };
        let tag = slice_tag(req.slice);
        Ok(FileSpec {
            io: self.io.clone(),
            handle: tokio::runtime::Handle::current(),
            base: m.location().trim_end_matches('/').to_string(),
            dir,
            // Merge files hold many slices' rows: no slice owns them by name.
            name: match req.mode {
                Mode::Merge { .. } => format!("idem-merge-{tag}"),
                _ => format!("idem-{tag}"),
            },
            // Unique per process and attempt: an attempt never writes over
            // the files of another (nor of one that may have committed).
            nonce: format!("{}a{attempt}", &self.attempt[..12]),
            schema: with_field_ids(arrow_schema_of(m)?.as_ref(), m.current_schema()),
            spec_id: m.default_partition_spec_id(),
            partition,
            target: super::target_file_bytes()?,
        })
    }

    /// Write the staged output into data files of the table (not yet
    /// committed), each uploaded as soon as it is complete (memory: one
    /// file): the table's field ids on every column, the partition column
    /// added for overwrite-partition. On failure the files already
    /// uploaded are deleted.
    async fn write_files(
        &self,
        req: &CommitRequest<'_>,
        staged: &[PathBuf],
        m: &TableMetadata,
        attempt: usize,
    ) -> Result<Vec<DataFile>, TableError> {
        let spec = self.file_spec(req, m, attempt)?;
        let mode = req.mode.clone();
        let staged = staged.to_vec();
        // Decoding and encoding are CPU work: off the async executor; each
        // complete file is uploaded from there.
        tokio::task::spawn_blocking(move || {
            let (io, handle) = (spec.io.clone(), spec.handle.clone());
            let mut sink = Sink::new(spec);
            let result = (|| {
                for batch in staged_batches(&staged) {
                    sink.push(super::files::with_partition(batch?, &mode)?)?;
                }
                sink.finish()
            })();
            match result {
                Ok(()) => Ok(sink.files),
                Err(e) => {
                    handle.block_on(discard(&io, &sink.files));
                    Err(e)
                }
            }
        })
        .await
        .map_err(|e| TableError::Output(format!("encoding data files: {e}")))?
    }

    /// One snapshot: `files` added, the slice's earlier files (and its
    /// partition's) deleted, the slice's record updated; then the catalog
    /// swap. A lost swap is a `Conflict`.
    async fn replace(
        &mut self,
        req: &CommitRequest<'_>,
        base_path: Option<&str>,
        m: &TableMetadata,
        files: &[DataFile],
        merge_removed: Option<&std::collections::HashSet<String>>,
        swapped: &mut bool,
    ) -> Result<u64, TableError> {
        let live = match base_path {
            Some(_) => self.live_files().await?,
            None => Vec::new(),
        };
        let tag = slice_tag(req.slice);
        let partition = match req.mode {
            Mode::OverwritePartition { column, value } => Some((column.clone(), value.clone())),
            _ => None,
        };
        if merge_removed.is_some() {
            // Merge tables hold many slices' rows per file; keys, not
            // files, are owned (checked while merging).
        } else if let Some((column, value)) = &partition {
            if let Some(owner) = m
                .properties()
                .get(&format!("{PARTITION_PROP}{column}={value}"))
                && owner != req.slice
            {
                return Err(TableError::Owned {
                    partition: format!("{column}={value}"),
                    owner: owner.clone(),
                    slice: req.slice.to_string(),
                });
            }
        } else if let Some(f) = live.iter().find(|l| {
            l.file.content_type() == DataContentType::Data
                && !file_name(l.file.file_path()).starts_with("idem-")
        }) {
            let count = live
                .iter()
                .filter(|l| !file_name(l.file.file_path()).starts_with("idem-"))
                .count();
            return Err(TableError::Foreign {
                count,
                example: f.file.file_path().to_string(),
            });
        }
        let removed: Vec<&Live> = live
            .iter()
            .filter(|l| l.file.content_type() == DataContentType::Data)
            .filter(|l| match merge_removed {
                Some(set) => set.contains(l.file.file_path()),
                None => {
                    owned_by(l.file.file_path(), &tag)
                        || partition
                            .as_ref()
                            .is_some_and(|(_, v)| in_partition(&l.file, v))
                }
            })
            .collect();
        let seq_no = m.next_sequence_number();
        let snapshot_id = new_snapshot_id()?;
        let parent = m.current_snapshot().cloned();
        let schema = m.current_schema().clone();
        let spec = m.default_partition_spec().as_ref().clone();
        let meta_dir = format!("{}/metadata", m.location().trim_end_matches('/'));
        let uuid = &self.attempt[..16];
        let mut manifests: Vec<ManifestFile> = Vec::new();
        // The added files.
        if !files.is_empty() {
            let out = self
                .io
                .new_output(format!("{meta_dir}/idem-{uuid}-{snapshot_id}-m0.avro"))
                .map_err(ice_err("writing a manifest"))?;
            let mut w =
                ManifestWriterBuilder::new(out, Some(snapshot_id), schema.clone(), spec.clone())
                    .build_v2_data();
            for f in files {
                w.add_file(f.clone(), seq_no)
                    .map_err(ice_err("writing a manifest"))?;
            }
            manifests.push(
                w.write_manifest_file()
                    .await
                    .map_err(ice_err("writing a manifest"))?,
            );
        }
        // Earlier manifests: kept as they are, or rewritten with the
        // removed files marked deleted.
        if let Some(parent) = &parent {
            let removed_in: std::collections::HashSet<&str> =
                removed.iter().map(|l| l.manifest.as_str()).collect();
            let gone: std::collections::HashSet<&str> =
                removed.iter().map(|l| l.file.file_path()).collect();
            let list = self.manifest_list(parent.manifest_list()).await?;
            for (i, mf) in list.entries().iter().enumerate() {
                if !removed_in.contains(mf.manifest_path.as_str()) {
                    manifests.push(mf.clone());
                    continue;
                }
                let old = mf
                    .load_manifest(&self.io)
                    .await
                    .map_err(ice_err("reading a manifest"))?;
                let mspec = m
                    .partition_spec_by_id(mf.partition_spec_id)
                    .map(|s| s.as_ref().clone())
                    .unwrap_or_else(|| spec.clone());
                let out = self
                    .io
                    .new_output(format!(
                        "{meta_dir}/idem-{uuid}-{snapshot_id}-m{}.avro",
                        i + 1
                    ))
                    .map_err(ice_err("writing a manifest"))?;
                let builder =
                    ManifestWriterBuilder::new(out, Some(snapshot_id), schema.clone(), mspec);
                let mut w = match mf.content {
                    ManifestContentType::Data => builder.build_v2_data(),
                    ManifestContentType::Deletes => builder.build_v2_deletes(),
                };
                for e in old.entries() {
                    if !e.is_alive() {
                        continue;
                    }
                    let seq = e.sequence_number().unwrap_or(0);
                    let fseq = e.file_sequence_number.or(e.sequence_number());
                    if gone.contains(e.data_file().file_path()) {
                        w.add_delete_file(e.data_file().clone(), seq, fseq)
                    } else {
                        w.add_existing_file(
                            e.data_file().clone(),
                            e.snapshot_id().unwrap_or(parent.snapshot_id()),
                            seq,
                            fseq,
                        )
                    }
                    .map_err(ice_err("rewriting a manifest"))?;
                }
                manifests.push(
                    w.write_manifest_file()
                        .await
                        .map_err(ice_err("rewriting a manifest"))?,
                );
            }
        }
        let list_path = format!("{meta_dir}/snap-{snapshot_id}-1-idem-{uuid}.avro");
        let writer = self
            .io
            .new_output(&list_path)
            .map_err(ice_err("writing the manifest list"))?
            .writer()
            .await
            .map_err(ice_err("writing the manifest list"))?;
        let mut lw = ManifestListWriter::v2(
            writer,
            snapshot_id,
            parent.as_ref().map(|p| p.snapshot_id()),
            seq_no,
        );
        lw.add_manifests(manifests.into_iter())
            .map_err(ice_err("writing the manifest list"))?;
        lw.close()
            .await
            .map_err(ice_err("writing the manifest list"))?;

        // The summary: what engines show, and idem's fields.
        let added_rows: u64 = files.iter().map(|f| f.record_count()).sum();
        let deleted_rows: u64 = removed.iter().map(|l| l.file.record_count()).sum();
        let live_data: Vec<&Live> = live
            .iter()
            .filter(|l| l.file.content_type() == DataContentType::Data)
            .collect();
        let total_files = live_data.len() - removed.len() + files.len();
        let total_rows: u64 = live_data.iter().map(|l| l.file.record_count()).sum::<u64>()
            - deleted_rows
            + added_rows;
        let seq = self.record(req.slice).map(|r| r.seq).unwrap_or(0) + 1;
        let mut props: HashMap<String, String> = HashMap::from([
            ("added-data-files".into(), files.len().to_string()),
            ("added-records".into(), added_rows.to_string()),
            ("deleted-data-files".into(), removed.len().to_string()),
            ("deleted-records".into(), deleted_rows.to_string()),
            ("total-data-files".into(), total_files.to_string()),
            ("total-records".into(), total_rows.to_string()),
            (
                "total-delete-files".into(),
                (live.len() - live_data.len()).to_string(),
            ),
            (
                "total-files-size".into(),
                (live
                    .iter()
                    .map(|l| l.file.file_size_in_bytes())
                    .sum::<u64>()
                    - removed
                        .iter()
                        .map(|l| l.file.file_size_in_bytes())
                        .sum::<u64>()
                    + files.iter().map(|f| f.file_size_in_bytes()).sum::<u64>())
                .to_string(),
            ),
            ("idem.slice".into(), req.slice.to_string()),
            ("idem.seq".into(), seq.to_string()),
            ("idem.runKey".into(), req.run_key.as_str().to_string()),
            (
                "idem.manifestDigest".into(),
                req.manifest_digest.as_str().to_string(),
            ),
            (
                "idem.outputDigest".into(),
                req.output_digest.as_str().to_string(),
            ),
            ("idem.mode".into(), req.mode.name().to_string()),
            ("idem.attempt".into(), self.attempt.clone()),
            ("idem.files".into(), files.len().to_string()),
        ]);
        if let Some((c, v)) = &partition {
            props.insert("idem.partition".into(), format!("{c}={v}"));
        }
        if let Some(s) = &req.schema {
            let names: Vec<&str> = s.fields().iter().map(|f| f.name().as_str()).collect();
            props.insert(
                "idem.outputColumns".into(),
                serde_json::to_string(&names).unwrap_or_default(),
            );
        }
        let operation = if removed.is_empty() {
            Operation::Append
        } else {
            Operation::Overwrite
        };
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0)
            .max(m.last_updated_ms() + 1);
        let snapshot = Snapshot::builder()
            .with_snapshot_id(snapshot_id)
            .with_parent_snapshot_id(parent.as_ref().map(|p| p.snapshot_id()))
            .with_sequence_number(seq_no)
            .with_timestamp_ms(now)
            .with_manifest_list(list_path.clone())
            .with_summary(Summary {
                operation,
                additional_properties: props,
            })
            .with_schema_id(schema.schema_id())
            .build();
        let mut names: Vec<String> = files
            .iter()
            .map(|f| file_name(f.file_path()).to_string())
            .collect();
        let record = SliceRecord {
            seq,
            output: req.output_digest.as_str().to_string(),
            version: seq_no as u64,
            files: files.len(),
            names: names_digest(&mut names),
            attempt: self.attempt.clone(),
            partition: partition.as_ref().map(|(c, v)| format!("{c}={v}")),
            run_key: req.run_key.as_str().to_string(),
            manifest: req.manifest_digest.as_str().to_string(),
            columns: req
                .schema
                .as_ref()
                .map(|s| s.fields().iter().map(|f| f.name().to_string()).collect()),
            snapshot: snapshot_id,
            schema: Some(schema.schema_id()),
        };
        // A slice owns the partition of its latest commit only (a --files
        // slice may move): the one it held before is given up.
        let released: Vec<String> = self
            .record(req.slice)
            .and_then(|r| r.partition)
            .filter(|p| Some(p) != record.partition.as_ref())
            .map(|p| format!("{PARTITION_PROP}{p}"))
            .filter(|k| m.properties().get(k).map(String::as_str) == Some(req.slice))
            .into_iter()
            .collect();
        let mut table_props = HashMap::from([(
            format!("{SLICE_PROP}{}", req.slice),
            serde_json::to_string(&record).unwrap_or_default(),
        )]);
        if let Some((c, v)) = &partition {
            table_props.insert(format!("{PARTITION_PROP}{c}={v}"), req.slice.to_string());
        }
        let next = m
            .clone()
            .into_builder(base_path.map(str::to_string))
            // `main` keeps whatever retention it has.
            .set_branch_snapshot(snapshot, "main")
            .map_err(ice_err("adding the snapshot"))?
            .set_properties(table_props)
            .map_err(ice_err("recording the slice"))?
            .remove_properties(&released)
            .map_err(ice_err("recording the slice"))?
            .build()
            .map_err(ice_err("building the table metadata"))?
            .metadata;
        let next_path = match base_path {
            Some(b) => b
                .parse::<MetadataLocation>()
                .map_err(ice_err("naming the next metadata file"))?
                .with_next_version()
                .with_new_metadata(&next),
            None => MetadataLocation::new_with_metadata(next.location(), &next),
        };
        next.write_to(&self.io, &next_path)
            .await
            .map_err(ice_err("writing the table metadata"))?;
        // Data, manifests and metadata are written, the catalog is not: a
        // kill here must leave the table as it was.
        fault_point("before-log-write");
        let landed = match base_path {
            Some(b) => catalog::swap(&self.loc, b, &next_path.to_string())?,
            None => catalog::create(&self.loc, &next_path.to_string())?,
        };
        if !landed {
            let _ = self.io.delete(next_path.to_string()).await;
            return Err(TableError::Conflict(format!(
                "another writer committed to {} since {}",
                self.location,
                base_path.unwrap_or("it did not exist")
            )));
        }
        *swapped = true;
        super::lost_response()?;
        self.refresh().await?;
        Ok(seq_no as u64)
    }
}

/// A table location as written in Iceberg metadata (`file:///raw path`,
/// unencoded, or a URL) as a folder URL.
fn folder_url(location: &str) -> Result<Url, String> {
    let url = match location.strip_prefix("file://") {
        Some(path) => {
            Url::from_directory_path(path).map_err(|_| "not an absolute path".to_string())?
        }
        None if location.starts_with('/') => {
            Url::from_directory_path(location).map_err(|_| "not an absolute path".to_string())?
        }
        None => Url::parse(location).map_err(|e| e.to_string())?,
    };
    Ok(crate::storage::as_dir(&url))
}

/// A table's schema as Arrow (the types idem writes for each Iceberg
/// type).
fn arrow_schema_of(m: &TableMetadata) -> Result<SchemaRef, TableError> {
    arrow_fields_of(m.current_schema().as_ref())
}

/// An Iceberg schema as Arrow.
fn arrow_fields_of(schema: &iceberg::spec::Schema) -> Result<SchemaRef, TableError> {
    let fields = schema
        .as_struct()
        .fields()
        .iter()
        .map(|f| {
            let t = match f.field_type.as_ref() {
                Type::Primitive(p) => arrow_type(p),
                _ => None,
            }
            .ok_or_else(|| {
                TableError::Output(format!(
                    "the table's column `{}` is {}, which idem does not write",
                    f.name, f.field_type
                ))
            })?;
            Ok(Field::new(&f.name, t, !f.required))
        })
        .collect::<Result<Vec<_>, TableError>>()?;
    Ok(Arc::new(Schema::new(fields)))
}

/// The one data file a position delete file applies to, when it says
/// (v3's `referenced_data_file`, else equal bounds on its `file_path`
/// column, field id 2147483546).
fn deleted_file(f: &DataFile) -> Option<String> {
    if f.content_type() != DataContentType::PositionDeletes {
        return None;
    }
    if let Some(p) = f.referenced_data_file() {
        return Some(p);
    }
    const FILE_PATH: i32 = 2147483546;
    let text = |d: Option<&iceberg::spec::Datum>| match d.map(|d| d.literal()) {
        Some(iceberg::spec::PrimitiveLiteral::String(s)) => Some(s.clone()),
        _ => None,
    };
    let (lo, hi) = (
        text(f.lower_bounds().get(&FILE_PATH)),
        text(f.upper_bounds().get(&FILE_PATH)),
    );
    lo.filter(|lo| Some(lo) == hi.as_ref())
}

/// Whether a data file lies in the identity partition `value` (the
/// table has one partition field).
fn in_partition(f: &DataFile, value: &str) -> bool {
    let p = f.partition();
    p.fields().len() == 1
        && matches!(
            p.fields().first(),
            Some(Some(Literal::Primitive(iceberg::spec::PrimitiveLiteral::String(s)))) if s == value
        )
}

fn new_snapshot_id() -> Result<i64, TableError> {
    let mut b = [0u8; 8];
    getrandom::fill(&mut b).map_err(|e| TableError::Output(format!("no randomness: {e}")))?;
    Ok((i64::from_le_bytes(b) & i64::MAX).max(1))
}

/// The Iceberg type an Arrow type is stored as, exactly.
fn iceberg_type(t: &DataType) -> Option<PrimitiveType> {
    Some(match t {
        DataType::Boolean => PrimitiveType::Boolean,
        DataType::Int32 => PrimitiveType::Int,
        DataType::Int64 => PrimitiveType::Long,
        DataType::Float32 => PrimitiveType::Float,
        DataType::Float64 => PrimitiveType::Double,
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => PrimitiveType::String,
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => PrimitiveType::Binary,
        DataType::Date32 => PrimitiveType::Date,
        DataType::Timestamp(TimeUnit::Microsecond, None) => PrimitiveType::Timestamp,
        // One spelling of UTC, so the table's type reads back as the
        // output's (the digest covers the type).
        DataType::Timestamp(TimeUnit::Microsecond, Some(tz)) if tz.as_ref() == "UTC" => {
            PrimitiveType::Timestamptz
        }
        DataType::Decimal128(p, s) if *s >= 0 && *p <= 38 => PrimitiveType::Decimal {
            precision: *p as u32,
            scale: *s as u32,
        },
        _ => return None,
    })
}

/// The Arrow type idem writes an Iceberg type as.
fn arrow_type(t: &PrimitiveType) -> Option<DataType> {
    Some(match t {
        PrimitiveType::Boolean => DataType::Boolean,
        PrimitiveType::Int => DataType::Int32,
        PrimitiveType::Long => DataType::Int64,
        PrimitiveType::Float => DataType::Float32,
        PrimitiveType::Double => DataType::Float64,
        PrimitiveType::String => DataType::Utf8,
        PrimitiveType::Binary => DataType::Binary,
        PrimitiveType::Date => DataType::Date32,
        PrimitiveType::Timestamp => DataType::Timestamp(TimeUnit::Microsecond, None),
        PrimitiveType::Timestamptz => {
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
        }
        PrimitiveType::Decimal { precision, scale } => {
            DataType::Decimal128(*precision as u8, *scale as i8)
        }
        _ => return None,
    })
}

/// The output schema with dictionaries replaced by their value types.
fn plain_schema(s: &Schema) -> Schema {
    Schema::new(
        s.fields()
            .iter()
            .map(|f| match f.data_type() {
                DataType::Dictionary(_, v) => f.as_ref().clone().with_data_type(v.as_ref().clone()),
                _ => f.as_ref().clone(),
            })
            .collect::<Vec<_>>(),
    )
}

/// The table's Arrow schema with each column's Iceberg field id (what
/// Iceberg readers match columns by).
fn with_field_ids(table: &Schema, ice: &iceberg::spec::Schema) -> SchemaRef {
    Arc::new(Schema::new(
        table
            .fields()
            .iter()
            .map(|f| {
                let id = ice.field_by_name(f.name()).map(|n| n.id).unwrap_or(0);
                f.as_ref().clone().with_metadata(HashMap::from([(
                    parquet::arrow::PARQUET_FIELD_ID_META_KEY.to_string(),
                    id.to_string(),
                )]))
            })
            .collect::<Vec<_>>(),
    ))
}

/// A batch in the table's column order and types (cast where the type
/// family matches: dictionaries and large/view strings), or an error.
fn conform(batch: RecordBatch, schema: &SchemaRef) -> Result<RecordBatch, TableError> {
    let mut cols: Vec<ArrayRef> = Vec::with_capacity(schema.fields().len());
    for f in schema.fields() {
        let col = batch.column_by_name(f.name()).ok_or_else(|| {
            TableError::Output(format!(
                "the output has no column `{}`, which the table has",
                f.name()
            ))
        })?;
        let col = if col.data_type() == f.data_type() {
            col.clone()
        } else {
            arrow::compute::cast(col, f.data_type())
                .map_err(|e| TableError::Output(format!("column `{}`: {e}", f.name())))?
        };
        cols.push(col);
    }
    RecordBatch::try_new(schema.clone(), cols).map_err(|e| TableError::Output(e.to_string()))
}

/// The staged output's batches, in order.
fn staged_batches(
    staged: &[PathBuf],
) -> impl Iterator<Item = Result<RecordBatch, TableError>> + '_ {
    staged.iter().flat_map(|path| {
        let err =
            move |e: &dyn std::fmt::Display| TableError::Staged(format!("{}: {e}", path.display()));
        let reader = std::fs::File::open(path)
            .map_err(|e| err(&e))
            .and_then(|f| {
                ParquetRecordBatchReaderBuilder::try_new(f)
                    .and_then(|b| b.with_batch_size(8192).build())
                    .map_err(|e| err(&e))
            });
        let (ok, first_err) = match reader {
            Ok(r) => (Some(r), None),
            Err(e) => (None, Some(Err(e))),
        };
        first_err.into_iter().chain(
            ok.into_iter()
                .flatten()
                .map(move |b| b.map_err(|e| err(&e))),
        )
    })
}

/// A batch read back from a data file, without the field-id metadata
/// (the output never had it).
fn strip_field_ids(batch: RecordBatch) -> RecordBatch {
    let schema = Schema::new(
        batch
            .schema()
            .fields()
            .iter()
            .map(|f| f.as_ref().clone().with_metadata(HashMap::new()))
            .collect::<Vec<_>>(),
    );
    RecordBatch::try_new(Arc::new(schema), batch.columns().to_vec()).unwrap_or(batch)
}

#[cfg(test)]
mod tests {
    use super::*;
    use iceberg::spec::{DataFileBuilder, DataFileFormat};

    #[test]
    fn locations_parse_with_defaults_and_options() {
        let l = Location::parse("iceberg+sqlite:///tmp/x/cat.db#sales.orders").unwrap();
        assert_eq!(l.db, PathBuf::from("/tmp/x/cat.db"));
        assert_eq!(l.catalog, "idem");
        assert_eq!((l.namespace.as_str(), l.name.as_str()), ("sales", "orders"));
        assert_eq!(
            l.table_url.as_str(),
            "file:///tmp/x/warehouse/sales.db/orders/"
        );
        let l =
            Location::parse("iceberg+sqlite:///tmp/x/cat.db?warehouse=/data/wh&catalog=prod#a.b.t")
                .unwrap();
        assert_eq!(l.catalog, "prod");
        assert_eq!(l.namespace, "a.b");
        assert_eq!(l.table_url.as_str(), "file:///data/wh/a.b.db/t/");
        // The canonical spelling parses back to the same table.
        let c = l.canonical();
        assert_eq!(
            c,
            "iceberg+sqlite:///tmp/x/cat.db?warehouse=file:///data/wh/&catalog=prod#a.b.t"
        );
        let again = Location::parse(&c).unwrap();
        assert_eq!(again.canonical(), c);
        assert_eq!(again.table_url, l.table_url);
        for bad in [
            "iceberg+sqlite:///tmp/cat.db",
            "iceberg+sqlite:///tmp/cat.db#t",
            "iceberg+rest://host#a.b",
            "iceberg+sqlite:///tmp/cat.db?color=red#a.b",
            "iceberg+sqlite:///tmp/cat.db#a.b c",
        ] {
            let e = Location::parse(bad).unwrap_err().to_string();
            assert!(
                e.contains("iceberg+sqlite://CATALOG.db#NAMESPACE.TABLE"),
                "{bad}: {e}"
            );
        }
    }

    fn file(path: &str, content: DataContentType) -> DataFile {
        DataFileBuilder::default()
            .content(content)
            .file_path(path.to_string())
            .file_format(DataFileFormat::Parquet)
            .record_count(1)
            .file_size_in_bytes(1)
            .build()
            .unwrap()
    }

    fn position_delete(of: &str) -> DataFile {
        let d = iceberg::spec::Datum::string(of);
        DataFileBuilder::default()
            .content(DataContentType::PositionDeletes)
            .file_path("file:///w/t/data/del.parquet".to_string())
            .file_format(DataFileFormat::Parquet)
            .record_count(1)
            .file_size_in_bytes(1)
            .lower_bounds(HashMap::from([(2147483546, d.clone())]))
            .upper_bounds(HashMap::from([(2147483546, d)]))
            .build()
            .unwrap()
    }

    #[test]
    fn a_delete_file_counts_against_the_slices_it_can_reach() {
        let (a, b) = ("2026-10-01", "2026-10-02");
        let path = |s: &str| format!("file:///w/t/data/idem-{}-00000-n.parquet", slice_tag(s));
        let rec = |s: &str| {
            let mut names = vec![file_name(&path(s)).to_string()];
            SliceRecord {
                seq: 1,
                output: "sha256:x".into(),
                version: 2,
                files: 1,
                names: names_digest(&mut names),
                attempt: String::new(),
                partition: None,
                run_key: String::new(),
                manifest: String::new(),
                columns: None,
                snapshot: 0,
                schema: None,
            }
        };
        let live = |extra: Vec<(DataFile, i64)>| {
            let mut v: Vec<Live> = [a, b]
                .iter()
                .map(|s| Live {
                    file: file(&path(s), DataContentType::Data),
                    seq: 1,
                    manifest: "m".into(),
                })
                .collect();
            v.extend(extra.into_iter().map(|(file, seq)| Live {
                file,
                seq,
                manifest: "d".into(),
            }));
            v
        };
        // Intact.
        let t = live(vec![]);
        assert_eq!(Iceberg::drift(&t, a, &rec(a), None), None);
        // A position delete of one of a's files, after a's commit: a only.
        let t = live(vec![(position_delete(&path(a)), 3)]);
        assert!(
            Iceberg::drift(&t, a, &rec(a), None)
                .unwrap()
                .contains("delete file")
        );
        assert_eq!(Iceberg::drift(&t, b, &rec(b), None), None);
        // The same delete from before the commit does not apply.
        let t = live(vec![(position_delete(&path(a)), 2)]);
        assert_eq!(Iceberg::drift(&t, a, &rec(a), None), None);
        // An equality delete may reach every slice.
        let eq = file(
            "file:///w/t/data/eq.parquet",
            DataContentType::EqualityDeletes,
        );
        let t = live(vec![(eq, 3)]);
        assert!(Iceberg::drift(&t, a, &rec(a), None).is_some());
        assert!(Iceberg::drift(&t, b, &rec(b), None).is_some());
        // A removed or added file of the slice's.
        let mut t = live(vec![]);
        t.remove(0);
        assert!(
            Iceberg::drift(&t, a, &rec(a), None)
                .unwrap()
                .contains("0 of")
        );
        let mut t = live(vec![]);
        t.push(Live {
            file: file(&path(a).replace("00000", "00001"), DataContentType::Data),
            seq: 3,
            manifest: "m".into(),
        });
        assert!(Iceberg::drift(&t, a, &rec(a), None).is_some());
    }

    #[test]
    fn slice_files_are_told_apart_by_name() {
        let tag = slice_tag("2026-10-01");
        let mine = format!("file:///w/t/data/day=x/idem-{tag}-00003-abc.parquet");
        assert!(owned_by(&mine, &tag));
        assert_eq!(file_index(&mine), 3);
        assert!(!owned_by(&mine, &slice_tag("2026-10-02")));
        assert!(!owned_by("file:///w/t/data/00000-0-foreign.parquet", &tag));
    }
}
