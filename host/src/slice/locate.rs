//! Where input files live: their store and URL, their names below a
//! common root, and the id of an explicit file list.

use std::ffi::OsStr;

use url::Url;

use super::error::SliceError;
use super::path::bad;
use crate::digest::Digest;
use crate::storage::{self, Store, as_dir};

pub(super) fn loc(s: &impl AsRef<OsStr>) -> String {
    s.as_ref().to_string_lossy().into_owned()
}

/// The locations of objects that must exist, in order: the first that
/// does not is the error. On object stores the HEADs go out many at once
/// ([`storage::sizes_of`]).
fn existing(files: &[impl AsRef<OsStr>]) -> Result<Vec<Url>, SliceError> {
    let urls = files
        .iter()
        .map(|f| storage::locate(&loc(f)))
        .collect::<Result<Vec<_>, _>>()?;
    let sizes = storage::sizes_of(&urls)?;
    if let Some((f, _)) = files.iter().zip(&sizes).find(|(_, s)| s.is_none()) {
        return Err(SliceError::NotFound(loc(f)));
    }
    Ok(urls)
}

/// The name of `url` relative to the directory `root`, `/`-separated and
/// percent-decoded (the raw object name); `None` when it is not below
/// `root`.
pub(super) fn rel_of(root: &Url, url: &Url) -> Option<String> {
    let root = as_dir(root);
    if !storage::contains(&root, url) {
        return None;
    }
    let skip = root.path().split('/').filter(|s| !s.is_empty()).count();
    let mut parts = Vec::new();
    for s in url.path().split('/').filter(|s| !s.is_empty()).skip(skip) {
        parts.push(storage::decode_segment(s).ok()?);
    }
    (!parts.is_empty()).then(|| parts.join("/"))
}

/// The default slice id of an explicit file list: a digest of the sorted,
/// canonical locations, so `d/a.parquet`, `./d/a.parquet` and the same
/// file named from another directory give one id, and equal relative names
/// in different directories do not.
pub fn files_id(files: &[impl AsRef<OsStr>]) -> Result<String, SliceError> {
    let mut abs = Vec::with_capacity(files.len());
    for url in existing(files)? {
        abs.push(match url.to_file_path() {
            Ok(p) if url.scheme() == "file" => p.as_os_str().as_encoded_bytes().to_vec(),
            _ => url.as_str().as_bytes().to_vec(),
        });
    }
    abs.sort();
    abs.dedup();
    let mut material = Vec::new();
    for p in &abs {
        material.extend_from_slice(p);
        material.push(0);
    }
    Ok(format!(
        "files-{}",
        &Digest::of_bytes(&material).hex()[..16]
    ))
}

/// What a dataset root holds instead of a missing partition of `key`,
/// for the message: the `key=` partitions there (the first and last
/// few; a local root's only: on an object store that listing reads every
/// page of the root, for each missing date of a backfill), or that the
/// root is itself a partition directory or a file (and what to give
/// instead). Best effort: empty when nothing can be said.
pub(super) fn nearby(store: &Store, key: &str, value: &str) -> String {
    let url = store.url();
    let last = url
        .path_segments()
        .and_then(|mut s| s.rfind(|s| !s.is_empty()))
        .map(|s| {
            percent_encoding::percent_decode_str(s)
                .decode_utf8_lossy()
                .to_string()
        })
        .unwrap_or_default();
    if last.starts_with(&format!("{key}=")) {
        let parent = url.join("../").map(|u| u.to_string()).unwrap_or_default();
        return format!(
            "; the input is itself the partition directory {last}/: give the dataset root, --input {parent}"
        );
    }
    let file = url.as_str().trim_end_matches('/');
    if let Ok((dir, name, _)) = Store::of_file(file)
        && dir.size(&name).ok().flatten().is_some()
    {
        return format!(
            "; the input is a file, not a dataset root: to read files, give them with --files {file}"
        );
    }
    if store.local_dir().is_none() {
        return String::new();
    }
    let Ok((folders, _)) = store.folders(usize::MAX) else {
        return String::new();
    };
    let prefix = format!("{key}=");
    let parts: Vec<&String> = folders.iter().filter(|f| f.starts_with(&prefix)).collect();
    let wanted = format!("{prefix}{value}");
    if parts.iter().any(|p| **p == wanted) {
        return format!("; {wanted}/ is there but holds no *.parquet files (it is empty)");
    }
    match parts.len() {
        0 if folders.is_empty() => "; the input holds no partition directories".into(),
        0 => {
            let some: Vec<&str> = folders.iter().take(5).map(String::as_str).collect();
            format!(
                "; it holds no {prefix} directories (it holds {}{}): check the partition column",
                some.join("/, "),
                if folders.len() > 5 { "/, ..." } else { "/" }
            )
        }
        n if n <= 6 => {
            let all: Vec<&str> = parts.iter().map(|p| p.as_str()).collect();
            format!("; the {prefix} partitions there are {}", all.join(", "))
        }
        n => {
            let at = parts.partition_point(|p| p.as_str() < wanted.as_str());
            let around: Vec<&str> = parts[at.saturating_sub(1)..(at + 1).min(n)]
                .iter()
                .map(|p| p.as_str())
                .collect();
            format!(
                "; the {prefix} partitions there run from {} to {} ({n} in all; around {wanted}: {})",
                parts[0],
                parts[n - 1],
                around.join(", ")
            )
        }
    }
}

/// [`nearby`] for a partition of one or more levels: said of the first
/// level that is missing (locally; on an object store, of the first), so
/// `date=2026-10-01/hour=07` lists the hours of that date when the date is
/// there and the hour is not.
pub(super) fn nearby_partition(store: &Store, partition: &super::Partition) -> String {
    let levels = partition.levels();
    let mut at = store.clone();
    let mut below = Vec::new();
    for (i, (key, value)) in levels.iter().enumerate() {
        let segment = format!("{key}={value}");
        // Descended locally only (a listing per level costs nothing there).
        let inner = at
            .local_dir()
            .map(|d| d.join(&segment))
            .filter(|d| d.is_dir())
            .and_then(|d| Store::at(d.to_str()?).ok());
        match inner {
            Some(inner) if i + 1 < levels.len() => {
                below.push(segment);
                at = inner;
            }
            _ if below.is_empty() => return nearby(&at, key, value),
            _ => return format!("{} (in {}/)", nearby(&at, key, value), below.join("/")),
        }
    }
    String::new()
}

/// The store `files` share and their names below their common parent.
pub(super) fn locate_files(
    id: &str,
    files: &[impl AsRef<OsStr>],
) -> Result<(Store, Vec<String>), SliceError> {
    super::path::validate_slice_id(id)?;
    let urls = existing(files)?;
    let Some(first) = urls.first() else {
        return Err(SliceError::Empty {
            slice: id.to_string(),
            root: "(no paths)".into(),
            hint: "pass at least one --input file".into(),
        });
    };
    let mut root = first
        .join("./")
        .map_err(|e| SliceError::NotFound(e.to_string()))?;
    for u in &urls[1..] {
        if !storage::same_store(u, &root) {
            return Err(SliceError::Stores {
                first: first.to_string(),
                other: u.to_string(),
            });
        }
        while !storage::contains(&root, u) {
            let Ok(up) = root.join("../") else { break };
            if up == root {
                break;
            }
            root = up;
        }
    }
    let store = Store::open(&root)?;
    let mut rels = Vec::with_capacity(urls.len());
    for u in &urls {
        rels.push(rel_of(&root, u).ok_or_else(|| {
            bad(
                "input path",
                u.as_str(),
                "it is not below the files' common directory",
                "",
            )
        })?);
    }
    Ok((store, rels))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_ids_follow_the_files_not_how_their_paths_are_typed() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let a = crate::sample::write_day(&d.join("one"), "1", 10, 2).unwrap();
        let b = crate::sample::write_day(&d.join("two"), "1", 10, 2).unwrap();
        std::os::unix::fs::symlink(d.join("one"), d.join("alias")).unwrap();
        let id = files_id(&a).unwrap();
        assert!(id.starts_with("files-"), "{id}");
        let spelled = vec![
            d.join("one/./date=1/part-00001.parquet"),
            d.join("two/../one/date=1/part-00000.parquet"),
        ];
        assert_eq!(files_id(&spelled).unwrap(), id);
        let aliased = vec![
            d.join("alias/date=1/part-00000.parquet"),
            d.join("alias/date=1/part-00001.parquet"),
            a[0].clone(),
        ];
        assert_eq!(files_id(&aliased).unwrap(), id);
        // Same relative names, other directory: another slice.
        assert_ne!(files_id(&b).unwrap(), id);
        assert_ne!(files_id(&a[..1]).unwrap(), id);
        assert!(matches!(
            files_id(&[d.join("nope.parquet")]),
            Err(SliceError::NotFound(_))
        ));
    }
}
