//! The one way a transform is driven over its input into a sink: by a
//! run (`land`), a staged audit, a replay and `idem exec`. The
//! guest's context comes from the job and the input's schema; the input
//! is narrowed to the columns the guest declares (see [`execute`] for what
//! is checked and hashed).

use arrow::record_batch::RecordBatch;

use crate::execute::{Declared, ExecError, Outcome, Transformer, execute};
use crate::sandbox::GuestContext;
use crate::slice::SliceReader;

/// What the guest is told about its run, apart from its input's schema.
#[derive(Clone)]
pub struct Job {
    /// The slice id.
    pub slice_id: String,
    /// The scheduler's logical date.
    pub logical_date: Option<String>,
    /// The params text the guest reads.
    pub params: String,
    /// Rows per input batch.
    pub batch_rows: u32,
    /// Side inputs, given to the guest before `open`.
    pub sides: Vec<super::SideInput>,
}

/// Where the guest's input batches come from.
pub enum Feed<'a> {
    /// No input at all (an audit of an empty output).
    Nothing,
    /// The reader's batches, read in turn.
    Read(SliceReader),
    /// The reader's batches decoded ahead on a thread of their own, each
    /// counted on the progress bar.
    Ahead(SliceReader, &'a indicatif::ProgressBar),
}

/// Drive one transform over its feed into `sink`: the guest context from
/// the job and the feed's schema, the input narrowed to the columns the
/// guest declares (see [`execute`] for what is checked and hashed).
pub fn drive<S>(
    t: &mut dyn Transformer,
    job: &Job,
    feed: Feed<'_>,
    sink: S,
) -> Result<Outcome, ExecError>
where
    S: FnMut(&RecordBatch) -> Result<(), ExecError>,
{
    let ctx = |input_schema| GuestContext {
        slice_id: job.slice_id.clone(),
        logical_date: job.logical_date.clone(),
        params: job.params.clone(),
        input_schema,
        batch_rows: job.batch_rows,
    };
    super::side::feed(t, &job.sides, job.batch_rows)?;
    match feed {
        Feed::Nothing => {
            let empty = std::sync::Arc::new(arrow::datatypes::Schema::empty());
            execute(
                t,
                &ctx(empty),
                crate::execute::batches(std::iter::empty()),
                sink,
            )
        }
        Feed::Read(reader) => {
            let ctx = ctx(reader.schema());
            execute(t, &ctx, |c| reader.narrow(c), sink)
        }
        Feed::Ahead(reader, progress) => {
            let ctx = ctx(reader.schema());
            let batches = |declared: &Declared| {
                Ok(reader.narrow(declared)?.prefetch(2).inspect(|b| {
                    if let Ok(b) = b {
                        progress.inc(b.num_rows() as u64);
                    }
                }))
            };
            execute(t, &ctx, batches, sink)
        }
    }
}
