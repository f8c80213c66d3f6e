//! The schema of a slice's files: read from each footer before anything is
//! decoded (to fail early), compared without writers' metadata, and typed
//! from the Parquet schema alone.

use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use parquet::arrow::arrow_reader::ArrowReaderOptions;
use parquet::file::metadata::ParquetMetaDataReader;

use super::error::SliceError;
use super::pin::InputObject;
use super::resolve::ResolvedSlice;

/// Types come from the Parquet schema alone, not from a writer's embedded
/// Arrow hints: the same data written by Spark, polars or DataFusion (which
/// hints view types) reaches the guest identically.
pub(super) fn reader_options() -> ArrowReaderOptions {
    ArrowReaderOptions::new().with_skip_arrow_metadata(true)
}

/// Schema equality ignoring metadata (writers add their own key/values).
fn strip_meta(s: &SchemaRef) -> arrow::datatypes::Schema {
    arrow::datatypes::Schema::new(s.fields().clone())
}

/// The same columns (fields with their metadata), whatever the schemas'
/// own metadata.
pub(super) fn same_fields(a: &SchemaRef, b: &SchemaRef) -> bool {
    strip_meta(a) == strip_meta(b)
}

impl ResolvedSlice {
    pub(super) fn same_schema(
        &self,
        input: &InputObject,
        first: &SchemaRef,
        s: &SchemaRef,
    ) -> Result<(), SliceError> {
        if same_fields(first, s) {
            return Ok(());
        }
        Err(SliceError::SchemaMismatch {
            path: input.path.clone(),
            first: self.inputs[0].path.clone(),
            expected: first.to_string(),
            got: s.to_string(),
        })
    }

    /// The schema of [`ResolvedSlice::peek`].
    #[cfg(test)]
    pub(super) fn peek_schema(&self, input: &InputObject) -> Result<SchemaRef, SliceError> {
        Ok(self.peek(input)?.0)
    }

    /// The schema from the object's footer, read in place with two ranged
    /// reads (not yet checked against the digest: only to fail early and
    /// tell the guest the schema), and the rows the footer states. As the
    /// decoder does, types come from the Parquet schema alone.
    pub(super) fn peek(&self, input: &InputObject) -> Result<(SchemaRef, u64), SliceError> {
        let malformed = |detail: String| SliceError::Malformed {
            path: input.path.clone(),
            detail,
        };
        let len = self
            .store
            .size(&input.path)?
            .ok_or_else(|| SliceError::Changed {
                path: input.path.clone(),
                detail: "it was deleted".into(),
            })?;
        if len != input.size {
            return Err(SliceError::Changed {
                path: input.path.clone(),
                detail: format!(
                    "size {} {}, {} now",
                    input.size,
                    self.check(input).when(),
                    len
                ),
            });
        }
        // Not Parquet: a CSV or JSON file is called one (by its name).
        let not_parquet = |why: String| match super::path::other_format(&input.path) {
            Some(kind) => malformed(super::path::other_format_detail(kind, false)),
            None => malformed(why),
        };
        if len < 12 {
            return Err(not_parquet(format!("{len} bytes is too small for Parquet")));
        }
        let tail = self.store.read_range(&input.path, len - 8..len)?;
        if &tail[4..8] != b"PAR1" {
            return Err(not_parquet(
                "no PAR1 magic at the end (corrupt or encrypted footer)".into(),
            ));
        }
        let footer = u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]) as u64;
        if footer + 12 > len {
            return Err(malformed(format!(
                "footer of {footer} bytes does not fit in the file of {len}"
            )));
        }
        let meta = self
            .store
            .read_range(&input.path, len - 8 - footer..len - 8)?;
        let md =
            ParquetMetaDataReader::decode_metadata(&meta).map_err(|e| malformed(e.to_string()))?;
        let schema =
            parquet::arrow::parquet_to_arrow_schema(md.file_metadata().schema_descr(), None)
                .map_err(|e| malformed(e.to_string()))?;
        // What the decoder reads: the row groups' counts (not the file's
        // own total, which nothing else checks).
        let rows = md
            .row_groups()
            .iter()
            .map(|g| u64::try_from(g.num_rows()).unwrap_or(0))
            .fold(0u64, u64::saturating_add);
        Ok((Arc::new(schema), rows))
    }
}
