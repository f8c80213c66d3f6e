//! `idem build`: a transform's project folder to a component `.wasm`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use serde_json::json;

use idem::sandbox::{Sandbox, SandboxConfig};

use super::Out;

#[derive(Args, Debug)]
pub struct BuildArgs {
    /// The transform's project folder: a Rust crate (Cargo.toml), a
    /// JavaScript package (package.json) or a Python project
    /// (pyproject.toml or app.py).
    pub path: PathBuf,
    /// The project's language, when its folder holds more than one kind of
    /// project file (default: what the files show).
    #[arg(long, value_enum)]
    pub lang: Option<idem::build::Language>,
    /// Where to write the component (default:
    /// <target-dir>/components/<crate>-<project>.wasm, printed).
    #[arg(long, short)]
    pub out: Option<PathBuf>,
    /// cargo target dir for guest builds, shared by every project of the
    /// user (default: $IDEM_GUEST_TARGET_DIR, $CARGO_TARGET_DIR/idem-guests,
    /// or guests/ in idem's cache dir: $IDEM_CACHE_DIR, $XDG_CACHE_HOME/idem
    /// or ~/.cache/idem).
    #[arg(long)]
    pub target_dir: Option<PathBuf>,
}

pub fn build(a: BuildArgs, out: Out) -> Result<ExitCode> {
    // The user's own project: its first compile (a JS or Python engine
    // takes ~15-45 s) is not held to a run's compile budget.
    let mut config = SandboxConfig::default();
    config.limits.compile_deadline_ms = BUILD_COMPILE_DEADLINE_MS;
    let sandbox = Sandbox::new(config)?;
    let target = a.target_dir.unwrap_or_else(idem::build::default_target_dir);
    let built = match a.lang {
        Some(lang) => idem::build::build_as(lang, &a.path, &target, a.out.as_deref(), &sandbox)?,
        None => idem::build::build_guest(&a.path, &target, a.out.as_deref(), &sandbox)?,
    };
    out.emit(
        json!({
            "module": built.digest.as_str(),
            "path": built.path.display().to_string(),
            "language": built.language.name(),
        }),
        || println!("{}  {}", built.digest, built.path.display()),
    );
    Ok(ExitCode::SUCCESS)
}

/// How long `idem build` lets its own output compile (10 minutes).
const BUILD_COMPILE_DEADLINE_MS: u64 = 600_000;
