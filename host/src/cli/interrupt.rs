//! Signals: what Ctrl-C and SIGTERM do to the CLI's runs. A batch
//! (`backfill`, `pipeline backfill`) takes the first Ctrl-C as "start no
//! new slice" and lets the running ones finish. With a lineage receiver,
//! an interrupt that ends the process (a single run's Ctrl-C or SIGTERM, a
//! batch's second Ctrl-C or SIGTERM) first tells the receiver ABORT for
//! every run started and not ended (COMPLETE for one that committed), then
//! ends the process by the signal; a second signal meanwhile ends it at
//! once. Without one it ends the process as the signal would. Either way nothing
//! committed is lost: every commit is atomic, and a rerun redoes nothing
//! committed.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

use idem::lineage::Lineage;

/// Set by a batch's first Ctrl-C: start no new slice.
static STOP: AtomicBool = AtomicBool::new(false);
/// The handlers take the first Ctrl-C as [`STOP`] (a batch).
static BATCH: AtomicBool = AtomicBool::new(false);
/// A watcher tells the lineage receiver before the process ends.
static WATCHED: AtomicBool = AtomicBool::new(false);
/// The signal that is to end the process, for the watcher.
static ENDING: AtomicI32 = AtomicI32::new(0);

#[cfg(unix)]
extern "C" fn on_signal(sig: libc::c_int) {
    if sig == libc::SIGINT && BATCH.load(Ordering::SeqCst) && !STOP.swap(true, Ordering::SeqCst) {
        return;
    }
    // Ending: a batch starts nothing new meanwhile.
    STOP.store(true, Ordering::SeqCst);
    // The first ending signal goes to the watcher (ABORT, then the
    // signal's own end); a second one, or no watcher, ends it now.
    if WATCHED.load(Ordering::SeqCst) && ENDING.swap(sig, Ordering::SeqCst) == 0 {
        return;
    }
    die(sig);
}

/// End the process as `sig` would have without a handler (a shell's loop
/// then stops too, and a parent sees the signal, not an exit code).
#[cfg(unix)]
fn die(sig: libc::c_int) {
    // SAFETY: signal() and raise() are async-signal-safe.
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
        libc::raise(sig);
    }
}

#[cfg(unix)]
fn install(signals: &[libc::c_int]) {
    for &sig in signals {
        // SAFETY: reads the current disposition, then installs a handler
        // that only touches atomics and calls async-signal-safe functions.
        unsafe {
            // A signal the process was started ignoring (a background job
            // of a non-interactive shell) stays ignored.
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &mut old) == 0
                && old.sa_sigaction == libc::SIG_IGN
            {
                continue;
            }
            libc::signal(sig, on_signal as *const () as libc::sighandler_t);
        }
    }
}

/// A batch: from now on the first Ctrl-C sets the returned flag (start
/// nothing new); a second one ends the process.
pub fn on_ctrl_c() -> &'static AtomicBool {
    BATCH.store(true, Ordering::SeqCst);
    #[cfg(unix)]
    install(&[libc::SIGINT]);
    &STOP
}

/// With `lineage`, an interrupt that ends the process (Ctrl-C, or a
/// batch's second; SIGTERM) first sends ABORT for the runs started and not
/// ended. Call before the runs start.
pub fn abort_on_signal(lineage: Option<&Arc<Lineage>>) {
    let Some(l) = lineage.cloned() else {
        return;
    };
    WATCHED.store(true, Ordering::SeqCst);
    #[cfg(unix)]
    install(&[libc::SIGINT, libc::SIGTERM]);
    std::thread::spawn(move || {
        loop {
            std::thread::sleep(std::time::Duration::from_millis(50));
            let sig = ENDING.load(Ordering::SeqCst);
            if sig != 0 {
                let n = l.abort_open();
                // Never a panic here (stderr may be a closed pipe): the
                // process must end whatever happens.
                use std::io::Write as _;
                let _ = writeln!(
                    std::io::stderr(),
                    "interrupted (signal {sig}): told the lineage receiver ABORT for {n} run(s); run the same command again to finish (nothing committed is redone)"
                );
                #[cfg(unix)]
                die(sig);
                std::process::exit(128 + sig);
            }
        }
    });
}
