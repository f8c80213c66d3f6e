//! `idem exec`: a transform over Parquet files into one Parquet file, with
//! no table (nothing is memoized or committed).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context as _, Result, bail};
use clap::Args;
use serde_json::json;

use idem::execute::Transformer;
use idem::output::ParquetOutput;
use idem::run::drive::{Feed, Job, drive};
use idem::slice::SliceReader;

use super::Out;
use super::flags::LimitArgs;

#[derive(Args, Debug)]
pub struct ExecArgs {
    /// The transform (.wasm from `idem build`).
    #[arg(long)]
    pub module: PathBuf,
    /// Input Parquet files (read in sorted path order).
    #[arg(long, required = true, num_args = 1..)]
    pub input: Vec<PathBuf>,
    /// Output Parquet file (written atomically).
    #[arg(long)]
    pub output: PathBuf,
    /// Transform parameters as JSON.
    #[arg(long, default_value = "{}")]
    pub params: String,
    /// Rows per input batch.
    #[arg(long, default_value_t = 8192)]
    pub batch_rows: u32,
    /// Scheduler's logical date, passed to the transform.
    #[arg(long)]
    pub logical_date: Option<String>,
    #[command(flatten)]
    pub limits: LimitArgs,
}

pub fn exec(a: ExecArgs, out: Out) -> Result<ExitCode> {
    check_exec_args(&a)?;
    let sandbox = a.limits.sandbox()?;
    let bytes = sandbox.read_module(&a.module)?;
    // Nothing is checked against the inputs later (no run key, no memo),
    // so they are hashed as they are read: one pass over their bytes. The
    // first one is copied while the module loads.
    let (reader, read) = SliceReader::of_files("files", &a.input, a.batch_rows as usize)?;
    let mut reader = reader.with_input_budget(sandbox.config().limits.input_budget());
    reader.start_copying();
    let module = sandbox
        .load(&bytes)
        .with_context(|| format!("module {}", a.module.display()))?;
    let job = Job {
        slice_id: "files".into(),
        logical_date: a.logical_date.clone(),
        params: a.params.clone(),
        batch_rows: a.batch_rows,
        sides: Vec::new(),
    };
    let (_staging, stager) = stage_beside(&a.output)?;
    let mut instance = sandbox.instantiate(&module)?;
    let progress = idem::progress::rows("running", None);
    let executed = drive(&mut instance, &job, Feed::Ahead(reader, &progress), |b| {
        stager
            .send(b)
            .map_err(|e| idem::execute::ExecError::Sink(e.to_string()))
    });
    let staged = stager.finish();
    progress.finish();
    let name = a
        .module
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let lines = idem::execute::unquoted(instance.log_lines(), &executed);
    idem::execute::show_guest_log(&name, &lines);
    let outcome = executed?;
    let inputs = read.finish()?;
    let path = place_output(staged?, outcome.output_schema.as_ref(), &a.output)?;
    out.emit(
        json!({
            "module": module.digest.as_str(),
            "rowsIn": outcome.rows_in,
            "rowsOut": outcome.rows_out,
            "outputDigest": outcome.output_digest.as_str(),
            "output": path.display().to_string(),
            "inputs": inputs,
        }),
        || {
            println!("module:  {}", module.digest);
            for i in &inputs {
                println!("input:   {}  {}", i.digest, i.path);
            }
            println!("rows:    {} in, {} out", outcome.rows_in, outcome.rows_out);
            println!("output:  {}  {}", outcome.output_digest, path.display());
        },
    );
    Ok(ExitCode::SUCCESS)
}

/// exec's flags checked as a run's are: exec feeds the guest the same
/// context.
fn check_exec_args(a: &ExecArgs) -> Result<()> {
    if a.batch_rows == 0 {
        bail!("--batch-rows must be at least 1");
    }
    idem::schedule::parse_params(&a.params).map_err(idem::run::RunError::Usage)?;
    if let Some(d) = &a.logical_date {
        idem::schedule::check_logical_date(d).map_err(idem::run::RunError::Usage)?;
    }
    Ok(())
}

/// exec's output is encoded on a writer thread (overlapping the guest)
/// into a staging dir beside `output`, renamed into place only when the
/// run succeeded ([`place_output`]).
fn stage_beside(output: &Path) -> Result<(tempfile::TempDir, idem::output::Stager)> {
    let out_dir = output
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(out_dir)?;
    let staging = tempfile::Builder::new()
        .prefix(".idem-")
        .tempdir_in(out_dir)?;
    let stager = idem::output::Stager::spawn(
        staging.path().join("output.parquet"),
        4,
        idem::output::Purpose::Delivered,
    )?;
    Ok((staging, stager))
}

/// The staged file moved to `output`; with no rows, a file of the
/// output's columns (an input of no rows still reaches the guest as a
/// zero-row batch of its schema), or of none if the guest named no schema.
fn place_output(
    staged: Option<PathBuf>,
    schema: Option<&arrow::datatypes::SchemaRef>,
    output: &Path,
) -> Result<PathBuf> {
    match staged {
        Some(file) => {
            std::fs::rename(&file, output)?;
            Ok(output.to_path_buf())
        }
        None => {
            let mut file = ParquetOutput::new(output)?;
            if let Some(schema) = schema {
                file.write(&arrow::record_batch::RecordBatch::new_empty(schema.clone()))?;
            }
            Ok(file.commit()?)
        }
    }
}
