//! idem: run data transforms compiled to WebAssembly in a deterministic
//! sandbox, and commit their output only when it is new.
//!
//! Data flows one way: [`slice`] -> [`sandbox`] (driven by [`execute`]) ->
//! [`digest`] -> manifest -> table. Beside the flow: [`catalog`] finds
//! stored runs, [`explain`] says why run keys differ, [`error`] maps every
//! failure to its kind (and the CLI's exit code), [`progress`] draws bars.

pub mod audit;
pub mod backfill;
pub mod build;
pub mod catalog;
pub mod digest;
pub mod encoding;
pub mod error;
pub mod execute;
pub mod expect;
pub mod explain;
pub mod fault;
pub mod manifest;
pub mod output;
pub mod pipeline;
pub mod progress;
pub mod run;
pub mod sample;
pub mod sandbox;
pub mod scaffold;
pub mod schedule;
pub mod serve;
pub mod slice;
pub mod storage;
pub mod table;
pub mod text;
