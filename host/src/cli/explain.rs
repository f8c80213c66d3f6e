//! `idem explain`: why a run would (not) be memoized. A planned run (the
//! flags of `idem run`) against its slice's current run, or two stored
//! runs against each other, field by field.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Result, bail};
use clap::Args;
use serde_json::{Value, json};

use idem::explain::Change;
use idem::manifest::Manifest;

use super::Out;
use super::flags::LimitArgs;
use super::run::SliceArgs;

#[derive(Args, Debug)]
pub struct ExplainArgs {
    /// Two stored runs to compare (each a manifest file, TABLE#SLICE, or a
    /// run key with --table). Without them, the run that the other flags
    /// describe is planned (inputs hashed, module loaded, nothing executed
    /// or written) and compared with its slice's current run.
    #[arg(num_args = 0..=2, value_names = ["RUN_A", "RUN_B"])]
    pub runs: Vec<String>,
    /// The transform of the planned run.
    #[arg(long)]
    pub module: Option<PathBuf>,
    /// The target table (of the planned run, or that holds RUN_A/RUN_B run keys).
    #[arg(long)]
    pub table: Option<String>,
    #[command(flatten)]
    pub slice: SliceArgs,
    #[command(flatten)]
    pub limits: LimitArgs,
}

fn run_json(m: &Manifest) -> Value {
    json!({"runKey": m.run_key.as_str(), "slice": m.spec.slice.id, "outputDigest": m.result.output_digest.as_str()})
}

fn print_changes(changes: &[Change]) {
    let width = changes.iter().map(|c| c.field.len()).max().unwrap_or(0);
    for c in changes {
        println!("  {:<width$}  {} -> {}", c.field, c.before, c.after);
    }
}

pub fn explain(a: ExplainArgs, out: Out) -> Result<ExitCode> {
    match a.runs.as_slice() {
        [] => explain_planned(a, out),
        [x, y] => {
            if a.module.is_some() {
                bail!(
                    "give either two runs to compare or the flags of a planned run (--module ...), not both"
                );
            }
            let fa = idem::catalog::find(x, a.table.as_deref())?;
            let fb = idem::catalog::find(y, a.table.as_deref())?;
            let changes = idem::explain::diff(&fa.manifest.spec, &fb.manifest.spec);
            let same = fa.manifest.run_key == fb.manifest.run_key;
            out.emit(
                json!({
                    "a": run_json(&fa.manifest),
                    "b": run_json(&fb.manifest),
                    "sameRunKey": same,
                    "memo": Value::Null,
                    "changes": changes,
                }),
                || {
                    println!("a: {}  {}", fa.manifest.run_key, x);
                    println!("b: {}  {}", fb.manifest.run_key, y);
                    if same {
                        println!("same run key: b would be a memo hit of a (nothing to execute)");
                    } else {
                        println!("different run keys; {} field(s) differ:", changes.len());
                        print_changes(&changes);
                    }
                },
            );
            Ok(ExitCode::SUCCESS)
        }
        _ => {
            bail!("give two runs to compare (RUN_A RUN_B), or none and the flags of a planned run")
        }
    }
}

fn explain_planned(a: ExplainArgs, out: Out) -> Result<ExitCode> {
    let (Some(module), Some(table)) = (&a.module, &a.table) else {
        bail!(
            "give the planned run's --module and --table (and its slice flags, as for `idem run`), or two stored runs to compare"
        );
    };
    let sandbox = a.limits.sandbox()?;
    let e = match a.slice.run(module, table)?.explain(&sandbox) {
        Ok(e) => e,
        // Nothing new in an append-only source: nothing would run.
        Err(idem::run::RunError::UpToDate { prefix, through }) => {
            let why = format!(
                "up to date: no new object in {prefix} after {}: `idem run` would run nothing",
                through.as_deref().unwrap_or("the start")
            );
            if out.json {
                bail!("{why}");
            }
            println!("{why}");
            return Ok(ExitCode::SUCCESS);
        }
        Err(e) => return Err(e.into()),
    };
    let changes = e.changes();
    let memo = e.memo.is_some();
    let verdict = match (&e.memo, &e.current) {
        (Some(since), _) => format!(
            "memo hit: this run key was committed{} and its output is still current, so `idem run` would execute nothing",
            since.map(|v| format!(" at version {v}")).unwrap_or_default()
        ),
        (None, None) => format!(
            "no committed run for slice `{}` in {table}: `idem run` would execute and commit",
            e.planned.slice.id
        ),
        (None, Some((_, m))) if m.run_key == e.run_key => "the slice's current run has this run key, but its rows or memo entry changed since (another writer?): `idem run` would execute and recommit".to_string(),
        (None, Some((v, _))) => format!(
            "`idem run` would execute: the run key differs from the slice's current run (version {v}) in {} field(s)",
            changes.len()
        ),
    };
    let current_json = e
        .current
        .as_ref()
        .map(|(v, m)| {
            let mut j = run_json(m);
            j["version"] = json!(v);
            j
        })
        .unwrap_or(Value::Null);
    out.emit(
        json!({
            "a": current_json,
            "b": {"runKey": e.run_key.as_str(), "slice": e.planned.slice.id, "outputDigest": Value::Null},
            "sameRunKey": e.same_run_key(),
            "memo": memo,
            "changes": changes,
        }),
        || {
            println!("planned run:  {}  (slice {})", e.run_key, e.planned.slice.id);
            if let Some((v, m)) = &e.current {
                println!("current run:  {}  (version {v})", m.run_key);
            }
            println!("{verdict}");
            print_changes(&changes);
        },
    );
    Ok(ExitCode::SUCCESS)
}
