//! Many objects at once. An object store answers each request a round
//! trip later, so a slice of many objects is sized, sniffed and hashed
//! with up to [`concurrency`] requests in flight (a bound: a slice of
//! 100,000 objects opens no more connections than one of 100); a local
//! slice is hashed on a thread a core. Results come back in the order
//! asked, whatever order the requests finish in, so what is pinned does
//! not depend on timing.

use std::future::Future;
use std::io::Write;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use bytes::Bytes;
use futures::StreamExt;
use object_store::ObjectStoreExt;
use url::Url;

use super::copy::{Hashes, stream_through};
use super::error::StorageError;
use super::location::split_last;
use super::runtime::block;
use super::store::Store;

/// Requests in flight to an object store for one slice, unless
/// `IDEM_STORAGE_CONCURRENCY` says otherwise.
pub const DEFAULT_CONCURRENCY: usize = 32;

/// The most `IDEM_STORAGE_CONCURRENCY` may ask for.
pub const MAX_CONCURRENCY: usize = 256;

/// How many requests idem keeps in flight to an object store when it
/// reads many objects (pinning a slice: LIST, HEADs, GETs):
/// `IDEM_STORAGE_CONCURRENCY` (1 to 256), else [`DEFAULT_CONCURRENCY`].
/// A slice of n objects then costs about n / this round trips, not n.
pub fn concurrency() -> Result<usize, StorageError> {
    concurrency_from(std::env::var("IDEM_STORAGE_CONCURRENCY").ok())
}

/// [`concurrency`] from the variable's value, if set.
fn concurrency_from(v: Option<String>) -> Result<usize, StorageError> {
    let Some(v) = v else {
        return Ok(DEFAULT_CONCURRENCY);
    };
    match v.trim().parse::<usize>() {
        Ok(n) if (1..=MAX_CONCURRENCY).contains(&n) => Ok(n),
        _ => Err(StorageError::Setting(format!(
            "IDEM_STORAGE_CONCURRENCY={v:?} is not a request count: give 1 to {MAX_CONCURRENCY} (default {DEFAULT_CONCURRENCY})"
        ))),
    }
}

/// `f` of each of `items` on the storage runtime, at most [`concurrency`]
/// at once, the results in the order of `items` (a large object does not
/// hold back the small ones behind it: the next request starts as soon as
/// any finishes). The first failure ends it (requests under way are
/// dropped) and comes back with its item's index, for the caller to name.
async fn in_order<T, R, F, Fut>(
    items: Vec<T>,
    limit: usize,
    f: F,
) -> Result<Vec<R>, (usize, object_store::Error)>
where
    F: Fn(T) -> Fut,
    Fut: Future<Output = Result<R, object_store::Error>>,
{
    let mut out: Vec<Option<R>> = std::iter::repeat_with(|| None).take(items.len()).collect();
    let mut done = futures::stream::iter(items.into_iter().enumerate())
        .map(|(i, t)| {
            let fut = f(t);
            async move { (i, fut.await) }
        })
        .buffer_unordered(limit.max(1));
    while let Some((i, r)) = done.next().await {
        out[i] = Some(r.map_err(|e| (i, e))?);
    }
    // The stream ran to its end, so every item has its result.
    Ok(out.into_iter().flatten().collect())
}

impl Store {
    /// The sizes of `rels` (`None`: absent), in order; on an object store
    /// HEADs at most [`concurrency`] at once.
    pub fn sizes(&self, rels: &[String]) -> Result<Vec<Option<u64>>, StorageError> {
        if self.local_dir().is_some() {
            return rels.iter().map(|r| self.size(r)).collect();
        }
        let paths = rels
            .iter()
            .map(|r| self.path(r))
            .collect::<Result<Vec<_>, _>>()?;
        let inner = self.inner.clone();
        let limit = concurrency()?;
        let sizes = block(in_order(paths, limit, move |p| {
            let inner = inner.clone();
            async move {
                match inner.head(&p).await {
                    Ok(m) => Ok(Some(m.size)),
                    Err(object_store::Error::NotFound { .. }) => Ok(None),
                    Err(e) => Err(e),
                }
            }
        }))
        .map_err(|(i, e)| self.fail("reading", &rels[i], e))?;
        if sizes.iter().any(Option::is_none) {
            // "Not found" may mean the bucket: say so.
            self.check_reachable()?;
        }
        Ok(sizes)
    }

    /// Byte `ranges` of objects, in order; on an object store ranged GETs
    /// at most [`concurrency`] at once.
    pub fn read_ranges(&self, ranges: &[(String, Range<u64>)]) -> Result<Vec<Bytes>, StorageError> {
        if self.local_dir().is_some() {
            return ranges
                .iter()
                .map(|(r, range)| self.read_range(r, range.clone()))
                .collect();
        }
        let asks = ranges
            .iter()
            .map(|(r, range)| Ok((self.path(r)?, range.clone())))
            .collect::<Result<Vec<_>, StorageError>>()?;
        let inner = self.inner.clone();
        let limit = concurrency()?;
        block(in_order(asks, limit, move |(p, range)| {
            let inner = inner.clone();
            async move { inner.get_range(&p, range).await }
        }))
        .map_err(|(i, e)| self.fail("reading", &ranges[i].0, e))
    }

    /// Read each of `rels` once, whole (at most `limit` bytes), into a
    /// writer `to` makes for it, through the hashes `hashes` makes: each
    /// one's hashes and length, in order. On an object store, GETs at most
    /// [`concurrency`] at once (the hashing spread over the storage
    /// runtime's threads, a core each); locally, a thread a core, each
    /// reading whole files. The first failure stops the others taking
    /// new objects.
    pub fn hash_each<W, M, H>(
        &self,
        rels: &[String],
        limit: u64,
        to: M,
        hashes: H,
    ) -> Result<Vec<(Hashes, u64)>, StorageError>
    where
        W: Write + Send + 'static,
        M: Fn() -> W + Send + Sync + 'static,
        H: Fn() -> Hashes + Send + Sync + 'static,
    {
        if self.local_dir().is_some() {
            return self.hash_each_local(rels, limit, &to, &hashes);
        }
        let paths = rels
            .iter()
            .map(|r| self.path(r))
            .collect::<Result<Vec<_>, _>>()?;
        let inner = self.inner.clone();
        let limit_n = concurrency()?;
        let (to, hashes) = (Arc::new(to), Arc::new(hashes));
        block(in_order(paths, limit_n, move |p| {
            let (inner, to, hashes) = (inner.clone(), to.clone(), hashes.clone());
            async move {
                let (h, n, _) = stream_through(&*inner, &p, limit, to(), hashes()).await?;
                Ok((h, n))
            }
        }))
        .map_err(|(i, e)| self.fail("reading", &rels[i], e))
    }

    /// [`Store::hash_each`] of local files: a thread a core (at most one a
    /// file), each taking the next file in turn.
    fn hash_each_local<W: Write + Send + 'static>(
        &self,
        rels: &[String],
        limit: u64,
        to: &(impl Fn() -> W + Sync),
        hashes: &(impl Fn() -> Hashes + Sync),
    ) -> Result<Vec<(Hashes, u64)>, StorageError> {
        let one = |rel: &String| {
            self.copy_through(rel, limit, to(), hashes())
                .map(|(h, n, _)| (h, n))
        };
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(rels.len());
        if threads <= 1 {
            return rels.iter().map(one).collect();
        }
        let next = AtomicUsize::new(0);
        let failed = AtomicBool::new(false);
        let done: Vec<std::sync::Mutex<Option<_>>> =
            rels.iter().map(|_| std::sync::Mutex::new(None)).collect();
        std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(|| {
                    while !failed.load(Ordering::Relaxed) {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(rel) = rels.get(i) else { break };
                        let r = one(rel);
                        failed.fetch_or(r.is_err(), Ordering::Relaxed);
                        *done[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
                    }
                });
            }
        });
        // Files are taken in order and a file taken is finished, so every
        // file before the first failure has its result; a thread that
        // panicked re-raised its panic when the scope ended.
        let mut out = Vec::with_capacity(rels.len());
        for (m, rel) in done.into_iter().zip(rels) {
            match m.into_inner().unwrap_or_else(|e| e.into_inner()) {
                Some(r) => out.push(r?),
                None => {
                    return Err(StorageError::Io {
                        what: "hashing".into(),
                        path: rel.clone(),
                        source: std::io::Error::other("it was never hashed"),
                    });
                }
            }
        }
        Ok(out)
    }
}

/// The sizes of the objects `urls` name (`None`: absent, or a directory
/// URL), in order, wherever they are; each directory's store opened once,
/// the HEADs to object stores at most [`concurrency`] at once.
pub fn sizes_of(urls: &[Url]) -> Result<Vec<Option<u64>>, StorageError> {
    let mut stores: std::collections::BTreeMap<Url, Store> = Default::default();
    let mut asks = Vec::with_capacity(urls.len());
    for url in urls {
        let (dir, name) = split_last(url);
        let store = match stores.get(&dir) {
            Some(s) => s.clone(),
            None => {
                let s = Store::open(&dir)?;
                stores.insert(dir, s.clone());
                s
            }
        };
        asks.push((store, name));
    }
    // Local files answer at once (and are checked inside their root);
    // HEADs to object stores go out together.
    let mut sizes = vec![None; asks.len()];
    let mut remote = Vec::new();
    for (i, (s, name)) in asks.iter().enumerate() {
        if name.is_empty() {
            continue;
        }
        if s.local_dir().is_some() {
            sizes[i] = s.size(name)?;
        } else {
            remote.push((i, s.inner.clone(), s.path(name)?));
        }
    }
    let at: Vec<usize> = remote.iter().map(|(i, _, _)| *i).collect();
    let limit = concurrency()?;
    let heads = block(in_order(remote, limit, |(_, inner, p)| async move {
        match inner.head(&p).await {
            Ok(m) => Ok(Some(m.size)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }))
    .map_err(|(k, e)| asks[at[k]].0.fail("reading", &asks[at[k]].1, e))?;
    for (i, size) in at.into_iter().zip(heads) {
        sizes[i] = size;
    }
    let absent = asks
        .iter()
        .zip(&sizes)
        .find(|((s, _), z)| z.is_none() && s.local_dir().is_none());
    if let Some(((s, _), _)) = absent {
        // "Not found" may mean the bucket: say so.
        s.check_reachable()?;
    }
    Ok(sizes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::digest::Digest;
    use crate::storage::locate;

    #[test]
    fn the_concurrency_knob_is_a_bounded_count() {
        assert_eq!(concurrency_from(None).unwrap(), DEFAULT_CONCURRENCY);
        assert_eq!(concurrency_from(Some(" 4 ".into())).unwrap(), 4);
        assert_eq!(concurrency_from(Some("256".into())).unwrap(), 256);
        for bad in ["0", "257", "-1", "many", ""] {
            let e = concurrency_from(Some(bad.into())).unwrap_err();
            assert!(e.to_string().contains("give 1 to 256"), "{bad}: {e}");
        }
    }

    /// Many files hashed at once come back in the order asked, each the
    /// digest of its own bytes; a missing one is the error, by name.
    #[test]
    fn files_hashed_at_once_come_back_in_order() {
        let d = tempfile::tempdir().unwrap();
        let s = Store::open(&locate(d.path().to_str().unwrap()).unwrap()).unwrap();
        let rels: Vec<String> = (0..9).map(|i| format!("d/{i}")).collect();
        for (i, r) in rels.iter().enumerate() {
            s.put(r, Bytes::from(vec![i as u8; 1000 * i + 1])).unwrap();
        }
        let hashed = s
            .hash_each(&rels, u64::MAX, std::io::sink, Hashes::both)
            .unwrap();
        assert_eq!(hashed.len(), rels.len());
        for (i, (h, n)) in hashed.into_iter().enumerate() {
            let want = vec![i as u8; 1000 * i + 1];
            assert_eq!(n, want.len() as u64);
            let sha = Digest::from_sha256(h.sha256.unwrap());
            assert_eq!(sha, Digest::of_bytes(&want));
            assert_eq!(h.blake3.unwrap().finalize(), blake3::hash(&want));
        }
        let sizes = s.sizes(&[rels[3].clone(), "d/none".into()]).unwrap();
        assert_eq!(sizes, [Some(3001), None]);
        let mut gone = rels.clone();
        gone.insert(4, "d/none".into());
        match s.hash_each(&gone, u64::MAX, std::io::sink, Hashes::sha256) {
            Err(StorageError::NotFound(p)) => assert!(p.ends_with("d/none"), "{p}"),
            other => panic!("{:?}", other.map(|v| v.len())),
        }
        let heads = s.read_ranges(&[(rels[2].clone(), 0..2), (rels[1].clone(), 1..4)]);
        assert_eq!(
            heads.unwrap(),
            [Bytes::from(vec![2u8; 2]), Bytes::from(vec![1u8; 3])]
        );
        let urls = [s.url_of(&rels[5]), s.url_of("d/none"), s.url().clone()];
        assert_eq!(sizes_of(&urls).unwrap(), [Some(5001), None, None]);
    }
}
