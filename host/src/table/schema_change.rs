//! What a run does when its output's columns are not the table's
//! (`--on-schema-change`, as dbt's `on_schema_change`): fail (the
//! default), or append the new columns to the table, nullable, in the
//! same commit as the output. A column's type is never changed. And what
//! such an append means for the slices committed before it: their rows
//! are still what idem committed (readers see the new columns as null),
//! so an appended column is not drift ([`appended_only`]).

use arrow::datatypes::{DataType, Field, Schema};

use super::error::TableError;

/// How a run meets output columns the table does not have.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SchemaChange {
    /// Refuse the run, naming the columns (the default).
    #[default]
    Fail,
    /// Add them to the table as nullable columns, last, in the commit.
    AppendNewColumns,
}

impl SchemaChange {
    /// Every policy's name, as a user reads them.
    pub const NAMES: &'static str = "fail or append-new-columns";

    /// The policy's name (`--on-schema-change`, the run spec).
    pub fn name(&self) -> &'static str {
        match self {
            SchemaChange::Fail => "fail",
            SchemaChange::AppendNewColumns => "append-new-columns",
        }
    }

    /// The default, which the run spec leaves out (run keys made before
    /// the policy existed stay what they were).
    pub fn is_default(&self) -> bool {
        *self == SchemaChange::Fail
    }
}

impl std::str::FromStr for SchemaChange {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "fail" => Ok(SchemaChange::Fail),
            "append-new-columns" => Ok(SchemaChange::AppendNewColumns),
            other => Err(format!(
                "`{other}` is not a schema-change policy: give {}",
                SchemaChange::NAMES
            )),
        }
    }
}

/// The output's columns the table lacks, as the nullable fields the table
/// gets (in output order), when `policy` lets them in. Every other output
/// column must be in the table with the same type, up to encodings that
/// hold the same values (text and binary in their plain, large and view
/// forms). Anything a table would convert (e.g. nanosecond timestamps,
/// which Delta stores as microseconds) is refused: the table would not
/// hold what the manifest's output digest describes.
pub(super) fn new_columns(
    output: &Schema,
    table: &Schema,
    policy: SchemaChange,
) -> Result<Vec<Field>, TableError> {
    let mut added = Vec::new();
    for f in output.fields() {
        let Ok(t) = table.field_with_name(f.name()) else {
            added.push(new_column(f, table)?);
            continue;
        };
        if family(f.data_type()) != family(t.data_type()) {
            return Err(TableError::Output(format!(
                "the output's column `{}` is {}, but the table stores it as {}: the table would not hold the output exactly. Cast it to {} in the transform, or use a new table (--on-schema-change adds columns, it never changes a column's type)",
                f.name(),
                f.data_type(),
                t.data_type(),
                t.data_type()
            )));
        }
    }
    if added.is_empty() || policy == SchemaChange::AppendNewColumns {
        return Ok(added);
    }
    Err(TableError::Output(format!(
        "the output has {} that the table does not have: {} (table columns: {}). To add {} to the table (nullable; rows committed before read null), run with --on-schema-change append-new-columns; or write to a new table",
        if added.len() == 1 {
            "a column"
        } else {
            "columns"
        },
        names(&added),
        names(table.fields().iter().map(|f| f.as_ref())),
        if added.len() == 1 { "it" } else { "them" },
    )))
}

/// The table column an output column the table lacks becomes: nullable,
/// without the output's field metadata (which would read as a column
/// default or mapping to a reader). Refused: a name the table has in
/// another case (engines match names case-insensitively: two columns
/// would be ambiguous), and a column of nulls without a type.
fn new_column(f: &Field, table: &Schema) -> Result<Field, TableError> {
    if let Some(t) = table
        .fields()
        .iter()
        .find(|t| t.name().eq_ignore_ascii_case(f.name()))
    {
        return Err(TableError::Output(format!(
            "the output's column `{}` differs from the table's `{}` only in case, which engines read as one name: rename it in the transform",
            f.name(),
            t.name()
        )));
    }
    if f.data_type() == &DataType::Null {
        return Err(TableError::Output(format!(
            "the output's new column `{}` has no type (Null): cast it to the type it will hold in the transform, so the table's column gets that type",
            f.name()
        )));
    }
    Ok(Field::new(f.name(), f.data_type().clone(), true))
}

/// Whether `now` is `then` with columns appended: `then`'s columns first,
/// the same (`same`), and every later one nullable (`nullable`). What the
/// slices committed under `then` still hold exactly.
pub(crate) fn appended_only<T>(
    then: &[T],
    now: &[T],
    same: impl Fn(&T, &T) -> bool,
    nullable: impl Fn(&T) -> bool,
) -> bool {
    now.len() >= then.len()
        && then.iter().zip(now).all(|(a, b)| same(a, b))
        && now[then.len()..].iter().all(nullable)
}

/// Types that hold the same values.
pub(crate) fn family(t: &DataType) -> DataType {
    match t {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => DataType::Utf8,
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => DataType::Binary,
        other => other.clone(),
    }
}

/// Column names, for messages: `` `a`, `b` ``.
pub(crate) fn names<'a>(fields: impl IntoIterator<Item = &'a Field>) -> String {
    fields
        .into_iter()
        .map(|f| format!("`{}`", f.name()))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema(cols: &[(&str, DataType)]) -> Schema {
        Schema::new(
            cols.iter()
                .map(|(n, t)| Field::new(*n, t.clone(), false))
                .collect::<Vec<_>>(),
        )
    }

    #[test]
    fn new_columns_are_refused_by_default_and_appended_nullable_when_asked() {
        let table = schema(&[("id", DataType::Int64), ("name", DataType::Utf8)]);
        let output = schema(&[
            ("id", DataType::Int64),
            ("coupon", DataType::Utf8),
            ("name", DataType::LargeUtf8),
        ]);
        let refused = new_columns(&output, &table, SchemaChange::Fail)
            .unwrap_err()
            .to_string();
        assert!(refused.contains("`coupon`"), "{refused}");
        assert!(
            refused.contains("--on-schema-change append-new-columns"),
            "{refused}"
        );
        let added = new_columns(&output, &table, SchemaChange::AppendNewColumns).unwrap();
        assert_eq!(added.len(), 1);
        assert_eq!(added[0].name(), "coupon");
        assert!(added[0].is_nullable());
        // Another case of a table column, or an untyped one: refused.
        for (name, t, why) in [
            ("NAME", DataType::Utf8, "only in case"),
            ("empty", DataType::Null, "has no type"),
        ] {
            let out = schema(&[("id", DataType::Int64), (name, t)]);
            let e = new_columns(&out, &table, SchemaChange::AppendNewColumns)
                .unwrap_err()
                .to_string();
            assert!(e.contains(why), "{e}");
        }
        // Nothing new: nothing to add, whatever the policy.
        assert!(
            new_columns(&table, &table, SchemaChange::Fail)
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn a_changed_type_is_refused_whatever_the_policy() {
        let table = schema(&[("id", DataType::Int64)]);
        let output = schema(&[("id", DataType::Utf8), ("x", DataType::Int32)]);
        for policy in [SchemaChange::Fail, SchemaChange::AppendNewColumns] {
            let e = new_columns(&output, &table, policy)
                .unwrap_err()
                .to_string();
            assert!(e.contains("`id` is Utf8"), "{e}");
            assert!(e.contains("never changes a column's type"), "{e}");
        }
    }

    #[test]
    fn only_nullable_columns_appended_keep_earlier_slices_whole() {
        let same = |a: &(&str, bool), b: &(&str, bool)| a == b;
        let nullable = |c: &(&str, bool)| c.1;
        let then = [("id", false), ("name", true)];
        assert!(appended_only(&then, &then, same, nullable));
        assert!(appended_only(
            &then,
            &[("id", false), ("name", true), ("coupon", true)],
            same,
            nullable
        ));
        // Required, renamed, reordered or dropped columns are changes.
        for now in [
            &[("id", false), ("name", true), ("coupon", false)][..],
            &[("id", false), ("label", true), ("coupon", true)],
            &[("name", true), ("id", false)],
            &[("id", false)],
        ] {
            assert!(!appended_only(&then, now, same, nullable), "{now:?}");
        }
        "fail".parse::<SchemaChange>().unwrap();
        let e = "append".parse::<SchemaChange>().unwrap_err();
        assert!(e.contains("fail or append-new-columns"), "{e}");
    }
}
