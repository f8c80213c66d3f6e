//! The `idem` command: parse arguments, call the library, print, exit.
//! Results go to stdout (as JSON with `--json`), progress and logs to
//! stderr. Exit codes: see [`EXIT_CODES`].

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, Result};
use clap::{Parser, Subcommand};

mod cli;

/// Listed by `idem --help` and the README; [`idem::kind::Kind`] maps
/// every error to one.
const EXIT_CODES: &str = "Exit codes:
  0  ok (including a run that found its output unchanged, or a memo hit)
  1  a check did not pass: verify mismatch, failed audit, an output failing --expect
  2  usage or input error (bad flags, a missing or malformed input, bad params)
  3  the sandbox rejected the module, or the guest failed (trap, limit, bad output)
  4  storage or commit failure (unreachable store, refused credentials, a table changed under idem)
  130  a backfill was interrupted (Ctrl-C) before every slice started; run it again to finish
A backfill or pipeline with failures exits with the most severe one's code (4 > 3 > 2 > 1).";

#[derive(Parser)]
#[command(
    name = "idem",
    version,
    about = "Deterministic, idempotent host for WebAssembly data transforms",
    after_help = EXIT_CODES
)]
struct Args {
    /// More log output on stderr: -v shows what idem handled on its own
    /// (lost commit races, retries), -vv everything (debug). `RUST_LOG`
    /// (or `IDEM_LOG`) sets the filter exactly.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
    /// No progress bars (they are drawn only when stderr is a terminal).
    #[arg(short, long, global = true)]
    quiet: bool,
    /// Print the result as one JSON document on stdout (its shape:
    /// schemas/<command>.schema.json); an error as {"error": ...}.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Build a guest crate to a component .wasm and print its digest.
    #[command(
        after_help = "Example:\n  idem build examples/daily_revenue --out daily_revenue.wasm"
    )]
    Build(cli::build::BuildArgs),
    /// Show a module's digest, imports, exports and admission verdict.
    #[command(after_help = "Example:\n  idem inspect daily_revenue.wasm")]
    Inspect {
        /// The .wasm (component or wit-bindgen core module) or .wat file.
        module: PathBuf,
    },
    /// Store a module beside a table (under _idem/modules/) and print its
    /// digest: runs anywhere then name it `--module sha256:<hex>`.
    #[command(
        after_help = "Example:\n  idem publish daily_revenue.wasm --table s3://lake/daily_revenue\n  idem run --module sha256:<hex> --table s3://lake/daily_revenue ..."
    )]
    Publish(cli::publish::PublishArgs),
    /// Make an Ed25519 key pair for signing manifests (`--sign-key`) and
    /// checking them (`verify --key`, `audit --key`).
    #[command(
        after_help = "Example:\n  idem keygen --out team-signing.pem\n  idem run ... --sign-key team-signing.pem\n  idem audit TABLE --key team-signing.pub.pem"
    )]
    Keygen(cli::keygen::KeygenArgs),
    /// Run a transform over Parquet files into a Parquet file (no table).
    #[command(
        after_help = "Example:\n  idem exec --module clean_orders.wasm --input orders/date=2026-10-01/part-00000.parquet --output clean.parquet --params '{\"min_amount\": 10}'"
    )]
    Exec(cli::exec::ExecArgs),
    /// Run a transform over a slice and commit its output to a Delta table,
    /// only when the output is new.
    #[command(
        after_help = "Example:\n  idem run --module daily_revenue.wasm --input s3://lake/orders --partition date=2026-10-01 --table s3://lake/daily_revenue --logical-date 2026-10-01"
    )]
    Run(cli::run::RunArgs),
    /// Check a manifest against its own name and the table that commits
    /// it, then re-run it and compare the output digest.
    /// Exit 0 on a match, 1 on a difference.
    #[command(
        after_help = "Example:\n  idem verify lake/daily_revenue/_idem/manifests/<sha256>.json"
    )]
    Verify {
        /// The manifest file (e.g. TABLE/_idem/manifests/<hex>.json), its
        /// DSSE envelope (TABLE/_idem/attestations/<hex>/<hex>.json), or
        /// TABLE#SLICE (the slice's current run).
        manifest: PathBuf,
        /// Re-run a manifest made by another engine (idem, wasmtime or crate
        /// versions) and report whether the output still matches.
        #[arg(long)]
        allow_engine: bool,
        #[command(flatten)]
        keys: cli::flags::KeyArgs,
        #[command(flatten)]
        limits: cli::flags::LimitArgs,
    },
    /// Prove a table: each slice's current commit -> its manifest -> the
    /// rows the table holds now (-> a replay with --replay).
    /// Exit 0 when every slice is proven, 1 otherwise.
    #[command(
        after_help = "Example:\n  idem audit lake/daily_revenue --slice date=2026-10-01 --replay"
    )]
    Audit(cli::audit::AuditArgs),
    /// List the runs recorded for a table, per slice.
    #[command(
        after_help = "Example:\n  idem log lake/daily_revenue --slice date=2026-10-01 --since 2026-12-01 --limit 20"
    )]
    Log(cli::log::LogArgs),
    /// Write deterministic sample orders, partitioned by date.
    #[command(
        after_help = "Example:\n  idem sample --out data/orders --dates 2026-10-01 2026-10-02 --rows 100000"
    )]
    Sample(cli::sample::SampleArgs),
    /// Append fast sample commits to a table (benchmarks and tests).
    #[command(hide = true)]
    SampleHistory(cli::history::HistoryArgs),
    /// Run every daily partition of a date range (one idempotent run each,
    /// --jobs at a time); rerunning it redoes nothing already committed.
    #[command(
        after_help = "Example:\n  idem backfill --module daily_revenue.wasm --input lake/orders --table lake/daily_revenue --from 2026-10-01 --to 2026-10-31 --jobs 4"
    )]
    Backfill(cli::backfill::BackfillArgs),
    /// Chained stages from an idem.toml (bronze -> silver -> gold), each
    /// reading what the previous one committed for the same date.
    #[command(subcommand)]
    Pipeline(cli::pipeline::PipelineCommand),
    /// Run idem as a multi-tenant HTTP service (tenants, quotas and the
    /// listen address in the config).
    #[command(
        after_help = "Examples:\n  echo -n \"$TOKEN\" | idem serve --hash-token\n  idem serve --config serve.toml"
    )]
    Serve(cli::serve::ServeArgs),
    /// Print a stored run's manifest: a manifest file, TABLE#SLICE (the
    /// slice's current run), or a run key (a prefix will do) with --table.
    #[command(
        after_help = "Examples:\n  idem show lake/daily_revenue#date=2026-10-01\n  idem show sha256:3f2a9c1b --table lake/daily_revenue\n  idem show lake/daily_revenue/_idem/manifests/<sha256>.json --json"
    )]
    Show(cli::show::ShowArgs),
    /// Say why a run would (not) be memoized: compare a planned run (the
    /// flags of `idem run`) with the slice's current run, or two stored
    /// runs with each other, field by field.
    #[command(
        after_help = "Examples:\n  idem explain --module daily_revenue.wasm --input lake/orders --partition date=2026-10-01 --table lake/daily_revenue\n  idem explain sha256:3f2a9c1b sha256:77e0d4aa --table lake/daily_revenue"
    )]
    Explain(cli::explain::ExplainArgs),
    /// Create a transform crate that `idem build` turns into a component.
    #[command(after_help = "Example:\n  idem new daily_totals && cd daily_totals && cargo test")]
    New(cli::new::NewArgs),
    /// The quick start: build an example, generate data, run it.
    #[command(after_help = "Example:\n  idem demo --dir idem-demo")]
    Demo(cli::demo::DemoArgs),
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
    // `idem log | head` ends quietly, as other Unix tools do, instead of
    // panicking on the closed pipe.
    #[cfg(unix)]
    // SAFETY: restoring the default disposition of one signal at startup,
    // before any thread exists.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let args = match Args::try_parse() {
        Ok(a) => a,
        Err(e) if !e.use_stderr() => e.exit(), // --help, --version
        Err(e) => {
            // A usage error is exit 2, and a JSON error too under --json.
            if std::env::args_os().any(|a| a == "--json") {
                cli::print_json(&serde_json::json!({
                    "error": {
                        "kind": idem::kind::Kind::Input.name(),
                        "exitCode": idem::kind::Kind::Input.exit_code(),
                        "message": e.render().to_string().trim_end(),
                    }
                }));
            }
            let _ = e.print();
            return ExitCode::from(idem::kind::Kind::Input.exit_code());
        }
    };
    logging(args.verbose);
    // A panic is a bug, never the way an error is reported: say so.
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        eprintln!(
            "error: idem panicked. This is a bug in idem: please report it with the command line and the message below"
        );
        report(info);
    }));
    idem::progress::enable(!args.quiet);
    let json = args.json;
    match try_main(args) {
        Ok(code) => code,
        Err(e) => {
            let kind = cli::exit::kind_of_chain(e.chain());
            let message = idem::text::message_of(e.as_ref());
            if json {
                cli::print_json(&serde_json::json!({
                    "error": {
                        "kind": kind.name(),
                        "exitCode": kind.exit_code(),
                        "message": message,
                    }
                }));
            }
            eprintln!("error: {message}");
            ExitCode::from(kind.exit_code())
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
    // The guest's own log lines (host.log) are results a user wants to see.
    let quiet = "warn,idem::guest=info,deltalake_core=off,deltalake=off,delta_kernel=off,buoyant_kernel=off";
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
        .with_writer(|| idem::progress::LogWriter)
        .init();
}

fn try_main(args: Args) -> Result<ExitCode> {
    let out = cli::Out { json: args.json };
    match args.command {
        Command::Build(a) => cli::build::build(a, out),
        Command::Inspect { module } => {
            let bytes = idem::storage::read_location(&module.to_string_lossy())
                .with_context(|| format!("reading {}", module.display()))?;
            cli::inspect::inspect(&bytes, out)
        }
        Command::Publish(a) => cli::publish::publish(a, out),
        Command::Exec(a) => cli::exec::exec(a, out),
        Command::Run(a) => cli::run::run(a, out),
        Command::Verify {
            manifest,
            allow_engine,
            keys,
            limits,
        } => cli::verify::verify(&manifest, &limits, &keys, allow_engine, out),
        Command::Keygen(a) => cli::keygen::keygen(a, out),
        Command::Audit(a) => cli::audit::audit(a, out),
        Command::Log(a) => cli::log::log(&a, out),
        Command::Sample(a) => cli::sample::sample(a, out),
        Command::SampleHistory(a) => cli::history::sample_history(a),
        Command::Backfill(a) => cli::backfill::backfill(a, out),
        Command::Pipeline(c) => cli::pipeline::pipeline(c, out),
        Command::Serve(a) => cli::serve::serve(a),
        Command::Show(a) => cli::show::show(a, out),
        Command::Explain(a) => cli::explain::explain(a, out),
        Command::New(a) => cli::new::new(a, out),
        Command::Demo(a) => cli::demo::demo(a, out),
        Command::Completions { .. } | Command::Man if out.json => {
            anyhow::bail!("completions and man print no results: drop --json")
        }
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
