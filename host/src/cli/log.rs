//! `idem log`: the runs recorded for a table, per slice: when each ended,
//! its run key, output, params and result; filtered by slice and time.

use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use serde_json::json;

use idem::run::LogEntry;
use idem::schedule::time_of;

use super::{Out, print_json};

#[derive(Args, Debug)]
pub struct LogArgs {
    /// The table (path or URL).
    pub table: String,
    /// Only this slice's runs (e.g. date=2026-10-01).
    #[arg(long)]
    pub slice: Option<String>,
    /// Only runs that ended at or after this UTC date or time
    /// (2026-12-01, or 2026-12-01T06:30).
    #[arg(long)]
    pub since: Option<String>,
    /// Only the last N runs (after the other filters).
    #[arg(long)]
    pub limit: Option<usize>,
}

pub fn log(a: &LogArgs, out: Out) -> Result<ExitCode> {
    let since = a.since.as_deref().map(since_ms).transpose()?.unwrap_or(0);
    let mut entries = idem::run::run_log_since(&a.table, since)?;
    if let Some(slice) = &a.slice {
        entries.retain(|e| &e.slice == slice);
    }
    if let Some(n) = a.limit {
        let drop = entries.len().saturating_sub(n);
        entries.drain(..drop);
    }
    let table = &a.table;
    if out.json {
        print_json(&json!({"table": table, "runs": entries}));
        return Ok(ExitCode::SUCCESS);
    }
    if entries.is_empty() {
        println!("no idem runs recorded in {table}{}", filtered(a));
        return Ok(ExitCode::SUCCESS);
    }
    print_table(&entries);
    Ok(ExitCode::SUCCESS)
}

/// ` matching the filters`, when there are some.
fn filtered(a: &LogArgs) -> &'static str {
    match (&a.slice, &a.since, a.limit) {
        (None, None, None) => "",
        _ => " that match --slice/--since/--limit",
    }
}

fn print_table(entries: &[LogEntry]) {
    let mut by_slice: std::collections::BTreeMap<&str, Vec<&LogEntry>> = Default::default();
    for e in entries {
        by_slice.entry(e.slice.as_str()).or_default().push(e);
    }
    println!(
        "{:<24} {:<19} {:<20} {:<20} {:<26} {:>10}  PARAMS",
        "SLICE", "ENDED (UTC)", "RUN KEY", "OUTPUT", "RESULT", "ROWS"
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
                "{:<24} {:<19} {:<20} {:<20} {:<26} {:>10}  {}",
                slice,
                time_of(e.at_ms),
                &e.run_key.as_str()[..19],
                &e.output_digest.as_str()[..19],
                result,
                e.rows,
                params_of(e)
            );
        }
    }
}

/// The params as logged, shortened for a column (`-` when not logged).
fn params_of(e: &LogEntry) -> String {
    let Some(p) = e.params.as_deref() else {
        return "-".into();
    };
    // A planted entry's text never moves the terminal.
    let p: String = p
        .chars()
        .map(|c| match c.is_control() {
            true => c.escape_default().to_string(),
            false => c.to_string(),
        })
        .collect();
    match p.chars().count() > 40 {
        true => format!("{}...", p.chars().take(40).collect::<String>()),
        false => p,
    }
}

/// Unix milliseconds of `YYYY-MM-DD` or `YYYY-MM-DDTHH:MM[:SS]` (UTC).
fn since_ms(text: &str) -> Result<u64> {
    let bad = || {
        anyhow::anyhow!(
            "--since `{text}` is not a UTC date or time: use 2026-12-01 or 2026-12-01T06:30"
        )
    };
    let (date, time) = text.split_once('T').unwrap_or((text, ""));
    let day = idem::run::batch::day_number(date).map_err(|_| bad())?;
    let time = time.trim_end_matches('Z');
    let parts: Vec<u64> = match time {
        "" => vec![],
        t => t
            .split(':')
            .map(|p| p.parse::<u64>().map_err(|_| bad()))
            .collect::<Result<_, _>>()?,
    };
    let (h, m, s) = match parts.as_slice() {
        [] => (0, 0, 0),
        [h, m] => (*h, *m, 0),
        [h, m, s] => (*h, *m, *s),
        _ => return Err(bad()),
    };
    if h > 23 || m > 59 || s > 59 || day < 0 {
        return Err(bad());
    }
    Ok(((day as u64) * 86_400 + h * 3600 + m * 60 + s) * 1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since_takes_utc_dates_and_times_and_times_print_back() {
        assert_eq!(since_ms("1970-01-02").unwrap(), 86_400_000);
        assert_eq!(since_ms("2026-12-01T06:30").unwrap(), 1_796_106_600_000);
        assert_eq!(since_ms("2026-12-01T06:30:05Z").unwrap(), 1_796_106_605_000);
        assert_eq!(time_of(1_796_106_605_000), "2026-12-01 06:30:05");
        for bad in [
            "yesterday",
            "2026-13-01",
            "2026-12-01T25:00",
            "2026-12-01T06",
        ] {
            assert!(since_ms(bad).is_err(), "{bad}");
        }
    }
}
