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
    let given = manifest.to_string_lossy();
    // A manifest or envelope file, else `TABLE#SLICE` (the slice's
    // current run), as `idem show` takes it.
    let (location, bytes) = match idem::storage::read_location(&given) {
        Ok(b) => (given.to_string(), b.to_vec()),
        Err(e) if given.contains('#') => match idem::catalog::find(&given, None) {
            Ok(found) => (found.location, found.bytes),
            // No such file: what the table said about TABLE#SLICE.
            Err(lookup) if matches!(e, idem::storage::StorageError::NotFound(_)) => {
                return Err(lookup.into());
            }
            Err(_) => return Err(e).with_context(|| format!("reading manifest {given}")),
        },
        Err(e) => return Err(e).with_context(|| format!("reading manifest {given}")),
    };
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
