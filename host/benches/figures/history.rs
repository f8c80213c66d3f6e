//! The scale figures (`--only history`, issue 31).
//!
//! a. History: the same slice's memo rerun, `--force` rerun and
//!    `idem audit --slice` on a table of 10 versions against one of
//!    `--history-versions` (10,000 by default), each a whole `idem`
//!    process, alternating, medians. The long history is written fast by
//!    `idem sample-history` (other slices' commits, shaped like a run's),
//!    not by running 10,000 guests.
//! b. Many slices: `idem backfill` of `--slices` (1,000) small daily
//!    slices, 2 jobs: per slice, the bookkeeping (resolve and pin, commit
//!    and sidecars: the run log's own timings) against the transform's
//!    own time, and a rerun (all memo) per slice.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use crate::{Row, first_run_timings, module, work_dir};

/// Rows per sample day: small, so per-run cost is bookkeeping.
const ROWS: &str = "200";

/// Both figures.
pub fn run(versions: u64, slices: u64, samples: u64, out: &mut Vec<Row>) {
    history(versions, samples, out);
    many_slices(slices, out);
}

fn idem(args: &[&str]) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_idem"))
        .args(args)
        .env("IDEM_SAMPLE_HISTORY", "yes")
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "idem {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Seconds of one `idem` process.
fn timed(args: &[&str]) -> f64 {
    let start = Instant::now();
    idem(args);
    start.elapsed().as_secs_f64()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// A table holding slice date=2026-10-01 (one real run) and `versions`
/// versions in all.
fn table_of(dir: &Path, data: &str, versions: u64) -> String {
    let table = dir.join(format!("history-{versions}"));
    let table = table.display().to_string();
    let m = module("daily_revenue").display().to_string();
    let run = run_args(&m, data, &table);
    idem(&run.iter().map(String::as_str).collect::<Vec<_>>());
    let extra = versions.saturating_sub(2).to_string();
    idem(&["sample-history", "--table", &table, "--commits", &extra]);
    table
}

/// `idem run` of slice date=2026-10-01 into `table`.
fn run_args(m: &str, data: &str, table: &str) -> Vec<String> {
    let args = [
        "run",
        "--module",
        m,
        "--input",
        data,
        "--partition",
        "date=2026-10-01",
        "--table",
        table,
    ];
    args.map(String::from).to_vec()
}

/// Figure a.
fn history(versions: u64, samples: u64, out: &mut Vec<Row>) {
    let dir = tempfile::tempdir_in(work_dir()).unwrap();
    let data = dir.path().join("orders").display().to_string();
    idem(&[
        "sample",
        "--out",
        &data,
        "--rows",
        ROWS,
        "--files",
        "1",
        "--dates",
        "2026-10-01",
    ]);
    let short = table_of(dir.path(), &data, 10);
    let start = Instant::now();
    let long = table_of(dir.path(), &data, versions);
    println!(
        "history: {versions} versions written in {:.1} s",
        start.elapsed().as_secs_f64()
    );
    let m = module("daily_revenue").display().to_string();
    type Args = fn(&str, &str, &str) -> Vec<String>;
    let commands: [(&str, Args); 3] = [
        ("memo rerun", run_args),
        ("--force rerun (unchanged)", |m, d, t| {
            let mut a = run_args(m, d, t);
            a.push("--force".into());
            a
        }),
        ("audit --slice", |_, _, t| {
            ["audit", t, "--slice", "date=2026-10-01"]
                .map(String::from)
                .to_vec()
        }),
    ];
    for (what, args) in commands {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for _ in 0..samples {
            for (table, times) in [(&long, &mut a), (&short, &mut b)] {
                let args = args(&m, &data, table);
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                times.push(timed(&args));
            }
        }
        let (a, b) = (median(a), median(b));
        out.push(Row {
            figure: format!("11. {what}: {versions} vs 10 versions"),
            idem: format!("{:.1} ms", a * 1e3),
            baseline: format!("{:.1} ms", b * 1e3),
            ratio: a / b,
            target: "<= 1.2",
        });
    }
}

/// Figure b.
fn many_slices(slices: u64, out: &mut Vec<Row>) {
    let dir = tempfile::tempdir_in(work_dir()).unwrap();
    let data = dir.path().join("orders").display().to_string();
    let dates = idem::backfill::dates("2024-01-01", "2030-12-31").unwrap();
    let dates = &dates[..slices as usize];
    let (from, to) = (&dates[0], &dates[dates.len() - 1]);
    let mut args = vec![
        "sample", "--out", &data, "--rows", ROWS, "--files", "1", "--dates",
    ];
    args.extend(dates.iter().map(String::as_str));
    idem(&args);
    let table = dir.path().join("daily").display().to_string();
    let m = module("daily_revenue").display().to_string();
    let backfill = [
        "backfill", "--module", &m, "--input", &data, "--table", &table, "--from", from, "--to",
        to, "--jobs", "2",
    ];
    let first = timed(&backfill);
    let rerun = timed(&backfill);
    let (n, exec, bookkeeping) = first_run_timings(&table);
    assert_eq!(n as usize, dates.len(), "every slice committed once");
    out.push(Row {
        figure: format!("12. backfill {slices} x {ROWS} rows: wall per slice"),
        idem: format!("{:.1} ms", first * 1e3 / n),
        baseline: format!("{exec:.1} ms transform"),
        ratio: first * 1e3 / n / exec.max(1e-3),
        target: "report",
    });
    out.push(Row {
        figure: "12. per slice: resolve+commit vs transform".into(),
        idem: format!("{bookkeeping:.1} ms"),
        baseline: format!("{exec:.1} ms"),
        ratio: bookkeeping / exec.max(1e-3),
        target: "<= ~10 ms",
    });
    out.push(Row {
        figure: "12. rerun (all memo), per slice vs first run".into(),
        idem: format!("{:.1} ms", rerun * 1e3 / n),
        baseline: format!("{:.1} ms", first * 1e3 / n),
        ratio: rerun / first,
        target: "<= ~5 ms",
    });
}
