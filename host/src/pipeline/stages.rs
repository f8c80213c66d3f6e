//! Running a pipeline: each date's stages in order, every later stage
//! pinned to the version of its upstream table that holds the same date.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use super::{Pipeline, PipelineError, Side, Source, StageRun};
use crate::backfill::Status;
use crate::run::{PinnedSides, Run, RunError, SideSpec, SliceSpec};
use crate::sandbox::Sandbox;
use crate::table::{Mode, Table, TableError};

impl Pipeline {
    /// Stage `i`'s run for `when`, reading `upstream` (its table's version)
    /// when the stage reads an earlier one: the same slice upstream, or
    /// for a daily stage after an hourly one every hour of its date
    /// (`date=D/*`).
    fn run_of(&self, i: usize, when: &str, upstream: Option<u64>) -> Run {
        let s = &self.stages[i];
        let own = self.slice_of(i, when);
        let slice = match &s.source {
            Source::Dataset { root, .. } => SliceSpec::Partition {
                root: PathBuf::from(root),
                partition: own.clone(),
            },
            Source::Stage(j) => SliceSpec::Delta {
                table: self.stages[*j].table.clone(),
                version: upstream.unwrap_or(0),
                partition: None,
                slice: Some(match self.reads_hours(i) {
                    true => format!("{own}/*"),
                    false => own.to_string(),
                }),
            },
        };
        let mode = match &s.mode {
            Mode::OverwritePartition { partition } => {
                let values: Vec<String> = own.levels().iter().map(|(_, v)| v.clone()).collect();
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
            .on_schema_change(s.schema_change)
            .logical_date(Some(self.logical_date(&self.when_at(i, when))))
            .batch_rows(s.batch_rows)
            .expect(s.expect.clone())
            .audit_module(audit, audit_params)
            .text(s.text.clone())
            .wap(s.wap.clone())
            .sign_with(self.signer.clone())
            .lineage(self.lineage.clone(), self.lineage_parent.clone())
    }

    /// Stage `i`'s side inputs: each earlier stage's table at the version
    /// this run of the pipeline left it (`held`), else its current one; and
    /// its `[sides]` tables, pinned once for the whole pipeline run.
    fn sides_of(
        &self,
        i: usize,
        held: &[Option<u64>],
        sandbox: &Sandbox,
    ) -> Result<(Vec<SideSpec>, PinnedSides), RunError> {
        let mut named = Vec::new();
        let mut tables: Vec<&str> = Vec::new();
        for side in &self.stages[i].sides {
            match side {
                Side::Table(spec) => tables.push(&spec.name),
                Side::Stage(k) => {
                    let up = &self.stages[*k];
                    let version = match held[*k] {
                        Some(v) => Some(v),
                        None => crate::run::runtime()?
                            .block_on(Table::open_existing(&up.table))?
                            .version(),
                    };
                    named.push(SideSpec {
                        name: up.name.clone(),
                        location: up.table.clone(),
                        version,
                    });
                }
            }
        }
        let mut fixed = PinnedSides::default();
        for name in tables {
            fixed = fixed.with(&self.pinned(i, name, sandbox)?);
        }
        Ok((named, fixed))
    }

    /// The `[sides]` table `name` stage `i` reads, pinned on first use (the
    /// lock held meanwhile: one pin per pipeline run); an error is not
    /// kept, the next date tries again.
    fn pinned(&self, i: usize, name: &str, sandbox: &Sandbox) -> Result<PinnedSides, RunError> {
        let mut all = self.pinned_sides.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = all.get(name) {
            return Ok(p.clone());
        }
        let spec = self.stages[i].sides.iter().find_map(|s| match s {
            Side::Table(spec) if spec.name == name => Some(spec.clone()),
            _ => None,
        });
        let specs: Vec<SideSpec> = spec.into_iter().collect();
        let table = &self.stages[i].table;
        let p = crate::run::pin_sides(&specs, table, &sandbox.config().limits)?;
        all.insert(name.to_string(), p.clone());
        Ok(p)
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
    /// `when` (to pin when the stage was not run just now).
    fn holding(&self, i: usize, when: &str) -> Result<u64, RunError> {
        let s = &self.stages[i];
        let slice = self.slice_of(i, when).to_string();
        current_version(&s.table, &slice, false)?.ok_or_else(|| {
            RunError::Usage(format!(
                "stage `{}` has no committed run for {slice} in {}: run it first (idem pipeline run FILE --logical-date {when} --stage {})",
                s.name, s.table, s.name
            ))
        })
    }

    /// The version of upstream stage `j`'s table that stage `i` reads for
    /// `when`: the one that holds `j`'s output for the slice, or for a
    /// daily stage after an hourly one the latest of those of the date's
    /// hours (at it, each hour reads as it is now).
    fn pin_of(&self, i: usize, j: usize, when: &str) -> Result<u64, RunError> {
        if !self.reads_hours(i) {
            return self.holding(j, when);
        }
        let up = &self.stages[j];
        let day = self.slice_of(i, when).to_string();
        current_version(&up.table, &day, true)?.ok_or_else(|| {
            RunError::Usage(format!(
                "stage `{}` has no current commit of an hour under {day} in {}: run the day's hours first (idem pipeline backfill FILE --from {d} --to {d} --skip-missing)",
                up.name,
                up.table,
                d = self.when_at(i, when)
            ))
        })
    }

    /// Run the stages for `when` in order (or only stage `only`, reading
    /// its upstream's current output for the slice), each pinned to the
    /// version the previous one committed or found. A stage whose upstream
    /// failed (or was skipped) is skipped; the others still run. In an
    /// hourly pipeline a daily stage runs for the hour's date, over the
    /// date's hours committed so far.
    pub fn run_date(&self, when: &str, only: Option<usize>, sandbox: &Sandbox) -> Vec<StageRun> {
        self.run_stages(when, &|i| only.is_none_or(|o| o == i), sandbox)
    }

    /// The stages `pick` takes, for `when`, in order.
    fn run_stages(
        &self,
        when: &str,
        pick: &dyn Fn(usize) -> bool,
        sandbox: &Sandbox,
    ) -> Vec<StageRun> {
        let mut out = Vec::new();
        let mut held: Vec<Option<u64>> = vec![None; self.stages.len()];
        let mut ok = vec![true; self.stages.len()];
        for i in 0..self.stages.len() {
            if !pick(i) {
                continue;
            }
            let upstream_ok = match self.stages[i].source {
                Source::Stage(j) => ok[j],
                Source::Dataset { .. } => true,
            };
            if !upstream_ok {
                ok[i] = false;
                out.push(self.not_started(i, when));
                continue;
            }
            let run = self.run_stage(i, when, &held, sandbox);
            ok[i] = matches!(run.result.status, Status::Done(_));
            held[i] = run.version;
            out.push(run);
        }
        out
    }

    /// Stage `i` of `when`, not started.
    fn not_started(&self, i: usize, when: &str) -> StageRun {
        StageRun {
            stage: self.stages[i].name.clone(),
            slice: self.slice_of(i, when).to_string(),
            input: None,
            result: crate::backfill::not_started(&self.when_at(i, when)),
            version: None,
        }
    }

    /// One stage for `when`. A later stage pins its upstream's version;
    /// when, after its run, the upstream holds the slice at another
    /// version (another process reran the upstream meanwhile), it runs
    /// again on that one, so the last commit is never of a stale upstream.
    fn run_stage(&self, i: usize, when: &str, held: &[Option<u64>], sandbox: &Sandbox) -> StageRun {
        let s = &self.stages[i];
        let at = self.when_at(i, when);
        let slice = self.slice_of(i, when).to_string();
        let t = Instant::now();
        let ms = || t.elapsed().as_millis() as u64;
        let upstream = match s.source {
            Source::Dataset { .. } => Ok(None),
            Source::Stage(j) => match held[j] {
                // A daily stage reads every hour: not only this one's.
                Some(v) if !self.reads_hours(i) => Ok(Some(v)),
                _ => self.pin_of(i, j, when).map(Some),
            },
        };
        let mut pinned = match upstream {
            Ok(v) => v,
            Err(e) => {
                return StageRun {
                    stage: s.name.clone(),
                    slice,
                    input: None,
                    result: crate::backfill::result(&at, Err(e), ms()),
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
            let outcome = match self.sides_of(i, held, sandbox) {
                Ok((named, fixed)) => self
                    .run_of(i, when, pinned)
                    .sides(named)
                    .pinned_sides(fixed)
                    .execute(sandbox),
                Err(e) => Err(e),
            };
            let version = match &outcome {
                Ok(r) => r.outcome.version().or_else(|| self.holding(i, when).ok()),
                Err(_) => None,
            };
            let mut result = crate::backfill::result(&at, outcome, ms());
            if matches!(result.status, Status::Done(_)) && version.is_none() {
                result.status = Status::Failed(
                    format!(
                        "stage `{}`: no version of {} holds the output for {slice} (was its log cleaned up?)",
                        s.name, s.table
                    ),
                    crate::kind::Kind::Storage,
                );
            }
            // Still the upstream's current output for the slice?
            if let (Source::Stage(j), Status::Done(_), Some(v)) =
                (&s.source, &result.status, pinned)
                && rounds < 4
                && let Ok(now) = self.pin_of(i, *j, when)
                && now != v
            {
                tracing::info!(
                    "stage `{}` {slice}: upstream `{}` moved from version {v} to {now} during the run; running again on {now}",
                    s.name,
                    self.stages[*j].name
                );
                pinned = Some(now);
                continue;
            }
            return StageRun {
                stage: s.name.clone(),
                slice,
                input,
                result,
                version,
            };
        }
    }

    /// How many reports a backfill of `whens` makes (`done` calls): one
    /// per slice, and for an hourly pipeline with daily stages one more
    /// per date.
    pub fn backfill_steps(&self, whens: &[String]) -> usize {
        whens.len() + self.days_of(whens).len()
    }

    /// The dates of `whens` whose daily stages a backfill runs, each with
    /// the index of its last slice in `whens` (none without daily stages).
    pub(super) fn days_of(&self, whens: &[String]) -> Vec<(String, usize)> {
        let Some(d) = self.stages.iter().position(|s| s.daily) else {
            return Vec::new();
        };
        let mut days: Vec<(String, usize)> = Vec::new();
        for (k, w) in whens.iter().enumerate() {
            let day = self.when_at(d, w);
            match days.last_mut() {
                Some((last, at)) if *last == day => *at = k,
                _ => days.push((day, k)),
            }
        }
        days
    }

    /// Run the pipeline for every slice, `jobs` at a time (each slice's
    /// stages in order); `done` sees each slice as it ends. Daily stages
    /// of an hourly pipeline run once per date, after its hours: their
    /// runs are reported with, and join, the date's last hour's.
    pub fn backfill(
        &self,
        whens: &[String],
        jobs: usize,
        sandbox: &Sandbox,
        stop: &AtomicBool,
        done: &(dyn Fn(&str, &[StageRun]) + Sync),
    ) -> Vec<(String, Vec<StageRun>)> {
        let hourly = |i: usize| !self.stages[i].daily;
        let mut results = self.each(whens, &hourly, jobs, sandbox, stop, done);
        let days = self.days_of(whens);
        if days.is_empty() {
            return results;
        }
        // A date whose hours all failed to land runs no daily stage; one
        // where an hour failed is skipped, as a stage after a failed one.
        let lasts: Vec<String> = days.iter().map(|(_, k)| whens[*k].clone()).collect();
        let daily = |i: usize| self.stages[i].daily;
        let gated: Vec<Option<Vec<StageRun>>> =
            lasts.iter().map(|w| self.gate(&results, w)).collect();
        let work = |when: &str| -> (String, Vec<StageRun>) {
            let k = lasts.iter().position(|w| w == when).unwrap_or(0);
            let runs = match &gated[k] {
                Some(runs) => runs.clone(),
                None => self.run_stages(when, &daily, sandbox),
            };
            (when.to_string(), runs)
        };
        let report = |r: &(String, Vec<StageRun>)| done(&r.0, &r.1);
        let ran = crate::backfill::for_each_date(&lasts, jobs, stop, &work, &report);
        for ((day_runs, (_, k)), when) in ran.into_iter().zip(&days).zip(&lasts) {
            let runs = match day_runs {
                Some((_, runs)) => runs,
                None => (0..self.stages.len())
                    .filter(|&i| daily(i))
                    .map(|i| self.not_started(i, when))
                    .collect(),
            };
            results[*k].1.extend(runs);
        }
        results
    }

    /// Whether the daily stages of `when`'s date run after its hours
    /// (`None`), or end as these runs: `missing` when no hour of the date
    /// landed (its first stage found no input), `skipped` when an hour
    /// that landed did not finish the stage a daily one reads.
    fn gate(&self, results: &[(String, Vec<StageRun>)], when: &str) -> Option<Vec<StageRun>> {
        let day = when.split('T').next().unwrap_or(when);
        let hours: Vec<&Vec<StageRun>> = results
            .iter()
            .filter(|(w, _)| w.split('T').next() == Some(day))
            .map(|(_, r)| r)
            .collect();
        let daily: Vec<usize> = (0..self.stages.len())
            .filter(|&i| self.stages[i].daily)
            .collect();
        let landed = |runs: &Vec<StageRun>| {
            !runs
                .first()
                .is_some_and(|r| matches!(r.result.status, Status::Missing(_)))
        };
        if !hours.iter().any(|r| landed(r)) {
            let missing = |i: usize| StageRun {
                result: crate::backfill::SliceResult {
                    status: Status::Missing(format!("no hour of {day} landed")),
                    ..crate::backfill::not_started(day)
                },
                ..self.not_started(i, when)
            };
            return Some(daily.into_iter().map(missing).collect());
        }
        // The hourly stages the daily ones read.
        let read: Vec<&str> = daily
            .iter()
            .filter(|&&i| self.reads_hours(i))
            .filter_map(|&i| match self.stages[i].source {
                Source::Stage(j) => Some(self.stages[j].name.as_str()),
                Source::Dataset { .. } => None,
            })
            .collect();
        let unfinished = |runs: &Vec<StageRun>| {
            runs.iter().any(|r| {
                read.contains(&r.stage.as_str()) && !matches!(r.result.status, Status::Done(_))
            })
        };
        hours.iter().any(|r| landed(r) && unfinished(r)).then(|| {
            daily
                .into_iter()
                .map(|i| self.not_started(i, when))
                .collect()
        })
    }

    /// The stages `pick` takes for every slice of `whens`, `jobs` slices
    /// at a time.
    fn each(
        &self,
        whens: &[String],
        pick: &(dyn Fn(usize) -> bool + Sync),
        jobs: usize,
        sandbox: &Sandbox,
        stop: &AtomicBool,
        done: &(dyn Fn(&str, &[StageRun]) + Sync),
    ) -> Vec<(String, Vec<StageRun>)> {
        let work = |when: &str| (when.to_string(), self.run_stages(when, pick, sandbox));
        let report = |r: &(String, Vec<StageRun>)| done(&r.0, &r.1);
        crate::backfill::for_each_date(whens, jobs, stop, &work, &report)
            .into_iter()
            .zip(whens)
            .map(|(r, when)| {
                r.unwrap_or_else(|| {
                    let runs = (0..self.stages.len())
                        .filter(|&i| pick(i))
                        .map(|i| self.not_started(i, when))
                        .collect();
                    (when.clone(), runs)
                })
            })
            .collect()
    }
}

/// The version of `table` that made slice `slice`'s current output
/// current, or with `under` the latest of those of the slices under it
/// (`None`: no such commit, or no table yet).
fn current_version(table: &str, slice: &str, under: bool) -> Result<Option<u64>, RunError> {
    let rt = crate::run::runtime()?;
    Ok(rt.block_on(async {
        let t = match Table::open_existing(table).await {
            Ok(t) => t,
            Err(TableError::NoTable { .. }) => return Ok(None),
            Err(e) => return Err(e),
        };
        match under {
            true => t.version_of_current_under(slice).await,
            false => t.version_of_current(slice).await,
        }
    })?)
}
