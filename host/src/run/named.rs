//! A slice and a mode as a caller names them: the CLI's flags (`--input`,
//! `--partition`, `--files`, `--table-version` or `--iceberg-snapshot`,
//! `--mode`, `--key`) and the
//! Python package's keywords (`input=`, `partition=`, ...) are the same
//! names, turned into a [`SliceSpec`] and a [`Mode`] here, once.

use std::path::PathBuf;

use super::{RunError, SliceSpec, parse_partition};
use crate::slice::Partition;
use crate::table::Mode;

/// The names of a slice: one of `input` + `partition` (a dataset's hive
/// partition), `input` + `delta_version` or `iceberg_snapshot` (a pinned
/// Delta or Iceberg table, optionally one partition or one upstream slice
/// of it), `input` + `next` (the next objects of an append-only prefix),
/// or `files`.
#[derive(Debug, Clone, Default)]
pub struct NamedSlice {
    /// A Parquet dataset root, a Delta table, or an append-only prefix.
    pub input: Option<String>,
    /// `column=value`: the dataset's partition, or the pinned table's;
    /// also the target partition for overwrite-partition.
    pub partition: Option<String>,
    /// An explicit list of Parquet files.
    pub files: Vec<PathBuf>,
    /// The slice id of a file list (default: the partition, else derived
    /// from the file names).
    pub slice_id: Option<String>,
    /// The input table at this version (`--table-version`, formerly
    /// `--delta-version`: a Delta version or an Iceberg snapshot's
    /// sequence number).
    pub delta_version: Option<u64>,
    /// The input Iceberg table at the snapshot with this id (pinned as
    /// its sequence number: the run key is the same either way).
    pub iceberg_snapshot: Option<i64>,
    /// With `delta_version`: only the rows this upstream slice owns.
    pub delta_slice: Option<String>,
    /// The next objects of the append-only prefix `input`.
    pub next: bool,
    /// With `next`: most objects per run.
    pub max_objects: usize,
    /// With `next`: most bytes per run (at least one object is taken).
    pub max_bytes: Option<u64>,
}

impl NamedSlice {
    /// The partition, parsed (one level or nested).
    pub fn partition(&self) -> Result<Option<Partition>, RunError> {
        self.partition.as_deref().map(parse_partition).transpose()
    }

    /// The slice these names describe (an Iceberg snapshot id is looked
    /// up in its table, so this reads the table's metadata).
    pub fn spec(&self) -> Result<SliceSpec, RunError> {
        let a = &self.with_snapshot_pinned()?;
        let partition = a.partition()?;
        let usage = |m: &str| Err(RunError::Usage(m.into()));
        if a.next && (partition.is_some() || a.delta_version.is_some() || !a.files.is_empty()) {
            return usage(
                "next takes an input prefix alone (no partition, Delta version or files)",
            );
        }
        if a.delta_slice.is_some() && a.delta_version.is_none() {
            return usage(
                "a table slice (--table-slice) needs the table version it is read at (--table-version N or --iceberg-snapshot ID)",
            );
        }
        Ok(
            match (&a.input, a.delta_version, partition, a.files.is_empty()) {
                (Some(root), None, None, true) if a.next => SliceSpec::Next {
                    root: root.clone(),
                    max_objects: a.max_objects,
                    max_bytes: a.max_bytes,
                },
                (Some(table), Some(version), partition, true) => SliceSpec::Delta {
                    table: table.clone(),
                    version,
                    // With a Delta slice, the partition names only the target's.
                    partition: partition.filter(|_| a.delta_slice.is_none()),
                    slice: a.delta_slice.clone(),
                },
                (Some(root), None, Some(partition), true) => SliceSpec::Partition {
                    root: PathBuf::from(root),
                    partition,
                },
                (None, None, _, false) => SliceSpec::Files {
                    files: a.files.clone(),
                    id: a.slice_id.clone().or(a.partition.clone()),
                },
                (Some(_), None, None, true) => {
                    return usage(
                        "an input needs a partition column=value (a dataset partition) or a table version (--table-version N, or --iceberg-snapshot ID)",
                    );
                }
                _ => {
                    return usage(
                        "give one slice: an input ROOT with a partition K=V, an input TABLE with a table version [and a partition K=V], or a list of files",
                    );
                }
            },
        )
    }

    /// These names with an Iceberg snapshot id replaced by the version
    /// it is (its sequence number).
    fn with_snapshot_pinned(&self) -> Result<NamedSlice, RunError> {
        let Some(id) = self.iceberg_snapshot else {
            return Ok(self.clone());
        };
        let usage = |m: &str| Err(RunError::Usage(m.into()));
        if self.delta_version.is_some() {
            return usage("give the input table's version or its Iceberg snapshot id, not both");
        }
        let (Some(table), true, false) = (&self.input, self.files.is_empty(), self.next) else {
            return usage("an Iceberg snapshot id pins an input table: give it with --input TABLE");
        };
        let version = super::runtime()?.block_on(async {
            crate::table::Table::open_existing(table)
                .await?
                .version_of_snapshot(id)
        })?;
        Ok(NamedSlice {
            delta_version: Some(version),
            iceberg_snapshot: None,
            ..self.clone()
        })
    }

    /// The mode `name` (with merge `keys`), or the default: a Delta slice
    /// read into a named partition overwrites that partition; otherwise
    /// the run decides ([`super::Run`] without a mode). Without a
    /// partition, overwrite-partition takes the slice's own.
    pub fn mode(&self, name: Option<&str>, keys: &[String]) -> Result<Option<Mode>, RunError> {
        let partition = self.partition()?;
        let default =
            (self.delta_slice.is_some() && partition.is_some()).then_some("overwrite-partition");
        parse_mode(name.or(default), keys, partition)
    }
}

/// A mode's name and merge keys as a [`Mode`] (`None`: no name given).
/// Without a partition, overwrite-partition takes the slice's own (a
/// Delta or dated slice). A merge without keys is left to the run to
/// refuse.
pub fn parse_mode(
    name: Option<&str>,
    keys: &[String],
    partition: Option<Partition>,
) -> Result<Option<Mode>, RunError> {
    let Some(name) = name else {
        return Ok(None);
    };
    let partition = || Ok::<_, std::convert::Infallible>(partition.unwrap_or_default());
    let Ok(parsed) = Mode::parse(name, keys, partition);
    match parsed {
        Some(mode) => Ok(Some(mode)),
        None => Err(RunError::Usage(format!(
            "unknown mode `{name}`: use {}",
            Mode::NAMES
        ))),
    }
}
