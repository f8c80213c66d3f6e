//! What kind of failure an error is: the one place that maps every error
//! of the library to the exit code (and `--json` error kind) the CLI
//! reports. 1 is not here: a verification mismatch or a failed audit is a
//! result, not an error.

use crate::build::BuildError;
use crate::digest::DigestError;
use crate::execute::ExecError;
use crate::manifest::ManifestError;
use crate::run::RunError;
use crate::sandbox::SandboxError;
use crate::scaffold::ScaffoldError;
use crate::slice::SliceError;
use crate::storage::StorageError;
use crate::table::TableError;

/// The kind of a failure, one per exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The command line or its inputs are wrong (a missing file, malformed
    /// Parquet, bad params, a mode the table was not made with). Exit 2.
    Input,
    /// The sandbox refused the module, or the guest failed (trap, limit,
    /// error, output that is unusable). Exit 3.
    Guest,
    /// A store or a commit failed (unreachable, refused credentials, no
    /// conditional writes, a table another writer changed under idem). Exit 4.
    Storage,
    /// A check did not pass: the output failed an expectation, so nothing
    /// was published. Exit 1, like a verification mismatch.
    Check,
}

impl Kind {
    /// The process exit code.
    pub fn exit_code(self) -> u8 {
        match self {
            Kind::Check => 1,
            Kind::Input => 2,
            Kind::Guest => 3,
            Kind::Storage => 4,
        }
    }

    /// The name used in `--json` errors.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Input => "input",
            Kind::Guest => "guest",
            Kind::Storage => "storage",
            Kind::Check => "check",
        }
    }

    /// The kind of the first error in `chain` (outermost first) that the
    /// library knows; plain messages (the CLI's own checks) are input errors.
    pub fn of_chain<'a>(
        chain: impl Iterator<Item = &'a (dyn std::error::Error + 'static)>,
    ) -> Kind {
        chain.filter_map(Kind::of).next().unwrap_or(Kind::Input)
    }

    /// The kind of one error, when it is one of the library's.
    pub fn of(e: &(dyn std::error::Error + 'static)) -> Option<Kind> {
        if let Some(e) = e.downcast_ref::<RunError>() {
            return Some(e.kind());
        }
        if let Some(e) = e.downcast_ref::<crate::pipeline::PipelineError>() {
            return Some(match e {
                crate::pipeline::PipelineError::Stage { source, .. } => source.kind(),
                _ => Kind::Input,
            });
        }
        if let Some(e) = e.downcast_ref::<SliceError>() {
            return Some(e.kind());
        }
        if let Some(e) = e.downcast_ref::<SandboxError>() {
            return Some(e.kind());
        }
        if let Some(e) = e.downcast_ref::<ExecError>() {
            return Some(e.kind());
        }
        if let Some(e) = e.downcast_ref::<TableError>() {
            return Some(e.kind());
        }
        if let Some(e) = e.downcast_ref::<StorageError>() {
            return Some(e.kind());
        }
        if let Some(e) = e.downcast_ref::<BuildError>() {
            return Some(e.kind());
        }
        if let Some(e) = e.downcast_ref::<crate::expect::ExpectError>() {
            return Some(match e {
                crate::expect::ExpectError::Failed(_) => Kind::Check,
                _ => Kind::Input,
            });
        }
        if let Some(e) = e.downcast_ref::<ScaffoldError>() {
            return Some(match e {
                ScaffoldError::Write { .. } => Kind::Storage,
                ScaffoldError::BadName(_) | ScaffoldError::Exists(_) => Kind::Input,
            });
        }
        if e.downcast_ref::<DigestError>().is_some() {
            return Some(Kind::Guest);
        }
        if e.downcast_ref::<ManifestError>().is_some() {
            return Some(Kind::Input);
        }
        // What is left of plain I/O in the CLI writes local outputs (exec's
        // Parquet file, sample files, a scaffold): inputs and modules are
        // read through the library's own errors above.
        if e.downcast_ref::<std::io::Error>().is_some() {
            return Some(Kind::Storage);
        }
        None
    }
}

impl RunError {
    /// See [`Kind`].
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
            RunError::Expect(crate::expect::ExpectError::Failed(_)) => Kind::Check,
            RunError::Expect(_) => Kind::Input,
            RunError::Io { .. } => Kind::Storage,
            // The guest's time, or the host's (inputs, storage, waiting
            // for the table): a retry may find them faster.
            RunError::OverTime { step, .. } if *step == crate::run::EXECUTING => Kind::Guest,
            RunError::OverTime { .. } => Kind::Storage,
        }
    }
}

impl SliceError {
    /// See [`Kind`].
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
            | SliceError::SchemaMismatch { .. }
            | SliceError::BadName { .. }
            | SliceError::Stores { .. }
            | SliceError::Loop { .. }
            | SliceError::Refused { .. } => Kind::Input,
        }
    }
}

impl SandboxError {
    /// See [`Kind`].
    pub fn kind(&self) -> Kind {
        match self {
            // The module file could not be read: a path problem, or the
            // store's.
            SandboxError::Read { .. } => Kind::Input,
            SandboxError::ModuleStore { source, .. } => source.kind(),
            _ => Kind::Guest,
        }
    }
}

impl ExecError {
    /// See [`Kind`].
    pub fn kind(&self) -> Kind {
        match self {
            ExecError::Slice(e) => e.kind(),
            ExecError::Sandbox(e) => e.kind(),
            ExecError::Native(_) | ExecError::Digest(_) | ExecError::Columns(_) => Kind::Guest,
            ExecError::Sink(_) => Kind::Storage,
        }
    }
}

impl TableError {
    /// See [`Kind`].
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

impl StorageError {
    /// See [`Kind`].
    pub fn kind(&self) -> Kind {
        match self {
            StorageError::BadLocation { .. }
            | StorageError::NotFound(_)
            | StorageError::Outside { .. } => Kind::Input,
            StorageError::Store { .. } | StorageError::Unsafe { .. } | StorageError::Io { .. } => {
                Kind::Storage
            }
        }
    }
}

impl BuildError {
    /// See [`Kind`].
    pub fn kind(&self) -> Kind {
        match self {
            BuildError::Sandbox(e) => e.kind(),
            BuildError::Cargo(_)
            | BuildError::CompileFailed { .. }
            | BuildError::NoWasm { .. }
            | BuildError::Project(_)
            | BuildError::Missing { .. }
            | BuildError::Toolchain { .. }
            | BuildError::Componentize { .. } => Kind::Input,
            BuildError::Write { .. } => Kind::Storage,
        }
    }
}
