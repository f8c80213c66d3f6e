//! Slices: a slice spec resolves to a sorted, pinned list of input objects
//! (path, size, sha256), then streams them as fixed-size `RecordBatch`es.
//! Memory stays O(batch), not O(slice).
//!
//! The bytes decoded are the bytes hashed: each input is read once through
//! sha256 into a private copy, checked against its pinned digest, and
//! decoded from that copy, so a rewrite after pinning cannot slip in.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::path::Path;
use std::sync::Arc;

use arrow::array::{ArrayRef, StringArray};
use arrow::compute::BatchCoalescer;
use arrow::datatypes::{Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use bytes::Bytes;
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReader,
    ParquetRecordBatchReaderBuilder,
};
use parquet::file::metadata::ParquetMetaDataReader;
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::digest::Digest;
use crate::error::Kind;
use crate::storage::{self, Hashes, Listed, StorageError, Store, as_dir};
use url::Url;

mod guard;
mod pages;

pub use guard::DEFAULT_INPUT_BATCH_BYTES;

/// Inputs up to this size are copied to memory before decoding; larger ones
/// to an anonymous temporary file (memory stays O(batch)).
pub const IN_MEMORY_MAX: u64 = 64 << 20;

/// Why a slice could not be resolved or read. Each names the object.
#[derive(Debug, Error)]
pub enum SliceError {
    /// An input path does not exist.
    #[error("input `{0}` does not exist: check the path (and the partition value)")]
    NotFound(String),
    /// The dataset has no directory (or no file) for the partition.
    #[error(
        "slice `{slice}` matches no Parquet files under {root}: there is no partition directory {slice}/, or it holds no *.parquet files (check --partition)"
    )]
    NoPartition {
        /// The slice id (`column=value`).
        slice: String,
        /// The dataset root.
        root: String,
    },
    /// The slice resolved to no objects.
    #[error("slice `{slice}` matches no Parquet files under {root}: {hint}")]
    Empty {
        /// The slice id.
        slice: String,
        /// Where we looked.
        root: String,
        /// What to check.
        hint: String,
    },
    /// An object is not readable Parquet.
    #[error(
        "input `{path}` is not a readable Parquet file ({detail}). Nothing was run or committed; fix or remove the file and rerun"
    )]
    Malformed {
        /// The object.
        path: String,
        /// The decoder's complaint.
        detail: String,
    },
    /// An object that is readable Parquet but is not read: it could take
    /// the host past its input budget, its footer contradicts itself, or a
    /// value would not survive decoding. Names the file and the fix.
    #[error("input `{path}` is refused: {why}. Nothing was run or committed; {fix}")]
    Refused {
        /// The object.
        path: String,
        /// What is wrong with it.
        why: String,
        /// What to do.
        fix: String,
    },
    /// Objects of one slice disagree on their schema.
    #[error(
        "input `{path}` has schema {got}, but `{first}` has {expected}: all files of a slice must share one schema"
    )]
    SchemaMismatch {
        /// The disagreeing object.
        path: String,
        /// The first object.
        first: String,
        /// The first object's schema.
        expected: String,
        /// This object's schema.
        got: String,
    },
    /// An object changed between resolving and reading.
    #[error(
        "input `{path}` changed while the run was reading it ({detail}); rerun to read the new version"
    )]
    Changed {
        /// The object.
        path: String,
        /// What changed.
        detail: String,
    },
    /// A partition value, slice id or input path that could name a file
    /// outside the slice root.
    #[error(
        "{what} `{value}` is refused: {reason}. It must stay inside the dataset root: no `..`, no absolute path, no NUL, not empty{segment}"
    )]
    BadName {
        /// What the name is (`partition value`, `slice id`, `input path`).
        what: String,
        /// The name, escaped for display.
        value: String,
        /// What is wrong with it.
        reason: String,
        /// Extra rule for one-segment names.
        segment: &'static str,
    },
    /// The files of one slice live on different stores.
    #[error(
        "`{first}` and `{other}` are on different stores: the files of one slice must share a bucket (or be local)"
    )]
    Stores {
        /// The first file.
        first: String,
        /// The file on another store.
        other: String,
    },
    /// The storage layer failed (names the location and the fix).
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// The target table and the input root contain one another.
    #[error(
        "the target table {table} and the input root {root} overlap (one contains the other): the run would read its own output. Put the table outside the input dataset"
    )]
    Loop {
        /// The table.
        table: String,
        /// The input root.
        root: String,
    },
    /// Any other I/O failure.
    #[error("reading `{path}`: {source}")]
    Io {
        /// The object.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
}

impl SliceError {
    /// The kind of the failure (and the CLI's exit code).
    pub fn kind(&self) -> Kind {
        match self {
            SliceError::Storage(e) => e.kind(),
            // Read errors of a pinned object, or an object that changed
            // while it was read: the store, not the command line.
            SliceError::Changed { .. } | SliceError::Io { .. } => Kind::Storage,
            SliceError::NotFound(_)
            | SliceError::NoPartition { .. }
            | SliceError::Empty { .. }
            | SliceError::Malformed { .. }
            | SliceError::SchemaMismatch { .. }
            | SliceError::BadName { .. }
            | SliceError::Stores { .. }
            | SliceError::Loop { .. }
            | SliceError::Refused { .. } => Kind::Input,
        }
    }
}

const SEGMENT_RULE: &str = ", no `/` or `\\`";

fn bad(what: &str, value: &str, reason: &str, segment: &'static str) -> SliceError {
    SliceError::BadName {
        what: what.into(),
        value: crate::text::clip_str(value, 300).escape_debug().to_string(),
        reason: reason.into(),
        segment,
    }
}

/// Longest partition value or slice id: a path segment (255 bytes on
/// common file systems).
pub const MAX_SEGMENT_BYTES: usize = 255;

/// Check a name that becomes one path segment below the dataset root (a
/// partition column or value, a slice id): not empty, no `/` or `\`, no
/// NUL, not `.` or `..`, at most [`MAX_SEGMENT_BYTES`].
pub fn validate_segment(what: &str, value: &str) -> Result<(), SliceError> {
    let reason = if value.is_empty() {
        "it is empty"
    } else if value.contains(['/', '\\']) {
        "it contains a path separator"
    } else if value.contains('\0') {
        "it contains a NUL byte"
    } else if value == ".." || value == "." {
        "it is a relative path component"
    } else if value.len() > MAX_SEGMENT_BYTES {
        // A path segment longer than file systems allow, and a value the
        // commit repeats in every output row (partition and owner columns).
        "it is longer than 255 bytes"
    } else {
        return Ok(());
    };
    Err(bad(what, value, reason, SEGMENT_RULE))
}

/// Check an input path as recorded in a manifest (relative to the slice
/// root, `/`-separated): not empty, not absolute, no `..` component (with
/// either separator), no NUL. `verify` refuses a manifest naming such a path.
pub fn validate_relative_path(path: &str) -> Result<(), SliceError> {
    let b = path.as_bytes();
    let drive = b.len() >= 2 && b[0].is_ascii_alphabetic() && b[1] == b':';
    let reason = if path.is_empty() {
        "it is empty"
    } else if path.contains('\0') {
        "it contains a NUL byte"
    } else if path.starts_with(['/', '\\']) || drive || Path::new(path).is_absolute() {
        "it is an absolute path"
    } else if path.split(['/', '\\']).any(|c| c == "..") {
        "it has a `..` component"
    } else {
        return Ok(());
    };
    Err(bad("input path", path, reason, ""))
}

/// Refuse a target table and an input root that contain one another
/// (either way): the run would read what it writes. Local paths are
/// compared canonically (symlinks resolved); the table need not exist yet.
pub fn check_not_inside(table: &Url, root: &Url) -> Result<(), SliceError> {
    let (t, r) = (as_dir(table), as_dir(root));
    if storage::contains(&r, &t) || storage::contains(&t, &r) {
        return Err(SliceError::Loop {
            table: table.to_string(),
            root: root.to_string(),
        });
    }
    Ok(())
}

fn loc(s: &impl AsRef<OsStr>) -> String {
    s.as_ref().to_string_lossy().into_owned()
}

/// The location of an object that must exist.
fn existing(f: &impl AsRef<OsStr>) -> Result<Url, SliceError> {
    let (store, name, url) = Store::of_file(&loc(f))?;
    if name.is_empty() || store.size(&name)?.is_none() {
        return Err(SliceError::NotFound(loc(f)));
    }
    Ok(url)
}

/// The name of `url` relative to the directory `root`, `/`-separated and
/// percent-decoded (the raw object name); `None` when it is not below
/// `root`.
fn rel_of(root: &Url, url: &Url) -> Option<String> {
    let root = as_dir(root);
    if !storage::contains(&root, url) {
        return None;
    }
    let skip = root.path().split('/').filter(|s| !s.is_empty()).count();
    let mut parts = Vec::new();
    for s in url.path().split('/').filter(|s| !s.is_empty()).skip(skip) {
        parts.push(storage::decode_segment(s).ok()?);
    }
    (!parts.is_empty()).then(|| parts.join("/"))
}

/// The default slice id of an explicit file list: a digest of the sorted,
/// canonical locations, so `d/a.parquet`, `./d/a.parquet` and the same
/// file named from another directory give one id, and equal relative names
/// in different directories do not.
pub fn files_id(files: &[impl AsRef<OsStr>]) -> Result<String, SliceError> {
    let mut abs = Vec::with_capacity(files.len());
    for f in files {
        let url = existing(f)?;
        abs.push(match url.to_file_path() {
            Ok(p) if url.scheme() == "file" => p.as_os_str().as_encoded_bytes().to_vec(),
            _ => url.as_str().as_bytes().to_vec(),
        });
    }
    abs.sort();
    abs.dedup();
    let mut material = Vec::new();
    for p in &abs {
        material.extend_from_slice(p);
        material.push(0);
    }
    Ok(format!(
        "files-{}",
        &Digest::of_bytes(&material).hex()[..16]
    ))
}

/// One pinned input object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputObject {
    /// Path relative to the slice root (the name recorded in manifests).
    pub path: String,
    /// Size in bytes.
    pub size: u64,
    /// sha256 of the bytes.
    pub digest: Digest,
}

/// A resolved slice: the exact objects a run reads, in the order it reads them.
#[derive(Debug, Clone)]
pub struct ResolvedSlice {
    /// The slice's name, e.g. `date=2026-10-01` or `files`.
    pub id: String,
    /// Where relative object paths start (a directory URL on any store).
    pub root: Url,
    store: Store,
    /// The objects, sorted by path.
    pub inputs: Vec<InputObject>,
    /// Entries of a partition directory that were not read, each with why
    /// (not Parquet, a symlink leaving the root...), for the caller to show.
    /// Hidden and `_` files (writer bookkeeping) are left out silently.
    pub skipped: Vec<(String, String)>,
    /// Columns whose values live outside the files (a Delta table's
    /// partition columns, kept in its log): appended to every batch, each
    /// input's value from [`ResolvedSlice::constants`].
    pub constant_fields: Vec<Field>,
    /// Per input path, the values of [`ResolvedSlice::constant_fields`], in
    /// that order (`None` = null).
    pub constants: BTreeMap<String, Vec<Option<String>>>,
    /// Keep only the rows whose text column equals the value (a Delta
    /// merge table's rows of one slice): applied as each file is decoded.
    pub row_filter: Option<(String, String)>,
    /// The schema of a slice with no objects (an upstream slice whose
    /// committed output is empty): read as zero rows of it.
    pub empty_schema: Option<SchemaRef>,
    /// How the private copies are proved.
    pins: Pins,
}

/// How a slice's inputs are hashed.
#[derive(Debug, Clone)]
enum Pins {
    /// Before anything runs, which a run key (and so a memo check) needs.
    /// Per input path, the sha256 and the BLAKE3 of the bytes pinned: a
    /// private copy is checked by BLAKE3 (~4x cheaper than sha256 again).
    /// An input changed by the caller since is checked by sha256.
    Before(Arc<BTreeMap<String, (Digest, blake3::Hash)>>),
    /// As they are read ([`SliceReader::of_files`]): each private copy's
    /// sha256 is taken on a thread of its own while the copy is decoded,
    /// and is what [`InputsRead`] reports. The inputs' `digest`s are not
    /// known (and never read) in this mode.
    AsRead,
}

/// How one private copy is proved.
#[derive(Debug, Clone, Copy)]
enum Check {
    /// Against the BLAKE3 pinning took.
    Blake3(blake3::Hash),
    /// Against the input's sha256 (an input changed by the caller).
    Sha256,
    /// Not here: hashed while it is decoded ([`Pins::AsRead`]).
    AsRead,
}

impl Check {
    /// When the input's size was taken, in an error's words.
    fn when(self) -> &'static str {
        match self {
            Check::AsRead => "listed",
            _ => "pinned",
        }
    }
}

impl ResolvedSlice {
    /// Pin an explicit list of files (paths or URLs, all on one store):
    /// names are taken relative to their common parent, sorted, and hashed.
    pub fn from_files(id: &str, files: &[impl AsRef<OsStr>]) -> Result<Self, SliceError> {
        let (store, rels) = Self::locate_files(id, files)?;
        Self::pin(id, store, rels, Vec::new())
    }

    /// The store `files` share and their names below their common parent.
    fn locate_files(
        id: &str,
        files: &[impl AsRef<OsStr>],
    ) -> Result<(Store, Vec<String>), SliceError> {
        validate_segment("slice id", id)?;
        let mut urls = Vec::with_capacity(files.len());
        for f in files {
            urls.push(existing(f)?);
        }
        let Some(first) = urls.first() else {
            return Err(SliceError::Empty {
                slice: id.to_string(),
                root: "(no paths)".into(),
                hint: "pass at least one --input file".into(),
            });
        };
        let mut root = first
            .join("./")
            .map_err(|e| SliceError::NotFound(e.to_string()))?;
        for u in &urls[1..] {
            if !storage::same_store(u, &root) {
                return Err(SliceError::Stores {
                    first: first.to_string(),
                    other: u.to_string(),
                });
            }
            while !storage::contains(&root, u) {
                let Ok(up) = root.join("../") else { break };
                if up == root {
                    break;
                }
                root = up;
            }
        }
        let store = Store::open(&root)?;
        let mut rels = Vec::with_capacity(urls.len());
        for u in &urls {
            rels.push(rel_of(&root, u).ok_or_else(|| {
                bad(
                    "input path",
                    u.as_str(),
                    "it is not below the files' common directory",
                    "",
                )
            })?);
        }
        Ok((store, rels))
    }

    /// Pin the hive partition `key=value` under `root` (a path or URL):
    /// every Parquet object below `root/key=value/`, recursively, sorted.
    /// An object is Parquet when its name ends in `.parquet` (a broken one
    /// then fails the read) or when it starts and ends with `PAR1` (Hive's
    /// `part-00000`). Locally, symlinks are followed only to targets inside
    /// `root`. Whatever else is there is listed in [`ResolvedSlice::skipped`].
    pub fn from_partition(
        root: impl AsRef<OsStr>,
        key: &str,
        value: &str,
    ) -> Result<Self, SliceError> {
        validate_segment("partition column", key)?;
        validate_segment("partition value", value)?;
        let id = format!("{key}={value}");
        let store = Store::at(&loc(&root))?;
        let no_dir = || SliceError::NoPartition {
            slice: id.clone(),
            root: store.url().to_string(),
        };
        let listing = match store.list(&id) {
            Ok(l) => l,
            Err(StorageError::NotFound(u)) if u == store.url().as_str() => {
                return Err(SliceError::NotFound(loc(&root)));
            }
            Err(StorageError::NotFound(_)) => return Err(no_dir()),
            Err(e) => return Err(e.into()),
        };
        if listing.files.is_empty() && listing.skipped.is_empty() {
            return Err(no_dir());
        }
        let mut skipped = listing.skipped;
        let mut files = Vec::new();
        for f in listing.files {
            if f.rel.ends_with(".parquet") || has_parquet_magic(&store, &f)? {
                files.push(f.rel);
            } else {
                skipped.push((f.rel, "not Parquet (no PAR1 magic at start and end)".into()));
            }
        }
        skipped.sort();
        for (path, why) in &skipped {
            tracing::warn!("slice {id}: skipped {path}: {why}");
        }
        if files.is_empty() {
            let mut hint = "the partition directory holds no *.parquet files".to_string();
            if !skipped.is_empty() {
                let list: Vec<String> = skipped
                    .iter()
                    .map(|(p, why)| format!("{p} ({why})"))
                    .collect();
                hint.push_str(&format!("; skipped: {}", list.join(", ")));
            }
            return Err(SliceError::Empty {
                slice: id,
                root: store.url().to_string(),
                hint,
            });
        }
        Self::pin(&id, store, files, skipped)
    }

    /// Pin `files` (locations below `root`).
    pub fn from_listed(
        id: &str,
        root: impl AsRef<OsStr>,
        files: Vec<impl AsRef<OsStr>>,
    ) -> Result<Self, SliceError> {
        validate_segment("slice id", id)?;
        let root = as_dir(&storage::locate(&loc(&root))?);
        let mut rels = Vec::with_capacity(files.len());
        for f in &files {
            let url = storage::locate(&loc(f))?;
            rels.push(
                rel_of(&root, &url).ok_or_else(|| {
                    bad("input path", &loc(f), "it is outside the slice root", "")
                })?,
            );
        }
        Self::from_names(id, &root, rels)
    }

    /// A slice of no objects that reads as zero rows of `schema` (a Delta
    /// slice whose committed output was empty).
    pub fn empty(id: &str, root: &Url, schema: SchemaRef) -> Result<Self, SliceError> {
        validate_segment("slice id", id)?;
        let mut slice = Self::pin(id, Store::open(root)?, Vec::new(), Vec::new())?;
        slice.empty_schema = Some(schema);
        Ok(slice)
    }

    /// Pin the objects named `names` (relative to the directory `root`,
    /// taken as they are: no symlink or URL resolution), e.g. the data
    /// files of a Delta table version or the inputs a manifest records.
    pub fn from_names(id: &str, root: &Url, names: Vec<String>) -> Result<Self, SliceError> {
        validate_segment("slice id", id)?;
        if names.is_empty() {
            return Err(SliceError::Empty {
                slice: id.to_string(),
                root: root.to_string(),
                hint: "the table version (and partition filter) selects no data files".into(),
            });
        }
        Self::pin(id, Store::open(root)?, names, Vec::new())
    }

    fn pin(
        id: &str,
        store: Store,
        files: Vec<String>,
        skipped: Vec<(String, String)>,
    ) -> Result<Self, SliceError> {
        let files = read_order(files)?;
        let progress = crate::progress::bytes("hashing", None);
        let hashed = hash_all(&store, &files, &progress);
        progress.finish_with_message("hashed");
        let mut inputs = Vec::with_capacity(files.len());
        let mut checks = BTreeMap::new();
        for (rel, r) in files.into_iter().zip(hashed) {
            let Pinned {
                digest,
                check,
                size,
            } = r?;
            checks.insert(rel.clone(), (digest.clone(), check));
            inputs.push(InputObject {
                path: rel,
                size,
                digest,
            });
        }
        Ok(Self::of(
            id,
            store,
            inputs,
            skipped,
            Pins::Before(Arc::new(checks)),
        ))
    }

    /// `files` listed with their sizes, not hashed: see [`Pins::AsRead`].
    fn listed(id: &str, files: &[impl AsRef<OsStr>]) -> Result<Self, SliceError> {
        let (store, rels) = Self::locate_files(id, files)?;
        let mut inputs = Vec::with_capacity(rels.len());
        for rel in read_order(rels)? {
            let size = store
                .size(&rel)?
                .ok_or_else(|| SliceError::NotFound(store.url_of(&rel).to_string()))?;
            inputs.push(InputObject {
                path: rel,
                size,
                // Never read in this mode: the digest is taken as the copy
                // is decoded, and reported by `InputsRead`.
                digest: Digest::of_bytes(b""),
            });
        }
        Ok(Self::of(id, store, inputs, Vec::new(), Pins::AsRead))
    }

    /// A slice of `inputs` with nothing added to their rows.
    fn of(
        id: &str,
        store: Store,
        inputs: Vec<InputObject>,
        skipped: Vec<(String, String)>,
        pins: Pins,
    ) -> Self {
        ResolvedSlice {
            id: id.to_string(),
            root: store.url().clone(),
            store,
            inputs,
            skipped,
            constant_fields: Vec::new(),
            constants: BTreeMap::new(),
            row_filter: None,
            empty_schema: None,
            pins,
        }
    }

    /// Give every input constant columns (a Delta table's partition
    /// values): `values` maps an input's name to one value per field.
    pub fn with_constants(
        mut self,
        fields: Vec<Field>,
        values: Vec<(String, Vec<Option<String>>)>,
    ) -> Self {
        for (rel, vals) in values {
            self.constants.insert(rel, vals);
        }
        self.constant_fields = fields;
        self
    }

    /// Keep only the rows whose text `column` equals `value`.
    pub fn with_row_filter(mut self, column: &str, value: &str) -> Self {
        self.row_filter = Some((column.to_string(), value.to_string()));
        self
    }

    /// `batch` without the rows [`ResolvedSlice::row_filter`] drops, and
    /// without its column.
    fn filter_rows(&self, path: &str, batch: RecordBatch) -> Result<RecordBatch, SliceError> {
        let Some((column, value)) = &self.row_filter else {
            return Ok(batch);
        };
        let bad = |detail: String| SliceError::Malformed {
            path: path.to_string(),
            detail,
        };
        let col = batch
            .column_by_name(column)
            .ok_or_else(|| bad(format!("no column `{column}` to select slice `{value}` by")))?;
        let text = arrow::compute::cast(col, &arrow::datatypes::DataType::Utf8)
            .map_err(|e| bad(format!("column `{column}`: {e}")))?;
        let want = StringArray::new_scalar(value.as_str());
        let keep = arrow::compute::kernels::cmp::eq(&text, &want)
            .map_err(|e| bad(format!("column `{column}`: {e}")))?;
        let mut kept =
            arrow::compute::filter_record_batch(&batch, &keep).map_err(|e| bad(e.to_string()))?;
        if let Ok(i) = kept.schema().index_of(column) {
            kept.remove_column(i);
        }
        Ok(kept)
    }

    /// The constant columns of `input` for a batch of `rows` rows.
    fn constant_columns(&self, input: &str, rows: usize) -> Result<Vec<ArrayRef>, SliceError> {
        let values = self.constants.get(input);
        let mut out = Vec::with_capacity(self.constant_fields.len());
        for (i, f) in self.constant_fields.iter().enumerate() {
            let v = values.and_then(|v| v.get(i)).cloned().flatten();
            let text: ArrayRef = Arc::new(StringArray::from(vec![v.as_deref(); rows]));
            let typed =
                arrow::compute::cast(&text, f.data_type()).map_err(|e| SliceError::Malformed {
                    path: input.to_string(),
                    detail: format!("partition value of `{}`: {e}", f.name()),
                })?;
            out.push(typed);
        }
        Ok(out)
    }

    /// The URL of an input.
    pub fn url_of(&self, input: &InputObject) -> Url {
        self.store.url_of(&input.path)
    }

    /// Open the slice for reading in batches of exactly `batch_rows` rows
    /// (the last may be shorter). Checks every file's footer and schema
    /// first (fail early); each file is checked again, digest and schema,
    /// from its private copy when its turn to be decoded comes.
    pub fn reader(&self, batch_rows: usize) -> Result<SliceReader, SliceError> {
        let mut schema: Option<SchemaRef> = None;
        for input in &self.inputs {
            let s = self.peek_schema(input)?;
            match &schema {
                None => schema = Some(s),
                Some(first) => self.same_schema(input, first, &s)?,
            }
        }
        let file_schema = schema.or_else(|| self.empty_schema.clone());
        let file_schema = file_schema.ok_or_else(|| SliceError::Empty {
            slice: self.id.clone(),
            root: self.root.to_string(),
            hint: "no inputs".into(),
        })?;
        let mut fields: Vec<Field> = file_schema
            .fields()
            .iter()
            .map(|f| f.as_ref().clone())
            .collect();
        fields.extend(self.constant_fields.iter().cloned());
        let full = Arc::new(Schema::new_with_metadata(
            fields.clone(),
            file_schema.metadata().clone(),
        ));
        // The column a row filter selects by is bookkeeping of the table
        // read (which slice owns the row), not data: the guest never sees it.
        if let Some((column, value)) = &self.row_filter {
            if full.field_with_name(column).is_err() {
                return Err(SliceError::Malformed {
                    path: self.root.to_string(),
                    detail: format!("no column `{column}` to select slice `{value}` by"),
                });
            }
            fields.retain(|f| f.name() != column);
        }
        let schema = Arc::new(Schema::new_with_metadata(
            fields,
            file_schema.metadata().clone(),
        ));
        Ok(SliceReader {
            slice: self.clone(),
            batch_rows,
            next_input: 0,
            current: None,
            budget: DEFAULT_INPUT_BATCH_BYTES,
            pending_bytes: 0,
            emitted: false,
            coalescer: BatchCoalescer::new(schema.clone(), batch_rows.max(1)),
            full,
            schema,
            file_schema,
            decode: None,
            narrowed: None,
            dictionaries: Vec::new(),
            decode_as: None,
            canonical: Default::default(),
            ahead: None,
            stop: Default::default(),
            read: None,
            in_memory_max: IN_MEMORY_MAX,
            #[cfg(test)]
            hashing_at_copy: 0,
            #[cfg(test)]
            copies: 0,
            done: false,
        })
    }

    fn same_schema(
        &self,
        input: &InputObject,
        first: &SchemaRef,
        s: &SchemaRef,
    ) -> Result<(), SliceError> {
        if strip_meta(first) == strip_meta(s) {
            return Ok(());
        }
        Err(SliceError::SchemaMismatch {
            path: input.path.clone(),
            first: self.inputs[0].path.clone(),
            expected: first.to_string(),
            got: s.to_string(),
        })
    }

    /// The schema from the object's footer, read in place with two ranged
    /// reads (not yet checked against the digest: only to fail early and
    /// tell the guest the schema). As the decoder does, types come from the
    /// Parquet schema alone.
    fn peek_schema(&self, input: &InputObject) -> Result<SchemaRef, SliceError> {
        let malformed = |detail: String| SliceError::Malformed {
            path: input.path.clone(),
            detail,
        };
        let len = self
            .store
            .size(&input.path)?
            .ok_or_else(|| SliceError::Changed {
                path: input.path.clone(),
                detail: "it was deleted".into(),
            })?;
        if len != input.size {
            return Err(SliceError::Changed {
                path: input.path.clone(),
                detail: format!(
                    "size {} {}, {} now",
                    input.size,
                    self.check(input).when(),
                    len
                ),
            });
        }
        if len < 12 {
            return Err(malformed(format!("{len} bytes is too small for Parquet")));
        }
        let tail = self.store.read_range(&input.path, len - 8..len)?;
        if &tail[4..8] != b"PAR1" {
            return Err(malformed(
                "no PAR1 magic at the end (corrupt or encrypted footer)".into(),
            ));
        }
        let footer = u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]) as u64;
        if footer + 12 > len {
            return Err(malformed(format!(
                "footer of {footer} bytes does not fit in the file of {len}"
            )));
        }
        let meta = self
            .store
            .read_range(&input.path, len - 8 - footer..len - 8)?;
        let md =
            ParquetMetaDataReader::decode_metadata(&meta).map_err(|e| malformed(e.to_string()))?;
        let schema =
            parquet::arrow::parquet_to_arrow_schema(md.file_metadata().schema_descr(), None)
                .map_err(|e| malformed(e.to_string()))?;
        Ok(Arc::new(schema))
    }

    /// Read the input once into a private copy (memory up to
    /// `in_memory_max`, else an anonymous temporary file) and check it
    /// ([`Check`]): what is decoded afterwards is exactly what was pinned.
    fn private_copy_with(
        &self,
        input: &InputObject,
        in_memory_max: u64,
    ) -> Result<PrivateCopy, SliceError> {
        private_copy(&self.store, input, self.check(input), in_memory_max, None)
    }

    /// How `input`'s copy is proved: by the BLAKE3 pinning took, if `input`
    /// is still what was pinned (same path, same sha256), else by sha256.
    fn check(&self, input: &InputObject) -> Check {
        match &self.pins {
            Pins::AsRead => Check::AsRead,
            Pins::Before(checks) => checks
                .get(&input.path)
                .filter(|(digest, _)| *digest == input.digest)
                .map_or(Check::Sha256, |(_, check)| Check::Blake3(*check)),
        }
    }

    /// A decoder over `copy`, the verified private copy of `input`, whose
    /// schema must be the slice's.
    fn open(
        &self,
        input: &InputObject,
        copy: PrivateCopy,
        how: &Decode<'_>,
    ) -> Result<Decoding, SliceError> {
        match copy {
            PrivateCopy::Memory(b) => self.decoder(b, input, how),
            PrivateCopy::Disk(f) => self.decoder(f, input, how),
        }
    }

    /// The decoder of one verified copy, once [`guard::check`] passed it:
    /// it yields [`Decoding::rows`] rows, a few at a time if its pages
    /// could decode to much at once.
    fn decoder<T: guard::Reopen>(
        &self,
        copy: T,
        input: &InputObject,
        how: &Decode<'_>,
    ) -> Result<Decoding, SliceError> {
        let Decode {
            batch_rows,
            schema,
            decode,
            decode_as,
            budget,
        } = *how;
        let malformed = |e: parquet::errors::ParquetError| SliceError::Malformed {
            path: input.path.clone(),
            detail: e.to_string(),
        };
        let meta = ArrowReaderMetadata::load(&copy, reader_options()).map_err(malformed)?;
        self.same_schema(input, schema, meta.schema())?;
        // Columns taken dictionary-encoded: the same file read with those
        // columns' types as dictionaries (the footer is parsed once).
        let options = match decode_as {
            Some(s) => reader_options().with_schema(s.clone()),
            None => reader_options(),
        };
        let mut meta = match decode_as {
            Some(_) => ArrowReaderMetadata::try_new(meta.metadata().clone(), options.clone())
                .map_err(malformed)?,
            None => meta,
        };
        let descr = meta.metadata().file_metadata().schema_descr_ptr();
        let leaves: Vec<usize> = (0..descr.num_columns())
            .filter(|&l| decode.is_none_or(|at| at.contains(&descr.get_column_root_idx(l))))
            .collect();
        let plan = guard::check(
            &copy,
            meta.metadata(),
            &leaves,
            batch_rows,
            budget,
            &input.path,
        )?;
        if let Some(fixed) = guard::with_total(meta.metadata(), plan.rows) {
            tracing::warn!(
                "input {}: its footer says {} rows, its row groups {}: reading the row groups",
                input.path,
                meta.metadata().file_metadata().num_rows(),
                plan.rows
            );
            meta = ArrowReaderMetadata::try_new(Arc::new(fixed), options).map_err(malformed)?;
        }
        let builder = ParquetRecordBatchReaderBuilder::new_with_metadata(copy, meta);
        // Top-level fields are the Parquet schema's roots, in order.
        let builder = match decode {
            Some(at) => {
                let mask = parquet::arrow::ProjectionMask::roots(
                    builder.parquet_schema(),
                    at.iter().copied(),
                );
                builder.with_projection(mask)
            }
            None => builder,
        };
        let reader = builder
            .with_batch_size(plan.decode_rows)
            .build()
            .map_err(malformed)?;
        Ok(Decoding {
            path: input.path.clone(),
            reader,
            rows: plan.rows,
            read: 0,
        })
    }
}

/// How the files of a reader are decoded.
#[derive(Clone, Copy)]
struct Decode<'a> {
    batch_rows: usize,
    /// The schema every file must have.
    schema: &'a SchemaRef,
    /// The file columns decoded (all: `None`).
    decode: Option<&'a [usize]>,
    /// Those columns' types, when some are taken as dictionaries.
    decode_as: Option<&'a SchemaRef>,
    /// Most bytes a batch of decoded input may hold.
    budget: u64,
}

/// One input file being decoded.
struct Decoding {
    path: String,
    reader: ParquetRecordBatchReader,
    /// Rows its footer says it holds: what decoding it must yield.
    rows: u64,
    /// Rows decoded so far.
    read: u64,
}

impl Decoding {
    /// At the file's end: never fewer (or more) rows than it holds. A
    /// decoder that stopped at a footer's wrong total delivered 0 rows of
    /// a file of 6, and the run exited 0.
    fn check_rows(&self) -> Result<(), SliceError> {
        if self.read == self.rows {
            return Ok(());
        }
        Err(SliceError::Refused {
            path: self.path.clone(),
            why: format!(
                "decoding it yielded {} rows, but its row groups hold {}",
                self.read, self.rows
            ),
            fix: "its layout is one idem cannot read faithfully; rewrite it with a current Parquet writer".into(),
        })
    }
}

/// The error for a batch that decoded past the budget.
fn over_budget(path: &str, budget: u64, batch_rows: usize) -> SliceError {
    SliceError::Refused {
        path: path.to_string(),
        why: format!(
            "a batch of {batch_rows} of its rows decodes to more than the input budget of {budget} bytes"
        ),
        fix: "lower --batch-rows, or raise --max-input-batch-mb if the data is genuine".into(),
    }
}

/// Types come from the Parquet schema alone, not from a writer's embedded
/// Arrow hints: the same data written by Spark, polars or DataFusion (which
/// hints view types) reaches the guest identically.
fn reader_options() -> ArrowReaderOptions {
    ArrowReaderOptions::new().with_skip_arrow_metadata(true)
}

/// `files` in the order a slice reads them: sorted, each once, and each a
/// name that leads back to its object from the root (it is recorded).
fn read_order(mut files: Vec<String>) -> Result<Vec<String>, SliceError> {
    files.sort();
    files.dedup();
    for rel in &files {
        validate_relative_path(rel)?;
    }
    Ok(files)
}

/// One input as pinning hashed it.
struct Pinned {
    digest: Digest,
    /// BLAKE3 of the same bytes: what the private copy is checked against.
    check: blake3::Hash,
    size: u64,
}

/// sha256, BLAKE3 and size of every file, in order: the files are spread
/// over the machine's cores (one file is one stream through the hashes; a
/// slice of many files was hashed one file at a time on one core).
fn hash_all(
    store: &Store,
    files: &[String],
    progress: &indicatif::ProgressBar,
) -> Vec<Result<Pinned, StorageError>> {
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(files.len());
    let hash = |rel: &str| {
        store
            .copy_through(
                rel,
                u64::MAX,
                progress.wrap_write(std::io::sink()),
                Hashes::both(),
            )
            .map(|(h, size, _)| Pinned {
                digest: Digest::from_sha256(h.sha256.expect("asked for")),
                check: h.blake3.expect("asked for").finalize(),
                size,
            })
    };
    if threads <= 1 {
        return files.iter().map(|f| hash(f)).collect();
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    // The first failure stops the others taking new files.
    let failed = std::sync::atomic::AtomicBool::new(false);
    let done: Vec<std::sync::Mutex<Option<Result<Pinned, StorageError>>>> =
        files.iter().map(|_| std::sync::Mutex::new(None)).collect();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                loop {
                    if failed.load(std::sync::atomic::Ordering::Relaxed) {
                        break;
                    }
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(rel) = files.get(i) else { break };
                    let r = hash(rel);
                    if r.is_err() {
                        failed.store(true, std::sync::atomic::Ordering::Relaxed);
                    }
                    *done[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
                }
            });
        }
    });
    // A thread that panicked re-raised its panic when the scope ended, so
    // every file has its result.
    done.into_iter()
        .zip(files)
        .map(|(m, rel)| {
            m.into_inner()
                .unwrap_or_else(|e| e.into_inner())
                .unwrap_or_else(|| {
                    Err(StorageError::Io {
                        what: "hashing".into(),
                        path: rel.clone(),
                        source: std::io::Error::other("it was never hashed"),
                    })
                })
        })
        .collect()
}

/// [`ResolvedSlice::private_copy`] from `store`: a free function, so the
/// next input's copy can be made on a thread of its own. With a BLAKE3
/// `check` (taken by pinning alongside the sha256), the copy goes through
/// BLAKE3 alone; a copy that differs is then hashed with sha256 too, to say
/// how. A copy for [`Check::AsRead`] is not hashed here at all.
/// A copy made ahead for a reader is not started once `stop` is set (one
/// under way runs to its end: at most [`IN_MEMORY_MAX`]). Hashes taken as
/// read run to their end too: in `idem exec`, the process ends with them.
fn private_copy(
    store: &Store,
    input: &InputObject,
    check: Check,
    in_memory_max: u64,
    stop: Option<&Arc<std::sync::atomic::AtomicBool>>,
) -> Result<PrivateCopy, SliceError> {
    let io = |e| SliceError::Io {
        path: input.path.clone(),
        source: e,
    };
    // One byte past the pinned size tells "grew" without reading it all.
    let limit = input.size.saturating_add(1);
    let gone = |e: StorageError| match e {
        StorageError::NotFound(_) => SliceError::Changed {
            path: input.path.clone(),
            detail: "it was deleted".into(),
        },
        e => e.into(),
    };
    let hashes = match check {
        Check::Blake3(_) => Hashes::blake3(),
        Check::Sha256 => Hashes::sha256(),
        Check::AsRead => Hashes::none(),
    };
    let (mut copy, hashed, n) = if input.size <= in_memory_max {
        let (h, buf) = store
            .read_through(&input.path, limit, hashes, stop.cloned())
            .map_err(gone)?;
        let n = buf.len() as u64;
        (PrivateCopy::Memory(Bytes::from(buf)), h, n)
    } else {
        let tmp = tempfile::tempfile().map_err(|e| SliceError::Io {
            path: format!("a temporary copy of {}", input.path),
            source: e,
        })?;
        let (h, n, mut tmp) = store
            .copy_through(&input.path, limit, tmp, hashes)
            .map_err(gone)?;
        tmp.flush().map_err(io)?;
        tmp.seek(SeekFrom::Start(0)).map_err(io)?;
        (PrivateCopy::Disk(tmp), h, n)
    };
    if n != input.size {
        let now = if n > input.size {
            "more".to_string()
        } else {
            n.to_string()
        };
        return Err(SliceError::Changed {
            path: input.path.clone(),
            detail: format!("size {} {}, {now} now", input.size, check.when()),
        });
    }
    let same = match (check, hashed.blake3, hashed.sha256) {
        (Check::AsRead, _, _) => true,
        (Check::Blake3(c), Some(b), _) => c == b.finalize(),
        (Check::Sha256, _, Some(s)) => Digest::from_sha256(s) == input.digest,
        _ => false,
    };
    if !same {
        let digest = copy.sha256().map_err(io)?;
        return Err(SliceError::Changed {
            path: input.path.clone(),
            detail: format!("pinned {}, now {digest}", input.digest),
        });
    }
    Ok(copy)
}

/// The bytes of one input as hashed, owned by this run alone.
enum PrivateCopy {
    Memory(Bytes),
    Disk(File),
}

impl PrivateCopy {
    /// The copy's sha256 (to name a copy that is not what was pinned).
    fn sha256(&mut self) -> std::io::Result<Digest> {
        match self {
            PrivateCopy::Memory(b) => Ok(Digest::of_bytes(b)),
            PrivateCopy::Disk(f) => {
                f.seek(SeekFrom::Start(0))?;
                let (digest, _) = Digest::of_reader(f)?;
                f.seek(SeekFrom::Start(0))?;
                Ok(digest)
            }
        }
    }
}

/// Columns `names` of a batch read from a file, before the coalescer: a
/// column decoded plain (a constant column) is encoded. Dictionaries are
/// made canonical after the coalescer, which may merge two files'.
fn encode_plain(
    batch: &RecordBatch,
    names: &[String],
    schema: &SchemaRef,
) -> Result<RecordBatch, arrow::error::ArrowError> {
    let columns = batch
        .columns()
        .iter()
        .zip(schema.fields())
        .map(|(c, f)| {
            if c.data_type() == f.data_type() || !names.iter().any(|n| n == f.name()) {
                Ok(c.clone())
            } else {
                arrow::compute::cast(c, f.data_type())
            }
        })
        .collect::<Result<Vec<ArrayRef>, _>>()?;
    RecordBatch::try_new(schema.clone(), columns)
}

/// Schema equality ignoring metadata (writers add their own key/values).
fn strip_meta(s: &SchemaRef) -> arrow::datatypes::Schema {
    arrow::datatypes::Schema::new(s.fields().clone())
}

/// A Parquet object starts and ends with `PAR1`, whatever its name.
fn has_parquet_magic(store: &Store, f: &Listed) -> Result<bool, SliceError> {
    // Magic + footer length + magic: anything shorter is not Parquet.
    if f.size < 12 {
        return Ok(false);
    }
    let head = store.read_range(&f.rel, 0..4)?;
    let tail = store.read_range(&f.rel, f.size - 4..f.size)?;
    Ok(head.as_ref() == b"PAR1" && tail.as_ref() == b"PAR1")
}

/// What a transform declared it reads, right after `open`. Part of what a
/// manifest records: a different declaration is a different execution.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Declared {
    /// The input columns it reads, in its order (`None`: all of them).
    pub columns: Option<Vec<String>>,
    /// Of those, the string or binary ones it takes dictionary-encoded.
    pub dictionaries: Vec<String>,
}

/// Streams a slice as fixed-size batches, file after file, in pinned order.
pub struct SliceReader {
    slice: ResolvedSlice,
    batch_rows: usize,
    next_input: usize,
    current: Option<Decoding>,
    /// Most bytes one batch of decoded input may hold
    /// ([`SliceReader::with_input_budget`]).
    budget: u64,
    /// Bytes decoded into the batch being filled.
    pending_bytes: u64,
    /// A batch was handed out (else a zero-row one carries the schema).
    emitted: bool,
    coalescer: BatchCoalescer,
    /// The files' columns, then the constant ones.
    full: SchemaRef,
    /// What the guest sees: `full` without a row filter's column.
    schema: SchemaRef,
    /// What every file holds.
    file_schema: SchemaRef,
    /// The files' columns decoded (indices into `file_schema`), when
    /// [`SliceReader::narrow`]ed; all otherwise.
    decode: Option<Vec<usize>>,
    /// The guest's columns, in its order, when narrowed.
    narrowed: Option<Vec<String>>,
    /// The columns the guest takes dictionary-encoded.
    dictionaries: Vec<String>,
    /// `file_schema` with those columns as dictionaries: how Parquet is
    /// asked to decode them (its dictionary pages kept, not expanded).
    decode_as: Option<SchemaRef>,
    /// Makes those columns' dictionaries canonical, batch by batch.
    canonical: idem_guest::native::Canonical,
    /// The private copy of the next input, made (read, hashed, checked) on
    /// a thread of its own while this one is decoded: at most two copies
    /// exist at once.
    ahead: Option<(
        usize,
        std::thread::JoinHandle<Result<PrivateCopy, SliceError>>,
    )>,
    /// Set when the reader is dropped: a copy being made ahead stops.
    stop: Arc<std::sync::atomic::AtomicBool>,
    /// With [`Pins::AsRead`]: each copy's sha256, taken while it is decoded.
    read: Option<InputsRead>,
    /// Inputs up to this size are copied into memory (and made ahead),
    /// larger ones into a temporary file: [`IN_MEMORY_MAX`] but in tests.
    in_memory_max: u64,
    /// The most hashes still under way when a copy was started.
    #[cfg(test)]
    hashing_at_copy: usize,
    /// Private copies made (ahead or in turn).
    #[cfg(test)]
    copies: usize,
    done: bool,
}

/// What a reader made by [`SliceReader::of_files`] has read: each input's
/// path, size and the sha256 of exactly the bytes decoded, in read order.
#[derive(Clone, Default)]
pub struct InputsRead(Arc<std::sync::Mutex<ReadSoFar>>);

#[derive(Default)]
struct ReadSoFar {
    inputs: Vec<Reading>,
    /// The reader reached the slice's end.
    whole: bool,
}

struct Reading {
    path: String,
    size: u64,
    sha256: Hashing,
}

enum Hashing {
    Running(std::thread::JoinHandle<std::io::Result<Digest>>),
    Done(std::io::Result<Digest>),
}

impl Hashing {
    /// Wait for a hash under way.
    fn settle(&mut self) {
        let pending = std::io::Error::other("never hashed");
        *self = Hashing::Done(match std::mem::replace(self, Hashing::Done(Err(pending))) {
            Hashing::Running(h) => h
                .join()
                .unwrap_or_else(|_| Err(std::io::Error::other("the thread hashing it panicked"))),
            Hashing::Done(d) => d,
        });
    }
}

impl InputsRead {
    /// Wait for the hash under way, if any: called before the next copy is
    /// started, so at most two copies exist at once (the one decoded and
    /// hashed, the next one being made), as for a pinned slice.
    fn settle(&self) {
        let mut read = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(last) = read.inputs.last_mut() {
            last.sha256.settle();
        }
    }

    /// How many hashes have not been awaited.
    #[cfg(test)]
    fn running(&self) -> usize {
        let read = self.0.lock().unwrap_or_else(|e| e.into_inner());
        read.inputs
            .iter()
            .filter(|r| matches!(r.sha256, Hashing::Running(_)))
            .count()
    }

    /// The reader reached the slice's end.
    fn read_whole(&self) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).whole = true;
    }

    /// Start hashing `copy`, `input`'s private copy, on a thread of its own
    /// (in turn if none can be started), while it is decoded.
    fn start(&self, input: &InputObject, copy: &PrivateCopy) -> Result<(), SliceError> {
        let job = || -> Result<Box<dyn FnOnce() -> std::io::Result<Digest> + Send>, SliceError> {
            Ok(match copy {
                PrivateCopy::Memory(b) => {
                    let b = b.clone();
                    Box::new(move || Ok(Digest::of_bytes(&b)))
                }
                // Read with pread: the decoder seeks the same open file.
                PrivateCopy::Disk(f) => {
                    let f = f.try_clone().map_err(|e| SliceError::Io {
                        path: input.path.clone(),
                        source: e,
                    })?;
                    Box::new(move || digest_at(&f))
                }
            })
        };
        self.settle();
        let sha256 = match std::thread::Builder::new()
            .name("idem-hash".into())
            .spawn(job()?)
        {
            Ok(h) => Hashing::Running(h),
            Err(_) => Hashing::Done(job()?()),
        };
        let mut read = self.0.lock().unwrap_or_else(|e| e.into_inner());
        read.inputs.push(Reading {
            path: input.path.clone(),
            size: input.size,
            sha256,
        });
        Ok(())
    }

    /// Every input, in read order, with the sha256 of the bytes decoded,
    /// once the reader has read the whole slice (an error before that: a
    /// run that stopped early did not read what its slice names).
    pub fn finish(&self) -> Result<Vec<InputObject>, SliceError> {
        let mut read = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if !read.whole {
            return Err(SliceError::Io {
                path: "(the slice)".into(),
                source: std::io::Error::other(format!(
                    "not read to its end ({} inputs started)",
                    read.inputs.len()
                )),
            });
        }
        read.inputs
            .iter_mut()
            .map(|r| {
                r.sha256.settle();
                let Hashing::Done(d) = &r.sha256 else {
                    unreachable!("settled")
                };
                match d {
                    Ok(digest) => Ok(InputObject {
                        path: r.path.clone(),
                        size: r.size,
                        digest: digest.clone(),
                    }),
                    Err(e) => Err(SliceError::Io {
                        path: r.path.clone(),
                        source: std::io::Error::new(e.kind(), e.to_string()),
                    }),
                }
            })
            .collect()
    }
}

/// The sha256 of the whole file `f`, read by position (its offset, shared
/// with the decoder's handle, is not moved).
fn digest_at(f: &File) -> std::io::Result<Digest> {
    /// `File` read by position from `.1` on.
    struct At<'a>(&'a File, u64);
    impl std::io::Read for At<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let k = std::os::unix::fs::FileExt::read_at(self.0, buf, self.1)?;
            self.1 += k as u64;
            Ok(k)
        }
    }
    Digest::of_reader(&mut At(f, 0)).map(|(d, _)| d)
}

impl Drop for SliceReader {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

impl SliceReader {
    /// The schema of every batch.
    pub fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    /// Read what a transform declared (checked by the caller): only its
    /// `columns` (names of [`SliceReader::schema`]), in that order, the
    /// files' other columns never decoded (`None` reads everything); its
    /// `dictionaries` as `Dictionary(Int32, _)`, decoded from Parquet's
    /// dictionary pages without expanding them. Call before the first batch.
    pub fn narrow(self, declared: &Declared) -> Result<SliceReader, SliceError> {
        let mut r = self.narrow_columns(declared.columns.as_deref())?;
        if declared.dictionaries.is_empty() {
            return Ok(r);
        }
        let d = &declared.dictionaries;
        let as_dictionaries = |s: &Schema| Arc::new(idem_guest::native::dictionary_schema(s, d));
        let decode_as = as_dictionaries(&r.file_schema);
        // The decoded file columns as dictionaries; constant columns (the
        // last ones) are appended plain and encoded with the rest of the batch.
        let files = r.full.fields().len() - r.slice.constant_fields.len();
        let full: Vec<Field> = r
            .full
            .fields()
            .iter()
            .enumerate()
            .map(|(i, f)| match decode_as.field_with_name(f.name()) {
                Ok(d) if i < files => d.clone(),
                _ => f.as_ref().clone(),
            })
            .collect();
        r.full = Arc::new(Schema::new_with_metadata(full, r.full.metadata().clone()));
        r.schema = as_dictionaries(&r.schema);
        r.coalescer = BatchCoalescer::new(r.schema.clone(), r.batch_rows.max(1));
        r.decode_as = Some(decode_as);
        r.dictionaries = d.clone();
        Ok(r)
    }

    fn narrow_columns(mut self, columns: Option<&[String]>) -> Result<SliceReader, SliceError> {
        let Some(columns) = columns else {
            return Ok(self);
        };
        let fields = columns
            .iter()
            .map(|c| {
                self.schema
                    .field_with_name(c)
                    .cloned()
                    .map_err(|_| SliceError::Malformed {
                        path: self.slice.root.to_string(),
                        detail: format!("no column `{c}` to read"),
                    })
            })
            .collect::<Result<Vec<Field>, SliceError>>()?;
        // The file columns decoded: the declared ones and the one a row
        // filter selects by.
        let filter = self.slice.row_filter.as_ref().map(|(c, _)| c.as_str());
        let decode: Vec<usize> = self
            .file_schema
            .fields()
            .iter()
            .enumerate()
            .filter(|(_, f)| {
                columns.iter().any(|c| c == f.name()) || Some(f.name().as_str()) == filter
            })
            .map(|(i, _)| i)
            .collect();
        let mut full: Vec<Field> = decode
            .iter()
            .map(|&i| self.file_schema.field(i).clone())
            .collect();
        full.extend(self.slice.constant_fields.iter().cloned());
        self.full = Arc::new(Schema::new_with_metadata(
            full,
            self.file_schema.metadata().clone(),
        ));
        self.schema = Arc::new(Schema::new_with_metadata(
            fields,
            self.file_schema.metadata().clone(),
        ));
        self.coalescer = BatchCoalescer::new(self.schema.clone(), self.batch_rows.max(1));
        self.decode = Some(decode);
        self.narrowed = Some(columns.to_vec());
        Ok(self)
    }

    fn fill(&mut self) -> Result<(), SliceError> {
        while !self.coalescer.has_completed_batch() {
            if self.current.is_none() {
                if self.next_input == self.slice.inputs.len() {
                    self.coalescer
                        .finish_buffered_batch()
                        .map_err(|e| SliceError::Malformed {
                            path: "(end of slice)".into(),
                            detail: e.to_string(),
                        })?;
                    if let Some(read) = &self.read {
                        read.read_whole();
                    }
                    self.done = true;
                    return Ok(());
                }
                let at = self.next_input;
                let input = self.slice.inputs[at].clone();
                self.next_input += 1;
                // The next input's copy starts before this one's is awaited
                // (or made here, for the first): the two overlap. Only one
                // that fits in memory is made ahead (a larger one would be
                // a temporary file read whole even if this run stops now);
                // a reader dropped midway stops it (`Drop`). If no thread
                // can be started, the copy is made in turn instead.
                let this = self.ahead.take();
                if let Some(read) = &self.read {
                    read.settle();
                    #[cfg(test)]
                    {
                        self.hashing_at_copy = self.hashing_at_copy.max(read.running());
                    }
                }
                let max = self.in_memory_max;
                self.copy_ahead(self.next_input);
                let copy = match this {
                    Some((i, made)) if i == at => made.join().unwrap_or_else(|_| {
                        Err(SliceError::Io {
                            path: input.path.clone(),
                            source: std::io::Error::other("the thread copying it panicked"),
                        })
                    })?,
                    _ => {
                        #[cfg(test)]
                        {
                            self.copies += 1;
                        }
                        self.slice.private_copy_with(&input, max)?
                    }
                };
                if let Some(read) = &self.read {
                    read.start(&input, &copy)?;
                }
                let how = Decode {
                    batch_rows: self.batch_rows,
                    schema: &self.file_schema,
                    decode: self.decode.as_deref(),
                    decode_as: self.decode_as.as_ref(),
                    budget: self.budget,
                };
                self.current = Some(self.slice.open(&input, copy, &how)?);
            }
            let Some(file) = self.current.as_mut() else {
                continue;
            };
            match file.reader.next() {
                None => {
                    file.check_rows()?;
                    self.current = None;
                }
                Some(Err(e)) => {
                    return Err(SliceError::Malformed {
                        path: file.path.clone(),
                        detail: e.to_string(),
                    });
                }
                Some(Ok(batch)) => {
                    file.read += batch.num_rows() as u64;
                    let path = file.path.clone();
                    self.take(&path, batch)?;
                }
            }
        }
        Ok(())
    }

    /// Add one decoded batch of the file at `path` to the batch being
    /// filled: within the budget, with its constant columns, filtered,
    /// narrowed and encoded as the guest takes it.
    fn take(&mut self, path: &str, batch: RecordBatch) -> Result<(), SliceError> {
        let malformed = |detail: String| SliceError::Malformed {
            path: path.to_string(),
            detail,
        };
        self.pending_bytes += batch.get_array_memory_size() as u64;
        if self.pending_bytes > self.budget {
            return Err(over_budget(path, self.budget, self.batch_rows));
        }
        // Files may differ only in schema metadata: rebind (and append the
        // file's constant columns).
        let mut columns = batch.columns().to_vec();
        if !self.slice.constant_fields.is_empty() {
            columns.extend(self.slice.constant_columns(path, batch.num_rows())?);
        }
        let batch = RecordBatch::try_new(self.full.clone(), columns)
            .map_err(|e| malformed(e.to_string()))?;
        let mut batch = self.slice.filter_rows(path, batch)?;
        if let Some(names) = &self.narrowed {
            batch = idem_guest::native::project(&batch, names).map_err(|e| malformed(e.0))?;
        }
        if !self.dictionaries.is_empty() {
            batch = encode_plain(&batch, &self.dictionaries, &self.schema)
                .map_err(|e| malformed(e.to_string()))?;
        }
        self.coalescer
            .push_batch(batch)
            .map_err(|e| malformed(e.to_string()))?;
        if self.coalescer.has_completed_batch() {
            self.pending_bytes = 0;
        }
        Ok(())
    }
}

impl Iterator for SliceReader {
    type Item = Result<RecordBatch, SliceError>;

    fn next(&mut self) -> Option<Self::Item> {
        let b = match self.coalescer.next_completed_batch() {
            Some(b) => b,
            None if self.done => return self.schema_only(),
            None => {
                if let Err(e) = self.fill() {
                    self.done = true;
                    self.emitted = true;
                    return Some(Err(e));
                }
                match self.coalescer.next_completed_batch() {
                    Some(b) => b,
                    None => return self.schema_only(),
                }
            }
        };
        self.emitted = true;
        if self.dictionaries.is_empty() {
            return Some(Ok(b));
        }
        // Each batch's dictionaries canonical: the same rows, the same keys.
        Some(
            self.canonical
                .encode(&b, &self.dictionaries)
                .map_err(|e| SliceError::Malformed {
                    path: "(dictionary columns)".into(),
                    detail: e.0,
                }),
        )
    }
}

impl SliceReader {
    /// Bound decoding to `bytes` per batch of decoded input (default
    /// [`DEFAULT_INPUT_BATCH_BYTES`]): a page declaring more, a page that
    /// inflates past its header, or a batch that decodes to more is refused,
    /// naming the file. Pages that could decode to much at once are decoded
    /// a few rows at a time, so the host holds O(budget) per reader.
    pub fn with_input_budget(mut self, bytes: u64) -> Self {
        self.budget = bytes.max(1);
        self
    }

    /// A slice that held no rows still names its columns: one zero-row
    /// batch of the schema, so the transform sees it and can carry it to
    /// its output (an empty input must not become an output of no columns).
    fn schema_only(&mut self) -> Option<Result<RecordBatch, SliceError>> {
        if self.emitted {
            return None;
        }
        self.emitted = true;
        Some(Ok(RecordBatch::new_empty(self.schema.clone())))
    }

    /// A reader over `files` (named as [`ResolvedSlice::from_files`] names
    /// them) that hashes each file as it reads it, instead of pinning them
    /// all before anything runs: one pass over the bytes, each copy's
    /// sha256 taken while it is decoded. For a run that checks no record
    /// against its inputs (`idem exec`); the [`InputsRead`] tells what was
    /// read. A file whose size changed since it was listed is refused.
    pub fn of_files(
        id: &str,
        files: &[impl AsRef<OsStr>],
        batch_rows: usize,
    ) -> Result<(SliceReader, InputsRead), SliceError> {
        let mut reader = ResolvedSlice::listed(id, files)?.reader(batch_rows)?;
        let read = InputsRead::default();
        reader.read = Some(read.clone());
        Ok((reader, read))
    }

    /// Start copying the first input now, on a thread of its own, while
    /// the caller does other work (loads the module): the first batch then
    /// waits for less. Call before the first batch.
    pub fn start_copying(&mut self) {
        if self.next_input == 0 && self.ahead.is_none() {
            self.copy_ahead(0);
        }
    }

    /// Make input `index`'s private copy on a thread of its own, if it fits
    /// in memory (a larger one would be a temporary file read whole even
    /// if the run stopped now) and a thread can be started.
    fn copy_ahead(&mut self, index: usize) {
        let max = self.in_memory_max;
        let Some(next) = self
            .slice
            .inputs
            .get(index)
            .filter(|next| next.size <= max)
            .cloned()
        else {
            return;
        };
        let store = self.slice.store.clone();
        let check = self.slice.check(&next);
        let stop = self.stop.clone();
        if let Ok(made) = std::thread::Builder::new()
            .name("idem-copy".into())
            .spawn(move || private_copy(&store, &next, check, max, Some(&stop)))
        {
            self.ahead = Some((index, made));
            #[cfg(test)]
            {
                self.copies += 1;
            }
        }
    }

    /// Read ahead on a thread of its own, so Parquet decoding overlaps the
    /// guest: at most `depth` batches wait in between (memory stays O(batch)).
    pub fn prefetch(self, depth: usize) -> Prefetch {
        let (tx, rx) = std::sync::mpsc::sync_channel(depth.max(1));
        let handle = std::thread::Builder::new()
            .name("idem-read".into())
            .spawn(move || {
                for b in self {
                    let stop = b.is_err();
                    if tx.send(b).is_err() || stop {
                        break;
                    }
                }
            })
            .ok();
        Prefetch {
            rx,
            _handle: handle,
        }
    }
}

/// Batches read ahead by [`SliceReader::prefetch`], in order.
pub struct Prefetch {
    rx: std::sync::mpsc::Receiver<Result<RecordBatch, SliceError>>,
    _handle: Option<std::thread::JoinHandle<()>>,
}

impl Iterator for Prefetch {
    type Item = Result<RecordBatch, SliceError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.rx.recv().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    /// A narrowed reader decodes only the declared columns (the Parquet
    /// decoder itself holds only them, not a projection after decoding),
    /// and hands them over in the declared order.
    #[test]
    fn a_narrowed_reader_decodes_only_the_declared_columns() {
        let dir = tempfile::tempdir().unwrap();
        crate::sample::write_day(dir.path(), "2026-10-01", 2_000, 2).unwrap();
        let slice = ResolvedSlice::from_partition(dir.path(), "date", "2026-10-01").unwrap();
        let wanted = ["quantity".to_string(), "customer".to_string()];
        let declared = Declared {
            columns: Some(wanted.to_vec()),
            dictionaries: vec![],
        };
        let mut reader = slice.reader(700).unwrap().narrow(&declared).unwrap();
        let first = reader.next().unwrap().unwrap();
        let names =
            |s: SchemaRef| -> Vec<String> { s.fields().iter().map(|f| f.name().clone()).collect() };
        assert_eq!(names(first.schema()), wanted);
        let decoder = &reader.current.as_ref().unwrap().reader;
        // In the file's order: customer comes before quantity there.
        use arrow::record_batch::RecordBatchReader as _;
        assert_eq!(names(decoder.schema()), ["customer", "quantity"]);
        let rows: usize = first.num_rows() + reader.map(|b| b.unwrap().num_rows()).sum::<usize>();
        assert_eq!(rows, 2_000);
    }

    /// A column taken dictionary-encoded is decoded from Parquet's
    /// dictionary pages as a dictionary (not expanded, then re-encoded),
    /// holds the same values as a plain read, and arrives so even from a
    /// file written without dictionaries; other columns stay plain.
    #[test]
    fn columns_taken_dictionary_encoded_arrive_as_dictionaries_with_the_same_values() {
        use arrow::array::AsArray;
        use arrow::datatypes::DataType;
        let dict = DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8));
        let dir = tempfile::tempdir().unwrap();
        crate::sample::write_day(dir.path(), "2026-10-01", 3_000, 2).unwrap();
        // A third file with every dictionary switched off.
        let plain_dir = dir.path().join("date=2026-10-01");
        let first = std::fs::read_dir(&plain_dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .min()
            .unwrap();
        let batches: Vec<RecordBatch> =
            ParquetRecordBatchReaderBuilder::try_new(File::open(&first).unwrap())
                .unwrap()
                .build()
                .unwrap()
                .map(|b| b.unwrap())
                .collect();
        let props = parquet::file::properties::WriterProperties::builder()
            .set_dictionary_enabled(false)
            .build();
        let mut w = parquet::arrow::ArrowWriter::try_new(
            File::create(plain_dir.join("zz-plain.parquet")).unwrap(),
            batches[0].schema(),
            Some(props),
        )
        .unwrap();
        for b in &batches {
            w.write(b).unwrap();
        }
        w.close().unwrap();

        let slice = ResolvedSlice::from_partition(dir.path(), "date", "2026-10-01").unwrap();
        let read = |dictionaries: Vec<String>| -> Vec<RecordBatch> {
            let declared = Declared {
                columns: Some(vec!["customer".into(), "amount".into()]),
                dictionaries,
            };
            let mut r = slice.reader(1_000).unwrap().narrow(&declared).unwrap();
            let mut out = vec![r.next().unwrap().unwrap()];
            if !declared.dictionaries.is_empty() {
                // Parquet itself decodes the column as a dictionary.
                let decoder = &r.current.as_ref().unwrap().reader;
                use arrow::record_batch::RecordBatchReader as _;
                assert_eq!(decoder.schema().field(0).data_type(), &dict);
            }
            out.extend(r.map(|b| b.unwrap()));
            out
        };
        let plain = read(vec![]);
        let encoded = read(vec!["customer".into()]);
        assert_eq!(plain.len(), encoded.len());
        let rows: usize = encoded.iter().map(|b| b.num_rows()).sum();
        assert_eq!(
            rows, 4_500,
            "two files of 1500 rows and the plain copy of one"
        );
        // The plain copy of the first file (batches 3 and 4) reaches the
        // guest exactly as the dictionary-encoded original (batches 0, 1).
        assert_eq!(encoded[3], encoded[0]);
        let d4 = encoded[4]
            .column(0)
            .as_dictionary::<arrow::datatypes::Int32Type>();
        let d1 = encoded[1]
            .column(0)
            .as_dictionary::<arrow::datatypes::Int32Type>();
        assert_eq!(d4.keys(), &d1.keys().slice(0, 500));
        assert_eq!(d4.values(), &d1.values().slice(0, d4.values().len()));
        for (p, e) in plain.iter().zip(&encoded) {
            assert_eq!(p.column(0).data_type(), &DataType::Utf8);
            assert_eq!(e.column(0).data_type(), &dict);
            assert_eq!(e.schema().field(1).data_type(), &DataType::Float64);
            let back = arrow::compute::cast(e.column(0), &DataType::Utf8).unwrap();
            assert_eq!(back.as_string::<i32>(), p.column(0).as_string::<i32>());
            assert_eq!(e.column(1), p.column(1));
            // Canonical: exactly the distinct values the rows use.
            let d = e.column(0).as_any_dictionary();
            let distinct: std::collections::HashSet<&str> =
                p.column(0).as_string::<i32>().iter().flatten().collect();
            assert_eq!(d.values().len(), distinct.len());
        }
        // The run's output over both reads is the same.
        assert_eq!(
            crate::digest::of_batches(&plain).unwrap(),
            crate::digest::of_batches(
                &encoded
                    .iter()
                    .map(|b| {
                        let c = arrow::compute::cast(b.column(0), &DataType::Utf8).unwrap();
                        RecordBatch::try_new(plain[0].schema(), vec![c, b.column(1).clone()])
                            .unwrap()
                    })
                    .collect::<Vec<_>>()
            )
            .unwrap()
        );
    }

    /// A constant (partition) column and a file column taken
    /// dictionary-encoded from a row-filtered slice (a table read as input)
    /// arrive as dictionaries holding the plain read's values, nulls
    /// included, in the same rows.
    #[test]
    fn constant_and_row_filtered_columns_taken_dictionary_encoded_keep_their_values() {
        use arrow::array::{Array, AsArray};
        use arrow::datatypes::DataType;
        let dir = tempfile::tempdir().unwrap();
        crate::sample::write_day(dir.path(), "2026-10-01", 3_000, 2).unwrap();
        let slice = ResolvedSlice::from_partition(dir.path(), "date", "2026-10-01").unwrap();
        let first = slice.reader(10).unwrap().next().unwrap().unwrap();
        let status = first
            .column_by_name("status")
            .unwrap()
            .as_string::<i32>()
            .value(0)
            .to_string();
        let paths: Vec<String> = slice.inputs.iter().map(|i| i.path.clone()).collect();
        let slice = slice
            .with_constants(
                vec![Field::new("region", DataType::Utf8, true)],
                vec![
                    (paths[0].clone(), vec![Some("eu".to_string())]),
                    (paths[1].clone(), vec![None]),
                ],
            )
            .with_row_filter("status", &status);
        let read = |dictionaries: Vec<String>| -> Vec<RecordBatch> {
            let declared = Declared {
                columns: Some(vec!["customer".into(), "region".into(), "amount".into()]),
                dictionaries,
            };
            slice
                .reader(400)
                .unwrap()
                .narrow(&declared)
                .unwrap()
                .map(|b| b.unwrap())
                .collect()
        };
        let plain = read(vec![]);
        let encoded = read(vec!["customer".into(), "region".into()]);
        let rows = |b: &[RecordBatch]| b.iter().map(|b| b.num_rows()).sum::<usize>();
        assert_eq!(rows(&plain), rows(&encoded));
        assert!(
            rows(&plain) > 0 && rows(&plain) < 3_000,
            "the filter kept some rows"
        );
        let dict = DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8));
        let (mut eu, mut none) = (0, 0);
        for (p, e) in plain.iter().zip(&encoded) {
            for c in 0..2 {
                assert_eq!(e.column(c).data_type(), &dict);
                let back = arrow::compute::cast(e.column(c), &DataType::Utf8).unwrap();
                assert_eq!(back.as_string::<i32>(), p.column(c).as_string::<i32>());
            }
            assert_eq!(e.column(2), p.column(2));
            let region = e.column(1).as_any_dictionary();
            none += region.keys().null_count();
            eu += region.keys().len() - region.keys().null_count();
            // Canonical: a null value is a null row, never a dictionary entry.
            assert_eq!(region.values().null_count(), 0);
        }
        assert!(eu > 0 && none > 0, "both files' rows: {eu} eu, {none} null");
    }

    #[test]
    fn batches_have_the_fixed_size_across_file_boundaries_in_pinned_order() {
        let dir = tempfile::tempdir().unwrap();
        // 3 files of 1000 rows: batches of 700 must straddle the files.
        let files = crate::sample::write_day(dir.path(), "2026-10-01", 3_000, 3).unwrap();
        let slice = ResolvedSlice::from_partition(dir.path(), "date", "2026-10-01").unwrap();
        assert_eq!(slice.id, "date=2026-10-01");
        let names: Vec<&str> = slice.inputs.iter().map(|i| i.path.as_str()).collect();
        assert_eq!(
            names,
            [
                "date=2026-10-01/part-00000.parquet",
                "date=2026-10-01/part-00001.parquet",
                "date=2026-10-01/part-00002.parquet"
            ]
        );
        for (input, file) in slice.inputs.iter().zip(&files) {
            assert_eq!(input.digest, Digest::of_file(file).unwrap().0);
        }
        let sizes: Vec<usize> = slice
            .reader(700)
            .unwrap()
            .map(|b| b.unwrap().num_rows())
            .collect();
        assert_eq!(sizes, [700, 700, 700, 700, 200]);
        // Same rows in the same order as the generator wrote them.
        let all: Vec<RecordBatch> = slice
            .reader(700)
            .unwrap()
            .prefetch(2)
            .map(Result::unwrap)
            .collect();
        let expected = crate::sample::orders_batch(crate::sample::seed_of("2026-10-01"), 0, 3_000);
        assert_eq!(
            crate::digest::of_batches(&all),
            crate::digest::of_batches(&[expected])
        );
    }

    #[test]
    fn a_file_that_changed_after_pinning_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let files = crate::sample::write_day(dir.path(), "2026-10-01", 100, 1).unwrap();
        let slice = ResolvedSlice::from_files("s", &files).unwrap();
        crate::sample::write_day(dir.path(), "2026-10-01", 5_000, 1).unwrap();
        assert!(matches!(slice.reader(10), Err(SliceError::Changed { .. })));
    }

    /// A one-column Parquet file of `n` distinct Int64 values, uncompressed
    /// and plain-encoded, so one flipped byte inside the data page changes a
    /// value and still decodes.
    fn plain_ints(path: &Path, n: i64) -> i64 {
        use arrow::array::Int64Array;
        use arrow::datatypes::{DataType, Field, Schema};
        use parquet::basic::Encoding;
        use parquet::file::properties::WriterProperties;
        let schema =
            std::sync::Arc::new(Schema::new(vec![Field::new("v", DataType::Int64, false)]));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![std::sync::Arc::new(Int64Array::from_iter_values(
                (0..n).map(|i| 0x0102_0304_0506_0000 + i),
            ))],
        )
        .unwrap();
        let props = WriterProperties::builder()
            .set_dictionary_enabled(false)
            .set_encoding(Encoding::PLAIN)
            .set_statistics_enabled(parquet::file::properties::EnabledStatistics::None)
            .build();
        let mut w =
            parquet::arrow::ArrowWriter::try_new(File::create(path).unwrap(), schema, Some(props))
                .unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        (0..n).map(|i| 0x0102_0304_0506_0000 + i).sum()
    }

    /// Flip one byte of the value `0x0102_0304_0506_0007` in place (same size).
    fn flip_a_value(path: &Path) {
        let mut bytes = std::fs::read(path).unwrap();
        let needle = 0x0102_0304_0506_0007i64.to_le_bytes();
        let at = bytes
            .windows(8)
            .position(|w| w == needle)
            .expect("value in the data page");
        bytes[at + 1] ^= 0x40;
        std::fs::write(path, bytes).unwrap();
    }

    fn sum(slice: &ResolvedSlice) -> Result<i64, SliceError> {
        sum_of(slice.reader(7)?)
    }

    fn sum_of_batch(b: &RecordBatch) -> i64 {
        let col = b
            .column(0)
            .as_any()
            .downcast_ref::<arrow::array::Int64Array>()
            .unwrap();
        col.values().iter().fold(0, |t, v| t.wrapping_add(*v))
    }

    fn sum_of(reader: SliceReader) -> Result<i64, SliceError> {
        let mut total = 0i64;
        for b in reader {
            total = total.wrapping_add(sum_of_batch(&b?));
        }
        Ok(total)
    }

    /// `idem exec`'s reader hashes each file as it reads it: what it
    /// reports is each file's path, size and sha256, in read order, and it
    /// decodes what a pinned reader decodes.
    #[test]
    fn an_as_read_reader_reports_what_it_read_in_one_pass() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("b.parquet"), dir.path().join("a.parquet"));
        let expected = plain_ints(&a, 100).wrapping_add(plain_ints(&b, 30));
        let pinned = ResolvedSlice::from_files("s", &[&a, &b]).unwrap();
        assert_eq!(sum_of(pinned.reader(7).unwrap()).unwrap(), expected);
        // In memory, and through temporary files (hashed by position while
        // the decoder seeks the same file).
        for in_memory_max in [IN_MEMORY_MAX, 0] {
            let (mut reader, read) = SliceReader::of_files("s", &[&a, &b], 7).unwrap();
            reader.in_memory_max = in_memory_max;
            // The first copy may be started early (while exec loads its
            // module); one that does not fit in memory is not.
            reader.start_copying();
            assert_eq!(
                reader.ahead.as_ref().map(|(i, _)| *i),
                (in_memory_max > 0).then_some(0)
            );
            assert!(read.finish().is_err(), "nothing read yet");
            let mut total = 0i64;
            for batch in reader.by_ref() {
                total = total.wrapping_add(sum_of_batch(&batch.unwrap()));
            }
            assert_eq!(total, expected);
            // Each hash was awaited before the next copy started: at most
            // two copies at once (the one decoded and hashed, the next).
            assert_eq!(reader.hashing_at_copy, 0);
            // One copy of each input: the early one was used, not made again.
            assert_eq!(reader.copies, 2);
            let inputs = read.finish().unwrap();
            assert_eq!(inputs, pinned.inputs, "sorted, with their sizes and sha256");
            assert_eq!(inputs[0].digest, Digest::of_file(&b).unwrap().0);
        }
    }

    /// The digest an as-read reader reports is of the bytes it decoded:
    /// a file rewritten between listing and reading is read, and reported,
    /// as it is when its turn comes; one whose size changed is refused.
    #[test]
    fn an_as_read_reader_reports_a_rewrite_as_read_and_refuses_a_new_size() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a.parquet"), dir.path().join("b.parquet"));
        let expected = plain_ints(&a, 100).wrapping_add(plain_ints(&b, 100));
        let listed = Digest::of_file(&b).unwrap().0;
        let (reader, read) = SliceReader::of_files("s", &[&a, &b], 7).unwrap();
        flip_a_value(&b);
        let now = Digest::of_file(&b).unwrap().0;
        assert_ne!(now, listed);
        let got = sum_of(reader).unwrap();
        assert_ne!(got, expected, "the rewritten values were decoded");
        assert_eq!(read.finish().unwrap()[1].digest, now);

        // Rewritten once its copy is made (its first rows are out: batch 15
        // of 7 rows holds a's last 2 and b's first 5): what was decoded and
        // reported is the copy, the old bytes, not the file as it is now.
        plain_ints(&b, 100);
        let (mut reader, read) = SliceReader::of_files("s", &[&a, &b], 7).unwrap();
        let mut total = 0i64;
        for _ in 0..15 {
            total = total.wrapping_add(sum_of_batch(&reader.next().unwrap().unwrap()));
        }
        flip_a_value(&b);
        total = total.wrapping_add(sum_of(reader).unwrap());
        assert_eq!(total, expected, "the copy's values, not the rewrite's");
        assert_eq!(read.finish().unwrap()[1].digest, listed);

        let (reader, read) = SliceReader::of_files("s", &[&a, &b], 7).unwrap();
        plain_ints(&b, 101);
        match sum_of(reader) {
            Err(SliceError::Changed { path, detail }) => {
                assert_eq!(path, "b.parquet");
                assert!(detail.contains(" listed, "), "{detail}");
            }
            other => panic!("a file that grew was read: {other:?}"),
        }
        let e = read.finish().unwrap_err().to_string();
        assert!(e.contains("not read to its end (1 inputs started)"), "{e}");
    }

    /// Every column of `schema`, `batch_rows` at a time, default budget.
    fn decode_all(schema: &SchemaRef, batch_rows: usize) -> Decode<'_> {
        Decode {
            batch_rows,
            schema,
            decode: None,
            decode_as: None,
            budget: DEFAULT_INPUT_BATCH_BYTES,
        }
    }

    /// Rows in = the row groups' rows, checked at each file's end: a
    /// decoder that yields fewer (or more) is refused by name.
    #[test]
    fn a_file_that_decodes_to_other_rows_than_its_row_groups_hold_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.parquet");
        plain_ints(&path, 100);
        let slice = ResolvedSlice::from_files("s", std::slice::from_ref(&path)).unwrap();
        let input = &slice.inputs[0];
        let schema = slice.peek_schema(input).unwrap();
        let how = decode_all(&schema, 30);
        let copy = slice.private_copy_with(input, IN_MEMORY_MAX).unwrap();
        let mut file = slice.open(input, copy, &how).unwrap();
        assert_eq!(file.rows, 100);
        file.read = file
            .reader
            .by_ref()
            .map(|b| b.unwrap().num_rows() as u64)
            .sum();
        file.check_rows().unwrap();
        file.rows = 101;
        let e = file.check_rows().unwrap_err().to_string();
        assert!(
            e.contains("a.parquet") && e.contains("yielded 100 rows, but its row groups hold 101"),
            "{e}"
        );
    }

    /// A copy on disk is hashed by position: the decoder's seeks on the
    /// same open file do not move what is hashed, nor the other way round.
    #[test]
    fn a_disk_copy_is_hashed_without_moving_its_offset() {
        let mut f = tempfile::tempfile().unwrap();
        let bytes: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7 % 251) as u8).collect();
        f.write_all(&bytes).unwrap();
        f.seek(SeekFrom::Start(12_345)).unwrap();
        assert_eq!(digest_at(&f).unwrap(), Digest::of_bytes(&bytes));
        assert_eq!(f.stream_position().unwrap(), 12_345);
        let read = InputsRead::default();
        let input = InputObject {
            path: "x".into(),
            size: bytes.len() as u64,
            digest: Digest::of_bytes(b""),
        };
        let mut f2 = f.try_clone().unwrap();
        read.start(&input, &PrivateCopy::Disk(f)).unwrap();
        read.start(&input, &PrivateCopy::Memory(Bytes::from(bytes.clone())))
            .unwrap();
        assert_eq!(f2.stream_position().unwrap(), 12_345);
        read.read_whole();
        let got = read.finish().unwrap();
        assert!(got.iter().all(|i| i.digest == Digest::of_bytes(&bytes)));
    }

    #[test]
    fn a_same_size_rewrite_after_pinning_is_refused_from_memory_and_disk_copies() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.parquet");
        let expected = plain_ints(&path, 100);
        let slice = ResolvedSlice::from_files("s", std::slice::from_ref(&path)).unwrap();
        assert_eq!(sum(&slice).unwrap(), expected);
        let input = &slice.inputs[0];
        assert!(matches!(
            slice.private_copy_with(input, 0).unwrap(),
            PrivateCopy::Disk(_)
        ));
        // The disk copy decodes like the memory one.
        let copy = slice.private_copy_with(input, 0).unwrap();
        let PrivateCopy::Disk(f) = copy else {
            unreachable!()
        };
        let schema = slice.peek_schema(input).unwrap();
        let how = decode_all(&schema, 7);
        let rows: usize = slice
            .decoder(f, input, &how)
            .unwrap()
            .reader
            .map(|b| b.unwrap().num_rows())
            .sum();
        assert_eq!(rows, 100);

        flip_a_value(&path);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), input.size);
        let now = Digest::of_file(&path).unwrap().0;
        for max in [IN_MEMORY_MAX, 0] {
            match slice.private_copy_with(input, max) {
                Err(SliceError::Changed { path, detail }) => {
                    assert_eq!(path, "a.parquet");
                    // Checked by BLAKE3, named by the copy's sha256.
                    assert_eq!(detail, format!("pinned {}, now {now}", input.digest));
                }
                Err(e) => panic!("{e}"),
                Ok(_) => panic!("a changed file was read"),
            }
        }
        let e = sum(&slice).unwrap_err();
        assert!(
            e.to_string().contains("rerun to read the new version"),
            "{e}"
        );
        // The flipped file still decodes: without the digest check the run
        // would have used a different value silently.
        let repinned = ResolvedSlice::from_files("s", &[path]).unwrap();
        let changed = sum(&repinned).unwrap();
        assert_ne!(changed, expected);
    }

    /// The next file's private copy is made on a thread of its own while
    /// the current one is decoded, and checked all the same: a later file
    /// rewritten after pinning fails the read when its turn comes, naming
    /// it, after the files before it were read.
    #[test]
    fn a_later_file_changed_after_pinning_fails_its_prefetched_copy() {
        let dir = tempfile::tempdir().unwrap();
        // Files of different sizes (so different contents): the rows read
        // are the first two files', in order.
        let mut sums = Vec::new();
        let paths: Vec<PathBuf> = (0..3)
            .map(|i| {
                let p = dir.path().join(format!("{i}.parquet"));
                sums.push(plain_ints(&p, 100 + i));
                p
            })
            .collect();
        let slice = ResolvedSlice::from_files("s", &paths).unwrap();
        flip_a_value(&paths[2]);
        let (mut rows, mut total) = (0, 0i64);
        let mut failed = None;
        for b in slice.reader(10).unwrap() {
            match b {
                Ok(b) => {
                    rows += b.num_rows();
                    let col = b
                        .column(0)
                        .as_any()
                        .downcast_ref::<arrow::array::Int64Array>();
                    let values = col.unwrap().values().iter();
                    total = values.fold(total, |t, v| t.wrapping_add(*v));
                }
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        match failed {
            Some(SliceError::Changed { path, .. }) => assert_eq!(path, "2.parquet"),
            other => panic!("{other:?}"),
        }
        // 201 rows before it: 20 batches of 10 went out, the last row waits
        // in the coalescer for the third file's rows.
        assert_eq!(rows, 200, "the two files before it were read");
        let last = 0x0102_0304_0506_0000i64 + 100;
        assert_eq!(total, sums[0].wrapping_add(sums[1]).wrapping_sub(last));
    }

    /// A copy made ahead gives up once its reader is gone (its stop flag
    /// set when the reader is dropped), instead of reading the input whole
    /// for nobody; the same copy without the flag completes.
    #[test]
    fn a_copy_made_ahead_stops_when_its_reader_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.parquet");
        plain_ints(&path, 100);
        let slice = ResolvedSlice::from_files("s", std::slice::from_ref(&path)).unwrap();
        let input = &slice.inputs[0];
        let reader = slice.reader(10).unwrap();
        let stop = reader.stop.clone();
        let copy = |stop| {
            private_copy(
                &slice.store,
                input,
                slice.check(input),
                IN_MEMORY_MAX,
                Some(stop),
            )
        };
        assert!(copy(&stop).is_ok());
        drop(reader);
        assert!(stop.load(std::sync::atomic::Ordering::Relaxed));
        match copy(&stop) {
            Err(e) => assert!(e.to_string().contains("the reader is gone"), "{e}"),
            Ok(_) => panic!("a copy went on for a dropped reader"),
        }
    }

    /// The BLAKE3 check belongs to the bytes pinned: an input whose digest
    /// the caller changed since is checked by sha256 against its new digest
    /// (and so refused here), never waved through by the old check.
    #[test]
    fn an_input_changed_by_the_caller_is_checked_by_sha256() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.parquet");
        plain_ints(&path, 100);
        let mut slice = ResolvedSlice::from_files("s", std::slice::from_ref(&path)).unwrap();
        assert!(matches!(slice.check(&slice.inputs[0]), Check::Blake3(_)));
        // Without a check, the copy is proved by sha256: the right digest
        // passes.
        let pins = std::mem::replace(&mut slice.pins, Pins::Before(Default::default()));
        assert!(matches!(slice.check(&slice.inputs[0]), Check::Sha256));
        slice
            .private_copy_with(&slice.inputs[0], IN_MEMORY_MAX)
            .unwrap();
        slice.pins = pins;
        slice.inputs[0].digest = Digest::of_bytes(b"something else");
        assert!(matches!(slice.check(&slice.inputs[0]), Check::Sha256));
        match slice.private_copy_with(&slice.inputs[0], IN_MEMORY_MAX) {
            Err(SliceError::Changed { detail, .. }) => {
                assert!(detail.starts_with("pinned sha256:"), "{detail}")
            }
            Err(e) => panic!("{e}"),
            Ok(_) => panic!("a copy was accepted against another digest"),
        }
    }

    #[test]
    fn names_that_could_leave_the_root_are_refused() {
        for ok in ["2026-10-01", "a..b", "x=y", "files-0123abcd", "..."] {
            validate_segment("partition value", ok).unwrap();
        }
        for bad in ["", "x/../../secret", "..", ".", "a\\b", "a\0b", "/etc"] {
            let e = validate_segment("partition value", bad).unwrap_err();
            assert!(matches!(e, SliceError::BadName { .. }), "{bad}: {e}");
        }
        let e = validate_segment("partition value", "x/../../secret")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with(
                "partition value `x/../../secret` is refused: it contains a path separator"
            ),
            "{e}"
        );
        for ok in ["date=1/part-0.parquet", "a.parquet", "a/..b/c", "a/.../c"] {
            validate_relative_path(ok).unwrap();
        }
        for bad in [
            "",
            "/etc/passwd",
            "\\\\server\\x",
            "C:\\x",
            "c:/x",
            "../x",
            "a/../../x",
            "a\\..\\x",
            "a/..",
            "a\0",
        ] {
            let e = validate_relative_path(bad).unwrap_err();
            assert!(matches!(e, SliceError::BadName { .. }), "{bad}: {e}");
        }
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("data");
        crate::sample::write_day(&dir.path().join("secret"), "x", 10, 1).unwrap();
        std::fs::create_dir_all(root.join("date=x")).unwrap();
        for (key, value) in [("date", "x/../../secret/date=x"), ("..", "x"), ("date", "")] {
            assert!(matches!(
                ResolvedSlice::from_partition(&root, key, value),
                Err(SliceError::BadName { .. })
            ));
        }
        let files = crate::sample::write_day(&root, "2026-10-01", 10, 1).unwrap();
        for id in ["a/b", "..", ""] {
            assert!(matches!(
                ResolvedSlice::from_files(id, &files),
                Err(SliceError::BadName { .. })
            ));
            assert!(matches!(
                ResolvedSlice::from_listed(id, &root, files.clone()),
                Err(SliceError::BadName { .. })
            ));
        }
        // A listed file outside the root would be recorded by an absolute
        // or `..` name: refused.
        let outside = dir.path().join("secret/date=x/part-00000.parquet");
        for f in [
            outside.clone(),
            root.join("../secret/date=x/part-00000.parquet"),
        ] {
            assert!(matches!(
                ResolvedSlice::from_listed("s", &root, vec![f]),
                Err(SliceError::BadName { .. })
            ));
        }
    }

    #[test]
    fn a_table_and_an_input_root_that_contain_one_another_are_refused() {
        let u = |p: &Path| storage::locate(p.to_str().unwrap()).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::create_dir_all(d.join("data/date=1")).unwrap();
        std::os::unix::fs::symlink(d.join("data"), d.join("link")).unwrap();
        let loops = [
            d.join("data/out"),
            d.join("data/date=1/t"),
            d.join("link/new/table"),
            d.join("data"),
            d.to_path_buf(),
            d.join("elsewhere/../data/t"),
        ];
        for table in &loops {
            assert!(
                matches!(
                    check_not_inside(&u(table), &u(&d.join("data"))),
                    Err(SliceError::Loop { .. })
                ),
                "{}",
                table.display()
            );
        }
        for table in [d.join("table"), d.join("data2"), d.join("data/../t")] {
            check_not_inside(&u(&table), &u(&d.join("data"))).unwrap();
        }
        check_not_inside(&u(&d.join("t")), &u(&d.join("link"))).unwrap();
        assert!(check_not_inside(&u(&d.join("data/t")), &u(&d.join("link"))).is_err());
    }

    #[test]
    fn files_ids_follow_the_files_not_how_their_paths_are_typed() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let a = crate::sample::write_day(&d.join("one"), "1", 10, 2).unwrap();
        let b = crate::sample::write_day(&d.join("two"), "1", 10, 2).unwrap();
        std::os::unix::fs::symlink(d.join("one"), d.join("alias")).unwrap();
        let id = files_id(&a).unwrap();
        assert!(id.starts_with("files-"), "{id}");
        let spelled = vec![
            d.join("one/./date=1/part-00001.parquet"),
            d.join("two/../one/date=1/part-00000.parquet"),
        ];
        assert_eq!(files_id(&spelled).unwrap(), id);
        let aliased = vec![
            d.join("alias/date=1/part-00000.parquet"),
            d.join("alias/date=1/part-00001.parquet"),
            a[0].clone(),
        ];
        assert_eq!(files_id(&aliased).unwrap(), id);
        // Same relative names, other directory: another slice.
        assert_ne!(files_id(&b).unwrap(), id);
        assert_ne!(files_id(&a[..1]).unwrap(), id);
        assert!(matches!(
            files_id(&[d.join("nope.parquet")]),
            Err(SliceError::NotFound(_))
        ));
    }

    #[test]
    fn a_partition_directory_that_is_a_symlink_out_of_the_root_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        crate::sample::write_day(&d.join("secret"), "x", 10, 1).unwrap();
        std::fs::create_dir_all(d.join("data")).unwrap();
        std::os::unix::fs::symlink(d.join("secret/date=x"), d.join("data/date=x")).unwrap();
        assert!(matches!(
            ResolvedSlice::from_partition(d.join("data"), "date", "x"),
            Err(SliceError::Storage(StorageError::Outside { .. }))
        ));
    }

    #[test]
    fn symlink_loops_and_duplicate_links_are_read_once_and_reported() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("data");
        let files = crate::sample::write_day(&root, "1", 10, 1).unwrap();
        let part = root.join("date=1");
        std::os::unix::fs::symlink(&part, part.join("again")).unwrap();
        std::os::unix::fs::symlink(&files[0], part.join("copy.parquet")).unwrap();
        std::os::unix::fs::symlink(part.join("gone"), part.join("broken")).unwrap();
        let slice = ResolvedSlice::from_partition(&root, "date", "1").unwrap();
        let names: Vec<&str> = slice.inputs.iter().map(|i| i.path.as_str()).collect();
        assert_eq!(names, ["date=1/part-00000.parquet"]);
        let mut skipped = slice.skipped.clone();
        skipped.sort();
        assert_eq!(
            skipped,
            [
                (
                    "date=1/again".into(),
                    "symlink to a directory already read".into()
                ),
                ("date=1/broken".into(), "broken symlink".into()),
                (
                    "date=1/copy.parquet".into(),
                    "same file as date=1/part-00000.parquet".into()
                ),
            ]
        );
    }
}
