//! `idem sample-history` (hidden): a table's history made long, fast, for
//! the benchmark's history figure and the tests that count what a run
//! reads on a table of many versions (see `Table::sample_history`).

use std::process::ExitCode;

use anyhow::Result;
use clap::Args;

#[derive(Args, Debug)]
pub struct HistoryArgs {
    /// An overwrite-partition Delta table with at least one data file.
    #[arg(long)]
    pub table: String,
    /// How many commits to append.
    #[arg(long)]
    pub commits: u64,
    /// The partition column.
    #[arg(long, default_value = "date")]
    pub column: String,
    /// The sample slices' ids and partition values: `<prefix>-<i>`.
    #[arg(long, default_value = "sample")]
    pub prefix: String,
}

pub fn sample_history(a: HistoryArgs) -> Result<ExitCode> {
    if std::env::var("IDEM_SAMPLE_HISTORY").as_deref() != Ok("yes") {
        return Err(idem::run::RunError::Usage(
            "idem sample-history writes commits with made-up manifests into the table (an audit of it then fails): it is for benchmarks and tests only. Set IDEM_SAMPLE_HISTORY=yes to use it"
                .into(),
        )
        .into());
    }
    let rt = idem::runtime::shared()?;
    rt.block_on(async {
        let mut t = idem::table::Table::open_existing(&a.table).await?;
        t.sample_history(a.commits, &a.column, &a.prefix).await
    })?;
    Ok(ExitCode::SUCCESS)
}
