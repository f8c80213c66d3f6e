//! Decoding one verified private copy: a Parquet decoder over the columns
//! wanted, in batches the input budget allows, checked at its end against
//! the rows its row groups hold; or a text input's rows
//! ([`super::text_rows`]).

use std::sync::Arc;

use arrow::datatypes::{Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ParquetRecordBatchReader, ParquetRecordBatchReaderBuilder,
};

use super::copy::PrivateCopy;
use super::error::SliceError;
use super::fit::Fit;
use super::guard;
use super::pin::InputObject;
use super::resolve::ResolvedSlice;
use super::schema::{reader_options, same_fields};
use super::text_rows::{Cut, Rejects, TextRows};

/// How the files of a reader are decoded.
#[derive(Clone, Copy)]
pub(super) struct Decode<'a> {
    pub(super) batch_rows: usize,
    /// The schema of the columns read: every file's (a table's files:
    /// the table's columns they are read as, [`Fit`]).
    pub(super) schema: &'a SchemaRef,
    /// The file columns decoded (all: `None`).
    pub(super) decode: Option<&'a [usize]>,
    /// Those columns' types, when some are taken as dictionaries.
    pub(super) decode_as: Option<&'a SchemaRef>,
    /// A table's file: the schema its footer gave when the run started
    /// (its private copy's must be the same).
    pub(super) peeked: Option<&'a SchemaRef>,
    /// Most bytes a batch of decoded input may hold.
    pub(super) budget: u64,
    /// The rejects text inputs may have, and have had.
    pub(super) rejects: &'a Rejects,
}

/// Where a file's batches come from.
pub(super) enum Rows {
    Parquet(ParquetRecordBatchReader),
    Text(Box<TextRows>),
}

/// One input file being decoded.
pub(super) struct Decoding {
    pub(super) path: String,
    pub(super) reader: Rows,
    /// Rows its footer says it holds: what decoding it must yield.
    pub(super) rows: u64,
    /// Rows decoded so far.
    pub(super) read: u64,
    /// A table's file: its columns as the table's ([`Fit`]).
    fit: Option<Fit>,
}

impl Decoding {
    /// The file's next batch, `None` at its end.
    pub(super) fn next_batch(&mut self) -> Option<Result<RecordBatch, SliceError>> {
        match &mut self.reader {
            Rows::Parquet(r) => r.next().map(|b| {
                let b = b.map_err(|e| SliceError::Malformed {
                    path: self.path.clone(),
                    detail: e.to_string(),
                })?;
                match &self.fit {
                    Some(fit) => fit.apply(&self.path, &b),
                    None => Ok(b),
                }
            }),
            Rows::Text(t) => t.next(),
        }
    }

    /// At the file's end: never fewer (or more) rows than it holds. A
    /// decoder that stopped at a footer's wrong total delivered 0 rows of
    /// a file of 6, and the run exited 0.
    pub(super) fn check_rows(&self) -> Result<(), SliceError> {
        // A text file's rows are what its lines hold (there is no count).
        if self.read == self.rows || matches!(self.reader, Rows::Text(_)) {
            return Ok(());
        }
        Err(SliceError::Refused {
            path: self.path.clone(),
            why: format!(
                "decoding it yielded {} rows, but its row groups hold {}",
                self.read, self.rows
            ),
            fix: "its layout is one idem cannot read faithfully; rewrite it with a current Parquet writer".into(),
        })
    }
}

impl ResolvedSlice {
    /// A decoder over `copy`, the verified private copy of `input`, whose
    /// schema must be the slice's.
    pub(super) fn open(
        &self,
        input: &InputObject,
        copy: PrivateCopy,
        how: &Decode<'_>,
    ) -> Result<Decoding, SliceError> {
        if let Some(text) = &self.text {
            let read = copy.into_read().map_err(|source| SliceError::Io {
                path: input.path.clone(),
                source,
            })?;
            let cut = Cut {
                batch_rows: how.batch_rows,
                budget: how.budget,
                out: handed_on(&text.schema, how),
                rejects: how.rejects.clone(),
            };
            let rows = TextRows::open(&input.path, read, text, cut)?;
            return Ok(Decoding {
                path: input.path.clone(),
                reader: Rows::Text(Box::new(rows)),
                rows: 0,
                read: 0,
                fit: None,
            });
        }
        match copy {
            PrivateCopy::Memory(b) => self.decoder(b, input, how),
            PrivateCopy::Disk(f) => self.decoder(f, input, how),
        }
    }

    /// The decoder of one verified copy, once [`guard::check`] passed it:
    /// it yields [`Decoding::rows`] rows, a few at a time if its pages
    /// could decode to much at once.
    pub(super) fn decoder<T: guard::Reopen>(
        &self,
        copy: T,
        input: &InputObject,
        how: &Decode<'_>,
    ) -> Result<Decoding, SliceError> {
        let malformed = |e: parquet::errors::ParquetError| SliceError::Malformed {
            path: input.path.clone(),
            detail: e.to_string(),
        };
        let meta = ArrowReaderMetadata::load(&copy, reader_options()).map_err(malformed)?;
        let FilePlan { roots, hint, fit } = self.file_plan(input, meta.schema(), how)?;
        // Columns taken dictionary-encoded: the same file read with those
        // columns' types as dictionaries (the footer is parsed once).
        let options = match &hint {
            Some(s) => reader_options().with_schema(s.clone()),
            None => reader_options(),
        };
        let mut meta = match hint {
            Some(_) => ArrowReaderMetadata::try_new(meta.metadata().clone(), options.clone())
                .map_err(malformed)?,
            None => meta,
        };
        let descr = meta.metadata().file_metadata().schema_descr_ptr();
        let leaves: Vec<usize> = (0..descr.num_columns())
            .filter(|&l| {
                roots
                    .as_ref()
                    .is_none_or(|at| at.contains(&descr.get_column_root_idx(l)))
            })
            .collect();
        let plan = guard::check(
            &copy,
            meta.metadata(),
            &leaves,
            how.batch_rows,
            how.budget,
            &input.path,
        )?;
        if let Some(fixed) = guard::with_total(meta.metadata(), plan.rows) {
            tracing::warn!(
                "input {}: its footer says {} rows, its row groups {}: reading the row groups",
                input.path,
                meta.metadata().file_metadata().num_rows(),
                plan.rows
            );
            meta = ArrowReaderMetadata::try_new(Arc::new(fixed), options).map_err(malformed)?;
        }
        let builder = ParquetRecordBatchReaderBuilder::new_with_metadata(copy, meta);
        // Top-level fields are the Parquet schema's roots, in order.
        let builder = match roots {
            Some(at) => {
                let mask = parquet::arrow::ProjectionMask::roots(
                    builder.parquet_schema(),
                    at.iter().copied(),
                );
                builder.with_projection(mask)
            }
            None => builder,
        };
        let reader = builder
            .with_batch_size(plan.decode_rows)
            .build()
            .map_err(malformed)?;
        Ok(Decoding {
            path: input.path.clone(),
            reader: Rows::Parquet(reader),
            rows: plan.rows,
            read: 0,
            fit,
        })
    }

    /// How one file of schema `file` is decoded. Any but a table's file
    /// must have the slice's schema.
    fn file_plan(
        &self,
        input: &InputObject,
        file: &SchemaRef,
        how: &Decode<'_>,
    ) -> Result<FilePlan, SliceError> {
        let Some(table) = self.table_columns.as_deref() else {
            self.same_schema(input, how.schema, file)?;
            return Ok(FilePlan {
                roots: how.decode.map(<[usize]>::to_vec),
                hint: how.decode_as.cloned(),
                fit: None,
            });
        };
        if how.peeked.is_some_and(|p| !same_fields(p, file)) {
            return Err(SliceError::Changed {
                path: input.path.clone(),
                detail: "its columns differ from those its footer gave when the run started".into(),
            });
        }
        let typed = how.decode_as.unwrap_or(how.schema);
        let fit = Fit::of(
            input,
            file,
            (table, how.schema, typed),
            how.decode,
            how.budget,
        )?;
        let hint = fit.hint(file);
        Ok(FilePlan {
            roots: Some(fit.roots.clone()),
            hint,
            fit: Some(fit),
        })
    }
}

/// How one file is decoded ([`ResolvedSlice::file_plan`]).
struct FilePlan {
    /// Its top-level columns decoded (all: `None`).
    roots: Option<Vec<usize>>,
    /// The schema it is asked for, with the dictionary columns.
    hint: Option<SchemaRef>,
    /// A table's file: its columns as the table's.
    fit: Option<Fit>,
}

/// The columns of a text input's `schema` a reader hands on and their
/// types (dictionaries where the guest takes them), when not all as they are.
fn handed_on(schema: &SchemaRef, how: &Decode<'_>) -> Option<(Vec<usize>, SchemaRef)> {
    if how.decode.is_none() && how.decode_as.is_none() {
        return None;
    }
    let at: Vec<usize> = match how.decode {
        Some(at) => at.to_vec(),
        None => (0..schema.fields().len()).collect(),
    };
    let typed = how.decode_as.unwrap_or(schema);
    let fields: Vec<_> = at.iter().map(|&i| typed.field(i).clone()).collect();
    Some((at, std::sync::Arc::new(Schema::new(fields))))
}

/// Every column of `schema`, `batch_rows` at a time, default budget.
#[cfg(test)]
pub(super) fn decode_all<'a>(
    schema: &'a SchemaRef,
    batch_rows: usize,
    rejects: &'a Rejects,
) -> Decode<'a> {
    Decode {
        batch_rows,
        schema,
        decode: None,
        decode_as: None,
        peeked: None,
        budget: super::guard::DEFAULT_INPUT_BATCH_BYTES,
        rejects,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::slice::copy::IN_MEMORY_MAX;
    use crate::slice::fixture::plain_ints;

    /// Rows in = the row groups' rows, checked at each file's end: a
    /// decoder that yields fewer (or more) is refused by name.
    #[test]
    fn a_file_that_decodes_to_other_rows_than_its_row_groups_hold_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.parquet");
        plain_ints(&path, 100);
        let slice = ResolvedSlice::from_files("s", std::slice::from_ref(&path)).unwrap();
        let input = &slice.inputs[0];
        let schema = slice.peek_schema(input).unwrap();
        let rejects = Rejects::default();
        let how = decode_all(&schema, 30, &rejects);
        let copy = slice.private_copy_with(input, IN_MEMORY_MAX).unwrap();
        let mut file = slice.open(input, copy, &how).unwrap();
        assert_eq!(file.rows, 100);
        while let Some(b) = file.next_batch() {
            file.read += b.unwrap().num_rows() as u64;
        }
        file.check_rows().unwrap();
        file.rows = 101;
        let e = file.check_rows().unwrap_err().to_string();
        assert!(
            e.contains("a.parquet") && e.contains("yielded 100 rows, but its row groups hold 101"),
            "{e}"
        );
    }
}
