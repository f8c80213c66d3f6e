//! The process's async runtime for runs: one, made on first use and shared
//! by every run, audit and lookup of the process (a backfill's jobs, the
//! service's workers), instead of one per run. The library's entry points
//! are synchronous (the CLI, the service's worker threads, a scheduler's
//! task) and drive their table I/O on it with `block_on` from their own
//! thread; never from inside an async task.
//!
//! Object-store I/O that synchronous code needs from anywhere (reading
//! inputs from a reader thread) has a runtime of its own in
//! [`crate::storage`]: waiting on it never ties up this one's workers.

use std::sync::OnceLock;

use tokio::runtime::Runtime;

static SHARED: OnceLock<Runtime> = OnceLock::new();

/// The shared runtime, started on first use.
pub fn shared() -> std::io::Result<&'static Runtime> {
    if let Some(rt) = SHARED.get() {
        return Ok(rt);
    }
    // A thread a core (at least two): concurrent runs (a backfill's jobs,
    // the service's workers) each spawn their output's encoding and
    // upload here, where one runtime a run used to give each two.
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get().max(2));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .thread_name("idem-run")
        .enable_all()
        .build()?;
    // Two threads may both have built one: the first kept wins, the other
    // is dropped here, outside any async context.
    Ok(SHARED.get_or_init(|| rt))
}
