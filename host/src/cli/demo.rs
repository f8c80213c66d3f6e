//! `idem demo`: the quick start. Build an example, write sample data,
//! run every day twice and show that the rerun changes nothing.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use serde_json::json;

use idem::run::{Run, RunOutcome, SliceSpec};
use idem::sandbox::{Sandbox, SandboxConfig};

use super::{Out, print_json};

#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Where the demo writes its data and outputs.
    #[arg(long, default_value = "idem-demo")]
    pub dir: PathBuf,
}

pub fn demo(a: DemoArgs, out: Out) -> Result<ExitCode> {
    // The checkout's examples, or the copy inside the binary (installed).
    let examples = idem::build::sdk_root()?.join("examples");
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
                    partition: idem::slice::Partition::one("date", d),
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
