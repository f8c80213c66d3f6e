//! One idempotent run, as a folder of steps, each a function over plain
//! values ([`Run::execute`] calls them in turn; the ones a caller needs
//! on their own, [`drive`], [`replay`], [`record`]'s lookups and
//! [`Run::explain`], are public):
//!
//! 1. `resolve`: which inputs, pinned and hashed (`next` for an
//!    append-only prefix's next range);
//! 2. `plan`: the module identified, the run spec and run key;
//! 3. [`record`]: the memo (this exact run committed, still current);
//! 4. `land`: executed in the sandbox ([`drive`]), digested, checked,
//!    landed in the table's data files or staged (`staged`: an audit
//!    module reads it);
//! 5. `sign` (with a key): the manifest sealed in a signed envelope,
//!    stored; `commit`: manifest and modules stored, the output committed
//!    only when new (naming manifest and envelope);
//! 6. [`record`]: the memo index entry and the run log.
//!
//! With write-audit-publish on a branch (Iceberg), `wap` takes 5 and the
//! audit: written to a branch, audited there, signed, published.
//!
//! With a lineage receiver, [`Run::execute`] tells it each run's START
//! (once planned) and COMPLETE or FAIL ([`crate::lineage`]).
//!
//! Beside them: `explain` plans without executing, [`replay`] re-runs a
//! manifest from what it names, [`batch`] runs date ranges (backfills and
//! pipelines), `error` says why a run failed.

pub mod batch;
mod commit;
pub mod drive;
mod emit;
mod error;
mod explain;
mod land;
mod module_ref;
mod named;
mod next;
mod plan;
pub mod record;
mod replay;
mod resolve;
mod side;
mod sign;
mod span;
mod staged;
mod wap;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::attest::SigningKey;
use crate::digest::Digest;
use crate::execute::Transformer;
use crate::lineage::{Lineage, Parent};
use crate::manifest::{Manifest, canonical_json};
use crate::sandbox::Sandbox;
use crate::table::{Mode, SchemaChange, Table};
use emit::Emitter;

pub use crate::table::SliceOutcome as RunOutcome;
pub use error::{EXECUTING, RunError};
pub use explain::Explanation;
pub use module_ref::publish_module;
pub use named::{NamedSlice, parse_mode};
pub use record::{LogEntry, run_log, run_log_since};
pub(crate) use replay::check_input_paths;
pub use replay::{Verdict, replay};
use resolve::implied_date;
pub use resolve::{SliceSpec, parse_partition};
pub use side::{
    MAX_SIDES, PinnedSides, SideInput, SideSpec, check_specs as check_sides, pin_sides,
};

/// Builds the transformer that replaces the sandbox (benchmark baselines).
/// The most rows an input batch may hold: the reader reserves a batch's
/// buffers up front, so a larger size could ask for more memory than any
/// machine has (and an allocation failure aborts the process).
pub const MAX_BATCH_ROWS: u32 = 1 << 20;

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
    text: crate::slice::TextOptions,
    native: Option<TransformerFactory>,
    time_limit: Option<std::time::Duration>,
    origin: Option<String>,
    signer: Option<Arc<SigningKey>>,
    lineage: Option<(Arc<Lineage>, Option<Parent>)>,
    /// Write-audit-publish on a branch: `Some(None)` names it per slice.
    wap: Option<Option<String>>,
    /// What output columns the table lacks do (`--on-schema-change`).
    schema_change: SchemaChange,
    /// Tables read whole beside the slice (`--side NAME=TABLE`).
    sides: Vec<SideSpec>,
    /// Side inputs pinned once for many runs (a backfill's).
    pinned_sides: PinnedSides,
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
    /// The manifest's DSSE envelope, when the run signed it: its digest
    /// and where it is (`_idem/attestations/<manifest hex>/<hex>.json`).
    pub envelope: Option<(Digest, String)>,
    /// What happened.
    pub outcome: RunOutcome,
    /// Milliseconds spent resolving, executing and committing.
    pub timings_ms: Timings,
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

/// The params as the guest sees them: exactly the bytes the run key hashed.
fn params_text(params: &serde_json::Value) -> String {
    String::from_utf8(canonical_json(params)).unwrap_or_else(|_| "{}".into())
}

fn ms(t: Instant) -> u64 {
    t.elapsed().as_millis() as u64
}

/// The process's shared runtime ([`crate::runtime`]).
pub(crate) fn runtime() -> Result<&'static tokio::runtime::Runtime, RunError> {
    crate::runtime::shared().map_err(|e| RunError::Io {
        what: "starting the async runtime".into(),
        source: e,
    })
}

/// The run's wall-clock limit ([`Run::time_limit`]), checked between
/// steps up to the commit.
struct Clock {
    started: Instant,
    limit: Option<std::time::Duration>,
}

impl Clock {
    /// Fails when the run is over its limit at the end of `step`.
    fn check(&self, step: &'static str) -> Result<(), RunError> {
        match self.limit {
            Some(l) if self.started.elapsed() > l => Err(RunError::OverTime {
                limit_ms: l.as_millis() as u64,
                step,
            }),
            _ => Ok(()),
        }
    }
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
            text: Default::default(),
            native: None,
            time_limit: None,
            origin: None,
            signer: None,
            lineage: None,
            wap: None,
            schema_change: SchemaChange::Fail,
            sides: Vec::new(),
            pinned_sides: PinnedSides::default(),
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

    /// Who runs it (a scheduler's task attempt, say): a label kept in the
    /// run log beside what the run did, never hashed into the run key or
    /// the manifest (two attempts of one run are the same run).
    pub fn origin(mut self, origin: Option<String>) -> Self {
        self.origin = origin;
        self
    }

    /// Sign the run's manifest with `key` (a DSSE envelope stored beside
    /// it and named by the commit). A memo hit signs nothing (it reports the envelope
    /// this key made of the manifest before, if it is stored).
    pub fn sign_with(mut self, key: Option<Arc<SigningKey>>) -> Self {
        self.signer = key;
        self
    }

    /// An audit module (a transform that reads the staged output and
    /// returns rows `pass: bool, reason: text`) and its params (JSON): the
    /// output is published only when it passes.
    pub fn audit_module(mut self, module: Option<PathBuf>, params: impl Into<String>) -> Self {
        self.audit = module.map(|m| (m, params.into()));
        self
    }

    /// Write-audit-publish on a branch (Iceberg tables): the output is
    /// committed to `branch` (`Some(None)`: `wap/<slice>`), audited there
    /// (the expectations and the audit module read the branch's rows),
    /// and `main` fast-forwarded to it only when it passes.
    pub fn wap(mut self, branch: Option<Option<String>>) -> Self {
        self.wap = branch;
        self
    }

    /// What output columns the table does not have do: fail the run (the
    /// default), or get appended to the table, nullable, in the commit.
    /// Recorded in the run spec (when not the default).
    pub fn on_schema_change(mut self, policy: SchemaChange) -> Self {
        self.schema_change = policy;
        self
    }

    /// Side inputs: tables the transform reads whole beside the slice (a
    /// dimension to join with), each pinned and hashed into the run key.
    pub fn sides(mut self, sides: Vec<SideSpec>) -> Self {
        self.sides = sides;
        self
    }

    /// Side inputs pinned once for many runs ([`pin_sides`]): a backfill's,
    /// so every slice reads the same files, hashed once. Taken with
    /// [`Run::sides`] (each name once).
    pub fn pinned_sides(mut self, sides: PinnedSides) -> Self {
        self.pinned_sides = sides;
        self
    }

    /// Expectations the output must meet before it is published.
    pub fn expect(mut self, expectations: Vec<crate::expect::Expectation>) -> Self {
        self.expectations = expectations;
        self
    }

    /// How text inputs (CSV, TSV, JSON lines) are read: the declared
    /// schema (else inferred from them) and the bad rows allowed.
    pub fn text(mut self, options: crate::slice::TextOptions) -> Self {
        self.text = options;
        self
    }

    /// Emit the run's OpenLineage events to `lineage`, as a slice of the
    /// `parent` run (a backfill, a pipeline) when given.
    pub fn lineage(mut self, lineage: Option<Arc<Lineage>>, parent: Option<Parent>) -> Self {
        self.lineage = lineage.map(|l| (l, parent));
        self
    }

    /// Run it: the steps of the module docs, each one call, told to the
    /// lineage receiver (START once planned, COMPLETE or FAIL at the end).
    pub fn execute(self, sandbox: &Sandbox) -> Result<RunReport, RunError> {
        let lineage = self.lineage.clone();
        let emit = match &lineage {
            Some((l, parent)) => Emitter::new(Some(l), parent.as_ref(), &self.table),
            None => Emitter::new(None, None, &self.table),
        };
        // A panic (a bug) still ends the run's events, then goes on up.
        let steps = std::panic::AssertUnwindSafe(|| self.steps(sandbox, &emit));
        let result = match std::panic::catch_unwind(steps) {
            Ok(r) => r,
            Err(panic) => {
                emit.panicked();
                std::panic::resume_unwind(panic)
            }
        };
        emit.ended(&result);
        result
    }

    fn steps(mut self, sandbox: &Sandbox, emit: &Emitter<'_>) -> Result<RunReport, RunError> {
        let clock = Clock {
            started: Instant::now(),
            limit: self.time_limit,
        };
        let (params, mode) = self.check_args()?;
        let rt = runtime()?;
        let mut table = open_for_writing(rt, &self.table)?;
        let p = self.plan(rt, sandbox, (table.url(), Some(&table)), params, mode)?;
        emit.started(&p.spec, &p.run_key);
        // Refused before a memo hit could hide it.
        let branch = self.branch_of(&table, &p)?;
        if !self.force
            && let Some(report) = rt.block_on(memo(
                &table,
                &p,
                self.origin.as_deref(),
                self.signer.as_ref(),
            ))?
        {
            emit.table_columns(table.arrow_schema().ok());
            return Ok(report);
        }
        crate::fault::point_of("execute", &p.slice.id);
        clock.check("reading and hashing the inputs")?;
        let mut timings = p.timings.clone();
        let mut executed = self.land(rt, sandbox, &table, &p, &mut timings)?;
        clock.check(EXECUTING)?;
        let (manifest, done) = match &branch {
            None => {
                let manifest = commit::manifest_of(&p, &mut executed);
                let sealed = sign::seal(rt, &table, &manifest, self.signer.as_ref())?;
                let done =
                    commit::commit(rt, &mut table, p, executed, sealed, &clock, &mut timings)?;
                (manifest, done)
            }
            Some(branch) => {
                let w = wap::Wap {
                    table: &self.table,
                    sandbox,
                    branch,
                    job: self.job(&p),
                    expectations: &self.expectations,
                    signer: self.signer.as_ref(),
                };
                wap::write_audit_publish(rt, &mut table, &p, executed, &w, &clock, &mut timings)?
            }
        };
        let mut report = record::report(
            &table,
            manifest,
            done.manifest_digest,
            done.outcome,
            timings,
        );
        emit.committed(&report);
        // Committed, but the memo index and run log are not written yet.
        crate::fault::point("after-log-write");
        // An unchanged output leaves the commit naming an earlier run's
        // manifest: this run's envelope is then not the slice's.
        let named = match report.outcome {
            RunOutcome::Unchanged { .. } => {
                let slice = &report.manifest.spec.slice.id;
                rt.block_on(table.current_manifest(slice))?.as_ref()
                    == Some(&report.manifest_digest)
            }
            _ => true,
        };
        let envelope = done.envelope.filter(|_| named);
        report.envelope = record::envelope(&table, &report.manifest_digest, envelope);
        emit.committed(&report);
        rt.block_on(record::record(
            &table,
            &report,
            named,
            self.origin.as_deref(),
        ))?;
        // Recorded: a caller that stalls now (a task that never reports
        // back) leaves nothing undone.
        crate::fault::point_of("after-record", &report.manifest.spec.slice.id);
        emit.table_columns(table.arrow_schema().ok());
        Ok(report)
    }
}

/// The target table, opened to be written: a store that cannot make
/// commits safe (or refuses our writes) fails the run before anything
/// runs or is written.
fn open_for_writing(rt: &tokio::runtime::Runtime, location: &str) -> Result<Table, RunError> {
    rt.block_on(async {
        let mut table = Table::open(location).await?;
        table.ensure_safe_store().await?;
        Ok(table)
    })
}

/// Step 3: a memo hit (this exact run committed, still current, and the
/// table still holds its rows) is the run's report, logged.
async fn memo(
    table: &Table,
    p: &plan::Planned,
    origin: Option<&str>,
    signer: Option<&Arc<SigningKey>>,
) -> Result<Option<RunReport>, RunError> {
    let Some((m, digest, since)) =
        record::memo_hit(table, &p.run_key, &p.slice.id, &p.mode).await?
    else {
        return Ok(None);
    };
    let envelope = match signer {
        Some(key) => sign::signed_before(table, key, &m, &digest).await,
        None => None,
    };
    let mut report = record::report(
        table,
        m,
        digest,
        RunOutcome::Memo { since },
        p.timings.clone(),
    );
    report.envelope = record::envelope(table, &report.manifest_digest, envelope);
    record::log(table, &report, origin).await?;
    Ok(Some(report))
}
