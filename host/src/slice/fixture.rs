//! Test files: small Parquet files whose values a test can change in place
//! without changing their size.

use std::fs::File;
use std::path::Path;

use arrow::record_batch::RecordBatch;

/// A one-column Parquet file of `n` distinct Int64 values, uncompressed
/// and plain-encoded, so one flipped byte inside the data page changes a
/// value and still decodes.
pub(super) fn plain_ints(path: &Path, n: i64) -> i64 {
    use arrow::array::Int64Array;
    use arrow::datatypes::{DataType, Field, Schema};
    use parquet::basic::Encoding;
    use parquet::file::properties::WriterProperties;
    let schema = std::sync::Arc::new(Schema::new(vec![Field::new("v", DataType::Int64, false)]));
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![std::sync::Arc::new(Int64Array::from_iter_values(
            (0..n).map(|i| 0x0102_0304_0506_0000 + i),
        ))],
    )
    .unwrap();
    let props = WriterProperties::builder()
        .set_dictionary_enabled(false)
        .set_encoding(Encoding::PLAIN)
        .set_statistics_enabled(parquet::file::properties::EnabledStatistics::None)
        .build();
    let mut w =
        parquet::arrow::ArrowWriter::try_new(File::create(path).unwrap(), schema, Some(props))
            .unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    (0..n).map(|i| 0x0102_0304_0506_0000 + i).sum()
}

/// Flip one byte of the value `0x0102_0304_0506_0007` in place (same size).
pub(super) fn flip_a_value(path: &Path) {
    let mut bytes = std::fs::read(path).unwrap();
    let needle = 0x0102_0304_0506_0007i64.to_le_bytes();
    let at = bytes
        .windows(8)
        .position(|w| w == needle)
        .expect("value in the data page");
    bytes[at + 1] ^= 0x40;
    std::fs::write(path, bytes).unwrap();
}
