//! Signed attestations: a run's manifest (an in-toto Statement) wrapped
//! in a DSSE envelope signed with an Ed25519 key, so that anyone holding
//! the public key can check what ran without trusting whoever can write
//! the table. The envelope's payload is the manifest's exact bytes; it is
//! stored content-addressed beside the table
//! (`_idem/attestations/<manifest hex>/<envelope hex>.json`) and the commit
//! names its digest.

mod envelope;
mod keys;

pub use envelope::{Opened, PAYLOAD_TYPE, open, pae, short, sign};
pub use keys::{KeyError, KeyPair, PublicKey, SigningKey};

use crate::digest::Digest;

/// Where the envelope `envelope` of manifest `manifest` is kept, under the
/// table's `_idem/`.
pub fn envelope_path(manifest: &Digest, envelope: &Digest) -> String {
    format!("{}{}.json", envelopes_of(manifest), envelope.hex())
}

/// The folder of every envelope of `manifest` (one per signing key).
pub fn envelopes_of(manifest: &Digest) -> String {
    format!("attestations/{}/", manifest.hex())
}

/// Envelopes of one manifest looked at (one per signing key; a planted
/// flood of them is not listed or read past this).
pub const MAX_ENVELOPES: usize = 8;
/// The largest envelope read: a manifest's bytes in base64 and a few
/// signatures (a manifest naming many thousands of input files is a few
/// MiB).
pub const MAX_ENVELOPE_BYTES: u64 = 32 << 20;

/// Whether `bytes` are a DSSE envelope rather than a bare manifest (a
/// JSON object with a `payloadType`).
pub fn is_envelope(bytes: &[u8]) -> bool {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Probe {
        #[allow(dead_code)]
        payload_type: serde::de::IgnoredAny,
    }
    serde_json::from_slice::<Probe>(bytes).is_ok()
}

/// The key id that signed `envelope` over exactly `manifest` (one of
/// `keys`); else why not.
pub fn check(envelope: &[u8], manifest: &[u8], keys: &[PublicKey]) -> Result<String, String> {
    let opened = open(envelope, keys)?;
    let keyid = opened.keyid.unwrap_or_default();
    if opened.payload != manifest {
        return Err(format!(
            "the envelope signed by key {} is for another manifest ({}): it was copied from another run or table",
            envelope::short(&keyid),
            Digest::of_bytes(&opened.payload)
        ));
    }
    Ok(keyid)
}
