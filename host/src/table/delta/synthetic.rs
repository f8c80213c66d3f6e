//! A long history, fast: commits shaped like idem's own slice commits (one
//! data file each, tagged for its slice, with the app transactions and
//! commitInfo keys a run's commit carries), written straight through
//! delta-rs without running a transform. The benchmark's history figure
//! and the tests that count what a run reads on a table of many versions
//! build their tables with it (`idem sample-history`); no run uses it.

use object_store::path::Path;
use object_store::{ObjectStoreExt as _, PutPayload};

use super::{Delta, replace};
use crate::digest::Digest;
use crate::table::commit::{CommitRequest, Output};
use crate::table::error::TableError;
use crate::table::mode::Mode;

impl Delta {
    /// Append `commits` commits to this table, the `i`-th committing slice
    /// `<prefix>-<i>`: on an overwrite-partition table to partition
    /// `<column>=<prefix>-<i>` with a copy of the table's first data file;
    /// on a merge table no rows (a MERGE that matched nothing).
    pub async fn sample_history(
        &mut self,
        commits: u64,
        column: &str,
        prefix: &str,
    ) -> Result<(), TableError> {
        if self.created_mode().as_deref() == Some("merge") {
            return self.sample_merges(commits, prefix).await;
        }
        let files = self.data_files().await?;
        let Some(template) = files.first().cloned() else {
            return Err(TableError::Output(
                "sample history: the table has no data file to copy (commit one slice first)"
                    .into(),
            ));
        };
        let store = self.delta.log_store().object_store(None);
        let err = |e: &dyn std::fmt::Display| TableError::Delta {
            what: "writing sample history".into(),
            detail: e.to_string(),
        };
        let bytes = store
            .get(&Path::from(template.path.as_str()))
            .await
            .map_err(|e| err(&e))?
            .bytes()
            .await
            .map_err(|e| err(&e))?;
        for i in 0..commits {
            let value = format!("{prefix}-{i}");
            let mut add = template.clone();
            add.path = format!("{column}={value}/part-sample-{i}.parquet");
            add.partition_values = [(column.to_string(), Some(value.clone()))].into();
            store
                .put(
                    &Path::from(add.path.as_str()),
                    PutPayload::from(bytes.clone()),
                )
                .await
                .map_err(|e| err(&e))?;
            let partition = crate::slice::Partition::one(column, value.clone());
            let mode = Mode::OverwritePartition {
                partition: partition.clone(),
            };
            let digest = Digest::of_bytes(value.as_bytes());
            let actions = replace::actions(&value, 1, &[add], &[]);
            let props = self.props(&sample(&value, &mode, &digest), 1, Some(1), None);
            self.write_log(props, actions, replace::overwrite(&partition))
                .await?;
        }
        Ok(())
    }

    /// [`Self::sample_history`] on a merge table.
    async fn sample_merges(&mut self, commits: u64, prefix: &str) -> Result<(), TableError> {
        let mode = Mode::Merge { keys: Vec::new() };
        for i in 0..commits {
            let slice = format!("{prefix}-{i}");
            let digest = Digest::of_bytes(slice.as_bytes());
            let props = self.props(&sample(&slice, &mode, &digest), 1, None, None);
            self.write_log(props, Vec::new(), replace::append()).await?;
        }
        Ok(())
    }
}

/// A sample commit's request: its digests all `digest` (made up).
fn sample<'a>(slice: &'a str, mode: &'a Mode, digest: &'a Digest) -> CommitRequest<'a> {
    CommitRequest {
        slice,
        mode,
        output_digest: digest,
        run_key: digest,
        manifest_digest: Some(digest),
        envelope_digest: None,
        output: Output::Staged(Vec::new()),
        schema: None,
        schema_change: Default::default(),
        progress: None,
        branch: None,
    }
}
