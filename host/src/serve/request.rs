//! A tenant's run request checked before it is queued (module uploaded,
//! paths inside the root, one slice, a known mode, valid expectations),
//! and turned into the [`Run`] it asks for, its paths resolved below the
//! root: the same run the CLI would make of the same arguments.

use std::path::PathBuf;

use crate::run::{Run, SliceSpec};
use crate::table::Mode;

use super::paths::{module_rel, under};
use super::queue::RunRequest;
use super::reply::Refusal;
use super::tenant::Tenant;

/// The largest `batchRows` a tenant may ask for: every run's
/// ([`crate::run::MAX_BATCH_ROWS`]), refused here before it is queued.
pub use crate::run::MAX_BATCH_ROWS;

/// Check a request against the tenant before it is queued: paths inside
/// the root, the module uploaded, a known mode.
pub fn check(t: &Tenant, r: &RunRequest) -> Result<(), Refusal> {
    let rel = module_rel(&r.module)?;
    let store = crate::storage::Store::at(&t.cfg.root)
        .map_err(|_| Refusal(500, "the tenant's storage is not reachable".into()))?;
    match store.size(&rel) {
        Ok(Some(_)) => {}
        Ok(None) => {
            return Err(Refusal(
                404,
                format!(
                    "no module {} was uploaded by this tenant: POST it to /v1/modules first",
                    r.module
                ),
            ));
        }
        Err(_) => return Err(Refusal(503, "the tenant's storage is not reachable".into())),
    }
    for p in r
        .input
        .iter()
        .chain(&r.files)
        .chain(std::iter::once(&r.table))
    {
        under(t, p, "path")?;
    }
    if r.batch_rows.is_some_and(|n| n == 0 || n > MAX_BATCH_ROWS) {
        return Err(Refusal(
            400,
            format!("batchRows must be from 1 to {MAX_BATCH_ROWS}"),
        ));
    }
    if r.input.is_some() != r.files.is_empty() {
        return Err(Refusal(
            400,
            "give one slice: `input` with `partition`, or `files`".into(),
        ));
    }
    if r.input.is_some() && r.partition.is_none() {
        return Err(Refusal(
            400,
            "`input` needs `partition` (column=value)".into(),
        ));
    }
    mode_of(r)?;
    for e in &r.expect {
        e.parse::<crate::expect::Expectation>()
            .map_err(|err| Refusal(400, format!("expect `{e}`: {err}")))?;
    }
    Ok(())
}

/// The mode a request names (`None`: the run's default), as the CLI
/// reads `--mode` and `--key`.
fn mode_of(r: &RunRequest) -> Result<Option<Mode>, Refusal> {
    let Some(name) = r.mode.as_deref() else {
        return Ok(None);
    };
    // As the CLI: the slice's partition is the target's.
    let partition = || match &r.partition {
        Some(p) => crate::run::parse_partition(p).map_err(|e| Refusal(400, e.to_string())),
        None => Ok(crate::slice::Partition::default()),
    };
    let mode = Mode::parse(name, &r.key, partition)?
        .ok_or_else(|| Refusal(400, format!("unknown mode `{name}`: {}", Mode::NAMES)))?;
    if mode.is_keyless_merge() {
        return Err(Refusal(400, "mode merge needs `key`".into()));
    }
    Ok(Some(mode))
}

/// The [`Run`] a request of tenant `t` asks for, its paths resolved
/// below the root.
pub fn build_run(t: &Tenant, r: &RunRequest) -> Result<Run, Refusal> {
    check(t, r)?;
    let module = under(t, &module_rel(&r.module)?, "module")?;
    let slice = match (&r.input, &r.partition) {
        (Some(input), Some(p)) => {
            let partition =
                crate::run::parse_partition(p).map_err(|e| Refusal(400, e.to_string()))?;
            SliceSpec::Partition {
                root: PathBuf::from(under(t, input, "input")?),
                partition,
            }
        }
        _ => SliceSpec::Files {
            files: r
                .files
                .iter()
                .map(|f| under(t, f, "file").map(PathBuf::from))
                .collect::<Result<_, _>>()?,
            id: r.partition.clone(),
        },
    };
    let mut run = Run::new(module, slice, under(t, &r.table, "table")?)
        .params(r.params.to_string())
        .logical_date(r.logical_date.clone())
        .batch_rows(r.batch_rows.unwrap_or(8192))
        .time_limit(Some(std::time::Duration::from_millis(t.cfg.run_timeout_ms)))
        .sign_with(t.signer.clone())
        .lineage(t.lineage.clone(), None)
        .expect(r.expect.iter().filter_map(|e| e.parse().ok()).collect());
    if let Some(m) = mode_of(r)? {
        run = run.mode(m);
    }
    Ok(run)
}
