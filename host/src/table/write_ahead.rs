//! Writing a slice's output into the table's data files while the
//! transform runs ([`DataWriter`]; Delta overwrite-partition and append,
//! see `Table::writes_ahead`): nothing is visible until a commit names the
//! files ([`Written`], part of a [`super::commit::CommitRequest`]), and
//! whatever no commit takes is deleted again.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use arrow::array::RecordBatch;
use arrow::datatypes::{Schema, SchemaRef};
use deltalake::DeltaTable;
use deltalake::kernel::Add;
use deltalake::kernel::engine::arrow_conversion::{TryIntoArrow as _, TryIntoKernel as _};
use deltalake::writer::{DeltaWriter as _, RecordBatchWriter};
use object_store::ObjectStoreExt as _;
use tokio::sync::mpsc::Receiver;

use super::datafile::{
    add_fields, check_types, data_columns, typed_partition, with_nulls_for, with_partition,
    writer_properties,
};
use super::error::TableError;
use super::mode::Mode;
use super::schema_change::SchemaChange;

/// Batches the writer task may be behind the transform.
const DEPTH: usize = 4;
/// Rows handed to delta-rs at a time (between them the task checks whether
/// the open file reached its target size).
const SLICE_ROWS: usize = 8192;

/// A failure to write data files.
pub(super) fn write_err(e: impl std::fmt::Display) -> TableError {
    TableError::Delta {
        what: "writing data files".into(),
        detail: e.to_string(),
    }
}

/// Output batches written into new data files of the table while the
/// transform runs, on a task of the run's runtime (Parquet encoding and
/// upload overlap the guest). The files are invisible until a commit names
/// them; whatever is not handed to a commit is deleted again
/// ([`DataWriter::finish`] and [`Written`] clean up when dropped).
pub struct DataWriter {
    tx: Option<tokio::sync::mpsc::Sender<RecordBatch>>,
    task: Option<tokio::task::JoinHandle<Result<Written, TableError>>>,
    rt: tokio::runtime::Handle,
    /// Set by `finish`: the task keeps its files when the channel closes.
    keep: Arc<AtomicBool>,
}

/// Data files written for one output, not yet committed.
pub struct Written {
    pub(super) adds: Vec<Add>,
    /// The Arrow schema the files were written with (the table's).
    pub(super) schema: Option<SchemaRef>,
    delta: DeltaTable,
    rt: tokio::runtime::Handle,
}

impl Written {
    /// Hand the files to a commit (which deletes them if it does not
    /// commit them).
    pub(super) fn take(&mut self) -> (Vec<Add>, Option<SchemaRef>) {
        (std::mem::take(&mut self.adds), self.schema.take())
    }
}

impl Drop for Written {
    /// Files of a run that failed after its output was complete (an
    /// expectation, the time limit, a sidecar write): deleted. A run drops
    /// its output outside the runtime (it drives it with `block_on`), so
    /// the deletes finish before it returns.
    fn drop(&mut self) {
        if self.adds.is_empty() {
            return;
        }
        let adds = std::mem::take(&mut self.adds);
        let delta = self.delta.clone();
        let work = async move { discard(&delta, &adds).await };
        // Not inside the runtime (a run drives it with block_on): wait for
        // the deletes; inside it, let them finish in the background.
        if tokio::runtime::Handle::try_current().is_err() {
            self.rt.block_on(work);
        } else {
            self.rt.spawn(work);
        }
    }
}

impl DataWriter {
    /// Start writing into `delta` (which may not exist yet: the files are
    /// then written with the schema its creation will give it).
    pub(super) fn start(delta: DeltaTable, plan: Plan, rt: tokio::runtime::Handle) -> Self {
        let (tx, rx) = tokio::sync::mpsc::channel::<RecordBatch>(DEPTH);
        let keep = Arc::new(AtomicBool::new(false));
        let task = rt.spawn(write_task(rx, delta, plan, keep.clone(), rt.clone()));
        DataWriter {
            tx: Some(tx),
            task: Some(task),
            rt,
            keep,
        }
    }

    /// Queue a batch (blocks while the writer is behind). An error means
    /// the writer stopped: its reason comes out of [`DataWriter::finish`].
    /// A guest's batch may hold millions of rows that cost it nothing (a
    /// Null column); the writer adds a partition column per row, so it
    /// gets them in chunks of `CHUNK_ROWS` (zero-copy slices).
    pub fn send(&self, batch: &RecordBatch) -> Result<(), WriterStopped> {
        let Some(tx) = &self.tx else {
            return Err(WriterStopped);
        };
        let rows = batch.num_rows();
        if rows == 0 {
            return tx.blocking_send(batch.clone()).map_err(|_| WriterStopped);
        }
        for start in (0..rows).step_by(CHUNK_ROWS) {
            let chunk = batch.slice(start, CHUNK_ROWS.min(rows - start));
            tx.blocking_send(chunk).map_err(|_| WriterStopped)?;
        }
        Ok(())
    }

    /// The output is complete: wait for the writer and take its files.
    pub fn finish(mut self) -> Result<Written, TableError> {
        self.keep.store(true, Ordering::SeqCst);
        self.join()
    }

    fn join(&mut self) -> Result<Written, TableError> {
        drop(self.tx.take());
        let Some(task) = self.task.take() else {
            return Err(write_err("the data file writer was already joined"));
        };
        match self.rt.block_on(task) {
            Ok(r) => r,
            Err(e) => Err(write_err(format!("the data file writer failed: {e}"))),
        }
    }
}

impl Drop for DataWriter {
    /// An unfinished output (the run failed): stop the writer; it deletes
    /// what it wrote.
    fn drop(&mut self) {
        if self.task.is_some() && tokio::runtime::Handle::try_current().is_err() {
            let _ = self.join();
        }
    }
}

/// The writer task: writes every batch the run sends until the channel
/// closes, then completes the open file and hands every file over, or
/// deletes them all (a write failed, or the run let go without finishing:
/// `kept` was never set).
async fn write_task(
    mut rx: Receiver<RecordBatch>,
    delta: DeltaTable,
    plan: Plan,
    kept: Arc<AtomicBool>,
    rt: tokio::runtime::Handle,
) -> Result<Written, TableError> {
    let mut writer: Option<RecordBatchWriter> = None;
    // Every file completed so far, in row order: whatever fails
    // later, each file written is known and can be deleted.
    let mut adds: Vec<Add> = Vec::new();
    let mut failed: Option<TableError> = None;
    let aborted = || !kept.load(Ordering::SeqCst);
    while let Some(batch) = rx.recv().await {
        // The run let go without finishing: skip what is queued.
        if rx.is_closed() && aborted() {
            break;
        }
        let step = write_batch(&mut writer, &mut adds, batch, &delta, &plan);
        if let Err(e) = step.await {
            failed = Some(e);
            break;
        }
    }
    // Stop taking batches: the run sees a closed channel and stops.
    rx.close();
    let complete = !aborted();
    // The open file is completed (and, unless the output is
    // complete, deleted below with the others): a reset would
    // abort its upload in a background task the run's end cancels.
    // After a failed write delta-rs has aborted it already.
    if failed.is_none()
        && let Some(flush) = writer.as_mut().map(|w| w.flush())
    {
        match flush.await {
            Ok(last) => adds.extend(last),
            Err(e) => failed = Some(write_err(e)),
        }
    }
    if failed.is_some() || !complete {
        discard(&delta, &adds).await;
        return Err(
            failed.unwrap_or_else(|| write_err("the run stopped before its output was complete"))
        );
    }
    Ok(Written {
        adds,
        schema: writer.as_ref().map(|w| w.arrow_schema()),
        delta: delta.clone(),
        rt,
    })
}

/// Write one batch (opening the writer on the first), completing a file
/// into `adds` whenever the open one reaches `file_bytes`.
async fn write_batch(
    writer: &mut Option<RecordBatchWriter>,
    adds: &mut Vec<Add>,
    batch: RecordBatch,
    delta: &DeltaTable,
    plan: &Plan,
) -> Result<(), TableError> {
    let (mode, file_bytes) = (&plan.mode, plan.file_bytes);
    if writer.is_none() {
        *writer = Some(open(delta, &batch, plan)?);
    }
    let batch = with_partition(batch, mode)?;
    let Some(w) = writer.as_mut() else {
        return Ok(());
    };
    let batch = typed_partition(batch, mode, &w.arrow_schema())?;
    // An output that predates columns appended to the table: null there.
    let batch = match plan.schema_change {
        SchemaChange::AppendNewColumns => with_nulls_for(batch, &w.arrow_schema())?,
        SchemaChange::Fail => batch,
    };
    // In slices, so that this task completes every file at
    // the target size itself: the writer's own roll point
    // (twice as far) is never reached, and no file is
    // completed that this task has not seen.
    let mut at = 0;
    while at < batch.num_rows() {
        let n = SLICE_ROWS.min(batch.num_rows() - at);
        w.write(batch.slice(at, n)).await.map_err(classify_write)?;
        at += n;
        if w.buffer_len() as u64 >= file_bytes {
            adds.extend(w.flush().await.map_err(write_err)?);
        }
    }
    Ok(())
}

/// The writer for the first batch: with the table's schema when it exists
/// (after checking the output fits it), else with the schema the table's
/// creation will give it.
fn open(
    delta: &DeltaTable,
    first: &RecordBatch,
    plan: &Plan,
) -> Result<RecordBatchWriter, TableError> {
    let (mode, file_bytes) = (&plan.mode, plan.file_bytes);
    let output = &first.schema();
    let writer = if delta.version().is_some() {
        let snapshot = delta.snapshot().map_err(write_err)?;
        let table: Schema = snapshot
            .schema()
            .as_ref()
            .try_into_arrow()
            .map_err(write_err)?;
        // The columns the commit will append are in the files already.
        let added = check_types(&data_columns(output, mode), &table, plan.schema_change)?;
        super::delta::evolve::writer(delta, &added)?
    } else {
        let (schema, partitions) = match mode {
            Mode::OverwritePartition { partition } => {
                let columns = partition.columns();
                (add_fields(output, &columns), columns)
            }
            _ => (output.clone(), Vec::new()),
        };
        // Types the table could not hold exactly are refused now, not
        // after the whole output was written.
        let table = table_schema(&schema)?;
        check_types(output, &table, SchemaChange::Fail)?;
        RecordBatchWriter::try_new(delta.table_url().as_str(), table, Some(partitions), None)
            .map_err(write_err)?
    };
    // The task completes files at `file_bytes` itself (to know every file
    // it wrote); the writer's own roll point, twice as far, is never
    // reached (the task writes in slices).
    Ok(writer
        .with_target_file_size(2 * file_bytes)
        .with_writer_properties(crate::encoding::tune(writer_properties(), first).build()))
}

/// Type errors are the output's fault; say so.
pub(super) fn classify_write(e: deltalake::DeltaTableError) -> TableError {
    use deltalake::DeltaTableError as E;
    let text = e.to_string();
    // A storage failure is never a schema problem, whatever its text (a
    // table URL may well contain "null" or "schema").
    let storage = matches!(e, E::ObjectStore { .. } | E::Io { .. });
    let schema = matches!(e, E::SchemaMismatch { .. } | E::Arrow { .. })
        || text.contains("chema")
        || text.contains("cast")
        || text.contains("null");
    if !storage && schema {
        TableError::Output(format!(
            "the output does not fit the table's schema ({text}). Output columns the table lacks, or table columns the output lacks, are let in by --on-schema-change append-new-columns; a changed type needs a new table"
        ))
    } else {
        write_err(text)
    }
}

/// What the writer writes for: the commit's mode, what the output's new
/// columns do, and the size files are cut at.
pub(super) struct Plan {
    pub mode: Mode,
    pub schema_change: SchemaChange,
    pub file_bytes: u64,
}

/// Most rows the writer handles at once (see [`DataWriter::send`]).
const CHUNK_ROWS: usize = 1 << 16;

/// The data writer stopped; why comes out of [`DataWriter::finish`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriterStopped;

/// Delete data files that were written but never committed (a lost race or
/// a failed commit): they are invisible to readers; this only saves space.
pub(super) async fn discard(delta: &DeltaTable, adds: &[Add]) {
    let store = delta.log_store().object_store(None);
    for a in adds {
        let path = deltalake::Path::from(a.path.as_str());
        if let Err(e) = store.delete(&path).await {
            tracing::debug!("could not delete uncommitted data file {}: {e}", a.path);
        }
    }
}

/// The Arrow schema of a table created for `schema` (through Delta's types).
fn table_schema(schema: &SchemaRef) -> Result<SchemaRef, TableError> {
    let kernel: deltalake::kernel::StructType = schema
        .as_ref()
        .try_into_kernel()
        .map_err(|e| TableError::Output(format!("output schema has no Delta equivalent: {e}")))?;
    let arrow: Schema = (&kernel).try_into_arrow().map_err(|e| TableError::Delta {
        what: "converting the schema".into(),
        detail: e.to_string(),
    })?;
    Ok(Arc::new(arrow))
}
