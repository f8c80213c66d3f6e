//! What a guest returns is untrusted input to the host, exactly like a
//! malformed Parquet file: its bytes are framed and checked, its types are
//! checked against what idem can digest, its size is counted in logical
//! bytes (what holding, validating and digesting it costs, not what it
//! weighs on the wire), and only then are its arrays built and validated.
//! Every step returns a typed error; none panics on any input (the
//! boundary fuzz test below holds it to that).

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::datatypes::DataType;
use arrow::record_batch::RecordBatch;

use super::error::SandboxError;
use crate::digest::{DigestError, check_schema, panic_message};

/// Where a guest's output stands against the run's output limit.
#[derive(Debug, Clone, Copy)]
pub struct OutputBudget {
    /// The limit, in logical bytes, for the whole run.
    pub limit: usize,
    /// Logical bytes of the output accepted so far.
    pub produced: usize,
    /// Index of the batch being decoded (for error messages).
    pub batch: usize,
}

/// One decoded, validated guest output batch and its logical size.
#[derive(Debug, Clone)]
pub struct DecodedOutput {
    /// The rows (possibly none).
    pub batch: RecordBatch,
    /// What the batch holds in memory when every value is materialized:
    /// what counts against the output limit.
    pub logical_bytes: usize,
}

/// Decode one output of a guest (`push` or `finish`), checking, in this
/// order, before anything costs more than the bytes themselves:
/// 1. the encoded size against the budget;
/// 2. the stream's framing, metadata and buffer ranges (no array is built);
/// 3. every column type against what idem can digest, naming the column;
/// 4. the bytes view columns point to against the budget (they can dwarf
///    the encoded size, and validating them reads every one);
/// 5. decode and full validation of every array;
/// 6. the logical size of the batch (dictionaries expanded) against the
///    budget.
///
/// Empty bytes mean "no rows" (`None`). This function has no panic
/// backstop; the sandbox wraps it in one ([`decode_guarded`]).
pub fn decode_guest_output(
    bytes: Vec<u8>,
    budget: &OutputBudget,
) -> Result<Option<DecodedOutput>, SandboxError> {
    let len = bytes.len();
    let over = |produced: usize| SandboxError::OutputLimit {
        limit: budget.limit,
        produced,
    };
    let bad = |detail: String| SandboxError::BadOutput {
        batch: budget.batch,
        detail,
        len,
    };
    let encoded = budget.produced.saturating_add(len);
    if encoded > budget.limit {
        return Err(over(encoded));
    }
    let Some(summary) = idem_guest::ipc::summarize(&bytes).map_err(|e| bad(e.to_string()))? else {
        return Ok(None);
    };
    check_schema(&summary.schema).map_err(unsupported)?;
    let viewed = encoded.saturating_add(usize::try_from(summary.view_bytes).unwrap_or(usize::MAX));
    if viewed > budget.limit {
        return Err(over(viewed));
    }
    let Some(batch) = idem_guest::ipc::decode(bytes).map_err(|e| bad(e.to_string()))? else {
        return Ok(None);
    };
    for (field, column) in batch.schema().fields().iter().zip(batch.columns()) {
        column
            .to_data()
            .validate_full()
            .map_err(|e| bad(format!("column `{}`: {e}", field.name())))?;
    }
    let mut logical = 0u64;
    for (field, column) in batch.schema().fields().iter().zip(batch.columns()) {
        let size = logical_bytes(column.as_ref())
            .map_err(|e| bad(format!("column `{}`: {e}", field.name())))?;
        logical = logical.saturating_add(size);
    }
    let logical = usize::try_from(logical).unwrap_or(usize::MAX);
    let total = budget.produced.saturating_add(logical);
    if total > budget.limit {
        return Err(over(total));
    }
    Ok(Some(DecodedOutput {
        batch,
        logical_bytes: logical,
    }))
}

/// [`decode_guest_output`] behind the last line of defence: a panic in a
/// library on bytes nobody foresaw becomes a typed error and the host lives
/// on (idem's release and dev profiles unwind; never build it with
/// `panic = "abort"`).
pub(crate) fn decode_guarded(
    bytes: Vec<u8>,
    budget: &OutputBudget,
) -> Result<Option<DecodedOutput>, SandboxError> {
    std::panic::catch_unwind(AssertUnwindSafe(|| decode_guest_output(bytes, budget)))
        .unwrap_or_else(|payload| {
            Err(SandboxError::OutputPanic {
                batch: budget.batch,
                detail: panic_message(payload.as_ref()),
            })
        })
}

fn unsupported(e: DigestError) -> SandboxError {
    match e {
        DigestError::UnsupportedType {
            column,
            data_type,
            fix,
        } => SandboxError::UnsupportedOutputType {
            column,
            data_type,
            fix,
        },
        other => SandboxError::Host(other.to_string()),
    }
}

/// The bytes `array` takes once every value is materialized: values and
/// offsets of its logical range (not of the buffers it happens to share),
/// view data counted per view, dictionaries expanded, at least one byte per
/// slot (a column of nulls still costs work per row). Children are counted
/// over the range their parent references.
pub(crate) fn logical_bytes(array: &dyn Array) -> Result<u64, String> {
    let len = array.len() as u64;
    let mismatch = || format!("array does not match its type {}", array.data_type());
    let validity = if array.null_count() > 0 {
        len.div_ceil(8)
    } else {
        0
    };
    let values: u64 = match array.data_type() {
        DataType::Null => 0,
        DataType::Boolean => len.div_ceil(8),
        DataType::Utf8 => {
            let a = array.as_string_opt::<i32>().ok_or_else(mismatch)?;
            offsets_bytes(a.value_offsets(), 4)
        }
        DataType::LargeUtf8 => {
            let a = array.as_string_opt::<i64>().ok_or_else(mismatch)?;
            offsets_bytes(a.value_offsets(), 8)
        }
        DataType::Binary => {
            let a = array.as_binary_opt::<i32>().ok_or_else(mismatch)?;
            offsets_bytes(a.value_offsets(), 4)
        }
        DataType::LargeBinary => {
            let a = array.as_binary_opt::<i64>().ok_or_else(mismatch)?;
            offsets_bytes(a.value_offsets(), 8)
        }
        DataType::Utf8View => {
            let a = array.as_string_view_opt().ok_or_else(mismatch)?;
            views_bytes(a.views())
        }
        DataType::BinaryView => {
            let a = array.as_binary_view_opt().ok_or_else(mismatch)?;
            views_bytes(a.views())
        }
        DataType::FixedSizeBinary(w) => len.saturating_mul(u64::try_from(*w).unwrap_or(0)),
        DataType::List(_) => {
            let a = array.as_list_opt::<i32>().ok_or_else(mismatch)?;
            let child = referenced(a.values().as_ref(), a.value_offsets()).ok_or_else(mismatch)?;
            (len + 1)
                .saturating_mul(4)
                .saturating_add(logical_bytes(child.as_ref())?)
        }
        DataType::LargeList(_) => {
            let a = array.as_list_opt::<i64>().ok_or_else(mismatch)?;
            let child = referenced(a.values().as_ref(), a.value_offsets()).ok_or_else(mismatch)?;
            (len + 1)
                .saturating_mul(8)
                .saturating_add(logical_bytes(child.as_ref())?)
        }
        DataType::Map(..) => {
            let a = array.as_map_opt().ok_or_else(mismatch)?;
            let child = referenced(a.entries(), a.value_offsets()).ok_or_else(mismatch)?;
            (len + 1)
                .saturating_mul(4)
                .saturating_add(logical_bytes(child.as_ref())?)
        }
        // Its values are already sliced to its range.
        DataType::FixedSizeList(..) => {
            logical_bytes(array.as_fixed_size_list_opt().ok_or_else(mismatch)?.values())?
        }
        DataType::Struct(_) => {
            let a = array.as_struct_opt().ok_or_else(mismatch)?;
            let mut sum = 0u64;
            for c in a.columns() {
                sum = sum.saturating_add(logical_bytes(c.as_ref())?);
            }
            sum
        }
        DataType::Dictionary(..) => {
            let d = array.as_any_dictionary_opt().ok_or_else(mismatch)?;
            let (keys, values) = (d.keys(), d.values());
            // Each distinct value is sized once: a wide value used by many
            // keys must not cost its width per key.
            let mut sizes: HashMap<usize, u64> = HashMap::new();
            let mut sum = 0u64;
            for (i, k) in d.normalized_keys().into_iter().enumerate() {
                if keys.is_null(i) {
                    continue;
                }
                if k >= values.len() {
                    return Err(format!("dictionary key {k} out of range"));
                }
                let size = match sizes.get(&k) {
                    Some(s) => *s,
                    None => {
                        let s = logical_bytes(values.slice(k, 1).as_ref())?;
                        sizes.insert(k, s);
                        s
                    }
                };
                sum = sum.saturating_add(size);
            }
            sum
        }
        dt => match dt.primitive_width() {
            Some(w) => len.saturating_mul(w as u64),
            None => return Err(format!("the size of a {dt} column cannot be bounded")),
        },
    };
    Ok(values.saturating_add(validity).max(len))
}

fn offsets_bytes<O: arrow::array::OffsetSizeTrait>(offsets: &[O], width: u64) -> u64 {
    let data = match (
        offsets.first().and_then(|o| o.to_usize()),
        offsets.last().and_then(|o| o.to_usize()),
    ) {
        (Some(s), Some(e)) => e.saturating_sub(s) as u64,
        _ => 0,
    };
    (offsets.len() as u64).saturating_mul(width).saturating_add(data)
}

/// A view is 16 bytes; longer values also count the bytes they point at,
/// wherever those live (many views may point at the same bytes).
fn views_bytes(views: &[u128]) -> u64 {
    let mut sum = (views.len() as u64).saturating_mul(16);
    for v in views {
        let len = *v as u32;
        if len > 12 {
            sum = sum.saturating_add(u64::from(len));
        }
    }
    sum
}

/// The part of `child` that `offsets` reference.
fn referenced<O: arrow::array::OffsetSizeTrait>(
    child: &dyn Array,
    offsets: &[O],
) -> Option<ArrayRef> {
    let (s, e) = (offsets.first()?.to_usize()?, offsets.last()?.to_usize()?);
    (s <= e && e <= child.len()).then(|| child.slice(s, e - s))
}
