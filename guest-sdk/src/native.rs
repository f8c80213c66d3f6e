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
    let read = match &columns {
        Some(names) => {
            let at = names
                .iter()
                .map(|n| {
                    ctx.input_schema
                        .index_of(n)
                        .map_err(|_| crate::Error(format!("the input has no column `{n}`")))
                })
                .collect::<Result<Vec<usize>>>()?;
            ctx.input_schema.project(&at)?
        }
        None => ctx.input_schema.as_ref().clone(),
    };
    check_dictionary_columns(&dictionaries, &read)?;
    let mut out = Vec::new();
    for b in batches {
        // As the host does: only the declared columns, in their order.
        let b = match &columns {
            None => b,
            Some(names) => project(&b, names)?,
        };
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
/// them to a transform that takes them so: a plain column is encoded, and
/// every dictionary is made canonical ([`canonical_dictionary`]).
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
            if !names.iter().any(|n| n == f.name()) {
                Ok(c.clone())
            } else if c.data_type() == f.data_type() {
                canonical_dictionary(c)
            } else {
                // A fresh cast is canonical already (first use, each once).
                Ok(arrow::compute::cast(c, f.data_type())?)
            }
        })
        .collect::<Result<Vec<ArrayRef>>>()?;
    Ok(RecordBatch::try_new(schema, columns)?)
}

/// A dictionary column (`Dictionary(Int32, Utf8 | Binary)`) rewritten so
/// its dictionary holds exactly the distinct values its rows use, in order
/// of first use, each once; a row whose value is null becomes a null row.
/// The same rows then have the same keys and values however they were
/// encoded: Parquet's page dictionaries, a writer's plain pages, or arrow's
/// merge of two files' dictionaries (whose result depends on its hasher).
pub fn canonical_dictionary(column: &ArrayRef) -> Result<ArrayRef> {
    use arrow::array::{Array, AsArray, DictionaryArray, Int32Array, UInt32Array};
    use arrow::datatypes::Int32Type;
    let dict = column
        .as_dictionary_opt::<Int32Type>()
        .ok_or_else(|| crate::Error(format!("{} is not a dictionary", column.data_type())))?;
    let values = dict.values();
    let strings = values.as_string_opt::<i32>();
    let binaries = values.as_binary_opt::<i32>();
    if strings.is_none() && binaries.is_none() {
        return Err(crate::Error(format!(
            "a dictionary of {} cannot be made canonical",
            values.data_type()
        )));
    }
    let bytes_at = |k: usize| -> Option<&[u8]> {
        match (strings, binaries) {
            (Some(v), _) => v.is_valid(k).then(|| v.value(k).as_bytes()),
            (_, Some(v)) => v.is_valid(k).then(|| v.value(k)),
            _ => None,
        }
    };
    // Old key -> new key (-1: not seen yet, -2: a null value).
    let mut remap = vec![-1i32; values.len()];
    let mut first_use: Vec<u32> = Vec::new();
    let mut by_value: std::collections::HashMap<&[u8], i32> = std::collections::HashMap::new();
    let keys = dict.keys();
    let mut new_keys: Vec<Option<i32>> = Vec::with_capacity(keys.len());
    for i in 0..keys.len() {
        if keys.is_null(i) {
            new_keys.push(None);
            continue;
        }
        let k = keys.value(i) as usize;
        let slot = remap
            .get_mut(k)
            .ok_or_else(|| crate::Error(format!("dictionary key {k} out of range")))?;
        if *slot == -1 {
            *slot = match bytes_at(k) {
                None => -2,
                Some(b) => *by_value.entry(b).or_insert_with(|| {
                    first_use.push(k as u32);
                    first_use.len() as i32 - 1
                }),
            };
        }
        new_keys.push((*slot >= 0).then_some(*slot));
    }
    let new_values = arrow::compute::take(values, &UInt32Array::from(first_use), None)?;
    let out = DictionaryArray::<Int32Type>::try_new(Int32Array::from(new_keys), new_values)?;
    Ok(Arc::new(out))
}
