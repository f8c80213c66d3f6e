//! What `backfill` and `pipeline backfill` share when they run many slices
//! at once: Ctrl-C (start nothing new), the words for a slice's outcome,
//! the progress lines, and the exit code of the whole batch.

use std::process::ExitCode;

use indicatif::ProgressBar;

use idem::backfill::{SliceResult, Status};
use idem::run::RunOutcome;

/// Said when a batch was interrupted before every slice started.
pub const INTERRUPTED: &str =
    "interrupted: run the same command again to finish (nothing committed is redone)";

pub use super::interrupt::on_ctrl_c;

/// One bar for the whole batch of `len` slices (terminal only): the
/// runs' own bars would fight over the screen, so they are turned off.
pub fn bar(len: usize) -> ProgressBar {
    let bar = idem::progress::slices(len as u64);
    idem::progress::enable(false);
    bar
}

/// A line about a slice: above the bar on a terminal, else on stderr.
pub fn say(bar: &ProgressBar, line: String) {
    if bar.is_hidden() {
        eprintln!("{line}");
    } else {
        bar.println(line);
    }
}

/// The exit code of a batch: the most severe failure's (4 over 3 over 2
/// over 1), else 130 when it was interrupted.
pub fn exit_code(worst: Option<u8>, interrupted: bool) -> Option<ExitCode> {
    match worst {
        Some(code) => Some(ExitCode::from(code)),
        None if interrupted => Some(ExitCode::from(130)),
        None => None,
    }
}

/// `rows` (the header first) as lines whose columns line up, each as wide
/// as its widest cell, `right`-aligned where said (numbers).
pub fn aligned(rows: &[Vec<String>], right: &[bool]) -> Vec<String> {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let width: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    rows.iter()
        .map(|r| {
            let cells: Vec<String> = r
                .iter()
                .enumerate()
                .map(|(c, s)| match right.get(c) {
                    Some(true) => format!("{s:>w$}", w = width[c]),
                    _ => format!("{s:<w$}", w = width[c]),
                })
                .collect();
            cells.join("  ").trim_end().to_string()
        })
        .collect()
}

pub fn status_text(s: &Status) -> String {
    match s {
        Status::Done(o) => o.to_string(),
        Status::Missing(_) => "missing (no input)".into(),
        Status::Failed(..) => "FAILED".into(),
        Status::NotStarted => "not started (interrupted)".into(),
    }
}

pub fn status_kind(s: &Status) -> &'static str {
    match s {
        Status::Done(o) => o.name(),
        Status::Missing(_) => "missing",
        Status::Failed(..) => "failed",
        Status::NotStarted => "not-started",
    }
}

/// Whether the slice's transform ran (not a memo hit, not a failure).
pub fn executed(s: &Status) -> bool {
    matches!(
        s,
        Status::Done(RunOutcome::Committed { .. } | RunOutcome::Unchanged { .. })
    )
}

/// The version that holds the slice's output.
pub fn version(s: &Status) -> Option<u64> {
    match s {
        Status::Done(o) => o.version(),
        _ => None,
    }
}

/// The error a failed or missing slice reports.
pub fn error_of(s: &Status) -> Option<&str> {
    match s {
        Status::Failed(e, _) | Status::Missing(e) => Some(e.as_str()),
        _ => None,
    }
}

/// Counts by kind, in display order.
const KINDS: [&str; 6] = [
    "committed",
    "memo",
    "unchanged",
    "missing",
    "failed",
    "not-started",
];

pub fn counts(results: &[SliceResult]) -> Vec<(&'static str, usize)> {
    KINDS
        .iter()
        .map(|k| {
            (
                *k,
                results
                    .iter()
                    .filter(|r| status_kind(&r.status) == *k)
                    .count(),
            )
        })
        .collect()
}

pub fn tally(counts: &[(&'static str, usize)]) -> String {
    counts
        .iter()
        .filter(|(k, n)| *n > 0 || matches!(*k, "committed" | "memo" | "failed"))
        .map(|(k, n)| format!("{n} {k}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The input rows of the slices that ran (a memo hit reads nothing).
pub fn rows_in<'a>(results: impl IntoIterator<Item = &'a SliceResult>) -> u64 {
    results
        .into_iter()
        .filter(|r| executed(&r.status))
        .map(|r| r.rows_in)
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A long slice id or result widens its column, the others follow.
    #[test]
    fn columns_line_up_whatever_their_width() {
        let rows: Vec<Vec<String>> = [
            ["SLICE", "RESULT", "ROWS"],
            [
                "date=2026-10-01/hour=07/region=eu",
                "unchanged since version 12 (memo: already run)",
                "5",
            ],
            ["date=2026-10-01", "committed version 13", "12345"],
        ]
        .iter()
        .map(|r| r.iter().map(|s| s.to_string()).collect())
        .collect();
        let lines = aligned(&rows, &[false, false, true]);
        let at = |l: &str, s: &str| l.find(s).unwrap();
        assert_eq!(at(&lines[0], "RESULT"), at(&lines[1], "unchanged"));
        assert_eq!(at(&lines[0], "RESULT"), at(&lines[2], "committed"));
        assert!(
            lines.iter().all(|l| l.len() == lines[0].len()),
            "{lines:#?}"
        );
        assert!(lines[1].ends_with("    5") && lines[2].ends_with("12345"));
    }
}
