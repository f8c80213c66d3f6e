//! A directory on some store ([`Store`]): objects named relative to it,
//! checked so a name never climbs out (locally too), and the small reads
//! and writes: size, a byte range, a whole write.

use std::fs::File;
use std::io::Read;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use object_store::path::Path as ObjPath;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use url::Url;

use super::client::{endpoint_of, object_store_for};
use super::error::{StorageError, explain, io_error};
use super::location::{as_dir, locate, split_last};
use super::runtime::block;

/// A directory on some store: objects are named relative to it.
#[derive(Clone, Debug)]
pub struct Store {
    pub(super) url: Url,
    pub(super) inner: Arc<dyn ObjectStore>,
    pub(super) prefix: ObjPath,
}

impl Store {
    /// The directory at `url`.
    pub fn open(url: &Url) -> Result<Self, StorageError> {
        let url = as_dir(url);
        let (inner, prefix) = object_store_for(&url)?;
        Ok(Store { url, inner, prefix })
    }

    /// Parse a location (see [`locate`]) and open it as a directory.
    pub fn at(location: &str) -> Result<Self, StorageError> {
        Self::open(&locate(location)?)
    }

    /// The directory holding the file `location` names, the file's name in
    /// it, and the file's URL.
    pub fn of_file(location: &str) -> Result<(Self, String, Url), StorageError> {
        let url = locate(location)?;
        let (dir, name) = split_last(&url);
        Ok((Self::open(&dir)?, name, url))
    }

    /// The directory's URL (ends with `/`).
    pub fn url(&self) -> &Url {
        &self.url
    }

    /// The local directory, when the store is the local filesystem.
    pub fn local_dir(&self) -> Option<PathBuf> {
        (self.url.scheme() == "file")
            .then(|| self.url.to_file_path().ok())
            .flatten()
    }

    /// The URL of the object named `rel` below the directory (each
    /// segment percent-encoded: `rel_of` gives `rel` back).
    pub fn url_of(&self, rel: &str) -> Url {
        let mut u = self.url.clone();
        if let Ok(mut segs) = u.path_segments_mut() {
            segs.pop_if_empty();
            segs.extend(rel.split('/').filter(|s| !s.is_empty()));
        }
        u
    }

    /// The object `rel` names: the raw key `<prefix>/<rel>`, exactly as a
    /// listing returns it (no escaping), so names written by any tool
    /// (`date=café`, Spark's `ts=00%3A00`) are read back. `.`/`..`,
    /// empty segments and control characters are refused, locally too.
    pub(super) fn path(&self, rel: &str) -> Result<ObjPath, StorageError> {
        let bad = |detail: &str| StorageError::BadLocation {
            location: rel.into(),
            detail: detail.into(),
        };
        if rel.contains('\\') {
            return Err(bad("a backslash in an object name"));
        }
        if rel.is_empty() {
            return Ok(self.prefix.clone());
        }
        let mut full = self.prefix.as_ref().to_string();
        for seg in rel.split('/') {
            if seg.is_empty() || seg == "." || seg == ".." {
                return Err(bad("an empty, `.` or `..` segment in a relative name"));
            }
            if !full.is_empty() {
                full.push('/');
            }
            full.push_str(seg);
        }
        ObjPath::parse(&full).map_err(|e| bad(&e.to_string()))
    }

    /// The local file of `rel`: checked like any object name, and, when it
    /// exists, a regular file whose real path stays inside the root (no
    /// device, FIFO or directory; no symlink out), as on an object store.
    pub(super) fn local_file(&self, root: &Path, rel: &str) -> Result<PathBuf, StorageError> {
        self.path(rel)?;
        let path = root.join(rel);
        let bad = |detail: String| StorageError::BadLocation {
            location: path.display().to_string(),
            detail,
        };
        match std::fs::canonicalize(&path) {
            Err(_) => {} // absent: the caller says so
            Ok(real) => {
                let base = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
                if !real.starts_with(&base) {
                    return Err(bad(format!(
                        "it leads to {}, outside {}: idem reads only inside the root",
                        real.display(),
                        base.display()
                    )));
                }
                if !std::fs::metadata(&real).is_ok_and(|m| m.is_file()) {
                    return Err(bad("not a regular file".into()));
                }
            }
        }
        Ok(path)
    }

    pub(super) fn fail(&self, what: &str, rel: &str, e: object_store::Error) -> StorageError {
        let url = self.url_of(rel).to_string();
        if let object_store::Error::NotFound { .. } = e {
            // On an object store, "not found" may mean the bucket.
            if self.local_dir().is_none()
                && let Err(bucket) = self.check_reachable()
            {
                return bucket;
            }
            return StorageError::NotFound(url);
        }
        self.store_error(what, rel, &e)
    }

    /// Fail early, naming the cause, when the store cannot be reached: a
    /// missing bucket, refused credentials, a wrong endpoint. Local
    /// directories are created by their first write.
    pub fn check_reachable(&self) -> Result<(), StorageError> {
        if self.local_dir().is_some() {
            return Ok(());
        }
        let inner = self.inner.clone();
        let p = self.prefix.clone();
        block(async move { inner.list_with_delimiter(Some(&p)).await.map(|_| ()) }).map_err(|e| {
            if let object_store::Error::NotFound { .. } = e {
                self.fail_list("reaching", "", e)
            } else {
                self.store_error("reaching", "", &e)
            }
        })
    }

    fn store_error(&self, what: &str, rel: &str, e: &object_store::Error) -> StorageError {
        StorageError::Store {
            what: what.into(),
            endpoint: endpoint_of(&self.url),
            detail: explain(&self.url, e),
            url: self.url_of(rel).to_string(),
        }
    }

    /// A failed listing: on a bucket, "not found" means the bucket.
    pub(super) fn fail_list(&self, what: &str, rel: &str, e: object_store::Error) -> StorageError {
        if let object_store::Error::NotFound { .. } = e {
            return StorageError::Store {
                what: what.into(),
                url: self.url_of(rel).to_string(),
                endpoint: endpoint_of(&self.url),
                detail: format!(
                    "the bucket `{}` does not exist: create it or fix the URL ({e})",
                    self.url.host_str().unwrap_or("")
                ),
            };
        }
        self.store_error(what, rel, &e)
    }

    /// An object is absent: `None`, unless its bucket is (then say so).
    pub(super) fn absent<T>(&self) -> Result<Option<T>, StorageError> {
        self.check_reachable()?;
        Ok(None)
    }

    /// The size of `rel`, `None` when it does not exist.
    pub fn size(&self, rel: &str) -> Result<Option<u64>, StorageError> {
        if let Some(root) = self.local_dir() {
            let path = self.local_file(&root, rel)?;
            return match std::fs::metadata(&path) {
                Ok(m) => Ok(Some(m.len())),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(StorageError::Io {
                    what: "reading".into(),
                    path: path.display().to_string(),
                    source: e,
                }),
            };
        }
        let p = self.path(rel)?;
        let inner = self.inner.clone();
        match block(async move { inner.head(&p).await }) {
            Ok(m) => Ok(Some(m.size)),
            Err(object_store::Error::NotFound { .. }) => self.absent(),
            Err(e) => Err(self.fail("reading", rel, e)),
        }
    }

    /// Bytes `range` of `rel`.
    pub fn read_range(&self, rel: &str, range: Range<u64>) -> Result<Bytes, StorageError> {
        if let Some(root) = self.local_dir() {
            use std::io::{Seek, SeekFrom};
            let path = self.local_file(&root, rel)?;
            let io = io_error("reading", &path);
            let mut f = File::open(&path).map_err(&io)?;
            f.seek(SeekFrom::Start(range.start)).map_err(&io)?;
            let mut buf = vec![0u8; (range.end - range.start) as usize];
            f.read_exact(&mut buf).map_err(&io)?;
            return Ok(Bytes::from(buf));
        }
        let p = self.path(rel)?;
        let inner = self.inner.clone();
        block(async move { inner.get_range(&p, range).await })
            .map_err(|e| self.fail("reading", rel, e))
    }

    /// Write `bytes` to `rel` (atomic: whole or not at all).
    pub fn put(&self, rel: &str, bytes: Bytes) -> Result<(), StorageError> {
        let p = self.path(rel)?;
        let inner = self.inner.clone();
        block(async move { inner.put(&p, PutPayload::from(bytes)).await })
            .map(|_| ())
            .map_err(|e| self.fail("writing", rel, e))
    }
}
