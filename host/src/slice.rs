//! Slices: a slice spec resolves to a sorted, pinned list of input objects
//! (path, size, sha256), then streams them as fixed-size `RecordBatch`es.
//! Memory stays O(batch), not O(slice).

use std::fs::File;
use std::path::{Path, PathBuf};

use arrow::compute::BatchCoalescer;
use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use parquet::arrow::arrow_reader::{
    ArrowReaderOptions, ParquetRecordBatchReader, ParquetRecordBatchReaderBuilder,
};
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::digest::Digest;

/// Why a slice could not be resolved or read. Each names the object.
#[derive(Debug, Error)]
pub enum SliceError {
    /// An input path does not exist.
    #[error("input `{0}` does not exist: check the path (and the partition value)")]
    NotFound(String),
    /// The slice resolved to no objects.
    #[error("slice `{slice}` matches no Parquet files under {root}: {hint}")]
    Empty {
        /// The slice id.
        slice: String,
        /// Where we looked.
        root: String,
        /// What to check.
        hint: String,
    },
    /// An object is not readable Parquet.
    #[error(
        "input `{path}` is not a readable Parquet file ({detail}). Nothing was run or committed; fix or remove the file and rerun"
    )]
    Malformed {
        /// The object.
        path: String,
        /// The decoder's complaint.
        detail: String,
    },
    /// Objects of one slice disagree on their schema.
    #[error(
        "input `{path}` has schema {got}, but `{first}` has {expected}: all files of a slice must share one schema"
    )]
    SchemaMismatch {
        /// The disagreeing object.
        path: String,
        /// The first object.
        first: String,
        /// The first object's schema.
        expected: String,
        /// This object's schema.
        got: String,
    },
    /// An object changed between resolving and reading.
    #[error(
        "input `{path}` changed while the run was reading it ({detail}); rerun to pin the new version"
    )]
    Changed {
        /// The object.
        path: String,
        /// What changed.
        detail: String,
    },
    /// Any other I/O failure.
    #[error("reading `{path}`: {source}")]
    Io {
        /// The object.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
}

/// One pinned input object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputObject {
    /// Path relative to the slice root (the name recorded in manifests).
    pub path: String,
    /// Size in bytes.
    pub size: u64,
    /// sha256 of the bytes.
    pub digest: Digest,
}

/// A resolved slice: the exact objects a run reads, in the order it reads them.
#[derive(Debug, Clone)]
pub struct ResolvedSlice {
    /// The slice's name, e.g. `date=2026-10-01` or `files`.
    pub id: String,
    /// Where relative object paths start.
    pub root: PathBuf,
    /// The objects, sorted by path.
    pub inputs: Vec<InputObject>,
}

impl ResolvedSlice {
    /// Pin an explicit list of files: paths are taken relative to their
    /// common parent, sorted, and hashed.
    pub fn from_files(id: &str, files: &[PathBuf]) -> Result<Self, SliceError> {
        let mut abs = Vec::with_capacity(files.len());
        for f in files {
            let p = std::fs::canonicalize(f)
                .map_err(|_| SliceError::NotFound(f.display().to_string()))?;
            abs.push(p);
        }
        if abs.is_empty() {
            return Err(SliceError::Empty {
                slice: id.to_string(),
                root: "(no paths)".into(),
                hint: "pass at least one --input file".into(),
            });
        }
        let root = common_parent(&abs);
        Self::pin(id, root, abs)
    }

    /// Pin the hive partition `key=value` under `root`: every `*.parquet`
    /// below `root/key=value/`, recursively, sorted.
    pub fn from_partition(root: &Path, key: &str, value: &str) -> Result<Self, SliceError> {
        let id = format!("{key}={value}");
        let root = std::fs::canonicalize(root)
            .map_err(|_| SliceError::NotFound(root.display().to_string()))?;
        let dir = root.join(&id);
        if !dir.is_dir() {
            return Err(SliceError::Empty {
                slice: id.clone(),
                root: root.display().to_string(),
                hint: format!("there is no partition directory {id}/ (check --partition)"),
            });
        }
        let mut files = Vec::new();
        walk_parquet(&dir, &mut files).map_err(|e| SliceError::Io {
            path: dir.display().to_string(),
            source: e,
        })?;
        if files.is_empty() {
            return Err(SliceError::Empty {
                slice: id,
                root: root.display().to_string(),
                hint: "the partition directory holds no *.parquet files".into(),
            });
        }
        Self::pin(&id, root, files)
    }

    /// Pin `files` (absolute paths below `root`), e.g. the data files of a
    /// Delta table version.
    pub fn from_listed(id: &str, root: &Path, files: Vec<PathBuf>) -> Result<Self, SliceError> {
        if files.is_empty() {
            return Err(SliceError::Empty {
                slice: id.to_string(),
                root: root.display().to_string(),
                hint: "the table version (and partition filter) selects no data files".into(),
            });
        }
        Self::pin(id, root.to_path_buf(), files)
    }

    fn pin(id: &str, root: PathBuf, mut files: Vec<PathBuf>) -> Result<Self, SliceError> {
        files.sort();
        files.dedup();
        let mut inputs = Vec::with_capacity(files.len());
        for f in &files {
            let (digest, size) = Digest::of_file(f).map_err(|e| SliceError::Io {
                path: f.display().to_string(),
                source: e,
            })?;
            let rel = f
                .strip_prefix(&root)
                .unwrap_or(f)
                .to_string_lossy()
                .replace('\\', "/");
            inputs.push(InputObject {
                path: rel,
                size,
                digest,
            });
        }
        Ok(ResolvedSlice {
            id: id.to_string(),
            root,
            inputs,
        })
    }

    /// Absolute path of an input.
    pub fn path_of(&self, input: &InputObject) -> PathBuf {
        self.root.join(&input.path)
    }

    /// Open the slice for reading in batches of exactly `batch_rows` rows
    /// (the last may be shorter). Checks every file's footer and schema first.
    pub fn reader(&self, batch_rows: usize) -> Result<SliceReader, SliceError> {
        let mut schema: Option<SchemaRef> = None;
        for input in &self.inputs {
            let builder = self.open(input, batch_rows)?;
            let s = builder.schema().clone();
            match &schema {
                None => schema = Some(s),
                Some(first) if strip_meta(first) == strip_meta(&s) => {}
                Some(first) => {
                    return Err(SliceError::SchemaMismatch {
                        path: input.path.clone(),
                        first: self.inputs[0].path.clone(),
                        expected: first.to_string(),
                        got: s.to_string(),
                    });
                }
            }
        }
        let schema = schema.ok_or_else(|| SliceError::Empty {
            slice: self.id.clone(),
            root: self.root.display().to_string(),
            hint: "no inputs".into(),
        })?;
        Ok(SliceReader {
            slice: self.clone(),
            batch_rows,
            next_input: 0,
            current: None,
            coalescer: BatchCoalescer::new(schema.clone(), batch_rows.max(1)),
            schema,
            done: false,
        })
    }

    fn open(
        &self,
        input: &InputObject,
        batch_rows: usize,
    ) -> Result<ParquetRecordBatchReaderBuilder<File>, SliceError> {
        let path = self.path_of(input);
        let f = File::open(&path).map_err(|e| SliceError::Io {
            path: input.path.clone(),
            source: e,
        })?;
        let len = f.metadata().map(|m| m.len()).unwrap_or(0);
        if len != input.size {
            return Err(SliceError::Changed {
                path: input.path.clone(),
                detail: format!("size {} pinned, {} now", input.size, len),
            });
        }
        // Types come from the Parquet schema alone, not from a writer's
        // embedded Arrow hints: the same data written by Spark, polars or
        // DataFusion (which hints view types) reaches the guest identically.
        let options = ArrowReaderOptions::new().with_skip_arrow_metadata(true);
        ParquetRecordBatchReaderBuilder::try_new_with_options(f, options)
            .map(|b| b.with_batch_size(batch_rows.max(1)))
            .map_err(|e| SliceError::Malformed {
                path: input.path.clone(),
                detail: e.to_string(),
            })
    }
}

/// Schema equality ignoring metadata (writers add their own key/values).
fn strip_meta(s: &SchemaRef) -> arrow::datatypes::Schema {
    arrow::datatypes::Schema::new(s.fields().clone())
}

fn walk_parquet(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let p = entry.path();
        let name = entry.file_name().to_string_lossy().to_string();
        // Hidden and underscore files are writer bookkeeping (_SUCCESS, .crc).
        if name.starts_with('.') || name.starts_with('_') {
            continue;
        }
        if entry.file_type()?.is_dir() {
            walk_parquet(&p, out)?;
        } else if name.ends_with(".parquet") {
            out.push(p);
        }
    }
    Ok(())
}

fn common_parent(paths: &[PathBuf]) -> PathBuf {
    let mut root = paths[0].parent().map(Path::to_path_buf).unwrap_or_default();
    for p in &paths[1..] {
        while !p.starts_with(&root) {
            if !root.pop() {
                break;
            }
        }
    }
    root
}

/// Streams a slice as fixed-size batches, file after file, in pinned order.
pub struct SliceReader {
    slice: ResolvedSlice,
    batch_rows: usize,
    next_input: usize,
    current: Option<(String, ParquetRecordBatchReader)>,
    coalescer: BatchCoalescer,
    schema: SchemaRef,
    done: bool,
}

impl SliceReader {
    /// The schema of every batch.
    pub fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn fill(&mut self) -> Result<(), SliceError> {
        while !self.coalescer.has_completed_batch() {
            if self.current.is_none() {
                if self.next_input == self.slice.inputs.len() {
                    self.coalescer
                        .finish_buffered_batch()
                        .map_err(|e| SliceError::Malformed {
                            path: "(end of slice)".into(),
                            detail: e.to_string(),
                        })?;
                    self.done = true;
                    return Ok(());
                }
                let input = self.slice.inputs[self.next_input].clone();
                self.next_input += 1;
                let reader = self
                    .slice
                    .open(&input, self.batch_rows)?
                    .build()
                    .map_err(|e| SliceError::Malformed {
                        path: input.path.clone(),
                        detail: e.to_string(),
                    })?;
                self.current = Some((input.path, reader));
            }
            let Some((path, reader)) = self.current.as_mut() else {
                continue;
            };
            match reader.next() {
                None => self.current = None,
                Some(Err(e)) => {
                    return Err(SliceError::Malformed {
                        path: path.clone(),
                        detail: e.to_string(),
                    });
                }
                Some(Ok(batch)) => {
                    // Files may differ only in schema metadata: rebind.
                    let batch = RecordBatch::try_new(self.schema.clone(), batch.columns().to_vec())
                        .map_err(|e| SliceError::Malformed {
                            path: path.clone(),
                            detail: e.to_string(),
                        })?;
                    self.coalescer
                        .push_batch(batch)
                        .map_err(|e| SliceError::Malformed {
                            path: path.clone(),
                            detail: e.to_string(),
                        })?;
                }
            }
        }
        Ok(())
    }
}

impl Iterator for SliceReader {
    type Item = Result<RecordBatch, SliceError>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(b) = self.coalescer.next_completed_batch() {
            return Some(Ok(b));
        }
        if self.done {
            return None;
        }
        if let Err(e) = self.fill() {
            self.done = true;
            return Some(Err(e));
        }
        self.coalescer.next_completed_batch().map(Ok)
    }
}

impl SliceReader {
    /// Read ahead on a thread of its own, so Parquet decoding overlaps the
    /// guest: at most `depth` batches wait in between (memory stays O(batch)).
    pub fn prefetch(self, depth: usize) -> Prefetch {
        let (tx, rx) = std::sync::mpsc::sync_channel(depth.max(1));
        let handle = std::thread::Builder::new()
            .name("idem-read".into())
            .spawn(move || {
                for b in self {
                    let stop = b.is_err();
                    if tx.send(b).is_err() || stop {
                        break;
                    }
                }
            })
            .ok();
        Prefetch {
            rx,
            _handle: handle,
        }
    }
}

/// Batches read ahead by [`SliceReader::prefetch`], in order.
pub struct Prefetch {
    rx: std::sync::mpsc::Receiver<Result<RecordBatch, SliceError>>,
    _handle: Option<std::thread::JoinHandle<()>>,
}

impl Iterator for Prefetch {
    type Item = Result<RecordBatch, SliceError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.rx.recv().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_have_the_fixed_size_across_file_boundaries_in_pinned_order() {
        let dir = tempfile::tempdir().unwrap();
        // 3 files of 1000 rows: batches of 700 must straddle the files.
        let files = crate::sample::write_day(dir.path(), "2026-10-01", 3_000, 3).unwrap();
        let slice = ResolvedSlice::from_partition(dir.path(), "date", "2026-10-01").unwrap();
        assert_eq!(slice.id, "date=2026-10-01");
        let names: Vec<&str> = slice.inputs.iter().map(|i| i.path.as_str()).collect();
        assert_eq!(
            names,
            [
                "date=2026-10-01/part-00000.parquet",
                "date=2026-10-01/part-00001.parquet",
                "date=2026-10-01/part-00002.parquet"
            ]
        );
        for (input, file) in slice.inputs.iter().zip(&files) {
            assert_eq!(input.digest, Digest::of_file(file).unwrap().0);
        }
        let sizes: Vec<usize> = slice
            .reader(700)
            .unwrap()
            .map(|b| b.unwrap().num_rows())
            .collect();
        assert_eq!(sizes, [700, 700, 700, 700, 200]);
        // Same rows in the same order as the generator wrote them.
        let all: Vec<RecordBatch> = slice
            .reader(700)
            .unwrap()
            .prefetch(2)
            .map(Result::unwrap)
            .collect();
        let expected = crate::sample::orders_batch(crate::sample::seed_of("2026-10-01"), 0, 3_000);
        assert_eq!(
            crate::digest::of_batches(&all),
            crate::digest::of_batches(&[expected])
        );
    }

    #[test]
    fn a_file_that_changed_after_pinning_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let files = crate::sample::write_day(dir.path(), "2026-10-01", 100, 1).unwrap();
        let slice = ResolvedSlice::from_files("s", &files).unwrap();
        crate::sample::write_day(dir.path(), "2026-10-01", 5_000, 1).unwrap();
        assert!(matches!(slice.reader(10), Err(SliceError::Changed { .. })));
    }
}
