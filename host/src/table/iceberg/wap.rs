//! Write-audit-publish on an Iceberg branch ([`crate::table::wap`]).
//!
//! The write is an ordinary commit attempt (its checks, data files and
//! snapshot, a child of `main`'s) whose snapshot is set on the branch, not
//! on `main`; the slice's record is not touched, its would-be record is
//! kept in `idem.wap.<slice>` ([`WapRecord`]): what `idem show` names while
//! it is unpublished. Publishing is one catalog swap: `main` set to that
//! snapshot (a fast-forward: only while `main` is still its parent), the
//! slice's record naming the run's manifest, the branch and its
//! `idem.wap.` entry removed when they still name that snapshot.

use std::collections::HashMap;

use iceberg::spec::{Snapshot, SnapshotReference, SnapshotRetention, TableMetadata};

use super::branches::{
    MANIFEST_PROP, WAP_PROP, WapRecord, branch_ref, check_takeover, expired_manifest_entries,
    idem_branch,
};
use super::properties::{PARTITION_PROP, SLICE_PROP};
use super::{Iceberg, ice_err};
use crate::table::commit::{Attempt, CommitRequest, SliceOutcome, SliceState, until_decided};
use crate::table::error::TableError;
use crate::table::mode::Mode;
use crate::table::wap::{Branched, Pending, Publish};

/// What a write to a branch came to.
pub enum Wrote {
    /// The output is on the branch, awaiting its audit.
    Branch(Branched),
    /// `main` already holds the output: nothing was written.
    Current(SliceOutcome),
}

impl Iceberg {
    /// Commit `req` (its `branch` set) to its branch. An earlier round's
    /// branch write of this handle (`main` moved before its publish) is
    /// dropped when `main` turns out to hold the output.
    pub async fn write_branch(&mut self, req: CommitRequest<'_>) -> Result<Wrote, TableError> {
        let slice = req.slice.to_string();
        let earlier = self.branched.take();
        // Each attempt plans its write in `branched` before its swap: the
        // one that landed (its answer lost or not) is the last planned.
        match self.commit(req).await? {
            SliceOutcome::Committed { drift, .. } => {
                let mut w = self.branched.clone().ok_or_else(|| TableError::Iceberg {
                    what: "writing to the branch".into(),
                    detail: "the branch write landed but was not planned here: run again".into(),
                })?;
                w.drift = drift;
                self.branched = Some(w.clone());
                Ok(Wrote::Branch(w.branched()))
            }
            other => {
                self.branched = None;
                if let Some(w) = earlier {
                    self.drop_branch_write(&slice, &w).await;
                }
                Ok(Wrote::Current(other))
            }
        }
    }

    /// The slice's unpublished output, for `idem show`.
    pub fn pending(&self, slice: &str) -> Option<Pending> {
        let w = self.wap_record(slice)?;
        let m = self.metadata()?;
        let there = branch_ref(m, &w.branch).is_some_and(|r| r.snapshot_id == w.snapshot);
        let published = self.record(slice).is_some();
        Some(Pending {
            branch: w.branch,
            snapshot: w.snapshot,
            version: w.version,
            run_key: w.record.run_key,
            output_digest: w.record.output,
            branch_there: there,
            published,
        })
    }

    /// The next metadata of a branch write: `snapshot` on `branch`, the
    /// would-be `record` in `idem.wap.<slice>`; `main` and the slice's
    /// record untouched (and its `mode`, when the table has none yet).
    pub(super) fn branch_metadata(
        &self,
        (slice, mode): (&str, &Mode),
        m: &TableMetadata,
        base_path: Option<&str>,
        snapshot: Snapshot,
        wap: &WapRecord,
    ) -> Result<TableMetadata, TableError> {
        check_takeover(m, &wap.branch, slice)?;
        let mut props = HashMap::from([(
            format!("{WAP_PROP}{slice}"),
            serde_json::to_string(wap).unwrap_or_default(),
        )]);
        // A table another engine created takes the mode of idem's first
        // write into it, a branch write too (its audit reads the branch's
        // snapshot as idem's slice).
        if !m.properties().contains_key(super::MODE_PROP) {
            props.insert(super::MODE_PROP.to_string(), mode.name().to_string());
        }
        let mut b = m.clone().into_builder(base_path.map(str::to_string));
        // The slice's earlier branch, under another name: replaced.
        if let Some(old) = self.wap_record(slice).filter(|o| o.branch != wap.branch)
            && idem_branch(m, &old.branch, slice).is_some_and(|r| r.snapshot_id == old.snapshot)
        {
            b = b.remove_ref(&old.branch);
        }
        Ok(b.set_branch_snapshot(snapshot, &wap.branch)
            .map_err(ice_err(format!(
                "adding the snapshot to branch {}",
                wap.branch
            )))?
            .set_properties(props)
            .map_err(ice_err("recording the branch write"))?
            .build()
            .map_err(ice_err("building the table metadata"))?
            .metadata)
    }

    /// Publish the branch write `p.branched` (this handle's own): `main`
    /// fast-forwarded to its snapshot in one catalog swap. `Conflict` when
    /// `main` moved since the write (write and audit again).
    pub async fn publish(&mut self, p: &Publish<'_>) -> Result<SliceOutcome, TableError> {
        let w = self
            .branched
            .clone()
            .filter(|w| w.branched() == *p.branched)
            .ok_or_else(|| TableError::Iceberg {
                what: "publishing".into(),
                detail: format!(
                    "snapshot {} is not this run's branch write",
                    p.branched.snapshot
                ),
            })?;
        let mut swapped = false;
        until_decided(p.slice, async |_, _| {
            self.publish_attempt(p, &w, &mut swapped).await
        })
        .await
    }

    async fn publish_attempt(
        &mut self,
        p: &Publish<'_>,
        w: &WapRecord,
        swapped: &mut bool,
    ) -> Result<Attempt, TableError> {
        self.refresh().await?;
        if *swapped {
            // The swap's answer was lost: ours if the record names it.
            return match self.record(p.slice) {
                Some(r) if r.attempt == self.attempt && r.snapshot == w.snapshot => {
                    Ok(Attempt::Done(self.published(w)))
                }
                _ => Err(TableError::Iceberg {
                    what: "publishing".into(),
                    detail: "the catalog swap's outcome was lost and the table does not show the publish: run again".into(),
                }),
            };
        }
        if let SliceState::Current { since } =
            self.slice_state(p.slice, p.output_digest, p.mode).await?
        {
            // A twin run published the same output: this branch write
            // is not left behind as if its audit had failed.
            // (`main` did not hold it when the branch was written.)
            self.drop_branch_write(p.slice, w).await;
            return Ok(Attempt::Done(SliceOutcome::Unchanged {
                since,
                raced: true,
            }));
        }
        let (base, m) = self.current.clone().ok_or_else(|| TableError::NoTable {
            location: self.location.clone(),
        })?;
        if m.current_snapshot_id() != w.parent || m.snapshot_by_id(w.snapshot).is_none() {
            return Err(TableError::Conflict(format!(
                "main moved since the output was written to branch {} (snapshot {}), so it cannot be fast-forwarded",
                w.branch, w.snapshot
            )));
        }
        let next = self.published_metadata(p, w, &m, &base)?;
        match self.swap(next, Some(&base), swapped).await {
            Ok(()) => Ok(Attempt::Done(self.published(w))),
            // Lost, or its answer lost (`swapped`: the next attempt looks).
            Err(TableError::Conflict(why)) => Ok(Attempt::Raced(why)),
            Err(e) => Err(e),
        }
    }

    fn published(&self, w: &WapRecord) -> SliceOutcome {
        SliceOutcome::Committed {
            version: w.version,
            drift: w.drift.clone(),
        }
    }

    /// The metadata after publishing `w`: `main` at its snapshot (keeping
    /// `main`'s retention), the slice's record naming the manifest, its
    /// partition owned, the branch and its entry dropped while they name
    /// this snapshot.
    fn published_metadata(
        &self,
        p: &Publish<'_>,
        w: &WapRecord,
        m: &TableMetadata,
        base: &str,
    ) -> Result<TableMetadata, TableError> {
        let mut record = w.record.clone();
        record.manifest = p.manifest_digest.as_str().to_string();
        record.envelope = p.envelope_digest.map(|d| d.as_str().to_string());
        let mut props = HashMap::from([(
            format!("{SLICE_PROP}{}", p.slice),
            serde_json::to_string(&record).unwrap_or_default(),
        )]);
        if let Some(part) = &record.partition {
            props.insert(format!("{PARTITION_PROP}{part}"), p.slice.to_string());
        }
        // As a commit to `main` does ([`super::replace`]): a table another
        // engine created takes the mode of idem's first publish into it.
        if !m.properties().contains_key(super::MODE_PROP) {
            props.insert(super::MODE_PROP.to_string(), p.mode.name().to_string());
        }
        // The snapshot's summary could not name the manifest (written
        // before the audit): this entry does, for as long as the snapshot
        // lives (entries of expired snapshots are dropped here).
        props.insert(
            format!("{MANIFEST_PROP}{}", w.snapshot),
            record.manifest.clone(),
        );
        let mut removed = self.released(p.slice, record.partition.as_ref(), m);
        removed.extend(expired_manifest_entries(m));
        let entry = format!("{WAP_PROP}{}", p.slice);
        if self
            .wap_record(p.slice)
            .is_some_and(|o| o.snapshot == w.snapshot)
        {
            removed.push(entry);
        }
        let main = SnapshotReference::new(
            w.snapshot,
            branch_ref(m, "main")
                .map(|r| r.retention)
                .unwrap_or(SnapshotRetention::Branch {
                    min_snapshots_to_keep: None,
                    max_snapshot_age_ms: None,
                    max_ref_age_ms: None,
                }),
        );
        let mut b = m
            .clone()
            .into_builder(Some(base.to_string()))
            .set_ref("main", main)
            .map_err(ice_err("fast-forwarding main"))?
            .set_properties(props)
            .map_err(ice_err("recording the slice"))?
            .remove_properties(&removed)
            .map_err(ice_err("recording the slice"))?;
        if idem_branch(m, &w.branch, p.slice).is_some_and(|r| r.snapshot_id == w.snapshot) {
            b = b.remove_ref(&w.branch);
        }
        Ok(b.build()
            .map_err(ice_err("building the table metadata"))?
            .metadata)
    }
}
