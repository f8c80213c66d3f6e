//! Reading a table's data files back, whichever the format: as a slice's
//! input ([`InputFile`]), and row by row as audit digests a slice's rows
//! ([`digest_file`]).

use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use crate::digest::OutputDigester;

/// One data file of a pinned table version, as a slice input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputFile {
    /// Its name relative to the table's root (the raw object name).
    pub path: String,
    /// Its partition values, sorted by column.
    pub partition_values: Vec<(String, Option<String>)>,
}

/// Decode one data file and feed its rows, each batch `prepare`d and put
/// in the output's form ([`as_output`]), to `digester`: how audit reads a
/// slice back, for either format.
pub(super) fn digest_file(
    bytes: bytes::Bytes,
    columns: Option<&[String]>,
    partition: Option<&crate::slice::Partition>,
    prepare: impl Fn(RecordBatch) -> RecordBatch,
    digester: &mut OutputDigester,
) -> Result<(), String> {
    let reader = ParquetRecordBatchReaderBuilder::try_new(bytes)
        .and_then(|b| b.build())
        .map_err(|e| e.to_string())?;
    for batch in reader {
        let batch = as_output(
            prepare(batch.map_err(|e| e.to_string())?),
            columns,
            partition,
        )
        .map_err(|e| e.to_string())?;
        digester.update(&batch).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// A data file's batch in the output's column order, with the partition
/// columns (which Delta keeps in the log, not in the file) put back where
/// the output had them, as the text the output had (an Iceberg file holds
/// them in the type the table declares).
fn as_output(
    batch: RecordBatch,
    columns: Option<&[String]>,
    partition: Option<&crate::slice::Partition>,
) -> Result<RecordBatch, arrow::error::ArrowError> {
    let Some(columns) = columns else {
        return Ok(batch);
    };
    let schema = batch.schema();
    let mut fields = Vec::with_capacity(columns.len());
    let mut arrays: Vec<ArrayRef> = Vec::with_capacity(columns.len());
    for name in columns {
        let typed = |f: &Field| !matches!(f.data_type(), DataType::Utf8);
        let slice_value = partition.and_then(|p| p.value_of(name));
        if let Some((i, f)) = schema.column_with_name(name) {
            if slice_value.is_some() && typed(f) {
                // A partition column the table declares typed (a date):
                // the output's text, which it was cast from exactly.
                fields.push(Field::new(name, DataType::Utf8, false));
                arrays.push(arrow::compute::cast(batch.column(i), &DataType::Utf8)?);
                continue;
            }
            fields.push(f.clone());
            arrays.push(batch.column(i).clone());
        } else if let Some(value) = partition.and_then(|p| p.value_of(name)) {
            fields.push(Field::new(name, DataType::Utf8, false));
            arrays.push(Arc::new(StringArray::from_iter_values(
                std::iter::repeat_n(value, batch.num_rows()),
            )));
        } else {
            return Err(arrow::error::ArrowError::SchemaError(format!(
                "the output's column `{name}` is not in the data file"
            )));
        }
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays)
}
