//! Step 1, resolve: which inputs a run reads (a partition, a file list,
//! a pinned Delta version) and their pinning: every input named, sized
//! and hashed before anything runs. A `--next` range is in [`super::next`].

use std::path::PathBuf;

use super::RunError;
use crate::slice::{MAX_LEVELS, Partition};
use crate::slice::{ResolvedSlice, SliceError};
use crate::table::Table;

/// Which inputs a run reads.
#[derive(Debug, Clone)]
pub enum SliceSpec {
    /// Hive partition `column=value` (or `date=D/hour=H`, nested
    /// directories) of the dataset at `root`.
    Partition {
        /// Dataset root.
        root: PathBuf,
        /// The partition: one or more levels.
        partition: Partition,
    },
    /// An explicit list of Parquet files.
    Files {
        /// The files.
        files: Vec<PathBuf>,
        /// Slice id (default: derived from the file names).
        id: Option<String>,
    },
    /// The next range of an append-only prefix: the Parquet objects whose
    /// names sort after the last one the target table consumed from it, at
    /// most `max_objects` (and `max_bytes`). The new position is committed
    /// with the output.
    Next {
        /// The source prefix.
        root: String,
        /// Most objects per run.
        max_objects: usize,
        /// Most bytes per run (at least one object is taken).
        max_bytes: Option<u64>,
    },
    /// A Delta table pinned at a version, optionally one partition of it.
    Delta {
        /// Table location.
        table: String,
        /// Pinned version.
        version: u64,
        /// Partition filter (`column=value`, or nested levels).
        partition: Option<Partition>,
        /// Only the rows this slice of the table owns (what an upstream
        /// stage committed for it); the slice id becomes this.
        slice: Option<String>,
    },
}

/// The logical date a slice implies: a date partition's value.
pub(super) fn implied_date(slice: &SliceSpec) -> Option<String> {
    match slice {
        SliceSpec::Partition { partition, .. } => crate::schedule::implied_by_partition(partition),
        // Files named as a partition (`--slice-id date=2026-10-01`, serve's
        // `files` with `partition`): the same run as the partition spelled
        // with `--input`.
        // (Read as before when it is no partition `--partition` accepts:
        // `event-date=2026-10-01` keeps its run key.)
        SliceSpec::Files { id: Some(id), .. } => match parse_partition(id) {
            Ok(p) => crate::schedule::implied_by_partition(&p),
            Err(_) => id
                .split_once('=')
                .and_then(|(c, v)| crate::schedule::implied_by_partition(&Partition::one(c, v))),
        },
        _ => None,
    }
}

/// Parse `K=V`, or nested levels `K=V/K2=V2` (at most [`MAX_LEVELS`],
/// each column once).
pub fn parse_partition(s: &str) -> Result<Partition, RunError> {
    let levels: Vec<&str> = s.split('/').collect();
    // A `..` or `.` after a `/` climbs the path, it starts no level
    // (`date=x/../y`): refused as the value it would be.
    if levels[1..].iter().any(|l| matches!(*l, ".." | ".")) {
        let value = s.split_once('=').map_or(s, |(_, v)| v);
        crate::slice::validate_segment("partition value", value)?;
    }
    if levels.len() > MAX_LEVELS {
        return Err(RunError::Usage(format!(
            "--partition `{}` has {} levels; at most {MAX_LEVELS} (e.g. date=2026-10-01/hour=07)",
            crate::text::clip_str(s, 300),
            levels.len()
        )));
    }
    let mut parsed: Vec<(String, String)> = Vec::with_capacity(levels.len());
    for level in levels {
        let (k, v) = parse_level(s, level)?;
        if parsed.iter().any(|(c, _)| *c == k) {
            return Err(RunError::Usage(format!(
                "--partition `{s}` names column `{k}` twice: each level is another column"
            )));
        }
        parsed.push((k, v));
    }
    let partition = Partition::of(parsed);
    // Its slice id, whole (255 bytes at most: it is in every row of an
    // append or merge table).
    crate::slice::validate_slice_id(&partition.to_string())?;
    Ok(partition)
}

/// One `K=V` level of the partition `whole`.
fn parse_level(whole: &str, level: &str) -> Result<(String, String), RunError> {
    let (k, v) = level
        .split_once('=')
        .filter(|(k, v)| !k.is_empty() && !v.is_empty())
        .ok_or_else(|| {
            RunError::Usage(format!(
                "--partition `{}` must look like column=value, e.g. date=2026-10-01 (or date=2026-10-01/hour=07 for nested partitions)",
                crate::text::clip_str(whole, 300)
            ))
        })?;
    if !k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(RunError::Usage(format!(
            "partition column `{}` must be letters, digits and _",
            crate::text::clip_str(k, 300)
        )));
    }
    // The value becomes a directory name below the dataset root.
    crate::slice::validate_segment("partition value", v)?;
    Ok((k.to_string(), v.to_string()))
}

/// Resolve a slice spec to pinned inputs; returns the slice and its kind
/// (`partition`, `files` or `delta`; a `--next` slice is resolved against
/// its table, in [`super::next`]).
pub(super) fn resolve(
    rt: &tokio::runtime::Runtime,
    spec: &SliceSpec,
) -> Result<(ResolvedSlice, &'static str), RunError> {
    Ok(match spec {
        SliceSpec::Partition { root, partition } => {
            (ResolvedSlice::from_partition(root, partition)?, "partition")
        }
        SliceSpec::Files { files, id } => {
            // Canonical paths: how the paths were typed must not matter.
            let id = match id {
                Some(id) => id.clone(),
                None => crate::slice::files_id(files)?,
            };
            (ResolvedSlice::from_files(&id, files)?, "files")
        }
        SliceSpec::Delta {
            table,
            version,
            partition,
            slice,
        } => (
            resolve_delta(
                rt,
                table,
                Pin::Version(*version),
                partition.as_ref(),
                slice.as_deref(),
            )?,
            "delta",
        ),
        SliceSpec::Next { .. } => {
            return Err(RunError::Usage(
                "a --next slice is resolved against its table".into(),
            ));
        }
    })
}

/// Which snapshot of a table is read.
#[derive(Debug, Clone, Copy)]
pub(super) enum Pin {
    /// A version (what `committed version N` says).
    Version(u64),
    /// An Iceberg snapshot by id, published or not (a branch write).
    Snapshot(i64),
    /// The current one (`main`'s head).
    Current,
}

/// The rows slice `slice` committed, as table `table` holds them at `pin`
/// (write-audit-publish reads its branch's snapshot so).
pub(super) fn resolve_table(
    rt: &tokio::runtime::Runtime,
    table: &str,
    pin: Pin,
    slice: &str,
) -> Result<ResolvedSlice, RunError> {
    resolve_delta(rt, table, pin, None, Some(slice))
}

/// A whole table listed at a version, nothing read yet: a side input's
/// files, checked (size, where they are) before any is hashed.
pub(super) struct Whole {
    snap: Snapshot,
    /// The version listed.
    pub(super) version: u64,
    /// The table's name in run specs (its URL, or an Iceberg catalog
    /// entry's canonical location).
    pub(super) name: String,
}

impl Whole {
    /// The table's folder, which its files' names are relative to.
    pub(super) fn root(&self) -> &url::Url {
        &self.snap.root
    }

    /// Its data files' names, relative to [`Whole::root`].
    pub(super) fn names(&self) -> impl Iterator<Item = &str> {
        self.snap.inputs.iter().map(|f| f.path.as_str())
    }

    /// Pin (hash) its files: zero rows of its schema when it has none.
    pub(super) fn pin(self) -> Result<ResolvedSlice, RunError> {
        let id = format!("delta-v{}", self.version);
        if self.snap.inputs.is_empty() {
            return Ok(ResolvedSlice::empty(
                &id,
                &self.snap.root,
                self.snap.schema,
            )?);
        }
        let (files, fields, values) = partition_constants(&self.snap);
        let slice = ResolvedSlice::from_names(&id, &self.snap.root, files)?;
        Ok(slice
            .with_constants(fields, values)
            .with_table_columns(&self.snap.columns))
    }
}

/// Table `table` listed whole at `version` (its current one when `None`).
pub(super) fn list_whole(
    rt: &tokio::runtime::Runtime,
    table: &str,
    version: Option<u64>,
) -> Result<Whole, RunError> {
    let opened = rt.block_on(Table::open_existing(table))?;
    let name = opened.target_name();
    let version = match version {
        Some(v) => v,
        None => opened
            .version()
            .ok_or_else(|| RunError::Usage(format!("{table} has no committed version to read")))?,
    };
    drop(opened);
    let snap = rt.block_on(snapshot(table, Pin::Version(version), None, None))?;
    Ok(Whole {
        snap,
        version,
        name,
    })
}

/// A whole table at `version` (its current one when `None`), pinned.
/// Returns it, the version read and the table's name in run specs.
pub(super) fn resolve_whole(
    rt: &tokio::runtime::Runtime,
    table: &str,
    version: Option<u64>,
) -> Result<(ResolvedSlice, u64, String), RunError> {
    let whole = list_whole(rt, table, version)?;
    let (version, name) = (whole.version, whole.name.clone());
    Ok((whole.pin()?, version, name))
}

/// What a pinned Delta snapshot holds for a slice: its files with the
/// partition values the log holds for them (not in the files), whether
/// the table marks rows with their owner, its root and its schema.
struct Snapshot {
    inputs: Vec<crate::table::InputFile>,
    rows_of: bool,
    /// The upstream slices read (see [`owners_of`]).
    owners: Vec<String>,
    root: url::Url,
    schema: arrow::datatypes::SchemaRef,
    /// What its files are read as ([`Table::read_columns`]).
    columns: arrow::datatypes::SchemaRef,
}

/// A Delta table pinned at `version`: optionally one partition, or only
/// the rows one upstream slice owns.
fn resolve_delta(
    rt: &tokio::runtime::Runtime,
    table: &str,
    pin: Pin,
    partition: Option<&Partition>,
    slice: Option<&str>,
) -> Result<ResolvedSlice, RunError> {
    // Read through the pinned snapshot: its files only, with the
    // partition values its log holds (not in the files).
    let snap = rt.block_on(snapshot(table, pin, partition, slice))?;
    // The run's slice id: the slice read, or the one the slices read lie
    // under (`date=D` for `date=D/*`).
    let under = slice.and_then(crate::slice::under);
    let slice = under.or(slice);
    if let Some(owner) = slice
        && snap.inputs.is_empty()
    {
        // The slice committed an empty output: zero rows, in the
        // table's schema (the owner column dropped, as when read).
        let mut resolved = ResolvedSlice::empty(owner, &snap.root, snap.schema)?;
        if snap.rows_of {
            resolved = resolved.with_row_filter(crate::table::OWNER_COLUMN, &snap.owners);
        }
        return Ok(resolved);
    }
    let (files, fields, values) = partition_constants(&snap);
    let id = match (slice, partition) {
        (Some(owner), _) => owner.to_string(),
        (None, Some(p)) => p.to_string(),
        (None, None) => match pin {
            Pin::Version(version) => format!("delta-v{version}"),
            Pin::Snapshot(id) => format!("snapshot-{id}"),
            Pin::Current => "current".to_string(),
        },
    };
    // Several upstream slices are read slice by slice, each in output
    // order (the order `input_files` gives), whatever the files are named.
    let resolved = match under {
        None => ResolvedSlice::from_names(&id, &snap.root, files)?,
        Some(_) => ResolvedSlice::from_names_in_order(&id, &snap.root, files)?,
    };
    let mut resolved = resolved
        .with_constants(fields, values)
        .with_table_columns(&snap.columns);
    if slice.is_some() && snap.rows_of {
        resolved = resolved.with_row_filter(crate::table::OWNER_COLUMN, &snap.owners);
    }
    Ok(resolved)
}

/// Open the table at `version` and list the files the slice reads.
async fn snapshot(
    table: &str,
    pin: Pin,
    partition: Option<&Partition>,
    slice: Option<&str>,
) -> Result<Snapshot, RunError> {
    let mut t = Table::open_existing(table).await?;
    let version = match pin {
        Pin::Version(v) => {
            t.load_version(v).await?;
            format!("version {v}")
        }
        Pin::Snapshot(id) => {
            t.pin_snapshot(id)?;
            format!("snapshot {id}")
        }
        Pin::Current => "the current version".to_string(),
    };
    let owners = match slice {
        Some(s) => owners_of(&t, s, &version).await?,
        None => Vec::new(),
    };
    let (inputs, rows_of) = t
        .input_files(partition, slice.map(|_| owners.as_slice()))
        .await?;
    // Files owned by slice (not a merge table's rows by owner).
    if slice.and_then(crate::slice::under).is_some() && !rows_of {
        check_owners(&t, &owners, &version).await?;
    }
    let schema = t.arrow_schema()?;
    Ok(Snapshot {
        inputs,
        rows_of,
        owners,
        root: t.url().clone(),
        schema,
        columns: t.read_columns()?,
    })
}

/// The upstream slices a read of `slice` takes at the loaded version
/// (`version` names it): `slice` itself, or every slice under it
/// (`date=D/*`: a daily stage reading an hourly one's hours). At least one
/// must have committed there (maybe an empty output): a mistyped slice
/// reads nothing, silently, from a merge table otherwise.
async fn owners_of(t: &Table, slice: &str, version: &str) -> Result<Vec<String>, RunError> {
    let (owners, what) = match crate::slice::under(slice) {
        Some(prefix) => (
            t.slices_under(prefix).await?,
            format!("a slice under `{prefix}/`"),
        ),
        None => (
            match t.slice_seq(slice).await? {
                0 => Vec::new(),
                _ => vec![slice.to_string()],
            },
            format!("slice `{slice}`"),
        ),
    };
    if owners.is_empty() {
        return Err(RunError::Slice(SliceError::Empty {
            slice: slice.to_string(),
            root: t.url().to_string(),
            hint: format!(
                "{version} of the table holds no commit of {what}: run the upstream stage for it first, or check the slice id and the version"
            ),
        }));
    }
    Ok(owners)
}

/// Each of several slices read at one version still holds there exactly
/// the files idem committed for it (on Delta, in a table whose files each
/// slice owns: a compaction or another writer's commit after one hour's
/// commit and before the pinned version would otherwise drop or change
/// that hour's rows silently).
async fn check_owners(t: &Table, owners: &[String], version: &str) -> Result<(), RunError> {
    if t.is_iceberg() {
        return Ok(());
    }
    for o in owners {
        if let Some(c) = t.slice_commit(o).await?
            && let Some(why) = t.slice_drift(&c).await?
        {
            return Err(RunError::from(crate::table::TableError::UnreadableInput {
                location: t.url().to_string(),
                detail: format!(
                    "slice `{o}` no longer holds at {version} what idem committed for it ({why}): rerun that slice upstream, then read again"
                ),
            }));
        }
    }
    Ok(())
}

/// The snapshot's files, and the partition columns (typed as the table
/// types them) with each file's values: the constants the reader adds.
#[allow(clippy::type_complexity)]
fn partition_constants(
    snap: &Snapshot,
) -> (
    Vec<String>,
    Vec<arrow::datatypes::Field>,
    Vec<(String, Vec<Option<String>>)>,
) {
    let mut files = Vec::with_capacity(snap.inputs.len());
    let mut values = Vec::with_capacity(snap.inputs.len());
    let mut columns: Vec<String> = Vec::new();
    for f in &snap.inputs {
        if columns.is_empty() {
            columns = f.partition_values.iter().map(|(k, _)| k.clone()).collect();
        }
        values.push((
            f.path.clone(),
            f.partition_values.iter().map(|(_, v)| v.clone()).collect(),
        ));
        files.push(f.path.clone());
    }
    let fields = columns
        .iter()
        .map(|c| {
            snap.schema
                .field_with_name(c)
                .map(|f| f.as_ref().clone().with_nullable(true))
                .unwrap_or_else(|_| {
                    arrow::datatypes::Field::new(c, arrow::datatypes::DataType::Utf8, true)
                })
        })
        .collect();
    (files, fields, values)
}

/// A table inside its own input (or the reverse) would read its own
/// output as input on the next run.
pub(super) fn check_not_inside(
    table: &url::Url,
    slice: &ResolvedSlice,
    kind: &str,
) -> Result<(), RunError> {
    if kind == "partition" {
        crate::slice::check_not_inside(table, &slice.root)?;
    } else if let Some(i) = slice
        .inputs
        .iter()
        .find(|i| crate::storage::contains(&crate::storage::as_dir(table), &slice.url_of(i)))
    {
        return Err(RunError::Usage(format!(
            "input {} lies inside the target table {table}: the run would read its own output",
            i.path,
        )));
    }
    Ok(())
}
