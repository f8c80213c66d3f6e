//! Decoding one text input into batches of the slice's schema
//! ([`super::text_csv`] for CSV and TSV, [`super::text_json`] for JSON
//! lines), each batch at most `batch_rows` rows and about a quarter of the
//! input budget in text. A row that does not decode is a reject: it fails
//! the run naming its file, line and column or, within `--max-rejects`,
//! is skipped and counted.

use std::io::BufReader;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use arrow::compute::{CastOptions, cast_with_options};
use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;

use super::error::SliceError;
use super::text::{Capped, RecordMark, Reject, TextFormat, TextInput, arrow_failed};
use super::text_csv::Records;
use super::text_json::Lines;

/// The rejects a slice allows, and how many its files had so far.
#[derive(Debug, Clone, Default)]
pub(super) struct Rejects {
    pub(super) max: u64,
    pub(super) count: Arc<AtomicU64>,
    pub(super) inferred: bool,
}

/// How many rows a reader's text inputs rejected (within `--max-rejects`),
/// read after it ran.
#[derive(Debug, Clone, Default)]
pub struct Rejected(Arc<AtomicU64>);

impl Rejected {
    /// Rows rejected so far.
    pub fn rows(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

impl Rejects {
    /// The count, to read after the reader is gone.
    pub(super) fn handle(&self) -> Rejected {
        Rejected(self.count.clone())
    }

    /// Count `r` (rows of `path`, in line order): past the most allowed,
    /// the error that names it.
    fn count(&self, path: &str, r: Reject) -> Result<(), SliceError> {
        let n = self.count.fetch_add(1, Ordering::Relaxed) + 1;
        if n <= self.max {
            return Ok(());
        }
        let fix = if self.max == 0 {
            let widen = match (&r.column, self.inferred) {
                (None, _) => "",
                (Some(_), true) => "declare the columns with --schema, ",
                (Some(_), false) => "declare a wider type in --schema, ",
            };
            format!(
                "fix the row, {widen}or let up to N bad rows be skipped and counted with --max-rejects N"
            )
        } else {
            format!(
                "{n} rows were rejected, more than --max-rejects {} allows: fix the input or raise the limit",
                self.max
            )
        };
        Err(SliceError::BadRow {
            path: path.to_string(),
            line: r.line,
            at: r
                .column
                .map(|c| format!(", column `{}`", crate::text::shown(&c, 64)))
                .unwrap_or_default(),
            why: r.why,
            fix,
        })
    }
}

/// Where a text input's rows come from.
enum Source {
    Delimited(Box<Records>),
    Lines(Lines),
    /// A file with no header and no rows (zero bytes, or blank lines).
    Empty,
}

/// The rows of one text input, in batches.
pub(super) struct TextRows {
    path: String,
    schema: SchemaRef,
    /// The columns handed on (indices into `schema`) and their types.
    out: Option<(Vec<usize>, SchemaRef)>,
    batch_rows: usize,
    /// Most bytes of text one batch is decoded from.
    batch_bytes: u64,
    source: Source,
    rejects: Rejects,
    done: bool,
}

/// How a [`TextRows`] cuts its batches and what it hands on.
pub(super) struct Cut {
    pub(super) batch_rows: usize,
    /// The input budget (a batch takes a quarter of it in text).
    pub(super) budget: u64,
    pub(super) out: Option<(Vec<usize>, SchemaRef)>,
    pub(super) rejects: Rejects,
}

impl TextRows {
    /// Start reading input `path` from its bytes `read` (its header
    /// checked against the schema).
    pub(super) fn open(
        path: &str,
        read: Box<dyn std::io::Read + Send>,
        input: &TextInput,
        cut: Cut,
    ) -> Result<Self, SliceError> {
        let source = match input.format {
            TextFormat::JsonLines => {
                Source::Lines(Lines::new(super::text::stream(path, read, None)))
            }
            f => {
                let mark = RecordMark::default();
                let text: BufReader<Capped> = super::text::stream(path, read, Some(mark.clone()));
                match Records::open(path, text, f, Some(&input.schema), mark)? {
                    Some(r) => Source::Delimited(Box::new(r)),
                    None => Source::Empty,
                }
            }
        };
        Ok(TextRows {
            path: path.to_string(),
            schema: input.schema.clone(),
            out: cut.out,
            batch_rows: cut.batch_rows.max(1),
            batch_bytes: (cut.budget / 4).max(1),
            source,
            rejects: cut.rejects,
            done: false,
        })
    }

    /// The next batch, `None` at the file's end.
    fn next_batch(&mut self) -> Result<Option<RecordBatch>, SliceError> {
        let (n, bytes) = (self.batch_rows, self.batch_bytes);
        let (batch, mut rejects) = match &mut self.source {
            Source::Empty => return Ok(None),
            Source::Delimited(r) => {
                let read = r.read(&self.path, n, bytes)?;
                if read.is_empty() {
                    return Ok(None);
                }
                read.typed(&self.schema)?
            }
            Source::Lines(l) => {
                let per_row = 8 * super::text_json::leaves(self.schema.fields()) as u64;
                let chunk = l.read(&self.path, n, bytes, per_row)?;
                if chunk.is_empty() {
                    return Ok(None);
                }
                super::text_json::decode(&self.path, &self.schema, &chunk)?
            }
        };
        rejects.sort_by_key(|r| r.line);
        for r in rejects {
            self.rejects.count(&self.path, r)?;
        }
        Ok(Some(self.handed_on(batch)?))
    }

    /// `batch` narrowed to the columns handed on, in their types.
    fn handed_on(&self, batch: RecordBatch) -> Result<RecordBatch, SliceError> {
        let Some((at, schema)) = &self.out else {
            return Ok(batch);
        };
        let mut columns = Vec::with_capacity(at.len());
        for (&i, f) in at.iter().zip(schema.fields()) {
            let c = batch.column(i);
            columns.push(if c.data_type() == f.data_type() {
                c.clone()
            } else {
                cast_with_options(c, f.data_type(), &CastOptions::default())
                    .map_err(|e| arrow_failed(&self.path, e))?
            });
        }
        RecordBatch::try_new(schema.clone(), columns).map_err(|e| arrow_failed(&self.path, e))
    }
}

impl Iterator for TextRows {
    type Item = Result<RecordBatch, SliceError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        // A file's rows may all be rejects: read on to a batch or the end.
        loop {
            match self.next_batch() {
                Ok(Some(b)) if b.num_rows() == 0 => continue,
                Ok(Some(b)) => return Some(Ok(b)),
                Ok(None) => {
                    self.done = true;
                    return None;
                }
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
            }
        }
    }
}
