//! A version of a Delta table as a slice's input: its data files, with
//! their partition values, optionally one partition's or one slice's; what
//! cannot be read file by file as plain Parquet is refused by name.

use deltalake::kernel::Add;

use super::{Delta, MODE_PROPERTY, delta_err, ownership};
use crate::table::error::TableError;
use crate::table::mode::{Mode, OWNER_COLUMN};
use crate::table::readback::InputFile;

impl Delta {
    /// The data files of the loaded version as a slice input: each file's
    /// location and its partition values (Delta keeps those in the log, not
    /// in the files), optionally limited to partition `column = value`.
    /// Tables whose rows cannot be read file by file as plain Parquet
    /// (deletion vectors, column mapping) are refused with a clear error.
    ///
    /// With `owners`, only those slices' rows: in an append or
    /// overwrite-partition table every data file belongs to one slice (its
    /// tags say which), so theirs; in a merge table files mix slices, so
    /// every file, and the second value is `true`: keep only the rows whose
    /// owner column ([`OWNER_COLUMN`]) names one of them.
    pub async fn input_files(
        &self,
        partition: Option<&crate::slice::Partition>,
        owners: Option<&[String]>,
    ) -> Result<(Vec<InputFile>, bool), TableError> {
        let rows_of = self.check_readable(owners.and_then(|o| o.first()).map(String::as_str))?;
        let mut out = Vec::new();
        let mut order = Vec::new();
        for f in self.data_files().await?.iter() {
            if partition.is_some_and(|p| !ownership::in_partition(f, p)) {
                continue;
            }
            if let Some(owners) = owners
                && !rows_of
                && !ownership::tag(f, ownership::TAG_SLICE)
                    .is_some_and(|t| owners.iter().any(|o| o == t))
            {
                continue;
            }
            out.push(self.input_file(f)?);
            order.push((read_rank(f, owners.filter(|_| !rows_of)), f.path.clone()));
        }
        // Slice by slice (in `owners`' order), each in output order.
        let mut ranked: Vec<_> = order.into_iter().zip(out).collect();
        ranked.sort_by(|a, b| a.0.cmp(&b.0));
        Ok((ranked.into_iter().map(|(_, f)| f).collect(), rows_of))
    }

    /// The table can be read as plain Parquet files (no column mapping),
    /// and `owner`'s rows selected: whether by the owner column (a merge
    /// table: `true`) or by file (`false`).
    fn check_readable(&self, owner: Option<&str>) -> Result<bool, TableError> {
        let snapshot = self
            .delta
            .snapshot()
            .map_err(delta_err("reading the snapshot"))?;
        let rows_of = match (
            owner,
            snapshot.metadata().configuration().get(MODE_PROPERTY),
        ) {
            (None, _) => false,
            (Some(_), Some(m)) if m == Mode::Merge { keys: vec![] }.name() => {
                if self.arrow_schema()?.field_with_name(OWNER_COLUMN).is_err() {
                    return Err(self.unsupported(format!(
                        "the merge table has no `{OWNER_COLUMN}` column to select a slice's rows by"
                    )));
                }
                true
            }
            (Some(_), Some(_)) => false,
            (Some(owner), None) => {
                return Err(self.unsupported(format!(
                    "the rows of slice `{owner}` can only be selected in a table idem writes (it records which slice owns which rows); this table was not created by idem. Read a version or a partition of it instead"
                )));
            }
        };
        if let Some(mode) = snapshot
            .metadata()
            .configuration()
            .get("delta.columnMapping.mode")
            .filter(|m| m.as_str() != "none")
        {
            return Err(self.unsupported(format!(
                "the table uses column mapping (mode `{mode}`), which idem cannot read yet: physical column names differ from the logical ones. Copy the version into a table without column mapping"
            )));
        }
        Ok(rows_of)
    }

    /// Data file `f` as an input file, unless its rows cannot be read as
    /// they are (deleted in place, or the file lies elsewhere).
    fn input_file(&self, f: &Add) -> Result<InputFile, TableError> {
        if f.deletion_vector.is_some() {
            return Err(self.unsupported(format!(
                "data file {} has a deletion vector (rows deleted in place), which idem cannot apply yet: purge them first (REORG TABLE ... APPLY (PURGE)) or copy the version into a new table",
                f.path
            )));
        }
        let mut values: Vec<(String, Option<String>)> = f
            .partition_values
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        values.sort();
        // Add paths are relative (and already percent-decoded by
        // delta-rs); absolute ones (shallow clones) are not read.
        if f.path.contains("://") || f.path.starts_with('/') {
            return Err(self.unsupported(format!(
                "data file {} is an absolute path (a shallow clone?): copy the version into a table of its own",
                f.path
            )));
        }
        Ok(InputFile {
            path: f.path.clone(),
            partition_values: values,
        })
    }

    /// The table cannot be read as a slice input: `what` says why.
    fn unsupported(&self, what: String) -> TableError {
        TableError::UnreadableInput {
            location: self.url.to_string(),
            detail: what,
        }
    }
}

/// Where data file `f` comes in a read of `owners`' rows: its slice's
/// place among them, then its place in the slice's output (then its
/// path: files of other reads, and of a merge table, by path).
fn read_rank(f: &Add, owners: Option<&[String]>) -> (usize, usize) {
    let Some(owners) = owners else {
        return (0, 0);
    };
    let slice = ownership::tag(f, ownership::TAG_SLICE);
    let rank = owners
        .iter()
        .position(|o| Some(o.as_str()) == slice)
        .unwrap_or(usize::MAX);
    let part = ownership::tag(f, ownership::TAG_PART)
        .and_then(|p| p.parse().ok())
        .unwrap_or(usize::MAX);
    (rank, part)
}
