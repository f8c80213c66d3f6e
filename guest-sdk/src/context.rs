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
