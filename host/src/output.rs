//! Write output batches to a Parquet file atomically: into a temporary file
//! beside the target, renamed into place only when the run succeeded.

use std::path::{Path, PathBuf};

use arrow::datatypes::{Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use parquet::arrow::ArrowWriter;
use parquet::file::properties::WriterProperties;

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

    fn open(&mut self, schema: SchemaRef) -> std::io::Result<&mut ArrowWriter<std::fs::File>> {
        if self.writer.is_none() {
            let file = self
                .tmp
                .as_ref()
                .ok_or_else(|| std::io::Error::other("output already committed"))?
                .reopen()?;
            let props = WriterProperties::builder().build();
            self.writer = Some(
                ArrowWriter::try_new(file, schema, Some(props)).map_err(std::io::Error::other)?,
            );
        }
        self.writer
            .as_mut()
            .ok_or_else(|| std::io::Error::other("no writer"))
    }

    /// Append a batch.
    pub fn write(&mut self, batch: &RecordBatch) -> std::io::Result<()> {
        self.open(batch.schema())?
            .write(batch)
            .map_err(std::io::Error::other)
    }

    /// Finish the file and move it into place. A run with no output rows
    /// writes a file with the empty schema.
    pub fn commit(mut self) -> std::io::Result<PathBuf> {
        self.open(std::sync::Arc::new(Schema::empty()))?;
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
