//! `idem backfill`: a date range of daily partitions, N at a time, with a
//! live display on a terminal, a line per slice otherwise, and a summary.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use anyhow::{Result, bail};
use clap::Args;
use serde_json::{Value, json};

use idem::backfill::{SliceResult, Status};
use idem::run::{Run, RunOutcome, SliceSpec};

use super::{LimitArgs, Out};

#[derive(Args, Debug)]
pub struct BackfillArgs {
    /// The transform (.wasm from `idem build`).
    #[arg(long)]
    pub module: PathBuf,
    /// The Parquet dataset root (daily partitions COLUMN=YYYY-MM-DD below it).
    #[arg(long)]
    pub input: String,
    /// The target Delta table (path or URL).
    #[arg(long)]
    pub table: String,
    /// First date (YYYY-MM-DD).
    #[arg(long)]
    pub from: String,
    /// Last date, included (YYYY-MM-DD).
    #[arg(long)]
    pub to: String,
    /// The partition column holding the date.
    #[arg(long, default_value = "date")]
    pub column: String,
    /// Slices run at once.
    #[arg(long, short, default_value_t = 2)]
    pub jobs: usize,
    /// A date with no input is skipped instead of failing the backfill.
    #[arg(long)]
    pub skip_missing: bool,
    /// overwrite-partition (default), merge or append.
    #[arg(long)]
    pub mode: Option<String>,
    /// Merge key columns, comma-separated.
    #[arg(long, value_delimiter = ',')]
    pub key: Vec<String>,
    /// Transform parameters as JSON (the same for every slice).
    #[arg(long, default_value = "{}")]
    pub params: String,
    /// Rows per input batch (part of the run key).
    #[arg(long, default_value_t = 8192)]
    pub batch_rows: u32,
    /// Execute even the slices whose run was already committed.
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub publish: super::PublishArgs,
    #[command(flatten)]
    pub limits: LimitArgs,
}

/// Set by the first Ctrl-C: start no new slice.
static STOP: AtomicBool = AtomicBool::new(false);

#[cfg(unix)]
extern "C" fn on_interrupt(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
    // A second Ctrl-C ends the process at once (which is safe too: every
    // commit is atomic, and the next backfill redoes nothing committed).
    // SAFETY: signal() is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_DFL);
    }
}

/// From now on the first Ctrl-C sets the returned flag (start nothing
/// new); a second one ends the process.
pub(crate) fn on_ctrl_c() -> &'static AtomicBool {
    #[cfg(unix)]
    // SAFETY: installs a handler that only stores an atomic and resets the
    // signal's disposition (both async-signal-safe).
    unsafe {
        libc::signal(
            libc::SIGINT,
            on_interrupt as *const () as libc::sighandler_t,
        );
    }
    &STOP
}

pub(crate) fn status_text(s: &Status) -> String {
    match s {
        Status::Done(o) => o.to_string(),
        Status::Missing(_) => "missing (no input)".into(),
        Status::Failed(..) => "FAILED".into(),
        Status::NotStarted => "not started (interrupted)".into(),
    }
}

pub(crate) fn status_kind(s: &Status) -> &'static str {
    match s {
        Status::Done(RunOutcome::Committed { .. }) => "committed",
        Status::Done(RunOutcome::Unchanged { .. }) => "unchanged",
        Status::Done(RunOutcome::Memo { .. }) => "memo",
        Status::Missing(_) => "missing",
        Status::Failed(..) => "failed",
        Status::NotStarted => "not-started",
    }
}

/// Whether the slice's transform ran (not a memo hit, not a failure).
pub(crate) fn executed(s: &Status) -> bool {
    matches!(
        s,
        Status::Done(RunOutcome::Committed { .. } | RunOutcome::Unchanged { .. })
    )
}

fn version(s: &Status) -> Option<u64> {
    match s {
        Status::Done(RunOutcome::Committed { version, .. }) => Some(*version),
        Status::Done(RunOutcome::Unchanged { since, .. } | RunOutcome::Memo { since }) => *since,
        _ => None,
    }
}

/// Counts by kind, in display order.
const KINDS: [&str; 6] = [
    "committed",
    "memo",
    "unchanged",
    "missing",
    "failed",
    "not-started",
];

fn counts(results: &[SliceResult]) -> Vec<(&'static str, usize)> {
    KINDS
        .iter()
        .map(|k| {
            (
                *k,
                results
                    .iter()
                    .filter(|r| status_kind(&r.status) == *k)
                    .count(),
            )
        })
        .collect()
}

fn tally(counts: &[(&'static str, usize)]) -> String {
    counts
        .iter()
        .filter(|(k, n)| *n > 0 || matches!(*k, "committed" | "memo" | "failed"))
        .map(|(k, n)| format!("{n} {k}"))
        .collect::<Vec<_>>()
        .join(", ")
}

pub fn backfill(a: BackfillArgs, out: Out) -> Result<ExitCode> {
    let dates = idem::backfill::dates(&a.from, &a.to)?;
    if !(1..=64).contains(&a.jobs) {
        bail!("--jobs must be from 1 to 64");
    }
    let mode = super::parse_mode(a.mode.as_deref(), &a.key, None)?;
    // The partition column and each date become directory names.
    idem::run::parse_partition(&format!("{}={}", a.column, a.from))?;
    let sandbox = a.limits.sandbox()?;
    let make = |date: &str| -> Run {
        let mut run = Run::new(
            &a.module,
            SliceSpec::Partition {
                root: PathBuf::from(&a.input),
                column: a.column.clone(),
                value: date.to_string(),
            },
            a.table.clone(),
        )
        .params(a.params.clone())
        .logical_date(Some(date.to_string()))
        .batch_rows(a.batch_rows)
        .force(a.force);
        run = a.publish.apply(run);
        if let Some(m) = &mode {
            run = run.mode(m.clone());
        }
        run
    };

    // Checked once, not once per slice: params, mode, and that the module
    // loads (which fills the compiled-code cache before N slices start).
    make(&dates[0]).preflight(&sandbox)?;

    // One bar for the whole backfill (terminal only); the runs' own bars
    // would fight over the screen.
    let bar = idem::progress::slices(dates.len() as u64);
    idem::progress::enable(false);
    let stop = on_ctrl_c();
    let started = Instant::now();
    let seen: Mutex<Vec<SliceResult>> = Mutex::new(Vec::new());
    let done = |r: &SliceResult| {
        let line = match &r.status {
            Status::Failed(e, _) => format!("{}={}  FAILED: {e}", a.column, r.date),
            Status::Missing(e) if !a.skip_missing => {
                format!("{}={}  FAILED: {e}", a.column, r.date)
            }
            s => format!(
                "{}={}  {}  {} rows  {:.1} s",
                a.column,
                r.date,
                status_text(s),
                r.rows,
                r.ms as f64 / 1000.0
            ),
        };
        let Ok(mut seen) = seen.lock() else { return };
        seen.push(r.clone());
        // Throughput of the slices that ran (a memo hit reads nothing).
        let rows_in: u64 = seen
            .iter()
            .filter(|r| executed(&r.status))
            .map(|r| r.rows_in)
            .sum();
        let secs = started.elapsed().as_secs_f64().max(1e-3);
        if bar.is_hidden() {
            eprintln!("{line}");
        } else {
            bar.println(line);
            bar.inc(1);
            bar.set_message(format!(
                "{}; {:.0} input rows/s",
                tally(&counts(&seen)),
                rows_in as f64 / secs
            ));
        }
    };
    let results = idem::backfill::run(&dates, a.jobs, &sandbox, &make, stop, &done);
    bar.finish();
    let secs = started.elapsed().as_secs_f64();
    let rows: u64 = results.iter().map(|r| r.rows).sum();
    let rows_in: u64 = results
        .iter()
        .filter(|r| executed(&r.status))
        .map(|r| r.rows_in)
        .sum();
    let counts = counts(&results);
    // The most severe failure decides the exit code: 4 (storage, worth a
    // retry) over 3 (guest) over 2 (input) over 1 (a failed check).
    let worst = results
        .iter()
        .filter(|r| r.failed(a.skip_missing))
        .map(|r| match &r.status {
            Status::Failed(_, kind) => kind.exit_code(),
            _ => idem::error::Kind::Input.exit_code(),
        })
        .max();
    let interrupted = results.iter().any(|r| r.status == Status::NotStarted);
    let all_missing = results
        .iter()
        .all(|r| matches!(r.status, Status::Missing(_)));

    let slices: Vec<Value> = results
        .iter()
        .map(|r| {
            json!({
                "slice": format!("{}={}", a.column, r.date),
                "status": status_kind(&r.status),
                "version": version(&r.status),
                "rows": r.rows,
                "ms": r.ms,
                "error": match &r.status {
                    Status::Failed(e, _) | Status::Missing(e) => Some(e.as_str()),
                    _ => None,
                },
            })
        })
        .collect();
    let totals: serde_json::Map<String, Value> = counts
        .iter()
        .map(|(k, n)| (k.to_string(), json!(n)))
        .collect();
    out.emit(
        json!({
            "table": a.table,
            "slices": slices,
            "counts": totals,
            "rowsIn": rows_in,
            "rows": rows,
            "seconds": secs,
            "ok": worst.is_none() && !interrupted && !all_missing,
        }),
        || {
            println!(
                "{:<24} {:<34} {:>10} {:>8}",
                "SLICE", "RESULT", "ROWS", "SECONDS"
            );
            for r in &results {
                println!(
                    "{:<24} {:<34} {:>10} {:>8.1}",
                    format!("{}={}", a.column, r.date),
                    status_text(&r.status),
                    r.rows,
                    r.ms as f64 / 1000.0
                );
            }
            println!(
                "{} slices: {}; {rows_in} input rows -> {rows} rows in {secs:.1} s ({:.0} input rows/s)",
                results.len(),
                tally(&counts),
                rows_in as f64 / secs.max(1e-3)
            );
            if interrupted {
                println!("interrupted: run the same command again to finish (nothing committed is redone)");
            }
            if all_missing {
                println!("no date of the range has input: check --input and --column");
            }
        },
    );
    Ok(match worst {
        Some(code) => ExitCode::from(code),
        None if interrupted => ExitCode::from(130),
        None if all_missing => ExitCode::from(idem::error::Kind::Input.exit_code()),
        None => ExitCode::SUCCESS,
    })
}
