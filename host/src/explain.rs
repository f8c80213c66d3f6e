//! Why two run keys differ: the run specs they hash, compared field by
//! field. Inputs are matched by path (added, removed, or a changed size or
//! digest), params by JSON path; every other field of the spec (module,
//! engine, logical date, batch size, target) by name. A run key is the
//! sha256 of the canonical spec, so two specs with no change here have the
//! same run key.

use serde::Serialize;
use serde_json::Value;

use crate::manifest::{RunSpec, canonical_json};

/// One field that differs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Change {
    /// The field, as a path into the run spec: `module`, `batchRows`,
    /// `params.min_amount`, `slice.inputs[date=2026-10-01/part-0.parquet].digest`.
    pub field: String,
    /// Its value in the first spec (`null` when absent).
    pub before: Value,
    /// Its value in the second spec (`null` when absent).
    pub after: Value,
}

/// Every field that differs between `before` and `after`, in spec order.
pub fn diff(before: &RunSpec, after: &RunSpec) -> Vec<Change> {
    let a = serde_json::to_value(before).unwrap_or(Value::Null);
    let b = serde_json::to_value(after).unwrap_or(Value::Null);
    let mut out = Vec::new();
    walk(&mut String::new(), &a, &b, &mut out);
    out
}

fn push(out: &mut Vec<Change>, field: &str, before: &Value, after: &Value) {
    out.push(Change {
        field: field.to_string(),
        before: before.clone(),
        after: after.clone(),
    });
}

fn walk(path: &mut String, a: &Value, b: &Value, out: &mut Vec<Change>) {
    // Equal as the run key sees them (RFC 8785: `10` and `10.0` are one
    // number), not only as JSON values.
    if a == b || canonical_json(a) == canonical_json(b) {
        return;
    }
    if path == "slice.inputs" || (path.starts_with("sides[") && path.ends_with("].input.inputs")) {
        return inputs(path, a, b, out);
    }
    if path == "sides" {
        return sides(a, b, out);
    }
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let len = path.len();
            let mut keys: Vec<&String> = x.keys().collect();
            keys.extend(y.keys().filter(|k| !x.contains_key(*k)));
            for k in keys {
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(k);
                walk(
                    path,
                    x.get(k).unwrap_or(&Value::Null),
                    y.get(k).unwrap_or(&Value::Null),
                    out,
                );
                path.truncate(len);
            }
        }
        // Lists (merge keys, a params array): the whole value, as the run
        // key sees order too.
        _ => push(out, path, a, b),
    }
}

/// Side inputs by name (`sides[customers].input.deltaVersion`), each
/// compared as the slice is; one added or removed is said whole.
fn sides(a: &Value, b: &Value, out: &mut Vec<Change>) {
    let by_name = |v: &Value| -> Vec<(String, Value)> {
        let items = v.as_array().map(Vec::as_slice).unwrap_or_default();
        items
            .iter()
            .map(|i| {
                let n = i.get("name").and_then(Value::as_str).unwrap_or("?");
                (n.to_string(), i.clone())
            })
            .collect()
    };
    let (xa, xb) = (by_name(a), by_name(b));
    let find =
        |xs: &[(String, Value)], n: &str| xs.iter().find(|(m, _)| m == n).map(|(_, v)| v.clone());
    let mut names: Vec<&String> = xa.iter().map(|(n, _)| n).collect();
    names.extend(xb.iter().map(|(n, _)| n).filter(|n| find(&xa, n).is_none()));
    for n in names {
        let mut field = format!("sides[{n}]");
        match (find(&xa, n), find(&xb, n)) {
            (Some(x), Some(y)) => walk(&mut field, &x, &y, out),
            (x, y) => push(
                out,
                &field,
                &x.unwrap_or(Value::Null),
                &y.unwrap_or(Value::Null),
            ),
        }
    }
}

/// Inputs by path: what was added, removed, or changed (size, digest);
/// `at` is their list's field (`slice.inputs`).
fn inputs(at: &str, a: &Value, b: &Value, out: &mut Vec<Change>) {
    let by_path = |v: &Value| -> Vec<(String, Value)> {
        v.as_array()
            .map(|items| {
                items
                    .iter()
                    .map(|i| {
                        let p = i.get("path").and_then(Value::as_str).unwrap_or("?");
                        (p.to_string(), i.clone())
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    let (xa, xb) = (by_path(a), by_path(b));
    let start = out.len();
    let find =
        |xs: &[(String, Value)], p: &str| xs.iter().find(|(q, _)| q == p).map(|(_, v)| v.clone());
    let mut paths: Vec<&String> = xa.iter().map(|(p, _)| p).collect();
    paths.extend(xb.iter().map(|(p, _)| p).filter(|p| find(&xa, p).is_none()));
    for p in paths {
        let field = format!("{at}[{p}]");
        match (find(&xa, p), find(&xb, p)) {
            (Some(x), Some(y)) => {
                for k in ["size", "digest"] {
                    let (u, v) = (&x[k], &y[k]);
                    if u != v {
                        push(out, &format!("{field}.{k}"), u, v);
                    }
                }
            }
            (x, y) => push(
                out,
                &field,
                &x.unwrap_or(Value::Null),
                &y.unwrap_or(Value::Null),
            ),
        }
    }
    // Same inputs, another order (the run key hashes the read order).
    if out.len() == start {
        push(out, &format!("{at} (order)"), a, b);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::digest::Digest;
    use crate::manifest::{FORMAT, SliceRecord, TargetRecord, run_key};
    use crate::slice::InputObject;

    fn spec() -> RunSpec {
        RunSpec {
            format: FORMAT,
            module: Digest::of_bytes(b"m"),
            engine: "e".into(),
            slice: SliceRecord {
                id: "date=1".into(),
                kind: "partition".into(),
                root: "file:///r/".into(),
                inputs: vec![
                    InputObject {
                        path: "a.parquet".into(),
                        size: 1,
                        digest: Digest::of_bytes(b"a"),
                    },
                    InputObject {
                        path: "b.parquet".into(),
                        size: 2,
                        digest: Digest::of_bytes(b"b"),
                    },
                ],
                delta_version: None,
                delta_slice: None,
                text: None,
            },
            sides: vec![],
            params: serde_json::json!({"min": 1, "tags": ["x"]}),
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

    /// A side input `name` of one file at Delta version `v`.
    fn side(name: &str, v: u64, file: &[u8]) -> crate::manifest::SideRecord {
        crate::manifest::SideRecord {
            name: name.into(),
            table: Some("file:///dim/".into()),
            input: SliceRecord {
                id: format!("delta-v{v}"),
                kind: "delta".into(),
                root: "file:///dim/".into(),
                inputs: vec![InputObject {
                    path: "part-0.parquet".into(),
                    size: file.len() as u64,
                    digest: Digest::of_bytes(file),
                }],
                delta_version: Some(v),
                delta_slice: None,
                text: None,
            },
        }
    }

    #[test]
    fn a_changed_side_input_is_named_by_its_name() {
        let mut a = spec();
        a.sides = vec![side("customers", 0, b"x"), side("regions", 3, b"r")];
        let mut b = a.clone();
        b.sides[0] = side("customers", 1, b"y");
        assert_eq!(
            fields(&a, &b),
            [
                "sides[customers].input.deltaVersion",
                "sides[customers].input.id",
                "sides[customers].input.inputs[part-0.parquet].digest"
            ]
        );
        let mut b = a.clone();
        b.sides.pop();
        assert_eq!(fields(&a, &b), ["sides[regions]"]);
        let mut none = a.clone();
        none.sides.clear();
        assert_eq!(fields(&none, &a), ["sides[customers]", "sides[regions]"]);
    }

    fn fields(a: &RunSpec, b: &RunSpec) -> Vec<String> {
        diff(a, b).into_iter().map(|c| c.field).collect()
    }

    #[test]
    fn each_changed_field_is_named_and_nothing_else() {
        let a = spec();
        assert!(diff(&a, &a.clone()).is_empty());
        let mut b = a.clone();
        b.batch_rows = 100;
        assert_eq!(fields(&a, &b), ["batchRows"]);
        let mut b = a.clone();
        b.module = Digest::of_bytes(b"m2");
        assert_eq!(fields(&a, &b), ["module"]);
        let mut b = a.clone();
        b.params = serde_json::json!({"min": 2, "tags": ["x"], "new": true});
        assert_eq!(fields(&a, &b), ["params.min", "params.new"]);
        let mut b = a.clone();
        b.slice.inputs[1].digest = Digest::of_bytes(b"b2");
        b.slice.inputs[1].size = 3;
        assert_eq!(
            fields(&a, &b),
            [
                "slice.inputs[b.parquet].size",
                "slice.inputs[b.parquet].digest"
            ]
        );
        let mut b = a.clone();
        b.slice.inputs.remove(0);
        assert_eq!(fields(&a, &b), ["slice.inputs[a.parquet]"]);
        let mut b = a.clone();
        b.slice.inputs.reverse();
        assert_eq!(fields(&a, &b), ["slice.inputs (order)"]);
        let mut b = a.clone();
        b.logical_date = None;
        b.target.keys = vec!["id".into()];
        assert_eq!(fields(&a, &b), ["logicalDate", "target.keys"]);
    }

    #[test]
    fn numbers_equal_in_the_run_key_are_no_change() {
        let a = spec();
        let mut b = a.clone();
        b.params = serde_json::json!({"min": 1.0, "tags": ["x"]});
        assert_eq!(run_key(&a), run_key(&b));
        assert!(diff(&a, &b).is_empty(), "{:?}", diff(&a, &b));
        b.params = serde_json::json!({"min": 1.5, "tags": ["x"]});
        assert_eq!(fields(&a, &b), ["params.min"]);
    }

    #[test]
    fn no_change_means_the_same_run_key() {
        // The diff sees every field the run key hashes: a spec that differs
        // anywhere differs in the diff.
        let a = spec();
        let mut b = a.clone();
        b.engine = "e2".into();
        assert_ne!(run_key(&a), run_key(&b));
        assert_eq!(fields(&a, &b), ["engine"]);
        let mut b = a.clone();
        b.slice.delta_version = Some(3);
        assert_eq!(fields(&a, &b), ["slice.deltaVersion"]);
    }
}
