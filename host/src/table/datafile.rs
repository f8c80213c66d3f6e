//! A data file, whichever the format: the staged output it is written
//! from, the size files are cut at, how they are encoded, the partition column an overwrite-partition slice's rows
//! carry, and the check that the output's columns land in the table
//! exactly.

use std::path::PathBuf;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, RecordBatch, StringArray};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use super::error::TableError;
use super::mode::Mode;
use super::schema_change::SchemaChange;

/// Data file size by default (a writer buffers one open file in memory
/// before uploading it).
const TARGET_FILE_BYTES: u64 = 32 << 20;

/// The size data files are cut at: `IDEM_DATA_FILE_MB` (1 to 4096 MiB),
/// else 32 MiB. Only the files change with it, never rows or digests.
pub fn target_file_bytes() -> Result<u64, TableError> {
    let Ok(v) = std::env::var("IDEM_DATA_FILE_MB") else {
        return Ok(TARGET_FILE_BYTES);
    };
    match v.trim().parse::<u64>() {
        Ok(mb) if (1..=4096).contains(&mb) => Ok(mb << 20),
        _ => Err(TableError::Setting(format!(
            "IDEM_DATA_FILE_MB={v:?} is not a size: give whole MiB from 1 to 4096 (default 32)"
        ))),
    }
}

/// Data file encoding, before the output's first batch tunes it.
pub(super) fn writer_properties() -> deltalake::parquet::file::properties::WriterPropertiesBuilder {
    crate::encoding::writer_properties()
}

/// For overwrite-partition: the output with the slice's partition columns
/// (one per level). A column the output already has must hold the
/// slice's value in every row: a slice writes only its own partition.
pub(super) fn with_partition(batch: RecordBatch, mode: &Mode) -> Result<RecordBatch, TableError> {
    let Mode::OverwritePartition { partition } = mode else {
        return Ok(batch);
    };
    partition
        .levels()
        .iter()
        .try_fold(batch, |batch, (column, value)| {
            with_level(batch, column, value, partition)
        })
}

/// `batch` (after [`with_partition`]) with the slice's partition columns
/// in the types the table declares them with (a table another writer
/// created with `date DATE`, say), cast from the slice's text. A value
/// that would not read back as the same text is refused: Delta keeps
/// partition values as text in its log, and idem finds a slice's
/// partition by that text (`hour=07` in an integer column is `7`).
pub(super) fn typed_partition(
    batch: RecordBatch,
    mode: &Mode,
    table: &Schema,
) -> Result<RecordBatch, TableError> {
    let Mode::OverwritePartition { partition } = mode else {
        return Ok(batch);
    };
    let mut fields = batch.schema().fields().to_vec();
    let mut cols = batch.columns().to_vec();
    for (column, value) in partition.levels() {
        let (Ok(t), Some(i)) = (
            table.field_with_name(column),
            fields.iter().position(|f| f.name() == column),
        ) else {
            continue;
        };
        if matches!(
            t.data_type(),
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
        ) {
            continue;
        }
        let refused = |why: String| {
            TableError::Partitioning(format!(
                "the table's partition column `{column}` is {}, and the slice's value `{}` {why}: name the partition as the table stores it, or use a table partitioned on a string column",
                t.data_type(),
                crate::text::clip_str(value, 64)
            ))
        };
        let strict = arrow::compute::CastOptions {
            safe: false,
            ..Default::default()
        };
        let one = StringArray::from(vec![value.as_str()]);
        let typed = arrow::compute::cast_with_options(&one, t.data_type(), &strict)
            .map_err(|e| refused(format!("is not one ({e})")))?;
        let back = cast(&typed, &DataType::Utf8).map_err(|e| refused(e.to_string()))?;
        let back = back.as_any().downcast_ref::<StringArray>();
        if back.is_none_or(|b| b.is_null(0) || b.value(0) != value) {
            return Err(refused("would be stored as other text".into()));
        }
        cols[i] = arrow::compute::cast_with_options(&cols[i], t.data_type(), &strict)
            .map_err(|e| refused(e.to_string()))?;
        fields[i] = Arc::new(Field::new(column, t.data_type().clone(), false));
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), cols)
        .map_err(|e| TableError::Output(e.to_string()))
}

/// The output's columns but the slice's partition columns (which
/// [`with_partition`] checks on its own: text holding the slice's value,
/// in whatever type the table declares them).
pub(super) fn data_columns(output: &Schema, mode: &Mode) -> Schema {
    let Mode::OverwritePartition { partition } = mode else {
        return output.clone();
    };
    let columns = partition.columns();
    Schema::new(
        output
            .fields()
            .iter()
            .filter(|f| !columns.contains(f.name()))
            .cloned()
            .collect::<Vec<_>>(),
    )
}

/// [`with_partition`] for one level `column = value` of `partition`.
fn with_level(
    batch: RecordBatch,
    column: &str,
    value: &str,
    partition: &crate::slice::Partition,
) -> Result<RecordBatch, TableError> {
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
            // The guest's text: quoted, but never whole.
            let got = if text.is_null(i) {
                "null".to_string()
            } else {
                crate::text::clip_str(text.value(i), 256)
            };
            return Err(TableError::Output(format!(
                "the output's partition column `{column}` holds `{got}` (row {i} of a batch), but this slice owns only {partition}: drop the column from the output, or run the slice that owns that partition"
            )));
        }
        return Ok(batch);
    }
    with_text_column(batch, column, value)
}

/// `batch` with a non-null text column `name` holding `value` in every
/// row, last.
pub(super) fn with_text_column(
    batch: RecordBatch,
    name: &str,
    value: &str,
) -> Result<RecordBatch, TableError> {
    let mut fields: Vec<Field> = batch
        .schema()
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    fields.push(Field::new(name, DataType::Utf8, false));
    let mut columns: Vec<ArrayRef> = batch.columns().to_vec();
    columns.push(Arc::new(StringArray::from_iter_values(
        std::iter::repeat_n(value, batch.num_rows()),
    )));
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)
        .map_err(|e| TableError::Output(e.to_string()))
}

/// The output must land in the table exactly (see
/// [`super::schema_change::new_columns`]): the columns to append, which
/// only `policy` lets in.
pub(super) fn check_types(
    output: &Schema,
    table: &Schema,
    policy: SchemaChange,
) -> Result<Vec<Field>, TableError> {
    super::schema_change::new_columns(output, table, policy)
}

/// `batch` with a null column for each nullable column of `schema` it
/// lacks (last; writers place columns by name): an output that predates
/// columns appended to the table (`--on-schema-change
/// append-new-columns`), or rows of a data file written before them.
pub(super) fn with_nulls_for(
    batch: RecordBatch,
    schema: &Schema,
) -> Result<RecordBatch, TableError> {
    let missing: Vec<&Field> = schema
        .fields()
        .iter()
        .map(|f| f.as_ref())
        .filter(|f| f.is_nullable() && batch.column_by_name(f.name()).is_none())
        .collect();
    if missing.is_empty() {
        return Ok(batch);
    }
    let mut fields = batch.schema().fields().to_vec();
    let mut cols = batch.columns().to_vec();
    for f in missing {
        fields.push(Arc::new(f.clone()));
        cols.push(arrow::array::new_null_array(
            f.data_type(),
            batch.num_rows(),
        ));
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), cols)
        .map_err(|e| TableError::Output(e.to_string()))
}

/// [`add_field`] for each of `columns`, in order: a partition's levels.
pub(super) fn add_fields(s: &SchemaRef, columns: &[String]) -> SchemaRef {
    columns.iter().fold(s.clone(), |s, c| add_field(&s, c))
}

/// `s` with a non-null text column `column` last, unless it has one: the
/// partition or owner column a table created for the output gets.
pub(super) fn add_field(s: &SchemaRef, column: &str) -> SchemaRef {
    if s.field_with_name(column).is_ok() {
        return s.clone();
    }
    let mut fields: Vec<Field> = s.fields().iter().map(|f| f.as_ref().clone()).collect();
    fields.push(Field::new(column, DataType::Utf8, false));
    Arc::new(Schema::new(fields))
}

/// The staged output's batches, in order, `batch_rows` rows at a time.
pub(super) fn staged_batches(
    staged: &[PathBuf],
    batch_rows: usize,
) -> impl Iterator<Item = Result<RecordBatch, TableError>> + '_ {
    staged.iter().flat_map(move |path| {
        let err =
            move |e: &dyn std::fmt::Display| TableError::Staged(format!("{}: {e}", path.display()));
        let reader = std::fs::File::open(path)
            .map_err(|e| err(&e))
            .and_then(|f| {
                ParquetRecordBatchReaderBuilder::try_new(f)
                    .and_then(|b| b.with_batch_size(batch_rows).build())
                    .map_err(|e| err(&e))
            });
        let (ok, first_err) = match reader {
            Ok(r) => (Some(r), None),
            Err(e) => (None, Some(Err(e))),
        };
        first_err.into_iter().chain(
            ok.into_iter()
                .flatten()
                .map(move |b| b.map_err(|e| err(&e))),
        )
    })
}
