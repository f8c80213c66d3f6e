//! A resolved slice: the exact objects a run reads, pinned, from an
//! explicit file list, a hive partition, or the named files of a table
//! version.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::sync::Arc;

use arrow::datatypes::{Field, SchemaRef};
use url::Url;

use super::error::SliceError;
use super::locate::{loc, locate_files, rel_of};
use super::path::{bad, read_order, validate_segment, validate_slice_id};
use super::pin::{InputObject, Pinned, Pins, hash_all};
use crate::digest::Digest;
use crate::storage::{self, Listed, StorageError, Store, as_dir};

/// A resolved slice: the exact objects a run reads, in the order it reads them.
#[derive(Debug, Clone)]
pub struct ResolvedSlice {
    /// The slice's name, e.g. `date=2026-10-01` or `files`.
    pub id: String,
    /// Where relative object paths start (a directory URL on any store).
    pub root: Url,
    pub(super) store: Store,
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
    /// Keep only the rows whose text column equals one of the values (a
    /// merge table's rows of one slice, or of the upstream slices a daily
    /// stage reads): applied as each file is decoded.
    pub row_filter: Option<(String, Vec<String>)>,
    /// The schema of a slice with no objects (an upstream slice whose
    /// committed output is empty): read as zero rows of it.
    pub empty_schema: Option<SchemaRef>,
    /// A table's columns at the version read, its partition columns left
    /// out: its files are read as these ([`super::fit`]), a column a file
    /// lacks as nulls. `None`: every file must have one and the same schema.
    pub table_columns: Option<SchemaRef>,
    /// How the private copies are proved.
    pub(super) pins: Pins,
    /// For text inputs, how they are decoded ([`ResolvedSlice::with_text`]).
    pub text: Option<super::text::TextInput>,
}

impl ResolvedSlice {
    /// Pin an explicit list of files (paths or URLs, all on one store):
    /// names are taken relative to their common parent, sorted, and hashed.
    pub fn from_files(id: &str, files: &[impl AsRef<OsStr>]) -> Result<Self, SliceError> {
        let (store, rels) = locate_files(id, files)?;
        Self::pin(id, store, rels, Vec::new())
    }

    /// Pin the hive partition `key=value` (or nested, `date=D/hour=H`)
    /// under `root` (a path or URL): every Parquet object below
    /// `root/key=value/`, recursively, sorted.
    /// An object is Parquet when its name ends in `.parquet` (a broken one
    /// then fails the read) or when it starts and ends with `PAR1` (Hive's
    /// `part-00000`). Locally, symlinks are followed only to targets inside
    /// `root`. Whatever else is there is listed in [`ResolvedSlice::skipped`].
    pub fn from_partition(
        root: impl AsRef<OsStr>,
        partition: &super::Partition,
    ) -> Result<Self, SliceError> {
        for (key, value) in partition.levels() {
            validate_segment("partition column", key)?;
            validate_segment("partition value", value)?;
        }
        let id = partition.to_string();
        let store = Store::at(&loc(&root))?;
        let no_dir = || SliceError::NoPartition {
            slice: id.clone(),
            root: store.url().to_string(),
            nearby: super::locate::nearby_partition(&store, partition),
        };
        // A file given as the root: said as such (not a failed listing,
        // nor a missing partition a backfill would skip).
        if let Some(file) = store
            .local_dir()
            .map(|d| d.components().collect::<std::path::PathBuf>())
            .filter(|f| f.is_file())
        {
            return Err(SliceError::Refused {
                path: file.display().to_string(),
                why: "it is a file, not a dataset root".into(),
                fix: format!("to read files, give them with --files {}", file.display()),
            });
        }
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
        let magic = has_parquet_magic(&store, &listing.files)?;
        // A partition of Parquet files reads those; one with none, its
        // text files (CSV, TSV or JSON lines: one format).
        let text = !magic.iter().any(|&m| m);
        let mut files = Vec::new();
        for (f, parquet) in listing.files.into_iter().zip(magic) {
            if parquet || (text && super::text::TextFormat::of_path(&f.rel).is_some()) {
                files.push(f.rel);
            } else {
                let why = match super::path::other_format(&f.rel) {
                    Some(kind) => super::path::other_format_detail(kind, !text),
                    None => "not Parquet (no PAR1 magic at start and end)".into(),
                };
                skipped.push((f.rel, why));
            }
        }
        skipped.sort();
        for (path, why) in &skipped {
            tracing::warn!("slice {id}: skipped {path}: {why}");
        }
        if files.is_empty() {
            let mut hint = "the partition directory holds no Parquet, CSV, TSV or JSON-lines files"
                .to_string();
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
        validate_slice_id(id)?;
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
        validate_slice_id(id)?;
        let mut slice = Self::pin(id, Store::open(root)?, Vec::new(), Vec::new())?;
        slice.empty_schema = Some(schema);
        Ok(slice)
    }

    /// Pin the objects named `names` (relative to the directory `root`,
    /// taken as they are: no symlink or URL resolution), e.g. the data
    /// files of a Delta table version or the inputs a manifest records.
    pub fn from_names(id: &str, root: &Url, names: Vec<String>) -> Result<Self, SliceError> {
        validate_slice_id(id)?;
        if names.is_empty() {
            return Err(SliceError::Empty {
                slice: id.to_string(),
                root: root.to_string(),
                hint: "the table version (and partition filter) selects no data files".into(),
            });
        }
        Self::pin(id, Store::open(root)?, names, Vec::new())
    }

    /// [`ResolvedSlice::from_names`], read in the order given (a read of
    /// several upstream slices: slice by slice, each in output order, so
    /// the rows come in the same order whatever the files are named).
    pub fn from_names_in_order(
        id: &str,
        root: &Url,
        names: Vec<String>,
    ) -> Result<Self, SliceError> {
        validate_slice_id(id)?;
        let mut seen = std::collections::HashSet::new();
        for n in &names {
            super::path::validate_relative_path(n)?;
            if !seen.insert(n.as_str()) {
                return Err(SliceError::Malformed {
                    path: n.clone(),
                    detail: "the table lists this data file twice".into(),
                });
            }
        }
        if names.is_empty() {
            return Self::from_names(id, root, names);
        }
        Self::pinned(id, Store::open(root)?, names, Vec::new())
    }

    fn pin(
        id: &str,
        store: Store,
        files: Vec<String>,
        skipped: Vec<(String, String)>,
    ) -> Result<Self, SliceError> {
        Self::pinned(id, store, read_order(files)?, skipped)
    }

    /// Pin `files`, read in this order.
    fn pinned(
        id: &str,
        store: Store,
        files: Vec<String>,
        skipped: Vec<(String, String)>,
    ) -> Result<Self, SliceError> {
        let progress = crate::progress::bytes("hashing", None);
        let hashed = hash_all(&store, &files, &progress)?;
        progress.finish_with_message("hashed");
        let mut inputs = Vec::with_capacity(files.len());
        let mut checks = BTreeMap::new();
        for (rel, pinned) in files.into_iter().zip(hashed) {
            let Pinned {
                digest,
                check,
                size,
            } = pinned;
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
    pub(crate) fn listed(id: &str, files: &[impl AsRef<OsStr>]) -> Result<Self, SliceError> {
        let (store, rels) = locate_files(id, files)?;
        let rels = read_order(rels)?;
        let sizes = store.sizes(&rels)?;
        let mut inputs = Vec::with_capacity(rels.len());
        for (rel, size) in rels.into_iter().zip(sizes) {
            let size = size.ok_or_else(|| SliceError::NotFound(store.url_of(&rel).to_string()))?;
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
            table_columns: None,
            pins,
            text: None,
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

    /// Read the files as a table's columns (`schema`, the table's at the
    /// version read), but for the constant ones (its partition columns:
    /// call after [`ResolvedSlice::with_constants`]).
    pub fn with_table_columns(mut self, schema: &arrow::datatypes::Schema) -> Self {
        let fields: Vec<Field> = schema
            .fields()
            .iter()
            .filter(|f| !self.constant_fields.iter().any(|c| c.name() == f.name()))
            .map(|f| f.as_ref().clone())
            .collect();
        self.table_columns = Some(Arc::new(arrow::datatypes::Schema::new(fields)));
        self
    }

    /// Keep only the rows whose text `column` equals one of `values`.
    pub fn with_row_filter(mut self, column: &str, values: &[String]) -> Self {
        self.row_filter = Some((column.to_string(), values.to_vec()));
        self
    }

    /// The URL of an input.
    pub fn url_of(&self, input: &InputObject) -> Url {
        self.store.url_of(&input.path)
    }
}

/// Which of `files` are Parquet: named `*.parquet`, or starting and ending
/// with `PAR1` whatever their name (the others' heads and tails read many
/// at once, [`Store::read_ranges`]).
fn has_parquet_magic(store: &Store, files: &[Listed]) -> Result<Vec<bool>, SliceError> {
    // Magic + footer length + magic: anything shorter is not Parquet.
    let sniff = |f: &Listed| !f.rel.ends_with(".parquet") && f.size >= 12;
    let mut ranges = Vec::new();
    for f in files.iter().filter(|f| sniff(f)) {
        ranges.push((f.rel.clone(), 0..4));
        ranges.push((f.rel.clone(), f.size - 4..f.size));
    }
    let ends = store.read_ranges(&ranges)?;
    let mut ends = ends.chunks(2);
    Ok(files
        .iter()
        .map(|f| {
            if f.rel.ends_with(".parquet") {
                return true;
            }
            if !sniff(f) {
                return false;
            }
            ends.next()
                .is_some_and(|e| e.iter().all(|b| b.as_ref() == b"PAR1"))
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::slice::path::validate_relative_path;

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
                ResolvedSlice::from_partition(&root, &crate::slice::Partition::one(key, value)),
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
    fn a_partition_directory_that_is_a_symlink_out_of_the_root_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        crate::sample::write_day(&d.join("secret"), "x", 10, 1).unwrap();
        std::fs::create_dir_all(d.join("data")).unwrap();
        std::os::unix::fs::symlink(d.join("secret/date=x"), d.join("data/date=x")).unwrap();
        assert!(matches!(
            ResolvedSlice::from_partition(
                d.join("data"),
                &crate::slice::Partition::one("date", "x")
            ),
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
        let slice =
            ResolvedSlice::from_partition(&root, &crate::slice::Partition::one("date", "1"))
                .unwrap();
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
