//! A queued run executed for its tenant on a worker thread, and the
//! record of how it ended (`{kind, version, runKey, manifest, rowsIn,
//! rowsOut, outputDigest}`, or `{kind, message}` worded relative to the
//! tenant's root). A panic in a run fails the run, never the service.

use std::panic::AssertUnwindSafe;

use serde_json::{Value, json};

use super::queue::RunRequest;
use super::reply::Refusal;
use super::request::build_run;
use super::tenant::{Tenant, scrub};

/// A run's result as recorded (`{kind, version, runKey, manifest,
/// rowsIn, rowsOut, outputDigest}`).
fn result_of(
    kind: &str,
    version: Option<u64>,
    manifest: &crate::manifest::Manifest,
    digest: &crate::digest::Digest,
    envelope: Option<&crate::digest::Digest>,
) -> Value {
    let mut v = json!({
        "kind": kind,
        "version": version,
        "runKey": manifest.run_key.to_string(),
        "manifest": digest.to_string(),
        "rowsIn": manifest.result.rows_in,
        "rowsOut": manifest.result.rows_out,
        "outputDigest": manifest.result.output_digest.to_string(),
    });
    // Signed (the tenant's or the service's key): the envelope
    // `GET /v1/runs/{id}/attestation` serves.
    if let Some(e) = envelope {
        v["envelope"] = e.to_string().into();
    }
    v
}

/// Whether tenant `t`'s table holds request `r` committed: the run
/// planned (inputs pinned and hashed, nothing executed or written) has a
/// run key that the slice's current commit has. Its result (kind `memo`, as a rerun would say), else `None`,
/// also when the table cannot be read.
pub fn settle(t: &Tenant, r: &RunRequest) -> Option<Value> {
    let explained = std::panic::catch_unwind(AssertUnwindSafe(|| {
        build_run(t, r).ok()?.explain(&t.sandbox).ok()
    }))
    .ok()
    .flatten()?;
    // The slice's current commit (app transactions, not sidecars) names a
    // manifest of this run key: committed. Not the memo index, which is
    // written after the log entry, in the very window a crash leaves.
    let (version, manifest) = explained.current?;
    if manifest.run_key != explained.run_key {
        return None;
    }
    Some(result_of(
        "memo",
        Some(version),
        &manifest,
        &manifest.digest(),
        // Settled from the table after a restart: the run that committed
        // it signed it, but this record takes no sidecar's word for that.
        None,
    ))
}

/// Execute one run for tenant `t`: `Ok({kind, version, runKey, manifest,
/// rowsIn, rowsOut})` or `Err({kind, message})`. A panic in the run's work
/// fails the run, never the service.
pub fn execute(t: &Tenant, r: &RunRequest) -> Result<Value, Value> {
    // Messages name objects relative to the root: the host's layout and
    // other tenants stay out of them.
    let fail = |kind: &str, m: String| json!({"kind": kind, "message": scrub(t, &m)});
    let run = build_run(t, r).map_err(|Refusal(_, m)| fail("input", m))?;
    let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| run.execute(&t.sandbox)));
    match outcome {
        Err(_) => Err(fail(
            "bug",
            "the run panicked inside idem (a bug; the service goes on): nothing was committed"
                .into(),
        )),
        Ok(Err(e)) => Err(fail(e.kind().name(), e.to_string())),
        Ok(Ok(report)) => Ok(result_of(
            report.outcome.name(),
            report.outcome.version(),
            &report.manifest,
            &report.manifest_digest,
            report.envelope.as_ref().map(|(d, _)| d),
        )),
    }
}
