//! How far an append-only source was consumed (`--next`): each commit
//! that consumes from it records its position in its commitInfo
//! (`idem.progress`) and counts it in an app transaction.

use super::Delta;
use super::apps::{progress_app, progress_at_app};
use crate::table::commit::Progress;
use crate::table::error::TableError;
use crate::table::record::LogCommit;

/// The progress commit `c` records for `source`, if it does.
fn recorded(c: &LogCommit, source: &str) -> Option<Progress> {
    let p = serde_json::from_value::<Progress>(c.idem.get("idem.progress")?.clone()).ok()?;
    (p.source == source).then_some(p)
}

impl Delta {
    /// The latest progress recorded for `source`, if any run consumed it:
    /// the commit that last advanced it (the one from which its app
    /// transaction holds its count, or found from the version it was made
    /// for), whose recorded count must be the one the app transaction
    /// holds; else (an older idem made it) the log's history.
    pub async fn progress_of(&self, source: &str) -> Result<Option<Progress>, TableError> {
        let count_app = progress_app(source);
        let Some(count) = self.txn(&count_app).await? else {
            return Ok(None);
        };
        let advanced = |c: &LogCommit| {
            recorded(c, source).is_some_and(|p| p.count as i64 == count)
                && c.txns.iter().any(|(a, v)| *a == count_app && *v == count)
        };
        let at_app = progress_at_app(source);
        if let Some(c) = self.setter(&count_app, &at_app, advanced).await? {
            return Ok(recorded(&c, source));
        }
        Ok(self
            .idem_history()
            .await?
            .iter()
            .find_map(|c| recorded(c, source)))
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
                    .get_sidecar(
                        &format!("manifests/{}.json", md.hex()),
                        crate::storage::MAX_READ_WHOLE,
                    )
                    .await?
            {
                out.push(bytes);
            }
        }
        Ok(out)
    }
}
