//! What follows idem's commit to a Delta table, in place of two defaults
//! of delta-rs' post-commit hook whose cost grows with the table.
//!
//! - The handle's new state: delta-rs brings the state it read to the new
//!   version (reading only the commits in between), and the handle takes
//!   it rather than reading the log again; except on a checkpoint's
//!   version, where that state, brought up to date before the checkpoint
//!   was written, would never adopt it (every later update would replay
//!   the log from the older checkpoint on, as measured with delta-rs
//!   1.1: 900 commits in one process took 46 s against 17), so the log is
//!   read again.
//! - Log cleanup: left to itself, delta-rs lists the whole `_delta_log`
//!   after every commit to find expired entries
//!   (`cleanup_expired_logs_for`): on S3 a LIST page per 1,000 log files,
//!   on every commit. Delta Lake cleans the log up when it writes a
//!   checkpoint (the `delta.logRetentionDuration` contract), and so does
//!   idem: its commits ask delta-rs for no cleanup ([`no_cleanup`]), and
//!   a commit that lands on a checkpoint's version (delta-rs wrote the
//!   checkpoint, every `delta.checkpointInterval` versions) cleans up as
//!   delta-rs would have, honouring `delta.enableExpiredLogCleanup`.

use deltalake::kernel::transaction::CommitProperties;
use deltalake::protocol::checkpoints::cleanup_expired_logs_for;
use deltalake::table::config::TablePropertiesExt as _;
use deltalake::table::state::DeltaTableState;

use super::Delta;
use crate::table::error::TableError;

/// `props` asking delta-rs for no log cleanup (see [`Delta::committed`]).
pub(super) fn no_cleanup(props: CommitProperties) -> CommitProperties {
    props.with_cleanup_expired_logs(Some(false))
}

/// Whether the commit of `version` is one delta-rs writes a checkpoint
/// after, on a table checkpointed every `interval` versions.
pub(super) fn checkpointed(version: u64, interval: u64) -> bool {
    (version + 1).is_multiple_of(interval)
}

impl Delta {
    /// After this handle's commit of `version`: take `state`, delta-rs'
    /// state after it, as the handle's, and clean up the log on a
    /// checkpoint's version (see the module's note).
    pub(super) async fn committed(
        &mut self,
        state: DeltaTableState,
        version: u64,
    ) -> Result<(), TableError> {
        let interval = state.table_config().checkpoint_interval().get();
        if checkpointed(version, interval) || state.version() != version {
            self.refresh().await?;
        } else {
            self.delta.state = Some(state);
        }
        self.tidy_log(version).await;
        Ok(())
    }

    /// On a checkpoint's version, remove the log entries past the table's
    /// retention, as delta-rs' own post-commit cleanup does. Its failure is
    /// not the commit's (the commit stands; the next checkpoint cleans
    /// up): the log is only kept longer.
    async fn tidy_log(&self, version: u64) {
        let Ok(state) = self.delta.snapshot() else {
            return;
        };
        let config = state.table_config();
        if !checkpointed(version, config.checkpoint_interval().get())
            || !config.enable_expired_log_cleanup()
        {
            return;
        }
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        let retention = config.log_retention_duration().as_millis() as i64;
        let store = self.delta.log_store();
        if let Err(e) =
            cleanup_expired_logs_for(version, store.as_ref(), now - retention, None).await
        {
            tracing::warn!(
                "log cleanup after version {version} failed ({e}); the commit stands, the next checkpoint tries again"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::checkpointed;

    #[test]
    fn checkpoints_fall_where_delta_rs_writes_them() {
        let at: Vec<u64> = (0..300).filter(|v| checkpointed(*v, 100)).collect();
        assert_eq!(at, [99, 199, 299]);
    }
}
