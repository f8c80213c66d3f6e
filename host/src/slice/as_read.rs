//! Hashing as read (`idem exec`): each private copy's sha256 taken on a
//! thread of its own while the copy is decoded, and the inputs read
//! reported once the slice was read to its end.

use std::fs::File;
use std::sync::Arc;

use super::copy::PrivateCopy;
use super::error::SliceError;
use super::pin::InputObject;
use crate::digest::Digest;

/// What a reader made by [`SliceReader::of_files`](crate::slice::SliceReader::of_files) has read: each input's
/// path, size and the sha256 of exactly the bytes decoded, in read order.
#[derive(Clone, Default)]
pub struct InputsRead(Arc<std::sync::Mutex<ReadSoFar>>);

#[derive(Default)]
struct ReadSoFar {
    inputs: Vec<Reading>,
    /// The reader reached the slice's end.
    whole: bool,
}

struct Reading {
    path: String,
    size: u64,
    sha256: Hashing,
}

enum Hashing {
    Running(std::thread::JoinHandle<std::io::Result<Digest>>),
    Done(std::io::Result<Digest>),
}

impl Hashing {
    /// Wait for a hash under way.
    fn settle(&mut self) {
        let pending = std::io::Error::other("never hashed");
        *self = Hashing::Done(match std::mem::replace(self, Hashing::Done(Err(pending))) {
            Hashing::Running(h) => h
                .join()
                .unwrap_or_else(|_| Err(std::io::Error::other("the thread hashing it panicked"))),
            Hashing::Done(d) => d,
        });
    }
}

impl InputsRead {
    /// Wait for the hash under way, if any: called before the next copy is
    /// started, so at most two copies exist at once (the one decoded and
    /// hashed, the next one being made), as for a pinned slice.
    pub(super) fn settle(&self) {
        let mut read = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(last) = read.inputs.last_mut() {
            last.sha256.settle();
        }
    }

    /// How many hashes have not been awaited.
    #[cfg(test)]
    pub(super) fn running(&self) -> usize {
        let read = self.0.lock().unwrap_or_else(|e| e.into_inner());
        read.inputs
            .iter()
            .filter(|r| matches!(r.sha256, Hashing::Running(_)))
            .count()
    }

    /// The reader reached the slice's end.
    pub(super) fn read_whole(&self) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).whole = true;
    }

    /// Start hashing `copy`, `input`'s private copy, on a thread of its own
    /// (in turn if none can be started), while it is decoded.
    pub(super) fn start(&self, input: &InputObject, copy: &PrivateCopy) -> Result<(), SliceError> {
        let job = || -> Result<Box<dyn FnOnce() -> std::io::Result<Digest> + Send>, SliceError> {
            Ok(match copy {
                PrivateCopy::Memory(b) => {
                    let b = b.clone();
                    Box::new(move || Ok(Digest::of_bytes(&b)))
                }
                // Read with pread: the decoder seeks the same open file.
                PrivateCopy::Disk(f) => {
                    let f = f.try_clone().map_err(|e| SliceError::Io {
                        path: input.path.clone(),
                        source: e,
                    })?;
                    Box::new(move || digest_at(&f))
                }
            })
        };
        self.settle();
        let sha256 = match std::thread::Builder::new()
            .name("idem-hash".into())
            .spawn(job()?)
        {
            Ok(h) => Hashing::Running(h),
            Err(_) => Hashing::Done(job()?()),
        };
        let mut read = self.0.lock().unwrap_or_else(|e| e.into_inner());
        read.inputs.push(Reading {
            path: input.path.clone(),
            size: input.size,
            sha256,
        });
        Ok(())
    }

    /// Every input, in read order, with the sha256 of the bytes decoded,
    /// once the reader has read the whole slice (an error before that: a
    /// run that stopped early did not read what its slice names).
    pub fn finish(&self) -> Result<Vec<InputObject>, SliceError> {
        let mut read = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if !read.whole {
            return Err(SliceError::Io {
                path: "(the slice)".into(),
                source: std::io::Error::other(format!(
                    "not read to its end ({} inputs started)",
                    read.inputs.len()
                )),
            });
        }
        read.inputs
            .iter_mut()
            .map(|r| {
                r.sha256.settle();
                let Hashing::Done(d) = &r.sha256 else {
                    unreachable!("settled")
                };
                match d {
                    Ok(digest) => Ok(InputObject {
                        path: r.path.clone(),
                        size: r.size,
                        digest: digest.clone(),
                    }),
                    Err(e) => Err(SliceError::Io {
                        path: r.path.clone(),
                        source: std::io::Error::new(e.kind(), e.to_string()),
                    }),
                }
            })
            .collect()
    }
}

/// The sha256 of the whole file `f`, read by position (its offset, shared
/// with the decoder's handle, is not moved).
fn digest_at(f: &File) -> std::io::Result<Digest> {
    /// `File` read by position from `.1` on.
    struct At<'a>(&'a File, u64);
    impl std::io::Read for At<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let k = std::os::unix::fs::FileExt::read_at(self.0, buf, self.1)?;
            self.1 += k as u64;
            Ok(k)
        }
    }
    Digest::of_reader(&mut At(f, 0)).map(|(d, _)| d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use std::io::{Seek, SeekFrom, Write};

    /// A copy on disk is hashed by position: the decoder's seeks on the
    /// same open file do not move what is hashed, nor the other way round.
    #[test]
    fn a_disk_copy_is_hashed_without_moving_its_offset() {
        let mut f = tempfile::tempfile().unwrap();
        let bytes: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7 % 251) as u8).collect();
        f.write_all(&bytes).unwrap();
        f.seek(SeekFrom::Start(12_345)).unwrap();
        assert_eq!(digest_at(&f).unwrap(), Digest::of_bytes(&bytes));
        assert_eq!(f.stream_position().unwrap(), 12_345);
        let read = InputsRead::default();
        let input = InputObject {
            path: "x".into(),
            size: bytes.len() as u64,
            digest: Digest::of_bytes(b""),
        };
        let mut f2 = f.try_clone().unwrap();
        read.start(&input, &PrivateCopy::Disk(f)).unwrap();
        read.start(&input, &PrivateCopy::Memory(Bytes::from(bytes.clone())))
            .unwrap();
        assert_eq!(f2.stream_position().unwrap(), 12_345);
        read.read_whole();
        let got = read.finish().unwrap();
        assert!(got.iter().all(|i| i.digest == Digest::of_bytes(&bytes)));
    }
}
