//! A slice of text files made ready to decode: its format from its files'
//! names, its schema declared or inferred from every row of the verified
//! private copies (see [`super::text_schema`] for the rules).

use std::io::BufReader;
use std::sync::Arc;

use arrow::datatypes::{Field, Schema, SchemaRef};

use super::copy::IN_MEMORY_MAX;
use super::error::SliceError;
use super::pin::InputObject;
use super::resolve::ResolvedSlice;
use super::text::{self, Capped, TextFormat, TextInput, TextOptions};
use super::text_rows::{columns_at, header_names, read_lines, read_records};
use super::text_schema::{Candidates, canonical_json_schema};

/// Rows read at a time while inferring.
const INFER_ROWS: usize = 8_192;

/// The first bytes of a file read to check its header early.
const HEAD_BYTES: u64 = 64 << 10;

impl ResolvedSlice {
    /// The slice with `opts` applied: text files get their format and
    /// schema (the declared one, else one inferred from all their rows);
    /// options only text takes, given for Parquet files, are refused.
    pub fn with_text(mut self, opts: &TextOptions) -> Result<Self, SliceError> {
        let Some(format) = text::format_of(self.inputs.iter().map(|i| i.path.as_str()))? else {
            if opts.any() {
                return Err(SliceError::Refused {
                    path: self.root.to_string(),
                    why: "--schema and --max-rejects apply to CSV, TSV and JSON-lines inputs, and this slice's are Parquet".into(),
                    fix: "drop them: Parquet files carry their schema".into(),
                });
            }
            return Ok(self);
        };
        let (schema, inferred) = match &opts.schema {
            Some(s) if format == TextFormat::JsonLines => (s.clone(), false),
            Some(s) => {
                self.check_headers(format, s)?;
                (s.clone(), false)
            }
            None => (self.infer(format, opts.max_rejects > 0)?, true),
        };
        self.text = Some(TextInput {
            format,
            schema,
            inferred,
            max_rejects: opts.max_rejects,
        });
        Ok(self)
    }

    /// The slice decoded as a run spec recorded it (a replay): the files
    /// must still be of the recorded format.
    pub fn with_recorded_text(mut self, input: TextInput) -> Result<Self, SliceError> {
        let format = text::format_of(self.inputs.iter().map(|i| i.path.as_str()))?;
        if format != Some(input.format) {
            return Err(SliceError::Refused {
                path: self.root.to_string(),
                why: format!(
                    "the run recorded {} inputs, and these files are named as {}",
                    input.format.name(),
                    format.map_or("Parquet", |f| f.name())
                ),
                fix: "replay the manifest against the inputs it names".into(),
            });
        }
        self.text = Some(input);
        Ok(self)
    }

    /// Every file's header names the declared columns: read from each
    /// file's first bytes, before the transform starts (not yet checked
    /// against the pins: only to fail early; decoding checks again from
    /// the verified copy). A header the head does not hold whole (a large
    /// gzipped file) is left to decoding.
    fn check_headers(&self, format: TextFormat, schema: &SchemaRef) -> Result<(), SliceError> {
        let ranges: Vec<(String, std::ops::Range<u64>)> = self
            .inputs
            .iter()
            .map(|i| (i.path.clone(), 0..i.size.min(HEAD_BYTES)))
            .collect();
        let heads = self.store.read_ranges(&ranges)?;
        for (input, head) in self.inputs.iter().zip(heads) {
            let whole = input.size <= HEAD_BYTES;
            let gz = input.path.to_ascii_lowercase().ends_with(".gz");
            if !whole && (gz || !head.contains(&b'\n')) {
                continue;
            }
            let mut reader = csv::ReaderBuilder::new()
                .has_headers(true)
                .delimiter(format.delimiter())
                .flexible(true)
                .from_reader(text::stream(&input.path, std::io::Cursor::new(head)));
            if let Ok(header) = header_names(&input.path, &mut reader) {
                columns_at(&input.path, &header, schema)?;
            }
        }
        Ok(())
    }

    /// The text of `input`, from its verified private copy.
    pub(super) fn text_of(&self, input: &InputObject) -> Result<BufReader<Capped>, SliceError> {
        let copy = self.private_copy_with(input, IN_MEMORY_MAX)?;
        let read = copy.into_read().map_err(|source| SliceError::Io {
            path: input.path.clone(),
            source,
        })?;
        Ok(text::stream(&input.path, read))
    }

    fn infer(&self, format: TextFormat, skip_bad: bool) -> Result<SchemaRef, SliceError> {
        if self.inputs.is_empty() {
            return Err(SliceError::Empty {
                slice: self.id.clone(),
                root: self.root.to_string(),
                hint: "no inputs to infer a schema from".into(),
            });
        }
        match format {
            TextFormat::JsonLines => self.infer_json(skip_bad),
            f => self.infer_delimited(f),
        }
    }

    /// Every file's header must name the first's columns; each column's
    /// type narrowed by all its values (rows refused whole are left to
    /// decoding, which counts or names them).
    fn infer_delimited(&self, format: TextFormat) -> Result<SchemaRef, SliceError> {
        let mut names: Option<Vec<String>> = None;
        let mut candidates: Vec<Candidates> = Vec::new();
        for input in &self.inputs {
            let mut reader = csv::ReaderBuilder::new()
                .has_headers(true)
                .delimiter(format.delimiter())
                .flexible(true)
                .from_reader(self.text_of(input)?);
            let header = header_names(&input.path, &mut reader)?;
            let first = names.get_or_insert_with(|| header.clone());
            let mut sorted = (first.clone(), header.clone());
            sorted.0.sort();
            sorted.1.sort();
            if sorted.0 != sorted.1 || sorted.1.windows(2).any(|w| w[0] == w[1]) {
                return Err(SliceError::SchemaMismatch {
                    path: input.path.clone(),
                    first: self.inputs[0].path.clone(),
                    expected: first.join(", "),
                    got: header.join(", "),
                });
            }
            let at: Vec<usize> = first
                .iter()
                .map(|n| header.iter().position(|h| h == n).unwrap_or(0))
                .collect();
            candidates.resize_with(at.len(), Candidates::default);
            loop {
                let (columns, lines, rejects) =
                    read_records(&input.path, &mut reader, &at, header.len(), INFER_ROWS)?;
                if lines.is_empty() && rejects.is_empty() {
                    break;
                }
                for (c, column) in candidates.iter_mut().zip(&columns) {
                    c.see(column);
                }
            }
        }
        let names = names.unwrap_or_default();
        let fields: Vec<Field> = names
            .iter()
            .zip(&candidates)
            .map(|(n, c)| Field::new(n, c.finish(), true))
            .collect();
        Ok(Arc::new(Schema::new(fields)))
    }

    /// Arrow's inference over every line's object, streamed; a line that
    /// is not a JSON object fails here unless rejects are allowed (then
    /// decoding counts it).
    fn infer_json(&self, skip_bad: bool) -> Result<SchemaRef, SliceError> {
        let mut failed: Option<SliceError> = None;
        let mut inputs = self.inputs.iter();
        let mut current: Option<(&InputObject, BufReader<Capped>, u64)> = None;
        let values = std::iter::from_fn(|| {
            loop {
                if current.is_none() {
                    let input = inputs.next()?;
                    match self.text_of(input) {
                        Ok(r) => current = Some((input, r, 0)),
                        Err(e) => {
                            failed = Some(e);
                            return None;
                        }
                    }
                }
                let (input, reader, line) = current.as_mut()?;
                let lines = match read_lines(&input.path, reader, line, 1) {
                    Ok(l) => l,
                    Err(e) => {
                        failed = Some(e);
                        return None;
                    }
                };
                let Some((at, bytes)) = lines.into_iter().next() else {
                    current = None;
                    continue;
                };
                match serde_json::from_slice::<serde_json::Value>(bytes.trim_ascii_end()) {
                    Ok(v @ serde_json::Value::Object(_)) => return Some(Ok(v)),
                    _ if skip_bad => continue,
                    parsed => {
                        failed = Some(SliceError::BadRow {
                            path: input.path.clone(),
                            line: at,
                            at: String::new(),
                            why: match parsed {
                                Ok(_) => "it is not a JSON object".into(),
                                Err(e) => format!("it is not JSON ({})", without_line(&e)),
                            },
                            fix: "fix the line, or let up to N bad rows be skipped and counted with --max-rejects N".into(),
                        });
                        return None;
                    }
                }
            }
        });
        let inferred = arrow::json::reader::infer_json_schema_from_iterator(values);
        if let Some(e) = failed {
            return Err(e);
        }
        let inferred = inferred.map_err(|e| SliceError::Malformed {
            path: self.root.to_string(),
            detail: format!("inferring the JSON lines' schema: {e}"),
        })?;
        if inferred.fields().is_empty() {
            return Err(SliceError::Empty {
                slice: self.id.clone(),
                root: self.root.to_string(),
                hint: "its JSON lines hold no objects with fields to infer a schema from; declare it with --schema".into(),
            });
        }
        Ok(canonical_json_schema(&inferred))
    }
}

/// serde_json's message without its `at line 1`: the line is ours to say.
fn without_line(e: &serde_json::Error) -> String {
    let text = e.to_string();
    match text.rsplit_once(" at line ") {
        Some((what, _)) => format!("{what}, at column {}", e.column()),
        None => text,
    }
}
