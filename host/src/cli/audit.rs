//! `idem audit`: prove a table slice by slice, from its commits to the
//! rows it holds (and, with --replay, to a re-run).

use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use serde_json::{Value, json};

use super::Out;
use super::flags::{KeyArgs, LimitArgs};

#[derive(Args, Debug)]
pub struct AuditArgs {
    /// The table (path or URL).
    pub table: String,
    /// Only this slice.
    #[arg(long)]
    pub slice: Option<String>,
    /// Also re-run every slice's manifest and compare the output.
    #[arg(long)]
    pub replay: bool,
    #[command(flatten)]
    pub keys: KeyArgs,
    #[command(flatten)]
    pub limits: LimitArgs,
}

pub fn audit(a: AuditArgs, out: Out) -> Result<ExitCode> {
    let sandbox = if a.replay {
        Some(a.limits.sandbox()?)
    } else {
        None
    };
    let keys = a.keys.keys()?;
    let opts = idem::audit::AuditOptions {
        slice: a.slice.clone(),
        replay: sandbox.as_ref(),
        keys: &keys,
    };
    let report = idem::audit::audit(&a.table, &opts)?;
    let state = idem::audit::Proof::name;
    let failed = report
        .iter()
        .filter(|s| s.proof == idem::audit::Proof::Failed)
        .count();
    let slices: Vec<Value> = report
        .iter()
        .map(|s| {
            json!({"slice": s.slice, "version": s.version, "proof": state(&s.proof), "detail": s.detail})
        })
        .collect();
    out.emit(
        json!({"table": a.table, "slices": slices, "proven": failed == 0}),
        || {
            if report.is_empty() {
                println!("no idem slices in {}", a.table);
                return;
            }
            for s in &report {
                let st = match s.proof {
                    idem::audit::Proof::Failed => "FAILED",
                    ref p => state(p),
                };
                println!("{:<24} v{:<6} {:<13} {}", s.slice, s.version, st, s.detail);
            }
            if failed > 0 {
                println!("{failed} of {} slices are not proven", report.len());
            } else {
                println!("all {} slices proven", report.len());
            }
        },
    );
    Ok(if failed > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
