//! The schema of text inputs: declared (`--schema`, a JSON list of
//! `{"name", "type"}`) or inferred from the pinned bytes, in one spelling
//! that the run spec records and replay reads back.
//!
//! Inference is deterministic: it reads every row of the slice (no sample
//! that a later row could contradict). A CSV column gets the narrowest of
//! int64, float64, date, timestamp, boolean that every non-empty value
//! casts to (the same cast decoding uses, so an inferred schema never
//! rejects a row), else string. JSON lines get arrow's inference with the
//! fields sorted by name, as Spark sorts an inferred JSON schema (arrow's
//! order follows each object's keys, which serde_json hands over sorted,
//! so it mixes first appearance with name order).

use std::collections::HashSet;
use std::str::FromStr;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BooleanArray};
use arrow::compute::{CastOptions, cast_with_options};
use arrow::datatypes::{DataType, Field, Fields, Schema, SchemaRef, TimeUnit};
use arrow::error::ArrowError;
use serde::{Deserialize, Serialize};

/// One column of a text schema, as the run spec records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ColumnRecord {
    /// The column's name (a CSV header, a JSON key).
    pub name: String,
    /// Its type: `string`, `int64`, `float64`, `boolean`, `date`,
    /// `timestamp` (microseconds, no zone)... or any arrow type's name.
    #[serde(rename = "type")]
    pub type_: String,
}

/// The short names, both ways; any other type is arrow's own spelling.
fn short_names() -> [(&'static str, DataType); 9] {
    [
        ("string", DataType::Utf8),
        ("int64", DataType::Int64),
        ("int32", DataType::Int32),
        ("float64", DataType::Float64),
        ("float32", DataType::Float32),
        ("boolean", DataType::Boolean),
        ("date", DataType::Date32),
        (
            "timestamp",
            DataType::Timestamp(TimeUnit::Microsecond, None),
        ),
        (
            "timestamp_utc",
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
        ),
    ]
}

/// The name a type is recorded by.
pub fn type_name(t: &DataType) -> String {
    short_names()
        .into_iter()
        .find(|(_, d)| d == t)
        .map_or_else(|| t.to_string(), |(n, _)| n.to_string())
}

/// The type `name` names (a short name, `double`/`bool`/`int`, or arrow's).
pub fn parse_type(name: &str) -> Result<DataType, String> {
    let alias = match name.trim().to_ascii_lowercase().as_str() {
        "double" => "float64".to_string(),
        "float" => "float32".to_string(),
        "bool" => "boolean".to_string(),
        "int" | "integer" => "int32".to_string(),
        "bigint" | "long" => "int64".to_string(),
        "utf8" | "text" | "varchar" => "string".to_string(),
        other => other.to_string(),
    };
    if let Some((_, t)) = short_names().into_iter().find(|(n, _)| *n == alias) {
        return Ok(t);
    }
    let t = DataType::from_str(name.trim()).map_err(|_| {
        format!(
            "type `{name}` is not one idem knows: use string, int64, int32, float64, float32, boolean, date, timestamp, timestamp_utc, or an arrow type such as Decimal128(12, 2)"
        )
    })?;
    // Only what survives the record's round trip is taken.
    match DataType::from_str(&t.to_string()) {
        Ok(back) if back == t => Ok(t),
        _ => Err(format!("type `{name}` cannot be recorded faithfully")),
    }
}

/// The recorded columns of `schema`.
pub fn columns_of(schema: &Schema) -> Vec<ColumnRecord> {
    schema
        .fields()
        .iter()
        .map(|f| ColumnRecord {
            name: f.name().clone(),
            type_: type_name(f.data_type()),
        })
        .collect()
}

/// The schema `columns` record (every column nullable: text has no
/// not-null), or why it is not one.
pub fn schema_of(columns: &[ColumnRecord]) -> Result<SchemaRef, String> {
    if columns.is_empty() {
        return Err("the schema names no columns".into());
    }
    if columns.len() > super::text::MAX_COLUMNS {
        return Err(format!(
            "the schema names {} columns, more than idem reads ({})",
            columns.len(),
            super::text::MAX_COLUMNS
        ));
    }
    let mut seen = HashSet::new();
    let mut fields = Vec::with_capacity(columns.len());
    for c in columns {
        if c.name.is_empty() || c.name.len() > 256 {
            return Err("a column name must be 1 to 256 bytes".into());
        }
        if !seen.insert(c.name.as_str()) {
            return Err(format!("column `{}` is named twice", c.name));
        }
        fields.push(Field::new(&c.name, parse_type(&c.type_)?, true));
    }
    Ok(Arc::new(Schema::new(fields)))
}

/// The schema a `--schema` text declares: a JSON list of
/// `{"name": ..., "type": ...}`.
pub fn parse_declared(text: &str) -> Result<SchemaRef, String> {
    let columns: Vec<ColumnRecord> = serde_json::from_str(text).map_err(|e| {
        format!(
            "--schema is not a JSON list of columns ({e}): write it as [{{\"name\": \"id\", \"type\": \"int64\"}}, {{\"name\": \"city\", \"type\": \"string\"}}]"
        )
    })?;
    schema_of(&columns).map_err(|e| format!("--schema: {e}"))
}

/// The types a CSV column may be inferred as, narrowest first.
fn ladder() -> [DataType; 5] {
    [
        DataType::Int64,
        DataType::Float64,
        DataType::Date32,
        DataType::Timestamp(TimeUnit::Microsecond, None),
        DataType::Boolean,
    ]
}

/// Text `strings` as `t`, null where a value does not cast. A date is
/// exactly `YYYY-MM-DD`: arrow casts `2026-10-01 12:00:00` to a date by
/// dropping the time, which would lose it.
pub(super) fn cast_text(strings: &ArrayRef, t: &DataType) -> Result<ArrayRef, ArrowError> {
    let options = CastOptions {
        safe: true,
        ..Default::default()
    };
    let cast = cast_with_options(strings, t, &options)?;
    if !matches!(t, DataType::Date32 | DataType::Date64) {
        return Ok(cast);
    }
    let not_a_date: BooleanArray = strings
        .as_string::<i32>()
        .iter()
        .map(|v| Some(v.is_some_and(|v| v.len() != 10)))
        .collect();
    arrow::compute::nullif(&cast, &not_a_date)
}

/// Whether every non-null value of `strings` casts to `t`.
pub(super) fn all_cast(strings: &ArrayRef, t: &DataType) -> bool {
    match cast_text(strings, t) {
        Ok(cast) => cast.null_count() == strings.null_count(),
        Err(_) => false,
    }
}

/// A CSV column's inference so far: the ladder's types every value seen
/// casts to, and whether any value was seen.
#[derive(Debug, Clone)]
pub(super) struct Candidates {
    fits: Vec<DataType>,
    seen: bool,
}

impl Default for Candidates {
    fn default() -> Self {
        Candidates {
            fits: ladder().to_vec(),
            seen: false,
        }
    }
}

impl Candidates {
    /// Narrow by a batch of the column's values (nulls are empty fields).
    pub(super) fn see(&mut self, strings: &ArrayRef) {
        if strings.null_count() == strings.len() {
            return;
        }
        self.seen = true;
        self.fits.retain(|t| all_cast(strings, t));
    }

    /// The inferred type: the narrowest left, else string.
    pub(super) fn finish(&self) -> DataType {
        match self.fits.first() {
            Some(t) if self.seen => t.clone(),
            _ => DataType::Utf8,
        }
    }
}

/// JSON lines' inferred `schema` in Spark's order: fields by name, nested
/// ones too; a column that was only ever null is typed string.
pub(super) fn canonical_json_schema(schema: &Schema) -> SchemaRef {
    Arc::new(Schema::new(canonical_fields(schema.fields())))
}

fn canonical_fields(fields: &Fields) -> Fields {
    let mut fs: Vec<Field> = fields
        .iter()
        .map(|f| {
            f.as_ref()
                .clone()
                .with_data_type(canonical_type(f.data_type()))
        })
        .collect();
    fs.sort_by(|a, b| a.name().cmp(b.name()));
    Fields::from(fs)
}

fn canonical_type(t: &DataType) -> DataType {
    match t {
        DataType::Null => DataType::Utf8,
        DataType::Struct(fields) => DataType::Struct(canonical_fields(fields)),
        DataType::List(item) => DataType::List(Arc::new(
            item.as_ref()
                .clone()
                .with_data_type(canonical_type(item.data_type())),
        )),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declared_schemas_read_back_as_recorded_and_bad_ones_say_how_to_write_them() {
        let s = parse_declared(
            r#"[{"name":"id","type":"int64"},{"name":"at","type":"timestamp"},
                {"name":"amount","type":"Decimal128(12, 2)"},{"name":"ok","type":"bool"}]"#,
        )
        .unwrap();
        let rec = columns_of(&s);
        assert_eq!(rec[0].type_, "int64");
        assert_eq!(rec[1].type_, "timestamp");
        assert_eq!(rec[2].type_, "Decimal128(12, 2)");
        assert_eq!(rec[3].type_, "boolean");
        assert_eq!(schema_of(&rec).unwrap(), s);
        for (bad, says) in [
            ("{\"id\": \"int64\"}", "a JSON list of columns"),
            ("[]", "names no columns"),
            (
                r#"[{"name":"a","type":"int64"},{"name":"a","type":"string"}]"#,
                "named twice",
            ),
            (
                r#"[{"name":"a","type":"money"}]"#,
                "type `money` is not one idem knows",
            ),
        ] {
            let e = parse_declared(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn a_csv_column_is_inferred_as_the_narrowest_type_every_value_casts_to() {
        let infer = |values: &[Option<&str>]| {
            let a: ArrayRef = Arc::new(arrow::array::StringArray::from(values.to_vec()));
            let mut c = Candidates::default();
            c.see(&a);
            c.finish()
        };
        assert_eq!(infer(&[Some("1"), None, Some("-7")]), DataType::Int64);
        assert_eq!(infer(&[Some("1"), Some("2.5")]), DataType::Float64);
        assert_eq!(infer(&[Some("2026-10-01")]), DataType::Date32);
        // Never a date that drops a time.
        assert_eq!(
            infer(&[Some("2026-10-01"), Some("2026-10-01 12:00:00")]),
            DataType::Timestamp(TimeUnit::Microsecond, None)
        );
        assert_eq!(
            infer(&[Some("2026-10-01 12:00:00"), Some("2026-10-01T01:02:03.5")]),
            DataType::Timestamp(TimeUnit::Microsecond, None)
        );
        assert_eq!(infer(&[Some("true"), Some("FALSE")]), DataType::Boolean);
        assert_eq!(infer(&[Some("1"), Some("x")]), DataType::Utf8);
        assert_eq!(infer(&[None, None]), DataType::Utf8);
    }

    #[test]
    fn json_schemas_come_out_with_fields_sorted_by_name() {
        let inner = DataType::Struct(Fields::from(vec![
            Field::new("z", DataType::Int64, true),
            Field::new("a", DataType::Null, true),
        ]));
        let s = Schema::new(vec![
            Field::new("b", inner, true),
            Field::new("a", DataType::Int64, true),
        ]);
        let c = canonical_json_schema(&s);
        assert_eq!(c.field(0).name(), "a");
        let DataType::Struct(fs) = c.field(1).data_type() else {
            panic!()
        };
        assert_eq!(fs[0].name(), "a");
        assert_eq!(fs[0].data_type(), &DataType::Utf8);
    }
}
