use std::collections::BTreeMap;

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;

use crate::{Error, Result};

/// Most side inputs one run may give (a run's context names them all).
pub const MAX_SIDE_INPUTS: usize = 16;

/// A run's side inputs by name: tables read whole beside the slice (a
/// dimension to join with), each one's batches in read order (at least
/// one, maybe with no rows: it carries the schema).
#[derive(Debug, Clone, Default)]
pub struct SideInputs(BTreeMap<String, Vec<RecordBatch>>);

impl SideInputs {
    /// Add a batch of side input `name` (after its earlier ones). A batch
    /// of another schema than the input's first is refused.
    pub fn push(&mut self, name: &str, batch: RecordBatch) -> Result<()> {
        if !self.0.contains_key(name) && self.0.len() >= MAX_SIDE_INPUTS {
            return Err(Error(format!(
                "more than {MAX_SIDE_INPUTS} side inputs (`{}` is one too many)",
                crate::error::show_name(name)
            )));
        }
        let batches = self.0.entry(name.to_string()).or_default();
        if let Some(first) = batches.first()
            && first.schema() != batch.schema()
        {
            return Err(Error(format!(
                "side input `{}`: a batch of another schema than its first",
                crate::error::show_name(name)
            )));
        }
        batches.push(batch);
        Ok(())
    }

    /// The side inputs' names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(String::as_str)
    }

    /// Side input `name`'s batches, if the run gives it.
    pub fn get(&self, name: &str) -> Option<&[RecordBatch]> {
        self.0.get(name).map(Vec::as_slice)
    }
}

/// What a transform knows about its run. Everything here is a function of
/// the run key: there is no wall clock, only the scheduler's logical date.
#[derive(Debug, Clone)]
pub struct Context {
    /// Name of the input slice, e.g. `date=2026-10-01`.
    pub slice_id: String,
    /// The scheduler's logical date (ISO 8601), if it gave one.
    pub logical_date: Option<String>,
    /// Transform parameters (`{}` when none).
    pub params: serde_json::Value,
    /// Schema of every input batch.
    pub input_schema: SchemaRef,
    /// Rows per input batch (the last one may be shorter).
    pub batch_rows: u32,
    /// The run's side inputs (`--side NAME=TABLE`): read them with
    /// [`Context::side_input`].
    pub side_inputs: SideInputs,
}

impl Context {
    /// Side input `name`, whole, as one batch (rows in read order): a
    /// dimension to join the slice with. An error names the side inputs
    /// the run gives when it does not give this one.
    pub fn side_input(&self, name: &str) -> Result<RecordBatch> {
        let Some(batches) = self.side_inputs.get(name) else {
            let given: Vec<&str> = self.side_inputs.names().collect();
            return Err(Error(format!(
                "the run gives no side input `{}` ({}): give it with --side {}=TABLE (or `from` in a pipeline stage)",
                crate::error::show_name(name),
                match given.is_empty() {
                    true => "it gives none".to_string(),
                    false => format!("it gives: {}", given.join(", ")),
                },
                crate::error::show_name(name),
            )));
        };
        let schema = batches[0].schema();
        Ok(arrow::compute::concat_batches(&schema, batches)?)
    }

    /// A numeric parameter, or `None` when absent. Errors name the parameter
    /// when it is present with another type.
    pub fn param_f64(&self, name: &str) -> Result<Option<f64>> {
        self.param(name, "a number", serde_json::Value::as_f64)
    }

    /// An integer parameter (`3`, or `3.0`), or `None` when absent. Errors
    /// name the parameter when it is present with another type.
    pub fn param_i64(&self, name: &str) -> Result<Option<i64>> {
        self.param(name, "an integer", crate::params::as_integer)
    }

    /// A boolean parameter, or `None` when absent.
    pub fn param_bool(&self, name: &str) -> Result<Option<bool>> {
        self.param(name, "a boolean", serde_json::Value::as_bool)
    }

    /// A string parameter, or `None` when absent.
    pub fn param_str(&self, name: &str) -> Result<Option<&str>> {
        self.param(name, "a string", serde_json::Value::as_str)
    }

    /// Parameter `name` read with `get`: `None` when absent or null, an
    /// error naming it and `want` when `get` refuses its value.
    fn param<'a, T>(
        &'a self,
        name: &str,
        want: &str,
        get: impl Fn(&'a serde_json::Value) -> Option<T>,
    ) -> Result<Option<T>> {
        match self.params.get(name) {
            None | Some(serde_json::Value::Null) => Ok(None),
            Some(v) => get(v)
                .map(Some)
                .ok_or_else(|| Error(format!("parameter `{name}` must be {want}, got {v}"))),
        }
    }
}
