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

#[derive(Default)]
struct Entries {
    version: Option<u64>,
    txns: HashMap<String, Option<i64>>,
    /// Every app transaction, once read (`Some(None)`: not readable
    /// exactly, ask delta-rs one by one).
    all_txns: Option<Option<Arc<Txns>>>,
    files: Option<Arc<Vec<Add>>>,
}

impl Cache {
    /// The entries of `version`, emptied if they were of another.
    fn at(&self, version: Option<u64>) -> std::sync::MutexGuard<'_, Entries> {
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
    /// The version app id `app_id` last recorded (`None`: never).
    pub(super) async fn txn(&self, app_id: &str) -> Result<Option<i64>, TableError> {
        let version = self.delta.version();
        let all = self.cache.at(version).all_txns.clone();
        let all = match all {
            Some(all) => all,
            None => {
                let all = self.read_all_txns().await?.map(Arc::new);
                self.cache.at(version).all_txns = Some(all.clone());
                all
            }
        };
        if let Some(all) = all {
            return Ok(all.get(app_id).copied());
        }
        if let Some(v) = self.cache.at(version).txns.get(app_id) {
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
        let version = self.delta.version();
        if let Some(f) = &self.cache.at(version).files {
            return Ok(f.clone());
        }
        let files = Arc::new(ownership::data_files(&self.delta).await?);
        self.cache.at(version).files = Some(files.clone());
        Ok(files)
    }
}
