//! The sandbox end to end: real components built from `examples/` and
//! `tests/guests/`, real Parquet input, native builds as the reference.

mod common;

use std::sync::Arc;

use arrow::array::{AsArray, Float64Array, RecordBatch};
use arrow::datatypes::{DataType, Field, Float64Type, Schema};
use idem::digest::Digest;
use idem::execute::{ExecError, Native, Outcome, Transformer, execute};
use idem::sandbox::{CacheOutcome, GuestContext, Limits, Sandbox, SandboxConfig, SandboxError};
use idem::slice::ResolvedSlice;

const HOSTILE: &str = "tests/guests/hostile";

fn ctx(
    slice: &ResolvedSlice,
    schema: arrow::datatypes::SchemaRef,
    params: &str,
    batch_rows: u32,
) -> GuestContext {
    GuestContext {
        slice_id: slice.id.clone(),
        logical_date: Some("2026-10-01".into()),
        params: params.into(),
        input_schema: schema,
        batch_rows,
    }
}

/// Run `t` over the slice, collecting output.
fn run_over(
    t: &mut dyn Transformer,
    slice: &ResolvedSlice,
    params: &str,
) -> (Outcome, Vec<RecordBatch>) {
    let reader = slice.reader(1000).unwrap();
    let c = ctx(slice, reader.schema(), params, 1000);
    let mut out = Vec::new();
    let o = execute(
        t,
        &c,
        |c| reader.narrow(c),
        |b| {
            out.push(b.clone());
            Ok(())
        },
    )
    .unwrap();
    (o, out)
}

fn wasm_run(sandbox: &Sandbox, rel: &str, slice: &ResolvedSlice, params: &str) -> Outcome {
    let module = sandbox.load(&common::guest_bytes(rel)).unwrap();
    let mut inst = sandbox.instantiate(&module).unwrap();
    run_over(&mut inst, slice, params).0
}

fn sample_slice(dir: &std::path::Path) -> ResolvedSlice {
    let files = common::orders(dir, "2026-10-01", 12_345, 3);
    ResolvedSlice::from_files("date=2026-10-01", &files).unwrap()
}

#[test]
fn each_example_gives_the_same_digest_in_wasm_and_native() {
    let dir = tempfile::tempdir().unwrap();
    let slice = sample_slice(dir.path());
    let sandbox = common::sandbox_with(Limits::default());
    let cases: Vec<(&str, &str, Box<dyn Transformer>)> = vec![
        (
            "examples/clean_orders",
            r#"{"min_amount": 250}"#,
            Box::new(Native::<clean_orders::CleanOrders>::default()),
        ),
        (
            "examples/dedup_events",
            "{}",
            Box::new(Native::<dedup_events::DedupEvents>::default()),
        ),
        (
            "examples/daily_revenue",
            "{}",
            Box::new(Native::<daily_revenue::DailyRevenue>::default()),
        ),
    ];
    for (rel, params, mut native) in cases {
        let wasm = wasm_run(&sandbox, rel, &slice, params);
        let (nat, _) = run_over(native.as_mut(), &slice, params);
        assert_eq!(wasm.rows_in, 12_345, "{rel}");
        assert!(wasm.rows_out > 0, "{rel} produced no rows");
        assert_eq!(wasm.rows_out, nat.rows_out, "{rel}: row counts differ");
        assert_eq!(
            wasm.output_digest, nat.output_digest,
            "{rel}: wasm and native digests differ"
        );
    }
}

#[test]
fn examples_do_what_they_say_on_sample_data() {
    let dir = tempfile::tempdir().unwrap();
    let slice = sample_slice(dir.path());
    // dedup: every event id appears once in the output, and some were dropped.
    let (o, out) = run_over(
        &mut Native::<dedup_events::DedupEvents>::default(),
        &slice,
        "{}",
    );
    let mut ids: Vec<String> = out
        .iter()
        .flat_map(|b| {
            b.column(0)
                .as_string::<i32>()
                .iter()
                .flatten()
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .collect();
    let n = ids.len();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), n, "duplicates survived");
    assert!(
        o.rows_out < o.rows_in,
        "sample data has re-deliveries to drop"
    );
    // clean_orders: every kept amount is >= the threshold.
    let (_, out) = run_over(
        &mut Native::<clean_orders::CleanOrders>::default(),
        &slice,
        r#"{"min_amount": 500}"#,
    );
    for b in &out {
        let amount = b
            .column_by_name("amount")
            .unwrap()
            .as_primitive::<Float64Type>();
        assert!(amount.iter().all(|a| a.is_some_and(|a| a >= 500.0)));
    }
}

#[test]
fn three_fresh_engines_give_the_same_digest() {
    let dir = tempfile::tempdir().unwrap();
    let slice = sample_slice(dir.path());
    let digests: Vec<Digest> = (0..3)
        .map(|_| {
            // No compiled-code cache: each engine compiles the module itself.
            let fresh = Sandbox::new(SandboxConfig {
                cache_dir: None,
                ..SandboxConfig::default()
            })
            .unwrap();
            wasm_run(&fresh, "examples/daily_revenue", &slice, "{}").output_digest
        })
        .collect();
    assert_eq!(digests[0], digests[1]);
    assert_eq!(digests[1], digests[2]);
}

#[test]
fn nans_with_different_payloads_come_out_canonical() {
    let payloads: Vec<u64> = vec![
        0x7ff8_0000_0000_0001,
        0x7ff8_dead_beef_0000,
        0xfff8_0000_0000_0042,
        0x7ff4_0000_0000_0000,
    ];
    let schema = Arc::new(Schema::new(vec![Field::new("x", DataType::Float64, true)]));
    let x = Float64Array::from(
        payloads
            .iter()
            .map(|b| f64::from_bits(*b))
            .collect::<Vec<_>>(),
    );
    let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(x)]).unwrap();
    let sandbox = common::sandbox_with(Limits::default());
    let module = sandbox.load(&common::guest_bytes(HOSTILE)).unwrap();
    let mut inst = sandbox.instantiate(&module).unwrap();
    let c = GuestContext {
        slice_id: "nan".into(),
        logical_date: None,
        params: r#"{"mode": "nan"}"#.into(),
        input_schema: schema,
        batch_rows: 4,
    };
    inst.open(&c).unwrap();
    let out = inst.push(&batch).unwrap().unwrap();
    let y = out.column(0).as_primitive::<Float64Type>();
    for (i, v) in y.values().iter().enumerate() {
        assert_eq!(
            v.to_bits(),
            0x7ff8_0000_0000_0000,
            "row {i}: NaN payload leaked: {:#x}",
            v.to_bits()
        );
    }
    // The same arithmetic natively keeps payloads, so the check above is
    // only true because the sandbox canonicalizes.
    let one = std::hint::black_box(1.0f64);
    let native: Vec<u64> = payloads
        .iter()
        .map(|b| (f64::from_bits(*b) * one).to_bits())
        .collect();
    assert!(
        native.iter().any(|b| *b != 0x7ff8_0000_0000_0000),
        "native NaNs: {native:x?}"
    );
}

fn wat(name: &str) -> Vec<u8> {
    std::fs::read(common::root().join("tests/wat").join(name)).unwrap()
}

#[test]
fn forbidden_imports_are_rejected_before_anything_runs() {
    let sandbox = common::sandbox_with(Limits::default());
    for (file, import, word) in [
        (
            "import-wall-clock.wat",
            "wasi:clocks/wall-clock@0.2.0",
            "clock",
        ),
        ("import-random.wat", "wasi:random/random@0.2.0", "entropy"),
        ("import-sockets.wat", "wasi:sockets/tcp@0.2.0", "socket"),
        (
            "import-filesystem.wat",
            "wasi:filesystem/types@0.2.0",
            "filesystem",
        ),
        (
            "import-http.wat",
            "wasi:http/outgoing-handler@0.2.0",
            "http",
        ),
        ("import-unknown.wat", "acme:spy/phone-home@1.0.0", "unknown"),
    ] {
        match sandbox.load(&wat(file)) {
            Err(SandboxError::Forbidden {
                import: got,
                reason,
            }) => {
                assert_eq!(got, import, "{file}");
                assert!(reason.starts_with(word), "{file}: {reason}");
            }
            Err(e) => panic!("{file}: wrong error kind: {e}"),
            Ok(_) => panic!("{file} was admitted"),
        }
    }
}

#[test]
fn a_core_module_without_the_transform_export_is_not_a_transform() {
    let sandbox = common::sandbox_with(Limits::default());
    match sandbox.load(&wat("no-component-type.wat")) {
        Err(SandboxError::NotATransform(why)) => assert!(why.contains("export"), "{why}"),
        Err(e) => panic!("wrong error kind: {e}"),
        Ok(_) => panic!("admitted a module with no transform export"),
    }
}

/// Run the hostile guest in `mode` and return the error it must produce.
fn hostile(mode: &str, extra: &str, limits: Limits) -> SandboxError {
    let limits_fuel = limits.fuel.is_some();
    let sandbox = common::sandbox_with(limits);
    let module = sandbox.load(&common::guest_bytes(HOSTILE)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let files = common::orders(dir.path(), "2026-10-01", 3_000, 1);
    let slice = ResolvedSlice::from_files("s", &files).unwrap();
    let reader = slice.reader(1000).unwrap();
    let c = ctx(
        &slice,
        reader.schema(),
        &format!(r#"{{"mode": "{mode}"{extra}}}"#),
        1000,
    );
    let mut inst = sandbox.instantiate(&module).unwrap();
    let err = match execute(&mut inst, &c, |c| reader.narrow(c), |_| Ok(())) {
        Err(ExecError::Sandbox(e)) => e,
        Err(e) => panic!("{mode}: not a sandbox error: {e}"),
        Ok(o) => panic!("{mode}: run succeeded: {o:?}"),
    };
    // The instance is poisoned, never reused...
    assert!(
        matches!(inst.finish(), Err(SandboxError::Poisoned)),
        "{mode}: instance reusable after failure"
    );
    // ...and the host, and the same sandbox, still work (a metered sandbox
    // would rightly run out of fuel on it, so that case gets a fresh one).
    let sandbox = if limits_fuel {
        common::sandbox_with(Limits::default())
    } else {
        sandbox
    };
    let ok = wasm_run(&sandbox, "examples/dedup_events", &slice, "{}");
    assert_eq!(ok.rows_in, 3_000);
    err
}

/// The deadline is precise: only the execution is timed (not compiling or
/// writing data), and it stops within a small margin of the budget.
#[test]
fn the_deadline_stops_the_execution_within_a_small_margin() {
    let sandbox = common::sandbox_with(Limits {
        deadline_ms: 400,
        ..Limits::default()
    });
    let module = sandbox.load(&common::guest_bytes(HOSTILE)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let files = common::orders(dir.path(), "2026-10-01", 3_000, 1);
    let slice = ResolvedSlice::from_files("s", &files).unwrap();
    let reader = slice.reader(1000).unwrap();
    let c = ctx(&slice, reader.schema(), r#"{"mode": "spin"}"#, 1000);
    let mut inst = sandbox.instantiate(&module).unwrap();
    let t = std::time::Instant::now();
    let e = execute(&mut inst, &c, |c| reader.narrow(c), |_| Ok(()));
    let took = t.elapsed().as_millis();
    assert!(
        matches!(
            e,
            Err(ExecError::Sandbox(SandboxError::Deadline { ms: 400 }))
        ),
        "{e:?}"
    );
    // The budget runs from instantiation; epochs tick every 10 ms. The
    // upper bound only proves it stopped (a spin never returns): on two
    // busy cores the thread may wait its turn well past the tick.
    assert!(
        (350..=400 + 2_000).contains(&took),
        "stopped after {took} ms"
    );
}

#[test]
fn an_infinite_loop_hits_the_deadline() {
    let t = std::time::Instant::now();
    let e = hostile(
        "spin",
        "",
        Limits {
            deadline_ms: 300,
            ..Limits::default()
        },
    );
    assert!(matches!(e, SandboxError::Deadline { ms: 300 }), "{e}");
    assert!(e.to_string().contains("deadline"), "{e}");
    // It ended: that is the point (the time includes compiling two modules
    // and a clean run on a machine other tests load; the margin of the
    // deadline itself is the next test's).
    assert!(t.elapsed().as_secs() < 600);
}

#[test]
fn unbounded_memory_growth_hits_the_memory_limit() {
    let e = hostile(
        "oom",
        "",
        Limits {
            max_memory_bytes: 64 << 20,
            ..Limits::default()
        },
    );
    match e {
        SandboxError::MemoryLimit { limit, requested } => {
            assert_eq!(limit, 64 << 20);
            assert!(requested > limit);
        }
        e => panic!("wrong error kind: {e}"),
    }
}

#[test]
fn too_much_output_hits_the_output_limit() {
    let e = hostile(
        "big",
        r#", "bytes": 4194304"#,
        Limits {
            max_output_bytes: 1 << 20,
            ..Limits::default()
        },
    );
    assert!(
        matches!(
            e,
            SandboxError::OutputLimit {
                limit: 1048576,
                produced: 4194304
            }
        ),
        "{e}"
    );
}

#[test]
fn a_panic_is_a_trap_that_shows_the_panic_message() {
    let e = hostile("panic", "", Limits::default());
    match &e {
        SandboxError::Trap {
            call, guest_log, ..
        } => {
            assert_eq!(*call, "push");
            assert!(
                guest_log
                    .iter()
                    .any(|l| l.contains("deliberate panic in batch 1")),
                "{guest_log:?}"
            );
        }
        e => panic!("wrong error kind: {e}"),
    }
    assert!(
        e.to_string().contains("deliberate panic"),
        "message not shown: {e}"
    );
}

#[test]
fn bytes_that_are_not_arrow_ipc_are_bad_output() {
    let e = hostile("garbage", "", Limits::default());
    assert!(
        matches!(
            e,
            SandboxError::BadOutput {
                batch: 0,
                len: 31,
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn batches_with_disagreeing_schemas_are_rejected() {
    let e = hostile("schema_flip", "", Limits::default());
    match e {
        SandboxError::SchemaMismatch {
            batch,
            expected,
            got,
        } => {
            assert_eq!(batch, 1);
            assert_ne!(expected, got);
            assert!(
                expected.contains("Utf8") && got.contains("Int64"),
                "{expected} / {got}"
            );
        }
        e => panic!("wrong error kind: {e}"),
    }
}

#[test]
fn a_guest_error_is_reported_as_the_transforms_own() {
    let e = hostile("fail", "", Limits::default());
    assert!(
        matches!(&e, SandboxError::Guest { call: "push", message, .. } if message.contains("refuses batch 1")),
        "{e}"
    );
}

#[test]
fn fuel_bounds_cpu_deterministically() {
    let e = hostile(
        "spin",
        "",
        Limits {
            fuel: Some(5_000_000),
            ..Limits::default()
        },
    );
    assert!(
        matches!(e, SandboxError::FuelExhausted { fuel: 5_000_000 }),
        "{e}"
    );
    // Metered runs of a real transform consume the same fuel every time.
    let dir = tempfile::tempdir().unwrap();
    let slice = sample_slice(dir.path());
    let fuel: Vec<Option<u64>> = (0..2)
        .map(|_| {
            wasm_run(
                &common::sandbox_with(Limits {
                    fuel: Some(u64::MAX / 2),
                    ..Limits::default()
                }),
                "examples/dedup_events",
                &slice,
                "{}",
            )
            .fuel
        })
        .collect();
    assert!(fuel[0].is_some_and(|f| f > 0));
    assert_eq!(fuel[0], fuel[1]);
}

#[test]
fn compiled_code_is_loaded_from_the_cache_the_second_time() {
    let cache = tempfile::tempdir().unwrap();
    let cfg = SandboxConfig {
        cache_dir: Some(cache.path().to_path_buf()),
        ..SandboxConfig::default()
    };
    let bytes = common::guest_bytes("examples/clean_orders");
    let first = Sandbox::new(cfg.clone()).unwrap().load(&bytes).unwrap();
    assert_eq!(first.cache, CacheOutcome::Miss);
    // A new engine (as in a new process) finds the compiled code on disk.
    let sandbox = Sandbox::new(cfg).unwrap();
    let second = sandbox.load(&bytes).unwrap();
    assert_eq!(second.cache, CacheOutcome::Hit);
    assert_eq!(first.digest, second.digest);
    // And the cached code runs.
    let dir = tempfile::tempdir().unwrap();
    let slice = sample_slice(dir.path());
    let mut inst = sandbox.instantiate(&second).unwrap();
    assert!(run_over(&mut inst, &slice, "{}").0.rows_out > 0);
    // A different fingerprint (fuel metering) does not reuse it.
    let metered = SandboxConfig {
        cache_dir: Some(cache.path().to_path_buf()),
        limits: Limits {
            fuel: Some(1 << 40),
            ..Limits::default()
        },
        ..SandboxConfig::default()
    };
    assert_eq!(
        Sandbox::new(metered).unwrap().load(&bytes).unwrap().cache,
        CacheOutcome::Miss
    );
}

fn tiny_context() -> GuestContext {
    GuestContext {
        slice_id: "s".into(),
        logical_date: None,
        params: "{}".into(),
        input_schema: Arc::new(Schema::new(vec![Field::new("x", DataType::Int64, true)])),
        batch_rows: 1,
    }
}

#[test]
fn the_memory_limit_covers_all_of_a_guests_memories_together() {
    let component = wat("two-memories.wat");
    // 40 MiB in one core instance, then 40 MiB more in another: fine under
    // 128 MiB, which shows the component itself works...
    let roomy = common::sandbox_with(Limits {
        max_memory_bytes: 128 << 20,
        ..Limits::default()
    });
    let module = roomy.load(&component).unwrap();
    let mut inst = roomy.instantiate(&module).unwrap();
    inst.open(&tiny_context()).unwrap();
    // A guest without the optional `input-encoding` export (built for the
    // plain transform-world) takes every column plain.
    assert!(inst.dictionary_columns().unwrap().is_empty());
    // ...while under 64 MiB each memory alone fits and both together do not.
    let tight = common::sandbox_with(Limits {
        max_memory_bytes: 64 << 20,
        ..Limits::default()
    });
    let module = tight.load(&component).unwrap();
    let mut inst = tight.instantiate(&module).unwrap();
    match inst.open(&tiny_context()) {
        Err(SandboxError::MemoryLimit { limit, requested }) => {
            assert_eq!(limit, 64 << 20);
            // 40 MiB + 40 MiB + the main memory's first page.
            assert_eq!(requested, (80 << 20) + (64 << 10));
        }
        Err(e) => panic!("wrong error kind: {e}"),
        Ok(_) => panic!("two memories held 80 MiB under a 64 MiB limit"),
    }
}

/// A grow that fails is a trap, not -1: told -1, this guest would return
/// ok from `open`.
#[test]
fn a_failed_memory_grow_stops_the_guest() {
    let sandbox = common::sandbox_with(Limits::default());
    let module = sandbox.load(&wat("grow-past-maximum.wat")).unwrap();
    let mut inst = sandbox.instantiate(&module).unwrap();
    match inst.open(&tiny_context()) {
        Err(e) => assert!(e.to_string().contains("growing guest memory failed"), "{e}"),
        Ok(_) => panic!("the guest went on after a failed grow"),
    }
}

#[test]
fn the_number_of_memories_a_guest_defines_is_bounded() {
    let sandbox = common::sandbox_with(Limits::default());
    // 14 memories of a page or so: tiny in bytes, too many in count.
    let module = sandbox.load(&wat("many-memories.wat")).unwrap();
    match sandbox.instantiate(&module) {
        Err(SandboxError::Instantiate(why)) => assert!(why.contains("memory count"), "{why}"),
        Err(e) => panic!("wrong error kind: {e}"),
        Ok(_) => panic!("a guest instantiated 14 memories"),
    }
}

#[test]
fn an_oversized_module_is_refused_before_it_is_read_or_compiled() {
    let cache = tempfile::tempdir().unwrap();
    let sandbox = Sandbox::new(SandboxConfig {
        limits: Limits {
            max_module_bytes: 1 << 20,
            ..Limits::default()
        },
        cache_dir: Some(cache.path().to_path_buf()),
        ..SandboxConfig::default()
    })
    .unwrap();
    let path = common::guest("examples/clean_orders");
    let bytes = std::fs::read(&path).unwrap();
    assert!(bytes.len() > 1 << 20);
    let t = std::time::Instant::now();
    let e = sandbox
        .load(&bytes)
        .err()
        .expect("oversized module admitted");
    // Compiling it takes seconds; the size check takes nothing.
    assert!(t.elapsed() < std::time::Duration::from_millis(500));
    assert!(
        matches!(e, SandboxError::ModuleTooLarge { bytes: n, limit } if n == bytes.len() && limit == 1 << 20),
        "{e}"
    );
    let msg = e.to_string();
    assert!(
        msg.contains(&format!("({} bytes)", bytes.len()))
            && msg.contains("over the 1 MiB limit")
            && msg.contains("--max-module-mb"),
        "{msg}"
    );
    assert!(std::fs::read_dir(cache.path()).unwrap().next().is_none());
    // Reading a module file applies the limit before reading it.
    assert!(matches!(
        sandbox.read_module(&path),
        Err(SandboxError::ModuleTooLarge { .. })
    ));
    // Under the default 64 MiB limit, 64 MiB + 1 of anything is refused by
    // size, not parsed.
    let e = common::sandbox_with(Limits::default())
        .load(&vec![0u8; (64 << 20) + 1])
        .err()
        .expect("admitted");
    assert!(matches!(e, SandboxError::ModuleTooLarge { .. }), "{e}");
}

#[test]
fn a_forbidden_import_is_refused_before_anything_is_compiled() {
    let cache = tempfile::tempdir().unwrap();
    let sandbox = Sandbox::new(SandboxConfig {
        cache_dir: Some(cache.path().to_path_buf()),
        ..SandboxConfig::default()
    })
    .unwrap();
    for file in ["import-random.wat", "import-wall-clock.wat"] {
        assert!(
            matches!(
                sandbox.load(&wat(file)),
                Err(SandboxError::Forbidden { .. })
            ),
            "{file}"
        );
    }
    // Compiling would have left its code in the cache.
    let compiled = cache.path().join("compiled");
    assert!(
        !compiled.exists() || std::fs::read_dir(&compiled).unwrap().next().is_none(),
        "a forbidden module was compiled"
    );
}

#[test]
fn compilation_has_a_wall_clock_budget() {
    let sandbox = Sandbox::new(SandboxConfig {
        limits: Limits {
            compile_deadline_ms: 1,
            ..Limits::default()
        },
        cache_dir: None,
        ..SandboxConfig::default()
    })
    .unwrap();
    let e = sandbox
        .load(&common::guest_bytes("examples/clean_orders"))
        .err()
        .expect("compiled within 1 ms");
    assert!(matches!(e, SandboxError::CompileDeadline { ms: 1 }), "{e}");
    assert!(e.to_string().contains("--compile-deadline-ms"), "{e}");
}

/// The compiled-code entries in a cache directory.
fn cache_entries(cache: &std::path::Path) -> std::collections::BTreeSet<std::path::PathBuf> {
    std::fs::read_dir(cache.join("compiled"))
        .map(|d| {
            d.map(|e| e.unwrap().path())
                .filter(|p| p.extension().is_some_and(|x| x == "cwasm"))
                .collect()
        })
        .unwrap_or_default()
}

/// Let the owner write a (read-only) cache entry in place.
fn make_writable(entry: &std::path::Path) {
    let mut p = std::fs::metadata(entry).unwrap().permissions();
    #[allow(clippy::permissions_set_readonly_false)]
    p.set_readonly(false);
    std::fs::set_permissions(entry, p).unwrap();
}

#[test]
fn a_cache_entry_copied_over_another_modules_is_not_run() {
    let cache = tempfile::tempdir().unwrap();
    let cfg = SandboxConfig {
        cache_dir: Some(cache.path().to_path_buf()),
        ..SandboxConfig::default()
    };
    let a = common::guest_bytes("examples/daily_revenue");
    let b = common::guest_bytes("examples/clean_orders");
    let sandbox = Sandbox::new(cfg.clone()).unwrap();
    assert_eq!(sandbox.load(&a).unwrap().cache, CacheOutcome::Miss);
    let a_entries = cache_entries(cache.path());
    assert_eq!(sandbox.load(&b).unwrap().cache, CacheOutcome::Miss);
    let b_entry = cache_entries(cache.path())
        .difference(&a_entries)
        .next()
        .cloned()
        .unwrap();
    // The attack: A's compiled code under B's name (entries are created
    // read-only; their owner can still change that).
    make_writable(&b_entry);
    std::fs::copy(a_entries.first().unwrap(), &b_entry).unwrap();
    // A new engine, as in the next `idem exec`.
    let sandbox = Sandbox::new(cfg.clone()).unwrap();
    let loaded = sandbox.load(&b).unwrap();
    assert_eq!(
        loaded.cache,
        CacheOutcome::Miss,
        "the copied entry was used"
    );
    // B's own code runs: its output is clean_orders', as computed natively.
    let dir = tempfile::tempdir().unwrap();
    let slice = sample_slice(dir.path());
    let params = r#"{"min_amount": 250}"#;
    let mut inst = sandbox.instantiate(&loaded).unwrap();
    let (wasm, _) = run_over(&mut inst, &slice, params);
    let (native, _) = run_over(
        &mut Native::<clean_orders::CleanOrders>::default(),
        &slice,
        params,
    );
    assert_eq!(wasm.output_digest, native.output_digest);
    // The entry now holds B's own code again.
    assert_eq!(
        Sandbox::new(cfg).unwrap().load(&b).unwrap().cache,
        CacheOutcome::Hit
    );
}

#[test]
fn a_corrupted_cache_entry_is_recompiled_not_loaded() {
    let cache = tempfile::tempdir().unwrap();
    let cfg = SandboxConfig {
        cache_dir: Some(cache.path().to_path_buf()),
        ..SandboxConfig::default()
    };
    let bytes = common::guest_bytes("examples/dedup_events");
    assert_eq!(
        Sandbox::new(cfg.clone())
            .unwrap()
            .load(&bytes)
            .unwrap()
            .cache,
        CacheOutcome::Miss
    );
    let entry = cache_entries(cache.path()).pop_first().unwrap();
    // One bit in the middle of the entry: inside the machine code, where
    // wasmtime's own header checks do not look.
    let mut code = std::fs::read(&entry).unwrap();
    let mid = code.len() / 2;
    code[mid] ^= 0x01;
    make_writable(&entry);
    std::fs::write(&entry, &code).unwrap();
    let sandbox = Sandbox::new(cfg).unwrap();
    let loaded = sandbox.load(&bytes).unwrap();
    assert_eq!(
        loaded.cache,
        CacheOutcome::Miss,
        "corrupted code was loaded"
    );
    let dir = tempfile::tempdir().unwrap();
    let slice = sample_slice(dir.path());
    let mut inst = sandbox.instantiate(&loaded).unwrap();
    assert_eq!(run_over(&mut inst, &slice, "{}").0.rows_in, 12_345);
}

#[cfg(unix)]
#[test]
fn a_cache_directory_others_can_write_is_not_used() {
    use std::os::unix::fs::PermissionsExt as _;
    let cache = tempfile::tempdir().unwrap();
    let cfg = SandboxConfig {
        cache_dir: Some(cache.path().to_path_buf()),
        ..SandboxConfig::default()
    };
    let component = wat("two-memories.wat");
    std::fs::set_permissions(cache.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let loaded = Sandbox::new(cfg.clone()).unwrap().load(&component).unwrap();
    assert_eq!(loaded.cache, CacheOutcome::Refused);
    // Nothing was read from it or written to it.
    assert!(std::fs::read_dir(cache.path()).unwrap().next().is_none());
    // Once only its owner may write it, it is used.
    std::fs::set_permissions(cache.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    assert_eq!(
        Sandbox::new(cfg.clone())
            .unwrap()
            .load(&component)
            .unwrap()
            .cache,
        CacheOutcome::Miss
    );
    assert_eq!(
        Sandbox::new(cfg).unwrap().load(&component).unwrap().cache,
        CacheOutcome::Hit
    );
}

// Guest output is untrusted input to the host: every output type is either
// digested as a function of its logical rows or refused with a typed error,
// never a host panic; output size counts logical bytes.

/// Run the hostile guest in `mode` over 3,000 rows (three pushes).
fn hostile_ok(mode: &str) -> Outcome {
    let sandbox = common::sandbox_with(Limits::default());
    let dir = tempfile::tempdir().unwrap();
    let files = common::orders(dir.path(), "2026-10-01", 3_000, 1);
    let slice = ResolvedSlice::from_files("s", &files).unwrap();
    wasm_run(
        &sandbox,
        HOSTILE,
        &slice,
        &format!(r#"{{"mode": "{mode}"}}"#),
    )
}

fn one_column(name: &str, column: arrow::array::ArrayRef) -> RecordBatch {
    let schema = Schema::new(vec![Field::new(name, column.data_type().clone(), true)]);
    RecordBatch::try_new(Arc::new(schema), vec![column]).unwrap()
}

/// The digest of `batch` output three times (once per push).
fn thrice(batch: &RecordBatch) -> Digest {
    idem::digest::of_batches(&[batch.clone(), batch.clone(), batch.clone()]).unwrap()
}

#[test]
fn a_dictionary_column_digests_like_the_same_plain_rows() {
    use arrow::array::{DictionaryArray, Int32Array, StringArray};
    let o = hostile_ok("dictionary");
    assert_eq!(o.rows_out, 15);
    let keys = Int32Array::from(vec![Some(0), Some(1), None, Some(0), Some(2)]);
    let values = Arc::new(StringArray::from(vec!["x", "y", "z"]));
    let dict = DictionaryArray::<arrow::datatypes::Int32Type>::try_new(keys, values).unwrap();
    assert_eq!(o.output_digest, thrice(&one_column("d", Arc::new(dict))));
    let plain = StringArray::from(vec![Some("x"), Some("y"), None, Some("x"), Some("z")]);
    assert_eq!(o.output_digest, thrice(&one_column("d", Arc::new(plain))));
}

#[test]
fn a_duration_column_is_digested() {
    use arrow::array::DurationMillisecondArray;
    let o = hostile_ok("duration");
    let d = DurationMillisecondArray::from(vec![Some(1), None, Some(-5), Some(1000)]);
    assert_eq!(o.output_digest, thrice(&one_column("d", Arc::new(d))));
    let other = DurationMillisecondArray::from(vec![Some(1), None, Some(-5), Some(1001)]);
    assert_ne!(o.output_digest, thrice(&one_column("d", Arc::new(other))));
}

#[test]
fn a_map_column_is_digested_whatever_its_entry_names() {
    use arrow::array::{Int64Builder, MapBuilder, MapFieldNames, StringBuilder};
    let o = hostile_ok("map");
    // Parquet writers name the entries `key_value`/`key`/`value`; arrow's
    // builder (the guest's) `entries`/`keys`/`values`: same rows, same digest.
    let names = MapFieldNames {
        entry: "key_value".into(),
        key: "key".into(),
        value: "value".into(),
    };
    let mut m = MapBuilder::new(Some(names), StringBuilder::new(), Int64Builder::new());
    m.keys().append_value("a");
    m.values().append_value(1);
    m.keys().append_value("b");
    m.values().append_null();
    m.append(true).unwrap();
    m.append(false).unwrap();
    m.append(true).unwrap();
    m.keys().append_value("c");
    m.values().append_value(3);
    m.append(true).unwrap();
    assert_eq!(
        o.output_digest,
        thrice(&one_column("m", Arc::new(m.finish())))
    );
}

#[test]
fn a_list_of_structs_is_digested_by_its_values_not_what_lies_under_nulls() {
    use arrow::array::{Int32Array, ListArray, StringArray, StructArray};
    use arrow::buffer::{NullBuffer, OffsetBuffer, ScalarBuffer};
    use arrow::datatypes::Fields;
    let o = hostile_ok("list_struct");
    // The same rows as the guest's, with zeros (not junk) under the nulls
    // and the list offsets starting at 2 instead of 0.
    let fields = Fields::from(vec![
        Field::new("a", DataType::Int32, true),
        Field::new("b", DataType::Utf8, true),
    ]);
    let a = Int32Array::from(vec![Some(9), Some(9), Some(1), None, None, Some(2)]);
    let b = StringArray::from(vec![None, None, Some("p"), None, Some("q"), None]);
    let entries = StructArray::try_new(
        fields.clone(),
        vec![Arc::new(a), Arc::new(b)],
        Some(NullBuffer::from(vec![true, true, true, false, true, true])),
    )
    .unwrap();
    let list = ListArray::try_new(
        Arc::new(Field::new("element", DataType::Struct(fields), true)),
        OffsetBuffer::new(ScalarBuffer::from(vec![2, 5, 5, 5, 6])),
        Arc::new(entries),
        Some(NullBuffer::from(vec![true, false, true, true])),
    )
    .unwrap();
    assert_eq!(o.output_digest, thrice(&one_column("l", Arc::new(list))));
}

#[test]
fn a_union_column_is_refused_naming_the_column_and_the_fix() {
    let e = hostile("union", "", Limits::default());
    match &e {
        SandboxError::UnsupportedOutputType {
            column,
            data_type,
            fix,
        } => {
            assert_eq!(column, "u");
            assert!(data_type.contains("Union"), "{data_type}");
            assert!(fix.contains("nullable column"), "{fix}");
        }
        e => panic!("wrong error kind: {e}"),
    }
    assert!(e.to_string().contains("column `u`"), "{e}");
}

#[test]
fn a_malformed_ipc_schema_is_bad_output_not_a_host_panic() {
    let e = hostile("bad_schema", "", Limits::default());
    match &e {
        SandboxError::BadOutput {
            batch: 0, detail, ..
        } => {
            assert!(detail.contains("7-bit integer"), "{detail}")
        }
        e => panic!("wrong error kind: {e}"),
    }
}

#[test]
fn a_view_column_counts_its_logical_bytes_against_the_output_limit() {
    // What the guest returns: 20,000 views of the same 4,096 bytes.
    let views = arrow::array::StringViewArray::try_new(
        arrow::buffer::ScalarBuffer::from(vec![
            (u128::from(u32::from_le_bytes(*b"aaaa")) << 32)
                | 4096;
            20_000
        ]),
        vec![arrow::buffer::Buffer::from_vec(vec![b'a'; 4096])],
        None,
    )
    .unwrap();
    let encoded = idem_guest::ipc::encode(Some(&one_column("v", Arc::new(views)))).unwrap();
    // Well under the limit on the wire...
    assert!(encoded.len() < 1 << 19, "{} bytes encoded", encoded.len());
    let e = hostile(
        "views",
        "",
        Limits {
            max_output_bytes: 1 << 20,
            ..Limits::default()
        },
    );
    // ...but 80 MB of strings once the views are followed.
    match e {
        SandboxError::OutputLimit { limit, produced } => {
            assert_eq!(limit, 1 << 20);
            assert!(produced >= 20_000 * 4096, "{produced}");
        }
        e => panic!("wrong error kind: {e}"),
    }
}

/// The service's engine (wasmtime's pooling allocator, `idem serve`) is the
/// CLI's engine in every way a run can observe: the same digests, the same
/// memory limit (the tenant's, not a slot's), the same memory-count
/// bound (checked on load); and a pool with no free slot refuses an instance by naming the
/// pool, until one is given back.
#[test]
fn a_pooled_engine_runs_and_refuses_exactly_as_the_plain_one() {
    use idem::sandbox::Pool;
    let pooled = |limits: Limits, instances: u32| {
        Sandbox::new(SandboxConfig {
            pool: Some(Pool {
                instances,
                max_memory_bytes: 512 << 20,
            }),
            limits,
            cache_dir: Some(common::test_cache()),
            ..SandboxConfig::default()
        })
        .unwrap()
    };
    let dir = tempfile::tempdir().unwrap();
    let slice = sample_slice(dir.path());
    let sandbox = pooled(Limits::default(), 2);
    for (rel, params) in [
        ("examples/clean_orders", r#"{"min_amount": 250}"#),
        ("examples/daily_revenue", "{}"),
    ] {
        // Twice: the second instance reuses the first one's slot.
        let a = wasm_run(&sandbox, rel, &slice, params);
        let b = wasm_run(&sandbox, rel, &slice, params);
        let plain = wasm_run(
            &common::sandbox_with(Limits::default()),
            rel,
            &slice,
            params,
        );
        assert_eq!(a.output_digest, plain.output_digest, "{rel}");
        assert_eq!(b.output_digest, plain.output_digest, "{rel}");
    }

    // A tenant limit under the slot size: the tenant's limit fires, as a
    // memory limit, both for one memory and for two together.
    let tight = pooled(
        Limits {
            max_memory_bytes: 64 << 20,
            ..Limits::default()
        },
        2,
    );
    let module = tight.load(&wat("two-memories.wat")).unwrap();
    match tight.instantiate(&module).unwrap().open(&tiny_context()) {
        Err(SandboxError::MemoryLimit { limit, .. }) => assert_eq!(limit, 64 << 20),
        Err(e) => panic!("wrong error kind: {e}"),
        Ok(_) => panic!("two memories held 80 MiB under a 64 MiB limit"),
    }
    let hostile = tight.load(&common::guest_bytes(HOSTILE)).unwrap();
    let files = common::orders(dir.path(), "2026-10-02", 3_000, 1);
    let bomb_slice = ResolvedSlice::from_files("s", &files).unwrap();
    let reader = bomb_slice.reader(1000).unwrap();
    let c = ctx(&bomb_slice, reader.schema(), r#"{"mode": "oom"}"#, 1000);
    match execute(
        &mut tight.instantiate(&hostile).unwrap(),
        &c,
        |c| reader.narrow(c),
        |_| Ok(()),
    ) {
        Err(ExecError::Sandbox(SandboxError::MemoryLimit { limit, requested })) => {
            assert_eq!(limit, 64 << 20);
            assert!(requested > limit);
        }
        Err(e) => panic!("not a memory limit: {e}"),
        Ok(o) => panic!("a memory bomb finished: {o:?}"),
    }
    // Too many memories: refused earlier than by the plain engine, when the
    // module is loaded (an upload to the service), never instantiated.
    match tight.load(&wat("many-memories.wat")) {
        Err(SandboxError::Compile(why)) => {
            assert!(why.contains("14 Wasm linear memories"), "{why}")
        }
        Err(e) => panic!("wrong error kind: {e}"),
        Ok(_) => panic!("a guest with 14 memories was admitted"),
    }

    // A memory limit larger than the slots is refused up front (a memory
    // would otherwise grow past its slot and fail as a bare trap).
    match Sandbox::new(SandboxConfig {
        pool: Some(Pool {
            instances: 1,
            max_memory_bytes: 64 << 20,
        }),
        ..SandboxConfig::default()
    }) {
        Err(e) => assert!(
            e.to_string().contains("instance pool's memory slots"),
            "{e}"
        ),
        Ok(_) => panic!("a 512 MiB limit was accepted over 64 MiB slots"),
    }
    assert!(
        tight
            .with_limits(Limits {
                max_memory_bytes: 1 << 30,
                ..Limits::default()
            })
            .is_err()
    );

    // A guest with 34,000 functions in a table (its instance context
    // ~1.1 MiB, over wasmtime's default 1 MiB bound for a pooled
    // instance) runs in both engines, as the table-element limit allows.
    let side = "(core module $Side\n    (memory (export \"memory\") 640))";
    let text = String::from_utf8(wat("two-memories.wat")).unwrap();
    assert!(text.contains(side));
    let funcs: String = (0..34_000).map(|i| format!("(func $f{i})")).collect();
    let refs: String = (0..34_000).map(|i| format!(" $f{i}")).collect();
    let big = text.replace(
        side,
        &format!(
            "(core module $Side (memory (export \"memory\") 640) (table 34000 funcref) {funcs} (elem (i32.const 0) func{refs}))"
        ),
    );
    let roomy = Limits {
        max_memory_bytes: 128 << 20,
        ..Limits::default()
    };
    for engine in [
        pooled(roomy.clone(), 1),
        common::sandbox_with(roomy.clone()),
    ] {
        let m = engine.load(big.as_bytes()).unwrap();
        engine
            .instantiate(&m)
            .unwrap()
            .open(&tiny_context())
            .unwrap();
    }

    // One slot: a second live guest is refused, naming the pool; the slot
    // comes back when the first is dropped.
    let one = pooled(Limits::default(), 1);
    let m = one
        .load(&common::guest_bytes("examples/clean_orders"))
        .unwrap();
    let first = one.instantiate(&m).unwrap();
    match one.instantiate(&m) {
        Err(SandboxError::Instantiate(why)) => {
            assert!(why.contains("concurrent") || why.contains("pool"), "{why}")
        }
        Err(e) => panic!("wrong error kind: {e}"),
        Ok(_) => panic!("two guests alive in a one-slot pool"),
    }
    drop(first);
    let mut again = one.instantiate(&m).unwrap();
    assert!(run_over(&mut again, &slice, "{}").0.rows_out > 0);
}

/// Run the hostile guest in echo mode declaring `columns`; the outcome and
/// the batches it returned.
fn echo_declaring(columns: serde_json::Value) -> Result<(Outcome, Vec<RecordBatch>), ExecError> {
    echo_taking(columns, serde_json::json!([]))
}

/// Run the hostile guest in echo mode declaring `columns`, and taking
/// `dictionaries` dictionary-encoded; the outcome and its batches.
fn echo_taking(
    columns: serde_json::Value,
    dictionaries: serde_json::Value,
) -> Result<(Outcome, Vec<RecordBatch>), ExecError> {
    let sandbox = common::sandbox_with(Limits::default());
    let module = sandbox.load(&common::guest_bytes(HOSTILE)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let files = common::orders(dir.path(), "2026-10-01", 2_500, 2);
    let slice = ResolvedSlice::from_files("s", &files).unwrap();
    let reader = slice.reader(1000).unwrap();
    let params =
        serde_json::json!({"mode": "echo", "columns": columns, "dictionaries": dictionaries})
            .to_string();
    let c = ctx(&slice, reader.schema(), &params, 1000);
    let mut inst = sandbox.instantiate(&module).unwrap();
    let mut out = Vec::new();
    let o = execute(
        &mut inst,
        &c,
        |c| reader.narrow(c),
        |b| {
            out.push(b.clone());
            Ok(())
        },
    )?;
    Ok((o, out))
}

/// A transform that declares the columns it reads gets exactly those, in
/// its order, in every batch (the rest are never decoded), while
/// `input-schema` still shows the whole input; the declaration is in the
/// outcome (and so the manifest). Wrong declarations fail the run, naming
/// the column.
#[test]
fn declared_columns_are_all_a_transform_gets_and_wrong_ones_fail() {
    let (o, out) = echo_declaring(serde_json::json!(["quantity", "customer"])).unwrap();
    assert_eq!(o.rows_in, 2_500);
    assert_eq!(
        o.columns.as_deref(),
        Some(&["quantity".to_string(), "customer".to_string()][..])
    );
    let rows: usize = out.iter().map(|b| b.num_rows()).sum();
    assert_eq!(rows, 2_500);
    for b in &out {
        let schema = b.schema();
        let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
        assert_eq!(names, ["quantity", "customer"]);
    }
    // Undeclared: everything, in the input's order.
    let (o, out) = echo_declaring(serde_json::Value::Null).unwrap();
    assert!(o.columns.is_none());
    assert_eq!(out[0].num_columns(), 6);

    for (declared, says) in [
        (
            serde_json::json!(["amount", "no_such_column"]),
            "no column `no_such_column`",
        ),
        (
            serde_json::json!(["amount", "amount"]),
            "`amount` is declared twice",
        ),
        (serde_json::json!([]), "an empty list"),
    ] {
        match echo_declaring(declared.clone()) {
            Err(e @ ExecError::Columns(_)) => {
                let m = e.to_string();
                assert!(m.contains(says), "{declared}: {m}");
            }
            Err(e) => panic!("{declared}: wrong error: {e}"),
            Ok(_) => panic!("{declared} was accepted"),
        }
    }
}

/// A transform that takes a string column dictionary-encoded
/// (`input-encoding`) gets it as `Dictionary(Int32, Utf8)` in every batch,
/// with the same values (its echo digests like the plain echo); other
/// columns stay as they are; the outcome (and so the manifest) records it.
/// Naming a column it does not read, a non-string column or one twice
/// fails the run, naming the column.
#[test]
fn columns_taken_dictionary_encoded_arrive_so_and_wrong_ones_fail() {
    use arrow::datatypes::DataType;
    let dict = DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8));
    let cols = serde_json::json!(["customer", "quantity"]);
    let (plain, plain_out) = echo_declaring(cols.clone()).unwrap();
    assert!(plain.dictionaries.is_empty());
    assert_eq!(plain_out[0].column(0).data_type(), &DataType::Utf8);
    let (o, out) = echo_taking(cols, serde_json::json!(["customer"])).unwrap();
    assert_eq!(o.dictionaries, ["customer".to_string()]);
    assert_eq!(o.rows_out, 2_500);
    for b in &out {
        assert_eq!(b.column(0).data_type(), &dict);
        assert_eq!(b.column(1).data_type(), &DataType::Int64);
    }
    assert_eq!(
        o.output_digest, plain.output_digest,
        "the same rows, whatever the encoding"
    );
    // Without a column list: every column, the named one encoded.
    let (o, out) = echo_taking(serde_json::Value::Null, serde_json::json!(["customer"])).unwrap();
    assert_eq!(out[0].num_columns(), 6);
    let at = out[0].schema().index_of("customer").unwrap();
    assert_eq!(out[0].column(at).data_type(), &dict);
    assert_eq!(o.dictionaries, ["customer".to_string()]);

    let many: Vec<String> = (0..10_001).map(|i| format!("c{i}")).collect();
    for (columns, dictionaries, says) in [
        (
            serde_json::Value::Null,
            serde_json::json!(many),
            "10001 names, more than the 10000",
        ),
        (
            serde_json::json!(["amount", "quantity"]),
            serde_json::json!(["customer"]),
            "`customer` is not among the columns the transform reads",
        ),
        (
            serde_json::json!(["customer", "amount"]),
            serde_json::json!(["amount"]),
            "`amount` is Float64; only string (Utf8) and binary columns",
        ),
        (
            serde_json::Value::Null,
            serde_json::json!(["customer", "customer"]),
            "`customer` is named twice",
        ),
    ] {
        match echo_taking(columns, dictionaries) {
            Err(e @ ExecError::Columns(_)) => {
                let m = e.to_string();
                assert!(m.contains(says), "{says}: {m}");
                assert!(m.contains("dictionary-encoded"), "{m}");
            }
            Err(e) => panic!("{says}: wrong error: {e}"),
            Ok(_) => panic!("{says}: accepted"),
        }
    }
    // A guest that traps while naming them fails the run as a trap in
    // that call, with its panic message (and, as every hostile run, leaves
    // its instance poisoned and the host working).
    match hostile("echo", r#", "dictionaries_panic": true"#, Limits::default()) {
        e @ SandboxError::Trap { .. } => {
            let m = e.to_string();
            assert!(m.contains("`dictionary-columns`"), "{m}");
            assert!(m.contains("deliberate panic naming dictionaries"), "{m}");
        }
        e => panic!("wrong error: {e}"),
    }
}

/// A module built for the previous contract (idem:transform@0.1.0) is
/// refused at load, saying to rebuild it.
#[test]
fn a_module_built_for_the_old_contract_is_refused_with_the_fix() {
    let text = String::from_utf8(wat("two-memories.wat"))
        .unwrap()
        .replace("transform/transform@0.2.0", "transform/transform@0.1.0")
        .replace(
            "(result (result (option (list string)) (error string)))",
            "(result (result (error string)))",
        );
    let sandbox = common::sandbox_with(Limits::default());
    match sandbox.load(text.as_bytes()) {
        Err(SandboxError::NotATransform(why)) => {
            assert!(
                why.contains("built for idem:transform/transform@0.1.0"),
                "{why}"
            );
            assert!(why.contains("rebuild"), "{why}");
        }
        Err(e) => panic!("wrong error kind: {e}"),
        Ok(_) => panic!("a 0.1.0 module was admitted"),
    }
    // A real idem-guest module also imports the host interface (its log):
    // the old version of that is named the same way, not as forbidden.
    let with_host = text.replacen(
        "(component",
        "(component\n  (import \"idem:transform/host@0.1.0\" (instance))",
        1,
    );
    match sandbox.load(with_host.as_bytes()) {
        Err(SandboxError::NotATransform(why)) => {
            assert!(why.contains("built for idem:transform/host@0.1.0"), "{why}");
            assert!(why.contains("rebuild"), "{why}");
        }
        Err(e) => panic!("wrong error kind: {e}"),
        Ok(_) => panic!("a 0.1.0 module was admitted"),
    }
}

/// A 200-byte stream that claims 2^31-1 rows and no columns: refused from
/// its metadata (it used to reach the commit, which allocated a column of
/// 2^31-1 values and aborted the process).
#[test]
fn a_batch_that_claims_billions_of_rows_is_refused_from_its_metadata() {
    match hostile("rows_bomb", "", Limits::default()) {
        SandboxError::RowLimit {
            rows, limit, scope, ..
        } => {
            assert_eq!((rows, limit), ((1 << 31) - 1, 1 << 24));
            assert_eq!(scope, "in output batch 0");
        }
        e => panic!("wrong error kind: {e}"),
    }
    // Under the batch limit, rows without columns are still refused: no
    // table holds them.
    let e = hostile("rows_bomb", r#", "rows": 5"#, Limits::default());
    assert!(
        matches!(&e, SandboxError::BadOutput { detail, .. } if detail.contains("5 rows with no columns")),
        "{e}"
    );
}

/// Null columns have no buffers: rows cost nothing in bytes, so the run's
/// row limit is what stops them.
#[test]
fn rows_without_bytes_count_against_the_runs_row_limit() {
    let e = hostile(
        "null_rows",
        r#", "rows": 600000"#,
        Limits {
            max_output_rows: 1_000_000,
            ..Limits::default()
        },
    );
    match e {
        SandboxError::RowLimit {
            rows, limit, scope, ..
        } => {
            // The second batch takes the run to 1.2M rows.
            assert_eq!(
                (rows, limit, scope.as_str()),
                (1_200_000, 1_000_000, "over the run")
            );
        }
        e => panic!("wrong error kind: {e}"),
    }
    // And each of those rows costs at least 4 bytes of the output limit
    // (the Parquet writer's levels): refused at the first batch.
    let e = hostile(
        "null_rows",
        r#", "rows": 600000"#,
        Limits {
            max_output_bytes: 1_000_000,
            ..Limits::default()
        },
    );
    assert!(
        matches!(
            e,
            SandboxError::OutputLimit {
                limit: 1_000_000,
                produced: 2_400_000
            }
        ),
        "{e}"
    );
}

/// Whatever text a guest supplies is cut at the boundary, saying how much.
#[test]
fn guest_text_of_any_size_is_cut_at_the_boundary() {
    let cut = |m: &str| m.len() < 2_100 && m.contains("more bytes cut]");
    match hostile("long_error", "", Limits::default()) {
        SandboxError::Guest { message, .. } => {
            assert!(cut(&message), "{} bytes", message.len());
            assert!(
                message.ends_with("… [99997952 more bytes cut]"),
                "{}",
                &message[2000..]
            );
        }
        e => panic!("wrong error kind: {e}"),
    }
    match hostile("long_panic", r#", "len": 10000000"#, Limits::default()) {
        e @ SandboxError::Trap { .. } => {
            let text = e.to_string();
            assert!(text.len() < 4_096, "{} bytes", text.len());
            assert!(text.contains("PPPP"), "{}", &text[..200]);
        }
        e => panic!("wrong error kind: {e}"),
    }
    // A column name past 1 KiB is refused outright (names go into the
    // table's schema and every commit's record)...
    match hostile("long_columns", r#", "len": 1000000"#, Limits::default()) {
        SandboxError::BadOutput { batch, detail, .. } => {
            assert_eq!(batch, 0);
            assert!(
                detail.starts_with("a column name of 1000001 bytes"),
                "{}",
                &detail[..100]
            );
            assert!(detail.len() < 200, "{}", detail.len());
        }
        e => panic!("wrong error kind: {e}"),
    }
    // ...and two of 1,001 bytes that differ are a schema mismatch whose
    // text is cut so that its fix survives.
    match hostile("long_columns", r#", "len": 1000"#, Limits::default()) {
        SandboxError::SchemaMismatch {
            batch,
            expected,
            got,
        } => {
            assert_eq!(batch, 1);
            let text = SandboxError::SchemaMismatch {
                batch,
                expected: expected.clone(),
                got: got.clone(),
            }
            .to_string();
            // The fix, which comes last, fits in what a run record keeps.
            assert!(
                text.len() < 4_096 && text.ends_with("the same schema"),
                "{}",
                text.len()
            );
            assert!(
                expected.len() <= 1_100 && got.len() <= 1_100,
                "{} / {}",
                expected.len(),
                got.len()
            );
        }
        e => panic!("wrong error kind: {e}"),
    }
}

/// The log keeps at most 1,000 lines of at most 4 KiB each, whatever the
/// guest writes.
#[test]
fn the_guest_log_is_capped_in_lines_and_bytes() {
    let sandbox = common::sandbox_with(Limits::default());
    let module = sandbox.load(&common::guest_bytes(HOSTILE)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let slice = ResolvedSlice::from_files("s", &common::orders(dir.path(), "2026-10-01", 3_000, 1))
        .unwrap();
    let mut inst = sandbox.instantiate(&module).unwrap();
    let params = r#"{"mode": "long_log", "lines": 600, "len": 100000}"#;
    let (o, _) = run_over(&mut inst, &slice, params);
    assert_eq!(o.rows_out, 3_000);
    let log = inst.log();
    assert_eq!(log.len(), 1_000, "3 batches x 600 lines, capped");
    assert!(
        log.iter()
            .all(|l| l.message.len() < 4_200 && l.message.ends_with("more bytes cut]"))
    );
}

/// The deadline is the run's, not a call's: ten pushes that each take well
/// under it still hit it together.
#[test]
fn the_deadline_covers_the_whole_run_not_each_call() {
    let dir = tempfile::tempdir().unwrap();
    let slice =
        ResolvedSlice::from_files("s", &common::orders(dir.path(), "2026-10-01", 10_000, 1))
            .unwrap();
    let run = |units: u64, deadline_ms: u64| {
        let sandbox = common::sandbox_with(Limits {
            deadline_ms,
            ..Limits::default()
        });
        let module = sandbox.load(&common::guest_bytes(HOSTILE)).unwrap();
        let reader = slice.reader(1000).unwrap();
        let params = format!(r#"{{"mode": "slow", "ms": {units}}}"#);
        let c = ctx(&slice, reader.schema(), &params, 1000);
        let mut inst = sandbox.instantiate(&module).unwrap();
        let t = std::time::Instant::now();
        let r = execute(&mut inst, &c, |c| reader.narrow(c), |_| Ok(()));
        (r, t.elapsed())
    };
    // Calibrate: the busy work's speed depends on the machine.
    let (r, took) = run(20, 600_000);
    assert_eq!(r.unwrap().batches_in, 10);
    let per_unit = took.as_secs_f64() / 200.0;
    // Each push now takes ~250 ms, under the 400 ms budget; ten take
    // ~2.5 s, which even a machine five times faster than the calibration
    // does not fit in 400 ms.
    let units = ((0.25 / per_unit) as u64).max(1);
    let (r, took) = run(units, 400);
    assert!(
        matches!(
            r,
            Err(ExecError::Sandbox(SandboxError::Deadline { ms: 400 }))
        ),
        "{r:?} after {took:?}"
    );
    // It fired during the pushes, not once they were all done (~2.5 s).
    assert!(took.as_millis() < 2_000, "stopped only after {took:?}");
}

/// `idem run` of the hostile guest in `mode` over 100 orders of one day
/// into a new table: exit code, stderr, the table and the folder holding
/// them (kept alive by the caller).
fn hostile_cli(mode: &str) -> (i32, String, std::path::PathBuf, tempfile::TempDir) {
    let module = common::guest(HOSTILE);
    let dir = tempfile::tempdir().unwrap();
    common::orders(&dir.path().join("orders"), "2026-10-01", 100, 1);
    let table = dir.path().join("t");
    let params = format!(r#"{{"mode": "{mode}"}}"#);
    let args = common::day_args(
        module.to_str().unwrap(),
        dir.path().join("orders").to_str().unwrap(),
        "2026-10-01",
        table.to_str().unwrap(),
        &["--params", &params],
    );
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, _, err) = common::idem(&args);
    (code, err, table, dir)
}

/// `idem run` of a guest whose output claims billions of rows fails as a
/// guest error (exit 3) and the process lives to say so: it used to abort
/// on a 32 GiB allocation at the commit.
#[test]
fn the_cli_refuses_a_row_bomb_with_exit_3() {
    let (code, err, table, _dir) = hostile_cli("rows_bomb");
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("2147483647 rows in output batch 0"), "{err}");
    assert!(!table.join("_delta_log").exists(), "nothing committed");
}

/// Rows that cost the guest nothing (one Null column, 2^24 rows in one
/// ~200-byte batch) into a partition whose value is 250 bytes: the commit
/// adds the partition column per row, which used to be built for the whole
/// batch at once (4 GiB here, and an abort past the machine's memory). The
/// writer takes the rows in chunks: the process stays small and ends with
/// an exit code, whatever it is.
#[test]
fn rows_without_bytes_into_a_long_partition_value_stay_small_at_the_commit() {
    let module = common::guest(HOSTILE);
    let dir = tempfile::tempdir().unwrap();
    let value = "v".repeat(250);
    let root = dir.path().join("orders");
    let files = common::orders(&dir.path().join("src"), "2026-10-01", 100, 1);
    let part = root.join(format!("date={value}"));
    std::fs::create_dir_all(&part).unwrap();
    std::fs::copy(&files[0], part.join("part-00000.parquet")).unwrap();
    let table = dir.path().join("t");
    let partition = format!("date={value}");
    let ran = common::idem_measured(&[
        "run",
        "--module",
        module.to_str().unwrap(),
        "--input",
        root.to_str().unwrap(),
        "--partition",
        &partition,
        "--table",
        table.to_str().unwrap(),
        "--params",
        r#"{"mode": "null_rows", "rows": 16777216}"#,
    ]);
    assert!(ran.code >= 0, "the process died: {}", ran.err);
    assert!(
        ran.peak_kib < 1 << 20,
        "peak {} MiB\n{}",
        ran.peak_kib >> 10,
        ran.err
    );
}

/// A nanosecond timestamp output: Delta stores microseconds, so the table
/// could not hold the rows exactly. Refused (exit 3) naming the column and
/// the cast to make, and nothing is committed.
#[test]
fn a_nanosecond_timestamp_output_is_refused_naming_the_cast() {
    let (code, err, table, _dir) = hostile_cli("ns_timestamp");
    assert_eq!(code, 3, "{err}");
    assert!(
        err.contains("column `t` is Timestamp(ns, \"UTC\")")
            && err.contains("Cast it to Timestamp(µs, \"UTC\")"),
        "{err}"
    );
    assert!(!table.join("_delta_log").exists(), "committed");
}
