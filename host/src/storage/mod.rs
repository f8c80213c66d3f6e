//! Where bytes live. Every location idem reads or writes (input datasets,
//! Delta inputs, the target table, manifests, modules, the run log) is a URL
//! on one [`object_store`]: a plain path or `file://` (the default),
//! `s3://`, `gs://`, `az://`/`abfs(s)://`. Nothing above this module knows
//! whether a location is local.
//!
//! - S3: endpoint, region and credentials come from the standard `AWS_*`
//!   environment variables (`AWS_ENDPOINT_URL`, `AWS_REGION`,
//!   `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`,
//!   `AWS_ALLOW_HTTP`, `AWS_VIRTUAL_HOSTED_STYLE_REQUEST`...). Writes that
//!   must not overwrite (Delta log entries) are conditional PUTs
//!   (`If-None-Match: *`); [`Store::check_conditional_put`] proves the store
//!   honours them before idem commits there.
//! - GCS and Azure: the `GOOGLE_*` / `AZURE_*` variables object_store reads.
//! - Local directories keep one rule object stores have by construction: a
//!   listing never leaves its root (symlinks are followed only to targets
//!   inside it).
//!
//! The files, from the ground up:
//!
//! - `error`: why a location could not be used ([`StorageError`]).
//! - `runtime`: the runtime object-store I/O runs on ([`block`]).
//! - `location`: what a user typed, as a URL; directory URL arithmetic.
//! - `client`: the object-store client for a URL, from the environment.
//! - `store`: [`Store`], a directory on some store, and its small reads.
//! - `list`: the objects below a directory.
//! - `read`: an object read whole, within a bound.
//! - `copy`: an object read once through hashes ([`Hashes`]).
//! - `many`: many objects at once: sizes, ranges and hashes, the requests
//!   to an object store bounded by [`concurrency`].
//! - `conditional`: the proof that a store honours conditional writes.

mod client;
mod conditional;
mod copy;
mod error;
mod list;
mod location;
mod many;
mod read;
mod runtime;
mod store;

pub use client::{endpoint_of, object_store_for};
pub use copy::Hashes;
pub use error::{StorageError, explain};
pub use list::{Listed, Listing};
pub use location::{
    as_dir, canonical_best_effort, contains, decode_segment, locate, same_store, split_last,
};
pub use many::{DEFAULT_CONCURRENCY, MAX_CONCURRENCY, concurrency, sizes_of};
pub use read::{MAX_READ_WHOLE, read_location, whole, whole_at_most};
pub use runtime::block;
pub use store::Store;
