//! Step 2, plan: the run's arguments checked, its inputs resolved and
//! pinned, its module (and audit module) identified once and carried
//! forward, and its run spec and run key computed. Reads only.

use std::time::Instant;

use super::resolve::{check_not_inside, resolve};
use super::{Run, RunError, SliceSpec, Timings, ms};
use crate::digest::Digest;
use crate::manifest::{AuditRecord, FORMAT, RunSpec, SliceRecord, TargetRecord};
use crate::sandbox::{ModuleId, Sandbox};
use crate::slice::ResolvedSlice;
use crate::table::{Mode, Progress, SchemaChange, Table};

/// A run resolved but not executed: inputs pinned, module identified, run
/// key computed.
pub(super) struct Planned {
    pub(super) slice: ResolvedSlice,
    /// The side inputs, pinned, in name order.
    pub(super) sides: Vec<super::SideInput>,
    pub(super) module: ModuleId,
    /// The audit module and its params (write-audit-publish).
    pub(super) audit: Option<(ModuleId, serde_json::Value)>,
    /// For a `--next` slice: the position its commit records.
    pub(super) progress: Option<Progress>,
    pub(super) mode: Mode,
    /// What the output's new columns do at the table.
    pub(super) schema_change: SchemaChange,
    pub(super) spec: RunSpec,
    pub(super) run_key: Digest,
    pub(super) timings: Timings,
}

impl Run {
    fn resolve_mode(&self) -> Result<Mode, RunError> {
        let partition = match &self.slice {
            SliceSpec::Partition { partition, .. } => Some(partition.clone()),
            SliceSpec::Delta { partition, .. } => partition.clone(),
            SliceSpec::Files { .. } => None,
            // A range of an append-only source appends (slice-owned rows).
            SliceSpec::Next { .. } if self.mode.is_none() => return Ok(Mode::Append),
            SliceSpec::Next { .. } => None,
        };
        match (&self.mode, partition) {
            (Some(Mode::OverwritePartition { partition }), _) if !partition.is_empty() => {
                Ok(Mode::OverwritePartition { partition: partition.clone() })
            }
            (Some(Mode::OverwritePartition { .. }) | None, Some(partition)) => {
                Ok(Mode::OverwritePartition { partition })
            }
            (Some(Mode::OverwritePartition { .. }) | None, None) => Err(RunError::Usage(
                "overwrite-partition needs a partition: give --partition column=value, or choose --mode append or --mode merge --key COL".into(),
            )),
            (Some(Mode::Merge { keys }), _) if keys.is_empty() => {
                Err(RunError::Usage("--mode merge needs --key COL[,COL]".into()))
            }
            (Some(m), _) => Ok(m.clone()),
        }
    }

    /// The params and the mode, checked before anything is read or written.
    pub(super) fn check_args(&self) -> Result<(serde_json::Value, Mode), RunError> {
        if !(1..=super::MAX_BATCH_ROWS).contains(&self.batch_rows) {
            return Err(RunError::Usage(format!(
                "--batch-rows must be from 1 to {} (the reader reserves a batch's buffers up front)",
                super::MAX_BATCH_ROWS
            )));
        }
        if let Some(o) = &self.origin
            && o.len() > super::record::MAX_ORIGIN
        {
            return Err(RunError::Usage(format!(
                "the origin label is {} bytes, over {}: give a shorter one (it names who ran the run, e.g. a task attempt)",
                o.len(),
                super::record::MAX_ORIGIN
            )));
        }
        let params = crate::schedule::parse_params(&self.params).map_err(RunError::Usage)?;
        if let Some(d) = &self.logical_date {
            crate::schedule::check_logical_date(d).map_err(RunError::Usage)?;
        }
        crate::manifest::check_params_text(&self.params, &params)?;
        Ok((params, self.resolve_mode()?))
    }

    /// What can be checked once for many runs of the same flags (a
    /// backfill): the params and mode, and that the module (and audit
    /// module) load, which also fills the compiled-code cache.
    pub fn preflight(&self, sandbox: &Sandbox) -> Result<(), RunError> {
        self.check_args()?;
        // A module stored beside the table (`sha256:<hex>`) is read and
        // checked by each run, which opens the table.
        if super::module_ref::stored(&self.module)?.is_none() {
            sandbox.load(&sandbox.read_module(&self.module)?)?;
        }
        if let Some((path, _)) = &self.audit
            && super::module_ref::stored(path)?.is_none()
        {
            sandbox.load(&sandbox.read_module(path)?)?;
        }
        Ok(())
    }

    /// Steps 1 and 2: pin and hash the inputs, identify the module, and
    /// compute the run key. Reads only; `table` is the target's URL,
    /// `opened` the table when it exists (a `--next` slice starts at its
    /// position).
    pub(super) fn plan(
        &self,
        rt: &tokio::runtime::Runtime,
        sandbox: &Sandbox,
        (table, opened): (&url::Url, Option<&Table>),
        params: serde_json::Value,
        mode: Mode,
    ) -> Result<Planned, RunError> {
        // 1. Resolve and pin the inputs.
        let t = Instant::now();
        let (slice, kind, progress) = match &self.slice {
            SliceSpec::Next {
                root,
                max_objects,
                max_bytes,
            } => {
                let (slice, progress) =
                    super::next::resolve_next(rt, opened, root, *max_objects, *max_bytes)?;
                (slice, "next", Some(progress))
            }
            spec => {
                let (slice, kind) = resolve(rt, spec)?;
                (slice, kind, None)
            }
        };
        // Text inputs: their schema declared, or inferred from their bytes.
        let slice = slice.with_text(&self.text)?;
        check_not_inside(table, &slice, kind)?;
        let (sides, records) = super::side::planned(
            rt,
            (&self.sides, &self.pinned_sides),
            table,
            &sandbox.config().limits,
        )?;
        let mut timings = Timings {
            resolve_ms: ms(t),
            ..Timings::default()
        };
        // 2. Identify the module (and the audit module).
        let t = Instant::now();
        let (module, audit) = self.identify(rt, sandbox, (table, opened))?;
        timings.load_ms = ms(t);
        let mut spec = self.spec(sandbox, table, &slice, kind, &module, &audit, params, &mode)?;
        spec.sides = records;
        let run_key = crate::manifest::run_key(&spec);
        Ok(Planned {
            slice,
            sides,
            module,
            audit,
            progress,
            mode,
            schema_change: self.schema_change,
            spec,
            run_key,
            timings,
        })
    }

    /// The module and the audit module with its params, read (size-checked
    /// first: a module is untrusted input) and identified (digest,
    /// imports): a memo hit never loads compiled code; the execution does,
    /// from what this returns.
    #[allow(clippy::type_complexity)]
    fn identify(
        &self,
        rt: &tokio::runtime::Runtime,
        sandbox: &Sandbox,
        table: (&url::Url, Option<&Table>),
    ) -> Result<(ModuleId, Option<(ModuleId, serde_json::Value)>), RunError> {
        let module = super::module_ref::identify(rt, sandbox, &self.module, table)?;
        let audit = match &self.audit {
            None => None,
            Some((path, text)) => {
                let params: serde_json::Value = serde_json::from_str(text).map_err(|e| {
                    RunError::Usage(format!("--audit-params is not valid JSON ({e}): {text}"))
                })?;
                // The text as given: a too-long integer is only visible there.
                crate::manifest::check_params_text(text, &params)?;
                Some((
                    super::module_ref::identify(rt, sandbox, path, table)?,
                    params,
                ))
            }
        };
        Ok((module, audit))
    }

    /// The run spec: everything the run key hashes.
    #[allow(clippy::too_many_arguments)]
    fn spec(
        &self,
        sandbox: &Sandbox,
        table: &url::Url,
        slice: &ResolvedSlice,
        kind: &str,
        module: &ModuleId,
        audit: &Option<(ModuleId, serde_json::Value)>,
        params: serde_json::Value,
        mode: &Mode,
    ) -> Result<RunSpec, RunError> {
        let (partition, keys) = match mode {
            Mode::OverwritePartition { partition } => (Some(partition.clone()), vec![]),
            Mode::Merge { keys } => (None, keys.clone()),
            Mode::Append => (None, vec![]),
        };
        let (delta_version, delta_slice) = match &self.slice {
            SliceSpec::Delta { version, slice, .. } => (Some(*version), slice.clone()),
            _ => (None, None),
        };
        Ok(RunSpec {
            format: FORMAT,
            module: module.digest.clone(),
            engine: sandbox.fingerprint().to_string(),
            slice: SliceRecord {
                id: slice.id.clone(),
                kind: kind.into(),
                root: slice.root.to_string(),
                inputs: slice.inputs.clone(),
                delta_version,
                delta_slice,
                text: slice.text.as_ref().map(crate::manifest::TextRecord::of),
            },
            sides: Vec::new(),
            params,
            logical_date: self.logical_date.clone(),
            batch_rows: self.batch_rows,
            target: TargetRecord {
                table: crate::table::target_name(&self.table, table)?,
                mode: mode.name().into(),
                partition,
                keys,
                on_schema_change: (!self.schema_change.is_default())
                    .then(|| self.schema_change.name().into()),
            },
            // Sorted and deduplicated: the order of --expect flags does
            // not change the run key.
            expectations: {
                let mut e: Vec<String> = self.expectations.iter().map(|e| e.to_string()).collect();
                e.sort();
                e.dedup();
                e
            },
            audit: audit.as_ref().map(|(m, params)| AuditRecord {
                module: m.digest.clone(),
                params: params.clone(),
            }),
        })
    }
}
