//! A run's manifest as the service shows it (the API byte for byte, the
//! page as text): the one its result names, read from its table's
//! `_idem/manifests/`, bounded; and its signed envelope, from
//! `_idem/attestations/`.

use axum::body::Bytes;

use super::queue::RunRecord;

/// The largest manifest the service reads to show it (a real one is
/// kilobytes; a tenant can plant any file under its root, and many
/// requests at once must not hold gigabytes).
pub const MAX_MANIFEST_BYTES: u64 = 4 << 20;

/// The sha256 (hex) of the manifest run `r` ended with, if it has one.
pub fn manifest_hex(r: &RunRecord) -> Option<String> {
    r.result
        .as_ref()
        .and_then(|v| v["manifest"].as_str())
        .and_then(|d| d.strip_prefix("sha256:"))
        .map(str::to_string)
}

/// The sha256 (hex) of the envelope run `r`'s manifest was signed into,
/// if it was.
pub fn envelope_hex(r: &RunRecord) -> Option<String> {
    r.result
        .as_ref()
        .and_then(|v| v["envelope"].as_str())
        .and_then(|d| d.strip_prefix("sha256:"))
        .filter(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))
        .map(str::to_string)
}

/// The manifest of sha256 `hex` stored in the table at `table` (a full
/// location), if it is there and at most [`MAX_MANIFEST_BYTES`]. Blocking.
pub fn read_manifest(table: &str, hex: &str) -> Option<Bytes> {
    read_manifest_file(table, &format!("manifests/{hex}.json"))
}

/// `_idem/<rel>` of the table at `table` (a manifest or its envelope), if
/// it is there and at most [`MAX_MANIFEST_BYTES`]. Blocking.
pub fn read_manifest_file(table: &str, rel: &str) -> Option<Bytes> {
    crate::storage::Store::at(table).ok().and_then(|s| {
        s.get_at_most(&format!("_idem/{rel}"), MAX_MANIFEST_BYTES)
            .ok()
            .flatten()
    })
}
