//! What the package's calls return: plain, frozen result objects with the
//! fields the CLI's `--json` output has, in Python's spelling.

use std::collections::BTreeMap;

use idem::backfill::Status;
use idem::run::Timings;

use pyo3::prelude::*;

/// One run's result (`idem.run`).
#[pyclass(module = "idem", frozen, get_all)]
#[derive(Debug, Clone)]
pub struct RunResult {
    /// `committed`, `unchanged`, `memo`, or `up-to-date` (a `next` slice
    /// with no new object).
    pub outcome: String,
    /// The table version that holds the slice's output (committed now, or
    /// earlier for unchanged and memo).
    pub version: Option<u64>,
    /// The slice id.
    pub slice: Option<String>,
    /// sha256 of the run spec.
    pub run_key: Option<String>,
    /// The logical digest of the output rows.
    pub output_digest: Option<String>,
    /// The stored manifest's URL and digest.
    pub manifest: Option<String>,
    pub manifest_digest: Option<String>,
    /// The manifest's signed DSSE envelope (`sign_key`): its URL and digest.
    pub envelope: Option<String>,
    pub envelope_digest: Option<String>,
    /// Input and output rows.
    pub rows_in: Option<u64>,
    pub rows_out: Option<u64>,
    /// Why an output that was already current was committed again
    /// (another writer had changed the slice's rows).
    pub drift: Option<String>,
    /// Another host committed the same output first.
    pub raced: bool,
    /// Milliseconds per step: resolve, load, exec, commit.
    pub timings_ms: BTreeMap<String, u64>,
    /// For `up-to-date`: the source prefix and the last object consumed.
    pub source: Option<String>,
    pub through: Option<String>,
}

#[pymethods]
impl RunResult {
    fn __repr__(&self) -> String {
        format!(
            "RunResult(outcome={:?}, slice={:?}, version={:?}, rows_out={:?}, output_digest={:?})",
            self.outcome, self.slice, self.version, self.rows_out, self.output_digest
        )
    }
}

impl RunResult {
    pub fn of(r: &idem::run::RunReport) -> Self {
        let (drift, raced) = (r.outcome.drift().map(String::from), r.outcome.raced());
        let t = &r.timings_ms;
        let m = &r.manifest;
        RunResult {
            outcome: r.outcome.name().into(),
            version: r.outcome.version(),
            slice: Some(m.spec.slice.id.clone()),
            run_key: Some(m.run_key.as_str().into()),
            output_digest: Some(m.result.output_digest.as_str().into()),
            manifest: Some(r.manifest_url.clone()),
            manifest_digest: Some(r.manifest_digest.as_str().into()),
            envelope: r.envelope.as_ref().map(|(_, url)| url.clone()),
            envelope_digest: r.envelope.as_ref().map(|(d, _)| d.as_str().into()),
            rows_in: Some(m.result.rows_in),
            rows_out: Some(m.result.rows_out),
            drift,
            raced,
            timings_ms: timings_map(t),
            source: None,
            through: None,
        }
    }

    pub fn up_to_date(source: String, through: Option<String>) -> Self {
        RunResult {
            outcome: "up-to-date".into(),
            version: None,
            slice: None,
            run_key: None,
            output_digest: None,
            manifest: None,
            manifest_digest: None,
            envelope: None,
            envelope_digest: None,
            rows_in: None,
            rows_out: None,
            drift: None,
            raced: false,
            timings_ms: BTreeMap::new(),
            source: Some(source),
            through,
        }
    }
}

/// One slice of a backfill.
#[pyclass(module = "idem", frozen, get_all)]
#[derive(Debug, Clone)]
pub struct BackfillSlice {
    /// The slice's date (its first level's value: `2026-10-01` of
    /// `date=2026-10-01/hour=07`).
    pub date: String,
    /// The slice id (`date=2026-10-01`, `date=2026-10-01/hour=07`).
    pub slice: String,
    /// `committed`, `unchanged`, `memo`, `missing`, `failed` or
    /// `not-started`.
    pub outcome: String,
    /// The version that holds the slice's output.
    pub version: Option<u64>,
    pub rows_in: u64,
    pub rows_out: u64,
    /// Wall-clock seconds of this slice.
    pub seconds: f64,
    /// For `failed` and `missing`: the error's kind (`input`, `guest`,
    /// `storage`, `check`) and message.
    pub error_kind: Option<String>,
    pub error: Option<String>,
}

#[pymethods]
impl BackfillSlice {
    fn __repr__(&self) -> String {
        format!(
            "BackfillSlice(date={:?}, outcome={:?}, version={:?}, rows_out={})",
            self.date, self.outcome, self.version, self.rows_out
        )
    }
}

impl BackfillSlice {
    pub fn of(r: &idem::backfill::SliceResult) -> Self {
        let (outcome, error_kind, error) = status_fields(&r.status, "not-started");
        // The batch is keyed by slice id.
        let date = idem::slice::Partition::from_spelled(&r.date)
            .and_then(|p| p.levels().first().map(|(_, v)| v.clone()))
            .unwrap_or_else(|| r.date.clone());
        BackfillSlice {
            date,
            slice: r.date.clone(),
            outcome: outcome.into(),
            version: match &r.status {
                Status::Done(o) => o.version(),
                _ => None,
            },
            rows_in: r.rows_in,
            rows_out: r.rows,
            seconds: r.ms as f64 / 1000.0,
            error_kind,
            error,
        }
    }
}

/// A backfill's result: every slice, and whether all of them ended well
/// (`missing` counts as failed unless `skip_missing`).
#[pyclass(module = "idem", frozen, get_all)]
#[derive(Debug, Clone)]
pub struct BackfillResult {
    pub slices: Vec<BackfillSlice>,
    pub failed: usize,
    pub ok: bool,
}

#[pymethods]
impl BackfillResult {
    fn __repr__(&self) -> String {
        format!(
            "BackfillResult(slices={}, failed={}, ok={})",
            self.slices.len(),
            self.failed,
            self.ok
        )
    }
}

/// `idem.verify`: a manifest re-run and compared.
#[pyclass(module = "idem", frozen, get_all)]
#[derive(Debug, Clone)]
pub struct Verification {
    pub manifest: String,
    /// The re-run produced the manifest's output digest (and every check
    /// before it passed).
    pub matched: bool,
    pub output_digest: Option<String>,
    /// Why not, when it did not match.
    pub reason: Option<String>,
    /// What was checked, line by line.
    pub notes: Vec<String>,
}

#[pymethods]
impl Verification {
    fn __repr__(&self) -> String {
        format!(
            "Verification(matched={}, manifest={:?}, reason={:?})",
            self.matched, self.manifest, self.reason
        )
    }
}

/// One slice's audit.
#[pyclass(module = "idem", frozen, get_all)]
#[derive(Debug, Clone)]
pub struct AuditSlice {
    pub slice: String,
    /// The version whose commit made the slice's output current.
    pub version: u64,
    /// `proven`, `chain-proven` (merge slices) or `failed`.
    pub proof: String,
    /// What was checked, or the first disagreement.
    pub detail: String,
}

#[pymethods]
impl AuditSlice {
    fn __repr__(&self) -> String {
        format!(
            "AuditSlice(slice={:?}, version={}, proof={:?})",
            self.slice, self.version, self.proof
        )
    }
}

/// `idem.audit`: the table proven slice by slice.
#[pyclass(module = "idem", frozen, get_all)]
#[derive(Debug, Clone)]
pub struct AuditReport {
    pub table: String,
    /// No slice failed.
    pub proven: bool,
    pub slices: Vec<AuditSlice>,
}

#[pymethods]
impl AuditReport {
    fn __repr__(&self) -> String {
        format!(
            "AuditReport(table={:?}, proven={}, slices={})",
            self.table,
            self.proven,
            self.slices.len()
        )
    }
}

/// A step's milliseconds by name (resolve, load, exec, commit): what
/// `RunResult` and `LogEntry` report.
pub fn timings_map(t: &Timings) -> BTreeMap<String, u64> {
    BTreeMap::from([
        ("resolve".into(), t.resolve_ms),
        ("load".into(), t.load_ms),
        ("exec".into(), t.exec_ms),
        ("commit".into(), t.commit_ms),
    ])
}

/// How a slice of a batch ended, as a backfill slice and a pipeline stage
/// report it: its outcome (`not_started`: the word for a slice that never
/// ran), and for a failed or missing one its error's kind and message.
pub fn status_fields(
    s: &Status,
    not_started: &'static str,
) -> (&'static str, Option<String>, Option<String>) {
    match s {
        Status::Done(o) => (o.name(), None, None),
        Status::Missing(e) => (
            "missing",
            Some(idem::kind::Kind::Input.name().into()),
            Some(e.clone()),
        ),
        Status::Failed(e, k) => ("failed", Some(k.name().into()), Some(e.clone())),
        Status::NotStarted => (not_started, None, None),
    }
}
