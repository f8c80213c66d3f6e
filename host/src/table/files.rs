//! Writing a slice's output into the table's data files (not yet
//! committed: nothing is visible until the log names them): streamed while
//! the transform runs ([`DataWriter`], overwrite-partition and append), or
//! from the staged output at commit time (when the output had to be staged
//! first: an audit module reads it before anything is written).

use std::path::Path;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, RecordBatch, StringArray};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use deltalake::DeltaTable;
use deltalake::kernel::Add;
use deltalake::kernel::engine::arrow_conversion::TryIntoArrow as _;
use deltalake::writer::{DeltaWriter as _, RecordBatchWriter};
use object_store::ObjectStoreExt as _;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use super::{Mode, TableError};

/// Rows per batch when streaming the staged output into data files.
const BATCH_ROWS: usize = 64 * 1024;

/// Batches the writer task may be behind the transform.
const DEPTH: usize = 4;
/// Rows handed to delta-rs at a time (between them the task checks whether
/// the open file reached its target size).
const SLICE_ROWS: usize = 8192;

fn write_err(e: impl std::fmt::Display) -> TableError {
    TableError::Delta {
        what: "writing data files".into(),
        detail: e.to_string(),
    }
}

/// Write the staged Parquet files into new data files of `delta`, in order,
/// and return their `add` actions in output order (not yet committed).
pub(super) async fn write(
    delta: &DeltaTable,
    staged: &[std::path::PathBuf],
    mode: &Mode,
    target_file_bytes: u64,
) -> Result<Vec<Add>, TableError> {
    if staged.is_empty() {
        return Ok(Vec::new());
    }
    let mut writer: Option<RecordBatchWriter> = None;
    for path in staged {
        for batch in read_staged(path)? {
            let batch = with_partition(batch?, mode)?;
            let w = match writer.as_mut() {
                Some(w) => w,
                None => writer.insert(
                    RecordBatchWriter::for_table(delta)
                        .map_err(write_err)?
                        .with_target_file_size(target_file_bytes)
                        .with_writer_properties(
                            crate::encoding::tune(super::writer_properties(), &batch).build(),
                        ),
                ),
            };
            w.write(batch).await.map_err(classify_write)?;
        }
    }
    match writer.as_mut() {
        Some(w) => w.flush().await.map_err(write_err),
        None => Ok(Vec::new()),
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
    keep: std::sync::Arc<std::sync::atomic::AtomicBool>,
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
    pub(super) fn start(
        delta: DeltaTable,
        mode: Mode,
        file_bytes: u64,
        rt: tokio::runtime::Handle,
    ) -> Self {
        let (tx, mut rx) = tokio::sync::mpsc::channel::<RecordBatch>(DEPTH);
        let keep = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let kept = keep.clone();
        let handle = rt.clone();
        let task = rt.spawn(async move {
            let mut writer: Option<RecordBatchWriter> = None;
            // Every file completed so far, in row order: whatever fails
            // later, each file written is known and can be deleted.
            let mut adds: Vec<Add> = Vec::new();
            let mut failed: Option<TableError> = None;
            let aborted = || !kept.load(std::sync::atomic::Ordering::SeqCst);
            while let Some(batch) = rx.recv().await {
                // The run let go without finishing: skip what is queued.
                if rx.is_closed() && aborted() {
                    break;
                }
                let step = async {
                    if writer.is_none() {
                        writer = Some(open(&delta, &batch, &mode, file_bytes)?);
                    }
                    let batch = with_partition(batch, &mode)?;
                    let Some(w) = writer.as_mut() else {
                        return Ok(());
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
                };
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
                return Err(failed.unwrap_or_else(|| {
                    write_err("the run stopped before its output was complete")
                }));
            }
            Ok(Written {
                adds,
                schema: writer.as_ref().map(|w| w.arrow_schema()),
                delta: delta.clone(),
                rt: handle,
            })
        });
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
    /// gets them in chunks of [`CHUNK_ROWS`] (zero-copy slices).
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
        self.keep.store(true, std::sync::atomic::Ordering::SeqCst);
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

/// The writer for the first batch: with the table's schema when it exists
/// (after checking the output fits it), else with the schema the table's
/// creation will give it.
fn open(
    delta: &DeltaTable,
    first: &RecordBatch,
    mode: &Mode,
    file_bytes: u64,
) -> Result<RecordBatchWriter, TableError> {
    let output = &first.schema();
    let writer = if delta.version().is_some() {
        let snapshot = delta.snapshot().map_err(write_err)?;
        let table: Schema = snapshot
            .schema()
            .as_ref()
            .try_into_arrow()
            .map_err(write_err)?;
        check_types(output, &table)?;
        RecordBatchWriter::for_table(delta).map_err(classify_write)?
    } else {
        let (schema, partitions) = match mode {
            Mode::OverwritePartition { column, .. } => {
                (super::add_field(output, column), vec![column.clone()])
            }
            _ => (output.clone(), Vec::new()),
        };
        // Types the table could not hold exactly are refused now, not
        // after the whole output was written.
        let table = super::table_schema(&schema)?;
        check_types(output, &table)?;
        RecordBatchWriter::try_new(delta.table_url().as_str(), table, Some(partitions), None)
            .map_err(write_err)?
    };
    // The task completes files at `file_bytes` itself (to know every file
    // it wrote); the writer's own roll point, twice as far, is never
    // reached (the task writes in slices).
    Ok(writer
        .with_target_file_size(2 * file_bytes)
        .with_writer_properties(crate::encoding::tune(super::writer_properties(), first).build()))
}

/// Type errors are the output's fault; say so.
fn classify_write(e: deltalake::DeltaTableError) -> TableError {
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
            "the output does not fit the table's schema ({text}). A changed transform needs a new table, or a schema migration of this one"
        ))
    } else {
        write_err(text)
    }
}

fn read_staged(
    path: &Path,
) -> Result<impl Iterator<Item = Result<RecordBatch, TableError>>, TableError> {
    let err = |e: &dyn std::fmt::Display| TableError::Staged(format!("{}: {e}", path.display()));
    let file = std::fs::File::open(path).map_err(|e| err(&e))?;
    let reader = ParquetRecordBatchReaderBuilder::try_new(file)
        .map_err(|e| err(&e))?
        .with_batch_size(BATCH_ROWS)
        .build()
        .map_err(|e| err(&e))?;
    let path = path.to_path_buf();
    Ok(reader.map(move |b| b.map_err(|e| TableError::Staged(format!("{}: {e}", path.display())))))
}

/// For overwrite-partition: the output with the slice's partition column.
/// A column the output already has must hold the slice's value in every
/// row: a slice writes only its own partition.
pub(super) fn with_partition(batch: RecordBatch, mode: &Mode) -> Result<RecordBatch, TableError> {
    let Mode::OverwritePartition { column, value } = mode else {
        return Ok(batch);
    };
    if let Some(col) = batch.column_by_name(column) {
        // Delta keeps partition values as text in the log; only a text
        // column round-trips exactly (and digests the same when read back).
        if !matches!(
            col.data_type(),
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
        ) {
            return Err(TableError::Output(format!(
                "the output's partition column `{column}` is {}, but a partition column must be text: cast it to a string in the transform, or drop it (idem adds it)",
                col.data_type()
            )));
        }
        let text = cast(col, &DataType::Utf8).map_err(|e| {
            TableError::Output(format!(
                "partition column `{column}` cannot be read as text: {e}"
            ))
        })?;
        let text = text
            .as_any()
            .downcast_ref::<StringArray>()
            .ok_or_else(|| TableError::Output(format!("partition column `{column}`")))?;
        if let Some(i) = (0..text.len()).find(|&i| text.is_null(i) || text.value(i) != value) {
            // The guest's text: quoted, but never whole.
            let got = if text.is_null(i) {
                "null".to_string()
            } else {
                crate::text::clip_str(text.value(i), 256)
            };
            return Err(TableError::Output(format!(
                "the output's partition column `{column}` holds `{got}` (row {i} of a batch), but this slice owns only {column}={value}: drop the column from the output, or run the slice that owns that partition"
            )));
        }
        return Ok(batch);
    }
    with_text_column(batch, column, value)
}

/// `batch` with a non-null text column `name` holding `value` in every
/// row, last.
pub(super) fn with_text_column(
    batch: RecordBatch,
    name: &str,
    value: &str,
) -> Result<RecordBatch, TableError> {
    let mut fields: Vec<Field> = batch
        .schema()
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    fields.push(Field::new(name, DataType::Utf8, false));
    let mut columns: Vec<ArrayRef> = batch.columns().to_vec();
    columns.push(Arc::new(StringArray::from_iter_values(
        std::iter::repeat_n(value, batch.num_rows()),
    )));
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)
        .map_err(|e| TableError::Output(e.to_string()))
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

/// The output must land in the table exactly: every output column must
/// exist in the table with the same type, up to encodings that hold the
/// same values (text and binary in their plain, large and view forms).
/// Anything Delta would convert (e.g. nanosecond timestamps, which Delta
/// stores as microseconds) is refused: the table would not hold what the
/// manifest's output digest describes.
pub(super) fn check_types(output: &Schema, table: &Schema) -> Result<(), TableError> {
    let family = |t: &DataType| match t {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => DataType::Utf8,
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => DataType::Binary,
        other => other.clone(),
    };
    for f in output.fields() {
        let Ok(t) = table.field_with_name(f.name()) else {
            return Err(TableError::Output(format!(
                "the output has a column `{}` that the table does not have (table columns: {}). A changed transform needs a new table, or a schema migration of this one",
                f.name(),
                table
                    .fields()
                    .iter()
                    .map(|f| f.name().as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        };
        if family(f.data_type()) != family(t.data_type()) {
            return Err(TableError::Output(format!(
                "the output's column `{}` is {}, but the table stores it as {}: the table would not hold the output exactly. Cast it to {} in the transform (or use a new table)",
                f.name(),
                f.data_type(),
                t.data_type(),
                t.data_type()
            )));
        }
    }
    Ok(())
}
