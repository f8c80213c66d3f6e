//! Which commits of a Delta log idem made. commitInfo is free text any
//! writer can fill with idem's keys, so it alone proves nothing: a commit
//! is idem's when it also carries the app transaction that makes its slice
//! current (`idem:slice:<slice>` at its sequence number), and it is the
//! first to carry it. delta-rs does not refuse a reused app-transaction
//! version (delta-rs#2580) and idem never reuses one, so a later commit
//! claiming the same slice and sequence number is another writer's.

use std::collections::{HashMap, HashSet};

use super::apps::{at_app, slice_app};
use crate::table::record::LogCommit;

impl LogCommit {
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

    /// The version this commit was made for (`idem:at:<slice>`, see
    /// `apps::at_app`), when it sets a slice and records one.
    pub(super) fn made_for(&self) -> Option<i64> {
        let (slice, _) = self.sets_slice()?;
        let app = at_app(slice);
        self.txns.iter().find(|(a, _)| *a == app).map(|(_, v)| *v)
    }
}

/// The versions of the commits idem made (`history` in any order): the
/// first to carry their slice's transaction.
pub(in crate::table) fn versions(history: &[LogCommit]) -> HashSet<u64> {
    let mut first: HashMap<(&str, i64), u64> = HashMap::new();
    for c in history {
        if let Some(key) = c.sets_slice() {
            let v = first.entry(key).or_insert(c.version);
            *v = (*v).min(c.version);
        }
    }
    first.into_values().collect()
}

/// The version of the first commit that set `slice` to `seq`.
pub(super) fn first_setting(history: &[LogCommit], slice: &str, seq: i64) -> Option<u64> {
    history
        .iter()
        .filter(|c| c.sets_slice() == Some((slice, seq)))
        .map(|c| c.version)
        .min()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn commit(version: u64, claims: Option<(&str, i64)>, txn: Option<(&str, i64)>) -> LogCommit {
        let mut c = LogCommit {
            version,
            ..Default::default()
        };
        if let Some((s, q)) = claims {
            c.idem.insert("idem.slice".into(), s.into());
            c.idem.insert("idem.seq".into(), q.into());
        }
        if let Some((s, q)) = txn {
            c.txns.push((format!("idem:slice:{s}"), q));
        }
        c
    }

    #[test]
    fn only_the_first_commit_carrying_the_transaction_is_idems() {
        let h = vec![
            commit(5, Some(("a", 2)), Some(("a", 2))), // a copy of v3's claims
            commit(4, Some(("b", 1)), None),           // commitInfo only
            commit(3, Some(("a", 2)), Some(("a", 2))),
            commit(2, None, None),
            commit(1, Some(("a", 1)), Some(("a", 1))),
        ];
        let ours = versions(&h);
        assert_eq!(ours, HashSet::from([1, 3]));
        assert_eq!(first_setting(&h, "a", 2), Some(3));
        assert_eq!(first_setting(&h, "b", 1), None);
        // The transaction must be for the slice and sequence it claims.
        let wrong = vec![commit(1, Some(("a", 2)), Some(("a", 1)))];
        assert!(versions(&wrong).is_empty());
    }
}
