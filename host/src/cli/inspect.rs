//! `idem inspect`: a module's digest, imports, exports and whether the
//! sandbox admits it.

use std::process::ExitCode;

use anyhow::Result;
use serde_json::{Value, json};

use idem::sandbox::{ImportVerdict, Sandbox, SandboxConfig};

use super::Out;

pub fn inspect(bytes: &[u8], out: Out) -> Result<ExitCode> {
    // The default cache, as `idem build` and `idem run` use it: a module
    // just built is inspected without compiling it again.
    let sandbox = Sandbox::new(SandboxConfig::default())?;
    let (digest, adm) = sandbox.inspect(bytes)?;
    let verdict = adm.verdict();
    let profile = sandbox.config().profile.name();
    let imports: Vec<Value> = adm
        .imports
        .iter()
        .map(|(name, v)| match v {
            ImportVerdict::Allowed => json!({"name": name, "allowed": true}),
            ImportVerdict::Forbidden(r) => json!({"name": name, "allowed": false, "reason": r}),
        })
        .collect();
    out.emit(
        json!({
            "module": digest.as_str(),
            "imports": imports,
            "exports": adm.exports,
            "admitted": verdict.is_ok(),
            "profile": profile,
            "rejection": verdict.as_ref().err().map(|e| e.to_string()),
        }),
        || {
            println!("digest:  {digest}");
            println!("imports:");
            for (name, v) in &adm.imports {
                match v {
                    ImportVerdict::Allowed => println!("  {name}  (allowed)"),
                    ImportVerdict::Forbidden(r) => println!("  {name}  (FORBIDDEN: {r})"),
                }
            }
            println!("exports:");
            for e in &adm.exports {
                println!("  {e}");
            }
            match &verdict {
                Ok(()) => println!("verdict: admitted (profile {profile})"),
                Err(e) => println!("verdict: rejected: {e}"),
            }
        },
    );
    // A rejected module is a sandbox rejection (exit 3), reported as the
    // result above rather than as an error.
    Ok(match verdict {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => ExitCode::from(e.kind().exit_code()),
    })
}
