//! What other writers did, sealed: a merge slice's rows are shared by key,
//! so any commit after the slice's that idem did not make and that adds or
//! removes files may have changed them. Instead of reading every commit
//! since an old slice's, idem's merge commits carry, every
//! [`SEAL_EVERY`] versions, a seal: the version they read through
//! (`idem:seal`) and the latest commit up to it that another writer made
//! and that touched files (`idem:seal-foreign`, plus one; 0: none). A
//! reader reads the commits after the seal, and takes the seal's word for
//! those before it, once the commit carrying it is proven idem's.

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

    /// The table's seal, once the commit carrying it is proven idem's:
    /// (the version it read through, the latest foreign commit through
    /// it).
    async fn seal(&self) -> Result<Option<(u64, Option<u64>)>, TableError> {
        let Some(through) = self.txn(SEAL_APP).await? else {
            return Ok(None);
        };
        let Ok(through) = u64::try_from(through) else {
            return Ok(None);
        };
        let foreign = self.txn(FOREIGN_APP).await?.unwrap_or(0);
        let carries = |c: &crate::table::LogCommit| {
            c.txns
                .iter()
                .any(|(a, v)| a == SEAL_APP && *v == through as i64)
        };
        let sealer = match self.txn_since(SEAL_APP).await? {
            Some(v) => self.commit_at(v).await?.filter(carries),
            None => self.landed(through as i64 + 1, carries).await?,
        };
        let Some(sealer) = sealer else {
            return Ok(None);
        };
        if !self.made_by_idem(&sealer).await? {
            return Ok(None);
        }
        let foreign = u64::try_from(foreign).ok().and_then(|f| f.checked_sub(1));
        Ok(Some((through, foreign)))
    }

    /// The first version after `since` that another writer committed and
    /// that touched files, as far as the log and the seal say: the commits
    /// after the later of `since` and the seal are read; for those before
    /// the seal, its word.
    pub(super) async fn foreign_after(&self, since: u64) -> Result<Option<u64>, TableError> {
        let Some(latest) = self.delta.version() else {
            return Ok(None);
        };
        let seal = self.seal().await?.filter(|(through, _)| *through > since);
        let from = seal.map_or(since, |(through, _)| through) + 1;
        if let Some((_, Some(foreign))) = seal
            && foreign > since
        {
            return Ok(Some(foreign));
        }
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
            .or(last.and_then(|(_, f)| f));
        Ok(vec![
            Transaction::new(SEAL_APP, read as i64),
            Transaction::new(FOREIGN_APP, foreign.map_or(0, |f| f as i64 + 1)),
        ])
    }
}
