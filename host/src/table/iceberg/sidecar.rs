//! Files idem keeps beside an Iceberg table under `_idem/` (manifests,
//! modules, run index, run log), in the table's folder.

use futures::{StreamExt as _, TryStreamExt as _};
use object_store::{ObjectStoreExt as _, PutPayload};

use super::Iceberg;
use crate::table::error::TableError;

impl Iceberg {
    /// The object `_idem/<rel>` under the table's folder.
    pub(super) fn sidecar_path(&self, rel: &str) -> object_store::path::Path {
        let mut p = self.prefix.clone();
        for part in format!("_idem/{rel}").split('/') {
            p = p.clone().join(part);
        }
        p
    }

    /// Store bytes under the table's `_idem/` folder (atomically).
    pub async fn put_sidecar(&self, rel: &str, bytes: Vec<u8>) -> Result<(), TableError> {
        self.store
            .put(&self.sidecar_path(rel), PutPayload::from(bytes))
            .await
            .map_err(|e| TableError::Sidecar {
                path: rel.into(),
                detail: e.to_string(),
            })?;
        Ok(())
    }

    /// Read bytes from the table's `_idem/` folder, `None` if absent.
    pub async fn get_sidecar(&self, rel: &str, most: u64) -> Result<Option<Vec<u8>>, TableError> {
        let err = |e: object_store::Error| TableError::Sidecar {
            path: rel.into(),
            detail: e.to_string(),
        };
        match self.store.get(&self.sidecar_path(rel)).await {
            Ok(r) => Ok(Some(
                crate::storage::whole_at_most(r, most)
                    .await
                    .map_err(|detail| TableError::Sidecar {
                        path: rel.into(),
                        detail,
                    })?
                    .to_vec(),
            )),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(err(e)),
        }
    }

    /// Names of the files under `_idem/<prefix>/`.
    pub async fn list_sidecar(&self, prefix: &str, most: usize) -> Result<Vec<String>, TableError> {
        let metas: Vec<_> = self
            .store
            .list(Some(&self.sidecar_path(prefix)))
            .take(most)
            .try_collect()
            .await
            .map_err(|e| TableError::Sidecar {
                path: prefix.into(),
                detail: e.to_string(),
            })?;
        let base = self.prefix.to_string();
        let mut names: Vec<String> = metas
            .into_iter()
            .map(|m| {
                let s = m.location.to_string();
                s.strip_prefix(&base)
                    .map(|r| r.trim_start_matches('/').to_string())
                    .unwrap_or(s)
            })
            .collect();
        names.sort();
        Ok(names)
    }
}
