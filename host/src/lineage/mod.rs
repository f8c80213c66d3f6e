//! OpenLineage events of runs (spec 2-0-2): START when a run is planned,
//! COMPLETE (committed, unchanged or memo: the `idem_manifest` facet says
//! which) or FAIL when it ends, delivered to a folder or an HTTP receiver
//! ([`transport`]). The run id is derived from the run key, so the
//! retries and twins of a run are one run to a lineage store. Emitting is
//! a step of the run ([`crate::run::Run::lineage`]) and never fails it:
//! an event not delivered is reported on stderr.

mod event;
mod transport;

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};

pub use event::{JobName, Parent, dataset, run_id};
pub use transport::{TOKEN_ENV, Transport};

use crate::digest::Digest;
use crate::manifest::RunSpec;
use crate::run::{RunError, RunReport};

/// Where a process's runs send their events, and their job namespace.
#[derive(Debug)]
pub struct Lineage {
    transport: Transport,
    namespace: String,
}

impl Lineage {
    /// Events to `target` (`file:///DIR` or `http(s)://HOST/PATH`), jobs
    /// in `namespace` (default `idem`).
    pub fn new(target: &str, namespace: Option<String>) -> Result<Self, RunError> {
        Ok(Lineage {
            transport: Transport::parse(target).map_err(RunError::Usage)?,
            namespace: namespace.unwrap_or_else(|| "idem".into()),
        })
    }

    /// The job that writes `table`.
    pub fn job(&self, table: &str) -> JobName {
        JobName {
            namespace: self.namespace.clone(),
            name: table.to_string(),
        }
    }

    /// A parent run (a backfill's, a pipeline's) named `name`, with a
    /// fresh id.
    pub fn parent(&self, name: &str) -> Parent {
        let mut seed = [0u8; 32];
        let _ = getrandom::fill(&mut seed);
        Parent {
            run_id: run_id(&Digest::of_bytes(&seed)),
            job: self.job(name),
        }
    }

    fn send(&self, event: &serde_json::Value) {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let kind = event["eventType"].as_str().unwrap_or("OTHER");
        let id = event["run"]["runId"].as_str().unwrap_or("run");
        // Twins of a run share its id (and may share a pid, in
        // containers): the process's random tag keeps their files apart.
        let name = format!(
            "{:015}-{}-{:06}-{id}-{kind}.json",
            now_ms(),
            process_tag(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        let bytes = serde_json::to_vec(event).unwrap_or_default();
        if let Err(why) = self.transport.send(&name, bytes) {
            tracing::warn!(
                "OpenLineage {kind} event of run {id} not delivered to {}: {why}; the run goes on",
                self.transport.target()
            );
        }
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// 8 hex digits drawn once per process.
fn process_tag() -> &'static str {
    static TAG: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TAG.get_or_init(|| {
        let mut b = [0u8; 4];
        let _ = getrandom::fill(&mut b);
        hex::encode(b)
    })
}

/// Now, as RFC 3339 UTC with milliseconds.
fn now() -> String {
    rfc3339(now_ms() as i64)
}

/// Milliseconds since the epoch as RFC 3339 UTC with milliseconds.
pub(crate) fn rfc3339(ms: i64) -> String {
    let (days, rest) = (ms.div_euclid(86_400_000), ms.rem_euclid(86_400_000));
    format!(
        "{}T{:02}:{:02}:{:02}.{:03}Z",
        crate::run::batch::date_of(days),
        rest / 3_600_000,
        rest / 60_000 % 60,
        rest / 1000 % 60,
        rest % 1000
    )
}

/// One run's emissions: what it started as, so that its end is told with
/// the same run id and inputs.
pub struct Emitter<'a> {
    lineage: Option<&'a Lineage>,
    parent: Option<&'a Parent>,
    /// The table as the run was asked for (before its plan names it).
    table: String,
    started: RefCell<Option<(String, RunSpec)>>,
    columns: RefCell<Vec<(String, String)>>,
    /// The run committed (or found its output current): a failure after
    /// it (writing the run log, say) is still a COMPLETE.
    committed: RefCell<Option<RunReport>>,
}

impl<'a> Emitter<'a> {
    /// The emitter of a run into `table` (silent without `lineage`).
    pub fn new(lineage: Option<&'a Lineage>, parent: Option<&'a Parent>, table: &str) -> Self {
        Emitter {
            lineage,
            parent,
            table: table.to_string(),
            started: RefCell::new(None),
            columns: RefCell::new(Vec::new()),
            committed: RefCell::new(None),
        }
    }

    /// START: the run is planned.
    pub fn started(&self, spec: &RunSpec, key: &Digest) {
        let Some(l) = self.lineage else { return };
        let job = l.job(&spec.target.table);
        l.send(&event::start(&now(), &job, self.parent, spec, key));
        *self.started.borrow_mut() = Some((run_id(key), spec.clone()));
    }

    /// The table's columns after the run (the COMPLETE's schema).
    pub fn table_columns(&self, schema: Option<arrow::datatypes::SchemaRef>) {
        if self.lineage.is_none() {
            return;
        }
        if let Some(s) = schema {
            *self.columns.borrow_mut() = s
                .fields()
                .iter()
                .map(|f| (f.name().clone(), f.data_type().to_string()))
                .collect();
        }
    }

    /// The output is committed (or found current): what ends the run now
    /// is a COMPLETE whatever follows.
    pub fn committed(&self, report: &RunReport) {
        if self.lineage.is_some() {
            *self.committed.borrow_mut() = Some(report.clone());
        }
    }

    /// A panic inside the run (a bug): FAIL, so the START is not left open.
    pub fn panicked(&self) {
        self.ended(&Err(RunError::Usage(
            "idem panicked during the run (a bug in idem; the run's own outcome is unknown)".into(),
        )));
    }

    /// COMPLETE or FAIL (after a START, made up from the request when the
    /// run failed before its plan).
    pub fn ended(&self, result: &Result<RunReport, RunError>) {
        let Some(l) = self.lineage else { return };
        let at = now();
        let committed = self.committed.borrow().clone();
        let result = match (result, committed) {
            (Err(_), Some(r)) => &Ok(r),
            _ => result,
        };
        match result {
            Ok(r) => {
                let end = event::Ended {
                    manifest: &r.manifest,
                    manifest_digest: &r.manifest_digest,
                    envelope_digest: r.envelope.as_ref().map(|(d, _)| d),
                    outcome: r.outcome.name(),
                    version: r.outcome.version(),
                    columns: self.columns.take(),
                };
                let job = l.job(&r.manifest.spec.target.table);
                l.send(&event::complete(&at, &job, self.parent, &end));
            }
            // Nothing new in an append-only source: nothing ran.
            Err(RunError::UpToDate { .. }) => {}
            Err(e) => {
                let message = crate::text::clip_str(&e.to_string(), 4096);
                let started = self.started.borrow();
                let (id, spec) = match started.as_ref() {
                    Some((id, spec)) => (id.clone(), Some(spec)),
                    None => {
                        let id = run_id(&Digest::of_bytes(
                            format!("{}\n{}\n{message}", self.table, now_ms()).as_bytes(),
                        ));
                        let job = l.job(&self.table);
                        l.send(&event::start_unplanned(&at, &job, self.parent, &id));
                        (id, None)
                    }
                };
                let table = spec.map_or(self.table.as_str(), |s| s.target.table.as_str());
                let job = l.job(table);
                let kind = e.kind().name();
                l.send(&event::fail(
                    &at,
                    &job,
                    self.parent,
                    &id,
                    spec,
                    kind,
                    &message,
                ));
            }
        }
    }
}
