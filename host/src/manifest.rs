//! Run key and manifest: what a run was (module, engine, inputs, params,
//! target) and what it produced, as an in-toto Statement in RFC 8785
//! canonical JSON. No wall-clock field: a rerun yields the same bytes.

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::digest::Digest;
use crate::kind::Kind;
use crate::slice::InputObject;

/// Version of the run-key material; bump when its meaning changes.
pub const FORMAT: u32 = 1;
/// in-toto Statement type.
pub const STATEMENT_TYPE: &str = "https://in-toto.io/Statement/v1";
/// Our predicate type.
pub const PREDICATE_TYPE: &str = "https://idem.dev/run-manifest/v1";

/// A manifest that cannot be read, or params that cannot be hashed exactly.
#[derive(Debug, Error)]
pub enum ManifestError {
    /// Not JSON, or not an idem manifest.
    #[error("not an idem run manifest: {0}")]
    Invalid(String),
    /// An idem manifest whose contents no longer hash to its run key.
    #[error("the manifest is not genuine: {0}")]
    Edited(String),
    /// An integer param the canonical JSON would round.
    #[error(
        "{path} = {value} is {side}: the run key's canonical JSON (RFC 8785) holds numbers as doubles, which round integers beyond 2^53, so two different params would share one run key; pass it as a string (\"{value}\")"
    )]
    InexactInteger {
        /// JSON path of the number, e.g. `params.limit` or `params.ids[2]`.
        path: String,
        /// The number as written.
        value: String,
        /// `above 2^53` or `below -2^53`.
        side: &'static str,
    },
}

impl ManifestError {
    /// The kind of the failure (and the CLI's exit code).
    pub fn kind(&self) -> Kind {
        Kind::Input
    }
}

/// Integers of at most this magnitude are exact as doubles.
const EXACT: u64 = 1 << 53;

/// Refuse integers above 2^53 or below -2^53 anywhere in `params`: RFC 8785
/// writes numbers as doubles, so such a number would be rounded and two
/// different params would share a run key. Floats are left alone.
pub fn check_params(params: &serde_json::Value) -> Result<(), ManifestError> {
    let mut path = "params".to_string();
    check_numbers(&mut path, params)
}

/// [`check_params`], plus integer literals in the params' `text` too long
/// for 64 bits (serde_json has already turned those into doubles, so only
/// the text shows they were integers).
pub fn check_params_text(text: &str, params: &serde_json::Value) -> Result<(), ManifestError> {
    check_params(params)?;
    let Some(literal) = long_integer_literal(text) else {
        return Ok(());
    };
    let mut path = "params".to_string();
    let value: f64 = literal.parse().unwrap_or(f64::NAN);
    let found = path_of_double(&mut path, params, value);
    Err(ManifestError::InexactInteger {
        path: if found { path } else { "params".into() },
        side: if literal.starts_with('-') {
            "below -2^53"
        } else {
            "above 2^53"
        },
        value: literal.to_string(),
    })
}

fn push_key(path: &mut String, key: &str) {
    let plain = key
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if plain {
        path.push('.');
        path.push_str(key);
    } else {
        path.push('[');
        path.push_str(&serde_json::Value::from(key).to_string());
        path.push(']');
    }
}

fn check_numbers(path: &mut String, v: &serde_json::Value) -> Result<(), ManifestError> {
    use serde_json::Value;
    let len = path.len();
    match v {
        Value::Number(n) => {
            let side = match (n.as_u64(), n.as_i64()) {
                (Some(u), _) if u > EXACT => Some("above 2^53"),
                (None, Some(i)) if i.unsigned_abs() > EXACT => Some("below -2^53"),
                _ => None,
            };
            if let Some(side) = side {
                return Err(ManifestError::InexactInteger {
                    path: path.clone(),
                    value: n.to_string(),
                    side,
                });
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                path.push_str(&format!("[{i}]"));
                check_numbers(path, item)?;
                path.truncate(len);
            }
        }
        Value::Object(map) => {
            for (k, item) in map {
                push_key(path, k);
                check_numbers(path, item)?;
                path.truncate(len);
            }
        }
        Value::Null | Value::Bool(_) | Value::String(_) => {}
    }
    Ok(())
}

/// The first integer literal (no `.`, `e`, `E`) outside strings in JSON
/// `text` that fits neither i64 nor u64.
fn long_integer_literal(text: &str) -> Option<&str> {
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
            }
            c if c == b'-' || c.is_ascii_digit() => {
                let start = i;
                while i < b.len() && matches!(b[i], b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')
                {
                    i += 1;
                }
                let lit = &text[start..i];
                let integer = !lit.contains(['.', 'e', 'E']);
                if integer && lit.parse::<i64>().is_err() && lit.parse::<u64>().is_err() {
                    return Some(lit);
                }
            }
            _ => i += 1,
        }
    }
    None
}

/// Find (the path of) a number held as a double equal to `value`.
fn path_of_double(path: &mut String, v: &serde_json::Value, value: f64) -> bool {
    use serde_json::Value;
    let len = path.len();
    match v {
        Value::Number(n) => n.is_f64() && n.as_f64() == Some(value),
        Value::Array(items) => items.iter().enumerate().any(|(i, item)| {
            path.truncate(len);
            path.push_str(&format!("[{i}]"));
            path_of_double(path, item, value)
        }),
        Value::Object(map) => map.iter().any(|(k, item)| {
            path.truncate(len);
            push_key(path, k);
            path_of_double(path, item, value)
        }),
        Value::Null | Value::Bool(_) | Value::String(_) => false,
    }
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
    /// For a Delta input, the pinned table version (its log holds the
    /// partition values the guest sees, which are not in the files).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delta_version: Option<u64>,
    /// For a Delta input: only the rows that slice of the pinned table
    /// owns (a pipeline stage reading what its upstream stage committed
    /// for the same date).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delta_slice: Option<String>,
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
            return Err(ManifestError::Edited(format!(
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
                delta_version: None,
                delta_slice: None,
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
            expectations: vec![],
            audit: None,
        }
    }

    /// Every field of the run spec that can change the output changes the
    /// run key (and nothing else does: see the JSON spelling test).
    #[test]
    fn every_field_of_the_run_spec_changes_the_run_key() {
        let mut base = spec("{}");
        base.slice.inputs = vec![InputObject {
            path: "a.parquet".into(),
            size: 10,
            digest: Digest::of_bytes(b"a"),
        }];
        let k = run_key(&base);
        type Edit = Box<dyn Fn(&mut RunSpec)>;
        let edits: Vec<(&str, Edit)> = vec![
            ("module", Box::new(|s| s.module = Digest::of_bytes(b"m2"))),
            ("engine", Box::new(|s| s.engine.push_str("+fuel"))),
            (
                "slice id",
                Box::new(|s| s.slice.id = "date=2026-10-02".into()),
            ),
            (
                "slice root",
                Box::new(|s| s.slice.root = "file:///e/".into()),
            ),
            (
                "pinned Delta version",
                Box::new(|s| s.slice.delta_version = Some(3)),
            ),
            (
                "upstream slice",
                Box::new(|s| s.slice.delta_slice = Some("date=2026-10-01".into())),
            ),
            (
                "input path",
                Box::new(|s| s.slice.inputs[0].path = "b.parquet".into()),
            ),
            ("input size", Box::new(|s| s.slice.inputs[0].size = 11)),
            (
                "input digest",
                Box::new(|s| s.slice.inputs[0].digest = Digest::of_bytes(b"b")),
            ),
            (
                "an extra input",
                Box::new(|s| s.slice.inputs.push(s.slice.inputs[0].clone())),
            ),
            (
                "params",
                Box::new(|s| s.params = serde_json::json!({"a": 1})),
            ),
            ("logical date", Box::new(|s| s.logical_date = None)),
            ("batch rows", Box::new(|s| s.batch_rows = 1000)),
            ("table", Box::new(|s| s.target.table = "file:///u/".into())),
            ("mode", Box::new(|s| s.target.mode = "merge".into())),
            (
                "partition",
                Box::new(|s| s.target.partition = Some(("date".into(), "x".into()))),
            ),
            ("keys", Box::new(|s| s.target.keys = vec!["id".into()])),
            (
                "expectations",
                Box::new(|s| s.expectations = vec!["rows >= 1".into()]),
            ),
            (
                "audit module",
                Box::new(|s| {
                    s.audit = Some(AuditRecord {
                        module: Digest::of_bytes(b"audit"),
                        params: serde_json::json!({}),
                    })
                }),
            ),
        ];
        for (field, edit) in edits {
            let mut s = base.clone();
            edit(&mut s);
            assert_ne!(run_key(&s), k, "{field} does not change the run key");
        }
        // The audit module's params, with the module unchanged.
        let audited = |params: serde_json::Value| {
            let mut s = base.clone();
            s.audit = Some(AuditRecord {
                module: Digest::of_bytes(b"audit"),
                params,
            });
            run_key(&s)
        };
        assert_ne!(
            audited(serde_json::json!({})),
            audited(serde_json::json!({"max": 1}))
        );
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

    fn check(text: &str) -> Result<(), ManifestError> {
        check_params_text(text, &serde_json::from_str(text).unwrap())
    }

    fn refused_at(text: &str) -> String {
        match check(text) {
            Err(ManifestError::InexactInteger { path, .. }) => path,
            other => panic!("{text}: expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn integer_params_beyond_2_pow_53_are_refused_naming_their_path() {
        // Today's canonical JSON rounds 2^53 + 1 to 2^53: one run key for both.
        assert_eq!(
            canonical_json(&serde_json::json!({"a": 9007199254740993u64})),
            canonical_json(&serde_json::json!({"a": 9007199254740992u64}))
        );
        assert_eq!(refused_at(r#"{"a": 9007199254740993}"#), "params.a");
        check(r#"{"a": 9007199254740992}"#).unwrap();
        check(r#"{"a": -9007199254740992}"#).unwrap();
        assert_eq!(refused_at(r#"{"a": -9007199254740993}"#), "params.a");
        assert_eq!(
            refused_at(r#"{"x": {"ids": [1, 2, 18446744073709551615]}}"#),
            "params.x.ids[2]"
        );
        assert_eq!(
            refused_at(r#"[{"ok": 1}, {"odd key": [9007199254740993]}]"#),
            r#"params[1]["odd key"][0]"#
        );
        // Beyond 64 bits serde_json already holds a double: the text tells.
        assert_eq!(
            refused_at(r#"{"s": "123456789012345678901234", "big": 100000000000000000001}"#),
            "params.big"
        );
        assert_eq!(refused_at("-100000000000000000001"), "params");
        // Floats (even large ones) and numbers inside strings are fine.
        check(r#"{"f": 1.5, "g": 1e300, "h": -2.5e-7, "s": "9007199254740993"}"#).unwrap();
        check(r#"{"s": "a \" 100000000000000000001 \\", "n": 3}"#).unwrap();
        let e = check(r#"{"limit": 9007199254740993}"#)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("params.limit = 9007199254740993 is above 2^53")
                && e.contains("pass it as a string"),
            "{e}"
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
                columns: None,
                dictionaries: vec![],
                audits: vec![],
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
