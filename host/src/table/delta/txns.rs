//! The table's app transactions, all of them at once: the latest
//! checkpoint's (its `txn` column, read once) overlaid with those of the
//! commits after it, oldest to newest. delta-rs answers one app id at a
//! time, and each answer replays the checkpoint and every commit after it
//! (delta-kernel's all-at-once scan is crate-private); a run asks for four
//! to eight. Where this cannot read the log exactly (a `_last_checkpoint`
//! hint newer than the loaded version, a v2 checkpoint, a commit after the
//! checkpoint that is gone, app transaction expiry configured), it says
//! so and lookups go to delta-rs one by one.

use std::collections::HashMap;

use arrow::array::{Array, Int64Array, StringArray, StructArray};
use deltalake::logstore::ObjectStoreRef;
use object_store::ObjectStoreExt as _;
use object_store::path::Path;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use super::Delta;
use crate::table::error::TableError;

/// App id -> the version it last recorded.
pub(super) type Txns = HashMap<String, i64>;

/// The table property that makes old app transactions expire.
const RETENTION: &str = "delta.setTransactionRetentionDuration";

fn err(what: &str, e: impl std::fmt::Display) -> TableError {
    TableError::Delta {
        what: format!("reading the app transactions ({what})"),
        detail: e.to_string(),
    }
}

impl Delta {
    /// Every app transaction of the loaded version, `None` when the log is
    /// not one this reads exactly (see the module's note).
    pub(super) async fn read_all_txns(&self) -> Result<Option<Txns>, TableError> {
        let Some(latest) = self.delta.version() else {
            return Ok(Some(Txns::new()));
        };
        let expiring = self
            .delta
            .snapshot()
            .is_ok_and(|s| s.metadata().configuration().contains_key(RETENTION));
        if expiring {
            return Ok(None);
        }
        let store = self.delta.log_store().object_store(None);
        let (from, mut txns) = match last_checkpoint(&store).await? {
            None => (0, Txns::new()),
            Some(hint) if hint.version <= latest && hint.v2.is_none() => {
                let txns = checkpoint_txns(&store, hint.version, hint.parts).await?;
                (hint.version + 1, txns)
            }
            Some(_) => return Ok(None),
        };
        for version in from..=latest {
            let Some(c) = self.commit_at(version).await? else {
                return Ok(None);
            };
            txns.extend(c.txns);
        }
        Ok(Some(txns))
    }
}

/// What `_delta_log/_last_checkpoint` says.
#[derive(serde::Deserialize)]
struct Hint {
    version: u64,
    parts: Option<u64>,
    #[serde(rename = "v2Checkpoint")]
    v2: Option<serde_json::Value>,
}

/// The latest checkpoint's hint, `None` without one.
async fn last_checkpoint(store: &ObjectStoreRef) -> Result<Option<Hint>, TableError> {
    let path = Path::from("_delta_log/_last_checkpoint");
    let bytes = match store.get(&path).await {
        Ok(r) => crate::storage::whole(r)
            .await
            .map_err(|e| err("_last_checkpoint", e))?,
        Err(object_store::Error::NotFound { .. }) => return Ok(None),
        Err(e) => return Err(err("_last_checkpoint", e)),
    };
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| err("_last_checkpoint", e))
}

/// The app transactions of checkpoint `version` (one file, or `parts`).
async fn checkpoint_txns(
    store: &ObjectStoreRef,
    version: u64,
    parts: Option<u64>,
) -> Result<Txns, TableError> {
    let files: Vec<String> = match parts {
        None | Some(1) => vec![format!("_delta_log/{version:020}.checkpoint.parquet")],
        Some(n) => (1..=n)
            .map(|i| format!("_delta_log/{version:020}.checkpoint.{i:010}.{n:010}.parquet"))
            .collect(),
    };
    let mut txns = Txns::new();
    for file in files {
        read_txn_column(store, &file, &mut txns).await?;
    }
    Ok(txns)
}

/// The `txn` column of checkpoint file `file` into `txns` (the file is
/// read in one request; only its `txn` column is decoded).
async fn read_txn_column(
    store: &ObjectStoreRef,
    file: &str,
    txns: &mut Txns,
) -> Result<(), TableError> {
    let bytes = match store.get(&Path::from(file)).await {
        Ok(r) => crate::storage::whole(r).await.map_err(|e| err(file, e))?,
        Err(e) => return Err(err(file, e)),
    };
    let builder = ParquetRecordBatchReaderBuilder::try_new(bytes).map_err(|e| err(file, e))?;
    let Some(index) = builder.schema().index_of("txn").ok() else {
        return Ok(());
    };
    let mask = ProjectionMask::roots(builder.parquet_schema(), [index]);
    let batches = builder
        .with_projection(mask)
        .build()
        .map_err(|e| err(file, e))?;
    for batch in batches {
        let batch = batch.map_err(|e| err(file, e))?;
        let Some(txn) = batch.column(0).as_any().downcast_ref::<StructArray>() else {
            return Err(err(file, "its txn column is not a struct"));
        };
        let apps = txn
            .column_by_name("appId")
            .and_then(|c| c.as_any().downcast_ref::<StringArray>());
        let versions = txn
            .column_by_name("version")
            .and_then(|c| c.as_any().downcast_ref::<Int64Array>());
        let (Some(apps), Some(versions)) = (apps, versions) else {
            return Err(err(file, "its txn column lacks appId or version"));
        };
        for row in (0..txn.len()).filter(|r| txn.is_valid(*r) && apps.is_valid(*r)) {
            txns.insert(apps.value(row).to_string(), versions.value(row));
        }
    }
    Ok(())
}
