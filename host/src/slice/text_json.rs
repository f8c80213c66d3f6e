//! JSON lines: one object per line, blank lines skipped, decoded by
//! arrow's JSON decoder. Each line must be exactly one JSON object: lines
//! are fed to the decoder one at a time and checked to add one row each,
//! so which lines are rejects never depends on where a batch starts.
//! Lines that fail are decoded again one by one to name each.

use std::io::{BufRead, BufReader};
use std::ops::Range;

use arrow::datatypes::SchemaRef;
use arrow::json::reader::Decoder;
use arrow::record_batch::RecordBatch;

use super::error::SliceError;
use super::text::{Capped, Reject, arrow_failed, unreadable};

/// Tape cells one decoder may preallocate (arrow sizes its tape by rows
/// times fields): lines per decoder shrink as the schema widens.
const DECODER_CELLS: usize = 1 << 20;

/// A JSON-lines file being read.
pub(super) struct Lines {
    reader: BufReader<Capped>,
    /// The number of the last line read.
    line: u64,
}

/// Lines read: their bytes, one after another, and each one's number and
/// place in them.
#[derive(Default)]
pub(super) struct Chunk {
    bytes: Vec<u8>,
    pub(super) lines: Vec<(u64, Range<usize>)>,
}

impl Chunk {
    pub(super) fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }

    /// Line `i`'s bytes.
    pub(super) fn line(&self, i: usize) -> &[u8] {
        &self.bytes[self.lines[i].1.clone()]
    }
}

impl Lines {
    pub(super) fn new(reader: BufReader<Capped>) -> Self {
        Lines { reader, line: 0 }
    }

    /// Up to `n` non-blank lines, or about `max_bytes` of them counting
    /// `per_row` for what each becomes (a cell per column).
    pub(super) fn read(
        &mut self,
        path: &str,
        n: usize,
        max_bytes: u64,
        per_row: u64,
    ) -> Result<Chunk, SliceError> {
        let mut chunk = Chunk::default();
        let cost = |c: &Chunk| c.bytes.len() as u64 + per_row * c.lines.len() as u64;
        while chunk.lines.len() < n && cost(&chunk) < max_bytes {
            let start = chunk.bytes.len();
            if self
                .reader
                .read_until(b'\n', &mut chunk.bytes)
                .map_err(|e| unreadable(path, e))?
                == 0
            {
                break;
            }
            self.line += 1;
            let mut from = start;
            if self.line == 1 && chunk.bytes[start..].starts_with(b"\xef\xbb\xbf") {
                from += 3;
            }
            let text = &chunk.bytes[from..];
            let trimmed = text.trim_ascii_end().len();
            if trimmed == 0 || text.iter().all(|b| b.is_ascii_whitespace()) {
                chunk.bytes.truncate(start);
                continue;
            }
            chunk.lines.push((self.line, from..from + trimmed));
        }
        Ok(chunk)
    }
}

fn decoder(schema: &SchemaRef, rows: usize) -> Result<Decoder, SliceError> {
    arrow::json::ReaderBuilder::new(schema.clone())
        .with_batch_size(rows.max(1) + 1)
        .with_coerce_primitive(true)
        .build_decoder()
        .map_err(|e| arrow_failed("(JSON schema)", e))
}

/// `lines` (indices into `chunk`) decoded together when each is one
/// object; `None` when any is not (or a value does not fit).
fn together(
    schema: &SchemaRef,
    chunk: &Chunk,
    lines: &[usize],
) -> Result<Option<RecordBatch>, SliceError> {
    let mut d = decoder(schema, lines.len())?;
    for (k, &i) in lines.iter().enumerate() {
        let one = d.decode(chunk.line(i)).and_then(|_| d.decode(b"\n"));
        if one.is_err() || d.len() != k + 1 || d.has_partial_record() {
            return Ok(None);
        }
    }
    Ok(d.flush().ok().flatten())
}

/// The leaf columns of `fields` (a struct's fields each, a list's item):
/// what a decoder allocates per row.
pub(super) fn leaves(fields: &arrow::datatypes::Fields) -> usize {
    use arrow::datatypes::DataType;
    fields
        .iter()
        .map(|f| match f.data_type() {
            DataType::Struct(inner) => leaves(inner).max(1),
            DataType::List(item) | DataType::LargeList(item) => {
                leaves(&arrow::datatypes::Fields::from(vec![item.as_ref().clone()]))
            }
            _ => 1,
        })
        .sum()
}

/// One line's row, or why it is not one.
fn alone(schema: &SchemaRef, line: &[u8]) -> Result<Result<RecordBatch, String>, SliceError> {
    let mut d = decoder(schema, 1)?;
    let fed = d.decode(line).and_then(|_| d.decode(b"\n"));
    Ok(match fed {
        Err(e) => Err(e.to_string()),
        Ok(_) if d.has_partial_record() => Err("it is not a whole JSON object".into()),
        Ok(_) if d.len() != 1 => Err(format!("it holds {} JSON values, not one object", d.len())),
        Ok(_) => match d.flush() {
            Ok(Some(b)) => Ok(b),
            Ok(None) => Err("it holds no JSON value".into()),
            Err(e) => Err(e.to_string()),
        },
    })
}

/// The chunk's rows, and its lines that are not one object of the schema.
pub(super) fn decode(
    path: &str,
    schema: &SchemaRef,
    chunk: &Chunk,
) -> Result<(RecordBatch, Vec<Reject>), SliceError> {
    let per = (DECODER_CELLS / (2 + 2 * leaves(schema.fields()))).max(1);
    let mut batches = Vec::new();
    let mut rejects = Vec::new();
    let mut start = 0;
    while start < chunk.lines.len() {
        let end = (start + per).min(chunk.lines.len());
        let all: Vec<usize> = (start..end).collect();
        if let Some(b) = together(schema, chunk, &all)? {
            batches.push(b);
            start = end;
            continue;
        }
        // One at a time to tell the bad lines, then the good ones together
        // (never thousands of one-row batches held at once).
        let mut good = Vec::new();
        for i in start..end {
            match alone(schema, chunk.line(i))? {
                Ok(_) => good.push(i),
                Err(why) => rejects.push(Reject {
                    line: chunk.lines[i].0,
                    column: None,
                    why: crate::text::clip_str(why.trim_start_matches("Json error: "), 512),
                }),
            }
        }
        if !good.is_empty() {
            let b = together(schema, chunk, &good)?.ok_or_else(|| SliceError::Refused {
                path: path.to_string(),
                why: "lines that decode alone do not decode together".into(),
                fix: "report it with the file".into(),
            })?;
            batches.push(b);
        }
        start = end;
    }
    let batch =
        arrow::compute::concat_batches(schema, &batches).map_err(|e| arrow_failed(path, e))?;
    Ok((batch, rejects))
}
