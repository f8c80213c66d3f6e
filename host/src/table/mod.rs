//! Delta Lake commits: one commit per new slice output, carrying run key,
//! manifest digest and output digest in its commitInfo and app transactions
//! that make two hosts committing the same slice conflict. Nothing outside
//! this module names a deltalake type.
//!
//! Slice state lives in the Delta log itself, as app transactions (they
//! survive checkpoints and log cleanup):
//! - `idem:slice:<slice>` -> `seq`, bumped by every commit of the slice;
//! - `idem:out:<slice>:<output digest>` -> the `seq` that committed it.
//!
//! The slice's current output is digest D exactly when
//! `txn(idem:out:<slice>:D) == txn(idem:slice:<slice>)`.

mod error;
mod mode;
mod sidecar;

use std::collections::HashMap;
use std::num::NonZeroU64;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use deltalake::datafusion::prelude::{DataFrame, ParquetReadOptions, SessionContext, lit};
use deltalake::kernel::Transaction;
use deltalake::kernel::engine::arrow_conversion::TryIntoKernel as _;
use deltalake::kernel::transaction::CommitProperties;
use deltalake::protocol::SaveMode;
use deltalake::{DeltaTable, DeltaTableError};
use futures::TryStreamExt;
use url::Url;

pub use error::TableError;
pub use mode::{KeyChecker, Mode};

use crate::digest::Digest;

/// Data file size idem asks delta-rs for (it buffers one file per
/// partition in memory before uploading it).
const TARGET_FILE_BYTES: u64 = 32 << 20;
/// Rows per Parquet row group in data files.
const ROW_GROUP_ROWS: usize = 128 * 1024;

fn writer_properties() -> deltalake::parquet::file::properties::WriterProperties {
    deltalake::parquet::file::properties::WriterProperties::builder()
        .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
        .set_compression(deltalake::parquet::basic::Compression::SNAPPY)
        .build()
}

/// How many times a commit is re-planned after losing a race.
const MAX_ATTEMPTS: usize = 5;

/// A Delta table that idem commits to (it may not exist yet).
pub struct Table {
    url: Url,
    delta: DeltaTable,
}

/// What a commit did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommitOutcome {
    /// A new table version holds this output.
    Committed {
        /// The new version.
        version: u64,
    },
    /// The slice already holds this output digest; nothing was written.
    Unchanged {
        /// The version that committed it (when known).
        since: Option<u64>,
    },
}

/// Everything one commit writes.
pub struct CommitRequest<'a> {
    /// The slice this output belongs to.
    pub slice: &'a str,
    /// How the output replaces or joins existing rows.
    pub mode: &'a Mode,
    /// Logical digest of `batches`.
    pub output_digest: &'a Digest,
    /// The run that produced it.
    pub run_key: &'a Digest,
    /// Its manifest (stored under `_idem/manifests/`).
    pub manifest_digest: &'a Digest,
    /// The output rows, staged as Parquet files on local disk (read back
    /// streaming by the commit). Empty when the transform emitted no rows.
    pub staged: Vec<PathBuf>,
    /// Output schema (creates the table; needed when there are no rows).
    pub schema: Option<SchemaRef>,
}

/// Turn a user's table location (path or URL) into a URL.
pub fn table_url(location: &str) -> Result<Url, TableError> {
    if location.contains("://") {
        return Url::parse(location).map_err(|e| TableError::Location {
            location: location.into(),
            detail: e.to_string(),
        });
    }
    let path = Path::new(location);
    std::fs::create_dir_all(path).map_err(|e| TableError::Location {
        location: location.into(),
        detail: format!("cannot create the directory: {e}"),
    })?;
    let abs = std::fs::canonicalize(path).map_err(|e| TableError::Location {
        location: location.into(),
        detail: e.to_string(),
    })?;
    Url::from_directory_path(&abs).map_err(|_| TableError::Location {
        location: location.into(),
        detail: "not an absolute directory path".into(),
    })
}

fn delta_err(what: &str) -> impl Fn(DeltaTableError) -> TableError + '_ {
    move |e| TableError::Delta {
        what: what.to_string(),
        detail: e.to_string(),
    }
}

impl Table {
    /// Open the table at `location`, which need not exist yet: the first
    /// commit creates it. A location that cannot be reached is an error.
    pub async fn open(location: &str) -> Result<Self, TableError> {
        let url = table_url(location)?;
        if url.scheme() == "file" {
            let dir = url.to_file_path().map_err(|_| TableError::Location {
                location: location.into(),
                detail: "bad file URL".into(),
            })?;
            std::fs::create_dir_all(&dir).map_err(|e| TableError::Location {
                location: location.into(),
                detail: format!("cannot create {}: {e}", dir.display()),
            })?;
        }
        let delta =
            DeltaTable::try_from_url(url.clone())
                .await
                .map_err(|e| TableError::Location {
                    location: location.into(),
                    detail: e.to_string(),
                })?;
        Ok(Table { url, delta })
    }

    /// The table's URL.
    pub fn url(&self) -> &Url {
        &self.url
    }

    /// The current version, `None` before the first commit.
    pub fn version(&self) -> Option<u64> {
        self.delta.version()
    }

    /// Re-read the log.
    pub async fn refresh(&mut self) -> Result<(), TableError> {
        if self.delta.version().is_some() {
            self.delta
                .update_state()
                .await
                .map_err(delta_err("refreshing the table"))?;
        } else {
            match self.delta.load().await {
                Ok(()) | Err(DeltaTableError::NotATable(_)) => {}
                Err(e) => return Err(delta_err("loading the table")(e)),
            }
        }
        Ok(())
    }

    async fn txn(&self, app_id: &str) -> Result<Option<i64>, TableError> {
        let Ok(state) = self.delta.snapshot() else {
            return Ok(None);
        };
        state
            .transaction_version(self.delta.log_store().as_ref(), app_id)
            .await
            .map_err(delta_err("reading app transactions"))
    }

    /// The slice's commit sequence number (0 = never committed).
    pub async fn slice_seq(&self, slice: &str) -> Result<i64, TableError> {
        Ok(self.txn(&slice_app(slice)).await?.unwrap_or(0))
    }

    /// Whether `digest` is the slice's current committed output.
    pub async fn is_current(&self, slice: &str, digest: &Digest) -> Result<bool, TableError> {
        let seq = self.slice_seq(slice).await?;
        self.holds(slice, digest, seq).await
    }

    /// Whether the slice at sequence `seq` holds `digest`.
    async fn holds(&self, slice: &str, digest: &Digest, seq: i64) -> Result<bool, TableError> {
        Ok(seq > 0 && self.txn(&out_app(slice, digest)).await? == Some(seq))
    }

    /// The table version that made the slice's current output current.
    pub async fn version_of_current(&self, slice: &str) -> Result<Option<u64>, TableError> {
        let seq = self.slice_seq(slice).await?;
        if seq == 0 {
            return Ok(None);
        }
        let history = self.idem_history().await?;
        Ok(history.into_iter().find_map(|(version, info)| {
            let mine = info.get("idem.slice").and_then(|v| v.as_str()) == Some(slice)
                && info.get("idem.seq").and_then(|v| v.as_i64()) == Some(seq);
            mine.then_some(version)
        }))
    }

    /// Commit `req` unless the slice already holds its output digest. Races
    /// with other hosts are resolved by re-reading: the loser of a race with
    /// the same output finds it committed and reports `Unchanged`.
    pub async fn commit(&mut self, req: CommitRequest<'_>) -> Result<CommitOutcome, TableError> {
        let mut last_conflict = String::new();
        for _ in 0..MAX_ATTEMPTS {
            self.refresh().await?;
            let seq = self.slice_seq(req.slice).await?;
            if self.holds(req.slice, req.output_digest, seq).await? {
                return Ok(CommitOutcome::Unchanged {
                    since: self.version_of_current(req.slice).await?,
                });
            }
            if self.delta.version().is_none() {
                self.create(&req).await?;
                continue;
            }
            let seq = seq + 1;
            let props = CommitProperties::default()
                .with_metadata([
                    ("idem.slice".to_string(), req.slice.into()),
                    ("idem.seq".to_string(), seq.into()),
                    ("idem.runKey".to_string(), req.run_key.as_str().into()),
                    (
                        "idem.manifestDigest".to_string(),
                        req.manifest_digest.as_str().into(),
                    ),
                    (
                        "idem.outputDigest".to_string(),
                        req.output_digest.as_str().into(),
                    ),
                    ("idem.mode".to_string(), req.mode.name().into()),
                ])
                .with_application_transactions(vec![
                    Transaction::new(slice_app(req.slice), seq),
                    Transaction::new(out_app(req.slice, req.output_digest), seq),
                ]);
            match self.write(&req, props).await {
                Ok(table) => {
                    self.delta = table;
                    let version = self.delta.version().ok_or_else(|| TableError::Delta {
                        what: "committing".into(),
                        detail: "no version after commit".into(),
                    })?;
                    return Ok(CommitOutcome::Committed { version });
                }
                Err(TableError::Conflict(detail)) => {
                    tracing::info!(
                        "commit of slice {} lost a race ({detail}); re-reading",
                        req.slice
                    );
                    last_conflict = detail;
                }
                Err(e) => return Err(e),
            }
        }
        Err(TableError::Conflict(format!(
            "gave up after {MAX_ATTEMPTS} attempts; other writers keep committing slice {} ({last_conflict})",
            req.slice
        )))
    }

    /// Create the table (version 0: schema and partitioning, no data) so the
    /// first slice commit is version 1. Losing a creation race is fine.
    async fn create(&mut self, req: &CommitRequest<'_>) -> Result<(), TableError> {
        let schema = req.schema.clone().ok_or(TableError::NoSchema)?;
        let (schema, partitions) = match req.mode {
            Mode::OverwritePartition { column, .. } => {
                (add_field(&schema, column), vec![column.clone()])
            }
            _ => (schema, vec![]),
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
            .with_save_mode(SaveMode::Ignore)
            // A lost creation race must fail, not retry as a second version.
            .with_commit_properties(CommitProperties::default().with_max_retries(0))
            .await;
        match created {
            Ok(t) => self.delta = t,
            Err(e) => tracing::info!("table creation raced with another writer ({e}); re-reading"),
        }
        self.refresh().await
    }

    /// The output as a DataFusion plan: the staged Parquet files, streamed
    /// (never collected), plus the partition column when the output lacks it.
    async fn source(
        &self,
        req: &CommitRequest<'_>,
        ctx: &SessionContext,
    ) -> Result<DataFrame, TableError> {
        let df_err =
            |e: deltalake::datafusion::error::DataFusionError| TableError::Output(e.to_string());
        let df = if req.staged.is_empty() {
            let schema = req.schema.clone().ok_or(TableError::NoSchema)?;
            ctx.read_batches(vec![RecordBatch::new_empty(schema)])
                .map_err(df_err)?
        } else {
            let paths: Vec<String> = req.staged.iter().map(|p| p.display().to_string()).collect();
            // Read back with the schema it was written with (DataFusion would
            // otherwise turn strings into view types).
            let mut opts = ParquetReadOptions::default();
            if let Some(schema) = req.schema.as_deref() {
                opts = opts.schema(schema);
            }
            ctx.read_parquet(paths, opts).await.map_err(df_err)?
        };
        match req.mode {
            Mode::OverwritePartition { column, value }
                if df.schema().field_with_unqualified_name(column).is_err() =>
            {
                df.with_column(column, lit(value.as_str())).map_err(df_err)
            }
            _ => Ok(df),
        }
    }

    async fn write(
        &self,
        req: &CommitRequest<'_>,
        props: CommitProperties,
    ) -> Result<DeltaTable, TableError> {
        // Delta's session: its planner knows the write's own plan nodes. One
        // input stream: the output is one slice, and hash-repartitioning it
        // by its single partition value buffers without bound in DataFusion.
        let overrides = HashMap::from([(
            "datafusion.execution.target_partitions".to_string(),
            "1".to_string(),
        )]);
        let ctx = deltalake::delta_datafusion::DeltaSessionContext::new_with_session_overrides(
            &overrides,
        )
        .map_err(delta_err("configuring the write session"))?
        .into_inner();
        let source = self.source(req, &ctx).await?;
        let table = self.delta.clone();
        if let Mode::Merge { keys } = req.mode {
            return mode::merge(table, source, keys, props).await;
        }
        let plan = source.into_unoptimized_plan();
        let write = table
            .write(Vec::<RecordBatch>::new())
            .with_input_plan(plan)
            .with_session_state(Arc::new(ctx.state()))
            // delta-rs buffers a whole data file in memory before upload:
            // smaller files and row groups keep a run's memory O(batch).
            .with_target_file_size(NonZeroU64::new(TARGET_FILE_BYTES))
            .with_writer_properties(writer_properties())
            .with_commit_properties(props);
        let result = match req.mode {
            Mode::OverwritePartition { column, value } => {
                write
                    .with_partition_columns([column.clone()])
                    .with_save_mode(SaveMode::Overwrite)
                    .with_replace_where(mode::equals(column, value))
                    .await
            }
            _ => write.with_save_mode(SaveMode::Append).await,
        };
        result.map_err(classify)
    }

    /// Store bytes under the table's `_idem/` folder (atomically).
    pub async fn put_sidecar(&self, rel: &str, bytes: Vec<u8>) -> Result<(), TableError> {
        sidecar::put(&self.delta, rel, bytes).await
    }

    /// Read bytes from the table's `_idem/` folder, `None` if absent.
    pub async fn get_sidecar(&self, rel: &str) -> Result<Option<Vec<u8>>, TableError> {
        sidecar::get(&self.delta, rel).await
    }

    /// Names of the files under `_idem/<prefix>/`.
    pub async fn list_sidecar(&self, prefix: &str) -> Result<Vec<String>, TableError> {
        sidecar::list(&self.delta, prefix).await
    }

    /// File URIs of the table at its loaded version, optionally limited to a
    /// partition `column = value`.
    pub async fn file_uris(
        &self,
        partition: Option<(&str, &str)>,
    ) -> Result<Vec<String>, TableError> {
        let uris: Vec<String> = match partition {
            None => self
                .delta
                .get_file_uris()
                .map_err(delta_err("listing files"))?
                .collect(),
            Some((k, v)) => {
                let filter = (
                    k,
                    deltalake::FilterOp::Eq,
                    deltalake::FilterValue::Scalar(v),
                );
                self.delta
                    .get_file_uris_by_partitions(&[filter])
                    .await
                    .map_err(delta_err("listing files"))?
            }
        };
        Ok(uris)
    }

    /// Load a given version (for pinned Delta inputs).
    pub async fn load_version(&mut self, version: u64) -> Result<(), TableError> {
        self.delta
            .load_version(version)
            .await
            .map_err(|e| TableError::Delta {
                what: format!("loading version {version}"),
                detail: e.to_string(),
            })
    }

    /// Commit metadata of the log, newest first: (version, idem keys).
    pub async fn idem_history(
        &self,
    ) -> Result<Vec<(u64, HashMap<String, serde_json::Value>)>, TableError> {
        let Some(latest) = self.delta.version() else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        let mut history = self.delta.history(None);
        let mut i = 0u64;
        while let Some(info) = history
            .try_next()
            .await
            .map_err(delta_err("reading the history"))?
        {
            let idem: HashMap<String, serde_json::Value> = info
                .info
                .into_iter()
                .filter(|(k, _)| k.starts_with("idem."))
                .collect();
            out.push((latest - i, idem));
            i += 1;
        }
        Ok(out)
    }
}

fn slice_app(slice: &str) -> String {
    format!("idem:slice:{slice}")
}

fn out_app(slice: &str, digest: &Digest) -> String {
    format!("idem:out:{slice}:{}", digest.hex())
}

fn add_field(s: &SchemaRef, column: &str) -> SchemaRef {
    if s.field_with_name(column).is_ok() {
        return s.clone();
    }
    let mut fields: Vec<Field> = s.fields().iter().map(|f| f.as_ref().clone()).collect();
    fields.push(Field::new(column, DataType::Utf8, false));
    Arc::new(Schema::new(fields))
}

/// Commit races are retried; everything else is an error.
fn classify(e: DeltaTableError) -> TableError {
    let text = e.to_string();
    let conflict = matches!(
        e,
        DeltaTableError::Transaction { .. } | DeltaTableError::VersionAlreadyExists(_)
    ) && (text.contains("onflict")
        || text.contains("oncurrent")
        || text.contains("already exists"));
    if conflict {
        TableError::Conflict(text)
    } else if text.contains("chema") {
        TableError::Output(format!(
            "the output's schema does not fit the table's ({text}). A changed transform needs a new table, or a schema migration of this one"
        ))
    } else {
        TableError::Delta {
            what: "committing".into(),
            detail: text,
        }
    }
}
