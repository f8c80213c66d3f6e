//! Every way a module or a run can fail in the sandbox, each with the cause
//! and what to do about it.

use crate::kind::Kind;
use thiserror::Error;

/// A sandbox failure. Each variant is one kind of cause, so callers and tests
/// can tell a deadline from a memory limit from a bad import.
#[derive(Debug, Error)]
pub enum SandboxError {
    /// The module imports something the profile forbids.
    #[error(
        "module rejected: it imports `{import}` ({reason}). idem runs transforms without clocks, entropy, network or filesystem so that reruns are identical; remove the import (for Rust, build for wasm32-unknown-unknown with idem-guest)"
    )]
    Forbidden {
        /// The import's full name.
        import: String,
        /// Why it is forbidden (clock, entropy, socket, filesystem, http, ...).
        reason: String,
    },
    /// The module does not export the `idem:transform/transform` interface.
    #[error(
        "module is not an idem transform: {0}. Export a Transform with `idem_guest::export!(YourType)` and build with `idem build`"
    )]
    NotATransform(String),
    /// The module is bigger than the limit; nothing was parsed or compiled.
    #[error(
        "module is {} ({bytes} bytes), over the {} limit: raise --max-module-mb if you trust it",
        mib(*bytes),
        mib(*limit)
    )]
    ModuleTooLarge {
        /// The module's size in bytes.
        bytes: usize,
        /// The limit in bytes.
        limit: usize,
    },
    /// Compiling the module took longer than its budget.
    #[error(
        "compiling the module took longer than {ms} ms and was abandoned (a compile bomb, or a large module on a slow machine): raise --compile-deadline-ms if you trust it"
    )]
    CompileDeadline {
        /// The budget in milliseconds.
        ms: u64,
    },
    /// The module file could not be read.
    #[error("reading module {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The module's location could not be read (missing, refused, unreachable).
    #[error("reading module {path}: {source}")]
    ModuleStore {
        /// The location.
        path: String,
        /// Why.
        source: crate::storage::StorageError,
    },
    /// The bytes are not a valid wasm module or component.
    #[error("module does not compile: {0}")]
    Compile(String),
    /// Instantiation failed (e.g. an import has the wrong type).
    #[error("module could not be instantiated: {0}")]
    Instantiate(String),
    /// The run exceeded its wall-clock budget.
    #[error(
        "guest exceeded its wall-clock deadline of {ms} ms and was stopped (an infinite loop, or a slice too big for the budget: raise --deadline-ms)"
    )]
    Deadline {
        /// The budget in milliseconds.
        ms: u64,
    },
    /// The run used up its deterministic CPU budget.
    #[error("guest ran out of fuel ({fuel} units): raise --fuel or make the transform cheaper")]
    FuelExhausted {
        /// The budget.
        fuel: u64,
    },
    /// The guest tried to grow its memories past the limit.
    #[error(
        "guest tried to grow its memories to {requested} bytes in total, over the limit of {limit} bytes, and was stopped (unbounded state? raise --max-memory-mb if the transform really needs it)"
    )]
    MemoryLimit {
        /// The limit in bytes.
        limit: usize,
        /// The total size of all its memories the guest asked for.
        requested: usize,
    },
    /// The guest returned more output than allowed, counted in logical
    /// bytes (every value materialized: a view column whose views all
    /// point at one buffer counts every view's bytes).
    #[error(
        "guest returned {produced} bytes of output (logical size, all values materialized), over the limit of {limit} bytes: raise --max-output-mb or check the transform"
    )]
    OutputLimit {
        /// The limit in bytes.
        limit: usize,
        /// Logical bytes returned so far, including the refused batch.
        produced: usize,
    },
    /// The guest returned more rows than allowed, in one batch or over
    /// the run; refused from the stream's metadata, before any array was
    /// built.
    #[error("guest returned {rows} rows {scope}, over the limit of {limit} rows: {fix}")]
    RowLimit {
        /// "in output batch N" or "over the run".
        scope: String,
        /// The rows counted, including the refused batch.
        rows: u64,
        /// The limit.
        limit: u64,
        /// What to do.
        fix: &'static str,
    },
    /// The guest returned a column whose type idem cannot digest; refused
    /// before any array was decoded.
    #[error("guest output column `{column}` has type {data_type}, which idem cannot digest: {fix}")]
    UnsupportedOutputType {
        /// The column, with the path to the nested field at fault.
        column: String,
        /// The offending type.
        data_type: String,
        /// What to do instead.
        fix: String,
    },
    /// Decoding a guest's output panicked inside the host: a bug in idem or
    /// a library, caught so the host survives.
    #[error(
        "decoding guest output batch {batch} panicked in the host ({detail}); this is a bug in idem, please report it with the module. The run was stopped and nothing was committed"
    )]
    OutputPanic {
        /// Index of the output batch.
        batch: usize,
        /// The panic message.
        detail: String,
    },
    /// The guest trapped (a panic, an `unreachable`, a stack overflow...).
    #[error(
        "guest trapped in `{call}`{}: {trap}{}",
        fmt_at(at),
        fmt_log(guest_log)
    )]
    Trap {
        /// Which export was running.
        call: &'static str,
        /// In `push`: which input batch (`input batch 3, rows 16385-24576`).
        at: Option<String>,
        /// The trap's description.
        trap: String,
        /// Error lines the guest logged before trapping (its panic message).
        guest_log: Vec<String>,
    },
    /// The guest returned an error of its own.
    #[error("transform failed in `{call}`{}: {message}", fmt_at(at))]
    Guest {
        /// Which export returned the error.
        call: &'static str,
        /// In `push`: which input batch.
        at: Option<String>,
        /// The guest's message.
        message: String,
    },
    /// The guest returned bytes that are not an Arrow IPC stream.
    #[error(
        "guest returned {len} bytes that are not an Arrow IPC stream (output batch {batch}): {detail}. Guests must return batches encoded by idem_guest::ipc::encode"
    )]
    BadOutput {
        /// Index of the output batch.
        batch: usize,
        /// The decoder's complaint.
        detail: String,
        /// How many bytes came back.
        len: usize,
    },
    /// Output batches of one run disagree on their schema.
    #[error(
        "guest output batch {batch} has schema {got}, but earlier batches had {expected}: every output batch of a run must have the same schema"
    )]
    SchemaMismatch {
        /// Index of the offending output batch.
        batch: usize,
        /// The first batch's schema.
        expected: String,
        /// This batch's schema.
        got: String,
    },
    /// A call on an instance that already failed.
    #[error("this guest instance already failed; start a new run")]
    Poisoned,
    /// The engine could not be set up.
    #[error("wasm engine: {0}")]
    Engine(String),
    /// A host-side failure around the guest call.
    #[error("host: {0}")]
    Host(String),
}

impl SandboxError {
    /// The kind of the failure (and the CLI's exit code).
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

impl SandboxError {
    /// The error with every text that came from the guest or its module
    /// (its error string, a trap with the module's function names, log
    /// lines, names in a schema or an import) cut to a few KiB: the
    /// boundary's last word on size, applied to whatever leaves an
    /// instance or admission.
    pub(crate) fn bounded(self) -> Self {
        use crate::text::{MESSAGE_SHARE, clip, quote_lines};
        let c = |s: String| clip(s, MESSAGE_SHARE);
        match self {
            SandboxError::Forbidden { import, reason } => SandboxError::Forbidden {
                import: clip(import, 512),
                reason,
            },
            SandboxError::NotATransform(m) => SandboxError::NotATransform(c(m)),
            SandboxError::Compile(m) => SandboxError::Compile(c(m)),
            SandboxError::Instantiate(m) => SandboxError::Instantiate(c(m)),
            SandboxError::UnsupportedOutputType {
                column,
                data_type,
                fix,
            } => SandboxError::UnsupportedOutputType {
                column: clip(column, 512),
                data_type: clip(data_type, 1024),
                fix,
            },
            SandboxError::OutputPanic { batch, detail } => SandboxError::OutputPanic {
                batch,
                detail: c(detail),
            },
            SandboxError::Trap {
                call,
                at,
                trap,
                guest_log,
            } => SandboxError::Trap {
                call,
                at,
                trap: clip(trap, MESSAGE_SHARE / 2),
                guest_log: quote_lines(guest_log),
            },
            SandboxError::Guest { call, at, message } => SandboxError::Guest {
                call,
                at,
                message: c(message),
            },
            SandboxError::BadOutput { batch, detail, len } => SandboxError::BadOutput {
                batch,
                detail: c(detail),
                len,
            },
            SandboxError::SchemaMismatch {
                batch,
                expected,
                got,
            } => SandboxError::SchemaMismatch {
                batch,
                expected: clip(expected, MESSAGE_SHARE / 2),
                got: clip(got, MESSAGE_SHARE / 2),
            },
            SandboxError::Host(m) => SandboxError::Host(c(m)),
            other => other,
        }
    }
}

fn fmt_at(at: &Option<String>) -> String {
    at.as_ref().map(|a| format!(" ({a})")).unwrap_or_default()
}

fn fmt_log(lines: &[String]) -> String {
    if lines.is_empty() {
        String::new()
    } else {
        format!("\n  guest said: {}", lines.join("\n  guest said: "))
    }
}

fn mib(bytes: usize) -> String {
    if bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{:.1} MiB", bytes as f64 / f64::from(1u32 << 20))
    }
}
