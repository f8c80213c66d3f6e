//! What every idem commit records about itself, whichever the format:
//! the `idem.*` keys ([`keys`]: slice, sequence number, run key, manifest
//! and output digests, mode, this process's attempt id, ...), which Delta
//! writes into the commit's commitInfo and Iceberg into the snapshot's
//! summary; and how a commit of the table's history reads back
//! ([`LogCommit`]) and names a slice's current commit ([`SliceCommit`]).

use std::collections::HashMap;

use serde_json::Value;

use super::commit::CommitRequest;
use super::mode::Mode;
use crate::digest::Digest;

/// The `idem.*` keys of the slice's commit `seq` of `req`, made by the
/// process whose commits carry `attempt`, in the order Delta writes them;
/// `files`: how many data files the commit adds (when it counts them).
pub(super) fn keys(
    req: &CommitRequest<'_>,
    seq: i64,
    attempt: &str,
    files: Option<usize>,
) -> Vec<(String, Value)> {
    let mut keys: Vec<(String, Value)> = vec![
        ("idem.slice".into(), req.slice.into()),
        ("idem.seq".into(), seq.into()),
        ("idem.runKey".into(), req.run_key.as_str().into()),
        (
            "idem.outputDigest".into(),
            req.output_digest.as_str().into(),
        ),
        ("idem.mode".into(), req.mode.name().into()),
        // This process's commit: after a lost response, the run can
        // tell its own commit from a twin host's identical one.
        ("idem.attempt".into(), attempt.into()),
    ];
    if let Some(m) = req.manifest_digest {
        keys.insert(3, ("idem.manifestDigest".into(), m.as_str().into()));
    }
    // Written to a branch before its audit: the manifest is named by the
    // slice's record when the branch is published.
    if let Some(b) = req.branch {
        keys.push(("idem.wapBranch".into(), b.into()));
    }
    if let Some(e) = req.envelope_digest {
        keys.push(("idem.envelopeDigest".into(), e.as_str().into()));
    }
    if let Some(p) = &req.progress {
        keys.push((
            "idem.progress".into(),
            serde_json::to_value(p).unwrap_or_default(),
        ));
    }
    if let Mode::OverwritePartition { partition } = req.mode {
        keys.push(("idem.partition".into(), partition.to_string().into()));
    }
    if let Some(schema) = &req.schema {
        let names: Vec<Value> = schema
            .fields()
            .iter()
            .map(|f| f.name().as_str().into())
            .collect();
        keys.push(("idem.outputColumns".into(), names.into()));
    }
    if let Some(n) = files {
        keys.push(("idem.files".into(), n.into()));
    }
    keys
}

/// A key's value as text, where a format keeps text only (an Iceberg
/// snapshot summary): strings as they are, numbers and lists as JSON.
pub(super) fn as_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A key's value read back from text ([`as_text`]): the keys that are
/// numbers or lists in a Delta commitInfo are typed again.
pub(super) fn from_text(key: &str, text: &str) -> Value {
    let typed = match key {
        "idem.seq" | "idem.files" | "idem.outputColumns" => serde_json::from_str(text).ok(),
        _ => None,
    };
    typed.unwrap_or_else(|| text.into())
}

/// One commit of the table's history (a Delta log entry, an Iceberg
/// snapshot), as idem reads it.
#[derive(Debug, Clone, Default)]
pub struct LogCommit {
    /// The table version.
    pub version: u64,
    /// idem's keys of its commitInfo (`idem.slice`, `idem.seq`, ...);
    /// empty for commits idem did not make.
    pub idem: HashMap<String, Value>,
    /// Whether it added or removed data (`dataChange`); OPTIMIZE, VACUUM
    /// and property changes do not.
    pub data_change: bool,
    /// The shape its `metaData` action set, if it has one (see
    /// `delta::shape::of_metadata`).
    pub shape: Option<String>,
    /// Whether it adds or removes any file, whatever its `dataChange`
    /// flags claim.
    pub touches_files: bool,
    /// Its app transactions (`txn`: app id, version).
    pub txns: Vec<(String, i64)>,
}

impl LogCommit {
    /// The slice idem committed here, if any, as its commitInfo says
    /// (anyone can write commitInfo: see `LogCommit::sets_slice`).
    pub fn slice(&self) -> Option<&str> {
        self.get_str("idem.slice")
    }

    /// A string key of idem's commitInfo.
    pub fn get_str(&self, key: &str) -> Option<&str> {
        self.idem.get(key).and_then(|v| v.as_str())
    }
}

/// The commit that made a slice's output current, as its commitInfo says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SliceCommit {
    /// Slice id.
    pub slice: String,
    /// The slice's commit sequence number.
    pub seq: i64,
    /// Table version of the commit.
    pub version: u64,
    /// `overwrite-partition`, `merge` or `append`.
    pub mode: String,
    /// `column=value` for overwrite-partition.
    pub partition: Option<String>,
    /// The manifest the commit names.
    pub manifest_digest: Option<Digest>,
    /// The output digest the commit names.
    pub output_digest: Option<Digest>,
    /// The signed envelope of the manifest the commit names, when the run
    /// signed it.
    pub envelope_digest: Option<Digest>,
    /// The run key the commit names.
    pub run_key: Option<Digest>,
    /// The output's column names in order (to rebuild partition columns).
    pub output_columns: Option<Vec<String>>,
    /// Whether the app transactions still say this commit is current.
    pub current: bool,
}
