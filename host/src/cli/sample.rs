//! `idem sample`: deterministic sample orders, partitioned by date.

use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use serde_json::json;

use super::{Out, print_json};

#[derive(Args, Debug)]
pub struct SampleArgs {
    /// Dataset root (path or URL); partitions go to <out>/date=YYYY-MM-DD/.
    #[arg(long)]
    pub out: String,
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

pub fn sample(a: SampleArgs, out: Out) -> Result<ExitCode> {
    let store = idem::storage::Store::at(&a.out)?;
    // Written to a local scratch folder, then put object by object (each
    // put is atomic: a reader never sees half a file).
    let tmp = tempfile::tempdir()?;
    let mut files = Vec::new();
    for d in &a.dates {
        for f in idem::sample::write_day(tmp.path(), d, a.rows, a.files)? {
            let rel = f
                .strip_prefix(tmp.path())
                .unwrap_or(&f)
                .to_string_lossy()
                .replace('\\', "/");
            store.put(&rel, std::fs::read(&f)?.into())?;
            let written = match store.local_dir() {
                Some(dir) => dir.join(&rel).display().to_string(),
                None => store.url_of(&rel).to_string(),
            };
            if !out.json {
                println!("{written}");
            }
            files.push(written);
        }
    }
    if out.json {
        print_json(&json!({"files": files}));
    }
    Ok(ExitCode::SUCCESS)
}
