//! Opening a Delta table (creating its folder to write it, or requiring
//! its log to read it), re-reading its log, and what the loaded version
//! is: its version, its schema, a pinned version to read.

use std::sync::Arc;

use arrow::datatypes::{Schema, SchemaRef};
use deltalake::kernel::engine::arrow_conversion::TryIntoArrow as _;
use deltalake::{DeltaTable, DeltaTableError};
use url::Url;

use super::{Delta, delta_err, stores};
use crate::table::commit::attempt_id;
use crate::table::error::TableError;

/// A Delta table's folder as a URL, from a user's location (path or URL).
pub(in crate::table) fn folder_url(location: &str) -> Result<Url, TableError> {
    let url = crate::storage::locate(location)?;
    Ok(crate::storage::as_dir(&url))
}

/// Run a blocking storage call on `store` off the async executor.
async fn off_runtime<T: Send + 'static>(
    location: &str,
    store: &crate::storage::Store,
    f: impl FnOnce(&crate::storage::Store) -> Result<T, crate::storage::StorageError> + Send + 'static,
) -> Result<T, TableError> {
    let store = store.clone();
    Ok(tokio::task::spawn_blocking(move || f(&store))
        .await
        .map_err(|e| TableError::Location {
            location: location.into(),
            detail: e.to_string(),
        })??)
}

/// A local table's folder: made when writing (the first commit creates
/// the table); to read, its `_delta_log` must be there (a missing one is
/// no table, one that cannot be read is named as such). Other stores
/// have no folders.
/// The marker a new table's folder gets before anything is written there.
const CLAIMED: &str = "_idem/claimed";

/// A new table's folder (no Delta log yet) must not be a dataset: one
/// that holds Parquet files or `column=value/` folders, and nothing of
/// idem's (`_idem/`), would get a log that ignores them, and readers of
/// the "table" would never see those files. Refused, naming them; else
/// the folder is claimed (so a first run killed after writing data files
/// is retried there, not refused).
fn claim_new_folder(
    location: &str,
    store: &crate::storage::Store,
) -> Result<(), crate::storage::StorageError> {
    if store.size(CLAIMED)?.is_some() {
        return Ok(());
    }
    let (dirs, files) = store.top_level()?;
    let idems = dirs.iter().any(|d| d == "_idem");
    let mut data: Vec<&String> = files
        .iter()
        .filter(|f| f.ends_with(".parquet"))
        .chain(
            dirs.iter()
                .filter(|d| d.contains('=') && !d.starts_with('_')),
        )
        .collect();
    data.sort();
    if !idems && !data.is_empty() {
        let some: Vec<&str> = data.iter().take(3).map(|s| s.as_str()).collect();
        return Err(crate::storage::StorageError::Setting(format!(
            "`{location}` has no Delta log but holds data ({}{}): it is a dataset, not a table, and a table made there would ignore those files. Give the table a folder of its own (a new path), or read this dataset with --input",
            some.join(", "),
            if data.len() > 3 { ", ..." } else { "" }
        )));
    }
    store.put(
        CLAIMED,
        bytes::Bytes::from_static(b"a Delta table idem writes\n"),
    )
}

fn local_folder(location: &str, url: &Url, create: bool) -> Result<(), TableError> {
    if url.scheme() != "file" {
        return Ok(());
    }
    let err = |detail: String| TableError::Location {
        location: location.into(),
        detail,
    };
    let Ok(dir) = url.to_file_path() else {
        return if create {
            Err(err("bad file URL".into()))
        } else {
            Ok(())
        };
    };
    if create {
        return std::fs::create_dir_all(&dir)
            .map_err(|e| err(format!("cannot create {}: {e}", dir.display())));
    }
    let log = dir.join("_delta_log");
    match std::fs::metadata(&log) {
        Ok(m) if m.is_dir() => Ok(()),
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(err(format!("cannot read {}: {e}", log.display())))
        }
        _ => Err(TableError::NoTable {
            location: location.into(),
        }),
    }
}

impl Delta {
    /// Open the table at `location` to write it: it need not exist yet (the
    /// first commit creates it; a local directory is made now). A location
    /// that cannot be reached is an error.
    pub async fn open(location: &str) -> Result<Self, TableError> {
        Self::open_with(location, true).await
    }

    /// Open an existing table to read it (inputs, verify, audit, log):
    /// nothing is created, a missing table is an error.
    pub async fn open_existing(location: &str) -> Result<Self, TableError> {
        Self::open_with(location, false).await
    }

    async fn open_with(location: &str, create: bool) -> Result<Self, TableError> {
        let url = folder_url(location)?;
        stores::register();
        if let Some(kept) = Self::kept(&url, location).await? {
            return Ok(kept);
        }
        let store = crate::storage::Store::open(&url)?;
        // An unreachable store, a missing bucket or refused credentials are
        // named here, before delta-rs wraps them.
        off_runtime(location, &store, |s| s.check_reachable()).await?;
        local_folder(location, &url, create)?;
        let delta =
            DeltaTable::try_from_url(url.clone())
                .await
                .map_err(|e| TableError::Location {
                    location: location.into(),
                    detail: e.to_string(),
                })?;
        // To read, the log must hold a version (found by delta-rs from the
        // checkpoint on: no listing of the whole log, which on an object
        // store answers a page of up to 1,000 of its files).
        if !create && delta.version().is_none() {
            return Err(TableError::NoTable {
                location: location.into(),
            });
        }
        if create && delta.version().is_none() {
            let named = location.to_string();
            off_runtime(location, &store, move |s| claim_new_folder(&named, s)).await?;
        }
        let opened = Delta {
            url,
            delta,
            store,
            safe_store: false,
            log_written: false,
            attempt: attempt_id(location)?,
            cache: Default::default(),
        };
        opened.keep().await;
        Ok(opened)
    }

    /// The table's URL.
    pub fn url(&self) -> &Url {
        &self.url
    }

    /// The current version, `None` before the first commit.
    pub fn version(&self) -> Option<u64> {
        self.delta.version()
    }

    /// Re-read the log.
    pub async fn refresh(&mut self) -> Result<(), TableError> {
        if self.delta.version().is_some() {
            self.delta
                .update_state()
                .await
                .map_err(delta_err("refreshing the table"))?;
        } else {
            match self.delta.load().await {
                Ok(()) | Err(DeltaTableError::NotATable(_)) => {}
                Err(e) => return Err(delta_err("loading the table")(e)),
            }
        }
        Ok(())
    }

    /// Load a given version (for pinned Delta inputs).
    pub async fn load_version(&mut self, version: u64) -> Result<(), TableError> {
        self.delta
            .load_version(version)
            .await
            .map_err(|e| TableError::Delta {
                what: format!("loading version {version}"),
                detail: e.to_string(),
            })
    }

    /// The table's schema as Arrow.
    pub fn arrow_schema(&self) -> Result<SchemaRef, TableError> {
        let snapshot = self
            .delta
            .snapshot()
            .map_err(delta_err("reading the snapshot"))?;
        let schema: Schema =
            snapshot
                .schema()
                .as_ref()
                .try_into_arrow()
                .map_err(|e| TableError::Delta {
                    what: "reading the schema".into(),
                    detail: e.to_string(),
                })?;
        Ok(Arc::new(schema))
    }

    /// Prove, once, that the table's store refuses to overwrite an object
    /// with a conditional PUT (what keeps two hosts from overwriting each
    /// other's log entries); refuse to write anything otherwise.
    pub async fn ensure_safe_store(&mut self) -> Result<(), TableError> {
        if !self.safe_store {
            off_runtime(self.url.as_str(), &self.store, |s| {
                s.check_conditional_put()
            })
            .await?;
            self.safe_store = true;
        }
        Ok(())
    }
}
