//! `audit_totals`: an audit module for write-audit-publish (`idem run
//! --audit-module`). It reads a run's staged output (clean_orders' rows)
//! and passes only when every non-null `total` is at most the `max_total`
//! audit param (a number; absent: no limit) and not negative. It takes no
//! other param: a misspelled one fails the audit run, naming it.
//!
//! An audit module is an ordinary transform; its output is the verdict:
//! rows with a boolean `pass` and a text `reason`. The run publishes only
//! when there is at least one row and every `pass` is true.

use std::sync::Arc;

use idem_guest::arrow::array::{AsArray, BooleanArray, RecordBatch, StringArray};
use idem_guest::arrow::datatypes::{DataType, Field, Float64Type, Schema};
use idem_guest::{Context, Param, Result, Transform};

/// Counts the rows outside the bounds and keeps the first one.
#[derive(Default)]
pub struct AuditTotals {
    max_total: Option<f64>,
    rows: u64,
    bad: u64,
    first_bad: Option<f64>,
}

impl Transform for AuditTotals {
    fn params() -> Option<Vec<Param>> {
        Some(vec![
            Param::number("max_total").doc("largest total that passes (absent: no limit)"),
        ])
    }

    fn open(&mut self, ctx: &Context) -> Result<()> {
        self.max_total = ctx.param_f64("max_total")?;
        Ok(())
    }

    fn push(&mut self, batch: RecordBatch) -> Result<Option<RecordBatch>> {
        self.rows += batch.num_rows() as u64;
        let total = batch
            .column_by_name("total")
            .ok_or("the audited output has no `total` column")?
            .as_primitive_opt::<Float64Type>()
            .ok_or("`total` must be float64")?;
        let max = self.max_total.unwrap_or(f64::INFINITY);
        for t in total.iter().flatten() {
            if !(0.0..=max).contains(&t) {
                self.bad += 1;
                self.first_bad.get_or_insert(t);
            }
        }
        Ok(None)
    }

    fn finish(&mut self) -> Result<Option<RecordBatch>> {
        let (pass, reason) = match self.first_bad {
            None => (true, format!("all {} totals within bounds", self.rows)),
            Some(t) => (
                false,
                format!(
                    "{} of {} totals outside [0, {}] (e.g. {t})",
                    self.bad,
                    self.rows,
                    self.max_total.unwrap_or(f64::INFINITY)
                ),
            ),
        };
        let schema = Arc::new(Schema::new(vec![
            Field::new("pass", DataType::Boolean, false),
            Field::new("reason", DataType::Utf8, false),
        ]));
        Ok(Some(RecordBatch::try_new(
            schema,
            vec![
                Arc::new(BooleanArray::from(vec![pass])),
                Arc::new(StringArray::from(vec![reason])),
            ],
        )?))
    }
}

idem_guest::export!(AuditTotals);

#[cfg(test)]
mod tests {
    use super::*;
    use idem_guest::arrow::array::Float64Array;
    use idem_guest::{native, serde_json};

    fn input() -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![Field::new(
            "total",
            DataType::Float64,
            true,
        )]));
        RecordBatch::try_new(
            schema,
            vec![Arc::new(Float64Array::from(vec![
                Some(5.0),
                None,
                Some(50.0),
            ]))],
        )
        .unwrap()
    }

    fn verdict(params: serde_json::Value) -> (bool, String) {
        let ctx = Context {
            slice_id: "t".into(),
            logical_date: None,
            params,
            input_schema: input().schema(),
            batch_rows: 8,
            side_inputs: Default::default(),
        };
        let out = native::run::<AuditTotals>(&ctx, [input()]).unwrap();
        let b = &out[0];
        (
            b.column(0).as_boolean().value(0),
            b.column(1).as_string::<i32>().value(0).to_string(),
        )
    }

    #[test]
    fn passes_within_bounds_and_fails_outside() {
        assert!(verdict(serde_json::json!({})).0);
        let (pass, reason) = verdict(serde_json::json!({"max_total": 10}));
        assert!(!pass);
        assert_eq!(reason, "1 of 3 totals outside [0, 10] (e.g. 50)");
    }
}
