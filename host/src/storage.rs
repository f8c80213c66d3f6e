//! Where bytes live. Every location idem reads or writes (input datasets,
//! Delta inputs, the target table, manifests, modules, the run log) is a URL
//! on one [`object_store`]: a plain path or `file://` (the default),
//! `s3://`, `gs://`, `az://`/`abfs(s)://`. Nothing above this module knows
//! whether a location is local.
//!
//! - S3: endpoint, region and credentials come from the standard `AWS_*`
//!   environment variables (`AWS_ENDPOINT_URL`, `AWS_REGION`,
//!   `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`,
//!   `AWS_ALLOW_HTTP`, `AWS_VIRTUAL_HOSTED_STYLE_REQUEST`...). Writes that
//!   must not overwrite (Delta log entries) are conditional PUTs
//!   (`If-None-Match: *`); [`Store::check_conditional_put`] proves the store
//!   honours them before idem commits there.
//! - GCS and Azure: the `GOOGLE_*` / `AZURE_*` variables object_store reads.
//! - Local directories keep one rule object stores have by construction: a
//!   listing never leaves its root (symlinks are followed only to targets
//!   inside it).

use crate::error::Kind;
use std::collections::{HashMap, HashSet, VecDeque};
use std::fs::File;
use std::future::Future;
use std::io::{Read, Write};
use std::ops::Range;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use object_store::aws::{AmazonS3Builder, S3ConditionalPut};
use object_store::path::Path as ObjPath;
use object_store::{
    BackoffConfig, ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, RetryConfig,
};
use sha2::{Digest as _, Sha256};
use thiserror::Error;
use url::Url;

/// Why a location could not be used. Each names the location.
#[derive(Debug, Error)]
pub enum StorageError {
    /// The text is not a location idem can use.
    #[error("`{location}` is not a usable location: {detail}")]
    BadLocation {
        /// What was given.
        location: String,
        /// What is wrong.
        detail: String,
    },
    /// Nothing at the location.
    #[error("`{0}` does not exist: check the path or URL")]
    NotFound(String),
    /// The store answered, but refused or failed.
    #[error("{what} `{url}`{endpoint}: {detail}")]
    Store {
        /// What idem was doing.
        what: String,
        /// The location.
        url: String,
        /// The endpoint, when not the default one.
        endpoint: String,
        /// The cause and the fix.
        detail: String,
    },
    /// The store cannot make the writes a commit needs safe.
    #[error(
        "refusing to commit to `{url}`{endpoint}: {detail}. Without conditional writes (PUT If-None-Match) two hosts could overwrite each other's Delta log entries; idem never falls back to an unsafe rename. Use a store that supports them (AWS S3, MinIO, Cloudflare R2, GCS, Azure) or a local path"
    )]
    Unsafe {
        /// The table.
        url: String,
        /// The endpoint.
        endpoint: String,
        /// What the probe saw.
        detail: String,
    },
    /// A symlinked directory that leads outside the root being listed.
    #[error(
        "`{path}` is a symlink to {target}, outside the dataset root {root}: idem reads only files inside the root; copy the data in or point --input at its real location"
    )]
    Outside {
        /// The link.
        path: String,
        /// Where it leads.
        target: String,
        /// The root.
        root: String,
    },
    /// Local I/O.
    #[error("{what} `{path}`: {source}")]
    Io {
        /// What idem was doing.
        what: String,
        /// The file.
        path: String,
        /// The error.
        source: std::io::Error,
    },
}

impl StorageError {
    /// The kind of the failure (and the CLI's exit code).
    pub fn kind(&self) -> Kind {
        match self {
            StorageError::BadLocation { .. }
            | StorageError::NotFound(_)
            | StorageError::Outside { .. } => Kind::Input,
            StorageError::Store { .. } | StorageError::Unsafe { .. } | StorageError::Io { .. } => {
                Kind::Storage
            }
        }
    }
}

/// The runtime all object-store I/O runs on (HTTP clients keep their
/// connections on the runtime that made them).
static IO: LazyLock<tokio::runtime::Runtime> = LazyLock::new(|| {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("idem-io")
        .enable_all()
        .build()
        .expect("starting the storage I/O runtime")
});

/// Run `f` on the storage runtime and wait for it, from synchronous code.
pub fn block<F>(f: F) -> F::Output
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    match futures::executor::block_on(IO.spawn(f)) {
        Ok(v) => v,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(e) => panic!("storage task cancelled: {e}"),
    }
}

/// Parse what a user typed: a URL with a scheme idem supports, or a path
/// (made absolute and canonical as far as it exists).
pub fn locate(location: &str) -> Result<Url, StorageError> {
    let bad = |detail: String| StorageError::BadLocation {
        location: location.into(),
        detail,
    };
    if location.is_empty() {
        return Err(bad("it is empty".into()));
    }
    if location.contains("://") {
        let url = Url::parse(location).map_err(|e| bad(e.to_string()))?;
        return match url.scheme() {
            "file" => {
                let p = url
                    .to_file_path()
                    .map_err(|_| bad("not a local file URL".into()))?;
                file_url(location, &canonical_best_effort(&p))
            }
            "s3" | "s3a" | "gs" | "az" | "abfs" | "abfss" | "adl" | "azure" => {
                if url.host_str().unwrap_or("").is_empty() {
                    return Err(bad(format!(
                        "no bucket or container: write {}://BUCKET/path",
                        url.scheme()
                    )));
                }
                Ok(url)
            }
            other => Err(bad(format!(
                "the scheme `{other}` is not supported (use a path, file://, s3://, gs:// or az://)"
            ))),
        };
    }
    file_url(location, &canonical_best_effort(Path::new(location)))
}

fn file_url(location: &str, p: &Path) -> Result<Url, StorageError> {
    Url::from_file_path(p).map_err(|_| StorageError::BadLocation {
        location: location.into(),
        detail: "it does not resolve to an absolute path (is the working directory gone?)".into(),
    })
}

/// The canonical form of `p` as far as it exists, with the rest appended
/// (a table directory is created by its first commit).
pub fn canonical_best_effort(p: &Path) -> PathBuf {
    let mut cur = std::env::current_dir()
        .and_then(std::fs::canonicalize)
        .unwrap_or_default();
    for c in p.components() {
        match c {
            Component::Prefix(_) | Component::RootDir => cur = PathBuf::from(c.as_os_str()),
            Component::CurDir => {}
            Component::ParentDir => {
                cur.pop();
            }
            Component::Normal(n) => {
                let next = cur.join(n);
                cur = std::fs::canonicalize(&next).unwrap_or(next);
            }
        }
    }
    cur
}

/// `url` as a directory (ends with `/`), so relative names join below it.
pub fn as_dir(url: &Url) -> Url {
    let mut u = url.clone();
    if !u.path().ends_with('/') {
        let p = format!("{}/", u.path());
        u.set_path(&p);
    }
    u
}

/// Does the directory `outer` contain `inner` (or equal it)? Both on the
/// same store, compared by path segments.
pub fn contains(outer: &Url, inner: &Url) -> bool {
    if !same_store(outer, inner) {
        return false;
    }
    // Decoded, so `%C3%A9`, `%c3%a9` and `é` are one segment.
    let seg = |u: &Url| -> Vec<String> {
        u.path()
            .split('/')
            .filter(|s| !s.is_empty())
            .map(|s| decode_segment(s).unwrap_or_else(|_| s.to_string()))
            .collect()
    };
    let (o, i) = (seg(outer), seg(inner));
    i.len() >= o.len() && i[..o.len()] == o[..]
}

/// Do two URLs name objects of one store (scheme, bucket or container,
/// account, port)? `s3a` is `s3`.
pub fn same_store(a: &Url, b: &Url) -> bool {
    let scheme = |u: &Url| match u.scheme() {
        "s3a" => "s3".to_string(),
        s => s.to_string(),
    };
    (scheme(a), a.host_str(), a.port(), a.username())
        == (scheme(b), b.host_str(), b.port(), b.username())
}

/// Percent-decode one URL path segment into the object name it stands for.
pub fn decode_segment(s: &str) -> Result<String, StorageError> {
    percent_encoding::percent_decode_str(s)
        .decode_utf8()
        .map(|c| c.into_owned())
        .map_err(|_| StorageError::BadLocation {
            location: s.into(),
            detail: "not UTF-8 once percent-decoded".into(),
        })
}

/// The object-store configuration in effect for `url`, from the
/// environment: the endpoint (for messages).
pub fn endpoint_of(url: &Url) -> String {
    match url.scheme() {
        "s3" | "s3a" => std::env::var("AWS_ENDPOINT_URL")
            .or_else(|_| std::env::var("AWS_ENDPOINT"))
            .map(|e| format!(" at {e}"))
            .unwrap_or_default(),
        _ => String::new(),
    }
}

/// Retries for transient failures: bounded, so an unreachable endpoint
/// fails in seconds rather than minutes.
fn retry() -> RetryConfig {
    RetryConfig {
        backoff: BackoffConfig::default(),
        max_retries: 4,
        retry_timeout: Duration::from_secs(20),
    }
}

/// The store holding `url` and the path of `url` inside it. Every call
/// builds a new client (cheap next to the requests it makes).
pub fn object_store_for(url: &Url) -> Result<(Arc<dyn ObjectStore>, ObjPath), StorageError> {
    let bad = |detail: String| StorageError::BadLocation {
        location: url.to_string(),
        detail,
    };
    let path = ObjPath::from_url_path(url.path()).map_err(|e| bad(e.to_string()))?;
    let store: Arc<dyn ObjectStore> = match url.scheme() {
        "file" => Arc::new(object_store::local::LocalFileSystem::new()),
        "s3" | "s3a" => {
            let mut u = url.clone();
            let _ = u.set_scheme("s3");
            Arc::new(
                AmazonS3Builder::from_env()
                    .with_url(u.as_str())
                    .with_conditional_put(S3ConditionalPut::ETagMatch)
                    .with_retry(retry())
                    .build()
                    .map_err(|e| bad(e.to_string()))?,
            )
        }
        "gs" => Arc::new(
            object_store::gcp::GoogleCloudStorageBuilder::from_env()
                .with_url(url.as_str())
                .with_retry(retry())
                .build()
                .map_err(|e| bad(e.to_string()))?,
        ),
        "az" | "abfs" | "abfss" | "adl" | "azure" => Arc::new(
            object_store::azure::MicrosoftAzureBuilder::from_env()
                .with_url(url.as_str())
                .with_retry(retry())
                .build()
                .map_err(|e| bad(e.to_string()))?,
        ),
        other => return Err(bad(format!("the scheme `{other}` is not supported"))),
    };
    Ok((store, path))
}

/// A directory on some store: objects are named relative to it.
#[derive(Clone, Debug)]
pub struct Store {
    url: Url,
    inner: Arc<dyn ObjectStore>,
    prefix: ObjPath,
}

/// One object found by [`Store::list`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// Name relative to the store's directory, `/`-separated.
    pub rel: String,
    /// Size in bytes.
    pub size: u64,
}

/// What [`Store::list`] found below a directory.
#[derive(Debug, Default)]
pub struct Listing {
    /// Regular objects, sorted by name.
    pub files: Vec<Listed>,
    /// Entries not listed, each with why. Hidden and `_` entries (writer
    /// bookkeeping: `_SUCCESS`, `.crc`) are left out silently.
    pub skipped: Vec<(String, String)>,
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
    fn path(&self, rel: &str) -> Result<ObjPath, StorageError> {
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
    fn local_file(&self, root: &Path, rel: &str) -> Result<PathBuf, StorageError> {
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

    fn fail(&self, what: &str, rel: &str, e: object_store::Error) -> StorageError {
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

    /// Every object below `rel_dir`, sorted. Locally, symlinks are followed
    /// only to targets inside the store's directory, each file once.
    pub fn list(&self, rel_dir: &str) -> Result<Listing, StorageError> {
        if let Some(root) = self.local_dir() {
            if !rel_dir.is_empty() {
                self.path(rel_dir)?;
            }
            let dir = root.join(rel_dir);
            let mut walk = Walk::default();
            let canon = |p: &Path, url: Url| {
                std::fs::canonicalize(p).map_err(|e| match e.kind() {
                    std::io::ErrorKind::NotFound => StorageError::NotFound(url.to_string()),
                    _ => StorageError::Io {
                        what: "listing".into(),
                        path: p.display().to_string(),
                        source: e,
                    },
                })
            };
            let root = canon(&root, self.url.clone())?;
            let real = canon(&dir, self.url_of(rel_dir))?;
            if !real.starts_with(&root) {
                return Err(StorageError::Outside {
                    path: dir.display().to_string(),
                    target: real.display().to_string(),
                    root: root.display().to_string(),
                });
            }
            let io = |e| StorageError::Io {
                what: "listing".into(),
                path: dir.display().to_string(),
                source: e,
            };
            walk.dirs.insert(real);
            walk.list(&root, &root.join(rel_dir)).map_err(io)?;
            walk.files.sort_by(|a, b| a.rel.cmp(&b.rel));
            return Ok(Listing {
                files: walk.files,
                skipped: walk.skipped,
            });
        }
        let prefix = self.path(rel_dir)?;
        let inner = self.inner.clone();
        let p = prefix.clone();
        let metas: Vec<object_store::ObjectMeta> =
            block(async move { inner.list(Some(&p)).try_collect().await })
                .map_err(|e| self.fail_list("listing", rel_dir, e))?;
        let mut out = Listing::default();
        for m in metas {
            let Some(rest) = m.location.prefix_match(&prefix) else {
                continue;
            };
            let parts: Vec<String> = rest.map(|p| p.as_ref().to_string()).collect();
            if parts
                .iter()
                .any(|s| s.starts_with('.') || s.starts_with('_'))
            {
                continue;
            }
            let rel = if rel_dir.is_empty() {
                parts.join("/")
            } else {
                format!("{}/{}", rel_dir.trim_end_matches('/'), parts.join("/"))
            };
            out.files.push(Listed { rel, size: m.size });
        }
        out.files.sort_by(|a, b| a.rel.cmp(&b.rel));
        Ok(out)
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
    fn fail_list(&self, what: &str, rel: &str, e: object_store::Error) -> StorageError {
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
    fn absent<T>(&self) -> Result<Option<T>, StorageError> {
        self.check_reachable()?;
        Ok(None)
    }

    /// Is there at least one object below `rel_dir`? Only "not found" or
    /// an empty listing mean no; other failures are errors.
    pub fn any_below(&self, rel_dir: &str) -> Result<bool, StorageError> {
        if let Some(root) = self.local_dir() {
            self.path(rel_dir)?;
            return match std::fs::read_dir(root.join(rel_dir)) {
                Ok(mut d) => Ok(d.next().is_some()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
                Err(e) => Err(StorageError::Io {
                    what: "listing".into(),
                    path: root.join(rel_dir).display().to_string(),
                    source: e,
                }),
            };
        }
        let p = self.path(rel_dir)?;
        let inner = self.inner.clone();
        match block(async move { inner.list(Some(&p)).next().await.transpose() }) {
            Ok(first) => Ok(first.is_some()),
            Err(e) => Err(self.fail_list("listing", rel_dir, e)),
        }
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

    /// The whole of `rel`, `None` when it does not exist; refused, before
    /// it is read, past [`MAX_READ_WHOLE`] (a tenant's manifest, say, is
    /// kilobytes; a planted one could be gigabytes).
    pub fn get(&self, rel: &str) -> Result<Option<Bytes>, StorageError> {
        self.get_at_most(rel, MAX_READ_WHOLE)
    }

    /// [`Store::get`] with a tighter bound (a manifest a service shows).
    pub fn get_at_most(&self, rel: &str, most: u64) -> Result<Option<Bytes>, StorageError> {
        let p = self.path(rel)?;
        let inner = self.inner.clone();
        let got = block(async move {
            let r = inner.get(&p).await?;
            Ok::<_, object_store::Error>(whole_at_most(r, most).await)
        });
        match got {
            Ok(Ok(b)) => Ok(Some(b)),
            Ok(Err(detail)) => Err(StorageError::BadLocation {
                location: self.url_of(rel).to_string(),
                detail,
            }),
            Err(object_store::Error::NotFound { .. }) => self.absent(),
            Err(e) => Err(self.fail("reading", rel, e)),
        }
    }

    /// Write `bytes` to `rel` (atomic: whole or not at all).
    pub fn put(&self, rel: &str, bytes: Bytes) -> Result<(), StorageError> {
        let p = self.path(rel)?;
        let inner = self.inner.clone();
        block(async move { inner.put(&p, PutPayload::from(bytes)).await })
            .map(|_| ())
            .map_err(|e| self.fail("writing", rel, e))
    }

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
        let r = block(async move {
            let mut stream = inner.get(&p).await?.into_stream();
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
            Ok::<_, object_store::Error>((h, n, to))
        });
        r.map_err(|e| self.fail("reading", rel, e))
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

    /// Prove that the store refuses to overwrite with a conditional PUT
    /// (what keeps two hosts from overwriting each other's Delta log
    /// entries): create a probe object twice under `_idem/probe/`; the
    /// second must be refused. Local directories always can.
    pub fn check_conditional_put(&self) -> Result<(), StorageError> {
        if self.local_dir().is_some() {
            return Ok(());
        }
        let mut nonce = [0u8; 16];
        getrandom::fill(&mut nonce).map_err(|e| StorageError::BadLocation {
            location: self.url.to_string(),
            detail: format!("no randomness for the probe: {e}"),
        })?;
        let rel = format!("_idem/probe/{}", hex::encode(nonce));
        let p = self.path(&rel)?;
        let inner = self.inner.clone();
        let unsafe_ = |detail: String| StorageError::Unsafe {
            url: self.url.to_string(),
            endpoint: endpoint_of(&self.url),
            detail,
        };
        let r = block(async move {
            let create = || PutOptions {
                mode: PutMode::Create,
                ..Default::default()
            };
            let first = inner
                .put_opts(&p, PutPayload::from_static(b"1"), create())
                .await;
            let second = match &first {
                Ok(_) => Some(
                    inner
                        .put_opts(&p, PutPayload::from_static(b"2"), create())
                        .await,
                ),
                Err(_) => None,
            };
            let _ = inner.delete(&p).await;
            (first, second)
        });
        match r {
            (Err(object_store::Error::NotImplemented { .. }), _) => Err(unsafe_(
                "the store does not implement conditional writes".into(),
            )),
            (Err(e), _) => Err(self.fail("writing", &rel, e)),
            (Ok(_), Some(Err(object_store::Error::AlreadyExists { .. })))
            | (Ok(_), Some(Err(object_store::Error::Precondition { .. }))) => Ok(()),
            (Ok(_), Some(Ok(_))) => Err(unsafe_(
                "it accepted a second PUT If-None-Match: * of the same object (it ignores the condition)".into(),
            )),
            (Ok(_), Some(Err(e))) => Err(self.fail("writing", &rel, e)),
            (Ok(_), None) => unreachable!("a second put follows a first that succeeded"),
        }
    }
}

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

/// A local I/O error while `what`ing `path`.
fn io_error(what: &str, path: &Path) -> impl Fn(std::io::Error) -> StorageError {
    let (what, path) = (what.to_string(), path.display().to_string());
    move |source| StorageError::Io {
        what: what.clone(),
        path: path.clone(),
        source,
    }
}

/// An object-store failure in words a user can act on, from the error's
/// kind and its source chain (not from the text of the URL).
pub fn explain(url: &Url, e: &object_store::Error) -> String {
    let mut chain = String::new();
    let mut cur: Option<&dyn std::error::Error> = Some(e);
    while let Some(c) = cur {
        chain.push_str(&c.to_string());
        chain.push('\n');
        cur = c.source();
    }
    let has = |needles: &[&str]| needles.iter().any(|n| chain.contains(n));
    let hint = if has(&["<Code>NoSuchBucket</Code>"]) {
        format!(
            "the bucket `{}` does not exist: create it or fix the URL",
            url.host_str().unwrap_or("")
        )
    } else if matches!(
        e,
        object_store::Error::Unauthenticated { .. } | object_store::Error::PermissionDenied { .. }
    ) || has(&[
        "<Code>InvalidAccessKeyId</Code>",
        "<Code>SignatureDoesNotMatch</Code>",
        "<Code>AccessDenied</Code>",
    ]) {
        "access was refused: check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (or the GOOGLE_/AZURE_ credentials) and the bucket's policy".into()
    } else if has(&[
        "Connection refused",
        "tcp connect error",
        "dns error",
        "failed to lookup address",
        "error trying to connect",
        "operation timed out",
        "connection reset",
    ]) {
        "the endpoint cannot be reached: check AWS_ENDPOINT_URL (and AWS_ALLOW_HTTP=true for http://)".into()
    } else {
        return e.to_string();
    };
    format!("{hint} ({e})")
}

/// Read a whole file named by a location (a module, a manifest).
pub fn read_location(location: &str) -> Result<Bytes, StorageError> {
    let (store, name, _) = Store::of_file(location)?;
    store
        .get(&name)?
        .ok_or_else(|| StorageError::NotFound(location.to_string()))
}

/// A file's URL as (its directory, its name).
pub fn split_last(url: &Url) -> (Url, String) {
    let name = url
        .path_segments()
        .and_then(|mut s| s.next_back())
        .unwrap_or("")
        .to_string();
    let dir = url.join("./").unwrap_or_else(|_| url.clone());
    let name = decode_segment(&name).unwrap_or(name);
    (dir, name)
}

/// A local directory walk that never leaves its root.
#[derive(Default)]
struct Walk {
    files: Vec<Listed>,
    skipped: Vec<(String, String)>,
    /// Canonical directories already walked (symlink loops).
    dirs: HashSet<PathBuf>,
    /// Canonical file -> the name it was first listed under.
    seen: HashMap<PathBuf, String>,
    /// Symlinks met, followed only after every real entry was listed, so a
    /// real file always wins over a link to it.
    links: VecDeque<(PathBuf, String)>,
}

impl Walk {
    /// List `dir` (below the canonical `root`, already in `dirs`): its real
    /// tree first, then the symlinks whose targets stay inside `root`.
    fn list(&mut self, root: &Path, dir: &Path) -> std::io::Result<()> {
        self.walk(root, dir)?;
        while let Some((p, rel)) = self.links.pop_front() {
            let Ok(real) = std::fs::canonicalize(&p) else {
                self.skip(rel, "broken symlink");
                continue;
            };
            if !real.starts_with(root) {
                self.skip(rel, "symlink leaves the dataset root");
            } else if std::fs::metadata(&real)?.is_dir() {
                if self.dirs.insert(real) {
                    self.walk(root, &p)?;
                } else {
                    self.skip(rel, "symlink to a directory already read");
                }
            } else {
                self.file(rel, real)?;
            }
        }
        Ok(())
    }

    /// The real entries of `dir`, recursively, in name order; symlinks are
    /// queued.
    fn walk(&mut self, root: &Path, dir: &Path) -> std::io::Result<()> {
        let mut entries = std::fs::read_dir(dir)?.collect::<Result<Vec<_>, _>>()?;
        entries.sort_by_key(|e| e.file_name());
        for entry in entries {
            let name = entry.file_name();
            if name.as_encoded_bytes().starts_with(b".")
                || name.as_encoded_bytes().starts_with(b"_")
            {
                continue;
            }
            let p = entry.path();
            let Some(rel) = p
                .strip_prefix(root)
                .unwrap_or(&p)
                .to_str()
                .map(String::from)
            else {
                self.skip(p.to_string_lossy().into_owned(), "the name is not UTF-8");
                continue;
            };
            if name.as_encoded_bytes().contains(&b'\\') {
                self.skip(rel, "a backslash in the name");
                continue;
            }
            let ty = entry.file_type()?;
            if ty.is_symlink() {
                self.links.push_back((p, rel));
            } else if ty.is_dir() {
                if self.dirs.insert(std::fs::canonicalize(&p)?) {
                    self.walk(root, &p)?;
                }
            } else if ty.is_file() {
                let real = std::fs::canonicalize(&p)?;
                self.file(rel, real)?;
            } else {
                self.skip(rel, "not a regular file");
            }
        }
        Ok(())
    }

    /// A regular file (canonically `real`): listed unless listed already.
    fn file(&mut self, rel: String, real: PathBuf) -> std::io::Result<()> {
        let meta = std::fs::metadata(&real)?;
        if !meta.is_file() {
            self.skip(rel, "not a regular file");
        } else if let Some(first) = self.seen.get(&real) {
            let why = format!("same file as {first}");
            self.skip(rel, &why);
        } else {
            self.seen.insert(real, rel.clone());
            self.files.push(Listed {
                rel,
                size: meta.len(),
            });
        }
        Ok(())
    }

    fn skip(&mut self, rel: String, why: &str) {
        self.skipped.push((rel, why.to_string()));
    }
}

/// Most bytes idem reads whole from one object it needs whole: an
/// `_idem/` file, a Delta log entry, a manifest.
/// Anyone who can write the table can put a file of any size there; a
/// manifest, a run index or a commit is kilobytes, a module at most
/// `--max-module-mb`.
pub const MAX_READ_WHOLE: u64 = 256 << 20;

/// The bytes of `r`, refused when the object is larger than
/// [`MAX_READ_WHOLE`], before anything is read (the error says why).
pub async fn whole(r: object_store::GetResult) -> Result<bytes::Bytes, String> {
    whole_at_most(r, MAX_READ_WHOLE).await
}

/// [`whole`] with another bound.
pub async fn whole_at_most(r: object_store::GetResult, most: u64) -> Result<bytes::Bytes, String> {
    if r.meta.size > most {
        return Err(format!(
            "{} bytes, more than the {} MiB idem reads of such a file: it was not written by idem (remove it)",
            r.meta.size,
            most >> 20
        ));
    }
    r.bytes().await.map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::digest::Digest;

    #[test]
    fn locations_parse_to_urls() {
        let d = tempfile::tempdir().unwrap();
        let u = locate(d.path().to_str().unwrap()).unwrap();
        assert_eq!(u.scheme(), "file");
        assert_eq!(
            locate("s3://bucket/a/b").unwrap().as_str(),
            "s3://bucket/a/b"
        );
        assert!(locate("ftp://x/y").is_err());
        assert!(locate("s3:///nobucket").is_err());
        assert!(locate("").is_err());
    }

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
    fn containment_is_by_whole_segments() {
        let u = |s: &str| Url::parse(s).unwrap();
        assert!(contains(&u("s3://b/data/"), &u("s3://b/data/t/")));
        assert!(!contains(&u("s3://b/data/"), &u("s3://b/database/")));
        assert!(!contains(&u("s3://b/data/"), &u("s3://c/data/")));
        assert!(!contains(&u("s3://b/data/"), &u("file:///data/")));
        assert!(contains(&u("s3://b/caf%C3%A9/"), &u("s3://b/caf%c3%a9/x")));
        assert!(contains(&u("s3://b/A/"), &u("s3a://b/%41/x")));
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
