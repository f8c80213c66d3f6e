//! `idem build`: compile a guest crate for wasm32-unknown-unknown and encode
//! the core module into a component, ready for the sandbox.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use thiserror::Error;

use crate::digest::Digest;
use crate::sandbox::{Sandbox, SandboxError};

/// Why a guest crate did not build.
#[derive(Debug, Error)]
pub enum BuildError {
    /// cargo could not be started.
    #[error("could not run cargo: {0}. Is rustup's cargo on PATH?")]
    Cargo(std::io::Error),
    /// cargo failed (its diagnostics were printed above).
    #[error(
        "cargo build of {crate_dir} for wasm32-unknown-unknown failed (see the compiler output above). If it says the target is missing, run `rustup target add wasm32-unknown-unknown`"
    )]
    CompileFailed {
        /// The crate that failed.
        crate_dir: String,
    },
    /// The crate built but produced no cdylib.
    #[error(
        "{crate_dir} built no .wasm: add `[lib] crate-type = [\"cdylib\", \"rlib\"]` to its Cargo.toml"
    )]
    NoWasm {
        /// The crate.
        crate_dir: String,
    },
    /// The module is not an admissible transform.
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    /// Writing the component failed.
    #[error("writing {path}: {source}")]
    Write {
        /// Where.
        path: String,
        /// Why.
        source: std::io::Error,
    },
}

/// A built component.
#[derive(Debug, Clone)]
pub struct Built {
    /// Where the component was written.
    pub path: PathBuf,
    /// Its digest (what run keys and manifests name).
    pub digest: Digest,
}

/// The guests' own target dir: `$IDEM_GUEST_TARGET_DIR`, else
/// `$CARGO_TARGET_DIR/idem-guests`, else `target/idem-guests`. Never the
/// host's target dir: a nested cargo on it would wait for the outer lock.
pub fn default_target_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("IDEM_GUEST_TARGET_DIR") {
        return PathBuf::from(d);
    }
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(d) => PathBuf::from(d).join("idem-guests"),
        None => PathBuf::from("target").join("idem-guests"),
    }
}

/// Build the guest crate at `crate_dir` (release, wasm32-unknown-unknown),
/// encode it as a component, check admission, and write it to `out` (default
/// `<target_dir>/components/<crate>.wasm`).
pub fn build_guest(
    crate_dir: &Path,
    target_dir: &Path,
    out: Option<&Path>,
    sandbox: &Sandbox,
) -> Result<Built, BuildError> {
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
    let core = std::fs::read(&wasm).map_err(|e| BuildError::Write {
        path: wasm.display().to_string(),
        source: e,
    })?;
    let component = crate::sandbox::encode(&core)?;
    // Refuse to hand out a component the sandbox would reject.
    sandbox.inspect(&component)?.1.verdict()?;
    let digest = Digest::of_bytes(&component);
    let path = match out {
        Some(p) => p.to_path_buf(),
        None => {
            let stem = wasm
                .file_stem()
                .map(|s| s.to_string_lossy().to_string())
                .unwrap_or_default();
            target_dir.join("components").join(format!("{stem}.wasm"))
        }
    };
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| BuildError::Write {
            path: path.display().to_string(),
            source: e,
        })?;
    }
    std::fs::write(&path, &component).map_err(|e| BuildError::Write {
        path: path.display().to_string(),
        source: e,
    })?;
    Ok(Built { path, digest })
}
