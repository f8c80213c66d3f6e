//! A table idem commits to, in either format: Delta Lake (a folder or
//! object-store prefix, see `delta`) or Iceberg (`iceberg+sqlite://...`,
//! see [`iceberg`]). Runs, audit, verify and log see one `Table`; what a
//! format cannot do yet is refused by name.
//!
//! Both formats stand on the same vocabulary: what a commit is asked and
//! answers (`commit`), what it records about itself and how the history
//! reads back (`record`), how output becomes data files (`datafile`,
//! `write_ahead`) and is read back (`readback`), where a table is
//! (`location`), the commit modes (`mode`) and the failures (`error`).

mod commit;
mod datafile;
mod delta;
mod error;
pub mod iceberg;
mod location;
mod mode;
mod readback;
mod record;
mod schema_change;
mod wap;
mod write_ahead;

use arrow::datatypes::SchemaRef;
use url::Url;

pub use commit::{CommitRequest, Output, Progress, SliceOutcome, SliceState, commit_lock};
pub use datafile::target_file_bytes;
pub use delta::Delta;
pub use error::TableError;
use iceberg::Iceberg;
pub use location::{shown_location, table_url, target_name};
pub use mode::{KeyChecker, Mode, OWNER_COLUMN};
pub use readback::InputFile;
pub use record::{LogCommit, SliceCommit};
pub use schema_change::SchemaChange;
pub use wap::{Branched, NO_BRANCHES, Pending, Publish, check_branch_name, default_branch};
pub use write_ahead::{DataWriter, WriterStopped, Written};

use crate::digest::Digest;

/// A Delta or an Iceberg table (one or two per run: their size does not
/// matter).
#[allow(clippy::large_enum_variant)]
pub enum Table {
    Delta(Delta),
    Iceberg(Iceberg),
}

impl Table {
    /// Open the table at `location` to write it (see [`Delta::open`]).
    pub async fn open(location: &str) -> Result<Self, TableError> {
        if iceberg::is_iceberg(location) {
            return Ok(Table::Iceberg(Iceberg::open(location, true).await?));
        }
        Ok(Table::Delta(Delta::open(location).await?))
    }

    /// Open an existing table to read it.
    pub async fn open_existing(location: &str) -> Result<Self, TableError> {
        if iceberg::is_iceberg(location) {
            return Ok(Table::Iceberg(Iceberg::open(location, false).await?));
        }
        Ok(Table::Delta(Delta::open_existing(location).await?))
    }

    /// Whether the table's format writes data files while the transform
    /// runs (Delta overwrite-partition and append); else output is staged.
    pub fn writes_ahead(&self) -> bool {
        matches!(self, Table::Delta(_))
    }

    /// Whether it is an Iceberg table (which has branches).
    pub fn is_iceberg(&self) -> bool {
        matches!(self, Table::Iceberg(_))
    }

    /// The table's folder.
    pub fn url(&self) -> &Url {
        match self {
            Table::Delta(t) => t.url(),
            Table::Iceberg(t) => t.url(),
        }
    }

    /// The name run specs give the table (`target.table`): its folder's
    /// URL, or the Iceberg catalog entry's canonical location.
    pub fn target_name(&self) -> String {
        match self {
            Table::Delta(t) => t.url().to_string(),
            Table::Iceberg(t) => t.canonical(),
        }
    }

    /// The current version (Iceberg: `main`'s head's sequence number).
    pub fn version(&self) -> Option<u64> {
        match self {
            Table::Delta(t) => t.version(),
            Table::Iceberg(t) => t.version(),
        }
    }

    pub async fn refresh(&mut self) -> Result<(), TableError> {
        match self {
            Table::Delta(t) => t.refresh().await,
            Table::Iceberg(t) => t.refresh().await,
        }
    }

    pub async fn slice_state(
        &self,
        slice: &str,
        digest: &Digest,
        mode: &Mode,
    ) -> Result<SliceState, TableError> {
        match self {
            Table::Delta(t) => t.slice_state(slice, digest, mode).await,
            Table::Iceberg(t) => t.slice_state(slice, digest, mode).await,
        }
    }

    /// The slice's commit sequence number (0 = never committed).
    pub async fn slice_seq(&self, slice: &str) -> Result<i64, TableError> {
        match self {
            Table::Delta(t) => t.slice_seq(slice).await,
            Table::Iceberg(t) => Ok(t.slice_seq(slice)),
        }
    }

    pub async fn foreign_commit_since(
        &self,
        since: Option<u64>,
    ) -> Result<Option<String>, TableError> {
        match self {
            Table::Delta(t) => t.foreign_commit_since(since).await,
            Table::Iceberg(t) => Ok(t.foreign_commit_since(since)),
        }
    }

    pub async fn version_of_current(&self, slice: &str) -> Result<Option<u64>, TableError> {
        match self {
            Table::Delta(t) => t.version_of_current(slice).await,
            Table::Iceberg(t) => Ok(t.version_of_current(slice)),
        }
    }

    /// The slices committed at the loaded version whose ids lie under
    /// `prefix` (`prefix/...`), sorted (a daily read of an hourly table).
    pub async fn slices_under(&self, prefix: &str) -> Result<Vec<String>, TableError> {
        match self {
            Table::Delta(t) => t.slices_under(prefix).await,
            Table::Iceberg(t) => t.slices_under(prefix),
        }
    }

    /// The latest version among those that made the current outputs of
    /// the slices under `prefix` current: at it, every one of them reads
    /// as it is now (`None`: none committed).
    pub async fn version_of_current_under(&self, prefix: &str) -> Result<Option<u64>, TableError> {
        let mut latest = None;
        for s in self.slices_under(prefix).await? {
            latest = latest.max(self.version_of_current(&s).await?);
        }
        Ok(latest)
    }

    pub async fn ensure_safe_store(&mut self) -> Result<(), TableError> {
        match self {
            Table::Delta(t) => t.ensure_safe_store().await,
            // The catalog's compare-and-swap orders commits.
            Table::Iceberg(_) => Ok(()),
        }
    }

    pub async fn commit(&mut self, req: CommitRequest<'_>) -> Result<SliceOutcome, TableError> {
        match self {
            Table::Delta(t) => t.commit(req).await,
            Table::Iceberg(t) => t.commit(req).await,
        }
    }

    /// Write-audit-publish: commit `req` to its branch (`req.branch`),
    /// leaving `main` as it is; `None` when `main` holds the output
    /// already (its outcome then).
    pub async fn write_branch(
        &mut self,
        req: CommitRequest<'_>,
    ) -> Result<Result<Branched, SliceOutcome>, TableError> {
        match self {
            Table::Delta(_) => Err(TableError::Setting(wap::NO_BRANCHES.into())),
            Table::Iceberg(t) => Ok(match t.write_branch(req).await? {
                iceberg::Wrote::Branch(b) => Ok(b),
                iceberg::Wrote::Current(o) => Err(o),
            }),
        }
    }

    /// Publish this handle's branch write: `main` fast-forwarded to it in
    /// one catalog swap. `Conflict` when `main` moved since the write.
    pub async fn publish(&mut self, p: &Publish<'_>) -> Result<SliceOutcome, TableError> {
        match self {
            Table::Delta(_) => Err(TableError::Setting(wap::NO_BRANCHES.into())),
            Table::Iceberg(t) => t.publish(p).await,
        }
    }

    /// Whether a run of `slice` may write to `branch` (checked again by
    /// the write itself): refused early, before the transform runs.
    pub fn check_branch(&self, branch: &str, slice: &str) -> Result<(), TableError> {
        match self {
            Table::Delta(_) => Err(TableError::Setting(wap::NO_BRANCHES.into())),
            Table::Iceberg(t) => t.check_branch(branch, slice),
        }
    }

    /// The snapshot that made the slice's output current, while the table
    /// has it (Iceberg).
    pub fn slice_snapshot(&self, slice: &str) -> Option<i64> {
        match self {
            Table::Delta(_) => None,
            Table::Iceberg(t) => t.slice_snapshot(slice),
        }
    }

    /// The slice's output written to a branch and not published.
    pub fn pending(&self, slice: &str) -> Option<Pending> {
        match self {
            Table::Delta(_) => None,
            Table::Iceberg(t) => t.pending(slice),
        }
    }

    pub fn data_writer(
        &self,
        rt: &tokio::runtime::Runtime,
        mode: &Mode,
        schema_change: SchemaChange,
    ) -> Result<DataWriter, TableError> {
        match self {
            Table::Delta(t) => t.data_writer(rt, mode, schema_change),
            Table::Iceberg(_) => Err(TableError::Output(
                "Iceberg output is staged, not written ahead".into(),
            )),
        }
    }

    pub fn arrow_schema(&self) -> Result<SchemaRef, TableError> {
        match self {
            Table::Delta(t) => t.arrow_schema(),
            Table::Iceberg(t) => t.arrow_schema(),
        }
    }

    /// The columns its data files are read as: the schema, on Iceberg
    /// with each column's field id (files are matched by it, not by name).
    pub fn read_columns(&self) -> Result<SchemaRef, TableError> {
        match self {
            Table::Delta(t) => t.arrow_schema(),
            Table::Iceberg(t) => t.read_columns(),
        }
    }

    pub async fn put_sidecar(&self, rel: &str, bytes: Vec<u8>) -> Result<(), TableError> {
        match self {
            Table::Delta(t) => t.put_sidecar(rel, bytes).await,
            Table::Iceberg(t) => t.put_sidecar(rel, bytes).await,
        }
    }

    /// `_idem/<rel>`, refused past [`crate::storage::MAX_READ_WHOLE`].
    pub async fn get_sidecar(&self, rel: &str) -> Result<Option<Vec<u8>>, TableError> {
        self.get_sidecar_at_most(rel, crate::storage::MAX_READ_WHOLE)
            .await
    }

    /// `_idem/<rel>`, refused past `most` bytes before it is read.
    pub async fn get_sidecar_at_most(
        &self,
        rel: &str,
        most: u64,
    ) -> Result<Option<Vec<u8>>, TableError> {
        match self {
            Table::Delta(t) => t.get_sidecar(rel, most).await,
            Table::Iceberg(t) => t.get_sidecar(rel, most).await,
        }
    }

    /// The files under `_idem/<prefix>/`, sorted.
    pub async fn list_sidecar(&self, prefix: &str) -> Result<Vec<String>, TableError> {
        self.list_sidecar_at_most(prefix, usize::MAX).await
    }

    /// The first `most` files the store lists under `_idem/<prefix>/`,
    /// sorted (a planted flood is not listed whole).
    pub async fn list_sidecar_at_most(
        &self,
        prefix: &str,
        most: usize,
    ) -> Result<Vec<String>, TableError> {
        match self {
            Table::Delta(t) => t.list_sidecar(prefix, most).await,
            Table::Iceberg(t) => t.list_sidecar(prefix, most).await,
        }
    }

    pub async fn input_files(
        &self,
        partition: Option<&crate::slice::Partition>,
        owners: Option<&[String]>,
    ) -> Result<(Vec<InputFile>, bool), TableError> {
        match self {
            Table::Delta(t) => t.input_files(partition, owners).await,
            Table::Iceberg(t) => t.input_files(partition, owners).await,
        }
    }

    /// The version (what `committed version N` says) of an Iceberg
    /// snapshot named by its id; a Delta table has no snapshot ids.
    pub fn version_of_snapshot(&self, id: i64) -> Result<u64, TableError> {
        match self {
            Table::Delta(_) => Err(TableError::Pin(format!(
                "{} is a Delta table: it has versions, not snapshot ids (use --table-version N)",
                self.url()
            ))),
            Table::Iceberg(t) => t.version_of_snapshot(id),
        }
    }

    /// Read an Iceberg table as of snapshot `id`, published or not (a
    /// branch write's audit).
    pub fn pin_snapshot(&mut self, id: i64) -> Result<(), TableError> {
        match self {
            Table::Delta(_) => Err(TableError::Setting(wap::NO_BRANCHES.into())),
            Table::Iceberg(t) => t.pin_snapshot(id),
        }
    }

    pub async fn load_version(&mut self, version: u64) -> Result<(), TableError> {
        match self {
            Table::Delta(t) => t.load_version(version).await,
            Table::Iceberg(t) => t.load_version(version),
        }
    }

    pub async fn progress_of(&self, source: &str) -> Result<Option<Progress>, TableError> {
        match self {
            Table::Delta(t) => t.progress_of(source).await,
            Table::Iceberg(_) => Ok(None),
        }
    }

    pub async fn progress_count(&self, source: &str) -> Result<Option<i64>, TableError> {
        match self {
            Table::Delta(t) => t.progress_count(source).await,
            Table::Iceberg(_) => Ok(None),
        }
    }

    pub async fn consumed_manifests(&self, source: &str) -> Result<Vec<Vec<u8>>, TableError> {
        match self {
            Table::Delta(t) => t.consumed_manifests(source).await,
            Table::Iceberg(_) => Ok(Vec::new()),
        }
    }

    pub async fn idem_history(&self) -> Result<Vec<LogCommit>, TableError> {
        match self {
            Table::Delta(t) => t.idem_history().await,
            Table::Iceberg(t) => Ok(t.idem_history()),
        }
    }

    /// Which of `history`'s commits idem made: on Delta, those that are the
    /// first to carry their slice's app transaction (see `genuine`); on
    /// Iceberg every snapshot idem's summary names (its history holds
    /// nothing else).
    /// `None`: all of them.
    pub fn made_by_idem(&self, history: &[LogCommit]) -> Option<std::collections::HashSet<u64>> {
        match self {
            Table::Delta(_) => Some(delta::genuine::versions(history)),
            Table::Iceberg(_) => None,
        }
    }

    pub async fn slice_commits(&self) -> Result<Vec<SliceCommit>, TableError> {
        match self {
            Table::Delta(t) => t.slice_commits().await,
            Table::Iceberg(t) => t.slice_commits().await,
        }
    }

    /// Append `commits` sample commits (see `delta::synthetic`): Delta
    /// overwrite-partition tables only.
    #[doc(hidden)]
    pub async fn sample_history(
        &mut self,
        commits: u64,
        column: &str,
        prefix: &str,
    ) -> Result<(), TableError> {
        match self {
            Table::Delta(t) => t.sample_history(commits, column, prefix).await,
            Table::Iceberg(_) => Err(TableError::Output(
                "sample history is written to Delta tables only".into(),
            )),
        }
    }

    /// The slice's current commit (one slice's lookup: on Delta its
    /// commit is read by version, not found in the history).
    pub async fn slice_commit(&self, slice: &str) -> Result<Option<SliceCommit>, TableError> {
        match self {
            Table::Delta(t) => t.slice_commit(slice).await,
            Table::Iceberg(t) => Ok(t
                .slice_commits()
                .await?
                .into_iter()
                .find(|c| c.slice == slice && c.current)),
        }
    }

    pub async fn slice_drift(&self, c: &SliceCommit) -> Result<Option<String>, TableError> {
        match self {
            Table::Delta(t) => t.slice_drift(c).await,
            Table::Iceberg(t) => t.slice_drift(c).await,
        }
    }

    /// The manifest the slice's current commit names (one slice's lookup,
    /// not [`Table::slice_commits`]' walk over every slice).
    pub async fn current_manifest(&self, slice: &str) -> Result<Option<Digest>, TableError> {
        match self {
            Table::Delta(t) => t.current_manifest(slice).await,
            Table::Iceberg(t) => Ok(t.current_manifest(slice)),
        }
    }

    /// Data files that belong to no slice's current commit (see
    /// `ownership::unowned`); `commits` are [`Table::slice_commits`].
    pub async fn unowned_files(&self, commits: &[SliceCommit]) -> Result<Vec<String>, TableError> {
        match self {
            Table::Delta(t) => t.unowned_files(commits).await,
            Table::Iceberg(t) => t.unowned_files(commits).await,
        }
    }

    /// Why the table's schema, partitioning or column mapping is no longer
    /// what slice `c`'s commit saw (`None`: unchanged).
    pub async fn slice_shape_drift(&self, c: &SliceCommit) -> Result<Option<String>, TableError> {
        match self {
            Table::Delta(t) => t.shape_drift(Some(c.version)).await,
            Table::Iceberg(t) => Ok(t.slice_shape_drift(c)),
        }
    }

    pub async fn digest_slice_rows(&self, c: &SliceCommit) -> Result<(Digest, u64), TableError> {
        match self {
            Table::Delta(t) => t.digest_slice_rows(c).await,
            Table::Iceberg(t) => t.digest_slice_rows(c).await,
        }
    }
}
