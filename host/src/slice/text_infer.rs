//! A slice of text files made ready to decode: its format from its files'
//! names, its schema declared or inferred from every row of the verified
//! private copies (see [`super::text_schema`] for the rules).

use std::sync::Arc;

use arrow::datatypes::{Field, Schema, SchemaRef};

use super::copy::IN_MEMORY_MAX;
use super::error::SliceError;
use super::pin::InputObject;
use super::resolve::ResolvedSlice;
use super::text::{self, MAX_COLUMNS, RecordMark, TextFormat, TextInput, TextOptions};
use super::text_csv::{Records, columns_at};
use super::text_json::Lines;
use super::text_schema::{Candidates, canonical_json_schema, columns_of, schema_of};

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
            None => (self.infer(format)?, true),
        };
        // What the run spec records must read back as this schema (a
        // replay decodes by it).
        let recorded = schema_of(&columns_of(&schema));
        if recorded.as_ref().ok() != Some(&schema) {
            return Err(SliceError::Refused {
                path: self.root.to_string(),
                why: format!(
                    "its schema cannot be recorded as it is: {}",
                    recorded.err().unwrap_or_else(|| {
                        "a nested field's name or type does not read back as written".into()
                    })
                ),
                fix: "declare the columns with --schema".into(),
            });
        }
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
                fix: "the manifest does not describe these inputs: it was edited, or its inputs were replaced".into(),
            });
        }
        self.text = Some(input);
        Ok(self)
    }

    /// Every file's header names the declared columns: read from each
    /// file's first bytes, before the transform starts (not yet checked
    /// against the pins: only to fail early; decoding checks again from
    /// the verified copy). A header the head does not hold whole (a large
    /// gzipped file) is left to decoding; so is an empty file.
    fn check_headers(&self, format: TextFormat, schema: &SchemaRef) -> Result<(), SliceError> {
        let inputs: Vec<&InputObject> = self.inputs.iter().filter(|i| i.size > 0).collect();
        for group in inputs.chunks(64) {
            let ranges: Vec<(String, std::ops::Range<u64>)> = group
                .iter()
                .map(|i| (i.path.clone(), 0..i.size.min(HEAD_BYTES)))
                .collect();
            let heads = self.store.read_ranges(&ranges)?;
            for (input, head) in group.iter().zip(heads) {
                let whole = input.size <= HEAD_BYTES;
                let gz = input.path.to_ascii_lowercase().ends_with(".gz");
                if !whole && (gz || !head.contains(&b'\n')) {
                    continue;
                }
                let read = Box::new(std::io::Cursor::new(head));
                let mark = RecordMark::default();
                let text = text::stream(&input.path, read, Some(mark.clone()));
                if let Ok(Some(r)) = Records::open(&input.path, text, format, None, mark) {
                    columns_at(&input.path, &r.header, schema)?;
                }
            }
        }
        Ok(())
    }

    /// The bytes of `input`, from its verified private copy.
    pub(super) fn bytes_of(
        &self,
        input: &InputObject,
    ) -> Result<Box<dyn std::io::Read + Send>, SliceError> {
        let copy = self.private_copy_with(input, IN_MEMORY_MAX)?;
        copy.into_read().map_err(|source| SliceError::Io {
            path: input.path.clone(),
            source,
        })
    }

    fn infer(&self, format: TextFormat) -> Result<SchemaRef, SliceError> {
        let schema = match format {
            TextFormat::JsonLines => self.infer_json()?,
            f => self.infer_delimited(f)?,
        };
        match schema {
            Some(s) if !s.fields().is_empty() => Ok(s),
            _ => Err(SliceError::Refused {
                path: self.root.to_string(),
                why: format!("slice `{}` holds no rows to infer a schema from", self.id),
                fix: "declare the columns with --schema (an empty slice then reads as zero rows)"
                    .into(),
            }),
        }
    }

    /// Every file's header must name the first's columns (in any order);
    /// each column's type narrowed by all its values (rows refused whole
    /// are left to decoding, which counts or names them).
    fn infer_delimited(&self, format: TextFormat) -> Result<Option<SchemaRef>, SliceError> {
        let mut names: Option<(Vec<String>, &InputObject)> = None;
        let mut candidates: Vec<Candidates> = Vec::new();
        for input in self.inputs.iter().filter(|i| i.size > 0) {
            let mark = RecordMark::default();
            let text = text::stream(&input.path, self.bytes_of(input)?, Some(mark.clone()));
            let Some(mut records) = Records::open(&input.path, text, format, None, mark)? else {
                continue;
            };
            let (first, from) = names.get_or_insert_with(|| (records.header.clone(), input));
            same_columns(input, from, first, &records.header)?;
            records.take(first);
            candidates.resize_with(first.len(), Candidates::default);
            loop {
                let texts = records.read(&input.path, INFER_ROWS, u64::MAX)?;
                if texts.is_empty() {
                    break;
                }
                for (c, column) in candidates.iter_mut().zip(&texts.columns) {
                    c.see(column);
                }
            }
        }
        Ok(names.map(|(names, _)| {
            let fields: Vec<Field> = names
                .iter()
                .zip(&candidates)
                .map(|(n, c)| Field::new(n, c.finish(), true))
                .collect();
            Arc::new(Schema::new(fields))
        }))
    }

    /// Arrow's inference over every line that serde_json reads as an
    /// object, streamed (the others are left to decoding, arrow's verdict,
    /// which counts or names them).
    fn infer_json(&self) -> Result<Option<SchemaRef>, SliceError> {
        let mut failed: Option<SliceError> = None;
        let mut inputs = self.inputs.iter();
        let mut current: Option<(&InputObject, Lines)> = None;
        let mut pending = Vec::new().into_iter();
        let mut keys = std::collections::HashSet::new();
        let values = std::iter::from_fn(|| {
            loop {
                if let Some(v) = pending.next() {
                    return Some(Ok::<serde_json::Value, arrow::error::ArrowError>(v));
                }
                if current.is_none() {
                    let input = inputs.next()?;
                    match self.bytes_of(input) {
                        Ok(r) => {
                            current = Some((input, Lines::new(text::stream(&input.path, r, None))))
                        }
                        Err(e) => {
                            failed = Some(e);
                            return None;
                        }
                    }
                }
                let (input, lines) = current.as_mut()?;
                let chunk = match lines.read(&input.path, INFER_ROWS, 64 << 20, 0) {
                    Ok(c) => c,
                    Err(e) => {
                        failed = Some(e);
                        return None;
                    }
                };
                if chunk.is_empty() {
                    current = None;
                    continue;
                }
                let objects: Vec<serde_json::Value> = (0..chunk.lines.len())
                    .filter_map(|i| serde_json::from_slice(chunk.line(i)).ok())
                    .filter(serde_json::Value::is_object)
                    .collect();
                // Too many keys is said as soon as it is seen, not after
                // arrow has mapped them all.
                for o in &objects {
                    keys.extend(o.as_object().into_iter().flat_map(|m| m.keys().cloned()));
                }
                if keys.len() > MAX_COLUMNS {
                    failed = Some(too_wide(self, keys.len()));
                    return None;
                }
                pending = objects.into_iter();
            }
        });
        let inferred = arrow::json::reader::infer_json_schema_from_iterator(values);
        if let Some(e) = failed {
            return Err(e);
        }
        let inferred = inferred.map_err(|e| SliceError::Refused {
            path: self.root.to_string(),
            why: format!("its JSON lines' schema cannot be inferred: {e}"),
            fix: "declare the columns with --schema".into(),
        })?;
        let width = super::text_json::leaves(inferred.fields());
        if width > MAX_COLUMNS {
            return Err(too_wide(self, width));
        }
        Ok(Some(canonical_json_schema(&inferred)))
    }
}

/// Why JSON lines of `n` keys (nested ones counted) are refused.
fn too_wide(slice: &ResolvedSlice, n: usize) -> SliceError {
    SliceError::Refused {
        path: slice.root.to_string(),
        why: format!(
            "its JSON lines hold {n} distinct keys or more, more than idem reads ({MAX_COLUMNS})"
        ),
        fix: "declare the columns you need with --schema".into(),
    }
}

/// `header` (of `input`) names `first`'s columns (of `from`), each once.
fn same_columns(
    input: &InputObject,
    from: &InputObject,
    first: &[String],
    header: &[String],
) -> Result<(), SliceError> {
    let (mut a, mut b) = (first.to_vec(), header.to_vec());
    a.sort();
    b.sort();
    if let Some(w) = b.windows(2).find(|w| w[0] == w[1]) {
        return Err(SliceError::BadRow {
            path: input.path.clone(),
            line: 1,
            at: String::new(),
            why: format!(
                "the header names column `{}` twice",
                crate::text::shown(&w[0], 64)
            ),
            fix: "rename one of them, or declare the columns to take with --schema".into(),
        });
    }
    if a != b {
        return Err(SliceError::SchemaMismatch {
            path: input.path.clone(),
            first: from.path.clone(),
            expected: crate::text::clip_str(&first.join(", "), 1024),
            got: crate::text::clip_str(&header.join(", "), 1024),
        });
    }
    Ok(())
}
