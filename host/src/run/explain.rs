//! `idem explain`: a run planned but neither executed nor written, and
//! what it would do: a memo hit, or an execution, with the slice's current
//! committed run to compare it with ([`crate::explain::diff`]).

use super::record::{current_run, memo_hit};
use super::{Run, RunError};
use crate::digest::Digest;
use crate::manifest::{Manifest, RunSpec};
use crate::sandbox::Sandbox;
use crate::table::{Table, TableError};

/// What [`Run::explain`] found, without executing or writing anything.
#[derive(Debug, Clone)]
pub struct Explanation {
    /// The planned run.
    pub planned: RunSpec,
    /// Its run key.
    pub run_key: Digest,
    /// `Some(version)` when a committed run has this run key and its output
    /// is still current: `idem run` would be a memo hit.
    pub memo: Option<Option<u64>>,
    /// The slice's current committed run (version, manifest), if any.
    pub current: Option<(u64, Manifest)>,
}

impl Explanation {
    /// The run-spec fields that differ from the slice's current run (none
    /// without one).
    pub fn changes(&self) -> Vec<crate::explain::Change> {
        self.current
            .as_ref()
            .map(|(_, m)| crate::explain::diff(&m.spec, &self.planned))
            .unwrap_or_default()
    }

    /// The slice's current run has the planned run key.
    pub fn same_run_key(&self) -> bool {
        self.current
            .as_ref()
            .is_some_and(|(_, m)| m.run_key == self.run_key)
    }
}

impl Run {
    /// Plan the run without executing or writing anything, and say what it
    /// would do: a memo hit (a committed run has its run key and is still
    /// current), or an execution, with the slice's current committed run to
    /// compare it with ([`crate::explain::diff`]).
    pub fn explain(self, sandbox: &Sandbox) -> Result<Explanation, RunError> {
        let (params, mode) = self.check_args()?;
        let rt = super::runtime()?;
        let url = crate::table::table_url(&self.table)?;
        let table = match rt.block_on(Table::open_existing(&self.table)) {
            Ok(t) => Some(t),
            Err(TableError::NoTable { .. }) => None,
            Err(e) => return Err(e.into()),
        };
        let p = self.plan(rt, sandbox, (&url, table.as_ref()), params, mode)?;
        let (memo, current) = match &table {
            None => (None, None),
            Some(table) => rt.block_on(async {
                let hit = memo_hit(table, &p.run_key, &p.spec.slice.id, &p.mode).await?;
                let current = current_run(table, &p.spec.slice.id).await?;
                Ok::<_, RunError>((hit.map(|(_, _, since)| since), current))
            })?,
        };
        Ok(Explanation {
            run_key: p.run_key,
            planned: p.spec,
            memo,
            current,
        })
    }
}
