//! The branches write-audit-publish makes, kept tidy ([`super::wap`]):
//! what a branch write records about itself ([`WapRecord`], in
//! `idem.wap.<slice>`), reading a ref, refusing to take over a branch idem did not make for
//! the slice, dropping a branch write that is no longer needed (a twin
//! published the output; a commit to `main` made it stale), and the
//! `idem.manifest.<snapshot>` entries that name a published branch
//! snapshot's manifest.

use std::collections::HashSet;

use iceberg::spec::{SnapshotReference, TableMetadata};

use super::history::WAP_BRANCH;
use super::manifests::NewSnapshot;
use super::properties::SliceRecord;
use super::{Iceberg, ice_err};
use crate::table::error::TableError;
use crate::table::wap::Branched;

/// Table property prefix of a slice's unpublished branch write.
pub(super) const WAP_PROP: &str = "idem.wap.";

/// A slice's output on a branch: where, and the slice's record once it is
/// published (its manifest named then).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(super) struct WapRecord {
    pub(super) branch: String,
    pub(super) snapshot: i64,
    /// `main`'s snapshot when it was written: publishing fast-forwards
    /// only from there.
    pub(super) parent: Option<i64>,
    pub(super) version: u64,
    pub(super) record: SliceRecord,
    /// Why an output that was current is written again (another writer
    /// changed its rows), reported when it is published.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) drift: Option<String>,
}

impl WapRecord {
    pub(super) fn new(branch: &str, snap: &NewSnapshot, record: &SliceRecord) -> Self {
        WapRecord {
            branch: branch.to_string(),
            snapshot: snap.snapshot_id,
            parent: snap.parent.as_ref().map(|p| p.snapshot_id()),
            version: snap.seq_no as u64,
            record: record.clone(),
            drift: None,
        }
    }

    pub(super) fn branched(&self) -> Branched {
        Branched {
            branch: self.branch.clone(),
            snapshot: self.snapshot,
            version: self.version,
        }
    }
}

/// Table property prefix naming the manifest of a published branch
/// snapshot (its summary could not: it was written before the audit).
pub(super) const MANIFEST_PROP: &str = "idem.manifest.";

/// The table's ref `name` (the crate keeps refs private: read from the
/// metadata as it is written).
pub(super) fn branch_ref(m: &TableMetadata, name: &str) -> Option<SnapshotReference> {
    let v = serde_json::to_value(m).ok()?;
    serde_json::from_value(v.get("refs")?.get(name)?.clone()).ok()
}

/// Whether ref `name` is a branch idem made for `slice`: not `main`, a
/// branch whose head snapshot idem wrote to it for that slice (a ref
/// named by a table property, which any writer can edit, is removed only
/// then).
pub(super) fn idem_branch(m: &TableMetadata, name: &str, slice: &str) -> Option<SnapshotReference> {
    let r = branch_ref(m, name).filter(|r| name != "main" && r.is_branch())?;
    let p = &m
        .snapshot_by_id(r.snapshot_id)?
        .summary()
        .additional_properties;
    (p.get(WAP_BRANCH).map(String::as_str) == Some(name)
        && p.get("idem.slice").map(String::as_str) == Some(slice))
    .then_some(r)
}

/// A branch write to `branch` for `slice` may move it only when it is new,
/// idem made it for this slice, or it holds another slice's branch write
/// that nothing waits on any more (a person's or another tool's branch, a
/// tag, or another slice's waiting output is never taken over).
pub(super) fn check_takeover(
    m: &TableMetadata,
    branch: &str,
    slice: &str,
) -> Result<(), TableError> {
    let Some(r) = branch_ref(m, branch) else {
        return Ok(());
    };
    let props = m
        .snapshot_by_id(r.snapshot_id)
        .map(|s| &s.summary().additional_properties);
    let wrote = |p: &&std::collections::HashMap<String, String>| {
        p.get(WAP_BRANCH).map(String::as_str) == Some(branch)
    };
    let other = props.filter(wrote).and_then(|p| p.get("idem.slice"));
    let holds = match other {
        _ if !r.is_branch() => "it is a tag".to_string(),
        Some(s) if s == slice => return Ok(()),
        // Another slice's write, still waiting (its entry names it).
        Some(s) if waiting(m, s, r.snapshot_id) => {
            format!(
                "slice `{}`'s output waiting for its audit",
                crate::text::shown(s, 200)
            )
        }
        Some(_) => return Ok(()),
        None => "snapshots idem did not write to it".to_string(),
    };
    Err(TableError::Setting(format!(
        "branch `{branch}` already exists and {holds}: idem writes only to a branch it made for this slice. Name another one with --wap-branch (or use --wap: a branch per slice)"
    )))
}

/// Whether `slice`'s `idem.wap.` entry names `snapshot`.
fn waiting(m: &TableMetadata, slice: &str, snapshot: i64) -> bool {
    wap_entry(m, slice).is_some_and(|w| w.snapshot == snapshot)
}

/// `slice`'s unpublished branch write, as the table's properties hold it.
fn wap_entry(m: &TableMetadata, slice: &str) -> Option<WapRecord> {
    let v = m.properties().get(&format!("{WAP_PROP}{slice}"))?;
    serde_json::from_str(v).ok()
}

/// `idem.manifest.` entries of snapshots the table no longer has.
pub(super) fn expired_manifest_entries(m: &TableMetadata) -> Vec<String> {
    let live: HashSet<i64> = m.snapshots().map(|s| s.snapshot_id()).collect();
    m.properties()
        .keys()
        .filter(|k| {
            k.strip_prefix(MANIFEST_PROP)
                .and_then(|id| id.parse::<i64>().ok())
                .is_some_and(|id| !live.contains(&id))
        })
        .cloned()
        .collect()
}

impl Iceberg {
    /// Whether a run of `slice` may write to `branch` now.
    pub fn check_branch(&self, branch: &str, slice: &str) -> Result<(), TableError> {
        match self.metadata() {
            Some(m) => check_takeover(m, branch, slice),
            None => Ok(()),
        }
    }

    /// The snapshot that made the slice's output current, while the table
    /// has it.
    pub fn slice_snapshot(&self, slice: &str) -> Option<i64> {
        let id = self.record(slice)?.snapshot;
        self.metadata()?.snapshot_by_id(id).map(|s| s.snapshot_id())
    }

    /// The slice's unpublished branch write, if the table has one.
    pub(super) fn wap_record(&self, slice: &str) -> Option<WapRecord> {
        wap_entry(self.metadata()?, slice)
    }

    /// The manifest a published branch snapshot's entry names.
    pub(super) fn branch_manifest(&self, snapshot: i64) -> Option<String> {
        self.metadata()?
            .properties()
            .get(&format!("{MANIFEST_PROP}{snapshot}"))
            .cloned()
    }

    /// What a commit of `slice` to `main` (not through its branch) makes
    /// stale: its waiting branch write's entry, and the branch while it
    /// still points at that write.
    pub(super) fn stale_branch_write(
        &self,
        slice: &str,
        m: &TableMetadata,
    ) -> (Vec<String>, Option<String>) {
        let Some(w) = self.wap_record(slice) else {
            return (Vec::new(), None);
        };
        let branch = idem_branch(m, &w.branch, slice)
            .is_some_and(|r| r.snapshot_id == w.snapshot)
            .then_some(w.branch);
        (vec![format!("{WAP_PROP}{slice}")], branch)
    }

    /// Remove the branch and the `idem.wap.` entry while they name `w`'s
    /// snapshot, re-reading after a lost race (best effort: a failure
    /// leaves them to inspect, and says so).
    pub(super) async fn drop_branch_write(&mut self, slice: &str, w: &WapRecord) {
        let mut why = String::new();
        for _ in 0..crate::table::commit::MAX_ATTEMPTS {
            match self.drop_once(slice, w).await {
                Ok(()) => return,
                Err(e) => why = e.to_string(),
            }
            if self.refresh().await.is_err() {
                break;
            }
        }
        tracing::warn!(
            "branch {} was left in place: {why}",
            crate::text::shown(&w.branch, 200)
        );
    }

    async fn drop_once(&mut self, slice: &str, w: &WapRecord) -> Result<(), TableError> {
        let Some((base, m)) = self.current.clone() else {
            return Ok(());
        };
        let entry = self
            .wap_record(slice)
            .is_some_and(|o| o.snapshot == w.snapshot)
            .then(|| format!("{WAP_PROP}{slice}"));
        let branch = idem_branch(&m, &w.branch, slice).is_some_and(|r| r.snapshot_id == w.snapshot);
        if entry.is_none() && !branch {
            return Ok(());
        }
        let mut b = m.into_builder(Some(base.clone()));
        if let Some(entry) = entry {
            b = b
                .remove_properties(&[entry])
                .map_err(ice_err("dropping the branch"))?;
        }
        if branch {
            b = b.remove_ref(&w.branch);
        }
        let next = b.build().map_err(ice_err("dropping the branch"))?;
        let mut swapped = false;
        self.swap(next.metadata, Some(&base), &mut swapped).await
    }
}
