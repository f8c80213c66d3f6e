//! Reading ahead: a reader moved to a thread of its own, a few batches
//! ahead of the guest, so Parquet decoding overlaps it.

use arrow::record_batch::RecordBatch;

use super::error::SliceError;
use super::reader::SliceReader;

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
