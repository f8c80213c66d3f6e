//! Run a [`Transform`] natively, without a sandbox: for unit tests and as
//! the baseline that benchmarks compare the wasm build against.

use arrow::record_batch::RecordBatch;

#[cfg(not(target_arch = "wasm32"))]
use crate::Level;
use crate::{Context, Result, Transform};

#[cfg(not(target_arch = "wasm32"))]
/// Native log sink: lines go to stderr when `IDEM_GUEST_LOG` is set.
pub(crate) fn log(level: Level, message: &str) {
    if std::env::var_os("IDEM_GUEST_LOG").is_some() {
        eprintln!("[guest {level:?}] {message}");
    }
}

/// Run `T` over `batches` exactly as the host drives a guest: `open`, one
/// `push` per batch in order, `finish`. Returns the non-empty outputs.
pub fn run<T: Transform>(
    ctx: &Context,
    batches: impl IntoIterator<Item = RecordBatch>,
) -> Result<Vec<RecordBatch>> {
    let mut t = T::default();
    t.open(ctx)?;
    let columns = t.columns();
    // The host's checks (an empty or repeated declaration fails the run).
    if let Some(c) = &columns {
        if c.is_empty() {
            return Err(crate::Error(
                "columns(): an empty list (declare at least one column, or none for all)".into(),
            ));
        }
        let mut seen = std::collections::HashSet::new();
        if let Some(d) = c.iter().find(|n| !seen.insert(n.as_str())) {
            return Err(crate::Error(format!("columns(): `{d}` is declared twice")));
        }
    }
    let mut out = Vec::new();
    for b in batches {
        // As the host does: only the declared columns, in their order.
        let b = match &columns {
            None => b,
            Some(names) => project(&b, names)?,
        };
        out.extend(t.push(b)?.filter(|o| o.num_rows() > 0));
    }
    out.extend(t.finish()?.filter(|o| o.num_rows() > 0));
    Ok(out)
}

/// `batch` holding only the columns `names`, in that order (how a declared
/// column list narrows every batch, here and in the host). A name the batch
/// lacks is an error naming it.
pub fn project(batch: &RecordBatch, names: &[String]) -> Result<RecordBatch> {
    let at = names
        .iter()
        .map(|n| {
            batch
                .schema()
                .index_of(n)
                .map_err(|_| crate::Error(format!("the input has no column `{n}`")))
        })
        .collect::<Result<Vec<usize>>>()?;
    Ok(batch.project(&at)?)
}
