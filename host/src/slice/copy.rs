//! Private copies: each input read once, into memory or a temporary file,
//! and checked against its pin, so what is decoded is exactly what was
//! pinned.

use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::sync::Arc;

use bytes::Bytes;

use super::error::SliceError;
use super::pin::{Check, InputObject, Pins};
use super::resolve::ResolvedSlice;
use crate::digest::Digest;
use crate::storage::{Hashes, StorageError, Store};

/// Inputs up to this size are copied to memory before decoding; larger ones
/// to an anonymous temporary file (memory stays O(batch)).
pub const IN_MEMORY_MAX: u64 = 64 << 20;

impl ResolvedSlice {
    /// Read the input once into a private copy (memory up to
    /// `in_memory_max`, else an anonymous temporary file) and check it
    /// ([`Check`]): what is decoded afterwards is exactly what was pinned.
    pub(super) fn private_copy_with(
        &self,
        input: &InputObject,
        in_memory_max: u64,
    ) -> Result<PrivateCopy, SliceError> {
        private_copy(&self.store, input, self.check(input), in_memory_max, None)
    }

    /// How `input`'s copy is proved: by the BLAKE3 pinning took, if `input`
    /// is still what was pinned (same path, same sha256), else by sha256.
    pub(super) fn check(&self, input: &InputObject) -> Check {
        match &self.pins {
            Pins::AsRead => Check::AsRead,
            Pins::Before(checks) => checks
                .get(&input.path)
                .filter(|(digest, _)| *digest == input.digest)
                .map_or(Check::Sha256, |(_, check)| Check::Blake3(*check)),
        }
    }
}

/// [`ResolvedSlice::private_copy_with`] from `store`: a free function, so the
/// next input's copy can be made on a thread of its own. With a BLAKE3
/// `check` (taken by pinning alongside the sha256), the copy goes through
/// BLAKE3 alone; a copy that differs is then hashed with sha256 too, to say
/// how. A copy for [`Check::AsRead`] is not hashed here at all.
/// A copy made ahead for a reader is not started once `stop` is set (one
/// under way runs to its end: at most [`IN_MEMORY_MAX`]). Hashes taken as
/// read run to their end too: in `idem exec`, the process ends with them.
pub(super) fn private_copy(
    store: &Store,
    input: &InputObject,
    check: Check,
    in_memory_max: u64,
    stop: Option<&Arc<std::sync::atomic::AtomicBool>>,
) -> Result<PrivateCopy, SliceError> {
    let io = |e| SliceError::Io {
        path: input.path.clone(),
        source: e,
    };
    // One byte past the pinned size tells "grew" without reading it all.
    let limit = input.size.saturating_add(1);
    let gone = |e: StorageError| match e {
        StorageError::NotFound(_) => SliceError::Changed {
            path: input.path.clone(),
            detail: "it was deleted".into(),
        },
        e => e.into(),
    };
    let hashes = match check {
        Check::Blake3(_) => Hashes::blake3(),
        Check::Sha256 => Hashes::sha256(),
        Check::AsRead => Hashes::none(),
    };
    let (mut copy, hashed, n) = if input.size <= in_memory_max {
        let (h, buf) = store
            .read_through(&input.path, limit, hashes, stop.cloned())
            .map_err(gone)?;
        let n = buf.len() as u64;
        (PrivateCopy::Memory(Bytes::from(buf)), h, n)
    } else {
        let tmp = tempfile::tempfile().map_err(|e| SliceError::Io {
            path: format!("a temporary copy of {}", input.path),
            source: e,
        })?;
        let (h, n, mut tmp) = store
            .copy_through(&input.path, limit, tmp, hashes)
            .map_err(gone)?;
        tmp.flush().map_err(io)?;
        tmp.seek(SeekFrom::Start(0)).map_err(io)?;
        (PrivateCopy::Disk(tmp), h, n)
    };
    if n != input.size {
        let now = if n > input.size {
            "more".to_string()
        } else {
            n.to_string()
        };
        return Err(SliceError::Changed {
            path: input.path.clone(),
            detail: format!("size {} {}, {now} now", input.size, check.when()),
        });
    }
    let same = match (check, hashed.blake3, hashed.sha256) {
        (Check::AsRead, _, _) => true,
        (Check::Blake3(c), Some(b), _) => c == b.finalize(),
        (Check::Sha256, _, Some(s)) => Digest::from_sha256(s) == input.digest,
        _ => false,
    };
    if !same {
        let digest = copy.sha256().map_err(io)?;
        return Err(SliceError::Changed {
            path: input.path.clone(),
            detail: format!("pinned {}, now {digest}", input.digest),
        });
    }
    Ok(copy)
}

/// The bytes of one input as hashed, owned by this run alone.
pub(super) enum PrivateCopy {
    Memory(Bytes),
    Disk(File),
}

impl PrivateCopy {
    /// The copy's bytes as a stream, from the start (a text input's).
    pub(super) fn into_read(self) -> std::io::Result<Box<dyn std::io::Read + Send>> {
        match self {
            PrivateCopy::Memory(b) => Ok(Box::new(std::io::Cursor::new(b))),
            PrivateCopy::Disk(mut f) => {
                f.seek(SeekFrom::Start(0))?;
                Ok(Box::new(f))
            }
        }
    }

    /// The copy's sha256 (to name a copy that is not what was pinned).
    fn sha256(&mut self) -> std::io::Result<Digest> {
        match self {
            PrivateCopy::Memory(b) => Ok(Digest::of_bytes(b)),
            PrivateCopy::Disk(f) => {
                f.seek(SeekFrom::Start(0))?;
                let (digest, _) = Digest::of_reader(f)?;
                f.seek(SeekFrom::Start(0))?;
                Ok(digest)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::slice::fixture::plain_ints;

    /// The BLAKE3 check belongs to the bytes pinned: an input whose digest
    /// the caller changed since is checked by sha256 against its new digest
    /// (and so refused here), never waved through by the old check.
    #[test]
    fn an_input_changed_by_the_caller_is_checked_by_sha256() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.parquet");
        plain_ints(&path, 100);
        let mut slice = ResolvedSlice::from_files("s", std::slice::from_ref(&path)).unwrap();
        assert!(matches!(slice.check(&slice.inputs[0]), Check::Blake3(_)));
        // Without a check, the copy is proved by sha256: the right digest
        // passes.
        let pins = std::mem::replace(&mut slice.pins, Pins::Before(Default::default()));
        assert!(matches!(slice.check(&slice.inputs[0]), Check::Sha256));
        slice
            .private_copy_with(&slice.inputs[0], IN_MEMORY_MAX)
            .unwrap();
        slice.pins = pins;
        slice.inputs[0].digest = Digest::of_bytes(b"something else");
        assert!(matches!(slice.check(&slice.inputs[0]), Check::Sha256));
        match slice.private_copy_with(&slice.inputs[0], IN_MEMORY_MAX) {
            Err(SliceError::Changed { detail, .. }) => {
                assert!(detail.starts_with("pinned sha256:"), "{detail}")
            }
            Err(e) => panic!("{e}"),
            Ok(_) => panic!("a copy was accepted against another digest"),
        }
    }
}
