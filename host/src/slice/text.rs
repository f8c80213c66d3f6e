//! Text inputs: CSV, TSV and JSON lines, gzip-compressed or not. Which
//! files are text (by their names), how a slice of them is decoded (the
//! format, the schema declared or inferred, the bad rows allowed), and the
//! stream every text input is read through: decompressed, and never a line
//! longer than [`MAX_LINE_BYTES`] (a file with no newline must not grow a
//! record buffer without bound).

use std::io::{BufReader, Read};
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};

use arrow::datatypes::SchemaRef;

use super::error::SliceError;

/// The longest line a text input may hold (a CSV record may span lines;
/// each of its lines counts).
pub const MAX_LINE_BYTES: usize = 16 << 20;

/// The most columns a text slice may have (declared, in a header, or
/// inferred): each costs memory per row decoded.
pub const MAX_COLUMNS: usize = 10_000;

/// A text format idem reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextFormat {
    /// Comma-separated, with a header row.
    Csv,
    /// Tab-separated, with a header row.
    Tsv,
    /// One JSON object per line.
    JsonLines,
}

impl TextFormat {
    /// The name a run spec records.
    pub fn name(self) -> &'static str {
        match self {
            TextFormat::Csv => "csv",
            TextFormat::Tsv => "tsv",
            TextFormat::JsonLines => "jsonl",
        }
    }

    /// The format a run spec names.
    pub fn from_name(name: &str) -> Option<Self> {
        [TextFormat::Csv, TextFormat::Tsv, TextFormat::JsonLines]
            .into_iter()
            .find(|f| f.name() == name)
    }

    /// The format a file's name says (`.csv`, `.tsv`, `.jsonl`, `.ndjson`,
    /// each maybe `.gz`; `.json.gz`, as exported JSON lines are named).
    pub fn of_path(path: &str) -> Option<Self> {
        let name = path.rsplit('/').next().unwrap_or(path).to_ascii_lowercase();
        let (name, gz) = match name.strip_suffix(".gz") {
            Some(n) => (n, true),
            None => (name.as_str(), false),
        };
        let ext = name.rsplit_once('.').map(|(_, e)| e)?;
        match ext {
            "csv" => Some(TextFormat::Csv),
            "tsv" => Some(TextFormat::Tsv),
            "jsonl" | "ndjson" => Some(TextFormat::JsonLines),
            "json" if gz => Some(TextFormat::JsonLines),
            _ => None,
        }
    }

    /// The field delimiter of a delimited format.
    pub(super) fn delimiter(self) -> u8 {
        match self {
            TextFormat::Tsv => b'\t',
            _ => b',',
        }
    }
}

/// How a slice of text files is decoded: part of the run spec.
#[derive(Debug, Clone, PartialEq)]
pub struct TextInput {
    /// The files' format.
    pub format: TextFormat,
    /// The columns taken, by name, and their types.
    pub schema: SchemaRef,
    /// Whether the schema was inferred from the pinned bytes (else declared).
    pub inferred: bool,
    /// Most bad rows skipped and counted before the run fails (0: the
    /// first fails it).
    pub max_rejects: u64,
}

/// What a run asks of text inputs before their schema is known.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TextOptions {
    /// The declared schema (`--schema`); inferred when `None`.
    pub schema: Option<SchemaRef>,
    /// `--max-rejects`.
    pub max_rejects: u64,
}

impl TextOptions {
    /// Whether anything was asked that only text inputs take.
    pub fn any(&self) -> bool {
        self.schema.is_some() || self.max_rejects > 0
    }
}

/// The text of `path` from its bytes `read`: gunzipped when its name ends
/// in `.gz` (every member of a multi-member file), lines capped; with a
/// [`RecordMark`] when records may span lines (CSV), each record capped
/// too.
pub(super) fn stream(
    path: &str,
    read: impl Read + Send + 'static,
    records: Option<RecordMark>,
) -> BufReader<Capped> {
    let inner: Box<dyn Read + Send> = if path.to_ascii_lowercase().ends_with(".gz") {
        Box::new(flate2::read::MultiGzDecoder::new(BufReader::new(read)))
    } else {
        Box::new(read)
    };
    BufReader::with_capacity(
        64 << 10,
        Capped {
            inner,
            since_newline: 0,
            read: 0,
            records,
        },
    )
}

/// Where the record being read started, in bytes of the text: a CSV
/// record (which may span lines) may not run more than
/// [`MAX_LINE_BYTES`] past it (an unclosed quote must not grow one record
/// through the rest of the file).
/// It also tells what the stream has shown so far: how many bytes, and
/// its last one that is not white space.
#[derive(Debug, Clone, Default)]
pub(super) struct RecordMark(Arc<Marks>);

#[derive(Debug, Default)]
pub(super) struct Marks {
    start: AtomicU64,
    read: AtomicU64,
    last: AtomicU8,
    last_raw: AtomicU8,
}

impl RecordMark {
    /// A record starts at byte `at` of the text.
    pub(super) fn set(&self, at: u64) {
        self.0.start.store(at, Ordering::Relaxed);
    }

    /// Whether the text ended at byte `at`, its last visible byte `last`.
    pub(super) fn ends_at(&self, at: u64, last: u8) -> bool {
        self.0.read.load(Ordering::Relaxed) == at && self.0.last.load(Ordering::Relaxed) == last
    }

    /// Whether the text has no more than `at` bytes read so far.
    pub(super) fn read_through(&self, at: u64) -> bool {
        self.0.read.load(Ordering::Relaxed) == at
    }

    /// Whether the last byte read so far is a newline.
    pub(super) fn ends_in_newline(&self) -> bool {
        self.0.last_raw.load(Ordering::Relaxed) == b'\n'
    }
}

/// A text stream that fails once a line (or a record) grows past
/// [`MAX_LINE_BYTES`].
pub(super) struct Capped {
    inner: Box<dyn Read + Send>,
    since_newline: usize,
    read: u64,
    records: Option<RecordMark>,
}

impl Read for Capped {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        let chunk = &buf[..n];
        // The line running into this chunk ends at its first newline.
        let longest = match chunk.iter().position(|&b| b == b'\n') {
            Some(first) => {
                let ran = self.since_newline + first;
                self.since_newline = n - chunk.iter().rposition(|&b| b == b'\n').unwrap_or(0) - 1;
                ran.max(self.since_newline)
            }
            None => {
                self.since_newline += n;
                self.since_newline
            }
        };
        self.read += n as u64;
        if let Some(mark) = &self.records {
            mark.0.read.store(self.read, Ordering::Relaxed);
            if let Some(&b) = chunk.iter().rev().find(|b| !b.is_ascii_whitespace()) {
                mark.0.last.store(b, Ordering::Relaxed);
            }
            if let Some(&b) = chunk.last() {
                mark.0.last_raw.store(b, Ordering::Relaxed);
            }
        }
        let refuse = |what: &str| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!(
                    "{what} longer than {} MiB (is it text with newlines, or is a quote left open?)",
                    MAX_LINE_BYTES >> 20
                ),
            )
        };
        if longest > MAX_LINE_BYTES {
            return Err(refuse("a line"));
        }
        // What the reader holds ahead of the parser (its buffers) is
        // allowed for on top of the record's own bytes.
        if let Some(mark) = &self.records {
            let since = self
                .read
                .saturating_sub(mark.0.start.load(Ordering::Relaxed));
            if since > (MAX_LINE_BYTES + READ_AHEAD) as u64 {
                return Err(refuse("a record"));
            }
        }
        Ok(n)
    }
}

/// Bytes a reader may hold beyond the record it parses (its buffers).
const READ_AHEAD: usize = 1 << 20;

/// The one format of `paths` when they are text files, `None` when none
/// is; files of two formats (or text beside others) are refused.
pub(super) fn format_of<'a>(
    paths: impl IntoIterator<Item = &'a str>,
) -> Result<Option<TextFormat>, SliceError> {
    let mut first: Option<(&str, Option<TextFormat>)> = None;
    for p in paths {
        let f = TextFormat::of_path(p);
        match first {
            None => first = Some((p, f)),
            Some((q, g)) if g != f => {
                let said =
                    |f: Option<TextFormat>| f.map_or("not CSV, TSV or JSON lines", |f| f.name());
                return Err(SliceError::Refused {
                    path: p.to_string(),
                    why: format!(
                        "it is {} (by its name), but `{q}` of the same slice is {}",
                        said(f),
                        said(g)
                    ),
                    fix:
                        "the files of one slice must share one format: give them as separate slices"
                            .into(),
                });
            }
            Some(_) => {}
        }
    }
    Ok(first.and_then(|(_, f)| f))
}

/// One row that did not decode.
pub(super) struct Reject {
    pub(super) line: u64,
    pub(super) column: Option<String>,
    pub(super) why: String,
}

/// An unreadable stream (not gzip, a line or record past the cap, an I/O
/// error).
pub(super) fn unreadable(path: &str, e: impl std::fmt::Display) -> SliceError {
    SliceError::Refused {
        path: path.to_string(),
        why: format!("it cannot be read as text: {e}"),
        fix: "check that it is what its name says (and whole)".into(),
    }
}

/// Arrow failing on rows already decoded (not the input's fault).
pub(super) fn arrow_failed(path: &str, e: arrow::error::ArrowError) -> SliceError {
    SliceError::Refused {
        path: path.to_string(),
        why: format!("its decoded rows could not be assembled ({e})"),
        fix: "report it with the file; declaring the columns with --schema may avoid it".into(),
    }
}
