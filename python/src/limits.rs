//! `idem.Limits`: the sandbox's limits, as the CLI's `--max-memory-mb`,
//! `--deadline-ms`, ... set them. What is not given keeps the CLI's
//! default (the library's [`idem::sandbox::Limits::default`]).

use std::path::PathBuf;

use idem::sandbox::{Sandbox, SandboxConfig};
use pyo3::prelude::*;

use crate::errors;

/// The sandbox's limits for a run (every field optional: the CLI's
/// defaults otherwise).
#[pyclass(module = "idem", frozen, get_all, from_py_object)]
#[derive(Debug, Clone, Default)]
pub struct Limits {
    /// Most linear memory the guest may use, in MiB (default 512).
    pub max_memory_mb: Option<usize>,
    /// Most output the guest may return over the run, in MiB.
    pub max_output_mb: Option<usize>,
    /// Most rows the guest may return over the run.
    pub max_output_rows: Option<u64>,
    /// Most rows in one batch the guest returns.
    pub max_output_batch_rows: Option<u64>,
    /// Most MiB one batch of decoded input may hold.
    pub max_input_batch_mb: Option<u64>,
    /// Wall-clock budget of the run, in milliseconds (default 300000).
    pub deadline_ms: Option<u64>,
    /// Deterministic CPU budget in fuel units (off by default; costs ~2x).
    pub fuel: Option<u64>,
    /// Largest module accepted, in MiB (default 64).
    pub max_module_mb: Option<usize>,
    /// Wall-clock budget for compiling the module, in milliseconds.
    pub compile_deadline_ms: Option<u64>,
    /// Compiled-code cache directory (default: $IDEM_CACHE_DIR or ~/.cache/idem).
    pub cache_dir: Option<PathBuf>,
}

#[pymethods]
impl Limits {
    #[new]
    #[pyo3(signature = (*, max_memory_mb=None, max_output_mb=None, max_output_rows=None,
        max_output_batch_rows=None, max_input_batch_mb=None, deadline_ms=None, fuel=None,
        max_module_mb=None, compile_deadline_ms=None, cache_dir=None))]
    #[allow(clippy::too_many_arguments)] // keywords, as the CLI's flags
    fn new(
        max_memory_mb: Option<usize>,
        max_output_mb: Option<usize>,
        max_output_rows: Option<u64>,
        max_output_batch_rows: Option<u64>,
        max_input_batch_mb: Option<u64>,
        deadline_ms: Option<u64>,
        fuel: Option<u64>,
        max_module_mb: Option<usize>,
        compile_deadline_ms: Option<u64>,
        cache_dir: Option<PathBuf>,
    ) -> Self {
        Limits {
            max_memory_mb,
            max_output_mb,
            max_output_rows,
            max_output_batch_rows,
            max_input_batch_mb,
            deadline_ms,
            fuel,
            max_module_mb,
            compile_deadline_ms,
            cache_dir,
        }
    }

    fn __repr__(&self) -> String {
        format!("{self:?}")
    }
}

impl Limits {
    /// The sandbox these limits describe (a MiB count too large for this
    /// machine's sizes is refused, not wrapped).
    pub fn sandbox(&self) -> PyResult<Sandbox> {
        let mut l = idem::sandbox::Limits::default();
        let mib = |n: usize, what: &str| {
            n.checked_mul(1 << 20)
                .ok_or_else(|| errors::InputError::new_err(format!("{what} is too large")))
        };
        if let Some(n) = self.max_memory_mb {
            l.max_memory_bytes = mib(n, "max_memory_mb")?;
        }
        if let Some(n) = self.max_output_mb {
            l.max_output_bytes = mib(n, "max_output_mb")?;
        }
        if let Some(n) = self.max_module_mb {
            l.max_module_bytes = mib(n, "max_module_mb")?;
        }
        if let Some(n) = self.max_input_batch_mb {
            l.max_input_batch_bytes = n.saturating_mul(1 << 20);
        }
        l.max_output_rows = self.max_output_rows.unwrap_or(l.max_output_rows);
        l.max_output_batch_rows = self
            .max_output_batch_rows
            .unwrap_or(l.max_output_batch_rows);
        l.deadline_ms = self.deadline_ms.unwrap_or(l.deadline_ms);
        l.compile_deadline_ms = self.compile_deadline_ms.unwrap_or(l.compile_deadline_ms);
        l.fuel = self.fuel.or(l.fuel);
        let mut cfg = SandboxConfig {
            limits: l,
            ..SandboxConfig::default()
        };
        if let Some(d) = &self.cache_dir {
            cfg.cache_dir = Some(d.clone());
        }
        Sandbox::new(cfg).map_err(|e| errors::raise(e.kind(), &e))
    }
}

/// The sandbox of `limits`, or of the defaults.
pub fn sandbox(limits: Option<&Limits>) -> PyResult<Sandbox> {
    limits.cloned().unwrap_or_default().sandbox()
}
