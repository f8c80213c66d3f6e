//! When a pipeline's slice is: a date (`2026-10-01`) for a daily
//! pipeline, an hour (`2026-10-01T07`) for an hourly one (its first
//! stage's partition is `date/hour`), from what a scheduler passes, and
//! the logical date each stage's run gets.

use super::Pipeline;
use crate::run::RunError;

impl Pipeline {
    /// The slice a scheduler's `--logical-date` names: a date
    /// (`{{ ds }}`), or for an hourly pipeline an hour, as `2026-10-01T07`
    /// or as `{{ ts }}` (`2026-10-01T07:00:00+00:00`, on the hour, UTC).
    pub fn when_of(&self, logical_date: &str) -> Result<String, RunError> {
        if !self.hourly() {
            return Ok(crate::backfill::dates(logical_date, logical_date)?.remove(0));
        }
        let Some((day, h)) = crate::schedule::hour_named(logical_date) else {
            return Err(RunError::Usage(format!(
                "--logical-date `{}` is not an hour: this pipeline's slices are hours ({}): give 2026-10-01T07 or Airflow's {{{{ ts }}}} on the hour (2026-10-01T07:00:00+00:00)",
                crate::text::clip_str(logical_date, 100),
                self.columns.join("/")
            )));
        };
        // A real day.
        let day = crate::backfill::dates(day, day)?.remove(0);
        Ok(format!("{day}T{h:02}"))
    }

    /// Every slice from `from` to `to`, included: dates, or hours (a date
    /// bound: its first hour for `from`, its last for `to`).
    pub fn whens(&self, from: &str, to: &str) -> Result<Vec<String>, RunError> {
        let whens: Vec<String> = if !self.hourly() {
            crate::backfill::dates(from, to)?
        } else {
            let bound = |b: &str, hour: &str| -> Result<String, RunError> {
                match b.contains('T') {
                    true => self.when_of(b),
                    false => Ok(format!(
                        "{}T{hour}",
                        crate::backfill::dates(b, b)?.remove(0)
                    )),
                }
            };
            let (from, to) = (bound(from, "00")?, bound(to, "23")?);
            crate::backfill::hours(&from, &to)?
                .into_iter()
                .map(|(d, h)| format!("{d}T{h:02}"))
                .collect()
        };
        if whens.len() > crate::backfill::MAX_SLICES {
            return Err(RunError::Usage(format!(
                "the backfill would run {} slices (more than {}): narrow the range",
                whens.len(),
                crate::backfill::MAX_SLICES
            )));
        }
        Ok(whens)
    }

    /// The logical date the stages of `when` run with: the date, or the
    /// hour as `{{ ts }}` whatever the hour column is called (what `idem
    /// run --partition date=D/hour=HH` implies, so a stage's run by hand
    /// is the same run).
    pub fn logical_date(&self, when: &str) -> String {
        match when.split_once('T') {
            Some((day, hour)) => match crate::schedule::hour_of(hour) {
                Some(h) => crate::schedule::timestamp(day, h),
                None => when.to_string(),
            },
            None => when.to_string(),
        }
    }
}
