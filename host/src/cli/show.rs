//! `idem show` and `idem explain`: stored runs for people.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Result, bail};
use clap::Args;
use serde_json::{Value, json};

use idem::catalog::{Found, Holding};
use idem::explain::Change;
use idem::manifest::Manifest;

use super::{LimitArgs, Out, SliceArgs};

#[derive(Args, Debug)]
pub struct ShowArgs {
    /// A manifest file (path or URL), TABLE#SLICE (the slice's current
    /// run), or a run key or manifest digest (a prefix of 8+ hex digits
    /// will do) with --table.
    pub run: String,
    /// The table that holds the run key.
    #[arg(long)]
    pub table: Option<String>,
}

pub fn show(a: ShowArgs, out: Out) -> Result<ExitCode> {
    let found = idem::catalog::find(&a.run, a.table.as_deref())?;
    if out.json {
        // Exactly the stored bytes: what the manifest's digest covers.
        use std::io::Write;
        let mut stdout = std::io::stdout().lock();
        stdout.write_all(&found.bytes)?;
        stdout.write_all(b"\n")?;
        return Ok(ExitCode::SUCCESS);
    }
    let holding = idem::catalog::holding(&found);
    print_manifest(&found, &holding);
    Ok(ExitCode::SUCCESS)
}

fn size(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 30 => format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64),
        b if b >= 1 << 20 => format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64),
        b if b >= 1 << 10 => format!("{:.1} KiB", b as f64 / 1024.0),
        b => format!("{b} B"),
    }
}

fn print_manifest(f: &Found, holding: &Holding) {
    let m = &f.manifest;
    let s = &m.spec;
    println!("manifest:     {}  {}", f.digest, f.location);
    println!("run key:      {}", m.run_key);
    let total: u64 = s.slice.inputs.iter().map(|i| i.size).sum();
    let pinned = s
        .slice
        .delta_version
        .map(|v| format!(", Delta version {v}"))
        .unwrap_or_default();
    println!(
        "slice:        {}  ({} under {}{pinned})",
        s.slice.id, s.slice.kind, s.slice.root
    );
    println!(
        "inputs:       {} object(s), {}",
        s.slice.inputs.len(),
        size(total)
    );
    for i in &s.slice.inputs {
        println!("  {}  {}  {}", i.path, size(i.size), i.digest);
    }
    println!("module:       {}", s.module);
    println!("engine:       {}", s.engine);
    println!("params:       {}", s.params);
    println!(
        "logical date: {}",
        s.logical_date.as_deref().unwrap_or("(none)")
    );
    println!("batch rows:   {}", s.batch_rows);
    let how = match (&s.target.partition, s.target.keys.as_slice()) {
        (Some((k, v)), _) => format!("{} {k}={v}", s.target.mode),
        (None, []) => s.target.mode.clone(),
        (None, keys) => format!("{} on ({})", s.target.mode, keys.join(", ")),
    };
    println!("target:       {}  ({how})", s.target.table);
    if !s.expectations.is_empty() {
        println!("expectations: {}", s.expectations.join("; "));
    }
    if let Some(a) = &s.audit {
        println!("audit module: {}  params {}", a.module, a.params);
    }
    println!(
        "output:       {}  ({} rows in, {} rows out{})",
        m.result.output_digest,
        m.result.rows_in,
        m.result.rows_out,
        m.result
            .fuel
            .map(|f| format!(", {f} fuel"))
            .unwrap_or_default()
    );
    if let Some(c) = &m.result.columns {
        println!("columns read: {}", c.join(", "));
    }
    if !m.result.dictionaries.is_empty() {
        println!(
            "taken dictionary-encoded: {}",
            m.result.dictionaries.join(", ")
        );
    }
    for v in &m.result.audits {
        println!(
            "  {} {}: {}",
            if v.passed { "passed" } else { "FAILED" },
            v.expectation,
            v.observed
        );
    }
    let held = match holding {
        Holding::Current {
            version,
            same_manifest: true,
        } => format!("version {version}, the slice's current commit"),
        Holding::Current {
            version,
            same_manifest: false,
        } => format!(
            "version {version}, the slice's current commit (committed by another run with the same output; this run found it unchanged)"
        ),
        Holding::Superseded { version } => format!(
            "no current version: the slice's current commit (version {version}) holds another output"
        ),
        Holding::NoCommit => "no version: the table has no commit for this slice".into(),
        Holding::Unknown(why) => format!("unknown ({why})"),
    };
    println!("held by:      {held}");
}

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
    let changes = e
        .current
        .as_ref()
        .map(|(_, m)| idem::explain::diff(&m.spec, &e.planned))
        .unwrap_or_default();
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
            "sameRunKey": e.current.as_ref().is_some_and(|(_, m)| m.run_key == e.run_key),
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
