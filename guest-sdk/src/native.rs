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

/// Run `T` over `batches` exactly as the wasm glue drives a guest: the
/// params checked against [`Transform::params`] (defaults filled in),
/// `open`, one `push` per batch in order, `finish`. Returns the non-empty
/// outputs.
pub fn run<T: Transform>(
    ctx: &Context,
    batches: impl IntoIterator<Item = RecordBatch>,
) -> Result<Vec<RecordBatch>> {
    let mut ctx = ctx.clone();
    crate::params::apply::<T>(&mut ctx.params)?;
    let ctx = &ctx;
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
    let read = read_schema(&ctx.input_schema, columns.as_deref())?;
    check_dictionary_columns(&dictionaries, &read)
        .map_err(|e| crate::Error(format!("dictionary_columns(): {}", e.0)))?;
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

/// Most names a transform may declare in one list.
pub const MAX_DECLARED: usize = 10_000;

pub use crate::error::show_name;

/// The schema of the batches a transform reads: `schema` narrowed to
/// `columns`, in that order (`None`: all of it). A name `schema` lacks is
/// an error naming it.
pub fn read_schema(schema: &Schema, columns: Option<&[String]>) -> Result<Schema> {
    let Some(names) = columns else {
        return Ok(schema.clone());
    };
    let at = names
        .iter()
        .map(|n| {
            schema
                .index_of(n)
                .map_err(|_| crate::Error(format!("the input has no column `{}`", show_name(n))))
        })
        .collect::<Result<Vec<usize>>>()?;
    Ok(schema.project(&at)?)
}

/// Check a transform's [`Transform::dictionary_columns`] against the
/// columns it reads (`read`, see [`read_schema`]): at most
/// [`MAX_DECLARED`], each named once, each read, each a string or binary
/// column. The error names the column and what to do. The host and
/// [`run`] both check with this.
pub fn check_dictionary_columns(declared: &[String], read: &Schema) -> Result<()> {
    let fail = |m: String| Err(crate::Error(m));
    if declared.len() > MAX_DECLARED {
        return fail(format!(
            "{} names, more than the {MAX_DECLARED} a transform may declare",
            declared.len()
        ));
    }
    let mut seen = std::collections::HashSet::new();
    for name in declared {
        if !seen.insert(name.as_str()) {
            return fail(format!("`{}` is named twice", show_name(name)));
        }
        let Ok(field) = read.field_with_name(name) else {
            let have: Vec<&str> = read.fields().iter().map(|f| f.name().as_str()).collect();
            return fail(format!(
                "`{}` is not among the columns the transform reads ({}); name only those",
                show_name(name),
                have.join(", ")
            ));
        };
        if dictionary_type(field.data_type()).is_none() {
            return fail(format!(
                "`{}` is {}; only string (Utf8) and binary columns can be taken dictionary-encoded",
                show_name(name),
                field.data_type()
            ));
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
/// every dictionary is made canonical ([`Canonical`]).
pub fn dictionary_encode(batch: &RecordBatch, names: &[String]) -> Result<RecordBatch> {
    Canonical::default().encode(batch, names)
}

/// Makes dictionary columns canonical: each batch's dictionary holds
/// exactly the distinct values its rows use, in order of first use, each
/// once; a row whose value is null becomes a null row. The same rows then
/// have the same keys and values however they were encoded: Parquet's page
/// dictionaries, a writer's plain pages, or arrow's merge of two files'
/// dictionaries (whose result depends on its hasher).
///
/// Which dictionary entries hold equal values is worked out once per
/// dictionary and kept: Parquet hands every batch of a column chunk the
/// same dictionary, so a reader's batches cost one integer remap per row.
#[derive(Default)]
pub struct Canonical {
    /// Per column name: the last dictionary seen (kept alive, so its
    /// address cannot be reused by another) and, per entry, the first
    /// entry holding the same value (-1: a null value).
    seen: std::collections::HashMap<String, (arrow::array::ArrayData, Vec<i32>)>,
}

impl Canonical {
    /// [`dictionary_encode`], remembering dictionaries between batches.
    pub fn encode(&mut self, batch: &RecordBatch, names: &[String]) -> Result<RecordBatch> {
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
                    self.column(f.name(), c)
                } else {
                    // A fresh cast is canonical already (first use, once).
                    Ok(arrow::compute::cast(c, f.data_type())?)
                }
            })
            .collect::<Result<Vec<ArrayRef>>>()?;
        Ok(RecordBatch::try_new(schema, columns)?)
    }

    fn column(&mut self, name: &str, column: &ArrayRef) -> Result<ArrayRef> {
        use arrow::array::{Array, AsArray, DictionaryArray, Int32Array, UInt32Array};
        use arrow::buffer::NullBuffer;
        use arrow::datatypes::Int32Type;
        let dict = column
            .as_dictionary_opt::<Int32Type>()
            .ok_or_else(|| crate::Error(format!("{} is not a dictionary", column.data_type())))?;
        let values = dict.values();
        let data = values.to_data();
        let fresh = match self.seen.get(name) {
            Some((d, _)) => !d.ptr_eq(&data),
            None => true,
        };
        if fresh {
            let first = first_of_equal(values)?;
            self.seen.insert(name.to_string(), (data, first));
        }
        let first = &self.seen[name].1;
        // Entry -> new key (-1: not used yet), and the entries in order of
        // first use.
        let mut new_key = vec![-1i32; values.len()];
        let mut order: Vec<u32> = Vec::new();
        let keys = dict.keys();
        let mut out: Vec<i32> = Vec::with_capacity(keys.len());
        let mut assign = |entry: usize, new_key: &mut [i32]| -> i32 {
            let slot = &mut new_key[entry];
            if *slot < 0 {
                *slot = order.len() as i32;
                order.push(entry as u32);
            }
            *slot
        };
        // `first` has an entry per dictionary value, and the keys of valid
        // rows index the dictionary (arrow checks that of every
        // DictionaryArray), so indexing cannot fail.
        let nulls = if keys.null_count() == 0 && first.iter().all(|&f| f >= 0) {
            for &k in keys.values().iter() {
                out.push(assign(first[k as usize] as usize, &mut new_key));
            }
            None
        } else {
            let mut valid = Vec::with_capacity(keys.len());
            for (i, &k) in keys.values().iter().enumerate() {
                let entry = if keys.is_valid(i) {
                    first[k as usize]
                } else {
                    -1
                };
                if entry < 0 {
                    out.push(0);
                    valid.push(false);
                } else {
                    out.push(assign(entry as usize, &mut new_key));
                    valid.push(true);
                }
            }
            let nulls = NullBuffer::from(valid);
            (nulls.null_count() > 0).then_some(nulls)
        };
        let new_values = arrow::compute::take(values, &UInt32Array::from(order), None)?;
        let keys = Int32Array::try_new(out.into(), nulls)?;
        // SAFETY: every key was handed out as an index into `order`, whose
        // entries `new_values` holds, in that order.
        Ok(Arc::new(unsafe {
            DictionaryArray::<Int32Type>::new_unchecked(keys, new_values)
        }))
    }
}

/// Per entry of a Utf8 or Binary dictionary, the first entry holding the
/// same value (-1 for a null value).
fn first_of_equal(values: &ArrayRef) -> Result<Vec<i32>> {
    use arrow::array::AsArray;
    let mut by_value: std::collections::HashMap<&[u8], i32, rustc_hash::FxBuildHasher> =
        std::collections::HashMap::with_capacity_and_hasher(values.len(), Default::default());
    let entries: Box<dyn Iterator<Item = Option<&[u8]>>> =
        if let Some(v) = values.as_string_opt::<i32>() {
            Box::new(v.iter().map(|o| o.map(str::as_bytes)))
        } else if let Some(v) = values.as_binary_opt::<i32>() {
            Box::new(v.iter())
        } else {
            return Err(crate::Error(format!(
                "a dictionary of {} cannot be made canonical",
                values.data_type()
            )));
        };
    let first = entries
        .enumerate()
        .map(|(i, b)| match b {
            None => -1,
            Some(b) => *by_value.entry(b).or_insert(i as i32),
        })
        .collect();
    Ok(first)
}
