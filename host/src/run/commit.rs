//! Steps 5 and 6: the manifest and the modules it names stored beside the
//! table before the commit names them, then the output committed only
//! when its digest is new for the slice.

use std::time::Instant;

use super::land::Executed;
use super::plan::Planned;
use super::record::{manifest_path, module_path};
use super::{Clock, RunError, RunOutcome, Timings, ms};
use crate::digest::Digest;
use crate::manifest::{Manifest, RunResult};
use crate::table::{CommitRequest, Table};

/// The run's manifest: its spec, the run key the plan computed from it,
/// and what the execution produced.
pub(super) fn manifest_of(p: &Planned, ex: &mut Executed) -> Manifest {
    let o = &ex.outcome;
    Manifest {
        run_key: p.run_key.clone(),
        spec: p.spec.clone(),
        result: RunResult {
            rows_in: o.rows_in,
            rows_out: o.rows_out,
            output_digest: o.output_digest.clone(),
            fuel: o.fuel,
            columns: o.columns.clone(),
            dictionaries: o.dictionaries.clone(),
            audits: std::mem::take(&mut ex.audits),
        },
    }
}

/// Store the manifest and its modules, then commit the output. Runs of
/// one process commit to a table one at a time (a backfill's slices): a
/// MERGE reads the whole table, so a neighbour's commit landing during it
/// would make it retry; other processes and hosts still race safely.
pub(super) fn commit(
    rt: &tokio::runtime::Runtime,
    table: &mut Table,
    p: Planned,
    ex: Executed,
    manifest: &Manifest,
    clock: &Clock,
    timings: &mut Timings,
) -> Result<(Digest, RunOutcome), RunError> {
    let manifest_digest = manifest.digest();
    let t = Instant::now();
    let progress = crate::progress::step("committing");
    rt.block_on(store(table, &p, manifest, &manifest_digest))?;
    crate::fault::point("before-commit");
    let lock = crate::table::commit_lock(table.url());
    let one_at_a_time = lock.lock().unwrap_or_else(|e| e.into_inner());
    clock.check("waiting to commit")?;
    let commit = rt.block_on(table.commit(CommitRequest {
        slice: &p.slice.id,
        mode: &p.mode,
        output_digest: &ex.outcome.output_digest,
        run_key: &manifest.run_key,
        manifest_digest: &manifest_digest,
        output: ex.landed.into_output(),
        schema: ex.outcome.output_schema.clone(),
        progress: p.progress,
    }))?;
    drop(one_at_a_time);
    timings.commit_ms = ms(t);
    progress.finish();
    Ok((manifest_digest, commit))
}

/// The modules the manifest names, kept beside the table (the audit
/// module too, so its verdict can be re-run), and the manifest.
async fn store(
    table: &Table,
    p: &Planned,
    manifest: &Manifest,
    manifest_digest: &Digest,
) -> Result<(), RunError> {
    let audit_module = p.audit.as_ref().map(|(m, _)| m);
    for m in std::iter::once(&p.module).chain(audit_module) {
        let mod_path = module_path(&m.digest);
        if table.get_sidecar(&mod_path).await?.is_none() {
            table.put_sidecar(&mod_path, m.bytes.to_vec()).await?;
        }
    }
    table
        .put_sidecar(&manifest_path(manifest_digest), manifest.to_bytes())
        .await?;
    Ok(())
}
