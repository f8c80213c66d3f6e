//! `idem pipeline run|backfill`: the stages of an `idem.toml`, per logical
//! date, each pinned to what the previous stage committed.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Mutex;
use std::time::Instant;

use anyhow::Result;
use clap::{Args, Subcommand};
use serde_json::{Value, json};

use idem::backfill::Status;
use idem::pipeline::{Pipeline, StageRun};

use super::Out;
use super::batch::{self, executed, status_kind, status_text};
use super::flags::{LimitArgs, LineageArgs, SignArgs};

#[derive(Subcommand, Debug)]
pub enum PipelineCommand {
    /// Run every stage for one logical date, in order (or one stage with
    /// --stage, reading its upstream stage's current output for the date).
    #[command(after_help = "Example:\n  idem pipeline run idem.toml --logical-date 2026-10-01")]
    Run(PipelineRunArgs),
    /// Run the pipeline for every date of a range, --jobs dates at a time
    /// (each date's stages in order); rerunning it redoes nothing.
    #[command(
        after_help = "Example:\n  idem pipeline backfill idem.toml --from 2026-10-01 --to 2026-10-31 --jobs 2"
    )]
    Backfill(PipelineBackfillArgs),
}

#[derive(Args, Debug)]
pub struct PipelineRunArgs {
    /// The pipeline file (idem.toml).
    pub file: PathBuf,
    /// The scheduler's logical date (YYYY-MM-DD): the slice of every
    /// stage; for an hourly pipeline the hour (2026-10-01T07, or Airflow's
    /// {{ ts }} on the hour).
    #[arg(long)]
    pub logical_date: String,
    /// Run only this stage.
    #[arg(long)]
    pub stage: Option<String>,
    #[command(flatten)]
    pub sign: SignArgs,
    #[command(flatten)]
    pub lineage: LineageArgs,
    #[command(flatten)]
    pub limits: LimitArgs,
}

#[derive(Args, Debug)]
pub struct PipelineBackfillArgs {
    /// The pipeline file (idem.toml).
    pub file: PathBuf,
    /// First date (YYYY-MM-DD), or hour of an hourly pipeline
    /// (YYYY-MM-DDTHH; a date: its first hour).
    #[arg(long)]
    pub from: String,
    /// Last date, included (YYYY-MM-DD), or hour (a date: its last hour).
    #[arg(long)]
    pub to: String,
    /// Dates (or hours) run at once.
    #[arg(long, short, default_value_t = 2)]
    pub jobs: usize,
    /// A date (or hour) whose first stage has no input is skipped instead
    /// of failing the backfill (hours that have not landed yet); a range
    /// with no input at all still fails.
    #[arg(long)]
    pub skip_missing: bool,
    #[command(flatten)]
    pub sign: SignArgs,
    #[command(flatten)]
    pub lineage: LineageArgs,
    #[command(flatten)]
    pub limits: LimitArgs,
}

pub fn pipeline(c: PipelineCommand, out: Out) -> Result<ExitCode> {
    match c {
        PipelineCommand::Run(a) => run(a, out),
        PipelineCommand::Backfill(a) => backfill(a, out),
    }
}

/// `idem pipeline run`: one date.
fn run(a: PipelineRunArgs, out: Out) -> Result<ExitCode> {
    let mut p = Pipeline::load(&a.file)?;
    let dates = [p.when_of(&a.logical_date)?];
    p.signer = a.sign.signer()?;
    let lineage = a.lineage.lineage()?.or_else(|| p.lineage.clone());
    super::interrupt::abort_on_signal(lineage.as_ref());
    p.emit_to(lineage);
    let only = match &a.stage {
        None => None,
        Some(s) => Some(p.stage_named(s).map_err(anyhow::Error::msg)?),
    };
    let sandbox = a.limits.sandbox()?;
    preflight(&p, &sandbox)?;
    let started = Instant::now();
    let runs = p.run_date(&dates[0], only, &sandbox);
    if !out.json {
        for r in &runs {
            eprintln!("{}", line(r));
        }
    }
    finish(
        &p,
        vec![(dates[0].clone(), runs)],
        started,
        out,
        (false, false),
    )
}

/// `idem pipeline backfill`: every date of a range, --jobs at a time.
fn backfill(a: PipelineBackfillArgs, out: Out) -> Result<ExitCode> {
    let mut p = Pipeline::load(&a.file)?;
    let dates = p.whens(&a.from, &a.to)?;
    idem::backfill::check_jobs(a.jobs)?;
    p.signer = a.sign.signer()?;
    let lineage = a.lineage.lineage()?.or_else(|| p.lineage.clone());
    super::interrupt::abort_on_signal(lineage.as_ref());
    p.emit_to(lineage);
    let sandbox = a.limits.sandbox()?;
    preflight(&p, &sandbox)?;
    let bar = batch::bar(p.backfill_steps(&dates));
    let stop = batch::on_ctrl_c();
    let started = Instant::now();
    let seen = Mutex::new(0usize);
    let done = |_when: &str, runs: &[StageRun]| {
        let lines: Vec<String> = runs.iter().map(line).collect();
        let Ok(mut n) = seen.lock() else { return };
        *n += 1;
        for l in lines {
            batch::say(&bar, l);
        }
        bar.inc(1);
    };
    let results = p.backfill(&dates, a.jobs, &sandbox, stop, &done);
    bar.finish();
    // Stopped (Ctrl-C): some stage runs did not start, even where a
    // slice's other stages ran (a day's daily stages after its hours).
    let stopped = stop.load(std::sync::atomic::Ordering::SeqCst);
    finish(&p, results, started, out, (a.skip_missing, stopped))
}

/// Params, modes and modules of every stage, before any date runs.
fn preflight(p: &Pipeline, sandbox: &idem::sandbox::Sandbox) -> Result<()> {
    Ok(p.preflight(sandbox)?)
}

fn line(r: &StageRun) -> String {
    let reads = r
        .input
        .as_ref()
        .map(|(t, v)| format!("  (reads {t} at version {v})"))
        .unwrap_or_default();
    match &r.result.status {
        Status::Failed(e, _) | Status::Missing(e) => {
            format!("{:<8} {}  FAILED: {e}", r.stage, r.slice)
        }
        Status::NotStarted => format!(
            "{:<8} {}  skipped (an earlier stage of the date did not finish)",
            r.stage, r.slice
        ),
        s => format!(
            "{:<8} {}  {}  {} -> {} rows{reads}",
            r.stage,
            r.slice,
            status_text(s),
            r.result.rows_in,
            r.result.rows
        ),
    }
}

/// Every date's stage runs, as they ended.
type Results = [(String, Vec<StageRun>)];

/// Report the runs; `(skip_missing, stopped)`: whether missing slices
/// are skipped, and whether the batch was stopped (Ctrl-C).
fn finish(
    p: &Pipeline,
    results: Vec<(String, Vec<StageRun>)>,
    started: Instant,
    out: Out,
    (skip_missing, stopped): (bool, bool),
) -> Result<ExitCode> {
    let secs = started.elapsed().as_secs_f64();
    let all: Vec<&StageRun> = results.iter().flat_map(|(_, r)| r).collect();
    let missing = |r: &&StageRun| matches!(r.result.status, Status::Missing(_));
    // Skipped missing dates fail only when no date had input at all.
    let all_missing = results
        .iter()
        .all(|(_, runs)| runs.first().is_some_and(|r| missing(&r)));
    let worst = all
        .iter()
        .filter_map(|r| match &r.result.status {
            Status::Failed(_, kind) => Some(kind.exit_code()),
            Status::Missing(_) if !skip_missing || all_missing => {
                Some(idem::kind::Kind::Input.exit_code())
            }
            _ => None,
        })
        .max();
    // A date none of whose stages started was interrupted (a skipped
    // stage after a failure is not).
    let interrupted = stopped
        && results
            .iter()
            .flat_map(|(_, runs)| runs)
            .any(|r| r.result.status == Status::NotStarted)
        || results
            .iter()
            .any(|(_, runs)| runs.iter().all(|r| r.result.status == Status::NotStarted));
    out.emit(
        json!({
            "pipeline": p.name,
            "dates": dates_json(p, &results),
            "seconds": secs,
            "ok": worst.is_none() && !interrupted,
        }),
        || {
            print_table(&results);
            print_totals(p, &results, &all, secs);
            if interrupted {
                println!("{}", batch::INTERRUPTED);
            }
        },
    );
    Ok(batch::exit_code(worst, interrupted).unwrap_or(ExitCode::SUCCESS))
}

/// A stage run's kind (`skipped`: an earlier stage of its date did not
/// finish, or the batch was interrupted).
fn kind(r: &StageRun) -> &'static str {
    match r.result.status {
        Status::NotStarted => "skipped",
        ref s => status_kind(s),
    }
}

/// `--json`'s `dates` (schemas/pipeline.schema.json).
fn dates_json(p: &Pipeline, results: &Results) -> Vec<Value> {
    results
        .iter()
        .map(|(date, runs)| {
            let stages: Vec<Value> = runs
                .iter()
                .map(|r| {
                    let stage = p.stages.iter().find(|s| s.name == r.stage);
                    json!({
                        "stage": r.stage,
                        "table": stage.map(|s| s.table.clone()),
                        "slice": r.slice,
                        "input": r.input.as_ref().map(|(t, v)| json!({"table": t, "version": v})),
                        "status": kind(r),
                        "version": r.version,
                        "rowsIn": r.result.rows_in,
                        "rows": r.result.rows,
                        "ms": r.result.ms,
                        "error": batch::error_of(&r.result.status),
                    })
                })
                .collect();
            json!({"date": date, "stages": stages})
        })
        .collect()
}

/// A line per stage run.
fn print_table(results: &Results) {
    let mut rows = vec![
        [
            "DATE", "STAGE", "SLICE", "RESULT", "VERSION", "ROWS IN", "ROWS OUT",
        ]
        .map(String::from)
        .to_vec(),
    ];
    for (date, runs) in results {
        for r in runs {
            rows.push(vec![
                date.clone(),
                r.stage.clone(),
                r.slice.clone(),
                kind(r).to_string(),
                r.version
                    .map(|v| v.to_string())
                    .unwrap_or_else(|| "-".into()),
                r.result.rows_in.to_string(),
                r.result.rows.to_string(),
            ]);
        }
    }
    let right = [false, false, false, false, true, true, true];
    for line in batch::aligned(&rows, &right) {
        println!("{line}");
    }
}

/// The counts of the stage runs.
fn print_totals(p: &Pipeline, results: &Results, all: &[&StageRun], secs: f64) {
    let ran = all.iter().filter(|r| executed(&r.result.status)).count();
    let memo = all
        .iter()
        .filter(|r| status_kind(&r.result.status) == "memo")
        .count();
    println!(
        "pipeline {}: {} date(s), {} stage run(s): {ran} executed, {memo} memo, {} failed; {secs:.1} s",
        p.name,
        results.len(),
        all.len(),
        all.iter()
            .filter(|r| matches!(r.result.status, Status::Failed(..) | Status::Missing(_)))
            .count()
    );
}
