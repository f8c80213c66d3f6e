//! Data files of an Iceberg table: batches in the table's column order
//! (each column with its field id) cut into Parquet files of the target
//! size, each uploaded as soon as it is complete (memory: one file). Runs
//! on a blocking thread; uploads go through the run's runtime.

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use bytes::Bytes;
use iceberg::io::FileIO;
use iceberg::spec::{DataContentType, DataFile, DataFileBuilder, DataFileFormat, Literal, Struct};
use parquet::arrow::ArrowWriter;

use super::{TableError, conform, ice_err};

/// Where and how a commit's data files are written.
#[derive(Clone)]
pub(super) struct FileSpec {
    pub io: FileIO,
    pub handle: tokio::runtime::Handle,
    /// The table's location, without a trailing `/`.
    pub base: String,
    /// `data/` or `data/COLUMN=VALUE/`.
    pub dir: String,
    /// File names start with this (`idem-<slice tag>`).
    pub name: String,
    /// This process's commit id, in every name (two hosts never collide).
    pub nonce: String,
    /// The table's columns, with field ids.
    pub schema: SchemaRef,
    pub spec_id: i32,
    /// The identity partition's value, for overwrite-partition.
    pub partition: Option<String>,
    /// Cut files at this size.
    pub target: u64,
}

/// Writes batches into data files; [`Sink::files`] are the files written
/// so far (to delete if the commit does not happen).
pub(super) struct Sink {
    spec: FileSpec,
    writer: Option<ArrowWriter<Vec<u8>>>,
    rows: u64,
    pub files: Vec<DataFile>,
}

impl Sink {
    pub fn new(spec: FileSpec) -> Self {
        Sink {
            spec,
            writer: None,
            rows: 0,
            files: Vec::new(),
        }
    }

    /// Add `batch` (any column order; cast to the table's types).
    pub fn push(&mut self, batch: RecordBatch) -> Result<(), TableError> {
        let batch = conform(batch, &self.spec.schema)?;
        if batch.num_rows() == 0 {
            return Ok(());
        }
        let enc = |e: parquet::errors::ParquetError| {
            TableError::Output(format!("encoding a data file: {e}"))
        };
        if self.writer.is_none() {
            let props = crate::encoding::tune(super::super::writer_properties(), &batch).build();
            self.writer = Some(
                ArrowWriter::try_new(Vec::new(), self.spec.schema.clone(), Some(props))
                    .map_err(enc)?,
            );
        }
        let w = self.writer.as_mut().expect("writer made above");
        w.write(&batch).map_err(enc)?;
        self.rows += batch.num_rows() as u64;
        if w.bytes_written() + w.in_progress_size() >= self.spec.target as usize {
            self.upload()?;
        }
        Ok(())
    }

    /// Complete and upload the open file, if any.
    pub fn finish(&mut self) -> Result<(), TableError> {
        self.upload()
    }

    fn upload(&mut self) -> Result<(), TableError> {
        let Some(w) = self.writer.take() else {
            return Ok(());
        };
        let rows = std::mem::take(&mut self.rows);
        let bytes = w
            .into_inner()
            .map_err(|e| TableError::Output(format!("encoding a data file: {e}")))?;
        let s = &self.spec;
        let path = format!(
            "{}/{}{}-{:05}-{}.parquet",
            s.base,
            s.dir,
            s.name,
            self.files.len(),
            s.nonce
        );
        let size = bytes.len() as u64;
        s.handle.block_on(async {
            s.io.new_output(&path)
                .map_err(ice_err(format!("writing {path}")))?
                .write(Bytes::from(bytes))
                .await
                .map_err(ice_err(format!("writing {path}")))
        })?;
        let partition = match &s.partition {
            Some(v) => Struct::from_iter([Some(Literal::string(v))]),
            None => Struct::empty(),
        };
        let file = DataFileBuilder::default()
            .content(DataContentType::Data)
            .file_path(path.clone())
            .file_format(DataFileFormat::Parquet)
            .partition(partition)
            .partition_spec_id(s.spec_id)
            .record_count(rows)
            .file_size_in_bytes(size)
            .build()
            .map_err(|e| TableError::Output(format!("data file {path}: {e}")))?;
        self.files.push(file);
        Ok(())
    }
}
