//! Reading an object once through hashes: into any writer or into memory,
//! at most a limit, the sha256 and/or BLAKE3 of exactly the bytes copied.

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::StreamExt;
use object_store::path::Path as ObjPath;
use object_store::{ObjectStore, ObjectStoreExt};
use sha2::{Digest as _, Sha256};

use super::error::{StorageError, io_error};
use super::runtime::block;
use super::store::Store;

/// What a copy is hashed with: sha256 (the digest manifests record), and
/// or BLAKE3, which checks ~4x faster that a later copy of an object holds
/// the bytes an earlier one had (a private copy against its pinning).
pub struct Hashes {
    /// sha256, when asked for.
    pub sha256: Option<Sha256>,
    /// BLAKE3, when asked for.
    pub blake3: Option<blake3::Hasher>,
}

impl Hashes {
    /// sha256 only.
    pub fn sha256() -> Self {
        Hashes {
            sha256: Some(Sha256::new()),
            blake3: None,
        }
    }
    /// Both: what pinning an input takes.
    pub fn both() -> Self {
        Hashes {
            sha256: Some(Sha256::new()),
            blake3: Some(blake3::Hasher::new()),
        }
    }
    /// BLAKE3 only: what checking a copy takes.
    pub fn blake3() -> Self {
        Hashes {
            sha256: None,
            blake3: Some(blake3::Hasher::new()),
        }
    }
    /// Neither: a copy hashed elsewhere (while it is decoded).
    pub fn none() -> Self {
        Hashes {
            sha256: None,
            blake3: None,
        }
    }
    fn update(&mut self, bytes: &[u8]) {
        if let Some(h) = &mut self.sha256 {
            h.update(bytes);
        }
        if let Some(h) = &mut self.blake3 {
            h.update(bytes);
        }
    }
}

impl Store {
    /// Read `rel` once, at most `limit` bytes, into `to` through the hashes
    /// `h` asks for: the hashes and length of exactly the bytes `to`
    /// received.
    pub fn copy_through<W: Write + Send + 'static>(
        &self,
        rel: &str,
        limit: u64,
        mut to: W,
        mut h: Hashes,
    ) -> Result<(Hashes, u64, W), StorageError> {
        if let Some(root) = self.local_dir() {
            let (f, path) = self.open_local(&root, rel)?;
            let io = io_error("reading", &path);
            let mut src = f.take(limit);
            let mut buf = vec![0u8; 1 << 20];
            let mut n = 0u64;
            loop {
                let k = src.read(&mut buf).map_err(&io)?;
                if k == 0 {
                    break;
                }
                h.update(&buf[..k]);
                to.write_all(&buf[..k]).map_err(&io)?;
                n += k as u64;
            }
            return Ok((h, n, to));
        }
        let p = self.path(rel)?;
        let inner = self.inner.clone();
        block(async move { stream_through(&*inner, &p, limit, to, h).await })
            .map_err(|e| self.fail("reading", rel, e))
    }

    /// The local file `rel` below `root`, open for reading, and its path.
    fn open_local(&self, root: &Path, rel: &str) -> Result<(File, PathBuf), StorageError> {
        let path = self.local_file(root, rel)?;
        match File::open(&path) {
            Ok(f) => Ok((f, path)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                Err(StorageError::NotFound(path.display().to_string()))
            }
            Err(e) => Err(io_error("reading", &path)(e)),
        }
    }

    /// Read `rel` once, at most `limit` bytes (the expected size + 1, to
    /// tell growth), into memory, then through the hashes `h` (a private
    /// copy that fits in memory). Locally the file is read straight into a
    /// buffer of its size: one copy of the bytes, not two, into memory
    /// asked for in huge pages (one page fault per 2 MiB, not per 4 KiB).
    /// Refuses to start once `stop` is set (a read under way runs to its
    /// end).
    pub(crate) fn read_through(
        &self,
        rel: &str,
        limit: u64,
        mut h: Hashes,
        stop: Option<Arc<AtomicBool>>,
    ) -> Result<(Hashes, Vec<u8>), StorageError> {
        let gone = || std::io::Error::other("the reader is gone");
        // Never more up front than a private copy in memory can be.
        const MOST: u64 = 1 << 30;
        let Some(root) = self.local_dir() else {
            let to = Until(Vec::with_capacity(limit.min(MOST) as usize), stop);
            let (h, _, Until(buf, _)) = self.copy_through(rel, limit, to, h)?;
            return Ok((h, buf));
        };
        let (f, path) = self.open_local(&root, rel)?;
        let io = io_error("reading", &path);
        if stop.as_ref().is_some_and(|s| s.load(Ordering::Relaxed)) {
            return Err(io(gone()));
        }
        let size = f.metadata().map_err(&io)?.len().min(limit).min(MOST);
        let mut buf = Vec::with_capacity(size as usize);
        huge_pages(&mut buf);
        (&f).take(limit).read_to_end(&mut buf).map_err(&io)?;
        h.update(&buf);
        Ok((h, buf))
    }
}

/// Ask for `buf`'s spare capacity to be backed by transparent huge pages
/// where the kernel offers them on request (`madvise` mode): a 17 MiB
/// private copy then takes ~9 page faults instead of ~4,400. Only advice:
/// it changes no contents, and failure (or another OS) changes nothing.
/// (Memory malloc keeps in its heap after a free keeps the advice; under
/// memory pressure a fault may wait for compaction, per the machine's THP
/// `defrag` setting.)
fn huge_pages(buf: &mut Vec<u8>) {
    #[cfg(target_os = "linux")]
    {
        const HUGE: usize = 2 << 20;
        let spare = buf.spare_capacity_mut();
        let start = spare.as_mut_ptr() as usize;
        let end = start + spare.len();
        let (from, to) = (start.next_multiple_of(HUGE), end / HUGE * HUGE);
        if to > from {
            // SAFETY: [from, to) lies inside `buf`'s own allocation;
            // MADV_HUGEPAGE only sets how its pages are backed.
            unsafe {
                libc::madvise(from as *mut libc::c_void, to - from, libc::MADV_HUGEPAGE);
            }
        }
    }
}

/// The object `p` of `store` streamed once, at most `limit` bytes, into
/// `to` through the hashes `h`: [`Store::copy_through`] of an object store.
pub(super) async fn stream_through<W: Write>(
    store: &dyn ObjectStore,
    p: &ObjPath,
    limit: u64,
    mut to: W,
    mut h: Hashes,
) -> Result<(Hashes, u64, W), object_store::Error> {
    let mut stream = store.get(p).await?.into_stream();
    let mut n = 0u64;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk?;
        let room = limit.saturating_sub(n);
        let take = (chunk.len() as u64).min(room) as usize;
        h.update(&chunk[..take]);
        to.write_all(&chunk[..take])
            .map_err(|e| object_store::Error::Generic {
                store: "local copy",
                source: Box::new(e),
            })?;
        n += take as u64;
        if n >= limit {
            break;
        }
    }
    Ok((h, n, to))
}

/// A copy's destination that refuses more bytes once `stop` is set (its
/// reader is gone).
struct Until<W>(W, Option<Arc<AtomicBool>>);

impl<W: Write> Write for Until<W> {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        if self.1.as_ref().is_some_and(|s| s.load(Ordering::Relaxed)) {
            return Err(std::io::Error::other("the reader is gone"));
        }
        self.0.write(b)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::digest::Digest;
    use crate::storage::location::{contains, locate, split_last};
    use bytes::Bytes;

    #[test]
    fn local_objects_are_regular_files_inside_the_root() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("root");
        std::fs::create_dir_all(root.join("dir")).unwrap();
        std::fs::write(d.path().join("secret"), b"s").unwrap();
        std::os::unix::fs::symlink(d.path().join("secret"), root.join("out")).unwrap();
        std::os::unix::fs::symlink("/dev/zero", root.join("zero")).unwrap();
        std::fs::write(root.join("ok"), b"k").unwrap();
        std::os::unix::fs::symlink(root.join("ok"), root.join("alias")).unwrap();
        let s = Store::open(&locate(root.to_str().unwrap()).unwrap()).unwrap();
        for bad in ["dir", "out", "zero"] {
            assert!(s.size(bad).is_err(), "{bad}");
            assert!(
                s.copy_through(bad, u64::MAX, Vec::new(), Hashes::sha256())
                    .is_err(),
                "{bad}"
            );
        }
        assert_eq!(s.size("alias").unwrap(), Some(1));
        assert_eq!(s.size("absent").unwrap(), None);
    }

    #[test]
    fn local_reads_hash_what_they_copy_and_stop_at_the_limit() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("x"), b"hello world").unwrap();
        let s = Store::open(&locate(d.path().to_str().unwrap()).unwrap()).unwrap();
        let (h, n, buf) = s
            .copy_through("x", 5, Vec::new(), Hashes::sha256())
            .unwrap();
        let dg = Digest::from_sha256(h.sha256.unwrap());
        assert_eq!((n, buf.as_slice()), (5, &b"hello"[..]));
        assert_eq!(dg, Digest::of_bytes(b"hello"));
        assert!(matches!(
            s.copy_through("nope", 5, Vec::new(), Hashes::sha256()),
            Err(StorageError::NotFound(_))
        ));
        // Read into memory: the same bytes, hashed, up to the limit.
        let big: Vec<u8> = (0..(3 << 20) + 7).map(|i: u32| (i % 253) as u8).collect();
        std::fs::write(d.path().join("big"), &big).unwrap();
        for limit in [0, 5, 1 << 20, (3 << 20) + 7, (3 << 20) + 8, u64::MAX] {
            let (h, buf) = s.read_through("big", limit, Hashes::both(), None).unwrap();
            let want = &big[..big.len().min(limit as usize)];
            assert!(buf == want, "limit {limit}");
            assert_eq!(
                Digest::from_sha256(h.sha256.unwrap()),
                Digest::of_bytes(want)
            );
            assert_eq!(h.blake3.unwrap().finalize(), blake3::hash(want));
        }
        assert!(matches!(
            s.read_through("nope", 5, Hashes::none(), None),
            Err(StorageError::NotFound(_))
        ));
        let stopped = Arc::new(AtomicBool::new(true));
        let Err(e) = s.read_through("big", u64::MAX, Hashes::none(), Some(stopped)) else {
            panic!("a read went on for a dropped reader")
        };
        assert!(e.to_string().contains("the reader is gone"), "{e}");
        assert!(s.path("../x").is_err());
        s.put("sub/y", Bytes::from_static(b"yy")).unwrap();
        assert_eq!(s.get("sub/y").unwrap().unwrap().as_ref(), b"yy");
        assert_eq!(s.size("sub/y").unwrap(), Some(2));
        assert_eq!(s.get("sub/z").unwrap(), None);
        // Names are raw object keys, refused when they could climb out,
        // locally as on object stores.
        for bad in ["../x", "a/../x", "a//b", "./x", "a\\b"] {
            assert!(s.size(bad).is_err(), "{bad}");
            assert!(
                s.copy_through(bad, 1, Vec::new(), Hashes::sha256())
                    .is_err(),
                "{bad}"
            );
        }
        s.put("date=caf\u{e9} a%3Ab&c#d/y", Bytes::from_static(b"z"))
            .unwrap();
        let listed = s.list("").unwrap();
        let name = "date=caf\u{e9} a%3Ab&c#d/y";
        assert!(listed.files.iter().any(|f| f.rel == name), "{listed:?}");
        assert_eq!(s.size(name).unwrap(), Some(1));
        let u = s.url_of(name);
        let (_, last) = split_last(&u);
        assert_eq!(last, "y");
        assert!(contains(s.url(), &u));
    }
}
