//! A run's module as its caller names it: a path or URL, or
//! `sha256:<hex>`, the module stored beside the target table under
//! `_idem/modules/` (where every committed run keeps its module). A
//! distributed caller publishes the module once and sends each task the
//! digest, never the bytes; every run reads the stored module back and
//! refuses it unless it hashes to the digest it was sent.

use std::path::Path;

use super::record::module_path;
use super::{RunError, runtime};
use crate::digest::Digest;
use crate::sandbox::{ModuleId, Sandbox};
use crate::table::Table;

/// The digest a module name stands for, when it is `sha256:<hex>`.
pub(super) fn stored(module: &Path) -> Result<Option<Digest>, RunError> {
    match module.to_str() {
        Some(text) if text.starts_with("sha256:") => Digest::parse(text).map(Some).map_err(|e| {
            RunError::Usage(format!(
                "module {e}: give the digest `idem publish` printed (a file whose name starts with `sha256:` is `./{text}`)"
            ))
        }),
        _ => Ok(None),
    }
}

/// Read and identify the module `module` names for a run into `table`
/// (`None`: a table that does not exist yet, which stores no module).
pub(super) fn identify(
    rt: &tokio::runtime::Runtime,
    sandbox: &Sandbox,
    module: &Path,
    table: (&url::Url, Option<&Table>),
) -> Result<ModuleId, RunError> {
    let Some(digest) = stored(module)? else {
        return Ok(sandbox.identify(&sandbox.read_module(module)?)?);
    };
    let rel = module_path(&digest);
    let not_stored = || {
        RunError::Usage(format!(
            "the module {digest} is not stored at {}_idem/{rel}: publish it to this table first (`idem publish MODULE --table TABLE`, or idem.publish_module), or name the module by its path or URL",
            table.0
        ))
    };
    let opened = table.1.ok_or_else(not_stored)?;
    // Anyone who can write `_idem/` can plant anything there: the bytes
    // are hashed before they are parsed (a stored module is the component
    // bytes its digest names), and an unreadable or oversized object is
    // the same finding as a swapped one.
    let swapped = |what: String| {
        RunError::Usage(format!(
            "the stored module {}_idem/{rel} is not the module {digest}: {what} (it was swapped or corrupted); publish the module again",
            table.0
        ))
    };
    let bytes = match rt.block_on(opened.get_sidecar(&rel)) {
        Ok(Some(bytes)) => bytes,
        Ok(None) => return Err(not_stored()),
        Err(crate::table::TableError::Sidecar { detail, .. }) => return Err(swapped(detail)),
        Err(e) => return Err(e.into()),
    };
    let limit = sandbox.config().limits.max_module_bytes;
    if bytes.len() > limit {
        return Err(swapped(format!(
            "it is {} bytes, over the {} MiB module limit",
            bytes.len(),
            limit >> 20
        )));
    }
    let found = Digest::of_bytes(&bytes);
    if found != digest {
        return Err(swapped(format!("it hashes to {found}")));
    }
    Ok(sandbox.identify(&bytes)?)
}

/// Store the module at `module` (a path or URL) beside `table` under
/// `_idem/modules/<hex>.wasm`, once, after checking that it loads in
/// `sandbox` (admission and compilation, so a module no run could use is
/// refused here, not in every task). Returns its digest, the name runs
/// give it as `sha256:<hex>`.
pub fn publish_module(sandbox: &Sandbox, module: &Path, table: &str) -> Result<Digest, RunError> {
    let rt = runtime()?;
    let id = sandbox.identify(&sandbox.read_module(module)?)?;
    sandbox.load_identified(&id)?;
    let rel = module_path(&id.digest);
    rt.block_on(async {
        let table = Table::open(table).await?;
        // What is there is replaced unless it is this module: also an
        // object that cannot be read (planted, oversized).
        let kept = table.get_sidecar(&rel).await.ok().flatten();
        if kept.is_none_or(|b| Digest::of_bytes(&b) != id.digest) {
            table.put_sidecar(&rel, id.bytes.to_vec()).await?;
        }
        Ok::<_, RunError>(())
    })?;
    Ok(id.digest)
}
