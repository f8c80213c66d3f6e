//! What a transform declared it reads, and the reader narrowed to it: only
//! the declared columns decoded, in its order, the ones it asks for taken
//! dictionary-encoded.

use std::sync::Arc;

use arrow::compute::BatchCoalescer;
use arrow::datatypes::{Field, Schema};

use super::error::SliceError;
use super::reader::SliceReader;

/// What a transform declared it reads, right after `open`. Part of what a
/// manifest records: a different declaration is a different execution.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Declared {
    /// The input columns it reads, in its order (`None`: all of them).
    pub columns: Option<Vec<String>>,
    /// Of those, the string or binary ones it takes dictionary-encoded.
    pub dictionaries: Vec<String>,
}

impl SliceReader {
    /// Read what a transform declared (checked by the caller): only its
    /// `columns` (names of [`SliceReader::schema`]), in that order, the
    /// files' other columns never decoded (`None` reads everything); its
    /// `dictionaries` as `Dictionary(Int32, _)`, decoded from Parquet's
    /// dictionary pages without expanding them. Call before the first batch.
    pub fn narrow(self, declared: &Declared) -> Result<SliceReader, SliceError> {
        let mut r = self.narrow_columns(declared.columns.as_deref())?;
        if declared.dictionaries.is_empty() {
            return Ok(r);
        }
        let d = &declared.dictionaries;
        let as_dictionaries = |s: &Schema| Arc::new(idem_guest::native::dictionary_schema(s, d));
        let decode_as = as_dictionaries(&r.file_schema);
        // The decoded file columns as dictionaries; constant columns (the
        // last ones) are appended plain and encoded with the rest of the batch.
        let files = r.full.fields().len() - r.slice.constant_fields.len();
        let full: Vec<Field> = r
            .full
            .fields()
            .iter()
            .enumerate()
            .map(|(i, f)| match decode_as.field_with_name(f.name()) {
                Ok(d) if i < files => d.clone(),
                _ => f.as_ref().clone(),
            })
            .collect();
        r.full = Arc::new(Schema::new_with_metadata(full, r.full.metadata().clone()));
        r.schema = as_dictionaries(&r.schema);
        r.coalescer = BatchCoalescer::new(r.schema.clone(), r.batch_rows.max(1));
        r.decode_as = Some(decode_as);
        r.dictionaries = d.clone();
        Ok(r)
    }

    fn narrow_columns(mut self, columns: Option<&[String]>) -> Result<SliceReader, SliceError> {
        let Some(columns) = columns else {
            return Ok(self);
        };
        let fields = columns
            .iter()
            .map(|c| {
                self.schema
                    .field_with_name(c)
                    .cloned()
                    .map_err(|_| SliceError::Malformed {
                        path: self.slice.root.to_string(),
                        detail: format!("no column `{c}` to read"),
                    })
            })
            .collect::<Result<Vec<Field>, SliceError>>()?;
        // The file columns decoded: the declared ones and the one a row
        // filter selects by.
        let filter = self.slice.row_filter.as_ref().map(|(c, _)| c.as_str());
        let decode: Vec<usize> = self
            .file_schema
            .fields()
            .iter()
            .enumerate()
            .filter(|(_, f)| {
                columns.iter().any(|c| c == f.name()) || Some(f.name().as_str()) == filter
            })
            .map(|(i, _)| i)
            .collect();
        let mut full: Vec<Field> = decode
            .iter()
            .map(|&i| self.file_schema.field(i).clone())
            .collect();
        full.extend(self.slice.constant_fields.iter().cloned());
        self.full = Arc::new(Schema::new_with_metadata(
            full,
            self.file_schema.metadata().clone(),
        ));
        self.schema = Arc::new(Schema::new_with_metadata(
            fields,
            self.file_schema.metadata().clone(),
        ));
        self.coalescer = BatchCoalescer::new(self.schema.clone(), self.batch_rows.max(1));
        self.decode = Some(decode);
        self.narrowed = Some(columns.to_vec());
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::slice::resolve::ResolvedSlice;
    use arrow::datatypes::SchemaRef;
    use arrow::record_batch::RecordBatch;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    use std::fs::File;

    /// A narrowed reader decodes only the declared columns (the Parquet
    /// decoder itself holds only them, not a projection after decoding),
    /// and hands them over in the declared order.
    #[test]
    fn a_narrowed_reader_decodes_only_the_declared_columns() {
        let dir = tempfile::tempdir().unwrap();
        crate::sample::write_day(dir.path(), "2026-10-01", 2_000, 2).unwrap();
        let slice = ResolvedSlice::from_partition(
            dir.path(),
            &crate::slice::Partition::one("date", "2026-10-01"),
        )
        .unwrap();
        let wanted = ["quantity".to_string(), "customer".to_string()];
        let declared = Declared {
            columns: Some(wanted.to_vec()),
            dictionaries: vec![],
        };
        let mut reader = slice.reader(700).unwrap().narrow(&declared).unwrap();
        let first = reader.next().unwrap().unwrap();
        let names =
            |s: SchemaRef| -> Vec<String> { s.fields().iter().map(|f| f.name().clone()).collect() };
        assert_eq!(names(first.schema()), wanted);
        let crate::slice::decode::Rows::Parquet(decoder) = &reader.current.as_ref().unwrap().reader
        else {
            panic!("a Parquet input decoded as text")
        };
        // In the file's order: customer comes before quantity there.
        use arrow::record_batch::RecordBatchReader as _;
        assert_eq!(names(decoder.schema()), ["customer", "quantity"]);
        let rows: usize = first.num_rows() + reader.map(|b| b.unwrap().num_rows()).sum::<usize>();
        assert_eq!(rows, 2_000);
    }

    /// A column taken dictionary-encoded is decoded from Parquet's
    /// dictionary pages as a dictionary (not expanded, then re-encoded),
    /// holds the same values as a plain read, and arrives so even from a
    /// file written without dictionaries; other columns stay plain.
    #[test]
    fn columns_taken_dictionary_encoded_arrive_as_dictionaries_with_the_same_values() {
        use arrow::array::AsArray;
        use arrow::datatypes::DataType;
        let dict = DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8));
        let dir = tempfile::tempdir().unwrap();
        crate::sample::write_day(dir.path(), "2026-10-01", 3_000, 2).unwrap();
        // A third file with every dictionary switched off.
        let plain_dir = dir.path().join("date=2026-10-01");
        let first = std::fs::read_dir(&plain_dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .min()
            .unwrap();
        let batches: Vec<RecordBatch> =
            ParquetRecordBatchReaderBuilder::try_new(File::open(&first).unwrap())
                .unwrap()
                .build()
                .unwrap()
                .map(|b| b.unwrap())
                .collect();
        let props = parquet::file::properties::WriterProperties::builder()
            .set_dictionary_enabled(false)
            .build();
        let mut w = parquet::arrow::ArrowWriter::try_new(
            File::create(plain_dir.join("zz-plain.parquet")).unwrap(),
            batches[0].schema(),
            Some(props),
        )
        .unwrap();
        for b in &batches {
            w.write(b).unwrap();
        }
        w.close().unwrap();

        let slice = ResolvedSlice::from_partition(
            dir.path(),
            &crate::slice::Partition::one("date", "2026-10-01"),
        )
        .unwrap();
        let read = |dictionaries: Vec<String>| -> Vec<RecordBatch> {
            let declared = Declared {
                columns: Some(vec!["customer".into(), "amount".into()]),
                dictionaries,
            };
            let mut r = slice.reader(1_000).unwrap().narrow(&declared).unwrap();
            let mut out = vec![r.next().unwrap().unwrap()];
            if !declared.dictionaries.is_empty() {
                // Parquet itself decodes the column as a dictionary.
                let crate::slice::decode::Rows::Parquet(decoder) =
                    &r.current.as_ref().unwrap().reader
                else {
                    panic!("a Parquet input decoded as text")
                };
                use arrow::record_batch::RecordBatchReader as _;
                assert_eq!(decoder.schema().field(0).data_type(), &dict);
            }
            out.extend(r.map(|b| b.unwrap()));
            out
        };
        let plain = read(vec![]);
        let encoded = read(vec!["customer".into()]);
        assert_eq!(plain.len(), encoded.len());
        let rows: usize = encoded.iter().map(|b| b.num_rows()).sum();
        assert_eq!(
            rows, 4_500,
            "two files of 1500 rows and the plain copy of one"
        );
        // The plain copy of the first file (batches 3 and 4) reaches the
        // guest exactly as the dictionary-encoded original (batches 0, 1).
        assert_eq!(encoded[3], encoded[0]);
        let d4 = encoded[4]
            .column(0)
            .as_dictionary::<arrow::datatypes::Int32Type>();
        let d1 = encoded[1]
            .column(0)
            .as_dictionary::<arrow::datatypes::Int32Type>();
        assert_eq!(d4.keys(), &d1.keys().slice(0, 500));
        assert_eq!(d4.values(), &d1.values().slice(0, d4.values().len()));
        for (p, e) in plain.iter().zip(&encoded) {
            assert_eq!(p.column(0).data_type(), &DataType::Utf8);
            assert_eq!(e.column(0).data_type(), &dict);
            assert_eq!(e.schema().field(1).data_type(), &DataType::Float64);
            let back = arrow::compute::cast(e.column(0), &DataType::Utf8).unwrap();
            assert_eq!(back.as_string::<i32>(), p.column(0).as_string::<i32>());
            assert_eq!(e.column(1), p.column(1));
            // Canonical: exactly the distinct values the rows use.
            let d = e.column(0).as_any_dictionary();
            let distinct: std::collections::HashSet<&str> =
                p.column(0).as_string::<i32>().iter().flatten().collect();
            assert_eq!(d.values().len(), distinct.len());
        }
        // The run's output over both reads is the same.
        assert_eq!(
            crate::digest::of_batches(&plain).unwrap(),
            crate::digest::of_batches(
                &encoded
                    .iter()
                    .map(|b| {
                        let c = arrow::compute::cast(b.column(0), &DataType::Utf8).unwrap();
                        RecordBatch::try_new(plain[0].schema(), vec![c, b.column(1).clone()])
                            .unwrap()
                    })
                    .collect::<Vec<_>>()
            )
            .unwrap()
        );
    }

    /// A constant (partition) column and a file column taken
    /// dictionary-encoded from a row-filtered slice (a table read as input)
    /// arrive as dictionaries holding the plain read's values, nulls
    /// included, in the same rows.
    #[test]
    fn constant_and_row_filtered_columns_taken_dictionary_encoded_keep_their_values() {
        use arrow::array::{Array, AsArray};
        use arrow::datatypes::DataType;
        let dir = tempfile::tempdir().unwrap();
        crate::sample::write_day(dir.path(), "2026-10-01", 3_000, 2).unwrap();
        let slice = ResolvedSlice::from_partition(
            dir.path(),
            &crate::slice::Partition::one("date", "2026-10-01"),
        )
        .unwrap();
        let first = slice.reader(10).unwrap().next().unwrap().unwrap();
        let status = first
            .column_by_name("status")
            .unwrap()
            .as_string::<i32>()
            .value(0)
            .to_string();
        let paths: Vec<String> = slice.inputs.iter().map(|i| i.path.clone()).collect();
        let slice = slice
            .with_constants(
                vec![Field::new("region", DataType::Utf8, true)],
                vec![
                    (paths[0].clone(), vec![Some("eu".to_string())]),
                    (paths[1].clone(), vec![None]),
                ],
            )
            .with_row_filter("status", std::slice::from_ref(&status));
        let read = |dictionaries: Vec<String>| -> Vec<RecordBatch> {
            let declared = Declared {
                columns: Some(vec!["customer".into(), "region".into(), "amount".into()]),
                dictionaries,
            };
            slice
                .reader(400)
                .unwrap()
                .narrow(&declared)
                .unwrap()
                .map(|b| b.unwrap())
                .collect()
        };
        let plain = read(vec![]);
        let encoded = read(vec!["customer".into(), "region".into()]);
        let rows = |b: &[RecordBatch]| b.iter().map(|b| b.num_rows()).sum::<usize>();
        assert_eq!(rows(&plain), rows(&encoded));
        assert!(
            rows(&plain) > 0 && rows(&plain) < 3_000,
            "the filter kept some rows"
        );
        let dict = DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8));
        let (mut eu, mut none) = (0, 0);
        for (p, e) in plain.iter().zip(&encoded) {
            for c in 0..2 {
                assert_eq!(e.column(c).data_type(), &dict);
                let back = arrow::compute::cast(e.column(c), &DataType::Utf8).unwrap();
                assert_eq!(back.as_string::<i32>(), p.column(c).as_string::<i32>());
            }
            assert_eq!(e.column(2), p.column(2));
            let region = e.column(1).as_any_dictionary();
            none += region.keys().null_count();
            eu += region.keys().len() - region.keys().null_count();
            // Canonical: a null value is a null row, never a dictionary entry.
            assert_eq!(region.values().null_count(), 0);
        }
        assert!(eu > 0 && none > 0, "both files' rows: {eu} eu, {none} null");
    }
}
