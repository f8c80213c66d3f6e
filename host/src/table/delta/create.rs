//! Creating the Delta table with a slice's first commit: version 0 holds
//! the schema, the partitioning and idem's mode property, no data.

use deltalake::kernel::engine::arrow_conversion::TryIntoKernel as _;
use deltalake::kernel::transaction::CommitProperties;
use deltalake::protocol::SaveMode;

use super::{Delta, MODE_PROPERTY, delta_err};
use crate::table::commit::CommitRequest;
use crate::table::datafile::{add_field, add_fields};
use crate::table::error::TableError;
use crate::table::mode::{self, Mode};

impl Delta {
    /// Create the table (version 0: schema and partitioning, no data) so the
    /// first slice commit is version 1. Losing a creation race is fine.
    pub(super) async fn create(&mut self, req: &CommitRequest<'_>) -> Result<(), TableError> {
        let schema = req.schema.clone().ok_or(TableError::NoSchema)?;
        let (schema, partitions) = match req.mode {
            Mode::OverwritePartition { partition } => {
                let columns = partition.columns();
                (add_fields(&schema, &columns), columns)
            }
            Mode::Merge { .. } => {
                if schema.field_with_name(mode::OWNER_COLUMN).is_ok() {
                    return Err(TableError::Output(format!(
                        "the output has a column named `{}`, which idem keeps for itself in merge tables (the slice owning each row): rename it",
                        mode::OWNER_COLUMN
                    )));
                }
                (add_field(&schema, mode::OWNER_COLUMN), vec![])
            }
            Mode::Append => (schema, vec![]),
        };
        let delta_schema: deltalake::kernel::StructType =
            schema.as_ref().try_into_kernel().map_err(|e| {
                TableError::Output(format!("output schema has no Delta equivalent: {e}"))
            })?;
        let created = self
            .delta
            .clone()
            .create()
            .with_columns(delta_schema.fields().cloned())
            .with_partition_columns(partitions)
            // The mode is fixed per table: modes own rows differently, so
            // mixing them would break every slice's ownership.
            // idem's proofs read each slice's current commit, so its log is
            // kept for ten years (checkpoints keep reads fast).
            .with_configuration([
                (MODE_PROPERTY, Some(req.mode.name())),
                ("delta.logRetentionDuration", Some("interval 3650 days")),
            ])
            .with_raise_if_key_not_exists(false)
            .with_save_mode(SaveMode::Ignore)
            // A lost creation race must fail, not retry as a second version.
            .with_commit_properties(CommitProperties::default().with_max_retries(0))
            .await;
        match created {
            Ok(t) => {
                self.delta = t;
                self.refresh().await
            }
            Err(e) => {
                // Lost a creation race (fine: the table exists now), or a
                // real failure (the table still does not exist).
                self.refresh().await?;
                if self.delta.version().is_none() {
                    return Err(delta_err("creating the table")(e));
                }
                tracing::info!("table creation raced with another writer ({e}); re-reading");
                Ok(())
            }
        }
    }
}
