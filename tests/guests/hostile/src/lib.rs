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
//! - `dictionary`, `duration`, `map`, `list_struct`: `push` returns a fixed
//!   batch with one column of that type (nulls inside; see `shapes`), which
//!   the host must digest like the same rows built natively;
//! - `union`: a fixed sparse union column (the host must refuse the type);
//! - `bad_schema`: a stream whose schema declares a 7-bit integer (arrow's
//!   own reader panics on it);
//! - `views`: a Utf8View column of `views` views (default 20,000) that all
//!   point at the same `view_len` bytes (default 4,096): tiny on the wire,
//!   huge in logical size;
//! - `rows_bomb`: a stream with an empty schema and one record batch that
//!   claims `rows` rows (default 2^31-1): ~200 bytes on the wire;
//! - `null_rows`: one Null column of `rows` rows (no buffers at all);
//! - `long_error`: `push` returns an error of `len` bytes (default 100 MB);
//! - `long_panic`: `push` panics with a message of `len` bytes;
//! - `long_log`: `push` logs `lines` lines of `len` bytes each, then echoes;
//! - `long_columns`: `push` returns a batch whose one column's name is
//!   `len` bytes long and differs per batch (a schema-mismatch text the
//!   host must cut);
//! - `slow`: every `push` does `ms` x 400,000 steps of busy work (default
//!   150; the test calibrates it), then echoes: a per-call deadline would
//!   never fire, a per-run one must;
//! - `ns_timestamp`: one `Timestamp(Nanosecond, "UTC")` column `t` of
//!   three values with sub-microsecond digits (Delta stores microseconds);
//! - anything else: echo the input.
//!
//! With `"columns": [...]` its `open` declares those input columns, and
//! with `"dictionaries": [...]` its `dictionary-columns` names those (any
//! names: the host must check them); `"dictionaries_panic": true` makes
//! `dictionary-columns` panic. With `"panic_on_slice": "<slice id>"` the
//! mode is `panic` for that slice alone (a bug only one day's data meets).

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
        static VIEWS: RefCell<(u64, u64)> = const { RefCell::new((0, 0)) };
        static DICTIONARIES: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
        static DICTIONARIES_PANIC: RefCell<bool> = const { RefCell::new(false) };
        /// `rows`, `len`, `lines`, `ms` of the size modes.
        static SIZES: RefCell<(u64, u64, u64, u64)> = const { RefCell::new((0, 0, 0, 0)) };
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

    fn encode(batch: Result<RecordBatch, String>) -> Result<Vec<u8>, String> {
        ipc::encode(Some(&batch?)).map_err(|e| e.to_string())
    }

    impl Guest for Hostile {
        fn open(ctx: Context) -> Result<Option<Vec<String>>, String> {
            idem_guest::install_panic_hook();
            let params: idem_guest::serde_json::Value =
                idem_guest::serde_json::from_str(&ctx.params).map_err(|e| e.to_string())?;
            let mut mode = params["mode"].as_str().unwrap_or("echo").to_string();
            if params["panic_on_slice"].as_str() == Some(ctx.slice_id.as_str()) {
                mode = "panic".into();
            }
            let bytes = params["bytes"].as_u64().unwrap_or(64 << 20);
            MODE.with(|m| *m.borrow_mut() = (mode, bytes, 0));
            let views = params["views"].as_u64().unwrap_or(20_000);
            let view_len = params["view_len"].as_u64().unwrap_or(4_096);
            VIEWS.with(|v| *v.borrow_mut() = (views, view_len));
            let size = |key: &str, default: u64| params[key].as_u64().unwrap_or(default);
            SIZES.with(|s| {
                *s.borrow_mut() = (
                    size("rows", (1 << 31) - 1),
                    size("len", 100_000_000),
                    size("lines", 10),
                    size("ms", 150),
                )
            });
            let names = |key: &str| -> Option<Vec<String>> {
                params[key].as_array().map(|a| {
                    a.iter()
                        .map(|c| c.as_str().unwrap_or_default().to_string())
                        .collect()
                })
            };
            DICTIONARIES.with(|d| *d.borrow_mut() = names("dictionaries").unwrap_or_default());
            let panic = params["dictionaries_panic"].as_bool().unwrap_or(false);
            DICTIONARIES_PANIC.with(|p| *p.borrow_mut() = panic);
            // `"columns": [...]` declares the input columns it reads (any
            // names, even wrong ones: the host must check them).
            Ok(names("columns"))
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
                // A transform that reads the wall clock (std panics on
                // wasm32-unknown-unknown).
                "clock" => Ok(format!("{:?}", std::time::SystemTime::now()).into_bytes()),
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
                "dictionary" => encode(shapes::dictionary()),
                "duration" => encode(shapes::duration()),
                "map" => encode(shapes::map()),
                "list_struct" => encode(shapes::list_struct()),
                "union" => encode(shapes::union()),
                "bad_schema" => shapes::bad_schema(),
                "views" => {
                    let (views, view_len) = VIEWS.with(|v| *v.borrow());
                    encode(shapes::views(views as usize, view_len as u32))
                }
                "rows_bomb" => shapes::rows_bomb(SIZES.with(|s| s.borrow().0)),
                "ns_timestamp" => encode(shapes::ns_timestamp()),
                "null_rows" => encode(shapes::null_rows(SIZES.with(|s| s.borrow().0))),
                "long_error" => Err("E".repeat(SIZES.with(|s| s.borrow().1) as usize)),
                "long_panic" => panic!("{}", "P".repeat(SIZES.with(|s| s.borrow().1) as usize)),
                "long_columns" => {
                    // A new name each batch: the second is a schema mismatch
                    // whose text quotes both names.
                    let name = format!("{n}{}", "c".repeat(SIZES.with(|s| s.borrow().1) as usize));
                    let s = Arc::new(Schema::new(vec![Field::new(name, DataType::Int64, false)]));
                    encode(
                        RecordBatch::try_new(s, vec![Arc::new(Int64Array::from(vec![n as i64]))])
                            .map_err(|e| e.to_string()),
                    )
                }
                "long_log" => {
                    let (_, len, lines, _) = SIZES.with(|s| *s.borrow());
                    let line = "L".repeat(len as usize);
                    for _ in 0..lines {
                        idem_guest::log(idem_guest::Level::Warn, &line);
                    }
                    Ok(batch)
                }
                "slow" => {
                    // Busy work the deadline must interrupt: a sleep would
                    // need a clock, which the sandbox does not have.
                    let ms = SIZES.with(|s| s.borrow().3);
                    let mut x = 0u64;
                    for i in 0..ms.saturating_mul(400_000) {
                        x = core::hint::black_box(x.wrapping_add(i));
                    }
                    core::hint::black_box(x);
                    Ok(batch)
                }
                _ => Ok(batch),
            }
        }

        fn finish() -> Result<Vec<u8>, String> {
            Ok(Vec::new())
        }
    }

    impl idem_guest::bindings::exports::idem::transform::input_encoding::Guest for Hostile {
        fn dictionary_columns() -> Vec<String> {
            if DICTIONARIES_PANIC.with(|p| *p.borrow()) {
                panic!("hostile guest: deliberate panic naming dictionaries");
            }
            DICTIONARIES.with(|d| d.borrow().clone())
        }
    }

    impl idem_guest::bindings::exports::idem::transform::side_inputs::Guest for Hostile {
        /// Takes any side input, except one named `refuse` (its error is
        /// the run's).
        fn side_input(name: String, _batch: Vec<u8>) -> Result<(), String> {
            match name.as_str() {
                "refuse" => Err("hostile guest: refuses side input `refuse`".into()),
                _ => Ok(()),
            }
        }
    }

    idem_guest::bindings::export_world!(Hostile with_types_in idem_guest::bindings);

    /// The fixed batches of the type modes. tests/sandbox.rs builds the same
    /// rows natively, independently, as the reference digest.
    mod shapes {
        use std::sync::Arc;

        use idem_guest::arrow::array::{
            ArrayRef, DictionaryArray, DurationMillisecondArray, Int32Array, Int64Builder,
            ListArray, MapBuilder, RecordBatch, StringArray, StringBuilder, StringViewArray,
            StructArray, UnionArray,
        };
        use idem_guest::arrow::buffer::{Buffer, NullBuffer, OffsetBuffer, ScalarBuffer};
        use idem_guest::arrow::datatypes::{
            DataType, Field, Fields, Int32Type, Schema, UnionFields,
        };
        use idem_guest::ipc;

        fn one(name: &str, column: ArrayRef) -> Result<RecordBatch, String> {
            let schema = Schema::new(vec![Field::new(name, column.data_type().clone(), true)]);
            RecordBatch::try_new(Arc::new(schema), vec![column]).map_err(|e| e.to_string())
        }

        /// `x, y, null, x, z` as a dictionary.
        pub fn dictionary() -> Result<RecordBatch, String> {
            let keys = Int32Array::from(vec![Some(0), Some(1), None, Some(0), Some(2)]);
            let values = Arc::new(StringArray::from(vec!["x", "y", "z"]));
            let d =
                DictionaryArray::<Int32Type>::try_new(keys, values).map_err(|e| e.to_string())?;
            one("d", Arc::new(d))
        }

        /// `1, null, -5, 1000` milliseconds.
        pub fn duration() -> Result<RecordBatch, String> {
            one(
                "d",
                Arc::new(DurationMillisecondArray::from(vec![
                    Some(1),
                    None,
                    Some(-5),
                    Some(1000),
                ])),
            )
        }

        /// `{a: 1, b: null}, null, {}, {c: 3}`.
        pub fn map() -> Result<RecordBatch, String> {
            let mut m = MapBuilder::new(None, StringBuilder::new(), Int64Builder::new());
            m.keys().append_value("a");
            m.values().append_value(1);
            m.keys().append_value("b");
            m.values().append_null();
            m.append(true).map_err(|e| e.to_string())?;
            m.append(false).map_err(|e| e.to_string())?;
            m.append(true).map_err(|e| e.to_string())?;
            m.keys().append_value("c");
            m.values().append_value(3);
            m.append(true).map_err(|e| e.to_string())?;
            one("m", Arc::new(m.finish()))
        }

        /// `[{a: 1, b: "p"}, null, {a: null, b: "q"}], null, [], [{a: 2, b: null}]`,
        /// with junk under the nulls.
        pub fn list_struct() -> Result<RecordBatch, String> {
            let fields = Fields::from(vec![
                Field::new("a", DataType::Int32, true),
                Field::new("b", DataType::Utf8, true),
            ]);
            let a = Int32Array::new(
                ScalarBuffer::from(vec![1, 77, 0, 2]),
                Some(NullBuffer::from(vec![true, true, false, true])),
            );
            let b = StringArray::from(vec![Some("p"), Some("junk"), Some("q"), None]);
            let entries = StructArray::try_new(
                fields.clone(),
                vec![Arc::new(a), Arc::new(b)],
                Some(NullBuffer::from(vec![true, false, true, true])),
            )
            .map_err(|e| e.to_string())?;
            let item = Arc::new(Field::new("item", DataType::Struct(fields), true));
            let list = ListArray::try_new(
                item,
                OffsetBuffer::new(ScalarBuffer::from(vec![0, 3, 3, 3, 4])),
                Arc::new(entries),
                Some(NullBuffer::from(vec![true, false, true, true])),
            )
            .map_err(|e| e.to_string())?;
            one("l", Arc::new(list))
        }

        /// A sparse union of an Int32 and a Utf8 child.
        pub fn union() -> Result<RecordBatch, String> {
            let fields = UnionFields::try_new(
                vec![0, 1],
                vec![
                    Field::new("i", DataType::Int32, true),
                    Field::new("s", DataType::Utf8, true),
                ],
            )
            .map_err(|e| e.to_string())?;
            let u = UnionArray::try_new(
                fields,
                ScalarBuffer::from(vec![0i8, 1, 0]),
                None,
                vec![
                    Arc::new(Int32Array::from(vec![1, 0, 3])),
                    Arc::new(StringArray::from(vec!["", "two", ""])),
                ],
            )
            .map_err(|e| e.to_string())?;
            one("u", Arc::new(u))
        }

        /// A schema-only stream whose one column is an `Int` of 7 bits:
        /// a valid flatbuffer that arrow's `fb_to_schema` panics on.
        pub fn bad_schema() -> Result<Vec<u8>, String> {
            let schema = Arc::new(Schema::new(vec![Field::new("x", DataType::Int32, true)]));
            let mut bytes = ipc::encode_schema(&schema).map_err(|e| e.to_string())?;
            // Continuation marker, metadata length, then the Message flatbuffer.
            let len = u32::from_le_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]) as usize;
            let at = {
                let message = idem_guest::arrow::ipc::root_as_message(&bytes[8..8 + len])
                    .map_err(|e| e.to_string())?;
                let field = message
                    .header_as_schema()
                    .and_then(|s| s.fields())
                    .ok_or("no fields")?
                    .get(0);
                let int = field.type_as_int().ok_or("not an int")?;
                let slot = int
                    ._tab
                    .vtable()
                    .get(idem_guest::arrow::ipc::Int::VT_BITWIDTH);
                8 + int._tab.loc() + slot as usize
            };
            bytes[at..at + 4].copy_from_slice(&7i32.to_le_bytes());
            Ok(bytes)
        }

        /// A stream whose schema has no fields and whose one record batch
        /// claims `rows` rows: no buffers, no nodes, ~200 bytes.
        pub fn rows_bomb(rows: u64) -> Result<Vec<u8>, String> {
            let schema = Arc::new(Schema::empty());
            let empty = RecordBatch::try_new_with_options(
                schema,
                vec![],
                &idem_guest::arrow::array::RecordBatchOptions::new().with_row_count(Some(7)),
            )
            .map_err(|e| e.to_string())?;
            let mut bytes = ipc::encode(Some(&empty)).map_err(|e| e.to_string())?;
            // The record batch's `length` (an i64 in its flatbuffer) is 7:
            // rewrite it, after the schema message, to the claimed count.
            let schema_len =
                8 + u32::from_le_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]) as usize;
            let at = bytes[schema_len..]
                .windows(8)
                .position(|w| w == 7i64.to_le_bytes())
                .ok_or("no length field")?;
            let at = schema_len + at;
            bytes[at..at + 8].copy_from_slice(&(rows as i64).to_le_bytes());
            Ok(bytes)
        }

        /// `1970-01-01T00:00:00.000000001`, `2026-10-01T12:00:00.123456789`
        /// and null, in nanoseconds.
        pub fn ns_timestamp() -> Result<RecordBatch, String> {
            let t = idem_guest::arrow::array::TimestampNanosecondArray::from(vec![
                Some(1),
                Some(1_790_856_000_123_456_789),
                None,
            ])
            .with_timezone("UTC");
            one("t", Arc::new(t))
        }

        /// One Null column of `rows` rows: a Null array has no buffers.
        pub fn null_rows(rows: u64) -> Result<RecordBatch, String> {
            one(
                "n",
                Arc::new(idem_guest::arrow::array::NullArray::new(rows as usize)),
            )
        }

        /// `views` views of `view_len` bytes, all at offset 0 of one buffer.
        pub fn views(views: usize, view_len: u32) -> Result<RecordBatch, String> {
            let data = vec![b'a'; view_len as usize];
            let view = (u128::from(u32::from_le_bytes([b'a'; 4])) << 32) | u128::from(view_len);
            let array = StringViewArray::try_new(
                ScalarBuffer::from(vec![view; views]),
                vec![Buffer::from_vec(data)],
                None,
            )
            .map_err(|e| e.to_string())?;
            one("v", Arc::new(array))
        }
    }
}
