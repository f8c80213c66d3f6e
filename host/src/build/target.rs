//! The guests' cargo target dir: one per user whatever folder a build
//! starts from (compiling Arrow for wasm takes ~10 minutes once), private
//! when it is the default under idem's cache dir, and safe for builds at
//! once (one Rust build at a time, see [`BuildLock`]; two crates of one
//! name told apart, see [`Owner`]).

use std::path::{Path, PathBuf};

use super::BuildError;

/// The guests' own target dir: `$IDEM_GUEST_TARGET_DIR`, else
/// `$CARGO_TARGET_DIR/idem-guests` (a user who shares one cargo target
/// dir), else `guests` in idem's cache dir (`$IDEM_CACHE_DIR`,
/// `$XDG_CACHE_HOME/idem` or `~/.cache/idem`), else `target/idem-guests`.
/// Never the host's target dir: a nested cargo on it would wait for the
/// outer lock.
pub fn default_target_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("IDEM_GUEST_TARGET_DIR") {
        return PathBuf::from(d);
    }
    if let Some(d) = std::env::var_os("CARGO_TARGET_DIR") {
        return PathBuf::from(d).join("idem-guests");
    }
    match crate::sandbox::default_cache_dir() {
        Some(d) => d.join("guests"),
        None => PathBuf::from("target").join("idem-guests"),
    }
}

/// Make `target_dir` ready. The default under idem's cache dir is made
/// private (mode 0700, like the compiled-code cache beside it, which a
/// group-writable parent made by a build would otherwise turn off), and
/// refused when someone else can write it: build scripts and proc macros
/// planted there would run as the user, and a planted build would be
/// handed out as theirs.
pub(super) fn prepare(target_dir: &Path) -> Result<(), BuildError> {
    let cache = crate::sandbox::default_cache_dir();
    let Some(cache) = cache.filter(|c| c.join("guests") == target_dir) else {
        return Ok(());
    };
    let fix = "Use a folder of your own (IDEM_CACHE_DIR, IDEM_GUEST_TARGET_DIR or --target-dir)";
    private(&cache, "the guest build cache", fix)?;
    private(target_dir, "the guest build cache", fix)
}

/// Make `dir` (`what`) the user's own, mode 0700, or refuse it, naming
/// `fix`, when someone else owns it or can write it.
pub(super) fn private(dir: &Path, what: &str, fix: &str) -> Result<(), BuildError> {
    crate::sandbox::make_private_dir(dir).map_err(|source| BuildError::Write {
        path: dir.display().to_string(),
        source,
    })?;
    crate::sandbox::check_private(dir, false).map_err(|why| {
        BuildError::Project(format!(
            "{what} {} cannot be used: {why}. {fix}",
            dir.display()
        ))
    })
}

/// One Rust build at a time in a guest target dir: held from the compile
/// until its output is read, so a concurrent build of another project
/// whose crate has the same name cannot overwrite the `.wasm` cargo
/// leaves at one path for both, in between (cargo's own lock is released
/// when cargo exits). Where the file system cannot lock (some NFS
/// mounts), builds go on unlocked, as cargo's do.
pub(crate) struct BuildLock(#[allow(dead_code)] Option<std::fs::File>);

impl BuildLock {
    /// Wait for, then take, the lock of `target_dir`, saying so when
    /// another build holds it.
    pub(crate) fn take(target_dir: &Path) -> Result<Self, BuildError> {
        let path = target_dir.join(".idem-build.lock");
        let write = |source| BuildError::Write {
            path: path.display().to_string(),
            source,
        };
        std::fs::create_dir_all(target_dir).map_err(write)?;
        // Read-only is enough to lock (another user's lock file included).
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .or_else(|_| std::fs::File::open(&path))
            .map_err(write)?;
        match file.try_lock() {
            Ok(()) => return Ok(BuildLock(Some(file))),
            Err(std::fs::TryLockError::WouldBlock) => {
                tracing::warn!(
                    "waiting for another guest build in {} to finish",
                    target_dir.display()
                );
            }
            Err(std::fs::TryLockError::Error(e)) => return unlocked(target_dir, e),
        }
        match file.lock() {
            Ok(()) => Ok(BuildLock(Some(file))),
            Err(e) => unlocked(target_dir, e),
        }
    }
}

/// Go on without the lock where the file system has none.
fn unlocked(target_dir: &Path, e: std::io::Error) -> Result<BuildLock, BuildError> {
    tracing::warn!(
        "cannot lock {} ({e}): building without the lock; do not build two crates of one name there at once",
        target_dir.display()
    );
    Ok(BuildLock(None))
}

/// Which project last built the crate of a file stem in a target dir.
/// Two projects whose crates have one name share cargo's `.wasm` path
/// (a cdylib's file name carries no hash), and cargo, finding that file
/// newer than the sources, calls the other project fresh and hands its
/// file out again: a build whose stem another project built last is
/// built again, with that file removed first.
pub(super) struct Owner {
    marker: PathBuf,
    project: String,
}

impl Owner {
    /// The record of `stem` in `target_dir`, for the project of
    /// `manifest`.
    pub(super) fn of(target_dir: &Path, stem: &str, manifest: &Path) -> Self {
        let project = std::fs::canonicalize(manifest)
            .unwrap_or_else(|_| manifest.to_path_buf())
            .display()
            .to_string();
        Owner {
            marker: target_dir.join("idem-owners").join(format!("{stem}.txt")),
            project,
        }
    }

    /// Another project built this stem last (as far as the record says).
    pub(super) fn other(&self) -> bool {
        std::fs::read_to_string(&self.marker).is_ok_and(|p| p != self.project)
    }

    /// Remove the `.wasm` files cargo left for `stem`, so it builds anew.
    pub(super) fn forget(&self, target_dir: &Path, stem: &str) {
        let out = target_dir.join("wasm32-unknown-unknown").join("release");
        for f in [
            out.join(format!("{stem}.wasm")),
            out.join("deps").join(format!("{stem}.wasm")),
        ] {
            let _ = std::fs::remove_file(f);
        }
    }

    /// Record this project as the stem's last builder (best effort).
    pub(super) fn record(&self) {
        if let Some(dir) = self.marker.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let _ = std::fs::write(&self.marker, &self.project);
    }
}
