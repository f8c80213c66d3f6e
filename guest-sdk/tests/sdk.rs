//! The guest SDK on its own: parameters, context, the IPC glue both sides
//! of the sandbox boundary use, and the native runner.

use std::sync::Arc;

use idem_guest::arrow::array::{Int64Array, RecordBatch, StringArray};
use idem_guest::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use idem_guest::{Context, Result, Transform, ipc, native};

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("name", DataType::Utf8, true),
    ]))
}

fn batch(ids: &[i64]) -> RecordBatch {
    let names: Vec<Option<String>> = ids
        .iter()
        .map(|i| (i % 3 != 0).then(|| format!("n{i}")))
        .collect();
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(Int64Array::from(ids.to_vec())),
            Arc::new(StringArray::from(names)),
        ],
    )
    .unwrap()
}

fn ctx(params: serde_json::Value) -> Context {
    Context {
        slice_id: "date=2026-10-01".into(),
        logical_date: Some("2026-10-01".into()),
        params,
        input_schema: schema(),
        batch_rows: 2,
        side_inputs: Default::default(),
    }
}

#[test]
fn params_are_typed_and_errors_name_the_parameter() {
    let c = ctx(serde_json::json!({"min": 2.5, "label": "x", "n": null}));
    assert_eq!(c.param_f64("min").unwrap(), Some(2.5));
    assert_eq!(c.param_f64("absent").unwrap(), None);
    assert_eq!(c.param_f64("n").unwrap(), None);
    assert_eq!(c.param_str("label").unwrap(), Some("x"));
    let e = c.param_f64("label").unwrap_err();
    assert!(e.0.contains("`label` must be a number"), "{}", e.0);
    let e = c.param_str("min").unwrap_err();
    assert!(e.0.contains("`min` must be a string"), "{}", e.0);
}

#[test]
fn ipc_round_trips_batches_schemas_and_empty_outputs() {
    let b = batch(&[1, 2, 3, 4]);
    let bytes = ipc::encode(Some(&b)).unwrap();
    assert_eq!(ipc::decode(bytes).unwrap().unwrap(), b);
    // None is "no rows and no schema": nothing crosses.
    assert!(ipc::encode(None).unwrap().is_empty());
    assert!(ipc::decode(Vec::new()).unwrap().is_none());
    // A zero-row batch still carries its schema (so an empty output can
    // create a table or empty a slice).
    let empty = RecordBatch::new_empty(schema());
    let bytes = ipc::encode(Some(&empty)).unwrap();
    assert!(!bytes.is_empty());
    let back = ipc::decode(bytes).unwrap().unwrap();
    assert_eq!((back.num_rows(), back.schema()), (0, schema()));
    let s = ipc::encode_schema(&schema()).unwrap();
    assert_eq!(ipc::decode_schema(&s).unwrap(), schema());
    // Garbage is an error, not a panic.
    assert!(ipc::decode(b"definitely not arrow".to_vec()).is_err());
}

/// The guest's decoding of its input (trusted: no per-array validation)
/// gives the same batches as the validating decoder, for what the host
/// sends: batches with nulls and strings, zero-row batches, dictionary
/// columns; and it still refuses a truncated stream instead of looping.
#[test]
fn the_guests_trusted_decode_reads_what_the_host_encodes() {
    use idem_guest::arrow::array::DictionaryArray;
    use idem_guest::arrow::datatypes::Int32Type;
    let b = batch(&[1, 2, 3, 4, 5, 6]);
    let bytes = ipc::encode(Some(&b)).unwrap();
    assert_eq!(ipc::decode_trusted(bytes.clone()).unwrap().unwrap(), b);
    let empty = RecordBatch::new_empty(schema());
    let back = ipc::decode_trusted(ipc::encode(Some(&empty)).unwrap())
        .unwrap()
        .unwrap();
    assert_eq!((back.num_rows(), back.schema()), (0, schema()));
    assert!(ipc::decode_trusted(Vec::new()).unwrap().is_none());
    let dict: DictionaryArray<Int32Type> = vec![Some("a"), None, Some("b"), Some("a")]
        .into_iter()
        .collect();
    let d = RecordBatch::try_from_iter([("d", Arc::new(dict) as _)]).unwrap();
    let bytes = ipc::encode(Some(&d)).unwrap();
    assert_eq!(
        ipc::decode_trusted(bytes.clone()).unwrap(),
        ipc::decode(bytes).unwrap()
    );
    let whole = ipc::encode(Some(&b)).unwrap();
    assert!(ipc::decode_trusted(whole[..whole.len() - 20].to_vec()).is_err());
    // It really skips validation (what makes it cheaper): a string column
    // that is not UTF-8, which only a broken host could send, passes here
    // and is refused by the validating decoder the host uses on guest
    // output.
    use idem_guest::arrow::buffer::{Buffer, OffsetBuffer};
    let bad = unsafe {
        StringArray::new_unchecked(
            OffsetBuffer::new(vec![0i32, 2].into()),
            Buffer::from_vec(vec![0xffu8, 0xfe]),
            None,
        )
    };
    let bad = RecordBatch::try_from_iter([("s", Arc::new(bad) as _)]).unwrap();
    let bytes = ipc::encode(Some(&bad)).unwrap();
    assert!(ipc::decode(bytes.clone()).is_err());
    assert_eq!(ipc::decode_trusted(bytes).unwrap().unwrap().num_rows(), 1);
}

/// The guest's input arrays point into the bytes the host copied in (no
/// per-batch copy of the body, as arrow's StreamReader makes), dictionary
/// values included; and a schema parsed for one stream is never reused for
/// another stream with a different schema.
#[test]
fn the_guests_decode_is_zero_copy_and_keeps_schemas_apart() {
    use idem_guest::arrow::array::DictionaryArray;
    use idem_guest::arrow::datatypes::Int32Type;
    let dict: DictionaryArray<Int32Type> = vec![Some("a"), None, Some("b"), Some("a")]
        .into_iter()
        .collect();
    let d = RecordBatch::try_from_iter([("d", Arc::new(dict) as _)]).unwrap();
    let b = batch(&[1, 2, 3, 4, 5, 6]);
    for (x, other) in [(&b, &d), (&d, &b), (&b, &d)] {
        let bytes = ipc::encode(Some(x)).unwrap();
        let within = bytes.as_ptr_range();
        let back = ipc::decode_trusted(bytes).unwrap().unwrap();
        assert_eq!(&back, x);
        assert_ne!(back.schema(), other.schema());
        let mut seen = 0;
        let mut stack: Vec<_> = back.columns().iter().map(|c| c.to_data()).collect();
        while let Some(data) = stack.pop() {
            for buf in data.buffers() {
                assert!(
                    within.contains(&buf.as_ptr()),
                    "a buffer of {:?} was copied out of the input bytes",
                    data.data_type()
                );
                seen += 1;
            }
            if let Some(n) = data.nulls() {
                assert!(
                    within.contains(&n.buffer().as_ptr()),
                    "a null bitmap was copied"
                );
                seen += 1;
            }
            // A dictionary's values are its child.
            stack.extend(data.child_data().iter().cloned());
        }
        assert!(seen >= 2, "no buffer was checked");
    }
    // The parsed schema is reused only for the same schema message: two
    // batches of one schema in a row (other rows), then schemas that differ
    // only in nullability or in field metadata.
    let again = batch(&[7, 8, 9]);
    for x in [&b, &again, &again] {
        assert_eq!(
            &ipc::decode_trusted(ipc::encode(Some(x)).unwrap())
                .unwrap()
                .unwrap(),
            x
        );
    }
    let nullable = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("name", DataType::Utf8, true),
    ]));
    let tagged = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false).with_metadata([("k".into(), "v".into())].into()),
        Field::new("name", DataType::Utf8, true),
    ]));
    for s in [nullable, tagged, schema()] {
        let x = RecordBatch::try_new(s.clone(), again.columns().to_vec()).unwrap();
        let back = ipc::decode_trusted(ipc::encode(Some(&x)).unwrap())
            .unwrap()
            .unwrap();
        assert_eq!(back.schema(), s);
        assert_eq!(back, x);
    }
}

/// Keeps rows whose id is at least the `min` param; counts what it saw and
/// emits the count in `finish`, tagged with the context's logical date.
#[derive(Default)]
struct KeepAtLeast {
    min: i64,
    seen: i64,
    day: String,
}

impl Transform for KeepAtLeast {
    fn open(&mut self, ctx: &Context) -> Result<()> {
        self.min = ctx.param_f64("min")?.unwrap_or(0.0) as i64;
        self.day = ctx.logical_date.clone().unwrap_or_default();
        Ok(())
    }
    fn push(&mut self, b: RecordBatch) -> Result<Option<RecordBatch>> {
        self.seen += b.num_rows() as i64;
        let ids = b.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
        let keep = ids.iter().map(|v| v.map(|v| v >= self.min)).collect();
        Ok(Some(idem_guest::arrow::compute::filter_record_batch(
            &b, &keep,
        )?))
    }
    fn finish(&mut self) -> Result<Option<RecordBatch>> {
        let s = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("name", DataType::Utf8, true),
        ]));
        Ok(Some(RecordBatch::try_new(
            s,
            vec![
                Arc::new(Int64Array::from(vec![-self.seen])),
                Arc::new(StringArray::from(vec![Some(self.day.clone())])),
            ],
        )?))
    }
}

#[test]
fn the_native_runner_drives_open_push_finish_in_order() {
    let out = native::run::<KeepAtLeast>(
        &ctx(serde_json::json!({"min": 3})),
        [batch(&[1, 2]), batch(&[3, 4]), batch(&[2, 5])],
    )
    .unwrap();
    let ids: Vec<i64> = out
        .iter()
        .flat_map(|b| {
            b.column(0)
                .as_any()
                .downcast_ref::<Int64Array>()
                .unwrap()
                .values()
                .to_vec()
        })
        .collect();
    // The first batch keeps nothing (dropped from the outputs), then 3, 4,
    // 5, then the count of all six rows.
    assert_eq!(ids, [3, 4, 5, -6]);
    assert_eq!(out.len(), 3);
    let last = out.last().unwrap();
    let day = last
        .column(1)
        .as_any()
        .downcast_ref::<StringArray>()
        .unwrap();
    assert_eq!(day.value(0), "2026-10-01");
    // A bad parameter is the transform's error, naming it.
    let e = native::run::<KeepAtLeast>(&ctx(serde_json::json!({"min": "x"})), [batch(&[1])])
        .unwrap_err();
    assert!(e.0.contains("`min`"), "{}", e.0);
}

/// Declares `min` (integer, default 2) and `tag` (string, required); keeps
/// rows whose id is at least `min`.
#[derive(Default)]
struct Declared {
    min: i64,
}

impl Transform for Declared {
    fn params() -> Option<Vec<idem_guest::Param>> {
        Some(vec![
            idem_guest::Param::integer("min").default(2),
            idem_guest::Param::string("tag").required(),
        ])
    }
    fn open(&mut self, ctx: &Context) -> Result<()> {
        // The default was filled in before `open`: no fallback here.
        self.min = ctx.param_i64("min")?.ok_or("no `min`")?;
        Ok(())
    }
    fn push(&mut self, b: RecordBatch) -> Result<Option<RecordBatch>> {
        let ids = b.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
        let keep = ids.iter().map(|v| v.map(|v| v >= self.min)).collect();
        Ok(Some(idem_guest::arrow::compute::filter_record_batch(
            &b, &keep,
        )?))
    }
}

#[test]
fn the_native_runner_checks_declared_params_before_open() {
    let ids = |params| -> Result<Vec<i64>> {
        let out = native::run::<Declared>(&ctx(params), [batch(&[1, 2, 3])])?;
        Ok(out
            .iter()
            .flat_map(|b| {
                let c = b.column(0).as_any().downcast_ref::<Int64Array>();
                c.unwrap().values().to_vec()
            })
            .collect())
    };
    // The default reaches `open`; a given value wins (3.0 is an integer).
    assert_eq!(ids(serde_json::json!({"tag": "t"})).unwrap(), [2, 3]);
    assert_eq!(
        ids(serde_json::json!({"tag": "t", "min": 3.0})).unwrap(),
        [3]
    );
    let e = ids(serde_json::json!({"tag": "t", "mni": 3}))
        .unwrap_err()
        .0;
    assert!(
        e.starts_with("unknown parameter `mni` (did you mean `min`?)")
            && e.contains("`min` (integer, default 2), `tag` (string, required)"),
        "{e}"
    );
    let e = ids(serde_json::json!({"tag": "t", "min": 2.5}))
        .unwrap_err()
        .0;
    assert!(e.contains("`min` must be an integer"), "{e}");
    let e = ids(serde_json::json!({})).unwrap_err().0;
    assert!(e.contains("missing required parameter `tag`"), "{e}");
    // Undeclared transforms take anything, as before.
    native::run::<KeepAtLeast>(&ctx(serde_json::json!({"anything": 1})), [batch(&[1])]).unwrap();
}
