use arrow::datatypes::SchemaRef;

use crate::{Error, Result};

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
}

impl Context {
    /// A numeric parameter, or `None` when absent. Errors name the parameter
    /// when it is present with another type.
    pub fn param_f64(&self, name: &str) -> Result<Option<f64>> {
        match self.params.get(name) {
            None | Some(serde_json::Value::Null) => Ok(None),
            Some(v) => v
                .as_f64()
                .map(Some)
                .ok_or_else(|| Error(format!("parameter `{name}` must be a number, got {v}"))),
        }
    }

    /// A string parameter, or `None` when absent.
    pub fn param_str(&self, name: &str) -> Result<Option<&str>> {
        match self.params.get(name) {
            None | Some(serde_json::Value::Null) => Ok(None),
            Some(v) => v
                .as_str()
                .map(Some)
                .ok_or_else(|| Error(format!("parameter `{name}` must be a string, got {v}"))),
        }
    }
}
