//! What readers see of a Delta table besides its files: the schema, the
//! partition columns and the column mapping. Another writer can change
//! them with a metadata-only commit (rename `total` to `revenue_total`
//! under column mapping) that adds and removes nothing, yet every reader
//! then sees other columns. A slice's rows are only "still what idem
//! committed" when the table's shape is still the one its commit saw.

use serde_json::Value;

use crate::digest::Digest;
use crate::table::record::LogCommit;

/// The shape a `metaData` action sets: a digest of its schema, partition
/// columns, column-mapping mode and idem's mode property (what changes what
/// readers see or what audit checks, not properties such as log
/// retention).
pub(super) fn of_metadata(meta: &Value) -> String {
    let shape = [text(meta.get("schemaString")), rest(meta)].join("\u{0}");
    Digest::of_bytes(shape.as_bytes()).hex().to_string()
}

fn text(v: Option<&Value>) -> String {
    v.map(Value::to_string).unwrap_or_default()
}

/// The shape but the schema: partitioning, column mapping and idem's mode.
fn rest(meta: &Value) -> String {
    let config = meta.get("configuration");
    [
        text(meta.get("partitionColumns")),
        text(config.and_then(|c| c.get("delta.columnMapping.mode"))),
        text(config.and_then(|c| c.get("delta.columnMapping.maxColumnId"))),
        // What audit takes as the table's mode (merge tables' files are
        // not accounted for one by one).
        text(config.and_then(|c| c.get("idem.mode"))),
    ]
    .join("\u{0}")
}

/// The schema's columns (the `fields` of its `schemaString`).
fn fields(meta: &Value) -> Option<Vec<Value>> {
    let schema: Value = serde_json::from_str(meta.get("schemaString")?.as_str()?).ok()?;
    schema.get("fields")?.as_array().cloned()
}

/// The shape as a commit records it for columns appended later
/// (`idem.columns`): `<n>:<digest>` of the first `n` columns (each in
/// canonical JSON, so a writer's formatting does not matter) and the rest
/// of the shape. `None` when the schema has fewer columns.
fn columns_prefix(meta: &Value, n: usize) -> Option<String> {
    let fields = fields(meta)?;
    let mut bytes = Vec::new();
    for f in fields.get(..n)? {
        bytes.extend(serde_jcs::to_vec(f).ok()?);
        bytes.push(0);
    }
    bytes.extend(rest(meta).as_bytes());
    Some(format!("{n}:{}", Digest::of_bytes(&bytes).hex()))
}

/// [`columns_prefix`] of every column: what a commit records.
pub(super) fn columns_of(meta: &Value) -> Option<String> {
    columns_prefix(meta, fields(meta)?.len())
}

/// Whether the table's metadata `now` is the shape a commit `recorded`
/// (`idem.columns`) with columns appended after it: the same columns
/// first, then only nullable ones without metadata (no defaults, no
/// mapping), the rest of the shape unchanged. The rows committed then
/// read the same, and null in the new columns.
pub(super) fn appended_to(recorded: &str, now: &Value) -> bool {
    let Some(n) = recorded.split_once(':').and_then(|(n, _)| n.parse().ok()) else {
        return false;
    };
    let Some(fields) = fields(now) else {
        return false;
    };
    let plain = |f: &Value| {
        f.get("metadata")
            .is_none_or(|m| m.as_object().is_some_and(|o| o.is_empty()))
    };
    columns_prefix(now, n).as_deref() == Some(recorded)
        && crate::table::schema_change::appended_only(
            &fields[..n],
            &fields,
            |_, _| true,
            |f| f.get("nullable") == Some(&Value::Bool(true)) && plain(f),
        )
}

/// The first version after `since` whose `metaData` changed the shape the
/// table had at `since` (`history` in any order); `None` when the shape is
/// unchanged. When no commit at or before `since` is left in the log to
/// say what the shape was (log cleanup, or a checkpoint another writer put
/// in place of the commits), any later `metaData` counts as a change:
/// unknown is not unchanged.
pub(super) fn changed_since(history: &[LogCommit], since: u64) -> Option<u64> {
    let mut sorted: Vec<&LogCommit> = history.iter().filter(|c| c.shape.is_some()).collect();
    sorted.sort_by_key(|c| c.version);
    let baseline = sorted
        .iter()
        .rev()
        .find(|c| c.version <= since)
        .and_then(|c| c.shape.as_ref());
    sorted
        .iter()
        .find(|c| c.version > since && (baseline.is_none() || c.shape.as_ref() != baseline))
        .map(|c| c.version)
}

/// Why the table's shape is not the one of version `since` (`None` when it
/// is): what memo, "unchanged" and audit say before trusting a slice.
/// `since` is `None` when the slice's commit has left the log: every
/// retained commit is later than it.
pub(super) fn drift(history: &[LogCommit], since: Option<u64>) -> Option<String> {
    let at = since
        .map(|v| format!("version {v}"))
        .unwrap_or_else(|| "no longer in the log".into());
    let v = match since {
        Some(since) => changed_since(history, since)?,
        None => history
            .iter()
            .filter(|c| c.shape.is_some())
            .map(|c| c.version)
            .min()?,
    };
    Some(format!(
        "version {v} changed the table's schema, partitioning or column mapping after the slice's commit ({at}), or the log no longer shows what they were: readers may no longer see the columns idem committed"
    ))
}

/// Why the table's shape is not the one the slice's commit at version
/// `since` recorded.
pub(super) fn changed(since: u64) -> String {
    format!(
        "a commit after the slice's (version {since}) changed the table's schema, partitioning or column mapping: readers may no longer see the columns idem committed"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn commit(version: u64, schema: Option<&str>) -> LogCommit {
        LogCommit {
            version,
            shape: schema.map(|s| of_metadata(&serde_json::json!({"schemaString": s}))),
            ..Default::default()
        }
    }

    #[test]
    fn a_later_metadata_change_is_drift_and_an_identical_one_is_not() {
        let h = vec![
            commit(0, Some("a")),
            commit(1, None),
            commit(2, Some("a")),
            commit(3, None),
        ];
        assert_eq!(changed_since(&h, 1), None);
        let mut renamed = h.clone();
        renamed.push(commit(4, Some("b")));
        assert_eq!(changed_since(&renamed, 1), Some(4));
        assert_eq!(changed_since(&renamed, 4), None);
        assert!(drift(&renamed, Some(3)).unwrap().contains("version 4"));
        // Properties other than the shape do not count.
        let retention = serde_json::json!({"schemaString": "a", "configuration": {"delta.logRetentionDuration": "1 day"}});
        assert_eq!(
            of_metadata(&retention),
            of_metadata(&serde_json::json!({"schemaString": "a"}))
        );
        let mapping = serde_json::json!({"schemaString": "a", "configuration": {"delta.columnMapping.mode": "name"}});
        assert_ne!(of_metadata(&mapping), of_metadata(&retention));
        // Nothing known at or before `since` (the log cleaned, or replaced
        // by a checkpoint): a later metaData is a change, none is not.
        assert_eq!(changed_since(&renamed[2..], 1), Some(2));
        assert_eq!(changed_since(&h[3..], 1), None);
        assert!(drift(&renamed[1..], None).unwrap().contains("version 2"));
        assert_eq!(drift(&[commit(7, None)], None), None);
    }

    fn meta(fields: &str, parts: &str) -> serde_json::Value {
        serde_json::json!({
            "schemaString": format!(r#"{{"type":"struct","fields":[{fields}]}}"#),
            "partitionColumns": serde_json::from_str::<Value>(parts).unwrap(),
        })
    }

    #[test]
    fn appended_nullable_columns_keep_the_recorded_shape_and_nothing_else_does() {
        let id = r#"{"name":"id","type":"long","nullable":false,"metadata":{}}"#;
        let coupon = r#"{"name":"coupon","type":"string","nullable":true,"metadata":{}}"#;
        let then = meta(id, "[]");
        let recorded = columns_of(&then).unwrap();
        assert!(recorded.starts_with("1:"), "{recorded}");
        assert!(appended_to(&recorded, &then));
        // The same column written with other spacing and key order.
        let respaced = meta(
            r#"{ "type": "long", "name": "id", "metadata": {}, "nullable": false }"#,
            "[]",
        );
        assert!(appended_to(&recorded, &respaced));
        assert!(appended_to(
            &recorded,
            &meta(&format!("{id},{coupon}"), "[]")
        ));
        let required = r#"{"name":"coupon","type":"string","nullable":false,"metadata":{}}"#;
        let defaulted = r#"{"name":"coupon","type":"string","nullable":true,"metadata":{"CURRENT_DEFAULT":"'x'"}}"#;
        let retyped = r#"{"name":"id","type":"string","nullable":false,"metadata":{}}"#;
        for now in [
            meta(&format!("{id},{required}"), "[]"),
            meta(&format!("{id},{defaulted}"), "[]"),
            meta(&format!("{coupon},{id}"), "[]"),
            meta(&format!("{retyped},{coupon}"), "[]"),
            meta(&format!("{id},{coupon}"), r#"["coupon"]"#),
            meta("", "[]"),
        ] {
            assert!(!appended_to(&recorded, &now), "{now}");
        }
        assert!(!appended_to("garbage", &then));
    }
}
