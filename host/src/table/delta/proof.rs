//! What a Delta table itself says about each slice, for `idem audit` and
//! `idem verify`: the commit that made each slice's output current, and the
//! rows the table holds for a slice now (read back and digested).

use std::collections::BTreeMap;

use object_store::ObjectStoreExt as _;

use super::apps::nfiles_app;
use super::{Delta, genuine, ownership};
use crate::digest::{Digest, OutputDigester};
use crate::table::error::TableError;
use crate::table::readback::digest_file;
use crate::table::record::SliceCommit;

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
    /// Every slice's latest commit, by slice id.
    pub async fn slice_commits(&self) -> Result<Vec<SliceCommit>, TableError> {
        let mut latest: BTreeMap<String, SliceCommit> = BTreeMap::new();
        let history = self.idem_history().await?;
        // Only commits idem made: a copy of one's commitInfo by another
        // writer (naming a forged manifest, say) is not the slice's commit.
        let ours = genuine::versions(&history);
        for commit in &history {
            let (version, info) = (commit.version, &commit.idem);
            let Some((slice, seq)) = commit.sets_slice().filter(|_| ours.contains(&version)) else {
                continue;
            };
            if latest.get(slice).is_some_and(|c| c.seq >= seq) {
                continue;
            }
            let output_digest = digest_field(info, "idem.outputDigest");
            let current = match &output_digest {
                Some(d) => self.slice_seq(slice).await? == seq && self.holds(slice, d, seq).await?,
                None => false,
            };
            latest.insert(
                slice.to_string(),
                SliceCommit {
                    slice: slice.to_string(),
                    seq,
                    version,
                    mode: info
                        .get("idem.mode")
                        .and_then(|v| v.as_str())
                        .unwrap_or("?")
                        .to_string(),
                    partition: info
                        .get("idem.partition")
                        .and_then(|v| v.as_str())
                        .map(str::to_string),
                    manifest_digest: digest_field(info, "idem.manifestDigest"),
                    output_digest,
                    run_key: digest_field(info, "idem.runKey"),
                    output_columns: info.get("idem.outputColumns").and_then(|v| {
                        v.as_array().map(|a| {
                            a.iter()
                                .filter_map(|c| c.as_str().map(str::to_string))
                                .collect()
                        })
                    }),
                    current,
                },
            );
        }
        Ok(latest.into_values().collect())
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
        let files = ownership::data_files(&self.delta).await?;
        Ok(ownership::unowned(&files, &owners)
            .into_iter()
            .map(|f| f.path.clone())
            .collect())
    }

    /// Why the table no longer holds exactly the rows of `c` (`None` when
    /// it does), for slices whose rows live in their own files.
    pub async fn slice_drift(&self, c: &SliceCommit) -> Result<Option<String>, TableError> {
        let partition = c.partition.as_deref().and_then(|p| p.split_once('='));
        self.file_drift(&c.slice, c.seq, partition).await
    }

    /// [`ownership::drift`] over the loaded snapshot: the one rule that
    /// memo, commit and audit all apply to slices that own their files.
    pub(super) async fn file_drift(
        &self,
        slice: &str,
        seq: i64,
        partition: Option<(&str, &str)>,
    ) -> Result<Option<String>, TableError> {
        let files = ownership::data_files(&self.delta).await?;
        let nfiles = self.txn(&nfiles_app(slice, seq)).await?;
        Ok(ownership::drift(&files, slice, seq, nfiles, partition))
    }

    /// Read the rows the table holds for slice `c` now, in output order,
    /// and digest them the way a run digests its output. Only for slices
    /// whose rows live in their own files (overwrite-partition, append).
    pub async fn digest_slice_rows(&self, c: &SliceCommit) -> Result<(Digest, u64), TableError> {
        let files = ownership::data_files(&self.delta).await?;
        let store = self.delta.log_store().object_store(None);
        let mut digester = OutputDigester::new();
        let partition = c.partition.as_deref().and_then(|p| p.split_once('='));
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
                partition,
                |b| b,
                &mut digester,
            )
            .map_err(|e| err(&e))?;
        }
        let rows = digester.rows();
        Ok((digester.finish(), rows))
    }
}
