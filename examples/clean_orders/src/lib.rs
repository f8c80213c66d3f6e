//! `clean_orders`: a stateless transform. Keeps orders whose `amount` is at
//! least the `min_amount` parameter (rows with a null amount are dropped) and
//! adds a derived column `total = amount * quantity`.
//!
//! Params: `{"min_amount": 10.0}` (a number, default 0), declared in
//! [`Transform::params`]: any other key (a typo such as `min_amont`) or a
//! value that is not a number fails the run, naming it.

use std::sync::Arc;

use idem_guest::arrow::array::{ArrayRef, AsArray, BooleanArray, Float64Array, RecordBatch};
use idem_guest::arrow::compute::binary;
use idem_guest::arrow::compute::filter_record_batch;
use idem_guest::arrow::datatypes::{DataType, Field, Float64Type, Int64Type, Schema, SchemaRef};
use idem_guest::{Context, Error, Param, Result, Transform};

/// State: only the parameters and the output schema.
#[derive(Default)]
pub struct CleanOrders {
    min_amount: f64,
    schema: Option<SchemaRef>,
}

/// `min_amount` when the params do not give it.
const MIN_AMOUNT: f64 = 0.0;

impl Transform for CleanOrders {
    fn params() -> Option<Vec<Param>> {
        Some(vec![
            Param::number("min_amount")
                .default(MIN_AMOUNT)
                .doc("orders below this amount are dropped"),
        ])
    }

    fn open(&mut self, ctx: &Context) -> Result<()> {
        // The SDK fills the default in; a runner that calls `open` directly
        // (the host's native baseline) may not.
        self.min_amount = ctx.param_f64("min_amount")?.unwrap_or(MIN_AMOUNT);
        let input = &ctx.input_schema;
        for (col, ty) in [("amount", DataType::Float64), ("quantity", DataType::Int64)] {
            match input.field_with_name(col) {
                Ok(f) if f.data_type() == &ty => {}
                Ok(f) => {
                    return Err(Error(format!(
                        "column `{col}` must be {ty}, the input has {}",
                        f.data_type()
                    )));
                }
                Err(_) => return Err(Error(format!("input has no `{col}` column"))),
            }
        }
        let mut fields: Vec<Field> = input.fields().iter().map(|f| f.as_ref().clone()).collect();
        fields.push(Field::new("total", DataType::Float64, true));
        self.schema = Some(Arc::new(Schema::new(fields)));
        Ok(())
    }

    fn push(&mut self, batch: RecordBatch) -> Result<Option<RecordBatch>> {
        let schema = self.schema.clone().ok_or("push before open")?;
        // Typed kernels, not the dyn ones (`cmp`, `cast`, `numeric`): those
        // compile every type's code into the module (9 MB instead of ~3 MB),
        // which the host must then compile and load.
        let amount = batch
            .column_by_name("amount")
            .ok_or("no `amount` column")?
            .as_primitive::<Float64Type>();
        let min = self.min_amount;
        // Null amounts compare as null, which the filter drops.
        let keep: BooleanArray = amount.iter().map(|a| a.map(|a| a >= min)).collect();
        let kept = filter_record_batch(&batch, &keep)?;
        if kept.num_rows() == 0 {
            // No rows, but the schema: an all-filtered slice still commits
            // (and empties its rows in the table).
            return Ok(Some(RecordBatch::new_empty(schema)));
        }
        let amount = kept
            .column_by_name("amount")
            .ok_or("no `amount` column")?
            .as_primitive::<Float64Type>();
        let quantity = kept
            .column_by_name("quantity")
            .ok_or("no `quantity` column")?
            .as_primitive::<Int64Type>();
        let total: Float64Array = binary(amount, quantity, |a, q| a * q as f64)?;
        let mut columns: Vec<ArrayRef> = kept.columns().to_vec();
        columns.push(Arc::new(total));
        Ok(Some(RecordBatch::try_new(schema, columns)?))
    }
}

idem_guest::export!(CleanOrders);

#[cfg(test)]
mod tests {
    use super::*;
    use idem_guest::arrow::array::{Int64Array, StringArray};
    use idem_guest::native;

    fn input() -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("customer", DataType::Utf8, false),
            Field::new("amount", DataType::Float64, true),
            Field::new("quantity", DataType::Int64, false),
        ]));
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(StringArray::from(vec!["a", "b", "c", "d"])),
                Arc::new(Float64Array::from(vec![
                    Some(5.0),
                    Some(20.0),
                    None,
                    Some(10.0),
                ])),
                Arc::new(Int64Array::from(vec![1, 3, 1, 2])),
            ],
        )
        .unwrap()
    }

    fn ctx(params: serde_json::Value) -> Context {
        Context {
            slice_id: "test".into(),
            logical_date: None,
            params,
            input_schema: input().schema(),
            batch_rows: 4,
            side_inputs: Default::default(),
        }
    }

    use idem_guest::serde_json;

    #[test]
    fn filters_by_min_amount_and_adds_total() {
        let out =
            native::run::<CleanOrders>(&ctx(serde_json::json!({"min_amount": 10})), [input()])
                .unwrap();
        assert_eq!(out.len(), 1);
        let b = &out[0];
        let customers = b
            .column_by_name("customer")
            .unwrap()
            .as_any()
            .downcast_ref::<StringArray>()
            .unwrap();
        assert_eq!(
            customers.iter().flatten().collect::<Vec<_>>(),
            vec!["b", "d"]
        );
        let total = b
            .column_by_name("total")
            .unwrap()
            .as_any()
            .downcast_ref::<Float64Array>()
            .unwrap();
        assert_eq!(total.values().to_vec(), vec![60.0, 20.0]);
    }

    #[test]
    fn null_amounts_are_dropped_even_without_threshold() {
        let out = native::run::<CleanOrders>(&ctx(serde_json::json!({})), [input()]).unwrap();
        assert_eq!(out[0].num_rows(), 3);
    }

    #[test]
    fn wrong_param_type_is_a_clear_error() {
        let err =
            native::run::<CleanOrders>(&ctx(serde_json::json!({"min_amount": "ten"})), [input()])
                .unwrap_err();
        assert!(err.0.contains("min_amount"), "{err}");
    }

    #[test]
    fn a_misspelled_param_is_refused_with_a_suggestion() {
        let err = native::run::<CleanOrders>(&ctx(serde_json::json!({"min_amont": 10})), [input()])
            .unwrap_err();
        assert!(
            err.0
                .contains("unknown parameter `min_amont` (did you mean `min_amount`?)"),
            "{err}"
        );
    }
}
