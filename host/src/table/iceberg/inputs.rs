//! A snapshot of an Iceberg table as a slice's input: its data files,
//! optionally one partition's or one slice's; row-level deletes are
//! refused by name.

use iceberg::spec::DataContentType;

use super::location::folder_url;
use super::ownership::{file_index, owned_by, selected_by, slice_tag};
use super::{Iceberg, MODE_PROP};
use crate::table::error::TableError;
use crate::table::readback::InputFile;

impl Iceberg {
    /// The data files of the pinned (or current) snapshot as a slice
    /// input, relative to the table's folder, optionally only partition
    /// `column = value`, or only slices `owners`' (their files; in a merge
    /// table every file, and `true`: keep the rows its owner column names).
    /// idem's files hold their partition column, so no values are added.
    pub async fn input_files(
        &self,
        partition: Option<&crate::slice::Partition>,
        owners: Option<&[String]>,
    ) -> Result<(Vec<InputFile>, bool), TableError> {
        let owner = owners.and_then(|o| o.first()).map(String::as_str);
        let m = self.metadata().ok_or_else(|| TableError::NoTable {
            location: self.location.clone(),
        })?;
        let unsupported = |detail: String| TableError::Iceberg {
            what: format!("reading {} as a slice", self.location),
            detail,
        };
        let mode = m.properties().get(MODE_PROP).map(String::as_str);
        let rows_of = match (owner, mode) {
            (None, _) => false,
            (Some(_), Some("merge")) => true,
            (Some(_), Some(_)) => false,
            (Some(owner), None) => {
                return Err(unsupported(format!(
                    "the rows of slice `{owner}` can only be selected in a table idem writes; this table was not created by idem. Read a version or a partition of it instead"
                )));
            }
        };
        let base = self.url.as_str();
        let mut out = Vec::new();
        for l in self.live_files().await? {
            if l.file.content_type() != DataContentType::Data {
                return Err(unsupported(format!(
                    "the snapshot has row-level delete files (e.g. {}), which idem cannot apply yet: compact the table first",
                    l.file.file_path()
                )));
            }
            let path = l.file.file_path();
            if let Some(p) = partition {
                // A file of an older spec (the partitioning evolved) would
                // be skipped silently: refused instead.
                if !l.current_spec {
                    return Err(unsupported(format!(
                        "data file {path} was written under another partition spec than the table's current one (its partitioning changed): idem selects --partition {p} by the current spec's columns only; read the whole version (no --partition) instead"
                    )));
                }
                if !selected_by(&l.file, m, p) {
                    continue;
                }
            }
            if let Some(owners) = owners
                && !rows_of
                && !owners.iter().any(|o| owned_by(path, &slice_tag(o)))
            {
                continue;
            }
            // Relative to the table's folder, as the object is named.
            let url = folder_url(path).map_err(|e| unsupported(format!("{path}: {e}")))?;
            let rel = url
                .as_str()
                .trim_end_matches('/')
                .strip_prefix(base)
                .map(|r| {
                    percent_encoding::percent_decode_str(r)
                        .decode_utf8_lossy()
                        .to_string()
                })
                .ok_or_else(|| {
                    unsupported(format!(
                        "data file {path} lies outside the table's folder {base}"
                    ))
                })?;
            out.push(InputFile {
                path: rel,
                partition_values: Vec::new(),
            });
        }
        // Slice by slice (in `owners`' order), each in output order (their
        // names number them).
        let rank = |path: &str| {
            owners.filter(|_| !rows_of).map_or(0, |o| {
                o.iter()
                    .position(|s| owned_by(path, &slice_tag(s)))
                    .unwrap_or(usize::MAX)
            })
        };
        out.sort_by(|a, b| {
            (rank(&a.path), file_index(&a.path), &a.path).cmp(&(
                rank(&b.path),
                file_index(&b.path),
                &b.path,
            ))
        });
        Ok((out, rows_of))
    }
}
