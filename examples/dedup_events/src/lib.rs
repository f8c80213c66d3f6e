//! `dedup_events`: drops rows whose key (column `event_id` by default, or
//! the `key` parameter) was already seen earlier in the slice, across all
//! batches. Output keeps input order, so it is deterministic whatever the
//! hash set's iteration order.
//!
//! Params: `{"key": "event_id"}` (a string, default `event_id`), declared
//! in [`Transform::params`]. The key column may be Utf8 or Int64; null
//! keys are kept (they are not equal to anything).

use std::collections::HashSet;

use idem_guest::arrow::array::{Array, AsArray, BooleanArray, RecordBatch};
use idem_guest::arrow::compute::filter_record_batch;
use idem_guest::arrow::datatypes::{DataType, Int64Type};
use idem_guest::{Context, Error, Param, Result, Transform};

/// Keys seen so far in this slice.
#[derive(Default)]
pub struct DedupEvents {
    key: String,
    // Box<str>, not String: one word less per key (state is O(distinct keys)).
    seen_str: HashSet<Box<str>>,
    seen_int: HashSet<i64>,
}

/// The key column when the params do not name one.
const KEY: &str = "event_id";

impl Transform for DedupEvents {
    fn params() -> Option<Vec<Param>> {
        Some(vec![
            Param::string("key")
                .default(KEY)
                .doc("the column whose repeated values are dropped"),
        ])
    }

    fn open(&mut self, ctx: &Context) -> Result<()> {
        // The SDK fills the default in; a runner that calls `open` directly
        // (the host's native baseline) may not.
        self.key = ctx.param_str("key")?.unwrap_or(KEY).to_string();
        let field = ctx.input_schema.field_with_name(&self.key).map_err(|_| {
            Error(format!(
                "input has no key column `{}` (set the `key` parameter)",
                self.key
            ))
        })?;
        match field.data_type() {
            DataType::Utf8 | DataType::Int64 => Ok(()),
            other => Err(Error(format!(
                "key column `{}` must be Utf8 or Int64, not {other}",
                self.key
            ))),
        }
    }

    fn push(&mut self, batch: RecordBatch) -> Result<Option<RecordBatch>> {
        let col = batch
            .column_by_name(&self.key)
            .ok_or_else(|| Error(format!("batch has no key column `{}`", self.key)))?;
        let keep: BooleanArray = match col.data_type() {
            DataType::Utf8 => col
                .as_string::<i32>()
                .iter()
                .map(|k| {
                    Some(k.is_none_or(|k| {
                        !self.seen_str.contains(k) && self.seen_str.insert(k.into())
                    }))
                })
                .collect(),
            DataType::Int64 => col
                .as_primitive::<Int64Type>()
                .iter()
                .map(|k| Some(k.is_none_or(|k| self.seen_int.insert(k))))
                .collect(),
            other => return Err(Error(format!("key column has unsupported type {other}"))),
        };
        debug_assert_eq!(keep.len(), col.len());
        Ok(Some(filter_record_batch(&batch, &keep)?))
    }
}

idem_guest::export!(DedupEvents);

#[cfg(test)]
mod tests {
    use super::*;
    use idem_guest::arrow::array::{Int64Array, StringArray};
    use idem_guest::arrow::datatypes::{Field, Schema};
    use idem_guest::{native, serde_json};
    use std::sync::Arc;

    fn batch(ids: &[&str]) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("event_id", DataType::Utf8, true),
            Field::new("n", DataType::Int64, false),
        ]));
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(StringArray::from(ids.to_vec())),
                Arc::new(Int64Array::from_iter_values(0..ids.len() as i64)),
            ],
        )
        .unwrap()
    }

    #[test]
    fn drops_repeats_across_batches_and_keeps_first_occurrence() {
        let ctx = Context {
            slice_id: "s".into(),
            logical_date: None,
            params: serde_json::json!({}),
            input_schema: batch(&[]).schema(),
            batch_rows: 3,
            side_inputs: Default::default(),
        };
        let out =
            native::run::<DedupEvents>(&ctx, [batch(&["a", "b", "a"]), batch(&["c", "b", "d"])])
                .unwrap();
        let ids: Vec<&str> = out
            .iter()
            .flat_map(|b| {
                b.column(0)
                    .as_string::<i32>()
                    .iter()
                    .flatten()
                    .collect::<Vec<_>>()
            })
            .collect();
        assert_eq!(ids, vec!["a", "b", "c", "d"]);
        // first occurrence wins: the kept "a" is row n=0 of batch 1
        assert_eq!(
            out[0]
                .column(1)
                .as_primitive::<Int64Type>()
                .values()
                .to_vec(),
            vec![0, 1]
        );
    }

    #[test]
    fn missing_key_column_names_the_parameter() {
        let ctx = Context {
            slice_id: "s".into(),
            logical_date: None,
            params: serde_json::json!({"key": "nope"}),
            input_schema: batch(&[]).schema(),
            batch_rows: 3,
            side_inputs: Default::default(),
        };
        let err = native::run::<DedupEvents>(&ctx, [batch(&["a"])]).unwrap_err();
        assert!(err.0.contains("`nope`") && err.0.contains("key"), "{err}");
    }
}
