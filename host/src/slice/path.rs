//! Path rules: the names a slice is built from (partition values, slice
//! ids, the input paths a manifest records) stay inside the dataset root,
//! and a run's table stays outside it.

use std::path::Path;

use url::Url;

use super::error::SliceError;
use crate::storage::{self, as_dir};

const SEGMENT_RULE: &str = ", no `/` or `\\`";
const LEVEL_RULE: &str = "; a slice id is one name, or partition levels column=value/column=value (at most 4, each column once, 255 bytes in all)";

pub(super) fn bad(what: &str, value: &str, reason: &str, segment: &'static str) -> SliceError {
    SliceError::BadName {
        what: what.into(),
        value: crate::text::clip_str(value, 300).escape_debug().to_string(),
        reason: reason.into(),
        segment,
    }
}

/// Longest partition value or slice id: a path segment (255 bytes on
/// common file systems).
pub const MAX_SEGMENT_BYTES: usize = 255;

/// Check a name that becomes one path segment below the dataset root (a
/// partition column or value, a slice id): not empty, no `/` or `\`, no
/// NUL, not `.` or `..`, at most [`MAX_SEGMENT_BYTES`].
pub fn validate_segment(what: &str, value: &str) -> Result<(), SliceError> {
    let reason = if value.is_empty() {
        "it is empty"
    } else if value.contains(['/', '\\']) {
        "it contains a path separator"
    } else if value.contains('\0') {
        "it contains a NUL byte"
    } else if value == ".." || value == "." {
        "it is a relative path component"
    } else if value.len() > MAX_SEGMENT_BYTES {
        // A path segment longer than file systems allow, and a value the
        // commit repeats in every output row (partition and owner columns).
        "it is longer than 255 bytes"
    } else {
        return Ok(());
    };
    Err(bad(what, value, reason, SEGMENT_RULE))
}

/// The slice id a read of every slice under it is spelled with (`date=D/*`:
/// each slice whose id is `date=D/...`, a daily stage reading an hourly
/// stage's hours), or `None` for one slice's id.
pub fn under(spelled: &str) -> Option<&str> {
    spelled.strip_suffix("/*").filter(|p| !p.is_empty())
}

/// Most slices one read under a slice id takes (a day's hours by listed
/// values: 24 x a few; a table another writer flooded with app ids is
/// refused, not listed whole).
pub const MAX_SLICES_UNDER: usize = 10_000;

/// Check a slice id: one segment (`files-…`, `date=2026-10-01`), or the
/// levels of a nested partition (`date=2026-10-01/hour=07`, at most
/// [`super::MAX_LEVELS`]), each a segment [`validate_segment`] accepts.
pub fn validate_slice_id(id: &str) -> Result<(), SliceError> {
    let levels = id.split('/').count();
    if levels > super::MAX_LEVELS {
        let reason = format!("it has more than {} levels", super::MAX_LEVELS);
        return Err(bad("slice id", id, &reason, LEVEL_RULE));
    }
    if id.len() > MAX_SEGMENT_BYTES {
        // Repeated in every row of an append or merge table.
        return Err(bad(
            "slice id",
            id,
            "it is longer than 255 bytes",
            LEVEL_RULE,
        ));
    }
    if levels == 1 {
        return validate_segment("slice id", id);
    }
    // A `/` only between partition levels, each `column=value` with a
    // column of letters, digits and `_`, each column once, each value a
    // segment; refusals name the whole id.
    let whole = |reason: &str| bad("slice id", id, reason, LEVEL_RULE);
    let mut columns = Vec::new();
    for level in id.split('/') {
        let (column, value) = level
            .split_once('=')
            .filter(|(c, v)| {
                !c.is_empty()
                    && !v.is_empty()
                    && c.chars().all(|ch| ch.is_ascii_alphanumeric() || ch == '_')
            })
            .ok_or_else(|| whole("it contains a `/` that does not separate partition levels"))?;
        if columns.contains(&column) {
            return Err(whole("it names a column twice"));
        }
        if let Err(SliceError::BadName { reason, .. }) = validate_segment("slice id", value) {
            return Err(whole(&reason));
        }
        columns.push(column);
    }
    Ok(())
}

/// Check an input path as recorded in a manifest (relative to the slice
/// root, `/`-separated): not empty, not absolute, no `..` component (with
/// either separator), no NUL. `verify` refuses a manifest naming such a path.
pub fn validate_relative_path(path: &str) -> Result<(), SliceError> {
    let b = path.as_bytes();
    let drive = b.len() >= 2 && b[0].is_ascii_alphabetic() && b[1] == b':';
    let reason = if path.is_empty() {
        "it is empty"
    } else if path.contains('\0') {
        "it contains a NUL byte"
    } else if path.starts_with(['/', '\\']) || drive || Path::new(path).is_absolute() {
        "it is an absolute path"
    } else if path.split(['/', '\\']).any(|c| c == "..") {
        "it has a `..` component"
    } else {
        return Ok(());
    };
    Err(bad("input path", path, reason, ""))
}

/// Refuse a target table and an input root that contain one another
/// (either way): the run would read what it writes. Local paths are
/// compared canonically (symlinks resolved); the table need not exist yet.
pub fn check_not_inside(table: &Url, root: &Url) -> Result<(), SliceError> {
    let (t, r) = (as_dir(table), as_dir(root));
    if storage::contains(&r, &t) || storage::contains(&t, &r) {
        return Err(SliceError::Loop {
            table: table.to_string(),
            root: root.to_string(),
        });
    }
    Ok(())
}

/// `files` in the order a slice reads them: sorted, each once, and each a
/// name that leads back to its object from the root (it is recorded).
pub(super) fn read_order(mut files: Vec<String>) -> Result<Vec<String>, SliceError> {
    files.sort();
    files.dedup();
    for rel in &files {
        validate_relative_path(rel)?;
    }
    Ok(files)
}

/// The format a file's name says it is in, when that is one idem does
/// not read as a slice input (CSV, JSON).
pub(super) fn other_format(path: &str) -> Option<&'static str> {
    let name = path.rsplit('/').next().unwrap_or(path).to_ascii_lowercase();
    let name = name.strip_suffix(".gz").unwrap_or(&name);
    [
        (".csv", "CSV"),
        (".tsv", "TSV"),
        (".jsonl", "JSON lines"),
        (".ndjson", "JSON lines"),
        (".json", "JSON"),
    ]
    .into_iter()
    .find(|(ext, _)| name.ends_with(ext))
    .map(|(_, kind)| kind)
}

/// Why a file in `kind` is not read (`beside_parquet`: in a partition
/// of Parquet files), and what to do.
pub(super) fn other_format_detail(kind: &str, beside_parquet: bool) -> String {
    if kind == "JSON" {
        return "it is a JSON file (by its name): idem reads JSON lines, one object per line, named .jsonl, .ndjson or .json.gz; rename it if it is that, or convert it".into();
    }
    if beside_parquet {
        return format!(
            "it is a {kind} file (by its name) beside Parquet files, and a slice reads one format: move it to a dataset of its own"
        );
    }
    format!(
        "it is a {kind} file (by its name), and this command reads Parquet inputs: `idem run` reads {kind} inputs, or convert it to Parquet first"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slice_id_is_one_name_or_partition_levels() {
        for ok in [
            "files-0123",
            "date=2026-10-01",
            "date=2026-10-01/hour=07",
            "a=1/b=2/c=3/d=4",
        ] {
            validate_slice_id(ok).unwrap();
        }
        let long = format!("date={}/hour=07", "x".repeat(250));
        for (bad, says) in [
            ("a/b", "does not separate partition levels"),
            ("date=1/date=2", "names a column twice"),
            ("a b=1/c=2", "does not separate partition levels"),
            ("date=1//hour=2", "does not separate partition levels"),
            ("../x", "does not separate partition levels"),
            ("date=1/hour=..", "relative path component"),
            ("a=1/b=2/c=3/d=4/e=5", "more than 4 levels"),
            (long.as_str(), "longer than 255 bytes"),
        ] {
            let e = validate_slice_id(bad).unwrap_err().to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn a_table_and_an_input_root_that_contain_one_another_are_refused() {
        let u = |p: &Path| storage::locate(p.to_str().unwrap()).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::create_dir_all(d.join("data/date=1")).unwrap();
        std::os::unix::fs::symlink(d.join("data"), d.join("link")).unwrap();
        let loops = [
            d.join("data/out"),
            d.join("data/date=1/t"),
            d.join("link/new/table"),
            d.join("data"),
            d.to_path_buf(),
            d.join("elsewhere/../data/t"),
        ];
        for table in &loops {
            assert!(
                matches!(
                    check_not_inside(&u(table), &u(&d.join("data"))),
                    Err(SliceError::Loop { .. })
                ),
                "{}",
                table.display()
            );
        }
        for table in [d.join("table"), d.join("data2"), d.join("data/../t")] {
            check_not_inside(&u(&table), &u(&d.join("data"))).unwrap();
        }
        check_not_inside(&u(&d.join("t")), &u(&d.join("link"))).unwrap();
        assert!(check_not_inside(&u(&d.join("data/t")), &u(&d.join("link"))).is_err());
    }
}
