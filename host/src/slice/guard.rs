//! What an input file must satisfy before (and while) it is decoded: its
//! footer's row counts agree with themselves, no page decodes past the
//! input budget or inflates past what its header declares, and INT96
//! timestamps fit the nanoseconds they are read as. Input files are
//! untrusted: a 14 KB file can declare 1.2 GB of strings, a 4 KB one can
//! inflate to gigabytes, and a footer can say a file holds no rows.

use std::sync::Arc;

use arrow::array::{ArrayRef, AsArray};
use arrow::datatypes::{DataType, Field, Schema, TimeUnit, TimestampMillisecondType};
use bytes::Bytes;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ParquetRecordBatchReaderBuilder};
use parquet::basic::Type as Physical;
use parquet::column::page::{Page, PageReader};
use parquet::file::metadata::{
    ColumnChunkMetaData, FileMetaData, ParquetMetaData, ParquetMetaDataBuilder,
};
use parquet::file::reader::ChunkReader;
use parquet::file::serialized_reader::SerializedPageReader;

use super::error::SliceError;
use super::pages::{self, PageInfo};

/// Most bytes one batch of decoded input may hold, unless the run says
/// otherwise (`--max-input-batch-mb`): also the most any one page may
/// declare once decompressed. Legitimate pages are about 1 MiB.
pub const DEFAULT_INPUT_BATCH_BYTES: u64 = 256 << 20;

/// Milliseconds that still fit in an i64 of nanoseconds (1677-09-21 to
/// 2262-04-11): what an INT96 timestamp is read as.
const NANOS_RANGE_MS: i64 = i64::MAX / 1_000_000;

/// A private copy the guard can open a second reader over.
pub(super) trait Reopen: ChunkReader + Sized + 'static {
    /// Another handle on the same bytes.
    fn reopen(&self) -> std::io::Result<Self>;
}

impl Reopen for Bytes {
    fn reopen(&self) -> std::io::Result<Self> {
        Ok(self.clone())
    }
}

impl Reopen for std::fs::File {
    fn reopen(&self) -> std::io::Result<Self> {
        self.try_clone()
    }
}

/// How a checked file is to be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Plan {
    /// Rows the file holds (its footer's row groups, which agree with its
    /// columns): exactly what decoding it must yield.
    pub rows: u64,
    /// Rows decoded at a time (at most the batch size): fewer when the
    /// file's pages could decode to more than half the budget at once.
    pub decode_rows: usize,
}

/// How many input budgets the pages decoding holds at once may take.
const HELD_BUDGETS: u64 = 4;

/// Check `file` (the verified private copy of `path`, whose footer is
/// `meta`) before decoding the leaf columns `leaves` in batches of
/// `batch_rows` within `budget` bytes.
pub(super) fn check<T: Reopen>(
    file: &T,
    meta: &ParquetMetaData,
    leaves: &[usize],
    batch_rows: usize,
    budget: u64,
    path: &str,
) -> Result<Plan, SliceError> {
    let rows = row_count(meta, path)?;
    let mut worst: Vec<Vec<Cost>> = Vec::new();
    for (g, group) in meta.row_groups().iter().enumerate() {
        let mut costs = Vec::with_capacity(leaves.len());
        // What decoding holds at once: per column, its dictionary and the
        // page being decoded, whatever the batch size.
        let mut held = 0u64;
        for &leaf in leaves {
            let Some(chunk) = group.columns().get(leaf) else {
                return Err(malformed(
                    path,
                    format!("row group {g} has no column {leaf}"),
                ));
            };
            let at = |e: String| column_error(path, g, chunk, e);
            let pages = pages::walk(file, chunk).map_err(at)?;
            check_pages(file, chunk, &pages, budget, path, g)?;
            let dictionary: u64 = pages
                .iter()
                .filter(|p| p.is_dictionary())
                .map(|p| p.uncompressed)
                .sum();
            let page = pages
                .iter()
                .filter(|p| !p.is_dictionary())
                .map(|p| p.uncompressed)
                .max()
                .unwrap_or(0);
            held = held.saturating_add(dictionary).saturating_add(page);
            let longest = longest_entry(file, chunk, &pages).map_err(at)?;
            costs.push(Cost::of(chunk, &pages, longest, group.num_rows()));
        }
        // Four budgets: wide files (hundreds of columns, 1 MiB pages and
        // dictionaries each) stay readable; a file of many columns each
        // with a page of a whole budget does not.
        let most = budget.saturating_mul(HELD_BUDGETS);
        if held > most {
            return Err(refused(
                path,
                format!(
                    "decoding row group {g} holds {held} bytes of decompressed pages at once (each column's dictionary and largest page), over {HELD_BUDGETS} times the input budget ({most} bytes)"
                ),
                "if the data is genuine, raise --max-input-batch-mb, or read fewer columns",
            ));
        }
        worst.push(costs);
    }
    check_int96(file, meta, leaves, batch_rows, path)?;
    Ok(Plan {
        rows,
        decode_rows: decode_rows(&worst, batch_rows, budget / 2),
    })
}

/// The rows the file's row groups hold, once each agrees with its flat
/// columns' value counts (a disagreement is refused: which count would
/// readers believe?).
fn row_count(meta: &ParquetMetaData, path: &str) -> Result<u64, SliceError> {
    let mut sum = 0u64;
    for (g, group) in meta.row_groups().iter().enumerate() {
        let rows = u64::try_from(group.num_rows())
            .map_err(|_| malformed(path, format!("row group {g} has {} rows", group.num_rows())))?;
        for chunk in group.columns() {
            let flat = chunk.column_descr().max_rep_level() == 0;
            if flat && chunk.num_values() != group.num_rows() {
                return Err(refused(
                    path,
                    format!(
                        "its footer disagrees with itself: row group {g} says {rows} rows, but column `{}` holds {} values",
                        chunk.column_path().string(),
                        chunk.num_values()
                    ),
                    "readers disagree on such a file (some read no rows); rewrite it with a current Parquet writer",
                ));
            }
        }
        sum = sum.saturating_add(rows);
    }
    Ok(sum)
}

/// `meta` with the file's row total set to its row groups' `rows`, when
/// they differ: decoders stop at the file's total (one read no rows of
/// repeated_no_annotation.parquet, whose total says 0 and whose row group
/// and columns say 6), while row groups, checked against their columns by
/// [`row_count`], are what every reader decodes.
pub(super) fn with_total(meta: &ParquetMetaData, rows: u64) -> Option<ParquetMetaData> {
    let file = meta.file_metadata();
    let rows = i64::try_from(rows).ok()?;
    if file.num_rows() == rows {
        return None;
    }
    let fixed = FileMetaData::new(
        file.version(),
        rows,
        file.created_by().map(str::to_string),
        file.key_value_metadata().cloned(),
        file.schema_descr_ptr(),
        file.column_orders().cloned(),
    );
    Some(
        ParquetMetaDataBuilder::new(fixed)
            .set_row_groups(meta.row_groups().to_vec())
            .set_column_index(meta.column_index().cloned())
            .set_offset_index(meta.offset_index().cloned())
            .build(),
    )
}

/// Every page within the budget, and no page of a codec that inflates to
/// the end of its stream larger than its header declares.
fn check_pages<T: ChunkReader>(
    file: &T,
    chunk: &ColumnChunkMetaData,
    pages: &[PageInfo],
    budget: u64,
    path: &str,
    g: usize,
) -> Result<(), SliceError> {
    let column = chunk.column_path().string();
    for (i, page) in pages.iter().enumerate() {
        if page.uncompressed > budget {
            return Err(refused(
                path,
                format!(
                    "page {i} of column `{column}` (row group {g}) declares {} bytes once decompressed, over the input budget of {budget} bytes (it is stored in {})",
                    page.uncompressed, page.compressed
                ),
                "if the data is genuine, raise --max-input-batch-mb",
            ));
        }
        if !pages::unbounded(chunk.compression()) {
            continue;
        }
        let n = pages::inflated(file, page, chunk.compression())
            .map_err(|e| column_error(path, g, chunk, e))?;
        if n > page.uncompressed.saturating_sub(page.levels) {
            return Err(refused(
                path,
                format!(
                    "page {i} of column `{column}` (row group {g}) inflates past the {} bytes its header declares ({:?}): a decompression bomb or a corrupt file",
                    page.uncompressed,
                    chunk.compression()
                ),
                "fix or remove the file",
            ));
        }
    }
    Ok(())
}

/// The longest entry of a string column's dictionary page (0 if it has
/// none): a page of indexes into it decodes to up to that many bytes per
/// value, however small the page.
fn longest_entry<T: Reopen>(
    file: &T,
    chunk: &ColumnChunkMetaData,
    pages: &[PageInfo],
) -> Result<u64, String> {
    let physical = chunk.column_descr().physical_type();
    if physical != Physical::BYTE_ARRAY || !pages.first().is_some_and(PageInfo::is_dictionary) {
        return Ok(0);
    }
    // Its size was checked against the budget (and, for an unbounded
    // codec, its inflated size): the decoder may decompress it.
    let copy = file.reopen().map_err(|e| e.to_string())?;
    let mut reader =
        SerializedPageReader::new(Arc::new(copy), chunk, 0, None).map_err(|e| e.to_string())?;
    let Some(Page::DictionaryPage { buf, .. }) =
        reader.get_next_page().map_err(|e| e.to_string())?
    else {
        return Ok(0);
    };
    // PLAIN byte arrays: a 4-byte little-endian length, then the bytes.
    let (mut at, mut longest) = (0usize, 0u64);
    while at + 4 <= buf.len() {
        let n = u32::from_le_bytes([buf[at], buf[at + 1], buf[at + 2], buf[at + 3]]) as usize;
        longest = longest.max(n as u64);
        at = at.saturating_add(4).saturating_add(n);
    }
    Ok(longest)
}

/// What decoding one column chunk can cost, page by page.
#[derive(Debug, Clone)]
struct Cost {
    /// Per page: rows it holds (known or estimated), most bytes it decodes
    /// to in all, most bytes per row.
    pages: Vec<(u64, u64, u64)>,
}

impl Cost {
    fn of(chunk: &ColumnChunkMetaData, pages: &[PageInfo], longest: u64, rows: i64) -> Cost {
        let descr = chunk.column_descr();
        let flat = descr.max_rep_level() == 0;
        let width: u64 = match descr.physical_type() {
            Physical::BOOLEAN => 1,
            Physical::FIXED_LEN_BYTE_ARRAY => u64::try_from(descr.type_length()).unwrap_or(0),
            _ => 8,
        }
        .max(16);
        let values = u64::try_from(chunk.num_values()).unwrap_or(0).max(1);
        let rows = u64::try_from(rows).unwrap_or(0);
        let is_bytes = descr.physical_type() == Physical::BYTE_ARRAY;
        let pages = pages
            .iter()
            .filter(|p| !p.is_dictionary())
            .map(|p| {
                // A v1 page of a repeated column does not say its rows:
                // its share of the chunk's.
                let page_rows = p.rows.unwrap_or(if flat {
                    p.values
                } else {
                    p.values.saturating_mul(rows) / values
                });
                let per_value = if is_bytes && p.indexes_dictionary() {
                    longest + 8
                } else if is_bytes && p.shares_prefixes() {
                    p.uncompressed + 8
                } else if is_bytes {
                    p.uncompressed / p.values.max(1) + 8
                } else {
                    width
                };
                let total = if is_bytes && !p.indexes_dictionary() && !p.shares_prefixes() {
                    p.uncompressed + 8 * p.values
                } else {
                    p.values.saturating_mul(per_value)
                };
                let per_row = if flat {
                    per_value
                } else {
                    total / page_rows.max(1) + per_value
                };
                (page_rows, total, per_row)
            })
            .collect();
        Cost { pages }
    }

    /// Most bytes any `r` consecutive rows decode to: the pages such rows
    /// touch, each at most `r` rows' worth.
    fn window(&self, r: u64) -> u64 {
        let p = &self.pages;
        let n = p.len();
        let (mut rows, mut sum) = (vec![0u64; n + 1], vec![0u64; n + 1]);
        for (k, &(page_rows, total, per_row)) in p.iter().enumerate() {
            rows[k + 1] = rows[k].saturating_add(page_rows);
            sum[k + 1] = sum[k].saturating_add(total.min(per_row.saturating_mul(r)));
        }
        let (mut best, mut j) = (0u64, 0usize);
        for i in 0..n {
            // Rows from page i's last on reach page j + 1 while the rows
            // strictly between (pages i+1..=j) are fewer than r - 1.
            j = j.max(i);
            while j + 1 < n && rows[j + 1].saturating_sub(rows[i + 1]).saturating_add(1) < r {
                j += 1;
            }
            best = best.max(sum[j + 1].saturating_sub(sum[i]));
        }
        best
    }
}

/// The most rows (up to `batch_rows`) decoded at a time whose worst case,
/// over every row group, stays within `allowance`; at least one.
fn decode_rows(groups: &[Vec<Cost>], batch_rows: usize, allowance: u64) -> usize {
    let worst = |r: u64| {
        groups
            .iter()
            .map(|costs| {
                costs
                    .iter()
                    .map(|c| c.window(r))
                    .fold(0u64, u64::saturating_add)
            })
            .max()
            .unwrap_or(0)
    };
    let (mut lo, mut hi) = (1u64, batch_rows.max(1) as u64);
    if worst(hi) <= allowance {
        return hi as usize;
    }
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if worst(mid) <= allowance {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    lo as usize
}

/// INT96 timestamps (Spark's, Impala's) are read as nanoseconds, which
/// wrap silently past 2262: each top-level INT96 column decoded is read
/// once more as milliseconds (which never wrap) and checked to fit.
/// INT96 inside a struct or list is not checked (known limit, in the
/// README): refusing it would refuse every nested timestamp stock Spark
/// writes, whatever its values.
fn check_int96<T: Reopen>(
    file: &T,
    meta: &ParquetMetaData,
    leaves: &[usize],
    batch_rows: usize,
    path: &str,
) -> Result<(), SliceError> {
    let descr = meta.file_metadata().schema_descr();
    let roots: Vec<usize> = descr
        .root_schema()
        .get_fields()
        .iter()
        .enumerate()
        .filter(|(_, t)| t.is_primitive() && t.get_physical_type() == Physical::INT96)
        .map(|(i, _)| i)
        .filter(|&i| leaves.iter().any(|&l| descr.get_column_root_idx(l) == i))
        .collect();
    if roots.is_empty() {
        return Ok(());
    }
    let bad = |e: parquet::errors::ParquetError| malformed(path, e.to_string());
    let plain =
        ArrowReaderMetadata::try_new(Arc::new(meta.clone()), super::schema::reader_options())
            .map_err(bad)?;
    let fields: Vec<Field> = plain
        .schema()
        .fields()
        .iter()
        .enumerate()
        .map(|(i, f)| match f.data_type() {
            DataType::Timestamp(TimeUnit::Nanosecond, tz) if roots.contains(&i) => f
                .as_ref()
                .clone()
                .with_data_type(DataType::Timestamp(TimeUnit::Millisecond, tz.clone())),
            _ => f.as_ref().clone(),
        })
        .collect();
    let hint = Arc::new(Schema::new(fields));
    let as_ms = ArrowReaderMetadata::try_new(
        Arc::new(meta.clone()),
        super::schema::reader_options().with_schema(hint.clone()),
    )
    .map_err(bad)?;
    let copy = file.reopen().map_err(|e| malformed(path, e.to_string()))?;
    let builder = ParquetRecordBatchReaderBuilder::new_with_metadata(copy, as_ms);
    let mask = ProjectionMask::roots(builder.parquet_schema(), roots.iter().copied());
    let reader = builder
        .with_projection(mask)
        .with_batch_size(batch_rows.max(1))
        .build()
        .map_err(bad)?;
    for batch in reader {
        let batch = batch.map_err(|e| malformed(path, e.to_string()))?;
        for (column, field) in batch.columns().iter().zip(batch.schema().fields()) {
            out_of_range(column, field.name(), path)?;
        }
    }
    Ok(())
}

/// Refuse `column` (milliseconds) if a value does not fit in nanoseconds.
fn out_of_range(column: &ArrayRef, name: &str, path: &str) -> Result<(), SliceError> {
    let Some(ms) = column.as_primitive_opt::<TimestampMillisecondType>() else {
        return Ok(());
    };
    let Some(v) = ms
        .iter()
        .flatten()
        .find(|v| !(-NANOS_RANGE_MS..=NANOS_RANGE_MS).contains(v))
    else {
        return Ok(());
    };
    let when = arrow::temporal_conversions::timestamp_ms_to_datetime(v)
        .map_or_else(|| format!("{v} ms since 1970"), |d| d.to_string());
    Err(refused(
        path,
        format!(
            "INT96 timestamp column `{name}` holds {when}, outside 1677-09-21..2262-04-11: it would wrap when read as nanoseconds, the unit INT96 is read at"
        ),
        "rewrite the column as INT64 TIMESTAMP(MICROS) (Spark: spark.sql.parquet.outputTimestampType=TIMESTAMP_MICROS)",
    ))
}

fn malformed(path: &str, detail: String) -> SliceError {
    SliceError::Malformed {
        path: path.to_string(),
        detail,
    }
}

fn refused(path: &str, why: String, fix: &str) -> SliceError {
    SliceError::Refused {
        path: path.to_string(),
        why,
        fix: fix.to_string(),
    }
}

/// A column chunk whose pages cannot be walked: malformed, named.
fn column_error(path: &str, g: usize, chunk: &ColumnChunkMetaData, e: String) -> SliceError {
    if e.contains("dictionary page offset is 0") {
        return refused(
            path,
            format!(
                "column `{}` (row group {g}): {e}",
                chunk.column_path().string()
            ),
            "nothing was run or committed",
        );
    }
    malformed(
        path,
        format!(
            "column `{}` (row group {g}): {e}",
            chunk.column_path().string()
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::slice::{ResolvedSlice, SliceReader};
    use arrow::array::{Int64Array, RecordBatch, StringArray};
    use parquet::arrow::ArrowWriter;
    use parquet::file::properties::WriterProperties;
    use std::path::{Path, PathBuf};

    /// The public files of apache/parquet-testing vendored for the suite.
    fn corpus(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/data/parquet-testing")
            .join(name)
    }

    /// Read `file` whole as a run reads it, within `budget`: its rows.
    fn read(file: &Path, budget: u64) -> Result<Vec<RecordBatch>, SliceError> {
        let slice = ResolvedSlice::from_files("s", &[file])?;
        slice
            .reader(1_000)?
            .with_input_budget(budget)
            .collect::<Result<Vec<_>, _>>()
    }

    fn rows(batches: &[RecordBatch]) -> usize {
        batches.iter().map(RecordBatch::num_rows).sum()
    }

    fn refusal(e: SliceError) -> String {
        match e {
            SliceError::Refused { .. } => e.to_string(),
            other => panic!("not a refusal: {other}"),
        }
    }

    /// `rows` rows of one string column, each `len` bytes, every row the
    /// same value (a dictionary of one entry when `dictionary`).
    fn strings(path: &Path, rows: usize, len: usize, dictionary: bool) {
        let value = "x".repeat(len);
        let column = StringArray::from(vec![value.as_str(); rows]);
        let batch = RecordBatch::try_from_iter([("s", Arc::new(column) as ArrayRef)]).unwrap();
        let props = WriterProperties::builder()
            .set_dictionary_enabled(dictionary)
            .set_dictionary_page_size_limit(len * 4)
            .set_compression(parquet::basic::Compression::ZSTD(Default::default()))
            .build();
        let file = std::fs::File::create(path).unwrap();
        let mut w = ArrowWriter::try_new(file, batch.schema(), Some(props)).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
    }

    #[test]
    fn a_page_declaring_more_than_the_budget_is_refused_before_it_is_inflated() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wide.parquet");
        strings(&path, 3, 4 << 20, false);
        // Tiny on disk (zstd), 12 MiB of strings once inflated.
        assert!(std::fs::metadata(&path).unwrap().len() < 64 << 10);
        let e = refusal(read(&path, 2 << 20).unwrap_err());
        assert!(
            e.contains("wide.parquet") && e.contains("over the input budget"),
            "{e}"
        );
        assert!(e.contains("--max-input-batch-mb"), "{e}");
        assert_eq!(rows(&read(&path, 64 << 20).unwrap()), 3);
    }

    /// One dictionary entry of 1 MiB referenced by 400 rows: a page of a
    /// few bytes that decodes to 400 MiB. It is decoded a few rows at a
    /// time and refused once a batch passes the budget.
    #[test]
    fn a_dictionary_that_expands_past_the_budget_is_refused_a_few_rows_in() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("expands.parquet");
        strings(&path, 400, 1 << 20, true);
        let e = refusal(read(&path, 16 << 20).unwrap_err());
        assert!(
            e.contains("expands.parquet") && e.contains("--batch-rows"),
            "{e}"
        );
        // Within a budget that holds a batch, every row arrives.
        let slice = ResolvedSlice::from_files("s", &[&path]).unwrap();
        let n: usize = slice
            .reader(10)
            .unwrap()
            .with_input_budget(64 << 20)
            .map(|b| b.unwrap().num_rows())
            .sum();
        assert_eq!(n, 400);
    }

    #[test]
    fn decoding_runs_a_few_rows_at_a_time_only_where_pages_could_expand() {
        let page = |rows, total, per_row| Cost {
            pages: vec![(rows, total, per_row)],
        };
        // Ordinary pages: the whole batch at once.
        let plain = vec![vec![page(20_000, 1 << 20, 64)]];
        assert_eq!(decode_rows(&plain, 8_192, 128 << 20), 8_192);
        // 1 MiB per row: 16 rows fit 16 MiB.
        let wide = vec![vec![page(400, 400 << 20, 1 << 20)]];
        assert_eq!(decode_rows(&wide, 8_192, 16 << 20), 16);
        // A window of 3 rows touches up to 3 one-row pages.
        let c = Cost {
            pages: vec![(1, 10, 10), (1, 10, 10), (1, 10, 10), (1, 10, 10)],
        };
        assert_eq!(c.window(1), 10);
        assert_eq!(c.window(2), 20);
        assert_eq!(c.window(3), 30);
        assert_eq!(c.window(100), 40);
    }

    /// large_string_map.brotli.parquet: 4 KB holding two 1 GiB map keys.
    #[test]
    fn a_brotli_file_of_4_kb_that_inflates_to_gigabytes_is_refused_at_once() {
        let t = std::time::Instant::now();
        let e = refusal(
            read(
                &corpus("large_string_map.brotli.parquet"),
                DEFAULT_INPUT_BATCH_BYTES,
            )
            .unwrap_err(),
        );
        assert!(
            e.contains("large_string_map.brotli.parquet") && e.contains("arr.key_value.key"),
            "{e}"
        );
        assert!(t.elapsed().as_secs() < 20, "took {:?}", t.elapsed());
    }

    /// repeated_no_annotation.parquet: the file says 0 rows, its row
    /// group and its `id` column 6. The decoder stopped at the file's 0
    /// (`idem exec`: "0 in, 0 out", exit 0); every row arrives now, as
    /// pyarrow reads them.
    #[test]
    fn a_file_whose_total_says_no_rows_reads_the_rows_its_row_groups_hold() {
        let file = corpus("repeated_no_annotation.parquet");
        let batches = read(&file, DEFAULT_INPUT_BATCH_BYTES).unwrap();
        assert_eq!(rows(&batches), 6);
        let b = arrow::compute::concat_batches(&batches[0].schema(), &batches).unwrap();
        let ids = b.column(0).as_primitive::<arrow::datatypes::Int32Type>();
        assert_eq!(ids.values().to_vec(), [1, 2, 3, 4, 5, 6]);
        let phones = b.column(1).as_struct().column(0).as_list::<i32>();
        let counts: Vec<_> = (0..6)
            .map(|i| b.column(1).is_valid(i).then(|| phones.value_length(i)))
            .collect();
        assert_eq!(counts, [None, None, Some(0), Some(1), Some(1), Some(3)]);
    }

    /// A row group whose flat column holds more values than the rows it
    /// says: which count a reader believes decides what it delivers, so
    /// the file is refused.
    #[test]
    fn a_row_group_that_contradicts_its_columns_is_refused() {
        use parquet::file::metadata::{ColumnChunkMetaData, RowGroupMetaData};
        let message = "message m { required int32 id; }";
        let schema = Arc::new(parquet::schema::types::SchemaDescriptor::new(Arc::new(
            parquet::schema::parser::parse_message_type(message).unwrap(),
        )));
        let chunk = ColumnChunkMetaData::builder(schema.column(0))
            .set_num_values(6)
            .build()
            .unwrap();
        let group = RowGroupMetaData::builder(schema.clone())
            .set_num_rows(0)
            .set_column_metadata(vec![chunk])
            .build()
            .unwrap();
        let file = FileMetaData::new(1, 0, None, None, schema, None);
        let meta = ParquetMetaDataBuilder::new(file)
            .set_row_groups(vec![group])
            .build();
        let e = refusal(row_count(&meta, "lies.parquet").unwrap_err());
        assert!(
            e.contains("lies.parquet")
                && e.contains("row group 0 says 0 rows, but column `id` holds 6 values"),
            "{e}"
        );
    }

    /// The same legacy layout (a repeated group with no LIST annotation)
    /// written with a footer that agrees with itself: every row arrives,
    /// and the rows-in check holds.
    #[test]
    fn a_repeated_group_without_a_list_annotation_reads_every_row() {
        use parquet::data_type::{ByteArray, ByteArrayType, Int32Type, Int64Type};
        use parquet::file::writer::SerializedFileWriter;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("legacy.parquet");
        let message = "message user { required int32 id; optional group phoneNumbers { \
            repeated group phone { required int64 number; optional binary kind (UTF8); } } }";
        let schema = Arc::new(parquet::schema::parser::parse_message_type(message).unwrap());
        let file = std::fs::File::create(&path).unwrap();
        let mut w = SerializedFileWriter::new(file, schema, Default::default()).unwrap();
        let mut g = w.next_row_group().unwrap();
        // The six rows of repeated_no_annotation.parquet: two without
        // phoneNumbers, one with no phone, then 1, 1 and 3 phones.
        let mut c = g.next_column().unwrap().unwrap();
        c.typed::<Int32Type>()
            .write_batch(&[1, 2, 3, 4, 5, 6], None, None)
            .unwrap();
        c.close().unwrap();
        let def = [0, 0, 1, 2, 2, 2, 2, 2];
        let rep = [0, 0, 0, 0, 0, 0, 1, 1];
        let mut c = g.next_column().unwrap().unwrap();
        let numbers = [5555555555, 1111111111, 1111111111, 2222222222, 3333333333];
        c.typed::<Int64Type>()
            .write_batch(&numbers, Some(&def), Some(&rep))
            .unwrap();
        c.close().unwrap();
        let mut c = g.next_column().unwrap().unwrap();
        let kinds: Vec<ByteArray> = ["home", "home", "mobile"].map(ByteArray::from).to_vec();
        c.typed::<ByteArrayType>()
            .write_batch(&kinds, Some(&[0, 0, 1, 2, 3, 3, 2, 3]), Some(&rep))
            .unwrap();
        c.close().unwrap();
        g.close().unwrap();
        w.close().unwrap();
        let batches = read(&path, DEFAULT_INPUT_BATCH_BYTES).unwrap();
        assert_eq!(rows(&batches), 6);
        let ids = batches[0]
            .column(0)
            .as_primitive::<arrow::datatypes::Int32Type>();
        assert_eq!(ids.values().to_vec(), [1, 2, 3, 4, 5, 6]);
    }

    /// int96_from_spark.parquet: a timestamp in the year 290000.
    #[test]
    fn an_int96_timestamp_past_the_nanosecond_range_is_refused_naming_its_column() {
        let e = refusal(
            read(
                &corpus("int96_from_spark.parquet"),
                DEFAULT_INPUT_BATCH_BYTES,
            )
            .unwrap_err(),
        );
        assert!(
            e.contains("int96_from_spark.parquet")
                && e.contains("column `a`")
                && e.contains("2262"),
            "{e}"
        );
    }

    /// dict-page-offset-zero.parquet (Dremio 3.2) and
    /// nation.dict-malformed.parquet: pyarrow reads them; the Parquet
    /// crate does not (the first's footer, the second's dictionary). They
    /// are refused as unreadable, by name, before anything runs.
    #[test]
    fn files_the_decoder_cannot_read_are_refused_by_name() {
        for name in [
            "dict-page-offset-zero.parquet",
            "nation.dict-malformed.parquet",
        ] {
            let e = read(&corpus(name), DEFAULT_INPUT_BATCH_BYTES).unwrap_err();
            assert!(matches!(e, SliceError::Malformed { .. }), "{name}: {e}");
            let e = e.to_string();
            assert!(
                e.contains(name) && e.contains("not a readable Parquet file"),
                "{e}"
            );
        }
    }

    #[test]
    fn a_zero_row_file_reads_as_one_zero_row_batch_of_its_schema() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("empty.parquet");
        let schema = Arc::new(Schema::new(vec![Field::new("n", DataType::Int64, false)]));
        let mut w =
            ArrowWriter::try_new(std::fs::File::create(&path).unwrap(), schema.clone(), None)
                .unwrap();
        w.write(&RecordBatch::new_empty(schema.clone())).unwrap();
        w.close().unwrap();
        let batches = read(&path, DEFAULT_INPUT_BATCH_BYTES).unwrap();
        assert_eq!(batches.len(), 1);
        assert_eq!(batches[0].num_rows(), 0);
        assert_eq!(batches[0].schema().field(0).name(), "n");
        // A file with rows gets no extra batch.
        let full = dir.path().join("full.parquet");
        let b = RecordBatch::try_new(schema.clone(), vec![Arc::new(Int64Array::from(vec![1, 2]))])
            .unwrap();
        let mut w =
            ArrowWriter::try_new(std::fs::File::create(&full).unwrap(), schema, None).unwrap();
        w.write(&b).unwrap();
        w.close().unwrap();
        let (reader, _) = SliceReader::of_files("s", &[&full], 1).unwrap();
        assert_eq!(
            reader.map(|b| b.unwrap().num_rows()).collect::<Vec<_>>(),
            [1, 1]
        );
    }
}
