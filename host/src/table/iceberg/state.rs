//! Whether a slice's output is current in an Iceberg table (its record
//! names the output, the table still holds the slice's files and schema,
//! no other writer changed a merge slice's rows), and since when.

use iceberg::spec::Operation;

use super::Iceberg;
use super::properties::SliceRecord;
use crate::digest::Digest;
use crate::table::commit::SliceState;
use crate::table::error::TableError;
use crate::table::mode::Mode;

impl Iceberg {
    /// Whether `digest` is the slice's current committed output *and* the
    /// table still holds exactly the rows idem committed for it.
    pub async fn slice_state(
        &self,
        slice: &str,
        digest: &Digest,
        mode: &Mode,
    ) -> Result<SliceState, TableError> {
        let Some(rec) = self.record(slice) else {
            return Ok(SliceState::Other);
        };
        if rec.output != digest.as_str() {
            return Ok(SliceState::Other);
        }
        if let Some(reason) = self.shape_drift(&rec) {
            return Ok(SliceState::Drifted { reason });
        }
        let partition = match mode {
            Mode::OverwritePartition { partition } => Some(partition),
            Mode::Merge { .. } => {
                let id = (rec.snapshot != 0).then_some(rec.snapshot);
                return Ok(match self.foreign_since(rec.version, id) {
                    None => SliceState::Current {
                        since: Some(rec.version),
                    },
                    Some(reason) => SliceState::Drifted { reason },
                });
            }
            Mode::Append => None,
        };
        let live = self.live_files().await?;
        Ok(match Self::drift(&live, slice, &rec, partition) {
            None => SliceState::Current {
                since: Some(rec.version),
            },
            Some(reason) => SliceState::Drifted { reason },
        })
    }

    /// Merge slices share files, so their rows cannot be told apart by
    /// file: a snapshot after `since` that idem did not make may have
    /// changed them (the current snapshot's ancestry; an expired one is
    /// not seen).
    pub fn foreign_commit_since(&self, since: Option<u64>) -> Option<String> {
        self.foreign_since(since.unwrap_or(0), None)
    }

    /// The first snapshot, walking back from the current one to the one at
    /// sequence `since` (or to snapshot `id`, when known), that another
    /// writer made and that changed data (a `replace`, i.e. compaction,
    /// does not). Not reaching snapshot `id` (a rollback past it, or its
    /// expiry) counts as a change too.
    pub(super) fn foreign_since(&self, since: u64, id: Option<i64>) -> Option<String> {
        let m = self.metadata()?;
        let mut next = m.current_snapshot().cloned();
        let mut first = None;
        let mut reached = id.is_none();
        while let Some(s) = next {
            if Some(s.snapshot_id()) == id {
                reached = true;
                break;
            }
            if (s.sequence_number() as u64) <= since {
                break;
            }
            if !s.summary().additional_properties.contains_key("idem.slice")
                && s.summary().operation != Operation::Replace
            {
                first = Some(s.sequence_number());
            }
            next = s
                .parent_snapshot_id()
                .and_then(|p| m.snapshot_by_id(p).cloned());
        }
        if let Some(v) = first {
            return Some(format!(
                "snapshot {v} was committed by another writer after the slice's commit (sequence {since})"
            ));
        }
        (!reached).then(|| {
            format!(
                "the slice's commit (sequence {since}) is no longer an ancestor of the table's current snapshot (rolled back, or expired)"
            )
        })
    }

    /// The slice's commit sequence number (0 = never committed); at a
    /// pinned snapshot, the one its ancestry last committed.
    pub fn slice_seq(&self, slice: &str) -> i64 {
        let Some(id) = self.pinned else {
            return self.record(slice).map(|r| r.seq).unwrap_or(0);
        };
        // At a pinned snapshot: the slice's latest commit in its ancestry.
        let Some(m) = self.metadata() else {
            return 0;
        };
        let mut next = m.snapshot_by_id(id).cloned();
        while let Some(s) = next {
            let p = &s.summary().additional_properties;
            if p.get("idem.slice").map(String::as_str) == Some(slice) {
                return p.get("idem.seq").and_then(|v| v.parse().ok()).unwrap_or(1);
            }
            next = s
                .parent_snapshot_id()
                .and_then(|p| m.snapshot_by_id(p).cloned());
        }
        0
    }

    /// The slices committed at the pinned (or current) snapshot whose ids
    /// lie under `prefix` (`prefix/...`), sorted.
    pub fn slices_under(&self, prefix: &str) -> Result<Vec<String>, TableError> {
        let Some(m) = self.metadata() else {
            return Ok(Vec::new());
        };
        let start = format!("{prefix}/");
        let mut found: Vec<String> = m
            .properties()
            .keys()
            .filter_map(|k| k.strip_prefix(super::properties::SLICE_PROP))
            .filter(|s| s.starts_with(&start))
            .map(str::to_string)
            .collect();
        if found.len() > crate::slice::MAX_SLICES_UNDER {
            return Err(TableError::UnreadableInput {
                location: self.location.clone(),
                detail: format!(
                    "it holds more than {} slices under {start}: read them in narrower slices",
                    crate::slice::MAX_SLICES_UNDER
                ),
            });
        }
        // At a pinned snapshot: a slice whose current commit is at or
        // before it (its ancestry may have expired), or one its ancestry
        // still shows.
        let pinned = self
            .pinned
            .and_then(|id| m.snapshot_by_id(id))
            .map(|s| s.sequence_number());
        let before_pin = |s: &str| match (pinned, self.record(s)) {
            (Some(p), Some(r)) => i64::try_from(r.version).is_ok_and(|v| v <= p),
            _ => false,
        };
        found.retain(|s| before_pin(s) || self.slice_seq(s) > 0);
        found.sort();
        Ok(found)
    }

    /// The table version that made the slice's current output current.
    pub fn version_of_current(&self, slice: &str) -> Option<u64> {
        self.record(slice).map(|r| r.version)
    }

    /// The manifest the slice's current commit names.
    pub fn current_manifest(&self, slice: &str) -> Option<Digest> {
        Digest::parse(&self.record(slice)?.manifest).ok()
    }

    /// Why the table's schema is no longer the one the slice's snapshot
    /// was committed with (a column renamed, added or retyped by another
    /// writer; `None` when it is, or when that snapshot has expired).
    pub(super) fn shape_drift(&self, rec: &SliceRecord) -> Option<String> {
        let m = self.metadata()?;
        // The record's own schema id; for records written before it was
        // kept, the snapshot's (unknown once the snapshot has expired:
        // routine maintenance, so no verdict rather than drift on every
        // rerun).
        let then = match rec.schema {
            Some(id) => id,
            None => m.snapshot_by_id(rec.snapshot)?.schema_id()?,
        };
        // Optional columns appended since leave the slice's rows as they
        // were (null in the new columns).
        let appended = m
            .schema_by_id(then)
            .is_some_and(|s| super::evolve::appended_to(s, m.current_schema()));
        (then != m.current_schema_id() && !appended).then(|| {
            format!(
                "the table's current schema (id {}) is not the one the slice's commit wrote (id {then}): another writer changed its columns, and readers no longer see the columns idem committed",
                m.current_schema_id()
            )
        })
    }
}
