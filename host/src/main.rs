//! The `idem` command: parse arguments, call the library, print, exit.
//! Exit codes: 0 success; 1 a check did not pass (verify mismatch);
//! 2 an error (bad input, a rejected module, a failed run).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, Result};
use clap::{Parser, Subcommand};

mod cli;

#[derive(Parser)]
#[command(
    name = "idem",
    version,
    about = "Deterministic, idempotent host for WebAssembly data transforms"
)]
struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Build a guest crate to a component .wasm and print its digest.
    Build(cli::BuildArgs),
    /// Show a module's digest, imports, exports and admission verdict.
    Inspect {
        /// The .wasm (component or wit-bindgen core module) or .wat file.
        module: PathBuf,
    },
    /// Run a transform over Parquet files into a Parquet file (no table).
    Exec(cli::ExecArgs),
    /// Run a transform over a slice and commit its output to a Delta table,
    /// only when the output is new.
    Run(cli::RunArgs),
    /// Check a manifest against its own name and the table that commits
    /// it, then re-run it and compare the output digest.
    /// Exit 0 on a match, 1 on a difference, 2 on error.
    Verify {
        /// The manifest file (e.g. TABLE/_idem/manifests/<hex>.json).
        manifest: PathBuf,
        /// Re-run a manifest made by another engine (idem, wasmtime or crate
        /// versions) and report whether the output still matches.
        #[arg(long)]
        allow_engine: bool,
        #[command(flatten)]
        limits: cli::LimitArgs,
    },
    /// Prove a table: each slice's current commit -> its manifest -> the
    /// rows the table holds now (-> a replay with --replay).
    /// Exit 0 when every slice is proven, 1 otherwise, 2 on error.
    Audit(cli::AuditArgs),
    /// List the runs recorded for a table, per slice.
    Log {
        /// The table (path or URL).
        table: String,
    },
    /// Write deterministic sample orders, partitioned by date.
    Sample(cli::SampleArgs),
    /// The quick start: build an example, generate data, run it.
    Demo(cli::DemoArgs),
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        // Quiet by default: libraries log expected conditions (a table that
        // does not exist yet) as errors. IDEM_LOG=debug shows everything.
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("IDEM_LOG").unwrap_or_else(|_| {
                tracing_subscriber::EnvFilter::new("warn,buoyant_kernel=off,deltalake_core=error")
            }),
        )
        .with_writer(std::io::stderr)
        .init();
    match try_main(Args::parse()) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn try_main(args: Args) -> Result<ExitCode> {
    match args.command {
        Command::Build(a) => cli::build(a),
        Command::Inspect { module } => {
            let bytes = idem::storage::read_location(&module.to_string_lossy())
                .with_context(|| format!("reading {}", module.display()))?;
            cli::inspect(&bytes)
        }
        Command::Exec(a) => cli::exec(a),
        Command::Run(a) => cli::run(a),
        Command::Verify {
            manifest,
            allow_engine,
            limits,
        } => cli::verify(&manifest, &limits, allow_engine),
        Command::Audit(a) => cli::audit(a),
        Command::Log { table } => cli::log(&table),
        Command::Sample(a) => cli::sample(a),
        Command::Demo(a) => cli::demo(a),
    }
}
