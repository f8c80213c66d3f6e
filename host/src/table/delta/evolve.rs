//! Appending columns to a Delta table (`--on-schema-change
//! append-new-columns`): the table's schema with the new nullable columns
//! last, the data writer that writes it, and the `metaData` action that
//! sets it in the slice's own commit (the table's id, name, partitioning
//! and configuration kept: only the schema string changes).

use std::sync::Arc;

use arrow::datatypes::{Field, Schema, SchemaRef};
use deltalake::DeltaTable;
use deltalake::kernel::engine::arrow_conversion::{TryIntoArrow as _, TryIntoKernel as _};
use deltalake::kernel::{Metadata, MetadataExt as _, StructType};
use deltalake::writer::RecordBatchWriter;

use crate::table::error::TableError;

/// The table's schema (`delta`'s loaded version) with `added` last, as
/// Delta states it and as Arrow reads it.
pub(in crate::table) fn evolved(
    delta: &DeltaTable,
    added: &[Field],
) -> Result<(StructType, SchemaRef), TableError> {
    let err = |what: &str| {
        let what = what.to_string();
        move |e: deltalake::DeltaTableError| TableError::Delta {
            what: what.clone(),
            detail: e.to_string(),
        }
    };
    let snapshot = delta.snapshot().map_err(err("reading the snapshot"))?;
    let extra: StructType = (&Schema::new(added.to_vec()))
        .try_into_kernel()
        .map_err(|e| TableError::Output(format!("a new column has no Delta type: {e}")))?;
    let fields = snapshot
        .schema()
        .fields()
        .cloned()
        .chain(extra.fields().cloned())
        .collect::<Vec<_>>();
    let kernel = StructType::try_new(fields).map_err(|e| TableError::Output(e.to_string()))?;
    let arrow: Schema = (&kernel)
        .try_into_arrow()
        .map_err(|e| TableError::Output(e.to_string()))?;
    Ok((kernel, Arc::new(arrow)))
}

/// The `metaData` action of the loaded version with `schema` in place of
/// its schema (everything else kept, the table's id first of all).
pub(in crate::table) fn metadata_with(
    delta: &DeltaTable,
    schema: &StructType,
) -> Result<Metadata, TableError> {
    let to_err = |e: &dyn std::fmt::Display| TableError::Delta {
        what: "changing the schema".into(),
        detail: e.to_string(),
    };
    let snapshot = delta.snapshot().map_err(|e| to_err(&e))?;
    snapshot
        .metadata()
        .clone()
        .with_schema(schema)
        .map_err(|e| to_err(&e))
}

/// A writer of the table's data files with `added` appended to its
/// schema (the table's own writer when nothing is added).
pub(in crate::table) fn writer(
    delta: &DeltaTable,
    added: &[Field],
) -> Result<RecordBatchWriter, TableError> {
    let write_err = |e: deltalake::DeltaTableError| TableError::Delta {
        what: "writing data files".into(),
        detail: e.to_string(),
    };
    if added.is_empty() {
        return RecordBatchWriter::for_table(delta).map_err(write_err);
    }
    let (_, arrow) = evolved(delta, added)?;
    let partitions = delta
        .snapshot()
        .map_err(write_err)?
        .metadata()
        .partition_columns()
        .to_vec();
    RecordBatchWriter::try_new(delta.table_url().as_str(), arrow, Some(partitions), None)
        .map_err(write_err)
}
