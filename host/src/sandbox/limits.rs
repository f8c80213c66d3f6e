//! Per-run resource limits and the `ResourceLimiter` that enforces them.

use wasmtime::ResourceLimiter;

/// Resource limits of one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Most linear memory a guest may grow to, in bytes. Guest memories
    /// declare no maximum; this is the one that counts.
    pub max_memory_bytes: usize,
    /// Most bytes a guest may return over a whole run (all batches), in
    /// logical bytes: every value materialized (views followed,
    /// dictionaries expanded), which is what the host holds, digests and
    /// stages. The encoded size can be far smaller.
    pub max_output_bytes: usize,
    /// Wall-clock budget of a whole run, in milliseconds.
    pub deadline_ms: u64,
    /// Deterministic CPU budget (wasm fuel units); `None` = unmetered.
    pub fuel: Option<u64>,
    /// Most wasm stack, in bytes.
    pub max_stack_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_memory_bytes: 512 << 20,
            max_output_bytes: 64 << 30,
            deadline_ms: 300_000,
            fuel: None,
            max_stack_bytes: 1 << 20,
        }
    }
}

/// Enforces [`Limits::max_memory_bytes`] and remembers whether it fired, so
/// the resulting trap is reported as a memory limit, not a generic trap.
pub(crate) struct GuestLimiter {
    max_memory: usize,
    pub(crate) memory_denied: Option<usize>,
}

impl GuestLimiter {
    pub(crate) fn new(max_memory: usize) -> Self {
        GuestLimiter {
            max_memory,
            memory_denied: None,
        }
    }
}

/// Tables hold function references; a guest has no reason for more.
const MAX_TABLE_ELEMENTS: usize = 100_000;

impl ResourceLimiter for GuestLimiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.max_memory {
            self.memory_denied = Some(desired);
            // Trapping (rather than failing the grow) stops the guest at once
            // instead of letting it limp on into an allocator abort.
            return Err(wasmtime::Error::msg("memory limit reached"));
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }
}
