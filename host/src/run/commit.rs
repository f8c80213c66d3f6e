//! Steps 5 and 6: the manifest and the modules it names stored beside the
//! table before the commit names them, then the output committed only
//! when its digest is new for the slice.

use std::time::Instant;

use super::land::Executed;
use super::plan::Planned;
use super::record::{manifest_path, module_path};
use super::{Clock, RunError, RunOutcome, Timings, ms};
use crate::digest::Digest;
use crate::manifest::{Manifest, Provenance, RunResult};
use crate::table::{CommitRequest, Table};

/// The run's manifest: its spec, the run key the plan computed from it,
/// what the execution produced, and the imports its modules were admitted
/// with (a v2 manifest's provenance).
pub(super) fn manifest_of(p: &Planned, ex: &mut Executed) -> Manifest {
    let provenance = Provenance {
        imports: p.module.imports.clone(),
        audit_imports: p.audit.as_ref().map(|(m, _)| m.imports.clone()),
    };
    let o = &ex.outcome;
    Manifest {
        provenance: (!crate::fault::writes_v1_manifests()).then_some(provenance),
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
            rejected_rows: ex.rejected,
        },
    }
}

/// What [`commit`] did: the manifest's digest, its envelope's (when
/// signed), and the commit's outcome.
pub(super) struct Committed {
    pub(super) manifest_digest: Digest,
    pub(super) envelope: Option<Digest>,
    pub(super) outcome: RunOutcome,
}

/// The manifest as it is stored: its bytes, and the signed envelope of
/// them when the run has a key ([`super::sign::seal`]).
pub(super) struct Sealed {
    pub(super) bytes: Vec<u8>,
    pub(super) digest: Digest,
    pub(super) envelope: Option<Digest>,
}

/// Store the manifest and its modules (its envelope is stored already),
/// then commit the output. Runs of one process commit to a table one at a time (a backfill's slices): a
/// MERGE reads the whole table, so a neighbour's commit landing during it
/// would make it retry; other processes and hosts still race safely.
pub(super) fn commit(
    rt: &tokio::runtime::Runtime,
    table: &mut Table,
    p: Planned,
    ex: Executed,
    sealed: Sealed,
    clock: &Clock,
    timings: &mut Timings,
) -> Result<Committed, RunError> {
    let Sealed {
        bytes,
        digest: manifest_digest,
        envelope,
    } = sealed;
    let t = Instant::now();
    let progress = crate::progress::step("committing");
    rt.block_on(store(table, &p, bytes, &manifest_digest))?;
    crate::fault::point("before-commit");
    let lock = crate::table::commit_lock(table.url());
    let one_at_a_time = lock.lock().unwrap_or_else(|e| e.into_inner());
    clock.check("waiting to commit")?;
    let commit = rt.block_on(table.commit(CommitRequest {
        slice: &p.slice.id,
        mode: &p.mode,
        output_digest: &ex.outcome.output_digest,
        run_key: &p.run_key,
        manifest_digest: Some(&manifest_digest),
        envelope_digest: envelope.as_ref(),
        output: ex.landed.into_output(),
        schema: ex.outcome.output_schema.clone(),
        schema_change: p.schema_change,
        progress: p.progress,
        branch: None,
    }))?;
    drop(one_at_a_time);
    timings.commit_ms = ms(t);
    progress.finish();
    Ok(Committed {
        manifest_digest,
        envelope,
        outcome: commit,
    })
}

/// The modules the manifest names, kept beside the table (the audit
/// module too, so its verdict can be re-run), and the manifest.
pub(super) async fn store(
    table: &Table,
    p: &Planned,
    manifest: Vec<u8>,
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
        .put_sidecar(&manifest_path(manifest_digest), manifest)
        .await?;
    Ok(())
}
