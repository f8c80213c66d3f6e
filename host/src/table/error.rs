use crate::kind::Kind;
use thiserror::Error;

/// A table failure; nothing was committed when one is returned.
#[derive(Debug, Error)]
pub enum TableError {
    /// The table location is unusable.
    #[error(
        "table `{location}` cannot be reached: {detail}. Check the path or URL (and credentials for object stores)"
    )]
    Location {
        /// What the user gave.
        location: String,
        /// Why.
        detail: String,
    },
    /// There is no Delta table at the location (reads only; a run creates it).
    #[error(
        "there is no Delta table at `{location}` (no _delta_log/): check the path or URL; `idem run` creates the table with its first commit"
    )]
    NoTable {
        /// What the user gave.
        location: String,
    },
    /// The storage layer refused (unreachable, missing bucket, credentials,
    /// no conditional writes).
    #[error(transparent)]
    Storage(#[from] crate::storage::StorageError),
    /// A Delta operation failed.
    #[error("delta table: {what}: {detail}")]
    Delta {
        /// What idem was doing.
        what: String,
        /// The error.
        detail: String,
    },
    /// An Iceberg operation failed.
    #[error("iceberg table: {what}: {detail}")]
    Iceberg {
        /// What idem was doing.
        what: String,
        /// The error.
        detail: String,
    },
    /// Lost a race with another writer (retried internally).
    #[error("concurrent commit conflict: {0}")]
    Conflict(String),
    /// The output cannot be written as asked.
    #[error("output cannot be committed: {0}")]
    Output(String),
    /// A `--key` column the output does not have.
    #[error(
        "merge key column `{column}` is not in the output (columns: {columns}): choose --key from those"
    )]
    NoKeyColumn {
        /// The key column asked for.
        column: String,
        /// The output's columns.
        columns: String,
    },
    /// Another run advanced the source while this one ran.
    #[error(
        "another run consumed from `{prefix}` while this one ran (the table's position is now {}, this run started after {}): its range may overlap; nothing was committed. Run `idem run --next` again to take the next range",
        found.as_deref().unwrap_or("the start"),
        expected.as_deref().unwrap_or("the start")
    )]
    ProgressMoved {
        /// The source prefix.
        prefix: String,
        /// Where this run started.
        expected: Option<String>,
        /// Where the table is now.
        found: Option<String>,
    },
    /// The table is partitioned otherwise than the run writes.
    #[error("{0}")]
    Partitioning(String),
    /// A table given as a slice input uses a feature idem cannot read
    /// (column mapping, say): the input, not the store, is at fault.
    #[error("reading {location} as a slice: {detail}")]
    UnreadableInput {
        /// The table.
        location: String,
        /// What it uses, and what to do.
        detail: String,
    },
    /// A setting (an `IDEM_*` variable) is out of range.
    #[error("{0}")]
    Setting(String),
    /// A pinned table input named in a way its format has no name for.
    #[error("{0}")]
    Pin(String),
    /// The staged output (local scratch files) could not be read back.
    #[error("reading the staged output {0}")]
    Staged(String),
    /// Merge keys repeat in the output.
    #[error(
        "merge key ({keys}) is not unique in the output: {duplicates} rows repeat a key (first: {example}). MERGE needs one source row per key: dedup in the transform or choose another --key"
    )]
    DuplicateKeys {
        /// The key columns.
        keys: String,
        /// How many rows repeat a key.
        duplicates: usize,
        /// One repeated key.
        example: String,
    },
    /// The first commit has no rows and thus no schema.
    #[error(
        "the transform produced no rows and the table does not exist yet, so there is no schema to create it with"
    )]
    NoSchema,
    /// Reading or writing `_idem/` files failed.
    #[error("table sidecar `_idem/{path}`: {detail}")]
    Sidecar {
        /// The path under `_idem/`.
        path: String,
        /// Why.
        detail: String,
    },
    /// Another slice id owns the partition.
    #[error(
        "partition {partition} is owned by slice `{owner}`; slice `{slice}` cannot write it (one partition has one owning slice). Run it as slice `{owner}` (--slice-id {owner}), or write to another table"
    )]
    Owned {
        /// `column=value`.
        partition: String,
        /// The owning slice id.
        owner: String,
        /// The slice that tried.
        slice: String,
    },
    /// An append table holds files no idem commit wrote.
    #[error(
        "the table holds {count} data file(s) that idem did not write (e.g. {example}): a DELETE, UPDATE, OPTIMIZE or another writer rewrote rows, so idem can no longer tell which slice owns them. Restore the table to its last idem version (RESTORE), or rebuild it by rerunning every slice into a new table"
    )]
    Foreign {
        /// How many such files.
        count: usize,
        /// One of them.
        example: String,
    },
    /// A merge key column holds nulls.
    #[error(
        "merge key column `{column}` is null in {rows} output row(s): MERGE never matches a null key, so every rerun would insert those rows again. Filter or fill null keys in the transform, or choose another --key"
    )]
    NullKeys {
        /// The key column.
        column: String,
        /// Rows with a null in it.
        rows: usize,
    },
    /// The table was created for another commit mode.
    #[error(
        "this table takes --mode {created} (it was created with it), not --mode {table}: modes own rows differently and cannot share a table. Use another table for --mode {table}"
    )]
    ModeMismatch {
        /// The mode asked for.
        table: String,
        /// The table's mode.
        created: String,
    },
    /// A merge key is owned by another slice.
    #[error(
        "merge key ({keys}) = ({example}) belongs to slice `{owner}`; slice `{slice}` cannot take it over (every row of an idem table belongs to one slice). Make the slices' keys disjoint (e.g. include the slice's date in the key), or write to another table"
    )]
    KeyOwned {
        /// The key columns.
        keys: String,
        /// One such key.
        example: String,
        /// Its owning slice.
        owner: String,
        /// The slice that tried.
        slice: String,
    },
}

impl TableError {
    /// The kind of the failure (and the CLI's exit code).
    pub fn kind(&self) -> Kind {
        match self {
            TableError::Storage(e) => e.kind(),
            // The guest's output does not fit the table or the mode's
            // contract (schema, partition column, unique non-null keys).
            TableError::Output(_)
            | TableError::DuplicateKeys { .. }
            | TableError::NullKeys { .. }
            | TableError::NoSchema => Kind::Guest,
            // The command asked for a mode the table was not made with, or
            // for rows (a partition, merge keys) another slice owns.
            TableError::NoTable { .. }
            | TableError::Partitioning(_)
            | TableError::Setting(_)
            | TableError::Pin(_)
            | TableError::UnreadableInput { .. }
            | TableError::NoKeyColumn { .. }
            | TableError::ModeMismatch { .. }
            | TableError::Owned { .. }
            | TableError::KeyOwned { .. } => Kind::Input,
            // The store or the Delta log refused or failed, or another
            // writer rewrote the table's rows under idem.
            TableError::Location { .. }
            | TableError::Delta { .. }
            | TableError::Iceberg { .. }
            | TableError::Conflict(_)
            | TableError::Sidecar { .. }
            | TableError::Staged(_)
            | TableError::ProgressMoved { .. }
            | TableError::Foreign { .. } => Kind::Storage,
        }
    }
}
