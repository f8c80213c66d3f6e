//! One handle per table per process. A process that runs many slices of
//! one table (a backfill, a pipeline, `idem serve`) opens it once: each
//! run takes a copy of the handle this process last used, brings it up to
//! date (delta-rs reads only the commits since), and a commit puts its
//! newer copy back. A copy is used only while the commit file it was at
//! is still the one on the store: a table deleted and made again at the
//! same place is opened anew.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};

use object_store::ObjectStoreExt as _;
use object_store::path::Path;
use url::Url;

use super::Delta;
use crate::table::commit::attempt_id;
use crate::table::error::TableError;

/// A kept handle, the commit file it was at (its size and tag), and when
/// it was last used (to let the least recently used go).
struct Kept {
    delta: Delta,
    at: (u64, String),
    used: u64,
}

/// A clock of uses.
static USES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn tick() -> u64 {
    USES.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

static HANDLES: LazyLock<Mutex<HashMap<Url, Kept>>> = LazyLock::new(Default::default);

/// At most this many tables' handles are kept (a long-running service
/// touching many tables keeps the latest ones, not all of them).
const MAX_KEPT: usize = 64;

/// The store's description of commit file `version` (size and e-tag),
/// `None` when it is gone or the store names no e-tag (a file of the same
/// size could then be another table's).
async fn commit_file(delta: &Delta, version: u64) -> Option<(u64, String)> {
    let store = delta.delta.log_store().object_store(None);
    let path = Path::from(format!("_delta_log/{version:020}.json"));
    let meta = store.head(&path).await.ok()?;
    Some((meta.size, meta.e_tag?))
}

impl Delta {
    /// A copy of this process's handle of the table at `url`, up to date,
    /// with an attempt id of its own; `None` when there is none (or the
    /// table was made again).
    pub(super) async fn kept(url: &Url, location: &str) -> Result<Option<Delta>, TableError> {
        let copy = HANDLES.lock().ok().and_then(|mut h| {
            let k = h.get_mut(url)?;
            k.used = tick();
            Some((k.delta.copy(), k.at.clone()))
        });
        let Some((mut delta, at)) = copy else {
            return Ok(None);
        };
        let Some(version) = delta.delta.version() else {
            return Ok(None);
        };
        if commit_file(&delta, version).await.as_ref() != Some(&at) {
            if let Ok(mut h) = HANDLES.lock() {
                h.remove(url);
            }
            return Ok(None);
        }
        delta.attempt = attempt_id(location)?;
        delta.refresh().await?;
        Ok(Some(delta))
    }

    /// Keep a copy of this handle for the process's next run of the table
    /// (when it is at least as new as the one kept).
    pub(super) async fn keep(&self) {
        let Some(version) = self.delta.version() else {
            return;
        };
        let Some(at) = commit_file(self, version).await else {
            return;
        };
        if let Ok(mut h) = HANDLES.lock() {
            let newer = h
                .get(&self.url)
                .is_none_or(|k| k.delta.delta.version() <= Some(version));
            if newer {
                if h.len() >= MAX_KEPT
                    && !h.contains_key(&self.url)
                    && let Some(oldest) =
                        h.iter().min_by_key(|(_, k)| k.used).map(|(u, _)| u.clone())
                {
                    h.remove(&oldest);
                }
                // Kept without what this run read of its version (the next
                // run is at another version, or reads it again).
                let mut delta = self.copy();
                delta.cache = Default::default();
                h.insert(
                    self.url.clone(),
                    Kept {
                        delta,
                        at,
                        used: tick(),
                    },
                );
            }
        }
    }

    /// A copy of this handle (the loaded snapshot is shared, not copied).
    fn copy(&self) -> Delta {
        Delta {
            url: self.url.clone(),
            delta: self.delta.clone(),
            store: self.store.clone(),
            safe_store: self.safe_store,
            attempt: self.attempt.clone(),
            log_written: false,
            cache: self.cache.copy(),
        }
    }
}
