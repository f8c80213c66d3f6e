//! `idem log`: the runs recorded for a table, per slice.

use std::process::ExitCode;

use anyhow::Result;
use serde_json::json;

use super::{Out, print_json};

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
