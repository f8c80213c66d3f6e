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

/// Rows of one of the table's data files in its schema now, each column
/// found by its Iceberg field id, as Iceberg readers find it (a renamed
/// column keeps its id; a dropped and re-added one has a new id, so the
/// old values do not come back); optional columns the file lacks are
/// null. A file without field ids (a migrated table's) is matched by name.
pub(super) fn conform_by_id(
    batch: RecordBatch,
    schema: &SchemaRef,
) -> Result<RecordBatch, TableError> {
    let id = |f: &Field| {
        f.metadata()
            .get(parquet::arrow::PARQUET_FIELD_ID_META_KEY)
            .cloned()
    };
    let file = batch.schema();
    if file.fields().iter().all(|f| id(f).is_none()) {
        return conform_older(batch, schema);
    }
    let mut fields = Vec::with_capacity(schema.fields().len());
    let mut cols: Vec<ArrayRef> = Vec::with_capacity(schema.fields().len());
    for f in schema.fields() {
        let at = id(f).and_then(|i| file.fields().iter().position(|g| id(g) == Some(i.clone())));
        let col = match at {
            Some(k) => batch.column(k).clone(),
            None if f.is_nullable() => {
                arrow::array::new_null_array(f.data_type(), batch.num_rows())
            }
            None => {
                return Err(TableError::Output(format!(
                    "a data file of the table has no column with the field id of `{}`, which is required",
                    f.name()
                )));
            }
        };
        fields.push(Field::new(f.name(), col.data_type().clone(), true));
        cols.push(col);
    }
    let renamed = RecordBatch::try_new(Arc::new(Schema::new(fields)), cols)
        .map_err(|e| TableError::Output(e.to_string()))?;
    conform(renamed, schema)
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
