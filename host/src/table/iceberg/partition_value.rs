//! A slice's partition value (always text: `date=2026-10-01`) in the type
//! the table's identity partition column has: a string, or, in a table
//! another engine created with `date DATE` (or an integer `hour`), a date
//! or an integer. The data files get the typed column
//! ([`crate::table::datafile::typed_partition`]), the manifests the typed
//! literal, and a file's literal is matched by the text it reads as.

use arrow::array::{Array, AsArray, StringArray};
use arrow::compute::{CastOptions, cast, cast_with_options};
use arrow::datatypes::{DataType, Date32Type, Int32Type, Int64Type};
use iceberg::spec::{Literal, PrimitiveLiteral, PrimitiveType};

/// The partition source types idem writes a slice's value in.
pub(super) fn writable(t: &PrimitiveType) -> bool {
    matches!(
        t,
        PrimitiveType::String | PrimitiveType::Date | PrimitiveType::Int | PrimitiveType::Long
    )
}

/// The manifest literal of `value` in a column of arrow type `t` (the
/// table's type, after [`writable`]), or why not: a value that would not
/// read back as the same text is refused.
pub(super) fn literal(value: &str, t: &DataType) -> Result<Literal, String> {
    let strict = CastOptions {
        safe: false,
        ..Default::default()
    };
    let one = StringArray::from(vec![value]);
    let typed = cast_with_options(&one, t, &strict).map_err(|e| format!("is not one ({e})"))?;
    if typed.is_null(0) || text_of(&typed).as_deref() != Some(value) {
        return Err("would be stored as other text".into());
    }
    Ok(match t {
        DataType::Utf8 => Literal::string(value),
        DataType::Date32 => Literal::date(typed.as_primitive::<Date32Type>().value(0)),
        DataType::Int32 => Literal::int(typed.as_primitive::<Int32Type>().value(0)),
        DataType::Int64 => Literal::long(typed.as_primitive::<Int64Type>().value(0)),
        other => return Err(format!("is to be written as {other}, which idem does not")),
    })
}

/// Whether a data file's partition literal reads as the slice's `value`:
/// text as it is, an integer in decimal, a date (an `int` of days) as
/// `YYYY-MM-DD`. A date's text is never an integer's, so an `int`
/// literal matches one value whichever of the two the column is.
pub(super) fn holds(lit: Option<&Literal>, value: &str) -> bool {
    match lit {
        Some(Literal::Primitive(PrimitiveLiteral::String(s))) => s == value,
        Some(Literal::Primitive(PrimitiveLiteral::Long(n))) => n.to_string() == value,
        Some(Literal::Primitive(PrimitiveLiteral::Int(n))) => {
            n.to_string() == value
                || text_of(&arrow::array::Date32Array::from(vec![*n])).as_deref() == Some(value)
        }
        _ => false,
    }
}

/// Whether a data file's partition literal is the slice's `value` in a
/// column of type `t` exactly (a read selecting a partition: `20727` is
/// not a date's spelling, though its literal is 2026-10-01's).
pub(super) fn is(lit: Option<&Literal>, value: &str, t: &PrimitiveType) -> bool {
    let arrow = match t {
        PrimitiveType::Date => DataType::Date32,
        PrimitiveType::Int => DataType::Int32,
        PrimitiveType::Long => DataType::Int64,
        _ => DataType::Utf8,
    };
    lit.is_some_and(|lit| literal(value, &arrow).is_ok_and(|want| &want == lit))
}

/// The text one value reads as (arrow's cast, as the round trip checks).
fn text_of(a: &dyn Array) -> Option<String> {
    let text = cast(a, &DataType::Utf8).ok()?;
    let text = text.as_string::<i32>();
    (!text.is_null(0)).then(|| text.value(0).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_is_written_in_the_columns_type_and_matched_by_its_text() {
        let date = literal("2026-10-01", &DataType::Date32).unwrap();
        assert_eq!(date, Literal::date(20727));
        assert!(holds(Some(&date), "2026-10-01"));
        assert!(!holds(Some(&date), "2026-10-02"));
        let hour = literal("7", &DataType::Int32).unwrap();
        assert!(holds(Some(&hour), "7") && !holds(Some(&hour), "07"));
        let long = literal("123", &DataType::Int64).unwrap();
        assert!(holds(Some(&long), "123"));
        let text = literal("07", &DataType::Utf8).unwrap();
        assert!(holds(Some(&text), "07") && !holds(None, "07"));
        // A read selecting a partition takes the column's type.
        assert!(is(Some(&date), "2026-10-01", &PrimitiveType::Date));
        assert!(!is(Some(&date), "20727", &PrimitiveType::Date));
        assert!(is(Some(&hour), "7", &PrimitiveType::Int));
        assert!(!is(Some(&hour), "1970-01-08", &PrimitiveType::Int));
        // A value that is not one, or would be stored as other text.
        assert!(literal("not-a-date", &DataType::Date32).is_err());
        assert!(
            literal("07", &DataType::Int32)
                .unwrap_err()
                .contains("other text")
        );
        assert!(literal("2026-1-1", &DataType::Date32).is_err());
    }
}
