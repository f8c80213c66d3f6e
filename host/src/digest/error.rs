//! Why output rows could not be digested ([`DigestError`]), and the text of
//! a panic caught while digesting.

use thiserror::Error;

use crate::kind::Kind;

/// Why output rows could not be digested. Nothing is committed after any
/// of these.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DigestError {
    /// A column's type cannot be digested soundly; refused before any
    /// digest code ran.
    #[error("output column `{column}` has type {data_type}, which idem cannot digest: {fix}")]
    UnsupportedType {
        /// The column, with the path to the nested field at fault
        /// (`col.field`, `col[]` for list elements).
        column: String,
        /// The offending type.
        data_type: String,
        /// What to do instead.
        fix: String,
    },
    /// A batch's columns differ from the first batch's.
    #[error(
        "output batch {batch} has schema {got}, but the first batch had {expected}: every output batch of a run must have the same schema"
    )]
    SchemaChanged {
        /// Index of the offending batch.
        batch: u64,
        /// The first batch's schema.
        expected: String,
        /// This batch's schema.
        got: String,
    },
    /// A column's arrays do not hold what their type says.
    #[error("output column `{column}` could not be digested: {detail}")]
    Invalid {
        /// The column.
        column: String,
        /// What was wrong.
        detail: String,
    },
    /// Digesting panicked: a bug in idem or a library, caught so the host
    /// survives. The run stops.
    #[error(
        "digesting the output panicked ({0}); this is a bug in idem, please report it. Nothing was committed"
    )]
    Panicked(String),
}

impl DigestError {
    /// The kind of the failure (and the CLI's exit code): the guest's
    /// output could not be digested.
    pub fn kind(&self) -> Kind {
        Kind::Guest
    }
}

/// The text of a caught panic.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into())
}
