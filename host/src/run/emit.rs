//! The run's OpenLineage emissions ([`crate::lineage`]): START once
//! planned, then COMPLETE or FAIL, with the same run id and inputs; a
//! step of the run around its others, never a reason for it to fail.

use std::cell::RefCell;

use crate::digest::Digest;
use crate::lineage::event;
use crate::lineage::{Lineage, Parent, now, now_ms, run_id};
use crate::manifest::RunSpec;
use crate::run::{RunError, RunReport};

/// One run's emissions: what it started as, so that its end is told with
/// the same run id and inputs.
pub(super) struct Emitter<'a> {
    lineage: Option<&'a Lineage>,
    parent: Option<&'a Parent>,
    /// The table as the run was asked for (before its plan names it).
    table: String,
    started: RefCell<Option<(String, RunSpec)>>,
    columns: RefCell<Vec<(String, String)>>,
    /// The run committed (or found its output current): a failure after
    /// it (writing the run log, say) is still a COMPLETE.
    committed: RefCell<Option<RunReport>>,
    /// Its entry among the lineage's open runs (what an interrupt aborts).
    open: RefCell<Option<u64>>,
}

impl<'a> Emitter<'a> {
    /// The emitter of a run into `table` (silent without `lineage`).
    pub(super) fn new(
        lineage: Option<&'a Lineage>,
        parent: Option<&'a Parent>,
        table: &str,
    ) -> Self {
        Emitter {
            lineage,
            parent,
            // Never a password typed into the location (it may fail to
            // parse, and then names the job).
            table: crate::table::shown_location(table),
            started: RefCell::new(None),
            columns: RefCell::new(Vec::new()),
            committed: RefCell::new(None),
            open: RefCell::new(None),
        }
    }

    /// START: the run is planned.
    pub(super) fn started(&self, spec: &RunSpec, key: &Digest) {
        let Some(l) = self.lineage else { return };
        let job = l.job(&spec.target.table);
        // Registered first: an interrupt from now on tells its end.
        *self.open.borrow_mut() = Some(l.opened(&run_id(key), self.parent, spec));
        l.send(&event::start(&now(), &job, self.parent, spec, key));
        *self.started.borrow_mut() = Some((run_id(key), spec.clone()));
    }

    /// The table's columns after the run (the COMPLETE's schema).
    pub(super) fn table_columns(&self, schema: Option<arrow::datatypes::SchemaRef>) {
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
    /// is a COMPLETE whatever follows (and what an interrupt tells).
    pub(super) fn committed(&self, report: &RunReport) {
        if let Some(l) = self.lineage {
            *self.committed.borrow_mut() = Some(report.clone());
            if let Some(token) = *self.open.borrow() {
                l.committed(
                    token,
                    self.complete(l, report, self.columns.borrow().clone()),
                );
            }
        }
    }

    fn close(&self, l: &Lineage) {
        if let Some(token) = self.open.borrow_mut().take() {
            l.closed(token);
        }
    }

    /// The COMPLETE of `report`, with the table's `columns`.
    fn complete(
        &self,
        l: &Lineage,
        r: &RunReport,
        columns: Vec<(String, String)>,
    ) -> serde_json::Value {
        let end = event::Ended {
            manifest: &r.manifest,
            manifest_digest: &r.manifest_digest,
            envelope_digest: r.envelope.as_ref().map(|(d, _)| d),
            outcome: r.outcome.name(),
            version: r.outcome.version(),
            columns,
        };
        let job = l.job(&r.manifest.spec.target.table);
        event::complete(&now(), &job, self.parent, &end)
    }

    /// A panic inside the run (a bug): FAIL, so the START is not left open.
    pub(super) fn panicked(&self) {
        self.ended(&Err(RunError::Usage(
            "idem panicked during the run (a bug in idem; the run's own outcome is unknown)".into(),
        )));
    }

    /// COMPLETE or FAIL (after a START, made up from the request when the
    /// run failed before its plan).
    pub(super) fn ended(&self, result: &Result<RunReport, RunError>) {
        let Some(l) = self.lineage else { return };
        self.close(l);
        let at = now();
        let committed = self.committed.borrow().clone();
        let result = match (result, committed) {
            (Err(_), Some(r)) => &Ok(r),
            _ => result,
        };
        match result {
            Ok(r) => l.send(&self.complete(l, r, self.columns.take())),
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
