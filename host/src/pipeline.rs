//! Pipelines: an `idem.toml` chains stages. Each stage is one idempotent
//! run per logical date. The first reads a date partition of a Parquet
//! dataset; every later one reads the previous stage's Delta table pinned
//! at the version that holds what that stage committed for the same date,
//! and only that slice's rows (`SliceSpec::Delta { slice }`). The pinned
//! version and the slice are part of the run key, so a rerun whose
//! upstream did not move is a memo hit all the way down, and a changed
//! upstream slice reruns exactly the downstream slices of its date.
//!
//! The slice id is the same at every stage (`date=2026-10-01`): the first
//! stage's partition names it, and each later stage reads the rows that
//! slice owns upstream and owns them in turn.

mod file;
mod stages;
mod when;

use std::path::PathBuf;

use crate::backfill::SliceResult;
use crate::kind::Kind;
use crate::run::RunError;
use crate::table::Mode;

/// Why a pipeline file was refused.
#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    /// The file cannot be read.
    #[error("cannot read the pipeline file {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The error.
        source: std::io::Error,
    },
    /// A stage's params, mode or module was refused before anything ran.
    #[error("stage `{stage}`: {source}")]
    Stage {
        /// The stage.
        stage: String,
        /// Why.
        #[source]
        source: Box<RunError>,
    },
    /// The file is not a valid pipeline.
    #[error("{path}: {detail}")]
    Invalid {
        /// The file.
        path: String,
        /// What is wrong, and where.
        detail: String,
    },
}

impl PipelineError {
    /// The kind of the failure (and the CLI's exit code): a failed
    /// stage's own; anything else is the pipeline file's.
    pub fn kind(&self) -> Kind {
        match self {
            PipelineError::Stage { source, .. } => source.kind(),
            _ => Kind::Input,
        }
    }
}

/// Where a stage's rows come from.
#[derive(Debug, Clone)]
pub enum Source {
    /// A date partition `column=DATE` (or an hour, `date=D/hour=HH`) of a
    /// dataset.
    Dataset {
        /// The dataset root.
        root: String,
        /// The partition columns: the date's, and the hour's for hourly
        /// slices.
        columns: Vec<String>,
    },
    /// The stage at this index: its table, at the version that holds the
    /// same slice.
    Stage(usize),
}

/// A side input of a stage (`from = ["silver", "NAME"]`).
#[derive(Debug, Clone)]
pub enum Side {
    /// The stage at this index: its table read whole, at the version it
    /// holds when this stage runs (the one its run of the slice made, in
    /// the same pipeline run).
    Stage(usize),
    /// A table from `[sides]`.
    Table(crate::run::SideSpec),
}

/// A checked stage.
#[derive(Debug, Clone)]
pub struct Stage {
    /// Its name.
    pub name: String,
    /// The module.
    pub module: PathBuf,
    /// The target table (path or URL).
    pub table: String,
    /// Its input.
    pub source: Source,
    /// How it commits (overwrite-partition's value is empty here: each
    /// date's run overwrites its date).
    mode: Mode,
    params: String,
    batch_rows: u32,
    expect: Vec<crate::expect::Expectation>,
    audit: Option<(PathBuf, String)>,
    /// How a first stage reads CSV, TSV or JSON-lines inputs.
    text: crate::slice::TextOptions,
    /// Write-audit-publish on an Iceberg branch ([`crate::run::Run::wap`]).
    wap: Option<Option<String>>,
    /// What output columns its table lacks do ([`crate::run::Run::on_schema_change`]).
    schema_change: crate::table::SchemaChange,
    /// A later stage of an hourly pipeline run once per day (`every =
    /// "1d"`): its slice is the date, and it reads every hour of the date
    /// its upstream committed.
    pub daily: bool,
    /// Its side inputs, read whole beside its slice.
    pub sides: Vec<Side>,
}

/// A checked pipeline file.
#[derive(Debug, Clone)]
pub struct Pipeline {
    /// `[pipeline] name`, or the file's stem.
    pub name: String,
    /// The stages, in run order.
    pub stages: Vec<Stage>,
    /// The slice columns (the first stage's partition): the date's, and
    /// the hour's when the pipeline's slices are hours.
    pub columns: Vec<String>,
    /// The key every stage's manifests are signed with (`--sign-key`).
    pub signer: Option<std::sync::Arc<crate::attest::SigningKey>>,
    /// Where every stage's runs send their OpenLineage events
    /// (`--lineage`), as children of one run of the pipeline.
    pub lineage: Option<std::sync::Arc<crate::lineage::Lineage>>,
    /// The pipeline's run, every stage run's parent.
    pub lineage_parent: Option<crate::lineage::Parent>,
    /// The `[sides]` tables pinned (hashed) so far, each once, on first
    /// use: every date of this pipeline's run reads the same files.
    pinned_sides: std::sync::Arc<
        std::sync::Mutex<std::collections::BTreeMap<String, crate::run::PinnedSides>>,
    >,
}

impl Pipeline {
    /// Send the stages' OpenLineage events to `lineage`, as children of
    /// one run of this pipeline.
    pub fn emit_to(&mut self, lineage: Option<std::sync::Arc<crate::lineage::Lineage>>) {
        self.lineage_parent = lineage
            .as_ref()
            .map(|l| l.parent(&format!("pipeline {}", self.name)));
        self.lineage = lineage;
    }
}

/// How one stage of one date ended.
#[derive(Debug, Clone)]
pub struct StageRun {
    /// The stage.
    pub stage: String,
    /// Its slice id (`date=D/hour=HH`, or `date=D` for a daily stage).
    pub slice: String,
    /// The upstream table and the version pinned (later stages).
    pub input: Option<(String, u64)>,
    /// The outcome (`NotStarted`: an earlier stage of the date failed).
    pub result: SliceResult,
    /// The version that holds the stage's output for the date.
    pub version: Option<u64>,
}

impl Pipeline {
    /// The stage called `name`.
    pub fn stage(&self, name: &str) -> Option<usize> {
        self.stages.iter().position(|s| s.name == name)
    }

    /// The stage called `name`, or why there is none (naming the stages
    /// there are).
    pub fn stage_named(&self, name: &str) -> Result<usize, String> {
        self.stage(name).ok_or_else(|| {
            let names: Vec<&str> = self.stages.iter().map(|s| s.name.as_str()).collect();
            format!(
                "the pipeline has no stage `{name}`: its stages are {}",
                names.join(", ")
            )
        })
    }

    /// The slice id of `when`: `date=D`, or `date=D/hour=HH` for an hour
    /// `DTHH` (every stage's but a daily one's, [`Pipeline::slice_of`]).
    pub fn slice_id(&self, when: &str) -> String {
        self.partition_of(when).to_string()
    }

    /// Stage `i`'s slice of `when`: the hour's, or for a daily stage its
    /// date's.
    pub fn slice_of(&self, i: usize, when: &str) -> crate::slice::Partition {
        self.partition_of(&self.when_at(i, when))
    }

    /// What `when` is at stage `i`: itself, or a daily stage's date.
    pub fn when_at(&self, i: usize, when: &str) -> String {
        match self.stages[i].daily {
            true => when.split('T').next().unwrap_or(when).to_string(),
            false => when.to_string(),
        }
    }

    /// Whether stage `i` reads every hour of its date upstream (a daily
    /// stage after an hourly one).
    fn reads_hours(&self, i: usize) -> bool {
        match self.stages[i].source {
            Source::Stage(j) => self.stages[i].daily && !self.stages[j].daily,
            Source::Dataset { .. } => false,
        }
    }

    /// The partition of `when` in the slice columns.
    pub fn partition_of(&self, when: &str) -> crate::slice::Partition {
        let values = match when.split_once('T') {
            Some((d, h)) => vec![d.to_string(), h.to_string()],
            None => vec![when.to_string()],
        };
        let levels = self.columns.iter().cloned().zip(values).collect();
        crate::slice::Partition::of(levels)
    }

    /// Whether the pipeline's slices are hours (`date/hour` partitions).
    pub fn hourly(&self) -> bool {
        self.columns.len() == 2
    }
}
