//! Writing a slice's staged output into the table's data files (not yet
//! committed: nothing is visible until the log names them).

use std::path::Path;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, RecordBatch, StringArray};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Field, Schema};
use deltalake::DeltaTable;
use deltalake::kernel::Add;
use deltalake::writer::{DeltaWriter as _, RecordBatchWriter};
use object_store::ObjectStoreExt as _;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use super::{Mode, TableError};

/// Rows per batch when streaming the staged output into data files.
const BATCH_ROWS: usize = 64 * 1024;

fn write_err(e: impl std::fmt::Display) -> TableError {
    TableError::Delta {
        what: "writing data files".into(),
        detail: e.to_string(),
    }
}

/// Write the staged Parquet files into new data files of `delta`, in order,
/// and return their `add` actions in output order (not yet committed).
pub(super) async fn write(
    delta: &DeltaTable,
    staged: &[std::path::PathBuf],
    mode: &Mode,
    target_file_bytes: u64,
) -> Result<Vec<Add>, TableError> {
    if staged.is_empty() {
        return Ok(Vec::new());
    }
    let mut writer = RecordBatchWriter::for_table(delta)
        .map_err(write_err)?
        .with_target_file_size(target_file_bytes)
        .with_writer_properties(super::writer_properties());
    for path in staged {
        for batch in read_staged(path)? {
            let batch = with_partition(batch?, mode)?;
            writer.write(batch).await.map_err(classify_write)?;
        }
    }
    writer.flush().await.map_err(write_err)
}

/// Type errors are the output's fault; say so.
fn classify_write(e: deltalake::DeltaTableError) -> TableError {
    use deltalake::DeltaTableError as E;
    let text = e.to_string();
    // A storage failure is never a schema problem, whatever its text (a
    // table URL may well contain "null" or "schema").
    let storage = matches!(e, E::ObjectStore { .. } | E::Io { .. });
    let schema = matches!(e, E::SchemaMismatch { .. } | E::Arrow { .. })
        || text.contains("chema")
        || text.contains("cast")
        || text.contains("null");
    if !storage && schema {
        TableError::Output(format!(
            "the output does not fit the table's schema ({text}). A changed transform needs a new table, or a schema migration of this one"
        ))
    } else {
        write_err(text)
    }
}

fn read_staged(
    path: &Path,
) -> Result<impl Iterator<Item = Result<RecordBatch, TableError>>, TableError> {
    let err = |e: &dyn std::fmt::Display| TableError::Staged(format!("{}: {e}", path.display()));
    let file = std::fs::File::open(path).map_err(|e| err(&e))?;
    let reader = ParquetRecordBatchReaderBuilder::try_new(file)
        .map_err(|e| err(&e))?
        .with_batch_size(BATCH_ROWS)
        .build()
        .map_err(|e| err(&e))?;
    let path = path.to_path_buf();
    Ok(reader.map(move |b| b.map_err(|e| TableError::Staged(format!("{}: {e}", path.display())))))
}

/// For overwrite-partition: the output with the slice's partition column.
/// A column the output already has must hold the slice's value in every
/// row: a slice writes only its own partition.
fn with_partition(batch: RecordBatch, mode: &Mode) -> Result<RecordBatch, TableError> {
    let Mode::OverwritePartition { column, value } = mode else {
        return Ok(batch);
    };
    if let Some(col) = batch.column_by_name(column) {
        // Delta keeps partition values as text in the log; only a text
        // column round-trips exactly (and digests the same when read back).
        if !matches!(
            col.data_type(),
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
        ) {
            return Err(TableError::Output(format!(
                "the output's partition column `{column}` is {}, but a partition column must be text: cast it to a string in the transform, or drop it (idem adds it)",
                col.data_type()
            )));
        }
        let text = cast(col, &DataType::Utf8).map_err(|e| {
            TableError::Output(format!(
                "partition column `{column}` cannot be read as text: {e}"
            ))
        })?;
        let text = text
            .as_any()
            .downcast_ref::<StringArray>()
            .ok_or_else(|| TableError::Output(format!("partition column `{column}`")))?;
        if let Some(i) = (0..text.len()).find(|&i| text.is_null(i) || text.value(i) != value) {
            let got = if text.is_null(i) {
                "null"
            } else {
                text.value(i)
            };
            return Err(TableError::Output(format!(
                "the output's partition column `{column}` holds `{got}` (row {i} of a batch), but this slice owns only {column}={value}: drop the column from the output, or run the slice that owns that partition"
            )));
        }
        return Ok(batch);
    }
    let mut fields: Vec<Field> = batch
        .schema()
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    fields.push(Field::new(column, DataType::Utf8, false));
    let mut columns: Vec<ArrayRef> = batch.columns().to_vec();
    columns.push(Arc::new(StringArray::from(vec![
        value.as_str();
        batch.num_rows()
    ])));
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)
        .map_err(|e| TableError::Output(e.to_string()))
}

/// Delete data files that were written but never committed (a lost race or
/// a failed commit): they are invisible to readers; this only saves space.
pub(super) async fn discard(delta: &DeltaTable, adds: &[Add]) {
    let store = delta.log_store().object_store(None);
    for a in adds {
        let path = deltalake::Path::from(a.path.as_str());
        if let Err(e) = store.delete(&path).await {
            tracing::debug!("could not delete uncommitted data file {}: {e}", a.path);
        }
    }
}

/// The output must land in the table exactly: every output column must
/// exist in the table with the same type, up to encodings that hold the
/// same values (text and binary in their plain, large and view forms).
/// Anything Delta would convert (e.g. nanosecond timestamps, which Delta
/// stores as microseconds) is refused: the table would not hold what the
/// manifest's output digest describes.
pub(super) fn check_types(output: &Schema, table: &Schema) -> Result<(), TableError> {
    let family = |t: &DataType| match t {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => DataType::Utf8,
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => DataType::Binary,
        other => other.clone(),
    };
    for f in output.fields() {
        let Ok(t) = table.field_with_name(f.name()) else {
            return Err(TableError::Output(format!(
                "the output has a column `{}` that the table does not have (table columns: {}). A changed transform needs a new table, or a schema migration of this one",
                f.name(),
                table
                    .fields()
                    .iter()
                    .map(|f| f.name().as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        };
        if family(f.data_type()) != family(t.data_type()) {
            return Err(TableError::Output(format!(
                "the output's column `{}` is {}, but the table stores it as {}: the table would not hold the output exactly. Cast it to {} in the transform (or use a new table)",
                f.name(),
                f.data_type(),
                t.data_type(),
                t.data_type()
            )));
        }
    }
    Ok(())
}
