//! Orchestration of one idempotent run:
//! resolve the slice -> memo check -> execute in the sandbox -> digest ->
//! manifest -> commit only when the output is new. And `verify`: re-run a
//! manifest from what it names and compare.

use std::path::PathBuf;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::digest::Digest;
use crate::error::Kind;
use crate::execute::{ExecError, Transformer, execute};
use crate::manifest::{
    FORMAT, Manifest, ManifestError, RunResult, RunSpec, SliceRecord, TargetRecord, canonical_json,
};
use crate::output::{Purpose, Stager};
use crate::sandbox::{GuestContext, Sandbox, SandboxError};
use crate::slice::{ResolvedSlice, SliceError};
use crate::table::{CommitOutcome, CommitRequest, KeyChecker, Mode, SliceState, Table, TableError};

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
    /// The run went over its [`Run::time_limit`] (nothing committed).
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

/// The step of [`RunError::OverTime`] that is the guest's own time.
pub const EXECUTING: &str = "executing the transform";

/// Which inputs a run reads.
#[derive(Debug, Clone)]
pub enum SliceSpec {
    /// Hive partition `column=value` of the Parquet dataset at `root`.
    Partition {
        /// Dataset root.
        root: PathBuf,
        /// Partition column.
        column: String,
        /// Partition value.
        value: String,
    },
    /// An explicit list of Parquet files.
    Files {
        /// The files.
        files: Vec<PathBuf>,
        /// Slice id (default: derived from the file names).
        id: Option<String>,
    },
    /// The next range of an append-only prefix: the Parquet objects whose
    /// names sort after the last one the target table consumed from it, at
    /// most `max_objects` (and `max_bytes`). The new position is committed
    /// with the output.
    Next {
        /// The source prefix.
        root: String,
        /// Most objects per run.
        max_objects: usize,
        /// Most bytes per run (at least one object is taken).
        max_bytes: Option<u64>,
    },
    /// A Delta table pinned at a version, optionally one partition of it.
    Delta {
        /// Table location.
        table: String,
        /// Pinned version.
        version: u64,
        /// Partition filter `column = value`.
        partition: Option<(String, String)>,
        /// Only the rows this slice of the table owns (what an upstream
        /// stage committed for it); the slice id becomes this.
        slice: Option<String>,
    },
}

/// Builds the transformer that replaces the sandbox (benchmark baselines).
pub type TransformerFactory = Box<dyn FnOnce() -> Box<dyn Transformer>>;

/// A run, built then executed (`Run::new(..).mode(..).execute()`).
pub struct Run {
    module: PathBuf,
    slice: SliceSpec,
    table: String,
    mode: Option<Mode>,
    params: String,
    logical_date: Option<String>,
    batch_rows: u32,
    force: bool,
    expectations: Vec<crate::expect::Expectation>,
    audit: Option<(PathBuf, String)>,
    native: Option<TransformerFactory>,
    time_limit: Option<std::time::Duration>,
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunOutcome {
    /// This run committed a new table version.
    Committed {
        /// The version.
        version: u64,
        /// Set when the output was already current but another writer had
        /// changed the slice's rows: why it was recommitted.
        drift: Option<String>,
    },
    /// The output equals the slice's committed output; nothing committed.
    Unchanged {
        /// The version that holds it.
        since: Option<u64>,
        /// Another host committed the same output first (this one lost the
        /// race, re-read the log and found it current).
        raced: bool,
    },
    /// A committed run had this run key: nothing executed or committed.
    Memo {
        /// The version that holds its output.
        since: Option<u64>,
    },
}

impl std::fmt::Display for RunOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let v = |s: &Option<u64>| s.map(|v| v.to_string()).unwrap_or_else(|| "?".into());
        match self {
            RunOutcome::Committed {
                version,
                drift: None,
            } => write!(f, "committed version {version}"),
            RunOutcome::Committed {
                version,
                drift: Some(why),
            } => write!(f, "committed version {version} (recommitted: {why})"),
            RunOutcome::Unchanged { since, raced } => write!(
                f,
                "unchanged since version {}{}",
                v(since),
                if *raced {
                    " (another host committed it first)"
                } else {
                    ""
                }
            ),
            RunOutcome::Memo { since } => write!(
                f,
                "unchanged since version {} (memo: already run)",
                v(since)
            ),
        }
    }
}

/// The result of [`Run::execute`].
#[derive(Debug, Clone)]
pub struct RunReport {
    /// The run's manifest.
    pub manifest: Manifest,
    /// Its digest (stored as `_idem/manifests/<hex>.json`).
    pub manifest_digest: Digest,
    /// Where the manifest is.
    pub manifest_url: String,
    /// What happened.
    pub outcome: RunOutcome,
    /// Milliseconds spent resolving, executing and committing.
    pub timings_ms: Timings,
}

/// A run resolved but not executed: inputs pinned, module loaded, run key
/// computed.
struct Planned {
    slice: ResolvedSlice,
    module: crate::sandbox::ModuleId,
    /// The audit module and its params (write-audit-publish).
    audit: Option<(crate::sandbox::ModuleId, serde_json::Value)>,
    /// For a `--next` slice: the position its commit records.
    progress: Option<crate::table::Progress>,
    mode: Mode,
    spec: RunSpec,
    run_key: Digest,
    timings: Timings,
}

/// What [`Run::explain`] found, without executing or writing anything.
#[derive(Debug, Clone)]
pub struct Explanation {
    /// The planned run.
    pub planned: RunSpec,
    /// Its run key.
    pub run_key: Digest,
    /// `Some(version)` when a committed run has this run key and its output
    /// is still current: `idem run` would be a memo hit.
    pub memo: Option<Option<u64>>,
    /// The slice's current committed run (version, manifest), if any.
    pub current: Option<(u64, Manifest)>,
}

/// Wall-clock timings of a run (run log only, never hashed).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Timings {
    /// Resolving and hashing inputs.
    pub resolve_ms: u64,
    /// Loading the module.
    pub load_ms: u64,
    /// Executing the transform.
    pub exec_ms: u64,
    /// Committing.
    pub commit_ms: u64,
}

/// One line of `_idem/log/`: what a run did and when.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LogEntry {
    /// Unix milliseconds at the end of the run.
    pub at_ms: u64,
    /// Slice id.
    pub slice: String,
    /// Run key.
    pub run_key: Digest,
    /// Manifest digest.
    pub manifest: Digest,
    /// Output digest.
    pub output_digest: Digest,
    /// `committed`, `unchanged` or `memo`.
    pub outcome: String,
    /// The version committed, or that holds the output.
    pub version: Option<u64>,
    /// Output rows.
    pub rows: u64,
    /// Timings.
    pub timings: Timings,
}

/// `_idem/runs/<run key>.json`: the memo index, run key -> manifest.
#[derive(Serialize, Deserialize)]
pub(crate) struct RunIndex {
    pub(crate) manifest: Digest,
}

/// Where a module is kept beside the table (under `_idem/`).
fn module_path(module: &Digest) -> String {
    format!("modules/{}.wasm", module.hex())
}

/// Where a manifest is kept beside the table (under `_idem/`).
pub(crate) fn manifest_path(manifest: &Digest) -> String {
    format!("manifests/{}.json", manifest.hex())
}

/// The logical date a slice implies: a date partition's value.
fn implied_date(slice: &SliceSpec) -> Option<String> {
    match slice {
        SliceSpec::Partition { value, .. } => crate::schedule::implied_by_partition(value),
        // Files named as a partition (`--slice-id date=2026-10-01`, serve's
        // `files` with `partition`): the same run as the partition spelled
        // with `--input`.
        SliceSpec::Files { id: Some(id), .. } => id
            .split_once('=')
            .and_then(|(_, v)| crate::schedule::implied_by_partition(v)),
        _ => None,
    }
}

/// The memo index entry of a run key (under `_idem/`).
pub(crate) fn run_index_path(run_key: &Digest) -> String {
    format!("runs/{}.json", run_key.hex())
}

/// The params as the guest sees them: exactly the bytes the run key hashed.
fn params_text(params: &serde_json::Value) -> String {
    String::from_utf8(canonical_json(params)).unwrap_or_else(|_| "{}".into())
}

fn ms(t: Instant) -> u64 {
    t.elapsed().as_millis() as u64
}

pub(crate) fn runtime() -> Result<tokio::runtime::Runtime, RunError> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| RunError::Io {
            what: "starting the async runtime".into(),
            source: e,
        })
}

/// Parse `K=V`.
pub fn parse_partition(s: &str) -> Result<(String, String), RunError> {
    let (k, v) = s
        .split_once('=')
        .filter(|(k, v)| !k.is_empty() && !v.is_empty())
        .ok_or_else(|| {
            RunError::Usage(format!(
                "--partition `{s}` must look like column=value, e.g. date=2026-10-01"
            ))
        })?;
    if !k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(RunError::Usage(format!(
            "partition column `{k}` must be letters, digits and _"
        )));
    }
    // The value becomes a directory name below the dataset root.
    crate::slice::validate_segment("partition value", v)?;
    Ok((k.to_string(), v.to_string()))
}

impl Run {
    /// A run of `module` over `slice` into `table`.
    pub fn new(module: impl Into<PathBuf>, slice: SliceSpec, table: impl Into<String>) -> Self {
        Run {
            module: module.into(),
            logical_date: implied_date(&slice),
            slice,
            table: table.into(),
            mode: None,
            params: "{}".into(),
            batch_rows: 8192,
            force: false,
            expectations: Vec::new(),
            audit: None,
            native: None,
            time_limit: None,
        }
    }

    /// Run this transformer instead of instantiating the module (the run key
    /// still names the module). For benchmarks: the same pipeline with the
    /// native build of the transform as the baseline.
    pub fn with_transformer(mut self, make: TransformerFactory) -> Self {
        self.native = Some(make);
        self
    }

    /// Commit mode (default: overwrite-partition for partition slices).
    pub fn mode(mut self, mode: Mode) -> Self {
        self.mode = Some(mode);
        self
    }

    /// Transform parameters (JSON).
    pub fn params(mut self, params: impl Into<String>) -> Self {
        self.params = params.into();
        self
    }

    /// The scheduler's logical date (checked when the run starts). `None`
    /// keeps the one a date partition implies
    /// ([`crate::schedule::implied_by_partition`]).
    pub fn logical_date(mut self, d: Option<String>) -> Self {
        self.logical_date = d.or_else(|| implied_date(&self.slice));
        self
    }

    /// Rows per input batch.
    pub fn batch_rows(mut self, n: u32) -> Self {
        self.batch_rows = n;
        self
    }

    /// Execute even when a committed run has the same run key (still
    /// commits only a new output digest).
    pub fn force(mut self, force: bool) -> Self {
        self.force = force;
        self
    }

    /// A wall-clock limit on the whole run (hashing, executing, staging),
    /// checked between its steps up to the commit, which is then never
    /// started: a run over it fails with nothing committed. The guest's
    /// own deadline ([`crate::sandbox::Limits::deadline_ms`]) bounds the
    /// execution alone, precisely.
    pub fn time_limit(mut self, limit: Option<std::time::Duration>) -> Self {
        self.time_limit = limit;
        self
    }

    /// An audit module (a transform that reads the staged output and
    /// returns rows `pass: bool, reason: text`) and its params (JSON): the
    /// output is published only when it passes.
    pub fn audit_module(mut self, module: Option<PathBuf>, params: impl Into<String>) -> Self {
        self.audit = module.map(|m| (m, params.into()));
        self
    }

    /// Expectations the output must meet before it is published.
    pub fn expect(mut self, expectations: Vec<crate::expect::Expectation>) -> Self {
        self.expectations = expectations;
        self
    }

    fn resolve_mode(&self) -> Result<Mode, RunError> {
        let partition = match &self.slice {
            SliceSpec::Partition { column, value, .. } => Some((column.clone(), value.clone())),
            SliceSpec::Delta { partition, .. } => partition.clone(),
            SliceSpec::Files { .. } => None,
            // A range of an append-only source appends (slice-owned rows).
            SliceSpec::Next { .. } if self.mode.is_none() => return Ok(Mode::Append),
            SliceSpec::Next { .. } => None,
        };
        match (&self.mode, partition) {
            (Some(Mode::OverwritePartition { column, value }), _) if !column.is_empty() => {
                Ok(Mode::OverwritePartition { column: column.clone(), value: value.clone() })
            }
            (Some(Mode::OverwritePartition { .. }) | None, Some((column, value))) => {
                Ok(Mode::OverwritePartition { column, value })
            }
            (Some(Mode::OverwritePartition { .. }) | None, None) => Err(RunError::Usage(
                "overwrite-partition needs a partition: give --partition column=value, or choose --mode append or --mode merge --key COL".into(),
            )),
            (Some(Mode::Merge { keys }), _) if keys.is_empty() => {
                Err(RunError::Usage("--mode merge needs --key COL[,COL]".into()))
            }
            (Some(m), _) => Ok(m.clone()),
        }
    }

    /// The params and the mode, checked before anything is read or written.
    fn check_args(&self) -> Result<(serde_json::Value, Mode), RunError> {
        if self.batch_rows == 0 {
            return Err(RunError::Usage("--batch-rows must be at least 1".into()));
        }
        let params = crate::schedule::parse_params(&self.params).map_err(RunError::Usage)?;
        if let Some(d) = &self.logical_date {
            crate::schedule::check_logical_date(d).map_err(RunError::Usage)?;
        }
        crate::manifest::check_params_text(&self.params, &params)?;
        Ok((params, self.resolve_mode()?))
    }

    /// What can be checked once for many runs of the same flags (a
    /// backfill): the params and mode, and that the module (and audit
    /// module) load, which also fills the compiled-code cache.
    pub fn preflight(&self, sandbox: &Sandbox) -> Result<(), RunError> {
        self.check_args()?;
        sandbox.load(&sandbox.read_module(&self.module)?)?;
        if let Some((path, _)) = &self.audit {
            sandbox.load(&sandbox.read_module(path)?)?;
        }
        Ok(())
    }

    /// Steps 1 and 2: pin and hash the inputs, load the module, and compute
    /// the run key. Reads only; `table` is the target's URL, `opened` the
    /// table when it exists (a `--next` slice starts at its position).
    fn plan(
        &self,
        rt: &tokio::runtime::Runtime,
        sandbox: &Sandbox,
        (table, opened): (&url::Url, Option<&Table>),
        params: serde_json::Value,
        mode: Mode,
    ) -> Result<Planned, RunError> {
        // 1. Resolve and pin the inputs.
        let t = Instant::now();
        let (slice, kind, progress) = match &self.slice {
            SliceSpec::Next {
                root,
                max_objects,
                max_bytes,
            } => {
                let (slice, progress) = resolve_next(rt, opened, root, *max_objects, *max_bytes)?;
                (slice, "next", Some(progress))
            }
            spec => {
                let (slice, kind) = resolve(rt, spec)?;
                (slice, kind, None)
            }
        };
        // A table inside its own input (or the reverse) would read its own
        // output as input on the next run.
        if kind == "partition" {
            crate::slice::check_not_inside(table, &slice.root)?;
        } else if let Some(i) = slice
            .inputs
            .iter()
            .find(|i| crate::storage::contains(&crate::storage::as_dir(table), &slice.url_of(i)))
        {
            return Err(RunError::Usage(format!(
                "input {} lies inside the target table {table}: the run would read its own output",
                i.path,
            )));
        }
        let mut timings = Timings {
            resolve_ms: ms(t),
            ..Timings::default()
        };

        // 2. Load the module (compiled-code cache).
        let t = Instant::now();
        // Size-checked before it is read: a module is untrusted input.
        let bytes = sandbox.read_module(&self.module)?;
        // Identified only (digest, imports): a memo hit never loads the
        // compiled code; step 4 does, when the run executes.
        let module = sandbox.identify(&bytes)?;
        let audit = match &self.audit {
            None => None,
            Some((path, text)) => {
                let params: serde_json::Value = serde_json::from_str(text).map_err(|e| {
                    RunError::Usage(format!("--audit-params is not valid JSON ({e}): {text}"))
                })?;
                // The text as given: a too-long integer is only visible there.
                crate::manifest::check_params_text(text, &params)?;
                let bytes = sandbox.read_module(path)?;
                Some((sandbox.identify(&bytes)?, params))
            }
        };
        timings.load_ms = ms(t);

        let root = slice.root.to_string();
        let (partition, keys) = match &mode {
            Mode::OverwritePartition { column, value } => {
                (Some((column.clone(), value.clone())), vec![])
            }
            Mode::Merge { keys } => (None, keys.clone()),
            Mode::Append => (None, vec![]),
        };
        let spec = RunSpec {
            format: FORMAT,
            module: module.digest.clone(),
            engine: sandbox.fingerprint().to_string(),
            slice: SliceRecord {
                id: slice.id.clone(),
                kind: kind.into(),
                root,
                inputs: slice.inputs.clone(),
                delta_version: match &self.slice {
                    SliceSpec::Delta { version, .. } => Some(*version),
                    _ => None,
                },
                delta_slice: match &self.slice {
                    SliceSpec::Delta { slice, .. } => slice.clone(),
                    _ => None,
                },
            },
            params,
            logical_date: self.logical_date.clone(),
            batch_rows: self.batch_rows,
            target: TargetRecord {
                table: crate::table::target_name(&self.table, table)?,
                mode: mode.name().into(),
                partition,
                keys,
            },
            // Sorted and deduplicated: the order of --expect flags does
            // not change the run key.
            expectations: {
                let mut e: Vec<String> = self.expectations.iter().map(|e| e.to_string()).collect();
                e.sort();
                e.dedup();
                e
            },
            audit: audit
                .as_ref()
                .map(|(m, params)| crate::manifest::AuditRecord {
                    module: m.digest.clone(),
                    params: params.clone(),
                }),
        };
        let run_key = crate::manifest::run_key(&spec);
        Ok(Planned {
            slice,
            module,
            audit,
            progress,
            mode,
            spec,
            run_key,
            timings,
        })
    }

    /// Plan the run without executing or writing anything, and say what it
    /// would do: a memo hit (a committed run has its run key and is still
    /// current), or an execution, with the slice's current committed run to
    /// compare it with ([`crate::explain::diff`]).
    pub fn explain(self, sandbox: &Sandbox) -> Result<Explanation, RunError> {
        let (params, mode) = self.check_args()?;
        let rt = runtime()?;
        let url = crate::table::table_url(&self.table)?;
        let table = match rt.block_on(Table::open_existing(&self.table)) {
            Ok(t) => Some(t),
            Err(TableError::NoTable { .. }) => None,
            Err(e) => return Err(e.into()),
        };
        let p = self.plan(&rt, sandbox, (&url, table.as_ref()), params, mode)?;
        let mut memo_since = None;
        let mut current = None;
        if let Some(table) = &table {
            if let Some(m) = rt.block_on(memo(table, &p.run_key, &p.spec.slice.id))?
                && let SliceState::Current { since } = rt.block_on(table.slice_state(
                    &p.spec.slice.id,
                    &m.result.output_digest,
                    &p.mode,
                ))?
            {
                memo_since = Some(since);
            }
            current = rt.block_on(crate::catalog::current_run(table, &p.spec.slice.id))?;
        }
        Ok(Explanation {
            run_key: p.run_key,
            planned: p.spec,
            memo: memo_since,
            current,
        })
    }

    /// Run it: see the module docs for the steps.
    pub fn execute(mut self, sandbox: &Sandbox) -> Result<RunReport, RunError> {
        let started = Instant::now();
        let limit = self.time_limit;
        let in_time = |step: &'static str| match limit {
            Some(l) if started.elapsed() > l => Err(RunError::OverTime {
                limit_ms: l.as_millis() as u64,
                step,
            }),
            _ => Ok(()),
        };
        let (params, mode) = self.check_args()?;
        let rt = runtime()?;
        let mut table = rt.block_on(Table::open(&self.table))?;
        // A run writes: a store that cannot make commits safe (or refuses
        // our writes) fails it before anything runs or is written.
        rt.block_on(table.ensure_safe_store())?;
        let url = table.url().clone();
        let Planned {
            slice,
            module,
            audit,
            progress: position,
            mode,
            spec,
            run_key,
            mut timings,
        } = self.plan(&rt, sandbox, (&url, Some(&table)), params, mode)?;

        // 3. Memo: this exact run already committed, still current, and the
        //    table still holds its rows.
        if !self.force
            && let Some(m) = rt.block_on(memo(&table, &run_key, &slice.id))?
            && let SliceState::Current { since } =
                rt.block_on(table.slice_state(&slice.id, &m.result.output_digest, &mode))?
        {
            let report = report(&table, m, RunOutcome::Memo { since }, timings);
            rt.block_on(log(&table, &report))?;
            return Ok(report);
        }

        // 4. Execute in the sandbox, digesting the output.
        crate::fault::point("execute");
        in_time("reading and hashing the inputs")?;
        let t = Instant::now();
        let reader = slice
            .reader(self.batch_rows as usize)?
            .with_input_budget(sandbox.config().limits.input_budget());
        let ctx = GuestContext {
            slice_id: slice.id.clone(),
            logical_date: self.logical_date.clone(),
            params: params_text(&spec.params),
            input_schema: reader.schema(),
            batch_rows: self.batch_rows,
        };
        let mut instance: Box<dyn Transformer> = match self.native.take() {
            Some(make) => make(),
            None => {
                let t = Instant::now();
                let compiled = sandbox.load_identified(&module)?;
                timings.load_ms += ms(t);
                Box::new(sandbox.instantiate(&compiled)?)
            }
        };
        // Output goes to the table's data files, written by a task while the
        // reader thread decodes ahead and the guest runs: three stages,
        // memory O(batch + two inputs' private copies + one 32 MiB data
        // file + delta-rs' upload buffers),
        // per run (a backfill's jobs each have theirs). A merge reads its output whole
        // and an audit module reads it before anything is written: those
        // stage it on local disk first (a writer thread, the same overlap).
        // The staging folder, when there is one, lives until the commit.
        let mut _staging = None;
        let landing =
            if audit.is_none() && !matches!(mode, Mode::Merge { .. }) && table.writes_ahead() {
                Landing::Table(table.data_writer(&rt, &mode)?)
            } else {
                let dir = tempfile::Builder::new()
                    .prefix("idem-stage-")
                    .tempdir()
                    .map_err(|e| RunError::Io {
                        what: "creating a staging directory".into(),
                        source: e,
                    })?;
                let stager = Stager::spawn(dir.path().join("output.parquet"), 4, Purpose::Scratch)
                    .map_err(|e| RunError::Io {
                        what: "starting the staging writer".into(),
                        source: e,
                    })?;
                _staging = Some(dir);
                Landing::Staged(stager)
            };
        let mut keys = match &mode {
            Mode::Merge { keys } => Some(KeyChecker::new(keys)),
            _ => None,
        };
        let progress = crate::progress::rows("running", None);
        let batches = |declared: &crate::execute::Declared| {
            Ok(reader.narrow(declared)?.prefetch(2).inspect(|b| {
                if let Ok(b) = b {
                    progress.inc(b.num_rows() as u64);
                }
            }))
        };
        // A key check's own error (a missing key column, a null key) is
        // kept to be reported as itself, not as a failed write.
        let mut sink_error: Option<RunError> = None;
        let mut checker = crate::expect::Checker::new(&self.expectations);
        let executed = execute(instance.as_mut(), &ctx, batches, |b| {
            if let Some(k) = keys.as_mut()
                && let Err(e) = k.update(b)
            {
                let message = e.to_string();
                sink_error = Some(e.into());
                return Err(ExecError::Sink(message));
            }
            if let Err(e) = checker.update(b) {
                let message = e.to_string();
                sink_error = Some(e.into());
                return Err(ExecError::Sink(message));
            }
            landing.send(b).map_err(ExecError::Sink)
        });
        // The output is complete only when the transform succeeded: else
        // the writer stops without completing its file and deletes what it
        // wrote. A writer that stopped by itself is asked why (the guest
        // only saw it stop).
        let landed = match (&executed, &sink_error) {
            (Ok(_), None) | (Err(ExecError::Sink(_)), None) => Some(landing.finish()),
            _ => {
                landing.abort();
                None
            }
        };
        progress.finish();
        let name = self
            .module
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        crate::execute::show_guest_log(&format!("{name} {}", slice.id), &instance.log_lines());
        if let Some(e) = sink_error {
            return Err(e);
        }
        let (outcome, landed) = match (executed, landed) {
            (Err(ExecError::Sink(_)), Some(Err(e))) => return Err(e),
            (Err(e), _) => return Err(e.into()),
            (Ok(outcome), Some(landed)) => (outcome, landed),
            (Ok(_), None) => {
                return Err(RunError::Io {
                    what: "completing the output".into(),
                    source: std::io::Error::other("the output writer was stopped"),
                });
            }
        };
        // Audit before publish: nothing below (manifest, data files,
        // commit) happens for an output that fails an expectation.
        let mut audits = checker.finish(outcome.output_schema.as_deref())?;
        let landed = landed?;
        if let Some(k) = keys {
            k.finish()?;
        }
        if let Some((audit_module, audit_params)) = &audit {
            let verdict = audit_staged(
                sandbox,
                audit_module,
                audit_params,
                landed.staged(),
                &slice.id,
                &self.logical_date,
                self.batch_rows,
            )?;
            let passed = verdict.passed;
            audits.push(verdict);
            if !passed {
                return Err(crate::expect::ExpectError::Failed(audits).into());
            }
        }
        timings.exec_ms = ms(t);
        in_time(EXECUTING)?;

        // 5. Manifest and module stored before the commit names them.
        let manifest = Manifest::new(
            spec,
            RunResult {
                rows_in: outcome.rows_in,
                rows_out: outcome.rows_out,
                output_digest: outcome.output_digest.clone(),
                fuel: outcome.fuel,
                columns: outcome.columns.clone(),
                dictionaries: outcome.dictionaries.clone(),
                audits,
            },
        );
        let manifest_digest = manifest.digest();
        let t = Instant::now();
        let progress = crate::progress::step("committing");
        rt.block_on(async {
            // The modules the manifest names, kept beside the table (the
            // audit module too, so its verdict can be re-run).
            let audit_module = audit.as_ref().map(|(m, _)| m);
            for m in std::iter::once(&module).chain(audit_module) {
                let mod_path = module_path(&m.digest);
                if table.get_sidecar(&mod_path).await?.is_none() {
                    table.put_sidecar(&mod_path, m.bytes.to_vec()).await?;
                }
            }
            table
                .put_sidecar(&manifest_path(&manifest_digest), manifest.to_bytes())
                .await
        })?;
        crate::fault::point("before-commit");

        // 6. Commit only a new output digest. Runs of one process commit
        // to a table one at a time (a backfill's slices): a MERGE reads the
        // whole table, so a neighbour's commit landing during it would make
        // it retry; other processes and hosts still race safely.
        let lock = crate::table::commit_lock(table.url());
        let one_at_a_time = lock.lock().unwrap_or_else(|e| e.into_inner());
        in_time("waiting to commit")?;
        let commit = rt.block_on(table.commit(CommitRequest {
            slice: &slice.id,
            mode: &mode,
            output_digest: &outcome.output_digest,
            run_key: &manifest.run_key,
            manifest_digest: &manifest_digest,
            output: landed.into_output(),
            schema: outcome.output_schema.clone(),
            progress: position,
        }))?;
        drop(one_at_a_time);
        timings.commit_ms = ms(t);
        progress.finish();
        let outcome = match commit {
            CommitOutcome::Committed { version, drift } => RunOutcome::Committed { version, drift },
            CommitOutcome::Unchanged { since, raced } => RunOutcome::Unchanged { since, raced },
        };
        // Committed, but the memo index and run log are not written yet.
        crate::fault::point("after-log-write");
        let report = report(&table, manifest, outcome, timings);
        rt.block_on(async {
            let index = serde_json::to_vec(&RunIndex {
                manifest: report.manifest_digest.clone(),
            })
            .unwrap_or_default();
            table
                .put_sidecar(&run_index_path(&report.manifest.run_key), index)
                .await?;
            log(&table, &report).await
        })?;
        Ok(report)
    }
}

/// Where a run's output batches go while it executes.
enum Landing {
    /// Straight into data files of the table.
    Table(crate::table::DataWriter),
    /// A local Parquet file, committed from there.
    Staged(Stager),
}

/// The output once complete.
enum Landed {
    Table(crate::table::Written),
    Staged(Option<PathBuf>),
}

impl Landing {
    fn send(&self, b: &arrow::record_batch::RecordBatch) -> Result<(), String> {
        match self {
            Landing::Table(w) => w
                .send(b)
                .map_err(|_| "the data file writer stopped".to_string()),
            Landing::Staged(s) => s.send(b).map_err(|e| e.to_string()),
        }
    }

    /// The run failed: stop without completing the output.
    fn abort(self) {
        match self {
            // Its drop stops the task, which deletes what it wrote.
            Landing::Table(w) => drop(w),
            // The staging folder goes with the run.
            Landing::Staged(s) => drop(s.finish()),
        }
    }

    fn finish(self) -> Result<Landed, RunError> {
        match self {
            Landing::Table(w) => Ok(Landed::Table(w.finish()?)),
            Landing::Staged(s) => s.finish().map(Landed::Staged).map_err(|e| RunError::Io {
                what: "staging the output".into(),
                source: e,
            }),
        }
    }
}

impl Landed {
    /// The staged file (`None`: no rows, or not staged).
    fn staged(&self) -> Option<&std::path::Path> {
        match self {
            Landed::Staged(p) => p.as_deref(),
            Landed::Table(_) => None,
        }
    }

    fn into_output(self) -> crate::table::Output {
        match self {
            Landed::Table(w) => crate::table::Output::Written(w),
            Landed::Staged(p) => crate::table::Output::Staged(p.into_iter().collect()),
        }
    }
}

/// Write-audit-publish with a module: the staged output (`None`: no rows)
/// through the audit module; its output rows are the verdict. It passes
/// when it returns at least one row and every `pass` is true.
fn audit_staged(
    sandbox: &Sandbox,
    module: &crate::sandbox::ModuleId,
    params: &serde_json::Value,
    staged: Option<&std::path::Path>,
    slice_id: &str,
    logical_date: &Option<String>,
    batch_rows: u32,
) -> Result<crate::expect::Verdict, RunError> {
    use arrow::array::{Array, AsArray};
    let name = format!("audit module {}", module.digest);
    let files: Vec<PathBuf> = staged.map(|p| p.to_path_buf()).into_iter().collect();
    let mut verdict_rows: Vec<(bool, String)> = Vec::new();
    let mut instance = sandbox.instantiate(&sandbox.load_identified(module)?)?;
    let mut bad_shape: Option<String> = None;
    let mut collect = |b: &arrow::array::RecordBatch| {
        let pass = b.column_by_name("pass").and_then(|c| c.as_boolean_opt());
        let reason = b
            .column_by_name("reason")
            .and_then(|c| c.as_string_opt::<i32>());
        let Some(pass) = pass else {
            bad_shape = Some(format!(
                "the audit module returned columns ({}) without a boolean `pass`",
                b.schema()
                    .fields()
                    .iter()
                    .map(|f| format!("{}: {}", f.name(), f.data_type()))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
            return Err(ExecError::Sink("bad audit output".into()));
        };
        for i in 0..b.num_rows() {
            let why = reason
                .filter(|r| r.is_valid(i))
                .map(|r| r.value(i).to_string())
                .unwrap_or_default();
            verdict_rows.push((pass.is_valid(i) && pass.value(i), why));
        }
        Ok(())
    };
    let ctx_for = |schema| GuestContext {
        slice_id: slice_id.to_string(),
        logical_date: logical_date.clone(),
        params: params_text(params),
        input_schema: schema,
        batch_rows,
    };
    let executed = if files.is_empty() {
        let empty = std::sync::Arc::new(arrow::datatypes::Schema::empty());
        execute(
            &mut instance,
            &ctx_for(empty),
            crate::execute::batches(std::iter::empty()),
            &mut collect,
        )
    } else {
        let staged = ResolvedSlice::from_files(slice_id, &files)?;
        let reader = staged.reader(batch_rows as usize)?;
        execute(
            &mut instance,
            &ctx_for(reader.schema()),
            |c| reader.narrow(c),
            &mut collect,
        )
    };
    crate::execute::show_guest_log(&name, &Transformer::log_lines(&instance));
    if let Some(why) = bad_shape {
        return Err(RunError::Usage(format!("{name}: {why}")));
    }
    executed?;
    let failed: Vec<&String> = verdict_rows
        .iter()
        .filter(|(p, _)| !p)
        .map(|(_, r)| r)
        .collect();
    let passed = !verdict_rows.is_empty() && failed.is_empty();
    let observed = match (verdict_rows.len(), failed.first()) {
        (0, _) => "the audit module returned no verdict row".to_string(),
        (_, Some(why)) => format!("failed: {why}"),
        (_, None) => verdict_rows
            .iter()
            .map(|(_, r)| r.as_str())
            .filter(|r| !r.is_empty())
            .collect::<Vec<_>>()
            .join("; "),
    };
    Ok(crate::expect::Verdict {
        expectation: name,
        passed,
        observed,
        examples: failed
            .iter()
            .skip(1)
            .take(3)
            .map(|r| r.to_string())
            .collect(),
    })
}

fn report(table: &Table, manifest: Manifest, outcome: RunOutcome, timings: Timings) -> RunReport {
    let manifest_digest = manifest.digest();
    let manifest_url = format!("{}_idem/{}", table.url(), manifest_path(&manifest_digest));
    RunReport {
        manifest,
        manifest_digest,
        manifest_url,
        outcome,
        timings_ms: timings,
    }
}

async fn memo(table: &Table, run_key: &Digest, slice: &str) -> Result<Option<Manifest>, RunError> {
    // An index that cannot be read (too large, say: anyone who can write
    // `_idem/` can plant one) is a miss, never a failed run: the run
    // executes and writes it again.
    let index = match table.get_sidecar(&run_index_path(run_key)).await {
        Ok(Some(index)) => index,
        Ok(None) | Err(TableError::Sidecar { .. }) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let Ok(index) = serde_json::from_slice::<RunIndex>(&index) else {
        return Ok(None);
    };
    // The index and the manifest are sidecars anyone who can write `_idem/`
    // can forge (a manifest with this run's spec and an old result would
    // skip new input): a hit only when the slice's current commit names
    // this very manifest (its output is then checked by `slice_state`,
    // against the table's app transactions). Asked first: a forged index
    // then costs no read of what it points at.
    if table.current_manifest(slice).await? != Some(index.manifest.clone()) {
        return Ok(None);
    }
    // A manifest that cannot be read or parsed is a miss too.
    let Ok(Some(bytes)) = table.get_sidecar(&manifest_path(&index.manifest)).await else {
        return Ok(None);
    };
    if Digest::of_bytes(&bytes) != index.manifest {
        return Ok(None);
    }
    let Ok(m) = Manifest::from_bytes(&bytes) else {
        return Ok(None);
    };
    Ok((&m.run_key == run_key).then_some(m))
}

async fn log(table: &Table, r: &RunReport) -> Result<(), RunError> {
    let at_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    let (outcome, version) = match &r.outcome {
        RunOutcome::Committed { version, .. } => ("committed", Some(*version)),
        RunOutcome::Unchanged { since, .. } => ("unchanged", *since),
        RunOutcome::Memo { since } => ("memo", *since),
    };
    let entry = LogEntry {
        at_ms,
        slice: r.manifest.spec.slice.id.clone(),
        run_key: r.manifest.run_key.clone(),
        manifest: r.manifest_digest.clone(),
        output_digest: r.manifest.result.output_digest.clone(),
        outcome: outcome.into(),
        version,
        rows: r.manifest.result.rows_out,
        timings: r.timings_ms.clone(),
    };
    let name = format!(
        "log/{at_ms:015}-{}-{}.json",
        &r.manifest.run_key.hex()[..12],
        std::process::id()
    );
    table
        .put_sidecar(&name, serde_json::to_vec(&entry).unwrap_or_default())
        .await?;
    Ok(())
}

/// XOR of the sha256 of each name: a set's fingerprint that can be
/// extended one range at a time.
fn xor_names<'a>(names: impl Iterator<Item = &'a String>) -> [u8; 32] {
    use sha2::Digest as _;
    let mut out = [0u8; 32];
    for n in names {
        for (o, b) in out.iter_mut().zip(sha2::Sha256::digest(n.as_bytes())) {
            *o ^= b;
        }
    }
    out
}

/// The next range of an append-only prefix after the table's position.
fn resolve_next(
    rt: &tokio::runtime::Runtime,
    table: Option<&Table>,
    root: &str,
    max_objects: usize,
    max_bytes: Option<u64>,
) -> Result<(ResolvedSlice, crate::table::Progress), RunError> {
    if max_objects == 0 {
        return Err(RunError::Usage("--max-objects must be at least 1".into()));
    }
    let store = crate::storage::Store::at(root).map_err(SliceError::from)?;
    let source = store.url().to_string();
    let position = match table {
        Some(t) => {
            let p = rt.block_on(t.progress_of(&source))?;
            // The app transaction survives log cleanup; the commitInfo that
            // names the position may not: never start the source over.
            let recorded = rt.block_on(t.progress_count(&source))?;
            if p.is_none() && recorded.is_some_and(|n| n > 0) {
                return Err(RunError::Usage(format!(
                    "the table records {} objects consumed from `{source}`, but the commit naming the position is gone from its log (log cleanup?): idem will not start the source over. Consume it into a new table, or restore the log",
                    recorded.unwrap_or_default()
                )));
            }
            p
        }
        None => None,
    };
    let listing = store.list("").map_err(SliceError::from)?;
    // Parquet objects only, by name (the order the source is appended in).
    let mut names: Vec<(String, u64)> = listing
        .files
        .into_iter()
        .filter(|f| f.rel.ends_with(".parquet"))
        .map(|f| (f.rel, f.size))
        .collect();
    names.sort();
    let (after, count) = match &position {
        Some(p) => (Some(p.through.clone()), p.count),
        None => (None, 0),
    };
    let recorded = position
        .as_ref()
        .and_then(|p| hex::decode(&p.names).ok())
        .and_then(|b| <[u8; 32]>::try_from(b).ok())
        .unwrap_or_default();
    if let (Some(through), Some(t)) = (&after, table) {
        let listed = xor_names(names.iter().filter(|(n, _)| n <= through).map(|(n, _)| n));
        if listed != recorded {
            // Not exactly the objects that were consumed at or before the
            // position (more arrived late, or some were deleted and others
            // may have arrived): name the ones no committed run read.
            let mut consumed = std::collections::HashSet::new();
            for bytes in rt.block_on(t.consumed_manifests(&source))? {
                if let Ok(m) = Manifest::from_bytes(&bytes) {
                    consumed.extend(m.spec.slice.inputs.into_iter().map(|i| i.path));
                }
            }
            let late: Vec<String> = names
                .iter()
                .filter(|(n, _)| n <= through && !consumed.contains(n))
                .map(|(n, _)| n.clone())
                .collect();
            if !late.is_empty() {
                return Err(RunError::Late {
                    prefix: source,
                    through: through.clone(),
                    late,
                });
            }
        }
    }
    let mut take = Vec::new();
    let mut bytes = 0u64;
    for (n, size) in names
        .into_iter()
        .filter(|(n, _)| after.as_ref().is_none_or(|a| n > a))
    {
        let full = take.len() >= max_objects
            || max_bytes.is_some_and(|m| !take.is_empty() && bytes + size > m);
        if full {
            break;
        }
        bytes += size;
        take.push(n);
    }
    let Some(through) = take.last().cloned() else {
        return Err(RunError::UpToDate {
            prefix: source,
            through: after,
        });
    };
    let first = count + 1;
    let last = count + take.len() as u64;
    let mut consumed = recorded;
    for (c, n) in consumed.iter_mut().zip(xor_names(take.iter())) {
        *c ^= n;
    }
    // The source is in the id: two sources into one table never share a
    // slice (and so never replace each other's rows).
    let tag = crate::digest::Digest::of_bytes(source.as_bytes());
    let id = format!("next-{}-{first:06}-{last:06}", &tag.hex()[..8]);
    let slice = ResolvedSlice::from_names(&id, store.url(), take)?;
    Ok((
        slice,
        crate::table::Progress {
            source,
            through,
            count: last,
            names: hex::encode(consumed),
            after: after.map(|a| (a, count)),
        },
    ))
}

/// Resolve a slice spec to pinned inputs; returns the slice and its kind.
fn resolve(
    rt: &tokio::runtime::Runtime,
    spec: &SliceSpec,
) -> Result<(ResolvedSlice, &'static str), RunError> {
    Ok(match spec {
        SliceSpec::Partition {
            root,
            column,
            value,
        } => (
            ResolvedSlice::from_partition(root, column, value)?,
            "partition",
        ),
        SliceSpec::Files { files, id } => {
            // Canonical paths: how the paths were typed must not matter.
            let id = match id {
                Some(id) => id.clone(),
                None => crate::slice::files_id(files)?,
            };
            (ResolvedSlice::from_files(&id, files)?, "files")
        }
        SliceSpec::Delta {
            table,
            version,
            partition,
            slice,
        } => {
            // Read through the pinned snapshot: its files only, with the
            // partition values its log holds (not in the files).
            let (inputs, rows_of, root, schema) = rt.block_on(async {
                let mut t = Table::open_existing(table).await?;
                t.load_version(*version).await?;
                // The slice must have committed at that version (maybe an
                // empty output): a mistyped slice reads nothing, silently,
                // from a merge table otherwise.
                if let Some(owner) = slice
                    && t.slice_seq(owner).await? == 0
                {
                    return Err(RunError::Slice(SliceError::Empty {
                        slice: owner.clone(),
                        root: t.url().to_string(),
                        hint: format!(
                            "version {version} of the table holds no commit of slice `{owner}`: run the upstream stage for it first, or check the slice id and the version"
                        ),
                    }));
                }
                let (inputs, rows_of) = t
                    .input_files(
                        partition.as_ref().map(|(k, v)| (k.as_str(), v.as_str())),
                        slice.as_deref(),
                    )
                    .await?;
                let schema = t.arrow_schema()?;
                Ok::<_, RunError>((inputs, rows_of, t.url().clone(), schema))
            })?;
            if let Some(owner) = slice
                && inputs.is_empty()
            {
                // The slice committed an empty output: zero rows, in the
                // table's schema (the owner column dropped, as when read).
                let mut resolved = ResolvedSlice::empty(owner, &root, schema)?;
                if rows_of {
                    resolved = resolved.with_row_filter(crate::table::OWNER_COLUMN, owner);
                }
                return Ok((resolved, "delta"));
            }
            let mut files = Vec::with_capacity(inputs.len());
            let mut values = Vec::with_capacity(inputs.len());
            let mut columns: Vec<String> = Vec::new();
            for f in &inputs {
                if columns.is_empty() {
                    columns = f.partition_values.iter().map(|(k, _)| k.clone()).collect();
                }
                values.push((
                    f.path.clone(),
                    f.partition_values.iter().map(|(_, v)| v.clone()).collect(),
                ));
                files.push(f.path.clone());
            }
            let fields = columns
                .iter()
                .map(|c| {
                    schema
                        .field_with_name(c)
                        .map(|f| f.as_ref().clone().with_nullable(true))
                        .unwrap_or_else(|_| {
                            arrow::datatypes::Field::new(c, arrow::datatypes::DataType::Utf8, true)
                        })
                })
                .collect();
            let id = match (slice, partition) {
                (Some(owner), _) => owner.clone(),
                (None, Some((k, v))) => format!("{k}={v}"),
                (None, None) => format!("delta-v{version}"),
            };
            let mut resolved =
                ResolvedSlice::from_names(&id, &root, files)?.with_constants(fields, values);
            if let Some(owner) = slice
                && rows_of
            {
                resolved = resolved.with_row_filter(crate::table::OWNER_COLUMN, owner);
            }
            (resolved, "delta")
        }
        SliceSpec::Next { .. } => {
            return Err(RunError::Usage(
                "a --next slice is resolved against its table".into(),
            ));
        }
    })
}

/// A manifest is untrusted text: every input it names must be a plain
/// relative path below its slice root, or nothing is read.
pub(crate) fn check_input_paths(m: &Manifest) -> Result<(), RunError> {
    for input in &m.spec.slice.inputs {
        let p = std::path::Path::new(&input.path);
        if input.path.is_empty()
            || p.is_absolute()
            || input.path.contains('\\')
            || p.components()
                .any(|c| !matches!(c, std::path::Component::Normal(_)))
        {
            return Err(RunError::Usage(format!(
                "the manifest names input `{}`, which is not a plain path below the slice root: refused (the manifest was edited)",
                input.path
            )));
        }
    }
    Ok(())
}

/// The verdict of [`replay`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The re-run produced the recorded output digest.
    Match {
        /// The digest.
        output_digest: Digest,
    },
    /// Something differs; the first difference found.
    Mismatch(String),
}

/// Re-run a manifest from what it names alone (the replay step of `idem
/// verify` and `idem audit --replay`, see [`crate::audit`]): the module fetched by digest
/// from the table's `_idem/modules/`, the inputs from the slice root,
/// checked against their recorded digests, then executed and compared.
pub fn replay(manifest_bytes: &[u8], sandbox: &Sandbox) -> Result<Verdict, RunError> {
    let m = Manifest::from_bytes(manifest_bytes)?;
    let rt = runtime()?;
    let table = rt.block_on(Table::open_existing(&m.spec.target.table))?;
    let mod_path = module_path(&m.spec.module);
    let Some(bytes) = rt.block_on(table.get_sidecar(&mod_path))? else {
        return Ok(Verdict::Mismatch(format!(
            "the module {} is not stored at _idem/{mod_path}",
            m.spec.module
        )));
    };
    let now = Digest::of_bytes(&bytes);
    if now != m.spec.module {
        return Ok(Verdict::Mismatch(format!(
            "the stored module _idem/{mod_path} does not match its digest: recorded {}, the file is {now} (it was swapped or corrupted)",
            m.spec.module
        )));
    }
    check_input_paths(&m)?;
    let slice = if m.spec.slice.kind == "delta" {
        // Through the pinned snapshot again: the same files and the
        // partition values the log holds for them.
        let Some(version) = m.spec.slice.delta_version else {
            return Ok(Verdict::Mismatch(
                "the manifest does not record the pinned Delta version of its input (made by an older idem): it cannot be replayed".into(),
            ));
        };
        let slice = m.spec.slice.delta_slice.clone();
        let partition = (slice.is_none() && m.spec.slice.id != format!("delta-v{version}"))
            .then(|| m.spec.slice.id.split_once('='))
            .flatten()
            .map(|(k, v)| (k.to_string(), v.to_string()));
        let spec = SliceSpec::Delta {
            table: m.spec.slice.root.clone(),
            version,
            partition,
            slice,
        };
        resolve(&rt, &spec)?.0
    } else {
        let root_url =
            crate::storage::locate(&m.spec.slice.root).map_err(crate::slice::SliceError::from)?;
        let root =
            crate::storage::Store::open(&root_url).map_err(crate::slice::SliceError::from)?;
        let mut names = Vec::with_capacity(m.spec.slice.inputs.len());
        for input in &m.spec.slice.inputs {
            if root
                .size(&input.path)
                .map_err(crate::slice::SliceError::from)?
                .is_none()
            {
                return Ok(Verdict::Mismatch(format!(
                    "input {} is missing ({})",
                    input.path,
                    root.url_of(&input.path)
                )));
            }
            names.push(input.path.clone());
        }
        // Pin the recorded names as they are; every recorded input must
        // come back with its recorded digest.
        ResolvedSlice::from_names(&m.spec.slice.id, root.url(), names)?
    };
    let mut recorded: Vec<&crate::slice::InputObject> = m.spec.slice.inputs.iter().collect();
    recorded.sort_by(|a, b| a.path.cmp(&b.path));
    if recorded.len() != slice.inputs.len() {
        return Ok(Verdict::Mismatch(format!(
            "the manifest records {} inputs, {} distinct names were found",
            recorded.len(),
            slice.inputs.len()
        )));
    }
    for (rec, now) in recorded.iter().zip(&slice.inputs) {
        if rec.path != now.path || rec.digest != now.digest {
            return Ok(Verdict::Mismatch(format!(
                "input {} changed: recorded {}, now {}",
                rec.path, rec.digest, now.digest
            )));
        }
    }
    let module = sandbox.load(&bytes)?;
    let reader = slice.reader(m.spec.batch_rows as usize)?;
    let ctx = GuestContext {
        slice_id: m.spec.slice.id.clone(),
        logical_date: m.spec.logical_date.clone(),
        params: params_text(&m.spec.params),
        input_schema: reader.schema(),
        batch_rows: m.spec.batch_rows,
    };
    let mut instance = sandbox.instantiate(&module)?;
    let out = execute(&mut instance, &ctx, |c| reader.narrow(c), |_| Ok(()))?;
    if out.columns != m.result.columns {
        return Ok(Verdict::Mismatch(format!(
            "the transform now declares the input columns {:?}, the manifest records {:?}",
            out.columns, m.result.columns
        )));
    }
    if out.dictionaries != m.result.dictionaries {
        return Ok(Verdict::Mismatch(format!(
            "the transform now takes the columns {:?} dictionary-encoded, the manifest records {:?}",
            out.dictionaries, m.result.dictionaries
        )));
    }
    if out.output_digest == m.result.output_digest && out.rows_out == m.result.rows_out {
        Ok(Verdict::Match {
            output_digest: out.output_digest,
        })
    } else {
        Ok(Verdict::Mismatch(format!(
            "output differs: recorded {} ({} rows), re-run gave {} ({} rows)",
            m.result.output_digest, m.result.rows_out, out.output_digest, out.rows_out
        )))
    }
}

/// Every run logged under the table's `_idem/log/`, oldest first.
pub fn run_log(table: &str) -> Result<Vec<LogEntry>, RunError> {
    let rt = runtime()?;
    rt.block_on(async {
        let t = Table::open_existing(table).await?;
        let mut out = Vec::new();
        for name in t.list_sidecar("log").await? {
            let rel = name.trim_start_matches("_idem/");
            if let Some(bytes) = t.get_sidecar(rel).await?
                && let Ok(e) = serde_json::from_slice::<LogEntry>(&bytes)
            {
                out.push(e);
            }
        }
        Ok(out)
    })
}
