//! The runtime all object-store I/O runs on, and the way synchronous code
//! waits for it.

use std::future::Future;
use std::sync::LazyLock;

/// The runtime all object-store I/O runs on (HTTP clients keep their
/// connections on the runtime that made them). A thread a core (at least
/// two): many objects read at once are hashed as their bytes arrive, on
/// these threads.
static IO: LazyLock<tokio::runtime::Runtime> = LazyLock::new(|| {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(std::thread::available_parallelism().map_or(2, |n| n.get().max(2)))
        .thread_name("idem-io")
        .enable_all()
        .build()
        .expect("starting the storage I/O runtime")
});

/// Run `f` on the storage runtime and wait for it, from synchronous code.
pub fn block<F>(f: F) -> F::Output
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    match futures::executor::block_on(IO.spawn(f)) {
        Ok(v) => v,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(e) => panic!("storage task cancelled: {e}"),
    }
}
