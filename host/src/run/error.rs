//! Why a run failed, and what kind of failure that is (the CLI's exit
//! code). Nothing was committed when a run returns one of these.

use thiserror::Error;

use crate::execute::ExecError;
use crate::kind::Kind;
use crate::manifest::ManifestError;
use crate::sandbox::SandboxError;
use crate::slice::SliceError;
use crate::table::TableError;

/// Why a run failed. Nothing was committed.
#[derive(Debug, Error)]
pub enum RunError {
    /// The inputs.
    #[error(transparent)]
    Slice(#[from] SliceError),
    /// The module or the guest.
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    /// Executing the transform.
    #[error(transparent)]
    Exec(#[from] ExecError),
    /// The table.
    #[error(transparent)]
    Table(#[from] TableError),
    /// A stored manifest.
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    /// Expectations (write-audit-publish).
    #[error(transparent)]
    Expect(#[from] crate::expect::ExpectError),
    /// Write-audit-publish on a branch: the audit of the branch's rows
    /// failed. `main` is as it was; the output waits on the branch.
    #[error(transparent)]
    Unpublished(Box<Unpublished>),
    /// The command line asked for something inconsistent.
    #[error("{0}")]
    Usage(String),
    /// `--next`: the source has no object after the table's position (not
    /// a failure: the CLI reports it and exits 0).
    #[error("up to date: `{prefix}` has no new object after {}", through.as_deref().unwrap_or("the start"))]
    UpToDate {
        /// The source prefix.
        prefix: String,
        /// The table's position in it.
        through: Option<String>,
    },
    /// `--next`: objects sort at or before the position but were never
    /// consumed (they arrived late).
    #[error(
        "{} object(s) in `{prefix}` sort at or before the consumed position `{through}` but were never consumed (late arrivals), e.g. {}: idem never skips them silently. Rename them to sort after `{through}` (the next run takes them), or remove them",
        late.len(),
        late.iter().take(5).cloned().collect::<Vec<_>>().join(", ")
    )]
    Late {
        /// The source prefix.
        prefix: String,
        /// The position.
        through: String,
        /// The late objects.
        late: Vec<String>,
    },
    /// The run went over its [`Run::time_limit`](super::Run::time_limit) (nothing committed).
    #[error(
        "the run went over its time limit of {limit_ms} ms while {step}; nothing was committed. Give it a smaller slice, or a larger limit (run-timeout-ms)"
    )]
    OverTime {
        /// The limit.
        limit_ms: u64,
        /// The step that ended over it.
        step: &'static str,
    },
    /// Local I/O.
    #[error("{what}: {source}")]
    Io {
        /// What idem was doing.
        what: String,
        /// The error.
        source: std::io::Error,
    },
}

impl RunError {
    /// The kind of the failure (and the CLI's exit code).
    pub fn kind(&self) -> Kind {
        match self {
            RunError::Slice(e) => e.kind(),
            RunError::Sandbox(e) => e.kind(),
            RunError::Exec(e) => e.kind(),
            RunError::Table(e) => e.kind(),
            RunError::Manifest(_)
            | RunError::Usage(_)
            | RunError::UpToDate { .. }
            | RunError::Late { .. } => Kind::Input,
            RunError::Expect(crate::expect::ExpectError::Failed(_)) | RunError::Unpublished(_) => {
                Kind::Check
            }
            RunError::Expect(_) => Kind::Input,
            RunError::Io { .. } => Kind::Storage,
            // The guest's time, or the host's (inputs, storage, waiting
            // for the table): a retry may find them faster.
            RunError::OverTime { step, .. } if *step == EXECUTING => Kind::Guest,
            RunError::OverTime { .. } => Kind::Storage,
        }
    }
}

/// The audit of a branch write failed ([`RunError::Unpublished`]).
#[derive(Debug, Error)]
#[error(
    "{failed}\nNothing was published: main is unchanged. The output waits on branch `{branch}` (snapshot {snapshot}) to be inspected (`idem show {table}#{slice}` names it); a later --wap run of the slice that passes replaces it, and a commit of a new output of the slice without --wap drops it"
)]
pub struct Unpublished {
    /// The table.
    pub table: String,
    /// The slice.
    pub slice: String,
    /// The branch and its snapshot.
    pub branch: String,
    pub snapshot: i64,
    /// The verdicts.
    pub failed: crate::expect::ExpectError,
}

/// The step of [`RunError::OverTime`] that is the guest's own time.
pub const EXECUTING: &str = "executing the transform";
