//! Write output batches to a Parquet file atomically: into a temporary file
//! beside the target, renamed into place only when the run succeeded.

use std::path::{Path, PathBuf};

use arrow::datatypes::Schema;
use arrow::record_batch::RecordBatch;
use parquet::arrow::ArrowWriter;

/// A Parquet file being written; nothing appears at the target path until
/// [`ParquetOutput::commit`].
pub struct ParquetOutput {
    target: PathBuf,
    tmp: Option<tempfile::NamedTempFile>,
    writer: Option<ArrowWriter<std::fs::File>>,
}

impl ParquetOutput {
    /// Prepare to write `target`.
    pub fn new(target: &Path) -> std::io::Result<Self> {
        let dir = target
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir)?;
        let tmp = tempfile::Builder::new()
            .prefix(".idem-")
            .suffix(".tmp")
            .tempfile_in(dir)?;
        Ok(ParquetOutput {
            target: target.to_path_buf(),
            tmp: Some(tmp),
            writer: None,
        })
    }

    /// The writer, created for the first batch (which decides the
    /// columns' encodings, [`crate::encoding`]).
    fn open(&mut self, first: &RecordBatch) -> std::io::Result<&mut ArrowWriter<std::fs::File>> {
        if self.writer.is_none() {
            let file = self
                .tmp
                .as_ref()
                .ok_or_else(|| std::io::Error::other("output already committed"))?
                .reopen()?;
            let props = crate::encoding::tune(crate::encoding::writer_properties(), first).build();
            self.writer = Some(
                ArrowWriter::try_new(file, first.schema(), Some(props))
                    .map_err(std::io::Error::other)?,
            );
        }
        self.writer
            .as_mut()
            .ok_or_else(|| std::io::Error::other("no writer"))
    }

    /// Whether no batch was written yet.
    pub fn is_empty(&self) -> bool {
        self.writer.is_none()
    }

    /// Append a batch.
    pub fn write(&mut self, batch: &RecordBatch) -> std::io::Result<()> {
        self.open(batch)?
            .write(batch)
            .map_err(std::io::Error::other)
    }

    /// Finish the file and move it into place. A run with no output rows
    /// writes a file with the empty schema.
    pub fn commit(mut self) -> std::io::Result<PathBuf> {
        self.open(&RecordBatch::new_empty(
            std::sync::Arc::new(Schema::empty()),
        ))?;
        if let Some(w) = self.writer.take() {
            w.close().map_err(std::io::Error::other)?;
        }
        let tmp = self
            .tmp
            .take()
            .ok_or_else(|| std::io::Error::other("output already committed"))?;
        tmp.persist(&self.target).map_err(|e| e.error)?;
        Ok(self.target.clone())
    }
}

/// Output staged on local disk by a writer thread, so Parquet encoding
/// overlaps the guest and memory stays O(batch) whatever the output size.
pub struct Stager {
    tx: Option<std::sync::mpsc::SyncSender<RecordBatch>>,
    handle: Option<std::thread::JoinHandle<std::io::Result<Option<PathBuf>>>>,
}

impl Stager {
    /// Start a writer thread that writes every batch it is sent to `path`
    /// (through a [`ParquetOutput`], so nothing is at `path` unless it
    /// finished).
    pub fn spawn(path: PathBuf, depth: usize) -> std::io::Result<Self> {
        let (tx, rx) = std::sync::mpsc::sync_channel::<RecordBatch>(depth.max(1));
        let mut out = ParquetOutput::new(&path)?;
        let handle = std::thread::Builder::new()
            .name("idem-stage".into())
            .spawn(move || {
                for b in rx {
                    out.write(&b)?;
                }
                // No batch, no file: the commit then writes no data.
                if out.is_empty() {
                    return Ok(None);
                }
                out.commit().map(Some)
            })?;
        Ok(Stager {
            tx: Some(tx),
            handle: Some(handle),
        })
    }

    /// Queue a batch (blocks while the writer is `depth` batches behind).
    pub fn send(&self, batch: &RecordBatch) -> std::io::Result<()> {
        match &self.tx {
            Some(tx) if tx.send(batch.clone()).is_ok() => Ok(()),
            // The writer stopped: its error comes out of `finish`.
            _ => Err(std::io::Error::other(
                "the staging writer stopped; see the error from finish",
            )),
        }
    }

    /// Wait for the writer; the staged file, `None` when nothing was sent.
    pub fn finish(mut self) -> std::io::Result<Option<PathBuf>> {
        drop(self.tx.take());
        match self.handle.take().map(|h| h.join()) {
            Some(Ok(r)) => r,
            Some(Err(_)) => Err(std::io::Error::other("the staging writer panicked")),
            None => Ok(None),
        }
    }
}
