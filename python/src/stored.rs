//! What a table holds, as the package returns it: a stored run
//! (`idem.show`), the run log (`idem.log`), and why a run would or would
//! not execute (`idem.explain`).

use std::collections::BTreeMap;

use idem::catalog::{Found, Holding};
use pyo3::prelude::*;

/// A stored run's manifest (`idem.show`).
#[pyclass(module = "idem", frozen, get_all)]
#[derive(Debug, Clone)]
pub struct StoredRun {
    /// Where the manifest was read, and the sha256 of its bytes.
    pub location: String,
    pub digest: String,
    /// The manifest exactly as stored (what its digest covers): JSON text.
    pub json: String,
    pub run_key: String,
    pub slice: String,
    pub output_digest: String,
    pub rows_in: u64,
    pub rows_out: u64,
    /// Which version holds its output: `current` (the slice's current
    /// commit), `superseded` (the current commit holds another output),
    /// `no-commit`, or `unknown` (the table could not be read).
    pub held: String,
    /// The version of the slice's current commit (for `current` and
    /// `superseded`).
    pub held_version: Option<u64>,
}

#[pymethods]
impl StoredRun {
    fn __repr__(&self) -> String {
        format!(
            "StoredRun(slice={:?}, run_key={:?}, held={:?}, held_version={:?})",
            self.slice, self.run_key, self.held, self.held_version
        )
    }
}

impl StoredRun {
    pub fn of(f: &Found, holding: &Holding) -> Self {
        let (held, held_version) = match holding {
            Holding::Current { version, .. } => ("current", Some(*version)),
            Holding::Superseded { version } => ("superseded", Some(*version)),
            Holding::NoCommit => ("no-commit", None),
            Holding::Unknown(_) => ("unknown", None),
        };
        let m = &f.manifest;
        StoredRun {
            location: f.location.clone(),
            digest: f.digest.as_str().into(),
            json: String::from_utf8_lossy(&f.bytes).into_owned(),
            run_key: m.run_key.as_str().into(),
            slice: m.spec.slice.id.clone(),
            output_digest: m.result.output_digest.as_str().into(),
            rows_in: m.result.rows_in,
            rows_out: m.result.rows_out,
            held: held.into(),
            held_version,
        }
    }
}

/// One run recorded for a table (`idem.log`).
#[pyclass(module = "idem", frozen, get_all)]
#[derive(Debug, Clone)]
pub struct LogEntry {
    /// Unix milliseconds at the end of the run.
    pub at_ms: u64,
    pub slice: String,
    pub run_key: String,
    pub manifest_digest: String,
    pub output_digest: String,
    /// `committed`, `unchanged` or `memo`.
    pub outcome: String,
    /// The version committed, or that holds the output.
    pub version: Option<u64>,
    pub rows: u64,
    /// Milliseconds per step: resolve, load, exec, commit.
    pub timings_ms: BTreeMap<String, u64>,
    /// Who ran it (`idem.run(origin=...)`; idem.spark's task attempts).
    pub origin: Option<String>,
    /// The run's params as canonical JSON (the first 256 bytes; `None`
    /// for runs logged before idem logged them).
    pub params: Option<String>,
}

#[pymethods]
impl LogEntry {
    fn __repr__(&self) -> String {
        format!(
            "LogEntry(slice={:?}, outcome={:?}, version={:?}, rows={})",
            self.slice, self.outcome, self.version, self.rows
        )
    }
}

impl LogEntry {
    pub fn of(e: &idem::run::LogEntry) -> Self {
        let t = &e.timings;
        LogEntry {
            at_ms: e.at_ms,
            slice: e.slice.clone(),
            run_key: e.run_key.as_str().into(),
            manifest_digest: e.manifest.as_str().into(),
            output_digest: e.output_digest.as_str().into(),
            outcome: e.outcome.clone(),
            version: e.version,
            rows: e.rows,
            timings_ms: crate::results::timings_map(t),
            origin: e.origin.clone(),
            params: e.params.clone(),
        }
    }
}

/// One field that differs between two run specs: its path, and its value
/// in each as JSON text (`null` when absent).
#[pyclass(module = "idem", frozen, get_all)]
#[derive(Debug, Clone)]
pub struct Change {
    pub field: String,
    pub before: String,
    pub after: String,
}

#[pymethods]
impl Change {
    fn __repr__(&self) -> String {
        format!("Change({}: {} -> {})", self.field, self.before, self.after)
    }
}

/// Why a run would (not) execute (`idem.explain`), or how two stored runs
/// differ.
#[pyclass(module = "idem", frozen, get_all)]
#[derive(Debug, Clone)]
pub struct Explanation {
    /// The planned run's key (or the second run's).
    pub run_key: String,
    pub slice: String,
    /// A committed run has this run key and its output is still current:
    /// `idem.run` would execute nothing.
    pub memo: bool,
    /// The slice's current run (or the first run compared): its version
    /// (when known) and run key.
    pub current_version: Option<u64>,
    pub current_run_key: Option<String>,
    pub same_run_key: bool,
    /// The run-spec fields that differ from the current run.
    pub changes: Vec<Change>,
}

#[pymethods]
impl Explanation {
    fn __repr__(&self) -> String {
        format!(
            "Explanation(memo={}, same_run_key={}, changes={})",
            self.memo,
            self.same_run_key,
            self.changes.len()
        )
    }
}

impl Explanation {
    /// A planned run against its slice's current run.
    pub fn planned(e: &idem::run::Explanation) -> Self {
        let changes = e.changes();
        Explanation {
            run_key: e.run_key.as_str().into(),
            slice: e.planned.slice.id.clone(),
            memo: e.memo.is_some(),
            current_version: e.current.as_ref().map(|(v, _)| *v),
            current_run_key: e.current.as_ref().map(|(_, m)| m.run_key.as_str().into()),
            same_run_key: e.same_run_key(),
            changes: changes.iter().map(Change::of).collect(),
        }
    }

    /// Stored run `b` against stored run `a`.
    pub fn compared(a: &Found, b: &Found) -> Self {
        let changes = idem::explain::diff(&a.manifest.spec, &b.manifest.spec);
        Explanation {
            run_key: b.manifest.run_key.as_str().into(),
            slice: b.manifest.spec.slice.id.clone(),
            memo: false,
            current_version: None,
            current_run_key: Some(a.manifest.run_key.as_str().into()),
            same_run_key: a.manifest.run_key == b.manifest.run_key,
            changes: changes.iter().map(Change::of).collect(),
        }
    }
}

impl Change {
    fn of(c: &idem::explain::Change) -> Self {
        Change {
            field: c.field.clone(),
            before: c.before.to_string(),
            after: c.after.to_string(),
        }
    }
}
