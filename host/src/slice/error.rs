//! Why a slice could not be resolved or read: [`SliceError`], each variant
//! naming the object and what to do, and the kind (and exit code) of each.

use thiserror::Error;

use crate::kind::Kind;
use crate::storage::StorageError;

/// Why a slice could not be resolved or read. Each names the object.
#[derive(Debug, Error)]
pub enum SliceError {
    /// An input path does not exist.
    #[error("input `{0}` does not exist: check the path (and the partition value)")]
    NotFound(String),
    /// The dataset has no directory (or no file) for the partition.
    #[error(
        "slice `{slice}` matches no input files under {root}: there is no partition directory {slice}/ (or it is empty){nearby}"
    )]
    NoPartition {
        /// The slice id (`column=value`).
        slice: String,
        /// The dataset root.
        root: String,
        /// What is there instead (`; the date= partitions there are ...`,
        /// or that the root is itself a partition or a file).
        nearby: String,
    },
    /// The slice resolved to no objects.
    #[error("slice `{slice}` matches no input files under {root}: {hint}")]
    Empty {
        /// The slice id.
        slice: String,
        /// Where we looked.
        root: String,
        /// What to check.
        hint: String,
    },
    /// An object is not readable Parquet.
    #[error(
        "input `{path}` is not a readable Parquet file ({detail}). Nothing was run or committed; fix or remove the file and rerun"
    )]
    Malformed {
        /// The object.
        path: String,
        /// The decoder's complaint.
        detail: String,
    },
    /// An object that is readable Parquet but is not read: it could take
    /// the host past its input budget, its footer contradicts itself, or a
    /// value would not survive decoding. Names the file and the fix.
    #[error("input `{path}` is refused: {why}. Nothing was run or committed; {fix}")]
    Refused {
        /// The object.
        path: String,
        /// What is wrong with it.
        why: String,
        /// What to do.
        fix: String,
    },
    /// A row of a text input that does not decode to the slice's schema.
    #[error("input `{path}`, line {line}{at}: {why}. Nothing was committed; {fix}")]
    BadRow {
        /// The object.
        path: String,
        /// The line the row starts on (1 is the first).
        line: u64,
        /// `, column `c`` when one column is at fault, else empty.
        at: String,
        /// What is wrong with the row.
        why: String,
        /// What to do.
        fix: String,
    },
    /// Objects of one slice disagree on their schema.
    #[error(
        "input `{path}` has schema {got}, but `{first}` has {expected}: all files of a slice must share one schema"
    )]
    SchemaMismatch {
        /// The disagreeing object.
        path: String,
        /// The first object.
        first: String,
        /// The first object's schema.
        expected: String,
        /// This object's schema.
        got: String,
    },
    /// An object changed between resolving and reading.
    #[error(
        "input `{path}` changed while the run was reading it ({detail}); rerun to read the new version"
    )]
    Changed {
        /// The object.
        path: String,
        /// What changed.
        detail: String,
    },
    /// A partition value, slice id or input path that could name a file
    /// outside the slice root.
    #[error(
        "{what} `{value}` is refused: {reason}. It must stay inside the dataset root: no `..`, no absolute path, no NUL, not empty{segment}"
    )]
    BadName {
        /// What the name is (`partition value`, `slice id`, `input path`).
        what: String,
        /// The name, escaped for display.
        value: String,
        /// What is wrong with it.
        reason: String,
        /// Extra rule for one-segment names.
        segment: &'static str,
    },
    /// The files of one slice live on different stores.
    #[error(
        "`{first}` and `{other}` are on different stores: the files of one slice must share a bucket (or be local)"
    )]
    Stores {
        /// The first file.
        first: String,
        /// The file on another store.
        other: String,
    },
    /// The storage layer failed (names the location and the fix).
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// The target table and the input root contain one another.
    #[error(
        "the target table {table} and the input root {root} overlap (one contains the other): the run would read its own output. Put the table outside the input dataset"
    )]
    Loop {
        /// The table.
        table: String,
        /// The input root.
        root: String,
    },
    /// Any other I/O failure.
    #[error("reading `{path}`: {source}")]
    Io {
        /// The object.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
}

impl SliceError {
    /// The kind of the failure (and the CLI's exit code).
    pub fn kind(&self) -> Kind {
        match self {
            SliceError::Storage(e) => e.kind(),
            // Read errors of a pinned object, or an object that changed
            // while it was read: the store, not the command line.
            SliceError::Changed { .. } | SliceError::Io { .. } => Kind::Storage,
            SliceError::NotFound(_)
            | SliceError::NoPartition { .. }
            | SliceError::Empty { .. }
            | SliceError::Malformed { .. }
            | SliceError::BadRow { .. }
            | SliceError::SchemaMismatch { .. }
            | SliceError::BadName { .. }
            | SliceError::Stores { .. }
            | SliceError::Loop { .. }
            | SliceError::Refused { .. } => Kind::Input,
        }
    }
}
