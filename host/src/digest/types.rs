//! Which column types idem can digest (refused, naming the column, before
//! any digest code runs), and which of them arrow-digest digests soundly.

use arrow::datatypes::{DataType, Schema};

use super::error::DigestError;

/// Deepest type nesting idem digests.
const MAX_NESTING: usize = 64;

/// Check that every column of `schema` can be digested, naming the first
/// one that cannot and what to do about it. [`OutputDigester`](crate::digest::OutputDigester) runs this on
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
pub(super) fn arrow_digest_sound(dt: &DataType) -> bool {
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
