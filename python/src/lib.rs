//! `import idem`: idem as a Python package. The native module `idem._idem`
//! calls the same library the `idem` CLI does (nothing runs in a
//! subprocess, nothing is implemented twice); `idem/__init__.py` gives it
//! typed, documented keyword functions.
//!
//! Layout: [`calls`] runs transforms (run, backfill, explain), [`inspect`]
//! reads tables (verify, audit, show, log), [`results`] and [`stored`] are
//! what they return, [`pipeline`] runs an `idem.toml`'s stages, [`limits`] the sandbox's
//! limits, [`errors`] the
//! exception classes.

mod calls;
mod errors;
mod inspect;
mod limits;
mod pipeline;
mod process;
mod results;
mod stored;

use pyo3::prelude::*;

#[pymodule]
fn _idem(m: &Bound<'_, PyModule>) -> PyResult<()> {
    errors::register(m)?;
    m.add_class::<limits::Limits>()?;
    m.add_class::<results::RunResult>()?;
    m.add_class::<results::BackfillResult>()?;
    m.add_class::<results::BackfillSlice>()?;
    m.add_class::<results::Verification>()?;
    m.add_class::<results::AuditReport>()?;
    m.add_class::<results::AuditSlice>()?;
    m.add_class::<stored::StoredRun>()?;
    m.add_class::<stored::LogEntry>()?;
    m.add_class::<stored::Explanation>()?;
    m.add_class::<stored::Change>()?;
    m.add_function(wrap_pyfunction!(calls::run, m)?)?;
    m.add_function(wrap_pyfunction!(calls::backfill, m)?)?;
    m.add_function(wrap_pyfunction!(calls::explain, m)?)?;
    m.add_function(wrap_pyfunction!(calls::compare, m)?)?;
    m.add_function(wrap_pyfunction!(calls::publish_module, m)?)?;
    m.add_function(wrap_pyfunction!(inspect::verify, m)?)?;
    m.add_function(wrap_pyfunction!(inspect::audit, m)?)?;
    m.add_function(wrap_pyfunction!(inspect::show, m)?)?;
    m.add_function(wrap_pyfunction!(inspect::log, m)?)?;
    m.add_class::<pipeline::PipelineResult>()?;
    m.add_class::<pipeline::StageResult>()?;
    m.add_function(wrap_pyfunction!(pipeline::pipeline_run, m)?)?;
    m.add("ENGINE_VERSION", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
