//! Test hooks that make crash and race tests deterministic. They do nothing
//! unless their environment variable is set.

use std::time::{Duration, Instant};

/// A named point in a run. With `IDEM_FAULT_SLEEP_MS=<point>:<ms>` the
/// process sleeps there (so a test can kill it at that point); with
/// `IDEM_FAULT_BARRIER=<point>:<n>:<dir>` it announces itself in `<dir>` and
/// waits until `n` processes have arrived (so a test can prove that two
/// hosts really were at the same point at once).
pub fn point(name: &str) {
    // Announce first, then sleep: a test waits for the announcement and
    // kills the process while it sleeps at exactly this point.
    if let Ok(v) = std::env::var("IDEM_FAULT_BARRIER") {
        let mut parts = v.splitn(3, ':');
        if let (Some(p), Some(n), Some(dir)) = (parts.next(), parts.next(), parts.next())
            && p == name
            && let Ok(n) = n.parse::<usize>()
        {
            barrier(std::path::Path::new(dir), n);
        }
    }
    // With `IDEM_FAULT_PANIC=<point>` idem panics there: a bug inside the
    // host, for the tests of what contains one (`idem serve`).
    if std::env::var("IDEM_FAULT_PANIC").is_ok_and(|p| p == name) {
        panic!("IDEM_FAULT_PANIC at {name}");
    }
    if let Some(ms) = sleep_at(name) {
        std::thread::sleep(Duration::from_millis(ms));
    }
}

/// The same point of one slice: `<name>@<slice>` (e.g.
/// `execute@date=2026-10-03`) as well as `<name>`.
pub fn point_of(name: &str, slice: &str) {
    point(name);
    if [
        "IDEM_FAULT_SLEEP_MS",
        "IDEM_FAULT_BARRIER",
        "IDEM_FAULT_PANIC",
    ]
    .iter()
    .any(|v| std::env::var_os(v).is_some())
    {
        point(&format!("{name}@{slice}"));
    }
}

/// How long to sleep at `name`: `IDEM_FAULT_SLEEP_MS` holds
/// `<point>:<ms>[,<point>:<ms>...]`. With `IDEM_FAULT_ONCE=<dir>` a sleep
/// happens in one process only, the first to claim `<dir>/<point>` (a
/// straggler that a retried or speculative copy of the same work must not
/// meet again).
fn sleep_at(name: &str) -> Option<u64> {
    let v = std::env::var("IDEM_FAULT_SLEEP_MS").ok()?;
    let ms = v
        .split(',')
        .filter_map(|spec| spec.rsplit_once(':'))
        .find(|(p, _)| *p == name)
        .and_then(|(_, ms)| ms.parse::<u64>().ok())?;
    match std::env::var_os("IDEM_FAULT_ONCE") {
        None => Some(ms),
        Some(dir) => {
            let dir = std::path::Path::new(&dir);
            let _ = std::fs::create_dir_all(dir);
            let claim = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(dir.join(name.replace('/', "%2F")));
            claim.is_ok().then_some(ms)
        }
    }
}

fn barrier(dir: &std::path::Path, n: usize) {
    let _ = std::fs::create_dir_all(dir);
    let _ = std::fs::write(dir.join(std::process::id().to_string()), b"");
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(60) {
        let here = std::fs::read_dir(dir).map(|d| d.count()).unwrap_or(0);
        if here >= n {
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    // The test's premise (n processes at this point at once) failed: stop
    // loudly rather than let the test pass without the race it names.
    eprintln!("idem fault barrier: only some of {n} processes reached it in 60 s");
    std::process::exit(86);
}

/// With `IDEM_FAULT_FAIL=<point>`, the step named `name` reports a failure
/// after doing its work (e.g. a commit whose response is lost).
pub fn fails(name: &str) -> bool {
    std::env::var("IDEM_FAULT_FAIL").is_ok_and(|v| v == name)
}

/// With `IDEM_FAULT_MANIFEST_V1=yes` runs write v1 manifests (no
/// provenance), byte for byte what the idem before manifests v2 wrote:
/// for the tests of tables whose history that idem began.
pub fn writes_v1_manifests() -> bool {
    std::env::var("IDEM_FAULT_MANIFEST_V1").is_ok_and(|v| v == "yes")
}
