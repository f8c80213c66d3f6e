//! What must hold before a slice's commit is planned: a tracked source
//! has not moved since the run started, the table takes the run's mode and
//! partitioning, and the output (and any files written ahead) still fit
//! the table's schema.

use arrow::datatypes::{Field, Schema, SchemaRef};

use super::{Delta, MODE_PROPERTY, delta_err};
use crate::table::commit::CommitRequest;
use crate::table::datafile::{check_types, data_columns};
use crate::table::error::TableError;
use crate::table::mode::Mode;

impl Delta {
    /// The source's position must still be where this run started:
    /// another run that consumed from it meanwhile makes this range
    /// stale (it may overlap what that run committed).
    pub(super) async fn check_progress(&self, req: &CommitRequest<'_>) -> Result<(), TableError> {
        if let Some(p) = &req.progress {
            let now = self
                .progress_of(&p.source)
                .await?
                .map(|q| (q.through, q.count));
            if now != p.after {
                return Err(TableError::ProgressMoved {
                    prefix: p.source.clone(),
                    expected: p.after.as_ref().map(|a| a.0.clone()),
                    found: now.map(|a| a.0),
                });
            }
        }
        Ok(())
    }

    /// The existing table takes the run's mode, partitioning and output;
    /// `files_schema`: the schema of files written ahead, if any. The
    /// columns the commit appends (`--on-schema-change`).
    pub(super) fn check_table(
        &self,
        req: &CommitRequest<'_>,
        files_schema: Option<&SchemaRef>,
    ) -> Result<Vec<Field>, TableError> {
        self.check_mode(req.mode)?;
        let added = match &req.schema {
            Some(schema) => check_types(
                &data_columns(schema, req.mode),
                self.arrow_schema()?.as_ref(),
                req.schema_change,
            )?,
            None => Vec::new(),
        };
        if !added.is_empty() && matches!(req.mode, Mode::Merge { .. }) {
            return Err(TableError::Output(format!(
                "--on-schema-change append-new-columns is not supported for Delta merge tables yet: the MERGE idem commits through (delta-rs 1.1) gives the table a new id when it adds columns, which readers such as Spark's streaming source take for another table. The output's new columns: {}. Add them with ALTER TABLE ... ADD COLUMNS (Spark), or write to a new table",
                crate::table::schema_change::names(&added)
            )));
        }
        // Files written while the run executed hold the schema the table
        // had then (or would get when created), with the columns this
        // commit appends: it must still be so (another writer may have
        // created or changed the table).
        if let Some(written_with) = files_schema {
            self.check_written(written_with, &added)?;
        }
        Ok(added)
    }

    /// Data files written while the run executed (with the schema the
    /// table had then, or would get when created) must still fit it: another
    /// writer may have created or changed the table meanwhile. Columns are
    /// matched by name (as readers match them); a column may be nullable in
    /// the table and not in the files, not the reverse. A table with column
    /// mapping names columns by physical name: files written without it
    /// would read as nulls.
    fn check_written(&self, files: &Schema, added: &[Field]) -> Result<(), TableError> {
        let snapshot = self
            .delta
            .snapshot()
            .map_err(delta_err("reading the snapshot"))?;
        if let Some(m) = super::evolve::mapping(snapshot.metadata()) {
            return Err(TableError::Output(format!(
                "the table uses column mapping (mode {m}), which idem does not write: use another table"
            )));
        }
        let table = match added {
            [] => self.arrow_schema()?,
            _ => super::evolve::evolved(&self.delta, added)?.1,
        };
        // Partition values live in the log, not in the files (and a slice's
        // is never null): their nullability does not matter.
        let partitions = snapshot.metadata().partition_columns().to_vec();
        let fits = files.fields().len() == table.fields().len()
            && files.fields().iter().all(|f| {
                table.field_with_name(f.name()).is_ok_and(|t| {
                    t.data_type() == f.data_type()
                        && (t.is_nullable() || !f.is_nullable() || partitions.contains(f.name()))
                })
            });
        if fits {
            return Ok(());
        }
        // A race with another writer: worth a retry (exit 4).
        Err(TableError::Conflict(format!(
            "the table's schema changed while this run wrote its output (written as [{}], the table now has [{}]): run it again",
            describe(files),
            describe(&table)
        )))
    }

    /// A table takes one commit mode, the one it was created with.
    pub(super) fn check_mode(&self, mode: &Mode) -> Result<(), TableError> {
        let snapshot = self
            .delta
            .snapshot()
            .map_err(delta_err("reading the snapshot"))?;
        let config = snapshot.metadata().configuration();
        if let Some(m) = config.get(MODE_PROPERTY)
            && m.as_str() != mode.name()
        {
            return Err(TableError::ModeMismatch {
                table: mode.name().to_string(),
                created: m.clone(),
            });
        }
        // The slice's partition must be the table's partitioning: otherwise
        // its files land in other slices' partitions and nothing owns them.
        let table_parts = snapshot.metadata().partition_columns().to_vec();
        let wanted: Vec<String> = match mode {
            Mode::OverwritePartition { partition } => partition.columns(),
            _ => Vec::new(),
        };
        if table_parts != wanted {
            return Err(TableError::Partitioning(format!(
                "the table is partitioned by [{}], but this run writes partition [{}]: give --partition with the table's partition column, or use another table",
                table_parts.join(", "),
                wanted.join(", ")
            )));
        }
        Ok(())
    }
}

/// A schema's columns and types, for messages.
fn describe(s: &Schema) -> String {
    s.fields()
        .iter()
        .map(|f| format!("{} {}", f.name(), f.data_type()))
        .collect::<Vec<_>>()
        .join(", ")
}
