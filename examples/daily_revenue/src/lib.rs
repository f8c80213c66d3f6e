//! `daily_revenue`: a group-by aggregate emitted in `finish`. For every
//! customer in the slice: order count and revenue (sum of `amount *
//! quantity`, null amounts skipped), tagged with the day (the logical date,
//! or the slice id when the scheduler gave none). Rows come out sorted by
//! customer (sorted in `finish`, never hash order), so every build emits
//! the same. A hash map, not a BTreeMap: in wasm, memcmp is a byte loop and
//! a tree lookup's ~10 string compares were 60% of the run (perf). It takes
//! `customer` dictionary-encoded: each batch's distinct customers are
//! looked up once, and every row then adds to its group by an integer.

use std::collections::HashMap;
use std::sync::Arc;

use idem_guest::arrow::array::{
    Array, AsArray, Float64Array, Int64Array, RecordBatch, StringArray,
};
use idem_guest::arrow::buffer::NullBuffer;
use idem_guest::arrow::datatypes::{DataType, Field, Float64Type, Int32Type, Int64Type, Schema};
use idem_guest::{Context, Error, Result, Transform};

/// Running totals per customer.
#[derive(Default)]
pub struct DailyRevenue {
    day: String,
    /// Customer -> index into `totals`. FxHash: SipHash (std's default) was
    /// most of this transform's time on short keys; order never shows
    /// (groups are sorted in `finish`).
    groups: HashMap<String, u32, rustc_hash::FxBuildHasher>,
    /// (orders, revenue) per group.
    totals: Vec<(i64, f64)>,
}

impl DailyRevenue {
    /// The group of `customer`, created on first sight.
    fn group(&mut self, customer: &str) -> u32 {
        if let Some(&g) = self.groups.get(customer) {
            return g;
        }
        let g = self.totals.len() as u32;
        // -0.0, the identity of addition: a group whose every value is
        // -0.0 sums to -0.0 (+0.0 + -0.0 would be +0.0), as the JS and
        // Python versions do.
        self.totals.push((0, -0.0));
        self.groups.insert(customer.to_string(), g);
        g
    }
}

impl Transform for DailyRevenue {
    fn open(&mut self, ctx: &Context) -> Result<()> {
        self.day = ctx
            .logical_date
            .clone()
            .unwrap_or_else(|| ctx.slice_id.clone());
        for (col, ty) in [
            ("customer", DataType::Utf8),
            ("amount", DataType::Float64),
            ("quantity", DataType::Int64),
        ] {
            let f = ctx
                .input_schema
                .field_with_name(col)
                .map_err(|_| Error(format!("input has no `{col}` column")))?;
            if f.data_type() != &ty {
                return Err(Error(format!(
                    "column `{col}` must be {ty}, not {}",
                    f.data_type()
                )));
            }
        }
        Ok(())
    }

    /// Three of the input's columns: the host decodes only those.
    fn columns(&self) -> Option<Vec<String>> {
        Some(vec!["customer".into(), "amount".into(), "quantity".into()])
    }

    /// A few thousand customers over millions of rows: taken as a
    /// dictionary, straight from Parquet's dictionary pages.
    fn dictionary_columns(&self) -> Vec<String> {
        vec!["customer".into()]
    }

    fn push(&mut self, batch: RecordBatch) -> Result<Option<RecordBatch>> {
        let col = |n: &str| {
            batch
                .column_by_name(n)
                .ok_or_else(|| Error(format!("batch has no `{n}` column")))
        };
        let customer = col("customer")?
            .as_dictionary_opt::<Int32Type>()
            .ok_or_else(|| Error("`customer` must arrive dictionary-encoded".into()))?
            .clone();
        let names = customer.values().as_string::<i32>().clone();
        let amount = col("amount")?.as_primitive::<Float64Type>().clone();
        let quantity = col("quantity")?.as_primitive::<Int64Type>().clone();
        // Rows with a null customer, amount or quantity are skipped: one
        // bitmap for the three, tested once per row (none when no nulls).
        let valid = NullBuffer::union(
            NullBuffer::union(customer.keys().nulls(), amount.nulls()).as_ref(),
            quantity.nulls(),
        );
        // The group of each dictionary value, looked up when first used.
        let mut group_of = vec![u32::MAX; names.len()];
        let rows = customer
            .keys()
            .values()
            .iter()
            .zip(amount.values().iter().zip(quantity.values().iter()));
        for (i, (&k, (&a, &q))) in rows.enumerate() {
            if valid.as_ref().is_some_and(|v| v.is_null(i)) {
                continue;
            }
            let k = k as usize;
            let mut g = group_of[k];
            if g == u32::MAX {
                if names.is_null(k) {
                    continue;
                }
                g = self.group(names.value(k));
                group_of[k] = g;
            }
            let t = &mut self.totals[g as usize];
            t.0 += 1;
            t.1 += a * q as f64;
        }
        Ok(None)
    }

    fn finish(&mut self) -> Result<Option<RecordBatch>> {
        let schema = Arc::new(Schema::new(vec![
            Field::new("day", DataType::Utf8, false),
            Field::new("customer", DataType::Utf8, false),
            Field::new("orders", DataType::Int64, false),
            Field::new("revenue", DataType::Float64, false),
        ]));
        let n = self.groups.len();
        let totals = std::mem::take(&mut self.totals);
        let mut groups: Vec<(String, (i64, f64))> = std::mem::take(&mut self.groups)
            .into_iter()
            .map(|(c, g)| (c, totals[g as usize]))
            .collect();
        groups.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let batch = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(StringArray::from(vec![self.day.as_str(); n])),
                Arc::new(StringArray::from_iter_values(groups.iter().map(|g| &g.0))),
                Arc::new(Int64Array::from_iter_values(groups.iter().map(|g| g.1.0))),
                Arc::new(Float64Array::from_iter_values(groups.iter().map(|g| g.1.1))),
            ],
        )?;
        Ok(Some(batch))
    }
}

idem_guest::export!(DailyRevenue);

#[cfg(test)]
mod tests {
    use super::*;
    use idem_guest::{native, serde_json};

    fn batch(rows: &[(&str, Option<f64>, i64)]) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("customer", DataType::Utf8, false),
            Field::new("amount", DataType::Float64, true),
            Field::new("quantity", DataType::Int64, false),
        ]));
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.0))),
                Arc::new(Float64Array::from(
                    rows.iter().map(|r| r.1).collect::<Vec<_>>(),
                )),
                Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.2))),
            ],
        )
        .unwrap()
    }

    #[test]
    fn aggregates_across_batches_sorted_by_customer() {
        let b1 = batch(&[("zed", Some(2.0), 3), ("amy", Some(1.5), 2)]);
        let b2 = batch(&[("amy", Some(10.0), 1), ("zed", None, 1)]);
        let ctx = Context {
            slice_id: "date=2026-10-01".into(),
            logical_date: Some("2026-10-01".into()),
            params: serde_json::json!({}),
            input_schema: b1.schema(),
            batch_rows: 2,
            side_inputs: Default::default(),
        };
        let out = native::run::<DailyRevenue>(&ctx, [b1, b2]).unwrap();
        assert_eq!(out.len(), 1);
        let b = &out[0];
        let cust: Vec<&str> = b.column(1).as_string::<i32>().iter().flatten().collect();
        assert_eq!(cust, vec!["amy", "zed"]);
        assert_eq!(
            b.column(2).as_primitive::<Int64Type>().values().to_vec(),
            vec![2, 1]
        );
        assert_eq!(
            b.column(3).as_primitive::<Float64Type>().values().to_vec(),
            vec![13.0, 6.0]
        );
        assert_eq!(b.column(0).as_string::<i32>().value(0), "2026-10-01");
    }

    /// A group whose only value is -0.0 sums to -0.0, bit for bit (the
    /// digest hashes the bits; the JS and Python versions give -0.0).
    #[test]
    fn a_sum_of_negative_zeros_stays_negative_zero() {
        let b1 = batch(&[("neg", Some(0.0), -3), ("pos", Some(0.0), 3)]);
        let ctx = Context {
            slice_id: "s".into(),
            logical_date: None,
            params: serde_json::json!({}),
            input_schema: b1.schema(),
            batch_rows: 2,
            side_inputs: Default::default(),
        };
        let out = native::run::<DailyRevenue>(&ctx, [b1]).unwrap();
        let rev = out[0].column(3).as_primitive::<Float64Type>();
        assert_eq!(rev.value(0).to_bits(), (-0.0f64).to_bits(), "neg");
        assert_eq!(rev.value(1).to_bits(), 0.0f64.to_bits(), "pos");
    }
}
