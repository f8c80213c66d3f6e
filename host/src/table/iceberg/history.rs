//! An Iceberg table's snapshots as idem reads them ([`LogCommit`]): each
//! snapshot's summary holds idem's keys as text.

use std::collections::{HashMap, HashSet};

use super::Iceberg;
use crate::table::record::{LogCommit, from_text};

impl Iceberg {
    /// Every snapshot's idem fields, newest first (`version` is the
    /// snapshot's sequence number).
    pub fn idem_history(&self) -> Vec<LogCommit> {
        let Some(m) = self.metadata() else {
            return Vec::new();
        };
        let published = self.main_ancestry();
        let mut out: Vec<LogCommit> = m
            .snapshots()
            // A branch write is history once published (main's ancestry).
            .filter(|s| {
                !s.summary().additional_properties.contains_key(WAP_BRANCH)
                    || self.is_published(s.snapshot_id(), &published)
            })
            .map(|s| {
                let props = &s.summary().additional_properties;
                // Summaries hold text; some fields are numbers and JSON in
                // a Delta commitInfo.
                let mut idem: HashMap<String, serde_json::Value> = props
                    .iter()
                    .filter(|(k, _)| k.starts_with("idem."))
                    .map(|(k, v)| (k.clone(), from_text(k, v)))
                    .collect();
                // Written before its audit: its publish named the manifest.
                if let Some(manifest) = self.branch_manifest(s.snapshot_id()) {
                    idem.entry("idem.manifestDigest".into())
                        .or_insert_with(|| manifest.into());
                }
                LogCommit {
                    version: s.sequence_number().max(0) as u64,
                    data_change: true,
                    idem,
                    shape: None,
                    touches_files: true,
                    txns: Vec::new(),
                }
            })
            .collect();
        out.sort_by_key(|c| std::cmp::Reverse(c.version));
        out
    }
}

/// The summary key of a snapshot written to a branch before its audit.
pub(super) const WAP_BRANCH: &str = "idem.wapBranch";

impl Iceberg {
    /// The snapshot ids of `main`'s ancestry.
    pub(super) fn main_ancestry(&self) -> HashSet<i64> {
        let Some(m) = self.metadata() else {
            return HashSet::new();
        };
        let mut out = HashSet::new();
        let mut next = m.current_snapshot().cloned();
        // At most one step per snapshot: a planted parent cycle ends.
        while let Some(s) = next.filter(|s| out.insert(s.snapshot_id())) {
            next = s
                .parent_snapshot_id()
                .and_then(|p| m.snapshot_by_id(p).cloned());
        }
        out
    }

    /// Whether branch snapshot `id` was published: named by its publish,
    /// or reached from main (`ancestry`).
    fn is_published(&self, id: i64, ancestry: &HashSet<i64>) -> bool {
        self.branch_manifest(id).is_some() || ancestry.contains(&id)
    }

    /// Why snapshot `id` is not a version to read: a branch write not
    /// (yet) published, whose audit failed or did not finish.
    pub(super) fn unpublished(&self, id: i64) -> Option<String> {
        let s = self.metadata()?.snapshot_by_id(id)?;
        let branch = s.summary().additional_properties.get(WAP_BRANCH)?;
        (!self.is_published(id, &self.main_ancestry())).then(|| {
            format!(
                "snapshot {id} is a write-audit-publish write to branch `{}` that was never published (its audit failed or did not finish): read a version of main",
                crate::text::shown(branch, 200)
            )
        })
    }
}
