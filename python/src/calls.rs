//! The calls that run transforms: `run`, `backfill` and `explain`. Each
//! turns the package's keywords into the library's [`Run`] (the same the
//! CLI builds from its flags, through [`NamedSlice`]) and executes it with
//! the GIL released.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use idem::attest::SigningKey;
use idem::expect::Expectation;
use idem::lineage::{Lineage, Parent};
use idem::run::{NamedSlice, PinnedSides, Run, RunError, SideSpec, SliceSpec};
use idem::slice::TextOptions;
use idem::table::{Mode, SchemaChange};
use pyo3::prelude::*;

/// The output's expectations and how text inputs are read, checked once.
/// And the side inputs: named (a run pins them), or pinned once (a
/// backfill's, for every slice).
type Checks = (
    Vec<Expectation>,
    TextOptions,
    SchemaChange,
    (Vec<SideSpec>, PinnedSides),
);

use crate::errors::run_error;
use crate::limits::{self, Limits};
use crate::results::{BackfillResult, BackfillSlice, RunResult};
use crate::stored::Explanation;

/// A run's keywords, as `idem.run` passes them (every key present).
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub struct RunArgs {
    module: PathBuf,
    table: String,
    input: Option<String>,
    partition: Option<String>,
    files: Vec<PathBuf>,
    slice_id: Option<String>,
    delta_version: Option<u64>,
    iceberg_snapshot: Option<i64>,
    delta_slice: Option<String>,
    next: bool,
    max_objects: usize,
    max_bytes: Option<u64>,
    #[pyo3(item("publish"))]
    publish: Publish,
    force: bool,
    origin: Option<String>,
}

/// How a run commits and what its transform is given (the keywords
/// `run`, `explain` and `backfill` share).
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub struct Publish {
    mode: Option<String>,
    key: Vec<String>,
    params: String,
    logical_date: Option<String>,
    batch_rows: u32,
    expect: Vec<String>,
    audit_module: Option<PathBuf>,
    audit_params: String,
    sign_key: Option<PathBuf>,
    lineage: Option<String>,
    lineage_namespace: Option<String>,
    /// A parent run (id, job name) the caller made (`idem.spark`'s job).
    lineage_parent: Option<(String, String)>,
    /// Text inputs' declared columns (JSON, as `--schema`).
    schema: Option<String>,
    max_rejects: u64,
    /// Write-audit-publish on an Iceberg branch (`--wap`,
    /// `--wap-branch`).
    wap: bool,
    wap_branch: Option<String>,
    /// What output columns the table lacks do (`--on-schema-change`).
    on_schema_change: String,
    /// Side inputs: (name, location, version) each.
    sides: Vec<(String, String, Option<u64>)>,
}

impl RunArgs {
    fn names(&self) -> NamedSlice {
        NamedSlice {
            input: self.input.clone(),
            partition: self.partition.clone(),
            files: self.files.clone(),
            slice_id: self.slice_id.clone(),
            delta_version: self.delta_version,
            iceberg_snapshot: self.iceberg_snapshot,
            delta_slice: self.delta_slice.clone(),
            next: self.next,
            max_objects: self.max_objects,
            max_bytes: self.max_bytes,
        }
    }

    /// The run these keywords describe.
    fn build(&self) -> PyResult<Run> {
        let names = self.names();
        let mode = names
            .mode(self.publish.mode.as_deref(), &self.publish.key)
            .map_err(run_error)?;
        let spec = names.spec().map_err(run_error)?;
        let run = Run::new(&self.module, spec, self.table.clone())
            .force(self.force)
            .origin(self.origin.clone())
            .sign_with(self.publish.signer()?);
        let (lineage, parent) = self.publish.lineage(None)?;
        let run = run.lineage(lineage, parent);
        let checks = (
            self.publish.expectations()?,
            self.publish.text()?,
            self.publish.schema_change()?,
            (self.publish.sides()?, PinnedSides::default()),
        );
        Ok(self.publish.apply(run, mode.as_ref(), &checks))
    }
}

impl Publish {
    /// The signing key (`sign_key`), read.
    fn signer(&self) -> PyResult<Option<Arc<SigningKey>>> {
        self.sign_key
            .as_deref()
            .map(|p| {
                SigningKey::from_file(p)
                    .map(Arc::new)
                    .map_err(|e| crate::errors::raise(e.kind(), &e))
            })
            .transpose()
    }

    /// The OpenLineage receiver (`lineage`), and the parent run of its
    /// events: the one the caller named, else `parent` (a backfill's).
    fn lineage(&self, parent: Option<&str>) -> PyResult<(Option<Arc<Lineage>>, Option<Parent>)> {
        let Some(target) = &self.lineage else {
            return Ok((None, None));
        };
        let usage = |e: String| run_error(RunError::Usage(e));
        let l = shared_lineage(target, self.lineage_namespace.clone()).map_err(usage)?;
        let parent = match (&self.lineage_parent, parent) {
            (Some((id, name)), _) => Some(l.parent_with_id(name, id).map_err(usage)?),
            (None, Some(name)) => Some(l.parent(name)),
            (None, None) => None,
        };
        Ok((Some(l), parent))
    }

    /// The expectations, parsed.
    fn expectations(&self) -> PyResult<Vec<Expectation>> {
        self.expect
            .iter()
            .map(|e| e.parse::<Expectation>())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| run_error(RunError::Usage(e.to_string())))
    }

    /// How text inputs are read, the schema parsed.
    fn text(&self) -> PyResult<TextOptions> {
        let schema = self
            .schema
            .as_deref()
            .map(idem::slice::parse_declared)
            .transpose()
            .map_err(|e| run_error(RunError::Usage(e)))?;
        Ok(TextOptions {
            schema,
            max_rejects: self.max_rejects,
        })
    }

    /// `on_schema_change`, checked.
    fn schema_change(&self) -> PyResult<SchemaChange> {
        self.on_schema_change
            .parse()
            .map_err(|e: String| run_error(RunError::Usage(format!("on_schema_change: {e}"))))
    }

    /// `sides`, parsed.
    fn sides(&self) -> PyResult<Vec<SideSpec>> {
        let sides: Vec<SideSpec> = self
            .sides
            .iter()
            .map(|(name, location, version)| SideSpec {
                name: name.clone(),
                location: location.clone(),
                version: *version,
            })
            .collect();
        idem::run::check_sides(&sides).map_err(run_error)?;
        Ok(sides)
    }

    /// `run` with this mode, params, date, batch size, checks and text
    /// inputs' reading.
    fn apply(&self, run: Run, mode: Option<&Mode>, checks: &Checks) -> Run {
        let (expectations, text, schema_change, (sides, pinned)) = checks;
        let mut run = run
            .params(self.params.clone())
            .on_schema_change(*schema_change)
            .sides(sides.clone())
            .pinned_sides(pinned.clone())
            .batch_rows(self.batch_rows)
            .expect(expectations.to_vec())
            .text(text.clone())
            .audit_module(self.audit_module.clone(), self.audit_params.clone())
            .wap(match (self.wap, &self.wap_branch) {
                (true, _) => Some(None),
                (false, name) => name.clone().map(Some),
            });
        if self.logical_date.is_some() {
            run = run.logical_date(self.logical_date.clone());
        }
        if let Some(m) = mode {
            run = run.mode(m.clone());
        }
        run
    }
}

/// The process's receiver for `target` in `namespace`: one per pair, so
/// the calls of a process (a Spark executor's tasks, a notebook's runs)
/// share what it learned (a receiver down is not tried again for a
/// minute by each call).
pub(crate) fn shared_lineage(
    target: &str,
    namespace: Option<String>,
) -> Result<Arc<Lineage>, String> {
    type Receivers = Mutex<Vec<((String, Option<String>), Arc<Lineage>)>>;
    static RECEIVERS: std::sync::OnceLock<Receivers> = std::sync::OnceLock::new();
    let key = (target.to_string(), namespace);
    let mut all = RECEIVERS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some((_, l)) = all.iter().find(|(k, _)| *k == key) {
        return Ok(l.clone());
    }
    let l = Arc::new(Lineage::new(&key.0, key.1.clone())?);
    // A handful per process; a caller cycling through receivers does not
    // keep them all.
    if all.len() >= 16 {
        all.remove(0);
    }
    all.push((key, l.clone()));
    Ok(l)
}

/// One idempotent run of a slice.
#[pyfunction]
#[pyo3(signature = (args, limits=None))]
pub fn run(py: Python<'_>, args: RunArgs, limits: Option<Limits>) -> PyResult<RunResult> {
    crate::process::enter()?;
    py.detach(move || {
        let sandbox = limits::sandbox(limits.as_ref())?;
        match args.build()?.execute(&sandbox) {
            Ok(report) => Ok(RunResult::of(&report)),
            // Nothing new in an append-only source ends a catch-up; not a failure.
            Err(RunError::UpToDate { prefix, through }) => {
                Ok(RunResult::up_to_date(prefix, through))
            }
            Err(e) => Err(run_error(e)),
        }
    })
}

/// Store a module beside a table (`_idem/modules/`) once, checked to
/// load; its digest (`sha256:<hex>`) then names it in runs anywhere.
#[pyfunction]
#[pyo3(signature = (module, table, limits=None))]
pub fn publish_module(
    py: Python<'_>,
    module: PathBuf,
    table: String,
    limits: Option<Limits>,
) -> PyResult<String> {
    crate::process::enter()?;
    py.detach(move || {
        let sandbox = limits::sandbox(limits.as_ref())?;
        let digest = idem::run::publish_module(&sandbox, &module, &table).map_err(run_error)?;
        Ok(digest.as_str().to_string())
    })
}

/// Plan a run (inputs hashed, module loaded, nothing executed or written)
/// and compare it with its slice's current run.
#[pyfunction]
#[pyo3(signature = (args, limits=None))]
pub fn explain(py: Python<'_>, args: RunArgs, limits: Option<Limits>) -> PyResult<Explanation> {
    crate::process::enter()?;
    py.detach(move || {
        let sandbox = limits::sandbox(limits.as_ref())?;
        let e = args.build()?.explain(&sandbox).map_err(run_error)?;
        Ok(Explanation::planned(&e))
    })
}

/// Two stored runs compared field by field.
#[pyfunction]
#[pyo3(signature = (a, b, table=None))]
pub fn compare(
    py: Python<'_>,
    a: String,
    b: String,
    table: Option<String>,
) -> PyResult<Explanation> {
    crate::process::enter()?;
    py.detach(move || {
        let fa = idem::catalog::find(&a, table.as_deref()).map_err(run_error)?;
        let fb = idem::catalog::find(&b, table.as_deref()).map_err(run_error)?;
        Ok(Explanation::compared(&fa, &fb))
    })
}

/// A backfill's keywords, as `idem.backfill` passes them.
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub struct BackfillArgs {
    module: PathBuf,
    input: String,
    table: String,
    start: String,
    end: String,
    column: String,
    every: Option<String>,
    hour_column: String,
    each: Vec<String>,
    jobs: usize,
    skip_missing: bool,
    force: bool,
    publish: Publish,
}

/// What every slice of a backfill shares, checked once.
struct Shared {
    /// Every slice's id, in order, and its partition.
    ids: Vec<String>,
    partitions: std::collections::HashMap<String, idem::slice::Partition>,
    span: idem::backfill::Span,
    mode: Option<Mode>,
    checks: Checks,
    signer: Option<Arc<SigningKey>>,
    lineage: (Option<Arc<Lineage>>, Option<Parent>),
}

impl BackfillArgs {
    /// The run of the slice `id` (its logical date is its date, or its
    /// hour's `{{ ts }}`, as `idem backfill` gives it).
    fn slice_run(&self, shared: &Shared, id: &str) -> Run {
        let partition = shared.partitions[id].clone();
        let logical_date = shared.span.logical_date(&partition);
        let slice = SliceSpec::Partition {
            root: PathBuf::from(&self.input),
            partition,
        };
        let run = Run::new(&self.module, slice, self.table.clone()).force(self.force);
        let run = self
            .publish
            .apply(run, shared.mode.as_ref(), &shared.checks);
        let (lineage, parent) = &shared.lineage;
        run.logical_date(logical_date)
            .sign_with(shared.signer.clone())
            .lineage(lineage.clone(), parent.clone())
    }

    /// The slices, the mode and the checks, each checked once.
    fn shared(&self, sandbox: &idem::sandbox::Sandbox) -> PyResult<Shared> {
        let span = idem::backfill::Span {
            from: Some(self.start.clone()),
            to: Some(self.end.clone()),
            every: self.every.clone(),
            column: self.column.clone(),
            hour_column: self.hour_column.clone(),
            each: self.each.clone(),
        };
        let partitions = span.partitions().map_err(run_error)?;
        idem::backfill::check_jobs(self.jobs).map_err(run_error)?;
        let ids: Vec<String> = partitions.iter().map(|p| p.to_string()).collect();
        let partitions = ids.iter().cloned().zip(partitions).collect();
        let mode = idem::run::parse_mode(self.publish.mode.as_deref(), &self.publish.key, None)
            .map_err(run_error)?;
        // Side inputs pinned (hashed) once: every slice reads the same files.
        let limits = &sandbox.config().limits;
        let sides =
            idem::run::pin_sides(&self.publish.sides()?, &self.table, limits).map_err(run_error)?;
        let checks = (
            self.publish.expectations()?,
            self.publish.text()?,
            self.publish.schema_change()?,
            (Vec::new(), sides),
        );
        Ok(Shared {
            ids,
            partitions,
            span,
            mode,
            checks,
            signer: self.publish.signer()?,
            // Every slice's events name the backfill as their parent run.
            lineage: self.publish.lineage(Some(&format!(
                "backfill {}",
                idem::table::shown_location(&self.table)
            )))?,
        })
    }
}

/// A date range of daily partitions, `jobs` at a time. A signal (Ctrl-C)
/// stops new slices from starting; the running ones finish, then the
/// signal handler's exception (KeyboardInterrupt) is raised: a rerun finds
/// what committed.
#[pyfunction]
#[pyo3(signature = (args, limits=None))]
pub fn backfill(
    py: Python<'_>,
    args: BackfillArgs,
    limits: Option<Limits>,
) -> PyResult<BackfillResult> {
    crate::process::enter()?;
    let stop = AtomicBool::new(false);
    let signal = Mutex::new(None);
    let results = py.detach(|| -> PyResult<_> {
        let sandbox = limits::sandbox(limits.as_ref())?;
        let shared = args.shared(&sandbox)?;
        // Checked once, not once per slice: params, mode, and that the
        // module loads (which fills the compiled-code cache first).
        let first = args.slice_run(&shared, &shared.ids[0]);
        first.preflight(&sandbox).map_err(run_error)?;
        let make = |date: &str| args.slice_run(&shared, date);
        Ok(until_signalled(&stop, &signal, || {
            idem::backfill::run(&shared.ids, args.jobs, &sandbox, &make, &stop, &|_| {})
        }))
    })?;
    if let Some(e) = signal.into_inner().unwrap_or_else(|e| e.into_inner()) {
        return Err(e);
    }
    let ended = idem::backfill::Ended::of(&results, args.skip_missing);
    Ok(BackfillResult {
        slices: results.iter().map(BackfillSlice::of).collect(),
        failed: results
            .iter()
            .filter(|r| r.failed(args.skip_missing))
            .count(),
        ok: ended.ok(),
    })
}

/// `work` on a thread of its own while this thread (Python's main one,
/// where signal handlers run) runs pending signal handlers every 50 ms; a
/// handler's exception sets `stop` and is kept in `signal`.
fn until_signalled<R: Send>(
    stop: &AtomicBool,
    signal: &Mutex<Option<PyErr>>,
    work: impl FnOnce() -> R + Send,
) -> R {
    std::thread::scope(|s| {
        let worker = s.spawn(work);
        while !worker.is_finished() {
            std::thread::sleep(std::time::Duration::from_millis(50));
            if let Err(e) = Python::attach(|py| py.check_signals()) {
                stop.store(true, Ordering::SeqCst);
                if let Ok(mut kept) = signal.lock() {
                    kept.get_or_insert(e);
                }
            }
        }
        match worker.join() {
            Ok(r) => r,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    })
}
