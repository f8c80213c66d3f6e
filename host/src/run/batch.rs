//! Backfill: one idempotent run per partition of a date or hour range
//! (or of listed values, [`Span`]), at most N at once. Nothing here needs to remember progress: every slice's
//! run is memoized by its run key and committed atomically, so a backfill
//! that is interrupted (Ctrl-C, kill -9) and started again finds the
//! slices it committed (memo) and runs only the rest. One failing slice
//! does not stop the others.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Instant;

use crate::kind::Kind;
use crate::run::{Run, RunError, RunOutcome, RunReport};
use crate::sandbox::Sandbox;
use crate::schedule::date_of;
use crate::slice::SliceError;

pub use super::span::{MAX_SLICES, Span, hours};

/// How one slice of a backfill ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// The run ended (committed, unchanged or memo).
    Done(RunOutcome),
    /// The partition has no input (with `skip_missing`, not a failure).
    Missing(String),
    /// The run failed: its error, and the error's kind.
    Failed(String, Kind),
    /// Not started: the backfill was interrupted first.
    NotStarted,
}

/// One slice's result.
#[derive(Debug, Clone)]
pub struct SliceResult {
    /// The slice's key: its date (a pipeline's), or its slice id (a
    /// backfill's: `date=D`, `date=D/hour=HH`).
    pub date: String,
    /// What happened.
    pub status: Status,
    /// Input rows (of the run or of the run it found).
    pub rows_in: u64,
    /// Output rows (of the run or of the run it found).
    pub rows: u64,
    /// Wall-clock milliseconds of this slice.
    pub ms: u64,
}

impl SliceResult {
    /// A failure (a missing partition counts unless it may be skipped).
    pub fn failed(&self, skip_missing: bool) -> bool {
        match &self.status {
            Status::Failed(..) => true,
            Status::Missing(_) => !skip_missing,
            Status::Done(_) | Status::NotStarted => false,
        }
    }
}

/// How a batch of slices ended, as a whole: what the CLI's exit code and
/// the Python package's `ok` are made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ended {
    /// The worst kind among the failed slices (a missing partition is an
    /// input failure unless it may be skipped): the highest exit code.
    pub worst: Option<Kind>,
    /// Some slice never started (the batch was stopped).
    pub interrupted: bool,
    /// No slice of the range had input (even with `skip_missing`).
    pub all_missing: bool,
}

impl Ended {
    /// How `results` ended.
    pub fn of(results: &[SliceResult], skip_missing: bool) -> Self {
        let worst = results
            .iter()
            .filter(|r| r.failed(skip_missing))
            .map(|r| match &r.status {
                Status::Failed(_, kind) => *kind,
                _ => Kind::Input,
            })
            .max_by_key(|k| k.exit_code());
        Ended {
            worst,
            interrupted: results.iter().any(|r| r.status == Status::NotStarted),
            all_missing: results
                .iter()
                .all(|r| matches!(r.status, Status::Missing(_))),
        }
    }

    /// Every slice ended well, none was left unstarted, and the range had
    /// input.
    pub fn ok(&self) -> bool {
        self.worst.is_none() && !self.interrupted && !self.all_missing
    }
}

/// Slices a batch may run at once: from 1 to 64.
pub fn check_jobs(jobs: usize) -> Result<(), RunError> {
    if !(1..=64).contains(&jobs) {
        return Err(RunError::Usage("--jobs must be from 1 to 64".into()));
    }
    Ok(())
}

/// The dates from `from` to `to` inclusive, `YYYY-MM-DD`.
pub fn dates(from: &str, to: &str) -> Result<Vec<String>, RunError> {
    let (a, b) = (day_number(from)?, day_number(to)?);
    if b < a {
        return Err(RunError::Usage(format!(
            "--to {to} is before --from {from}"
        )));
    }
    if b - a >= 36_600 {
        return Err(RunError::Usage(format!(
            "{from}..{to} is more than 100 years of daily slices: check the dates"
        )));
    }
    Ok((a..=b).map(date_of).collect())
}

/// Days since 1970-01-01 of a `YYYY-MM-DD` date (proleptic Gregorian).
pub fn day_number(s: &str) -> Result<i64, RunError> {
    let bad = || {
        RunError::Usage(format!(
            "`{s}` is not a date: use YYYY-MM-DD (e.g. 2026-10-01)"
        ))
    };
    let parts: Vec<&str> = s.split('-').collect();
    let [y, m, d] = parts.as_slice() else {
        return Err(bad());
    };
    if y.len() != 4
        || m.len() != 2
        || d.len() != 2
        || !s.bytes().all(|b| b.is_ascii_digit() || b == b'-')
    {
        return Err(bad());
    }
    let (y, m, d): (i64, i64, i64) = (
        y.parse().map_err(|_| bad())?,
        m.parse().map_err(|_| bad())?,
        d.parse().map_err(|_| bad())?,
    );
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let days_in = [
        31,
        if leap { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    if !(1..=12).contains(&m) || d < 1 || d > days_in[(m - 1) as usize] {
        return Err(bad());
    }
    // Howard Hinnant's days_from_civil.
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    Ok(era * 146_097 + doe - 719_468)
}

/// Run `make(date)` for every date, `jobs` at a time, in date order of
/// start. `done` is called as each slice ends (from worker threads);
/// `stop` set (e.g. by Ctrl-C) starts nothing new and lets running slices
/// finish. Results come back in date order.
pub fn run(
    dates: &[String],
    jobs: usize,
    sandbox: &Sandbox,
    make: &(dyn Fn(&str) -> Run + Sync),
    stop: &AtomicBool,
    done: &(dyn Fn(&SliceResult) + Sync),
) -> Vec<SliceResult> {
    let work = |date: &str| {
        let t = Instant::now();
        let outcome = make(date).execute(sandbox);
        result(date, outcome, t.elapsed().as_millis() as u64)
    };
    for_each_date(dates, jobs, stop, &work, done)
        .into_iter()
        .zip(dates)
        .map(|(r, date)| r.unwrap_or_else(|| not_started(date)))
        .collect()
}

/// A slice the backfill never started.
pub fn not_started(date: &str) -> SliceResult {
    SliceResult {
        date: date.to_string(),
        status: Status::NotStarted,
        rows_in: 0,
        rows: 0,
        ms: 0,
    }
}

/// Do `work(date)` for every date, `jobs` at a time, in date order of
/// start; `done` sees each result as it ends; once `stop` is set no new
/// date starts. Results in date order (`None`: not started).
pub fn for_each_date<R: Send>(
    dates: &[String],
    jobs: usize,
    stop: &AtomicBool,
    work: &(dyn Fn(&str) -> R + Sync),
    done: &(dyn Fn(&R) + Sync),
) -> Vec<Option<R>> {
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<R>>> = Mutex::new((0..dates.len()).map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..jobs.clamp(1, dates.len().max(1)) {
            scope.spawn(|| {
                loop {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    let Some(date) = dates.get(i) else { break };
                    let r = work(date);
                    done(&r);
                    if let Ok(mut all) = results.lock() {
                        all[i] = Some(r);
                    }
                }
            });
        }
    });
    results.into_inner().unwrap_or_else(|e| e.into_inner())
}

/// A run's end as a slice result.
pub fn result(date: &str, outcome: Result<RunReport, RunError>, ms: u64) -> SliceResult {
    let (status, rows_in, rows) = match outcome {
        Ok(r) => (
            Status::Done(r.outcome),
            r.manifest.result.rows_in,
            r.manifest.result.rows_out,
        ),
        // Only a date without a partition is missing; a missing dataset
        // root, or a partition whose files are not Parquet, fails.
        Err(RunError::Slice(e @ SliceError::NoPartition { .. })) => {
            (Status::Missing(e.to_string()), 0, 0)
        }
        Err(e) => (Status::Failed(e.to_string(), e.kind()), 0, 0),
    };
    SliceResult {
        date: date.to_string(),
        status,
        rows_in,
        rows,
        ms,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn date_ranges_cross_months_years_and_leap_days() {
        assert_eq!(
            dates("2024-02-27", "2024-03-01").unwrap(),
            ["2024-02-27", "2024-02-28", "2024-02-29", "2024-03-01"]
        );
        assert_eq!(
            dates("2025-12-31", "2026-01-01").unwrap(),
            ["2025-12-31", "2026-01-01"]
        );
        assert_eq!(dates("2026-10-01", "2026-10-31").unwrap().len(), 31);
        assert_eq!(dates("1970-01-01", "1970-01-01").unwrap(), ["1970-01-01"]);
        for d in ["1999-12-31", "2000-02-29", "2100-03-01", "1600-01-01"] {
            assert_eq!(date_of(day_number(d).unwrap()), d);
        }
        assert_eq!(day_number("1970-01-02").unwrap(), 1);
        for bad in [
            "2026-02-29",
            "2026-+1-01",
            "+202-10-01",
            "2026-13-01",
            "2026-1-01",
            "26-10-01",
            "2026-10-01x",
            "",
        ] {
            assert!(dates(bad, "2027-01-01").is_err(), "{bad}");
        }
        assert!(dates("2026-10-02", "2026-10-01").is_err());
    }
}
