//! What other writers did, sealed: a merge slice's rows are shared by key,
//! so any commit after the slice's that idem did not make and that adds or
//! removes files may have changed them. Instead of reading every commit
//! since an old slice's, idem's merge commits carry, every
//! [`SEAL_EVERY`] versions, a seal: the version they read through
//! (`idem:seal`) and the latest commit up to it that another writer made
//! and that touched files (`idem:seal-foreign`, plus one; 0: none). A
//! reader reads the commits after the seal, and takes the seal's word for
//! those before it, once the commit carrying it is proven idem's (or gone
//! with log cleanup). A foreign commit the seal names counts whoever wrote
//! the seal: it can only make a slice recommit. A table sealed for the
//! first time (at least 100 versions, no seal yet) has its commits read
//! once, in that commit.

use deltalake::kernel::Transaction;
use futures::{StreamExt as _, TryStreamExt as _};

use super::Delta;
use crate::table::error::TableError;

/// App id: the version a seal read through.
const SEAL_APP: &str = "idem:seal";
/// App id: the latest foreign commit that touched files, through the
/// seal's version, plus one (0: none).
const FOREIGN_APP: &str = "idem:seal-foreign";
/// A merge commit seals when the last seal is this many versions old.
const SEAL_EVERY: u64 = 100;
/// Commits read at once.
const READ_AHEAD: usize = 16;

impl Delta {
    /// The latest foreign commit that touched files in versions
    /// `from..=to` (see the module's note), reading them.
    async fn foreign_in(&self, from: u64, to: u64) -> Result<Option<u64>, TableError> {
        let mut commits = futures::stream::iter(from..=to)
            .map(|v| self.commit_at(v))
            .buffered(READ_AHEAD);
        let mut touching = Vec::new();
        while let Some(c) = commits.try_next().await? {
            if let Some(c) = c.filter(|c| c.touches_files) {
                touching.push(c);
            }
        }
        let mut latest = None;
        for c in touching {
            if !self.made_by_idem(&c).await? {
                latest = Some(c.version);
            }
        }
        Ok(latest)
    }

    /// The latest foreign commit the table's seal names, whoever wrote it:
    /// what drift takes into account even when the seal cannot be proven
    /// (a seal can only add a reason to recommit).
    async fn sealed_foreign(&self) -> Result<Option<u64>, TableError> {
        Ok(self
            .txn(FOREIGN_APP)
            .await?
            .and_then(|f| u64::try_from(f).ok())
            .and_then(|f| f.checked_sub(1)))
    }

    /// The table's seal: (the version it read through, the latest foreign
    /// commit through it), once the commit carrying it is idem's (it
    /// carries both values) or gone with log cleanup (the checkpoint keeps
    /// the values; the commits they summarise may be gone too).
    async fn seal(&self) -> Result<Option<(u64, Option<u64>)>, TableError> {
        let (Some(through), Some(foreign)) =
            (self.txn(SEAL_APP).await?, self.txn(FOREIGN_APP).await?)
        else {
            return Ok(None);
        };
        let Ok(through_v) = u64::try_from(through) else {
            return Ok(None);
        };
        let carries = |c: &crate::table::record::LogCommit| {
            let has = |app: &str, v: i64| c.txns.iter().any(|(a, x)| a == app && *x == v);
            has(SEAL_APP, through) && has(FOREIGN_APP, foreign)
        };
        let sealer = match self.txn_since(SEAL_APP).await? {
            Some(v) => self.commit_at(v).await?,
            None if self.commit_at(through_v + 1).await?.is_none() => {
                // Cleaned up with the log: the values stand.
                return Ok(Some((through_v, self.sealed_foreign().await?)));
            }
            None => self.landed(through + 1, carries).await?,
        };
        match sealer {
            Some(c) if carries(&c) && self.made_by_idem(&c).await? => {
                Ok(Some((through_v, self.sealed_foreign().await?)))
            }
            _ => Ok(None),
        }
    }

    /// The first version after `since` that another writer committed and
    /// that touched files, as far as the log and the seal say: the commits
    /// after the later of `since` and the seal are read; for those before
    /// the seal, its word.
    pub(super) async fn foreign_after(&self, since: u64) -> Result<Option<u64>, TableError> {
        let Some(latest) = self.delta.version() else {
            return Ok(None);
        };
        if let Some(foreign) = self.sealed_foreign().await?
            && foreign > since
        {
            return Ok(Some(foreign));
        }
        let seal = self.seal().await?.filter(|(through, _)| *through > since);
        let from = seal.map_or(since, |(through, _)| through) + 1;
        if from > latest {
            return Ok(None);
        }
        self.foreign_in(from, latest).await
    }

    /// The seal a merge commit made now carries, when the last one is
    /// [`SEAL_EVERY`] versions old (none otherwise).
    pub(super) async fn new_seal(&self) -> Result<Vec<Transaction>, TableError> {
        let Some(read) = self.delta.version() else {
            return Ok(Vec::new());
        };
        let last = self.seal().await?;
        let since = last.map_or(0, |(through, _)| through);
        if read < since + SEAL_EVERY {
            return Ok(Vec::new());
        }
        let from = last.map_or(0, |(through, _)| through + 1);
        let foreign = self
            .foreign_in(from, read)
            .await?
            .or(self.sealed_foreign().await?);
        Ok(vec![
            Transaction::new(SEAL_APP, read as i64),
            Transaction::new(FOREIGN_APP, foreign.map_or(0, |f| f as i64 + 1)),
        ])
    }
}
