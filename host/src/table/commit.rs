//! What a commit is, whichever the format: what it is asked to write
//! ([`CommitRequest`]: the slice, its output and how it joins the table),
//! what it answers ([`SliceOutcome`], [`SliceState`]), and how it races
//! other writers: every attempt carries this process's random id, is
//! re-planned after a lost race at most [`MAX_ATTEMPTS`] times, and one
//! process's runs commit to one table one at a time ([`commit_lock`]).

use std::collections::HashMap;
use std::path::PathBuf;

use arrow::datatypes::SchemaRef;
use url::Url;

use super::error::TableError;
use super::mode::Mode;
use super::write_ahead::Written;
use crate::digest::Digest;

/// How many times a commit is re-planned after losing a race.
pub(super) const MAX_ATTEMPTS: usize = 5;

/// What one commit attempt came to (either format).
pub(super) enum Attempt {
    /// The commit is decided.
    Done(SliceOutcome),
    /// The table was just created: plan again.
    Again,
    /// Lost a race with another writer (why): re-read and plan again.
    Raced(String),
}

/// Attempt a slice's commit until one attempt decides it, at most
/// [`MAX_ATTEMPTS`] times; `attempt` is given its number and whether an
/// earlier one lost a race.
pub(super) async fn until_decided(
    slice: &str,
    mut attempt: impl AsyncFnMut(usize, bool) -> Result<Attempt, TableError>,
) -> Result<SliceOutcome, TableError> {
    let mut last_conflict = String::new();
    let mut raced = false;
    for n in 0..MAX_ATTEMPTS {
        match attempt(n, raced).await? {
            Attempt::Done(outcome) => return Ok(outcome),
            Attempt::Again => {}
            Attempt::Raced(detail) => {
                tracing::info!("commit of slice {slice} lost a race ({detail}); re-reading");
                last_conflict = detail;
                raced = true;
            }
        }
    }
    Err(TableError::Conflict(format!(
        "gave up after {MAX_ATTEMPTS} attempts; other writers keep committing slice {slice} ({last_conflict})"
    )))
}

/// How a slice's run ended at its table: a new version, or the output
/// already current. A table's commit ends in one of the first two; a run
/// that finds its own committed result first (the memo) ends in the third
/// without committing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SliceOutcome {
    /// This run committed a new table version.
    Committed {
        /// The version.
        version: u64,
        /// Set when the output was already current but another writer had
        /// changed the slice's rows: why it was recommitted.
        drift: Option<String>,
    },
    /// The output equals the slice's committed output; nothing committed.
    Unchanged {
        /// The version that holds it.
        since: Option<u64>,
        /// Another host committed the same output first (this one lost the
        /// race, re-read the log and found it current).
        raced: bool,
    },
    /// A committed run had this run key: nothing executed or committed.
    Memo {
        /// The version that holds its output.
        since: Option<u64>,
    },
}

impl std::fmt::Display for SliceOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let v = |s: &Option<u64>| s.map(|v| v.to_string()).unwrap_or_else(|| "?".into());
        match self {
            SliceOutcome::Committed {
                version,
                drift: None,
            } => write!(f, "committed version {version}"),
            SliceOutcome::Committed {
                version,
                drift: Some(why),
            } => write!(f, "committed version {version} (recommitted: {why})"),
            SliceOutcome::Unchanged { since, raced } => write!(
                f,
                "unchanged since version {}{}",
                v(since),
                if *raced {
                    " (another host committed it first)"
                } else {
                    ""
                }
            ),
            SliceOutcome::Memo { since } => write!(
                f,
                "unchanged since version {} (memo: already run)",
                v(since)
            ),
        }
    }
}

impl SliceOutcome {
    /// `committed`, `unchanged` or `memo`: the run log's and `--json`'s
    /// name of the outcome.
    pub fn name(&self) -> &'static str {
        match self {
            SliceOutcome::Committed { .. } => "committed",
            SliceOutcome::Unchanged { .. } => "unchanged",
            SliceOutcome::Memo { .. } => "memo",
        }
    }

    /// The version committed, or the one that holds the output.
    pub fn version(&self) -> Option<u64> {
        match self {
            SliceOutcome::Committed { version, .. } => Some(*version),
            SliceOutcome::Unchanged { since, .. } | SliceOutcome::Memo { since } => *since,
        }
    }

    /// Why an output that was already current was committed again.
    pub fn drift(&self) -> Option<&str> {
        match self {
            SliceOutcome::Committed { drift, .. } => drift.as_deref(),
            _ => None,
        }
    }

    /// Another host committed the same output first.
    pub fn raced(&self) -> bool {
        matches!(self, SliceOutcome::Unchanged { raced: true, .. })
    }
}

/// Whether a slice's output is current in the table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SliceState {
    /// The output is current and the table holds exactly its rows.
    Current {
        /// The version that committed it (when the log still has it).
        since: Option<u64>,
    },
    /// The output was committed last, but the table no longer holds exactly
    /// its rows (another writer changed them): it must be recommitted.
    Drifted {
        /// What changed.
        reason: String,
    },
    /// Another output (or none) is current.
    Other,
}

/// Everything one commit writes.
pub struct CommitRequest<'a> {
    /// The slice this output belongs to.
    pub slice: &'a str,
    /// How the output replaces or joins existing rows.
    pub mode: &'a Mode,
    /// Logical digest of `batches`.
    pub output_digest: &'a Digest,
    /// The run that produced it.
    pub run_key: &'a Digest,
    /// Its manifest (stored under `_idem/manifests/`); `None` only for a
    /// write to a branch, which precedes the audit the manifest records
    /// (the publish names it, see [`super::wap`]).
    pub manifest_digest: Option<&'a Digest>,
    /// The manifest's signed envelope, when the run signs (stored under
    /// `_idem/attestations/`).
    pub envelope_digest: Option<&'a Digest>,
    /// The output rows.
    pub output: Output,
    /// Output schema (creates the table; needed when there are no rows).
    pub schema: Option<SchemaRef>,
    /// What an output column the table lacks does (`--on-schema-change`).
    pub schema_change: super::SchemaChange,
    /// Tracked progress over an append-only source, committed with the
    /// output in the same commit.
    pub progress: Option<Progress>,
    /// Write-audit-publish: commit to this branch, not to `main`
    /// (Iceberg; published later by [`super::Table::publish`]).
    pub branch: Option<&'a str>,
}

/// A slice's output rows, as a commit receives them.
pub enum Output {
    /// Staged as Parquet files on local disk, read back streaming by the
    /// commit (merge, and runs with an audit module). Empty when the
    /// transform emitted no rows.
    Staged(Vec<PathBuf>),
    /// Already in data files of the table, written while the transform ran
    /// (`Table::data_writer`; overwrite-partition and append).
    Written(Written),
}

/// How far an append-only source has been consumed: the last object's
/// name and how many objects, through it, were consumed. Recorded in the
/// commitInfo of the commit that holds their output (`idem.progress`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Progress {
    /// The source prefix (a URL).
    pub source: String,
    /// The last consumed object's name (relative to the source).
    pub through: String,
    /// Objects consumed through it.
    pub count: u64,
    /// XOR of the sha256 of every consumed name (hex): the consumed set,
    /// in 32 bytes, so a listing tells late or deleted objects cheaply.
    #[serde(default)]
    pub names: String,
    /// The position this run started after (what must still be the
    /// table's position when it commits).
    #[serde(skip)]
    pub after: Option<(String, u64)>,
}

/// The lock that this process's runs hold while they commit to the table
/// at `url` (one per table).
pub fn commit_lock(url: &Url) -> std::sync::Arc<std::sync::Mutex<()>> {
    type Locks = std::sync::Mutex<HashMap<String, std::sync::Arc<std::sync::Mutex<()>>>>;
    static LOCKS: std::sync::LazyLock<Locks> = std::sync::LazyLock::new(Default::default);
    let mut locks = LOCKS.lock().unwrap_or_else(|e| e.into_inner());
    locks.entry(url.to_string()).or_default().clone()
}

/// A random id for this process's commits (`idem.attempt`).
pub(super) fn attempt_id(location: &str) -> Result<String, TableError> {
    let mut nonce = [0u8; 16];
    getrandom::fill(&mut nonce).map_err(|e| TableError::Location {
        location: location.into(),
        detail: format!("no randomness for the commit id: {e}"),
    })?;
    Ok(hex::encode(nonce))
}

/// Test hook: `IDEM_FAULT_FAIL=lost-commit-response` makes a commit that
/// landed report a conflict, as when the response to the log write is lost
/// and the retried PUT finds the entry it wrote itself.
pub(super) fn lost_response() -> Result<(), TableError> {
    if crate::fault::fails("lost-commit-response") {
        return Err(TableError::Conflict(
            "the log write's response was lost (simulated)".into(),
        ));
    }
    Ok(())
}
