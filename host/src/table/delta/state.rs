//! What the Delta log says about a slice: its app transactions (the
//! slice's sequence number, the output digest each commit made current,
//! how many files it added, how far a source was consumed), whether an
//! output is current, and since when.

use super::apps::{at_app, out_app, slice_app};
use super::{Delta, MODE_PROPERTY, genuine, shape};
use crate::digest::Digest;
use crate::table::commit::SliceState;
use crate::table::error::TableError;
use crate::table::mode::Mode;
use crate::table::record::LogCommit;

impl Delta {
    /// The slices committed at the loaded version whose ids lie under
    /// `prefix` (`prefix/...`), sorted: from the app transactions, or,
    /// where those cannot be read all at once, from idem's commits.
    pub async fn slices_under(&self, prefix: &str) -> Result<Vec<String>, TableError> {
        let app = slice_app(&format!("{prefix}/"));
        let start = &app[slice_app("").len()..];
        let mut found: std::collections::BTreeSet<String> = match self.all_txns().await? {
            Some(all) => all
                .keys()
                .filter_map(|k| k.strip_prefix(slice_app("").as_str()))
                .filter(|s| s.starts_with(start))
                .map(str::to_string)
                .collect(),
            None => self
                .idem_history()
                .await?
                .iter()
                .filter_map(|c| c.sets_slice().map(|(s, _)| s))
                .filter(|s| s.starts_with(start))
                .map(str::to_string)
                .collect(),
        };
        if found.len() > crate::slice::MAX_SLICES_UNDER {
            return Err(TableError::UnreadableInput {
                location: self.url.to_string(),
                detail: format!(
                    "it holds more than {} slices under {prefix}/: read them in narrower slices",
                    crate::slice::MAX_SLICES_UNDER
                ),
            });
        }
        let mut out = Vec::with_capacity(found.len());
        for s in std::mem::take(&mut found) {
            if self.slice_seq(&s).await? > 0 {
                out.push(s);
            }
        }
        Ok(out)
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
            Mode::OverwritePartition { partition } => {
                self.file_drift(slice, seq, Some(partition)).await?
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
    /// them. Reads the commits after the slice's, or after the table's
    /// latest seal (see `seal`), not the history before them.
    pub async fn foreign_commit_since(
        &self,
        since: Option<u64>,
    ) -> Result<Option<String>, TableError> {
        // When log cleanup removed the slice's commit, every retained commit
        // is later than it.
        let first = self.foreign_after(since.unwrap_or(0)).await?;
        Ok(first.map(|v| {
            format!(
                "version {v} changed data and was committed by another writer after the slice's commit ({})",
                since
                    .map(|s| format!("version {s}"))
                    .unwrap_or_else(|| "no longer in the log".into())
            )
        }))
    }

    /// Whether idem made commit `c`: it sets a slice and is the first
    /// commit to carry that slice's transaction since the version it was
    /// made for (see `genuine`). Commits of an idem that did not record
    /// that version are judged by the log's history.
    pub(super) async fn made_by_idem(&self, c: &LogCommit) -> Result<bool, TableError> {
        let Some((slice, seq)) = c.sets_slice() else {
            return Ok(false);
        };
        let Some(at) = c.made_for().and_then(|at| u64::try_from(at).ok()) else {
            let history = self.idem_history().await?;
            return Ok(genuine::versions(&history).contains(&c.version));
        };
        if at > c.version {
            return Ok(false);
        }
        // The commit that made the slice's current sequence number current,
        // when known, is the one.
        if self.slice_seq(slice).await? == seq
            && let Some(first) = self.txn_since(&slice_app(slice)).await?
        {
            return Ok(first == c.version);
        }
        for v in at..c.version {
            if let Some(earlier) = self.commit_at(v).await?
                && earlier.sets_slice() == Some((slice, seq))
            {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// The slice's current commit: the first commit that set the slice to
    /// its current sequence number. After the latest checkpoint it is the
    /// commit from which the app transaction holds its value; before it,
    /// it is found from the version it was made for (`idem:at:<slice>`,
    /// set by the same commit), reading forward from there. A commit of an
    /// idem that did not record that version, or an `idem:at` another
    /// commit set, is looked up in the log's history. `None`: no commit,
    /// or gone from the log.
    pub(super) async fn current_commit(
        &self,
        slice: &str,
    ) -> Result<Option<LogCommit>, TableError> {
        let seq = self.slice_seq(slice).await?;
        if seq == 0 {
            return Ok(None);
        }
        let sets = |c: &LogCommit| c.sets_slice() == Some((slice, seq));
        if let Some(c) = self.setter(&slice_app(slice), &at_app(slice), sets).await? {
            return Ok(Some(c));
        }
        let history = self.idem_history().await?;
        let v = genuine::first_setting(&history, slice, seq);
        Ok(history.into_iter().find(|c| Some(c.version) == v))
    }

    /// The manifest the slice's current commit names (the first commit
    /// carrying its app transaction: see `genuine`), `None` without one.
    pub async fn current_manifest(&self, slice: &str) -> Result<Option<Digest>, TableError> {
        Ok(self.current_commit(slice).await?.and_then(|c| {
            c.get_str("idem.manifestDigest")
                .and_then(|d| Digest::parse(d).ok())
        }))
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

    /// The table's shape now (see `shape::of_metadata`).
    pub(super) fn shape(&self) -> Option<String> {
        Some(shape::of_metadata(&self.metadata_value()?))
    }

    /// The loaded version's `metaData`, as JSON.
    fn metadata_value(&self) -> Option<serde_json::Value> {
        let snapshot = self.delta.snapshot().ok()?;
        serde_json::to_value(snapshot.metadata()).ok()
    }

    /// The shape a commit leaves, and its columns (see
    /// `shape::columns_of`): the loaded version's, or `meta`'s when the
    /// commit sets it.
    pub(super) fn shape_after(
        &self,
        meta: Option<&deltalake::kernel::Metadata>,
    ) -> Option<(String, String)> {
        let meta = match meta {
            Some(m) => serde_json::to_value(m).ok()?,
            None => self.metadata_value()?,
        };
        Some((shape::of_metadata(&meta), shape::columns_of(&meta)?))
    }

    /// Why the table's schema, partitioning or column mapping is no longer
    /// what it was at version `since` (`None`: unchanged): the shape the
    /// slice's commit recorded (`idem.shape`) against the table's now. A
    /// commit that recorded none (an older idem), or one gone from the log,
    /// is judged by the log's history.
    /// Columns appended since (`--on-schema-change append-new-columns`,
    /// or another writer's ADD COLUMNS) are not a change: the slice's rows
    /// read as they did, and null in the new columns.
    pub async fn shape_drift(&self, since: Option<u64>) -> Result<Option<String>, TableError> {
        let commit = match since {
            Some(v) => self.commit_at(v).await?,
            None => None,
        };
        let recorded = |key: &str| {
            commit
                .as_ref()
                .and_then(|c| c.get_str(key).map(str::to_string))
        };
        match (recorded("idem.shape"), since, self.shape()) {
            (Some(then), _, Some(now)) if then == now => Ok(None),
            (Some(then), Some(v), Some(_)) => {
                let columns = match recorded("idem.columns") {
                    Some(c) => Some(c),
                    // An idem before column lists recorded the shape only.
                    None => self.columns_at(v, &then).await,
                };
                let appended = columns
                    .zip(self.metadata_value())
                    .is_some_and(|(then, now)| shape::appended_to(&then, &now));
                Ok((!appended).then(|| shape::changed(v)))
            }
            _ => Ok(shape::drift(&self.idem_history().await?, since)),
        }
    }

    /// The column list (`shape::columns_of`) of the table at version `v`
    /// when its shape there is `shape`, what the commit of an idem before
    /// column lists recorded; `None` when that version cannot be loaded
    /// (its log cleaned up) or had another shape (then the change is
    /// judged as a whole).
    async fn columns_at(&self, v: u64, shape: &str) -> Option<String> {
        let mut then = self.delta.clone();
        then.load_version(v).await.ok()?;
        let meta = serde_json::to_value(then.snapshot().ok()?.metadata()).ok()?;
        (shape::of_metadata(&meta) == shape)
            .then(|| shape::columns_of(&meta))
            .flatten()
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
        Ok(self
            .current_commit(slice)
            .await?
            .filter(|c| c.get_str("idem.attempt") == Some(self.attempt.as_str()))
            .map(|c| c.version))
    }

    /// The table version that made the slice's current output current.
    pub async fn version_of_current(&self, slice: &str) -> Result<Option<u64>, TableError> {
        Ok(self.current_commit(slice).await?.map(|c| c.version))
    }
}
