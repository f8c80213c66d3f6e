//! Files idem keeps beside the table under `_idem/` (manifests, modules,
//! run index, run log). Delta readers ignore `_`-prefixed folders.

use deltalake::DeltaTable;
use futures::{StreamExt, TryStreamExt};
use object_store::path::Path;
use object_store::{ObjectStoreExt, PutPayload};

use super::Delta;
use crate::storage::whole_at_most;
use crate::table::error::TableError;

fn path(rel: &str) -> Path {
    Path::from(format!("_idem/{rel}"))
}

fn err(rel: &str, e: impl std::fmt::Display) -> TableError {
    TableError::Sidecar {
        path: rel.to_string(),
        detail: e.to_string(),
    }
}

/// Write `bytes` to `_idem/<rel>` (object stores make a put atomic).
async fn put(t: &DeltaTable, rel: &str, bytes: Vec<u8>) -> Result<(), TableError> {
    let store = t.log_store().object_store(None);
    store
        .put(&path(rel), PutPayload::from(bytes))
        .await
        .map_err(|e| err(rel, e))?;
    Ok(())
}

/// Read `_idem/<rel>` (refused past `most` bytes), `None` when it does
/// not exist.
async fn get(t: &DeltaTable, rel: &str, most: u64) -> Result<Option<Vec<u8>>, TableError> {
    let store = t.log_store().object_store(None);
    match store.get(&path(rel)).await {
        Ok(r) => Ok(Some(
            whole_at_most(r, most)
                .await
                .map_err(|e| err(rel, e))?
                .to_vec(),
        )),
        Err(object_store::Error::NotFound { .. }) => Ok(None),
        Err(e) => Err(err(rel, e)),
    }
}

/// File names directly or deeper under `_idem/<prefix>/` (the first
/// `most` the store lists), sorted.
async fn list(t: &DeltaTable, prefix: &str, most: usize) -> Result<Vec<String>, TableError> {
    let store = t.log_store().object_store(None);
    let metas: Vec<_> = store
        .list(Some(&path(prefix)))
        .take(most)
        .try_collect()
        .await
        .map_err(|e| err(prefix, e))?;
    let mut names: Vec<String> = metas.into_iter().map(|m| m.location.to_string()).collect();
    names.sort();
    Ok(names)
}

impl Delta {
    /// Store bytes under the table's `_idem/` folder (atomically).
    pub async fn put_sidecar(&self, rel: &str, bytes: Vec<u8>) -> Result<(), TableError> {
        put(&self.delta, rel, bytes).await
    }

    /// Read bytes from the table's `_idem/` folder, `None` if absent.
    pub async fn get_sidecar(&self, rel: &str, most: u64) -> Result<Option<Vec<u8>>, TableError> {
        get(&self.delta, rel, most).await
    }

    /// Names of the files under `_idem/<prefix>/` (at most `most`).
    pub async fn list_sidecar(&self, prefix: &str, most: usize) -> Result<Vec<String>, TableError> {
        list(&self.delta, prefix, most).await
    }
}
