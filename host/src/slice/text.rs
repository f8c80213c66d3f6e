//! Text inputs: CSV, TSV and JSON lines, gzip-compressed or not. Which
//! files are text (by their names), how a slice of them is decoded (the
//! format, the schema declared or inferred, the bad rows allowed), and the
//! stream every text input is read through: decompressed, and never a line
//! longer than [`MAX_LINE_BYTES`] (a file with no newline must not grow a
//! record buffer without bound).

use std::io::{BufReader, Read};

use arrow::datatypes::SchemaRef;

use super::error::SliceError;

/// The longest line a text input may hold (a CSV record may span lines;
/// each of its lines counts).
pub const MAX_LINE_BYTES: usize = 16 << 20;

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
/// in `.gz` (every member of a multi-member file), lines capped.
pub(super) fn stream(path: &str, read: impl Read + Send + 'static) -> BufReader<Capped> {
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
        },
    )
}

/// A text stream that fails once a line grows past [`MAX_LINE_BYTES`].
pub(super) struct Capped {
    inner: Box<dyn Read + Send>,
    since_newline: usize,
}

impl Read for Capped {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        match buf[..n].iter().rposition(|&b| b == b'\n') {
            Some(at) => self.since_newline = n - at - 1,
            None => self.since_newline += n,
        }
        if self.since_newline > MAX_LINE_BYTES {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!(
                    "a line longer than {} MiB (is it text with newlines?)",
                    MAX_LINE_BYTES >> 20
                ),
            ));
        }
        Ok(n)
    }
}

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
                let said = |f: Option<TextFormat>| f.map_or("Parquet", |f| f.name());
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
