//! idem: run data transforms compiled to WebAssembly in a deterministic
//! sandbox, and commit their output only when it is new.
//!
//! Data flows one way: [`slice`](mod@slice) -> [`sandbox`] (driven by [`execute`]) ->
//! [`digest`] -> [`manifest`] -> [`table`], and [`run`] is that flow as a
//! folder of steps (resolve, plan, memo, land, commit, record), each
//! callable on its own. Beside the flow: [`catalog`] finds stored runs,
//! [`explain`] says why run keys differ, [`audit`] proves a table, [`kind`]
//! names the kinds of failure (the CLI's exit codes), [`runtime`] is the
//! process's one async runtime, [`progress`] draws bars.

pub mod attest;
pub mod audit;
pub mod build;
pub mod catalog;
pub mod digest;
pub mod encoding;
pub mod execute;
pub mod expect;
pub mod explain;
pub mod fault;
pub mod kind;
pub mod lineage;
pub mod manifest;
pub mod output;
pub mod pipeline;
pub mod progress;
pub mod run;
pub mod runtime;
/// The date ranges of backfills and pipelines ([`run::batch`]).
pub use run::batch as backfill;
pub mod sample;
pub mod sandbox;
pub mod scaffold;
pub mod schedule;
pub mod serve;
pub mod slice;
pub mod storage;
pub mod table;
pub mod text;
