//! Write output batches to a Parquet file atomically: into a temporary file
//! beside the target, renamed into place only when the run succeeded.

use std::path::{Path, PathBuf};

use arrow::datatypes::Schema;
use arrow::record_batch::RecordBatch;
use parquet::arrow::ArrowWriter;

/// What a Parquet file is written for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// Kept (`idem exec`'s output): encoded as every file idem delivers
    /// ([`crate::encoding::writer_properties`], snappy).
    Delivered,
    /// Read back by the commit (and an audit) and rewritten into data
    /// files (a run's staged output): uncompressed, the cheapest to write
    /// and to read back.
    Scratch,
}

/// A Parquet file being written; nothing appears at the target path until
/// [`ParquetOutput::commit`].
pub struct ParquetOutput {
    target: PathBuf,
    tmp: Option<tempfile::NamedTempFile>,
    writer: Option<ArrowWriter<std::fs::File>>,
    purpose: Purpose,
}

impl ParquetOutput {
    /// Prepare to write `target`, to be kept.
    pub fn new(target: &Path) -> std::io::Result<Self> {
        Self::for_purpose(target, Purpose::Delivered)
    }

    /// Prepare to write `target` for `purpose`.
    pub fn for_purpose(target: &Path, purpose: Purpose) -> std::io::Result<Self> {
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
            purpose,
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
            let mut props = crate::encoding::writer_properties();
            if self.purpose == Purpose::Scratch {
                props = props.set_compression(parquet::basic::Compression::UNCOMPRESSED);
            }
            let props = crate::encoding::tune(props, first).build();
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
    /// (through a [`ParquetOutput`] for `purpose`, so nothing is at `path`
    /// unless it finished).
    pub fn spawn(path: PathBuf, depth: usize, purpose: Purpose) -> std::io::Result<Self> {
        let (tx, rx) = std::sync::mpsc::sync_channel::<RecordBatch>(depth.max(1));
        let mut out = ParquetOutput::for_purpose(&path, purpose)?;
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::Int64Array;
    use arrow::datatypes::{DataType, Field};
    use parquet::basic::Compression;
    use parquet::file::reader::{FileReader, SerializedFileReader};

    use super::*;

    /// A delivered file is snappy-compressed, as every file idem delivers;
    /// a staged one, read back once, is not compressed.
    #[test]
    fn delivered_files_are_snappy_and_scratch_files_are_not() {
        let dir = tempfile::tempdir().unwrap();
        let schema = Arc::new(Schema::new(vec![Field::new("v", DataType::Int64, false)]));
        let batch = RecordBatch::try_new(
            schema,
            vec![Arc::new(Int64Array::from_iter_values(0..5000))],
        )
        .unwrap();
        for (purpose, want) in [
            (Purpose::Delivered, Compression::SNAPPY),
            (Purpose::Scratch, Compression::UNCOMPRESSED),
        ] {
            let stager =
                Stager::spawn(dir.path().join(format!("{purpose:?}")), 2, purpose).unwrap();
            stager.send(&batch).unwrap();
            let path = stager.finish().unwrap().unwrap();
            let file = SerializedFileReader::new(std::fs::File::open(&path).unwrap()).unwrap();
            let rg = file.metadata().row_group(0);
            assert_eq!(rg.num_rows(), 5000);
            assert_eq!(rg.column(0).compression(), want, "{purpose:?}");
        }
    }
}
