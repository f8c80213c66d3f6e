//! Commit modes: how a slice's output replaces or joins the table's rows.

use std::collections::HashSet;

use arrow::array::{Array as _, RecordBatch};
use arrow::row::{RowConverter, SortField};
use arrow::util::display::array_value_to_string;
use deltalake::DeltaTable;
use deltalake::datafusion::prelude::{DataFrame, SessionContext};
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

/// The column of a merge table that names the slice owning each row.
pub const OWNER_COLUMN: &str = "_idem_slice";

/// A SQL string literal.
fn literal(value: &str) -> String {
    format!("'{}'", value.replace('\'', "''"))
}

/// Quote an identifier for a SQL predicate.
fn q(ident: &str) -> String {
    format!("\"{}\"", ident.replace('"', "\"\""))
}

/// `column = 'value'` as a SQL predicate.
pub(super) fn equals(column: &str, value: &str) -> String {
    format!("{} = {}", q(column), literal(value))
}

/// Checks, batch by batch as the output streams past, that no merge key
/// repeats: MERGE with two source rows per key would be ambiguous.
pub struct KeyChecker {
    keys: Vec<String>,
    converter: Option<RowConverter>,
    seen: HashSet<Vec<u8>>,
    duplicates: usize,
    example: Option<String>,
    /// Null keys per key column: MERGE never matches a null key, so every
    /// rerun would insert those rows again.
    nulls: Vec<usize>,
}

impl KeyChecker {
    /// A checker for `keys`.
    pub fn new(keys: &[String]) -> Self {
        KeyChecker {
            keys: keys.to_vec(),
            converter: None,
            seen: HashSet::new(),
            duplicates: 0,
            example: None,
            nulls: vec![0; keys.len()],
        }
    }

    /// Look at one output batch.
    pub fn update(&mut self, b: &RecordBatch) -> Result<(), TableError> {
        let schema = b.schema();
        let mut cols = Vec::with_capacity(self.keys.len());
        for k in &self.keys {
            let c = b.column_by_name(k).ok_or_else(|| TableError::NoKeyColumn {
                column: k.clone(),
                columns: names(&schema),
            })?;
            cols.push(c.clone());
        }
        for (n, c) in self.nulls.iter_mut().zip(&cols) {
            *n += c.logical_null_count();
        }
        if self.converter.is_none() {
            let fields = cols
                .iter()
                .map(|c| SortField::new(c.data_type().clone()))
                .collect();
            self.converter =
                Some(RowConverter::new(fields).map_err(|e| TableError::Output(e.to_string()))?);
        }
        let Some(converter) = &self.converter else {
            return Ok(());
        };
        let rows = converter
            .convert_columns(&cols)
            .map_err(|e| TableError::Output(e.to_string()))?;
        for (i, row) in rows.iter().enumerate() {
            if !self.seen.insert(row.as_ref().to_vec()) {
                self.duplicates += 1;
                if self.example.is_none() {
                    let vals: Vec<String> = cols
                        .iter()
                        .map(|c| array_value_to_string(c, i).unwrap_or_default())
                        .collect();
                    self.example = Some(vals.join(", "));
                }
            }
        }
        Ok(())
    }

    /// `Ok` when every key was unique.
    pub fn finish(self) -> Result<(), TableError> {
        if let Some((column, &rows)) = self.keys.iter().zip(&self.nulls).find(|(_, n)| **n > 0) {
            return Err(TableError::NullKeys {
                column: column.clone(),
                rows,
            });
        }
        match self.example {
            None => Ok(()),
            Some(example) => Err(TableError::DuplicateKeys {
                keys: self.keys.join(", "),
                duplicates: self.duplicates,
                example,
            }),
        }
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
/// matching rows, insert the rest. Key uniqueness was checked while the
/// output was staged ([`KeyChecker`]).
pub(super) async fn merge(
    table: DeltaTable,
    source: DataFrame,
    keys: &[String],
    slice: &str,
    props: CommitProperties,
) -> Result<DeltaTable, TableError> {
    let cols: Vec<String> = source
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect();
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
        .with_writer_properties(super::writer_properties().build())
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
        // The slice's rows whose keys its new output no longer has: a
        // slice's output replaces exactly its own rows.
        .and_then(|m| {
            m.when_not_matched_by_source_delete(|d| {
                d.predicate(format!("target.{} = {}", q(OWNER_COLUMN), literal(slice)))
            })
        })
        .map_err(super::classify)?
        .await
        .map_err(super::classify)?;
    Ok(table)
}

/// A key of `source` that the table already holds for another slice:
/// `(owner, key values)` of the first one found.
pub(super) async fn stolen_key(
    ctx: &SessionContext,
    table: std::sync::Arc<dyn deltalake::datafusion::catalog::TableProvider>,
    source: DataFrame,
    keys: &[String],
    slice: &str,
) -> Result<Option<(String, String)>, TableError> {
    let err = |e: deltalake::datafusion::error::DataFusionError| TableError::Delta {
        what: "reading the table's keys".into(),
        detail: e.to_string(),
    };
    let target = ctx
        .read_table(table)
        .map_err(err)?
        .alias("target")
        .map_err(err)?;
    let source = source.alias("source").map_err(err)?;
    let on: Vec<String> = keys
        .iter()
        .map(|k| format!("target.{} = source.{}", q(k), q(k)))
        .collect();
    let mut filter = on.join(" AND ");
    filter.push_str(&format!(
        " AND target.{} <> {}",
        q(OWNER_COLUMN),
        literal(slice)
    ));
    let mut cols = vec![format!("target.{}", q(OWNER_COLUMN))];
    cols.extend(
        keys.iter()
            .map(|k| format!("CAST(target.{} AS VARCHAR)", q(k))),
    );
    let cols: Vec<&str> = cols.iter().map(String::as_str).collect();
    let found = target
        .join_on(
            source,
            deltalake::datafusion::logical_expr::JoinType::Inner,
            [],
        )
        .map_err(err)?;
    let predicate = ctx.parse_sql_expr(&filter, found.schema()).map_err(err)?;
    let found = found
        .filter(predicate)
        .map_err(err)?
        .select_exprs(&cols)
        .map_err(err)?
        .limit(0, Some(1))
        .map_err(err)?
        .collect()
        .await
        .map_err(err)?;
    let Some(b) = found.iter().find(|b| b.num_rows() > 0) else {
        return Ok(None);
    };
    let text = |i: usize| array_value_to_string(b.column(i), 0).unwrap_or_default();
    let owner = text(0);
    let example = (1..b.num_columns())
        .map(text)
        .collect::<Vec<_>>()
        .join(", ");
    Ok(Some((owner, example)))
}
