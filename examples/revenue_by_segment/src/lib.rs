//! `revenue_by_segment`: a join with a side input. The slice's orders
//! (`customer`, `amount`, `quantity`) joined with the customer dimension
//! the run gives as side input `customers` (`customer`, `segment`), read
//! whole before the first batch: orders and revenue (sum of `amount *
//! quantity`, null amounts skipped) per segment for the day. A customer
//! the dimension does not list is in segment `unknown`; a dimension that
//! lists a customer twice fails the run, naming it (a join must not
//! depend on which row wins). Rows come out sorted by segment.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use idem_guest::arrow::array::{
    Array, ArrayRef, AsArray, Float64Array, Int64Array, RecordBatch, StringArray,
};
use idem_guest::arrow::compute::cast;
use idem_guest::arrow::datatypes::{DataType, Field, Float64Type, Int64Type, Schema};
use idem_guest::{Context, Error, Result, Transform};

/// The segment of every customer the dimension lists, and the totals.
#[derive(Default)]
pub struct RevenueBySegment {
    day: String,
    segment_of: HashMap<String, String>,
    /// (orders, revenue) per segment, in segment order.
    totals: BTreeMap<String, (i64, f64)>,
}

/// Column `name` of `batch` as text (whatever string type its writer
/// chose), or an error naming it and where it was looked for.
fn text_column(batch: &RecordBatch, name: &str, of: &str) -> Result<StringArray> {
    let col = batch
        .column_by_name(name)
        .ok_or_else(|| Error(format!("{of} has no column `{name}`")))?;
    let col: ArrayRef = cast(col, &DataType::Utf8)
        .map_err(|e| Error(format!("{of}'s column `{name}` is not text: {e}")))?;
    Ok(col.as_string::<i32>().clone())
}

impl Transform for RevenueBySegment {
    fn open(&mut self, ctx: &Context) -> Result<()> {
        self.day = ctx
            .logical_date
            .clone()
            .unwrap_or_else(|| ctx.slice_id.clone());
        let dim = ctx.side_input("customers")?;
        let of = "side input `customers`";
        let customers = text_column(&dim, "customer", of)?;
        let segments = text_column(&dim, "segment", of)?;
        for i in 0..dim.num_rows() {
            if customers.is_null(i) {
                continue;
            }
            let segment = match segments.is_null(i) {
                true => "unknown",
                false => segments.value(i),
            };
            let customer = customers.value(i);
            if self
                .segment_of
                .insert(customer.to_string(), segment.to_string())
                .is_some()
            {
                return Err(Error(format!(
                    "{of} lists customer `{customer}` twice: a dimension has one row per key"
                )));
            }
        }
        Ok(())
    }

    fn columns(&self) -> Option<Vec<String>> {
        Some(vec!["customer".into(), "amount".into(), "quantity".into()])
    }

    fn push(&mut self, batch: RecordBatch) -> Result<Option<RecordBatch>> {
        let customers = text_column(&batch, "customer", "the input")?;
        let amounts = cast(batch.column(1), &DataType::Float64)?;
        let amounts = amounts.as_primitive::<Float64Type>();
        let quantities = cast(batch.column(2), &DataType::Int64)?;
        let quantities = quantities.as_primitive::<Int64Type>();
        for i in 0..batch.num_rows() {
            let segment = match customers.is_null(i) {
                true => None,
                false => self.segment_of.get(customers.value(i)),
            };
            let segment = segment.map_or("unknown", String::as_str);
            let t = match self.totals.get_mut(segment) {
                Some(t) => t,
                None => self.totals.entry(segment.to_string()).or_insert((0, 0.0)),
            };
            t.0 += 1;
            if !amounts.is_null(i) && !quantities.is_null(i) {
                t.1 += amounts.value(i) * quantities.value(i) as f64;
            }
        }
        Ok(None)
    }

    fn finish(&mut self) -> Result<Option<RecordBatch>> {
        let schema = Arc::new(Schema::new(vec![
            Field::new("day", DataType::Utf8, false),
            Field::new("segment", DataType::Utf8, false),
            Field::new("orders", DataType::Int64, false),
            Field::new("revenue", DataType::Float64, false),
        ]));
        let n = self.totals.len();
        let day = StringArray::from(vec![self.day.as_str(); n]);
        let segment: StringArray = self.totals.keys().map(|s| Some(s.as_str())).collect();
        let orders: Int64Array = self.totals.values().map(|t| t.0).collect();
        let revenue: Float64Array = self.totals.values().map(|t| t.1).collect();
        let columns: Vec<ArrayRef> = vec![
            Arc::new(day),
            Arc::new(segment),
            Arc::new(orders),
            Arc::new(revenue),
        ];
        Ok(Some(RecordBatch::try_new(schema, columns)?))
    }
}

idem_guest::export!(RevenueBySegment);

#[cfg(test)]
mod tests {
    use super::*;
    use idem_guest::{SideInputs, native, serde_json};

    fn batch(columns: Vec<(&str, ArrayRef)>) -> RecordBatch {
        RecordBatch::try_from_iter(columns).unwrap()
    }

    fn orders() -> RecordBatch {
        batch(vec![
            (
                "customer",
                Arc::new(StringArray::from(vec!["a", "b", "c", "a"])),
            ),
            (
                "amount",
                Arc::new(Float64Array::from(vec![
                    Some(1.0),
                    Some(2.0),
                    None,
                    Some(4.0),
                ])),
            ),
            ("quantity", Arc::new(Int64Array::from(vec![1, 2, 3, 1]))),
        ])
    }

    fn ctx(customers: Vec<&str>, segments: Vec<&str>) -> Context {
        let mut sides = SideInputs::default();
        let dim = batch(vec![
            ("customer", Arc::new(StringArray::from(customers))),
            ("segment", Arc::new(StringArray::from(segments))),
        ]);
        sides.push("customers", dim).unwrap();
        Context {
            slice_id: "date=2026-10-01".into(),
            logical_date: None,
            params: serde_json::json!({}),
            input_schema: orders().schema(),
            batch_rows: 2,
            side_inputs: sides,
        }
    }

    #[test]
    fn joins_each_order_with_its_segment_and_names_the_unknown() {
        let out = native::run::<RevenueBySegment>(&ctx(vec!["a", "b"], vec!["x", "y"]), [orders()])
            .unwrap();
        let b = &out[0];
        let seg = b.column(1).as_string::<i32>();
        let rev = b.column(3).as_primitive::<Float64Type>();
        let got: Vec<(&str, f64)> = (0..b.num_rows())
            .map(|i| (seg.value(i), rev.value(i)))
            .collect();
        assert_eq!(got, [("unknown", 0.0), ("x", 5.0), ("y", 4.0)]);
    }

    #[test]
    fn a_dimension_listing_a_customer_twice_fails_naming_it() {
        let e = native::run::<RevenueBySegment>(&ctx(vec!["a", "a"], vec!["x", "y"]), [orders()])
            .unwrap_err();
        assert!(e.0.contains("customer `a` twice"), "{}", e.0);
    }

    #[test]
    fn a_run_without_the_side_input_is_told_how_to_give_it() {
        let mut c = ctx(vec![], vec![]);
        c.side_inputs = SideInputs::default();
        let e = native::run::<RevenueBySegment>(&c, [orders()]).unwrap_err();
        assert!(e.0.contains("--side customers=TABLE"), "{}", e.0);
    }
}
