//! `idem run`: one slice through a transform, committed to a table only
//! when its output is new. Its slice flags are `idem explain`'s too.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use serde_json::json;

use idem::run::{NamedSlice, Run};

use super::Out;
use super::flags::{LimitArgs, LineageArgs, PublishArgs, RunFlags, SignArgs, TextArgs};

/// What a run reads, how it commits, and what the guest is given: the
/// flags `idem run` and `idem explain` share.
#[derive(Args, Debug)]
pub struct SliceArgs {
    /// Input: a Parquet dataset root (with --partition), or a Delta or
    /// Iceberg table (with --table-version or --iceberg-snapshot).
    #[arg(long)]
    pub input: Option<String>,
    /// The slice: hive partition column=value (of the dataset, or of the
    /// pinned Delta table); also the target partition for overwrite-partition.
    #[arg(long)]
    pub partition: Option<String>,
    /// The slice: an explicit list of files (Parquet, or CSV, TSV or JSON
    /// lines: see --schema).
    #[arg(long, num_args = 1.., conflicts_with = "input")]
    pub files: Vec<PathBuf>,
    /// Slice id for --files (default: derived from the file names).
    #[arg(long)]
    pub slice_id: Option<String>,
    /// The slice: the --input table at this version (a Delta version, or
    /// an Iceberg snapshot's sequence number: what `committed version N`
    /// says). Formerly --delta-version, which still works.
    #[arg(long = "table-version", visible_alias = "delta-version")]
    pub delta_version: Option<u64>,
    /// The slice: the --input Iceberg table at the snapshot with this id.
    #[arg(long, conflicts_with = "delta_version", allow_negative_numbers = true)]
    pub iceberg_snapshot: Option<i64>,
    /// With --table-version or --iceberg-snapshot: only the rows this
    /// slice of the table owns (what an upstream idem run committed for
    /// it, e.g. date=2026-10-01), or of every slice under one
    /// (`date=2026-10-01/*`: a day's hourly slices, read as the slice
    /// date=2026-10-01). Formerly --delta-slice, which still works.
    #[arg(long = "table-slice", visible_alias = "delta-slice")]
    pub delta_slice: Option<String>,
    /// The slice: the next objects of the append-only prefix --input, after
    /// the last one this table consumed (the position is committed with
    /// the output).
    #[arg(long, requires = "input", conflicts_with_all = ["partition", "delta_version", "iceberg_snapshot", "files"])]
    pub next: bool,
    /// With --next: most objects per run.
    #[arg(long, default_value_t = 100, requires = "next")]
    pub max_objects: usize,
    /// With --next: most bytes per run (at least one object is taken).
    #[arg(long, requires = "next")]
    pub max_bytes: Option<u64>,
    #[command(flatten)]
    pub flags: RunFlags,
    /// The scheduler's logical date (never the wall clock).
    #[arg(long)]
    pub logical_date: Option<String>,
    /// Rows per input batch (part of the run key).
    #[arg(long, default_value_t = 8192)]
    pub batch_rows: u32,
    #[command(flatten)]
    pub publish: PublishArgs,
    #[command(flatten)]
    pub text: TextArgs,
}

impl SliceArgs {
    /// The slice these flags name.
    pub fn names(&self) -> NamedSlice {
        let a = self;
        NamedSlice {
            input: a.input.clone(),
            partition: a.partition.clone(),
            files: a.files.clone(),
            slice_id: a.slice_id.clone(),
            delta_version: a.delta_version,
            iceberg_snapshot: a.iceberg_snapshot,
            delta_slice: a.delta_slice.clone(),
            next: a.next,
            max_objects: a.max_objects,
            max_bytes: a.max_bytes,
        }
    }

    /// The run these flags describe.
    pub fn run(&self, module: &std::path::Path, table: &str) -> Result<Run> {
        let a = self;
        let names = a.names();
        let mode = a.flags.mode(&names)?;
        let mut run = Run::new(module, names.spec()?, table)
            .params(a.flags.params.clone())
            .on_schema_change(a.flags.on_schema_change)
            .sides(a.flags.sides.clone())
            .logical_date(a.logical_date.clone())
            .batch_rows(a.batch_rows);
        run = a.text.apply(a.publish.apply(run));
        if let Some(m) = mode {
            run = run.mode(m);
        }
        Ok(run)
    }
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// The transform (.wasm from `idem build`, a path or URL), or
    /// `sha256:<hex>`: the module `idem publish` stored beside the table.
    #[arg(long)]
    pub module: PathBuf,
    /// The target Delta table (path or URL); created by the first commit.
    #[arg(long)]
    pub table: String,
    #[command(flatten)]
    pub slice: SliceArgs,
    /// Execute even if this exact run was already committed (still commits
    /// only a new output digest).
    #[arg(long)]
    pub force: bool,
    /// Who runs it (a pod or task attempt, say): kept in the run log
    /// (`idem log --json`), never hashed.
    #[arg(long)]
    pub origin: Option<String>,
    #[command(flatten)]
    pub sign: SignArgs,
    #[command(flatten)]
    pub lineage: LineageArgs,
    #[command(flatten)]
    pub limits: LimitArgs,
}

pub fn run(a: RunArgs, out: Out) -> Result<ExitCode> {
    let run = a
        .slice
        .run(&a.module, &a.table)?
        .force(a.force)
        .origin(a.origin.clone())
        .sign_with(a.sign.signer()?);
    let lineage = a.lineage.lineage()?;
    super::interrupt::abort_on_signal(lineage.as_ref());
    let run = run.lineage(lineage, None);
    let sandbox = a.limits.sandbox()?;
    let r = match run.execute(&sandbox) {
        Ok(r) => r,
        // Nothing new in an append-only source is the normal end of a
        // schedule's catch-up, not a failure.
        Err(idem::run::RunError::UpToDate { prefix, through }) => {
            out.emit(
                json!({
                    "upToDate": true,
                    "source": prefix,
                    "through": through,
                    "outcome": {"kind": "up-to-date", "version": null, "drift": null, "raced": false},
                }),
                || {
                    println!(
                        "result:   up to date: no new object in {prefix} after {}",
                        through.as_deref().unwrap_or("the start")
                    )
                },
            );
            return Ok(ExitCode::SUCCESS);
        }
        Err(e) => return Err(e.into()),
    };
    let (kind, version) = (r.outcome.name(), r.outcome.version());
    let (drift, raced) = (r.outcome.drift(), r.outcome.raced());
    out.emit(
        json!({
            "slice": r.manifest.spec.slice.id,
            "runKey": r.manifest.run_key.as_str(),
            "outputDigest": r.manifest.result.output_digest.as_str(),
            "rowsIn": r.manifest.result.rows_in,
            "rowsOut": r.manifest.result.rows_out,
            "manifest": r.manifest_url,
            "manifestDigest": r.manifest_digest.as_str(),
            "envelope": r.envelope.as_ref().map(|(d, url)| json!({"digest": d.as_str(), "url": url})),
            "outcome": {"kind": kind, "version": version, "drift": drift, "raced": raced},
            "timingsMs": r.timings_ms,
        }),
        || {
            println!("slice:    {}", r.manifest.spec.slice.id);
            println!("run key:  {}", r.manifest.run_key);
            println!(
                "output:   {} ({} rows)",
                r.manifest.result.output_digest, r.manifest.result.rows_out
            );
            println!("manifest: {}", r.manifest_url);
            if let Some((_, url)) = &r.envelope {
                println!("signed:   {url}");
            }
            println!("result:   {}", r.outcome);
        },
    );
    Ok(ExitCode::SUCCESS)
}
