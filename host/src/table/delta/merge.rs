//! A merge slice's commit: the staged output, with the owner column naming
//! the slice, MERGEd into the table on the slice's keys (see `sql::merge_into`);
//! a key another slice owns is refused first.

use std::collections::HashMap;

use arrow::array::RecordBatch;
use deltalake::datafusion::prelude::{DataFrame, ParquetReadOptions, SessionContext, lit};
use deltalake::kernel::transaction::{CommitBuilder, CommitProperties};
use deltalake::protocol::{DeltaOperation, SaveMode};

use super::commit::classify;
use super::{Delta, delta_err};
use crate::table::commit::{CommitRequest, Output, lost_response};
use crate::table::error::TableError;
use crate::table::mode;

impl Delta {
    /// MERGE the slice's output on `keys`, committing with `props`; the
    /// new version.
    pub(super) async fn merge(
        &mut self,
        req: &CommitRequest<'_>,
        keys: &[String],
        props: CommitProperties,
    ) -> Result<u64, TableError> {
        let ctx = merge_session()?;
        let source = self
            .source(req, &ctx)
            .await?
            .with_column(mode::OWNER_COLUMN, lit(req.slice))
            .map_err(|e| TableError::Output(e.to_string()))?;
        self.check_keys_free(&ctx, &source, keys, req.slice).await?;
        let before = self.delta.version();
        self.log_written = true;
        let table =
            super::sql::merge_into(self.delta.clone(), source, keys, req.slice, props.clone())
                .await?;
        self.delta = table;
        let version = match self.delta.state.clone() {
            Some(state) if Some(state.version()) != before => {
                // The MERGE's post-commit state, unless it missed a
                // checkpoint (see `post_commit`).
                let version = state.version();
                self.committed(state, version).await?;
                version
            }
            _ => self.commit_no_rows(props).await?,
        };
        lost_response()?;
        Ok(version)
    }

    /// A key belongs to one slice: refuse keys another slice committed.
    async fn check_keys_free(
        &self,
        ctx: &SessionContext,
        source: &DataFrame,
        keys: &[String],
        slice: &str,
    ) -> Result<(), TableError> {
        self.delta
            .update_datafusion_session(&ctx.state())
            .map_err(delta_err("reading the table"))?;
        let provider = self
            .delta
            .table_provider()
            .await
            .map_err(|e| TableError::Delta {
                what: "reading the table".into(),
                detail: e.to_string(),
            })?;
        if let Some((owner, example)) =
            super::sql::stolen_key(ctx, provider, source.clone(), keys, slice).await?
        {
            return Err(TableError::KeyOwned {
                keys: keys.join(", "),
                example,
                owner,
                slice: slice.to_string(),
            });
        }
        Ok(())
    }

    /// The MERGE changed no row (an empty output of a slice that
    /// holds none, or rows the table holds already): delta-rs then
    /// commits nothing. The slice's commit (sequence number, output
    /// digest) must still be recorded: a commit of no data actions.
    async fn commit_no_rows(&mut self, props: CommitProperties) -> Result<u64, TableError> {
        let snapshot = self
            .delta
            .snapshot()
            .map_err(delta_err("reading the snapshot"))?;
        let operation = DeltaOperation::Write {
            mode: SaveMode::Append,
            partition_by: None,
            predicate: None,
        };
        let done = CommitBuilder::from(props)
            .with_actions(Vec::new())
            .build(Some(snapshot), self.delta.log_store(), operation)
            .await
            .map_err(classify)?;
        self.committed(done.snapshot, done.version).await?;
        Ok(done.version)
    }

    /// The output as a DataFusion plan for MERGE: the staged Parquet files,
    /// streamed (never collected).
    async fn source(
        &self,
        req: &CommitRequest<'_>,
        ctx: &SessionContext,
    ) -> Result<DataFrame, TableError> {
        let df_err =
            |e: deltalake::datafusion::error::DataFusionError| TableError::Output(e.to_string());
        let staged = match &req.output {
            Output::Staged(paths) => paths.as_slice(),
            Output::Written(_) => {
                return Err(TableError::Output(
                    "a merge needs its output staged, not written ahead".into(),
                ));
            }
        };
        if staged.is_empty() {
            let schema = match req.schema.clone() {
                Some(s) => s,
                None => self.arrow_schema()?,
            };
            return ctx
                .read_batches(vec![RecordBatch::new_empty(schema)])
                .map_err(df_err);
        }
        let paths: Vec<String> = staged.iter().map(|p| p.display().to_string()).collect();
        // Read back with the schema it was written with (DataFusion would
        // otherwise turn strings into view types).
        let mut opts = ParquetReadOptions::default();
        if let Some(schema) = req.schema.as_deref() {
            opts = opts.schema(schema);
        }
        ctx.read_parquet(paths, opts).await.map_err(df_err)
    }
}

/// The DataFusion session a MERGE runs in (with one target partition).
fn merge_session() -> Result<SessionContext, TableError> {
    let overrides = HashMap::from([(
        "datafusion.execution.target_partitions".to_string(),
        "1".to_string(),
    )]);
    Ok(
        deltalake::delta_datafusion::DeltaSessionContext::new_with_session_overrides(&overrides)
            .map_err(delta_err("configuring the write session"))?
            .into_inner(),
    )
}
