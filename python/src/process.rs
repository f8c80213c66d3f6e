//! The one process the package may work in. idem makes its async runtime
//! and its caches' locks once per process; a child forked after that
//! (multiprocessing's default "fork" on Linux, a PySpark worker forked from
//! a daemon that ran idem) has none of the parent's threads, and a call
//! there would wait forever on them. Such a call is refused, naming the fix.

use std::sync::atomic::{AtomicU32, Ordering};

use pyo3::prelude::*;

use crate::errors::InputError;

/// The process that first used idem (0: none yet).
static OWNER: AtomicU32 = AtomicU32::new(0);

/// Before any call does work: this process is the one that first used
/// idem, or no process did yet.
pub fn enter() -> PyResult<()> {
    let me = std::process::id();
    match OWNER.compare_exchange(0, me, Ordering::SeqCst, Ordering::SeqCst) {
        Ok(_) => Ok(()),
        Err(owner) if owner == me => Ok(()),
        Err(owner) => Err(InputError::new_err(format!(
            "idem was used in process {owner} before it forked this one ({me}): its runtime threads did not survive the fork. Start child processes with the \"spawn\" or \"forkserver\" method (multiprocessing.get_context(\"spawn\")), or call idem only in the children"
        ))),
    }
}
