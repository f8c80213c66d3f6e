//! Writing a slice's output into data files of a Delta table (not yet
//! committed: nothing is visible until the log names them): ahead, while
//! the transform runs ([`Delta::data_writer`], overwrite-partition and
//! append), or from the staged output at commit time (when the output had
//! to be staged first: an audit module reads it before anything is
//! written).

use deltalake::DeltaTable;
use deltalake::kernel::Add;
use deltalake::writer::{DeltaWriter as _, RecordBatchWriter};

use super::Delta;
use crate::table::datafile::{
    staged_batches, target_file_bytes, typed_partition, with_nulls_for, with_partition,
    writer_properties,
};
use crate::table::error::TableError;
use crate::table::mode::Mode;
use crate::table::schema_change::SchemaChange;
use crate::table::write_ahead::{DataWriter, Plan, classify_write, write_err};

/// Rows per batch when streaming the staged output into data files.
const BATCH_ROWS: usize = 64 * 1024;

impl Delta {
    /// Start writing a slice's output into data files of this table while
    /// the transform runs (overwrite-partition and append); the files are
    /// committed by `Table::commit` with `Output::Written`. Checks first
    /// that the table takes this mode.
    pub fn data_writer(
        &self,
        rt: &tokio::runtime::Runtime,
        mode: &Mode,
        schema_change: SchemaChange,
    ) -> Result<DataWriter, TableError> {
        if matches!(mode, Mode::Merge { .. }) {
            return Err(TableError::Output(
                "a merge reads its output as a whole: it is staged, not written ahead".into(),
            ));
        }
        if self.delta.version().is_some() {
            self.check_mode(mode)?;
        }
        let plan = Plan {
            mode: mode.clone(),
            schema_change,
            file_bytes: target_file_bytes()?,
        };
        Ok(DataWriter::start(
            self.delta.clone(),
            plan,
            rt.handle().clone(),
        ))
    }
}

/// Write the staged Parquet files into new data files of `delta`, in order,
/// and return their `add` actions in output order (not yet committed).
pub(super) async fn write_staged(
    delta: &DeltaTable,
    staged: &[std::path::PathBuf],
    mode: &Mode,
    target_file_bytes: u64,
    schema_change: SchemaChange,
    added: &[arrow::datatypes::Field],
) -> Result<Vec<Add>, TableError> {
    if staged.is_empty() {
        return Ok(Vec::new());
    }
    let mut writer: Option<RecordBatchWriter> = None;
    for batch in staged_batches(staged, BATCH_ROWS) {
        let batch = with_partition(batch?, mode)?;
        let w = match writer.as_mut() {
            Some(w) => w,
            None => writer.insert(
                super::evolve::writer(delta, added)?
                    .with_target_file_size(target_file_bytes)
                    .with_writer_properties(
                        crate::encoding::tune(writer_properties(), &batch).build(),
                    ),
            ),
        };
        let batch = typed_partition(batch, mode, &w.arrow_schema())?;
        // An output that predates columns appended to the table: null there.
        let batch = match schema_change {
            SchemaChange::AppendNewColumns => with_nulls_for(batch, &w.arrow_schema())?,
            SchemaChange::Fail => batch,
        };
        w.write(batch).await.map_err(classify_write)?;
    }
    match writer.as_mut() {
        Some(w) => w.flush().await.map_err(write_err),
        None => Ok(Vec::new()),
    }
}
