//! Write-audit-publish: expectations a run's output must meet before it is
//! committed. They are checked on every output batch as it is staged, so a
//! run that fails one publishes nothing: no data file reaches the table,
//! no commit is made, the table stays at its version. The expectations
//! are part of the run spec (and so of the run key), their verdicts part
//! of the manifest's result.
//!
//! - `not_null(col)`: no null in `col`.
//! - `unique(col[, col...])`: no two rows share the key.
//! - `rows(MIN..MAX)`: the output has MIN to MAX rows (either bound may be
//!   left out: `rows(1..)`).
//! - `between(col, MIN, MAX)`: every non-null value (as a number) is in
//!   [MIN, MAX].
//! - `in(col, a|b|c)`: every non-null value (as text) is one of these.

use crate::kind::Kind;
use std::collections::HashSet;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Float64Type};
use arrow::row::{RowConverter, SortField};
use arrow::util::display::array_value_to_string;
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Example rows kept per failed expectation.
const EXAMPLES: usize = 3;

/// Why expectations could not be checked or did not hold.
#[derive(Debug, Error)]
pub enum ExpectError {
    /// Not an expectation idem knows.
    #[error(
        "`{text}` is not an expectation ({why}): use not_null(col), unique(col[,col]), rows(MIN..MAX), between(col, MIN, MAX) or in(col, a|b|c)"
    )]
    Parse {
        /// What was given.
        text: String,
        /// What is wrong.
        why: String,
    },
    /// The output has no such column, or one of a type the check cannot read.
    #[error("expectation `{expectation}`: {why}")]
    Column {
        /// The expectation.
        expectation: String,
        /// What is wrong.
        why: String,
    },
    /// The output did not meet every expectation: nothing was published.
    #[error("{}", failed_text(.0))]
    Failed(Vec<Verdict>),
}

impl ExpectError {
    /// The kind of the failure (and the CLI's exit code).
    pub fn kind(&self) -> Kind {
        match self {
            ExpectError::Failed(_) => Kind::Check,
            _ => Kind::Input,
        }
    }
}

fn failed_text(verdicts: &[Verdict]) -> String {
    let failed: Vec<&Verdict> = verdicts.iter().filter(|v| !v.passed).collect();
    let mut s = format!(
        "the output failed {} of {} expectation(s), so nothing was published (the table keeps its version):",
        failed.len(),
        verdicts.len()
    );
    for v in failed {
        s.push_str(&format!("\n  {}: {}", v.expectation, v.observed));
        for e in &v.examples {
            s.push_str(&format!("\n    e.g. {e}"));
        }
    }
    s.push_str("\nFix the transform or its input and rerun; a run that meets them publishes.");
    s
}

/// One expectation.
#[derive(Debug, Clone, PartialEq)]
pub enum Expectation {
    /// No nulls in the column.
    NotNull(String),
    /// The key columns are unique.
    Unique(Vec<String>),
    /// Output row count bounds.
    Rows {
        /// Least rows.
        min: Option<u64>,
        /// Most rows.
        max: Option<u64>,
    },
    /// Numeric range, nulls allowed.
    Between {
        /// The column.
        column: String,
        /// Lower bound (inclusive).
        min: f64,
        /// Upper bound (inclusive).
        max: f64,
    },
    /// Allowed values, nulls allowed.
    In {
        /// The column.
        column: String,
        /// The values.
        values: Vec<String>,
    },
}

/// The outcome of one expectation, as recorded in the manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Verdict {
    /// The expectation, in its canonical text.
    pub expectation: String,
    /// Whether it held.
    pub passed: bool,
    /// What was seen (e.g. `0 null rows`, `1000 rows`).
    pub observed: String,
    /// Up to three offending rows, when it failed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub examples: Vec<String>,
}

impl std::fmt::Display for Expectation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let opt = |b: &Option<u64>| b.map(|n| n.to_string()).unwrap_or_default();
        match self {
            Expectation::NotNull(c) => write!(f, "not_null({c})"),
            Expectation::Unique(cs) => write!(f, "unique({})", cs.join(", ")),
            Expectation::Rows { min, max } => write!(f, "rows({}..{})", opt(min), opt(max)),
            Expectation::Between { column, min, max } => {
                write!(f, "between({column}, {min}, {max})")
            }
            Expectation::In { column, values } => write!(f, "in({column}, {})", values.join("|")),
        }
    }
}

impl std::str::FromStr for Expectation {
    type Err = ExpectError;

    fn from_str(text: &str) -> Result<Self, ExpectError> {
        let err = |why: &str| ExpectError::Parse {
            text: text.to_string(),
            why: why.to_string(),
        };
        let t = text.trim();
        let open = t.find('(').ok_or_else(|| err("no `(`"))?;
        let body = t[open + 1..]
            .strip_suffix(')')
            .ok_or_else(|| err("it must end with `)`"))?;
        let args: Vec<String> = body.split(',').map(|a| a.trim().to_string()).collect();
        let column = |a: &str| -> Result<String, ExpectError> {
            if a.is_empty() {
                Err(err("a column name is empty"))
            } else {
                Ok(a.to_string())
            }
        };
        let number = |a: &str| -> Result<f64, ExpectError> {
            a.parse::<f64>()
                .ok()
                .filter(|n| n.is_finite())
                .ok_or_else(|| err(&format!("`{a}` is not a number")))
        };
        match (t[..open].trim(), args.as_slice()) {
            ("not_null", [c]) => Ok(Expectation::NotNull(column(c)?)),
            ("unique", cs) if !cs.is_empty() => Ok(Expectation::Unique(
                cs.iter().map(|c| column(c)).collect::<Result<_, _>>()?,
            )),
            ("rows", [range]) => {
                let (lo, hi) = range
                    .split_once("..")
                    .ok_or_else(|| err("rows needs MIN..MAX"))?;
                let bound = |b: &str| -> Result<Option<u64>, ExpectError> {
                    let b = b.trim();
                    if b.is_empty() {
                        return Ok(None);
                    }
                    b.parse()
                        .map(Some)
                        .map_err(|_| err(&format!("`{b}` is not a row count")))
                };
                let (min, max) = (bound(lo)?, bound(hi)?);
                if let (Some(a), Some(b)) = (min, max)
                    && a > b
                {
                    return Err(err("MIN is above MAX"));
                }
                Ok(Expectation::Rows { min, max })
            }
            ("between", [c, lo, hi]) => {
                let (min, max) = (number(lo)?, number(hi)?);
                if min > max {
                    return Err(err("MIN is above MAX"));
                }
                Ok(Expectation::Between {
                    column: column(c)?,
                    min,
                    max,
                })
            }
            ("in", [c, values]) => Ok(Expectation::In {
                column: column(c)?,
                values: values.split('|').map(|v| v.trim().to_string()).collect(),
            }),
            (name, _) => Err(err(&format!(
                "unknown check or wrong arguments for `{name}`"
            ))),
        }
    }
}

enum State {
    NotNull,
    Unique(Option<RowConverter>, HashSet<Box<[u8]>>),
    Rows,
    Between,
    In(HashSet<String>),
}

/// Checks expectations over a run's output batches.
pub struct Checker {
    checks: Vec<(Expectation, State, u64, Vec<String>)>,
    rows: u64,
}

/// A row for a person: `{col: value, ...}` (at most 8 columns).
fn show_row(batch: &RecordBatch, i: usize) -> String {
    let schema = batch.schema();
    let cells: Vec<String> = batch
        .columns()
        .iter()
        .zip(schema.fields())
        .take(8)
        .map(|(c, f)| {
            let v = if c.is_null(i) {
                "null".to_string()
            } else {
                array_value_to_string(c, i).unwrap_or_else(|_| "?".into())
            };
            format!("{}: {v}", f.name())
        })
        .collect();
    format!("{{{}}}", cells.join(", "))
}

impl Checker {
    /// A checker for `expectations`.
    pub fn new(expectations: &[Expectation]) -> Self {
        Checker {
            checks: expectations
                .iter()
                .map(|e| {
                    let state = match e {
                        Expectation::NotNull(_) => State::NotNull,
                        Expectation::Unique(_) => State::Unique(None, HashSet::new()),
                        Expectation::Rows { .. } => State::Rows,
                        Expectation::Between { .. } => State::Between,
                        Expectation::In { values, .. } => {
                            State::In(values.iter().cloned().collect())
                        }
                    };
                    (e.clone(), state, 0, Vec::new())
                })
                .collect(),
            rows: 0,
        }
    }

    /// Look at one output batch.
    pub fn update(&mut self, batch: &RecordBatch) -> Result<(), ExpectError> {
        self.rows += batch.num_rows() as u64;
        for (e, state, bad, examples) in &mut self.checks {
            let offending = offending_rows(e, state, batch)?;
            *bad += offending.len() as u64;
            for &i in offending
                .iter()
                .take(EXAMPLES.saturating_sub(examples.len()))
            {
                examples.push(show_row(batch, i));
            }
        }
        Ok(())
    }

    /// The verdicts; `Err(Failed)` when any did not hold. `schema`: the
    /// output's, to check the columns named even when no row came.
    pub fn finish(
        self,
        schema: Option<&arrow::datatypes::Schema>,
    ) -> Result<Vec<Verdict>, ExpectError> {
        if let Some(schema) = schema {
            for (e, ..) in &self.checks {
                let columns: Vec<&String> = match e {
                    Expectation::NotNull(c) => vec![c],
                    Expectation::Unique(cs) => cs.iter().collect(),
                    Expectation::Between { column, .. } | Expectation::In { column, .. } => {
                        vec![column]
                    }
                    Expectation::Rows { .. } => vec![],
                };
                if let Some(c) = columns
                    .into_iter()
                    .find(|c| schema.field_with_name(c).is_err())
                {
                    return Err(ExpectError::Column {
                        expectation: e.to_string(),
                        why: format!("the output has no column `{c}`"),
                    });
                }
            }
        }
        let rows = self.rows;
        let verdicts: Vec<Verdict> = self
            .checks
            .into_iter()
            .map(|(e, _, bad, examples)| {
                let (passed, observed) = match &e {
                    Expectation::Rows { min, max } => (
                        min.is_none_or(|m| rows >= m) && max.is_none_or(|m| rows <= m),
                        format!("{rows} rows"),
                    ),
                    Expectation::NotNull(_) => (bad == 0, format!("{bad} null row(s)")),
                    Expectation::Unique(_) => (bad == 0, format!("{bad} row(s) repeat a key")),
                    Expectation::Between { .. } | Expectation::In { .. } => {
                        (bad == 0, format!("{bad} row(s) outside"))
                    }
                };
                Verdict {
                    expectation: e.to_string(),
                    passed,
                    observed,
                    examples: if passed { Vec::new() } else { examples },
                }
            })
            .collect();
        if verdicts.iter().all(|v| v.passed) {
            Ok(verdicts)
        } else {
            Err(ExpectError::Failed(verdicts))
        }
    }
}

/// The rows of `batch` that break `e` (`state`: what the check has seen
/// of the batches before).
fn offending_rows(
    e: &Expectation,
    state: &mut State,
    batch: &RecordBatch,
) -> Result<Vec<usize>, ExpectError> {
    let col = |name: &str| column(e, batch, name);
    match (e, state) {
        (Expectation::NotNull(c), State::NotNull) => {
            let a = col(c)?;
            Ok((0..a.len()).filter(|&i| a.is_null(i)).collect())
        }
        (Expectation::Unique(cs), State::Unique(conv, seen)) => {
            let cols = cs.iter().map(|c| col(c)).collect::<Result<Vec<_>, _>>()?;
            repeated_keys(e, &cols, conv, seen)
        }
        (Expectation::Between { column, min, max }, State::Between) => {
            outside_range(e, &col(column)?, column, *min..=*max)
        }
        (Expectation::In { column, .. }, State::In(allowed)) => {
            not_allowed(e, &col(column)?, column, allowed)
        }
        _ => Ok(Vec::new()),
    }
}

/// The column `name` of `batch`, which `e` checks.
fn column(e: &Expectation, batch: &RecordBatch, name: &str) -> Result<ArrayRef, ExpectError> {
    batch
        .column_by_name(name)
        .cloned()
        .ok_or_else(|| ExpectError::Column {
            expectation: e.to_string(),
            why: format!(
                "the output has no column `{name}` (columns: {})",
                batch
                    .schema()
                    .fields()
                    .iter()
                    .map(|f| f.name().as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        })
}

/// `unique`: the rows whose key (`cols`) was `seen` before, in this batch
/// or an earlier one.
fn repeated_keys(
    e: &Expectation,
    cols: &[ArrayRef],
    conv: &mut Option<RowConverter>,
    seen: &mut HashSet<Box<[u8]>>,
) -> Result<Vec<usize>, ExpectError> {
    if conv.is_none() {
        let fields = cols
            .iter()
            .map(|c| SortField::new(c.data_type().clone()))
            .collect();
        *conv = Some(RowConverter::new(fields).map_err(|x| ExpectError::Column {
            expectation: e.to_string(),
            why: format!("its columns cannot be compared: {x}"),
        })?);
    }
    let Some(conv) = conv.as_ref() else {
        return Ok(Vec::new());
    };
    let rows = conv
        .convert_columns(cols)
        .map_err(|x| ExpectError::Column {
            expectation: e.to_string(),
            why: x.to_string(),
        })?;
    Ok(rows
        .iter()
        .enumerate()
        .filter(|(_, r)| !seen.insert(r.as_ref().into()))
        .map(|(i, _)| i)
        .collect())
}

/// `between`: the non-null values of `a` outside `range` as numbers.
fn outside_range(
    e: &Expectation,
    a: &ArrayRef,
    column: &str,
    range: std::ops::RangeInclusive<f64>,
) -> Result<Vec<usize>, ExpectError> {
    let numbers = cast(a, &DataType::Float64).map_err(|x| ExpectError::Column {
        expectation: e.to_string(),
        why: format!("column `{column}` ({}) is not numeric: {x}", a.data_type()),
    })?;
    let numbers = numbers.as_primitive::<Float64Type>();
    // A value that does not read as a number (the cast makes it null) is
    // outside too, never skipped.
    Ok((0..numbers.len())
        .filter(|&i| a.is_valid(i) && (numbers.is_null(i) || !range.contains(&numbers.value(i))))
        .collect())
}

/// `in`: the non-null values of `a` that are none of `allowed` as text.
fn not_allowed(
    e: &Expectation,
    a: &ArrayRef,
    column: &str,
    allowed: &HashSet<String>,
) -> Result<Vec<usize>, ExpectError> {
    let text = cast(a, &DataType::Utf8).map_err(|x| ExpectError::Column {
        expectation: e.to_string(),
        why: format!("column `{column}` cannot be read as text: {x}"),
    })?;
    let text = text.as_string::<i32>();
    Ok((0..text.len())
        .filter(|&i| a.is_valid(i) && (text.is_null(i) || !allowed.contains(text.value(i))))
        .collect())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Float64Array, Int64Array, StringArray};
    use arrow::datatypes::{Field, Schema};

    use super::*;

    fn batch() -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("amount", DataType::Float64, true),
            Field::new("status", DataType::Utf8, true),
        ]));
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int64Array::from(vec![Some(1), Some(2), Some(2), None])),
                Arc::new(Float64Array::from(vec![
                    Some(5.0),
                    Some(50.0),
                    None,
                    Some(1.0),
                ])),
                Arc::new(StringArray::from(vec![
                    Some("paid"),
                    Some("lost"),
                    None,
                    Some("paid"),
                ])),
            ],
        )
        .unwrap()
    }

    fn check(texts: &[&str]) -> Result<Vec<Verdict>, ExpectError> {
        let exps: Vec<Expectation> = texts.iter().map(|t| t.parse().unwrap()).collect();
        let mut c = Checker::new(&exps);
        c.update(&batch())?;
        c.update(&batch())?;
        c.finish(Some(batch().schema().as_ref()))
    }

    fn failed(texts: &[&str]) -> Vec<Verdict> {
        match check(texts) {
            Err(ExpectError::Failed(v)) => v.into_iter().filter(|v| !v.passed).collect(),
            other => panic!("{texts:?}: {other:?}"),
        }
    }

    #[test]
    fn each_check_passes_and_fails_on_what_it_names() {
        let ok = check(&[
            "rows(8..8)",
            "between(amount, 0, 50)",
            "in(status, paid|lost)",
        ])
        .unwrap();
        assert!(
            ok.iter().all(|v| v.passed && v.examples.is_empty()),
            "{ok:?}"
        );
        assert_eq!(ok[0].observed, "8 rows");

        let f = failed(&["not_null(id)"]);
        assert_eq!(f[0].observed, "2 null row(s)");
        assert!(f[0].examples[0].contains("id: null"), "{:?}", f[0].examples);
        // Across batches: 2 repeats in each, plus the whole second batch.
        assert_eq!(failed(&["unique(id)"])[0].observed, "5 row(s) repeat a key");
        assert_eq!(
            failed(&["unique(id, status)"])[0].observed,
            "4 row(s) repeat a key"
        );
        assert_eq!(failed(&["rows(..7)"])[0].observed, "8 rows");
        assert!(failed(&["rows(9..)"])[0].observed == "8 rows");
        let f = failed(&["between(amount, 0, 10)"]);
        assert_eq!(f[0].observed, "2 row(s) outside");
        assert!(
            f[0].examples[0].contains("amount: 50"),
            "{:?}",
            f[0].examples
        );
        let f = failed(&["in(status, paid)"]);
        assert!(
            f[0].examples[0].contains("status: lost"),
            "{:?}",
            f[0].examples
        );
        assert_eq!(f[0].examples.len(), 2);
    }

    #[test]
    fn bad_expectations_are_named() {
        for bad in [
            "nope(x)",
            "not_null(a, b)",
            "rows(5)",
            "rows(9..1)",
            "between(a, x, 1)",
            "unique()",
            "not_null",
        ] {
            assert!(bad.parse::<Expectation>().is_err(), "{bad}");
        }
        let e: Expectation = " between( amount , 0 , 1e3 ) ".parse().unwrap();
        assert_eq!(e.to_string(), "between(amount, 0, 1000)");
        let exps = ["not_null(nope)".parse().unwrap()];
        let mut c = Checker::new(&exps);
        let err = c.update(&batch()).unwrap_err().to_string();
        assert!(
            err.contains("no column `nope`") && err.contains("id, amount, status"),
            "{err}"
        );
        // No rows at all: the columns are still checked, against the schema.
        let err = Checker::new(&exps)
            .finish(Some(batch().schema().as_ref()))
            .unwrap_err();
        assert!(err.to_string().contains("no column `nope`"), "{err}");
    }

    #[test]
    fn values_that_do_not_read_as_the_checked_type_fail() {
        let schema = Arc::new(Schema::new(vec![Field::new("v", DataType::Utf8, true)]));
        let b = RecordBatch::try_new(
            schema.clone(),
            vec![Arc::new(StringArray::from(vec![
                Some("5"),
                Some("abc"),
                None,
            ]))],
        )
        .unwrap();
        let exps = ["between(v, 0, 10)".parse().unwrap()];
        let mut c = Checker::new(&exps);
        c.update(&b).unwrap();
        match c.finish(Some(schema.as_ref())) {
            Err(ExpectError::Failed(v)) => assert_eq!(v[0].observed, "1 row(s) outside"),
            other => panic!("{other:?}"),
        }
    }
}
