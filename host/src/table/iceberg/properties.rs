//! Slice state in an Iceberg table's properties, written in the same
//! metadata file as the snapshot (so atomically with it):
//! `idem.slice.<slice>` holds the slice's record ([`SliceRecord`]),
//! `idem.partition.<column>=<value>` names the slice that owns a
//! partition.

use super::Iceberg;

/// Table property prefix of a slice's state.
pub(super) const SLICE_PROP: &str = "idem.slice.";
/// Table property prefix of a partition's owner.
pub(super) const PARTITION_PROP: &str = "idem.partition.";

/// What a table's properties say about one slice.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(super) struct SliceRecord {
    /// Commit sequence number of the slice (1 for its first commit).
    pub(super) seq: i64,
    /// Its current output digest.
    pub(super) output: String,
    /// The table sequence number of the snapshot that committed it.
    pub(super) version: u64,
    /// How many data files hold its rows.
    pub(super) files: usize,
    /// sha256 of their names, sorted, one per line.
    pub(super) names: String,
    /// The commit's random id (which process made it).
    pub(super) attempt: String,
    /// `column=value` it owns (overwrite-partition).
    #[serde(default)]
    pub(super) partition: Option<String>,
    /// The run that made it current and its manifest: kept here as well as
    /// in the snapshot's summary, which snapshot expiry removes.
    #[serde(default)]
    pub(super) run_key: String,
    #[serde(default)]
    pub(super) manifest: String,
    /// The output's column names, in order.
    #[serde(default)]
    pub(super) columns: Option<Vec<String>>,
    /// The snapshot that committed it (a merge slice is current only while
    /// that snapshot is an ancestor of the current one).
    #[serde(default)]
    pub(super) snapshot: i64,
    /// The schema id its snapshot was written with (kept here because
    /// snapshot expiry removes the snapshot).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) schema: Option<i32>,
    /// The signed envelope of its manifest, when the run signed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) envelope: Option<String>,
}

impl Iceberg {
    /// The slice's record, if the table has one.
    pub(super) fn record(&self, slice: &str) -> Option<SliceRecord> {
        let m = self.metadata()?;
        let v = m.properties().get(&format!("{SLICE_PROP}{slice}"))?;
        serde_json::from_str(v).ok()
    }
}
