//! The run spec (everything that determines a run's output, hashed into
//! the run key) and the run's result: the data a manifest states.

use serde::{Deserialize, Serialize};

use crate::digest::Digest;
use crate::slice::{ColumnRecord, InputObject, TextFormat, TextInput};

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
    /// For a Delta input, the pinned table version (its log holds the
    /// partition values the guest sees, which are not in the files).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delta_version: Option<u64>,
    /// For a Delta input: only the rows that slice of the pinned table
    /// owns (a pipeline stage reading what its upstream stage committed
    /// for the same date).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delta_slice: Option<String>,
    /// For text inputs (CSV, TSV, JSON lines): how they were decoded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<TextRecord>,
}

/// A side input as the run read it: the name the transform asked for,
/// and its pinned files (a table's at `deltaVersion`, or Parquet files).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SideRecord {
    /// The name the transform reads it by.
    pub name: String,
    /// The table read (its URL, or an Iceberg catalog entry's canonical
    /// location), for a table; absent for Parquet files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub table: Option<String>,
    /// What was read, pinned (kind `delta` for a table of either format,
    /// or `files`).
    pub input: SliceRecord,
}

/// How a slice's text inputs were decoded: their format, the schema
/// declared or inferred from them, and the bad rows allowed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TextRecord {
    /// `csv`, `tsv` or `jsonl`.
    pub format: String,
    /// The columns taken, by name, in order.
    pub columns: Vec<ColumnRecord>,
    /// Whether the schema was inferred from the inputs (else declared).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub inferred: bool,
    /// Most bad rows skipped and counted (`--max-rejects`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub max_rejects: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl TextRecord {
    /// The record of `t`.
    pub fn of(t: &TextInput) -> Self {
        TextRecord {
            format: t.format.name().into(),
            columns: crate::slice::columns_of(&t.schema),
            inferred: t.inferred,
            max_rejects: t.max_rejects,
        }
    }

    /// What it records, or why it records nothing this idem decodes.
    pub fn input(&self) -> Result<TextInput, String> {
        let format = TextFormat::from_name(&self.format)
            .ok_or_else(|| format!("text format `{}` is not one idem reads", self.format))?;
        Ok(TextInput {
            format,
            schema: crate::slice::schema_of(&self.columns)?,
            inferred: self.inferred,
            max_rejects: self.max_rejects,
        })
    }
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
    pub partition: Option<crate::slice::Partition>,
    /// Merge key columns.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub keys: Vec<String>,
    /// `append-new-columns` when the run may add the output's new columns
    /// to the table (`--on-schema-change`); absent for `fail`, the default
    /// (so run keys made before the policy existed are unchanged).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub on_schema_change: Option<String>,
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
    /// Side inputs (tables read whole beside the slice), in name order;
    /// absent when none (so run keys made before they existed stand).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sides: Vec<SideRecord>,
    /// Transform parameters.
    pub params: serde_json::Value,
    /// Scheduler's logical date (the guest sees it, so it is part of the key).
    pub logical_date: Option<String>,
    /// Rows per input batch (guest state may depend on batch boundaries).
    pub batch_rows: u32,
    /// The commit target.
    pub target: TargetRecord,
    /// Expectations the output must meet to be published
    /// ([`crate::expect`]), in their canonical text.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub expectations: Vec<String>,
    /// The audit module that must pass the output before it is published.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audit: Option<AuditRecord>,
}

/// An audit module and its params (write-audit-publish).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditRecord {
    /// Digest of the audit component.
    pub module: Digest,
    /// Its params.
    pub params: serde_json::Value,
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
    /// The input columns the transform declared it reads, when it
    /// declared them (it read only those). A function of the module, the
    /// params and the input schema, all in the run key already.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub columns: Option<Vec<String>>,
    /// The columns the transform took dictionary-encoded (`input-encoding`),
    /// when it took any. Like `columns`, fixed by what the run key holds.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dictionaries: Vec<String>,
    /// The expectations' verdicts (all passed: a run that fails one
    /// publishes nothing).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub audits: Vec<crate::expect::Verdict>,
    /// Rows of text inputs skipped as bad, when the run allowed any
    /// (`--max-rejects`). Fixed by the inputs and the spec.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rejected_rows: Option<u64>,
}

/// RFC 8785 canonical JSON of any serializable value.
pub fn canonical_json<T: Serialize>(v: &T) -> Vec<u8> {
    serde_jcs::to_vec(v).expect("idem's manifest types always serialize")
}

/// The run key of `spec`.
pub fn run_key(spec: &RunSpec) -> Digest {
    Digest::of_bytes(&canonical_json(spec))
}
