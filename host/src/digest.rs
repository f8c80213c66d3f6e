//! Digests: sha256 of bytes and files, and the logical digest of Arrow
//! output (same rows in the same order -> same digest, whatever encoding).

use crate::error::Kind;
use std::fmt;
use std::io::Read;
use std::panic::AssertUnwindSafe;
use std::path::Path;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, FixedSizeListArray, LargeListArray, ListArray, MapArray, StructArray,
};
use arrow::datatypes::{DataType, FieldRef, Schema};
use arrow::error::ArrowError;
use arrow::record_batch::RecordBatch;
use arrow_digest::{ArrayDigest, ArrayDigestV0};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};
use thiserror::Error;

/// A content digest, always written `sha256:<64 hex>`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Digest(String);

const PREFIX: &str = "sha256:";

impl Digest {
    /// sha256 of `bytes`.
    pub fn of_bytes(bytes: &[u8]) -> Self {
        Self::from_hash(Sha256::digest(bytes).as_slice())
    }

    /// sha256 of a file, streamed; also returns its size.
    pub fn of_file(path: &Path) -> std::io::Result<(Self, u64)> {
        let mut f = std::fs::File::open(path)?;
        Self::of_reader(&mut f)
    }

    /// sha256 of everything `r` yields, and how many bytes that was.
    pub fn of_reader(r: &mut impl Read) -> std::io::Result<(Self, u64)> {
        let mut h = Sha256::new();
        let mut buf = vec![0u8; 1 << 20];
        let mut n = 0u64;
        loop {
            let k = r.read(&mut buf)?;
            if k == 0 {
                break;
            }
            h.update(&buf[..k]);
            n += k as u64;
        }
        Ok((Self::from_hash(h.finalize().as_slice()), n))
    }

    /// The digest a finished sha256 computation stands for.
    pub fn from_sha256(h: Sha256) -> Self {
        Self::from_hash(h.finalize().as_slice())
    }

    fn from_hash(h: &[u8]) -> Self {
        Digest(format!("{PREFIX}{}", hex::encode(h)))
    }

    /// The full `sha256:<hex>` text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Just the hex part, for file names.
    pub fn hex(&self) -> &str {
        &self.0[PREFIX.len()..]
    }

    /// Parse `sha256:<64 hex>`.
    pub fn parse(s: &str) -> Result<Self, String> {
        let hexpart = s
            .strip_prefix(PREFIX)
            .ok_or_else(|| format!("digest `{s}` must start with `{PREFIX}`"))?;
        if hexpart.len() != 64
            || !hexpart
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        {
            return Err(format!(
                "digest `{s}` must be `{PREFIX}` and 64 lowercase hex digits"
            ));
        }
        Ok(Digest(s.to_string()))
    }
}

impl TryFrom<String> for Digest {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        Digest::parse(&s)
    }
}

impl From<Digest> for String {
    fn from(d: Digest) -> String {
        d.0
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Why output rows could not be digested. Nothing is committed after any
/// of these.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DigestError {
    /// A column's type cannot be digested soundly; refused before any
    /// digest code ran.
    #[error("output column `{column}` has type {data_type}, which idem cannot digest: {fix}")]
    UnsupportedType {
        /// The column, with the path to the nested field at fault
        /// (`col.field`, `col[]` for list elements).
        column: String,
        /// The offending type.
        data_type: String,
        /// What to do instead.
        fix: String,
    },
    /// A batch's columns differ from the first batch's.
    #[error(
        "output batch {batch} has schema {got}, but the first batch had {expected}: every output batch of a run must have the same schema"
    )]
    SchemaChanged {
        /// Index of the offending batch.
        batch: u64,
        /// The first batch's schema.
        expected: String,
        /// This batch's schema.
        got: String,
    },
    /// A column's arrays do not hold what their type says.
    #[error("output column `{column}` could not be digested: {detail}")]
    Invalid {
        /// The column.
        column: String,
        /// What was wrong.
        detail: String,
    },
    /// Digesting panicked: a bug in idem or a library, caught so the host
    /// survives. The run stops.
    #[error(
        "digesting the output panicked ({0}); this is a bug in idem, please report it. Nothing was committed"
    )]
    Panicked(String),
}

impl DigestError {
    /// The kind of the failure (and the CLI's exit code): the guest's
    /// output could not be digested.
    pub fn kind(&self) -> Kind {
        Kind::Guest
    }
}

/// Deepest type nesting idem digests.
const MAX_NESTING: usize = 64;

/// Check that every column of `schema` can be digested, naming the first
/// one that cannot and what to do about it. [`OutputDigester`] runs this on
/// the first batch before any digest code; the sandbox runs it on a guest's
/// output before decoding any array.
pub fn check_schema(schema: &Schema) -> Result<(), DigestError> {
    schema
        .fields()
        .iter()
        .try_for_each(|f| check_type(f.name(), f.data_type(), 0))
}

fn check_type(path: &str, dt: &DataType, depth: usize) -> Result<(), DigestError> {
    let refuse = |fix: &str| {
        Err(DigestError::UnsupportedType {
            column: path.to_string(),
            data_type: dt.to_string(),
            fix: fix.to_string(),
        })
    };
    if depth > MAX_NESTING {
        return refuse("it is nested more than 64 levels deep; flatten it in the transform");
    }
    match dt {
        dt if is_flat(dt) => Ok(()),
        DataType::Null | DataType::Duration(_) | DataType::Interval(_) => Ok(()),
        DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _) => {
            check_type(&format!("{path}[]"), f.data_type(), depth + 1)
        }
        DataType::Struct(fields) => fields.iter().try_for_each(|f| {
            check_type(&format!("{path}.{}", f.name()), f.data_type(), depth + 1)
        }),
        DataType::Map(entries, _) => match entries.data_type() {
            DataType::Struct(kv) if kv.len() == 2 => kv.iter().try_for_each(|f| {
                check_type(&format!("{path}.{}", f.name()), f.data_type(), depth + 1)
            }),
            _ => refuse("its entries are not a key/value struct; build it with arrow's MapBuilder"),
        },
        DataType::Dictionary(key, value) if key.is_dictionary_key_type() => {
            check_type(path, value, depth + 1)
        }
        DataType::Union(..) => refuse(
            "union columns are not supported; return each variant as its own nullable column",
        ),
        DataType::RunEndEncoded(..) => refuse(
            "run-end encoded columns are not supported (their logical size cannot be bounded cheaply); return the plain column, e.g. arrow's `cast` to the value type",
        ),
        DataType::ListView(_) | DataType::LargeListView(_) => {
            refuse("list views are not supported; return a List column instead")
        }
        _ => refuse("this type is not supported; return a plainer type (see the README)"),
    }
}

/// Whether arrow-digest's `ArrayDigestV0` digests `dt` as a function of its
/// logical values. Read from arrow-digest 59.1's source: flat columns are
/// hashed value by value with the array offset applied, and list elements
/// recursively with their own validity; it panics on structs inside lists,
/// maps, dictionaries, durations, intervals and nulls, and merges struct
/// validity wrongly (so structs never go to it).
fn arrow_digest_sound(dt: &DataType) -> bool {
    match dt {
        DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _) => {
            arrow_digest_sound(f.data_type())
        }
        dt => is_flat(dt),
    }
}

/// Booleans, numbers, decimals, dates, times, timestamps, strings and
/// binary: one value per row, no children.
fn is_flat(dt: &DataType) -> bool {
    matches!(
        dt,
        DataType::Boolean
            | DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::UInt8
            | DataType::UInt16
            | DataType::UInt32
            | DataType::UInt64
            | DataType::Float16
            | DataType::Float32
            | DataType::Float64
            | DataType::Decimal32(..)
            | DataType::Decimal64(..)
            | DataType::Decimal128(..)
            | DataType::Decimal256(..)
            | DataType::Date32
            | DataType::Date64
            | DataType::Time32(_)
            | DataType::Time64(_)
            | DataType::Timestamp(..)
            | DataType::Binary
            | DataType::LargeBinary
            | DataType::BinaryView
            | DataType::FixedSizeBinary(_)
            | DataType::Utf8
            | DataType::LargeUtf8
            | DataType::Utf8View
    )
}

fn has_dictionary(dt: &DataType) -> bool {
    match dt {
        DataType::Dictionary(..) => true,
        DataType::List(f)
        | DataType::LargeList(f)
        | DataType::FixedSizeList(f, _)
        | DataType::Map(f, _) => has_dictionary(f.data_type()),
        DataType::Struct(fields) => fields.iter().any(|f| has_dictionary(f.data_type())),
        _ => false,
    }
}

/// `dt` with every dictionary replaced by its value type: what a column
/// is digested as.
fn plain_type(dt: &DataType) -> DataType {
    match dt {
        DataType::Dictionary(_, v) => plain_type(v),
        DataType::List(f) => DataType::List(plain_field(f)),
        DataType::LargeList(f) => DataType::LargeList(plain_field(f)),
        DataType::FixedSizeList(f, n) => DataType::FixedSizeList(plain_field(f), *n),
        DataType::Map(f, sorted) => DataType::Map(plain_field(f), *sorted),
        DataType::Struct(fields) => DataType::Struct(fields.iter().map(plain_field).collect()),
        other => other.clone(),
    }
}

fn plain_field(f: &FieldRef) -> FieldRef {
    if !has_dictionary(f.data_type()) {
        return f.clone();
    }
    Arc::new(f.as_ref().clone().with_data_type(plain_type(f.data_type())))
}

/// `array` with every dictionary expanded into its values, so a
/// dictionary-encoded column digests like the plain column of the same
/// values. Copies only where there is a dictionary; the sandbox has
/// already bounded the expanded (logical) size of guest output.
fn plain_array(array: &ArrayRef) -> Result<ArrayRef, ArrowError> {
    if !has_dictionary(array.data_type()) {
        return Ok(array.clone());
    }
    let mismatch = || ArrowError::InvalidArgumentError("array does not match its type".into());
    Ok(match array.data_type() {
        DataType::Dictionary(..) => {
            let d = array.as_any_dictionary_opt().ok_or_else(mismatch)?;
            let values = plain_array(d.values())?;
            arrow::compute::take(values.as_ref(), d.keys(), None)?
        }
        DataType::List(f) => {
            let l = array.as_list_opt::<i32>().ok_or_else(mismatch)?;
            Arc::new(ListArray::try_new(
                plain_field(f),
                l.offsets().clone(),
                plain_array(l.values())?,
                l.nulls().cloned(),
            )?)
        }
        DataType::LargeList(f) => {
            let l = array.as_list_opt::<i64>().ok_or_else(mismatch)?;
            Arc::new(LargeListArray::try_new(
                plain_field(f),
                l.offsets().clone(),
                plain_array(l.values())?,
                l.nulls().cloned(),
            )?)
        }
        DataType::FixedSizeList(f, n) => {
            let l = array.as_fixed_size_list_opt().ok_or_else(mismatch)?;
            Arc::new(FixedSizeListArray::try_new(
                plain_field(f),
                *n,
                plain_array(l.values())?,
                l.nulls().cloned(),
            )?)
        }
        DataType::Map(f, sorted) => {
            let m = array.as_map_opt().ok_or_else(mismatch)?;
            let entries: ArrayRef = Arc::new(m.entries().clone());
            let entries = plain_array(&entries)?;
            let entries = entries.as_struct_opt().ok_or_else(mismatch)?.clone();
            Arc::new(MapArray::try_new(
                plain_field(f),
                m.offsets().clone(),
                entries,
                m.nulls().cloned(),
                *sorted,
            )?)
        }
        DataType::Struct(fields) => {
            let s = array.as_struct_opt().ok_or_else(mismatch)?;
            let columns = s
                .columns()
                .iter()
                .map(plain_array)
                .collect::<Result<Vec<_>, _>>()?;
            Arc::new(StructArray::try_new(
                fields.iter().map(plain_field).collect(),
                columns,
                s.nulls().cloned(),
            )?)
        }
        _ => array.clone(),
    })
}

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
fn same_types(
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

/// The text of a caught panic.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into())
}

mod pipelined;
pub mod rows;
pub use pipelined::PipelinedDigester;

/// A small seeded PRNG (xorshift64*) for the property and fuzz tests:
/// reproducible, and no new dependency.
#[cfg(test)]
pub(crate) struct TestRng(pub(crate) u64);

#[cfg(test)]
impl TestRng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// True one time in `n`.
    pub(crate) fn one_in(&mut self, n: usize) -> bool {
        self.below(n) == 0
    }
}

/// The number in environment variable `k`, else `default`: lets a person
/// run a bounded test longer or with another seed by hand.
#[cfg(test)]
pub(crate) fn env_or(k: &str, default: u64) -> u64 {
    std::env::var(k)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[cfg(test)]
mod property;

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::Int64Array;
    use arrow::datatypes::{DataType, Field};
    use std::sync::Arc;

    fn batch(v: Vec<i64>) -> RecordBatch {
        let s = Arc::new(Schema::new(vec![Field::new("a", DataType::Int64, false)]));
        RecordBatch::try_new(s, vec![Arc::new(Int64Array::from(v))]).unwrap()
    }

    #[test]
    fn sha256_matches_known_vector() {
        assert_eq!(
            Digest::of_bytes(b"abc").as_str(),
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
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

    #[test]
    fn parse_rejects_malformed() {
        assert!(Digest::parse("md5:abc").is_err());
        assert!(Digest::parse("sha256:xyz").is_err());
        let d = Digest::of_bytes(b"x");
        assert_eq!(Digest::parse(d.as_str()).unwrap(), d);
    }
}
