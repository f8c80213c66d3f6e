//! Which data files hold which slice's rows in an Iceberg table: a slice
//! owns the data files whose names start with `idem-<16 hex of
//! sha256(slice)>-`; files with other names are another writer's. From
//! the names alone the table tells whether it still holds exactly what a
//! slice's commit added.

use iceberg::spec::{DataContentType, DataFile, TableMetadata, Transform};

use super::Iceberg;
use super::live::Live;
use super::properties::SliceRecord;
use crate::digest::Digest;
use crate::slice::Partition;

/// The first 16 hex digits of sha256(slice): the prefix of its files.
pub(super) fn slice_tag(slice: &str) -> String {
    Digest::of_bytes(slice.as_bytes()).hex()[..16].to_string()
}

/// A data file's name (the last part of its path).
pub(super) fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// Whether the file at `path` is one of the slice's whose tag is `tag`.
pub(super) fn owned_by(path: &str, tag: &str) -> bool {
    file_name(path).starts_with(&format!("idem-{tag}-"))
}

/// The position of a slice's file in its output (from its name).
pub(super) fn file_index(path: &str) -> u64 {
    file_name(path)
        .split('-')
        .nth(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or(u64::MAX)
}

/// A digest of the files' names: sorted, one per line, sha256.
pub(super) fn names_digest(paths: &mut [String]) -> String {
    paths.sort();
    Digest::of_bytes(paths.join("\n").as_bytes())
        .hex()
        .to_string()
}

/// The one data file a position delete file applies to, when it says
/// (v3's `referenced_data_file`, else equal bounds on its `file_path`
/// column, field id 2147483546).
pub(super) fn deleted_file(f: &DataFile) -> Option<String> {
    if f.content_type() != DataContentType::PositionDeletes {
        return None;
    }
    if let Some(p) = f.referenced_data_file() {
        return Some(p);
    }
    const FILE_PATH: i32 = 2147483546;
    let text = |d: Option<&iceberg::spec::Datum>| match d.map(|d| d.literal()) {
        Some(iceberg::spec::PrimitiveLiteral::String(s)) => Some(s.clone()),
        _ => None,
    };
    let (lo, hi) = (
        text(f.lower_bounds().get(&FILE_PATH)),
        text(f.upper_bounds().get(&FILE_PATH)),
    );
    lo.filter(|lo| Some(lo) == hi.as_ref())
}

/// Whether a data file lies in the identity partition `partition` (the
/// table has one partition field per level, in the levels' order: what
/// idem creates and checks before it writes).
pub(super) fn in_partition(l: &Live, partition: &Partition) -> bool {
    let p = l.file.partition();
    // A file of an earlier spec has values of other fields.
    l.current_spec
        && p.fields().len() == partition.levels().len()
        && p.fields()
            .iter()
            .zip(partition.levels())
            .all(|(field, (_, value))| super::partition_value::holds(field.as_ref(), value))
}

/// Whether a data file lies in `partition` as a reader selects it: by
/// column name, through the table's identity partition fields (its
/// current spec; the caller refuses files of another spec), so
/// `date=D` selects every hour of D in a table partitioned by date and
/// hour.
pub(super) fn selected_by(f: &DataFile, m: &TableMetadata, partition: &Partition) -> bool {
    let schema = m.current_schema();
    let columns: Vec<Option<&iceberg::spec::NestedField>> = m
        .default_partition_spec()
        .fields()
        .iter()
        .map(|pf| {
            (pf.transform == Transform::Identity)
                .then(|| schema.field_by_id(pf.source_id).map(|s| s.as_ref()))
                .flatten()
        })
        .collect();
    let values = f.partition().fields();
    if values.len() != columns.len() {
        return false;
    }
    partition.levels().iter().all(|(column, value)| {
        let Some(i) = columns
            .iter()
            .position(|c| c.is_some_and(|c| c.name == *column))
        else {
            return false;
        };
        let t = columns[i].and_then(|c| c.field_type.as_primitive_type());
        values.get(i).is_some_and(|lit| match t {
            Some(t) => super::partition_value::is(lit.as_ref(), value, t),
            None => false,
        })
    })
}

impl Iceberg {
    /// Why the table no longer holds exactly the slice's committed files
    /// (`None` when it does).
    pub(super) fn drift(
        live: &[Live],
        slice: &str,
        rec: &SliceRecord,
        partition: Option<&Partition>,
    ) -> Option<String> {
        let tag = slice_tag(slice);
        let data: Vec<&Live> = live
            .iter()
            .filter(|l| l.file.content_type() == DataContentType::Data)
            .collect();
        let mut mine: Vec<String> = data
            .iter()
            .filter(|l| owned_by(l.file.file_path(), &tag))
            .map(|l| file_name(l.file.file_path()).to_string())
            .collect();
        if let Some(partition) = partition {
            let foreign = data
                .iter()
                .find(|l| in_partition(l, partition) && !owned_by(l.file.file_path(), &tag));
            if let Some(f) = foreign {
                return Some(format!(
                    "another writer added {} to partition {partition}",
                    f.file.file_path()
                ));
            }
        }
        if mine.len() != rec.files || names_digest(&mut mine) != rec.names {
            return Some(format!(
                "the table holds {} of the slice's data files, not the {} its commit added (another writer removed or rewrote them)",
                mine.len(),
                rec.files
            ));
        }
        // Row-level deletes written after the slice's commit may hide its
        // rows (idem never writes delete files): position deletes that name
        // one data file count for that file's slice only; the others (an
        // equality delete, a position delete over many files) for every
        // slice they may reach.
        if let Some(d) = live.iter().find(|l| {
            l.file.content_type() != DataContentType::Data
                && l.seq as u64 > rec.version
                && match deleted_file(&l.file) {
                    Some(target) => owned_by(&target, &tag),
                    None => partition.is_none_or(|p| {
                        in_partition(l, p) || l.file.partition().fields().is_empty()
                    }),
                }
        }) {
            return Some(format!(
                "another writer added the delete file {} after the slice's commit",
                d.file.file_path()
            ));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use iceberg::spec::{DataFileBuilder, DataFileFormat};

    fn file(path: &str, content: DataContentType) -> DataFile {
        DataFileBuilder::default()
            .content(content)
            .file_path(path.to_string())
            .file_format(DataFileFormat::Parquet)
            .record_count(1)
            .file_size_in_bytes(1)
            .build()
            .unwrap()
    }

    fn position_delete(of: &str) -> DataFile {
        let d = iceberg::spec::Datum::string(of);
        DataFileBuilder::default()
            .content(DataContentType::PositionDeletes)
            .file_path("file:///w/t/data/del.parquet".to_string())
            .file_format(DataFileFormat::Parquet)
            .record_count(1)
            .file_size_in_bytes(1)
            .lower_bounds(HashMap::from([(2147483546, d.clone())]))
            .upper_bounds(HashMap::from([(2147483546, d)]))
            .build()
            .unwrap()
    }

    #[test]
    fn a_delete_file_counts_against_the_slices_it_can_reach() {
        let (a, b) = ("2026-10-01", "2026-10-02");
        let path = |s: &str| format!("file:///w/t/data/idem-{}-00000-n.parquet", slice_tag(s));
        let rec = |s: &str| {
            let mut names = vec![file_name(&path(s)).to_string()];
            SliceRecord {
                seq: 1,
                output: "sha256:x".into(),
                version: 2,
                files: 1,
                names: names_digest(&mut names),
                attempt: String::new(),
                partition: None,
                run_key: String::new(),
                manifest: String::new(),
                columns: None,
                snapshot: 0,
                schema: None,
                envelope: None,
            }
        };
        let live = |extra: Vec<(DataFile, i64)>| {
            let mut v: Vec<Live> = [a, b]
                .iter()
                .map(|s| Live {
                    file: file(&path(s), DataContentType::Data),
                    seq: 1,
                    manifest: "m".into(),
                    current_spec: true,
                })
                .collect();
            v.extend(extra.into_iter().map(|(file, seq)| Live {
                file,
                seq,
                manifest: "d".into(),
                current_spec: true,
            }));
            v
        };
        // Intact.
        let t = live(vec![]);
        assert_eq!(Iceberg::drift(&t, a, &rec(a), None), None);
        // A position delete of one of a's files, after a's commit: a only.
        let t = live(vec![(position_delete(&path(a)), 3)]);
        assert!(
            Iceberg::drift(&t, a, &rec(a), None)
                .unwrap()
                .contains("delete file")
        );
        assert_eq!(Iceberg::drift(&t, b, &rec(b), None), None);
        // The same delete from before the commit does not apply.
        let t = live(vec![(position_delete(&path(a)), 2)]);
        assert_eq!(Iceberg::drift(&t, a, &rec(a), None), None);
        // An equality delete may reach every slice.
        let eq = file(
            "file:///w/t/data/eq.parquet",
            DataContentType::EqualityDeletes,
        );
        let t = live(vec![(eq, 3)]);
        assert!(Iceberg::drift(&t, a, &rec(a), None).is_some());
        assert!(Iceberg::drift(&t, b, &rec(b), None).is_some());
        // A removed or added file of the slice's.
        let mut t = live(vec![]);
        t.remove(0);
        assert!(
            Iceberg::drift(&t, a, &rec(a), None)
                .unwrap()
                .contains("0 of")
        );
        let mut t = live(vec![]);
        t.push(Live {
            file: file(&path(a).replace("00000", "00001"), DataContentType::Data),
            seq: 3,
            manifest: "m".into(),
            current_spec: true,
        });
        assert!(Iceberg::drift(&t, a, &rec(a), None).is_some());
    }

    #[test]
    fn slice_files_are_told_apart_by_name() {
        let tag = slice_tag("2026-10-01");
        let mine = format!("file:///w/t/data/day=x/idem-{tag}-00003-abc.parquet");
        assert!(owned_by(&mine, &tag));
        assert_eq!(file_index(&mine), 3);
        assert!(!owned_by(&mine, &slice_tag("2026-10-02")));
        assert!(!owned_by("file:///w/t/data/00000-0-foreign.parquet", &tag));
    }
}
