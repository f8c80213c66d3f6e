//! A slice's commit to a Delta table: attempts until one lands or finds
//! the output current (each re-reads the log, checks the table and plans
//! anew), the data files no commit named deleted afterwards, and the
//! commitInfo and app transactions every commit carries.

use std::collections::HashSet;

use arrow::datatypes::{Field, SchemaRef};
use deltalake::DeltaTableError;
use deltalake::kernel::transaction::CommitProperties;
use deltalake::kernel::{Add, Metadata};

use super::{Delta, apps};
use crate::fault::fails as fault_fails;
use crate::table::commit::{
    Attempt, CommitRequest, Output, SliceOutcome, SliceState, until_decided,
};
use crate::table::error::TableError;
use crate::table::mode::Mode;
use crate::table::record;
use crate::table::write_ahead::discard;

impl Delta {
    /// Commit `req` unless the slice already holds its output digest (and
    /// the table still holds the slice's rows). Races with other hosts are
    /// resolved by re-reading: the loser of a race with the same output finds
    /// it committed and reports `Unchanged`.
    pub async fn commit(&mut self, mut req: CommitRequest<'_>) -> Result<SliceOutcome, TableError> {
        if req.branch.is_some() {
            return Err(TableError::Setting(super::super::wap::NO_BRANCHES.into()));
        }
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
        if let Some(adds) = &written
            && self.may_discard(&result)
        {
            self.discard_unnamed(adds).await;
        }
        if result.is_ok() {
            self.keep().await;
        }
        result
    }

    /// Files are deleted only when no commit of ours can have named them:
    /// an unchanged outcome (our commit lost the race) or an error raised
    /// before or instead of the log write. A generic error from the log
    /// write itself may hide a commit that landed: keep the files (a
    /// later VACUUM removes them if they are orphans).
    fn may_discard(&self, result: &Result<SliceOutcome, TableError>) -> bool {
        match result {
            Ok(SliceOutcome::Unchanged { .. } | SliceOutcome::Memo { .. }) => true,
            Ok(SliceOutcome::Committed { .. }) => false,
            // Failed before any log write: no commit can name them.
            Err(_) if !self.log_written => true,
            Err(
                TableError::Delta { .. } | TableError::Location { .. } | TableError::Sidecar { .. },
            ) => false,
            Err(_) => true,
        }
    }

    /// Delete the data files written for this commit that the log does not
    /// name.
    async fn discard_unnamed(&mut self, adds: &[Add]) {
        if !self.log_written {
            // No log write was tried: nothing can name them (and the
            // store that just failed may fail a re-read too).
            discard(&self.delta, adds).await;
        // A commit can land and still report an error (a failing
        // post-commit hook): delete only files the log does not name.
        } else if self.refresh().await.is_ok()
            && let Ok(active) = self.data_files().await
        {
            let active: HashSet<&str> = active.iter().map(|a| a.path.as_str()).collect();
            let orphans: Vec<Add> = adds
                .iter()
                .filter(|a| !active.contains(a.path.as_str()))
                .cloned()
                .collect();
            discard(&self.delta, &orphans).await;
        }
    }

    /// Attempt the commit until one attempt decides it, at most
    /// `MAX_ATTEMPTS` times ([`until_decided`]).
    async fn commit_attempts(
        &mut self,
        req: &CommitRequest<'_>,
        written: &mut Option<Vec<Add>>,
        files_schema: Option<&SchemaRef>,
    ) -> Result<SliceOutcome, TableError> {
        until_decided(req.slice, async |_, raced| {
            self.attempt(req, written, files_schema, raced).await
        })
        .await
    }

    /// One attempt: re-read the log; stop if the output is current; else
    /// create the table (first commit) or check it and commit the slice's
    /// next sequence number. `raced`: an earlier attempt lost a race.
    async fn attempt(
        &mut self,
        req: &CommitRequest<'_>,
        written: &mut Option<Vec<Add>>,
        files_schema: Option<&SchemaRef>,
        raced: bool,
    ) -> Result<Attempt, TableError> {
        if fault_fails("commit-read") {
            return Err(TableError::Delta {
                what: "refreshing the table".into(),
                detail: "IDEM_FAULT_FAIL=commit-read".into(),
            });
        }
        self.refresh().await?;
        let seq = self.slice_seq(req.slice).await?;
        let drift = match self
            .slice_state(req.slice, req.output_digest, req.mode)
            .await?
        {
            SliceState::Current { since } => {
                return Ok(Attempt::Done(self.current(req.slice, since, raced).await?));
            }
            SliceState::Drifted { reason } => Some(reason),
            SliceState::Other => None,
        };
        self.check_progress(req).await?;
        if self.delta.version().is_none() {
            self.create(req).await?;
            return Ok(Attempt::Again);
        }
        let added = self.check_table(req, files_schema)?;
        match self.commit_once(req, seq + 1, written, &added).await {
            Ok(version) => Ok(Attempt::Done(SliceOutcome::Committed { version, drift })),
            Err(TableError::Conflict(detail)) => Ok(Attempt::Raced(detail)),
            Err(e) => {
                // A log write that timed out may have landed: if the
                // slice's current commit is ours, it did.
                if self.refresh().await.is_ok()
                    && let Ok(Some(version)) = self.committed_by_us(req.slice).await
                {
                    return Ok(Attempt::Done(SliceOutcome::Committed { version, drift }));
                }
                Err(e)
            }
        }
    }

    /// The outcome when the slice's output is current (since `since`).
    async fn current(
        &self,
        slice: &str,
        since: Option<u64>,
        raced: bool,
    ) -> Result<SliceOutcome, TableError> {
        // A write whose response was lost (a retried PUT that
        // had landed) looks like a lost race: it is ours if the
        // commit carries this process's id.
        if raced && let Some(version) = self.committed_by_us(slice).await? {
            return Ok(SliceOutcome::Committed {
                version,
                drift: None,
            });
        }
        Ok(SliceOutcome::Unchanged { since, raced })
    }

    /// Commit the slice's sequence number `seq`: a MERGE of its rows, or
    /// its files replacing the ones it held (and the columns `added`
    /// appended to the table).
    async fn commit_once(
        &mut self,
        req: &CommitRequest<'_>,
        seq: i64,
        written: &mut Option<Vec<Add>>,
        added: &[Field],
    ) -> Result<u64, TableError> {
        match req.mode {
            Mode::Merge { keys } => {
                let mut props = self.props(req, seq, None, None);
                for txn in self.new_seal().await? {
                    props = props.with_application_transaction(txn);
                }
                self.merge(req, keys, props).await
            }
            _ => self.replace(req, seq, written, added).await,
        }
    }

    /// commitInfo metadata and app transactions of the slice's commit
    /// `seq`, made for the version after the loaded one, recording the
    /// table's shape it leaves (`idem.shape`, and `idem.columns`, which
    /// lets later appended columns through: what memo and audit compare
    /// the shape with later, without the history). `meta`: the metadata
    /// the commit sets, if any.
    pub(super) fn props(
        &self,
        req: &CommitRequest<'_>,
        seq: i64,
        nfiles: Option<usize>,
        meta: Option<&Metadata>,
    ) -> CommitProperties {
        let at = self.delta.version().map_or(0, |v| v + 1);
        let mut keys = record::keys(req, seq, &self.attempt, nfiles);
        if let Some((shape, columns)) = self.shape_after(meta) {
            keys.push(("idem.shape".into(), shape.into()));
            keys.push(("idem.columns".into(), columns.into()));
        }
        let props = CommitProperties::default()
            .with_metadata(keys)
            .with_application_transactions(apps::transactions(req, seq, at, nfiles));
        super::post_commit::no_cleanup(props)
    }
}

/// Commit races are retried; everything else is an error.
pub(in crate::table) fn classify(e: DeltaTableError) -> TableError {
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
            "the output's schema does not fit the table's ({text}). Output columns the table lacks, or table columns the output lacks, are let in by --on-schema-change append-new-columns; a changed type needs a new table"
        ))
    } else {
        TableError::Delta {
            what: "committing".into(),
            detail: text,
        }
    }
}
