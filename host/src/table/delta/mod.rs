//! Delta Lake commits: one commit per new slice output, carrying run key,
//! manifest digest and output digest in its commitInfo and app transactions
//! that make two hosts committing the same slice conflict. Besides this
//! folder only the writer that writes output ahead (`write_ahead`) and the
//! MERGE of `mode` name deltalake types.
//!
//! Slice state lives in the Delta log itself, as app transactions (they
//! survive checkpoints and log cleanup):
//! - `idem:slice:<slice>` -> `seq`, bumped by every commit of the slice;
//! - `idem:out:<slice>:<output digest>` -> the `seq` that committed it.
//!
//! The slice's current output is digest D exactly when
//! `txn(idem:out:<slice>:D) == txn(idem:slice:<slice>)`.
//!
//! One file per step: `open` the table, read its `history` and each
//! slice's `state` (its `apps` transactions); a `commit` passes its
//! `checks`, `create`s the table on the first commit, then `replace`s the
//! slice's files (overwrite-partition, append: written by `files`) or
//! `merge`s its rows. `ownership`, `genuine` and `shape` tell whether the
//! table still holds what idem committed; `proof` answers audit and
//! verify, `inputs` reads a version as a slice input, `progress` tracks
//! append-only sources; `sidecar` keeps idem's files beside the table and
//! `stores` hands delta-rs idem's object stores.

mod apps;
mod cache;
mod checks;
pub(super) mod commit;
mod create;
pub(super) mod evolve;
mod files;
pub(super) mod genuine;
mod handles;
mod history;
mod inputs;
mod merge;
pub(super) mod open;
mod ownership;
mod post_commit;
mod progress;
mod proof;
mod replace;
mod seal;
mod shape;
mod sidecar;
mod sql;
mod state;
mod stores;
mod synthetic;
mod txns;

use deltalake::{DeltaTable, DeltaTableError};
use url::Url;

use super::error::TableError;

/// Table property recording the commit mode every idem commit uses.
const MODE_PROPERTY: &str = "idem.mode";

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
    /// What was read of the loaded version.
    cache: cache::Cache,
}

/// A delta-rs failure while doing `what`.
fn delta_err(what: &str) -> impl Fn(DeltaTableError) -> TableError + '_ {
    move |e| TableError::Delta {
        what: what.to_string(),
        detail: e.to_string(),
    }
}
