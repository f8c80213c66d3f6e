//! The calls that read what a table holds: `verify` (re-run a manifest),
//! `audit` (prove a table), `show` (a stored run) and `log` (the runs
//! recorded), each the library's own, with the GIL released.

use pyo3::prelude::*;

use crate::errors::{self, run_error};
use crate::limits::{self, Limits};
use crate::results::{AuditReport, AuditSlice, Verification};
use crate::stored::{LogEntry, StoredRun};

/// Re-run a stored manifest (path or URL) and compare its output digest.
#[pyfunction]
#[pyo3(signature = (manifest, limits=None, allow_engine=false, keys=Vec::new()))]
pub fn verify(
    py: Python<'_>,
    manifest: String,
    limits: Option<Limits>,
    allow_engine: bool,
    keys: Vec<std::path::PathBuf>,
) -> PyResult<Verification> {
    crate::process::enter()?;
    py.detach(move || {
        let keys = public_keys(&keys)?;
        let bytes = idem::storage::read_location(&manifest)
            .map_err(|e| errors::raise_in(e.kind(), &format!("reading manifest {manifest}"), &e))?;
        let sandbox = limits::sandbox(limits.as_ref())?;
        let url = idem::storage::locate(&manifest).map_err(|e| errors::raise(e.kind(), &e))?;
        let (_, file_name) = idem::storage::split_last(&url);
        let name = Some(file_name.as_str()).filter(|n| !n.is_empty());
        let check = idem::audit::verify_manifest(name, &bytes, &sandbox, allow_engine, &keys)
            .map_err(run_error)?;
        let (matched, output_digest, reason) = match &check.verdict {
            idem::run::Verdict::Match { output_digest } => {
                (true, Some(output_digest.as_str().to_string()), None)
            }
            idem::run::Verdict::Mismatch(why) => (false, None, Some(why.clone())),
        };
        Ok(Verification {
            manifest,
            matched,
            output_digest,
            reason,
            notes: check.notes,
        })
    })
}

/// Prove a table slice by slice (or one slice); with `replay`, re-run
/// each manifest too.
#[pyfunction]
#[pyo3(signature = (table, slice=None, replay=false, limits=None, keys=Vec::new()))]
pub fn audit(
    py: Python<'_>,
    table: String,
    slice: Option<String>,
    replay: bool,
    limits: Option<Limits>,
    keys: Vec<std::path::PathBuf>,
) -> PyResult<AuditReport> {
    crate::process::enter()?;
    py.detach(move || {
        let keys = public_keys(&keys)?;
        let sandbox = if replay {
            Some(limits::sandbox(limits.as_ref())?)
        } else {
            None
        };
        let opts = idem::audit::AuditOptions {
            slice,
            replay: sandbox.as_ref(),
            keys: &keys,
        };
        let report = idem::audit::audit(&table, &opts).map_err(run_error)?;
        let slices: Vec<AuditSlice> = report
            .iter()
            .map(|s| AuditSlice {
                slice: s.slice.clone(),
                version: s.version,
                proof: s.proof.name().into(),
                detail: s.detail.clone(),
            })
            .collect();
        Ok(AuditReport {
            proven: slices.iter().all(|s| s.proof != "failed"),
            table,
            slices,
        })
    })
}

/// A stored run: a manifest file (path or URL), `TABLE#SLICE` (the
/// slice's current run), or a run key or manifest digest (8+ hex digits
/// will do) with `table`.
#[pyfunction]
#[pyo3(signature = (run, table=None))]
pub fn show(py: Python<'_>, run: String, table: Option<String>) -> PyResult<StoredRun> {
    crate::process::enter()?;
    py.detach(move || {
        let found = idem::catalog::find(&run, table.as_deref()).map_err(run_error)?;
        let holding = idem::catalog::holding(&found);
        Ok(StoredRun::of(&found, &holding))
    })
}

/// The runs recorded for a table, oldest first (those that ended at or
/// after `since_ms`, Unix milliseconds).
#[pyfunction]
#[pyo3(signature = (table, since_ms=0))]
pub fn log(py: Python<'_>, table: String, since_ms: u64) -> PyResult<Vec<LogEntry>> {
    crate::process::enter()?;
    py.detach(move || {
        let entries = idem::run::run_log_since(&table, since_ms).map_err(run_error)?;
        Ok(entries.iter().map(LogEntry::of).collect())
    })
}

/// Public key files (SPKI PEM), read: an unreadable one is an InputError.
fn public_keys(paths: &[std::path::PathBuf]) -> PyResult<Vec<idem::attest::PublicKey>> {
    paths
        .iter()
        .map(|p| idem::attest::PublicKey::from_file(p).map_err(|e| errors::raise(e.kind(), &e)))
        .collect()
}
