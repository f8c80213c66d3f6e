//! Digests: sha256 of bytes and files, and the logical digest of Arrow
//! output (same rows in the same order -> same digest, whatever encoding).
//!
//! The files, from the ground up:
//!
//! - `sha256`: [`Digest`], the sha256 of bytes, files and streams.
//! - `error`: why output rows could not be digested ([`DigestError`]).
//! - `types`: which column types can be digested ([`check_schema`]).
//! - `plain`: dictionaries expanded into their values.
//! - `rows`: idem's row encoding, for the columns arrow-digest cannot hash.
//! - `output`: [`OutputDigester`], the logical digest of a run's output.
//! - `pipelined`: that digest computed on a thread of its own.

mod error;
mod output;
mod pipelined;
mod plain;
pub mod rows;
mod sha256;
mod types;

#[cfg(test)]
mod property;
#[cfg(test)]
mod testing;

pub use error::DigestError;
pub(crate) use error::panic_message;
pub use output::{OutputDigester, of_batches};
pub use pipelined::PipelinedDigester;
pub use sha256::Digest;
#[cfg(test)]
pub(crate) use testing::{TestRng, env_or};
pub use types::check_schema;
