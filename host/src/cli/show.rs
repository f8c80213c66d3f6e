//! `idem show`: a stored run's manifest, for people (or its exact bytes
//! with `--json`).

use std::process::ExitCode;

use anyhow::Result;
use clap::Args;

use idem::catalog::{Found, Holding};
use idem::manifest::Manifest;

use super::Out;

#[derive(Args, Debug)]
pub struct ShowArgs {
    /// A manifest file (path or URL), TABLE#SLICE (the slice's current
    /// run), a run key or manifest digest (a prefix of 8+ hex digits will
    /// do) with --table, or a TABLE (its slices' current runs).
    pub run: String,
    /// The table that holds the run key.
    #[arg(long)]
    pub table: Option<String>,
}

pub fn show(a: ShowArgs, out: Out) -> Result<ExitCode> {
    if a.table.is_none()
        && let Some(slices) = idem::catalog::table_slices(&a.run)?
    {
        print_slices(&a.run, &slices, out);
        return Ok(ExitCode::SUCCESS);
    }
    let pending = a
        .table
        .is_none()
        .then(|| idem::catalog::pending(&a.run))
        .flatten();
    // Never published: the branch is all there is to show.
    if let Some(p) = pending.as_ref().filter(|p| !p.published) {
        print_pending(Some(p), out);
        return Ok(ExitCode::SUCCESS);
    }
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
    print_pending(pending.as_ref(), out);
    Ok(ExitCode::SUCCESS)
}

/// The slice's output waiting on a branch (write-audit-publish): its
/// audit failed, or has not finished.
fn print_pending(p: Option<&idem::table::Pending>, out: Out) {
    let Some(p) = p else { return };
    if out.json {
        super::print_json(&serde_json::json!({ "unpublished": p }));
        return;
    }
    let gone = if p.branch_there {
        ""
    } else {
        " (the branch no longer points at it)"
    };
    // Read from the table's properties: any writer's text.
    let t = |s: &str| idem::text::shown(s, 256);
    println!(
        "unpublished:  branch {} at snapshot {} (version {}){gone}: run key {}, output {}; its audit failed or has not finished, main does not hold it",
        t(&p.branch),
        p.snapshot,
        p.version,
        t(&p.run_key),
        t(&p.output_digest)
    );
}

/// A table's slices: each one's current commit (what `TABLE#SLICE`
/// shows in full).
fn print_slices(table: &str, slices: &[idem::table::SliceCommit], out: Out) {
    let short = |d: &Option<idem::digest::Digest>| {
        d.as_ref()
            .map(|d| d.to_string().chars().take(19).collect::<String>())
            .unwrap_or_else(|| "-".into())
    };
    if out.json {
        let rows: Vec<serde_json::Value> = slices
            .iter()
            .map(|c| {
                serde_json::json!({
                    "slice": c.slice,
                    "version": c.version,
                    "mode": c.mode,
                    "runKey": c.run_key.as_ref().map(|d| d.to_string()),
                    "outputDigest": c.output_digest.as_ref().map(|d| d.to_string()),
                    "manifestDigest": c.manifest_digest.as_ref().map(|d| d.to_string()),
                })
            })
            .collect();
        super::print_json(&serde_json::json!({ "table": table, "slices": rows }));
        return;
    }
    if slices.is_empty() {
        println!("{table} has no slice committed by idem (see `idem log {table}`)");
        return;
    }
    println!(
        "{:<24} {:>7}  {:<20} {:<20} {:<20}",
        "SLICE", "VERSION", "MODE", "RUN KEY", "OUTPUT"
    );
    for c in slices {
        println!(
            "{:<24} {:>7}  {:<20} {:<20} {:<20}",
            c.slice,
            c.version,
            c.mode,
            short(&c.run_key),
            short(&c.output_digest)
        );
    }
    println!(
        "{} slice(s); one in full: idem show '{table}#SLICE'",
        slices.len()
    );
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
    println!("manifest:     {}  {}", f.digest, f.location);
    println!("run key:      {}", m.run_key);
    print_slice(m);
    print_spec(m);
    print_result(m);
    println!("held by:      {}", held_by(holding));
}

/// The slice and its inputs.
fn print_slice(m: &Manifest) {
    let s = &m.spec;
    let total: u64 = s.slice.inputs.iter().map(|i| i.size).sum();
    let pinned = s
        .slice
        .delta_version
        .map(|v| format!(", table version {v}"))
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
}

/// What ran (module, engine, params ...) and where it commits.
fn print_spec(m: &Manifest) {
    let s = &m.spec;
    println!("module:       {}", s.module);
    println!("engine:       {}", s.engine);
    println!("params:       {}", s.params);
    println!(
        "logical date: {}",
        s.logical_date.as_deref().unwrap_or("(none)")
    );
    println!("batch rows:   {}", s.batch_rows);
    let how = match (&s.target.partition, s.target.keys.as_slice()) {
        (Some(p), _) => format!("{} {p}", s.target.mode),
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
}

/// The output, and the checks it passed.
fn print_result(m: &Manifest) {
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
}

/// Which version of the table holds the run.
fn held_by(holding: &Holding) -> String {
    match holding {
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
    }
}
