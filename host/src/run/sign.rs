//! Step 5a: the manifest signed (when the run has a key): its DSSE
//! envelope stored beside it, content-addressed, before the commit names
//! it. The same key and manifest always make the same envelope, so a
//! retry or a twin writes the same bytes to the same place.

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
    let path = attest::envelope_path(manifest, &digest);
    // Already there: a retry, a twin, or a memo hit signed before.
    if table.get_sidecar(&path).await?.as_deref() != Some(envelope.as_slice()) {
        table.put_sidecar(&path, envelope).await?;
    }
    Ok(digest)
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
