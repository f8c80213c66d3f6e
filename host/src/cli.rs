//! One function per `idem` subcommand: call the library, print the result
//! (for people, or as JSON with `--json`: the shapes are
//! `schemas/<command>.schema.json`).
//!
//! One file per command; [`flags`] holds the flags several commands
//! share, [`batch`] what `backfill` and `pipeline backfill` share, and
//! [`exit`] maps an error to its exit code.

use serde_json::Value;

pub mod audit;
pub mod backfill;
pub mod batch;
pub mod build;
pub mod demo;
pub mod exec;
pub mod exit;
pub mod explain;
pub mod flags;
pub mod history;
pub mod inspect;
pub mod interrupt;
pub mod keygen;
pub mod log;
pub mod new;
pub mod pipeline;
pub mod publish;
pub mod run;
pub mod sample;
pub mod serve;
pub mod show;
pub mod verify;

/// Where results go: stdout, for people or as one JSON document.
#[derive(Debug, Clone, Copy)]
pub struct Out {
    /// `--json`.
    pub json: bool,
}

impl Out {
    /// Print `value` as JSON with `--json`, else call `human`.
    pub fn emit(self, value: Value, human: impl FnOnce()) {
        if self.json {
            print_json(&value);
        } else {
            human();
        }
    }
}

/// One JSON document and a newline on stdout.
pub fn print_json(v: &Value) {
    println!("{}", serde_json::to_string_pretty(v).unwrap_or_default());
}
