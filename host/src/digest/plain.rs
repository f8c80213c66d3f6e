//! Dictionaries expanded: a dictionary-encoded column digests like the
//! plain column of the same values.

use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, FixedSizeListArray, LargeListArray, ListArray, MapArray, StructArray,
};
use arrow::datatypes::{DataType, FieldRef};
use arrow::error::ArrowError;

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
pub(super) fn plain_type(dt: &DataType) -> DataType {
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
pub(super) fn plain_array(array: &ArrayRef) -> Result<ArrayRef, ArrowError> {
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
