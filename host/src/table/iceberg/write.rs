//! Data files of an Iceberg table: batches in the table's column order
//! (each column with its field id) cut into Parquet files of the target
//! size, each uploaded as soon as it is complete (memory: one file). Runs
//! on a blocking thread; uploads go through the run's runtime.

use std::collections::HashMap;

use arrow::array::RecordBatch;
use arrow::datatypes::{DataType, Schema, SchemaRef, TimeUnit};
use bytes::Bytes;
use iceberg::io::FileIO;
use iceberg::spec::{
    DataContentType, DataFile, DataFileBuilder, DataFileFormat, Datum, Literal, Struct,
};
use parquet::arrow::ArrowWriter;
use parquet::file::metadata::ParquetMetaData;
use parquet::file::statistics::Statistics;

use super::ice_err;
use super::schema::{conform, conform_older};
use crate::table::error::TableError;

/// Where and how a commit's data files are written.
#[derive(Clone)]
pub(super) struct FileSpec {
    pub io: FileIO,
    pub handle: tokio::runtime::Handle,
    /// The table's location, without a trailing `/`.
    pub base: String,
    /// `data/` or `data/COLUMN=VALUE/`.
    pub dir: String,
    /// File names start with this (`idem-<slice tag>`).
    pub name: String,
    /// This process's commit id, in every name (two hosts never collide).
    pub nonce: String,
    /// The table's columns, with field ids.
    pub schema: SchemaRef,
    pub spec_id: i32,
    /// The identity partition's values (one per level, each in its
    /// column's type), for overwrite-partition.
    pub partition: Option<Vec<Literal>>,
    /// Cut files at this size.
    pub target: u64,
    /// Columns the rows lack are written null (when optional): the run
    /// lets the output's columns differ from the table's.
    pub fill: bool,
}

/// Writes batches into data files; [`Sink::files`] are the files written
/// so far (to delete if the commit does not happen).
pub(super) struct Sink {
    spec: FileSpec,
    writer: Option<ArrowWriter<Vec<u8>>>,
    rows: u64,
    pub files: Vec<DataFile>,
}

impl Sink {
    pub fn new(spec: FileSpec) -> Self {
        Sink {
            spec,
            writer: None,
            rows: 0,
            files: Vec::new(),
        }
    }

    /// Add `batch` (any column order; cast to the table's types).
    pub fn push(&mut self, batch: RecordBatch) -> Result<(), TableError> {
        let batch = match self.spec.fill {
            true => conform_older(batch, &self.spec.schema)?,
            false => conform(batch, &self.spec.schema)?,
        };
        if batch.num_rows() == 0 {
            return Ok(());
        }
        let enc = |e: parquet::errors::ParquetError| {
            TableError::Output(format!("encoding a data file: {e}"))
        };
        if self.writer.is_none() {
            let props =
                crate::encoding::tune(crate::table::datafile::writer_properties(), &batch).build();
            self.writer = Some(
                ArrowWriter::try_new(Vec::new(), self.spec.schema.clone(), Some(props))
                    .map_err(enc)?,
            );
        }
        let w = self.writer.as_mut().expect("writer made above");
        w.write(&batch).map_err(enc)?;
        self.rows += batch.num_rows() as u64;
        if w.bytes_written() + w.in_progress_size() >= self.spec.target as usize {
            self.upload()?;
        }
        Ok(())
    }

    /// Complete and upload the open file, if any.
    pub fn finish(&mut self) -> Result<(), TableError> {
        self.upload()
    }

    fn upload(&mut self) -> Result<(), TableError> {
        let Some(w) = self.writer.take() else {
            return Ok(());
        };
        let rows = std::mem::take(&mut self.rows);
        let enc = |e: parquet::errors::ParquetError| {
            TableError::Output(format!("encoding a data file: {e}"))
        };
        let mut w = w;
        let meta = w.finish().map_err(enc)?;
        let stats = Stats::of(&meta, &self.spec.schema);
        // The file is complete (footer written): its bytes are taken out.
        let bytes = std::mem::take(w.inner_mut());
        let s = &self.spec;
        let path = format!(
            "{}/{}{}-{:05}-{}.parquet",
            s.base,
            s.dir,
            s.name,
            self.files.len(),
            s.nonce
        );
        let size = bytes.len() as u64;
        s.handle.block_on(async {
            s.io.new_output(&path)
                .map_err(ice_err(format!("writing {path}")))?
                .write(Bytes::from(bytes))
                .await
                .map_err(ice_err(format!("writing {path}")))
        })?;
        let partition = match &s.partition {
            Some(values) => Struct::from_iter(values.iter().cloned().map(Some)),
            None => Struct::empty(),
        };
        let file = DataFileBuilder::default()
            .content(DataContentType::Data)
            .file_path(path.clone())
            .file_format(DataFileFormat::Parquet)
            .partition(partition)
            .partition_spec_id(s.spec_id)
            .record_count(rows)
            .file_size_in_bytes(size)
            .column_sizes(stats.sizes)
            .value_counts(stats.values)
            .null_value_counts(stats.nulls)
            .lower_bounds(stats.lower)
            .upper_bounds(stats.upper)
            .build()
            .map_err(|e| TableError::Output(format!("data file {path}: {e}")))?;
        self.files.push(file);
        Ok(())
    }
}

/// Column metrics of a data file, by field id, from its Parquet footer:
/// what lets engines skip the file by value (`amount > X` plans no file
/// whose upper bound is below X).
#[derive(Default)]
struct Stats {
    sizes: HashMap<i32, u64>,
    values: HashMap<i32, u64>,
    nulls: HashMap<i32, u64>,
    lower: HashMap<i32, Datum>,
    upper: HashMap<i32, Datum>,
}

impl Stats {
    fn of(meta: &ParquetMetaData, schema: &Schema) -> Stats {
        let mut out = Stats::default();
        for (i, field) in schema.fields().iter().enumerate() {
            let Some(id) = field
                .metadata()
                .get(parquet::arrow::PARQUET_FIELD_ID_META_KEY)
                .and_then(|v| v.parse::<i32>().ok())
            else {
                continue;
            };
            let (mut size, mut values, mut nulls) = (0u64, 0u64, Some(0u64));
            let (mut lo, mut hi): (Option<Datum>, Option<Datum>) = (None, None);
            let mut bounded = true;
            for rg in meta.row_groups() {
                let Some(col) = rg.columns().get(i) else {
                    bounded = false;
                    continue;
                };
                size += col.compressed_size().max(0) as u64;
                values += col.num_values().max(0) as u64;
                let st = col.statistics();
                nulls = match (nulls, st.and_then(|s| s.null_count_opt())) {
                    (Some(n), Some(m)) => Some(n + m),
                    _ => None,
                };
                let (Some(min), Some(max)) = (
                    st.and_then(|s| datum(field.data_type(), s, true)),
                    st.and_then(|s| datum(field.data_type(), s, false)),
                ) else {
                    // A row group with values but no bounds: no file bound.
                    if rg.num_rows() > 0
                        && st.and_then(|s| s.null_count_opt()) != Some(rg.num_rows() as u64)
                    {
                        bounded = false;
                    }
                    continue;
                };
                lo = Some(match lo {
                    Some(l) if l <= min => l,
                    _ => min,
                });
                hi = Some(match hi {
                    Some(h) if h >= max => h,
                    _ => max,
                });
            }
            out.sizes.insert(id, size);
            out.values.insert(id, values);
            if let Some(n) = nulls {
                out.nulls.insert(id, n);
            }
            if bounded && let (Some(l), Some(h)) = (lo, hi) {
                out.lower.insert(id, l);
                out.upper.insert(id, h);
            }
        }
        out
    }
}

/// A row group's min (or max) as an Iceberg value of the column's type;
/// `None` where it cannot be exact (floats' NaN, strings cut to invalid
/// UTF-8, types without bounds here).
fn datum(t: &DataType, s: &Statistics, min: bool) -> Option<Datum> {
    use Statistics as S;
    Some(match (t, s) {
        (DataType::Boolean, S::Boolean(v)) => Datum::bool(*pick(v.min_opt(), v.max_opt(), min)?),
        (DataType::Int32, S::Int32(v)) => Datum::int(*pick(v.min_opt(), v.max_opt(), min)?),
        (DataType::Date32, S::Int32(v)) => Datum::date(*pick(v.min_opt(), v.max_opt(), min)?),
        (DataType::Int64, S::Int64(v)) => Datum::long(*pick(v.min_opt(), v.max_opt(), min)?),
        (DataType::Timestamp(TimeUnit::Microsecond, None), S::Int64(v)) => {
            Datum::timestamp_micros(*pick(v.min_opt(), v.max_opt(), min)?)
        }
        (DataType::Timestamp(TimeUnit::Microsecond, Some(_)), S::Int64(v)) => {
            Datum::timestamptz_micros(*pick(v.min_opt(), v.max_opt(), min)?)
        }
        (DataType::Float32, S::Float(v)) => {
            let x = *pick(v.min_opt(), v.max_opt(), min)?;
            (!x.is_nan()).then(|| Datum::float(x))?
        }
        (DataType::Float64, S::Double(v)) => {
            let x = *pick(v.min_opt(), v.max_opt(), min)?;
            (!x.is_nan()).then(|| Datum::double(x))?
        }
        (DataType::Utf8, S::ByteArray(v)) => {
            let b = pick(v.min_opt(), v.max_opt(), min)?;
            Datum::string(std::str::from_utf8(b.data()).ok()?)
        }
        _ => return None,
    })
}

fn pick<T>(lo: Option<T>, hi: Option<T>, min: bool) -> Option<T> {
    if min { lo } else { hi }
}
