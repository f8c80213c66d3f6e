//! A commit's data files: where and how they are written into the table
//! ([`FileSpec`]), written from the staged output (see `write`), and
//! deleted again when no snapshot names them.

use std::path::PathBuf;

use iceberg::io::FileIO;
use iceberg::spec::{DataFile, TableMetadata};

use super::Iceberg;
use super::ownership::slice_tag;
use super::schema::{arrow_schema_of, with_field_ids};
use super::write::{FileSpec, Sink};
use crate::table::commit::CommitRequest;
use crate::table::datafile::{staged_batches, target_file_bytes, typed_partition, with_partition};
use crate::table::error::TableError;
use crate::table::mode::Mode;
use crate::table::schema_change::SchemaChange;

/// Rows per batch when reading the staged output back.
pub(super) const STAGED_BATCH_ROWS: usize = 8192;

impl Iceberg {
    /// How this commit's data files are written into the table `m`.
    pub(super) fn file_spec(
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
        let schema = with_field_ids(arrow_schema_of(m)?.as_ref(), m.current_schema());
        let (dir, partition) = match req.mode {
            Mode::OverwritePartition { partition } => {
                let mut dir = "data/".to_string();
                for (column, value) in partition.levels() {
                    dir.push_str(&format!("{}={}/", safe(column), safe(value)));
                }
                (dir, Some(partition_literals(partition, &schema)?))
            }
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
            // Unique per process, commit and attempt: an attempt never
            // writes over the files of another (nor of one that may have
            // committed; a write-audit-publish run commits to its branch
            // again when main moves).
            nonce: match self.commits {
                0 | 1 => format!("{}a{attempt}", &self.attempt[..12]),
                n => format!("{}c{n}a{attempt}", &self.attempt[..12]),
            },
            schema,
            spec_id: m.default_partition_spec_id(),
            partition,
            target: target_file_bytes()?,
            fill: req.schema_change == SchemaChange::AppendNewColumns,
        })
    }

    /// Write the staged output into data files of the table (not yet
    /// committed), each uploaded as soon as it is complete (memory: one
    /// file): the table's field ids on every column, the partition column
    /// added for overwrite-partition. On failure the files already
    /// uploaded are deleted.
    pub(super) async fn write_files(
        &self,
        req: &CommitRequest<'_>,
        staged: &[PathBuf],
        m: &TableMetadata,
        attempt: usize,
    ) -> Result<Vec<DataFile>, TableError> {
        let spec = self.file_spec(req, m, attempt)?;
        let mode = req.mode.clone();
        let staged = staged.to_vec();
        // The table's columns: the partition columns' types among them.
        let table = spec.schema.clone();
        // Decoding and encoding are CPU work: off the async executor; each
        // complete file is uploaded from there.
        tokio::task::spawn_blocking(move || {
            let (io, handle) = (spec.io.clone(), spec.handle.clone());
            let mut sink = Sink::new(spec);
            let result = (|| {
                for batch in staged_batches(&staged, STAGED_BATCH_ROWS) {
                    let batch = with_partition(batch?, &mode)?;
                    sink.push(typed_partition(batch, &mode, &table)?)?;
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
}

/// The slice's partition values as the manifests' literals, each in the
/// type the table (its columns `table`) declares its column with (text, a
/// date, an integer).
fn partition_literals(
    partition: &crate::slice::Partition,
    table: &arrow::datatypes::Schema,
) -> Result<Vec<iceberg::spec::Literal>, TableError> {
    partition
        .levels()
        .iter()
        .map(|(column, value)| {
            let t = table
                .field_with_name(column)
                .map(|f| f.data_type().clone())
                .unwrap_or(arrow::datatypes::DataType::Utf8);
            super::partition_value::literal(value, &t).map_err(|why| {
                TableError::Partitioning(format!(
                    "the table's partition column `{column}` is {t}, and the slice's value `{}` {why}: name the partition as the table stores it, or use a table partitioned on a string column",
                    crate::text::clip_str(value, 64)
                ))
            })
        })
        .collect()
}

/// Delete data files no snapshot names (best effort: an orphan is
/// harmless, and expire/orphan-file cleanup removes it).
pub(super) async fn discard(io: &FileIO, files: &[DataFile]) {
    for f in files {
        if let Err(e) = io.delete(f.file_path()).await {
            tracing::warn!(
                "could not delete the uncommitted data file {}: {e}",
                f.file_path()
            );
        }
    }
}
