//! Slices: a slice spec resolves to a sorted, pinned list of input objects
//! (path, size, sha256), then streams them as fixed-size `RecordBatch`es.
//! Memory stays O(batch), not O(slice).
//!
//! The bytes decoded are the bytes hashed: each input is read once through
//! sha256 into a private copy, checked against its pinned digest, and
//! decoded from that copy, so a rewrite after pinning cannot slip in.
//!
//! The files, in the order data flows through them:
//!
//! - `error`: why a slice could not be resolved or read ([`SliceError`]).
//! - `partition`: a partition key, one level (`date=D`) or nested
//!   (`date=D/hour=H`).
//! - `path`: the rules a partition value, slice id or input path obeys.
//! - `locate`: where input files live, their names below a common root.
//! - `pin`: each input's path, size and sha256, hashed before anything runs.
//! - `resolve`: [`ResolvedSlice`], the exact objects a run reads.
//! - `rows`: the constant columns and row filter a slice applies.
//! - `copy`: each input read once into a private copy, checked against its pin.
//! - `schema`: the files' schema, from their footers, compared.
//! - `pages`, `guard`: what an input must satisfy before and while it is decoded.
//! - `text`, `text_schema`, `text_infer`: CSV, TSV and JSON-lines inputs,
//!   their schema declared or inferred from the pinned bytes.
//! - `text_rows`, `text_csv`, `text_json`: a text input decoded, its bad
//!   rows named or counted.
//! - `fit`: a table's file read as the table's columns (appended ones null).
//! - `decode`: a decoder over one verified copy (Parquet or text).
//! - `as_read`: for `idem exec`, each copy hashed while it is decoded.
//! - `reader`: [`SliceReader`], the fixed-size batches, file after file.
//! - `narrow`: the reader narrowed to what a transform [`Declared`].
//! - `prefetch`: a reader on a thread of its own, a few batches ahead.

mod as_read;
mod copy;
mod decode;
mod error;
mod fit;
#[cfg(test)]
mod fixture;
mod guard;
mod locate;
mod narrow;
mod pages;
mod partition;
mod path;
mod pin;
mod prefetch;
mod reader;
mod resolve;
mod rows;
mod schema;
mod text;
mod text_csv;
mod text_infer;
mod text_json;
mod text_rows;
mod text_schema;

pub use as_read::InputsRead;
pub use copy::IN_MEMORY_MAX;
pub use error::SliceError;
pub use guard::DEFAULT_INPUT_BATCH_BYTES;
pub use locate::files_id;
pub use narrow::Declared;
pub use partition::{MAX_LEVELS, Partition};
pub use path::{
    MAX_SEGMENT_BYTES, MAX_SLICES_UNDER, check_not_inside, under, validate_relative_path,
    validate_segment, validate_slice_id,
};
pub use pin::InputObject;
pub use prefetch::Prefetch;
pub use reader::SliceReader;
pub use resolve::ResolvedSlice;
pub use text::{MAX_COLUMNS, MAX_LINE_BYTES, TextFormat, TextInput, TextOptions};
pub use text_rows::Rejected;
pub use text_schema::{ColumnRecord, columns_of, parse_declared, schema_of};
