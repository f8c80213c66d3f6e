//! The live files of an Iceberg table's current (or pinned) snapshot,
//! read from its manifest list and manifests.

use iceberg::spec::{DataFile, FormatVersion, ManifestList};

use super::{Iceberg, ice_err};
use crate::table::error::TableError;

/// One live data or delete file of the current snapshot.
#[derive(Debug, Clone)]
pub(super) struct Live {
    pub(super) file: DataFile,
    /// Its data sequence number.
    pub(super) seq: i64,
    /// The manifest that lists it.
    pub(super) manifest: String,
    /// Written under the table's current partition spec (its partition
    /// values are of that spec's fields).
    pub(super) current_spec: bool,
}

impl Iceberg {
    /// Every live file of the current snapshot (data and deletes).
    pub(super) async fn live_files(&self) -> Result<Vec<Live>, TableError> {
        let Some(m) = self.metadata() else {
            return Ok(Vec::new());
        };
        let snap = match self.pinned {
            Some(id) => m.snapshot_by_id(id),
            None => m.current_snapshot(),
        };
        let Some(snap) = snap else {
            return Ok(Vec::new());
        };
        let list = self.manifest_list(snap.manifest_list()).await?;
        let mut out = Vec::new();
        for mf in list.entries() {
            let manifest = mf
                .load_manifest(&self.io)
                .await
                .map_err(ice_err(format!("reading manifest {}", mf.manifest_path)))?;
            for e in manifest.entries() {
                if !e.is_alive() {
                    continue;
                }
                out.push(Live {
                    file: e.data_file().clone(),
                    seq: e.sequence_number().unwrap_or(snap.sequence_number()),
                    manifest: mf.manifest_path.clone(),
                    current_spec: mf.partition_spec_id == m.default_partition_spec_id(),
                });
            }
        }
        Ok(out)
    }

    pub(super) async fn manifest_list(&self, path: &str) -> Result<ManifestList, TableError> {
        let bytes = self
            .io
            .new_input(path)
            .map_err(ice_err(format!("reading {path}")))?
            .read()
            .await
            .map_err(ice_err(format!("reading {path}")))?;
        ManifestList::parse_with_version(&bytes, FormatVersion::V2)
            .map_err(ice_err(format!("reading {path}")))
    }
}
