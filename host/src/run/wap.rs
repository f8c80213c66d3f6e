//! Steps 5 and 6 with write-audit-publish on a branch (Iceberg): the
//! output committed to a branch, never to `main`; the expectations and
//! the audit module read the branch's rows of the slice (what readers
//! will see, not the staged file); the manifest, with their verdicts,
//! stored and signed; then `main` fast-forwarded to the branch in one
//! catalog swap. A failed audit leaves `main` untouched and the branch
//! there to inspect; `main` moving in between writes and audits again.

use std::time::Instant;

use super::commit::{Committed, store};
use super::drive::Job;
use super::land::{Executed, Landed};
use super::plan::Planned;
use super::resolve::Pin;
use super::{Clock, RunError, Timings, ms};
use crate::expect::{ExpectError, Verdict};
use crate::manifest::Manifest;
use crate::sandbox::Sandbox;
use crate::table::{Branched, CommitRequest, Output, Publish, Table, TableError};

/// How many times the output is written and audited again when `main`
/// moves before the publish.
const MAX_REBRANCH: usize = 4;

/// What one write-audit-publish needs besides the run's own state.
pub(super) struct Wap<'a> {
    /// The table as the user named it (what the messages say).
    pub(super) table: &'a str,
    pub(super) sandbox: &'a Sandbox,
    pub(super) branch: &'a str,
    pub(super) job: Job,
    pub(super) expectations: &'a [crate::expect::Expectation],
    pub(super) signer: Option<&'a std::sync::Arc<crate::attest::SigningKey>>,
}

/// Write the output to the branch, audit the branch's rows, publish:
/// the manifest (with the verdicts) and what the commit did. This
/// process's commits to the table wait meanwhile (as for a commit): the
/// audit is part of it.
pub(super) fn write_audit_publish(
    rt: &tokio::runtime::Runtime,
    table: &mut Table,
    p: &Planned,
    mut ex: Executed,
    w: &Wap<'_>,
    clock: &Clock,
    timings: &mut Timings,
) -> Result<(Manifest, Committed), RunError> {
    let t = Instant::now();
    let lock = crate::table::commit_lock(table.url());
    let _one_at_a_time = lock.lock().unwrap_or_else(|e| e.into_inner());
    let mut tries = 0;
    loop {
        clock.check("waiting to commit")?;
        tries += 1;
        let progress = crate::progress::step("writing to the branch");
        let written = rt.block_on(table.write_branch(request(p, &ex, w.branch)?))?;
        progress.finish();
        let pin = match (&written, table.slice_snapshot(&p.slice.id)) {
            (Ok(b), _) => Pin::Snapshot(b.snapshot),
            // Main holds this output already: the rows of the commit
            // that made it current are audited.
            (Err(_), Some(id)) => Pin::Snapshot(id),
            (Err(_), None) => Pin::Current,
        };
        ex.audits = audit(rt, p, pin, w, written.as_ref().ok())?;
        let manifest = super::commit::manifest_of(p, &mut ex);
        let sealed = super::sign::seal(rt, table, &manifest, w.signer)?;
        rt.block_on(store(table, p, sealed.bytes, &sealed.digest))?;
        crate::fault::point("before-commit");
        let outcome = match written {
            Err(outcome) => outcome,
            Ok(branched) => {
                let publish = Publish {
                    slice: &p.slice.id,
                    mode: &p.mode,
                    output_digest: &ex.outcome.output_digest,
                    manifest_digest: &sealed.digest,
                    envelope_digest: sealed.envelope.as_ref(),
                    branched: &branched,
                };
                match rt.block_on(table.publish(&publish)) {
                    Ok(outcome) => outcome,
                    Err(TableError::Conflict(why)) if tries < MAX_REBRANCH => {
                        tracing::info!("{why}: writing and auditing again");
                        continue;
                    }
                    Err(e) => return Err(e.into()),
                }
            }
        };
        timings.commit_ms = ms(t);
        let done = Committed {
            manifest_digest: sealed.digest,
            envelope: sealed.envelope,
            outcome,
        };
        return Ok((manifest, done));
    }
}

/// The commit request of the branch write: the staged output, no
/// manifest yet (the publish names it).
fn request<'a>(
    p: &'a Planned,
    ex: &'a Executed,
    branch: &'a str,
) -> Result<CommitRequest<'a>, RunError> {
    let Landed::Staged(staged) = &ex.landed else {
        return Err(RunError::Usage(
            "write-audit-publish on a branch takes a staged output".into(),
        ));
    };
    Ok(CommitRequest {
        slice: &p.slice.id,
        mode: &p.mode,
        output_digest: &ex.outcome.output_digest,
        run_key: &p.run_key,
        manifest_digest: None,
        envelope_digest: None,
        output: Output::Staged(staged.iter().cloned().collect()),
        schema: ex.outcome.output_schema.clone(),
        schema_change: p.schema_change,
        progress: None,
        branch: Some(branch),
    })
}

/// The verdicts of the expectations, then the audit module, over the
/// slice's rows at `pin` (the branch's snapshot, or the one that made
/// the output current when `main` holds it). A failure names the branch
/// left to inspect.
fn audit(
    rt: &tokio::runtime::Runtime,
    p: &Planned,
    pin: Pin,
    w: &Wap<'_>,
    branched: Option<&Branched>,
) -> Result<Vec<Verdict>, RunError> {
    let progress = crate::progress::step("auditing the branch");
    let rows = super::resolve::resolve_table(rt, &p.spec.target.table, pin, &p.slice.id)?;
    let mut checker = crate::expect::Checker::new(w.expectations);
    let reader = rows.reader(w.job.batch_rows as usize)?;
    let schema = reader.schema();
    for b in reader {
        checker.update(&b?)?;
    }
    let failed = |audits: Vec<Verdict>| match branched {
        Some(b) => RunError::Unpublished(Box::new(super::error::Unpublished {
            table: w.table.to_string(),
            slice: p.slice.id.clone(),
            branch: b.branch.clone(),
            snapshot: b.snapshot,
            failed: ExpectError::Failed(audits),
        })),
        None => ExpectError::Failed(audits).into(),
    };
    let mut audits = match checker.finish(Some(&schema)) {
        Ok(v) => v,
        Err(ExpectError::Failed(v)) => return Err(failed(v)),
        Err(e) => return Err(e.into()),
    };
    if let Some((module, params)) = &p.audit {
        // An audit module reads the output, not the side inputs.
        let job = Job {
            params: super::params_text(params),
            sides: Vec::new(),
            ..w.job.clone()
        };
        let verdict = super::staged::audit_slice(w.sandbox, module, Some(&rows), &job)?;
        let passed = verdict.passed;
        audits.push(verdict);
        if !passed {
            return Err(failed(audits));
        }
    }
    progress.finish();
    Ok(audits)
}
