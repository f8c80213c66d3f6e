//! Decoding one text input into batches of the slice's schema. CSV and
//! TSV records come through the `csv` crate, their columns taken by header
//! name and each field cast as arrow casts text (an empty field is null);
//! JSON lines through arrow's JSON decoder, a batch of lines at a time.
//! A row that does not decode is a reject: it fails the run naming its
//! file, line and column or, within `--max-rejects`, is skipped and counted.

use std::io::{BufRead, BufReader};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use arrow::array::{Array, ArrayRef, BooleanArray, StringBuilder};
use arrow::compute::{CastOptions, cast_with_options, filter};
use arrow::datatypes::{DataType, SchemaRef};
use arrow::record_batch::RecordBatch;

use super::error::SliceError;
use super::text::{Capped, TextFormat, TextInput};

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
}

/// One row that did not decode.
pub(super) struct Reject {
    line: u64,
    column: Option<String>,
    why: String,
}

impl Rejects {
    /// Count `r` (rows of `path`, in line order): past the most allowed,
    /// the error that names it.
    fn count(&self, path: &str, r: Reject) -> Result<(), SliceError> {
        let n = self.count.fetch_add(1, Ordering::Relaxed) + 1;
        if n <= self.max {
            return Ok(());
        }
        let fix = if self.max == 0 {
            let widen = if self.inferred {
                "declare the columns with --schema"
            } else {
                "declare a wider type in --schema"
            };
            format!(
                "fix the row, {widen}, or let up to N bad rows be skipped and counted with --max-rejects N"
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
    /// A delimited file; `at[j]` is the header position of column `j`.
    Delimited {
        reader: csv::Reader<BufReader<Capped>>,
        at: Vec<usize>,
        fields: usize,
    },
    /// JSON lines, `line` the number of the last line read.
    Lines {
        reader: BufReader<Capped>,
        line: u64,
    },
}

/// The rows of one text input, in batches of at most `batch_rows`.
pub(super) struct TextRows {
    path: String,
    schema: SchemaRef,
    /// The columns handed on (indices into `schema`) and their types.
    out: Option<(Vec<usize>, SchemaRef)>,
    batch_rows: usize,
    source: Source,
    rejects: Rejects,
    done: bool,
}

impl TextRows {
    /// Start reading `text`, the stream of input `path` (read whole, its
    /// header checked against the schema).
    pub(super) fn open(
        path: &str,
        text: BufReader<Capped>,
        input: &TextInput,
        batch_rows: usize,
        out: Option<(Vec<usize>, SchemaRef)>,
        rejects: Rejects,
    ) -> Result<Self, SliceError> {
        let source = match input.format {
            TextFormat::JsonLines => Source::Lines {
                reader: text,
                line: 0,
            },
            f => delimited(path, text, f.delimiter(), &input.schema)?,
        };
        Ok(TextRows {
            path: path.to_string(),
            schema: input.schema.clone(),
            out,
            batch_rows: batch_rows.max(1),
            source,
            rejects,
            done: false,
        })
    }

    /// The next batch, `None` at the file's end.
    fn next_batch(&mut self) -> Result<Option<RecordBatch>, SliceError> {
        let (batch, mut rejects) = match &mut self.source {
            Source::Delimited { reader, at, fields } => {
                let (columns, lines, rejects) =
                    read_records(&self.path, reader, at, *fields, self.batch_rows)?;
                if lines.is_empty() && rejects.is_empty() {
                    return Ok(None);
                }
                typed(&self.schema, columns, &lines, rejects)?
            }
            Source::Lines { reader, line } => {
                let lines = read_lines(&self.path, reader, line, self.batch_rows)?;
                if lines.is_empty() {
                    return Ok(None);
                }
                decode_lines(&self.schema, &lines)?
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
                    .map_err(|e| self.malformed(e.to_string()))?
            });
        }
        RecordBatch::try_new(schema.clone(), columns).map_err(|e| self.malformed(e.to_string()))
    }

    fn malformed(&self, detail: String) -> SliceError {
        SliceError::Malformed {
            path: self.path.clone(),
            detail,
        }
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

/// An unreadable stream (not gzip, a line past the cap, an I/O error).
fn unreadable(path: &str, e: impl std::fmt::Display) -> SliceError {
    SliceError::Refused {
        path: path.to_string(),
        why: format!("it cannot be read as text: {e}"),
        fix: "check that it is what its name says (and whole)".into(),
    }
}

/// A delimited source: its header read, each column of `schema` found in it.
fn delimited(
    path: &str,
    text: BufReader<Capped>,
    delimiter: u8,
    schema: &SchemaRef,
) -> Result<Source, SliceError> {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(true)
        .delimiter(delimiter)
        .flexible(true)
        .from_reader(text);
    let header = header_names(path, &mut reader)?;
    let at = columns_at(path, &header, schema)?;
    Ok(Source::Delimited {
        fields: header.len(),
        reader,
        at,
    })
}

/// Where each column of `schema` is in `header` (each named there once).
pub(super) fn columns_at(
    path: &str,
    header: &[String],
    schema: &SchemaRef,
) -> Result<Vec<usize>, SliceError> {
    let mut at = Vec::with_capacity(schema.fields().len());
    for f in schema.fields() {
        let mut found = header.iter().enumerate().filter(|(_, h)| *h == f.name());
        match (found.next(), found.next()) {
            (Some((i, _)), None) => at.push(i),
            (found, _) => {
                let shown: Vec<String> = header.iter().map(|h| crate::text::shown(h, 64)).collect();
                return Err(SliceError::BadRow {
                    path: path.to_string(),
                    line: 1,
                    at: String::new(),
                    why: format!(
                        "the header {} column `{}` (it has {})",
                        if found.is_some() { "names twice the" } else { "has no" },
                        crate::text::shown(f.name(), 64),
                        crate::text::clip_str(&shown.join(", "), 512)
                    ),
                    fix: "the slice's files must share their columns: declare the ones all have with --schema, or fix the file".into(),
                });
            }
        }
    }
    Ok(at)
}

/// The header's names (a UTF-8 byte-order mark dropped).
pub(super) fn header_names(
    path: &str,
    reader: &mut csv::Reader<BufReader<Capped>>,
) -> Result<Vec<String>, SliceError> {
    let header = reader.byte_headers().map_err(|e| unreadable(path, e))?;
    let mut names = Vec::with_capacity(header.len());
    for (i, h) in header.iter().enumerate() {
        let h = if i == 0 {
            h.strip_prefix(b"\xef\xbb\xbf").unwrap_or(h)
        } else {
            h
        };
        names.push(
            String::from_utf8(h.to_vec()).map_err(|_| SliceError::BadRow {
                path: path.to_string(),
                line: 1,
                at: String::new(),
                why: format!("header field {} is not UTF-8", i + 1),
                fix: "write the file as UTF-8".into(),
            })?,
        );
    }
    if names.is_empty() || names == [""] {
        return Err(SliceError::BadRow {
            path: path.to_string(),
            line: 1,
            at: String::new(),
            why: "there is no header row".into(),
            fix: "CSV and TSV inputs start with a header naming their columns".into(),
        });
    }
    Ok(names)
}

/// Up to `n` records as text columns (empty fields null), the line each
/// starts on, and the rows refused whole (wrong field count, not UTF-8).
#[allow(clippy::type_complexity)]
pub(super) fn read_records(
    path: &str,
    reader: &mut csv::Reader<BufReader<Capped>>,
    at: &[usize],
    fields: usize,
    n: usize,
) -> Result<(Vec<ArrayRef>, Vec<u64>, Vec<Reject>), SliceError> {
    let mut builders: Vec<StringBuilder> = at.iter().map(|_| StringBuilder::new()).collect();
    let mut lines = Vec::new();
    let mut rejects = Vec::new();
    let mut record = csv::ByteRecord::new();
    while lines.len() < n {
        if !reader
            .read_byte_record(&mut record)
            .map_err(|e| unreadable(path, e))?
        {
            break;
        }
        let line = record.position().map_or(0, |p| p.line());
        if record.len() != fields {
            rejects.push(Reject {
                line,
                column: None,
                why: format!("it has {} fields, the header {fields}", record.len()),
            });
            continue;
        }
        let mut row: Vec<Option<&str>> = Vec::with_capacity(at.len());
        let mut bad = None;
        for &i in at {
            match std::str::from_utf8(&record[i]) {
                Ok("") => row.push(None),
                Ok(s) => row.push(Some(s)),
                Err(_) => {
                    bad = Some(i);
                    break;
                }
            }
        }
        if let Some(i) = bad {
            rejects.push(Reject {
                line,
                column: Some(format!("field {}", i + 1)),
                why: "it is not UTF-8".into(),
            });
            continue;
        }
        for (b, v) in builders.iter_mut().zip(&row) {
            b.append_option(*v);
        }
        lines.push(line);
    }
    let columns = builders
        .into_iter()
        .map(|mut b| Arc::new(b.finish()) as ArrayRef)
        .collect();
    Ok((columns, lines, rejects))
}

/// Text columns cast to `schema`'s types: a value that does not cast
/// rejects its row (the first such column named).
fn typed(
    schema: &SchemaRef,
    columns: Vec<ArrayRef>,
    lines: &[u64],
    mut rejects: Vec<Reject>,
) -> Result<(RecordBatch, Vec<Reject>), SliceError> {
    let mut keep = vec![true; lines.len()];
    let mut cast = Vec::with_capacity(columns.len());
    for (text, f) in columns.iter().zip(schema.fields()) {
        let c = match f.data_type() {
            DataType::Utf8 => text.clone(),
            t => super::text_schema::cast_text(text, t).map_err(|e| SliceError::Malformed {
                path: f.name().clone(),
                detail: e.to_string(),
            })?,
        };
        let strings = text.as_any().downcast_ref::<arrow::array::StringArray>();
        for (i, k) in keep.iter_mut().enumerate() {
            if *k && text.is_valid(i) && c.is_null(i) {
                *k = false;
                let value = strings.map_or("", |s| s.value(i));
                rejects.push(Reject {
                    line: lines[i],
                    column: Some(f.name().clone()),
                    why: format!(
                        "`{}` is not a {}",
                        crate::text::shown(value, 64),
                        super::text_schema::type_name(f.data_type())
                    ),
                });
            }
        }
        cast.push(c);
    }
    let kept = BooleanArray::from(keep);
    let cast = if kept.true_count() == lines.len() {
        cast
    } else {
        cast.iter()
            .map(|c| filter(c, &kept))
            .collect::<Result<_, _>>()
            .map_err(|e| SliceError::Malformed {
                path: "(text rows)".into(),
                detail: e.to_string(),
            })?
    };
    let batch = RecordBatch::try_new(schema.clone(), cast).map_err(|e| SliceError::Malformed {
        path: "(text rows)".into(),
        detail: e.to_string(),
    })?;
    Ok((batch, rejects))
}

/// Up to `n` non-blank lines, each with its number.
pub(super) fn read_lines(
    path: &str,
    reader: &mut BufReader<Capped>,
    line: &mut u64,
    n: usize,
) -> Result<Vec<(u64, Vec<u8>)>, SliceError> {
    let mut lines = Vec::new();
    while lines.len() < n {
        let mut buf = Vec::new();
        if reader
            .read_until(b'\n', &mut buf)
            .map_err(|e| unreadable(path, e))?
            == 0
        {
            break;
        }
        *line += 1;
        let text = if *line == 1 {
            buf.strip_prefix(b"\xef\xbb\xbf").unwrap_or(&buf)
        } else {
            &buf[..]
        };
        if text.iter().all(|b| b.is_ascii_whitespace()) {
            continue;
        }
        let text = text.to_vec();
        lines.push((*line, text));
    }
    Ok(lines)
}

/// A JSON decoder of `schema` (numbers taken as text where text is due).
fn decoder(schema: &SchemaRef, rows: usize) -> Result<arrow::json::reader::Decoder, SliceError> {
    arrow::json::ReaderBuilder::new(schema.clone())
        .with_batch_size(rows.max(1) + 1)
        .with_coerce_primitive(true)
        .build_decoder()
        .map_err(|e| SliceError::Malformed {
            path: "(JSON schema)".into(),
            detail: e.to_string(),
        })
}

/// The rows `bytes` decode to, only if they are exactly `rows`.
fn decode_exactly(
    schema: &SchemaRef,
    bytes: &[u8],
    rows: usize,
) -> Result<Result<RecordBatch, String>, SliceError> {
    let mut d = decoder(schema, rows)?;
    let out = d.decode(bytes).and_then(|used| {
        if used < bytes.len() || d.has_partial_record() {
            return Err(arrow::error::ArrowError::JsonError(
                "it is not a whole JSON object".into(),
            ));
        }
        d.flush()
    });
    Ok(match out {
        Ok(Some(b)) if b.num_rows() == rows => Ok(b),
        Ok(Some(b)) => Err(format!("it holds {} JSON values, not one", b.num_rows())),
        Ok(None) => Err("it holds no JSON value".into()),
        Err(e) => Err(e.to_string().trim_start_matches("Json error: ").to_string()),
    })
}

/// JSON `lines` decoded together; when that fails, one by one, so each
/// bad line is named.
fn decode_lines(
    schema: &SchemaRef,
    lines: &[(u64, Vec<u8>)],
) -> Result<(RecordBatch, Vec<Reject>), SliceError> {
    let mut all = Vec::with_capacity(lines.iter().map(|(_, l)| l.len() + 1).sum());
    for (_, l) in lines {
        all.extend_from_slice(l);
        all.push(b'\n');
    }
    if let Ok(b) = decode_exactly(schema, &all, lines.len())? {
        return Ok((b, Vec::new()));
    }
    let mut good = Vec::new();
    let mut rejects = Vec::new();
    for (line, text) in lines {
        match decode_exactly(schema, text, 1)? {
            Ok(b) => good.push(b),
            Err(why) => rejects.push(Reject {
                line: *line,
                column: None,
                why: crate::text::clip_str(&why, 512),
            }),
        }
    }
    let batch =
        arrow::compute::concat_batches(schema, &good).map_err(|e| SliceError::Malformed {
            path: "(JSON lines)".into(),
            detail: e.to_string(),
        })?;
    Ok((batch, rejects))
}
