//! The manifests and manifest list of a new snapshot, written by idem
//! itself (the `iceberg` crate's transactions only fast-append): one
//! manifest of the added files, the parent's manifests kept as they are
//! or rewritten with the removed files marked deleted.

use std::collections::HashSet;

use iceberg::spec::{
    DataFile, ManifestContentType, ManifestFile, ManifestListWriter, ManifestWriterBuilder,
    PartitionSpec, SchemaRef, SnapshotRef, TableMetadata,
};

use super::live::Live;
use super::{Iceberg, ice_err};
use crate::table::error::TableError;

/// The snapshot a commit adds, as planned on the table's metadata.
pub(super) struct NewSnapshot {
    /// Its sequence number.
    pub seq_no: i64,
    pub snapshot_id: i64,
    /// The current snapshot, which it follows.
    pub parent: Option<SnapshotRef>,
    pub schema: SchemaRef,
    /// The default partition spec.
    pub spec: PartitionSpec,
    /// The table's `metadata/` folder.
    pub meta_dir: String,
    /// This process's commit id, shortened: in every file name it writes.
    pub uuid: String,
}

impl NewSnapshot {
    /// The next snapshot of the table `m`, by the process whose commits
    /// carry `attempt`.
    pub fn plan(m: &TableMetadata, attempt: &str) -> Result<Self, TableError> {
        Ok(NewSnapshot {
            seq_no: m.next_sequence_number(),
            snapshot_id: new_snapshot_id()?,
            parent: m.current_snapshot().cloned(),
            schema: m.current_schema().clone(),
            spec: m.default_partition_spec().as_ref().clone(),
            meta_dir: format!("{}/metadata", m.location().trim_end_matches('/')),
            uuid: attempt[..16].to_string(),
        })
    }
}

impl Iceberg {
    /// Write the snapshot's manifests and its manifest list: `files`
    /// added, `removed` marked deleted. The list's path.
    pub(super) async fn write_manifests(
        &self,
        snap: &NewSnapshot,
        m: &TableMetadata,
        files: &[DataFile],
        removed: &[&Live],
    ) -> Result<String, TableError> {
        let mut manifests: Vec<ManifestFile> = Vec::new();
        // The added files.
        if !files.is_empty() {
            manifests.push(self.added_manifest(snap, files).await?);
        }
        // Earlier manifests: kept as they are, or rewritten with the
        // removed files marked deleted.
        if let Some(parent) = &snap.parent {
            let removed_in: HashSet<&str> = removed.iter().map(|l| l.manifest.as_str()).collect();
            let gone: HashSet<&str> = removed.iter().map(|l| l.file.file_path()).collect();
            let list = self.manifest_list(parent.manifest_list()).await?;
            for (i, mf) in list.entries().iter().enumerate() {
                if !removed_in.contains(mf.manifest_path.as_str()) {
                    manifests.push(mf.clone());
                    continue;
                }
                let parent_id = parent.snapshot_id();
                manifests.push(
                    self.rewrite_manifest(snap, m, mf, i + 1, &gone, parent_id)
                        .await?,
                );
            }
        }
        self.write_manifest_list(snap, manifests).await
    }

    /// The manifest of the added files.
    async fn added_manifest(
        &self,
        snap: &NewSnapshot,
        files: &[DataFile],
    ) -> Result<ManifestFile, TableError> {
        let (meta_dir, uuid, snapshot_id) = (&snap.meta_dir, &snap.uuid, snap.snapshot_id);
        let out = self
            .io
            .new_output(format!("{meta_dir}/idem-{uuid}-{snapshot_id}-m0.avro"))
            .map_err(ice_err("writing a manifest"))?;
        let mut w = ManifestWriterBuilder::new(
            out,
            Some(snapshot_id),
            snap.schema.clone(),
            snap.spec.clone(),
        )
        .build_v2_data();
        for f in files {
            w.add_file(f.clone(), snap.seq_no)
                .map_err(ice_err("writing a manifest"))?;
        }
        w.write_manifest_file()
            .await
            .map_err(ice_err("writing a manifest"))
    }

    /// Manifest `mf` of the parent snapshot (`parent_id`) rewritten as the
    /// `n`-th manifest of the new one: its live entries kept, those of the
    /// `gone` files marked deleted.
    async fn rewrite_manifest(
        &self,
        snap: &NewSnapshot,
        m: &TableMetadata,
        mf: &ManifestFile,
        n: usize,
        gone: &HashSet<&str>,
        parent_id: i64,
    ) -> Result<ManifestFile, TableError> {
        let (meta_dir, uuid, snapshot_id) = (&snap.meta_dir, &snap.uuid, snap.snapshot_id);
        let old = mf
            .load_manifest(&self.io)
            .await
            .map_err(ice_err("reading a manifest"))?;
        let mspec = m
            .partition_spec_by_id(mf.partition_spec_id)
            .map(|s| s.as_ref().clone())
            .unwrap_or_else(|| snap.spec.clone());
        let out = self
            .io
            .new_output(format!("{meta_dir}/idem-{uuid}-{snapshot_id}-m{n}.avro"))
            .map_err(ice_err("writing a manifest"))?;
        let builder =
            ManifestWriterBuilder::new(out, Some(snapshot_id), snap.schema.clone(), mspec);
        let mut w = match mf.content {
            ManifestContentType::Data => builder.build_v2_data(),
            ManifestContentType::Deletes => builder.build_v2_deletes(),
        };
        for e in old.entries() {
            if !e.is_alive() {
                continue;
            }
            let seq = e.sequence_number().unwrap_or(0);
            let fseq = e.file_sequence_number.or(e.sequence_number());
            if gone.contains(e.data_file().file_path()) {
                w.add_delete_file(e.data_file().clone(), seq, fseq)
            } else {
                w.add_existing_file(
                    e.data_file().clone(),
                    e.snapshot_id().unwrap_or(parent_id),
                    seq,
                    fseq,
                )
            }
            .map_err(ice_err("rewriting a manifest"))?;
        }
        w.write_manifest_file()
            .await
            .map_err(ice_err("rewriting a manifest"))
    }

    /// The snapshot's manifest list; its path.
    async fn write_manifest_list(
        &self,
        snap: &NewSnapshot,
        manifests: Vec<ManifestFile>,
    ) -> Result<String, TableError> {
        let (meta_dir, uuid, snapshot_id) = (&snap.meta_dir, &snap.uuid, snap.snapshot_id);
        let list_path = format!("{meta_dir}/snap-{snapshot_id}-1-idem-{uuid}.avro");
        let writer = self
            .io
            .new_output(&list_path)
            .map_err(ice_err("writing the manifest list"))?
            .writer()
            .await
            .map_err(ice_err("writing the manifest list"))?;
        let mut lw = ManifestListWriter::v2(
            writer,
            snapshot_id,
            snap.parent.as_ref().map(|p| p.snapshot_id()),
            snap.seq_no,
        );
        lw.add_manifests(manifests.into_iter())
            .map_err(ice_err("writing the manifest list"))?;
        lw.close()
            .await
            .map_err(ice_err("writing the manifest list"))?;
        Ok(list_path)
    }
}

/// A random snapshot id (positive).
fn new_snapshot_id() -> Result<i64, TableError> {
    let mut b = [0u8; 8];
    getrandom::fill(&mut b).map_err(|e| TableError::Output(format!("no randomness: {e}")))?;
    Ok((i64::from_le_bytes(b) & i64::MAX).max(1))
}
