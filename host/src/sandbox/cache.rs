//! On-disk cache of compiled code, keyed by module digest + engine
//! fingerprint: a few ms to load instead of seconds to compile.
//!
//! Compiled code is native code that idem maps and runs, so an entry is
//! never trusted by its file name. Each entry carries an HMAC-SHA256 of
//! its cache key and artifact under a secret key that idem created in the
//! cache directory (mode 0600); the MAC is checked over the bytes read into
//! memory, and exactly those bytes are deserialized. A cache directory or
//! key file that others could write is not used at all.

use std::hash::{Hash, Hasher};
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use sha2::{Digest as _, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

use super::error::SandboxError;
use crate::digest::Digest;

/// Where a module's compiled code came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheOutcome {
    /// Loaded from the cache (its MAC checked); nothing compiled.
    Hit,
    /// Compiled, then stored in the cache (a missing, stale, corrupted or
    /// forged entry is a miss and is overwritten).
    Miss,
    /// Compiled; no cache configured (or it could not be written).
    Disabled,
    /// Compiled; a cache is configured but not trusted (writable by others,
    /// not owned by this user, or a bad key file), so nothing was read from
    /// or written to it. A warning says why.
    Refused,
}

/// Entry layout: magic, then the MAC, then the artifact.
const MAGIC: &[u8; 8] = b"idemcw01";
const MAC_LEN: usize = 32;
const KEY_LEN: usize = 32;
/// Larger entries are ignored rather than read: compiled code is a few
/// times the module, and modules are bounded far below this.
const MAX_ENTRY_BYTES: u64 = 1 << 30;

fn cache_key(engine: &Engine, digest: &Digest, fingerprint: &str) -> String {
    // The compatibility hash covers target, flags and tunables; the entry
    // is authenticated by its MAC, so std's fixed-key hasher is fine here.
    let mut h = std::collections::hash_map::DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut h);
    let mut s = Sha256::new();
    s.update(fingerprint.as_bytes());
    s.update(b"\n");
    s.update(digest.as_str().as_bytes());
    s.update(b"\n");
    s.update(h.finish().to_le_bytes());
    hex::encode(s.finalize())
}

/// Compile `bytes` within `budget_ms` of wall-clock time.
pub(super) fn compile(
    engine: &Engine,
    bytes: &Arc<Vec<u8>>,
    budget_ms: u64,
) -> Result<Component, SandboxError> {
    let (tx, rx) = std::sync::mpsc::channel();
    let (engine, bytes) = (engine.clone(), bytes.clone());
    // Cranelift cannot be interrupted: past the budget the thread is
    // abandoned and finishes (or not) on its own, its result dropped. The
    // module size limit bounds how long that can be.
    std::thread::Builder::new()
        .name("idem-compile".into())
        .spawn(move || {
            let _ = tx.send(Component::new(&engine, bytes.as_slice()));
        })
        .map_err(|e| SandboxError::Engine(format!("compile thread: {e}")))?;
    match rx.recv_timeout(Duration::from_millis(budget_ms)) {
        Ok(r) => r.map_err(|e| SandboxError::Compile(format!("{e:#}"))),
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            Err(SandboxError::CompileDeadline { ms: budget_ms })
        }
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => Err(SandboxError::Compile(
            "the compiler thread stopped without a result".into(),
        )),
    }
}

/// Load `bytes`' compiled code from `dir`, or compile it (within
/// `budget_ms`) and store it.
pub fn load_or_compile(
    engine: &Engine,
    dir: Option<&Path>,
    digest: &Digest,
    fingerprint: &str,
    bytes: &Arc<Vec<u8>>,
    budget_ms: u64,
) -> Result<(Component, CacheOutcome), SandboxError> {
    let Some(dir) = dir else {
        return Ok((compile(engine, bytes, budget_ms)?, CacheOutcome::Disabled));
    };
    let cache = match TrustedCache::open(dir) {
        Ok(c) => c,
        Err(why) => {
            tracing::warn!(
                "not using the compiled-code cache {}: {why}. Compiling without it",
                dir.display()
            );
            return Ok((compile(engine, bytes, budget_ms)?, CacheOutcome::Refused));
        }
    };
    let key = cache_key(engine, digest, fingerprint);
    if let Some(c) = cache.load(engine, &key) {
        return Ok((c, CacheOutcome::Hit));
    }
    let component = compile(engine, bytes, budget_ms)?;
    match cache.store(&key, &component) {
        Ok(()) => Ok((component, CacheOutcome::Miss)),
        Err(e) => {
            tracing::warn!("could not write compiled cache in {}: {e}", dir.display());
            Ok((component, CacheOutcome::Disabled))
        }
    }
}

/// A cache directory that passed the ownership checks, with its MAC key.
struct TrustedCache {
    compiled: PathBuf,
    key: [u8; KEY_LEN],
}

impl TrustedCache {
    /// Create (mode 0700) or check `root` and `root/compiled`, and read or
    /// create the key. `Err` says why the cache must not be used.
    fn open(root: &Path) -> Result<Self, String> {
        let compiled = root.join("compiled");
        for d in [root, compiled.as_path()] {
            make_private_dir(d).map_err(|e| format!("cannot create {}: {e}", d.display()))?;
            check_private(d, false)?;
        }
        let key = read_or_create_key(&root.join("key"))?;
        Ok(TrustedCache { compiled, key })
    }

    fn path(&self, key: &str) -> PathBuf {
        self.compiled.join(format!("{key}.cwasm"))
    }

    /// The entry for `key` if it exists and its MAC is right; anything else
    /// (absent, unreadable, forged, corrupted, incompatible) is `None`.
    fn load(&self, engine: &Engine, key: &str) -> Option<Component> {
        let path = self.path(key);
        let entry = match read_entry(&path) {
            Ok(Some(b)) => b,
            Ok(None) => return None,
            Err(e) => {
                tracing::warn!("ignoring compiled cache entry {}: {e}", path.display());
                return None;
            }
        };
        let artifact = entry
            .strip_prefix(MAGIC.as_slice())
            .filter(|rest| rest.len() >= MAC_LEN)
            .map(|rest| rest.split_at(MAC_LEN))
            .filter(|(mac, artifact)| {
                macs_equal(mac, &hmac_sha256(&self.key, &[key.as_bytes(), artifact]))
            })
            .map(|(_, artifact)| artifact);
        let Some(artifact) = artifact else {
            tracing::warn!(
                "ignoring compiled cache entry {}: it is not bound to this module and engine (its MAC does not match: corrupted, or not written by this idem); recompiling",
                path.display()
            );
            return None;
        };
        // SAFETY: `artifact` is exactly the bytes whose MAC was checked
        // above, under a key only this user can read, over this entry's cache
        // key (module digest + engine fingerprint + compatibility hash): they
        // are what `Component::serialize` produced for this module on an
        // engine like this one. wasmtime still checks its own header.
        match unsafe { Component::deserialize(engine, artifact) } {
            Ok(c) => Some(c),
            Err(e) => {
                tracing::warn!("ignoring compiled cache entry {}: {e:#}", path.display());
                None
            }
        }
    }

    /// Write `component`'s code for `key`, with its MAC, atomically.
    fn store(&self, key: &str, component: &Component) -> std::io::Result<()> {
        let code = component
            .serialize()
            .map_err(|e| std::io::Error::other(format!("{e:#}")))?;
        let mac = hmac_sha256(&self.key, &[key.as_bytes(), &code]);
        // NamedTempFile is created 0600 and renamed into place.
        let mut tmp = tempfile::NamedTempFile::new_in(&self.compiled)?;
        std::io::Write::write_all(&mut tmp, MAGIC)?;
        std::io::Write::write_all(&mut tmp, &mac)?;
        std::io::Write::write_all(&mut tmp, &code)?;
        tmp.persist(self.path(key)).map_err(|e| e.error)?;
        Ok(())
    }
}

/// The bytes of an entry, `None` when there is none. Only regular files of
/// a bounded size are read (never a FIFO or a symlink).
fn read_entry(path: &Path) -> std::io::Result<Option<Vec<u8>>> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    if !meta.file_type().is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    if meta.len() > MAX_ENTRY_BYTES {
        return Err(std::io::Error::other(format!(
            "{} bytes, more than any compiled module",
            meta.len()
        )));
    }
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(MAX_ENTRY_BYTES)
        .read_to_end(&mut bytes)?;
    Ok(Some(bytes))
}

/// Compare MACs without an early exit, so timing says nothing about where
/// a forged MAC first differs.
fn macs_equal(a: &[u8], b: &[u8; MAC_LEN]) -> bool {
    a.len() == MAC_LEN && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// HMAC-SHA256 (RFC 2104) of the concatenation of `parts`. Written out over
/// sha2 because the `hmac` crate for sha2 0.11 (digest 0.11) is not in the
/// dependency tree, and HMAC is a dozen lines.
fn hmac_sha256(key: &[u8], parts: &[&[u8]]) -> [u8; MAC_LEN] {
    const BLOCK: usize = 64;
    let mut k = [0u8; BLOCK];
    if key.len() > BLOCK {
        k[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        k[..key.len()].copy_from_slice(key);
    }
    let mut inner = Sha256::new();
    inner.update(k.map(|b| b ^ 0x36));
    for p in parts {
        inner.update(p);
    }
    let mut outer = Sha256::new();
    outer.update(k.map(|b| b ^ 0x5c));
    outer.update(inner.finalize().as_slice());
    outer.finalize().into()
}

/// Read the cache's key, or create it (32 random bytes from the OS, mode
/// 0600) if there is none. Two processes racing both end up with the one
/// that was linked into place first.
fn read_or_create_key(path: &Path) -> Result<[u8; KEY_LEN], String> {
    if std::fs::symlink_metadata(path).is_err() {
        let mut key = [0u8; KEY_LEN];
        getrandom::fill(&mut key).map_err(|e| format!("no randomness for its key: {e}"))?;
        let dir = path.parent().unwrap_or(Path::new("."));
        let written = tempfile::NamedTempFile::new_in(dir).and_then(|mut tmp| {
            std::io::Write::write_all(&mut tmp, &key)?;
            tmp.as_file().sync_all()?;
            tmp.persist_noclobber(path).map_err(|e| e.error)
        });
        match written {
            Ok(_) => {}
            // Another idem created it first: use theirs.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(format!("cannot create its key {}: {e}", path.display())),
        }
    }
    check_private(path, true)?;
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    bytes.try_into().map_err(|b: Vec<u8>| {
        format!(
            "its key {} holds {} bytes, not {KEY_LEN}: delete it (and the cache) to start afresh",
            path.display(),
            b.len()
        )
    })
}

/// Create `dir` (mode 0700) if missing; its parents get the default mode.
fn make_private_dir(dir: &Path) -> std::io::Result<()> {
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    let mut b = std::fs::DirBuilder::new();
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut b, 0o700);
    match b.create(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        r => r,
    }
}

/// `Ok` when `path` belongs to the user running idem and no one else may
/// write it (for the key file: nor read it, and it must be a plain file).
#[cfg(unix)]
fn check_private(path: &Path, secret: bool) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt as _;
    let meta = if secret {
        std::fs::symlink_metadata(path)
    } else {
        std::fs::metadata(path)
    }
    .map_err(|e| format!("cannot stat {}: {e}", path.display()))?;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    if meta.uid() != me {
        return Err(format!(
            "{} belongs to uid {}, not to this user (uid {me}); anyone who can write it can make idem run their native code. Use a cache directory of your own (--cache-dir or IDEM_CACHE_DIR)",
            path.display(),
            meta.uid()
        ));
    }
    if secret && !meta.file_type().is_file() {
        return Err(format!("{} is not a regular file", path.display()));
    }
    let open_to_others = if secret { 0o077 } else { 0o022 };
    if meta.mode() & open_to_others != 0 {
        return Err(format!(
            "{} has mode {:o}: others may {} it, and anyone who can write the cache can make idem run their native code. Run `chmod go-{} {}`",
            path.display(),
            meta.mode() & 0o777,
            if secret { "read or write" } else { "write" },
            if secret { "rwx" } else { "w" },
            path.display()
        ));
    }
    Ok(())
}

#[cfg(not(unix))]
fn check_private(path: &Path, _secret: bool) -> Result<(), String> {
    Err(format!(
        "ownership of {} cannot be checked on this platform",
        path.display()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_matches_rfc_4231() {
        // Test cases 1 and 2 of RFC 4231.
        assert_eq!(
            hex::encode(hmac_sha256(&[0x0b; 20], &[b"Hi ", b"There"])),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"
        );
        assert_eq!(
            hex::encode(hmac_sha256(b"Jefe", &[b"what do ya want for nothing?"])),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        // Test case 6: a key longer than the block is hashed first.
        assert_eq!(
            hex::encode(hmac_sha256(
                &[0xaa; 131],
                &[b"Test Using Larger Than Block-Size Key - Hash Key First"]
            )),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        );
    }

    #[cfg(unix)]
    #[test]
    fn the_key_is_created_private_and_reused() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let a = TrustedCache::open(dir.path()).unwrap();
        let mode = std::fs::metadata(dir.path().join("key"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let b = TrustedCache::open(dir.path()).unwrap();
        assert_eq!(a.key, b.key);
        // A key others may read is refused.
        std::fs::set_permissions(
            dir.path().join("key"),
            std::fs::Permissions::from_mode(0o644),
        )
        .unwrap();
        let why = TrustedCache::open(dir.path()).err().unwrap();
        assert!(why.contains("chmod go-rwx"), "{why}");
    }
}
