//! Slice ownership: which data files hold which slice's rows, and whether
//! the table still holds exactly what idem committed for a slice.
//!
//! Every data file idem adds carries Delta `tags`: the slice id, the slice's
//! commit sequence number and the file's position in the output. Tags live
//! in the `add` actions, so they survive checkpoints and log cleanup. Each
//! commit also records how many files it added, as the app transaction
//! `idem:nfiles:<slice>:<seq>`. From these the current snapshot alone tells
//! whether a slice's rows are intact: a DELETE, UPDATE, RESTORE or foreign
//! write that touched them leaves files without idem's tags, files of an
//! older sequence number, or fewer files than were committed.

use std::collections::HashMap;

use deltalake::DeltaTable;
use deltalake::kernel::Add;
use futures::TryStreamExt;

use crate::slice::Partition;
use crate::table::error::TableError;

/// Tag: the slice a data file belongs to.
pub(super) const TAG_SLICE: &str = "idem.slice";
/// Tag: the slice's commit sequence number that added the file.
pub(super) const TAG_SEQ: &str = "idem.seq";
/// Tag: the file's position in the slice's output (read order).
pub(super) const TAG_PART: &str = "idem.part";

/// A tag's value on a data file.
pub(super) fn tag<'a>(add: &'a Add, key: &str) -> Option<&'a str> {
    add.tags.as_ref()?.get(key)?.as_deref()
}

/// Whether `add` lies in `partition` (every level).
pub(super) fn in_partition(add: &Add, partition: &Partition) -> bool {
    partition.holds(|column| add.partition_values.get(column).and_then(|v| v.as_deref()))
}

/// The tags idem puts on the `index`-th data file of a slice's output.
pub(super) fn tags(slice: &str, seq: i64, index: usize) -> HashMap<String, Option<String>> {
    HashMap::from([
        (TAG_SLICE.to_string(), Some(slice.to_string())),
        (TAG_SEQ.to_string(), Some(seq.to_string())),
        (TAG_PART.to_string(), Some(index.to_string())),
    ])
}

/// Every data file of the table's loaded snapshot, as `add` actions (with
/// their tags).
pub(super) async fn data_files(delta: &DeltaTable) -> Result<Vec<Add>, TableError> {
    if delta.version().is_none() {
        return Ok(Vec::new());
    }
    let views: Vec<_> = delta
        .get_active_add_actions_by_partitions(&[])
        .try_collect()
        .await
        .map_err(|e| TableError::Delta {
            what: "listing the table's data files".into(),
            detail: e.to_string(),
        })?;
    #[allow(deprecated)] // the file view's Arrow form has no tags accessor
    let adds = views.iter().map(|v| v.add_action()).collect();
    Ok(adds)
}

/// The slice's data files, in output order.
pub(super) fn slice_files<'a>(files: &'a [Add], slice: &str) -> Vec<&'a Add> {
    let mut mine: Vec<&Add> = files
        .iter()
        .filter(|f| tag(f, TAG_SLICE) == Some(slice))
        .collect();
    mine.sort_by_key(|f| {
        tag(f, TAG_PART)
            .and_then(|p| p.parse::<usize>().ok())
            .unwrap_or(usize::MAX)
    });
    mine
}

/// Why the table no longer holds exactly what idem committed for `slice` at
/// `seq` (`None` when it does). `nfiles` is the number of files that commit
/// added; `partition` the partition the slice owns (overwrite-partition),
/// `None` for append, where any file no slice owns may hold this slice's
/// rows (rewritten by a DELETE or OPTIMIZE).
pub(super) fn drift(
    files: &[Add],
    slice: &str,
    seq: i64,
    nfiles: Option<i64>,
    partition: Option<&Partition>,
) -> Option<String> {
    if partition.is_none() {
        let foreign = untagged(files);
        if let Some(f) = foreign.first() {
            return Some(format!(
                "the table holds {} data file(s) that idem did not write (e.g. {})",
                foreign.len(),
                f.path
            ));
        }
    }
    let mine = slice_files(files, slice);
    if let Some(f) = mine.iter().find(|f| f.deletion_vector.is_some()) {
        return Some(format!(
            "data file {} has a deletion vector: another writer deleted rows of the slice in place",
            f.path
        ));
    }
    if let Some(old) = mine
        .iter()
        .find(|f| tag(f, TAG_SEQ) != Some(&seq.to_string()))
    {
        return Some(format!(
            "data file {} holds rows of an earlier commit of the slice (seq {}, current {seq}): the table was restored or edited by another writer",
            old.path,
            tag(old, TAG_SEQ).unwrap_or("?")
        ));
    }
    let Some(expected) = nfiles else {
        return Some(
            "the table does not record which data files hold the slice (committed by an older idem)"
                .into(),
        );
    };
    if mine.len() as i64 != expected {
        return Some(format!(
            "the slice's commit added {expected} data file(s) but the table now holds {} of them: a DELETE, UPDATE, RESTORE or another writer changed its rows",
            mine.len()
        ));
    }
    if let Some(p) = partition
        && let Some(f) = mine.iter().find(|f| !in_partition(f, p))
    {
        return Some(format!(
            "the slice's data file {} lies outside partition {p} (the slice moved partitions)",
            f.path
        ));
    }
    if let Some(p) = partition
        && let Some(foreign) = files
            .iter()
            .find(|f| in_partition(f, p) && tag(f, TAG_SLICE) != Some(slice))
    {
        return Some(format!(
            "partition {p} holds data file {} that idem did not commit for this slice (another writer added rows)",
            foreign.path
        ));
    }
    None
}

/// The slice that owns `partition`, if another than `slice` holds files
/// in it.
pub(super) fn other_owner<'a>(
    files: &'a [Add],
    slice: &str,
    partition: &Partition,
) -> Option<&'a str> {
    files
        .iter()
        .filter(|f| in_partition(f, partition))
        .filter_map(|f| tag(f, TAG_SLICE))
        .find(|owner| *owner != slice)
}

/// Data files that belong to no slice's current commit: untagged, tagged
/// for a slice with no current commit, or of another sequence number than
/// the one current for its slice (`owners`: slice -> current seq). What
/// audit reports for the table as a whole: every live file belongs to
/// exactly one slice, wherever it lies.
pub(super) fn unowned<'a>(files: &'a [Add], owners: &HashMap<&str, i64>) -> Vec<&'a Add> {
    files
        .iter()
        .filter(|f| {
            let owner = tag(f, TAG_SLICE).and_then(|s| owners.get(s));
            owner.is_none_or(|seq| tag(f, TAG_SEQ) != Some(seq.to_string().as_str()))
        })
        .collect()
}

/// Data files that no idem commit tagged (written by another writer, or
/// rewritten by a DELETE/UPDATE/OPTIMIZE).
pub(super) fn untagged(files: &[Add]) -> Vec<&Add> {
    files
        .iter()
        .filter(|f| tag(f, TAG_SLICE).is_none())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn add(path: &str, part: Option<&str>, t: Option<(&str, i64, usize)>) -> Add {
        Add {
            path: path.into(),
            partition_values: part
                .map(|p| HashMap::from([("date".to_string(), Some(p.to_string()))]))
                .unwrap_or_default(),
            size: 1,
            modification_time: 0,
            data_change: true,
            stats: None,
            tags: t.map(|(s, q, i)| tags(s, q, i)),
            deletion_vector: None,
            base_row_id: None,
            default_row_commit_version: None,
            clustering_provider: None,
        }
    }

    #[test]
    fn intact_slices_pass_and_every_kind_of_drift_is_named() {
        let d1 = Partition::one("date", "d1");
        let p = Some(&d1);
        let files = vec![
            add("a", Some("d1"), Some(("s", 2, 1))),
            add("b", Some("d1"), Some(("s", 2, 0))),
            add("c", Some("d2"), Some(("t", 1, 0))),
        ];
        assert_eq!(drift(&files, "s", 2, Some(2), p), None);
        let order: Vec<&str> = slice_files(&files, "s")
            .iter()
            .map(|f| f.path.as_str())
            .collect();
        assert_eq!(order, ["b", "a"]);
        // A file gone (DELETE rewrote it without tags).
        let r = drift(&files[1..], "s", 2, Some(2), p).unwrap();
        assert!(r.contains("holds 1 of them"), "{r}");
        // A file of an older commit (RESTORE).
        let mut old = files.clone();
        old[0] = add("a0", Some("d1"), Some(("s", 1, 1)));
        assert!(drift(&old, "s", 2, Some(2), p).unwrap().contains("seq 1"));
        // A foreign file in the partition.
        let mut foreign = files.clone();
        foreign.push(add("x", Some("d1"), None));
        assert!(drift(&foreign, "s", 2, Some(2), p).unwrap().contains("x"));
        // No record of the file count.
        assert!(drift(&files, "s", 2, None, p).is_some());
        // Ownership.
        let d2 = Partition::one("date", "d2");
        assert_eq!(other_owner(&files, "s", &d2), Some("t"));
        assert_eq!(other_owner(&files, "t", &d2), None);
        assert_eq!(untagged(&foreign).len(), 1);
        // Table-wide: every file belongs to a current slice commit.
        let owners = HashMap::from([("s", 2), ("t", 1)]);
        assert!(unowned(&files, &owners).is_empty());
        let mut stray = files.clone();
        stray.push(add("far", Some("2099-01-01"), None));
        stray.push(add("gone", Some("d3"), Some(("u", 1, 0))));
        stray.push(add("old", Some("d2"), Some(("t", 0, 0))));
        let names: Vec<&str> = unowned(&stray, &owners)
            .iter()
            .map(|f| f.path.as_str())
            .collect();
        assert_eq!(names, ["far", "gone", "old"]);
    }
}
