//! On-disk cache of compiled code, keyed by module digest + engine
//! fingerprint: ~0.25 ms to load instead of seconds to compile.

use std::hash::{Hash, Hasher};
use std::path::Path;

use sha2::{Digest as _, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

use super::error::SandboxError;
use crate::digest::Digest;

/// Where a module's compiled code came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheOutcome {
    /// Loaded from the cache; nothing compiled.
    Hit,
    /// Compiled, then stored in the cache.
    Miss,
    /// Compiled; no cache configured (or it could not be written).
    Disabled,
}

fn cache_key(engine: &Engine, digest: &Digest, fingerprint: &str) -> String {
    // The compatibility hash covers target, flags and tunables; the cache
    // is private to this build, so std's fixed-key hasher is fine here.
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

/// Load `bytes`' compiled code from `dir`, or compile and store it.
pub fn load_or_compile(
    engine: &Engine,
    dir: Option<&Path>,
    digest: &Digest,
    fingerprint: &str,
    bytes: &[u8],
) -> Result<(Component, CacheOutcome), SandboxError> {
    let compile =
        || Component::new(engine, bytes).map_err(|e| SandboxError::Compile(format!("{e:#}")));
    let Some(dir) = dir else {
        return Ok((compile()?, CacheOutcome::Disabled));
    };
    let dir = dir.join("compiled");
    let path = dir.join(format!("{}.cwasm", cache_key(engine, digest, fingerprint)));
    if path.exists() {
        // SAFETY: the file was written by `Component::serialize` of an engine
        // with the same fingerprint and compatibility hash (both are in the
        // file name), into a cache directory owned by the user running idem.
        // wasmtime still checks its header and refuses incompatible code.
        match unsafe { Component::deserialize_file(engine, &path) } {
            Ok(c) => return Ok((c, CacheOutcome::Hit)),
            Err(e) => tracing::warn!(
                "ignoring unreadable compiled cache {}: {e:#}",
                path.display()
            ),
        }
    }
    let component = compile()?;
    let stored = component
        .serialize()
        .map_err(|e| std::io::Error::other(format!("{e:#}")))
        .and_then(|code| {
            std::fs::create_dir_all(&dir)?;
            let mut tmp = tempfile::NamedTempFile::new_in(&dir)?;
            std::io::Write::write_all(&mut tmp, &code)?;
            tmp.persist(&path).map_err(|e| e.error)?;
            Ok(())
        });
    match stored {
        Ok(()) => Ok((component, CacheOutcome::Miss)),
        Err(e) => {
            tracing::warn!("could not write compiled cache in {}: {e}", dir.display());
            Ok((component, CacheOutcome::Disabled))
        }
    }
}
