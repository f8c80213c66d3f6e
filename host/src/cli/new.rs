//! `idem new`: a transform project to start from (a Rust crate, a
//! JavaScript package or a Python project).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, Result};
use clap::Args;
use serde_json::json;

use super::Out;

#[derive(Args, Debug)]
pub struct NewArgs {
    /// The crate's name (lowercase, `_` or `-`), e.g. daily_totals.
    pub name: String,
    /// Where to create it (default: ./NAME).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Depend on the idem-guest crate at this path (default: this idem's
    /// own guest-sdk/ when it is on disk, else the published crate).
    #[arg(long)]
    pub sdk_path: Option<PathBuf>,
    /// The transform's language: a Rust crate, a JavaScript package or a
    /// Python project.
    #[arg(long, value_enum, default_value = "rust")]
    pub lang: idem::build::Language,
}

pub fn new(a: NewArgs, out: Out) -> Result<ExitCode> {
    use idem::scaffold::Sdk;
    let dir = a.dir.clone().unwrap_or_else(|| PathBuf::from(&a.name));
    let files = match a.lang {
        idem::build::Language::Rust => {
            let sdk = match &a.sdk_path {
                Some(p) => Sdk::Path(std::fs::canonicalize(p).with_context(|| {
                    format!("--sdk-path {}: no idem-guest crate there", p.display())
                })?),
                // The checkout's SDK, or the copy inside the binary.
                None => Sdk::Path(idem::build::sdk_root()?.join("guest-sdk")),
            };
            idem::scaffold::new_crate(&dir, &a.name, &sdk)?
        }
        lang => idem::scaffold::new_project(&dir, &a.name, lang)?,
    };
    let files: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
    out.emit(
        json!({"crate": a.name, "path": dir.display().to_string(), "files": files}),
        || {
            println!("created {} in {}", a.name, dir.display());
            let build = format!(
                "idem build {} --out {}.wasm",
                dir.display(),
                a.name.replace('-', "_")
            );
            if a.lang == idem::build::Language::Rust {
                println!("next:    cd {} && cargo test", dir.display());
                println!("         {build}");
            } else {
                println!("next:    {build}");
            }
        },
    );
    Ok(ExitCode::SUCCESS)
}
