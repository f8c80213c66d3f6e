//! Run a [`Transform`] natively, without a sandbox: for unit tests and as
//! the baseline that benchmarks compare the wasm build against.

use std::sync::Arc;

use arrow::array::ArrayRef;
use arrow::datatypes::{DataType, Field, Schema};
use arrow::record_batch::RecordBatch;

#[cfg(not(target_arch = "wasm32"))]
use crate::Level;
use crate::{Context, Result, Transform};

#[cfg(not(target_arch = "wasm32"))]
/// Native log sink: lines go to stderr when `IDEM_GUEST_LOG` is set.
pub(crate) fn log(level: Level, message: &str) {
    if std::env::var_os("IDEM_GUEST_LOG").is_some() {
        eprintln!("[guest {level:?}] {message}");
    }
}

/// Run `T` over `batches` exactly as the host drives a guest: `open`, one
/// `push` per batch in order, `finish`. Returns the non-empty outputs.
pub fn run<T: Transform>(
    ctx: &Context,
    batches: impl IntoIterator<Item = RecordBatch>,
) -> Result<Vec<RecordBatch>> {
    let mut t = T::default();
    t.open(ctx)?;
    let columns = t.columns();
    // The host's checks (an empty or repeated declaration fails the run).
    if let Some(c) = &columns {
        if c.is_empty() {
            return Err(crate::Error(
                "columns(): an empty list (declare at least one column, or none for all)".into(),
            ));
        }
        let mut seen = std::collections::HashSet::new();
        if let Some(d) = c.iter().find(|n| !seen.insert(n.as_str())) {
            return Err(crate::Error(format!("columns(): `{d}` is declared twice")));
        }
    }
    let dictionaries = t.dictionary_columns();
    let mut out = Vec::new();
    for b in batches {
        // As the host does: only the declared columns, in their order.
        let b = match &columns {
            None => b,
            Some(names) => project(&b, names)?,
        };
        check_dictionary_columns(&dictionaries, &b.schema())?;
        let b = dictionary_encode(&b, &dictionaries)?;
        out.extend(t.push(b)?.filter(|o| o.num_rows() > 0));
    }
    out.extend(t.finish()?.filter(|o| o.num_rows() > 0));
    Ok(out)
}

/// `batch` holding only the columns `names`, in that order (how a declared
/// column list narrows every batch, here and in the host). A name the batch
/// lacks is an error naming it.
pub fn project(batch: &RecordBatch, names: &[String]) -> Result<RecordBatch> {
    let at = names
        .iter()
        .map(|n| {
            batch
                .schema()
                .index_of(n)
                .map_err(|_| crate::Error(format!("the input has no column `{n}`")))
        })
        .collect::<Result<Vec<usize>>>()?;
    Ok(batch.project(&at)?)
}

/// The type a column taken dictionary-encoded arrives as: `Dictionary(Int32,
/// Utf8)` for a string column, `Dictionary(Int32, Binary)` for a binary one;
/// `None` for any other type (which cannot be taken so).
pub fn dictionary_type(plain: &DataType) -> Option<DataType> {
    match plain {
        DataType::Utf8 | DataType::Binary => Some(DataType::Dictionary(
            Box::new(DataType::Int32),
            Box::new(plain.clone()),
        )),
        DataType::Dictionary(k, v)
            if k.as_ref() == &DataType::Int32
                && matches!(v.as_ref(), DataType::Utf8 | DataType::Binary) =>
        {
            Some(plain.clone())
        }
        _ => None,
    }
}

/// Check a transform's [`Transform::dictionary_columns`] against the
/// columns it reads (`read`): each named once, each there, each a string or
/// binary column. The error names the column and what to do.
pub fn check_dictionary_columns(declared: &[String], read: &Schema) -> Result<()> {
    let mut seen = std::collections::HashSet::new();
    for name in declared {
        if !seen.insert(name.as_str()) {
            return Err(crate::Error(format!(
                "dictionary_columns(): `{name}` is named twice"
            )));
        }
        let field = read.field_with_name(name).map_err(|_| {
            crate::Error(format!(
                "dictionary_columns(): `{name}` is not among the columns read ({}); name only columns the transform reads",
                read.fields()
                    .iter()
                    .map(|f| f.name().as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })?;
        if dictionary_type(field.data_type()).is_none() {
            return Err(crate::Error(format!(
                "dictionary_columns(): `{name}` is {}; only string (Utf8) and binary columns can be taken dictionary-encoded",
                field.data_type()
            )));
        }
    }
    Ok(())
}

/// The schema of batches whose columns `names` are dictionary-encoded
/// (checked with [`check_dictionary_columns`] first).
pub fn dictionary_schema(schema: &Schema, names: &[String]) -> Schema {
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .map(|f| match dictionary_type(f.data_type()) {
            Some(dt) if names.iter().any(|n| n == f.name()) => {
                f.as_ref().clone().with_data_type(dt)
            }
            _ => f.as_ref().clone(),
        })
        .collect();
    Schema::new_with_metadata(fields, schema.metadata().clone())
}

/// `batch` with its columns `names` dictionary-encoded, as the host hands
/// them to a transform that takes them so (a column that already is stays
/// as it is).
pub fn dictionary_encode(batch: &RecordBatch, names: &[String]) -> Result<RecordBatch> {
    if names.is_empty() {
        return Ok(batch.clone());
    }
    let schema = Arc::new(dictionary_schema(&batch.schema(), names));
    let columns = batch
        .columns()
        .iter()
        .zip(schema.fields())
        .map(|(c, f)| {
            if c.data_type() == f.data_type() {
                Ok(c.clone())
            } else {
                arrow::compute::cast(c, f.data_type())
            }
        })
        .collect::<std::result::Result<Vec<ArrayRef>, _>>()?;
    Ok(RecordBatch::try_new(schema, columns)?)
}
