//! One function per `idem` subcommand: call the library, print the result.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, Result, bail};
use clap::Args;

use idem::execute::{Transformer, execute};
use idem::output::ParquetOutput;
use idem::sandbox::{GuestContext, ImportVerdict, Limits, Sandbox, SandboxConfig};
use idem::slice::ResolvedSlice;

/// Sandbox limits a user can set on the command line.
#[derive(Args, Debug, Clone)]
pub struct LimitArgs {
    /// Most linear memory the guest may use, in MiB.
    #[arg(long, default_value_t = 512)]
    pub max_memory_mb: usize,
    /// Most output the guest may return over the run, in MiB.
    #[arg(long, default_value_t = 1024)]
    pub max_output_mb: usize,
    /// Wall-clock budget of the run, in milliseconds.
    #[arg(long, default_value_t = 300_000)]
    pub deadline_ms: u64,
    /// Deterministic CPU budget in fuel units (costs ~2x; off by default).
    #[arg(long)]
    pub fuel: Option<u64>,
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
                deadline_ms: self.deadline_ms,
                fuel: self.fuel,
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
    /// The guest crate's directory.
    pub path: PathBuf,
    /// Where to write the component (default: <target-dir>/components/<crate>.wasm).
    #[arg(long, short)]
    pub out: Option<PathBuf>,
    /// cargo target dir for guest builds (default: $IDEM_GUEST_TARGET_DIR,
    /// $CARGO_TARGET_DIR/idem-guests or target/idem-guests).
    #[arg(long)]
    pub target_dir: Option<PathBuf>,
}

pub fn build(a: BuildArgs) -> Result<ExitCode> {
    let sandbox = Sandbox::new(SandboxConfig::default())?;
    let target = a.target_dir.unwrap_or_else(idem::build::default_target_dir);
    let built = idem::build::build_guest(&a.path, &target, a.out.as_deref(), &sandbox)?;
    println!("{}  {}", built.digest, built.path.display());
    Ok(ExitCode::SUCCESS)
}

pub fn inspect(bytes: &[u8]) -> Result<ExitCode> {
    let sandbox = Sandbox::new(SandboxConfig {
        cache_dir: None,
        ..SandboxConfig::default()
    })?;
    let (digest, adm) = sandbox.inspect(bytes)?;
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
    match adm.verdict() {
        Ok(()) => {
            println!(
                "verdict: admitted (profile {})",
                sandbox.config().profile.name()
            );
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            println!("verdict: rejected: {e}");
            Ok(ExitCode::from(1))
        }
    }
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

pub fn exec(a: ExecArgs) -> Result<ExitCode> {
    if a.batch_rows == 0 {
        bail!("--batch-rows must be at least 1");
    }
    serde_json::from_str::<serde_json::Value>(&a.params)
        .with_context(|| format!("--params is not valid JSON: {}", a.params))?;
    let sandbox = a.limits.sandbox()?;
    let bytes = std::fs::read(&a.module)
        .with_context(|| format!("reading module {}", a.module.display()))?;
    let module = sandbox
        .load(&bytes)
        .with_context(|| format!("module {}", a.module.display()))?;
    let slice = ResolvedSlice::from_files("files", &a.input)?;
    let reader = slice.reader(a.batch_rows as usize)?;
    let ctx = GuestContext {
        slice_id: slice.id.clone(),
        logical_date: a.logical_date.clone(),
        params: a.params.clone(),
        input_schema: reader.schema(),
        batch_rows: a.batch_rows,
    };
    let mut out = ParquetOutput::new(&a.output)?;
    let mut instance = sandbox.instantiate(&module)?;
    let outcome = execute(&mut instance as &mut dyn Transformer, &ctx, reader, |b| {
        out.write(b)
            .map_err(|e| idem::execute::ExecError::Sink(e.to_string()))
    })?;
    for line in instance.log() {
        eprintln!("[guest {}] {}", line.level, line.message);
    }
    let path = out.commit()?;
    println!("module:  {}", module.digest);
    println!("rows:    {} in, {} out", outcome.rows_in, outcome.rows_out);
    println!("output:  {}  {}", outcome.output_digest, path.display());
    Ok(ExitCode::SUCCESS)
}

#[derive(Args, Debug)]
pub struct SampleArgs {
    /// Dataset root; partitions go to <out>/date=YYYY-MM-DD/.
    #[arg(long)]
    pub out: PathBuf,
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

pub fn sample(a: SampleArgs) -> Result<ExitCode> {
    for d in &a.dates {
        for f in idem::sample::write_day(&a.out, d, a.rows, a.files)? {
            println!("{}", f.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Where the demo writes its data and outputs.
    #[arg(long, default_value = "idem-demo")]
    pub dir: PathBuf,
}

pub fn demo(a: DemoArgs) -> Result<ExitCode> {
    let examples = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../examples"));
    let sandbox = Sandbox::new(SandboxConfig::default())?;
    let target = idem::build::default_target_dir();
    eprintln!("building examples/clean_orders for wasm32-unknown-unknown ...");
    let built = idem::build::build_guest(&examples.join("clean_orders"), &target, None, &sandbox)?;
    println!("module:  {}  {}", built.digest, built.path.display());
    let data = a.dir.join("orders");
    let files = idem::sample::write_day(&data, "2026-10-01", 100_000, 2)?;
    println!("input:   {} files under {}", files.len(), data.display());
    exec(ExecArgs {
        module: built.path,
        input: files,
        output: a.dir.join("clean_orders-2026-10-01.parquet"),
        params: r#"{"min_amount": 100}"#.into(),
        batch_rows: 8192,
        logical_date: Some("2026-10-01".into()),
        limits: LimitArgs {
            max_memory_mb: 512,
            max_output_mb: 1024,
            deadline_ms: 300_000,
            fuel: None,
            cache_dir: None,
        },
    })
}
