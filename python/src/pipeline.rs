//! `idem.pipeline_run`: the stages of an `idem.toml` for one logical date
//! (`idem pipeline run`), each pinned to what the stage before committed.

use idem::kind::Kind;
use idem::pipeline::{Pipeline, StageRun};
use pyo3::prelude::*;

use crate::errors;
use crate::limits::{self, Limits};

/// How one stage of the date ended.
#[pyclass(module = "idem", frozen, get_all)]
#[derive(Debug, Clone)]
pub struct StageResult {
    pub stage: String,
    /// The slice id (`date=2026-10-01`).
    pub slice: String,
    /// `committed`, `unchanged`, `memo`, `missing`, `failed`, or `skipped`
    /// (an earlier stage of the date did not finish).
    pub outcome: String,
    /// The version that holds the stage's output for the date.
    pub version: Option<u64>,
    pub rows_in: u64,
    pub rows_out: u64,
    pub seconds: f64,
    /// For `failed` and `missing`: the error's kind and message.
    pub error_kind: Option<String>,
    pub error: Option<String>,
    /// The upstream table and the version this stage read (later stages).
    pub reads_table: Option<String>,
    pub reads_version: Option<u64>,
}

/// A pipeline's run for one date.
#[pyclass(module = "idem", frozen, get_all)]
#[derive(Debug, Clone)]
pub struct PipelineResult {
    pub pipeline: String,
    pub logical_date: String,
    pub stages: Vec<StageResult>,
    /// No stage failed.
    pub ok: bool,
}

#[pymethods]
impl PipelineResult {
    /// Raise the exception of the worst failed stage (a storage failure,
    /// the one a retry can fix, ranks first, as the CLI's exit code
    /// does); nothing when every stage ended well.
    fn raise_for_failure(&self) -> PyResult<()> {
        let worst = self
            .stages
            .iter()
            .filter_map(|s| Some((Kind::from_name(s.error_kind.as_deref()?)?, s)))
            .max_by_key(|(k, _)| k.exit_code());
        let Some((kind, s)) = worst else {
            return Ok(());
        };
        let message = format!(
            "stage {} of {} failed: {}",
            s.stage,
            s.slice,
            s.error.as_deref().unwrap_or("")
        );
        Err(errors::of_kind(kind, message))
    }

    fn __repr__(&self) -> String {
        format!(
            "PipelineResult(pipeline={:?}, logical_date={:?}, ok={}, stages={})",
            self.pipeline,
            self.logical_date,
            self.ok,
            self.stages.len()
        )
    }
}

impl StageResult {
    fn of(r: &StageRun) -> Self {
        let res = &r.result;
        let (outcome, error_kind, error) = crate::results::status_fields(&res.status, "skipped");
        StageResult {
            stage: r.stage.clone(),
            slice: r.slice.clone(),
            outcome: outcome.into(),
            version: r.version,
            rows_in: res.rows_in,
            rows_out: res.rows,
            seconds: res.ms as f64 / 1000.0,
            error_kind,
            error,
            reads_table: r.input.as_ref().map(|(t, _)| t.clone()),
            reads_version: r.input.as_ref().map(|(_, v)| *v),
        }
    }
}

/// Run the pipeline file's stages (or one `stage`) for `logical_date`.
/// A stage's failure is a result (see `raise_for_failure`); a pipeline
/// file that cannot be used is an exception.
#[pyfunction]
#[pyo3(signature = (file, logical_date, stage=None, limits=None, lineage=None, lineage_namespace=None))]
pub fn pipeline_run(
    py: Python<'_>,
    file: std::path::PathBuf,
    logical_date: String,
    stage: Option<String>,
    limits: Option<Limits>,
    lineage: Option<String>,
    lineage_namespace: Option<String>,
) -> PyResult<PipelineResult> {
    crate::process::enter()?;
    py.detach(move || {
        let fail = |e: &(dyn std::error::Error + 'static), k: Kind| errors::raise(k, e);
        let mut p = Pipeline::load(&file).map_err(|e| fail(&e, e.kind()))?;
        // A date, or an hour of an hourly pipeline (`{{ ts }}` on the hour).
        let when = p.when_of(&logical_date).map_err(errors::run_error)?;
        // `lineage` overrides the file's `[pipeline] lineage`, as `--lineage` does.
        let given = match &lineage {
            Some(target) => Some(
                crate::calls::shared_lineage(target, lineage_namespace)
                    .map_err(|why| errors::of_kind(Kind::Input, why))?,
            ),
            None => None,
        };
        let lineage = given.or_else(|| p.lineage.clone());
        p.emit_to(lineage);
        let only = match &stage {
            None => None,
            Some(s) => Some(
                p.stage_named(s)
                    .map_err(|why| errors::of_kind(Kind::Input, why))?,
            ),
        };
        let sandbox = limits::sandbox(limits.as_ref())?;
        p.preflight(&sandbox).map_err(|e| fail(&e, e.kind()))?;
        let runs = p.run_date(&when, only, &sandbox);
        let stages: Vec<StageResult> = runs.iter().map(StageResult::of).collect();
        Ok(PipelineResult {
            pipeline: p.name.clone(),
            ok: stages.iter().all(|s| s.error_kind.is_none()),
            logical_date,
            stages,
        })
    })
}
