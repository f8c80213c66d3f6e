//! An overwrite-partition or append slice's commit: one commit that adds
//! the output's data files (tagged with the slice) and removes every file
//! the slice held before (and, for overwrite-partition, every file of its
//! partition), so a slice's new output replaces exactly its own rows.

use std::collections::HashSet;

use arrow::datatypes::Field;

use deltalake::kernel::transaction::{CommitBuilder, CommitProperties};
use deltalake::kernel::{Action, Add, Remove};
use deltalake::protocol::{DeltaOperation, SaveMode};

use super::commit::classify;
use super::files::write_staged;
use super::{Delta, apps, delta_err, evolve, genuine, ownership};
use crate::fault::point as fault_point;
use crate::slice::Partition;
use crate::table::commit::{CommitRequest, Output, lost_response};
use crate::table::datafile::target_file_bytes;
use crate::table::error::TableError;
use crate::table::mode::Mode;
use crate::table::record::LogCommit;

impl Delta {
    /// Commit the slice's sequence number `seq`: the output's data files
    /// (`written` ahead, else written now from the staged output and kept
    /// there for later attempts) in place of the files the slice held.
    pub(super) async fn replace(
        &mut self,
        req: &CommitRequest<'_>,
        seq: i64,
        written: &mut Option<Vec<Add>>,
        added: &[Field],
    ) -> Result<u64, TableError> {
        let files = self.data_files().await?;
        let (removed, operation) = match req.mode {
            Mode::OverwritePartition { partition } => {
                self.check_partition_free(&files, req.slice, partition)
                    .await?;
                let removed = partition_files(&files, req.slice, partition);
                (removed, overwrite(partition))
            }
            _ => (append_removals(&files, req.slice)?, append()),
        };
        let adds = self.output_files(req, written, added).await?;
        // The appended columns, in the same commit as the rows that have them.
        let meta = match added {
            [] => None,
            _ => Some(evolve::metadata_with(
                &self.delta,
                &evolve::evolved(&self.delta, added)?.0,
            )?),
        };
        // Data files are written, the log entry is not: a kill here must
        // leave the table as it was; two hosts here at once must race.
        fault_point("before-log-write");
        let mut actions = actions(req.slice, seq, &adds, &removed);
        let props = self.props(req, seq, Some(adds.len()), meta.as_ref());
        actions.extend(meta.map(Action::Metadata));
        self.write_log(props, actions, operation).await
    }

    /// `partition` must be free or the slice's own: no other slice's
    /// files in it, and no other slice's latest commit naming it.
    async fn check_partition_free(
        &self,
        files: &[Add],
        slice: &str,
        partition: &Partition,
    ) -> Result<(), TableError> {
        if let Some(owner) = ownership::other_owner(files, slice, partition) {
            return Err(TableError::Owned {
                partition: partition.to_string(),
                owner: owner.to_string(),
                slice: slice.to_string(),
            });
        }
        if let Some(owner) = self.partition_owner_in_log(slice, partition).await? {
            return Err(TableError::Owned {
                partition: partition.to_string(),
                owner,
                slice: slice.to_string(),
            });
        }
        Ok(())
    }

    /// The slice id that an earlier idem commit recorded as the owner of
    /// `partition` (covers owners whose output was empty):
    /// the latest commit naming the partition (the one from which its app
    /// transaction holds its value, or found from the version it was made
    /// for) owns it while it is its slice's current commit (a --files
    /// slice that moved on gave its old partition up; no other slice could
    /// take the partition while it was owned). Without such a commit (an
    /// older idem made it), the log's history says.
    async fn partition_owner_in_log(
        &self,
        slice: &str,
        partition: &Partition,
    ) -> Result<Option<String>, TableError> {
        let at_app = apps::partition_at_app(partition);
        let partition = partition.to_string();
        let part_app = format!("idem:partition:{partition}");
        let Some(pseq) = self.txn(&part_app).await? else {
            return Ok(None);
        };
        // `idem:partition-at` grows with every commit naming the partition
        // (two slices can hold the same sequence number, not the same
        // version), so the commit that set it is the latest to name it.
        let Some(at) = self.txn(&at_app).await? else {
            return self.partition_owner_in_history(slice, &partition).await;
        };
        let names = |c: &LogCommit| {
            c.get_str("idem.partition") == Some(partition.as_str())
                && c.sets_slice().is_some_and(|(_, seq)| seq == pseq)
                && c.txns.iter().any(|(a, v)| *a == at_app && *v == at)
        };
        let Some(c) = self.setter(&at_app, &at_app, names).await? else {
            return self.partition_owner_in_history(slice, &partition).await;
        };
        let Some((owner, seq)) = c.sets_slice() else {
            return Ok(None);
        };
        if owner == slice || self.slice_seq(owner).await? != seq {
            return Ok(None);
        }
        Ok(Some(owner.to_string()))
    }

    /// [`Self::partition_owner_in_log`] from the log's history.
    async fn partition_owner_in_history(
        &self,
        slice: &str,
        partition: &str,
    ) -> Result<Option<String>, TableError> {
        let history = self.idem_history().await?;
        // idem's commits only: another writer's commitInfo claims nothing.
        let ours = genuine::versions(&history);
        let mut seen = HashSet::new();
        Ok(history.into_iter().find_map(|c| {
            if !ours.contains(&c.version) {
                return None;
            }
            let owner = c.slice()?;
            let part = c.get_str("idem.partition")?;
            let latest = seen.insert(owner.to_string());
            (latest && part == partition && owner != slice).then(|| owner.to_string())
        }))
    }

    /// The output's data files: written ahead, or written now from the
    /// staged output (once: later attempts reuse them).
    async fn output_files(
        &self,
        req: &CommitRequest<'_>,
        written: &mut Option<Vec<Add>>,
        added: &[Field],
    ) -> Result<Vec<Add>, TableError> {
        if let Some(adds) = written {
            return Ok(adds.clone());
        }
        let staged = match &req.output {
            Output::Staged(paths) => paths.as_slice(),
            Output::Written(_) => &[],
        };
        let adds = write_staged(
            &self.delta,
            staged,
            req.mode,
            target_file_bytes()?,
            req.schema_change,
            added,
        )
        .await?;
        *written = Some(adds.clone());
        Ok(adds)
    }

    /// Write the commit's log entry; the new version.
    pub(super) async fn write_log(
        &mut self,
        props: CommitProperties,
        actions: Vec<Action>,
        operation: DeltaOperation,
    ) -> Result<u64, TableError> {
        let snapshot = self
            .delta
            .snapshot()
            .map_err(delta_err("reading the snapshot"))?;
        self.log_written = true;
        let done = CommitBuilder::from(props)
            .with_actions(actions)
            .build(Some(snapshot), self.delta.log_store(), operation)
            .await
            .map_err(classify)?;
        let version = done.version();
        lost_response()?;
        self.committed(done.snapshot, version).await?;
        Ok(version as u64)
    }
}

/// The files an overwrite-partition commit removes: the partition's
/// files, and the slice's own files wherever they are (a --files slice may
/// have moved partitions).
fn partition_files<'a>(files: &'a [Add], slice: &str, partition: &Partition) -> Vec<&'a Add> {
    files
        .iter()
        .filter(|f| {
            ownership::in_partition(f, partition)
                || ownership::tag(f, ownership::TAG_SLICE) == Some(slice)
        })
        .collect()
}

/// The files an append commit removes: the slice's own. A file no idem
/// commit wrote is refused (its rows belong to no slice).
fn append_removals<'a>(files: &'a [Add], slice: &str) -> Result<Vec<&'a Add>, TableError> {
    let foreign = ownership::untagged(files);
    if let Some(f) = foreign.first() {
        return Err(TableError::Foreign {
            count: foreign.len(),
            example: f.path.clone(),
        });
    }
    Ok(ownership::slice_files(files, slice))
}

/// The operation an overwrite-partition commit records.
pub(super) fn overwrite(partition: &Partition) -> DeltaOperation {
    let predicate: Vec<String> = partition
        .levels()
        .iter()
        .map(|(c, v)| super::sql::equals(c, v))
        .collect();
    DeltaOperation::Write {
        mode: SaveMode::Overwrite,
        partition_by: Some(partition.columns()),
        predicate: Some(predicate.join(" AND ")),
    }
}

/// The operation an append commit records.
pub(super) fn append() -> DeltaOperation {
    DeltaOperation::Write {
        mode: SaveMode::Append,
        partition_by: None,
        predicate: None,
    }
}

/// The commit's actions: `adds` tagged as the slice's files of commit
/// `seq`, in output order, and `removed` removed.
pub(super) fn actions(slice: &str, seq: i64, adds: &[Add], removed: &[&Add]) -> Vec<Action> {
    let mut actions: Vec<Action> = adds
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let mut a = a.clone();
            a.tags = Some(ownership::tags(slice, seq, i));
            Action::Add(a)
        })
        .collect();
    actions.extend(removed.iter().map(|f| Action::Remove(remove(f))));
    actions
}

/// A remove action for a data file of the snapshot.
fn remove(f: &Add) -> Remove {
    Remove {
        path: f.path.clone(),
        data_change: true,
        deletion_timestamp: Some(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis() as i64)
                .unwrap_or(0),
        ),
        extended_file_metadata: Some(true),
        partition_values: Some(f.partition_values.clone()),
        size: Some(f.size),
        tags: f.tags.clone(),
        deletion_vector: f.deletion_vector.clone(),
        base_row_id: f.base_row_id,
        default_row_commit_version: f.default_row_commit_version,
    }
}
