//! Appending columns to a Delta table (`--on-schema-change
//! append-new-columns`): the table's schema with the new nullable columns
//! last, the data writer that writes it, and the `metaData` action that
//! sets it in the slice's own commit (the table's id, name, partitioning
//! and configuration kept: only the schema string changes).

use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use deltalake::DeltaTable;
use deltalake::kernel::engine::arrow_conversion::{TryIntoArrow as _, TryIntoKernel as _};
use deltalake::kernel::{Metadata, MetadataExt as _, StructType};
use deltalake::writer::RecordBatchWriter;

use crate::table::error::TableError;
use crate::table::schema_change::family;

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
    // Data files written for a mapped table name columns by physical
    // name; a new column would need one, and the mapping's next id.
    if let Some(m) = mapping(snapshot.metadata()) {
        return Err(TableError::Output(format!(
            "the table uses column mapping (mode {m}): idem does not add columns to it; add them with Spark's ALTER TABLE ... ADD COLUMNS"
        )));
    }
    let extra: StructType = (&Schema::new(added.to_vec()))
        .try_into_kernel()
        .map_err(|e| TableError::Output(format!("a new column has no Delta type: {e}")))?;
    check_exact(added, &extra)?;
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

/// The table's column-mapping mode, when it maps columns (files then
/// name them by physical name, which idem does not write).
pub(super) fn mapping(meta: &Metadata) -> Option<&String> {
    meta.configuration()
        .get("delta.columnMapping.mode")
        .filter(|m| *m != "none")
}

/// Each new column must be stored as the output has it: Delta converts
/// some types (nanoseconds to microseconds, Date64 to Date32), and a
/// timestamp without a zone needs the `timestampNtz` table feature, which
/// idem does not add to a table's protocol.
fn check_exact(added: &[Field], kernel: &StructType) -> Result<(), TableError> {
    let back: Schema = kernel
        .try_into_arrow()
        .map_err(|e| TableError::Output(e.to_string()))?;
    for (f, b) in added.iter().zip(back.fields()) {
        let naive = matches!(f.data_type(), DataType::Timestamp(_, None));
        if naive || family(f.data_type()) != family(b.data_type()) {
            return Err(TableError::Output(format!(
                "the output's new column `{}` is {}, which a Delta table stores as {}{}: cast it in the transform (timestamps: microseconds, with the zone \"UTC\")",
                f.name(),
                f.data_type(),
                b.data_type(),
                if naive {
                    " (a timestamp without a zone needs the timestampNtz table feature, which idem does not add)"
                } else {
                    ""
                }
            )));
        }
    }
    Ok(())
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

#[cfg(test)]
mod tests {
    use arrow::datatypes::TimeUnit;

    use super::*;

    fn kernel_of(fields: &[Field]) -> StructType {
        (&Schema::new(fields.to_vec())).try_into_kernel().unwrap()
    }

    #[test]
    fn new_columns_delta_would_store_differently_are_refused() {
        let utc = Some("UTC".into());
        let exact = [
            Field::new("coupon", DataType::Utf8, true),
            Field::new(
                "at",
                DataType::Timestamp(TimeUnit::Microsecond, utc.clone()),
                true,
            ),
            Field::new("day", DataType::Date32, true),
        ];
        check_exact(&exact, &kernel_of(&exact)).unwrap();
        let mut refused = 0;
        for (f, why) in [
            (
                DataType::Timestamp(TimeUnit::Microsecond, None),
                "timestampNtz",
            ),
            (DataType::Timestamp(TimeUnit::Nanosecond, utc), "stores as"),
            (DataType::Date64, "stores as"),
        ] {
            let added = [Field::new("x", f, true)];
            let Ok(kernel) = (&Schema::new(added.to_vec())).try_into_kernel() else {
                continue; // no Delta type at all: refused before
            };
            let e = check_exact(&added, &kernel).unwrap_err().to_string();
            assert!(e.contains(why), "{e}");
            refused += 1;
        }
        // The zone-less timestamp at least has a Delta type (timestamp_ntz).
        assert!(refused >= 1);
    }
}
