//! A deliberately hostile guest for the sandbox tests. It implements the raw
//! WIT world (not `idem_guest::Transform`) so it can return bytes the SDK
//! would never produce. The `mode` parameter picks the misbehaviour:
//!
//! - `spin`: `push` never returns (wall-clock deadline);
//! - `oom`: `push` allocates without bound (memory limit);
//! - `big`: `push` returns `bytes` bytes (output limit);
//! - `panic`: `push` panics (message must reach the host);
//! - `garbage`: `push` returns bytes that are not Arrow IPC;
//! - `schema_flip`: batches alternate between two schemas;
//! - `nan`: `y = x * 1.0` over the Float64 column `x` (NaN canonicalization);
//! - `fail`: `push` returns an error string;
//! - `sink` / `decode`: drop the batch (after decoding it): boundary cost;
//! - anything else: echo the input.

#[cfg(target_arch = "wasm32")]
mod guest {
    use std::cell::RefCell;
    use std::sync::Arc;

    use idem_guest::arrow::array::{AsArray, Float64Array, Int64Array, RecordBatch, StringArray};
    use idem_guest::arrow::datatypes::{DataType, Field, Float64Type, Schema};
    use idem_guest::bindings::exports::idem::transform::transform::{Context, Guest};
    use idem_guest::ipc;

    thread_local! {
        static MODE: RefCell<(String, u64, u64)> = const { RefCell::new((String::new(), 0, 0)) };
    }

    struct Hostile;

    fn flip(n: u64) -> RecordBatch {
        if n % 2 == 0 {
            let s = Arc::new(Schema::new(vec![Field::new("a", DataType::Int64, false)]));
            RecordBatch::try_new(s, vec![Arc::new(Int64Array::from(vec![1]))]).unwrap()
        } else {
            let s = Arc::new(Schema::new(vec![Field::new("a", DataType::Utf8, false)]));
            RecordBatch::try_new(s, vec![Arc::new(StringArray::from(vec!["x"]))]).unwrap()
        }
    }

    impl Guest for Hostile {
        fn open(ctx: Context) -> Result<(), String> {
            idem_guest::install_panic_hook();
            let params: idem_guest::serde_json::Value =
                idem_guest::serde_json::from_str(&ctx.params).map_err(|e| e.to_string())?;
            let mode = params["mode"].as_str().unwrap_or("echo").to_string();
            let bytes = params["bytes"].as_u64().unwrap_or(64 << 20);
            MODE.with(|m| *m.borrow_mut() = (mode, bytes, 0));
            Ok(())
        }

        fn push(batch: Vec<u8>) -> Result<Vec<u8>, String> {
            let (mode, bytes, n) = MODE.with(|m| {
                let mut m = m.borrow_mut();
                m.2 += 1;
                m.clone()
            });
            match mode.as_str() {
                "spin" => loop {
                    core::hint::black_box(());
                },
                "oom" => {
                    let mut hog: Vec<Vec<u8>> = Vec::new();
                    loop {
                        hog.push(vec![1u8; 1 << 20]);
                        core::hint::black_box(&hog);
                    }
                }
                "big" => Ok(vec![7u8; bytes as usize]),
                "panic" => panic!("hostile guest: deliberate panic in batch {n}"),
                "garbage" => Ok(b"this is not an Arrow IPC stream".to_vec()),
                "fail" => Err(format!("hostile guest refuses batch {n}")),
                // Benchmarks: the cost of the boundary alone (copy in, no work).
                "sink" => Ok(Vec::new()),
                "decode" => ipc::decode(batch)
                    .map(|_| Vec::new())
                    .map_err(|e| e.to_string()),
                "schema_flip" => ipc::encode(Some(&flip(n))).map_err(|e| e.to_string()),
                "nan" => {
                    let b = ipc::decode(batch)
                        .map_err(|e| e.to_string())?
                        .ok_or("empty")?;
                    let x = b
                        .column_by_name("x")
                        .ok_or("no x")?
                        .as_primitive::<Float64Type>();
                    let one = core::hint::black_box(1.0f64);
                    let y: Float64Array = x.iter().map(|v| v.map(|v| v * one)).collect();
                    let s = Arc::new(Schema::new(vec![Field::new("y", DataType::Float64, true)]));
                    let out =
                        RecordBatch::try_new(s, vec![Arc::new(y)]).map_err(|e| e.to_string())?;
                    ipc::encode(Some(&out)).map_err(|e| e.to_string())
                }
                _ => Ok(batch),
            }
        }

        fn finish() -> Result<Vec<u8>, String> {
            Ok(Vec::new())
        }
    }

    idem_guest::bindings::export_world!(Hostile with_types_in idem_guest::bindings);
}
