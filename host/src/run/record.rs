//! The run's record beside its table, under `_idem/`: where modules,
//! manifests and memo index entries are kept, the memo lookup, the run
//! log, and the slice's current run. What a run writes after its commit
//! and what `catalog`, `audit` and `explain` read back.

use serde::{Deserialize, Serialize};

use super::{RunError, RunOutcome, RunReport, Timings};
use crate::digest::Digest;
use crate::manifest::Manifest;
use crate::table::{Table, TableError};

/// One line of `_idem/log/`: what a run did and when.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LogEntry {
    /// Unix milliseconds at the end of the run.
    pub at_ms: u64,
    /// Slice id.
    pub slice: String,
    /// Run key.
    pub run_key: Digest,
    /// Manifest digest.
    pub manifest: Digest,
    /// Output digest.
    pub output_digest: Digest,
    /// `committed`, `unchanged` or `memo`.
    pub outcome: String,
    /// The version committed, or that holds the output.
    pub version: Option<u64>,
    /// Output rows.
    pub rows: u64,
    /// Timings.
    pub timings: Timings,
    /// Who ran it ([`super::Run::origin`]), when the caller said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
    /// The run's params as canonical JSON, cut at [`MAX_LOGGED_PARAMS`]
    /// bytes (the manifest holds them whole); absent in entries written
    /// before idem logged them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<String>,
}

/// The most bytes of a run's params a log entry keeps.
pub const MAX_LOGGED_PARAMS: usize = 256;

/// `text` cut at `max` bytes, at a character boundary.
fn cut(text: &str, max: usize) -> String {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_string()
}

/// An origin label as kept: at most [`MAX_ORIGIN`] bytes (a caller's label
/// sizes a log line, so it is cut at a character boundary).
fn bounded_origin(origin: &str) -> String {
    let mut end = origin.len().min(MAX_ORIGIN);
    while !origin.is_char_boundary(end) {
        end -= 1;
    }
    origin[..end].to_string()
}

/// The longest origin label a log line keeps.
pub const MAX_ORIGIN: usize = 512;

/// `_idem/runs/<run key>.json`: the memo index, run key -> manifest.
#[derive(Serialize, Deserialize)]
pub(crate) struct RunIndex {
    pub(crate) manifest: Digest,
}

/// Where a module is kept beside the table (under `_idem/`).
pub(crate) fn module_path(module: &Digest) -> String {
    format!("modules/{}.wasm", module.hex())
}

/// Where a manifest is kept beside the table (under `_idem/`).
pub(crate) fn manifest_path(manifest: &Digest) -> String {
    format!("manifests/{}.json", manifest.hex())
}

/// The memo index entry of a run key (under `_idem/`).
pub(crate) fn run_index_path(run_key: &Digest) -> String {
    format!("runs/{}.json", run_key.hex())
}

/// The run's report: its manifest (with the digest it is stored under)
/// and how it ended.
pub(super) fn report(
    table: &Table,
    manifest: Manifest,
    manifest_digest: Digest,
    outcome: RunOutcome,
    timings: Timings,
) -> RunReport {
    let manifest_url = format!("{}_idem/{}", table.url(), manifest_path(&manifest_digest));
    RunReport {
        manifest,
        manifest_digest,
        manifest_url,
        envelope: None,
        outcome,
        timings_ms: timings,
    }
}

/// The envelope `digest` of `manifest` and where it is kept.
pub(super) fn envelope(
    table: &Table,
    manifest: &Digest,
    digest: Option<Digest>,
) -> Option<(Digest, String)> {
    digest.map(|d| {
        let url = format!(
            "{}_idem/{}",
            table.url(),
            crate::attest::envelope_path(manifest, &d)
        );
        (d, url)
    })
}

/// A memo hit: a committed run with this run key whose output the
/// slice's commit still holds (the manifest, its digest, and the version
/// holding it).
pub(super) async fn memo_hit(
    table: &Table,
    run_key: &Digest,
    slice: &str,
    mode: &crate::table::Mode,
) -> Result<Option<(Manifest, Digest, Option<u64>)>, RunError> {
    if let Some((m, digest)) = memo(table, run_key, slice).await?
        && let crate::table::SliceState::Current { since } = table
            .slice_state(slice, &m.result.output_digest, mode)
            .await?
    {
        return Ok(Some((m, digest, since)));
    }
    Ok(None)
}

/// The manifest of this run key the slice's commit names, and its digest
/// (as stored: what the commit names).
async fn memo(
    table: &Table,
    run_key: &Digest,
    slice: &str,
) -> Result<Option<(Manifest, Digest)>, RunError> {
    // An index that cannot be read (too large, say: anyone who can write
    // `_idem/` can plant one) is a miss, never a failed run: the run
    // executes and writes it again.
    let index = match table.get_sidecar(&run_index_path(run_key)).await {
        Ok(Some(index)) => index,
        Ok(None) | Err(TableError::Sidecar { .. }) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    if serde_json::from_slice::<RunIndex>(&index).is_err() {
        return Ok(None);
    }
    // The index and the manifest are sidecars anyone who can write `_idem/`
    // can forge (a manifest with this run's spec and an old result would
    // skip new input): a hit only when the slice's current commit names a
    // manifest of this run key (its output is then checked by
    // `slice_state`, against the table's app transactions). The index only
    // says the run key ran here; the manifest is the commit's, which is
    // not always the one the index names: a rerun that found the output
    // unchanged, by an idem that writes another manifest format (v1 and
    // v2) or a twin of it, wrote the index last.
    let Some(current) = table.current_manifest(slice).await? else {
        return Ok(None);
    };
    // A manifest that cannot be read or parsed is a miss too.
    let Ok(Some(bytes)) = table.get_sidecar(&manifest_path(&current)).await else {
        return Ok(None);
    };
    if Digest::of_bytes(&bytes) != current {
        return Ok(None);
    }
    let Ok(m) = Manifest::from_bytes(&bytes) else {
        return Ok(None);
    };
    Ok((&m.run_key == run_key).then_some((m, current)))
}

/// Step 6: after the commit, the memo index entry (run key -> manifest)
/// and the run log line.
/// `named`: the slice's commit names the run's manifest. When it does not
/// (an unchanged output under another manifest), the index is left as it
/// is: it would name a manifest no commit names.
pub(super) async fn record(
    table: &Table,
    report: &RunReport,
    named: bool,
    origin: Option<&str>,
) -> Result<(), RunError> {
    if named {
        let index = serde_json::to_vec(&RunIndex {
            manifest: report.manifest_digest.clone(),
        })
        .unwrap_or_default();
        table
            .put_sidecar(&run_index_path(&report.manifest.run_key), index)
            .await?;
    }
    log(table, report, origin).await
}

pub(super) async fn log(
    table: &Table,
    r: &RunReport,
    origin: Option<&str>,
) -> Result<(), RunError> {
    let at_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    let entry = LogEntry {
        at_ms,
        slice: r.manifest.spec.slice.id.clone(),
        run_key: r.manifest.run_key.clone(),
        manifest: r.manifest_digest.clone(),
        output_digest: r.manifest.result.output_digest.clone(),
        outcome: r.outcome.name().into(),
        version: r.outcome.version(),
        rows: r.manifest.result.rows_out,
        timings: r.timings_ms.clone(),
        // Its length was checked with the run's arguments.
        origin: origin.map(str::to_string),
        params: Some(cut(
            &String::from_utf8_lossy(&crate::manifest::canonical_json(&r.manifest.spec.params)),
            MAX_LOGGED_PARAMS,
        )),
    };
    // Twins of one run (same run key) may end in the same millisecond in
    // processes with the same pid (containers): their origins tell them
    // apart, so neither entry overwrites the other.
    let who = origin.map(|o| format!("-{}", &Digest::of_bytes(o.as_bytes()).hex()[..8]));
    let name = format!(
        "log/{at_ms:015}-{}-{}{}.json",
        &r.manifest.run_key.hex()[..12],
        std::process::id(),
        who.unwrap_or_default()
    );
    table
        .put_sidecar(&name, serde_json::to_vec(&entry).unwrap_or_default())
        .await?;
    Ok(())
}

/// Every run logged under the table's `_idem/log/`, oldest first.
pub fn run_log(table: &str) -> Result<Vec<LogEntry>, RunError> {
    run_log_since(table, 0)
}

/// The runs logged under the table's `_idem/log/` that ended at or after
/// `since_ms` (Unix milliseconds), oldest first: one listing, and a read
/// of only the entries whose names (`log/<ms>-...`) are that recent.
pub fn run_log_since(table: &str, since_ms: u64) -> Result<Vec<LogEntry>, RunError> {
    let rt = super::runtime()?;
    rt.block_on(async {
        let t = Table::open_existing(table).await?;
        let mut out = Vec::new();
        for name in t.list_sidecar("log").await? {
            if logged_at(&name).is_some_and(|at| at < since_ms) {
                continue;
            }
            let rel = name.trim_start_matches("_idem/");
            if let Some(bytes) = t.get_sidecar(rel).await?
                && let Ok(mut e) = serde_json::from_slice::<LogEntry>(&bytes)
                && e.at_ms >= since_ms
            {
                // A planted entry's label is cut as a written one is.
                e.origin = e.origin.as_deref().map(bounded_origin);
                e.params = e.params.as_deref().map(|p| cut(p, MAX_LOGGED_PARAMS));
                out.push(e);
            }
        }
        Ok(out)
    })
}

/// When a log entry's run ended, from its name (`.../log/<ms>-...`).
fn logged_at(name: &str) -> Option<u64> {
    let (_, file) = name.rsplit_once("log/")?;
    file.split('-').next()?.parse().ok()
}

/// The slice's current committed run: the commit that made its output
/// current and the manifest that commit names.
pub async fn current_run(table: &Table, slice: &str) -> Result<Option<(u64, Manifest)>, RunError> {
    let Some(c) = table.slice_commit(slice).await?.filter(|c| c.current) else {
        return Ok(None);
    };
    let Some(md) = &c.manifest_digest else {
        return Ok(None);
    };
    let Some(bytes) = table.get_sidecar(&manifest_path(md)).await? else {
        return Ok(None);
    };
    Ok(Some((c.version, Manifest::from_bytes(&bytes)?)))
}
