//! What a slice adds to and removes from each file's rows: its constant
//! (partition) columns and its row filter.

use std::sync::Arc;

use arrow::array::{ArrayRef, StringArray};
use arrow::record_batch::RecordBatch;

use super::error::SliceError;
use super::resolve::ResolvedSlice;

impl ResolvedSlice {
    /// `batch` without the rows [`ResolvedSlice::row_filter`] drops, and
    /// without its column.
    pub(super) fn filter_rows(
        &self,
        path: &str,
        batch: RecordBatch,
    ) -> Result<RecordBatch, SliceError> {
        let Some((column, values)) = &self.row_filter else {
            return Ok(batch);
        };
        let bad = |detail: String| SliceError::Malformed {
            path: path.to_string(),
            detail,
        };
        let col = batch.column_by_name(column).ok_or_else(|| {
            bad(format!(
                "no column `{column}` to select slice `{}` by",
                crate::text::clip_str(&values.join("`, `"), 300)
            ))
        })?;
        let text = arrow::compute::cast(col, &arrow::datatypes::DataType::Utf8)
            .map_err(|e| bad(format!("column `{column}`: {e}")))?;
        let mut keep = arrow::array::BooleanArray::from(vec![false; text.len()]);
        for value in values {
            let want = StringArray::new_scalar(value.as_str());
            let this = arrow::compute::kernels::cmp::eq(&text, &want)
                .map_err(|e| bad(format!("column `{column}`: {e}")))?;
            keep = arrow::compute::or(&keep, &this).map_err(|e| bad(e.to_string()))?;
        }
        let mut kept =
            arrow::compute::filter_record_batch(&batch, &keep).map_err(|e| bad(e.to_string()))?;
        if let Ok(i) = kept.schema().index_of(column) {
            kept.remove_column(i);
        }
        Ok(kept)
    }

    /// The constant columns of `input` for a batch of `rows` rows.
    pub(super) fn constant_columns(
        &self,
        input: &str,
        rows: usize,
    ) -> Result<Vec<ArrayRef>, SliceError> {
        let values = self.constants.get(input);
        let mut out = Vec::with_capacity(self.constant_fields.len());
        for (i, f) in self.constant_fields.iter().enumerate() {
            let v = values.and_then(|v| v.get(i)).cloned().flatten();
            let text: ArrayRef = Arc::new(StringArray::from(vec![v.as_deref(); rows]));
            let typed =
                arrow::compute::cast(&text, f.data_type()).map_err(|e| SliceError::Malformed {
                    path: input.to_string(),
                    detail: format!("partition value of `{}`: {e}", f.name()),
                })?;
            out.push(typed);
        }
        Ok(out)
    }
}
