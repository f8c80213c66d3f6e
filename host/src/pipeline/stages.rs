//! Running a pipeline: each date's stages in order, every later stage
//! pinned to the version of its upstream table that holds the same date.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use super::{Pipeline, PipelineError, Source, StageRun};
use crate::backfill::Status;
use crate::run::{Run, RunError, SliceSpec};
use crate::sandbox::Sandbox;
use crate::table::{Mode, Table, TableError};

impl Pipeline {
    /// Stage `i`'s run for `date`, reading `upstream` (its table's version)
    /// when the stage reads an earlier one.
    fn run_of(&self, i: usize, date: &str, upstream: Option<u64>) -> Run {
        let s = &self.stages[i];
        let slice = match &s.source {
            Source::Dataset { root, .. } => SliceSpec::Partition {
                root: PathBuf::from(root),
                partition: self.partition_of(date),
            },
            Source::Stage(j) => SliceSpec::Delta {
                table: self.stages[*j].table.clone(),
                version: upstream.unwrap_or(0),
                partition: None,
                slice: Some(self.slice_id(date)),
            },
        };
        let mode = match &s.mode {
            Mode::OverwritePartition { partition } => {
                let values: Vec<String> = self
                    .partition_of(date)
                    .levels()
                    .iter()
                    .map(|(_, v)| v.clone())
                    .collect();
                Mode::OverwritePartition {
                    partition: partition.with_values(&values),
                }
            }
            other => other.clone(),
        };
        let (audit, audit_params) = match &s.audit {
            Some((m, p)) => (Some(m.clone()), p.clone()),
            None => (None, "{}".to_string()),
        };
        Run::new(&s.module, slice, s.table.clone())
            .mode(mode)
            .params(s.params.clone())
            .logical_date(Some(self.logical_date(date)))
            .batch_rows(s.batch_rows)
            .expect(s.expect.clone())
            .audit_module(audit, audit_params)
            .text(s.text.clone())
            .wap(s.wap.clone())
            .sign_with(self.signer.clone())
            .lineage(self.lineage.clone(), self.lineage_parent.clone())
    }

    /// Check every stage's params and mode and load its modules, once,
    /// before any date runs.
    pub fn preflight(&self, sandbox: &Sandbox) -> Result<(), PipelineError> {
        for i in 0..self.stages.len() {
            let when = if self.hourly() {
                "2000-01-01T00"
            } else {
                "2000-01-01"
            };
            self.run_of(i, when, Some(0))
                .preflight(sandbox)
                .map_err(|e| PipelineError::Stage {
                    stage: self.stages[i].name.clone(),
                    source: Box::new(e),
                })?;
        }
        Ok(())
    }

    /// The version of stage `i`'s table that holds its current output for
    /// `date` (to pin when the stage was not run just now).
    fn holding(&self, i: usize, date: &str) -> Result<u64, RunError> {
        let s = &self.stages[i];
        let slice = self.slice_id(date);
        let rt = crate::run::runtime()?;
        let found = rt.block_on(async {
            let t = match Table::open_existing(&s.table).await {
                Ok(t) => t,
                Err(TableError::NoTable { .. }) => return Ok(None),
                Err(e) => return Err(e),
            };
            t.version_of_current(&slice).await
        })?;
        found.ok_or_else(|| {
            RunError::Usage(format!(
                "stage `{}` has no committed run for {slice} in {}: run it first (idem pipeline run FILE --logical-date {date} --stage {})",
                s.name, s.table, s.name
            ))
        })
    }

    /// Run the stages for `date` in order (or only stage `only`, reading
    /// its upstream's current output for the date), each pinned to the
    /// version the previous one committed or found. A stage whose upstream
    /// failed (or was skipped) is skipped; the others still run.
    pub fn run_date(&self, date: &str, only: Option<usize>, sandbox: &Sandbox) -> Vec<StageRun> {
        let mut out = Vec::new();
        let mut held: Vec<Option<u64>> = vec![None; self.stages.len()];
        let mut ok = vec![true; self.stages.len()];
        for i in 0..self.stages.len() {
            if only.is_some_and(|o| o != i) {
                continue;
            }
            let s = &self.stages[i];
            let upstream_ok = match s.source {
                Source::Stage(j) => ok[j],
                Source::Dataset { .. } => true,
            };
            if !upstream_ok {
                ok[i] = false;
                out.push(StageRun {
                    stage: s.name.clone(),
                    input: None,
                    result: crate::backfill::not_started(date),
                    version: None,
                });
                continue;
            }
            let run = self.run_stage(i, date, &held, sandbox);
            ok[i] = matches!(run.result.status, Status::Done(_));
            held[i] = run.version;
            out.push(run);
        }
        out
    }

    /// One stage for `date`. A later stage pins its upstream's version;
    /// when, after its run, the upstream holds the date at another version
    /// (another process reran the upstream meanwhile), it runs again on
    /// that one, so the last commit is never of a stale upstream.
    fn run_stage(&self, i: usize, date: &str, held: &[Option<u64>], sandbox: &Sandbox) -> StageRun {
        let s = &self.stages[i];
        let t = Instant::now();
        let ms = || t.elapsed().as_millis() as u64;
        let upstream = match s.source {
            Source::Dataset { .. } => Ok(None),
            Source::Stage(j) => match held[j] {
                Some(v) => Ok(Some(v)),
                None => self.holding(j, date).map(Some),
            },
        };
        let mut pinned = match upstream {
            Ok(v) => v,
            Err(e) => {
                return StageRun {
                    stage: s.name.clone(),
                    input: None,
                    result: crate::backfill::result(date, Err(e), ms()),
                    version: None,
                };
            }
        };
        let mut rounds = 0;
        loop {
            rounds += 1;
            let input = match (&s.source, pinned) {
                (Source::Stage(j), Some(v)) => Some((self.stages[*j].table.clone(), v)),
                _ => None,
            };
            let outcome = self.run_of(i, date, pinned).execute(sandbox);
            let version = match &outcome {
                Ok(r) => r.outcome.version().or_else(|| self.holding(i, date).ok()),
                Err(_) => None,
            };
            let mut result = crate::backfill::result(date, outcome, ms());
            if matches!(result.status, Status::Done(_)) && version.is_none() {
                result.status = Status::Failed(
                    format!(
                        "stage `{}`: no version of {} holds the output for {} (was its log cleaned up?)",
                        s.name,
                        s.table,
                        self.slice_id(date)
                    ),
                    crate::kind::Kind::Storage,
                );
            }
            // Still the upstream's current output for the date?
            if let (Source::Stage(j), Status::Done(_), Some(v)) =
                (&s.source, &result.status, pinned)
                && rounds < 4
                && let Ok(now) = self.holding(*j, date)
                && now != v
            {
                tracing::info!(
                    "stage `{}` {}: upstream `{}` moved from version {v} to {now} during the run; running again on {now}",
                    s.name,
                    self.slice_id(date),
                    self.stages[*j].name
                );
                pinned = Some(now);
                continue;
            }
            return StageRun {
                stage: s.name.clone(),
                input,
                result,
                version,
            };
        }
    }

    /// Run the pipeline for every date, `jobs` dates at a time (each date's
    /// stages in order); `done` sees each date as it ends.
    pub fn backfill(
        &self,
        dates: &[String],
        jobs: usize,
        sandbox: &Sandbox,
        stop: &AtomicBool,
        done: &(dyn Fn(&str, &[StageRun]) + Sync),
    ) -> Vec<(String, Vec<StageRun>)> {
        let work = |date: &str| {
            let runs = self.run_date(date, None, sandbox);
            (date.to_string(), runs)
        };
        let report = |r: &(String, Vec<StageRun>)| done(&r.0, &r.1);
        crate::backfill::for_each_date(dates, jobs, stop, &work, &report)
            .into_iter()
            .zip(dates)
            .map(|(r, date)| {
                r.unwrap_or_else(|| {
                    let runs = self
                        .stages
                        .iter()
                        .map(|s| StageRun {
                            stage: s.name.clone(),
                            input: None,
                            result: crate::backfill::not_started(date),
                            version: None,
                        })
                        .collect();
                    (date.clone(), runs)
                })
            })
            .collect()
    }
}
