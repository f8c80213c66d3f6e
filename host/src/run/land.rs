//! Step 4, land: the transform executed over the slice ([`super::drive`]),
//! its output digested, checked (merge keys, expectations, an audit
//! module) and landed: straight into the table's data files, or staged on
//! local disk when it must be read whole or audited first ([`Landing`]).

use std::path::PathBuf;

use arrow::record_batch::RecordBatch;

use super::RunError;
use super::drive::{Feed, Job, drive};
use crate::execute::{ExecError, Outcome, Transformer};
use crate::output::Stager;

/// Stage output in a local Parquet file in a temporary folder, which
/// lives until the commit.
pub(super) fn stage() -> Result<(tempfile::TempDir, Stager), RunError> {
    let dir = tempfile::Builder::new()
        .prefix("idem-stage-")
        .tempdir()
        .map_err(|e| RunError::Io {
            what: "creating a staging directory".into(),
            source: e,
        })?;
    let stager = Stager::spawn(
        dir.path().join("output.parquet"),
        4,
        crate::output::Purpose::Scratch,
    )
    .map_err(|e| RunError::Io {
        what: "starting the staging writer".into(),
        source: e,
    })?;
    Ok((dir, stager))
}

/// Where a run's output batches go while it executes.
pub(super) enum Landing {
    /// Straight into data files of the table.
    Table(crate::table::DataWriter),
    /// A local Parquet file, committed from there.
    Staged(Stager),
}

/// The output once complete.
pub(super) enum Landed {
    Table(crate::table::Written),
    Staged(Option<PathBuf>),
}

impl Landing {
    pub(super) fn send(&self, b: &arrow::record_batch::RecordBatch) -> Result<(), String> {
        match self {
            Landing::Table(w) => w
                .send(b)
                .map_err(|_| "the data file writer stopped".to_string()),
            Landing::Staged(s) => s.send(b).map_err(|e| e.to_string()),
        }
    }

    /// The run failed: stop without completing the output.
    pub(super) fn abort(self) {
        match self {
            // Its drop stops the task, which deletes what it wrote.
            Landing::Table(w) => drop(w),
            // The staging folder goes with the run.
            Landing::Staged(s) => drop(s.finish()),
        }
    }

    pub(super) fn finish(self) -> Result<Landed, RunError> {
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
    pub(super) fn staged(&self) -> Option<&std::path::Path> {
        match self {
            Landed::Staged(p) => p.as_deref(),
            Landed::Table(_) => None,
        }
    }

    pub(super) fn into_output(self) -> crate::table::Output {
        match self {
            Landed::Table(w) => crate::table::Output::Written(w),
            Landed::Staged(p) => crate::table::Output::Staged(p.into_iter().collect()),
        }
    }
}

/// What the execution produced: the transform's outcome, its landed
/// output, the verdicts of its checks, and the staging folder (when the
/// output was staged; it lives until the commit).
pub(super) struct Executed {
    pub(super) outcome: Outcome,
    pub(super) landed: Landed,
    pub(super) audits: Vec<crate::expect::Verdict>,
    /// Rows of text inputs skipped as bad, when the run allowed any.
    pub(super) rejected: Option<u64>,
    pub(super) _staging: Option<tempfile::TempDir>,
}

/// The checks every output batch passes on its way to the table: a
/// merge's keys and the expectations. A check's own error (a missing key
/// column, a null key) is kept to be reported as itself, not as a failed
/// write.
struct Checks {
    keys: Option<crate::table::KeyChecker>,
    expect: crate::expect::Checker,
    failed: Option<RunError>,
}

impl Checks {
    fn check(&mut self, b: &RecordBatch) -> Result<(), ExecError> {
        if let Some(k) = self.keys.as_mut()
            && let Err(e) = k.update(b)
        {
            let message = e.to_string();
            self.failed = Some(e.into());
            return Err(ExecError::Sink(message));
        }
        if let Err(e) = self.expect.update(b) {
            let message = e.to_string();
            self.failed = Some(e.into());
            return Err(ExecError::Sink(message));
        }
        Ok(())
    }
}

impl super::Run {
    /// Step 4: execute in the sandbox, digesting the output and landing
    /// it (in the table's data files, or staged), then audit it before
    /// anything is published.
    pub(super) fn land(
        &mut self,
        rt: &tokio::runtime::Runtime,
        sandbox: &crate::sandbox::Sandbox,
        table: &crate::table::Table,
        p: &super::plan::Planned,
        timings: &mut super::Timings,
    ) -> Result<Executed, RunError> {
        let t = std::time::Instant::now();
        let reader = p
            .slice
            .reader(self.batch_rows as usize)?
            .with_input_budget(sandbox.config().limits.input_budget());
        let rejected = reader.rejected();
        let job = self.job(p);
        // On a branch, the audit reads the branch's rows (`super::wap`).
        let audited_here = self.wap.is_none();
        let mut instance = self.instance(sandbox, &p.module, timings)?;
        let expectations: &[crate::expect::Expectation] = match audited_here {
            true => &self.expectations,
            false => &[],
        };
        let (landing, staging) = landing_for(rt, table, p)?;
        let mut checks = Checks {
            keys: match &p.mode {
                crate::table::Mode::Merge { keys } => Some(crate::table::KeyChecker::new(keys)),
                _ => None,
            },
            expect: crate::expect::Checker::new(expectations),
            failed: None,
        };
        let progress = crate::progress::rows("running", reader.total_rows());
        let executed = drive(
            instance.as_mut(),
            &job,
            Feed::Ahead(reader, &progress),
            |b| {
                checks.check(b)?;
                landing.send(b).map_err(ExecError::Sink)
            },
        );
        let name = format!("{} {}", self.module_name(), p.slice.id);
        let Checks {
            keys,
            expect,
            failed,
        } = checks;
        // The lines a trap's message quotes are not shown twice.
        let lines = crate::execute::unquoted(instance.log_lines(), &executed);
        let (outcome, landed) = complete(executed, landing, failed, || {
            progress.finish();
            crate::execute::show_guest_log(&name, &lines);
        })?;
        // Audit before publish: nothing below (manifest, data files,
        // commit) happens for an output that fails an expectation.
        let mut audits = expect.finish(outcome.output_schema.as_deref())?;
        let landed = landed?;
        if let Some(k) = keys {
            k.finish()?;
        }
        if let Some((module, params)) = p.audit.as_ref().filter(|_| audited_here) {
            // An audit module reads the output, not the side inputs.
            let job = Job {
                params: super::params_text(params),
                sides: Vec::new(),
                ..job
            };
            let verdict = super::staged::audit_staged(sandbox, module, landed.staged(), &job)?;
            let passed = verdict.passed;
            audits.push(verdict);
            if !passed {
                return Err(crate::expect::ExpectError::Failed(audits).into());
            }
        }
        timings.exec_ms = super::ms(t);
        let allowed = p.slice.text.as_ref().is_some_and(|t| t.max_rejects > 0);
        Ok(Executed {
            outcome,
            landed,
            audits,
            rejected: allowed.then(|| rejected.rows()),
            _staging: staging,
        })
    }

    /// What the guest is told about the run.
    pub(super) fn job(&self, p: &super::plan::Planned) -> Job {
        Job {
            slice_id: p.slice.id.clone(),
            logical_date: self.logical_date.clone(),
            params: super::params_text(&p.spec.params),
            batch_rows: self.batch_rows,
            sides: p.sides.clone(),
        }
    }

    /// The branch a write-audit-publish run writes to (`None`: it
    /// commits to `main`), refused where there is none to write.
    pub(super) fn branch_of(
        &self,
        table: &crate::table::Table,
        p: &super::plan::Planned,
    ) -> Result<Option<String>, RunError> {
        let Some(named) = &self.wap else {
            return Ok(None);
        };
        if !table.is_iceberg() {
            return Err(RunError::Usage(crate::table::NO_BRANCHES.into()));
        }
        if matches!(p.mode, crate::table::Mode::Merge { .. }) {
            return Err(RunError::Usage(
                "--wap-branch does not take a merge: a merge's snapshot rewrites files that hold other slices' rows, so the branch does not hold this output alone. Audit a merge before its commit (--expect / --audit-module without --wap-branch)".into(),
            ));
        }
        let branch = match named {
            Some(name) => name.clone(),
            None => crate::table::default_branch(&p.slice.id),
        };
        if named.is_some() {
            crate::table::check_branch_name(&branch).map_err(RunError::Usage)?;
        }
        table.check_branch(&branch, &p.slice.id)?;
        Ok(Some(branch))
    }

    /// The transform: the native baseline when one was given, else the
    /// identified module's compiled code (from the cache), instantiated.
    fn instance(
        &mut self,
        sandbox: &crate::sandbox::Sandbox,
        module: &crate::sandbox::ModuleId,
        timings: &mut super::Timings,
    ) -> Result<Box<dyn Transformer>, RunError> {
        Ok(match self.native.take() {
            Some(make) => make(),
            None => {
                let t = std::time::Instant::now();
                let compiled = sandbox.load_identified(module)?;
                timings.load_ms += super::ms(t);
                Box::new(sandbox.instantiate(&compiled)?)
            }
        })
    }

    /// The module's file name, as the guest's log lines are prefixed.
    fn module_name(&self) -> String {
        self.module
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    }
}

/// Where the output goes. To the table's data files, written by a task
/// while the reader thread decodes ahead and the guest runs: three stages,
/// memory O(batch + two inputs' private copies + one 32 MiB data file +
/// delta-rs' upload buffers), per run (a backfill's jobs each have
/// theirs). A merge reads its output whole and an audit module reads it
/// before anything is written: those stage it on local disk first (a
/// writer thread, the same overlap).
fn landing_for(
    rt: &tokio::runtime::Runtime,
    table: &crate::table::Table,
    p: &super::plan::Planned,
) -> Result<(Landing, Option<tempfile::TempDir>), RunError> {
    let merge = matches!(p.mode, crate::table::Mode::Merge { .. });
    if p.audit.is_none() && !merge && table.writes_ahead() {
        return Ok((
            Landing::Table(table.data_writer(rt, &p.mode, p.schema_change)?),
            None,
        ));
    }
    let (dir, stager) = stage()?;
    Ok((Landing::Staged(stager), Some(dir)))
}

/// The execution's end: the output completed only when the transform
/// succeeded (else the writer stops without completing its file and
/// deletes what it wrote; a writer that stopped by itself is asked why:
/// the guest only saw it stop). `shown` runs once the writer is done
/// (the progress bar and the guest's log), before any error is returned.
fn complete(
    executed: Result<Outcome, ExecError>,
    landing: Landing,
    failed: Option<RunError>,
    shown: impl FnOnce(),
) -> Result<(Outcome, Result<Landed, RunError>), RunError> {
    let landed = match (&executed, &failed) {
        (Ok(_), None) | (Err(ExecError::Sink(_)), None) => Some(landing.finish()),
        _ => {
            landing.abort();
            None
        }
    };
    shown();
    if let Some(e) = failed {
        return Err(e);
    }
    match (executed, landed) {
        (Err(ExecError::Sink(_)), Some(Err(e))) => Err(e),
        (Err(e), _) => Err(e.into()),
        (Ok(outcome), Some(landed)) => Ok((outcome, landed)),
        (Ok(_), None) => Err(RunError::Io {
            what: "completing the output".into(),
            source: std::io::Error::other("the output writer was stopped"),
        }),
    }
}
