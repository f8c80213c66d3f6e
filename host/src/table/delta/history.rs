//! The Delta log's commits as idem reads them ([`LogCommit`]): read from
//! the commit files themselves, each once per process (a commit file never
//! changes once written). A run reads the few it needs by version
//! ([`Delta::commit_at`], [`Delta::landed`]); only whole-table views
//! (`idem log`, a whole-table audit, tables written by an idem that did
//! not record where its commits landed) read the whole history.

use std::collections::HashMap;

use deltalake::logstore::ObjectStoreRef;
use object_store::ObjectStoreExt as _;

use futures::{StreamExt as _, TryStreamExt as _};

use super::{Delta, shape};
use crate::table::error::TableError;
use crate::table::record::LogCommit;

/// Commits read at once when reading forward.
const READ_AHEAD: usize = 8;

/// Commits already read, per table (see [`Delta::idem_history`]).
type History = HashMap<String, HashMap<u64, Option<LogCommit>>>;
static HISTORY: std::sync::LazyLock<std::sync::Mutex<History>> =
    std::sync::LazyLock::new(Default::default);

impl Delta {
    /// The commits of the log up to the loaded version, newest first:
    /// their version (from the commit file's name), idem's commitInfo keys
    /// and whether they changed data. Read from the commit files themselves
    /// (numbered by name, so a commit without commitInfo or one made after
    /// the loaded version cannot shift the numbering); commits removed by
    /// log cleanup are simply absent.
    pub async fn idem_history(&self) -> Result<Vec<LogCommit>, TableError> {
        let Some(latest) = self.delta.version() else {
            return Ok(Vec::new());
        };
        // A commit file never changes once written (conditional PUT), so
        // each is read once per process: the key is the table's location
        // and its creation id (a table recreated at the same place is
        // another table), the value every commit read so far.
        let key = self.history_key();
        let known: HashMap<u64, Option<LogCommit>> = HISTORY
            .lock()
            .map(|h| h.get(&key).cloned().unwrap_or_default())
            .unwrap_or_default();
        let store = self.delta.log_store().object_store(None);
        let mut out = Vec::new();
        let mut read = Vec::new();
        for version in (0..=latest).rev() {
            if let Some(c) = known.get(&version) {
                out.extend(c.clone());
                continue;
            }
            let c = read_commit(&store, version).await?;
            read.push((version, c.clone()));
            out.extend(c);
        }
        if let Ok(mut h) = HISTORY.lock() {
            h.entry(key).or_default().extend(read);
        }
        Ok(out)
    }

    /// Commit `version` of the log (`None`: cleaned up, never written, or
    /// after the loaded version), read once per process.
    pub(super) async fn commit_at(&self, version: u64) -> Result<Option<LogCommit>, TableError> {
        if self.delta.version().is_none_or(|latest| version > latest) {
            return Ok(None);
        }
        let key = self.history_key();
        let known = HISTORY
            .lock()
            .ok()
            .and_then(|h| h.get(&key).and_then(|k| k.get(&version).cloned()));
        if let Some(c) = known {
            return Ok(c);
        }
        let store = self.delta.log_store().object_store(None);
        let c = read_commit(&store, version).await?;
        if let Ok(mut h) = HISTORY.lock() {
            h.entry(key).or_default().insert(version, c.clone());
        }
        Ok(c)
    }

    /// The commit made for version `at` (see `apps::at_app`) that `is_it`
    /// recognises, the first from `at` on: delta-rs lands a commit at the
    /// version it was made for or, past commits that won the race without
    /// conflicting with it, later. `None` when commit `at` is gone (log
    /// cleanup) or none is it.
    pub(super) async fn landed(
        &self,
        at: i64,
        is_it: impl Fn(&LogCommit) -> bool,
    ) -> Result<Option<LogCommit>, TableError> {
        let (Ok(at), Some(latest)) = (u64::try_from(at), self.delta.version()) else {
            return Ok(None);
        };
        // Commit `at` alone first: it is the one unless another writer won
        // the race, and reading ahead for it would leave requests in
        // flight that the answer no longer needs.
        match self.commit_at(at).await? {
            Some(c) if is_it(&c) => return Ok(Some(c)),
            None => return Ok(None),
            Some(_) => {}
        }
        let mut commits = futures::stream::iter(at + 1..=latest)
            .map(|v| self.commit_at(v))
            .buffered(READ_AHEAD);
        while let Some(c) = commits.try_next().await? {
            if let Some(c) = c.filter(|c| is_it(c)) {
                return Ok(Some(c));
            }
        }
        Ok(None)
    }

    /// The commit that made app id `app`'s value current and that `is_it`
    /// recognises: the one from which the value holds, when that is after
    /// the latest checkpoint; before it, the first from the version that
    /// app id `at_app` records (set by the same commit) on that carries
    /// that version. `None` when neither is (the caller asks the history).
    pub(super) async fn setter(
        &self,
        app: &str,
        at_app: &str,
        is_it: impl Fn(&LogCommit) -> bool,
    ) -> Result<Option<LogCommit>, TableError> {
        if let Some(v) = self.txn_since(app).await? {
            return Ok(self.commit_at(v).await?.filter(|c| is_it(c)));
        }
        match self.txn(at_app).await? {
            Some(at) if self.txn_since(at_app).await?.is_none() => {
                let carries = |c: &LogCommit| c.txns.iter().any(|(a, v)| a == at_app && *v == at);
                self.landed(at, |c| carries(c) && is_it(c)).await
            }
            _ => Ok(None),
        }
    }

    /// The key of the table's commits in [`HISTORY`].
    pub(super) fn history_key(&self) -> String {
        format!(
            "{}#{}",
            self.url,
            self.delta
                .snapshot()
                .map(|s| s.metadata().id().to_string())
                .unwrap_or_default()
        )
    }
}

/// Commit `version` of the log, `None` when it was cleaned up (or never
/// written): absent for good.
async fn read_commit(
    store: &ObjectStoreRef,
    version: u64,
) -> Result<Option<LogCommit>, TableError> {
    let path = object_store::path::Path::from(format!("_delta_log/{version:020}.json"));
    let bytes = match store.get(&path).await {
        Ok(r) => crate::storage::whole(r)
            .await
            .map_err(|detail| TableError::Delta {
                what: format!("reading commit {version}"),
                detail,
            })?,
        Err(object_store::Error::NotFound { .. }) => return Ok(None),
        Err(e) => {
            return Err(TableError::Delta {
                what: format!("reading commit {version}"),
                detail: e.to_string(),
            });
        }
    };
    Ok(Some(parse_commit(version, &bytes)))
}

/// A commit file's actions, as idem reads them.
fn parse_commit(version: u64, bytes: &[u8]) -> LogCommit {
    let mut c = LogCommit {
        version,
        ..Default::default()
    };
    for line in bytes.split(|b| *b == b'\n') {
        let Ok(action) = serde_json::from_slice::<serde_json::Value>(line) else {
            continue;
        };
        if let Some(info) = action.get("commitInfo").and_then(|i| i.as_object()) {
            c.idem = info
                .iter()
                .filter(|(k, _)| k.starts_with("idem."))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
        }
        if let Some(meta) = action.get("metaData") {
            c.shape = Some(shape::of_metadata(meta));
        }
        if let Some(t) = action.get("txn")
            && let (Some(app), Some(v)) = (
                t.get("appId").and_then(|a| a.as_str()),
                t.get("version").and_then(|v| v.as_i64()),
            )
        {
            c.txns.push((app.to_string(), v));
        }
        for kind in ["add", "remove"] {
            c.touches_files |= action.get(kind).is_some();
            if let Some(a) = action.get(kind)
                && a.get("dataChange").and_then(|d| d.as_bool()) != Some(false)
            {
                c.data_change = true;
            }
        }
    }
    c
}
