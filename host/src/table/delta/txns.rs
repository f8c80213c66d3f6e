//! The table's app transactions, all of them at once: the latest
//! checkpoint's (its `txn` column, read once per process) overlaid with
//! those of the commits after it, oldest to newest. delta-rs answers one
//! app id at a time, and each answer replays the checkpoint and every
//! commit after it (delta-kernel's all-at-once scan is crate-private); a
//! run asks for four to eight.
//!
//! Each value also says since when it holds: the first commit after the
//! checkpoint from which the app id kept its current value (a commit that
//! sets the same value again, a copy, does not move it), or nothing when
//! it holds since the checkpoint. That commit is the one that made the
//! value current.
//!
//! Where this cannot read the log exactly (no readable or a v2
//! `_last_checkpoint` hint, one newer than the loaded version, a
//! checkpoint or a commit after it that cannot be read, app transaction
//! expiry configured), it says so and lookups go to delta-rs one by one.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

use arrow::array::{Array, AsArray, StructArray};
use arrow::datatypes::Int64Type;
use deltalake::logstore::ObjectStoreRef;
use futures::{StreamExt, TryStreamExt};
use object_store::ObjectStoreExt as _;
use object_store::path::Path;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use super::Delta;
use crate::table::error::TableError;

/// An app transaction's value, and the version of the commit after the
/// checkpoint that made it current (`None`: it holds since the
/// checkpoint).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Txn {
    pub value: i64,
    pub since: Option<u64>,
}

/// App id -> its value.
pub(super) type Txns = HashMap<String, Txn>;

/// The table property that makes old app transactions expire.
const RETENTION: &str = "delta.setTransactionRetentionDuration";

/// Commits read at once.
const READ_AHEAD: usize = 16;

/// Checkpoints' app transactions read by this process, by table and
/// checkpoint version (a checkpoint never changes once written).
type Checkpoints = HashMap<(String, u64), Arc<HashMap<String, i64>>>;
static CHECKPOINTS: LazyLock<Mutex<Checkpoints>> = LazyLock::new(Default::default);

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
        let Some((from, base)) = self.checkpoint_txns(latest).await else {
            return Ok(None);
        };
        let mut txns: Txns = base
            .iter()
            .map(|(app, value)| {
                (
                    app.clone(),
                    Txn {
                        value: *value,
                        since: None,
                    },
                )
            })
            .collect();
        let mut commits = futures::stream::iter(from..=latest)
            .map(|v| self.commit_at(v))
            .buffered(READ_AHEAD);
        while let Some(c) = commits.try_next().await? {
            let Some(c) = c else {
                return Ok(None);
            };
            for (app, value) in c.txns {
                let same = txns.get(&app).is_some_and(|t| t.value == value);
                if !same {
                    let since = Some(c.version);
                    txns.insert(app, Txn { value, since });
                }
            }
        }
        Ok(Some(txns))
    }

    /// The first commit version after the checkpoint the loaded version
    /// stands on, and the checkpoint's app transactions (none, from
    /// version 0, without a checkpoint); `None` when they cannot be read
    /// exactly.
    async fn checkpoint_txns(&self, latest: u64) -> Option<(u64, Arc<HashMap<String, i64>>)> {
        let store = self.delta.log_store().object_store(None);
        let hint = match last_checkpoint(&store).await {
            Ok(None) => return Some((0, Arc::default())),
            Ok(Some(hint)) if hint.version <= latest && hint.v2.is_none() => hint,
            Ok(Some(_)) => return None,
            Err(e) => {
                tracing::warn!("reading app transactions one by one: {e}");
                return None;
            }
        };
        let key = (self.history_key(), hint.version);
        if let Some(known) = CHECKPOINTS.lock().ok().and_then(|c| c.get(&key).cloned()) {
            return Some((hint.version + 1, known));
        }
        match read_checkpoint(&store, hint.version, hint.parts).await {
            Ok(txns) => {
                let txns = Arc::new(txns);
                if let Ok(mut c) = CHECKPOINTS.lock() {
                    // The table's older checkpoints are not read again.
                    c.retain(|(table, _), _| *table != key.0);
                    c.insert(key, txns.clone());
                }
                Some((hint.version + 1, txns))
            }
            Err(e) => {
                tracing::warn!("reading app transactions one by one: {e}");
                None
            }
        }
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
async fn last_checkpoint(store: &ObjectStoreRef) -> Result<Option<Hint>, String> {
    let path = Path::from("_delta_log/_last_checkpoint");
    let bytes = match store.get(&path).await {
        Ok(r) => crate::storage::whole(r).await?,
        Err(object_store::Error::NotFound { .. }) => return Ok(None),
        Err(e) => return Err(format!("_last_checkpoint: {e}")),
    };
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| format!("_last_checkpoint: {e}"))
}

/// The app transactions of checkpoint `version` (one file, or `parts`).
async fn read_checkpoint(
    store: &ObjectStoreRef,
    version: u64,
    parts: Option<u64>,
) -> Result<HashMap<String, i64>, String> {
    let files: Vec<String> = match parts {
        None | Some(1) => vec![format!("_delta_log/{version:020}.checkpoint.parquet")],
        Some(n) if n <= 10_000 => (1..=n)
            .map(|i| format!("_delta_log/{version:020}.checkpoint.{i:010}.{n:010}.parquet"))
            .collect(),
        Some(n) => return Err(format!("_last_checkpoint names {n} parts")),
    };
    let mut txns = HashMap::new();
    for file in files {
        let bytes = match store.get(&Path::from(file.as_str())).await {
            Ok(r) => crate::storage::whole(r).await?,
            Err(e) => return Err(format!("{file}: {e}")),
        };
        txn_column(bytes, &mut txns).map_err(|e| format!("{file}: {e}"))?;
    }
    Ok(txns)
}

/// The `txn` column of a checkpoint file's `bytes` into `txns` (only that
/// column is decoded).
fn txn_column(bytes: bytes::Bytes, txns: &mut HashMap<String, i64>) -> Result<(), String> {
    let builder = ParquetRecordBatchReaderBuilder::try_new(bytes).map_err(|e| e.to_string())?;
    let Ok(index) = builder.schema().index_of("txn") else {
        return Ok(());
    };
    let mask = ProjectionMask::roots(builder.parquet_schema(), [index]);
    let batches = builder
        .with_projection(mask)
        .build()
        .map_err(|e| e.to_string())?;
    for batch in batches {
        let batch = batch.map_err(|e| e.to_string())?;
        let txn: &StructArray = batch
            .column(0)
            .as_struct_opt()
            .ok_or("its txn column is not a struct")?;
        let apps = txn
            .column_by_name("appId")
            .map(|c| arrow::compute::cast(c, &arrow::datatypes::DataType::Utf8))
            .transpose()
            .map_err(|e| e.to_string())?
            .ok_or("its txn column has no appId")?;
        let apps = apps.as_string::<i32>();
        let versions = txn
            .column_by_name("version")
            .and_then(|c| c.as_primitive_opt::<Int64Type>())
            .ok_or("its txn column has no version")?;
        for row in (0..txn.len()).filter(|r| txn.is_valid(*r) && apps.is_valid(*r)) {
            txns.insert(apps.value(row).to_string(), versions.value(row));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use deltalake::kernel::transaction::{CommitBuilder, CommitProperties};
    use deltalake::kernel::{DataType, PrimitiveType, StructField, Transaction};
    use deltalake::protocol::{DeltaOperation, SaveMode};

    use super::*;

    /// A table of `commits` commits, each setting a few app transactions
    /// (some again to the value they had: copies), checkpointed by
    /// delta-rs every 100 versions (at 99, 199, ...).
    async fn table(dir: &std::path::Path, commits: i64) -> Delta {
        let location = dir.display().to_string();
        let mut d = Delta::open(&location).await.unwrap();
        d.delta = d
            .delta
            .clone()
            .create()
            .with_columns([StructField::new(
                "x",
                DataType::Primitive(PrimitiveType::Long),
                true,
            )])
            .with_save_mode(SaveMode::Ignore)
            .await
            .unwrap();
        for i in 1..=commits {
            let txns = vec![
                Transaction::new(format!("app-{}", i % 7), i),
                Transaction::new("every", i),
                Transaction::new("copied", i / 50),
                Transaction::new("old", i.min(150) / 150),
            ];
            let props = CommitProperties::default().with_application_transactions(txns);
            let op = DeltaOperation::Write {
                mode: SaveMode::Append,
                partition_by: None,
                predicate: None,
            };
            CommitBuilder::from(props)
                .build(Some(d.delta.snapshot().unwrap()), d.delta.log_store(), op)
                .await
                .unwrap();
            d.refresh().await.unwrap();
        }
        d
    }

    /// What delta-rs answers for `app`, one app id at a time.
    async fn one(d: &Delta, app: &str) -> Option<i64> {
        let state = d.delta.snapshot().unwrap();
        state
            .transaction_version(d.delta.log_store().as_ref(), app)
            .await
            .unwrap()
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn all_app_transactions_at_once_are_what_delta_rs_answers_one_by_one() {
        let dir = tempfile::tempdir().unwrap();
        let d = table(dir.path(), 230).await;
        assert!(
            dir.path()
                .join("_delta_log/00000000000000000199.checkpoint.parquet")
                .exists(),
            "delta-rs wrote no checkpoint at 199"
        );
        let all = d.read_all_txns().await.unwrap().expect("read exactly");
        let mut apps: Vec<String> = (0..7).map(|i| format!("app-{i}")).collect();
        apps.extend(["every", "copied", "old", "never"].map(String::from));
        for app in &apps {
            assert_eq!(all.get(app).map(|t| t.value), one(&d, app).await, "{app}");
        }
        assert_eq!(all.len(), 10);
        // Since when each holds: set after the checkpoint (199) by the
        // commit that changed it, copies of the same value not counted;
        // unknown (since the checkpoint) when it holds from before.
        assert_eq!(all["every"].since, Some(230));
        assert_eq!(all["app-6"].since, Some(230));
        assert_eq!(all["app-3"].since, Some(227));
        assert_eq!((all["copied"].value, all["copied"].since), (4, Some(200)));
        assert_eq!((all["old"].value, all["old"].since), (1, None));

        // A stale hint (an older checkpoint): more commits read, the same
        // answers.
        let hint = dir.path().join("_delta_log/_last_checkpoint");
        std::fs::write(&hint, br#"{"version":99,"size":1}"#).unwrap();
        let stale = d.read_all_txns().await.unwrap().expect("read exactly");
        assert_eq!(stale.get("every"), all.get("every"));
        assert_eq!(
            stale["old"],
            Txn {
                value: 1,
                since: Some(150)
            }
        );
        // A hint to a checkpoint newer than the loaded version, or one
        // that cannot be read: delta-rs answers, one by one.
        std::fs::write(&hint, br#"{"version":231,"size":1}"#).unwrap();
        assert!(d.read_all_txns().await.unwrap().is_none());
        std::fs::write(&hint, b"not json").unwrap();
        assert!(d.read_all_txns().await.unwrap().is_none());
        std::fs::write(&hint, br#"{"version":150,"size":1}"#).unwrap();
        assert!(d.read_all_txns().await.unwrap().is_none());
    }
}
