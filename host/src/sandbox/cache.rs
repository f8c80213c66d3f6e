//! On-disk cache of compiled code, keyed by module digest + engine
//! fingerprint: a few ms to load instead of seconds to compile.
//!
//! Compiled code is native code that idem maps and runs, so an entry is
//! never trusted by its file name. Each entry is the artifact wasmtime
//! serialized (`<key>.cwasm`, created read-only) and, beside it, a MAC of
//! its cache key and artifact (`<key>.mac`) under a secret key that idem
//! created in the cache directory (mode 0600): BLAKE3 in its keyed mode.
//! The artifact is opened without following links, its MAC is checked
//! over that open file, and wasmtime maps that same open file (through
//! `/proc/self/fd` on Linux): renaming something else into place meanwhile
//! changes nothing. A cache directory or key file that others could write
//! is not used at all.
//!
//! Why so (a cached load is ~6 MB of code): the MAC was HMAC-SHA256 over
//! the entry read into memory and handed to `Component::deserialize`,
//! which copied it into fresh pages; the hashing and the two copies into
//! freshly faulted memory were most of the load (8.0 ms; now 3.2 ms).
//! Keyed BLAKE3 is ~4x faster here, and a mapped file takes its pages
//! from the page cache. The price: the code runs from the file's pages,
//! so the file must not be written in place while its code is loaded (a
//! truncation is a SIGBUS). Only someone acting as this user can do that,
//! and they can read the key and forge any MAC anyway: the check binds
//! entries to this module, engine and key (a copied, corrupted or foreign
//! entry is refused), not against this user.

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

/// A `.mac` file: this magic, then the MAC. (`idemcw01` entries were one
/// file, magic + HMAC-SHA256 + artifact; their cache keys differ, so they
/// are never looked up.)
const MAGIC: &[u8; 8] = b"idemcw02";
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
    s.update(MAGIC);
    s.update(b"\n");
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

    fn mac_path(&self, key: &str) -> PathBuf {
        self.compiled.join(format!("{key}.mac"))
    }

    /// The entry for `key` if it exists and its MAC is right; anything else
    /// (absent, unreadable, forged, corrupted, incompatible) is `None`.
    fn load(&self, engine: &Engine, key: &str) -> Option<Component> {
        let path = self.path(key);
        let ignore = |why: &dyn std::fmt::Display| {
            tracing::warn!("ignoring compiled cache entry {}: {why}", path.display());
        };
        let artifact = match self.check(key, &path) {
            Ok(Some(file)) => file,
            Ok(None) => return None,
            Err(why) => {
                ignore(&why);
                return None;
            }
        };
        // SAFETY: `artifact` is the open file whose MAC was just checked,
        // under a key only this user can read, over this entry's cache key
        // (module digest + engine fingerprint + compatibility hash): it is
        // what `Component::serialize` produced for this module on an engine
        // like this one. wasmtime maps that very file (not whatever the path
        // names by then); only this user can write it in place, for as long
        // as the code is loaded (see the module's doc). wasmtime still checks
        // its own header.
        match unsafe { deserialize_open(engine, artifact) } {
            Ok(c) => Some(c),
            Err(e) => {
                ignore(&format!("{e:#}"));
                None
            }
        }
    }

    /// Check the entry's MAC over its artifact file. `Ok(None)`: no entry;
    /// `Ok(Some(file))`: the artifact, open, with the right MAC; `Err(why)`:
    /// an entry that must not be used.
    fn check(&self, key: &str, path: &Path) -> Result<Option<std::fs::File>, String> {
        let (artifact, mac_file) = match (open_plain(path), open_plain(&self.mac_path(key))) {
            (Ok(Some(a)), Ok(Some(m))) => (a, m),
            (Ok(None), _) => return Ok(None),
            (Ok(Some(_)), Ok(None)) => return Err("it has no MAC file; recompiling".into()),
            (Err(e), _) | (_, Err(e)) => return Err(e.to_string()),
        };
        let mut stored = Vec::with_capacity(MAGIC.len() + MAC_LEN);
        (&mac_file)
            .take((MAGIC.len() + MAC_LEN + 1) as u64)
            .read_to_end(&mut stored)
            .map_err(|e| e.to_string())?;
        let mut h = keyed(&self.key, key);
        h.update_reader((&artifact).take(MAX_ENTRY_BYTES))
            .map_err(|e| e.to_string())?;
        let right = stored
            .strip_prefix(MAGIC.as_slice())
            .is_some_and(|mac| macs_equal(mac, h.finalize().as_bytes()));
        if !right {
            return Err("it is not bound to this module and engine (its MAC does not match: corrupted, or not written by this idem); recompiling".into());
        }
        Ok(Some(artifact))
    }

    /// Write `component`'s MAC for `key`, then its code, each atomically.
    /// In this order, a crash in between leaves a MAC without an artifact,
    /// which is a plain miss.
    fn store(&self, key: &str, component: &Component) -> std::io::Result<()> {
        let code = component
            .serialize()
            .map_err(|e| std::io::Error::other(format!("{e:#}")))?;
        let mut h = keyed(&self.key, key);
        h.update(&code);
        // NamedTempFile is created 0600 and renamed into place.
        let mut tmp = tempfile::NamedTempFile::new_in(&self.compiled)?;
        std::io::Write::write_all(&mut tmp, MAGIC)?;
        std::io::Write::write_all(&mut tmp, h.finalize().as_bytes())?;
        tmp.persist(self.mac_path(key)).map_err(|e| e.error)?;
        let mut tmp = tempfile::NamedTempFile::new_in(&self.compiled)?;
        std::io::Write::write_all(&mut tmp, &code)?;
        // Read-only: loaded code is mapped from this file, so a write in
        // place (a `cp` over it) must fail rather than reach running code.
        // Replacing it (rename) stays possible, and leaves mappings alone.
        #[cfg(unix)]
        std::fs::set_permissions(
            tmp.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o400),
        )?;
        tmp.persist(self.path(key)).map_err(|e| e.error)?;
        Ok(())
    }
}

/// Open `path` for reading if it is a regular file of a bounded size,
/// never through a symlink (nor a FIFO); `None` when there is none.
fn open_plain(path: &Path) -> std::io::Result<Option<std::fs::File>> {
    let mut open = std::fs::OpenOptions::new();
    open.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut open, libc::O_NOFOLLOW | libc::O_NONBLOCK);
    let file = match open.open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let meta = file.metadata()?;
    if !meta.file_type().is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    if meta.len() > MAX_ENTRY_BYTES {
        return Err(std::io::Error::other(format!(
            "{} bytes, more than any compiled module",
            meta.len()
        )));
    }
    Ok(Some(file))
}

/// Deserialize the code in `file`, the very file that was checked. On
/// Linux wasmtime maps it through `/proc/self/fd` (its page-cache pages,
/// no copy; `Component` has no `deserialize_open_file`), which names this
/// open file whatever its path names by now. Elsewhere the file is read
/// into memory and those bytes are deserialized (a copy).
///
/// # Safety
/// As [`Component::deserialize`]: `file` must hold what
/// `Component::serialize` wrote.
unsafe fn deserialize_open(
    engine: &Engine,
    mut file: std::fs::File,
) -> wasmtime::Result<Component> {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd as _;
        let fd = std::path::PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
        // Only where the link reopens (no /proc, another pid namespace or
        // a security module can say no): otherwise the bytes are read.
        if std::fs::File::open(&fd).is_ok() {
            // SAFETY: the caller's; `file` stays open until this returns.
            return unsafe { Component::deserialize_file(engine, &fd) };
        }
    }
    std::io::Seek::rewind(&mut file)?;
    let mut bytes = Vec::new();
    file.take(MAX_ENTRY_BYTES).read_to_end(&mut bytes)?;
    // SAFETY: the caller's. (A same-user writer could change the file
    // between the check and this read; see the module's doc.)
    unsafe { Component::deserialize(engine, &bytes) }
}

/// Compare MACs in constant time, so timing says nothing about where a
/// forged MAC first differs (blake3's `Hash` compares so).
fn macs_equal(a: &[u8], b: &[u8; MAC_LEN]) -> bool {
    <[u8; MAC_LEN]>::try_from(a)
        .is_ok_and(|a| blake3::Hash::from_bytes(a) == blake3::Hash::from_bytes(*b))
}

/// The MAC of an entry, to be fed its artifact: keyed BLAKE3 over the
/// cache key's length, the cache key, then the artifact (the length makes
/// the split between the two unambiguous).
fn keyed(secret: &[u8; KEY_LEN], key: &str) -> blake3::Hasher {
    let mut h = blake3::Hasher::new_keyed(secret);
    h.update(&(key.len() as u64).to_le_bytes());
    h.update(key.as_bytes());
    h
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
pub(crate) fn make_private_dir(dir: &Path) -> std::io::Result<()> {
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
pub(crate) fn check_private(path: &Path, secret: bool) -> Result<(), String> {
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
pub(crate) fn check_private(path: &Path, _secret: bool) -> Result<(), String> {
    Err(format!(
        "ownership of {} cannot be checked on this platform",
        path.display()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mac_of(secret: &[u8; KEY_LEN], key: &str, artifact: &[u8]) -> [u8; MAC_LEN] {
        let mut h = keyed(secret, key);
        h.update(artifact);
        *h.finalize().as_bytes()
    }

    /// The MAC is BLAKE3's keyed mode (checked against the crate's own
    /// keyed hash) and binds the key, the cache key and the artifact: a
    /// change to any of them, or moving bytes between cache key and
    /// artifact, changes it.
    #[test]
    fn the_mac_binds_secret_cache_key_and_artifact() {
        let secret = [7u8; KEY_LEN];
        let m = mac_of(&secret, "ab", b"cd");
        let mut whole = 2u64.to_le_bytes().to_vec();
        whole.extend_from_slice(b"abcd");
        assert_eq!(m, *blake3::keyed_hash(&secret, &whole).as_bytes());
        assert_ne!(m, mac_of(&[8u8; KEY_LEN], "ab", b"cd"));
        assert_ne!(m, mac_of(&secret, "a", b"bcd"));
        assert_ne!(m, mac_of(&secret, "ab", b"ce"));
        assert!(macs_equal(&m, &m));
        let mut forged = m;
        forged[31] ^= 1;
        assert!(!macs_equal(&forged, &m));
        assert!(!macs_equal(&m[..31], &m));
    }

    /// An entry is used only with its own MAC beside it, over its own
    /// cache key, from a regular file: a missing, swapped or extended MAC
    /// file, one flipped bit of code, a symlink to a good artifact, a FIFO
    /// or a directory in its place is not loaded (and a FIFO does not
    /// hang the load); a MAC without an artifact is a plain miss.
    #[cfg(unix)]
    #[test]
    fn an_entry_loads_only_with_its_own_mac_from_a_plain_file() {
        use std::os::unix::fs::PermissionsExt as _;
        let engine = Engine::new(&{
            let mut c = wasmtime::Config::new();
            c.wasm_component_model(true);
            c
        })
        .unwrap();
        let component = Component::new(&engine, "(component)").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let cache = TrustedCache::open(dir.path()).unwrap();
        let (a, b) = ("a".repeat(64), "b".repeat(64));
        assert!(cache.load(&engine, &a).is_none(), "an empty cache hit");
        cache.store(&a, &component).unwrap();
        cache.store(&b, &component).unwrap();
        assert!(cache.load(&engine, &a).is_some());
        let mode = |p: PathBuf| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        // The artifact is read-only: code is mapped from it.
        assert_eq!(
            (mode(cache.path(&a)), mode(cache.mac_path(&a))),
            (0o400, 0o600)
        );
        // B's MAC (same artifact, other cache key) under A's name.
        std::fs::copy(cache.mac_path(&b), cache.mac_path(&a)).unwrap();
        assert!(
            cache.load(&engine, &a).is_none(),
            "another key's MAC passed"
        );
        std::fs::remove_file(cache.mac_path(&a)).unwrap();
        assert!(cache.load(&engine, &a).is_none(), "no MAC passed");
        assert!(cache.check(&a, &cache.path(&a)).is_err());
        // A MAC with a byte more.
        let mut mac = std::fs::read(cache.mac_path(&b)).unwrap();
        mac.push(0);
        std::fs::write(cache.mac_path(&a), &mac).unwrap();
        assert!(cache.load(&engine, &a).is_none(), "an extended MAC passed");
        // One bit in the middle of the code, where wasmtime's own header
        // checks do not look.
        let mut code = std::fs::read(cache.path(&b)).unwrap();
        let mid = code.len() / 2;
        code[mid] ^= 1;
        std::fs::set_permissions(cache.path(&b), std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::write(cache.path(&b), &code).unwrap();
        assert!(cache.load(&engine, &b).is_none(), "a flipped bit passed");
        // A symlink to a good artifact (with the right MAC beside it).
        cache.store(&b, &component).unwrap();
        assert!(cache.load(&engine, &b).is_some());
        let real = dir.path().join("elsewhere.cwasm");
        std::fs::rename(cache.path(&b), &real).unwrap();
        std::os::unix::fs::symlink(&real, cache.path(&b)).unwrap();
        assert!(
            cache.load(&engine, &b).is_none(),
            "a symlinked artifact passed"
        );
        // What is mapped is the file that was checked, not what the path
        // names by then: garbage renamed into place after the check.
        cache.store(&b, &component).unwrap();
        let checked = cache.check(&b, &cache.path(&b)).unwrap().unwrap();
        let garbage = dir.path().join("garbage");
        std::fs::write(&garbage, b"not compiled code").unwrap();
        std::fs::rename(&garbage, cache.path(&b)).unwrap();
        // SAFETY: `checked` is what `store` wrote for this engine.
        assert!(unsafe { deserialize_open(&engine, checked) }.is_ok());
        assert!(cache.load(&engine, &b).is_none(), "the garbage passed");
        // A FIFO or a directory in the artifact's place: refused at once.
        std::fs::remove_file(cache.path(&b)).unwrap();
        let fifo =
            std::ffi::CString::new(cache.path(&b).into_os_string().into_encoded_bytes()).unwrap();
        // SAFETY: a valid path string.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        let t = std::time::Instant::now();
        assert!(cache.check(&b, &cache.path(&b)).is_err(), "a FIFO passed");
        assert!(t.elapsed() < std::time::Duration::from_secs(5));
        std::fs::remove_file(cache.path(&b)).unwrap();
        std::fs::create_dir(cache.path(&b)).unwrap();
        assert!(
            cache.check(&b, &cache.path(&b)).is_err(),
            "a directory passed"
        );
        // A MAC whose artifact is gone: a miss, not an error.
        std::fs::remove_dir(cache.path(&b)).unwrap();
        assert!(matches!(cache.check(&b, &cache.path(&b)), Ok(None)));
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
