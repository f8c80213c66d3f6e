//! Shared helpers for the end-to-end tests: real guest components built
//! from `examples/` and `tests/guests/`, real Parquet data.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use idem::sandbox::{Limits, Sandbox, SandboxConfig};

/// The workspace root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Build (once per test process; cargo makes repeats no-ops) the guest crate
/// at `rel` (e.g. `examples/clean_orders`) and return its component path.
pub fn guest(rel: &str) -> PathBuf {
    static BUILT: OnceLock<Mutex<std::collections::HashMap<String, PathBuf>>> = OnceLock::new();
    let map = BUILT.get_or_init(Default::default);
    let mut map = map.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(p) = map.get(rel) {
        return p.clone();
    }
    let sandbox = Sandbox::new(SandboxConfig {
        cache_dir: None,
        ..SandboxConfig::default()
    })
    .unwrap();
    let target = guest_target();
    let built = idem::build::build_guest(&root().join(rel), &target, None, &sandbox)
        .unwrap_or_else(|e| panic!("building guest {rel}: {e}"));
    map.insert(rel.to_string(), built.path.clone());
    built.path
}

/// The bytes of a guest component.
pub fn guest_bytes(rel: &str) -> Vec<u8> {
    std::fs::read(guest(rel)).unwrap()
}

/// The guests' target dir (absolute).
pub fn guest_target() -> PathBuf {
    let target = idem::build::default_target_dir();
    if target.is_absolute() {
        target
    } else {
        root().join(target)
    }
}

/// A compiled-code cache shared by the tests of one checkout, so each
/// module is compiled once per suite, not once per test.
pub fn test_cache() -> PathBuf {
    guest_target().join("test-compiled-cache")
}

/// A sandbox with `limits`: a fresh engine each time, sharing the tests'
/// compiled-code cache.
pub fn sandbox_with(limits: Limits) -> Sandbox {
    Sandbox::new(SandboxConfig {
        limits,
        cache_dir: Some(test_cache()),
        ..SandboxConfig::default()
    })
    .unwrap()
}

/// Run the `idem` binary; returns (exit code, stdout, stderr).
pub fn idem(args: &[&str]) -> (i32, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_idem"))
        .args(args)
        .env("IDEM_CACHE_DIR", test_cache())
        .output()
        .expect("running idem");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Sample orders for `date`: `rows` rows in `files` files under `dir`.
pub fn orders(dir: &Path, date: &str, rows: u64, files: usize) -> Vec<PathBuf> {
    idem::sample::write_day(dir, date, rows, files).unwrap()
}
