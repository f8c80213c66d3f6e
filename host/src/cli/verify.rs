//! `idem verify`: re-run a stored manifest and compare its output digest.

use std::process::ExitCode;

use anyhow::{Context as _, Result};
use serde_json::json;

use idem::run::Verdict;

use super::Out;
use super::flags::{KeyArgs, LimitArgs};

pub fn verify(
    manifest: &std::path::Path,
    limits: &LimitArgs,
    keys: &KeyArgs,
    allow_engine: bool,
    out: Out,
) -> Result<ExitCode> {
    let keys = keys.keys()?;
    let location = manifest.to_string_lossy();
    let bytes = idem::storage::read_location(&location)
        .with_context(|| format!("reading manifest {location}"))?;
    let sandbox = limits.sandbox()?;
    let url = idem::storage::locate(&location)?;
    let (_, file_name) = idem::storage::split_last(&url);
    let name = Some(file_name.as_str()).filter(|n| !n.is_empty());
    let check = idem::audit::verify_manifest(name, &bytes, &sandbox, allow_engine, &keys)?;
    let (matched, digest, reason) = match &check.verdict {
        Verdict::Match { output_digest } => (true, Some(output_digest.as_str()), None),
        Verdict::Mismatch(why) => (false, None, Some(why.as_str())),
    };
    out.emit(
        json!({
            "manifest": location,
            "match": matched,
            "outputDigest": digest,
            "reason": reason,
            "notes": check.notes,
        }),
        || {
            for n in &check.notes {
                println!("{n}");
            }
            match &check.verdict {
                Verdict::Match { output_digest } => {
                    println!("match: re-run produced {output_digest}")
                }
                Verdict::Mismatch(why) => println!("MISMATCH: {why}"),
            }
        },
    );
    Ok(if matched {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
