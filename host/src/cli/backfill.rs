//! `idem backfill`: a date or hour range of partitions (or listed values
//! of partition columns), N at a time, with a live display on a terminal,
//! a line per slice otherwise, and a summary.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Mutex;
use std::time::Instant;

use anyhow::Result;
use clap::Args;
use indicatif::ProgressBar;
use serde_json::{Value, json};

use idem::backfill::{SliceResult, Status};
use idem::run::{Run, SliceSpec};
use idem::slice::Partition;
use idem::table::Mode;

use super::Out;
use super::batch::{self, counts, status_kind, status_text, tally};
use super::flags::{LimitArgs, LineageArgs, PublishArgs, RunFlags, SignArgs, TextArgs};

#[derive(Args, Debug)]
#[command(mut_args(backfill_words))]
pub struct BackfillArgs {
    /// The transform (.wasm from `idem build`).
    #[arg(long)]
    pub module: PathBuf,
    /// The dataset root (partitions COLUMN=YYYY-MM-DD below it, or
    /// COLUMN=YYYY-MM-DD/hour=HH for hourly slices).
    #[arg(long)]
    pub input: String,
    /// The target table (path or URL).
    #[arg(long)]
    pub table: String,
    /// First slice: a date (YYYY-MM-DD) or an hour (YYYY-MM-DDTHH).
    #[arg(long)]
    pub from: Option<String>,
    /// Last slice, included (the same form as --from).
    #[arg(long)]
    pub to: Option<String>,
    /// The step: 1d (daily slices) or 1h (hourly slices, date=D/hour=HH);
    /// 1h by default when --from names an hour.
    #[arg(long)]
    pub every: Option<String>,
    /// The partition column holding the date.
    #[arg(long, default_value = "date")]
    pub column: String,
    /// The partition column holding the hour (00-23), for hourly slices.
    #[arg(long, default_value = "hour")]
    pub hour_column: String,
    /// A further partition level with its values, crossed with every date
    /// or hour (or alone, without --from/--to): COLUMN=V1,V2,... (repeat
    /// for more levels).
    #[arg(long, value_name = "COLUMN=V1,V2")]
    pub each: Vec<String>,
    /// Slices run at once.
    #[arg(long, short, default_value_t = 2)]
    pub jobs: usize,
    /// A slice with no input is skipped instead of failing the backfill.
    #[arg(long)]
    pub skip_missing: bool,
    #[command(flatten)]
    pub flags: RunFlags,
    /// Rows per input batch (part of the run key).
    #[arg(long, default_value_t = 8192)]
    pub batch_rows: u32,
    /// Execute even the slices whose run was already committed.
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub publish: PublishArgs,
    #[command(flatten)]
    pub text: TextArgs,
    #[command(flatten)]
    pub sign: SignArgs,
    #[command(flatten)]
    pub lineage: LineageArgs,
    #[command(flatten)]
    pub limits: LimitArgs,
}

/// backfill's own words for two of the shared [`RunFlags`] (its slices
/// are dated partitions, and they share their params). `mut_args` keeps
/// every flag in its place (completions list them in that order).
fn backfill_words(a: clap::Arg) -> clap::Arg {
    match a.get_id().as_str() {
        "mode" => a.help("overwrite-partition (default), merge or append"),
        "params" => a.help("Transform parameters as JSON (the same for every slice)"),
        _ => a,
    }
}

pub fn backfill(a: BackfillArgs, out: Out) -> Result<ExitCode> {
    let span = span(&a);
    let partitions = span.partitions()?;
    idem::backfill::check_jobs(a.jobs)?;
    // Each slice's run is found by its slice id (what the results carry).
    let ids: Vec<String> = partitions.iter().map(|p| p.to_string()).collect();
    let by_id: std::collections::HashMap<&str, &Partition> =
        ids.iter().map(String::as_str).zip(&partitions).collect();
    if a.publish.wap_branch.is_some() {
        return Err(idem::run::RunError::Usage(
            "a backfill writes one branch per slice: say --wap (branches wap/<slice id>), not --wap-branch".into(),
        )
        .into());
    }
    let mode = a.flags.mode(&Default::default())?;
    let sandbox = a.limits.sandbox()?;
    let signer = a.sign.signer()?;
    // Every slice's events name the backfill as their parent run.
    let lineage = a.lineage.lineage()?;
    super::interrupt::abort_on_signal(lineage.as_ref());
    let parent = lineage.as_ref().map(|l| {
        l.parent(&format!(
            "backfill {}",
            idem::table::shown_location(&a.table)
        ))
    });
    // Side inputs pinned (hashed) once: every slice reads the same files.
    idem::run::check_sides(&a.flags.sides)?;
    let sides = idem::run::pin_sides(&a.flags.sides, &a.table, &sandbox.config().limits)?;
    let run_of = |id: &str| {
        slice_run(&a, mode.as_ref(), &span, by_id[id])
            .pinned_sides(sides.clone())
            .sign_with(signer.clone())
            .lineage(lineage.clone(), parent.clone())
    };

    // Checked once, not once per slice: params, mode, and that the module
    // loads (which fills the compiled-code cache before N slices start).
    run_of(&ids[0]).preflight(&sandbox)?;

    let bar = batch::bar(ids.len());
    let shown = Shown {
        bar: &bar,
        started: Instant::now(),
        seen: Mutex::new(Vec::new()),
        running: Mutex::new((Vec::new(), Vec::new())),
    };
    // A worker makes a slice's run as it starts it.
    let make = |id: &str| {
        shown.start(id);
        run_of(id)
    };

    let stop = batch::on_ctrl_c();
    let done = |r: &SliceResult| shown.done(&a, r);
    let results = idem::backfill::run(&ids, a.jobs, &sandbox, &make, stop, &done);
    bar.finish();
    let secs = shown.started.elapsed().as_secs_f64();
    let summary = Summary::of(&results, a.skip_missing, secs);
    out.emit(summary_json(&a, &results, &summary), || {
        print_summary(&results, &summary)
    });
    Ok(summary.exit_code())
}

/// The slices `a` names.
fn span(a: &BackfillArgs) -> idem::backfill::Span {
    idem::backfill::Span {
        from: a.from.clone(),
        to: a.to.clone(),
        every: a.every.clone(),
        column: a.column.clone(),
        hour_column: a.hour_column.clone(),
        each: a.each.clone(),
    }
}

/// The run of the slice `partition`. Its logical date is its date, or
/// its hour as `{{ ts }}`: what `idem run --partition` of it implies
/// (with an hour column named `hour`), so the two are the same run.
fn slice_run(
    a: &BackfillArgs,
    mode: Option<&Mode>,
    span: &idem::backfill::Span,
    partition: &Partition,
) -> Run {
    let mut run = Run::new(
        &a.module,
        SliceSpec::Partition {
            root: PathBuf::from(&a.input),
            partition: partition.clone(),
        },
        a.table.clone(),
    )
    .params(a.flags.params.clone())
    .on_schema_change(a.flags.on_schema_change)
    .logical_date(span.logical_date(partition))
    .batch_rows(a.batch_rows)
    .force(a.force);
    run = a.text.apply(a.publish.apply(run));
    if let Some(m) = mode {
        run = run.mode(m.clone());
    }
    run
}

/// What the bar shows while slices run: the slices that ended (their
/// lines above the bar, the tally and throughput in its message) and the
/// ones running.
struct Shown<'a> {
    bar: &'a ProgressBar,
    started: Instant,
    seen: Mutex<Vec<SliceResult>>,
    /// The slices running, and the tally and rate last shown.
    running: Mutex<(Vec<String>, Vec<String>)>,
}

impl Shown<'_> {
    /// Slice `id` started.
    fn start(&self, id: &str) {
        let mut running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        running.0.push(id.to_string());
        self.bar.set_message(running_text(&running.0, &running.1));
    }

    /// A slice ended: its line, and the bar's tally, throughput and
    /// running slices.
    fn done(&self, a: &BackfillArgs, r: &SliceResult) {
        let line = match &r.status {
            Status::Failed(e, _) => format!("{}  FAILED: {e}", r.date),
            Status::Missing(e) if !a.skip_missing => format!("{}  FAILED: {e}", r.date),
            s => format!(
                "{}  {}  {} rows  {:.1} s",
                r.date,
                status_text(s),
                r.rows,
                r.ms as f64 / 1000.0
            ),
        };
        let parts = {
            let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
            seen.push(r.clone());
            // Throughput of the slices that ran (a memo hit reads nothing).
            let secs = self.started.elapsed().as_secs_f64().max(1e-3);
            let rate = batch::rows_in(seen.iter()) as f64 / secs;
            vec![tally(&counts(&seen)), format!("{rate:.0} input rows/s")]
        };
        let message = {
            let mut running = self.running.lock().unwrap_or_else(|p| p.into_inner());
            running.0.retain(|id| *id != r.date);
            running.1 = parts;
            running_text(&running.0, &running.1)
        };
        if self.bar.is_hidden() {
            eprintln!("{line}");
            return;
        }
        self.bar.println(line);
        self.bar.inc(1);
        self.bar.set_message(message);
    }
}

/// The bar's message: `parts`, then the slices running (at most three
/// named).
fn running_text(running: &[String], parts: &[String]) -> String {
    let mut all: Vec<String> = parts.to_vec();
    if !running.is_empty() {
        let mut named: Vec<&str> = running.iter().take(3).map(String::as_str).collect();
        let more = running.len().saturating_sub(3);
        let tail = if more > 0 {
            format!(" +{more}")
        } else {
            String::new()
        };
        named.sort();
        all.push(format!("running {}{tail}", named.join(", ")));
    }
    all.join("; ")
}

/// The totals of a finished backfill.
struct Summary {
    secs: f64,
    rows: u64,
    rows_in: u64,
    counts: Vec<(&'static str, usize)>,
    /// The worst failure (4, storage, worth a retry, over 3, guest, over
    /// 2, input, over 1, a failed check), interrupted, all missing.
    ended: idem::backfill::Ended,
}

impl Summary {
    fn of(results: &[SliceResult], skip_missing: bool, secs: f64) -> Summary {
        Summary {
            secs,
            rows: results.iter().map(|r| r.rows).sum(),
            rows_in: batch::rows_in(results),
            counts: counts(results),
            ended: idem::backfill::Ended::of(results, skip_missing),
        }
    }

    fn exit_code(&self) -> ExitCode {
        let e = &self.ended;
        match batch::exit_code(e.worst.map(|k| k.exit_code()), e.interrupted) {
            Some(code) => code,
            None if e.all_missing => ExitCode::from(idem::kind::Kind::Input.exit_code()),
            None => ExitCode::SUCCESS,
        }
    }
}

/// `--json`'s result (schemas/backfill.schema.json).
fn summary_json(a: &BackfillArgs, results: &[SliceResult], s: &Summary) -> Value {
    let slices: Vec<Value> = results
        .iter()
        .map(|r| {
            json!({
                "slice": r.date,
                "status": status_kind(&r.status),
                "version": batch::version(&r.status),
                "rows": r.rows,
                "ms": r.ms,
                "error": batch::error_of(&r.status),
            })
        })
        .collect();
    let totals: serde_json::Map<String, Value> = s
        .counts
        .iter()
        .map(|(k, n)| (k.to_string(), json!(n)))
        .collect();
    json!({
        "table": a.table,
        "slices": slices,
        "counts": totals,
        "rowsIn": s.rows_in,
        "rows": s.rows,
        "seconds": s.secs,
        "ok": s.ended.ok(),
    })
}

/// A line per slice, and the totals.
fn print_summary(results: &[SliceResult], s: &Summary) {
    let mut rows = vec![
        ["SLICE", "RESULT", "ROWS", "SECONDS"]
            .map(String::from)
            .to_vec(),
    ];
    rows.extend(results.iter().map(|r| {
        vec![
            r.date.clone(),
            status_text(&r.status),
            r.rows.to_string(),
            format!("{:.1}", r.ms as f64 / 1000.0),
        ]
    }));
    for line in batch::aligned(&rows, &[false, false, true, true]) {
        println!("{line}");
    }
    let (rows_in, rows, secs) = (s.rows_in, s.rows, s.secs);
    println!(
        "{} slices: {}; {rows_in} input rows -> {rows} rows in {secs:.1} s ({:.0} input rows/s)",
        results.len(),
        tally(&s.counts),
        rows_in as f64 / secs.max(1e-3)
    );
    if s.ended.interrupted {
        println!("{}", batch::INTERRUPTED);
    }
    if s.ended.all_missing {
        println!(
            "no slice of the backfill has input: check --input, --column (and --hour-column, --each)"
        );
    }
}
