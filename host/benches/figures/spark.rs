//! Figure 13 (`--only spark`, issue 30): slices per second of a backfill
//! run by idem.spark on a 2-worker standalone Spark cluster against one
//! `idem backfill --jobs 2` process, on this machine, the same small
//! slices, alternating, medians (host/benches/spark.py does the timing,
//! with the Spark environment scripts/test installs). Opt-in: it needs
//! pyspark, Java and the idem wheel in that environment, which the
//! package's build profile decides (say which in the figure's notes).

use std::path::PathBuf;
use std::process::Command;

use crate::{Row, module, root, work_dir};

/// Rows per sample day: small, so a slice's cost is its bookkeeping.
const ROWS: u64 = 2_000;

pub fn run(slices: u64, samples: u64, out: &mut Vec<Row>) {
    let python = std::env::var_os("IDEM_SPARK_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/tmp/idem-spark/bin/python"));
    let data = work_dir().join(format!("spark-{slices}"));
    let dates = idem::backfill::dates("2026-10-01", "2036-10-01").unwrap();
    if !data.join("_COMPLETE").exists() {
        for d in dates.iter().take(slices as usize) {
            idem::sample::write_day(&data, d, ROWS, 1).unwrap();
        }
        std::fs::write(data.join("_COMPLETE"), b"").unwrap();
    }
    let scratch = tempfile::tempdir_in(work_dir()).unwrap();
    let o = Command::new(&python)
        .arg(root().join("host/benches/spark.py"))
        .arg(env!("CARGO_BIN_EXE_idem"))
        .arg(module("clean_orders"))
        .arg(&data)
        .arg(scratch.path())
        .arg(slices.to_string())
        .arg(samples.to_string())
        .env("IDEM_CACHE_DIR", work_dir().join("compiled-cache"))
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "{}: {e} (run scripts/test once: it installs the Spark environment)",
                python.display()
            )
        });
    assert!(
        o.status.success(),
        "host/benches/spark.py failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let f = |k: &str| v[k].as_f64().unwrap();
    println!(
        "spark: {slices} slices, median of {samples}: one process {:.1} s, the cluster {:.1} s ({:+.0} ms per slice); application start-up {:.1} s",
        f("host_seconds"),
        f("spark_seconds"),
        f("overhead_ms_per_slice"),
        f("spark_startup_seconds")
    );
    out.push(Row {
        figure: format!("13 Spark 2 workers vs backfill --jobs 2 ({slices} slices)"),
        idem: format!("{:.2} slices/s", f("spark_slices_per_s")),
        baseline: format!("{:.2} slices/s", f("host_slices_per_s")),
        ratio: f("spark_slices_per_s") / f("host_slices_per_s"),
        target: "report (2 cores: overhead)",
    });
}
