//! Drive one transform over a stream of input batches: open, push each
//! batch in order, finish; digest the output and hand it to a sink. The same
//! driver runs a sandboxed guest or the native build of the same crate.

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use idem_guest::native::{MAX_DECLARED, show_name as shown};
use thiserror::Error;

use crate::digest::{Digest, DigestError, PipelinedDigester};
use crate::kind::Kind;
use crate::sandbox::{GuestContext, Instance, SandboxError};
pub use crate::slice::Declared;
use crate::slice::SliceError;

/// Why an execution failed. Nothing is committed after any of these.
#[derive(Debug, Error)]
pub enum ExecError {
    /// Reading the input failed.
    #[error(transparent)]
    Slice(#[from] SliceError),
    /// The guest failed or broke a limit.
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    /// The native build of a transform failed.
    #[error("transform failed: {0}")]
    Native(String),
    /// Writing the output failed.
    #[error("writing output: {0}")]
    Sink(String),
    /// The output could not be digested (a type idem refuses).
    #[error(transparent)]
    Digest(#[from] DigestError),
    /// The transform declared input columns it cannot have.
    #[error("the transform's declared input columns: {0}")]
    Columns(String),
}

impl ExecError {
    /// The kind of the failure (and the CLI's exit code).
    pub fn kind(&self) -> Kind {
        match self {
            ExecError::Slice(e) => e.kind(),
            ExecError::Sandbox(e) => e.kind(),
            ExecError::Native(_) | ExecError::Digest(_) | ExecError::Columns(_) => Kind::Guest,
            ExecError::Sink(_) => Kind::Storage,
        }
    }
}

/// Show a transform's log lines (`level: message`, from
/// [`Transformer::log_lines`]) on the log at their own level, prefixed with
/// the module's name: `[clean_orders.wasm] info: kept 10 rows`. Info and
/// above show at the default log level.
pub fn show_guest_log(module: &str, lines: &[String]) {
    for line in lines {
        match line.split_once(':').map(|(level, _)| level) {
            Some("debug") => tracing::debug!(target: "idem::guest", "[{module}] {line}"),
            Some("warn") => tracing::warn!(target: "idem::guest", "[{module}] {line}"),
            Some("error") => tracing::error!(target: "idem::guest", "[{module}] {line}"),
            _ => tracing::info!(target: "idem::guest", "[{module}] {line}"),
        }
    }
}

/// The guest's log `lines` (`level: message`) without the error lines a
/// trap in `executed` already quotes whole in its message (they would be
/// said twice); lines it left out or cut are kept.
pub fn unquoted<T>(lines: Vec<String>, executed: &Result<T, ExecError>) -> Vec<String> {
    let quoted: &[String] = match executed {
        Err(ExecError::Sandbox(SandboxError::Trap { guest_log, .. })) => guest_log,
        _ => &[],
    };
    lines
        .into_iter()
        .filter(|l| {
            !l.strip_prefix("error: ")
                .is_some_and(|m| quoted.iter().any(|q| q == m))
        })
        .collect()
}

/// Something that transforms batches: a sandboxed [`Instance`] or a native
/// [`Native`] build.
pub trait Transformer {
    /// Start the run; returns what the transform declared it reads: the
    /// input columns (`None`: all of them) and which it takes
    /// dictionary-encoded.
    fn open(&mut self, ctx: &GuestContext) -> Result<Declared, ExecError>;
    /// One batch of side input `name`, before `open` (every batch of every
    /// side input comes first).
    fn side_input(&mut self, name: &str, batch: &RecordBatch) -> Result<(), ExecError>;
    /// One input batch in, output rows (if any) out.
    fn push(&mut self, batch: &RecordBatch) -> Result<Option<RecordBatch>, ExecError>;
    /// End of input.
    fn finish(&mut self) -> Result<Option<RecordBatch>, ExecError>;
    /// Fuel consumed, when metered.
    fn fuel_consumed(&self) -> Option<u64> {
        None
    }
    /// Lines the transform logged (`level: message`).
    fn log_lines(&self) -> Vec<String> {
        Vec::new()
    }
}

impl Transformer for Instance {
    fn open(&mut self, ctx: &GuestContext) -> Result<Declared, ExecError> {
        let columns = Instance::open(self, ctx)?;
        let dictionaries = Instance::dictionary_columns(self)?;
        Ok(Declared {
            columns,
            dictionaries,
        })
    }
    fn side_input(&mut self, name: &str, batch: &RecordBatch) -> Result<(), ExecError> {
        Ok(Instance::side_input(self, name, batch)?)
    }
    fn push(&mut self, batch: &RecordBatch) -> Result<Option<RecordBatch>, ExecError> {
        Ok(Instance::push(self, batch)?)
    }
    fn finish(&mut self) -> Result<Option<RecordBatch>, ExecError> {
        Ok(Instance::finish(self)?)
    }
    fn fuel_consumed(&self) -> Option<u64> {
        Instance::fuel_consumed(self)
    }
    fn log_lines(&self) -> Vec<String> {
        self.log()
            .iter()
            .map(|l| format!("{}: {}", l.level, l.message))
            .collect()
    }
}

/// The native build of an `idem_guest::Transform`: the baseline for tests
/// (same digest as the wasm build) and benchmarks (same work, no sandbox).
pub struct Native<T: idem_guest::Transform> {
    inner: T,
    schema: Option<SchemaRef>,
    /// Side inputs given before `open`.
    sides: idem_guest::SideInputs,
}

impl<T: idem_guest::Transform> Default for Native<T> {
    fn default() -> Self {
        Native {
            inner: T::default(),
            schema: None,
            sides: Default::default(),
        }
    }
}

impl<T: idem_guest::Transform> Native<T> {
    fn check(&mut self, out: Option<RecordBatch>) -> Result<Option<RecordBatch>, ExecError> {
        let Some(b) = out else {
            return Ok(None);
        };
        match &self.schema {
            None => self.schema = Some(b.schema()),
            Some(s) if s == &b.schema() => {}
            Some(s) => {
                return Err(ExecError::Native(format!(
                    "output schema changed from {s} to {}",
                    b.schema()
                )));
            }
        }
        Ok(Some(b))
    }
}

impl<T: idem_guest::Transform> Transformer for Native<T> {
    fn open(&mut self, ctx: &GuestContext) -> Result<Declared, ExecError> {
        let mut params = if ctx.params.trim().is_empty() {
            serde_json::json!({})
        } else {
            serde_json::from_str(&ctx.params)
                .map_err(|e| ExecError::Native(format!("params: {e}")))?
        };
        // Declared params are checked (and defaulted) as the wasm glue does.
        idem_guest::params::apply::<T>(&mut params).map_err(|e| ExecError::Native(e.0))?;
        let c = idem_guest::Context {
            slice_id: ctx.slice_id.clone(),
            logical_date: ctx.logical_date.clone(),
            params,
            input_schema: ctx.input_schema.clone(),
            batch_rows: ctx.batch_rows,
            side_inputs: std::mem::take(&mut self.sides),
        };
        self.inner.open(&c).map_err(|e| ExecError::Native(e.0))?;
        Ok(Declared {
            columns: self.inner.columns(),
            dictionaries: self.inner.dictionary_columns(),
        })
    }
    fn side_input(&mut self, name: &str, batch: &RecordBatch) -> Result<(), ExecError> {
        self.sides
            .push(name, batch.clone())
            .map_err(|e| ExecError::Native(e.0))
    }
    fn push(&mut self, batch: &RecordBatch) -> Result<Option<RecordBatch>, ExecError> {
        let out = self
            .inner
            .push(batch.clone())
            .map_err(|e| ExecError::Native(e.0))?;
        self.check(out)
    }
    fn finish(&mut self) -> Result<Option<RecordBatch>, ExecError> {
        let out = self.inner.finish().map_err(|e| ExecError::Native(e.0))?;
        self.check(out)
    }
}

/// What one execution produced.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// Logical digest of all output rows, in order.
    pub output_digest: Digest,
    /// Input rows read.
    pub rows_in: u64,
    /// Output rows produced.
    pub rows_out: u64,
    /// Input batches pushed.
    pub batches_in: u64,
    /// Output schema (`None` when the transform emitted no rows).
    pub output_schema: Option<SchemaRef>,
    /// Fuel consumed, when metered.
    pub fuel: Option<u64>,
    /// The input columns the transform declared it reads (`None`: all).
    pub columns: Option<Vec<String>>,
    /// The columns it took dictionary-encoded.
    pub dictionaries: Vec<String>,
}

/// Check a transform's declared columns against the whole input schema:
/// each must exist, once; at least one.
pub fn check_columns(declared: &[String], schema: &SchemaRef) -> Result<(), ExecError> {
    if declared.is_empty() {
        return Err(ExecError::Columns(
            "an empty list (declare at least one column, or none for all of them)".into(),
        ));
    }
    if declared.len() > MAX_DECLARED {
        return Err(ExecError::Columns(format!(
            "{} names, more than the {MAX_DECLARED} a transform may declare (read them all instead: declare none)",
            declared.len()
        )));
    }
    let mut seen = std::collections::HashSet::new();
    for name in declared {
        if !seen.insert(name.as_str()) {
            return Err(ExecError::Columns(format!(
                "`{}` is declared twice",
                shown(name)
            )));
        }
        if schema.field_with_name(name).is_err() {
            let have: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
            return Err(ExecError::Columns(format!(
                "the input has no column `{}` (it has: {})",
                shown(name),
                have.join(", ")
            )));
        }
    }
    Ok(())
}

/// Batches in memory, each read or failed.
pub type Batches = Vec<Result<RecordBatch, SliceError>>;

/// An input given as batches already in memory (tests, benchmarks): each
/// is narrowed to the declared columns by name as it goes by. A slice is
/// read narrowed from the start instead ([`crate::slice::SliceReader::narrow`]).
pub fn batches<I>(input: I) -> impl FnOnce(&Declared) -> Result<Batches, SliceError>
where
    I: IntoIterator<Item = Result<RecordBatch, SliceError>>,
{
    move |declared| {
        let malformed = |e: idem_guest::Error| SliceError::Malformed {
            path: "(input batch)".into(),
            detail: e.0,
        };
        Ok(input
            .into_iter()
            .map(|b| {
                let b = match &declared.columns {
                    Some(names) => idem_guest::native::project(&b?, names).map_err(malformed)?,
                    None => b?,
                };
                idem_guest::native::dictionary_encode(&b, &declared.dictionaries).map_err(malformed)
            })
            .collect())
    }
}

/// Run `t` over its input: `open`, then the input's batches narrowed to
/// the columns the transform declared (`input` is given them, checked
/// against `ctx.input_schema`, or `None` for all), each pushed in order,
/// then `finish`. Every output batch's schema is checked, then the batch
/// is given to `sink` and hashed on the digest thread: a value the digest
/// refuses fails the run (at a later batch or at the end) after the sink
/// saw it, so sinks write nothing visible before the run succeeded.
/// Any error stops the run; the caller commits nothing.
pub fn execute<F, I, S>(
    t: &mut dyn Transformer,
    ctx: &GuestContext,
    input: F,
    mut sink: S,
) -> Result<Outcome, ExecError>
where
    F: FnOnce(&Declared) -> Result<I, SliceError>,
    I: IntoIterator<Item = Result<RecordBatch, SliceError>>,
    S: FnMut(&RecordBatch) -> Result<(), ExecError>,
{
    // Hashed on a thread of its own while the guest computes the next batch.
    let mut digester = PipelinedDigester::new();
    let mut schema: Option<SchemaRef> = None;
    let (mut rows_in, mut batches_in) = (0u64, 0u64);
    let mut emit =
        |out: Option<RecordBatch>, digester: &mut PipelinedDigester| -> Result<(), ExecError> {
            // A zero-row batch still names the output's schema.
            if let Some(b) = &out {
                schema.get_or_insert_with(|| b.schema());
            }
            if let Some(b) = out.filter(|b| b.num_rows() > 0) {
                digester.update(&b)?;
                sink(&b)?;
            }
            Ok(())
        };
    let declared = t.open(ctx)?;
    // No input at all (an audit of an empty output): nothing to narrow.
    if !ctx.input_schema.fields().is_empty() {
        if let Some(c) = &declared.columns {
            check_columns(c, &ctx.input_schema)?;
        }
        let read = idem_guest::native::read_schema(&ctx.input_schema, declared.columns.as_deref())
            .map_err(|e| ExecError::Columns(e.0))?;
        idem_guest::native::check_dictionary_columns(&declared.dictionaries, &read)
            .map_err(|e| ExecError::Columns(format!("taken dictionary-encoded: {}", e.0)))?;
    }
    for batch in input(&declared)? {
        let batch = batch?;
        rows_in += batch.num_rows() as u64;
        batches_in += 1;
        let out = t.push(&batch)?;
        emit(out, &mut digester)?;
    }
    let out = t.finish()?;
    emit(out, &mut digester)?;
    let rows_out = digester.rows();
    Ok(Outcome {
        output_digest: digester.finish()?,
        rows_in,
        rows_out,
        batches_in,
        output_schema: schema,
        fuel: t.fuel_consumed(),
        columns: declared.columns,
        dictionaries: declared.dictionaries,
    })
}
