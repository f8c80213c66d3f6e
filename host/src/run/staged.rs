//! Write-audit-publish with a module: the staged output (before anything
//! is published), or the slice's rows on a branch, read by an audit
//! module, whose output rows are the verdict. It passes when it returns
//! at least one row and every `pass` is true.

use std::path::{Path, PathBuf};

use arrow::array::{Array, AsArray, RecordBatch};

use super::RunError;
use super::drive::{Feed, Job, drive};
use crate::execute::{ExecError, Transformer};
use crate::expect::Verdict;
use crate::sandbox::{ModuleId, Sandbox};
use crate::slice::ResolvedSlice;

/// The staged output (`None`: no rows) through the audit module.
pub(super) fn audit_staged(
    sandbox: &Sandbox,
    module: &ModuleId,
    staged: Option<&Path>,
    job: &Job,
) -> Result<Verdict, RunError> {
    // Our own staged file: listed and read, not pinned (nothing is
    // checked against its digest; the run's output digest covers it).
    let files: Vec<PathBuf> = staged.map(|p| p.to_path_buf()).into_iter().collect();
    let rows = match files.is_empty() {
        true => None,
        false => Some(ResolvedSlice::listed(&job.slice_id, &files)?),
    };
    audit_slice(sandbox, module, rows.as_ref(), job)
}

/// Rows (`None`: none) through the audit module: the staged output, or
/// the slice's rows on a branch ([`super::wap`]).
pub(super) fn audit_slice(
    sandbox: &Sandbox,
    module: &ModuleId,
    rows: Option<&ResolvedSlice>,
    job: &Job,
) -> Result<Verdict, RunError> {
    let name = format!("audit module {}", module.digest);
    let mut rows_out: Vec<(bool, String)> = Vec::new();
    let mut instance = sandbox.instantiate(&sandbox.load_identified(module)?)?;
    let mut bad_shape: Option<String> = None;
    let collect = |b: &RecordBatch| match verdict_rows(b) {
        Ok(r) => {
            rows_out.extend(r);
            Ok(())
        }
        Err(why) => {
            bad_shape = Some(why);
            Err(ExecError::Sink("bad audit output".into()))
        }
    };
    let executed = match rows {
        None => drive(&mut instance, job, Feed::Nothing, collect),
        Some(rows) => {
            let reader = rows.reader(job.batch_rows as usize)?;
            drive(&mut instance, job, Feed::Read(reader), collect)
        }
    };
    let lines = crate::execute::unquoted(Transformer::log_lines(&instance), &executed);
    crate::execute::show_guest_log(&name, &lines);
    if let Some(why) = bad_shape {
        return Err(RunError::Usage(format!("{name}: {why}")));
    }
    executed?;
    Ok(verdict(name, &rows_out))
}

/// One batch of the audit module's output as (pass, reason) rows, or why
/// it is not a verdict.
fn verdict_rows(b: &RecordBatch) -> Result<Vec<(bool, String)>, String> {
    let pass = b.column_by_name("pass").and_then(|c| c.as_boolean_opt());
    let reason = b
        .column_by_name("reason")
        .and_then(|c| c.as_string_opt::<i32>());
    let Some(pass) = pass else {
        return Err(format!(
            "the audit module returned columns ({}) without a boolean `pass`",
            b.schema()
                .fields()
                .iter()
                .map(|f| format!("{}: {}", f.name(), f.data_type()))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    };
    Ok((0..b.num_rows())
        .map(|i| {
            let why = reason
                .filter(|r| r.is_valid(i))
                .map(|r| r.value(i).to_string())
                .unwrap_or_default();
            (pass.is_valid(i) && pass.value(i), why)
        })
        .collect())
}

/// The verdict of all the rows: passed when there is one and none fails.
fn verdict(name: String, rows: &[(bool, String)]) -> Verdict {
    let failed: Vec<&String> = rows.iter().filter(|(p, _)| !p).map(|(_, r)| r).collect();
    let passed = !rows.is_empty() && failed.is_empty();
    let observed = match (rows.len(), failed.first()) {
        (0, _) => "the audit module returned no verdict row".to_string(),
        (_, Some(why)) => format!("failed: {why}"),
        (_, None) => rows
            .iter()
            .map(|(_, r)| r.as_str())
            .filter(|r| !r.is_empty())
            .collect::<Vec<_>>()
            .join("; "),
    };
    Verdict {
        expectation: name,
        passed,
        observed,
        examples: failed
            .iter()
            .skip(1)
            .take(3)
            .map(|r| r.to_string())
            .collect(),
    }
}
