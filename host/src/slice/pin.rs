//! Pinning: each input object's path, size and sha256, taken before
//! anything runs (the files spread over the machine's cores), and how each
//! private copy is proved against them later.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::digest::Digest;
use crate::storage::{Hashes, StorageError, Store};

/// One pinned input object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputObject {
    /// Path relative to the slice root (the name recorded in manifests).
    pub path: String,
    /// Size in bytes.
    pub size: u64,
    /// sha256 of the bytes.
    pub digest: Digest,
}

/// How a slice's inputs are hashed.
#[derive(Debug, Clone)]
pub(super) enum Pins {
    /// Before anything runs, which a run key (and so a memo check) needs.
    /// Per input path, the sha256 and the BLAKE3 of the bytes pinned: a
    /// private copy is checked by BLAKE3 (~4x cheaper than sha256 again).
    /// An input changed by the caller since is checked by sha256.
    Before(Arc<BTreeMap<String, (Digest, blake3::Hash)>>),
    /// As they are read ([`SliceReader::of_files`](crate::slice::SliceReader::of_files)): each private copy's
    /// sha256 is taken on a thread of its own while the copy is decoded,
    /// and is what [`InputsRead`](crate::slice::InputsRead) reports. The inputs' `digest`s are not
    /// known (and never read) in this mode.
    AsRead,
}

/// How one private copy is proved.
#[derive(Debug, Clone, Copy)]
pub(super) enum Check {
    /// Against the BLAKE3 pinning took.
    Blake3(blake3::Hash),
    /// Against the input's sha256 (an input changed by the caller).
    Sha256,
    /// Not here: hashed while it is decoded ([`Pins::AsRead`]).
    AsRead,
}

impl Check {
    /// When the input's size was taken, in an error's words.
    pub(super) fn when(self) -> &'static str {
        match self {
            Check::AsRead => "listed",
            _ => "pinned",
        }
    }
}

/// One input as pinning hashed it.
pub(super) struct Pinned {
    pub(super) digest: Digest,
    /// BLAKE3 of the same bytes: what the private copy is checked against.
    pub(super) check: blake3::Hash,
    pub(super) size: u64,
}

/// sha256, BLAKE3 and size of every file, in order: local files spread
/// over the machine's cores (one file is one stream through the hashes),
/// objects on a store fetched many at once
/// ([`Store::hash_each`]): a slice of many objects costs its bytes over
/// the bandwidth, not its objects times a round trip.
pub(super) fn hash_all(
    store: &Store,
    files: &[String],
    progress: &indicatif::ProgressBar,
) -> Result<Vec<Pinned>, StorageError> {
    let bar = progress.clone();
    let hashed = store.hash_each(
        files,
        u64::MAX,
        move || bar.wrap_write(std::io::sink()),
        Hashes::both,
    )?;
    Ok(hashed
        .into_iter()
        .map(|(h, size)| Pinned {
            digest: Digest::from_sha256(h.sha256.expect("asked for")),
            check: h.blake3.expect("asked for").finalize(),
            size,
        })
        .collect())
}
