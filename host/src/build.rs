//! `idem build`: turn a transform's source folder into a component the
//! sandbox admits. Rust crates are compiled for wasm32-unknown-unknown;
//! JavaScript and Python projects are embedded in a JS or Python engine
//! that is itself a component (componentize-js, componentize-py), whose
//! toolchains `idem build` installs into a cache the first time.

mod js;
mod python;
mod rust;
mod rust_sdk;
mod target;
mod toolchain;

use std::path::{Path, PathBuf};

use thiserror::Error;

use crate::digest::Digest;
use crate::kind::Kind;
use crate::sandbox::{Sandbox, SandboxError};

pub use rust_sdk::sdk_root;
pub use target::default_target_dir;
pub use toolchain::default_toolchain_dir;

/// Why a transform did not build.
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
    /// The folder is not a transform project idem knows how to build.
    #[error("{0}")]
    Project(String),
    /// A program the build needs is not installed.
    #[error("{what} needs `{program}`, which could not be run ({source}): {fix}")]
    Missing {
        /// The language's build.
        what: &'static str,
        /// The program.
        program: String,
        /// How to get it.
        fix: &'static str,
        /// Why it could not run.
        source: std::io::Error,
    },
    /// Installing a toolchain into the cache failed.
    #[error(
        "installing the {what} toolchain into {dir} failed: {detail}. It is fetched once from {registry}; check the network or proxy settings, or set IDEM_TOOLCHAIN_DIR to a folder where it is already installed"
    )]
    Toolchain {
        /// Which toolchain.
        what: &'static str,
        /// Where it was being installed.
        dir: String,
        /// The package registry.
        registry: &'static str,
        /// What went wrong (the tool's last lines).
        detail: String,
    },
    /// The language's component builder failed on the project.
    #[error("{what} of {dir} failed:\n{detail}")]
    Componentize {
        /// The language's build.
        what: &'static str,
        /// The project.
        dir: String,
        /// The builder's message.
        detail: String,
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

impl BuildError {
    /// The kind of the failure (and the CLI's exit code).
    pub fn kind(&self) -> Kind {
        match self {
            BuildError::Sandbox(e) => e.kind(),
            BuildError::Cargo(_)
            | BuildError::CompileFailed { .. }
            | BuildError::NoWasm { .. }
            | BuildError::Project(_)
            | BuildError::Missing { .. }
            | BuildError::Toolchain { .. }
            | BuildError::Componentize { .. } => Kind::Input,
            BuildError::Write { .. } => Kind::Storage,
        }
    }
}

/// The language of a transform's source folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Language {
    /// A Rust crate (`Cargo.toml`) using the `idem-guest` crate.
    Rust,
    /// A JavaScript package (`package.json`) using the `idem-guest` npm SDK.
    #[value(name = "js")]
    JavaScript,
    /// A Python project (`pyproject.toml` or `app.py`) using `idem_guest`.
    Python,
}

impl Language {
    /// What the folder holds: `Cargo.toml` is Rust, `package.json` is
    /// JavaScript, `pyproject.toml` or `app.py` is Python. A folder with
    /// more than one of them must be told which (`--lang`).
    pub fn detect(dir: &Path) -> Result<Language, BuildError> {
        let found: Vec<(Language, &str)> = [
            (Language::Rust, "Cargo.toml"),
            (Language::JavaScript, "package.json"),
            (Language::Python, "pyproject.toml"),
            (Language::Python, "app.py"),
        ]
        .into_iter()
        .filter(|(_, f)| dir.join(f).is_file())
        .collect();
        let mut langs: Vec<Language> = found.iter().map(|(l, _)| *l).collect();
        langs.dedup();
        match langs.as_slice() {
            [one] => Ok(*one),
            [] if !dir.is_dir() => Err(BuildError::Project(format!(
                "{} is not a folder: pass the transform's project folder",
                dir.display()
            ))),
            [] => Err(BuildError::Project(format!(
                "{} holds no Cargo.toml (Rust), package.json (JavaScript), pyproject.toml or app.py (Python): pass a transform's project folder, or create one with `idem new NAME --lang rust|js|python`",
                dir.display()
            ))),
            _ => Err(BuildError::Project(format!(
                "{} holds {}: say which language to build with --lang",
                dir.display(),
                found
                    .iter()
                    .map(|(_, f)| *f)
                    .collect::<Vec<_>>()
                    .join(" and ")
            ))),
        }
    }

    /// The name users see.
    pub fn name(self) -> &'static str {
        match self {
            Language::Rust => "rust",
            Language::JavaScript => "js",
            Language::Python => "python",
        }
    }
}

/// A built component.
#[derive(Debug, Clone)]
pub struct Built {
    /// Where the component was written.
    pub path: PathBuf,
    /// Its digest (what run keys and manifests name).
    pub digest: Digest,
    /// The language it was built from.
    pub language: Language,
}

/// Build the transform at `dir` in the language its files show (see
/// [`Language::detect`]), check admission, and write the component to
/// `out` (default `<target_dir>/components/<name>-<project>.wasm`).
pub fn build_guest(
    dir: &Path,
    target_dir: &Path,
    out: Option<&Path>,
    sandbox: &Sandbox,
) -> Result<Built, BuildError> {
    let language = Language::detect(dir)?;
    build_as(language, dir, target_dir, out, sandbox)
}

/// [`build_guest`] in a given language.
pub fn build_as(
    language: Language,
    dir: &Path,
    target_dir: &Path,
    out: Option<&Path>,
    sandbox: &Sandbox,
) -> Result<Built, BuildError> {
    target::prepare(target_dir)?;
    let reuse_dir = target_dir.join("reuse");
    let (component, name) = match language {
        Language::Rust => rust::build(dir, target_dir)?,
        Language::JavaScript => js::build(dir, &toolchain::default_toolchain_dir(), &reuse_dir)?,
        Language::Python => python::build(dir, &toolchain::default_toolchain_dir(), &reuse_dir)?,
    };
    // Refuse to hand out a component the sandbox would reject. Loading
    // compiles it into the sandbox's compiled-code cache (when it has one),
    // so the first run of a 15 MB JS or Python engine does not compile it
    // again.
    sandbox.load(&component)?;
    let digest = Digest::of_bytes(&component);
    // The default path is written whole (a concurrent build may be
    // reading it); `--out` is the caller's file, written as given (a
    // symlink or /dev/stdout stays one).
    let path = match out {
        Some(p) => {
            write_given(p, &component)?;
            p.to_path_buf()
        }
        None => {
            let p = default_out(target_dir, dir, &name);
            write_whole(&p, &component)?;
            p
        }
    };
    Ok(Built {
        path,
        digest,
        language,
    })
}

/// Where a build of the project at `dir` writes its component without
/// `--out`: `<target_dir>/components/<name>-<project>.wasm`, the project
/// named by its folder's path, so two projects whose crates have one name
/// do not share a file in the one target dir.
fn default_out(target_dir: &Path, dir: &Path, name: &str) -> PathBuf {
    let folder = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let key = framed_sha256(&[("project", folder.as_os_str().as_encoded_bytes())]);
    target_dir
        .join("components")
        .join(format!("{name}-{}.wasm", hex::encode(&key[..8])))
}

/// Write `bytes` to `path` whole or not at all: to a temporary file beside
/// it, then renamed into place (a concurrent reader never sees half).
fn write_whole(path: &Path, bytes: &[u8]) -> Result<(), BuildError> {
    let write = |source| BuildError::Write {
        path: path.display().to_string(),
        source,
    };
    let parent = match path.parent().filter(|p| !p.as_os_str().is_empty()) {
        Some(p) => p,
        None => Path::new("."),
    };
    std::fs::create_dir_all(parent).map_err(write)?;
    let mut b = tempfile::Builder::new();
    #[cfg(unix)]
    b.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o644));
    let mut tmp = b.tempfile_in(parent).map_err(write)?;
    std::io::Write::write_all(&mut tmp, bytes).map_err(write)?;
    tmp.as_file().sync_all().map_err(write)?;
    tmp.persist(path).map_err(|e| write(e.error))?;
    Ok(())
}

/// Write `bytes` to the caller's `path` as it is.
fn write_given(path: &Path, bytes: &[u8]) -> Result<(), BuildError> {
    let write = |source| BuildError::Write {
        path: path.display().to_string(),
        source,
    };
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(write)?;
    }
    std::fs::write(path, bytes).map_err(write)
}

/// The component an earlier build made from exactly `inputs` (the bytes
/// the builder consumes: for JavaScript the bundle, for Python the copied
/// project files, plus the SDK, the WIT world and the toolchain pins), else
/// `make()`'s, kept for next time. JS and Python builders take ~20 s and
/// do not give the same bytes twice (componentize-js snapshots a heap), so
/// reuse also keeps the module digest, and every memo keyed on it, stable
/// across rebuilds of unchanged sources. Cargo does the same for Rust.
///
/// The first complete entry wins: a component is written to a temporary
/// file and hard-linked into place, which fails if another build got there
/// first; that build's component is returned instead, so two concurrent
/// builds of one project hand out the same digest.
fn reuse(
    reuse_dir: &Path,
    language: Language,
    inputs: &[(&str, &[u8])],
    make: impl FnOnce() -> Result<Vec<u8>, BuildError>,
) -> Result<Vec<u8>, BuildError> {
    let key = hex::encode(&framed_sha256(inputs)[..16]);
    let cached = reuse_dir.join(format!("{}-{key}.wasm", language.name()));
    if let Ok(component) = std::fs::read(&cached) {
        return Ok(component);
    }
    let component = make()?;
    // Best effort: a build that cannot be kept is still a build.
    let keep = || -> std::io::Result<()> {
        std::fs::create_dir_all(reuse_dir)?;
        let tmp = tempfile::NamedTempFile::new_in(reuse_dir)?;
        std::fs::write(tmp.path(), &component)?;
        std::fs::hard_link(tmp.path(), &cached)
    };
    match keep() {
        Ok(()) => Ok(component),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            Ok(std::fs::read(&cached).unwrap_or(component))
        }
        Err(e) => {
            tracing::debug!("could not keep the build in {}: {e}", cached.display());
            Ok(component)
        }
    }
}

/// sha256 over (name, bytes) pairs, each framed by its lengths so that no
/// two different lists hash alike.
fn framed_sha256(pairs: &[(&str, &[u8])]) -> Vec<u8> {
    use sha2::{Digest as _, Sha256};
    let mut h = Sha256::new();
    for (name, bytes) in pairs {
        h.update((name.len() as u64).to_le_bytes());
        h.update(name.as_bytes());
        h.update((bytes.len() as u64).to_le_bytes());
        h.update(bytes);
    }
    h.finalize().to_vec()
}

/// A project's source files as (relative path with `/`, path), following
/// symlinks (as the builders do), skipping dependencies, caches, build
/// output and hidden entries; at most 16 folders deep.
fn project_files(base: &Path, dir: &Path, depth: usize, out: &mut Vec<(String, PathBuf)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let path = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with('.')
            || ["node_modules", "__pycache__"].contains(&name.as_str())
            || name.ends_with(".wasm")
            || name.ends_with(".pyc")
        {
            continue;
        }
        match std::fs::metadata(&path) {
            Ok(m) if m.is_dir() && depth < 16 => project_files(base, &path, depth + 1, out),
            Ok(m) if m.is_file() => {
                let rel = path.strip_prefix(base).unwrap_or(&path);
                let rel: Vec<String> = rel
                    .iter()
                    .map(|c| c.to_string_lossy().into_owned())
                    .collect();
                out.push((rel.join("/"), path));
            }
            _ => {}
        }
    }
}

/// The `idem:transform` WIT world every guest exports, as the host knows it.
pub(crate) const WIT: &str = include_str!("../../wit/transform.wit");

/// The JavaScript and Python SDKs, embedded at build time (host/build.rs).
mod sdks {
    include!(concat!(env!("OUT_DIR"), "/guest_sdks.rs"));
}

/// Write an embedded SDK's files under `dir`.
fn write_files(dir: &Path, files: &[(&str, &[u8])]) -> Result<(), BuildError> {
    for (rel, bytes) in files {
        let path = dir.join(rel);
        let write = || -> std::io::Result<()> {
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(&path, bytes)
        };
        write().map_err(|e| BuildError::Write {
            path: path.display().to_string(),
            source: e,
        })?;
    }
    Ok(())
}

/// A name for the component file: letters, digits, `_` and `-` of `raw`,
/// else the folder's name.
fn file_stem(raw: Option<&str>, dir: &Path) -> String {
    let folder = std::fs::canonicalize(dir)
        .ok()
        .and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "transform".into());
    let raw = raw
        .map(|r| r.rsplit('/').next().unwrap_or(r).to_string())
        .unwrap_or(folder);
    let stem: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if stem.is_empty() {
        "transform".into()
    } else {
        stem
    }
}

/// A temporary folder for one build's files.
fn work_dir() -> Result<tempfile::TempDir, BuildError> {
    tempfile::tempdir().map_err(|e| BuildError::Write {
        path: std::env::temp_dir().display().to_string(),
        source: e,
    })
}

/// The bytes a build step wrote to `path`.
fn read_built(path: &Path) -> Result<Vec<u8>, BuildError> {
    std::fs::read(path).map_err(|e| BuildError::Write {
        path: path.display().to_string(),
        source: e,
    })
}

/// The error of a language's builder (`what`) that failed on the project
/// at `dir`: the last lines of its output, and what to do when the
/// toolchain in `tools` is damaged.
fn builder_failed(
    what: &'static str,
    dir: &Path,
    tools: &Path,
    output: &std::process::Output,
) -> BuildError {
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    BuildError::Componentize {
        what,
        dir: dir.display().to_string(),
        detail: format!(
            "{}\n(if the toolchain in {} is damaged, delete that folder: the next build reinstalls it)",
            tail(&text, 25),
            tools.display()
        ),
    }
}

/// The last lines of a tool's output, for an error message.
fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
