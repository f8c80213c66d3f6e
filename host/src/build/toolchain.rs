//! The JavaScript and Python build toolchains (componentize-js with
//! esbuild from npm, componentize-py from PyPI), installed once per
//! version into a cache folder and reused by every later build.
//!
//! A toolchain's folder is named by a digest of what defines it (the pinned
//! package list, its lock file, the build driver, the interpreter's
//! version), so a new idem with other pins installs beside the old one and
//! never mixes them. It is installed into a temporary folder and renamed
//! into place when complete: a killed install leaves no half toolchain, and
//! two builds installing at once both end up using one complete folder.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use sha2::{Digest as _, Sha256};

use super::BuildError;

/// Where toolchains live: `$IDEM_TOOLCHAIN_DIR`, else
/// `$XDG_CACHE_HOME/idem/toolchains`, else `~/.cache/idem/toolchains`.
pub fn default_toolchain_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("IDEM_TOOLCHAIN_DIR") {
        return PathBuf::from(d);
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    cache.join("idem").join("toolchains")
}

/// What defines one toolchain.
pub(super) struct Spec<'a> {
    /// Its name in messages ("JavaScript").
    pub what: &'static str,
    /// Its folder's prefix ("js").
    pub prefix: &'static str,
    /// Where its packages come from, for messages.
    pub registry: &'static str,
    /// Files written into the folder before installing (name, content).
    pub files: &'a [(&'static str, &'static str)],
    /// Anything else the folder depends on (an interpreter's version).
    pub extra: String,
}

/// The toolchain's folder under `root`, installed by `install` (run in the
/// new folder, after `files` are written) the first time.
pub(super) fn ensure(
    root: &Path,
    spec: &Spec<'_>,
    install: impl FnOnce(&Path) -> Result<(), String>,
) -> Result<PathBuf, BuildError> {
    let mut h = Sha256::new();
    for (name, text) in spec.files {
        h.update(name.as_bytes());
        h.update([0]);
        h.update(text.as_bytes());
        h.update([0]);
    }
    h.update(spec.extra.as_bytes());
    let key = hex::encode(&h.finalize()[..8]);
    // Absolute: the builders run in other folders.
    let root = std::path::absolute(root).unwrap_or_else(|_| root.to_path_buf());
    let dir = root.join(format!("{}-{key}", spec.prefix));
    if dir.join(COMPLETE).is_file() {
        return Ok(dir);
    }
    let fail = |detail: String| BuildError::Toolchain {
        what: spec.what,
        dir: dir.display().to_string(),
        registry: spec.registry,
        detail,
    };
    std::fs::create_dir_all(&root).map_err(|e| fail(e.to_string()))?;
    remove_stale_installs(&root);
    let tmp = tempfile::Builder::new()
        .prefix(&format!(".{}-{key}-installing-", spec.prefix))
        .tempdir_in(&root)
        .map_err(|e| fail(e.to_string()))?;
    for (name, text) in spec.files {
        std::fs::write(tmp.path().join(name), text).map_err(|e| fail(e.to_string()))?;
    }
    eprintln!(
        "installing the {} build toolchain into {} (once) ...",
        spec.what,
        dir.display()
    );
    install(tmp.path()).map_err(fail)?;
    std::fs::write(tmp.path().join(COMPLETE), key.as_bytes()).map_err(|e| fail(e.to_string()))?;
    let tmp = tmp.keep();
    // A folder of that name without the marker is not a toolchain (a copy
    // cut short, say): it is replaced.
    if dir.exists() && !dir.join(COMPLETE).is_file() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    if let Err(e) = std::fs::rename(&tmp, &dir) {
        // Another build finished the same install first: use its folder.
        let _ = std::fs::remove_dir_all(&tmp);
        if !dir.join(COMPLETE).is_file() {
            return Err(fail(format!("moving it into place: {e}")));
        }
    }
    Ok(dir)
}

/// The embedded SDK's files, written once under the toolchain folder
/// `tools` as `sdk-<digest>/idem-guest/`, a path that stays the same for
/// the same files (written to a temporary folder, then renamed).
pub(super) fn sdk_dir(tools: &Path, files: &[(&str, &[u8])]) -> Result<PathBuf, BuildError> {
    let name = format!("sdk-{}", hex::encode(&super::framed_sha256(files)[..8]));
    written_once(tools, &name, "idem-guest", files)
}

/// `base/name`, holding `files` under `inner`: written once, whole (into
/// a temporary folder beside it, marked complete, renamed into place; a
/// complete copy another process made first wins).
pub(super) fn written_once(
    base: &Path,
    name: &str,
    inner: &str,
    files: &[(&str, &[u8])],
) -> Result<PathBuf, BuildError> {
    let dir = base.join(name);
    if dir.join(COMPLETE).is_file() {
        return Ok(dir);
    }
    let write = |e: std::io::Error| BuildError::Write {
        path: dir.display().to_string(),
        source: e,
    };
    let tmp = tempfile::Builder::new()
        .prefix(&format!(".{name}-writing-"))
        .tempdir_in(base)
        .map_err(write)?;
    super::write_files(&tmp.path().join(inner), files)?;
    std::fs::write(tmp.path().join(COMPLETE), b"").map_err(write)?;
    let tmp = tmp.keep();
    if std::fs::rename(&tmp, &dir).is_err() {
        let _ = std::fs::remove_dir_all(&tmp);
    }
    if !dir.join(COMPLETE).is_file() {
        return Err(write(std::io::Error::other(
            "it exists but is incomplete (an older copy?): remove it and try again",
        )));
    }
    Ok(dir)
}

/// The machine a toolchain's native parts (esbuild, componentize-py) are
/// built for: part of its folder's name, so a cache shared with another
/// system never hands it the wrong binaries.
pub(super) fn platform() -> String {
    format!(
        "{}-{}-{}",
        std::env::consts::OS,
        std::env::consts::ARCH,
        if cfg!(target_env = "musl") {
            "musl"
        } else {
            "gnu"
        }
    )
}

/// Marks a folder whose install finished.
const COMPLETE: &str = ".idem-complete";

/// Installs that a killed build left behind (an hour old: no live install
/// takes that long), and their hundreds of MB.
fn remove_stale_installs(root: &Path) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let old = e
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age.as_secs() > 3600);
        if name.starts_with('.')
            && (name.contains("-installing-") || name.starts_with(".sdk-writing-"))
            && old
        {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// Run an install step; `Err` holds the command and its last output lines.
pub(super) fn run_step(cmd: &mut Command) -> Result<(), String> {
    let shown = format!("{cmd:?}");
    let out: Output = cmd.output().map_err(|e| format!("{shown}: {e}"))?;
    if out.status.success() {
        return Ok(());
    }
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Err(format!(
        "{shown} exited with {}:\n{}",
        out.status,
        super::tail(&text, 15)
    ))
}

/// The version line of `program --version`, or why it could not be run.
pub(super) fn version(
    program: &str,
    what: &'static str,
    fix: &'static str,
) -> Result<String, BuildError> {
    let out = Command::new(program)
        .arg("--version")
        .output()
        .map_err(|source| BuildError::Missing {
            what,
            program: program.to_string(),
            fix,
            source,
        })?;
    let text = String::from_utf8_lossy(&out.stdout).trim().to_string()
        + String::from_utf8_lossy(&out.stderr).trim();
    if !out.status.success() {
        return Err(BuildError::Missing {
            what,
            program: program.to_string(),
            fix,
            source: std::io::Error::other(format!("`{program} --version` failed: {text}")),
        });
    }
    Ok(text)
}
