//! idem: run data transforms compiled to WebAssembly in a deterministic
//! sandbox, and commit their output only when it is new.
//!
//! Data flows one way: [`slice`] -> [`sandbox`] (driven by [`execute`]) ->
//! [`digest`] -> manifest -> table.

pub mod build;
pub mod digest;
pub mod execute;
pub mod output;
pub mod sample;
pub mod sandbox;
pub mod slice;
