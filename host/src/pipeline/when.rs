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
        let hour = hour_text(logical_date).ok_or_else(|| {
            RunError::Usage(format!(
                "--logical-date `{}` is not an hour: this pipeline's slices are hours ({}): give 2026-10-01T07 or Airflow's {{{{ ts }}}} on the hour (2026-10-01T07:00:00+00:00)",
                crate::text::clip_str(logical_date, 100),
                self.columns.join("/")
            ))
        })?;
        // Checked as a range of one (a real day, an hour 00-23).
        let (d, h) = crate::backfill::hours(&hour, &hour)?.remove(0);
        Ok(format!("{d}T{h:02}"))
    }

    /// Every slice from `from` to `to`, included: dates, or hours (given
    /// as hours, or as dates: their whole days of hours).
    pub fn whens(&self, from: &str, to: &str) -> Result<Vec<String>, RunError> {
        if !self.hourly() {
            return crate::backfill::dates(from, to);
        }
        let (from, to) = match (from.contains('T'), to.contains('T')) {
            (false, false) => (format!("{from}T00"), format!("{to}T23")),
            _ => (self.when_of(from)?, self.when_of(to)?),
        };
        Ok(crate::backfill::hours(&from, &to)?
            .into_iter()
            .map(|(d, h)| format!("{d}T{h:02}"))
            .collect())
    }

    /// The logical date the stages of `when` run with: the date, or the
    /// hour as `{{ ts }}` (what `idem run --partition date=D/hour=HH`
    /// implies, so a stage's run by hand is the same run).
    pub fn logical_date(&self, when: &str) -> String {
        crate::schedule::implied_by_partition(&self.partition_of(when))
            .unwrap_or_else(|| when.to_string())
    }
}

/// `YYYY-MM-DDTHH` of `2026-10-01T07` or of a timestamp on that hour
/// (`:00[:00]`, then `Z`, `+00:00` or nothing).
fn hour_text(text: &str) -> Option<String> {
    let (day, time) = text.split_once('T')?;
    let hour = time.get(..2)?;
    let rest = &time[2..];
    let on_the_hour = ["", ":00", ":00:00"]
        .iter()
        .flat_map(|m| ["", "Z", "+00:00"].map(|z| format!("{m}{z}")))
        .any(|tail| rest == tail);
    on_the_hour.then(|| format!("{day}T{hour}"))
}

#[cfg(test)]
mod tests {
    use super::hour_text;

    #[test]
    fn an_hour_is_read_from_its_short_form_and_from_airflow_ts() {
        for ok in [
            "2026-10-01T07",
            "2026-10-01T07:00",
            "2026-10-01T07:00:00+00:00",
            "2026-10-01T07:00:00Z",
        ] {
            assert_eq!(hour_text(ok).as_deref(), Some("2026-10-01T07"), "{ok}");
        }
        for bad in [
            "2026-10-01",
            "2026-10-01T07:30:00+00:00",
            "2026-10-01T07:00:00+02:00",
        ] {
            assert_eq!(hour_text(bad), None, "{bad}");
        }
    }
}
