//! Commit modes: how a slice's output replaces or joins the table's rows.

use std::collections::HashSet;

use arrow::array::RecordBatch;
use arrow::row::{RowConverter, SortField};
use arrow::util::display::array_value_to_string;
use deltalake::DeltaTable;
use deltalake::datafusion::prelude::SessionContext;
use deltalake::kernel::transaction::CommitProperties;

use super::TableError;

/// How a run's output is committed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    /// Replace exactly the partition `column = value` that the slice owns.
    OverwritePartition {
        /// Partition column (a string column in the table).
        column: String,
        /// The slice's partition value.
        value: String,
    },
    /// Upsert on the key columns: matching rows are updated, others inserted.
    Merge {
        /// Key columns; the output must have one row per key.
        keys: Vec<String>,
    },
    /// Append the output. Idempotent because a slice's output digest is never
    /// committed twice in a row.
    Append,
}

impl Mode {
    /// The mode's CLI name.
    pub fn name(&self) -> &'static str {
        match self {
            Mode::OverwritePartition { .. } => "overwrite-partition",
            Mode::Merge { .. } => "merge",
            Mode::Append => "append",
        }
    }
}

/// Quote an identifier for a SQL predicate.
fn q(ident: &str) -> String {
    format!("\"{}\"", ident.replace('"', "\"\""))
}

/// `column = 'value'` as a SQL predicate.
pub(super) fn equals(column: &str, value: &str) -> String {
    format!("{} = '{}'", q(column), value.replace('\'', "''"))
}

/// Refuse output that repeats a merge key: MERGE would be ambiguous.
pub(super) fn check_unique_keys(
    batches: &[RecordBatch],
    keys: &[String],
) -> Result<(), TableError> {
    let Some(first) = batches.first() else {
        return Ok(());
    };
    let schema = first.schema();
    let mut fields = Vec::new();
    for k in keys {
        let f = schema.field_with_name(k).map_err(|_| {
            TableError::Output(format!(
                "merge key column `{k}` is not in the output (columns: {})",
                names(&schema)
            ))
        })?;
        fields.push(SortField::new(f.data_type().clone()));
    }
    let converter = RowConverter::new(fields).map_err(|e| TableError::Output(e.to_string()))?;
    let mut seen = HashSet::new();
    let (mut dups, mut example) = (0usize, None);
    for b in batches {
        let cols: Vec<_> = keys
            .iter()
            .filter_map(|k| b.column_by_name(k).cloned())
            .collect();
        let rows = converter
            .convert_columns(&cols)
            .map_err(|e| TableError::Output(e.to_string()))?;
        for (i, row) in rows.iter().enumerate() {
            if !seen.insert(row.as_ref().to_vec()) {
                dups += 1;
                if example.is_none() {
                    let vals: Vec<String> = cols
                        .iter()
                        .map(|c| array_value_to_string(c, i).unwrap_or_default())
                        .collect();
                    example = Some(vals.join(", "));
                }
            }
        }
    }
    match example {
        None => Ok(()),
        Some(example) => Err(TableError::DuplicateKeys {
            keys: keys.join(", "),
            duplicates: dups,
            example,
        }),
    }
}

fn names(schema: &arrow::datatypes::Schema) -> String {
    schema
        .fields()
        .iter()
        .map(|f| f.name().as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// MERGE the output into the table on `keys`: update every column of
/// matching rows, insert the rest.
pub(super) async fn merge(
    table: DeltaTable,
    batches: Vec<RecordBatch>,
    keys: &[String],
    props: CommitProperties,
) -> Result<DeltaTable, TableError> {
    check_unique_keys(&batches, keys)?;
    let schema = batches
        .first()
        .map(|b| b.schema())
        .ok_or_else(|| TableError::Output("merge needs at least an empty batch".into()))?;
    let cols: Vec<String> = schema.fields().iter().map(|f| f.name().clone()).collect();
    let ctx = SessionContext::new();
    let source = ctx
        .read_batches(batches)
        .map_err(|e| TableError::Output(e.to_string()))?;
    let predicate = keys
        .iter()
        .map(|k| format!("target.{} = source.{}", q(k), q(k)))
        .collect::<Vec<_>>()
        .join(" AND ");
    let (table, _metrics) = table
        .merge(source, predicate)
        .with_source_alias("source")
        .with_target_alias("target")
        .with_commit_properties(props)
        .when_matched_update(|u| {
            cols.iter()
                .fold(u, |u, c| u.update(c.as_str(), format!("source.{}", q(c))))
        })
        .and_then(|m| {
            m.when_not_matched_insert(|i| {
                cols.iter()
                    .fold(i, |i, c| i.set(c.as_str(), format!("source.{}", q(c))))
            })
        })
        .map_err(super::classify)?
        .await
        .map_err(super::classify)?;
    Ok(table)
}
