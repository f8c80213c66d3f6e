//! What the Delta log says about a slice: its app transactions (the
//! slice's sequence number, the output digest each commit made current,
//! how many files it added, how far a source was consumed), whether an
//! output is current, and since when.

use super::apps::{out_app, slice_app};
use super::{Delta, MODE_PROPERTY, delta_err, genuine, shape};
use crate::digest::Digest;
use crate::table::commit::SliceState;
use crate::table::error::TableError;
use crate::table::mode::Mode;

impl Delta {
    pub(super) async fn txn(&self, app_id: &str) -> Result<Option<i64>, TableError> {
        let Ok(state) = self.delta.snapshot() else {
            return Ok(None);
        };
        state
            .transaction_version(self.delta.log_store().as_ref(), app_id)
            .await
            .map_err(delta_err("reading app transactions"))
    }

    /// The slice's commit sequence number (0 = never committed).
    pub async fn slice_seq(&self, slice: &str) -> Result<i64, TableError> {
        Ok(self.txn(&slice_app(slice)).await?.unwrap_or(0))
    }

    /// Whether `digest` is the slice's current committed output *and* the
    /// table still holds exactly the rows idem committed for it.
    pub async fn slice_state(
        &self,
        slice: &str,
        digest: &Digest,
        mode: &Mode,
    ) -> Result<SliceState, TableError> {
        let seq = self.slice_seq(slice).await?;
        if !self.holds(slice, digest, seq).await? {
            return Ok(SliceState::Other);
        }
        let since = self.version_of_current(slice).await?;
        let drift = match mode {
            Mode::Merge { .. } => self.foreign_commit_since(since).await?,
            Mode::OverwritePartition { column, value } => {
                self.file_drift(slice, seq, Some((column, value))).await?
            }
            Mode::Append => self.file_drift(slice, seq, None).await?,
        };
        let drift = match drift {
            None => self.shape_drift(since).await?,
            found => found,
        };
        Ok(match drift {
            None => SliceState::Current { since },
            Some(reason) => SliceState::Drifted { reason },
        })
    }

    /// Merge slices share files, so their rows cannot be told apart by file:
    /// any commit after the slice's that idem did not make may have changed
    /// them.
    pub async fn foreign_commit_since(
        &self,
        since: Option<u64>,
    ) -> Result<Option<String>, TableError> {
        // When log cleanup removed the slice's commit, every retained commit
        // is later than it.
        let since_v = since.unwrap_or(0);
        let history = self.idem_history().await?;
        let ours = genuine::versions(&history);
        // Any commit idem did not make that adds or removes a file, whatever
        // its `dataChange` flags claim (a foreign rewrite can say false).
        let first = history
            .iter()
            .filter(|c| c.version > since_v && c.touches_files && !ours.contains(&c.version))
            .map(|c| c.version)
            .min();
        Ok(first.map(|v| {
            format!(
                "version {v} changed data and was committed by another writer after the slice's commit ({})",
                since
                    .map(|s| format!("version {s}"))
                    .unwrap_or_else(|| "no longer in the log".into())
            )
        }))
    }

    /// The manifest the slice's current commit names (the first commit
    /// carrying its app transaction: see `genuine`), `None` without one.
    pub async fn current_manifest(&self, slice: &str) -> Result<Option<Digest>, TableError> {
        let seq = self.slice_seq(slice).await?;
        if seq == 0 {
            return Ok(None);
        }
        let history = self.idem_history().await?;
        let Some(v) = genuine::first_setting(&history, slice, seq) else {
            return Ok(None);
        };
        Ok(history
            .iter()
            .find(|c| c.version == v)
            .and_then(|c| c.get_str("idem.manifestDigest"))
            .and_then(|d| Digest::parse(d).ok()))
    }

    /// The mode the table was created for (its `idem.mode` property).
    pub(super) fn created_mode(&self) -> Option<String> {
        let snapshot = self.delta.snapshot().ok()?;
        snapshot
            .metadata()
            .configuration()
            .get(MODE_PROPERTY)
            .cloned()
    }

    /// Why the table's schema, partitioning or column mapping is no longer
    /// what it was at version `since` (`None`: unchanged).
    pub async fn shape_drift(&self, since: Option<u64>) -> Result<Option<String>, TableError> {
        Ok(shape::drift(&self.idem_history().await?, since))
    }

    /// Whether `digest` is the slice's current committed output.
    pub(super) async fn holds(
        &self,
        slice: &str,
        digest: &Digest,
        seq: i64,
    ) -> Result<bool, TableError> {
        Ok(seq > 0 && self.txn(&out_app(slice, digest)).await? == Some(seq))
    }

    /// The version of the slice's current commit if this process made it.
    pub(super) async fn committed_by_us(&self, slice: &str) -> Result<Option<u64>, TableError> {
        let seq = self.slice_seq(slice).await?;
        let history = self.idem_history().await?;
        let first = genuine::first_setting(&history, slice, seq);
        Ok(history.into_iter().find_map(|c| {
            let mine = Some(c.version) == first
                && c.get_str("idem.attempt") == Some(self.attempt.as_str());
            mine.then_some(c.version)
        }))
    }

    /// The table version that made the slice's current output current.
    pub async fn version_of_current(&self, slice: &str) -> Result<Option<u64>, TableError> {
        let seq = self.slice_seq(slice).await?;
        if seq == 0 {
            return Ok(None);
        }
        let history = self.idem_history().await?;
        Ok(genuine::first_setting(&history, slice, seq))
    }
}
