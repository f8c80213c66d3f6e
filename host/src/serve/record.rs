//! A run as the service stores and reports it: what a tenant asked (a
//! [`RunRequest`]), where the run is ([`State`]), how it ended, in a
//! [`RunRecord`], one JSON file per run under the state dir. Records are
//! bounded, in what they keep of a guest's messages and in what is read
//! back from disk.

use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A run's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    /// Waiting for a worker.
    Queued,
    /// Executing.
    Running,
    /// Ended: committed, unchanged or memo.
    Succeeded,
    /// Ended with an error (nothing committed).
    Failed,
}

impl State {
    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            State::Queued => "queued",
            State::Running => "running",
            State::Succeeded => "succeeded",
            State::Failed => "failed",
        }
    }
}

/// What a tenant submits (JSON, camelCase). Paths are relative to the
/// tenant's root.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RunRequest {
    /// `sha256:<hex>` of a module this tenant uploaded.
    pub module: String,
    /// A Parquet dataset root (with `partition`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<String>,
    /// `column=value`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<String>,
    /// Or explicit Parquet files.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<String>,
    /// The target table.
    pub table: String,
    /// overwrite-partition (default with a partition), merge or append.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// Merge keys.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub key: Vec<String>,
    /// Transform params.
    #[serde(default = "empty_object")]
    pub params: Value,
    /// The scheduler's logical date.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logical_date: Option<String>,
    /// Rows per input batch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_rows: Option<u32>,
    /// Expectations (as `--expect`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub expect: Vec<String>,
}

fn empty_object() -> Value {
    Value::Object(Default::default())
}

/// A run as stored and reported.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunRecord {
    /// Its id.
    pub id: String,
    /// The tenant's name.
    pub tenant: String,
    /// What was asked.
    pub request: RunRequest,
    /// Where it is.
    pub state: State,
    /// Unix ms.
    pub submitted_ms: u64,
    /// Unix ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_ms: Option<u64>,
    /// How it ended (`{kind, version, runKey, manifest, rowsIn, rowsOut}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    /// Why it failed (`{kind, message}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<Value>,
    /// Times it was started (a restart re-runs a run that was running).
    #[serde(default)]
    pub attempts: u32,
}

/// The longest text a run record keeps in its result or error (a guest's
/// error message, say); the rest is cut, saying how much.
pub const MAX_MESSAGE_BYTES: usize = crate::text::MAX_GUEST_TEXT;

/// The largest run record file read from the state dir: a request (at
/// most 256 KiB) and bounded texts fit well below it; a bigger file is
/// not a record this service wrote, and is not read.
pub const MAX_RECORD_BYTES: u64 = 1 << 20;

/// `s` cut to [`MAX_MESSAGE_BYTES`] (on a character boundary), with a
/// note of how many bytes were cut; whether it was cut.
pub fn bound_text(s: &mut String) -> bool {
    if s.len() <= MAX_MESSAGE_BYTES {
        return false;
    }
    *s = crate::text::clip(std::mem::take(s), MAX_MESSAGE_BYTES);
    true
}

/// Every string in `v` bounded by [`bound_text`]; whether any was cut.
fn bound_value(v: &mut Value) -> bool {
    match v {
        Value::String(s) => bound_text(s),
        Value::Array(a) => a.iter_mut().fold(false, |cut, x| bound_value(x) | cut),
        Value::Object(o) => o.values_mut().fold(false, |cut, x| bound_value(x) | cut),
        _ => false,
    }
}

impl RunRecord {
    /// Its result and error texts bounded (they hold what a guest or a
    /// store said); whether anything was cut.
    pub fn bound(&mut self) -> bool {
        let a = self.result.as_mut().is_some_and(bound_value);
        let b = self.error.as_mut().is_some_and(bound_value);
        a | b
    }
}

/// A record file read whole only if it is at most [`MAX_RECORD_BYTES`]
/// (read through a bounded reader: the file may grow while it is read).
pub fn read_record(path: &Path) -> Result<RunRecord, String> {
    use std::io::Read as _;
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_RECORD_BYTES + 1).read_to_end(&mut bytes))
        .map_err(|e| e.to_string())?;
    if bytes.len() as u64 > MAX_RECORD_BYTES {
        return Err(format!(
            "it is larger than {MAX_RECORD_BYTES} bytes, which no record of this service is"
        ));
    }
    serde_json::from_slice(&bytes).map_err(|e| e.to_string())
}
