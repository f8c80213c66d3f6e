//! Appending columns to an Iceberg table (`--on-schema-change
//! append-new-columns`): a new current schema, the old one's columns with
//! their field ids and the new ones after them, optional, with new ids;
//! set by the slice's own snapshot commit (one metadata file, one catalog
//! swap). And the other side: a slice committed under an earlier schema
//! still holds its rows when the schema only gained optional columns.

use std::sync::Arc;

use iceberg::spec::{NestedField, PrimitiveType, Schema, TableMetadata, Type};

use super::ice_err;
use super::schema::{arrow_schema_of, iceberg_type, plain_schema};
use crate::table::commit::CommitRequest;
use crate::table::datafile::{check_types, data_columns};
use crate::table::error::TableError;
use crate::table::schema_change::appended_only;

/// `m` with the output's new columns appended to its current schema, when
/// the run lets them in (`m` itself when the output has none; an error
/// when it has some and may not, or changes a column's type).
pub(super) fn with_new_columns(
    req: &CommitRequest<'_>,
    m: TableMetadata,
) -> Result<TableMetadata, TableError> {
    let Some(out) = &req.schema else {
        return Ok(m);
    };
    // The partition columns are the slice's text, in whatever type the
    // table declares them ([`super::partition_value`]).
    let added = check_types(
        &data_columns(&plain_schema(out), req.mode),
        arrow_schema_of(&m)?.as_ref(),
        req.schema_change,
    )?;
    if added.is_empty() {
        return Ok(m);
    }
    // The current schema is the whole table's: a branch write changing it
    // would show the columns on `main` before the audit passed.
    if req.branch.is_some() {
        return Err(TableError::Output(format!(
            "the output has new columns ({}), and a write-audit-publish branch cannot add them: the table's schema is shared by every branch, so main would show them before the audit passed. Run once without --wap to add them, or write to a new table",
            crate::table::schema_change::names(&added)
        )));
    }
    let current = m.current_schema().clone();
    let mut fields = current.as_struct().fields().to_vec();
    let mut id = m.last_column_id();
    for f in &added {
        let t: PrimitiveType = iceberg_type(f.data_type()).ok_or_else(|| {
            TableError::Output(format!(
                "the output's new column `{}` is {}, which has no exact Iceberg type: cast it in the transform",
                f.name(),
                f.data_type()
            ))
        })?;
        id += 1;
        fields.push(Arc::new(NestedField::optional(
            id,
            f.name(),
            Type::Primitive(t),
        )));
    }
    let schema = Schema::builder()
        .with_fields(fields)
        .with_identifier_field_ids(current.identifier_field_ids())
        .build()
        .map_err(ice_err("appending the new columns"))?;
    // No metadata-log entry here: the commit's own builder adds the one
    // for the file it replaces.
    Ok(m.into_builder(None)
        .add_current_schema(schema)
        .map_err(ice_err("appending the new columns"))?
        .build()
        .map_err(ice_err("appending the new columns"))?
        .metadata)
}

/// Whether the schema `now` is `then` with optional columns appended (no
/// defaults): the rows committed under `then` read the same.
pub(super) fn appended_to(then: &Schema, now: &Schema) -> bool {
    let (a, b) = (then.as_struct().fields(), now.as_struct().fields());
    appended_only(
        a,
        b,
        |x, y| x == y,
        |f| !f.required && f.initial_default.is_none() && f.write_default.is_none(),
    )
}
