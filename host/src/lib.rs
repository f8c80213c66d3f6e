//! idem: run data transforms compiled to WebAssembly in a deterministic
//! sandbox, and commit their output only when it is new.
//!
//! Data flows one way: [`slice`] -> [`sandbox`] (driven by [`execute`]) ->
//! [`digest`] -> manifest -> table.

pub mod audit;
pub mod build;
pub mod digest;
pub mod execute;
pub mod fault;
pub mod manifest;
pub mod output;
pub mod run;
pub mod sample;
pub mod sandbox;
pub mod slice;
pub mod storage;
pub mod table;
