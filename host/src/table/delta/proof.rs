//! What a Delta table itself says about each slice, for `idem audit` and
//! `idem verify`: the commit that made each slice's output current, and the
//! rows the table holds for a slice now (read back and digested).

use std::collections::BTreeMap;

use object_store::ObjectStoreExt as _;

use super::apps::nfiles_app;
use super::{Delta, genuine, ownership};
use crate::digest::{Digest, OutputDigester};
use crate::slice::Partition;
use crate::table::error::TableError;
use crate::table::readback::digest_file;
use crate::table::record::{LogCommit, SliceCommit};

/// A digest key of a commitInfo.
fn digest_field(
    info: &std::collections::HashMap<String, serde_json::Value>,
    k: &str,
) -> Option<Digest> {
    info.get(k)
        .and_then(|v| v.as_str())
        .and_then(|s| Digest::parse(s).ok())
}

impl Delta {
    /// Every slice's latest commit, by slice id (the log's history, read
    /// once).
    pub async fn slice_commits(&self) -> Result<Vec<SliceCommit>, TableError> {
        let mut latest: BTreeMap<String, SliceCommit> = BTreeMap::new();
        let history = self.idem_history().await?;
        // Only commits idem made: a copy of one's commitInfo by another
        // writer (naming a forged manifest, say) is not the slice's commit.
        let ours = genuine::versions(&history);
        for commit in &history {
            let Some((slice, seq)) = commit
                .sets_slice()
                .filter(|_| ours.contains(&commit.version))
            else {
                continue;
            };
            if latest.get(slice).is_some_and(|c| c.seq >= seq) {
                continue;
            }
            latest.insert(slice.to_string(), self.describe(commit).await?);
        }
        Ok(latest.into_values().collect())
    }

    /// The slice's current commit as audit and verify read it: found by
    /// version (see `Delta::current_commit`), not in the history.
    pub async fn slice_commit(&self, slice: &str) -> Result<Option<SliceCommit>, TableError> {
        match self.current_commit(slice).await? {
            Some(c) => Ok(Some(self.describe(&c).await?)),
            None => Ok(None),
        }
    }

    /// What idem's commit `commit` (one that sets a slice) says, and
    /// whether the app transactions still name its output current.
    async fn describe(&self, commit: &LogCommit) -> Result<SliceCommit, TableError> {
        let (slice, seq) = commit.sets_slice().unwrap_or_default();
        let info = &commit.idem;
        let output_digest = digest_field(info, "idem.outputDigest");
        let current = match &output_digest {
            Some(d) => self.slice_seq(slice).await? == seq && self.holds(slice, d, seq).await?,
            None => false,
        };
        Ok(SliceCommit {
            slice: slice.to_string(),
            seq,
            version: commit.version,
            mode: commit.get_str("idem.mode").unwrap_or("?").to_string(),
            partition: commit.get_str("idem.partition").map(str::to_string),
            manifest_digest: digest_field(info, "idem.manifestDigest"),
            output_digest,
            envelope_digest: digest_field(info, "idem.envelopeDigest"),
            run_key: digest_field(info, "idem.runKey"),
            output_columns: info.get("idem.outputColumns").and_then(|v| {
                v.as_array().map(|a| {
                    a.iter()
                        .filter_map(|c| c.as_str().map(str::to_string))
                        .collect()
                })
            }),
            current,
        })
    }

    /// Data files of the table that belong to no slice's current commit
    /// (`commits`: every slice's latest). Empty for a merge table, whose
    /// files are shared by key and proven by their commits instead.
    pub async fn unowned_files(&self, commits: &[SliceCommit]) -> Result<Vec<String>, TableError> {
        // The table's own property (part of its shape: another writer
        // changing it is drift) says it is a merge table; a table created
        // by someone else has none, and then its slices' commits say.
        let merge = match self.created_mode() {
            Some(mode) => mode == "merge",
            None => commits.iter().any(|c| c.mode == "merge"),
        };
        if merge {
            return Ok(Vec::new());
        }
        let owners: std::collections::HashMap<&str, i64> = commits
            .iter()
            .filter(|c| c.current)
            .map(|c| (c.slice.as_str(), c.seq))
            .collect();
        let files = self.data_files().await?;
        Ok(ownership::unowned(&files, &owners)
            .into_iter()
            .map(|f| f.path.clone())
            .collect())
    }

    /// Why the table no longer holds exactly the rows of `c` (`None` when
    /// it does), for slices whose rows live in their own files.
    pub async fn slice_drift(&self, c: &SliceCommit) -> Result<Option<String>, TableError> {
        let partition = c.partition.as_deref().and_then(Partition::from_spelled);
        self.file_drift(&c.slice, c.seq, partition.as_ref()).await
    }

    /// [`ownership::drift`] over the loaded snapshot: the one rule that
    /// memo, commit and audit all apply to slices that own their files.
    pub(super) async fn file_drift(
        &self,
        slice: &str,
        seq: i64,
        partition: Option<&Partition>,
    ) -> Result<Option<String>, TableError> {
        let files = self.data_files().await?;
        let nfiles = self.txn(&nfiles_app(slice, seq)).await?;
        Ok(ownership::drift(&files, slice, seq, nfiles, partition))
    }

    /// Read the rows the table holds for slice `c` now, in output order,
    /// and digest them the way a run digests its output. Only for slices
    /// whose rows live in their own files (overwrite-partition, append).
    pub async fn digest_slice_rows(&self, c: &SliceCommit) -> Result<(Digest, u64), TableError> {
        let files = self.data_files().await?;
        let store = self.delta.log_store().object_store(None);
        let mut digester = OutputDigester::new();
        let partition = c.partition.as_deref().and_then(Partition::from_spelled);
        for f in ownership::slice_files(&files, &c.slice) {
            let path = object_store::path::Path::parse(&f.path)
                .unwrap_or_else(|_| object_store::path::Path::from(f.path.as_str()));
            let err = |e: &dyn std::fmt::Display| TableError::Delta {
                what: format!("reading data file {}", f.path),
                detail: e.to_string(),
            };
            let bytes = store
                .get(&path)
                .await
                .map_err(|e| err(&e))?
                .bytes()
                .await
                .map_err(|e| err(&e))?;
            digest_file(
                bytes,
                c.output_columns.as_deref(),
                partition.as_ref(),
                |b| b,
                &mut digester,
            )
            .map_err(|e| err(&e))?;
        }
        let rows = digester.rows();
        Ok((digester.finish(), rows))
    }
}
