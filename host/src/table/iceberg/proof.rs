//! What an Iceberg table itself says about each slice, for `idem audit`
//! and `idem verify`: each slice's current commit (from its record), the
//! files no slice owns, and the rows the table holds for a slice now (read
//! back and digested).

use iceberg::spec::DataContentType;

use super::Iceberg;
use super::MODE_PROP;
use super::ownership::{file_index, owned_by, slice_tag};
use super::properties::{SLICE_PROP, SliceRecord};
use super::schema::strip_field_ids;
use crate::digest::{Digest, OutputDigester};
use crate::slice::Partition;
use crate::table::error::TableError;
use crate::table::readback::digest_file;
use crate::table::record::SliceCommit;

impl Iceberg {
    /// Every slice's current commit (from the table's properties) with
    /// the snapshot summaries' details.
    pub async fn slice_commits(&self) -> Result<Vec<SliceCommit>, TableError> {
        let Some(m) = self.metadata() else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        // From the slices' records alone: the snapshots that made them
        // current may have been expired.
        for (k, v) in m.properties() {
            let Some(slice) = k.strip_prefix(SLICE_PROP) else {
                continue;
            };
            let Ok(rec) = serde_json::from_str::<SliceRecord>(v) else {
                continue;
            };
            out.push(SliceCommit {
                slice: slice.to_string(),
                seq: rec.seq,
                version: rec.version,
                mode: m.properties().get(MODE_PROP).cloned().unwrap_or_default(),
                partition: rec.partition.clone(),
                manifest_digest: Digest::parse(&rec.manifest).ok(),
                output_digest: Digest::parse(&rec.output).ok(),
                envelope_digest: rec.envelope.as_deref().and_then(|e| Digest::parse(e).ok()),
                run_key: Digest::parse(&rec.run_key).ok(),
                output_columns: rec.columns.clone(),
                current: true,
            });
        }
        out.sort_by(|a, b| a.slice.cmp(&b.slice));
        Ok(out)
    }

    /// Why the table no longer holds exactly the rows of `c` (`None` when
    /// it does).
    pub async fn slice_drift(&self, c: &SliceCommit) -> Result<Option<String>, TableError> {
        let Some(rec) = self.record(&c.slice) else {
            return Ok(Some("the table no longer records the slice".into()));
        };
        let partition = rec.partition.as_deref().and_then(Partition::from_spelled);
        let live = self.live_files().await?;
        Ok(Self::drift(&live, &c.slice, &rec, partition.as_ref()))
    }

    /// Read the slice's rows back from its data files, in output order,
    /// and digest them as a run digests its output.
    pub async fn digest_slice_rows(&self, c: &SliceCommit) -> Result<(Digest, u64), TableError> {
        let tag = slice_tag(&c.slice);
        let mut files: Vec<String> = self
            .live_files()
            .await?
            .into_iter()
            .filter(|l| {
                l.file.content_type() == DataContentType::Data && owned_by(l.file.file_path(), &tag)
            })
            .map(|l| l.file.file_path().to_string())
            .collect();
        files.sort_by_key(|p| file_index(p));
        let partition = c.partition.as_deref().and_then(Partition::from_spelled);
        let mut digester = OutputDigester::new();
        for path in files {
            let err = |e: &dyn std::fmt::Display| TableError::Iceberg {
                what: format!("reading data file {path}"),
                detail: e.to_string(),
            };
            let bytes = self
                .io
                .new_input(&path)
                .map_err(|e| err(&e))?
                .read()
                .await
                .map_err(|e| err(&e))?;
            digest_file(
                bytes,
                c.output_columns.as_deref(),
                partition.as_ref(),
                strip_field_ids,
                &mut digester,
            )
            .map_err(|e| err(&e))?;
        }
        let rows = digester.rows();
        Ok((digester.finish(), rows))
    }

    /// Data files of the current snapshot that belong to no slice's current
    /// commit (by the slice tag in their names). Empty for a merge table,
    /// whose files are shared by key.
    pub async fn unowned_files(&self, commits: &[SliceCommit]) -> Result<Vec<String>, TableError> {
        let mode = self.metadata().and_then(|m| m.properties().get(MODE_PROP));
        if mode.map(String::as_str) == Some("merge") {
            return Ok(Vec::new());
        }
        let tags: Vec<String> = commits
            .iter()
            .filter(|c| c.current)
            .map(|c| slice_tag(&c.slice))
            .collect();
        Ok(self
            .live_files()
            .await?
            .into_iter()
            .filter(|l| l.file.content_type() == DataContentType::Data)
            .map(|l| l.file.file_path().to_string())
            .filter(|p| !tags.iter().any(|t| owned_by(p, t)))
            .collect())
    }

    /// `shape_drift` of slice `c`, for audit.
    pub fn slice_shape_drift(&self, c: &SliceCommit) -> Option<String> {
        self.shape_drift(&self.record(&c.slice)?)
    }
}
