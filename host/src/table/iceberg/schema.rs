//! Types between Arrow and Iceberg: the Iceberg type each output type is
//! stored as, the Arrow type idem writes each Iceberg type as, and batches
//! put in the table's column order, types and field ids.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use iceberg::spec::{PrimitiveType, TableMetadata, Type};

use crate::table::error::TableError;

/// A table's schema as Arrow (the types idem writes for each Iceberg
/// type).
pub(super) fn arrow_schema_of(m: &TableMetadata) -> Result<SchemaRef, TableError> {
    arrow_fields_of(m.current_schema().as_ref())
}

/// An Iceberg schema as Arrow.
pub(super) fn arrow_fields_of(schema: &iceberg::spec::Schema) -> Result<SchemaRef, TableError> {
    let fields = schema
        .as_struct()
        .fields()
        .iter()
        .map(|f| {
            let t = match f.field_type.as_ref() {
                Type::Primitive(p) => arrow_type(p),
                _ => None,
            }
            .ok_or_else(|| {
                TableError::Output(format!(
                    "the table's column `{}` is {}, which idem does not write",
                    f.name, f.field_type
                ))
            })?;
            Ok(Field::new(&f.name, t, !f.required))
        })
        .collect::<Result<Vec<_>, TableError>>()?;
    Ok(Arc::new(Schema::new(fields)))
}

/// The Iceberg type an Arrow type is stored as, exactly.
pub(super) fn iceberg_type(t: &DataType) -> Option<PrimitiveType> {
    Some(match t {
        DataType::Boolean => PrimitiveType::Boolean,
        DataType::Int32 => PrimitiveType::Int,
        DataType::Int64 => PrimitiveType::Long,
        DataType::Float32 => PrimitiveType::Float,
        DataType::Float64 => PrimitiveType::Double,
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => PrimitiveType::String,
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => PrimitiveType::Binary,
        DataType::Date32 => PrimitiveType::Date,
        DataType::Timestamp(TimeUnit::Microsecond, None) => PrimitiveType::Timestamp,
        // One spelling of UTC, so the table's type reads back as the
        // output's (the digest covers the type).
        DataType::Timestamp(TimeUnit::Microsecond, Some(tz)) if tz.as_ref() == "UTC" => {
            PrimitiveType::Timestamptz
        }
        DataType::Decimal128(p, s) if *s >= 0 && *p <= 38 => PrimitiveType::Decimal {
            precision: *p as u32,
            scale: *s as u32,
        },
        _ => return None,
    })
}

/// The Arrow type idem writes an Iceberg type as.
pub(super) fn arrow_type(t: &PrimitiveType) -> Option<DataType> {
    Some(match t {
        PrimitiveType::Boolean => DataType::Boolean,
        PrimitiveType::Int => DataType::Int32,
        PrimitiveType::Long => DataType::Int64,
        PrimitiveType::Float => DataType::Float32,
        PrimitiveType::Double => DataType::Float64,
        PrimitiveType::String => DataType::Utf8,
        PrimitiveType::Binary => DataType::Binary,
        PrimitiveType::Date => DataType::Date32,
        PrimitiveType::Timestamp => DataType::Timestamp(TimeUnit::Microsecond, None),
        PrimitiveType::Timestamptz => {
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
        }
        PrimitiveType::Decimal { precision, scale } => {
            DataType::Decimal128(*precision as u8, *scale as i8)
        }
        _ => return None,
    })
}

/// The output schema with dictionaries replaced by their value types.
pub(super) fn plain_schema(s: &Schema) -> Schema {
    Schema::new(
        s.fields()
            .iter()
            .map(|f| match f.data_type() {
                DataType::Dictionary(_, v) => f.as_ref().clone().with_data_type(v.as_ref().clone()),
                _ => f.as_ref().clone(),
            })
            .collect::<Vec<_>>(),
    )
}

/// The table's Arrow schema with each column's Iceberg field id (what
/// Iceberg readers match columns by).
pub(super) fn with_field_ids(table: &Schema, ice: &iceberg::spec::Schema) -> SchemaRef {
    Arc::new(Schema::new(
        table
            .fields()
            .iter()
            .map(|f| {
                let id = ice.field_by_name(f.name()).map(|n| n.id).unwrap_or(0);
                f.as_ref().clone().with_metadata(HashMap::from([(
                    parquet::arrow::PARQUET_FIELD_ID_META_KEY.to_string(),
                    id.to_string(),
                )]))
            })
            .collect::<Vec<_>>(),
    ))
}

/// A batch in the table's column order and types (cast where the type
/// family matches: dictionaries and large/view strings), or an error.
pub(super) fn conform(batch: RecordBatch, schema: &SchemaRef) -> Result<RecordBatch, TableError> {
    let mut cols: Vec<ArrayRef> = Vec::with_capacity(schema.fields().len());
    for f in schema.fields() {
        let col = batch.column_by_name(f.name()).ok_or_else(|| {
            TableError::Output(format!(
                "the output has no column `{}`, which the table has: add it in the transform, or run with --on-schema-change append-new-columns to write it null (when the table's column is optional)",
                f.name()
            ))
        })?;
        let col = if col.data_type() == f.data_type() {
            col.clone()
        } else {
            arrow::compute::cast(col, f.data_type())
                .map_err(|e| TableError::Output(format!("column `{}`: {e}", f.name())))?
        };
        cols.push(col);
    }
    RecordBatch::try_new(schema.clone(), cols).map_err(|e| TableError::Output(e.to_string()))
}

/// A batch in the table's schema with the optional columns it lacks
/// null: rows of a data file written before the table gained them (a
/// merge rewriting it), or an output that predates them when the run
/// lets columns differ (`--on-schema-change append-new-columns`).
pub(super) fn conform_older(
    batch: RecordBatch,
    schema: &SchemaRef,
) -> Result<RecordBatch, TableError> {
    conform(
        crate::table::datafile::with_nulls_for(batch, schema)?,
        schema,
    )
}

/// A batch read back from a data file, without the field-id metadata
/// (the output never had it).
pub(super) fn strip_field_ids(batch: RecordBatch) -> RecordBatch {
    let schema = Schema::new(
        batch
            .schema()
            .fields()
            .iter()
            .map(|f| f.as_ref().clone().with_metadata(HashMap::new()))
            .collect::<Vec<_>>(),
    );
    RecordBatch::try_new(Arc::new(schema), batch.columns().to_vec()).unwrap_or(batch)
}
