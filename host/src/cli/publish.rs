//! `idem publish`: a module stored beside a table, once, so that runs on
//! other machines (Spark tasks, pods) name it by digest.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use serde_json::json;

use super::Out;
use super::flags::LimitArgs;

#[derive(Args, Debug)]
pub struct PublishArgs {
    /// The module (.wasm, a path or URL).
    pub module: PathBuf,
    /// The table whose runs will use it (path or URL).
    #[arg(long)]
    pub table: String,
    #[command(flatten)]
    pub limits: LimitArgs,
}

pub fn publish(a: PublishArgs, out: Out) -> Result<ExitCode> {
    let sandbox = a.limits.sandbox()?;
    let digest = idem::run::publish_module(&sandbox, &a.module, &a.table)?;
    out.emit(json!({"module": digest.as_str(), "table": a.table}), || {
        println!("module:   {digest}");
        println!(
            "stored:   beside {} (_idem/modules/{}.wasm)",
            a.table,
            digest.hex()
        );
        println!("run with: --module {digest}");
    });
    Ok(ExitCode::SUCCESS)
}
