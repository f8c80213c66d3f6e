//! One function per `idem` subcommand: call the library, print the result
//! (for people, or as JSON with `--json`: the shapes are
//! `schemas/<command>.schema.json`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context as _, Result, bail};
use clap::Args;
use serde_json::{Value, json};

pub mod backfill;
pub mod exit;
pub mod pipeline;
pub mod serve;
pub mod show;

/// Where results go: stdout, for people or as one JSON document.
#[derive(Debug, Clone, Copy)]
pub struct Out {
    /// `--json`.
    pub json: bool,
}

impl Out {
    /// Print `value` as JSON with `--json`, else call `human`.
    pub fn emit(self, value: Value, human: impl FnOnce()) {
        if self.json {
            print_json(&value);
        } else {
            human();
        }
    }
}

/// One JSON document and a newline on stdout.
pub fn print_json(v: &Value) {
    println!("{}", serde_json::to_string_pretty(v).unwrap_or_default());
}

use idem::execute::{Transformer, execute};
use idem::output::ParquetOutput;
use idem::run::{Run, RunOutcome, SliceSpec, Verdict, parse_partition};
use idem::sandbox::{GuestContext, ImportVerdict, Limits, Sandbox, SandboxConfig};
use idem::slice::SliceReader;
use idem::table::Mode;

/// Sandbox limits a user can set on the command line.
#[derive(Args, Debug, Clone)]
pub struct LimitArgs {
    /// Most linear memory the guest may use, in MiB.
    #[arg(long, default_value_t = 512)]
    pub max_memory_mb: usize,
    /// Most output the guest may return over the run, in MiB.
    #[arg(long, default_value_t = 65536)]
    pub max_output_mb: usize,
    /// Most rows the guest may return over the run.
    #[arg(long, default_value_t = 1 << 34)]
    pub max_output_rows: u64,
    /// Most rows in one batch the guest returns.
    #[arg(long, default_value_t = 1 << 24)]
    pub max_output_batch_rows: u64,
    /// Most MiB one batch of decoded input may hold (and any one Parquet
    /// page once decompressed); capped by --max-memory-mb.
    #[arg(long, default_value_t = 256)]
    pub max_input_batch_mb: u64,
    /// Wall-clock budget of the run, in milliseconds.
    #[arg(long, default_value_t = 300_000)]
    pub deadline_ms: u64,
    /// Deterministic CPU budget in fuel units (costs ~2x; off by default).
    #[arg(long)]
    pub fuel: Option<u64>,
    /// Largest module accepted, in MiB (checked before it is compiled).
    #[arg(long, default_value_t = 64)]
    pub max_module_mb: usize,
    /// Wall-clock budget for compiling the module, in milliseconds.
    #[arg(long, default_value_t = 60_000)]
    pub compile_deadline_ms: u64,
    /// Compiled-code cache directory (default: $IDEM_CACHE_DIR or ~/.cache/idem).
    #[arg(long)]
    pub cache_dir: Option<PathBuf>,
}

impl LimitArgs {
    pub fn sandbox(&self) -> Result<Sandbox> {
        let mut cfg = SandboxConfig {
            limits: Limits {
                max_memory_bytes: self.max_memory_mb << 20,
                max_output_bytes: self.max_output_mb << 20,
                max_output_rows: self.max_output_rows,
                max_output_batch_rows: self.max_output_batch_rows,
                max_input_batch_bytes: self.max_input_batch_mb.saturating_mul(1 << 20),
                deadline_ms: self.deadline_ms,
                fuel: self.fuel,
                max_module_bytes: self.max_module_mb.saturating_mul(1 << 20),
                compile_deadline_ms: self.compile_deadline_ms,
                ..Limits::default()
            },
            ..SandboxConfig::default()
        };
        if let Some(d) = &self.cache_dir {
            cfg.cache_dir = Some(d.clone());
        }
        Ok(Sandbox::new(cfg)?)
    }
}

#[derive(Args, Debug)]
pub struct BuildArgs {
    /// The transform's project folder: a Rust crate (Cargo.toml), a
    /// JavaScript package (package.json) or a Python project
    /// (pyproject.toml or app.py).
    pub path: PathBuf,
    /// The project's language, when its folder holds more than one kind of
    /// project file (default: what the files show).
    #[arg(long, value_enum)]
    pub lang: Option<idem::build::Language>,
    /// Where to write the component (default: <target-dir>/components/<crate>.wasm).
    #[arg(long, short)]
    pub out: Option<PathBuf>,
    /// cargo target dir for guest builds (default: $IDEM_GUEST_TARGET_DIR,
    /// $CARGO_TARGET_DIR/idem-guests or target/idem-guests).
    #[arg(long)]
    pub target_dir: Option<PathBuf>,
}

pub fn build(a: BuildArgs, out: Out) -> Result<ExitCode> {
    // The user's own project: its first compile (a JS or Python engine
    // takes ~15-45 s) is not held to a run's compile budget.
    let mut config = SandboxConfig::default();
    config.limits.compile_deadline_ms = BUILD_COMPILE_DEADLINE_MS;
    let sandbox = Sandbox::new(config)?;
    let target = a.target_dir.unwrap_or_else(idem::build::default_target_dir);
    let built = match a.lang {
        Some(lang) => idem::build::build_as(lang, &a.path, &target, a.out.as_deref(), &sandbox)?,
        None => idem::build::build_guest(&a.path, &target, a.out.as_deref(), &sandbox)?,
    };
    out.emit(
        json!({
            "module": built.digest.as_str(),
            "path": built.path.display().to_string(),
            "language": built.language.name(),
        }),
        || println!("{}  {}", built.digest, built.path.display()),
    );
    Ok(ExitCode::SUCCESS)
}

/// How long `idem build` lets its own output compile (10 minutes).
const BUILD_COMPILE_DEADLINE_MS: u64 = 600_000;

pub fn inspect(bytes: &[u8], out: Out) -> Result<ExitCode> {
    // The default cache, as `idem build` and `idem run` use it: a module
    // just built is inspected without compiling it again.
    let sandbox = Sandbox::new(SandboxConfig::default())?;
    let (digest, adm) = sandbox.inspect(bytes)?;
    let verdict = adm.verdict();
    let profile = sandbox.config().profile.name();
    let imports: Vec<Value> = adm
        .imports
        .iter()
        .map(|(name, v)| match v {
            ImportVerdict::Allowed => json!({"name": name, "allowed": true}),
            ImportVerdict::Forbidden(r) => json!({"name": name, "allowed": false, "reason": r}),
        })
        .collect();
    out.emit(
        json!({
            "module": digest.as_str(),
            "imports": imports,
            "exports": adm.exports,
            "admitted": verdict.is_ok(),
            "profile": profile,
            "rejection": verdict.as_ref().err().map(|e| e.to_string()),
        }),
        || {
            println!("digest:  {digest}");
            println!("imports:");
            for (name, v) in &adm.imports {
                match v {
                    ImportVerdict::Allowed => println!("  {name}  (allowed)"),
                    ImportVerdict::Forbidden(r) => println!("  {name}  (FORBIDDEN: {r})"),
                }
            }
            println!("exports:");
            for e in &adm.exports {
                println!("  {e}");
            }
            match &verdict {
                Ok(()) => println!("verdict: admitted (profile {profile})"),
                Err(e) => println!("verdict: rejected: {e}"),
            }
        },
    );
    // A rejected module is a sandbox rejection (exit 3), reported as the
    // result above rather than as an error.
    Ok(match verdict {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => ExitCode::from(e.kind().exit_code()),
    })
}

#[derive(Args, Debug)]
pub struct ExecArgs {
    /// The transform (.wasm from `idem build`).
    #[arg(long)]
    pub module: PathBuf,
    /// Input Parquet files (read in sorted path order).
    #[arg(long, required = true, num_args = 1..)]
    pub input: Vec<PathBuf>,
    /// Output Parquet file (written atomically).
    #[arg(long)]
    pub output: PathBuf,
    /// Transform parameters as JSON.
    #[arg(long, default_value = "{}")]
    pub params: String,
    /// Rows per input batch.
    #[arg(long, default_value_t = 8192)]
    pub batch_rows: u32,
    /// Scheduler's logical date, passed to the transform.
    #[arg(long)]
    pub logical_date: Option<String>,
    #[command(flatten)]
    pub limits: LimitArgs,
}

pub fn exec(a: ExecArgs, out: Out) -> Result<ExitCode> {
    check_exec_args(&a)?;
    let sandbox = a.limits.sandbox()?;
    let bytes = sandbox.read_module(&a.module)?;
    // Nothing is checked against the inputs later (no run key, no memo),
    // so they are hashed as they are read: one pass over their bytes. The
    // first one is copied while the module loads.
    let (reader, read) = SliceReader::of_files("files", &a.input, a.batch_rows as usize)?;
    let mut reader = reader.with_input_budget(sandbox.config().limits.input_budget());
    reader.start_copying();
    let module = sandbox
        .load(&bytes)
        .with_context(|| format!("module {}", a.module.display()))?;
    let ctx = GuestContext {
        slice_id: "files".into(),
        logical_date: a.logical_date.clone(),
        params: a.params.clone(),
        input_schema: reader.schema(),
        batch_rows: a.batch_rows,
    };
    let (_staging, stager) = stage_beside(&a.output)?;
    let mut instance = sandbox.instantiate(&module)?;
    let progress = idem::progress::rows("running", None);
    let batches = |declared: &idem::execute::Declared| {
        Ok(reader.narrow(declared)?.prefetch(2).inspect(|b| {
            if let Ok(b) = b {
                progress.inc(b.num_rows() as u64);
            }
        }))
    };
    let executed = execute(&mut instance as &mut dyn Transformer, &ctx, batches, |b| {
        stager
            .send(b)
            .map_err(|e| idem::execute::ExecError::Sink(e.to_string()))
    });
    let staged = stager.finish();
    progress.finish();
    let name = a
        .module
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    idem::execute::show_guest_log(&name, &instance.log_lines());
    let outcome = executed?;
    let inputs = read.finish()?;
    let path = place_output(staged?, outcome.output_schema.as_ref(), &a.output)?;
    out.emit(
        json!({
            "module": module.digest.as_str(),
            "rowsIn": outcome.rows_in,
            "rowsOut": outcome.rows_out,
            "outputDigest": outcome.output_digest.as_str(),
            "output": path.display().to_string(),
            "inputs": inputs,
        }),
        || {
            println!("module:  {}", module.digest);
            for i in &inputs {
                println!("input:   {}  {}", i.digest, i.path);
            }
            println!("rows:    {} in, {} out", outcome.rows_in, outcome.rows_out);
            println!("output:  {}  {}", outcome.output_digest, path.display());
        },
    );
    Ok(ExitCode::SUCCESS)
}

/// exec's flags checked as a run's are: exec feeds the guest the same
/// context.
fn check_exec_args(a: &ExecArgs) -> Result<()> {
    if a.batch_rows == 0 {
        bail!("--batch-rows must be at least 1");
    }
    idem::schedule::parse_params(&a.params).map_err(idem::run::RunError::Usage)?;
    if let Some(d) = &a.logical_date {
        idem::schedule::check_logical_date(d).map_err(idem::run::RunError::Usage)?;
    }
    Ok(())
}

/// exec's output is encoded on a writer thread (overlapping the guest)
/// into a staging dir beside `output`, renamed into place only when the
/// run succeeded ([`place_output`]).
fn stage_beside(output: &Path) -> Result<(tempfile::TempDir, idem::output::Stager)> {
    let out_dir = output
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(out_dir)?;
    let staging = tempfile::Builder::new()
        .prefix(".idem-")
        .tempdir_in(out_dir)?;
    let stager = idem::output::Stager::spawn(
        staging.path().join("output.parquet"),
        4,
        idem::output::Purpose::Delivered,
    )?;
    Ok((staging, stager))
}

/// The staged file moved to `output`; with no rows, a file of the
/// output's columns (an input of no rows still reaches the guest as a
/// zero-row batch of its schema), or of none if the guest named no schema.
fn place_output(
    staged: Option<PathBuf>,
    schema: Option<&arrow::datatypes::SchemaRef>,
    output: &Path,
) -> Result<PathBuf> {
    match staged {
        Some(file) => {
            std::fs::rename(&file, output)?;
            Ok(output.to_path_buf())
        }
        None => {
            let mut file = ParquetOutput::new(output)?;
            if let Some(schema) = schema {
                file.write(&arrow::record_batch::RecordBatch::new_empty(schema.clone()))?;
            }
            Ok(file.commit()?)
        }
    }
}

/// What a run reads, how it commits, and what the guest is given: the
/// flags `idem run` and `idem explain` share.
#[derive(Args, Debug)]
pub struct SliceArgs {
    /// Input: a Parquet dataset root (with --partition), or a Delta table
    /// (with --delta-version).
    #[arg(long)]
    pub input: Option<String>,
    /// The slice: hive partition column=value (of the dataset, or of the
    /// pinned Delta table); also the target partition for overwrite-partition.
    #[arg(long)]
    pub partition: Option<String>,
    /// The slice: an explicit list of Parquet files.
    #[arg(long, num_args = 1.., conflicts_with = "input")]
    pub files: Vec<PathBuf>,
    /// Slice id for --files (default: derived from the file names).
    #[arg(long)]
    pub slice_id: Option<String>,
    /// The slice: the --input Delta table at this version.
    #[arg(long)]
    pub delta_version: Option<u64>,
    /// With --delta-version: only the rows this slice of the table owns
    /// (what an upstream idem run committed for it, e.g. date=2026-10-01).
    #[arg(long, requires = "delta_version")]
    pub delta_slice: Option<String>,
    /// The slice: the next objects of the append-only prefix --input, after
    /// the last one this table consumed (the position is committed with
    /// the output).
    #[arg(long, requires = "input", conflicts_with_all = ["partition", "delta_version", "files"])]
    pub next: bool,
    /// With --next: most objects per run.
    #[arg(long, default_value_t = 100, requires = "next")]
    pub max_objects: usize,
    /// With --next: most bytes per run (at least one object is taken).
    #[arg(long, requires = "next")]
    pub max_bytes: Option<u64>,
    /// overwrite-partition (default with --partition), merge or append.
    #[arg(long)]
    pub mode: Option<String>,
    /// Merge key columns, comma-separated.
    #[arg(long, value_delimiter = ',')]
    pub key: Vec<String>,
    /// Transform parameters as JSON.
    #[arg(long, default_value = "{}")]
    pub params: String,
    /// The scheduler's logical date (never the wall clock).
    #[arg(long)]
    pub logical_date: Option<String>,
    /// Rows per input batch (part of the run key).
    #[arg(long, default_value_t = 8192)]
    pub batch_rows: u32,
    #[command(flatten)]
    pub publish: PublishArgs,
}

/// Write-audit-publish: what an output must pass before it is published
/// (`run`, `explain` and `backfill`).
#[derive(Args, Debug)]
pub struct PublishArgs {
    /// An expectation the output must meet before it is published
    /// (repeatable): not_null(col), unique(col[,col]), rows(MIN..MAX),
    /// between(col, MIN, MAX), in(col, a|b|c). A run that fails one
    /// publishes nothing and exits 1.
    #[arg(long = "expect", value_name = "CHECK")]
    pub expect: Vec<idem::expect::Expectation>,
    /// An audit module: a transform that reads the staged output and
    /// returns rows `pass: bool, reason: text`; the output is published
    /// only when every row passes.
    #[arg(long)]
    pub audit_module: Option<PathBuf>,
    /// The audit module's params (JSON).
    #[arg(long, default_value = "{}", requires = "audit_module")]
    pub audit_params: String,
}

impl PublishArgs {
    /// `run` with these checks.
    pub fn apply(&self, run: Run) -> Run {
        run.expect(self.expect.clone())
            .audit_module(self.audit_module.clone(), self.audit_params.clone())
    }
}

/// `--mode` and `--key` as a mode. Without a partition, overwrite-partition
/// takes the slice's own (a Delta or dated slice).
pub fn parse_mode(
    mode: Option<&str>,
    keys: &[String],
    partition: Option<(String, String)>,
) -> Result<Option<Mode>> {
    Ok(match mode {
        None => None,
        Some("overwrite-partition") => {
            let (column, value) = partition.unwrap_or_default();
            Some(Mode::OverwritePartition { column, value })
        }
        Some("merge") => Some(Mode::Merge {
            keys: keys.to_vec(),
        }),
        Some("append") => Some(Mode::Append),
        Some(other) => bail!("unknown --mode `{other}`: use overwrite-partition, merge or append"),
    })
}

impl SliceArgs {
    /// The run these flags describe.
    pub fn run(&self, module: &std::path::Path, table: &str) -> Result<Run> {
        let a = self;
        let partition = a.partition.as_deref().map(parse_partition).transpose()?;
        let slice = match (&a.input, a.delta_version, &partition, a.files.is_empty()) {
            (Some(root), None, None, true) if a.next => SliceSpec::Next {
                root: root.clone(),
                max_objects: a.max_objects,
                max_bytes: a.max_bytes,
            },
            (Some(table), Some(version), _, true) => SliceSpec::Delta {
                table: table.clone(),
                version,
                // With --delta-slice, --partition names only the target's.
                partition: partition.clone().filter(|_| a.delta_slice.is_none()),
                slice: a.delta_slice.clone(),
            },
            (Some(root), None, Some((column, value)), true) => SliceSpec::Partition {
                root: PathBuf::from(root),
                column: column.clone(),
                value: value.clone(),
            },
            (None, None, _, false) => SliceSpec::Files {
                files: a.files.clone(),
                id: a.slice_id.clone().or(a.partition.clone()),
            },
            (Some(_), None, None, true) => bail!(
                "--input needs --partition column=value (a dataset partition) or --delta-version N (a Delta table)"
            ),
            _ => bail!(
                "give one slice: --input ROOT --partition K=V, --input TABLE --delta-version N [--partition K=V], or --files F..."
            ),
        };
        let mode_name = a.mode.as_deref().or_else(|| {
            (a.delta_slice.is_some() && partition.is_some()).then_some("overwrite-partition")
        });
        let mode = parse_mode(mode_name, &a.key, partition)?;
        let mut run = Run::new(module, slice, table)
            .params(a.params.clone())
            .logical_date(a.logical_date.clone())
            .batch_rows(a.batch_rows);
        run = a.publish.apply(run);
        if let Some(m) = mode {
            run = run.mode(m);
        }
        Ok(run)
    }
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// The transform (.wasm from `idem build`).
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
    #[command(flatten)]
    pub limits: LimitArgs,
}

pub fn run(a: RunArgs, out: Out) -> Result<ExitCode> {
    let run = a.slice.run(&a.module, &a.table)?.force(a.force);
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
    let (kind, version, drift, raced) = match &r.outcome {
        RunOutcome::Committed { version, drift } => {
            ("committed", Some(*version), drift.clone(), false)
        }
        RunOutcome::Unchanged { since, raced } => ("unchanged", *since, None, *raced),
        RunOutcome::Memo { since } => ("memo", *since, None, false),
    };
    out.emit(
        json!({
            "slice": r.manifest.spec.slice.id,
            "runKey": r.manifest.run_key.as_str(),
            "outputDigest": r.manifest.result.output_digest.as_str(),
            "rowsIn": r.manifest.result.rows_in,
            "rowsOut": r.manifest.result.rows_out,
            "manifest": r.manifest_url,
            "manifestDigest": r.manifest_digest.as_str(),
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
            println!("result:   {}", r.outcome);
        },
    );
    Ok(ExitCode::SUCCESS)
}

pub fn verify(
    manifest: &std::path::Path,
    limits: &LimitArgs,
    allow_engine: bool,
    out: Out,
) -> Result<ExitCode> {
    let location = manifest.to_string_lossy();
    let bytes = idem::storage::read_location(&location)
        .with_context(|| format!("reading manifest {location}"))?;
    let sandbox = limits.sandbox()?;
    let url = idem::storage::locate(&location)?;
    let (_, file_name) = idem::storage::split_last(&url);
    let name = Some(file_name.as_str()).filter(|n| !n.is_empty());
    let check = idem::audit::verify_manifest(name, &bytes, &sandbox, allow_engine)?;
    let (matched, digest, reason) = match &check.verdict {
        Verdict::Match { output_digest } => (true, Some(output_digest.as_str()), None),
        Verdict::Mismatch(why) => (false, None, Some(why.as_str())),
    };
    out.emit(
        json!({
            "manifest": location,
            "match": matched,
            "outputDigest": digest,
            "reason": reason,
            "notes": check.notes,
        }),
        || {
            for n in &check.notes {
                println!("{n}");
            }
            match &check.verdict {
                Verdict::Match { output_digest } => {
                    println!("match: re-run produced {output_digest}")
                }
                Verdict::Mismatch(why) => println!("MISMATCH: {why}"),
            }
        },
    );
    Ok(if matched {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

#[derive(Args, Debug)]
pub struct AuditArgs {
    /// The table (path or URL).
    pub table: String,
    /// Only this slice.
    #[arg(long)]
    pub slice: Option<String>,
    /// Also re-run every slice's manifest and compare the output.
    #[arg(long)]
    pub replay: bool,
    #[command(flatten)]
    pub limits: LimitArgs,
}

pub fn audit(a: AuditArgs, out: Out) -> Result<ExitCode> {
    let sandbox = if a.replay {
        Some(a.limits.sandbox()?)
    } else {
        None
    };
    let opts = idem::audit::AuditOptions {
        slice: a.slice.clone(),
        replay: sandbox.as_ref(),
    };
    let report = idem::audit::audit(&a.table, &opts)?;
    let state = |p: &idem::audit::Proof| match p {
        idem::audit::Proof::Proven => "proven",
        idem::audit::Proof::ChainOnly => "chain-proven",
        idem::audit::Proof::Failed => "failed",
    };
    let failed = report
        .iter()
        .filter(|s| s.proof == idem::audit::Proof::Failed)
        .count();
    let slices: Vec<Value> = report
        .iter()
        .map(|s| {
            json!({"slice": s.slice, "version": s.version, "proof": state(&s.proof), "detail": s.detail})
        })
        .collect();
    out.emit(
        json!({"table": a.table, "slices": slices, "proven": failed == 0}),
        || {
            if report.is_empty() {
                println!("no idem slices in {}", a.table);
                return;
            }
            for s in &report {
                let st = match s.proof {
                    idem::audit::Proof::Failed => "FAILED",
                    ref p => state(p),
                };
                println!("{:<24} v{:<6} {:<13} {}", s.slice, s.version, st, s.detail);
            }
            if failed > 0 {
                println!("{failed} of {} slices are not proven", report.len());
            } else {
                println!("all {} slices proven", report.len());
            }
        },
    );
    Ok(if failed > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

pub fn log(table: &str, out: Out) -> Result<ExitCode> {
    let entries = idem::run::run_log(table)?;
    if out.json {
        print_json(&json!({"table": table, "runs": entries}));
        return Ok(ExitCode::SUCCESS);
    }
    if entries.is_empty() {
        println!("no idem runs recorded in {table}");
        return Ok(ExitCode::SUCCESS);
    }
    let mut by_slice: std::collections::BTreeMap<&str, Vec<&idem::run::LogEntry>> =
        Default::default();
    for e in &entries {
        by_slice.entry(e.slice.as_str()).or_default().push(e);
    }
    println!(
        "{:<24} {:<20} {:<20} {:<26} {:>10}",
        "SLICE", "RUN KEY", "OUTPUT", "RESULT", "ROWS"
    );
    for (slice, runs) in by_slice {
        for e in runs {
            let v = e
                .version
                .map(|v| v.to_string())
                .unwrap_or_else(|| "?".into());
            let result = match e.outcome.as_str() {
                "committed" => format!("committed v{v}"),
                "memo" => format!("memo, unchanged since v{v}"),
                _ => format!("unchanged since v{v}"),
            };
            println!(
                "{:<24} {:<20} {:<20} {:<26} {:>10}",
                slice,
                &e.run_key.as_str()[..19],
                &e.output_digest.as_str()[..19],
                result,
                e.rows
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(Args, Debug)]
pub struct SampleArgs {
    /// Dataset root (path or URL); partitions go to <out>/date=YYYY-MM-DD/.
    #[arg(long)]
    pub out: String,
    /// Dates to write.
    #[arg(long, num_args = 1.., default_values_t = ["2026-10-01".to_string(), "2026-10-02".to_string(), "2026-10-03".to_string()])]
    pub dates: Vec<String>,
    /// Rows per date.
    #[arg(long, default_value_t = 100_000)]
    pub rows: u64,
    /// Files per date.
    #[arg(long, default_value_t = 2)]
    pub files: usize,
}

pub fn sample(a: SampleArgs, out: Out) -> Result<ExitCode> {
    let store = idem::storage::Store::at(&a.out)?;
    // Written to a local scratch folder, then put object by object (each
    // put is atomic: a reader never sees half a file).
    let tmp = tempfile::tempdir()?;
    let mut files = Vec::new();
    for d in &a.dates {
        for f in idem::sample::write_day(tmp.path(), d, a.rows, a.files)? {
            let rel = f
                .strip_prefix(tmp.path())
                .unwrap_or(&f)
                .to_string_lossy()
                .replace('\\', "/");
            store.put(&rel, std::fs::read(&f)?.into())?;
            let written = match store.local_dir() {
                Some(dir) => dir.join(&rel).display().to_string(),
                None => store.url_of(&rel).to_string(),
            };
            if !out.json {
                println!("{written}");
            }
            files.push(written);
        }
    }
    if out.json {
        print_json(&json!({"files": files}));
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Where the demo writes its data and outputs.
    #[arg(long, default_value = "idem-demo")]
    pub dir: PathBuf,
}

pub fn demo(a: DemoArgs, out: Out) -> Result<ExitCode> {
    let examples = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../examples"));
    let sandbox = Sandbox::new(SandboxConfig::default())?;
    let target = idem::build::default_target_dir();
    eprintln!("building examples/daily_revenue for wasm32-unknown-unknown ...");
    let built = idem::build::build_guest(&examples.join("daily_revenue"), &target, None, &sandbox)?;
    let say = |line: String| {
        if !out.json {
            println!("{line}");
        }
    };
    say(format!(
        "module:   {}  {}",
        built.digest,
        built.path.display()
    ));
    let data = a.dir.join("orders");
    let table = a.dir.join("daily_revenue");
    let dates = ["2026-10-01", "2026-10-02", "2026-10-03"];
    for d in dates {
        idem::sample::write_day(&data, d, 100_000, 2)?;
    }
    say(format!(
        "input:    {} (3 days x 100000 orders)",
        data.display()
    ));
    say(format!("table:    {}", table.display()));
    let mut runs = Vec::new();
    // Every day twice: the second pass is a rerun and must change nothing.
    for pass in ["run", "rerun"] {
        for d in dates {
            let r = Run::new(
                &built.path,
                SliceSpec::Partition {
                    root: data.clone(),
                    column: "date".into(),
                    value: d.into(),
                },
                table.display().to_string(),
            )
            .logical_date(Some(d.into()))
            .execute(&sandbox)?;
            say(format!(
                "{pass:<5}  date={d}  {} rows  {}",
                r.manifest.result.rows_out, r.outcome
            ));
            runs.push(json!({
                "pass": pass,
                "slice": r.manifest.spec.slice.id,
                "rows": r.manifest.result.rows_out,
                "result": r.outcome.to_string(),
            }));
            // The point of the demo: a rerun changes nothing.
            if pass == "rerun" && !matches!(r.outcome, RunOutcome::Memo { .. }) {
                eprintln!(
                    "error: the rerun of date={d} did not find its committed run ({}): idempotency is broken",
                    r.outcome
                );
                return Ok(ExitCode::from(1));
            }
        }
    }
    say(format!("history: idem log {}", table.display()));
    if out.json {
        print_json(&json!({
            "module": built.digest.as_str(),
            "input": data.display().to_string(),
            "table": table.display().to_string(),
            "runs": runs,
        }));
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(Args, Debug)]
pub struct NewArgs {
    /// The crate's name (lowercase, `_` or `-`), e.g. daily_totals.
    pub name: String,
    /// Where to create it (default: ./NAME).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Depend on the idem-guest crate at this path (default: this idem's
    /// own guest-sdk/ when it is on disk, else the published crate).
    #[arg(long)]
    pub sdk_path: Option<PathBuf>,
    /// The transform's language: a Rust crate, a JavaScript package or a
    /// Python project.
    #[arg(long, value_enum, default_value = "rust")]
    pub lang: idem::build::Language,
}

pub fn new(a: NewArgs, out: Out) -> Result<ExitCode> {
    use idem::scaffold::Sdk;
    let dir = a.dir.clone().unwrap_or_else(|| PathBuf::from(&a.name));
    let own = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../guest-sdk"));
    let sdk =
        match a.sdk_path {
            Some(p) => Sdk::Path(std::fs::canonicalize(&p).with_context(|| {
                format!("--sdk-path {}: no idem-guest crate there", p.display())
            })?),
            None => match std::fs::canonicalize(&own) {
                Ok(p) if p.join("Cargo.toml").is_file() => Sdk::Path(p),
                _ => Sdk::Version(env!("CARGO_PKG_VERSION").to_string()),
            },
        };
    let files = match a.lang {
        idem::build::Language::Rust => idem::scaffold::new_crate(&dir, &a.name, &sdk)?,
        lang => idem::scaffold::new_project(&dir, &a.name, lang)?,
    };
    let files: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
    out.emit(
        json!({"crate": a.name, "path": dir.display().to_string(), "files": files}),
        || {
            println!("created {} in {}", a.name, dir.display());
            let build = format!(
                "idem build {} --out {}.wasm",
                dir.display(),
                a.name.replace('-', "_")
            );
            if a.lang == idem::build::Language::Rust {
                println!("next:    cd {} && cargo test", dir.display());
                println!("         {build}");
            } else {
                println!("next:    {build}");
            }
        },
    );
    Ok(ExitCode::SUCCESS)
}
