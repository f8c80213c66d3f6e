//! What this process has read of the loaded version, read once per
//! version: its app transactions (all at once, see `txns`; else each
//! lookup replays the log from its latest checkpoint, so a run asking the
//! same ones again pays once) and its data files with their tags
//! (materialised from the snapshot).
//! Entries carry the version they were read at; a refresh to a new
//! version makes them stale without being told.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use deltalake::kernel::Add;

use super::txns::Txns;
use super::{Delta, delta_err, ownership};
use crate::table::error::TableError;

/// The loaded version's app transactions and data files, as read so far.
#[derive(Default)]
pub(super) struct Cache {
    inner: Mutex<Entries>,
}

#[derive(Default, Clone)]
struct Entries {
    /// The table (see `Delta::history_key`) and version they were read at.
    version: Option<(String, u64)>,
    txns: HashMap<String, Option<i64>>,
    /// Every app transaction, once read (`Some(None)`: not readable
    /// exactly, ask delta-rs one by one).
    all_txns: Option<Option<Arc<Txns>>>,
    files: Option<Arc<Vec<Add>>>,
}

impl Cache {
    /// A copy of what was read.
    pub(super) fn copy(&self) -> Cache {
        let e = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        Cache {
            inner: Mutex::new(e.clone()),
        }
    }

    /// The entries of `version`, emptied if they were of another.
    fn at(&self, version: Option<(String, u64)>) -> std::sync::MutexGuard<'_, Entries> {
        let mut e = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if e.version != version {
            *e = Entries {
                version,
                ..Default::default()
            };
        }
        e
    }
}

impl Delta {
    /// The table and version the cache is for.
    fn cache_key(&self) -> Option<(String, u64)> {
        Some((self.history_key(), self.delta.version()?))
    }

    /// Every app transaction, when they can be read exactly (see `txns`).
    pub(super) async fn all_txns(&self) -> Result<Option<Arc<Txns>>, TableError> {
        let key = self.cache_key();
        if let Some(all) = self.cache.at(key.clone()).all_txns.clone() {
            return Ok(all);
        }
        let all = self.read_all_txns().await?.map(Arc::new);
        self.cache.at(key).all_txns = Some(all.clone());
        Ok(all)
    }

    /// The version of the commit that made app id `app_id`'s value
    /// current, when it is after the latest checkpoint and the app
    /// transactions were read exactly; `None` otherwise.
    pub(super) async fn txn_since(&self, app_id: &str) -> Result<Option<u64>, TableError> {
        Ok(self
            .all_txns()
            .await?
            .and_then(|all| all.get(app_id).and_then(|t| t.since)))
    }

    /// The version app id `app_id` last recorded (`None`: never).
    pub(super) async fn txn(&self, app_id: &str) -> Result<Option<i64>, TableError> {
        if let Some(all) = self.all_txns().await? {
            return Ok(all.get(app_id).map(|t| t.value));
        }
        let version = self.cache_key();
        if let Some(v) = self.cache.at(version.clone()).txns.get(app_id) {
            return Ok(*v);
        }
        let Ok(state) = self.delta.snapshot() else {
            return Ok(None);
        };
        let v = state
            .transaction_version(self.delta.log_store().as_ref(), app_id)
            .await
            .map_err(delta_err("reading app transactions"))?;
        self.cache.at(version).txns.insert(app_id.to_string(), v);
        Ok(v)
    }

    /// Every data file of the loaded version, as `add` actions with their
    /// tags.
    pub(super) async fn data_files(&self) -> Result<Arc<Vec<Add>>, TableError> {
        let version = self.cache_key();
        if let Some(f) = &self.cache.at(version.clone()).files {
            return Ok(f.clone());
        }
        let files = Arc::new(ownership::data_files(&self.delta).await?);
        self.cache.at(version).files = Some(files.clone());
        Ok(files)
    }
}
