//! The output digest computed on a thread of its own: hashing every output
//! value is the heaviest step a light transform's run has after the guest
//! itself (perf: SHA-256 was ~15% of an `idem exec` of clean_orders, on the
//! guest's thread). The guest's thread checks each batch's schema (so a
//! batch the digest would refuse never reaches a sink) and hands the batch
//! on; the digest thread hashes it while the guest computes the next one.
//! Same digester, same batches, same order: the same digest.

use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::JoinHandle;

use arrow::datatypes::DataType;
use arrow::record_batch::RecordBatch;

use super::error::{DigestError, panic_message};
use super::output::{OutputDigester, same_types};
use super::sha256::Digest;
use super::types::check_schema;

/// Batches the digest thread may be behind.
const DEPTH: usize = 4;

/// An [`OutputDigester`] fed through a channel.
pub struct PipelinedDigester {
    tx: Option<SyncSender<RecordBatch>>,
    thread: Option<JoinHandle<Result<Digest, DigestError>>>,
    /// Digesting on the caller's thread (no thread could be started).
    inline: Option<OutputDigester>,
    /// The first batch's column types and schema text.
    first: Option<(Vec<DataType>, String)>,
    rows: u64,
    batches: u64,
    failed: Option<DigestError>,
}

impl Default for PipelinedDigester {
    fn default() -> Self {
        Self::new()
    }
}

impl PipelinedDigester {
    /// Start the digest thread (a digester that could not start one
    /// digests on the caller's thread instead).
    pub fn new() -> Self {
        let (tx, rx) = sync_channel::<RecordBatch>(DEPTH);
        let thread = std::thread::Builder::new()
            .name("idem-digest".into())
            .spawn(move || digest_all(rx))
            .ok();
        Self::with_thread(tx, thread)
    }

    fn with_thread(
        tx: SyncSender<RecordBatch>,
        thread: Option<JoinHandle<Result<Digest, DigestError>>>,
    ) -> Self {
        PipelinedDigester {
            inline: thread.is_none().then(OutputDigester::new),
            tx: Some(tx),
            thread,
            first: None,
            rows: 0,
            batches: 0,
            failed: None,
        }
    }

    /// Add a batch: its schema is checked here (as [`OutputDigester`]
    /// checks it), its values are hashed on the digest thread. An error
    /// the thread met earlier is returned by the next call.
    pub fn update(&mut self, batch: &RecordBatch) -> Result<(), DigestError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        let r = self.check(batch).and_then(|()| self.send(batch));
        if let Err(e) = &r {
            self.failed = Some(e.clone());
        }
        r
    }

    fn check(&mut self, batch: &RecordBatch) -> Result<(), DigestError> {
        let schema = batch.schema();
        match &self.first {
            None => {
                check_schema(&schema)?;
                self.first = Some((
                    schema
                        .fields()
                        .iter()
                        .map(|f| f.data_type().clone())
                        .collect(),
                    schema.to_string(),
                ));
            }
            Some((types, expected)) => same_types(types, expected, &schema, self.batches)?,
        }
        Ok(())
    }

    fn send(&mut self, batch: &RecordBatch) -> Result<(), DigestError> {
        if let Some(d) = self.inline.as_mut() {
            d.update(batch)?;
            self.rows += batch.num_rows() as u64;
            self.batches += 1;
            return Ok(());
        }
        let sent = match &self.tx {
            Some(tx) if self.thread.is_some() => tx.send(batch.clone()).is_ok(),
            _ => false,
        };
        if !sent {
            // The thread stopped on an error (or never started): its
            // result says why.
            return match self.join() {
                Err(e) => Err(e),
                Ok(_) => Err(DigestError::Panicked(
                    "the digest thread stopped early".into(),
                )),
            };
        }
        self.rows += batch.num_rows() as u64;
        self.batches += 1;
        Ok(())
    }

    fn join(&mut self) -> Result<Digest, DigestError> {
        drop(self.tx.take());
        match self.thread.take().map(|t| t.join()) {
            Some(Ok(r)) => r,
            Some(Err(p)) => Err(DigestError::Panicked(panic_message(p.as_ref()))),
            None => Err(DigestError::Panicked(
                "no digest thread could be started".into(),
            )),
        }
    }

    /// Rows handed on so far.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Wait for the thread: the digest of every batch, in order.
    pub fn finish(mut self) -> Result<Digest, DigestError> {
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        if let Some(d) = self.inline.take() {
            return Ok(d.finish());
        }
        self.join()
    }
}

fn digest_all(rx: Receiver<RecordBatch>) -> Result<Digest, DigestError> {
    let mut d = OutputDigester::new();
    for b in rx {
        // Returning drops the receiver: the next send fails and collects
        // this error.
        d.update(&b)?;
    }
    Ok(d.finish())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Int64Array, StringArray};
    use arrow::datatypes::{Field, Schema};

    use super::*;

    fn batch(from: i64, n: i64) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("n", DataType::Int64, false),
            Field::new("s", DataType::Utf8, true),
        ]));
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int64Array::from_iter_values(from..from + n)),
                Arc::new(StringArray::from_iter(
                    (from..from + n).map(|i| (i % 3 != 0).then(|| format!("v{i}"))),
                )),
            ],
        )
        .unwrap()
    }

    #[test]
    fn the_same_digest_as_the_digester_on_the_callers_thread() {
        let batches: Vec<RecordBatch> = (0..50).map(|i| batch(i * 1000, 1000)).collect();
        let mut p = PipelinedDigester::new();
        for b in &batches {
            p.update(b).unwrap();
        }
        assert_eq!(p.rows(), 50_000);
        let want = super::super::of_batches(&batches).unwrap();
        assert_eq!(p.finish().unwrap(), want);
        // No batch at all: the empty digest, as before.
        assert_eq!(
            PipelinedDigester::new().finish().unwrap(),
            OutputDigester::new().finish()
        );
    }

    #[test]
    fn without_a_thread_it_digests_on_the_callers_thread() {
        let batches: Vec<RecordBatch> = (0..5).map(|i| batch(i * 100, 100)).collect();
        let (tx, _rx) = sync_channel(1);
        let mut p = PipelinedDigester::with_thread(tx, None);
        for b in &batches {
            p.update(b).unwrap();
        }
        assert_eq!(p.rows(), 500);
        assert_eq!(
            p.finish().unwrap(),
            super::super::of_batches(&batches).unwrap()
        );
        let (tx, _rx) = sync_channel(1);
        assert_eq!(
            PipelinedDigester::with_thread(tx, None).finish().unwrap(),
            OutputDigester::new().finish()
        );
    }

    #[test]
    fn a_changed_schema_is_refused_at_once_and_stays_refused() {
        let mut p = PipelinedDigester::new();
        p.update(&batch(0, 10)).unwrap();
        let other = RecordBatch::try_new(
            Arc::new(Schema::new(vec![Field::new("n", DataType::Utf8, false)])),
            vec![Arc::new(StringArray::from(vec!["x"]))],
        )
        .unwrap();
        assert!(matches!(
            p.update(&other),
            Err(DigestError::SchemaChanged { batch: 1, .. })
        ));
        assert!(p.update(&batch(10, 10)).is_err());
        assert!(p.finish().is_err());
    }
}
