//! How output Parquet is encoded: dictionary encoding only for the columns
//! where it pays. parquet-rs dictionary-encodes every column, interning
//! every value, until a column chunk's dictionary outgrows its page limit
//! (1 MiB): for a column of unique ids (or prices, or timestamps) that is
//! most of the writer's time and buys nothing (perf: 20-30% of a whole
//! `idem run` of clean_orders). The first output batch decides, per column,
//! from the distinct share of a sample, as DuckDB and polars do from theirs.
//! Only bytes change: values, and so every digest, are the same.

use std::collections::HashSet;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use arrow::datatypes::DataType;
use parquet::file::properties::WriterPropertiesBuilder;
use parquet::schema::types::ColumnPath;

/// Rows per row group (DuckDB's default is 122,880).
const ROW_GROUP_ROWS: usize = 128 * 1024;

/// How every Parquet file idem writes is encoded (Delta and Iceberg data
/// files, `idem exec`'s output), before its first batch [`tune`]s it:
/// snappy-compressed, as Spark and DuckDB write by default and every engine
/// reads, in row groups of `ROW_GROUP_ROWS`. (A run's staged output,
/// read back by the commit, is written uncompressed: [`crate::output::Purpose`].)
pub fn writer_properties() -> WriterPropertiesBuilder {
    parquet::file::properties::WriterProperties::builder()
        .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
        .set_compression(parquet::basic::Compression::SNAPPY)
}

/// Rows of the first batch looked at.
const SAMPLE_ROWS: usize = 8192;
/// Below this many rows a sample says little: the defaults stay.
const MIN_ROWS: usize = 1024;
/// A column whose sample is more than half distinct values is written
/// without a dictionary (a dictionary at best halves it then).
const MAX_DISTINCT_SHARE: f64 = 0.5;

/// `builder` with the dictionary turned off for the top-level columns of
/// `first` that are mostly distinct values.
pub fn tune(mut builder: WriterPropertiesBuilder, first: &RecordBatch) -> WriterPropertiesBuilder {
    for name in plain_columns(first) {
        builder = builder.set_column_dictionary_enabled(ColumnPath::from(name), false);
    }
    builder
}

/// The top-level columns of `batch` a dictionary would not pay for.
pub fn plain_columns(batch: &RecordBatch) -> Vec<String> {
    let rows = batch.num_rows().min(SAMPLE_ROWS);
    if rows < MIN_ROWS {
        return Vec::new();
    }
    let most = (rows as f64 * MAX_DISTINCT_SHARE) as usize;
    batch
        .schema()
        .fields()
        .iter()
        .zip(batch.columns())
        .filter(|(_, col)| distinct_over(&col.slice(0, rows), most))
        .map(|(f, _)| f.name().clone())
        .collect()
}

/// Whether `col` holds more than `most` distinct values (nulls aside);
/// false for types a dictionary does not apply to or that are not sampled.
fn distinct_over(col: &ArrayRef, most: usize) -> bool {
    let col: &dyn Array = col.as_ref();
    let over = |values: &mut dyn Iterator<Item = &[u8]>| {
        let mut set: HashSet<&[u8]> = HashSet::with_capacity(most + 1);
        for v in values {
            set.insert(v);
            if set.len() > most {
                return true;
            }
        }
        false
    };
    match col.data_type() {
        DataType::Utf8 => over(&mut col.as_string::<i32>().iter().flatten().map(str::as_bytes)),
        DataType::LargeUtf8 => {
            over(&mut col.as_string::<i64>().iter().flatten().map(str::as_bytes))
        }
        DataType::Utf8View => over(&mut col.as_string_view().iter().flatten().map(str::as_bytes)),
        DataType::Binary => over(&mut col.as_binary::<i32>().iter().flatten()),
        DataType::LargeBinary => over(&mut col.as_binary::<i64>().iter().flatten()),
        DataType::BinaryView => over(&mut col.as_binary_view().iter().flatten()),
        DataType::FixedSizeBinary(_) => over(&mut col.as_fixed_size_binary().iter().flatten()),
        t if t.is_primitive() => {
            let Some(width) = t.primitive_width() else {
                return false;
            };
            let data = col.to_data();
            let Some(buf) = data.buffers().first() else {
                return false;
            };
            let start = data.offset() * width;
            let end = start + data.len() * width;
            let Some(bytes) = buf.as_slice().get(start..end) else {
                return false;
            };
            over(
                &mut bytes
                    .chunks_exact(width)
                    .enumerate()
                    .filter(|(i, _)| data.is_valid(*i))
                    .map(|(_, v)| v),
            )
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Float64Array, Int64Array, StringArray};
    use arrow::datatypes::{Field, Schema};
    use parquet::arrow::ArrowWriter;
    use parquet::file::properties::WriterProperties;
    use parquet::file::reader::{FileReader, SerializedFileReader};

    use super::*;

    fn batch(rows: usize) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Utf8, false),
            Field::new("n", DataType::Int64, false),
            Field::new("status", DataType::Utf8, false),
            Field::new("price", DataType::Float64, true),
        ]));
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(StringArray::from_iter_values(
                    (0..rows).map(|i| format!("evt-{i:08}")),
                )),
                Arc::new(Int64Array::from_iter_values(
                    (0..rows as i64).map(|i| i * 7),
                )),
                Arc::new(StringArray::from_iter_values(
                    (0..rows).map(|i| ["paid", "refunded", "cancelled"][i % 3]),
                )),
                // 50 prices, some null: a dictionary pays.
                Arc::new(Float64Array::from_iter(
                    (0..rows).map(|i| (i % 7 != 0).then_some((i % 50) as f64 + 0.5)),
                )),
            ],
        )
        .unwrap()
    }

    #[test]
    fn unique_columns_are_written_plain_and_repeating_ones_with_a_dictionary() {
        let b = batch(20_000);
        assert_eq!(plain_columns(&b), vec!["id".to_string(), "n".to_string()]);
        // In the file: no dictionary page for those two, one for the others.
        let props = tune(WriterProperties::builder(), &b).build();
        let mut buf = Vec::new();
        let mut w = ArrowWriter::try_new(&mut buf, b.schema(), Some(props)).unwrap();
        w.write(&b).unwrap();
        w.close().unwrap();
        let r = SerializedFileReader::new(bytes::Bytes::from(buf)).unwrap();
        let rg = r.metadata().row_group(0);
        let dict: Vec<bool> = (0..4)
            .map(|i| rg.column(i).dictionary_page_offset().is_some())
            .collect();
        assert_eq!(dict, vec![false, false, true, true]);
        // A sliced batch is sampled from its own rows.
        let tail = b.slice(10_000, 5_000);
        assert_eq!(
            plain_columns(&tail),
            vec!["id".to_string(), "n".to_string()]
        );
    }

    #[test]
    fn a_small_first_batch_keeps_the_defaults() {
        assert!(plain_columns(&batch(100)).is_empty());
    }
}
