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
    /// More log output on stderr: -v shows what idem handled on its own
    /// (lost commit races, retries), -vv everything (debug). `RUST_LOG`
    /// (or `IDEM_LOG`) sets the filter exactly.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Build a guest crate to a component .wasm and print its digest.
    #[command(
        after_help = "Example:\n  idem build examples/daily_revenue --out daily_revenue.wasm"
    )]
    Build(cli::BuildArgs),
    /// Show a module's digest, imports, exports and admission verdict.
    #[command(after_help = "Example:\n  idem inspect daily_revenue.wasm")]
    Inspect {
        /// The .wasm (component or wit-bindgen core module) or .wat file.
        module: PathBuf,
    },
    /// Run a transform over Parquet files into a Parquet file (no table).
    #[command(
        after_help = "Example:\n  idem exec --module clean_orders.wasm --input orders/date=2026-10-01/part-00000.parquet --output clean.parquet --params '{\"min_amount\": 10}'"
    )]
    Exec(cli::ExecArgs),
    /// Run a transform over a slice and commit its output to a Delta table,
    /// only when the output is new.
    #[command(
        after_help = "Example:\n  idem run --module daily_revenue.wasm --input s3://lake/orders --partition date=2026-10-01 --table s3://lake/daily_revenue --logical-date 2026-10-01"
    )]
    Run(cli::RunArgs),
    /// Check a manifest against its own name and the table that commits
    /// it, then re-run it and compare the output digest.
    /// Exit 0 on a match, 1 on a difference, 2 on error.
    #[command(
        after_help = "Example:\n  idem verify lake/daily_revenue/_idem/manifests/<sha256>.json"
    )]
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
    #[command(
        after_help = "Example:\n  idem audit lake/daily_revenue --slice date=2026-10-01 --replay"
    )]
    Audit(cli::AuditArgs),
    /// List the runs recorded for a table, per slice.
    #[command(after_help = "Example:\n  idem log lake/daily_revenue")]
    Log {
        /// The table (path or URL).
        table: String,
    },
    /// Write deterministic sample orders, partitioned by date.
    #[command(
        after_help = "Example:\n  idem sample --out data/orders --dates 2026-10-01 2026-10-02 --rows 100000"
    )]
    Sample(cli::SampleArgs),
    /// The quick start: build an example, generate data, run it.
    #[command(after_help = "Example:\n  idem demo --dir idem-demo")]
    Demo(cli::DemoArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    #[command(
        after_help = "Example:\n  idem completions bash > ~/.local/share/bash-completion/completions/idem"
    )]
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff).
    #[command(after_help = "Example:\n  idem man > idem.1 && man ./idem.1")]
    Man,
}

fn main() -> ExitCode {
    let args = Args::parse();
    logging(args.verbose);
    match try_main(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// Logs go to stderr. By default only warnings, and none from the Delta
/// and storage libraries: they log conditions idem handles (a lost commit
/// race it resolves by re-reading, a table that does not exist yet) as
/// errors, and idem reports every real failure itself. No colour unless
/// stderr is a terminal and `NO_COLOR` is unset.
fn logging(verbose: u8) {
    use std::io::IsTerminal;
    let quiet = "warn,deltalake_core=off,deltalake=off,delta_kernel=off,buoyant_kernel=off";
    let default = match verbose {
        0 => quiet.to_string(),
        1 => "info,deltalake_core=warn,delta_kernel=warn,buoyant_kernel=warn".to_string(),
        _ => "debug".to_string(),
    };
    let filter = std::env::var("RUST_LOG")
        .or_else(|_| std::env::var("IDEM_LOG"))
        .ok()
        .and_then(|f| tracing_subscriber::EnvFilter::try_new(f).ok())
        .unwrap_or_else(|| tracing_subscriber::EnvFilter::new(default));
    let colour = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(colour)
        .with_writer(std::io::stderr)
        .init();
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
        Command::Completions { shell } => {
            use clap::CommandFactory;
            clap_complete::generate(shell, &mut Args::command(), "idem", &mut std::io::stdout());
            Ok(ExitCode::SUCCESS)
        }
        Command::Man => {
            use clap::CommandFactory;
            clap_mangen::Man::new(Args::command()).render(&mut std::io::stdout())?;
            Ok(ExitCode::SUCCESS)
        }
    }
}
