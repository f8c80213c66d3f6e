//! A slice's commit as one Iceberg snapshot: `files` added, the slice's
//! earlier files (and its partition's, or a merge's rewritten ones)
//! deleted, the slice's record updated in the same metadata file; then
//! the catalog swap. A lost swap is a `Conflict`.

use std::collections::{HashMap, HashSet};

use iceberg::MetadataLocation;
use iceberg::spec::{DataContentType, DataFile, Snapshot, TableMetadata};

use super::branches::{WapRecord, expired_manifest_entries};
use super::catalog::Swapped;
use super::live::Live;
use super::manifests::NewSnapshot;
use super::ownership::{file_name, in_partition, names_digest, owned_by, slice_tag};
use super::properties::{PARTITION_PROP, SLICE_PROP, SliceRecord};
use super::summary::{snapshot, summary};
use super::{Iceberg, catalog, ice_err};
use crate::fault::point as fault_point;
use crate::slice::Partition;
use crate::table::commit::{CommitRequest, lost_response};
use crate::table::error::TableError;
use crate::table::mode::Mode;

impl Iceberg {
    /// One snapshot: `files` added, the slice's earlier files (and its
    /// partition's) deleted, the slice's record updated; then the catalog
    /// swap. A lost swap is a `Conflict`. The new sequence number.
    pub(super) async fn replace(
        &mut self,
        req: &CommitRequest<'_>,
        base_path: Option<&str>,
        m: &TableMetadata,
        files: &[DataFile],
        merge_removed: Option<&HashSet<String>>,
        swapped: &mut bool,
    ) -> Result<u64, TableError> {
        let live = match base_path {
            Some(_) => self.live_files().await?,
            None => Vec::new(),
        };
        let partition = match req.mode {
            Mode::OverwritePartition { partition } => Some(partition),
            _ => None,
        };
        // Merge tables hold many slices' rows per file; keys, not
        // files, are owned (checked while merging).
        if merge_removed.is_none() {
            check_owner(req.slice, m, &live, partition)?;
        }
        if let Some(p) = partition {
            check_one_spec(&live, p)?;
        }
        let removed = removed_files(&live, req.slice, partition, merge_removed);
        let snap = NewSnapshot::plan(m, &self.attempt)?;
        let list_path = self.write_manifests(&snap, m, files, &removed).await?;
        // The summary: what engines show, and idem's fields.
        let seq = self.record(req.slice).map(|r| r.seq).unwrap_or(0) + 1;
        let props = summary(req, seq, &self.attempt, &live, &removed, files);
        let snapshot = snapshot(&snap, m, list_path, props, !removed.is_empty());
        let record = slice_record(req, seq, &snap, files, &self.attempt);
        let Some(branch) = req.branch else {
            let next = self.next_metadata(req, m, base_path, snapshot, &record)?;
            self.swap(next, base_path, swapped).await?;
            return Ok(snap.seq_no as u64);
        };
        // Write-audit-publish: on the branch, main untouched.
        let wap = WapRecord::new(branch, &snap, &record);
        let next = self.branch_metadata((req.slice, req.mode), m, base_path, snapshot, &wap)?;
        // Planned before the swap: a lost answer is checked against it.
        self.branched = Some(wap);
        self.swap(next, base_path, swapped).await?;
        Ok(snap.seq_no as u64)
    }

    /// The partition property a slice gives up when its commit owns
    /// `partition` (a --files slice may move): the one it held before.
    pub(super) fn released(
        &self,
        slice: &str,
        partition: Option<&String>,
        m: &TableMetadata,
    ) -> Vec<String> {
        self.record(slice)
            .and_then(|r| r.partition)
            .filter(|p| Some(p) != partition)
            .map(|p| format!("{PARTITION_PROP}{p}"))
            .filter(|k| m.properties().get(k).map(String::as_str) == Some(slice))
            .into_iter()
            .collect()
    }

    /// The table's next metadata: `snapshot` on `main`, the slice's
    /// `record` (and the partition it owns) in the properties.
    fn next_metadata(
        &self,
        req: &CommitRequest<'_>,
        m: &TableMetadata,
        base_path: Option<&str>,
        snapshot: Snapshot,
        record: &SliceRecord,
    ) -> Result<TableMetadata, TableError> {
        // A slice owns the partition of its latest commit only.
        let mut released = self.released(req.slice, record.partition.as_ref(), m);
        // A branch write of the slice still waiting is stale now.
        let (stale, branch) = self.stale_branch_write(req.slice, m);
        released.extend(stale);
        released.extend(expired_manifest_entries(m));
        let mut table_props = HashMap::from([(
            format!("{SLICE_PROP}{}", req.slice),
            serde_json::to_string(record).unwrap_or_default(),
        )]);
        if let Some(p) = &record.partition {
            table_props.insert(format!("{PARTITION_PROP}{p}"), req.slice.to_string());
        }
        // A table another engine created takes the mode of idem's first
        // commit into it (what `checks` holds later runs to, and audit
        // reads a slice's mode from).
        if !m.properties().contains_key(super::MODE_PROP) {
            table_props.insert(super::MODE_PROP.to_string(), req.mode.name().to_string());
        }
        let mut b = m.clone().into_builder(base_path.map(str::to_string));
        if let Some(branch) = branch {
            b = b.remove_ref(&branch);
        }
        // `main` keeps whatever retention it has.
        Ok(b.set_branch_snapshot(snapshot, "main")
            .map_err(ice_err("adding the snapshot"))?
            .set_properties(table_props)
            .map_err(ice_err("recording the slice"))?
            .remove_properties(&released)
            .map_err(ice_err("recording the slice"))?
            .build()
            .map_err(ice_err("building the table metadata"))?
            .metadata)
    }

    /// Write the metadata file `next` and swap it in as the table's
    /// current one (the catalog's compare-and-swap from `base_path`, or
    /// the new table's registration); `swapped` once it landed.
    pub(super) async fn swap(
        &mut self,
        next: TableMetadata,
        base_path: Option<&str>,
        swapped: &mut bool,
    ) -> Result<(), TableError> {
        let next_path = match base_path {
            Some(b) => b
                .parse::<MetadataLocation>()
                .map_err(ice_err("naming the next metadata file"))?
                .with_next_version()
                .with_new_metadata(&next),
            None => MetadataLocation::new_with_metadata(next.location(), &next),
        };
        next.write_to(&self.io, &next_path)
            .await
            .map_err(ice_err("writing the table metadata"))?;
        // Data, manifests and metadata are written, the catalog is not: a
        // kill here must leave the table as it was.
        fault_point("before-log-write");
        let landed = match base_path {
            Some(b) => catalog::swap(&self.loc, b, &next_path.to_string()).await?,
            None => catalog::create(&self.loc, &next_path.to_string()).await?,
        };
        match landed {
            Swapped::Landed => {}
            Swapped::Lost => {
                let _ = self.io.delete(next_path.to_string()).await;
                return Err(TableError::Conflict(format!(
                    "another writer committed to {} since {}",
                    self.location,
                    base_path.unwrap_or("it did not exist")
                )));
            }
            // It may have landed: nothing it names is deleted, and the
            // table is re-read to see (as for a lost response below).
            Swapped::Unknown(why) => {
                *swapped = true;
                return Err(TableError::Conflict(why));
            }
        }
        *swapped = true;
        lost_response()?;
        // Landed: a failure to re-read the table now does not make the
        // commit a failure (the snapshot and version are known).
        if let Err(e) = self.refresh().await {
            tracing::warn!(
                "committed to {}, but re-reading it failed: {e}",
                self.location
            );
            self.current = Some((next_path.to_string(), next));
        }
        Ok(())
    }
}

/// Who may replace the slice's files: its partition is free or its own;
/// without one, the table holds no data file another writer added.
fn check_owner(
    slice: &str,
    m: &TableMetadata,
    live: &[Live],
    partition: Option<&Partition>,
) -> Result<(), TableError> {
    if let Some(partition) = partition {
        if let Some(owner) = m.properties().get(&format!("{PARTITION_PROP}{partition}"))
            && owner != slice
        {
            return Err(TableError::Owned {
                partition: partition.to_string(),
                owner: owner.clone(),
                slice: slice.to_string(),
            });
        }
    } else if let Some(f) = live.iter().find(|l| {
        l.file.content_type() == DataContentType::Data
            && !file_name(l.file.file_path()).starts_with("idem-")
    }) {
        let count = live
            .iter()
            .filter(|l| !file_name(l.file.file_path()).starts_with("idem-"))
            .count();
        return Err(TableError::Foreign {
            count,
            example: f.file.file_path().to_string(),
        });
    }
    Ok(())
}

/// A partition's files are told by their values under the current
/// partition spec: a file of an earlier one (the partitioning changed)
/// may hold the partition's rows under other fields' values, and would be
/// left beside the slice's, or replaced though it holds other rows.
fn check_one_spec(live: &[Live], partition: &Partition) -> Result<(), TableError> {
    match live
        .iter()
        .find(|l| l.file.content_type() == DataContentType::Data && !l.current_spec)
    {
        None => Ok(()),
        Some(l) => Err(TableError::Partitioning(format!(
            "the table's partitioning changed and data file {} was written under an earlier partition spec: idem cannot tell which such files hold rows of {partition}; rewrite them under the current spec (Spark: CALL system.rewrite_data_files) or write to another table",
            l.file.file_path()
        ))),
    }
}

/// The data files the commit deletes: a merge's rewritten ones, else the
/// slice's own and its partition's.
fn removed_files<'a>(
    live: &'a [Live],
    slice: &str,
    partition: Option<&Partition>,
    merge_removed: Option<&HashSet<String>>,
) -> Vec<&'a Live> {
    let tag = slice_tag(slice);
    live.iter()
        .filter(|l| l.file.content_type() == DataContentType::Data)
        .filter(|l| match merge_removed {
            Some(set) => set.contains(l.file.file_path()),
            None => {
                owned_by(l.file.file_path(), &tag) || partition.is_some_and(|p| in_partition(l, p))
            }
        })
        .collect()
}

/// The slice's record after its commit `seq` in snapshot `snap`.
fn slice_record(
    req: &CommitRequest<'_>,
    seq: i64,
    snap: &NewSnapshot,
    files: &[DataFile],
    attempt: &str,
) -> SliceRecord {
    let mut names: Vec<String> = files
        .iter()
        .map(|f| file_name(f.file_path()).to_string())
        .collect();
    SliceRecord {
        seq,
        output: req.output_digest.as_str().to_string(),
        version: snap.seq_no as u64,
        files: files.len(),
        names: names_digest(&mut names),
        attempt: attempt.to_string(),
        partition: match req.mode {
            Mode::OverwritePartition { partition } => Some(partition.to_string()),
            _ => None,
        },
        run_key: req.run_key.as_str().to_string(),
        manifest: req
            .manifest_digest
            .map(|d| d.as_str().to_string())
            .unwrap_or_default(),
        envelope: req.envelope_digest.map(|d| d.as_str().to_string()),
        columns: req
            .schema
            .as_ref()
            .map(|s| s.fields().iter().map(|f| f.name().to_string()).collect()),
        snapshot: snap.snapshot_id,
        schema: Some(snap.schema.schema_id()),
    }
}
