//! Rust guests: `cargo rustc` for wasm32-unknown-unknown, link-time
//! optimized, then the core module encoded as a component.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::BuildError;

/// Build the guest crate at `crate_dir` (release, wasm32-unknown-unknown)
/// and encode it as a component; returns it and the crate's file stem.
/// Built again when another project's crate of the same name was built
/// last in `target_dir` (see [`super::target::Owner`]).
pub(super) fn build(crate_dir: &Path, target_dir: &Path) -> Result<(Vec<u8>, String), BuildError> {
    let _one_at_a_time = super::target::BuildLock::take(target_dir)?;
    let manifest = crate_dir.join("Cargo.toml");
    // Before cargo runs, when the manifest names the stem.
    if let Some(stem) = stem_of(&manifest) {
        let owner = super::target::Owner::of(target_dir, &stem, &manifest);
        if owner.other() {
            owner.forget(target_dir, &stem);
        }
    }
    let (mut wasm, stem) = cargo(crate_dir, target_dir)?;
    let owner = super::target::Owner::of(target_dir, &stem, &manifest);
    if owner.other() {
        owner.forget(target_dir, &stem);
        wasm = cargo(crate_dir, target_dir)?.0;
    }
    let core = std::fs::read(&wasm).map_err(|e| BuildError::Write {
        path: wasm.display().to_string(),
        source: e,
    })?;
    owner.record();
    let component = crate::sandbox::encode(&core)?;
    Ok((component, stem))
}

/// `cargo rustc` of the crate: the `.wasm` it wrote, and its file stem.
fn cargo(crate_dir: &Path, target_dir: &Path) -> Result<(PathBuf, String), BuildError> {
    let manifest = crate_dir.join("Cargo.toml");
    let mut child = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        // `rustc --crate-type cdylib`: the crate's `rlib` type (for its
        // native tests) would otherwise stop cargo from link-time
        // optimizing it.
        .args([
            "rustc",
            "--release",
            "--lib",
            "--crate-type",
            "cdylib",
            "--target",
            "wasm32-unknown-unknown",
        ])
        .arg("--manifest-path")
        .arg(&manifest)
        .arg("--target-dir")
        .arg(target_dir)
        .args(["--message-format", "json-render-diagnostics"])
        // The host's own build flags (coverage, sanitizers) are not the guest's.
        // SIMD128 is deterministic (relaxed SIMD is not enabled) and lets
        // Arrow's kernels vectorize inside the sandbox.
        .env_remove("RUSTFLAGS")
        .env("CARGO_ENCODED_RUSTFLAGS", "-Ctarget-feature=+simd128")
        // Guests ship without debug info: smaller modules compile faster.
        .env("CARGO_PROFILE_RELEASE_DEBUG", "false")
        // One codegen unit, link-time optimized: Arrow's code inlines into
        // the transform's loop. These override the guest's own
        // [profile.release] (the README says so).
        .env("CARGO_PROFILE_RELEASE_LTO", "true")
        .env("CARGO_PROFILE_RELEASE_CODEGEN_UNITS", "1")
        .stdout(Stdio::piped())
        .spawn()
        .map_err(BuildError::Cargo)?;
    let stdout = child.stdout.take().expect("stdout is piped");
    let mut wasm: Option<PathBuf> = None;
    let canonical = std::fs::canonicalize(&manifest).unwrap_or(manifest.clone());
    for line in std::io::BufRead::lines(std::io::BufReader::new(stdout)) {
        let Ok(line) = line else { break };
        let Ok(msg) = serde_json::from_str::<serde_json::Value>(&line) else {
            continue;
        };
        if msg["reason"] != "compiler-artifact" {
            continue;
        }
        if msg["manifest_path"].as_str().map(PathBuf::from) != Some(canonical.clone()) {
            continue;
        }
        if let Some(files) = msg["filenames"].as_array() {
            for f in files.iter().filter_map(|f| f.as_str()) {
                if f.ends_with(".wasm") {
                    wasm = Some(PathBuf::from(f));
                }
            }
        }
    }
    let status = child.wait().map_err(BuildError::Cargo)?;
    let crate_name = crate_dir.display().to_string();
    if !status.success() {
        return Err(BuildError::CompileFailed {
            crate_dir: crate_name,
        });
    }
    let wasm = wasm.ok_or(BuildError::NoWasm {
        crate_dir: crate_name,
    })?;
    let stem = wasm
        .file_stem()
        .map(|s| s.to_string_lossy().to_string())
        .unwrap_or_default();
    Ok((wasm, stem))
}

/// The file stem of the crate's `.wasm`: its `[lib] name`, else its
/// package name, `-` as `_` (`None` when the manifest does not say).
fn stem_of(manifest: &Path) -> Option<String> {
    let text = std::fs::read_to_string(manifest).ok()?;
    let doc: toml::Table = toml::from_str(&text).ok()?;
    let name = doc
        .get("lib")
        .and_then(|l| l.get("name"))
        .or_else(|| doc.get("package").and_then(|p| p.get("name")))?
        .as_str()?;
    Some(name.replace('-', "_"))
}
