//! What must hold before a slice's commit is planned on an Iceberg table:
//! the table takes the run's mode, format and partitioning, and the output
//! fits its schema.

use iceberg::spec::{FormatVersion, PrimitiveType, TableMetadata, Transform, Type};

use super::MODE_PROP;
use super::schema::{arrow_schema_of, plain_schema};
use crate::table::commit::CommitRequest;
use crate::table::datafile::{check_types, data_columns};
use crate::table::error::TableError;
use crate::table::mode::{Mode, OWNER_COLUMN};

/// The table's schema, partitioning and mode must be the run's.
pub(super) fn check_table(req: &CommitRequest<'_>, m: &TableMetadata) -> Result<(), TableError> {
    if let Some(created) = m.properties().get(MODE_PROP)
        && created != req.mode.name()
    {
        return Err(TableError::ModeMismatch {
            table: req.mode.name().to_string(),
            created: created.clone(),
        });
    }
    // idem writes format-v2 manifests and manifest lists.
    if m.format_version() != FormatVersion::V2 {
        return Err(TableError::Partitioning(format!(
            "the table is Iceberg format {}, but idem writes format 2: upgrade it (table property format-version=2) or use a new table",
            m.format_version()
        )));
    }
    check_partitioning(req.mode, m)?;
    // The owner column is idem's: an output carrying one would claim rows
    // for any slice.
    if matches!(req.mode, Mode::Merge { .. })
        && req
            .schema
            .as_ref()
            .is_some_and(|s| s.field_with_name(OWNER_COLUMN).is_ok())
    {
        return Err(TableError::Output(format!(
            "the output has a column named `{OWNER_COLUMN}`, which idem keeps for itself in merge tables (the slice owning each row): rename it"
        )));
    }
    // The partition columns are the slice's text, cast to the table's
    // type where it declares another ([`super::partition_value`]).
    if let Some(out) = &req.schema {
        check_types(
            &data_columns(&plain_schema(out), req.mode),
            arrow_schema_of(m)?.as_ref(),
            req.schema_change,
        )?;
    }
    Ok(())
}

/// The table is partitioned as `mode` writes (by the slice's text column,
/// or not at all), and a merge table has the owner column.
fn check_partitioning(mode: &Mode, m: &TableMetadata) -> Result<(), TableError> {
    let schema = m.current_schema();
    let fields = m.default_partition_spec().fields();
    // Each partition field's source type (`None`: not a primitive).
    let source = |f: &iceberg::spec::PartitionField| {
        schema
            .field_by_id(f.source_id)
            .and_then(|s| s.field_type.as_primitive_type().cloned())
    };
    // The slice's partition value is text, written in the column's type
    // where the table declares a date or an integer: any other type would
    // get values of the wrong type in its manifests.
    if let Some(f) = fields
        .iter()
        .find(|f| !source(f).is_some_and(|p| super::partition_value::writable(&p)))
    {
        return Err(TableError::Partitioning(format!(
            "the table's partition column `{}` is not a string, date or integer column: idem writes a slice's partition value as text, or as the date or integer it spells; use a table partitioned on such a column",
            f.name
        )));
    }
    // A typed value matches files by their literal alone: files of an
    // earlier partition spec (a `day(ts)`, another column) could hold the
    // same literal for other rows, and be replaced with the slice's.
    let typed = fields
        .iter()
        .any(|f| source(f) != Some(PrimitiveType::String));
    if typed && m.partition_specs_iter().len() > 1 {
        return Err(TableError::Partitioning(
            "the table's partitioning changed (it has more than one partition spec) and its partition column is not a string: idem cannot tell the files of its partition from older ones by their values; write to a table with one partition spec".into(),
        ));
    }
    let parts = partition_columns(m);
    let wanted: Vec<String> = match mode {
        Mode::OverwritePartition { partition } => partition.columns(),
        _ => Vec::new(),
    };
    // A merge table names each row's slice: without that column no
    // slice's rows can be told apart (its vanished keys would stay,
    // other writers' rows would be overwritten silently).
    if matches!(mode, Mode::Merge { .. })
        && !matches!(
            schema
                .field_by_name(OWNER_COLUMN)
                .map(|f| f.field_type.as_ref()),
            Some(Type::Primitive(PrimitiveType::String))
        )
    {
        return Err(TableError::Partitioning(format!(
            "the table has no string column `{OWNER_COLUMN}` (the slice owning each row), which a merge needs: merge into a table idem created, or add the column"
        )));
    }
    if parts != wanted {
        return Err(TableError::Partitioning(format!(
            "the table is partitioned by [{}], but this run writes partition [{}]: give --partition with the table's partition column, or use another table",
            parts.join(", "),
            wanted.join(", ")
        )));
    }
    Ok(())
}

/// The table's partition fields, as `column` or `transform(column)`.
fn partition_columns(m: &TableMetadata) -> Vec<String> {
    let schema = m.current_schema();
    m.default_partition_spec()
        .fields()
        .iter()
        .map(|f| {
            let src = schema
                .field_by_id(f.source_id)
                .map(|s| s.name.clone())
                .unwrap_or_default();
            if f.transform == Transform::Identity {
                src
            } else {
                format!("{}({src})", f.transform)
            }
        })
        .collect()
}
