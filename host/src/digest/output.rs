//! The logical digest of Arrow output: same rows in the same order, same
//! digest, whatever the batch boundaries or the encoding.

use std::panic::AssertUnwindSafe;

use arrow::datatypes::{DataType, Schema};
use arrow::record_batch::RecordBatch;
use arrow_digest::{ArrayDigest, ArrayDigestV0};
use sha2::{Digest as _, Sha256};

use super::error::{DigestError, panic_message};
use super::plain::{plain_array, plain_type};
use super::rows;
use super::sha256::Digest;
use super::types::{arrow_digest_sound, check_schema};

/// How one column is hashed.
enum ColumnHasher {
    /// arrow-digest's own column hash: flat columns and lists of them, so
    /// their digests stay what they always were.
    ArrowDigest(ArrayDigestV0<Sha256>),
    /// idem's row encoding v1 ([`rows`]): everything else idem supports.
    Rows(Sha256),
}

/// The digest state of a run whose first batch fixed the schema.
struct Plan {
    types: Vec<DataType>,
    expected: String,
    fields: Sha256,
    columns: Vec<ColumnHasher>,
}

impl Plan {
    fn new(schema: &Schema) -> Result<Self, DigestError> {
        check_schema(schema)?;
        let mut fields = Sha256::new();
        let mut columns = Vec::with_capacity(schema.fields().len());
        for f in schema.fields() {
            // Exactly what arrow-digest's RecordDigestV0 hashes for a
            // top-level field (name length, name, nesting level 0), so flat
            // schemas keep their digests. Nested fields are described in
            // their column's hash instead.
            fields.update((f.name().len() as u64).to_le_bytes());
            fields.update(f.name().as_bytes());
            fields.update(0u64.to_le_bytes());
            let dt = plain_type(f.data_type());
            columns.push(if arrow_digest_sound(&dt) {
                ColumnHasher::ArrowDigest(ArrayDigestV0::new(&dt))
            } else {
                let mut h = Sha256::new();
                h.update(rows::TAG);
                let mut description = Vec::new();
                rows::describe(&dt, &mut description);
                h.update(&description);
                ColumnHasher::Rows(h)
            });
        }
        Ok(Plan {
            types: schema
                .fields()
                .iter()
                .map(|f| f.data_type().clone())
                .collect(),
            expected: schema.to_string(),
            fields,
            columns,
        })
    }

    fn update(&mut self, batch: &RecordBatch, index: u64) -> Result<(), DigestError> {
        let schema = batch.schema();
        same_types(&self.types, &self.expected, &schema, index)?;
        for ((column, hasher), field) in batch
            .columns()
            .iter()
            .zip(self.columns.iter_mut())
            .zip(schema.fields())
        {
            let invalid = |detail: String| DigestError::Invalid {
                column: field.name().clone(),
                detail,
            };
            let plain = plain_array(column).map_err(|e| invalid(e.to_string()))?;
            match hasher {
                ColumnHasher::ArrowDigest(d) => d.update(plain.as_ref(), None),
                ColumnHasher::Rows(h) => rows::update(h, plain.as_ref()).map_err(invalid)?,
            }
        }
        Ok(())
    }

    fn finish(self) -> Digest {
        let mut h = self.fields;
        for c in self.columns {
            match c {
                ColumnHasher::ArrowDigest(d) => h.update(d.finalize().as_slice()),
                ColumnHasher::Rows(r) => h.update(r.finalize().as_slice()),
            }
        }
        Digest::from_hash(h.finalize().as_slice())
    }
}

/// Batch `index` must have the first batch's column types (`types`; its
/// schema printed as `expected`).
pub(super) fn same_types(
    types: &[DataType],
    expected: &str,
    schema: &Schema,
    index: u64,
) -> Result<(), DigestError> {
    let same = schema.fields().len() == types.len()
        && schema
            .fields()
            .iter()
            .zip(types)
            .all(|(f, t)| f.data_type() == t);
    if same {
        return Ok(());
    }
    Err(DigestError::SchemaChanged {
        batch: index,
        expected: expected.to_string(),
        got: schema.to_string(),
    })
}

/// Streams output batches into the logical output digest. Batch boundaries
/// and buffer layout do not matter, only rows, order and schema.
///
/// How: one hash per top-level column, combined as arrow-digest's
/// `RecordDigestV0` combines them (each field's name, then each column's
/// hash). Flat columns (booleans, numbers, decimals, dates, times,
/// timestamps, strings, binary) and lists of them are hashed by arrow-digest
/// 59.1 unchanged, so their digests are what they always were. Every other
/// supported column (structs, maps, lists of structs, durations, intervals,
/// nulls) is hashed by idem's row encoding v1 ([`rows`]), because
/// arrow-digest panics on them or, for structs, ORs the struct's validity
/// with its children's (`{x: null}` hashed like `{x: 0}`). Dictionaries are
/// expanded to their values first. Unions, run-end encoded and list-view
/// columns are refused ([`check_schema`]).
///
/// Kept from arrow-digest for compatibility: in a flat column a null hashes
/// as one zero byte, so in 1-byte integer columns (Int8/UInt8) a null and a
/// `0` digest alike.
#[derive(Default)]
pub struct OutputDigester {
    plan: Option<Plan>,
    rows: u64,
    batches: u64,
    failed: Option<DigestError>,
}

impl OutputDigester {
    /// A digester with no rows yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Add a batch (its schema must match earlier batches'). Unsupported
    /// types are refused before anything is hashed. After an error the
    /// digester refuses every further batch.
    pub fn update(&mut self, batch: &RecordBatch) -> Result<(), DigestError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        // Last line of defence, not the first: the code below returns errors
        // for everything it knows to be wrong, but a panic in a library on
        // data nobody foresaw must not take the host down (release and dev
        // profiles unwind; never build idem with panic = "abort").
        let r = std::panic::catch_unwind(AssertUnwindSafe(|| self.update_unguarded(batch)))
            .unwrap_or_else(|payload| Err(DigestError::Panicked(panic_message(payload.as_ref()))));
        if let Err(e) = &r {
            self.failed = Some(e.clone());
        }
        r
    }

    /// [`OutputDigester::update`] without the panic backstop, for tests
    /// that must see a panic.
    pub(crate) fn update_unguarded(&mut self, batch: &RecordBatch) -> Result<(), DigestError> {
        let plan = match self.plan.take() {
            Some(p) => p,
            None => Plan::new(batch.schema().as_ref())?,
        };
        let plan = self.plan.insert(plan);
        plan.update(batch, self.batches)?;
        self.rows += batch.num_rows() as u64;
        self.batches += 1;
        Ok(())
    }

    /// Rows seen so far.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// The digest; no batches at all digest as an empty schema.
    pub fn finish(self) -> Digest {
        match self.plan {
            Some(plan) => plan.finish(),
            None => Digest::from_hash(Sha256::new().finalize().as_slice()),
        }
    }
}

/// The logical digest of `batches`.
pub fn of_batches<'a>(
    batches: impl IntoIterator<Item = &'a RecordBatch>,
) -> Result<Digest, DigestError> {
    let mut d = OutputDigester::new();
    for b in batches {
        d.update(b)?;
    }
    Ok(d.finish())
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::Int64Array;
    use arrow::datatypes::Field;
    use std::sync::Arc;

    fn batch(v: Vec<i64>) -> RecordBatch {
        let s = Arc::new(Schema::new(vec![Field::new("a", DataType::Int64, false)]));
        RecordBatch::try_new(s, vec![Arc::new(Int64Array::from(v))]).unwrap()
    }

    #[test]
    fn batch_boundaries_do_not_change_the_digest_but_order_does() {
        let one = of_batches(&[batch(vec![1, 2, 3])]);
        let split = of_batches(&[batch(vec![1]), batch(vec![2, 3])]);
        let other = of_batches(&[batch(vec![3, 2, 1])]);
        assert_eq!(one, split);
        assert_ne!(one, other);
    }

    /// Flat columns of every flat type, nulls and sliced arrays included.
    fn flat_batches() -> Vec<RecordBatch> {
        use arrow::array::*;
        use arrow::datatypes::Int32Type;
        let n = 40usize;
        let nulls = |k: usize| (0..n).map(move |i| i % k != 0);
        let columns: Vec<(&str, ArrayRef)> = vec![
            (
                "i8",
                Arc::new(Int8Array::from_iter(
                    nulls(3).zip(0..).map(|(v, i)| v.then_some(i as i8)),
                )),
            ),
            (
                "i16",
                Arc::new(Int16Array::from_iter_values((0..n).map(|i| i as i16 * 7))),
            ),
            (
                "i32",
                Arc::new(Int32Array::from_iter(
                    nulls(4).zip(0..).map(|(v, i)| v.then_some(i)),
                )),
            ),
            (
                "i64",
                Arc::new(Int64Array::from_iter_values((0..n as i64).map(|i| i * -3))),
            ),
            (
                "u8",
                Arc::new(UInt8Array::from_iter_values((0..n).map(|i| i as u8))),
            ),
            (
                "u16",
                Arc::new(UInt16Array::from_iter_values((0..n).map(|i| i as u16))),
            ),
            (
                "u32",
                Arc::new(UInt32Array::from_iter(
                    nulls(5).zip(0..).map(|(v, i)| v.then_some(i)),
                )),
            ),
            (
                "u64",
                Arc::new(UInt64Array::from_iter_values(
                    (0..n as u64).map(|i| i << 40),
                )),
            ),
            (
                "f32",
                Arc::new(Float32Array::from_iter_values(
                    (0..n).map(|i| i as f32 / 3.0),
                )),
            ),
            (
                "f64",
                Arc::new(Float64Array::from_iter(
                    nulls(6).zip(0..).map(|(v, i)| v.then_some(i as f64 * 0.25)),
                )),
            ),
            (
                "b",
                Arc::new(BooleanArray::from_iter(
                    nulls(3).zip(0..).map(|(v, i)| v.then_some(i % 2 == 0)),
                )),
            ),
            (
                "s",
                Arc::new(StringArray::from_iter(
                    nulls(4).zip(0..).map(|(v, i)| v.then(|| format!("s{i}"))),
                )),
            ),
            (
                "ls",
                Arc::new(LargeStringArray::from_iter_values(
                    (0..n).map(|i| "x".repeat(i % 5)),
                )),
            ),
            (
                "sv",
                Arc::new(StringViewArray::from_iter(nulls(3).zip(0..).map(
                    |(v, i)| v.then(|| format!("a fairly long string number {i}")),
                ))),
            ),
            (
                "bin",
                Arc::new(BinaryArray::from_iter(
                    nulls(7)
                        .zip(0..)
                        .map(|(v, i)| v.then(|| vec![i as u8; i % 4])),
                )),
            ),
            (
                "fsb",
                Arc::new(
                    FixedSizeBinaryArray::try_from_iter((0..n).map(|i| [i as u8, 1, 2])).unwrap(),
                ),
            ),
            (
                "dec",
                Arc::new(
                    Decimal128Array::from_iter(
                        nulls(5).zip(0..).map(|(v, i)| v.then_some(i as i128 * 101)),
                    )
                    .with_precision_and_scale(20, 2)
                    .unwrap(),
                ),
            ),
            ("d32", Arc::new(Date32Array::from_iter_values(0..n as i32))),
            (
                "d64",
                Arc::new(Date64Array::from_iter_values(
                    (0..n as i64).map(|i| i * 86_400_000),
                )),
            ),
            (
                "t64",
                Arc::new(Time64MicrosecondArray::from_iter_values(
                    (0..n as i64).map(|i| i * 1_000),
                )),
            ),
            (
                "ts",
                Arc::new(
                    TimestampMicrosecondArray::from_iter(
                        nulls(4).zip(0..).map(|(v, i)| v.then_some(i as i64)),
                    )
                    .with_timezone("UTC"),
                ),
            ),
            (
                "li",
                Arc::new(ListArray::from_iter_primitive::<Int32Type, _, _>(
                    (0..n).map(|i| {
                        (i % 5 != 0).then(|| {
                            (0..i % 3)
                                .map(|j| (j != 1).then_some(j as i32))
                                .collect::<Vec<_>>()
                        })
                    }),
                )),
            ),
        ];
        let batch = RecordBatch::try_from_iter(columns).unwrap();
        vec![batch.slice(0, 7), batch.slice(7, 20), batch.slice(27, 13)]
    }

    #[test]
    fn flat_columns_digest_exactly_as_arrow_digest_did() {
        use arrow_digest::{RecordDigest, RecordDigestV0};
        // Manifests written before idem had its own encoding must stay valid.
        let batches = flat_batches();
        let mut old = RecordDigestV0::<Sha256>::new(batches[0].schema().as_ref());
        for b in &batches {
            old.update(b);
        }
        let old = Digest::from_hash(old.finalize().as_slice());
        assert_eq!(of_batches(&batches).unwrap(), old);
        assert_eq!(OutputDigester::new().finish(), of_batches(&[]).unwrap());
    }

    #[test]
    fn one_byte_integers_keep_arrow_digests_null_and_zero_collision() {
        // Kept on purpose for compatibility (see OutputDigester): this test
        // fails if someone changes flat digests, which would orphan every
        // manifest written so far.
        let s = Arc::new(Schema::new(vec![Field::new("a", DataType::Int8, true)]));
        let b = |v: Option<i8>| {
            RecordBatch::try_new(
                s.clone(),
                vec![Arc::new(arrow::array::Int8Array::from(vec![v, Some(1)]))],
            )
            .unwrap()
        };
        assert_eq!(of_batches(&[b(None)]), of_batches(&[b(Some(0))]));
    }

    /// `{x: ?}` rows: struct validity, then the child's value and validity.
    fn struct_batch(rows: &[(bool, i32, bool)]) -> RecordBatch {
        use arrow::array::{Int32Array, StructArray};
        use arrow::buffer::{NullBuffer, ScalarBuffer};
        let x = Int32Array::new(
            ScalarBuffer::from(rows.iter().map(|r| r.1).collect::<Vec<_>>()),
            Some(NullBuffer::from(
                rows.iter().map(|r| r.2).collect::<Vec<_>>(),
            )),
        );
        let fields = arrow::datatypes::Fields::from(vec![Field::new("x", DataType::Int32, true)]);
        let st = StructArray::try_new(
            fields.clone(),
            vec![Arc::new(x)],
            Some(NullBuffer::from(
                rows.iter().map(|r| r.0).collect::<Vec<_>>(),
            )),
        )
        .unwrap();
        let s = Schema::new(vec![Field::new("st", DataType::Struct(fields), true)]);
        RecordBatch::try_new(Arc::new(s), vec![Arc::new(st)]).unwrap()
    }

    #[test]
    fn a_null_inside_a_valid_struct_is_not_its_hidden_value() {
        // arrow-digest ORs struct and child validity (and drops the struct's
        // when the child has no nulls): with it, both pairs below collided.
        // `{x: null}, null` vs `{x: 0}, null`:
        let null_x = struct_batch(&[(true, 0, false), (false, 5, false)]);
        let zero_x = struct_batch(&[(true, 0, true), (false, 5, false)]);
        assert_ne!(of_batches(&[null_x]), of_batches(&[zero_x]));
        // `{x: null}, null` (5 hidden under the null) vs `{x: 0}, {x: 5}`:
        let hidden = struct_batch(&[(true, 0, false), (false, 5, true)]);
        let shown = struct_batch(&[(true, 0, true), (true, 5, true)]);
        assert_ne!(of_batches(&[hidden]), of_batches(&[shown]));
        // Whatever sits under a null struct row does not count.
        let a = struct_batch(&[(false, 1, true), (true, 2, true)]);
        let b = struct_batch(&[(false, 9, false), (true, 2, true)]);
        assert_eq!(of_batches(&[a]), of_batches(&[b]));
        // A null struct is not a struct of nulls.
        let null_struct = struct_batch(&[(false, 0, false)]);
        let struct_of_null = struct_batch(&[(true, 0, false)]);
        assert_ne!(of_batches(&[null_struct]), of_batches(&[struct_of_null]));
    }

    #[test]
    fn unsupported_types_are_refused_before_any_digest_naming_the_field() {
        use arrow::datatypes::{Fields, UnionFields, UnionMode};
        let union = DataType::Union(
            UnionFields::try_new(vec![0], vec![Field::new("i", DataType::Int32, true)]).unwrap(),
            UnionMode::Sparse,
        );
        let ree = DataType::RunEndEncoded(
            Arc::new(Field::new("run_ends", DataType::Int32, false)),
            Arc::new(Field::new("values", DataType::Utf8, true)),
        );
        let cases = [
            (union.clone(), "u", "nullable column"),
            (ree, "u", "run-end"),
            (
                DataType::ListView(Arc::new(Field::new("item", DataType::Int32, true))),
                "u",
                "List column",
            ),
            (
                DataType::Struct(Fields::from(vec![Field::new(
                    "inner",
                    DataType::List(Arc::new(Field::new("item", union, true))),
                    true,
                )])),
                "u.inner[]",
                "nullable column",
            ),
        ];
        for (dt, column, fix) in cases {
            let schema = Schema::new(vec![Field::new("u", dt.clone(), true)]);
            match check_schema(&schema) {
                Err(DigestError::UnsupportedType {
                    column: c, fix: f, ..
                }) => {
                    assert_eq!(c, column, "{dt}");
                    assert!(f.contains(fix), "{dt}: {f}");
                }
                other => panic!("{dt}: {other:?}"),
            }
            // The digester refuses it too, from an empty batch, hashing nothing.
            let batch = RecordBatch::new_empty(Arc::new(schema));
            assert!(matches!(
                OutputDigester::new().update(&batch),
                Err(DigestError::UnsupportedType { .. })
            ));
        }
    }

    #[test]
    fn a_later_batch_with_another_schema_is_an_error_not_a_panic() {
        let other = RecordBatch::try_new(
            Arc::new(Schema::new(vec![Field::new("a", DataType::Utf8, false)])),
            vec![Arc::new(arrow::array::StringArray::from(vec!["x"]))],
        )
        .unwrap();
        let mut d = OutputDigester::new();
        d.update(&batch(vec![1])).unwrap();
        assert!(matches!(
            d.update(&other),
            Err(DigestError::SchemaChanged { batch: 1, .. })
        ));
        // The digester stays failed.
        assert!(d.update(&batch(vec![2])).is_err());
    }
}
