//! Step 5a: the manifest signed (when the run has a key): its DSSE
//! envelope stored beside it, content-addressed, before the commit names
//! it. The same key and manifest always make the same envelope, so a
//! retry or a twin writes the same bytes to the same place. Only a
//! manifest this process produced is signed: a memo hit reports the
//! envelope its key made before, if it is there, and signs nothing (the
//! manifest it found is a file anyone who can write the table can plant).

use std::sync::Arc;

use super::RunError;
use super::commit::Sealed;
use crate::attest::{self, SigningKey};
use crate::digest::Digest;
use crate::manifest::Manifest;
use crate::table::Table;

/// Sign the manifest `bytes` (digest `manifest`) with `key` and store the
/// envelope; its digest.
pub(super) async fn sign(
    table: &Table,
    key: &Arc<SigningKey>,
    bytes: &[u8],
    manifest: &Digest,
) -> Result<Digest, RunError> {
    let envelope = attest::sign(key, bytes);
    let digest = Digest::of_bytes(&envelope);
    // Content-addressed: a twin's put writes the same bytes.
    table
        .put_sidecar(&attest::envelope_path(manifest, &digest), envelope)
        .await?;
    Ok(digest)
}

/// The envelope `key` made of the manifest `m` (stored as `manifest`),
/// when it is stored there: what a memo hit reports.
pub(super) async fn signed_before(
    table: &Table,
    key: &Arc<SigningKey>,
    m: &Manifest,
    manifest: &Digest,
) -> Option<Digest> {
    let bytes = m.to_bytes();
    if Digest::of_bytes(&bytes) != *manifest {
        return None;
    }
    let envelope = attest::sign(key, &bytes);
    let digest = Digest::of_bytes(&envelope);
    let path = attest::envelope_path(manifest, &digest);
    let stored = table
        .get_sidecar_at_most(&path, attest::MAX_ENVELOPE_BYTES)
        .await
        .ok()
        .flatten()?;
    (stored == envelope).then_some(digest)
}

/// The manifest's bytes and digest, and (with `key`) its envelope, signed
/// and stored: what the commit step stores and names.
pub(super) fn seal(
    rt: &tokio::runtime::Runtime,
    table: &Table,
    manifest: &Manifest,
    key: Option<&Arc<SigningKey>>,
) -> Result<Sealed, RunError> {
    let bytes = manifest.to_bytes();
    let digest = Digest::of_bytes(&bytes);
    let envelope = match key {
        Some(key) => Some(rt.block_on(sign(table, key, &bytes, &digest))?),
        None => None,
    };
    Ok(Sealed {
        bytes,
        digest,
        envelope,
    })
}
