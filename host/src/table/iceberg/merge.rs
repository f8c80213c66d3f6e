//! MERGE on a key for Iceberg tables, copy-on-write (idem writes no delete
//! files): every data file holding a row the slice's new output replaces
//! (its key is in the output) or drops (the slice owned it and its key is
//! gone) is rewritten without those rows; the output is added with the
//! owner column naming the slice. The commit deletes the rewritten files.
//! A merge reads every data file of the table (files carry no key
//! statistics yet to skip by).

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, BooleanArray, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use arrow::row::{RowConverter, SortField};
use iceberg::spec::DataFile;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use super::write::{FileSpec, Sink};
use super::{TableError, conform, ice_err, staged_batches};
use crate::table::OWNER_COLUMN;

/// What a merge writes and deletes.
pub(super) struct Merged {
    /// New data files: the output, and the rewritten files' other rows.
    pub added: Vec<DataFile>,
    /// Paths of the data files it replaces.
    pub removed: HashSet<String>,
}

/// The output batch with the owner column.
fn owned(batch: RecordBatch, slice: &str) -> Result<RecordBatch, TableError> {
    let mut fields: Vec<Field> = batch
        .schema()
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    fields.push(Field::new(OWNER_COLUMN, DataType::Utf8, false));
    let mut cols: Vec<ArrayRef> = batch.columns().to_vec();
    cols.push(Arc::new(StringArray::from(vec![slice; batch.num_rows()])));
    RecordBatch::try_new(Arc::new(Schema::new(fields)), cols)
        .map_err(|e| TableError::Output(e.to_string()))
}

struct Keys {
    names: Vec<String>,
    converter: RowConverter,
}

impl Keys {
    fn columns(&self, b: &RecordBatch) -> Result<Vec<ArrayRef>, TableError> {
        self.names
            .iter()
            .map(|k| {
                b.column_by_name(k)
                    .cloned()
                    .ok_or_else(|| TableError::NoKeyColumn {
                        column: k.clone(),
                        columns: b
                            .schema()
                            .fields()
                            .iter()
                            .map(|f| f.name().as_str())
                            .collect::<Vec<_>>()
                            .join(", "),
                    })
            })
            .collect()
    }

    fn rows(&self, b: &RecordBatch) -> Result<arrow::row::Rows, TableError> {
        self.converter
            .convert_columns(&self.columns(b)?)
            .map_err(|e| TableError::Output(e.to_string()))
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
) -> Result<Merged, (TableError, Vec<DataFile>)> {
    let (io, handle) = (spec.io.clone(), spec.handle.clone());
    let table = spec.schema.clone();
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
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| (e, Vec::new()))?;
    let keys = Keys {
        names: keys.to_vec(),
        converter: RowConverter::new(types)
            .map_err(|e| (TableError::Output(e.to_string()), Vec::new()))?,
    };
    let mut sink = Sink::new(spec);
    let result = (|| {
        // 1. The output's keys (unique and non-null: checked while staged).
        let mut out_keys: HashSet<Vec<u8>> = HashSet::new();
        for batch in staged_batches(staged) {
            let batch = conform(owned(batch?, slice)?, &table)?;
            for row in keys.rows(&batch)?.iter() {
                out_keys.insert(row.as_ref().to_vec());
            }
        }
        // 2. Every data file: rewritten without the rows the output
        //    replaces or drops; a key another slice owns is refused.
        let mut removed = HashSet::new();
        for path in live {
            let bytes = handle
                .block_on(async { io.new_input(path)?.read().await })
                .map_err(ice_err(format!("reading {path}")))?;
            let batches = || -> Result<Vec<RecordBatch>, TableError> {
                ParquetRecordBatchReaderBuilder::try_new(bytes.clone())
                    .and_then(|b| b.build())
                    .map_err(|e| TableError::Output(format!("reading {path}: {e}")))?
                    .map(|b| {
                        b.map_err(|e| TableError::Output(format!("reading {path}: {e}")))
                            .and_then(|b| conform(b, &table))
                    })
                    .collect()
            };
            let mut kept_batches = Vec::new();
            let mut dropped = 0usize;
            for batch in batches()? {
                let rows = keys.rows(&batch)?;
                let owner = batch
                    .column_by_name(OWNER_COLUMN)
                    .and_then(|c| c.as_any().downcast_ref::<StringArray>().cloned());
                let mut keep = Vec::with_capacity(batch.num_rows());
                for (i, row) in rows.iter().enumerate() {
                    let in_output = out_keys.contains(row.as_ref());
                    let row_owner = owner.as_ref().filter(|o| o.is_valid(i)).map(|o| o.value(i));
                    if in_output && let Some(other) = row_owner.filter(|o| *o != slice) {
                        let example = keys
                            .columns(&batch)?
                            .iter()
                            .map(|c| {
                                arrow::util::display::array_value_to_string(c, i)
                                    .unwrap_or_default()
                            })
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
                kept_batches.push((batch, BooleanArray::from(keep)));
            }
            if dropped > 0 {
                removed.insert(path.clone());
                for (batch, keep) in kept_batches {
                    let kept = arrow::compute::filter_record_batch(&batch, &keep)
                        .map_err(|e| TableError::Output(e.to_string()))?;
                    sink.push(kept)?;
                }
            }
        }
        // 3. The output, owned by the slice.
        for batch in staged_batches(staged) {
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
        Err(e) => Err((e, std::mem::take(&mut sink.files))),
    }
}
