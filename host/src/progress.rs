//! Progress bars on stderr for the steps that can take seconds: hashing
//! inputs (bytes/s), running batches through the guest (rows/s),
//! committing. Off unless the CLI turns them on; even then nothing is drawn
//! when stderr is not a terminal (indicatif checks), so pipes, log files
//! and `--json` consumers never see them. A finished bar stays on screen as
//! the step's summary line, like cargo's.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle, WeakProgressBar};

static ON: AtomicBool = AtomicBool::new(false);

/// The bar being drawn (steps run one after another), so that log lines
/// can be written around it instead of through it.
static ACTIVE: Mutex<Option<WeakProgressBar>> = Mutex::new(None);

/// Run `f` (a write to stderr) with the active bar lifted off the screen.
pub fn suspend<R>(f: impl FnOnce() -> R) -> R {
    let active = ACTIVE
        .lock()
        .ok()
        .and_then(|a| a.as_ref().and_then(WeakProgressBar::upgrade))
        .filter(|b| !b.is_finished());
    match active {
        Some(bar) => bar.suspend(f),
        None => f(),
    }
}

/// stderr for the log: each line is written with the active bar lifted,
/// so a warning during a step does not tear the bar.
pub struct LogWriter;

impl std::io::Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        suspend(|| std::io::stderr().write(buf))
    }
    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

/// Turn the bars on (the CLI, unless `-q`); the library alone draws none.
pub fn enable(on: bool) {
    ON.store(on, Ordering::Relaxed);
}

fn bar(len: Option<u64>, template: &str, message: &str) -> ProgressBar {
    if !ON.load(Ordering::Relaxed) {
        return ProgressBar::hidden();
    }
    let style = ProgressStyle::with_template(template)
        .unwrap_or_else(|_| ProgressStyle::default_spinner())
        .with_key(
            "rows_per_sec",
            |s: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
                let _ = write!(w, "{:.0} rows/s", s.per_sec());
            },
        )
        .with_key(
            "eta_known",
            |s: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
                let _ = write!(w, "{}", eta_text(s.pos(), s.eta()));
            },
        )
        .progress_chars("=> ");
    let bar = ProgressBar::with_draw_target(len, ProgressDrawTarget::stderr())
        .with_style(style)
        .with_message(message.to_string());
    bar.enable_steady_tick(Duration::from_millis(120));
    if let Ok(mut active) = ACTIVE.lock() {
        *active = Some(bar.downgrade());
    }
    bar
}

/// Bytes read and hashed, of `len` in all when known.
pub fn bytes(message: &str, len: Option<u64>) -> ProgressBar {
    match len {
        Some(_) => bar(
            len,
            "{msg:>10} [{bar:30}] {binary_bytes}/{binary_total_bytes} {binary_bytes_per_sec} {elapsed}",
            message,
        ),
        None => bar(
            None,
            "{msg:>10} {spinner} {binary_bytes} {binary_bytes_per_sec} {elapsed}",
            message,
        ),
    }
}

/// Rows through the guest, of `len` input rows in all when known.
pub fn rows(message: &str, len: Option<u64>) -> ProgressBar {
    match len {
        Some(_) => bar(
            len,
            "{msg:>10} [{bar:30}] {percent:>3}% {human_pos}/{human_len} rows {rows_per_sec}, {elapsed}, ETA {eta_known}",
            message,
        ),
        None => bar(
            None,
            "{msg:>10} {spinner} {human_pos} rows {rows_per_sec} {elapsed}",
            message,
        ),
    }
}

/// Slices of a backfill: done of `len`, the message says how they ended.
pub fn slices(len: u64) -> ProgressBar {
    bar(
        Some(len),
        "[{bar:25}] {pos}/{len} slices, {elapsed}, ETA {eta_known}  {msg}",
        "starting",
    )
}

/// An ETA as the bars show it: none until something is done (a rate of
/// nothing predicts nothing), then in seconds (`65s`) or larger units.
pub fn eta_text(done: u64, eta: Duration) -> String {
    match done {
        0 => "-".into(),
        _ => format!("{:#}", indicatif::HumanDuration(eta)),
    }
}

/// A step without a count (writing, committing).
pub fn step(message: &str) -> ProgressBar {
    bar(None, "{msg:>10} {spinner} {elapsed}", message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_eta_until_something_is_done() {
        assert_eq!(eta_text(0, Duration::ZERO), "-");
        assert_eq!(eta_text(3, Duration::from_secs(65)), "65s");
        assert_eq!(eta_text(3, Duration::from_secs(7)), "7s");
    }
}
