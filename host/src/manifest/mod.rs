//! Run key and manifest: what a run was (module, engine, inputs, params,
//! target) and what it produced, as an in-toto Statement in RFC 8785
//! canonical JSON. No wall-clock field: a rerun yields the same bytes.

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::digest::Digest;
use crate::kind::Kind;

mod provenance;
mod spec;

pub use provenance::{BUILD_TYPE, BUILD_TYPE_SIDES, BUILDER_ID, Provenance};
pub use spec::{
    AuditRecord, RunResult, RunSpec, SideRecord, SliceRecord, TargetRecord, TextRecord,
    canonical_json, run_key,
};

/// Version of the run-key material; bump when its meaning changes.
pub const FORMAT: u32 = 1;
/// in-toto Statement type.
pub const STATEMENT_TYPE: &str = "https://in-toto.io/Statement/v1";
/// Our first predicate type: the run and its result.
pub const PREDICATE_TYPE: &str = "https://idem.dev/run-manifest/v1";
/// The same, with the run's provenance (`manifest/provenance.rs`,
/// [`Provenance`]): what runs write now; v1 manifests still read, verify
/// and audit.
pub const PREDICATE_TYPE_V2: &str = "https://idem.dev/run-manifest/v2";

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

/// A run manifest.
#[derive(Debug, Clone, PartialEq)]
pub struct Manifest {
    /// sha256 of the canonical [`RunSpec`].
    pub run_key: Digest,
    /// What was run.
    pub spec: RunSpec,
    /// What came out.
    pub result: RunResult,
    /// What a v2 manifest states beyond the spec; `None`: a v1 manifest.
    pub provenance: Option<Provenance>,
}

/// The v1 predicate. Nothing else may ride along in it: provenance
/// stated under v1's name would be checked by nobody.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
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
struct Statement<P> {
    #[serde(rename = "_type")]
    ty: String,
    subject: Vec<Subject>,
    predicate_type: String,
    predicate: P,
}

/// The v2 predicate: v1's, and the provenance derived from it (and from
/// the modules' imports).
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct PredicateV2 {
    run_key: Digest,
    run: RunSpec,
    result: RunResult,
    build_definition: serde_json::Value,
    run_details: serde_json::Value,
}

impl Manifest {
    /// A manifest for `spec` with `result`.
    pub fn new(spec: RunSpec, result: RunResult) -> Self {
        Manifest {
            run_key: run_key(&spec),
            spec,
            result,
            provenance: None,
        }
    }

    /// The canonical bytes (what is stored and hashed).
    pub fn to_bytes(&self) -> Vec<u8> {
        let subject = vec![Subject {
            name: format!("{}#{}", self.spec.target.table, self.spec.slice.id),
            digest: [(
                "sha256".to_string(),
                self.result.output_digest.hex().to_string(),
            )]
            .into(),
        }];
        let (run_key, run, result) = (self.run_key.clone(), self.spec.clone(), self.result.clone());
        let Some(p) = &self.provenance else {
            return canonical_json(&Statement {
                ty: STATEMENT_TYPE.into(),
                subject,
                predicate_type: PREDICATE_TYPE.into(),
                predicate: Predicate {
                    run_key,
                    run,
                    result,
                },
            });
        };
        canonical_json(&Statement {
            ty: STATEMENT_TYPE.into(),
            subject,
            predicate_type: PREDICATE_TYPE_V2.into(),
            predicate: PredicateV2 {
                build_definition: provenance::build_definition(&self.spec, p),
                run_details: provenance::run_details(&self.run_key),
                run_key,
                run,
                result,
            },
        })
    }

    /// What a v2 manifest's derivation needs: an engine profile it knows,
    /// and audit imports exactly when there is an audit module.
    fn check_provenance(&self) -> Result<(), ManifestError> {
        let Some(p) = &self.provenance else {
            return Ok(());
        };
        provenance::profile_of(&self.spec.engine).map_err(ManifestError::Edited)?;
        if self.spec.audit.is_some() != p.audit_imports.is_some() {
            return Err(ManifestError::Edited(
                "its audit module and the audit imports it states disagree: it was edited".into(),
            ));
        }
        Ok(())
    }

    /// The manifest's own digest.
    pub fn digest(&self) -> Digest {
        Digest::of_bytes(&self.to_bytes())
    }

    /// Parse stored bytes; the run key is checked against the spec, and a
    /// v2 manifest's provenance against what its spec derives.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, ManifestError> {
        let invalid = |e: serde_json::Error| ManifestError::Invalid(e.to_string());
        let st: Statement<serde_json::Value> = serde_json::from_slice(bytes).map_err(invalid)?;
        let (m, claimed) = match (st.ty.as_str(), st.predicate_type.as_str()) {
            (STATEMENT_TYPE, PREDICATE_TYPE) => {
                let p: Predicate = serde_json::from_value(st.predicate).map_err(invalid)?;
                (Manifest::new(p.run, p.result), p.run_key)
            }
            (STATEMENT_TYPE, PREDICATE_TYPE_V2) => {
                let p: PredicateV2 = serde_json::from_value(st.predicate).map_err(invalid)?;
                let provenance = provenance::read(&p.build_definition).map_err(|e| match e {
                    provenance::Unread::Newer(why) => ManifestError::Invalid(why),
                    provenance::Unread::Edited(why) => ManifestError::Edited(why),
                })?;
                let mut m = Manifest::new(p.run, p.result);
                m.provenance = Some(provenance);
                m.check_provenance()?;
                (m, p.run_key)
            }
            (ty, pt) => {
                return Err(ManifestError::Invalid(format!(
                    "unexpected types {ty} / {pt}"
                )));
            }
        };
        if m.run_key != claimed {
            return Err(ManifestError::Edited(format!(
                "its run key {claimed} does not match its contents ({}): it was edited",
                m.run_key
            )));
        }
        // The provenance follows from the spec (and the imports): a v2
        // manifest is exactly what its spec derives, in canonical JSON.
        if m.provenance.is_some() && m.to_bytes() != bytes {
            return Err(ManifestError::Edited(
                "its provenance (buildDefinition, runDetails) or subject does not follow from its run spec and result, or it is not in canonical JSON: it was edited".into(),
            ));
        }
        Ok(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::slice::InputObject;

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
                text: None,
            },
            sides: vec![],
            params: serde_json::from_str(params).unwrap(),
            logical_date: Some("2026-10-01".into()),
            batch_rows: 8192,
            target: TargetRecord {
                table: "file:///t/".into(),
                mode: "append".into(),
                partition: None,
                keys: vec![],
                on_schema_change: None,
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
                "a side input",
                Box::new(|s| {
                    let inputs = s.slice.inputs.clone();
                    s.sides.push(dim_side(1, inputs))
                }),
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
                Box::new(|s| s.target.partition = Some(crate::slice::Partition::one("date", "x"))),
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
        let m = Manifest::new(spec("{}"), result());
        let bytes = m.to_bytes();
        assert_eq!(Manifest::from_bytes(&bytes).unwrap(), m);
        assert_eq!(m.to_bytes(), bytes, "not deterministic");
        let edited = String::from_utf8(bytes)
            .unwrap()
            .replace("\"batchRows\":8192", "\"batchRows\":1");
        assert!(Manifest::from_bytes(edited.as_bytes()).is_err());
    }

    fn result() -> RunResult {
        RunResult {
            rows_in: 3,
            rows_out: 2,
            output_digest: Digest::of_bytes(b"o"),
            fuel: None,
            columns: None,
            dictionaries: vec![],
            audits: vec![],
            rejected_rows: None,
        }
    }

    fn v2() -> Manifest {
        let mut spec = spec(r#"{"min": 1.5}"#);
        spec.slice.inputs = vec![InputObject {
            path: "date=2026-10-01/a b#1%.parquet".into(),
            size: 10,
            digest: Digest::of_bytes(b"a"),
        }];
        let mut m = Manifest::new(spec, result());
        m.provenance = Some(Provenance {
            imports: vec!["idem:transform/host@0.2.0".into()],
            audit_imports: None,
        });
        m
    }

    /// Side input `customers`: table file:///dim/ read whole at `version`.
    fn dim_side(version: u64, inputs: Vec<InputObject>) -> SideRecord {
        SideRecord {
            name: "customers".into(),
            table: Some("file:///dim/".into()),
            input: SliceRecord {
                id: format!("delta-v{version}"),
                kind: "delta".into(),
                root: "file:///dim/".into(),
                inputs,
                delta_version: Some(version),
                delta_slice: None,
                text: None,
            },
        }
    }

    /// A run with side inputs is described under `run/v2` (v1's bytes stay
    /// v1's), its side inputs' files among the dependencies; stamped v1 it
    /// is refused as edited.
    #[test]
    fn side_inputs_are_provenance_v2_with_their_files() {
        let base = v2();
        let mut spec = base.spec.clone();
        let file = InputObject {
            path: "part-0.parquet".into(),
            size: 3,
            digest: Digest::of_bytes(b"d"),
        };
        spec.sides.push(dim_side(4, vec![file]));
        let mut m = Manifest::new(spec, result());
        m.provenance = base.provenance.clone();
        let b = &predicate(&m)["buildDefinition"];
        assert_eq!(b["buildType"], BUILD_TYPE_SIDES);
        assert_eq!(b["externalParameters"]["sides"][0]["deltaVersion"], 4);
        let deps = b["resolvedDependencies"].as_array().unwrap();
        let side = deps
            .iter()
            .find(|d| d["annotations"]["side"] == "customers");
        assert_eq!(side.unwrap()["uri"], "file:///dim/part-0.parquet");
        let bytes = m.to_bytes();
        assert_eq!(
            Manifest::from_bytes(&bytes).unwrap().spec.sides,
            m.spec.sides
        );
        assert_eq!(predicate(&v2())["buildDefinition"]["buildType"], BUILD_TYPE);
        let stamped = String::from_utf8(bytes)
            .unwrap()
            .replace(BUILD_TYPE_SIDES, BUILD_TYPE);
        assert!(Manifest::from_bytes(stamped.as_bytes()).is_err());
    }

    fn predicate(m: &Manifest) -> serde_json::Value {
        let v: serde_json::Value = serde_json::from_slice(&m.to_bytes()).unwrap();
        assert_eq!(v["predicateType"], PREDICATE_TYPE_V2);
        v["predicate"].clone()
    }

    fn keys(v: &serde_json::Value) -> Vec<&str> {
        v.as_object().unwrap().keys().map(String::as_str).collect()
    }

    #[test]
    fn a_v2_manifest_states_its_provenance_in_slsa_terms() {
        let m = v2();
        let p = predicate(&m);
        let b = &p["buildDefinition"];
        assert_eq!(b["buildType"], BUILD_TYPE);
        // Exactly these: nothing a host or its limits would make differ.
        assert_eq!(keys(&b["internalParameters"]), ["determinism", "engine"]);
        let d = &b["internalParameters"]["determinism"];
        assert_eq!(
            keys(d),
            [
                "fuelMetered",
                "imports",
                "limitsTrap",
                "nanCanonicalization",
                "profile",
                "relaxedSimdDeterministic",
                "threads"
            ]
        );
        assert_eq!(
            (&d["profile"], &d["fuelMetered"]),
            (&"strict".into(), &false.into())
        );
        assert_eq!(d["imports"][0], "idem:transform/host@0.2.0");
        assert_eq!(b["externalParameters"]["params"]["min"], 1.5);
        assert_eq!(b["resolvedDependencies"][0]["name"], "module");
        // An object name is escaped into a valid URI.
        assert_eq!(
            b["resolvedDependencies"][1]["uri"],
            "file:///d/date=2026-10-01/a%20b%231%25.parquet"
        );
        assert_eq!(p["runDetails"]["builder"]["id"], BUILDER_ID);
        assert_eq!(
            p["runDetails"]["metadata"]["invocationId"],
            m.run_key.as_str()
        );
        assert_eq!(Manifest::from_bytes(&m.to_bytes()).unwrap(), m);
        // Fuel metering, from the fingerprint.
        let mut fueled = v2();
        fueled.spec.engine.push_str("+fuel");
        fueled.run_key = run_key(&fueled.spec);
        let d = &predicate(&fueled)["buildDefinition"]["internalParameters"]["determinism"];
        assert_eq!(
            (&d["profile"], &d["fuelMetered"]),
            (&"strict".into(), &true.into())
        );
    }

    /// The run key does not cover the provenance: it is checked against
    /// the spec, and each edit below is refused as an edit.
    #[test]
    fn a_v2_manifest_whose_provenance_does_not_follow_from_its_spec_is_refused() {
        let text = String::from_utf8(v2().to_bytes()).unwrap();
        for (from, to) in [
            ("\"name\":\"module\"", "\"name\":\"modulE\""),
            (
                "\"batchRows\":8192,\"expectations\"",
                "\"batchRows\":1,\"expectations\"",
            ),
            ("\"invocationId\":\"sha256:", "\"invocationId\":\"sha256:0"),
            (
                "\"nanCanonicalization\":true",
                "\"nanCanonicalization\":false",
            ),
            ("\"fuelMetered\":false", "\"fuelMetered\":true"),
            (
                "\"id\":\"https://idem.dev/host\"",
                "\"id\":\"https://evil.example\"",
            ),
            ("\"imports\":[", "\"auditImports\":[],\"imports\":["),
            ("{\"_type\"", "{ \"_type\""),
            (
                "\"buildType\":\"https://idem.dev/run/v1\"",
                "\"buildType\":\"https://evil.example/v1\"",
            ),
            // A profile this buildType does not know (its run key made to match).
            ("profile/strict\"", "profile/lax\""),
        ] {
            assert!(text.contains(from), "{from}");
            let mut edited = text.replacen(from, to, 1);
            if from.starts_with("profile/") {
                let v: serde_json::Value = serde_json::from_str(&edited).unwrap();
                let spec: RunSpec = serde_json::from_value(v["predicate"]["run"].clone()).unwrap();
                let old = v["predicate"]["runKey"].as_str().unwrap().to_string();
                edited = edited.replace(&old, run_key(&spec).as_str());
            }
            let e = Manifest::from_bytes(edited.as_bytes()).unwrap_err();
            assert!(matches!(e, ManifestError::Edited(_)), "{from}: {e}");
        }
        // Stated imports are the module's: only a replay can check them
        // (verify and audit --replay do); here they read back as stated.
        let other = text.replace("idem:transform/host@0.2.0", "wasi:clocks/wall-clock@0.2.0");
        let read = Manifest::from_bytes(other.as_bytes()).unwrap();
        assert_eq!(
            read.provenance.unwrap().imports,
            ["wasi:clocks/wall-clock@0.2.0"]
        );
        // A later buildType of idem's is a newer idem's, not an edit.
        let newer = text.replace(BUILD_TYPE, "https://idem.dev/run/v3");
        let e = Manifest::from_bytes(newer.as_bytes()).unwrap_err();
        assert!(
            matches!(&e, ManifestError::Invalid(why) if why.contains("a later idem's")),
            "{e}"
        );
        // Provenance under v1's name is not read as v1.
        let v1 = text.replace(PREDICATE_TYPE_V2, PREDICATE_TYPE);
        assert!(Manifest::from_bytes(v1.as_bytes()).is_err());
    }

    /// Every fingerprint this idem makes names a profile the derivation
    /// knows (else its manifests would be refused when read).
    #[test]
    fn this_idems_fingerprints_name_profiles_the_derivation_knows() {
        for fuel in [None, Some(1_000_000)] {
            let sandbox = crate::sandbox::Sandbox::new(crate::sandbox::SandboxConfig {
                limits: crate::sandbox::Limits {
                    fuel,
                    ..Default::default()
                },
                ..Default::default()
            })
            .unwrap();
            let (name, metered) = provenance::profile_of(sandbox.fingerprint()).unwrap();
            assert_eq!((name, metered), ("strict", fuel.is_some()));
        }
    }

    /// Manifests as earlier builds wrote them read and re-serialize byte
    /// for byte: v1 by the idem before v2, v2 by the build that introduced
    /// it (an audit module with its imports, fuel, expectations' verdicts,
    /// float params, a timestamp logical date; a pinned Delta input, the
    /// declared columns and dictionaries). A change to how any part of a
    /// manifest serializes fails here.
    #[test]
    fn manifests_earlier_builds_wrote_read_and_round_trip() {
        let fixtures: [(&str, &[u8]); 3] = [
            ("v1", include_bytes!("../../../tests/data/manifest-v1.json")),
            (
                "v2-audited",
                include_bytes!("../../../tests/data/manifest-v2-audited.json"),
            ),
            (
                "v2-delta",
                include_bytes!("../../../tests/data/manifest-v2-delta.json"),
            ),
        ];
        for (name, bytes) in fixtures {
            let m = Manifest::from_bytes(bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(
                m.to_bytes(),
                bytes.to_vec(),
                "{name}: re-serialized otherwise"
            );
            assert_eq!(m.provenance.is_some(), name != "v1", "{name}");
        }
        let audited = Manifest::from_bytes(fixtures[1].1).unwrap();
        let p = audited.provenance.as_ref().unwrap();
        assert!(audited.spec.audit.is_some() && p.audit_imports.is_some());
        assert!(audited.result.fuel.is_some() && !audited.result.audits.is_empty());
        let delta = Manifest::from_bytes(fixtures[2].1).unwrap();
        assert!(delta.spec.slice.delta_version.is_some() && delta.result.columns.is_some());
        assert!(!delta.result.dictionaries.is_empty());
    }
}
