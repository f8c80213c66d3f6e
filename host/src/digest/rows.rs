//! idem's row encoding, version 1: the hash of a column that arrow-digest
//! cannot digest soundly. A function of the logical values alone, never of
//! batch boundaries, array offsets or what sits under a null.
//!
//! The column hash is sha256 of [`TAG`], a description of the type
//! ([`describe`]), then every row, in order:
//! - a null: `0x00`; a value: `0x01`, then
//! - fixed-width values (numbers, decimals, dates, times, timestamps,
//!   durations, intervals): their little-endian bytes;
//! - booleans: one byte, 0 or 1;
//! - strings and binary (any offset width, views, fixed size): u64 LE
//!   length, then the bytes;
//! - lists (any kind) and maps: u64 LE count, then each element; a map
//!   entry is its key then its value;
//! - structs: each child in field order.
//!
//! Changing any of this changes digests: bump [`TAG`] when you do.

use arrow::array::{
    Array, AsArray, BinaryArray, BinaryViewArray, BooleanArray, FixedSizeBinaryArray,
    LargeBinaryArray, LargeStringArray, StringArray, StringViewArray,
};
use arrow::buffer::{Buffer, NullBuffer, OffsetBuffer};
use arrow::datatypes::{DataType, IntervalUnit, TimeUnit};
use sha2::{Digest as _, Sha256};

/// Names the encoding inside every column hash.
pub const TAG: &[u8] = b"idem-rows-v1\0";

/// Append the type description: one tag byte per type with its
/// parameters; struct field names are part of it, list item and map
/// entry names and nullability are not (writers disagree on them).
pub fn describe(dt: &DataType, out: &mut Vec<u8>) {
    match dt {
        DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _) => {
            out.push(14);
            describe(f.data_type(), out);
        }
        DataType::Struct(fields) => {
            out.push(15);
            out.extend((fields.len() as u64).to_le_bytes());
            for f in fields {
                name(out, f.name());
                describe(f.data_type(), out);
            }
        }
        DataType::Map(entries, _) => {
            out.push(16);
            if let DataType::Struct(kv) = entries.data_type() {
                for f in kv {
                    describe(f.data_type(), out);
                }
            }
        }
        other => describe_flat(other, out),
    }
}

/// [`describe`] for a type without children.
fn describe_flat(dt: &DataType, out: &mut Vec<u8>) {
    match dt {
        DataType::Null => out.push(1),
        DataType::Boolean => out.push(2),
        DataType::Int8 => out.extend([3, 8, 1]),
        DataType::Int16 => out.extend([3, 16, 1]),
        DataType::Int32 => out.extend([3, 32, 1]),
        DataType::Int64 => out.extend([3, 64, 1]),
        DataType::UInt8 => out.extend([3, 8, 0]),
        DataType::UInt16 => out.extend([3, 16, 0]),
        DataType::UInt32 => out.extend([3, 32, 0]),
        DataType::UInt64 => out.extend([3, 64, 0]),
        DataType::Float16 => out.extend([4, 16]),
        DataType::Float32 => out.extend([4, 32]),
        DataType::Float64 => out.extend([4, 64]),
        DataType::Decimal32(p, s) => decimal(out, 32, *p, *s),
        DataType::Decimal64(p, s) => decimal(out, 64, *p, *s),
        DataType::Decimal128(p, s) => decimal(out, 128, *p, *s),
        DataType::Decimal256(p, s) => decimal(out, 256, *p, *s),
        DataType::Date32 => out.push(6),
        DataType::Date64 => out.push(7),
        DataType::Time32(u) => out.extend([8, 32, unit(u)]),
        DataType::Time64(u) => out.extend([8, 64, unit(u)]),
        DataType::Timestamp(u, tz) => {
            out.extend([9, unit(u)]);
            match tz {
                None => out.push(0),
                Some(tz) => {
                    out.push(1);
                    name(out, tz);
                }
            }
        }
        DataType::Duration(u) => out.extend([10, unit(u)]),
        DataType::Interval(u) => out.extend([
            11,
            match u {
                IntervalUnit::YearMonth => 0,
                IntervalUnit::DayTime => 1,
                IntervalUnit::MonthDayNano => 2,
            },
        ]),
        DataType::Binary
        | DataType::LargeBinary
        | DataType::BinaryView
        | DataType::FixedSizeBinary(_) => out.push(12),
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => out.push(13),
        // Refused by check_schema before a plan exists.
        other => {
            out.push(0xff);
            name(out, &other.to_string());
        }
    }
}

/// A time unit's byte in a type description.
fn unit(u: &TimeUnit) -> u8 {
    match u {
        TimeUnit::Second => 0,
        TimeUnit::Millisecond => 1,
        TimeUnit::Microsecond => 2,
        TimeUnit::Nanosecond => 3,
    }
}

/// A decimal's description: its width in bits, precision and scale.
fn decimal(out: &mut Vec<u8>, bits: u16, p: u8, s: i8) {
    out.push(5);
    out.extend(bits.to_le_bytes());
    out.push(p);
    out.extend(s.to_le_bytes());
}

/// A name in a type description: u64 LE length, then its bytes.
fn name(out: &mut Vec<u8>, n: &str) {
    out.extend((n.len() as u64).to_le_bytes());
    out.extend(n.as_bytes());
}

/// Hash every row of `array` (already without dictionaries) into `h`.
pub(super) fn update(h: &mut Sha256, array: &dyn Array) -> Result<(), String> {
    let rows = Rows::new(array)?;
    let mut out = Sink {
        h,
        buf: Vec::with_capacity(SINK_BYTES),
    };
    for i in 0..array.len() {
        rows.encode(i, &mut out)?;
    }
    out.flush();
    Ok(())
}

const SINK_BYTES: usize = 64 << 10;

/// Batches the many small writes of the encoding into the hasher.
struct Sink<'h> {
    h: &'h mut Sha256,
    buf: Vec<u8>,
}

impl Sink<'_> {
    fn put(&mut self, b: &[u8]) {
        self.buf.extend_from_slice(b);
        if self.buf.len() >= SINK_BYTES {
            self.h.update(&self.buf);
            self.buf.clear();
        }
    }

    fn bytes(&mut self, b: &[u8]) {
        self.put(&(b.len() as u64).to_le_bytes());
        self.put(b);
    }

    fn flush(self) {
        self.h.update(&self.buf);
    }
}

enum Offsets {
    I32(OffsetBuffer<i32>),
    I64(OffsetBuffer<i64>),
    Fixed(usize),
}

impl Offsets {
    /// The child range of list `i`.
    fn range(&self, i: usize) -> Option<(usize, usize)> {
        let (s, e) = match self {
            Offsets::I32(o) => (
                usize::try_from(*o.get(i)?).ok()?,
                usize::try_from(*o.get(i + 1)?).ok()?,
            ),
            Offsets::I64(o) => (
                usize::try_from(*o.get(i)?).ok()?,
                usize::try_from(*o.get(i + 1)?).ok()?,
            ),
            Offsets::Fixed(n) => (i.checked_mul(*n)?, (i + 1).checked_mul(*n)?),
        };
        (s <= e).then_some((s, e))
    }
}

enum Kind {
    Null,
    Bool(BooleanArray),
    Fixed { values: Buffer, width: usize },
    Utf8(StringArray),
    LargeUtf8(LargeStringArray),
    Utf8View(StringViewArray),
    Binary(BinaryArray),
    LargeBinary(LargeBinaryArray),
    BinaryView(BinaryViewArray),
    FixedBinary(FixedSizeBinaryArray),
    List { offsets: Offsets, child: Box<Rows> },
    Struct(Vec<Rows>),
}

/// The error for an array whose buffers do not match its type.
fn mismatch(array: &dyn Array) -> String {
    format!("array does not match its type {}", array.data_type())
}

impl Kind {
    /// `array` downcast to what its type says it holds.
    fn of(array: &dyn Array) -> Result<Kind, String> {
        let mismatch = || mismatch(array);
        Ok(match array.data_type() {
            DataType::Null => Kind::Null,
            DataType::Boolean => Kind::Bool(array.as_boolean_opt().ok_or_else(mismatch)?.clone()),
            DataType::Utf8 => {
                Kind::Utf8(array.as_string_opt::<i32>().ok_or_else(mismatch)?.clone())
            }
            DataType::LargeUtf8 => {
                Kind::LargeUtf8(array.as_string_opt::<i64>().ok_or_else(mismatch)?.clone())
            }
            DataType::Utf8View => {
                Kind::Utf8View(array.as_string_view_opt().ok_or_else(mismatch)?.clone())
            }
            DataType::Binary => {
                Kind::Binary(array.as_binary_opt::<i32>().ok_or_else(mismatch)?.clone())
            }
            DataType::LargeBinary => {
                Kind::LargeBinary(array.as_binary_opt::<i64>().ok_or_else(mismatch)?.clone())
            }
            DataType::BinaryView => {
                Kind::BinaryView(array.as_binary_view_opt().ok_or_else(mismatch)?.clone())
            }
            DataType::FixedSizeBinary(_) => Kind::FixedBinary(
                array
                    .as_fixed_size_binary_opt()
                    .ok_or_else(mismatch)?
                    .clone(),
            ),
            DataType::List(_)
            | DataType::LargeList(_)
            | DataType::FixedSizeList(..)
            | DataType::Map(..) => Kind::list(array)?,
            DataType::Struct(_) => {
                let s = array.as_struct_opt().ok_or_else(mismatch)?;
                Kind::Struct(
                    s.columns()
                        .iter()
                        .map(|c| Rows::new(c.as_ref()))
                        .collect::<Result<_, _>>()?,
                )
            }
            dt => Kind::fixed(array, dt)?,
        })
    }

    /// A list, large list, fixed-size list or map: its offsets and its
    /// child (a map's entries).
    fn list(array: &dyn Array) -> Result<Kind, String> {
        let mismatch = || mismatch(array);
        let (offsets, child) = match array.data_type() {
            DataType::List(_) => {
                let l = array.as_list_opt::<i32>().ok_or_else(mismatch)?;
                (Offsets::I32(l.offsets().clone()), l.values().as_ref())
            }
            DataType::LargeList(_) => {
                let l = array.as_list_opt::<i64>().ok_or_else(mismatch)?;
                (Offsets::I64(l.offsets().clone()), l.values().as_ref())
            }
            DataType::FixedSizeList(_, n) => {
                let l = array.as_fixed_size_list_opt().ok_or_else(mismatch)?;
                let n = usize::try_from(*n).map_err(|_| mismatch())?;
                (Offsets::Fixed(n), l.values().as_ref())
            }
            DataType::Map(..) => {
                let m = array.as_map_opt().ok_or_else(mismatch)?;
                (Offsets::I32(m.offsets().clone()), m.entries() as &dyn Array)
            }
            _ => return Err(mismatch()),
        };
        Ok(Kind::List {
            offsets,
            child: Box::new(Rows::new(child)?),
        })
    }

    /// Fixed-width values: the bytes of the array's own range.
    fn fixed(array: &dyn Array, dt: &DataType) -> Result<Kind, String> {
        let mismatch = || mismatch(array);
        let width = dt
            .primitive_width()
            .ok_or_else(|| format!("type {dt} cannot be digested"))?;
        let data = array.to_data();
        let values = data.buffers().first().ok_or_else(mismatch)?;
        let start = data.offset().checked_mul(width).ok_or_else(mismatch)?;
        let len = data.len().checked_mul(width).ok_or_else(mismatch)?;
        if start.checked_add(len).is_none_or(|end| end > values.len()) {
            return Err(mismatch());
        }
        Ok(Kind::Fixed {
            values: values.slice_with_length(start, len),
            width,
        })
    }
}

/// One array, downcast once per batch, ready to encode row by row.
struct Rows {
    len: usize,
    nulls: Option<NullBuffer>,
    kind: Kind,
}

impl Rows {
    fn new(array: &dyn Array) -> Result<Rows, String> {
        let kind = Kind::of(array)?;
        Ok(Rows {
            len: array.len(),
            nulls: array.nulls().cloned(),
            kind,
        })
    }

    fn encode(&self, i: usize, out: &mut Sink<'_>) -> Result<(), String> {
        if i >= self.len {
            return Err(format!("row {i} past the end of a {}-row array", self.len));
        }
        if matches!(self.kind, Kind::Null) || self.nulls.as_ref().is_some_and(|n| n.is_null(i)) {
            out.put(&[0]);
            return Ok(());
        }
        out.put(&[1]);
        match &self.kind {
            Kind::Null => {}
            Kind::Bool(a) => out.put(&[u8::from(a.value(i))]),
            Kind::Fixed { values, width } => {
                let value = values
                    .get(i * width..(i + 1) * width)
                    .ok_or_else(|| format!("value {i} out of range"))?;
                out.put(value);
            }
            Kind::Utf8(a) => out.bytes(a.value(i).as_bytes()),
            Kind::LargeUtf8(a) => out.bytes(a.value(i).as_bytes()),
            Kind::Utf8View(a) => out.bytes(a.value(i).as_bytes()),
            Kind::Binary(a) => out.bytes(a.value(i)),
            Kind::LargeBinary(a) => out.bytes(a.value(i)),
            Kind::BinaryView(a) => out.bytes(a.value(i)),
            Kind::FixedBinary(a) => out.bytes(a.value(i)),
            Kind::List { offsets, child } => {
                let (start, end) = offsets
                    .range(i)
                    .ok_or_else(|| format!("list {i} has invalid offsets"))?;
                out.put(&((end - start) as u64).to_le_bytes());
                for j in start..end {
                    child.encode(j, out)?;
                }
            }
            Kind::Struct(children) => {
                for c in children {
                    c.encode(i, out)?;
                }
            }
        }
        Ok(())
    }
}
