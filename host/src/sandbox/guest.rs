//! One guest instance for one run: the store, the limits and the three
//! calls of the `idem:transform` world, with Arrow IPC on the boundary.

use std::time::{Duration, Instant};

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use wasmtime::component::{Component, HasSelf, Linker};
use wasmtime::{Engine, Store, Trap};

use super::error::SandboxError;
use super::limits::{GuestLimiter, Limits};
use super::output::{self, OutputBudget};

wasmtime::component::bindgen!({
    path: "../wit",
    world: "transform-core",
});

use self::exports::idem::transform::transform as wit;
use self::idem::transform::host;

/// The optional export naming the columns a guest takes dictionary-encoded.
const INPUT_ENCODING_EXPORT: &str = "idem:transform/input-encoding@0.2.0";
/// The export that takes side inputs (optional until a run gives some).
pub const SIDE_INPUTS_EXPORT: &str = "idem:transform/side-inputs@0.2.0";

/// Most log lines kept per run; the log is for people, not for hashing.
const MAX_LOG_LINES: usize = 1_000;
/// Most bytes of one log line kept.
const MAX_LOG_LINE_BYTES: usize = 4_096;

/// What a guest is told about its run.
#[derive(Debug, Clone)]
pub struct GuestContext {
    /// Name of the input slice.
    pub slice_id: String,
    /// Scheduler's logical date, if any.
    pub logical_date: Option<String>,
    /// Parameters as JSON text.
    pub params: String,
    /// Schema of every input batch.
    pub input_schema: SchemaRef,
    /// Rows per input batch.
    pub batch_rows: u32,
}

/// A line the guest logged through `host.log`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine {
    /// `debug`, `info`, `warn` or `error`.
    pub level: &'static str,
    /// The text, truncated to a few KiB.
    pub message: String,
}

struct HostState {
    limiter: GuestLimiter,
    log: Vec<LogLine>,
    log_dropped: usize,
}

impl host::Host for HostState {
    fn log(&mut self, level: host::Level, message: String) {
        if self.log.len() >= MAX_LOG_LINES {
            self.log_dropped += 1;
            return;
        }
        let level = match level {
            host::Level::Debug => "debug",
            host::Level::Info => "info",
            host::Level::Warn => "warn",
            host::Level::Error => "error",
        };
        let message = crate::text::clip(message, MAX_LOG_LINE_BYTES);
        self.log.push(LogLine { level, message });
    }
}

/// A live guest. Calls go open -> push* -> finish; any error poisons it.
pub struct Instance {
    store: Store<HostState>,
    world: TransformCore,
    /// The component instance, for the optional `input-encoding` export.
    instance: wasmtime::component::Instance,
    limits: Limits,
    tick: Duration,
    started: Instant,
    output_bytes: usize,
    output_rows: u64,
    output_schema: Option<SchemaRef>,
    batches_out: usize,
    /// Input batches pushed (the one being pushed included) and the rows
    /// before it: a failure in `push` names its batch.
    batches_in: u64,
    rows_in: u64,
    pushing: Option<String>,
    poisoned: bool,
    /// The last input batch's IPC bytes, kept for their allocation: each
    /// push encodes into it instead of into a fresh buffer.
    input: Vec<u8>,
}

impl Instance {
    pub(super) fn new(
        engine: &Engine,
        component: &Component,
        limits: &Limits,
        tick: Duration,
    ) -> Result<Self, SandboxError> {
        let state = HostState {
            limiter: GuestLimiter::new(limits.max_memory_bytes),
            log: Vec::new(),
            log_dropped: 0,
        };
        let mut store = Store::new(engine, state);
        store.limiter(|s| &mut s.limiter);
        // With fuel or epochs on, a store without a budget traps at once.
        if let Some(fuel) = limits.fuel {
            store
                .set_fuel(fuel)
                .map_err(|e| SandboxError::Engine(format!("{e:#}")))?;
        }
        store.set_epoch_deadline(ticks(limits.deadline_ms, tick));
        store.epoch_deadline_trap();
        let mut linker: Linker<HostState> = Linker::new(engine);
        host::add_to_linker::<HostState, HasSelf<HostState>>(&mut linker, |s| s)
            .map_err(|e| SandboxError::Engine(format!("{e:#}")))?;
        let started = Instant::now();
        let instance = linker
            .instantiate(&mut store, component)
            .map_err(|e| SandboxError::Instantiate(format!("{e:#}")))?;
        let world = TransformCore::new(&mut store, &instance)
            .map_err(|e| SandboxError::Instantiate(format!("{e:#}")))?;
        Ok(Instance {
            store,
            world,
            instance,
            limits: limits.clone(),
            tick,
            started,
            output_bytes: 0,
            output_rows: 0,
            output_schema: None,
            batches_out: 0,
            batches_in: 0,
            rows_in: 0,
            pushing: None,
            poisoned: false,
            input: Vec::new(),
        })
    }

    /// Give the guest its context. Must be called once, first. Returns the
    /// input columns the guest reads (`None`: all), as it declared them
    /// (checked against the input by the caller).
    pub fn open(&mut self, ctx: &GuestContext) -> Result<Option<Vec<String>>, SandboxError> {
        let input_schema = idem_guest::ipc::encode_schema(&ctx.input_schema)
            .map_err(|e| SandboxError::Host(format!("encoding input schema: {e}")))?;
        let wctx = wit::Context {
            slice_id: ctx.slice_id.clone(),
            logical_date: ctx.logical_date.clone(),
            params: ctx.params.clone(),
            input_schema,
            batch_rows: ctx.batch_rows,
        };
        self.enter()?;
        let r = self
            .world
            .idem_transform_transform()
            .call_open(&mut self.store, &wctx);
        self.settle("open", r)
    }

    /// The columns the guest takes dictionary-encoded (`input-encoding`),
    /// asked once, right after `open`. A guest without that export (built
    /// for `transform-world`: every JavaScript and Python guest, and Rust
    /// guests of earlier SDKs) takes none. Checked by the caller.
    pub fn dictionary_columns(&mut self) -> Result<Vec<String>, SandboxError> {
        let Some(iface) =
            self.instance
                .get_export_index(&mut self.store, None, INPUT_ENCODING_EXPORT)
        else {
            return Ok(Vec::new());
        };
        let Some(func) = self.typed::<(), (Vec<String>,)>(Some(iface), "dictionary-columns") else {
            return Err(self.refuse(
                "dictionary-columns",
                format!(
                    "its {INPUT_ENCODING_EXPORT} export lacks `dictionary-columns: func() -> list<string>`: rebuild it with this idem's idem-guest (`idem build`)"
                ),
            ));
        };
        self.enter()?;
        let r = func.call(&mut self.store, ()).map(|(v,)| Ok(v));
        self.settle("dictionary-columns", r)
    }

    /// One batch of side input `name`, before `open` (see the
    /// `side-inputs` interface). A guest without that export (built before
    /// side inputs existed) is refused, naming it and the fix.
    pub fn side_input(&mut self, name: &str, batch: &RecordBatch) -> Result<(), SandboxError> {
        let iface = self
            .instance
            .get_export_index(&mut self.store, None, SIDE_INPUTS_EXPORT);
        let func = iface.and_then(|i| {
            self.typed::<(&str, &[u8]), (Result<(), String>,)>(Some(i), "side-input")
        });
        let Some(func) = func else {
            return Err(self.refuse(
                "side-input",
                format!(
                    "the run gives it side input `{}`, and the module does not export {SIDE_INPUTS_EXPORT} with `side-input: func(name: string, batch: list<u8>) -> result<_, string>` (it was built before side inputs existed, or not with an idem SDK): rebuild it with this idem (`idem build`), or run it without --side",
                    crate::text::clip_str(name, 64)
                ),
            ));
        };
        let bytes = idem_guest::ipc::encode_into(batch, std::mem::take(&mut self.input))
            .map_err(|e| SandboxError::Host(format!("encoding side input `{name}`: {e}")))?;
        self.enter()?;
        self.pushing = Some(format!(
            "side input `{}`, {} rows",
            crate::text::clip_str(name, 64),
            batch.num_rows()
        ));
        let r = func.call(&mut self.store, (name, &bytes)).map(|(r,)| r);
        self.input = bytes;
        let r = self.settle("side-input", r);
        self.pushing = None;
        r
    }

    /// Function `func` of the exported interface `iface`, typed: `None`
    /// when the guest lacks either or gives it another signature.
    fn typed<P, R>(
        &mut self,
        iface: Option<wasmtime::component::ComponentExportIndex>,
        func: &str,
    ) -> Option<wasmtime::component::TypedFunc<P, R>>
    where
        P: wasmtime::component::ComponentNamedList + wasmtime::component::Lower,
        R: wasmtime::component::ComponentNamedList + wasmtime::component::Lift,
    {
        let f = self
            .instance
            .get_export_index(&mut self.store, iface.as_ref(), func)?;
        self.instance
            .get_typed_func::<P, R>(&mut self.store, &f)
            .ok()
    }

    /// A call the guest cannot take: its instance poisoned, the error.
    fn refuse(&mut self, call: &'static str, message: String) -> SandboxError {
        self.poisoned = true;
        SandboxError::Guest {
            call,
            at: None,
            message,
        }
    }

    /// Push one input batch; returns the guest's output rows, if any.
    pub fn push(&mut self, batch: &RecordBatch) -> Result<Option<RecordBatch>, SandboxError> {
        let bytes = idem_guest::ipc::encode_into(batch, std::mem::take(&mut self.input))
            .map_err(|e| SandboxError::Host(format!("encoding input batch: {e}")))?;
        self.enter()?;
        let rows = batch.num_rows() as u64;
        self.batches_in += 1;
        self.pushing = Some(match rows {
            0 => format!("input batch {}, no rows", self.batches_in),
            _ => format!(
                "input batch {}, rows {}-{} of its input",
                self.batches_in,
                self.rows_in + 1,
                self.rows_in + rows
            ),
        });
        self.rows_in += rows;
        let r = self
            .world
            .idem_transform_transform()
            .call_push(&mut self.store, &bytes);
        self.input = bytes;
        let out = self.settle("push", r);
        self.pushing = None;
        self.accept_output(out?)
    }

    /// Tell the guest the input is done; returns its last output rows.
    pub fn finish(&mut self) -> Result<Option<RecordBatch>, SandboxError> {
        self.enter()?;
        let r = self
            .world
            .idem_transform_transform()
            .call_finish(&mut self.store);
        let out = self.settle("finish", r)?;
        self.accept_output(out)
    }

    /// Lines the guest logged so far.
    pub fn log(&self) -> &[LogLine] {
        &self.store.data().log
    }

    /// Fuel consumed so far, when the run is metered.
    pub fn fuel_consumed(&self) -> Option<u64> {
        let budget = self.limits.fuel?;
        self.store.get_fuel().ok().map(|left| budget - left)
    }

    /// The schema of the guest's output, once it produced rows.
    pub fn output_schema(&self) -> Option<&SchemaRef> {
        self.output_schema.as_ref()
    }

    /// Refuse calls after a failure and re-arm the deadline with what is
    /// left of the run's wall-clock budget.
    fn enter(&mut self) -> Result<(), SandboxError> {
        if self.poisoned {
            return Err(SandboxError::Poisoned);
        }
        let elapsed = self.started.elapsed().as_millis() as u64;
        let left = self.limits.deadline_ms.saturating_sub(elapsed);
        if left == 0 {
            self.poisoned = true;
            return Err(SandboxError::Deadline {
                ms: self.limits.deadline_ms,
            });
        }
        self.store.set_epoch_deadline(ticks(left, self.tick));
        Ok(())
    }

    /// Turn a call's outcome into a typed error, naming what went wrong.
    fn settle<T>(
        &mut self,
        call: &'static str,
        r: wasmtime::Result<Result<T, String>>,
    ) -> Result<T, SandboxError> {
        match r {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(message)) => {
                self.poisoned = true;
                let at = self.pushing.clone();
                Err(SandboxError::Guest { call, at, message }.bounded())
            }
            Err(e) => {
                self.poisoned = true;
                Err(self.classify(call, e).bounded())
            }
        }
    }

    fn classify(&self, call: &'static str, e: wasmtime::Error) -> SandboxError {
        if let Some(bytes) = self.store.data().limiter.memory_denied {
            return SandboxError::MemoryLimit {
                limit: self.limits.max_memory_bytes,
                requested: bytes,
            };
        }
        if let Some(why) = &self.store.data().limiter.grow_failed {
            return SandboxError::Trap {
                call,
                at: self.pushing.clone(),
                trap: format!(
                    "growing guest memory failed ({why}): a failed memory.grow stops the run (it is never answered -1, which would let the guest go on differently on another host)"
                ),
                guest_log: Vec::new(),
            };
        }
        let guest_log: Vec<String> = self
            .store
            .data()
            .log
            .iter()
            .filter(|l| l.level == "error")
            .map(|l| l.message.clone())
            .collect();
        match e.downcast_ref::<Trap>() {
            Some(Trap::Interrupt) => SandboxError::Deadline {
                ms: self.limits.deadline_ms,
            },
            Some(Trap::OutOfFuel) => SandboxError::FuelExhausted {
                fuel: self.limits.fuel.unwrap_or(0),
            },
            Some(Trap::StackOverflow) => SandboxError::Trap {
                call,
                at: self.pushing.clone(),
                trap: format!(
                    "stack overflow (limit {} bytes)",
                    self.limits.max_stack_bytes
                ),
                guest_log,
            },
            Some(t) => SandboxError::Trap {
                call,
                at: self.pushing.clone(),
                trap: t.to_string(),
                guest_log,
            },
            None => SandboxError::Trap {
                call,
                at: self.pushing.clone(),
                trap: format!("{e:#}"),
                guest_log,
            },
        }
    }

    /// Take one output of the guest: decoded, checked and counted against
    /// the output limit in logical bytes (see [`super::output`]), behind a
    /// panic backstop. Any failure poisons the instance.
    fn accept_output(&mut self, bytes: Vec<u8>) -> Result<Option<RecordBatch>, SandboxError> {
        let budget = OutputBudget {
            limit: self.limits.max_output_bytes,
            produced: self.output_bytes,
            batch: self.batches_out,
            max_rows: self.limits.max_output_rows,
            rows: self.output_rows,
            max_batch_rows: self.limits.max_output_batch_rows,
        };
        let decoded = match output::decode_guarded(bytes, &budget) {
            Ok(d) => d,
            Err(e) => {
                self.poisoned = true;
                return Err(e.bounded());
            }
        };
        let Some(decoded) = decoded else {
            return Ok(None);
        };
        self.output_bytes = self.output_bytes.saturating_add(decoded.logical_bytes);
        self.output_rows = self
            .output_rows
            .saturating_add(decoded.batch.num_rows() as u64);
        // A zero-row batch is kept (and its schema checked): it names the
        // output's schema even when the whole output is empty.
        let batch = decoded.batch;
        match &self.output_schema {
            None => self.output_schema = Some(batch.schema()),
            Some(s) if s.as_ref() == batch.schema().as_ref() => {}
            Some(s) => {
                self.poisoned = true;
                return Err(SandboxError::SchemaMismatch {
                    batch: self.batches_out,
                    expected: s.to_string(),
                    got: batch.schema().to_string(),
                }
                .bounded());
            }
        }
        self.batches_out += 1;
        Ok(Some(batch))
    }
}

fn ticks(ms: u64, tick: Duration) -> u64 {
    ms.div_ceil(tick.as_millis().max(1) as u64).max(1)
}
