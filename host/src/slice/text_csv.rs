//! CSV and TSV records: a header naming the columns, taken by name (each
//! named once), each field cast as arrow casts text, an empty field null.
//! Only `\n` ends a line (a `\r` before it is dropped), so CRLF files are
//! numbered by their real lines. TSV has no quoting. A record whose fields
//! do not match the header is a reject, and so is every line it took: an
//! unclosed quote that swallows the rest of a file loses all of those
//! lines, counted, never one reject.

use std::collections::HashMap;
use std::io::BufReader;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, BooleanArray, StringArray, StringBuilder};
use arrow::compute::filter;
use arrow::datatypes::{DataType, SchemaRef};
use arrow::record_batch::RecordBatch;

use super::error::SliceError;
use super::text::{Capped, MAX_COLUMNS, RecordMark, Reject, TextFormat, arrow_failed, unreadable};

/// A delimited file being read.
pub(super) struct Records {
    reader: csv::Reader<BufReader<Capped>>,
    /// The header's names.
    pub(super) header: Vec<String>,
    /// The header position of each column taken.
    at: Vec<usize>,
    mark: RecordMark,
    /// Whether its lines end in CRLF (its header's did): a last field's
    /// `\r` is then the line end's, not data.
    crlf: bool,
}

/// Records read as text columns (empty fields null), the line each
/// starts on, and the rows refused whole.
pub(super) struct Texts {
    pub(super) columns: Vec<ArrayRef>,
    lines: Vec<u64>,
    pub(super) rejects: Vec<Reject>,
}

impl Texts {
    pub(super) fn is_empty(&self) -> bool {
        self.lines.is_empty() && self.rejects.is_empty()
    }
}

impl Records {
    /// Read `text`'s header and find `schema`'s columns in it (all the
    /// header's when `None`); `None` for a file of no header at all.
    pub(super) fn open(
        path: &str,
        text: BufReader<Capped>,
        format: TextFormat,
        schema: Option<&SchemaRef>,
        mark: RecordMark,
    ) -> Result<Option<Self>, SliceError> {
        let mut reader = csv::ReaderBuilder::new()
            .has_headers(false)
            .delimiter(format.delimiter())
            .quoting(format != TextFormat::Tsv)
            .terminator(csv::Terminator::Any(b'\n'))
            .flexible(true)
            .from_reader(text);
        let Some((header, crlf)) = header_names(path, &mut reader)? else {
            return Ok(None);
        };
        let at = match schema {
            Some(s) => columns_at(path, &header, s)?,
            None => (0..header.len()).collect(),
        };
        Ok(Some(Records {
            reader,
            header,
            at,
            mark,
            crlf,
        }))
    }

    /// The header positions of the columns named `names`.
    pub(super) fn take(&mut self, names: &[String]) {
        let index: HashMap<&str, usize> = self
            .header
            .iter()
            .enumerate()
            .map(|(i, h)| (h.as_str(), i))
            .collect();
        self.at = names
            .iter()
            .map(|n| index.get(n.as_str()).copied().unwrap_or(0))
            .collect();
    }

    /// Up to `n` records, or about `max_bytes` of them.
    pub(super) fn read(
        &mut self,
        path: &str,
        n: usize,
        max_bytes: u64,
    ) -> Result<Texts, SliceError> {
        let mut builders: Vec<StringBuilder> =
            self.at.iter().map(|_| StringBuilder::new()).collect();
        let mut lines = Vec::new();
        let mut rejects = Vec::new();
        let mut record = csv::ByteRecord::new();
        let mut bytes = 0u64;
        while lines.len() < n && bytes < max_bytes {
            self.mark.set(self.reader.position().byte());
            if !self
                .reader
                .read_byte_record(&mut record)
                .map_err(|e| unreadable(path, e))?
            {
                break;
            }
            // What the batch will hold: the text, and a cell per column.
            bytes += (record.as_slice().len() + 8 * self.at.len()) as u64;
            let line = self.start_line(&record);
            if self.crlf && record.len() == 1 && &record[0] == b"\r" {
                continue; // a blank CRLF line
            }
            if record.len() != self.header.len() {
                rejects.extend(ragged(&record, line, self.header.len(), None));
                continue;
            }
            if self.open_quote(&record) {
                rejects.extend(ragged(&record, line, self.header.len(), Some(())));
                continue;
            }
            match fields(&record, &self.at, self.crlf) {
                Ok(row) => {
                    for (b, v) in builders.iter_mut().zip(&row) {
                        b.append_option(*v);
                    }
                    lines.push(line);
                }
                Err(i) => rejects.push(Reject {
                    line,
                    column: Some(self.header[i].clone()),
                    why: "it is not UTF-8".into(),
                }),
            }
        }
        let columns = builders
            .into_iter()
            .map(|mut b| Arc::new(b.finish()) as ArrayRef)
            .collect();
        Ok(Texts {
            columns,
            lines,
            rejects,
        })
    }
}

impl Records {
    /// The line `record`, just read, starts on: worked back from where the
    /// reader is now (the position the csv crate stamps on a record is
    /// taken before it skips blank lines).
    fn start_line(&self, record: &csv::ByteRecord) -> u64 {
        let end = self.reader.position();
        let bytes = record.as_slice();
        let inside = bytes.iter().filter(|&&b| b == b'\n').count() as u64;
        // Its own newline ended it, unless the text ended first (or the
        // text's last newline is inside its last field).
        let at_end = self.mark.read_through(end.byte());
        let ended = !at_end || (self.mark.ends_in_newline() && !bytes.ends_with(b"\n"));
        end.line().saturating_sub(inside + u64::from(ended)).max(1)
    }

    /// Whether `record`, just read, is the text's last and ends inside a
    /// quote never closed: its last field spans lines (so it was quoted)
    /// and the text ends without the closing quote. Such a record would
    /// carry the rest of the file as one value.
    fn open_quote(&self, record: &csv::ByteRecord) -> bool {
        let at = self.reader.position().byte();
        record
            .get(record.len() - 1)
            .is_some_and(|f| f.contains(&b'\n'))
            && self.mark.read_through(at)
            && !self.mark.ends_at(at, b'"')
    }
}

/// The fields at `at` of `record` (a last field's `\r` dropped, empty ones
/// null), or the position of one that is not UTF-8.
fn fields<'r>(
    record: &'r csv::ByteRecord,
    at: &[usize],
    crlf: bool,
) -> Result<Vec<Option<&'r str>>, usize> {
    let last = record.len() - 1;
    at.iter()
        .map(|&i| {
            let mut v = &record[i];
            if i == last && crlf {
                v = v.strip_suffix(b"\r").unwrap_or(v);
            }
            match std::str::from_utf8(v) {
                Ok("") => Ok(None),
                Ok(s) => Ok(Some(s)),
                Err(_) => Err(i),
            }
        })
        .collect()
}

/// The rejects of a record whose field count is not the header's: its
/// line, and every further line it took (an unclosed quote's).
fn ragged(record: &csv::ByteRecord, line: u64, fields: usize, open: Option<()>) -> Vec<Reject> {
    // A record that ran to the end of the file took its last newline too:
    // that ends its last line, it starts none.
    let bytes = record.as_slice();
    let body = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    let spans = 1 + body.iter().filter(|&&b| b == b'\n').count() as u64;
    (0..spans)
        .map(|k| Reject {
            line: line + k,
            column: None,
            why: if k == 0 && open.is_some() {
                "a quote opened in it is never closed (the record runs to the end of the file)".into()
            } else if k == 0 {
                format!("it has {} fields, the header {fields}", record.len())
            } else {
                format!("it is inside the record starting on line {line}, which does not parse (a quote left open?)")
            },
        })
        .collect()
}

impl Texts {
    /// The text columns cast to `schema`'s types: a value that does not
    /// cast rejects its row (the first such column named).
    pub(super) fn typed(
        mut self,
        schema: &SchemaRef,
    ) -> Result<(RecordBatch, Vec<Reject>), SliceError> {
        let mut keep = vec![true; self.lines.len()];
        let mut cast = Vec::with_capacity(self.columns.len());
        for (text, f) in self.columns.iter().zip(schema.fields()) {
            let c = match f.data_type() {
                DataType::Utf8 => text.clone(),
                t => {
                    super::text_schema::cast_text(text, t).map_err(|e| arrow_failed(f.name(), e))?
                }
            };
            let strings = text.as_any().downcast_ref::<StringArray>();
            for (i, k) in keep.iter_mut().enumerate() {
                if *k && text.is_valid(i) && c.is_null(i) {
                    *k = false;
                    let value = strings.map_or("", |s| s.value(i));
                    self.rejects.push(Reject {
                        line: self.lines[i],
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
        if kept.true_count() != self.lines.len() {
            cast = cast
                .iter()
                .map(|c| filter(c, &kept))
                .collect::<Result<_, _>>()
                .map_err(|e| arrow_failed("(text rows)", e))?;
        }
        let batch = RecordBatch::try_new(schema.clone(), cast)
            .map_err(|e| arrow_failed("(text rows)", e))?;
        Ok((batch, self.rejects))
    }
}

/// The header: the first record that is not a blank CRLF line, its names
/// with a UTF-8 byte-order mark and a CRLF's `\r` dropped (an empty one
/// named `_c<i>`, as Spark names it), and whether the file's lines end in
/// CRLF. `None` for a file of no header (no bytes, or blank lines only).
pub(super) fn header_names(
    path: &str,
    reader: &mut csv::Reader<BufReader<Capped>>,
) -> Result<Option<(Vec<String>, bool)>, SliceError> {
    let mut header = csv::ByteRecord::new();
    loop {
        if !reader
            .read_byte_record(&mut header)
            .map_err(|e| unreadable(path, e))?
        {
            return Ok(None);
        }
        let blank = |f: &[u8]| {
            let f = f.strip_prefix(b"\xef\xbb\xbf").unwrap_or(f);
            f.is_empty() || f == b"\r"
        };
        if !(header.len() == 1 && blank(&header[0])) {
            break;
        }
    }
    let line = header.position().map_or(1, |p| p.line());
    let refused = |why: String, fix: &str| SliceError::BadRow {
        path: path.to_string(),
        line,
        at: String::new(),
        why,
        fix: fix.into(),
    };
    if header.len() > MAX_COLUMNS {
        return Err(refused(
            format!(
                "the header names {} columns, more than idem reads ({MAX_COLUMNS})",
                header.len()
            ),
            "declare the columns you need with --schema, or split the file",
        ));
    }
    let last = header.len() - 1;
    let crlf = header[last].ends_with(b"\r");
    let mut names = Vec::with_capacity(header.len());
    for (i, h) in header.iter().enumerate() {
        let mut h = if i == 0 {
            h.strip_prefix(b"\xef\xbb\xbf").unwrap_or(h)
        } else {
            h
        };
        if i == last && crlf {
            h = h.strip_suffix(b"\r").unwrap_or(h);
        }
        if h.contains(&b'\r') {
            return Err(refused(
                "its lines end in a lone \\r (old Mac line ends), which idem does not read".into(),
                "convert the line ends to \\n (or \\r\\n)",
            ));
        }
        let name = String::from_utf8(h.to_vec()).map_err(|_| {
            refused(
                format!("header field {} is not UTF-8", i + 1),
                "write the file as UTF-8",
            )
        })?;
        names.push(if name.is_empty() {
            format!("_c{i}")
        } else {
            name
        });
    }
    Ok(Some((names, crlf)))
}

/// Where each column of `schema` is in `header` (each named there once).
pub(super) fn columns_at(
    path: &str,
    header: &[String],
    schema: &SchemaRef,
) -> Result<Vec<usize>, SliceError> {
    let mut index: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, h) in header.iter().enumerate() {
        index.entry(h.as_str()).or_default().push(i);
    }
    let mut at = Vec::with_capacity(schema.fields().len());
    for f in schema.fields() {
        match index.get(f.name().as_str()).map(Vec::as_slice) {
            Some([i]) => at.push(*i),
            found => {
                let shown: Vec<String> = header
                    .iter()
                    .take(50)
                    .map(|h| crate::text::shown(h, 64))
                    .collect();
                return Err(SliceError::BadRow {
                    path: path.to_string(),
                    line: 1,
                    at: String::new(),
                    why: format!(
                        "the header {} column `{}` (it has {}{})",
                        if found.is_some() { "names twice the" } else { "has no" },
                        crate::text::shown(f.name(), 64),
                        shown.join(", "),
                        if header.len() > 50 { ", ..." } else { "" }
                    ),
                    fix: "the slice's files must share their columns: declare the ones all have with --schema, or fix the file".into(),
                });
            }
        }
    }
    Ok(at)
}
