//! The SQL of Delta's MERGE and replace, for delta-rs' DataFusion: the
//! MERGE of a slice's output on its keys (its own rows whose keys are gone
//! deleted), the search for a key another slice owns, and the quoting of
//! identifiers and literals in predicates.

use arrow::util::display::array_value_to_string;
use deltalake::DeltaTable;
use deltalake::datafusion::prelude::{DataFrame, SessionContext};
use deltalake::kernel::transaction::CommitProperties;

use super::commit::classify;
use crate::table::error::TableError;
use crate::table::mode::OWNER_COLUMN;

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

/// MERGE the output into the table on `keys`: update every column of
/// matching rows, insert the rest. Key uniqueness was checked while the
/// output was staged ([`KeyChecker`]).
pub(super) async fn merge_into(
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
        .with_writer_properties(crate::table::datafile::writer_properties().build())
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
        .map_err(classify)?
        .await
        .map_err(classify)?;
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
