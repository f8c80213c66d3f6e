//! Run key and manifest: what a run was (module, engine, inputs, params,
//! target) and what it produced, as an in-toto Statement in RFC 8785
//! canonical JSON. No wall-clock field: a rerun yields the same bytes.

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::digest::Digest;
use crate::slice::InputObject;

/// Version of the run-key material; bump when its meaning changes.
pub const FORMAT: u32 = 1;
/// in-toto Statement type.
pub const STATEMENT_TYPE: &str = "https://in-toto.io/Statement/v1";
/// Our predicate type.
pub const PREDICATE_TYPE: &str = "https://idem.dev/run-manifest/v1";

/// A manifest that cannot be read.
#[derive(Debug, Error)]
pub enum ManifestError {
    /// Not JSON, or not an idem manifest.
    #[error("not an idem run manifest: {0}")]
    Invalid(String),
}

/// The slice as the run saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SliceRecord {
    /// Slice id, e.g. `date=2026-10-01`.
    pub id: String,
    /// `partition`, `files` or `delta`.
    pub kind: String,
    /// URL that input paths are relative to.
    pub root: String,
    /// Pinned inputs in read order.
    pub inputs: Vec<InputObject>,
}

/// Where and how the output is committed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TargetRecord {
    /// Table URL.
    pub table: String,
    /// `overwrite-partition`, `merge` or `append`.
    pub mode: String,
    /// Partition column and value, for overwrite-partition.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub partition: Option<(String, String)>,
    /// Merge key columns.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub keys: Vec<String>,
}

/// Everything that determines a run's output: hashed into the run key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunSpec {
    /// [`FORMAT`].
    pub format: u32,
    /// Digest of the component.
    pub module: Digest,
    /// Engine fingerprint (idem, wasmtime, profile).
    pub engine: String,
    /// The pinned inputs.
    pub slice: SliceRecord,
    /// Transform parameters.
    pub params: serde_json::Value,
    /// Scheduler's logical date (the guest sees it, so it is part of the key).
    pub logical_date: Option<String>,
    /// Rows per input batch (guest state may depend on batch boundaries).
    pub batch_rows: u32,
    /// The commit target.
    pub target: TargetRecord,
}

/// What the run produced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunResult {
    /// Input rows.
    pub rows_in: u64,
    /// Output rows.
    pub rows_out: u64,
    /// Logical digest of the output.
    pub output_digest: Digest,
    /// Fuel consumed, when metered (deterministic).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub fuel: Option<u64>,
}

/// A run manifest.
#[derive(Debug, Clone, PartialEq)]
pub struct Manifest {
    /// sha256 of the canonical [`RunSpec`].
    pub run_key: Digest,
    /// What was run.
    pub spec: RunSpec,
    /// What came out.
    pub result: RunResult,
}

/// RFC 8785 canonical JSON of any serializable value.
pub fn canonical_json<T: Serialize>(v: &T) -> Vec<u8> {
    serde_jcs::to_vec(v).expect("idem's manifest types always serialize")
}

/// The run key of `spec`.
pub fn run_key(spec: &RunSpec) -> Digest {
    Digest::of_bytes(&canonical_json(spec))
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Predicate {
    run_key: Digest,
    run: RunSpec,
    result: RunResult,
}

#[derive(Serialize, Deserialize)]
struct Subject {
    name: String,
    digest: std::collections::BTreeMap<String, String>,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Statement {
    #[serde(rename = "_type")]
    ty: String,
    subject: Vec<Subject>,
    predicate_type: String,
    predicate: Predicate,
}

impl Manifest {
    /// A manifest for `spec` with `result`.
    pub fn new(spec: RunSpec, result: RunResult) -> Self {
        Manifest {
            run_key: run_key(&spec),
            spec,
            result,
        }
    }

    /// The canonical bytes (what is stored and hashed).
    pub fn to_bytes(&self) -> Vec<u8> {
        let subject = Subject {
            name: format!("{}#{}", self.spec.target.table, self.spec.slice.id),
            digest: [(
                "sha256".to_string(),
                self.result.output_digest.hex().to_string(),
            )]
            .into(),
        };
        canonical_json(&Statement {
            ty: STATEMENT_TYPE.into(),
            subject: vec![subject],
            predicate_type: PREDICATE_TYPE.into(),
            predicate: Predicate {
                run_key: self.run_key.clone(),
                run: self.spec.clone(),
                result: self.result.clone(),
            },
        })
    }

    /// The manifest's own digest.
    pub fn digest(&self) -> Digest {
        Digest::of_bytes(&self.to_bytes())
    }

    /// Parse stored bytes; the run key is checked against the spec.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, ManifestError> {
        let st: Statement =
            serde_json::from_slice(bytes).map_err(|e| ManifestError::Invalid(e.to_string()))?;
        if st.ty != STATEMENT_TYPE || st.predicate_type != PREDICATE_TYPE {
            return Err(ManifestError::Invalid(format!(
                "unexpected types {} / {}",
                st.ty, st.predicate_type
            )));
        }
        let m = Manifest::new(st.predicate.run, st.predicate.result);
        if m.run_key != st.predicate.run_key {
            return Err(ManifestError::Invalid(format!(
                "its run key {} does not match its contents ({}): it was edited",
                st.predicate.run_key, m.run_key
            )));
        }
        Ok(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(params: &str) -> RunSpec {
        RunSpec {
            format: FORMAT,
            module: Digest::of_bytes(b"m"),
            engine: "idem/0 wasmtime/48 profile/strict".into(),
            slice: SliceRecord {
                id: "date=2026-10-01".into(),
                kind: "partition".into(),
                root: "file:///d/".into(),
                inputs: vec![],
            },
            params: serde_json::from_str(params).unwrap(),
            logical_date: Some("2026-10-01".into()),
            batch_rows: 8192,
            target: TargetRecord {
                table: "file:///t/".into(),
                mode: "append".into(),
                partition: None,
                keys: vec![],
            },
        }
    }

    #[test]
    fn run_key_ignores_json_spelling_but_not_values() {
        assert_eq!(
            run_key(&spec(r#"{"a": 10, "b": "x"}"#)),
            run_key(&spec(r#"{"b":"x","a":10.0}"#))
        );
        assert_ne!(
            run_key(&spec(r#"{"a": 10}"#)),
            run_key(&spec(r#"{"a": 11}"#))
        );
    }

    #[test]
    fn manifest_round_trips_and_detects_edits() {
        let m = Manifest::new(
            spec("{}"),
            RunResult {
                rows_in: 3,
                rows_out: 2,
                output_digest: Digest::of_bytes(b"o"),
                fuel: None,
            },
        );
        let bytes = m.to_bytes();
        assert_eq!(Manifest::from_bytes(&bytes).unwrap(), m);
        assert_eq!(m.to_bytes(), bytes, "not deterministic");
        let edited = String::from_utf8(bytes)
            .unwrap()
            .replace("\"batchRows\":8192", "\"batchRows\":1");
        assert!(Manifest::from_bytes(edited.as_bytes()).is_err());
    }
}
