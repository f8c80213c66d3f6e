//! `idem new NAME`: a transform crate that `idem build` turns into an
//! admitted component without edits, and whose native unit test passes
//! with `cargo test`.

use crate::kind::Kind;
use std::path::{Path, PathBuf};

use thiserror::Error;

/// Why the crate was not created. No existing file is ever overwritten.
#[derive(Debug, Error)]
pub enum ScaffoldError {
    /// Not a usable crate name.
    #[error(
        "`{0}` is not a usable crate name: use lowercase letters, digits and `_` or `-`, starting with a letter, and not a Rust keyword or built-in crate name (e.g. `daily_totals`)"
    )]
    BadName(String),
    /// The directory exists and is not empty.
    #[error("`{0}` already exists and is not empty: choose another NAME or --dir, or remove it")]
    Exists(String),
    /// Writing failed.
    #[error("writing {path}: {source}")]
    Write {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
}

impl ScaffoldError {
    /// The kind of the failure (and the CLI's exit code).
    pub fn kind(&self) -> Kind {
        match self {
            ScaffoldError::Write { .. } => Kind::Storage,
            ScaffoldError::BadName(_) | ScaffoldError::Exists(_) => Kind::Input,
        }
    }
}

/// Where the crate gets `idem-guest` from.
#[derive(Debug, Clone)]
pub enum Sdk {
    /// A local checkout of idem's `guest-sdk/` (and the `Cargo.lock` beside
    /// it, so the crate builds exactly the versions idem was tested with).
    Path(PathBuf),
    /// The published crate.
    Version(String),
}

/// Create crate `name` in `dir`; returns the files written.
pub fn new_crate(dir: &Path, name: &str, sdk: &Sdk) -> Result<Vec<PathBuf>, ScaffoldError> {
    let valid = name.chars().next().is_some_and(|c| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
        && name.len() <= 64
        && !RESERVED.contains(&name.replace('-', "_").as_str());
    if !valid {
        return Err(ScaffoldError::BadName(name.to_string()));
    }
    let ident = type_name(name);
    let dependency = match sdk {
        Sdk::Path(p) => format!(
            "idem-guest = {{ path = {} }}",
            toml_string(&p.display().to_string())
        ),
        Sdk::Version(v) => format!("idem-guest = {}", toml_string(v)),
    };
    let mut files = vec![
        ("Cargo.toml".to_string(), cargo_toml(name, &dependency)),
        ("src/lib.rs".to_string(), LIB_RS.replace("Template", &ident)),
        ("README.md".to_string(), README.replace("NAME", name)),
        (".gitignore".to_string(), "/target\n".to_string()),
    ];
    if let Sdk::Path(p) = sdk
        && let Some(root) = p.parent()
        && let Ok(lock) = std::fs::read_to_string(root.join("Cargo.lock"))
    {
        files.push(("Cargo.lock".to_string(), lock));
    }
    write_new(dir, files)
}

/// Create a JavaScript (`lang = Js`) or Python project `name` in `dir`:
/// a transform `idem build` turns into an admitted component without
/// edits. The SDK is not a dependency to install: `idem build` embeds the
/// one it was built with. Returns the files written.
pub fn new_project(
    dir: &Path,
    name: &str,
    lang: crate::build::Language,
) -> Result<Vec<PathBuf>, ScaffoldError> {
    use crate::build::Language;
    let valid = name.chars().next().is_some_and(|c| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
        && name.len() <= 64
        && name != "idem_guest"
        && name != "idem-guest";
    if !valid {
        return Err(ScaffoldError::BadName(name.to_string()));
    }
    let ident = camel(name);
    let files: Vec<(String, String)> = match lang {
        Language::JavaScript => vec![
            (
                "package.json".into(),
                format!(
                    "{{\n  \"name\": {},\n  \"version\": \"0.1.0\",\n  \"private\": true,\n  \"type\": \"module\",\n  \"main\": \"src/index.js\"\n}}\n",
                    serde_json::Value::from(name)
                ),
            ),
            (
                "src/index.js".into(),
                JS_TEMPLATE.replace("Template", &ident),
            ),
            ("README.md".into(), LANG_README.replace("NAME", name)),
            (".gitignore".into(), "node_modules/\n*.wasm\n".into()),
        ],
        Language::Python => vec![
            (
                "pyproject.toml".into(),
                format!(
                    "[project]\nname = {}\nversion = \"0.1.0\"\nrequires-python = \">=3.10\"\n\n[tool.idem]\n# The module that defines and exports the transform.\nmodule = \"app\"\n",
                    toml_string(name)
                ),
            ),
            ("app.py".into(), PY_TEMPLATE.replace("Template", &ident)),
            ("README.md".into(), LANG_README.replace("NAME", name)),
            (".gitignore".into(), "__pycache__/\n*.wasm\n".into()),
        ],
        Language::Rust => {
            return Err(ScaffoldError::BadName(format!(
                "{name}: Rust crates are created by new_crate"
            )));
        }
    };
    write_new(dir, files)
}

/// Write `files` under `dir`, which must be missing or empty; never over a
/// file that appeared meanwhile.
fn write_new(dir: &Path, files: Vec<(String, String)>) -> Result<Vec<PathBuf>, ScaffoldError> {
    let taken = match std::fs::read_dir(dir) {
        Ok(mut d) => d.next().is_some(),
        Err(e) => e.kind() != std::io::ErrorKind::NotFound,
    };
    if taken {
        return Err(ScaffoldError::Exists(dir.display().to_string()));
    }
    let mut written = Vec::new();
    for (rel, text) in files {
        let path = dir.join(&rel);
        let write = |path: &Path| -> std::io::Result<()> {
            use std::io::Write;
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(path)?
                .write_all(text.as_bytes())
        };
        write(&path).map_err(|e| ScaffoldError::Write {
            path: path.display().to_string(),
            source: e,
        })?;
        written.push(path);
    }
    Ok(written)
}

const JS_TEMPLATE: &str = r#"// An idem transform in JavaScript. idem feeds it the slice's rows in
// batches of `--batch-rows` (the same batches on every rerun) and commits
// what it returns, only when that output is new.
//
// It runs in a sandbox with no clock, no network and no files (Date.now()
// throws; Math.random() is a fixed-seed generator): everything it may
// depend on is in its input, its params and the context, so a rerun
// produces the same bytes.
//
// This one keeps the rows whose `amount` column (when the input has one)
// is at least the `min_amount` param, and logs how many it kept. Columns
// are typed arrays (`column.values`); see the SDK's README for the kernels.
import { compare, exportTransform, filter, log } from 'idem-guest';

class Template {
  /** Called once, before the first batch: read params, check the schema. */
  open(ctx) {
    // `--params '{"min_amount": 10}'` (default: keep every row).
    this.minAmount = ctx.paramNumber('min_amount');
    this.rowsIn = 0;
    this.rowsOut = 0;
  }

  // A transform that reads only some input columns says so, and the host
  // decodes only those (batches then hold exactly them, in order):
  // columns() { return ['customer', 'amount']; }

  /** One input batch in; the rows to output (or undefined) out. */
  push(batch) {
    this.rowsIn += batch.numRows;
    const amount = batch.schema.field('amount') ? batch.column('amount') : undefined;
    const kept = this.minAmount != null && amount !== undefined
      ? filter(batch, compare(amount, '>=', this.minAmount))
      : batch;
    this.rowsOut += kept.numRows;
    return kept;
  }

  /** Called once, after the last batch: emit buffered rows or aggregates. */
  finish() {
    // `idem run` shows these lines on stderr, prefixed with the module.
    log.info(`kept ${this.rowsOut} of ${this.rowsIn} rows`);
    return undefined;
  }
}

export const transform = exportTransform(Template);
"#;

const PY_TEMPLATE: &str = r#""""An idem transform in Python. idem feeds it the slice's rows in batches
of `--batch-rows` (the same batches on every rerun) and commits what it
returns, only when that output is new.

It runs in a sandbox with no clock, no network and no files (time.time()
raises; `random` is seeded the same way on every run): everything it may
depend on is in its input, its params and the context, so a rerun produces
the same bytes.

This one keeps the rows whose `amount` column (when the input has one) is
at least the `min_amount` param, and logs how many it kept. Columns hold
their values in `array`/`memoryview` buffers; see the SDK's README for the
kernels in `idem_guest.compute`.
"""

import idem_guest as ig
from idem_guest import compute


class Template(ig.Transform):
    def open(self, ctx):
        """Called once, before the first batch: read params, check the schema."""
        # `--params '{"min_amount": 10}'` (default: keep every row).
        self.min_amount = ctx.param_float("min_amount")
        self.rows_in = 0
        self.rows_out = 0

    # A transform that reads only some input columns says so, and the host
    # decodes only those (batches then hold exactly them, in order):
    # def columns(self):
    #     return ["customer", "amount"]

    def push(self, batch):
        """One input batch in; the rows to output (or None) out."""
        self.rows_in += batch.num_rows
        if self.min_amount is not None and "amount" in batch.schema:
            batch = batch.filter(compute.ge(batch.column("amount"), self.min_amount))
        self.rows_out += batch.num_rows
        return batch

    def finish(self):
        """Called once, after the last batch: emit buffered rows or aggregates."""
        # `idem run` shows these lines on stderr, prefixed with the module.
        ig.log.info(f"kept {self.rows_out} of {self.rows_in} rows")
        return None


ig.export(Template)
"#;

const LANG_README: &str = r#"# NAME

An idem transform.

    idem build . --out NAME.wasm
    idem sample --out data/orders
    idem run --module NAME.wasm --input data/orders --partition date=2026-10-01 \
        --table lake/NAME --params '{"min_amount": 10}'

Rerun the last command: it finds its committed run and changes nothing.
`idem build` installs its build toolchain once (into ~/.cache/idem/toolchains,
or IDEM_TOOLCHAIN_DIR) and embeds the idem-guest SDK it was built with.
"#;

/// Names cargo refuses for a package (Rust keywords, the built-in crates),
/// and the SDK's own.
const RESERVED: &[&str] = &[
    "abstract",
    "alloc",
    "as",
    "async",
    "await",
    "become",
    "box",
    "break",
    "const",
    "continue",
    "core",
    "crate",
    "do",
    "dyn",
    "else",
    "enum",
    "extern",
    "false",
    "final",
    "fn",
    "for",
    "gen",
    "idem_guest",
    "if",
    "impl",
    "in",
    "let",
    "loop",
    "macro",
    "match",
    "mod",
    "move",
    "mut",
    "override",
    "priv",
    "proc_macro",
    "pub",
    "ref",
    "return",
    "self",
    "static",
    "std",
    "struct",
    "super",
    "test",
    "trait",
    "true",
    "try",
    "type",
    "typeof",
    "unsafe",
    "unsized",
    "use",
    "virtual",
    "where",
    "while",
    "yield",
];

/// Names the template already uses: a crate named after one of them gets
/// `Transform` appended to its type's name.
const TAKEN: &[&str] = &[
    "AsArray",
    "BooleanArray",
    "Context",
    "Float64Type",
    "Level",
    "RecordBatch",
    "Result",
    "Transform",
    "Arc",
    "DataType",
    "Field",
    "Float64Array",
    "Schema",
    "StringArray",
    "Native",
    "Json",
    "Tests",
    "Error",
    "Self",
    "Super",
    "Crate",
];

/// `daily_totals` -> `DailyTotals` (`schema` -> `SchemaTransform`).
fn type_name(name: &str) -> String {
    let camel = camel(name);
    if TAKEN.contains(&camel.as_str()) {
        camel + "Transform"
    } else {
        camel
    }
}

fn camel(name: &str) -> String {
    name.split(['_', '-'])
        .filter(|p| !p.is_empty())
        .map(|p| {
            let mut c = p.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect()
}

fn toml_string(s: &str) -> String {
    serde_json::Value::from(s).to_string()
}

fn cargo_toml(name: &str, dependency: &str) -> String {
    format!(
        r#"[package]
name = "{name}"
version = "0.1.0"
edition = "2024"
publish = false

# cdylib: the .wasm `idem build` turns into a component; rlib: the native
# build the unit tests (and benchmarks) run.
[lib]
crate-type = ["cdylib", "rlib"]

[dependencies]
{dependency}

# A crate of its own, even when created inside another workspace.
[workspace]
"#
    )
}

const LIB_RS: &str = r#"//! An idem transform. idem feeds it the slice's rows in batches of
//! `--batch-rows` (the same batches on every rerun) and commits what it
//! returns, only when that output is new.
//!
//! It runs in a sandbox with no clock, no randomness, no network and no
//! files: everything it may depend on is in its input, its params and the
//! `Context`, so a rerun produces the same bytes.
//!
//! This one keeps the rows whose `amount` column (when the input has one)
//! is at least the `min_amount` param, and logs how many it kept. Edit
//! `open`, `push` and `finish`.

use idem_guest::arrow::array::{AsArray, BooleanArray, RecordBatch};
use idem_guest::arrow::compute::filter_record_batch;
use idem_guest::arrow::datatypes::Float64Type;
use idem_guest::{Context, Level, Result, Transform};

/// The transform's state, kept across batches of one run.
#[derive(Default)]
pub struct Template {
    /// `--params '{"min_amount": 10}'` (default: keep every row).
    min_amount: Option<f64>,
    rows_in: u64,
    rows_out: u64,
}

impl Transform for Template {
    /// Called once, before the first batch: read params, check the schema.
    fn open(&mut self, ctx: &Context) -> Result<()> {
        self.min_amount = ctx.param_f64("min_amount")?;
        Ok(())
    }

    // A transform that reads only some input columns says so, and the
    // host decodes only those (batches then hold exactly them, in order):
    //
    // fn columns(&self) -> Option<Vec<String>> {
    //     Some(vec!["customer".into(), "amount".into()])
    // }

    /// One input batch in; the rows to output (or `None`) out.
    fn push(&mut self, batch: RecordBatch) -> Result<Option<RecordBatch>> {
        self.rows_in += batch.num_rows() as u64;
        let kept = match (self.min_amount, batch.column_by_name("amount")) {
            (Some(min), Some(amount)) => {
                let amount = amount
                    .as_primitive_opt::<Float64Type>()
                    .ok_or("column `amount` must be a float64 to filter on min_amount")?;
                let keep: BooleanArray = amount.iter().map(|a| a.map(|a| a >= min)).collect();
                filter_record_batch(&batch, &keep)?
            }
            _ => batch,
        };
        self.rows_out += kept.num_rows() as u64;
        Ok(Some(kept))
    }

    /// Called once, after the last batch: emit buffered rows or aggregates.
    fn finish(&mut self) -> Result<Option<RecordBatch>> {
        // `idem run` shows these lines on stderr, prefixed with the module.
        idem_guest::log(
            Level::Info,
            &format!("kept {} of {} rows", self.rows_out, self.rows_in),
        );
        Ok(None)
    }
}

idem_guest::export!(Template);

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use idem_guest::arrow::array::{Float64Array, StringArray};
    use idem_guest::arrow::datatypes::{DataType, Field, Schema};
    use idem_guest::native;
    use idem_guest::serde_json::json;

    fn input() -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("customer", DataType::Utf8, false),
            Field::new("amount", DataType::Float64, true),
        ]));
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(StringArray::from(vec!["a", "b", "c"])),
                Arc::new(Float64Array::from(vec![Some(5.0), Some(20.0), None])),
            ],
        )
        .unwrap()
    }

    fn ctx(params: idem_guest::serde_json::Value) -> Context {
        Context {
            slice_id: "test".into(),
            logical_date: None,
            params,
            input_schema: input().schema(),
            batch_rows: 8192,
            side_inputs: Default::default(),
        }
    }

    #[test]
    fn keeps_rows_at_or_above_min_amount() {
        // Runs natively, exactly as the host drives the guest.
        let out = native::run::<Template>(&ctx(json!({"min_amount": 10})), [input()]).unwrap();
        let rows: usize = out.iter().map(|b| b.num_rows()).sum();
        assert_eq!(rows, 1);
    }

    #[test]
    fn keeps_every_row_without_params() {
        let out = native::run::<Template>(&ctx(json!({})), [input()]).unwrap();
        let rows: usize = out.iter().map(|b| b.num_rows()).sum();
        assert_eq!(rows, 3);
    }
}
"#;

const README: &str = r#"# NAME

An idem transform.

    cargo test                  # the native unit tests
    idem build . --out NAME.wasm
    idem sample --out data/orders
    idem run --module NAME.wasm --input data/orders --partition date=2026-10-01 \
        --table lake/NAME --params '{"min_amount": 10}'

Rerun the last command: it finds its committed run and changes nothing.
`idem explain` (same flags) says why a run would or would not execute.
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(type_name("daily_totals"), "DailyTotals");
        assert_eq!(type_name("a-b_c"), "ABC");
        assert_eq!(type_name("schema"), "SchemaTransform");
        assert_eq!(type_name("record_batch"), "RecordBatchTransform");
        assert_eq!(type_name("transform"), "TransformTransform");
        for bad in [
            "",
            "Daily",
            "1x",
            "a b",
            "a/b",
            "..",
            "a.b",
            "fn",
            "test",
            "idem-guest",
        ] {
            let d = tempfile::tempdir().unwrap();
            assert!(matches!(
                new_crate(d.path(), bad, &Sdk::Version("0.1".into())),
                Err(ScaffoldError::BadName(_))
            ));
        }
    }

    #[test]
    fn refuses_a_file_where_the_directory_goes() {
        let d = tempfile::tempdir().unwrap();
        let file = d.path().join("t");
        std::fs::write(&file, "mine").unwrap();
        assert!(matches!(
            new_crate(&file, "t", &Sdk::Version("0.1".into())),
            Err(ScaffoldError::Exists(_))
        ));
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "mine");
    }

    #[test]
    fn refuses_a_non_empty_directory() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("keep.txt"), "mine").unwrap();
        assert!(matches!(
            new_crate(d.path(), "t", &Sdk::Version("0.1".into())),
            Err(ScaffoldError::Exists(_))
        ));
        assert_eq!(
            std::fs::read_to_string(d.path().join("keep.txt")).unwrap(),
            "mine"
        );
    }
}
