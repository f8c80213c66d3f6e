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
    /// Most rows over the whole run.
    pub max_rows: u64,
    /// Rows of the output accepted so far.
    pub rows: u64,
    /// Most rows in one batch.
    pub max_batch_rows: u64,
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
/// 3. the rows it claims, against the batch and run row limits (a batch
///    with rows but no columns is refused: no table can hold it, and its
///    rows would cost the host per-row work that no byte accounts for);
/// 4. every column type against what idem can digest, naming the column;
/// 5. the bytes view columns point to against the budget (they can dwarf
///    the encoded size, and validating them reads every one);
/// 6. decode and full validation of every array;
/// 7. the logical size of the batch (dictionaries expanded) against the
///    budget.
///
/// Empty bytes mean "no rows" (`None`). This function has no panic
/// backstop; the sandbox wraps it in one (`decode_guarded`).
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
    check_rows(&summary, len, budget)?;
    check_names(&summary.schema).map_err(bad)?;
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
    // At least a slot's cost a row, whatever the columns hold.
    let logical =
        usize::try_from(logical.max((batch.num_rows() as u64).saturating_mul(MIN_SLOT_BYTES)))
            .unwrap_or(usize::MAX);
    let total = budget.produced.saturating_add(logical);
    if total > budget.limit {
        return Err(over(total));
    }
    Ok(Some(DecodedOutput {
        batch,
        logical_bytes: logical,
    }))
}

/// Longest column name (at any depth) a guest may return: names go into
/// the table's schema, every commit's record and the manifest.
const MAX_NAME_BYTES: usize = 1024;
/// Most bytes of key-value metadata on the schema and its fields.
const MAX_METADATA_BYTES: usize = 64 << 10;

/// Refuse column names and schema metadata no table should carry.
fn check_names(schema: &arrow::datatypes::Schema) -> Result<(), String> {
    fn metadata_bytes(m: &HashMap<String, String>) -> usize {
        m.iter().map(|(k, v)| k.len() + v.len()).sum()
    }
    let mut meta = metadata_bytes(schema.metadata());
    let mut todo: Vec<&arrow::datatypes::Field> =
        schema.fields().iter().map(|f| f.as_ref()).collect();
    while let Some(f) = todo.pop() {
        if f.name().len() > MAX_NAME_BYTES {
            return Err(format!(
                "a column name of {} bytes (at most {MAX_NAME_BYTES}): `{}…`",
                f.name().len(),
                f.name().chars().take(40).collect::<String>()
            ));
        }
        meta = meta.saturating_add(metadata_bytes(f.metadata()));
        match f.data_type() {
            DataType::Struct(children) => todo.extend(children.iter().map(|c| c.as_ref())),
            DataType::List(c)
            | DataType::LargeList(c)
            | DataType::FixedSizeList(c, _)
            | DataType::Map(c, _) => todo.push(c.as_ref()),
            _ => {}
        }
    }
    if meta > MAX_METADATA_BYTES {
        return Err(format!(
            "{meta} bytes of schema metadata (at most {MAX_METADATA_BYTES})"
        ));
    }
    Ok(())
}

/// Check the rows a stream claims against the batch and the run limits.
fn check_rows(
    summary: &idem_guest::ipc::StreamSummary,
    len: usize,
    budget: &OutputBudget,
) -> Result<(), SandboxError> {
    let rows = summary.rows;
    if rows > budget.max_batch_rows {
        return Err(SandboxError::RowLimit {
            scope: format!("in output batch {}", budget.batch),
            rows,
            limit: budget.max_batch_rows,
            fix: "return the rows in smaller batches, or raise --max-output-batch-rows if the transform really needs it",
        });
    }
    let total = budget.rows.saturating_add(rows);
    if total > budget.max_rows {
        return Err(SandboxError::RowLimit {
            scope: "over the run".into(),
            rows: total,
            limit: budget.max_rows,
            fix: "raise --max-output-rows or check the transform",
        });
    }
    if rows > 0 && summary.schema.fields().is_empty() {
        return Err(SandboxError::BadOutput {
            batch: budget.batch,
            detail: format!(
                "{rows} rows with no columns: an output batch needs at least one column"
            ),
            len,
        });
    }
    Ok(())
}

/// [`decode_guest_output`] behind the last line of defence: a panic in a
/// library on bytes nobody foresaw becomes a typed error and the host lives
/// on (idem's release and dev profiles unwind; never build it with
/// `panic = "abort"`).
pub(crate) fn decode_guarded(
    bytes: Vec<u8>,
    budget: &OutputBudget,
) -> Result<Option<DecodedOutput>, SandboxError> {
    backstop(budget.batch, || decode_guest_output(bytes, budget))
}

/// Run `f`, turning a panic into [`SandboxError::OutputPanic`].
fn backstop<T>(
    batch: usize,
    f: impl FnOnce() -> Result<T, SandboxError>,
) -> Result<T, SandboxError> {
    std::panic::catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|payload| {
        Err(SandboxError::OutputPanic {
            batch,
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
/// view data counted per view, dictionaries expanded, at least
/// [`MIN_SLOT_BYTES`] per slot (a column of nulls still costs work per
/// row). Children are counted
/// over the range their parent references.
pub(crate) fn logical_bytes(array: &dyn Array) -> Result<u64, String> {
    let len = array.len() as u64;
    let validity = if array.null_count() > 0 {
        len.div_ceil(8)
    } else {
        0
    };
    let values = values_bytes(array)?;
    Ok(values
        .saturating_add(validity)
        .max(len.saturating_mul(MIN_SLOT_BYTES)))
}

/// The error for an array whose buffers do not match its type.
fn mismatch(array: &dyn Array) -> String {
    format!("array does not match its type {}", array.data_type())
}

/// The bytes of `array`'s values (and offsets) over its logical range,
/// before validity and the per-slot minimum.
fn values_bytes(array: &dyn Array) -> Result<u64, String> {
    let len = array.len() as u64;
    Ok(match array.data_type() {
        DataType::Null => 0,
        DataType::Boolean => len.div_ceil(8),
        DataType::Utf8
        | DataType::LargeUtf8
        | DataType::Binary
        | DataType::LargeBinary
        | DataType::Utf8View
        | DataType::BinaryView => variable_bytes(array)?,
        DataType::FixedSizeBinary(w) => len.saturating_mul(u64::try_from(*w).unwrap_or(0)),
        DataType::List(_)
        | DataType::LargeList(_)
        | DataType::Map(..)
        | DataType::FixedSizeList(..)
        | DataType::Struct(_) => nested_bytes(array)?,
        DataType::Dictionary(..) => dictionary_bytes(array)?,
        dt => match dt.primitive_width() {
            Some(w) => len.saturating_mul(w as u64),
            None => return Err(format!("the size of a {dt} column cannot be bounded")),
        },
    })
}

/// Strings and binary values: their offsets and the bytes they span, or
/// their views and the bytes those point at.
fn variable_bytes(array: &dyn Array) -> Result<u64, String> {
    let mismatch = || mismatch(array);
    Ok(match array.data_type() {
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
        _ => return Err(mismatch()),
    })
}

/// Lists, maps and structs: their offsets and the children over the
/// range they reference.
fn nested_bytes(array: &dyn Array) -> Result<u64, String> {
    let len = array.len() as u64;
    let mismatch = || mismatch(array);
    Ok(match array.data_type() {
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
        DataType::FixedSizeList(..) => logical_bytes(
            array
                .as_fixed_size_list_opt()
                .ok_or_else(mismatch)?
                .values(),
        )?,
        DataType::Struct(_) => {
            let a = array.as_struct_opt().ok_or_else(mismatch)?;
            let mut sum = 0u64;
            for c in a.columns() {
                sum = sum.saturating_add(logical_bytes(c.as_ref())?);
            }
            sum
        }
        _ => return Err(mismatch()),
    })
}

/// A dictionary, expanded: each valid key costs its value's size.
fn dictionary_bytes(array: &dyn Array) -> Result<u64, String> {
    let d = array
        .as_any_dictionary_opt()
        .ok_or_else(|| mismatch(array))?;
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
    Ok(sum)
}

/// What every slot costs at least, whatever its values weigh (a Null
/// column has no buffers at all): the Parquet writer keeps a definition
/// and a repetition level (two i16) per leaf slot, and the digest and the
/// commit do work per row.
const MIN_SLOT_BYTES: u64 = 4;

fn offsets_bytes<O: arrow::array::OffsetSizeTrait>(offsets: &[O], width: u64) -> u64 {
    let data = match (
        offsets.first().and_then(|o| o.to_usize()),
        offsets.last().and_then(|o| o.to_usize()),
    ) {
        (Some(s), Some(e)) => e.saturating_sub(s) as u64,
        _ => 0,
    };
    (offsets.len() as u64)
        .saturating_mul(width)
        .saturating_add(data)
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::*;
    use arrow::buffer::{NullBuffer, OffsetBuffer, ScalarBuffer};
    use arrow::datatypes::{Field, Fields, Int32Type, IntervalMonthDayNano, UnionFields};

    use super::*;
    use crate::digest::{OutputDigester, TestRng, env_or};

    fn budget(limit: usize) -> OutputBudget {
        OutputBudget {
            limit,
            produced: 0,
            batch: 0,
            max_rows: u64::MAX,
            rows: 0,
            max_batch_rows: u64::MAX,
        }
    }

    fn batch_of(columns: Vec<(&str, ArrayRef)>) -> RecordBatch {
        RecordBatch::try_from_iter_with_nullable(columns.into_iter().map(|(n, a)| (n, a, true)))
            .unwrap()
    }

    fn encode(batches: &[RecordBatch]) -> Vec<u8> {
        let mut w =
            arrow::ipc::writer::StreamWriter::try_new(Vec::new(), &batches[0].schema()).unwrap();
        for b in batches {
            w.write(b).unwrap();
        }
        w.into_inner().unwrap()
    }

    /// Real encoded batches of many types: what the fuzzer mutates.
    fn seeds() -> Vec<Vec<u8>> {
        let n = 12;
        let ints = || Int32Array::from_iter((0..n).map(|i| (i % 3 != 0).then_some(i)));
        let strings = || {
            StringArray::from_iter(
                (0..n).map(|i| (i % 4 != 0).then(|| "ab".repeat(i as usize % 3))),
            )
        };
        let flat = batch_of(vec![
            ("i", Arc::new(ints())),
            ("l", Arc::new(Int64Array::from_iter_values(0..n as i64))),
            ("s", Arc::new(strings())),
            (
                "b",
                Arc::new(BooleanArray::from_iter(
                    (0..n).map(|i| (i % 5 != 0).then_some(i % 2 == 0)),
                )),
            ),
            (
                "f",
                Arc::new(Float64Array::from_iter_values((0..n).map(f64::from))),
            ),
            (
                "d",
                Arc::new(
                    Decimal128Array::from_iter_values((0..n).map(i128::from))
                        .with_precision_and_scale(10, 2)
                        .unwrap(),
                ),
            ),
            (
                "t",
                Arc::new(
                    TimestampMillisecondArray::from_iter_values((0..n).map(i64::from))
                        .with_timezone("UTC"),
                ),
            ),
            (
                "fsb",
                Arc::new(
                    FixedSizeBinaryArray::try_from_iter((0..n).map(|i| [i as u8; 3])).unwrap(),
                ),
            ),
            (
                "ls",
                Arc::new(LargeStringArray::from_iter_values(
                    (0..n).map(|i| format!("v{i}")),
                )),
            ),
            (
                "bin",
                Arc::new(BinaryArray::from_iter_values(
                    (0..n).map(|i| vec![i as u8; 2]),
                )),
            ),
        ]);
        let dict = DictionaryArray::<Int32Type>::try_new(
            Int32Array::from_iter((0..n).map(|i| (i % 4 != 0).then_some(i % 3))),
            Arc::new(StringArray::from(vec!["x", "yy", "zzz"])),
        )
        .unwrap();
        let st_fields = Fields::from(vec![
            Field::new("x", arrow::datatypes::DataType::Int32, true),
            Field::new("y", arrow::datatypes::DataType::Utf8, true),
        ]);
        let st = StructArray::try_new(
            st_fields.clone(),
            vec![Arc::new(ints()), Arc::new(strings())],
            Some(NullBuffer::from_iter((0..n).map(|i| i % 5 != 1))),
        )
        .unwrap();
        let list_struct = ListArray::try_new(
            Arc::new(Field::new(
                "item",
                arrow::datatypes::DataType::Struct(st_fields),
                true,
            )),
            OffsetBuffer::new(ScalarBuffer::from(vec![0, 2, 2, 5, 9, 12])),
            Arc::new(st.clone()),
            Some(NullBuffer::from(vec![true, false, true, true, true])),
        )
        .unwrap();
        let mut map = MapBuilder::new(None, StringBuilder::new(), Int64Builder::new());
        for i in 0..5 {
            for k in 0..i % 3 {
                map.keys().append_value(format!("k{k}"));
                map.values().append_option((k != 1).then_some(i64::from(i)));
            }
            map.append(i != 3).unwrap();
        }
        let nested = batch_of(vec![("dict", Arc::new(dict)), ("st", Arc::new(st))]);
        let lists = batch_of(vec![
            ("ls", Arc::new(list_struct)),
            ("m", Arc::new(map.finish())),
            (
                "fsl",
                Arc::new(FixedSizeListArray::from_iter_primitive::<Int32Type, _, _>(
                    (0..5).map(|i| (i != 2).then(|| vec![Some(i), None])),
                    2,
                )),
            ),
            (
                "ll",
                Arc::new(LargeListArray::from_iter_primitive::<Int32Type, _, _>(
                    (0..5).map(|i| Some(vec![Some(i); i as usize])),
                )),
            ),
        ]);
        let views = batch_of(vec![
            (
                "sv",
                Arc::new(StringViewArray::from_iter((0..n).map(|i| {
                    (i % 3 != 0).then(|| format!("a string long enough to leave the view {i}"))
                }))),
            ),
            (
                "bv",
                Arc::new(BinaryViewArray::from_iter_values(
                    (0..n).map(|i| vec![7u8; i as usize * 3]),
                )),
            ),
        ]);
        let times = batch_of(vec![
            (
                "dur",
                Arc::new(DurationSecondArray::from_iter(
                    (0..n).map(|i| (i != 4).then_some(i64::from(i))),
                )),
            ),
            (
                "iv",
                Arc::new(IntervalMonthDayNanoArray::from_iter_values(
                    (0..n).map(|i| IntervalMonthDayNano::new(i, i, i64::from(i))),
                )),
            ),
            (
                "ym",
                Arc::new(IntervalYearMonthArray::from_iter_values(0..n)),
            ),
            ("t32", Arc::new(Time32SecondArray::from_iter_values(0..n))),
            ("nul", Arc::new(NullArray::new(n as usize))),
        ]);
        let union_fields = UnionFields::try_new(
            vec![0, 1],
            vec![
                Field::new("i", arrow::datatypes::DataType::Int32, true),
                Field::new("s", arrow::datatypes::DataType::Utf8, true),
            ],
        )
        .unwrap();
        let sparse = UnionArray::try_new(
            union_fields.clone(),
            ScalarBuffer::from(vec![0i8, 1, 0]),
            None,
            vec![
                Arc::new(Int32Array::from(vec![1, 2, 3])),
                Arc::new(StringArray::from(vec!["a", "b", "c"])),
            ],
        )
        .unwrap();
        let dense = UnionArray::try_new(
            union_fields,
            ScalarBuffer::from(vec![0i8, 1, 1]),
            Some(ScalarBuffer::from(vec![0, 0, 1])),
            vec![
                Arc::new(Int32Array::from(vec![1])),
                Arc::new(StringArray::from(vec!["a", "b"])),
            ],
        )
        .unwrap();
        let ree = RunArray::<Int32Type>::try_new(
            &Int32Array::from(vec![2, 3]),
            &StringArray::from(vec!["r", "s"]),
        )
        .unwrap();
        let list_view = ListViewArray::try_new(
            Arc::new(Field::new("item", arrow::datatypes::DataType::Int32, true)),
            ScalarBuffer::from(vec![0, 1, 0]),
            ScalarBuffer::from(vec![1, 2, 0]),
            Arc::new(Int32Array::from(vec![5, 6, 7])),
            None,
        )
        .unwrap();
        let exotic = [
            batch_of(vec![("u", Arc::new(sparse))]),
            batch_of(vec![("u", Arc::new(dense))]),
            batch_of(vec![("r", Arc::new(ree))]),
            batch_of(vec![("lv", Arc::new(list_view))]),
        ];
        // No columns and no rows: valid, and what mutations of its record
        // batch length turn into the 200-byte row bomb.
        let no_columns = RecordBatch::try_new_with_options(
            Arc::new(arrow::datatypes::Schema::empty()),
            vec![],
            &RecordBatchOptions::new().with_row_count(Some(0)),
        )
        .unwrap();
        let nulls = batch_of(vec![("n", Arc::new(NullArray::new(40)))]);
        let mut seeds = vec![
            encode(std::slice::from_ref(&no_columns)),
            encode(std::slice::from_ref(&nulls)),
            encode(std::slice::from_ref(&flat)),
            encode(&[flat.slice(0, 5), flat.slice(5, 7)]),
            encode(std::slice::from_ref(&nested)),
            encode(std::slice::from_ref(&lists)),
            encode(std::slice::from_ref(&views)),
            encode(std::slice::from_ref(&times)),
            idem_guest::ipc::encode_schema(&flat.schema()).unwrap(),
        ];
        seeds.extend(exotic.iter().map(|b| encode(std::slice::from_ref(b))));
        seeds
    }

    /// Where each message of a valid stream keeps its metadata and body.
    fn frames(stream: &[u8]) -> Vec<(usize, usize, usize)> {
        let mut out = Vec::new();
        let mut pos = 0;
        while pos + 8 <= stream.len() {
            let len = u32::from_le_bytes(stream[pos + 4..pos + 8].try_into().unwrap()) as usize;
            if len == 0 {
                break;
            }
            let meta = pos + 8;
            let message = arrow::ipc::root_as_message(&stream[meta..meta + len]).unwrap();
            let body = meta + len;
            pos = body + message.bodyLength() as usize;
            out.push((meta, body, pos));
        }
        out
    }

    /// A position to mutate: mostly inside one message's metadata (where
    /// the schema, node lengths and buffer ranges live), else in a body or
    /// anywhere.
    fn position(frames: &[(usize, usize, usize)], len: usize, rng: &mut TestRng) -> usize {
        let p = match (frames.is_empty(), rng.below(10)) {
            (false, 0..=5) => {
                let (meta, body, _) = frames[rng.below(frames.len())];
                meta + rng.below(body - meta)
            }
            (false, 6..=7) => {
                let (_, body, end) = frames[rng.below(frames.len())];
                body + rng.below((end - body).max(1))
            }
            _ => rng.below(len),
        };
        p.min(len - 1)
    }

    /// One to three of: flipped bits, a random byte, an aligned integer
    /// overwritten with a boundary value, a truncation, a splice with
    /// another seed, a duplicated chunk; now and then pure noise.
    fn mutate(seed: &[u8], seeds: &[Vec<u8>], rng: &mut TestRng) -> Vec<u8> {
        if rng.one_in(50) {
            let mut noise: Vec<u8> = (0..rng.below(300)).map(|_| rng.next() as u8).collect();
            if rng.one_in(2) {
                noise.splice(0..0, [0xff, 0xff, 0xff, 0xff, 0x40, 0, 0, 0]);
            }
            return noise;
        }
        let frames = frames(seed);
        let mut b = seed.to_vec();
        for _ in 0..1 + rng.below(3) {
            if b.is_empty() {
                break;
            }
            match rng.below(8) {
                0 | 1 => {
                    for _ in 0..1 + rng.below(3) {
                        let p = position(&frames, b.len(), rng);
                        b[p] ^= 1 << rng.below(8);
                    }
                }
                2 => {
                    let p = position(&frames, b.len(), rng);
                    b[p] = rng.next() as u8;
                }
                3 | 4 => {
                    const INTERESTING: [i64; 12] = [
                        0,
                        1,
                        -1,
                        2,
                        7,
                        255,
                        4096,
                        i32::MAX as i64,
                        i32::MIN as i64,
                        1 << 40,
                        i64::MAX,
                        i64::MIN,
                    ];
                    let v = INTERESTING[rng.below(INTERESTING.len())];
                    let width = [1usize, 2, 4, 8][rng.below(4)];
                    let p = position(&frames, b.len(), rng) / width * width;
                    let end = (p + width).min(b.len());
                    b[p..end].copy_from_slice(&v.to_le_bytes()[..end - p]);
                }
                5 => b.truncate(rng.below(b.len())),
                6 => {
                    let other = &seeds[rng.below(seeds.len())];
                    let cut = rng.below(b.len());
                    let from = rng.below(other.len());
                    b.truncate(cut);
                    b.extend_from_slice(&other[from..]);
                }
                _ => {
                    let s = rng.below(b.len());
                    let e = (s + 1 + rng.below(64)).min(b.len());
                    let chunk = b[s..e].to_vec();
                    let at = rng.below(b.len());
                    b.splice(at..at, chunk);
                }
            }
        }
        b
    }

    #[test]
    fn thousands_of_mutated_ipc_streams_never_panic_the_host() {
        // Calls the decoder and the digester WITHOUT their catch_unwind
        // backstops: any panic fails this test (the PRNG is seeded, so a
        // failure reproduces).
        let started = std::time::Instant::now();
        let seeds = seeds();
        // IDEM_FUZZ_CASES / IDEM_FUZZ_SEED fuzz longer or elsewhere by hand.
        let cases = env_or("IDEM_FUZZ_CASES", 30_000);
        let mut rng = TestRng(env_or("IDEM_FUZZ_SEED", 0xf022_b0a7_d5ee_d001));
        let (mut accepted, mut refused) = (0usize, 0usize);
        for seed in &seeds {
            let d = decode_guest_output(seed.clone(), &budget(1 << 30));
            match d {
                Ok(Some(d)) => {
                    OutputDigester::new().update_unguarded(&d.batch).unwrap();
                    accepted += 1;
                }
                Ok(None) => accepted += 1,
                Err(SandboxError::UnsupportedOutputType { .. }) => refused += 1,
                Err(e) => panic!("a real stream was refused: {e}"),
            }
        }
        assert_eq!((accepted, refused), (9, 4), "the seeds themselves");
        let mut outcomes = [0usize; 3];
        let limits = OutputBudget {
            max_batch_rows: 1 << 16,
            ..budget(1 << 24)
        };
        for _ in 0..cases {
            let seed = &seeds[rng.below(seeds.len())];
            let bytes = mutate(seed, &seeds, &mut rng);
            match decode_guest_output(bytes, &limits) {
                Ok(Some(d)) => {
                    // Whatever is accepted is within the row limit, has
                    // columns if it has rows, and costs a byte a row.
                    let rows = d.batch.num_rows();
                    assert!(rows <= 1 << 16, "{rows} rows accepted");
                    assert!(
                        rows == 0 || d.batch.num_columns() > 0,
                        "rows without columns"
                    );
                    assert!(
                        d.logical_bytes >= rows,
                        "{} bytes for {rows} rows",
                        d.logical_bytes
                    );
                    // Whatever decodes must digest or be refused, not panic.
                    let _ = OutputDigester::new().update_unguarded(&d.batch);
                    outcomes[0] += 1;
                }
                Ok(None) => outcomes[1] += 1,
                Err(_) => outcomes[2] += 1,
            }
        }
        eprintln!(
            "fuzz: {cases} cases, {outcomes:?} (decoded/empty/refused) in {:?}",
            started.elapsed()
        );
        // The fuzzer reached both sides of the boundary.
        assert!(
            outcomes[0] as u64 > cases / 50 && outcomes[2] as u64 > cases / 6,
            "{outcomes:?}"
        );
    }

    #[test]
    fn well_framed_streams_with_invalid_values_are_bad_output() {
        // Framing and metadata are fine; the values are not: every array
        // is fully validated before the host touches it.
        let strings = batch_of(vec![(
            "s",
            Arc::new(StringArray::from(vec!["hello", "world"])),
        )]);
        let mut bytes = encode(&[strings]);
        let at = bytes.windows(5).position(|w| w == b"hello").unwrap();
        bytes[at] = 0xff;
        match decode_guest_output(bytes, &budget(1 << 20)) {
            Err(SandboxError::BadOutput { detail, .. }) => {
                assert!(detail.contains("UTF"), "{detail}")
            }
            other => panic!("{other:?}"),
        }
        // A dictionary key past the end of its values.
        let dict = DictionaryArray::<Int32Type>::try_new(
            Int32Array::from(vec![299, 298, 297]),
            Arc::new(StringArray::from_iter_values(
                (0..300).map(|i| format!("v{i}")),
            )),
        )
        .unwrap();
        let mut bytes = encode(&[batch_of(vec![("d", Arc::new(dict))])]);
        let keys: Vec<u8> = [299i32, 298, 297]
            .iter()
            .flat_map(|k| k.to_le_bytes())
            .collect();
        let at = bytes
            .windows(12)
            .position(|w| w == keys.as_slice())
            .unwrap();
        bytes[at..at + 4].copy_from_slice(&0x7fff_0000i32.to_le_bytes());
        match decode_guest_output(bytes, &budget(1 << 20)) {
            Err(SandboxError::BadOutput { detail, .. }) => {
                assert!(detail.contains("2147418112"), "{detail}")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn logical_size_follows_views_slices_and_dictionaries() {
        // 1,000 views of the same 1 KiB: 16 KB of views, 1 MB of strings.
        let view = (u128::from(u32::from_le_bytes(*b"aaaa")) << 32) | 1024;
        let views = StringViewArray::try_new(
            ScalarBuffer::from(vec![view; 1000]),
            vec![arrow::buffer::Buffer::from_vec(vec![b'a'; 1024])],
            None,
        )
        .unwrap();
        assert_eq!(logical_bytes(&views).unwrap(), 1000 * (16 + 1024));
        // A slice counts its own range, not the buffers it shares.
        let strings = StringArray::from_iter_values((0..1000).map(|_| "x".repeat(100)));
        let whole = logical_bytes(&strings).unwrap();
        let part = logical_bytes(&strings.slice(10, 10)).unwrap();
        assert_eq!(part, 11 * 4 + 10 * 100);
        assert!(whole > 50 * part);
        // A dictionary counts its values once per row.
        let dict = DictionaryArray::<Int32Type>::try_new(
            Int32Array::from(
                vec![Some(0); 500]
                    .into_iter()
                    .chain([None])
                    .collect::<Vec<_>>(),
            ),
            Arc::new(StringArray::from(vec!["y".repeat(1000)])),
        )
        .unwrap();
        assert!(logical_bytes(&dict).unwrap() >= 500 * 1000);
        // Nulls still cost 4 bytes each: a long null column is not free,
        // nor is a list of nulls.
        assert_eq!(logical_bytes(&NullArray::new(1 << 20)).unwrap(), 4 << 20);
        let nulls = ListArray::new(
            Arc::new(Field::new("item", DataType::Null, true)),
            OffsetBuffer::new(ScalarBuffer::from(vec![0, 1 << 20])),
            Arc::new(NullArray::new(1 << 20)),
            None,
        );
        assert!(logical_bytes(&nulls).unwrap() >= 4 << 20);
    }

    #[test]
    fn a_dictionary_that_expands_past_the_limit_is_refused_before_digesting() {
        let dict = DictionaryArray::<Int32Type>::try_new(
            Int32Array::from(vec![0; 10_000]),
            Arc::new(StringArray::from(vec!["z".repeat(10_000)])),
        )
        .unwrap();
        let bytes = encode(&[batch_of(vec![("d", Arc::new(dict))])]);
        assert!(bytes.len() < 64 << 10);
        match decode_guest_output(bytes, &budget(16 << 20)) {
            Err(SandboxError::OutputLimit { limit, produced }) => {
                assert_eq!(limit, 16 << 20);
                assert!(produced >= 100_000_000, "{produced}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_backstop_turns_a_panic_into_a_typed_error() {
        // No guest bytes make the decoder panic (see the fuzz test), so the
        // backstop is exercised on a panic of its own.
        let r = backstop(3, || -> Result<(), SandboxError> { panic!("boom") });
        assert!(
            matches!(r, Err(SandboxError::OutputPanic { batch: 3, ref detail }) if detail == "boom"),
            "{r:?}"
        );
        assert!(backstop(3, || Ok(7)).is_ok_and(|v| v == 7));
    }
}
