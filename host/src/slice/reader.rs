//! The batch reader: a slice streamed as fixed-size `RecordBatch`es, file
//! after file in pinned order, the next file's private copy made while the
//! current one is decoded. Memory stays O(batch), not O(slice).

use std::ffi::OsStr;
use std::sync::Arc;

use arrow::array::ArrayRef;
use arrow::compute::BatchCoalescer;
use arrow::datatypes::{Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;

use super::as_read::InputsRead;
use super::copy::{IN_MEMORY_MAX, PrivateCopy, private_copy};
use super::decode::{Decode, Decoding};
use super::error::SliceError;
use super::guard::DEFAULT_INPUT_BATCH_BYTES;
use super::pin::InputObject;
use super::resolve::ResolvedSlice;
use super::text_rows::{Rejected, Rejects};

/// Streams a slice as fixed-size batches, file after file, in pinned order.
pub struct SliceReader {
    pub(super) slice: ResolvedSlice,
    pub(super) batch_rows: usize,
    next_input: usize,
    pub(super) current: Option<Decoding>,
    /// Most bytes one batch of decoded input may hold
    /// ([`SliceReader::with_input_budget`]).
    budget: u64,
    /// Bytes decoded into the batch being filled.
    pending_bytes: u64,
    /// A batch was handed out (else a zero-row one carries the schema).
    emitted: bool,
    pub(super) coalescer: BatchCoalescer,
    /// The files' columns, then the constant ones.
    pub(super) full: SchemaRef,
    /// What the guest sees: `full` without a row filter's column.
    pub(super) schema: SchemaRef,
    /// What every file holds.
    pub(super) file_schema: SchemaRef,
    /// The files' columns decoded (indices into `file_schema`), when
    /// [`SliceReader::narrow`]ed; all otherwise.
    pub(super) decode: Option<Vec<usize>>,
    /// The guest's columns, in its order, when narrowed.
    pub(super) narrowed: Option<Vec<String>>,
    /// The columns the guest takes dictionary-encoded.
    pub(super) dictionaries: Vec<String>,
    /// `file_schema` with those columns as dictionaries: how Parquet is
    /// asked to decode them (its dictionary pages kept, not expanded).
    pub(super) decode_as: Option<SchemaRef>,
    /// Makes those columns' dictionaries canonical, batch by batch.
    canonical: idem_guest::native::Canonical,
    /// The private copy of the next input, made (read, hashed, checked) on
    /// a thread of its own while this one is decoded: at most two copies
    /// exist at once.
    ahead: Option<(
        usize,
        std::thread::JoinHandle<Result<PrivateCopy, SliceError>>,
    )>,
    /// The bad rows its text inputs may have, and have had.
    rejects: Rejects,
    /// Set when the reader is dropped: a copy being made ahead stops.
    stop: Arc<std::sync::atomic::AtomicBool>,
    /// With [`Pins::AsRead`](crate::slice::pin::Pins::AsRead): each copy's sha256, taken while it is decoded.
    read: Option<InputsRead>,
    /// Inputs up to this size are copied into memory (and made ahead),
    /// larger ones into a temporary file: [`IN_MEMORY_MAX`] but in tests.
    in_memory_max: u64,
    /// The most hashes still under way when a copy was started.
    #[cfg(test)]
    hashing_at_copy: usize,
    /// Private copies made (ahead or in turn).
    #[cfg(test)]
    copies: usize,
    done: bool,
    /// The rows the guest will get, when the footers say (see
    /// [`SliceReader::total_rows`]).
    total_rows: Option<u64>,
    /// A table's files' distinct schemas as their footers gave them before
    /// anything was decoded, and each input's among them.
    peeked: Vec<SchemaRef>,
    peeked_of: Vec<usize>,
}

impl ResolvedSlice {
    /// Open the slice for reading in batches of exactly `batch_rows` rows
    /// (the last may be shorter). Checks every file's footer and schema
    /// first (fail early); each file is checked again, digest and schema,
    /// from its private copy when its turn to be decoded comes.
    pub fn reader(&self, batch_rows: usize) -> Result<SliceReader, SliceError> {
        let Peeked {
            schema,
            rows,
            files: peeked,
            of: peeked_of,
        } = self.peek_all()?;
        let rejects = self
            .text
            .as_ref()
            .map_or_else(Rejects::default, |t| Rejects {
                max: t.max_rejects,
                count: Default::default(),
                inferred: t.inferred,
            });
        let file_schema = schema.or_else(|| self.empty_schema.clone());
        let file_schema = file_schema.ok_or_else(|| SliceError::Empty {
            slice: self.id.clone(),
            root: self.root.to_string(),
            hint: "no inputs".into(),
        })?;
        let mut fields: Vec<Field> = file_schema
            .fields()
            .iter()
            .map(|f| f.as_ref().clone())
            .collect();
        fields.extend(self.constant_fields.iter().cloned());
        let full = Arc::new(Schema::new_with_metadata(
            fields.clone(),
            file_schema.metadata().clone(),
        ));
        // The column a row filter selects by is bookkeeping of the table
        // read (which slice owns the row), not data: the guest never sees it.
        if let Some((column, values)) = &self.row_filter {
            if full.field_with_name(column).is_err() {
                return Err(SliceError::Malformed {
                    path: self.root.to_string(),
                    detail: format!(
                        "no column `{column}` to select slice `{}` by",
                        crate::text::clip_str(&values.join("`, `"), 300)
                    ),
                });
            }
            fields.retain(|f| f.name() != column);
        }
        let schema = Arc::new(Schema::new_with_metadata(
            fields,
            file_schema.metadata().clone(),
        ));
        Ok(SliceReader {
            slice: self.clone(),
            batch_rows,
            next_input: 0,
            current: None,
            budget: DEFAULT_INPUT_BATCH_BYTES,
            pending_bytes: 0,
            emitted: false,
            coalescer: BatchCoalescer::new(schema.clone(), batch_rows.max(1)),
            full,
            schema,
            file_schema,
            decode: None,
            narrowed: None,
            dictionaries: Vec::new(),
            decode_as: None,
            canonical: Default::default(),
            ahead: None,
            rejects,
            stop: Default::default(),
            read: None,
            in_memory_max: IN_MEMORY_MAX,
            #[cfg(test)]
            hashing_at_copy: 0,
            #[cfg(test)]
            copies: 0,
            done: false,
            total_rows: rows,
            peeked,
            peeked_of,
        })
    }
}

impl ResolvedSlice {
    /// Every file's footer checked before anything is decoded: the one
    /// schema they share (text inputs: the one the run declared or
    /// inferred), and the rows the footers state, which is what the guest
    /// gets unless rows are filtered (by owner) or the inputs are text
    /// (counted as read). A table's files may differ by the columns
    /// appended to it: read as its columns ([`super::fit::read_schema`]),
    /// each file's own schema kept (once per distinct schema) to check its
    /// private copy against.
    fn peek_all(&self) -> Result<Peeked, SliceError> {
        let mut schema: Option<SchemaRef> = self.text.as_ref().map(|t| t.schema.clone());
        let mut rows = (self.text.is_none() && self.row_filter.is_none()).then_some(0u64);
        let mut distinct: Vec<(&InputObject, SchemaRef)> = Vec::new();
        let mut seen: std::collections::HashMap<arrow::datatypes::Fields, usize> =
            Default::default();
        let mut of = Vec::new();
        for input in self.inputs.iter().filter(|_| self.text.is_none()) {
            let (s, n) = self.peek(input)?;
            rows = rows.map(|r| r.saturating_add(n));
            match (&schema, &self.table_columns) {
                (_, Some(_)) => {
                    let next = distinct.len();
                    let at = *seen.entry(s.fields().clone()).or_insert(next);
                    if at == next {
                        distinct.push((input, s));
                    }
                    of.push(at);
                }
                (None, None) => schema = Some(s),
                (Some(first), None) => self.same_schema(input, first, &s)?,
            }
        }
        if let Some(table) = self.table_columns.as_ref().filter(|_| !distinct.is_empty()) {
            schema = Some(super::fit::read_schema(table, &distinct)?);
        }
        Ok(Peeked {
            schema,
            rows,
            files: distinct.into_iter().map(|(_, s)| s).collect(),
            of,
        })
    }
}

/// What the footers gave before anything was decoded.
struct Peeked {
    /// The schema the files are read as.
    schema: Option<SchemaRef>,
    /// The rows they hold, when that is what the guest gets.
    rows: Option<u64>,
    /// A table's files' distinct schemas, and each input's among them.
    files: Vec<SchemaRef>,
    of: Vec<usize>,
}

impl Drop for SliceReader {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

impl SliceReader {
    /// The rows the guest will get, as the Parquet footers state them
    /// (`None` for text inputs and for rows selected by owner): the run's
    /// progress total.
    pub fn total_rows(&self) -> Option<u64> {
        self.total_rows
    }

    /// The schema of every batch.
    pub fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    /// How many rows its text inputs rejected (read once it has run).
    pub fn rejected(&self) -> Rejected {
        self.rejects.handle()
    }

    /// Decode until a batch of `batch_rows` rows is complete, or the slice
    /// ends.
    fn fill(&mut self) -> Result<(), SliceError> {
        while !self.coalescer.has_completed_batch() {
            if self.current.is_none() {
                if self.next_input == self.slice.inputs.len() {
                    return self.end_of_slice();
                }
                self.open_next()?;
            }
            self.decode_next()?;
        }
        Ok(())
    }

    /// At the slice's end: the rows still buffered become the last batch.
    fn end_of_slice(&mut self) -> Result<(), SliceError> {
        self.coalescer
            .finish_buffered_batch()
            .map_err(|e| SliceError::Malformed {
                path: "(end of slice)".into(),
                detail: e.to_string(),
            })?;
        if let Some(read) = &self.read {
            read.read_whole();
        }
        self.done = true;
        Ok(())
    }

    /// Open the next input for decoding: its private copy, hashed as it is
    /// decoded when the reader hashes as read.
    fn open_next(&mut self) -> Result<(), SliceError> {
        let at = self.next_input;
        let input = self.slice.inputs[at].clone();
        self.next_input += 1;
        let copy = self.copy_of(at, &input)?;
        if let Some(read) = &self.read {
            read.start(&input, &copy)?;
        }
        let how = Decode {
            batch_rows: self.batch_rows,
            schema: &self.file_schema,
            decode: self.decode.as_deref(),
            decode_as: self.decode_as.as_ref(),
            peeked: self.peeked_of.get(at).and_then(|&i| self.peeked.get(i)),
            budget: self.budget,
            rejects: &self.rejects,
        };
        self.current = Some(self.slice.open(&input, copy, &how)?);
        Ok(())
    }

    /// The private copy of `input`, input `at`: the one made ahead, or one
    /// made now.
    fn copy_of(&mut self, at: usize, input: &InputObject) -> Result<PrivateCopy, SliceError> {
        // The next input's copy starts before this one's is awaited
        // (or made here, for the first): the two overlap. Only one
        // that fits in memory is made ahead (a larger one would be
        // a temporary file read whole even if this run stops now);
        // a reader dropped midway stops it (`Drop`). If no thread
        // can be started, the copy is made in turn instead.
        let this = self.ahead.take();
        if let Some(read) = &self.read {
            read.settle();
            #[cfg(test)]
            {
                self.hashing_at_copy = self.hashing_at_copy.max(read.running());
            }
        }
        let max = self.in_memory_max;
        self.copy_ahead(self.next_input);
        match this {
            Some((i, made)) if i == at => made.join().unwrap_or_else(|_| {
                Err(SliceError::Io {
                    path: input.path.clone(),
                    source: std::io::Error::other("the thread copying it panicked"),
                })
            }),
            _ => {
                #[cfg(test)]
                {
                    self.copies += 1;
                }
                self.slice.private_copy_with(input, max)
            }
        }
    }

    /// Decode the current file's next batch into the batch being filled;
    /// at the file's end, check its rows and close it.
    fn decode_next(&mut self) -> Result<(), SliceError> {
        let Some(file) = self.current.as_mut() else {
            return Ok(());
        };
        match file.next_batch() {
            None => {
                file.check_rows()?;
                self.current = None;
            }
            Some(Err(e)) => return Err(e),
            Some(Ok(batch)) => {
                file.read += batch.num_rows() as u64;
                let path = file.path.clone();
                self.take(&path, batch)?;
            }
        }
        Ok(())
    }

    /// Add one decoded batch of the file at `path` to the batch being
    /// filled: within the budget, with its constant columns, filtered,
    /// narrowed and encoded as the guest takes it.
    fn take(&mut self, path: &str, batch: RecordBatch) -> Result<(), SliceError> {
        let malformed = |detail: String| SliceError::Malformed {
            path: path.to_string(),
            detail,
        };
        self.pending_bytes += batch.get_array_memory_size() as u64;
        if self.pending_bytes > self.budget {
            return Err(over_budget(path, self.budget, self.batch_rows));
        }
        // Files may differ only in schema metadata: rebind (and append the
        // file's constant columns).
        let mut columns = batch.columns().to_vec();
        if !self.slice.constant_fields.is_empty() {
            columns.extend(self.slice.constant_columns(path, batch.num_rows())?);
        }
        let batch = RecordBatch::try_new(self.full.clone(), columns)
            .map_err(|e| malformed(e.to_string()))?;
        let mut batch = self.slice.filter_rows(path, batch)?;
        if let Some(names) = &self.narrowed {
            batch = idem_guest::native::project(&batch, names).map_err(|e| malformed(e.0))?;
        }
        if !self.dictionaries.is_empty() {
            batch = encode_plain(&batch, &self.dictionaries, &self.schema)
                .map_err(|e| malformed(e.to_string()))?;
        }
        self.coalescer
            .push_batch(batch)
            .map_err(|e| malformed(e.to_string()))?;
        if self.coalescer.has_completed_batch() {
            self.pending_bytes = 0;
        }
        Ok(())
    }
}

impl Iterator for SliceReader {
    type Item = Result<RecordBatch, SliceError>;

    fn next(&mut self) -> Option<Self::Item> {
        let b = match self.coalescer.next_completed_batch() {
            Some(b) => b,
            None if self.done => return self.schema_only(),
            None => {
                if let Err(e) = self.fill() {
                    self.done = true;
                    self.emitted = true;
                    return Some(Err(e));
                }
                match self.coalescer.next_completed_batch() {
                    Some(b) => b,
                    None => return self.schema_only(),
                }
            }
        };
        self.emitted = true;
        if self.dictionaries.is_empty() {
            return Some(Ok(b));
        }
        // Each batch's dictionaries canonical: the same rows, the same keys.
        Some(
            self.canonical
                .encode(&b, &self.dictionaries)
                .map_err(|e| SliceError::Malformed {
                    path: "(dictionary columns)".into(),
                    detail: e.0,
                }),
        )
    }
}

impl SliceReader {
    /// Bound decoding to `bytes` per batch of decoded input (default
    /// [`DEFAULT_INPUT_BATCH_BYTES`]): a page declaring more, a page that
    /// inflates past its header, or a batch that decodes to more is refused,
    /// naming the file. Pages that could decode to much at once are decoded
    /// a few rows at a time, so the host holds O(budget) per reader.
    pub fn with_input_budget(mut self, bytes: u64) -> Self {
        self.budget = bytes.max(1);
        self
    }

    /// A slice that held no rows still names its columns: one zero-row
    /// batch of the schema, so the transform sees it and can carry it to
    /// its output (an empty input must not become an output of no columns).
    fn schema_only(&mut self) -> Option<Result<RecordBatch, SliceError>> {
        if self.emitted {
            return None;
        }
        self.emitted = true;
        Some(Ok(RecordBatch::new_empty(self.schema.clone())))
    }

    /// A reader over `files` (named as [`ResolvedSlice::from_files`] names
    /// them) that hashes each file as it reads it, instead of pinning them
    /// all before anything runs: one pass over the bytes, each copy's
    /// sha256 taken while it is decoded. For a run that checks no record
    /// against its inputs (`idem exec`); the [`InputsRead`] tells what was
    /// read. A file whose size changed since it was listed is refused.
    pub fn of_files(
        id: &str,
        files: &[impl AsRef<OsStr>],
        batch_rows: usize,
    ) -> Result<(SliceReader, InputsRead), SliceError> {
        let mut reader = ResolvedSlice::listed(id, files)?.reader(batch_rows)?;
        let read = InputsRead::default();
        reader.read = Some(read.clone());
        Ok((reader, read))
    }

    /// Start copying the first input now, on a thread of its own, while
    /// the caller does other work (loads the module): the first batch then
    /// waits for less. Call before the first batch.
    pub fn start_copying(&mut self) {
        if self.next_input == 0 && self.ahead.is_none() {
            self.copy_ahead(0);
        }
    }

    /// Make input `index`'s private copy on a thread of its own, if it fits
    /// in memory (a larger one would be a temporary file read whole even
    /// if the run stopped now) and a thread can be started.
    fn copy_ahead(&mut self, index: usize) {
        let max = self.in_memory_max;
        let Some(next) = self
            .slice
            .inputs
            .get(index)
            .filter(|next| next.size <= max)
            .cloned()
        else {
            return;
        };
        let store = self.slice.store.clone();
        let check = self.slice.check(&next);
        let stop = self.stop.clone();
        if let Ok(made) = std::thread::Builder::new()
            .name("idem-copy".into())
            .spawn(move || private_copy(&store, &next, check, max, Some(&stop)))
        {
            self.ahead = Some((index, made));
            #[cfg(test)]
            {
                self.copies += 1;
            }
        }
    }
}

/// The error for a batch that decoded past the budget.
fn over_budget(path: &str, budget: u64, batch_rows: usize) -> SliceError {
    SliceError::Refused {
        path: path.to_string(),
        why: format!(
            "a batch of {batch_rows} of its rows decodes to more than the input budget of {budget} bytes"
        ),
        fix: "lower --batch-rows, or raise --max-input-batch-mb if the data is genuine".into(),
    }
}

/// Columns `names` of a batch read from a file, before the coalescer: a
/// column decoded plain (a constant column) is encoded. Dictionaries are
/// made canonical after the coalescer, which may merge two files'.
fn encode_plain(
    batch: &RecordBatch,
    names: &[String],
    schema: &SchemaRef,
) -> Result<RecordBatch, arrow::error::ArrowError> {
    let columns = batch
        .columns()
        .iter()
        .zip(schema.fields())
        .map(|(c, f)| {
            if c.data_type() == f.data_type() || !names.iter().any(|n| n == f.name()) {
                Ok(c.clone())
            } else {
                arrow::compute::cast(c, f.data_type())
            }
        })
        .collect::<Result<Vec<ArrayRef>, _>>()?;
    RecordBatch::try_new(schema.clone(), columns)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::digest::Digest;
    use crate::slice::decode::decode_all;
    use crate::slice::fixture::{flip_a_value, plain_ints};
    use std::path::PathBuf;

    #[test]
    fn batches_have_the_fixed_size_across_file_boundaries_in_pinned_order() {
        let dir = tempfile::tempdir().unwrap();
        // 3 files of 1000 rows: batches of 700 must straddle the files.
        let files = crate::sample::write_day(dir.path(), "2026-10-01", 3_000, 3).unwrap();
        let slice = ResolvedSlice::from_partition(
            dir.path(),
            &crate::slice::Partition::one("date", "2026-10-01"),
        )
        .unwrap();
        assert_eq!(slice.id, "date=2026-10-01");
        // The progress total: the rows the three footers state; none when
        // rows are selected by owner.
        assert_eq!(slice.reader(700).unwrap().total_rows(), Some(3_000));
        let owned = slice.clone().with_row_filter("customer", &["acme".into()]);
        assert_eq!(owned.reader(700).unwrap().total_rows(), None);
        let names: Vec<&str> = slice.inputs.iter().map(|i| i.path.as_str()).collect();
        assert_eq!(
            names,
            [
                "date=2026-10-01/part-00000.parquet",
                "date=2026-10-01/part-00001.parquet",
                "date=2026-10-01/part-00002.parquet"
            ]
        );
        for (input, file) in slice.inputs.iter().zip(&files) {
            assert_eq!(input.digest, Digest::of_file(file).unwrap().0);
        }
        let sizes: Vec<usize> = slice
            .reader(700)
            .unwrap()
            .map(|b| b.unwrap().num_rows())
            .collect();
        assert_eq!(sizes, [700, 700, 700, 700, 200]);
        // Same rows in the same order as the generator wrote them.
        let all: Vec<RecordBatch> = slice
            .reader(700)
            .unwrap()
            .prefetch(2)
            .map(Result::unwrap)
            .collect();
        let expected = crate::sample::orders_batch(crate::sample::seed_of("2026-10-01"), 0, 3_000);
        assert_eq!(
            crate::digest::of_batches(&all),
            crate::digest::of_batches(&[expected])
        );
    }

    #[test]
    fn a_file_that_changed_after_pinning_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let files = crate::sample::write_day(dir.path(), "2026-10-01", 100, 1).unwrap();
        let slice = ResolvedSlice::from_files("s", &files).unwrap();
        crate::sample::write_day(dir.path(), "2026-10-01", 5_000, 1).unwrap();
        assert!(matches!(slice.reader(10), Err(SliceError::Changed { .. })));
    }

    fn sum(slice: &ResolvedSlice) -> Result<i64, SliceError> {
        sum_of(slice.reader(7)?)
    }

    fn sum_of_batch(b: &RecordBatch) -> i64 {
        let col = b
            .column(0)
            .as_any()
            .downcast_ref::<arrow::array::Int64Array>()
            .unwrap();
        col.values().iter().fold(0, |t, v| t.wrapping_add(*v))
    }

    fn sum_of(reader: SliceReader) -> Result<i64, SliceError> {
        let mut total = 0i64;
        for b in reader {
            total = total.wrapping_add(sum_of_batch(&b?));
        }
        Ok(total)
    }

    /// `idem exec`'s reader hashes each file as it reads it: what it
    /// reports is each file's path, size and sha256, in read order, and it
    /// decodes what a pinned reader decodes.
    #[test]
    fn an_as_read_reader_reports_what_it_read_in_one_pass() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("b.parquet"), dir.path().join("a.parquet"));
        let expected = plain_ints(&a, 100).wrapping_add(plain_ints(&b, 30));
        let pinned = ResolvedSlice::from_files("s", &[&a, &b]).unwrap();
        assert_eq!(sum_of(pinned.reader(7).unwrap()).unwrap(), expected);
        // In memory, and through temporary files (hashed by position while
        // the decoder seeks the same file).
        for in_memory_max in [IN_MEMORY_MAX, 0] {
            let (mut reader, read) = SliceReader::of_files("s", &[&a, &b], 7).unwrap();
            reader.in_memory_max = in_memory_max;
            // The first copy may be started early (while exec loads its
            // module); one that does not fit in memory is not.
            reader.start_copying();
            assert_eq!(
                reader.ahead.as_ref().map(|(i, _)| *i),
                (in_memory_max > 0).then_some(0)
            );
            assert!(read.finish().is_err(), "nothing read yet");
            let mut total = 0i64;
            for batch in reader.by_ref() {
                total = total.wrapping_add(sum_of_batch(&batch.unwrap()));
            }
            assert_eq!(total, expected);
            // Each hash was awaited before the next copy started: at most
            // two copies at once (the one decoded and hashed, the next).
            assert_eq!(reader.hashing_at_copy, 0);
            // One copy of each input: the early one was used, not made again.
            assert_eq!(reader.copies, 2);
            let inputs = read.finish().unwrap();
            assert_eq!(inputs, pinned.inputs, "sorted, with their sizes and sha256");
            assert_eq!(inputs[0].digest, Digest::of_file(&b).unwrap().0);
        }
    }

    /// The digest an as-read reader reports is of the bytes it decoded:
    /// a file rewritten between listing and reading is read, and reported,
    /// as it is when its turn comes; one whose size changed is refused.
    #[test]
    fn an_as_read_reader_reports_a_rewrite_as_read_and_refuses_a_new_size() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a.parquet"), dir.path().join("b.parquet"));
        let expected = plain_ints(&a, 100).wrapping_add(plain_ints(&b, 100));
        let listed = Digest::of_file(&b).unwrap().0;
        let (reader, read) = SliceReader::of_files("s", &[&a, &b], 7).unwrap();
        flip_a_value(&b);
        let now = Digest::of_file(&b).unwrap().0;
        assert_ne!(now, listed);
        let got = sum_of(reader).unwrap();
        assert_ne!(got, expected, "the rewritten values were decoded");
        assert_eq!(read.finish().unwrap()[1].digest, now);

        // Rewritten once its copy is made (its first rows are out: batch 15
        // of 7 rows holds a's last 2 and b's first 5): what was decoded and
        // reported is the copy, the old bytes, not the file as it is now.
        plain_ints(&b, 100);
        let (mut reader, read) = SliceReader::of_files("s", &[&a, &b], 7).unwrap();
        let mut total = 0i64;
        for _ in 0..15 {
            total = total.wrapping_add(sum_of_batch(&reader.next().unwrap().unwrap()));
        }
        flip_a_value(&b);
        total = total.wrapping_add(sum_of(reader).unwrap());
        assert_eq!(total, expected, "the copy's values, not the rewrite's");
        assert_eq!(read.finish().unwrap()[1].digest, listed);

        let (reader, read) = SliceReader::of_files("s", &[&a, &b], 7).unwrap();
        plain_ints(&b, 101);
        match sum_of(reader) {
            Err(SliceError::Changed { path, detail }) => {
                assert_eq!(path, "b.parquet");
                assert!(detail.contains(" listed, "), "{detail}");
            }
            other => panic!("a file that grew was read: {other:?}"),
        }
        let e = read.finish().unwrap_err().to_string();
        assert!(e.contains("not read to its end (1 inputs started)"), "{e}");
    }

    #[test]
    fn a_same_size_rewrite_after_pinning_is_refused_from_memory_and_disk_copies() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.parquet");
        let expected = plain_ints(&path, 100);
        let slice = ResolvedSlice::from_files("s", std::slice::from_ref(&path)).unwrap();
        assert_eq!(sum(&slice).unwrap(), expected);
        let input = &slice.inputs[0];
        assert!(matches!(
            slice.private_copy_with(input, 0).unwrap(),
            PrivateCopy::Disk(_)
        ));
        // The disk copy decodes like the memory one.
        let copy = slice.private_copy_with(input, 0).unwrap();
        let PrivateCopy::Disk(f) = copy else {
            unreachable!()
        };
        let schema = slice.peek_schema(input).unwrap();
        let rejects = Rejects::default();
        let how = decode_all(&schema, 7, &rejects);
        let mut decoding = slice.decoder(f, input, &how).unwrap();
        let mut rows = 0;
        while let Some(b) = decoding.next_batch() {
            rows += b.unwrap().num_rows();
        }
        assert_eq!(rows, 100);

        flip_a_value(&path);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), input.size);
        let now = Digest::of_file(&path).unwrap().0;
        for max in [IN_MEMORY_MAX, 0] {
            match slice.private_copy_with(input, max) {
                Err(SliceError::Changed { path, detail }) => {
                    assert_eq!(path, "a.parquet");
                    // Checked by BLAKE3, named by the copy's sha256.
                    assert_eq!(detail, format!("pinned {}, now {now}", input.digest));
                }
                Err(e) => panic!("{e}"),
                Ok(_) => panic!("a changed file was read"),
            }
        }
        let e = sum(&slice).unwrap_err();
        assert!(
            e.to_string().contains("rerun to read the new version"),
            "{e}"
        );
        // The flipped file still decodes: without the digest check the run
        // would have used a different value silently.
        let repinned = ResolvedSlice::from_files("s", &[path]).unwrap();
        let changed = sum(&repinned).unwrap();
        assert_ne!(changed, expected);
    }

    /// The next file's private copy is made on a thread of its own while
    /// the current one is decoded, and checked all the same: a later file
    /// rewritten after pinning fails the read when its turn comes, naming
    /// it, after the files before it were read.
    #[test]
    fn a_later_file_changed_after_pinning_fails_its_prefetched_copy() {
        let dir = tempfile::tempdir().unwrap();
        // Files of different sizes (so different contents): the rows read
        // are the first two files', in order.
        let mut sums = Vec::new();
        let paths: Vec<PathBuf> = (0..3)
            .map(|i| {
                let p = dir.path().join(format!("{i}.parquet"));
                sums.push(plain_ints(&p, 100 + i));
                p
            })
            .collect();
        let slice = ResolvedSlice::from_files("s", &paths).unwrap();
        flip_a_value(&paths[2]);
        let (mut rows, mut total) = (0, 0i64);
        let mut failed = None;
        for b in slice.reader(10).unwrap() {
            match b {
                Ok(b) => {
                    rows += b.num_rows();
                    let col = b
                        .column(0)
                        .as_any()
                        .downcast_ref::<arrow::array::Int64Array>();
                    let values = col.unwrap().values().iter();
                    total = values.fold(total, |t, v| t.wrapping_add(*v));
                }
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        match failed {
            Some(SliceError::Changed { path, .. }) => assert_eq!(path, "2.parquet"),
            other => panic!("{other:?}"),
        }
        // 201 rows before it: 20 batches of 10 went out, the last row waits
        // in the coalescer for the third file's rows.
        assert_eq!(rows, 200, "the two files before it were read");
        let last = 0x0102_0304_0506_0000i64 + 100;
        assert_eq!(total, sums[0].wrapping_add(sums[1]).wrapping_sub(last));
    }

    /// A copy made ahead gives up once its reader is gone (its stop flag
    /// set when the reader is dropped), instead of reading the input whole
    /// for nobody; the same copy without the flag completes.
    #[test]
    fn a_copy_made_ahead_stops_when_its_reader_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.parquet");
        plain_ints(&path, 100);
        let slice = ResolvedSlice::from_files("s", std::slice::from_ref(&path)).unwrap();
        let input = &slice.inputs[0];
        let reader = slice.reader(10).unwrap();
        let stop = reader.stop.clone();
        let copy = |stop| {
            private_copy(
                &slice.store,
                input,
                slice.check(input),
                IN_MEMORY_MAX,
                Some(stop),
            )
        };
        assert!(copy(&stop).is_ok());
        drop(reader);
        assert!(stop.load(std::sync::atomic::Ordering::Relaxed));
        match copy(&stop) {
            Err(e) => assert!(e.to_string().contains("the reader is gone"), "{e}"),
            Ok(_) => panic!("a copy went on for a dropped reader"),
        }
    }
}
