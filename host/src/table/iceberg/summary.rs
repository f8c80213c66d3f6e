//! A new snapshot's summary (what engines show: data files, rows and bytes
//! added, deleted and in total; and idem's keys, see `record::keys`) and
//! the snapshot itself.

use std::collections::HashMap;

use iceberg::spec::{DataContentType, DataFile, Operation, Snapshot, Summary, TableMetadata};

use super::live::Live;
use super::manifests::NewSnapshot;
use crate::table::commit::CommitRequest;
use crate::table::record;

/// The summary of the slice's commit `seq` of `req` (by the process whose
/// commits carry `attempt`): `files` added, `removed` deleted from the
/// `live` files.
pub(super) fn summary(
    req: &CommitRequest<'_>,
    seq: i64,
    attempt: &str,
    live: &[Live],
    removed: &[&Live],
    files: &[DataFile],
) -> HashMap<String, String> {
    let added_rows: u64 = files.iter().map(|f| f.record_count()).sum();
    let deleted_rows: u64 = removed.iter().map(|l| l.file.record_count()).sum();
    let live_data: Vec<&Live> = live
        .iter()
        .filter(|l| l.file.content_type() == DataContentType::Data)
        .collect();
    let total_files = live_data.len() - removed.len() + files.len();
    let total_rows: u64 =
        live_data.iter().map(|l| l.file.record_count()).sum::<u64>() - deleted_rows + added_rows;
    let mut props: HashMap<String, String> = HashMap::from([
        ("added-data-files".into(), files.len().to_string()),
        ("added-records".into(), added_rows.to_string()),
        ("deleted-data-files".into(), removed.len().to_string()),
        ("deleted-records".into(), deleted_rows.to_string()),
        ("total-data-files".into(), total_files.to_string()),
        ("total-records".into(), total_rows.to_string()),
        (
            "total-delete-files".into(),
            (live.len() - live_data.len()).to_string(),
        ),
        (
            "total-files-size".into(),
            (live
                .iter()
                .map(|l| l.file.file_size_in_bytes())
                .sum::<u64>()
                - removed
                    .iter()
                    .map(|l| l.file.file_size_in_bytes())
                    .sum::<u64>()
                + files.iter().map(|f| f.file_size_in_bytes()).sum::<u64>())
            .to_string(),
        ),
    ]);
    // A summary holds text: idem's keys as text.
    props.extend(
        record::keys(req, seq, attempt, Some(files.len()))
            .into_iter()
            .map(|(k, v)| (k, record::as_text(&v))),
    );
    props
}

/// The snapshot `snap` of the table `m`, listing its manifests at
/// `list_path`, with the summary `props`; `overwrite`: it deletes files.
pub(super) fn snapshot(
    snap: &NewSnapshot,
    m: &TableMetadata,
    list_path: String,
    props: HashMap<String, String>,
    overwrite: bool,
) -> Snapshot {
    let operation = if overwrite {
        Operation::Overwrite
    } else {
        Operation::Append
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
        .max(m.last_updated_ms() + 1);
    Snapshot::builder()
        .with_snapshot_id(snap.snapshot_id)
        .with_parent_snapshot_id(snap.parent.as_ref().map(|p| p.snapshot_id()))
        .with_sequence_number(snap.seq_no)
        .with_timestamp_ms(now)
        .with_manifest_list(list_path)
        .with_summary(Summary {
            operation,
            additional_properties: props,
        })
        .with_schema_id(snap.schema.schema_id())
        .build()
}
