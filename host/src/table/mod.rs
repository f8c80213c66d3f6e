//! Delta Lake commits: one commit per new slice output, carrying run key,
//! manifest digest and output digest in its commitInfo and app transactions
//! that make two hosts committing the same slice conflict. Nothing outside
//! this module names a deltalake type.
//!
//! Slice state lives in the Delta log itself, as app transactions (they
//! survive checkpoints and log cleanup):
//! - `idem:slice:<slice>` -> `seq`, bumped by every commit of the slice;
//! - `idem:out:<slice>:<output digest>` -> the `seq` that committed it.
//!
//! The slice's current output is digest D exactly when
//! `txn(idem:out:<slice>:D) == txn(idem:slice:<slice>)`.

mod error;
mod files;
mod format;
mod genuine;
pub mod iceberg;
mod mode;
mod ownership;
mod proof;
mod shape;
pub(crate) mod sidecar;
mod stores;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use deltalake::datafusion::prelude::{DataFrame, ParquetReadOptions, SessionContext, lit};
use deltalake::kernel::engine::arrow_conversion::TryIntoKernel as _;
use deltalake::kernel::transaction::{CommitBuilder, CommitProperties};
use deltalake::kernel::{Action, Add, Transaction};
use deltalake::protocol::{DeltaOperation, SaveMode};
use deltalake::{DeltaTable, DeltaTableError};
use object_store::ObjectStoreExt as _;
use url::Url;

pub use error::TableError;
pub use files::{DataWriter, Written};
pub use format::Table;
pub use mode::{KeyChecker, Mode, OWNER_COLUMN};
pub use proof::SliceCommit;

use crate::digest::Digest;
use crate::fault::{fails as fault_fails, point as fault_point};

/// Data file size by default (a writer buffers one open file in memory
/// before uploading it).
const TARGET_FILE_BYTES: u64 = 32 << 20;

/// The size data files are cut at: `IDEM_DATA_FILE_MB` (1 to 4096 MiB),
/// else 32 MiB. Only the files change with it, never rows or digests.
pub fn target_file_bytes() -> Result<u64, TableError> {
    let Ok(v) = std::env::var("IDEM_DATA_FILE_MB") else {
        return Ok(TARGET_FILE_BYTES);
    };
    match v.trim().parse::<u64>() {
        Ok(mb) if (1..=4096).contains(&mb) => Ok(mb << 20),
        _ => Err(TableError::Setting(format!(
            "IDEM_DATA_FILE_MB={v:?} is not a size: give whole MiB from 1 to 4096 (default 32)"
        ))),
    }
}
/// Data file encoding, before the output's first batch tunes it.
fn writer_properties() -> deltalake::parquet::file::properties::WriterPropertiesBuilder {
    crate::encoding::writer_properties()
}

/// Table property recording the commit mode every idem commit uses.
const MODE_PROPERTY: &str = "idem.mode";

/// How many times a commit is re-planned after losing a race.
const MAX_ATTEMPTS: usize = 5;

/// A Delta table that idem commits to (it may not exist yet).
pub struct Delta {
    url: Url,
    delta: DeltaTable,
    /// The same location through idem's storage layer.
    store: crate::storage::Store,
    /// The store was proven to refuse overwriting (conditional PUT).
    safe_store: bool,
    /// A random id this process's commits carry (`idem.attempt`).
    attempt: String,
    /// The current commit reached its log write (an error after it may
    /// hide a commit that landed).
    log_written: bool,
}

/// What a commit did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommitOutcome {
    /// A new table version holds this output.
    Committed {
        /// The new version.
        version: u64,
        /// Why the slice was recommitted although its output was current:
        /// another writer had changed its rows.
        drift: Option<String>,
    },
    /// The slice already holds this output digest; nothing was written.
    Unchanged {
        /// The version that committed it (when known).
        since: Option<u64>,
        /// This host lost a commit race to another that committed the same
        /// output, re-read the log and found it current.
        raced: bool,
    },
}

/// One data file of a pinned Delta version, as a slice input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputFile {
    /// Its name relative to the table's root (the raw object name).
    pub path: String,
    /// Its partition values, sorted by column.
    pub partition_values: Vec<(String, Option<String>)>,
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
    /// Its manifest (stored under `_idem/manifests/`).
    pub manifest_digest: &'a Digest,
    /// The output rows.
    pub output: Output,
    /// Output schema (creates the table; needed when there are no rows).
    pub schema: Option<SchemaRef>,
    /// Tracked progress over an append-only source, committed with the
    /// output in the same commit.
    pub progress: Option<Progress>,
}

/// A slice's output rows, as a commit receives them.
pub enum Output {
    /// Staged as Parquet files on local disk, read back streaming by the
    /// commit (merge, and runs with an audit module). Empty when the
    /// transform emitted no rows.
    Staged(Vec<PathBuf>),
    /// Already in data files of the table, written while the transform ran
    /// ([`Table::data_writer`]; overwrite-partition and append).
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

/// Turn a user's table location (path or URL) into a URL.
pub fn table_url(location: &str) -> Result<Url, TableError> {
    if iceberg::is_iceberg(location) {
        return Ok(iceberg::Location::parse(location)?.url().clone());
    }
    let url = crate::storage::locate(location)?;
    Ok(crate::storage::as_dir(&url))
}

/// A random id for this process's commits (`idem.attempt`).
fn attempt_id(location: &str) -> Result<String, TableError> {
    let mut nonce = [0u8; 16];
    getrandom::fill(&mut nonce).map_err(|e| TableError::Location {
        location: location.into(),
        detail: format!("no randomness for the commit id: {e}"),
    })?;
    Ok(hex::encode(nonce))
}

/// How a manifest names the target table at `location` (whose folder is
/// `url`): the folder's URL for Delta, the canonical Iceberg location
/// (catalog file, warehouse, catalog name, table) for Iceberg.
pub fn target_name(location: &str, url: &Url) -> Result<String, TableError> {
    if iceberg::is_iceberg(location) {
        return Ok(iceberg::Location::parse(location)?.canonical());
    }
    Ok(url.to_string())
}

/// Run a blocking storage call on `store` off the async executor.
async fn off_runtime<T: Send + 'static>(
    location: &str,
    store: &crate::storage::Store,
    f: impl FnOnce(&crate::storage::Store) -> Result<T, crate::storage::StorageError> + Send + 'static,
) -> Result<T, TableError> {
    let store = store.clone();
    Ok(tokio::task::spawn_blocking(move || f(&store))
        .await
        .map_err(|e| TableError::Location {
            location: location.into(),
            detail: e.to_string(),
        })??)
}

fn delta_err(what: &str) -> impl Fn(DeltaTableError) -> TableError + '_ {
    move |e| TableError::Delta {
        what: what.to_string(),
        detail: e.to_string(),
    }
}

impl Delta {
    /// Open the table at `location` to write it: it need not exist yet (the
    /// first commit creates it; a local directory is made now). A location
    /// that cannot be reached is an error.
    pub async fn open(location: &str) -> Result<Self, TableError> {
        Self::open_with(location, true).await
    }

    /// Open an existing table to read it (inputs, verify, audit, log):
    /// nothing is created, a missing table is an error.
    pub async fn open_existing(location: &str) -> Result<Self, TableError> {
        Self::open_with(location, false).await
    }

    async fn open_with(location: &str, create: bool) -> Result<Self, TableError> {
        let url = table_url(location)?;
        stores::register();
        let store = crate::storage::Store::open(&url)?;
        // An unreachable store, a missing bucket or refused credentials are
        // named here, before delta-rs wraps them.
        off_runtime(location, &store, |s| s.check_reachable()).await?;
        if !create {
            let found = off_runtime(location, &store, |s| s.any_below("_delta_log")).await?;
            if !found {
                return Err(TableError::NoTable {
                    location: location.into(),
                });
            }
        }
        if url.scheme() == "file" && create {
            let dir = url.to_file_path().map_err(|_| TableError::Location {
                location: location.into(),
                detail: "bad file URL".into(),
            })?;
            std::fs::create_dir_all(&dir).map_err(|e| TableError::Location {
                location: location.into(),
                detail: format!("cannot create {}: {e}", dir.display()),
            })?;
        }
        let delta =
            DeltaTable::try_from_url(url.clone())
                .await
                .map_err(|e| TableError::Location {
                    location: location.into(),
                    detail: e.to_string(),
                })?;
        Ok(Delta {
            url,
            delta,
            store,
            safe_store: false,
            log_written: false,
            attempt: attempt_id(location)?,
        })
    }

    /// The table's URL.
    pub fn url(&self) -> &Url {
        &self.url
    }

    /// The current version, `None` before the first commit.
    pub fn version(&self) -> Option<u64> {
        self.delta.version()
    }

    /// Re-read the log.
    pub async fn refresh(&mut self) -> Result<(), TableError> {
        if self.delta.version().is_some() {
            self.delta
                .update_state()
                .await
                .map_err(delta_err("refreshing the table"))?;
        } else {
            match self.delta.load().await {
                Ok(()) | Err(DeltaTableError::NotATable(_)) => {}
                Err(e) => return Err(delta_err("loading the table")(e)),
            }
        }
        Ok(())
    }

    async fn txn(&self, app_id: &str) -> Result<Option<i64>, TableError> {
        let Ok(state) = self.delta.snapshot() else {
            return Ok(None);
        };
        state
            .transaction_version(self.delta.log_store().as_ref(), app_id)
            .await
            .map_err(delta_err("reading app transactions"))
    }

    /// The slice's commit sequence number (0 = never committed).
    pub async fn slice_seq(&self, slice: &str) -> Result<i64, TableError> {
        Ok(self.txn(&slice_app(slice)).await?.unwrap_or(0))
    }

    /// Whether `digest` is the slice's current committed output *and* the
    /// table still holds exactly the rows idem committed for it.
    pub async fn slice_state(
        &self,
        slice: &str,
        digest: &Digest,
        mode: &Mode,
    ) -> Result<SliceState, TableError> {
        let seq = self.slice_seq(slice).await?;
        if !self.holds(slice, digest, seq).await? {
            return Ok(SliceState::Other);
        }
        let since = self.version_of_current(slice).await?;
        let drift = match mode {
            Mode::Merge { .. } => self.foreign_commit_since(since).await?,
            Mode::OverwritePartition { column, value } => {
                self.file_drift(slice, seq, Some((column, value))).await?
            }
            Mode::Append => self.file_drift(slice, seq, None).await?,
        };
        let drift = match drift {
            None => self.shape_drift(since).await?,
            found => found,
        };
        Ok(match drift {
            None => SliceState::Current { since },
            Some(reason) => SliceState::Drifted { reason },
        })
    }

    /// Merge slices share files, so their rows cannot be told apart by file:
    /// any commit after the slice's that idem did not make may have changed
    /// them.
    pub async fn foreign_commit_since(
        &self,
        since: Option<u64>,
    ) -> Result<Option<String>, TableError> {
        // When log cleanup removed the slice's commit, every retained commit
        // is later than it.
        let since_v = since.unwrap_or(0);
        let history = self.idem_history().await?;
        let ours = genuine::versions(&history);
        // Any commit idem did not make that adds or removes a file, whatever
        // its `dataChange` flags claim (a foreign rewrite can say false).
        let first = history
            .iter()
            .filter(|c| c.version > since_v && c.touches_files && !ours.contains(&c.version))
            .map(|c| c.version)
            .min();
        Ok(first.map(|v| {
            format!(
                "version {v} changed data and was committed by another writer after the slice's commit ({})",
                since
                    .map(|s| format!("version {s}"))
                    .unwrap_or_else(|| "no longer in the log".into())
            )
        }))
    }

    /// The manifest the slice's current commit names (the first commit
    /// carrying its app transaction: see `genuine`), `None` without one.
    pub async fn current_manifest(&self, slice: &str) -> Result<Option<Digest>, TableError> {
        let seq = self.slice_seq(slice).await?;
        if seq == 0 {
            return Ok(None);
        }
        let history = self.idem_history().await?;
        let Some(v) = genuine::first_setting(&history, slice, seq) else {
            return Ok(None);
        };
        Ok(history
            .iter()
            .find(|c| c.version == v)
            .and_then(|c| c.get_str("idem.manifestDigest"))
            .and_then(|d| Digest::parse(d).ok()))
    }

    /// The mode the table was created for (its `idem.mode` property).
    pub(super) fn created_mode(&self) -> Option<String> {
        let snapshot = self.delta.snapshot().ok()?;
        snapshot
            .metadata()
            .configuration()
            .get(MODE_PROPERTY)
            .cloned()
    }

    /// Why the table's schema, partitioning or column mapping is no longer
    /// what it was at version `since` (`None`: unchanged).
    pub async fn shape_drift(&self, since: Option<u64>) -> Result<Option<String>, TableError> {
        Ok(shape::drift(&self.idem_history().await?, since))
    }

    /// Whether `digest` is the slice's current committed output.
    async fn holds(&self, slice: &str, digest: &Digest, seq: i64) -> Result<bool, TableError> {
        Ok(seq > 0 && self.txn(&out_app(slice, digest)).await? == Some(seq))
    }

    /// The version of the slice's current commit if this process made it.
    async fn committed_by_us(&self, slice: &str) -> Result<Option<u64>, TableError> {
        let seq = self.slice_seq(slice).await?;
        let history = self.idem_history().await?;
        let first = genuine::first_setting(&history, slice, seq);
        Ok(history.into_iter().find_map(|c| {
            let mine = Some(c.version) == first
                && c.get_str("idem.attempt") == Some(self.attempt.as_str());
            mine.then_some(c.version)
        }))
    }

    /// The table version that made the slice's current output current.
    pub async fn version_of_current(&self, slice: &str) -> Result<Option<u64>, TableError> {
        let seq = self.slice_seq(slice).await?;
        if seq == 0 {
            return Ok(None);
        }
        let history = self.idem_history().await?;
        Ok(genuine::first_setting(&history, slice, seq))
    }

    /// Prove, once, that the table's store refuses to overwrite an object
    /// with a conditional PUT (what keeps two hosts from overwriting each
    /// other's log entries); refuse to write anything otherwise.
    pub async fn ensure_safe_store(&mut self) -> Result<(), TableError> {
        if !self.safe_store {
            off_runtime(self.url.as_str(), &self.store, |s| {
                s.check_conditional_put()
            })
            .await?;
            self.safe_store = true;
        }
        Ok(())
    }

    /// Commit `req` unless the slice already holds its output digest (and
    /// the table still holds the slice's rows). Races with other hosts are
    /// resolved by re-reading: the loser of a race with the same output finds
    /// it committed and reports `Unchanged`.
    pub async fn commit(
        &mut self,
        mut req: CommitRequest<'_>,
    ) -> Result<CommitOutcome, TableError> {
        // Data files are written once and reused by every attempt; whatever
        // is not committed in the end is deleted again.
        let (mut written, files_schema) = match &mut req.output {
            Output::Written(w) => {
                let (adds, schema) = w.take();
                (Some(adds), schema)
            }
            Output::Staged(_) => (None, None),
        };
        self.log_written = false;
        let result = match self.ensure_safe_store().await {
            Ok(()) => {
                self.commit_attempts(&req, &mut written, files_schema.as_ref())
                    .await
            }
            Err(e) => Err(e),
        };
        // Files are deleted only when no commit of ours can have named them:
        // an unchanged outcome (our commit lost the race) or an error raised
        // before or instead of the log write. A generic error from the log
        // write itself may hide a commit that landed: keep the files (a
        // later VACUUM removes them if they are orphans).
        let safe = match &result {
            Ok(CommitOutcome::Unchanged { .. }) => true,
            Ok(CommitOutcome::Committed { .. }) => false,
            // Failed before any log write: no commit can name them.
            Err(_) if !self.log_written => true,
            Err(
                TableError::Delta { .. } | TableError::Location { .. } | TableError::Sidecar { .. },
            ) => false,
            Err(_) => true,
        };
        if let (Some(adds), true) = (&written, safe) {
            if !self.log_written {
                // No log write was tried: nothing can name them (and the
                // store that just failed may fail a re-read too).
                files::discard(&self.delta, adds).await;
            // A commit can land and still report an error (a failing
            // post-commit hook): delete only files the log does not name.
            } else if self.refresh().await.is_ok()
                && let Ok(active) = ownership::data_files(&self.delta).await
            {
                let active: std::collections::HashSet<&str> =
                    active.iter().map(|a| a.path.as_str()).collect();
                let orphans: Vec<Add> = adds
                    .iter()
                    .filter(|a| !active.contains(a.path.as_str()))
                    .cloned()
                    .collect();
                files::discard(&self.delta, &orphans).await;
            }
        }
        result
    }

    async fn commit_attempts(
        &mut self,
        req: &CommitRequest<'_>,
        written: &mut Option<Vec<Add>>,
        files_schema: Option<&SchemaRef>,
    ) -> Result<CommitOutcome, TableError> {
        let mut last_conflict = String::new();
        let mut drift;
        let mut raced = false;
        for _ in 0..MAX_ATTEMPTS {
            if fault_fails("commit-read") {
                return Err(TableError::Delta {
                    what: "refreshing the table".into(),
                    detail: "IDEM_FAULT_FAIL=commit-read".into(),
                });
            }
            self.refresh().await?;
            let seq = self.slice_seq(req.slice).await?;
            match self
                .slice_state(req.slice, req.output_digest, req.mode)
                .await?
            {
                SliceState::Current { since } => {
                    // A write whose response was lost (a retried PUT that
                    // had landed) looks like a lost race: it is ours if the
                    // commit carries this process's id.
                    if raced && let Some(version) = self.committed_by_us(req.slice).await? {
                        return Ok(CommitOutcome::Committed {
                            version,
                            drift: None,
                        });
                    }
                    return Ok(CommitOutcome::Unchanged { since, raced });
                }
                SliceState::Drifted { reason } => drift = Some(reason),
                SliceState::Other => drift = None,
            }
            // The source's position must still be where this run started:
            // another run that consumed from it meanwhile makes this range
            // stale (it may overlap what that run committed).
            if let Some(p) = &req.progress {
                let now = self
                    .progress_of(&p.source)
                    .await?
                    .map(|q| (q.through, q.count));
                if now != p.after {
                    return Err(TableError::ProgressMoved {
                        prefix: p.source.clone(),
                        expected: p.after.as_ref().map(|a| a.0.clone()),
                        found: now.map(|a| a.0),
                    });
                }
            }
            if self.delta.version().is_none() {
                self.create(req).await?;
                continue;
            }
            self.check_mode(req.mode)?;
            if let Some(schema) = &req.schema {
                files::check_types(schema.as_ref(), self.arrow_schema()?.as_ref())?;
            }
            // Files written while the run executed hold the schema the table
            // had then (or would get when created): it must still be its
            // schema (another writer may have created or changed the table).
            if let Some(written_with) = files_schema {
                self.check_written(written_with)?;
            }
            let seq = seq + 1;
            let attempt = match req.mode {
                Mode::Merge { keys } => {
                    let props = self.props(req, seq, None);
                    self.merge(req, keys, props).await
                }
                _ => self.replace(req, seq, written).await,
            };
            match attempt {
                Ok(version) => return Ok(CommitOutcome::Committed { version, drift }),
                Err(TableError::Conflict(detail)) => {
                    tracing::info!(
                        "commit of slice {} lost a race ({detail}); re-reading",
                        req.slice
                    );
                    last_conflict = detail;
                    raced = true;
                }
                Err(e) => {
                    // A log write that timed out may have landed: if the
                    // slice's current commit is ours, it did.
                    if self.refresh().await.is_ok()
                        && let Ok(Some(version)) = self.committed_by_us(req.slice).await
                    {
                        return Ok(CommitOutcome::Committed { version, drift });
                    }
                    return Err(e);
                }
            }
        }
        Err(TableError::Conflict(format!(
            "gave up after {MAX_ATTEMPTS} attempts; other writers keep committing slice {} ({last_conflict})",
            req.slice
        )))
    }

    /// Start writing a slice's output into data files of this table while
    /// the transform runs (overwrite-partition and append); the files are
    /// committed by [`Table::commit`] with [`Output::Written`]. Checks first
    /// that the table takes this mode.
    pub fn data_writer(
        &self,
        rt: &tokio::runtime::Runtime,
        mode: &Mode,
    ) -> Result<DataWriter, TableError> {
        if matches!(mode, Mode::Merge { .. }) {
            return Err(TableError::Output(
                "a merge reads its output as a whole: it is staged, not written ahead".into(),
            ));
        }
        if self.delta.version().is_some() {
            self.check_mode(mode)?;
        }
        Ok(DataWriter::start(
            self.delta.clone(),
            mode.clone(),
            target_file_bytes()?,
            rt.handle().clone(),
        ))
    }

    /// Data files written while the run executed (with the schema the
    /// table had then, or would get when created) must still fit it: another
    /// writer may have created or changed the table meanwhile. Columns are
    /// matched by name (as readers match them); a column may be nullable in
    /// the table and not in the files, not the reverse. A table with column
    /// mapping names columns by physical name: files written without it
    /// would read as nulls.
    fn check_written(&self, files: &Schema) -> Result<(), TableError> {
        let snapshot = self
            .delta
            .snapshot()
            .map_err(delta_err("reading the snapshot"))?;
        if let Some(m) = snapshot
            .metadata()
            .configuration()
            .get("delta.columnMapping.mode")
            && m != "none"
        {
            return Err(TableError::Output(format!(
                "the table uses column mapping (mode {m}), which idem does not write: use another table"
            )));
        }
        let table = self.arrow_schema()?;
        // Partition values live in the log, not in the files (and a slice's
        // is never null): their nullability does not matter.
        let partitions = snapshot.metadata().partition_columns().to_vec();
        let fits = files.fields().len() == table.fields().len()
            && files.fields().iter().all(|f| {
                table.field_with_name(f.name()).is_ok_and(|t| {
                    t.data_type() == f.data_type()
                        && (t.is_nullable() || !f.is_nullable() || partitions.contains(f.name()))
                })
            });
        if fits {
            return Ok(());
        }
        // A race with another writer: worth a retry (exit 4).
        Err(TableError::Conflict(format!(
            "the table's schema changed while this run wrote its output (written as [{}], the table now has [{}]): run it again",
            describe(files),
            describe(&table)
        )))
    }

    /// A table takes one commit mode, the one it was created with.
    fn check_mode(&self, mode: &Mode) -> Result<(), TableError> {
        let snapshot = self
            .delta
            .snapshot()
            .map_err(delta_err("reading the snapshot"))?;
        let config = snapshot.metadata().configuration();
        if let Some(m) = config.get(MODE_PROPERTY)
            && m.as_str() != mode.name()
        {
            return Err(TableError::ModeMismatch {
                table: mode.name().to_string(),
                created: m.clone(),
            });
        }
        // The slice's partition must be the table's partitioning: otherwise
        // its files land in other slices' partitions and nothing owns them.
        let table_parts = snapshot.metadata().partition_columns().to_vec();
        let wanted: Vec<String> = match mode {
            Mode::OverwritePartition { column, .. } => vec![column.clone()],
            _ => Vec::new(),
        };
        if table_parts != wanted {
            return Err(TableError::Partitioning(format!(
                "the table is partitioned by [{}], but this run writes partition [{}]: give --partition with the table's partition column, or use another table",
                table_parts.join(", "),
                wanted.join(", ")
            )));
        }
        Ok(())
    }

    /// commitInfo metadata and app transactions of the slice's commit `seq`.
    fn props(&self, req: &CommitRequest<'_>, seq: i64, nfiles: Option<usize>) -> CommitProperties {
        let mut meta: Vec<(String, serde_json::Value)> = vec![
            ("idem.slice".into(), req.slice.into()),
            ("idem.seq".into(), seq.into()),
            ("idem.runKey".into(), req.run_key.as_str().into()),
            (
                "idem.manifestDigest".into(),
                req.manifest_digest.as_str().into(),
            ),
            (
                "idem.outputDigest".into(),
                req.output_digest.as_str().into(),
            ),
            ("idem.mode".into(), req.mode.name().into()),
            // This process's commit: after a lost response, the run can
            // tell its own commit from a twin host's identical one.
            ("idem.attempt".into(), self.attempt.as_str().into()),
        ];
        let mut txns = vec![
            Transaction::new(slice_app(req.slice), seq),
            Transaction::new(out_app(req.slice, req.output_digest), seq),
        ];
        if let Some(p) = &req.progress {
            meta.push((
                "idem.progress".into(),
                serde_json::to_value(p).unwrap_or_default(),
            ));
            // Two runs advancing one source at once conflict on this app id
            // (their ranges may overlap), so only one commits.
            txns.push(Transaction::new(progress_app(&p.source), p.count as i64));
        }
        if let Mode::OverwritePartition { column, value } = req.mode {
            meta.push(("idem.partition".into(), format!("{column}={value}").into()));
            // Two slices committing one partition at once conflict on this
            // app id even when neither adds or removes a file.
            txns.push(Transaction::new(
                format!("idem:partition:{column}={value}"),
                seq,
            ));
        }
        if let Some(schema) = &req.schema {
            let names: Vec<serde_json::Value> = schema
                .fields()
                .iter()
                .map(|f| f.name().as_str().into())
                .collect();
            meta.push(("idem.outputColumns".into(), names.into()));
        }
        if let Some(n) = nfiles {
            meta.push(("idem.files".into(), n.into()));
            txns.push(Transaction::new(nfiles_app(req.slice, seq), n as i64));
        }
        CommitProperties::default()
            .with_metadata(meta)
            .with_application_transactions(txns)
    }

    /// Overwrite-partition and append: one commit that adds the output's
    /// data files (tagged with the slice) and removes every file the slice
    /// held before — so a slice's new output replaces exactly its own rows.
    async fn replace(
        &mut self,
        req: &CommitRequest<'_>,
        seq: i64,
        written: &mut Option<Vec<Add>>,
    ) -> Result<u64, TableError> {
        let files = ownership::data_files(&self.delta).await?;
        let (removed, operation): (Vec<&Add>, DeltaOperation) = match req.mode {
            Mode::OverwritePartition { column, value } => {
                if let Some(owner) = ownership::other_owner(&files, req.slice, column, value) {
                    return Err(TableError::Owned {
                        partition: format!("{column}={value}"),
                        owner: owner.to_string(),
                        slice: req.slice.to_string(),
                    });
                }
                if let Some(owner) = self
                    .partition_owner_in_log(req.slice, column, value)
                    .await?
                {
                    return Err(TableError::Owned {
                        partition: format!("{column}={value}"),
                        owner,
                        slice: req.slice.to_string(),
                    });
                }
                // The partition's files, and the slice's own files wherever
                // they are (a --files slice may have moved partitions).
                let removed = files
                    .iter()
                    .filter(|f| {
                        ownership::in_partition(f, column, value)
                            || ownership::tag(f, ownership::TAG_SLICE) == Some(req.slice)
                    })
                    .collect();
                let op = DeltaOperation::Write {
                    mode: SaveMode::Overwrite,
                    partition_by: Some(vec![column.clone()]),
                    predicate: Some(mode::equals(column, value)),
                };
                (removed, op)
            }
            _ => {
                let foreign = ownership::untagged(&files);
                if let Some(f) = foreign.first() {
                    return Err(TableError::Foreign {
                        count: foreign.len(),
                        example: f.path.clone(),
                    });
                }
                let removed = ownership::slice_files(&files, req.slice);
                let op = DeltaOperation::Write {
                    mode: SaveMode::Append,
                    partition_by: None,
                    predicate: None,
                };
                (removed, op)
            }
        };
        let adds = match written {
            Some(adds) => adds.clone(),
            None => {
                let staged = match &req.output {
                    Output::Staged(paths) => paths.as_slice(),
                    Output::Written(_) => &[],
                };
                let adds =
                    files::write(&self.delta, staged, req.mode, target_file_bytes()?).await?;
                *written = Some(adds.clone());
                adds
            }
        };
        // Data files are written, the log entry is not: a kill here must
        // leave the table as it was; two hosts here at once must race.
        fault_point("before-log-write");
        let mut actions: Vec<Action> = adds
            .iter()
            .enumerate()
            .map(|(i, a)| {
                let mut a = a.clone();
                a.tags = Some(ownership::tags(req.slice, seq, i));
                Action::Add(a)
            })
            .collect();
        actions.extend(removed.iter().map(|f| Action::Remove(remove(f))));
        let props = self.props(req, seq, Some(adds.len()));
        let snapshot = self
            .delta
            .snapshot()
            .map_err(delta_err("reading the snapshot"))?;
        self.log_written = true;
        let done = CommitBuilder::from(props)
            .with_actions(actions)
            .build(Some(snapshot), self.delta.log_store(), operation)
            .await
            .map_err(classify)?;
        let version = done.version();
        lost_response()?;
        self.refresh().await?;
        Ok(version as u64)
    }

    /// The slice id that an earlier idem commit recorded as the owner of
    /// partition `column = value` (covers owners whose output was empty).
    async fn partition_owner_in_log(
        &self,
        slice: &str,
        column: &str,
        value: &str,
    ) -> Result<Option<String>, TableError> {
        let partition = format!("{column}={value}");
        let history = self.idem_history().await?;
        // idem's commits only: another writer's commitInfo claims nothing.
        let ours = genuine::versions(&history);
        // A slice owns the partition of its latest commit only (a --files
        // slice that moved on gave its old partition up).
        let mut seen = std::collections::HashSet::new();
        Ok(history.into_iter().find_map(|c| {
            if !ours.contains(&c.version) {
                return None;
            }
            let owner = c.slice()?;
            let part = c.get_str("idem.partition")?;
            let latest = seen.insert(owner.to_string());
            (latest && part == partition && owner != slice).then(|| owner.to_string())
        }))
    }

    async fn merge(
        &mut self,
        req: &CommitRequest<'_>,
        keys: &[String],
        props: CommitProperties,
    ) -> Result<u64, TableError> {
        let overrides = HashMap::from([(
            "datafusion.execution.target_partitions".to_string(),
            "1".to_string(),
        )]);
        let ctx = deltalake::delta_datafusion::DeltaSessionContext::new_with_session_overrides(
            &overrides,
        )
        .map_err(delta_err("configuring the write session"))?
        .into_inner();
        let source = self
            .source(req, &ctx)
            .await?
            .with_column(mode::OWNER_COLUMN, lit(req.slice))
            .map_err(|e| TableError::Output(e.to_string()))?;
        // A key belongs to one slice: refuse keys another slice committed.
        self.delta
            .update_datafusion_session(&ctx.state())
            .map_err(delta_err("reading the table"))?;
        let provider = self
            .delta
            .table_provider()
            .await
            .map_err(|e| TableError::Delta {
                what: "reading the table".into(),
                detail: e.to_string(),
            })?;
        if let Some((owner, example)) =
            mode::stolen_key(&ctx, provider, source.clone(), keys, req.slice).await?
        {
            return Err(TableError::KeyOwned {
                keys: keys.join(", "),
                example,
                owner,
                slice: req.slice.to_string(),
            });
        }
        let before = self.delta.version();
        self.log_written = true;
        let table = mode::merge(self.delta.clone(), source, keys, req.slice, props.clone()).await?;
        self.delta = table;
        if self.delta.version() == before {
            // The MERGE changed no row (an empty output of a slice that
            // holds none, or rows the table holds already): delta-rs then
            // commits nothing. The slice's commit (sequence number, output
            // digest) must still be recorded: a commit of no data actions.
            let snapshot = self
                .delta
                .snapshot()
                .map_err(delta_err("reading the snapshot"))?;
            let operation = DeltaOperation::Write {
                mode: SaveMode::Append,
                partition_by: None,
                predicate: None,
            };
            CommitBuilder::from(props)
                .with_actions(Vec::new())
                .build(Some(snapshot), self.delta.log_store(), operation)
                .await
                .map_err(classify)?;
            self.refresh().await?;
        }
        lost_response()?;
        self.delta.version().ok_or_else(|| TableError::Delta {
            what: "committing".into(),
            detail: "no version after commit".into(),
        })
    }

    /// Create the table (version 0: schema and partitioning, no data) so the
    /// first slice commit is version 1. Losing a creation race is fine.
    async fn create(&mut self, req: &CommitRequest<'_>) -> Result<(), TableError> {
        let schema = req.schema.clone().ok_or(TableError::NoSchema)?;
        let (schema, partitions) = match req.mode {
            Mode::OverwritePartition { column, .. } => {
                (add_field(&schema, column), vec![column.clone()])
            }
            Mode::Merge { .. } => {
                if schema.field_with_name(mode::OWNER_COLUMN).is_ok() {
                    return Err(TableError::Output(format!(
                        "the output has a column named `{}`, which idem keeps for itself in merge tables (the slice owning each row): rename it",
                        mode::OWNER_COLUMN
                    )));
                }
                (add_field(&schema, mode::OWNER_COLUMN), vec![])
            }
            Mode::Append => (schema, vec![]),
        };
        let delta_schema: deltalake::kernel::StructType =
            schema.as_ref().try_into_kernel().map_err(|e| {
                TableError::Output(format!("output schema has no Delta equivalent: {e}"))
            })?;
        let created = self
            .delta
            .clone()
            .create()
            .with_columns(delta_schema.fields().cloned())
            .with_partition_columns(partitions)
            // The mode is fixed per table: modes own rows differently, so
            // mixing them would break every slice's ownership.
            // idem's proofs read each slice's current commit, so its log is
            // kept for ten years (checkpoints keep reads fast).
            .with_configuration([
                (MODE_PROPERTY, Some(req.mode.name())),
                ("delta.logRetentionDuration", Some("interval 3650 days")),
            ])
            .with_raise_if_key_not_exists(false)
            .with_save_mode(SaveMode::Ignore)
            // A lost creation race must fail, not retry as a second version.
            .with_commit_properties(CommitProperties::default().with_max_retries(0))
            .await;
        match created {
            Ok(t) => {
                self.delta = t;
                self.refresh().await
            }
            Err(e) => {
                // Lost a creation race (fine: the table exists now), or a
                // real failure (the table still does not exist).
                self.refresh().await?;
                if self.delta.version().is_none() {
                    return Err(delta_err("creating the table")(e));
                }
                tracing::info!("table creation raced with another writer ({e}); re-reading");
                Ok(())
            }
        }
    }

    /// The output as a DataFusion plan for MERGE: the staged Parquet files,
    /// streamed (never collected).
    async fn source(
        &self,
        req: &CommitRequest<'_>,
        ctx: &SessionContext,
    ) -> Result<DataFrame, TableError> {
        let df_err =
            |e: deltalake::datafusion::error::DataFusionError| TableError::Output(e.to_string());
        let staged = match &req.output {
            Output::Staged(paths) => paths.as_slice(),
            Output::Written(_) => {
                return Err(TableError::Output(
                    "a merge needs its output staged, not written ahead".into(),
                ));
            }
        };
        if staged.is_empty() {
            let schema = match req.schema.clone() {
                Some(s) => s,
                None => self.arrow_schema()?,
            };
            return ctx
                .read_batches(vec![RecordBatch::new_empty(schema)])
                .map_err(df_err);
        }
        let paths: Vec<String> = staged.iter().map(|p| p.display().to_string()).collect();
        // Read back with the schema it was written with (DataFusion would
        // otherwise turn strings into view types).
        let mut opts = ParquetReadOptions::default();
        if let Some(schema) = req.schema.as_deref() {
            opts = opts.schema(schema);
        }
        ctx.read_parquet(paths, opts).await.map_err(df_err)
    }

    /// The table's schema as Arrow.
    pub fn arrow_schema(&self) -> Result<SchemaRef, TableError> {
        use deltalake::kernel::engine::arrow_conversion::TryIntoArrow as _;
        let snapshot = self
            .delta
            .snapshot()
            .map_err(delta_err("reading the snapshot"))?;
        let schema: Schema =
            snapshot
                .schema()
                .as_ref()
                .try_into_arrow()
                .map_err(|e| TableError::Delta {
                    what: "reading the schema".into(),
                    detail: e.to_string(),
                })?;
        Ok(Arc::new(schema))
    }

    /// Store bytes under the table's `_idem/` folder (atomically).
    pub async fn put_sidecar(&self, rel: &str, bytes: Vec<u8>) -> Result<(), TableError> {
        sidecar::put(&self.delta, rel, bytes).await
    }

    /// Read bytes from the table's `_idem/` folder, `None` if absent.
    pub async fn get_sidecar(&self, rel: &str) -> Result<Option<Vec<u8>>, TableError> {
        sidecar::get(&self.delta, rel).await
    }

    /// Names of the files under `_idem/<prefix>/`.
    pub async fn list_sidecar(&self, prefix: &str) -> Result<Vec<String>, TableError> {
        sidecar::list(&self.delta, prefix).await
    }

    /// The data files of the loaded version as a slice input: each file's
    /// location and its partition values (Delta keeps those in the log, not
    /// in the files), optionally limited to partition `column = value`.
    /// Tables whose rows cannot be read file by file as plain Parquet
    /// (deletion vectors, column mapping) are refused with a clear error.
    ///
    /// With `owner`, only that slice's rows: in an append or
    /// overwrite-partition table every data file belongs to one slice (its
    /// tags say which), so its files; in a merge table files mix slices, so
    /// every file, and the second value is `true`: keep only the rows whose
    /// owner column ([`OWNER_COLUMN`]) names the slice.
    pub async fn input_files(
        &self,
        partition: Option<(&str, &str)>,
        owner: Option<&str>,
    ) -> Result<(Vec<InputFile>, bool), TableError> {
        let snapshot = self
            .delta
            .snapshot()
            .map_err(delta_err("reading the snapshot"))?;
        let unsupported = |what: String| TableError::UnreadableInput {
            location: self.url.to_string(),
            detail: what,
        };
        let rows_of = match (
            owner,
            snapshot.metadata().configuration().get(MODE_PROPERTY),
        ) {
            (None, _) => false,
            (Some(_), Some(m)) if m == Mode::Merge { keys: vec![] }.name() => {
                if self.arrow_schema()?.field_with_name(OWNER_COLUMN).is_err() {
                    return Err(unsupported(format!(
                        "the merge table has no `{OWNER_COLUMN}` column to select a slice's rows by"
                    )));
                }
                true
            }
            (Some(_), Some(_)) => false,
            (Some(owner), None) => {
                return Err(unsupported(format!(
                    "the rows of slice `{owner}` can only be selected in a table idem writes (it records which slice owns which rows); this table was not created by idem. Read a version or a partition of it instead"
                )));
            }
        };
        if let Some(mode) = snapshot
            .metadata()
            .configuration()
            .get("delta.columnMapping.mode")
            .filter(|m| m.as_str() != "none")
        {
            return Err(unsupported(format!(
                "the table uses column mapping (mode `{mode}`), which idem cannot read yet: physical column names differ from the logical ones. Copy the version into a table without column mapping"
            )));
        }
        let mut out = Vec::new();
        for f in ownership::data_files(&self.delta).await? {
            if partition.is_some_and(|(k, v)| !ownership::in_partition(&f, k, v)) {
                continue;
            }
            if let Some(owner) = owner
                && !rows_of
                && ownership::tag(&f, ownership::TAG_SLICE) != Some(owner)
            {
                continue;
            }
            if f.deletion_vector.is_some() {
                return Err(unsupported(format!(
                    "data file {} has a deletion vector (rows deleted in place), which idem cannot apply yet: purge them first (REORG TABLE ... APPLY (PURGE)) or copy the version into a new table",
                    f.path
                )));
            }
            let mut values: Vec<(String, Option<String>)> = f
                .partition_values
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            values.sort();
            // Add paths are relative (and already percent-decoded by
            // delta-rs); absolute ones (shallow clones) are not read.
            if f.path.contains("://") || f.path.starts_with('/') {
                return Err(unsupported(format!(
                    "data file {} is an absolute path (a shallow clone?): copy the version into a table of its own",
                    f.path
                )));
            }
            out.push(InputFile {
                path: f.path.clone(),
                partition_values: values,
            });
        }
        Ok((out, rows_of))
    }

    /// Load a given version (for pinned Delta inputs).
    pub async fn load_version(&mut self, version: u64) -> Result<(), TableError> {
        self.delta
            .load_version(version)
            .await
            .map_err(|e| TableError::Delta {
                what: format!("loading version {version}"),
                detail: e.to_string(),
            })
    }

    /// The commits of the log up to the loaded version, newest first:
    /// their version (from the commit file's name), idem's commitInfo keys
    /// and whether they changed data. Read from the commit files themselves
    /// (numbered by name, so a commit without commitInfo or one made after
    /// the loaded version cannot shift the numbering); commits removed by
    /// log cleanup are simply absent.
    /// The latest progress recorded for `source`, if any run consumed it.
    pub async fn progress_of(&self, source: &str) -> Result<Option<Progress>, TableError> {
        for c in self.idem_history().await? {
            if let Some(p) = c.idem.get("idem.progress")
                && let Ok(p) = serde_json::from_value::<Progress>(p.clone())
                && p.source == source
            {
                return Ok(Some(p));
            }
        }
        Ok(None)
    }

    /// The object count the source's app transaction records (it survives
    /// log cleanup, unlike commitInfo).
    pub async fn progress_count(&self, source: &str) -> Result<Option<i64>, TableError> {
        self.txn(&progress_app(source)).await
    }

    /// Every run's inputs consumed from `source`: the manifests named by
    /// commits that advanced it (to name late objects).
    pub async fn consumed_manifests(&self, source: &str) -> Result<Vec<Vec<u8>>, TableError> {
        let mut out = Vec::new();
        for c in self.idem_history().await? {
            let advanced = c
                .idem
                .get("idem.progress")
                .and_then(|p| p.get("source"))
                .and_then(|s| s.as_str())
                == Some(source);
            if advanced
                && let Some(md) = c.get_str("idem.manifestDigest")
                && let Ok(md) = crate::digest::Digest::parse(md)
                && let Some(bytes) = self
                    .get_sidecar(&format!("manifests/{}.json", md.hex()))
                    .await?
            {
                out.push(bytes);
            }
        }
        Ok(out)
    }

    pub async fn idem_history(&self) -> Result<Vec<LogCommit>, TableError> {
        let Some(latest) = self.delta.version() else {
            return Ok(Vec::new());
        };
        // A commit file never changes once written (conditional PUT), so
        // each is read once per process: the key is the table's location
        // and its creation id (a table recreated at the same place is
        // another table), the value every commit read so far.
        let key = format!(
            "{}#{}",
            self.url,
            self.delta
                .snapshot()
                .map(|s| s.metadata().id().to_string())
                .unwrap_or_default()
        );
        let known: HashMap<u64, Option<LogCommit>> = HISTORY
            .lock()
            .map(|h| h.get(&key).cloned().unwrap_or_default())
            .unwrap_or_default();
        let store = self.delta.log_store().object_store(None);
        let mut out = Vec::new();
        let mut read = Vec::new();
        for version in (0..=latest).rev() {
            if let Some(c) = known.get(&version) {
                out.extend(c.clone());
                continue;
            }
            let path = object_store::path::Path::from(format!("_delta_log/{version:020}.json"));
            let bytes = match store.get(&path).await {
                Ok(r) => sidecar::whole(r)
                    .await
                    .map_err(|detail| TableError::Delta {
                        what: format!("reading commit {version}"),
                        detail,
                    })?,
                // Cleaned up (or never written): absent for good.
                Err(object_store::Error::NotFound { .. }) => {
                    read.push((version, None));
                    continue;
                }
                Err(e) => {
                    return Err(TableError::Delta {
                        what: format!("reading commit {version}"),
                        detail: e.to_string(),
                    });
                }
            };
            let c = LogCommit::parse(version, &bytes);
            read.push((version, Some(c.clone())));
            out.push(c);
        }
        if let Ok(mut h) = HISTORY.lock() {
            h.entry(key).or_default().extend(read);
        }
        Ok(out)
    }
}

/// Commits already read, per table (see [`Table::idem_history`]).
type History = HashMap<String, HashMap<u64, Option<LogCommit>>>;
static HISTORY: std::sync::LazyLock<std::sync::Mutex<History>> =
    std::sync::LazyLock::new(Default::default);

/// One commit of the Delta log, as idem reads it.
#[derive(Debug, Clone, Default)]
pub struct LogCommit {
    /// The table version.
    pub version: u64,
    /// idem's keys of its commitInfo (`idem.slice`, `idem.seq`, ...);
    /// empty for commits idem did not make.
    pub idem: HashMap<String, serde_json::Value>,
    /// Whether it added or removed data (`dataChange`); OPTIMIZE, VACUUM
    /// and property changes do not.
    pub data_change: bool,
    /// The shape its `metaData` action set, if it has one (see
    /// [`shape::of_metadata`]).
    pub shape: Option<String>,
    /// Whether it adds or removes any file, whatever its `dataChange`
    /// flags claim.
    pub touches_files: bool,
    /// Its app transactions (`txn`: app id, version).
    pub txns: Vec<(String, i64)>,
}

impl LogCommit {
    fn parse(version: u64, bytes: &[u8]) -> Self {
        let mut c = LogCommit {
            version,
            ..Default::default()
        };
        for line in bytes.split(|b| *b == b'\n') {
            let Ok(action) = serde_json::from_slice::<serde_json::Value>(line) else {
                continue;
            };
            if let Some(info) = action.get("commitInfo").and_then(|i| i.as_object()) {
                c.idem = info
                    .iter()
                    .filter(|(k, _)| k.starts_with("idem."))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
            }
            if let Some(meta) = action.get("metaData") {
                c.shape = Some(shape::of_metadata(meta));
            }
            if let Some(t) = action.get("txn")
                && let (Some(app), Some(v)) = (
                    t.get("appId").and_then(|a| a.as_str()),
                    t.get("version").and_then(|v| v.as_i64()),
                )
            {
                c.txns.push((app.to_string(), v));
            }
            for kind in ["add", "remove"] {
                c.touches_files |= action.get(kind).is_some();
                if let Some(a) = action.get(kind)
                    && a.get("dataChange").and_then(|d| d.as_bool()) != Some(false)
                {
                    c.data_change = true;
                }
            }
        }
        c
    }

    /// The slice idem committed here, if any, as its commitInfo says
    /// (anyone can write commitInfo: see [`LogCommit::sets_slice`]).
    pub fn slice(&self) -> Option<&str> {
        self.get_str("idem.slice")
    }

    /// The slice and sequence number this commit made current: its
    /// commitInfo names them *and* it carries the app transaction
    /// `idem:slice:<slice>` at that version, which is what the table's
    /// snapshot reads. A commit that only claims them in its commitInfo
    /// made nothing current.
    pub fn sets_slice(&self) -> Option<(&str, i64)> {
        let slice = self.slice()?;
        let seq = self.idem.get("idem.seq").and_then(|v| v.as_i64())?;
        let app = slice_app(slice);
        self.txns
            .iter()
            .any(|(a, v)| *a == app && *v == seq)
            .then_some((slice, seq))
    }

    /// A string key of idem's commitInfo.
    pub fn get_str(&self, key: &str) -> Option<&str> {
        self.idem.get(key).and_then(|v| v.as_str())
    }
}

/// Test hook: `IDEM_FAULT_FAIL=lost-commit-response` makes a commit that
/// landed report a conflict, as when the response to the log write is lost
/// and the retried PUT finds the entry it wrote itself.
fn lost_response() -> Result<(), TableError> {
    if crate::fault::fails("lost-commit-response") {
        return Err(TableError::Conflict(
            "the log write's response was lost (simulated)".into(),
        ));
    }
    Ok(())
}

fn slice_app(slice: &str) -> String {
    format!("idem:slice:{slice}")
}

fn progress_app(source: &str) -> String {
    format!(
        "idem:progress:{}",
        crate::digest::Digest::of_bytes(source.as_bytes()).hex()
    )
}

fn out_app(slice: &str, digest: &Digest) -> String {
    format!("idem:out:{slice}:{}", digest.hex())
}

fn nfiles_app(slice: &str, seq: i64) -> String {
    format!("idem:nfiles:{slice}:{seq}")
}

/// A remove action for a data file of the snapshot.
fn remove(f: &Add) -> deltalake::kernel::Remove {
    deltalake::kernel::Remove {
        path: f.path.clone(),
        data_change: true,
        deletion_timestamp: Some(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis() as i64)
                .unwrap_or(0),
        ),
        extended_file_metadata: Some(true),
        partition_values: Some(f.partition_values.clone()),
        size: Some(f.size),
        tags: f.tags.clone(),
        deletion_vector: f.deletion_vector.clone(),
        base_row_id: f.base_row_id,
        default_row_commit_version: f.default_row_commit_version,
    }
}

/// The Arrow schema of a table created for `schema` (through Delta's types).
fn table_schema(schema: &SchemaRef) -> Result<SchemaRef, TableError> {
    use deltalake::kernel::engine::arrow_conversion::TryIntoArrow as _;
    let kernel: deltalake::kernel::StructType = schema
        .as_ref()
        .try_into_kernel()
        .map_err(|e| TableError::Output(format!("output schema has no Delta equivalent: {e}")))?;
    let arrow: Schema = (&kernel).try_into_arrow().map_err(|e| TableError::Delta {
        what: "converting the schema".into(),
        detail: e.to_string(),
    })?;
    Ok(Arc::new(arrow))
}

fn describe(s: &Schema) -> String {
    s.fields()
        .iter()
        .map(|f| format!("{} {}", f.name(), f.data_type()))
        .collect::<Vec<_>>()
        .join(", ")
}

fn add_field(s: &SchemaRef, column: &str) -> SchemaRef {
    if s.field_with_name(column).is_ok() {
        return s.clone();
    }
    let mut fields: Vec<Field> = s.fields().iter().map(|f| f.as_ref().clone()).collect();
    fields.push(Field::new(column, DataType::Utf8, false));
    Arc::new(Schema::new(fields))
}

/// Commit races are retried; everything else is an error.
fn classify(e: DeltaTableError) -> TableError {
    let text = e.to_string();
    let conflict = matches!(
        e,
        DeltaTableError::Transaction { .. } | DeltaTableError::VersionAlreadyExists(_)
    ) && (text.contains("onflict")
        || text.contains("oncurrent")
        || text.contains("already exists"));
    let storage = matches!(
        e,
        DeltaTableError::ObjectStore { .. } | DeltaTableError::Io { .. }
    );
    if conflict {
        TableError::Conflict(text)
    } else if !storage
        && (matches!(e, DeltaTableError::SchemaMismatch { .. }) || text.contains("chema"))
    {
        TableError::Output(format!(
            "the output's schema does not fit the table's ({text}). A changed transform needs a new table, or a schema migration of this one"
        ))
    } else {
        TableError::Delta {
            what: "committing".into(),
            detail: text,
        }
    }
}
