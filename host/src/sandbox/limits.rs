//! Per-run resource limits and the `ResourceLimiter` that enforces them.

use wasmtime::ResourceLimiter;

/// Resource limits of one run (and of loading its module).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Most linear memory a guest may hold, in bytes, over all of its
    /// memories together. Guest memories declare no maximum; this is the one
    /// that counts.
    pub max_memory_bytes: usize,
    /// Most bytes a guest may return over a whole run (all batches), in
    /// logical bytes: every value materialized (views followed,
    /// dictionaries expanded), which is what the host holds, digests and
    /// stages. The encoded size can be far smaller.
    pub max_output_bytes: usize,
    /// Most rows a guest may return over a whole run. Rows are counted on
    /// their own because a row can cost the host work and memory that no
    /// column byte accounts for (a batch with no columns, or of Null
    /// columns, has rows but no buffers; the commit adds columns per row).
    pub max_output_rows: u64,
    /// Most rows in one output batch (`push` or `finish`), checked from the
    /// stream's metadata before any array is built: the host sizes
    /// per-batch buffers (owner and partition columns, digests) from it.
    pub max_output_batch_rows: u64,
    /// Most bytes one batch of decoded input may hold on the host, and
    /// most any one Parquet page may declare once decompressed: an input
    /// file past it is refused by name, before it takes the host's memory
    /// (a 14 KB file can inflate to gigabytes). What counts is
    /// [`Limits::input_budget`].
    pub max_input_batch_bytes: u64,
    /// Wall-clock budget of a whole run, in milliseconds.
    pub deadline_ms: u64,
    /// Deterministic CPU budget (wasm fuel units); `None` = unmetered.
    pub fuel: Option<u64>,
    /// Most wasm stack, in bytes.
    pub max_stack_bytes: usize,
    /// Largest module accepted, in bytes, checked before it is parsed,
    /// encoded or compiled.
    pub max_module_bytes: usize,
    /// Wall-clock budget for compiling a module, in milliseconds (a cache
    /// hit compiles nothing).
    pub compile_deadline_ms: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_memory_bytes: 512 << 20,
            max_output_bytes: 64 << 30,
            max_output_rows: 1 << 34,
            max_output_batch_rows: 1 << 24,
            max_input_batch_bytes: crate::slice::DEFAULT_INPUT_BATCH_BYTES,
            deadline_ms: 300_000,
            fuel: None,
            max_stack_bytes: 1 << 20,
            max_module_bytes: 64 << 20,
            compile_deadline_ms: 60_000,
        }
    }
}

impl Limits {
    /// The input budget a reader gets: [`Limits::max_input_batch_bytes`],
    /// and never more than the guest's memory, which must hold each batch
    /// it is given (a larger batch could never be pushed).
    pub fn input_budget(&self) -> u64 {
        self.max_input_batch_bytes
            .min(u64::try_from(self.max_memory_bytes).unwrap_or(u64::MAX))
    }
}

/// Core instances one guest may create. A wit-bindgen component has a
/// handful (the module, wit-component's shim and fixup); a componentize-py
/// one 33 (CPython, its libraries and the stubbed WASI adapter); a
/// component that needs many more is not a transform.
pub(super) const MAX_INSTANCES: usize = 64;
/// Linear memories one guest may define. Each one reserves gigabytes of
/// address space, so the count is bounded as well as their total size.
pub(super) const MAX_MEMORIES: usize = 8;
/// Tables one guest may define.
pub(super) const MAX_TABLES: usize = 16;
/// Table elements over all tables: they hold function references; a guest
/// has no reason for more.
pub(super) const MAX_TABLE_ELEMENTS: usize = 100_000;

/// Enforces [`Limits::max_memory_bytes`] over all of a guest's memories
/// together (a component may hold several core instances, each with its
/// own memory), bounds the number of instances, memories and tables, and
/// remembers whether the memory limit fired, so the resulting trap is
/// reported as a memory limit, not a generic trap.
pub(crate) struct GuestLimiter {
    max_memory: usize,
    /// Bytes of all memories, counting growth that was granted.
    memory_total: usize,
    /// The last growth granted, taken back if wasmtime then fails it.
    memory_pending: usize,
    table_total: usize,
    table_pending: usize,
    pub(crate) memory_denied: Option<usize>,
    /// A grow that failed (and trapped), and why: for the error's text.
    pub(crate) grow_failed: Option<String>,
}

impl GuestLimiter {
    pub(crate) fn new(max_memory: usize) -> Self {
        GuestLimiter {
            max_memory,
            memory_total: 0,
            memory_pending: 0,
            table_total: 0,
            table_pending: 0,
            memory_denied: None,
            grow_failed: None,
        }
    }
}

impl ResourceLimiter for GuestLimiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        // A new memory arrives as growth from 0 to its initial size, so the
        // total counts every memory of every core instance in the store.
        let grow = desired.saturating_sub(current);
        let total = self.memory_total.saturating_add(grow);
        if total > self.max_memory {
            self.memory_denied = Some(total);
            // Trapping (rather than failing the grow) stops the guest at once
            // instead of letting it limp on into an allocator abort.
            return Err(wasmtime::Error::msg(format!(
                "guest memories would total {total} bytes, over the limit of {} bytes (raise --max-memory-mb if the transform really needs it)",
                self.max_memory
            )));
        }
        self.memory_total = total;
        self.memory_pending = grow;
        Ok(true)
    }

    fn memory_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        // A grow that fails for any reason (the host could not map the
        // memory, the module's own maximum, a memory that may not move, a
        // size the memory type cannot hold) is a trap, never
        // `memory.grow` = -1: a guest told -1 may go on and write another
        // output, and whether the host could map memory is the host's
        // state, not the run's. (The pending bytes need no giving back:
        // the trap ends the instance.)
        let why = format!("{error}");
        self.grow_failed = Some(why.clone());
        Err(wasmtime::Error::msg(format!(
            "growing guest memory failed ({why}): a failed grow stops the run rather than letting the guest go on differently on this host"
        )))
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let grow = desired.saturating_sub(current);
        let total = self.table_total.saturating_add(grow);
        if total > MAX_TABLE_ELEMENTS {
            return Ok(false);
        }
        self.table_total = total;
        self.table_pending = grow;
        Ok(true)
    }

    fn table_grow_failed(&mut self, _error: wasmtime::Error) -> wasmtime::Result<()> {
        self.table_total = self.table_total.saturating_sub(self.table_pending);
        self.table_pending = 0;
        Ok(())
    }

    fn instances(&self) -> usize {
        MAX_INSTANCES
    }

    fn memories(&self) -> usize {
        MAX_MEMORIES
    }

    fn tables(&self) -> usize {
        MAX_TABLES
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_memory_limit_covers_all_memories_together() {
        let mut l = GuestLimiter::new(100);
        // Two memories of 40 each: fine.
        assert!(l.memory_growing(0, 40, None).unwrap());
        assert!(l.memory_growing(0, 40, None).unwrap());
        // Growing either by 30 would make 110: denied, though 70 < 100.
        assert!(l.memory_growing(40, 70, None).is_err());
        assert_eq!(l.memory_denied, Some(110));
    }

    #[test]
    fn a_failed_grow_traps() {
        let mut l = GuestLimiter::new(100);
        assert!(l.memory_growing(0, 60, None).unwrap());
        let e = l
            .memory_grow_failed(wasmtime::Error::msg("os said no"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("os said no") && e.contains("stops the run"),
            "{e}"
        );
    }
}
