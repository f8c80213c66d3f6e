//! A slice's commit to an Iceberg table: attempts until one lands or finds
//! the output current (each re-reads the table, checks it, writes the
//! output's data files and swaps in one snapshot), the data files no
//! snapshot named deleted afterwards.

use std::collections::HashSet;
use std::path::PathBuf;

use iceberg::spec::{DataFile, TableMetadata};

use super::Iceberg;
use super::checks::check_table;
use super::evolve::with_new_columns;
use super::files::discard;
use crate::fault::fails as fault_fails;
use crate::table::commit::{
    Attempt, CommitRequest, Output, SliceOutcome, SliceState, until_decided,
};
use crate::table::error::TableError;
use crate::table::mode::Mode;

/// Data files written for a commit, and the schema and partition spec
/// they were written for.
struct Written {
    files: Vec<DataFile>,
    schema_id: i32,
    spec_id: i32,
    /// The table they were written for (a lost creation race means
    /// another table than the one planned).
    table: (String, String),
}

impl Written {
    fn new(files: Vec<DataFile>, m: &TableMetadata) -> Self {
        Written {
            files,
            schema_id: m.current_schema_id(),
            spec_id: m.default_partition_spec_id(),
            table: (m.uuid().to_string(), m.location().to_string()),
        }
    }

    /// Whether the files were written for the table `m` describes.
    fn fits(&self, m: &TableMetadata) -> bool {
        self.schema_id == m.current_schema_id()
            && self.spec_id == m.default_partition_spec_id()
            && self.table == (m.uuid().to_string(), m.location().to_string())
    }
}

impl Iceberg {
    /// Commit the slice's output as one snapshot unless it is current.
    pub async fn commit(&mut self, req: CommitRequest<'_>) -> Result<SliceOutcome, TableError> {
        self.commits += 1;
        let staged = match &req.output {
            Output::Staged(paths) => paths.clone(),
            Output::Written(_) => {
                return Err(TableError::Output(
                    "an Iceberg commit takes staged output".into(),
                ));
            }
        };
        let mut written: Option<Written> = None;
        let mut swapped = false;
        let result = self
            .commit_attempts(&req, &staged, &mut written, &mut swapped)
            .await;
        // Data files no snapshot names are deleted (a lost race, an
        // unchanged output, an error before the catalog swap).
        let keep = matches!(result, Ok(SliceOutcome::Committed { .. })) || swapped;
        if let (Some(w), false) = (&written, keep) {
            discard(&self.io, &w.files).await;
        }
        result
    }

    /// Attempt the commit until one attempt decides it, at most
    /// `MAX_ATTEMPTS` times ([`until_decided`]). Tracked progress is refused.
    async fn commit_attempts(
        &mut self,
        req: &CommitRequest<'_>,
        staged: &[PathBuf],
        written: &mut Option<Written>,
        swapped: &mut bool,
    ) -> Result<SliceOutcome, TableError> {
        if req.progress.is_some() {
            return Err(TableError::Partitioning(
                "tracked progress (--next) is not yet supported for Iceberg tables: use a Delta table".into(),
            ));
        }
        until_decided(req.slice, async |attempt, raced| {
            self.attempt(req, staged, written, swapped, attempt, raced)
                .await
        })
        .await
    }

    /// Attempt number `attempt`: re-read the table; stop if the output is
    /// current; else check the table (or plan a new one), write the data
    /// files and swap in the snapshot. `raced`: an earlier attempt lost a
    /// race.
    async fn attempt(
        &mut self,
        req: &CommitRequest<'_>,
        staged: &[PathBuf],
        written: &mut Option<Written>,
        swapped: &mut bool,
        attempt: usize,
        raced: bool,
    ) -> Result<Attempt, TableError> {
        if fault_fails("commit-read") {
            return Err(TableError::Iceberg {
                what: "refreshing the table".into(),
                detail: "IDEM_FAULT_FAIL=commit-read".into(),
            });
        }
        self.refresh().await?;
        let drift = match self
            .slice_state(req.slice, req.output_digest, req.mode)
            .await?
        {
            SliceState::Current { since } => {
                return Ok(Attempt::Done(self.current(req, since, raced)));
            }
            SliceState::Drifted { reason } => Some(reason),
            SliceState::Other => None,
        };
        // A new table is created by the commit of its first snapshot
        // (one catalog INSERT): a failed first run leaves no table.
        // The output's new columns, when the run may append them, go in
        // with the snapshot (files are written with their field ids).
        let (base, m) = match &self.current {
            Some((path, m)) => {
                check_table(req, m)?;
                (Some(path.clone()), with_new_columns(req, m.clone())?)
            }
            None => (None, self.new_metadata(req).await?),
        };
        check_table(req, &m)?;
        let merge_removed = self
            .stage_files(req, base.is_some(), &m, staged, written, attempt)
            .await?;
        let files = written.as_ref().map(|w| w.files.as_slice()).unwrap_or(&[]);
        match self
            .replace(
                req,
                base.as_deref(),
                &m,
                files,
                merge_removed.as_ref(),
                swapped,
            )
            .await
        {
            Ok(version) => Ok(Attempt::Done(SliceOutcome::Committed { version, drift })),
            Err(TableError::Conflict(why)) if *swapped => {
                self.after_swap(req, &why).await.map(Attempt::Done)
            }
            Err(TableError::Conflict(detail)) => Ok(Attempt::Raced(detail)),
            Err(e) => Err(e),
        }
    }

    /// The outcome when the slice's output is current (since `since`): a
    /// race lost to our own commit (its response lost) is ours.
    /// A branch write finds `main` holding the output: nothing to write.
    fn current(&self, req: &CommitRequest<'_>, since: Option<u64>, raced: bool) -> SliceOutcome {
        if raced
            && req.branch.is_none()
            && let Some(rec) = self.record(req.slice)
            && rec.attempt == self.attempt
        {
            return SliceOutcome::Committed {
                version: rec.version,
                drift: None,
            };
        }
        SliceOutcome::Unchanged { since, raced }
    }

    /// The attempt's data files in `written`, for the table `m` (that
    /// `exists` already, or not): a merge's rewritten files (and, returned,
    /// the files they replace), else the output's, reused while they fit.
    async fn stage_files(
        &self,
        req: &CommitRequest<'_>,
        exists: bool,
        m: &TableMetadata,
        staged: &[PathBuf],
        written: &mut Option<Written>,
        attempt: usize,
    ) -> Result<Option<HashSet<String>>, TableError> {
        match req.mode {
            // A merge rewrites files of the table as it is now: planned
            // again on every attempt.
            Mode::Merge { keys } => {
                if let Some(w) = written.take() {
                    discard(&self.io, &w.files).await;
                }
                let merged = self
                    .plan_merge(req, exists, m, staged, keys, attempt)
                    .await?;
                *written = Some(Written::new(merged.added, m));
                Ok(Some(merged.removed))
            }
            _ => {
                // Files written for an earlier attempt carry that
                // schema's field ids and that spec: another writer may
                // have changed them since.
                if let Some(w) = written.take_if(|w| !w.fits(m)) {
                    discard(&self.io, &w.files).await;
                }
                if written.is_none() {
                    let files = self.write_files(req, staged, m, attempt).await?;
                    *written = Some(Written::new(files, m));
                }
                Ok(None)
            }
        }
    }

    /// The catalog swap landed but its outcome was not seen (a lost
    /// response): the commit is ours if the slice's record names this
    /// process's commit. Nothing is retried (a retry could plan against
    /// our own commit and delete its files).
    async fn after_swap(
        &mut self,
        req: &CommitRequest<'_>,
        why: &str,
    ) -> Result<SliceOutcome, TableError> {
        if let Err(e) = self.refresh().await {
            return Err(TableError::Iceberg {
                what: "committing".into(),
                detail: format!(
                    "the catalog swap's outcome was lost ({why}), and re-reading the table failed ({e}): run again (a rerun finds the commit if it landed; nothing it may name was deleted)"
                ),
            });
        }
        let ours = match req.branch {
            None => self.record(req.slice).map(|r| (r.attempt, r.version)),
            // This attempt's own snapshot (every round shares the id).
            Some(_) => self
                .wap_record(req.slice)
                .filter(|w| {
                    self.branched
                        .as_ref()
                        .is_some_and(|b| b.snapshot == w.snapshot)
                })
                .map(|w| (w.record.attempt, w.version)),
        };
        match ours {
            Some((attempt, version)) if attempt == self.attempt => Ok(SliceOutcome::Committed {
                version,
                drift: None,
            }),
            _ => Err(TableError::Iceberg {
                what: "committing".into(),
                detail: format!(
                    "the catalog swap's outcome was lost ({why}) and the table does not show this commit: run again"
                ),
            }),
        }
    }
}
