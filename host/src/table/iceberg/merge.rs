//! MERGE on a key for Iceberg tables, copy-on-write (idem writes no delete
//! files): every data file holding a row the slice's new output replaces
//! (its key is in the output) or drops (the slice owned it and its key is
//! gone) is rewritten without those rows; the output is added with the
//! owner column naming the slice. The commit deletes the rewritten files.
//! A merge reads every data file of the table (files carry no key
//! statistics yet to skip by).

use std::collections::HashSet;
use std::path::PathBuf;

use arrow::array::{Array, ArrayRef, BooleanArray, RecordBatch, StringArray};
use arrow::datatypes::{DataType, SchemaRef};
use arrow::row::{RowConverter, SortField};
use bytes::Bytes;
use iceberg::spec::{DataContentType, DataFile, TableMetadata};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use super::files::{STAGED_BATCH_ROWS, discard};
use super::schema::{conform_by_id, conform_older};
use super::write::{FileSpec, Sink};
use super::{Iceberg, ice_err};
use crate::table::commit::CommitRequest;
use crate::table::datafile::{staged_batches, with_text_column};
use crate::table::error::TableError;
use crate::table::mode::OWNER_COLUMN;

/// What a merge writes and deletes.
pub(super) struct Merged {
    /// New data files: the output, and the rewritten files' other rows.
    pub added: Vec<DataFile>,
    /// Paths of the data files it replaces.
    pub removed: HashSet<String>,
}

impl Iceberg {
    /// Rewrite the table's files for a merge of the staged output (see
    /// [`merge`]) against the table as `m` describes it.
    pub(super) async fn plan_merge(
        &self,
        req: &CommitRequest<'_>,
        exists: bool,
        m: &TableMetadata,
        staged: &[PathBuf],
        keys: &[String],
        attempt: usize,
    ) -> Result<Merged, TableError> {
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
            tokio::task::spawn_blocking(move || merge(spec, &staged, &paths, &keys, &slice))
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
}

/// The output batch with the owner column.
fn owned(batch: RecordBatch, slice: &str) -> Result<RecordBatch, TableError> {
    with_text_column(batch, OWNER_COLUMN, slice)
}

/// The key columns, as the table types them, and how to compare them.
struct Keys {
    names: Vec<String>,
    /// The table's types of the key columns (what keys are compared as).
    types: Vec<DataType>,
    converter: RowConverter,
}

impl Keys {
    /// The key columns `keys` of the table whose columns are `table`.
    fn new(table: &SchemaRef, keys: &[String]) -> Result<Self, TableError> {
        let types = keys
            .iter()
            .map(|k| {
                table
                    .field_with_name(k)
                    .map(|f| SortField::new(f.data_type().clone()))
                    .map_err(|_| TableError::NoKeyColumn {
                        column: k.clone(),
                        columns: table
                            .fields()
                            .iter()
                            .map(|f| f.name().as_str())
                            .collect::<Vec<_>>()
                            .join(", "),
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Keys {
            names: keys.to_vec(),
            types: keys
                .iter()
                .filter_map(|k| table.field_with_name(k).ok().map(|f| f.data_type().clone()))
                .collect(),
            converter: RowConverter::new(types).map_err(|e| TableError::Output(e.to_string()))?,
        })
    }
    fn columns(&self, b: &RecordBatch) -> Result<Vec<ArrayRef>, TableError> {
        self.names
            .iter()
            .zip(&self.types)
            .map(|(k, t)| {
                let c = b.column_by_name(k).ok_or_else(|| TableError::NoKeyColumn {
                    column: k.clone(),
                    columns: b
                        .schema()
                        .fields()
                        .iter()
                        .map(|f| f.name().as_str())
                        .collect::<Vec<_>>()
                        .join(", "),
                })?;
                // Another writer's file may store a key as another width
                // of the same type: compared as the table's type.
                if c.data_type() == t {
                    return Ok(c.clone());
                }
                arrow::compute::cast(c, t)
                    .map_err(|e| TableError::Output(format!("key column `{k}`: {e}")))
            })
            .collect()
    }

    fn rows(&self, b: &RecordBatch) -> Result<arrow::row::Rows, TableError> {
        self.converter
            .convert_columns(&self.columns(b)?)
            .map_err(|e| TableError::Output(e.to_string()))
    }
}

/// Which rows of the table's files a merge drops: those whose key the
/// output has (it replaces them), and the slice's rows whose key it no
/// longer has. A key the output shares with another slice's row is
/// refused.
struct Dropping<'a> {
    keys: &'a Keys,
    /// The output's keys.
    out_keys: HashSet<Vec<u8>>,
    slice: &'a str,
}

impl Dropping<'_> {
    /// Which rows of `batch` stay, and how many go. Decided from the key
    /// and owner columns only.
    fn decide(&self, batch: &RecordBatch) -> Result<(BooleanArray, usize), TableError> {
        let (keys, slice) = (self.keys, self.slice);
        let rows = keys.rows(batch)?;
        let owner = batch
            .column_by_name(OWNER_COLUMN)
            .and_then(|c| arrow::compute::cast(c, &DataType::Utf8).ok())
            .and_then(|c| c.as_any().downcast_ref::<StringArray>().cloned());
        let mut keep = Vec::with_capacity(batch.num_rows());
        let mut dropped = 0;
        for (i, row) in rows.iter().enumerate() {
            let in_output = self.out_keys.contains(row.as_ref());
            let row_owner = owner.as_ref().filter(|o| o.is_valid(i)).map(|o| o.value(i));
            if in_output && let Some(other) = row_owner.filter(|o| *o != slice) {
                let example = keys
                    .columns(batch)?
                    .iter()
                    .map(|c| arrow::util::display::array_value_to_string(c, i).unwrap_or_default())
                    .collect::<Vec<_>>()
                    .join(", ");
                return Err(TableError::KeyOwned {
                    keys: keys.names.join(", "),
                    example,
                    owner: other.to_string(),
                    slice: slice.to_string(),
                });
            }
            let drop = in_output || row_owner == Some(slice);
            dropped += drop as usize;
            keep.push(!drop);
        }
        Ok((BooleanArray::from(keep), dropped))
    }
}

/// Plan and write the merge of the staged output into the table whose
/// live data files are `live`. On error the files written so far are
/// returned with it (to delete).
pub(super) fn merge(
    spec: FileSpec,
    staged: &[PathBuf],
    live: &[String],
    keys: &[String],
    slice: &str,
) -> Result<Merged, Box<(TableError, Vec<DataFile>)>> {
    let (io, handle) = (spec.io.clone(), spec.handle.clone());
    let table = spec.schema.clone();
    let keys = Keys::new(&table, keys).map_err(|e| Box::new((e, Vec::new())))?;
    let mut sink = Sink::new(spec);
    let result = (|| {
        // 1. The output's keys (unique and non-null: checked while staged).
        let dropping = Dropping {
            keys: &keys,
            out_keys: output_keys(staged, slice, &table, &keys)?,
            slice,
        };
        // 2. Every data file: rewritten without the rows the output
        //    replaces or drops; a key another slice owns is refused.
        let mut removed = HashSet::new();
        for path in live {
            let bytes = handle
                .block_on(async { io.new_input(path)?.read().await })
                .map_err(ice_err(format!("reading {path}")))?;
            if rewrite(path, bytes, &dropping, &table, &mut sink)? {
                removed.insert(path.clone());
            }
        }
        // 3. The output, owned by the slice.
        for batch in staged_batches(staged, STAGED_BATCH_ROWS) {
            sink.push(owned(batch?, slice)?)?;
        }
        sink.finish()?;
        Ok(removed)
    })();
    match result {
        Ok(removed) => Ok(Merged {
            added: std::mem::take(&mut sink.files),
            removed,
        }),
        Err(e) => Err(Box::new((e, std::mem::take(&mut sink.files)))),
    }
}

/// The keys of the staged output (owned by the slice, in the table's
/// columns).
fn output_keys(
    staged: &[PathBuf],
    slice: &str,
    table: &SchemaRef,
    keys: &Keys,
) -> Result<HashSet<Vec<u8>>, TableError> {
    let mut out_keys: HashSet<Vec<u8>> = HashSet::new();
    for batch in staged_batches(staged, STAGED_BATCH_ROWS) {
        let batch = conform_older(owned(batch?, slice)?, table)?;
        for row in keys.rows(&batch)?.iter() {
            out_keys.insert(row.as_ref().to_vec());
        }
    }
    Ok(out_keys)
}

/// The data file at `path` (its `bytes`) without the rows `dropping`
/// drops, into `sink`; whether any row went (else nothing is written and
/// the file stays). A file's other columns are decoded only when it is
/// rewritten, batch by batch.
fn rewrite(
    path: &str,
    bytes: Bytes,
    dropping: &Dropping<'_>,
    table: &SchemaRef,
    sink: &mut Sink,
) -> Result<bool, TableError> {
    let err = |e: &dyn std::fmt::Display| TableError::Output(format!("reading {path}: {e}"));
    let builder = ParquetRecordBatchReaderBuilder::try_new(bytes.clone()).map_err(|e| err(&e))?;
    let mut wanted: Vec<&str> = dropping.keys.names.iter().map(String::as_str).collect();
    if builder.schema().field_with_name(OWNER_COLUMN).is_ok() {
        wanted.push(OWNER_COLUMN);
    }
    let mask = parquet::arrow::ProjectionMask::columns(builder.parquet_schema(), wanted);
    let mut dropped = 0;
    for batch in builder.with_projection(mask).build().map_err(|e| err(&e))? {
        dropped += dropping.decide(&batch.map_err(|e| err(&e))?)?.1;
    }
    if dropped == 0 {
        return Ok(false);
    }
    let reader = ParquetRecordBatchReaderBuilder::try_new(bytes)
        .and_then(|b| b.build())
        .map_err(|e| err(&e))?;
    for batch in reader {
        let batch = conform_by_id(batch.map_err(|e| err(&e))?, table)?;
        let (keep, _) = dropping.decide(&batch)?;
        let kept = arrow::compute::filter_record_batch(&batch, &keep)
            .map_err(|e| TableError::Output(e.to_string()))?;
        sink.push(kept)?;
    }
    Ok(true)
}
