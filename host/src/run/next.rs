//! Step 1 for `--next`: the next range of an append-only prefix, after the
//! last object the target table consumed from it. The position (the last
//! name, the count and a fingerprint of every name consumed) is committed
//! with the output, so a range is consumed once and never skipped: an
//! object that arrives late, sorting at or before the position, fails the
//! run by name.

use super::RunError;
use crate::manifest::Manifest;
use crate::slice::{ResolvedSlice, SliceError};
use crate::table::{Progress, Table};

/// XOR of the sha256 of each name: a set's fingerprint that can be
/// extended one range at a time.
fn xor_names<'a>(names: impl Iterator<Item = &'a String>) -> [u8; 32] {
    use sha2::Digest as _;
    let mut out = [0u8; 32];
    for n in names {
        for (o, b) in out.iter_mut().zip(sha2::Sha256::digest(n.as_bytes())) {
            *o ^= b;
        }
    }
    out
}

/// The next range of an append-only prefix after the table's position.
pub(super) fn resolve_next(
    rt: &tokio::runtime::Runtime,
    table: Option<&Table>,
    root: &str,
    max_objects: usize,
    max_bytes: Option<u64>,
) -> Result<(ResolvedSlice, Progress), RunError> {
    if max_objects == 0 {
        return Err(RunError::Usage("--max-objects must be at least 1".into()));
    }
    let store = crate::storage::Store::at(root).map_err(SliceError::from)?;
    let source = store.url().to_string();
    let position = match table {
        Some(t) => position_of(rt, t, &source)?,
        None => None,
    };
    let listing = store.list("").map_err(SliceError::from)?;
    let mut names = of_one_format(listing.files, position.as_ref().map(|p| p.through.as_str()))?;
    names.sort();
    let (after, count) = match &position {
        Some(p) => (Some(p.through.clone()), p.count),
        None => (None, 0),
    };
    let recorded = position
        .as_ref()
        .and_then(|p| hex::decode(&p.names).ok())
        .and_then(|b| <[u8; 32]>::try_from(b).ok())
        .unwrap_or_default();
    if let (Some(through), Some(t)) = (&after, table) {
        check_no_late(rt, t, &source, through, &names, &recorded)?;
    }
    let take = take_range(names, after.as_deref(), max_objects, max_bytes);
    let Some(through) = take.last().cloned() else {
        return Err(RunError::UpToDate {
            prefix: source,
            through: after,
        });
    };
    let first = count + 1;
    let last = count + take.len() as u64;
    let mut consumed = recorded;
    for (c, n) in consumed.iter_mut().zip(xor_names(take.iter())) {
        *c ^= n;
    }
    // The source is in the id: two sources into one table never share a
    // slice (and so never replace each other's rows).
    let tag = crate::digest::Digest::of_bytes(source.as_bytes());
    let id = format!("next-{}-{first:06}-{last:06}", &tag.hex()[..8]);
    let slice = ResolvedSlice::from_names(&id, store.url(), take)?;
    Ok((
        slice,
        Progress {
            source,
            through,
            count: last,
            names: hex::encode(consumed),
            after: after.map(|a| (a, count)),
        },
    ))
}

/// The objects a prefix's runs read, by name (the order the source is
/// appended in): its Parquet ones, as always (other files beside them are
/// not read, and a position recorded over Parquet stays valid); in a
/// prefix of text files (CSV, TSV, JSON lines), or one whose position is
/// a text file, those. A Parquet object landing after a text position is
/// refused by name, never skipped.
fn of_one_format(
    files: Vec<crate::storage::Listed>,
    through: Option<&str>,
) -> Result<Vec<(String, u64)>, RunError> {
    let is_text = |n: &str| crate::slice::TextFormat::of_path(n).is_some();
    let text = match through {
        Some(t) => is_text(t),
        None => !files.iter().any(|f| f.rel.ends_with(".parquet")),
    };
    if text
        && let Some(p) = files
            .iter()
            .find(|f| f.rel.ends_with(".parquet") && through.is_none_or(|t| f.rel.as_str() > t))
    {
        return Err(SliceError::Refused {
            path: p.rel.clone(),
            why: "it is Parquet, and this prefix's runs read its text files (CSV, TSV, JSON lines)"
                .into(),
            fix: "land Parquet under a prefix of its own; a slice reads one format".into(),
        }
        .into());
    }
    Ok(files
        .into_iter()
        .filter(|f| match text {
            true => is_text(&f.rel),
            false => f.rel.ends_with(".parquet"),
        })
        .map(|f| (f.rel, f.size))
        .collect())
}

/// The table's position in `source`, if it consumed from it.
fn position_of(
    rt: &tokio::runtime::Runtime,
    t: &Table,
    source: &str,
) -> Result<Option<Progress>, RunError> {
    let p = rt.block_on(t.progress_of(source))?;
    // The app transaction survives log cleanup; the commitInfo that
    // names the position may not: never start the source over.
    let recorded = rt.block_on(t.progress_count(source))?;
    if p.is_none() && recorded.is_some_and(|n| n > 0) {
        return Err(RunError::Usage(format!(
            "the table records {} objects consumed from `{source}`, but the commit naming the position is gone from its log (log cleanup?): idem will not start the source over. Consume it into a new table, or restore the log",
            recorded.unwrap_or_default()
        )));
    }
    Ok(p)
}

/// Fails when the objects at or before the position are not exactly the
/// ones consumed (more arrived late, or some were deleted and others may
/// have arrived), naming the ones no committed run read.
fn check_no_late(
    rt: &tokio::runtime::Runtime,
    t: &Table,
    source: &str,
    through: &str,
    names: &[(String, u64)],
    recorded: &[u8; 32],
) -> Result<(), RunError> {
    let at_or_before = || names.iter().filter(|(n, _)| n.as_str() <= through);
    if &xor_names(at_or_before().map(|(n, _)| n)) == recorded {
        return Ok(());
    }
    let mut consumed = std::collections::HashSet::new();
    for bytes in rt.block_on(t.consumed_manifests(source))? {
        if let Ok(m) = Manifest::from_bytes(&bytes) {
            consumed.extend(m.spec.slice.inputs.into_iter().map(|i| i.path));
        }
    }
    let late: Vec<String> = at_or_before()
        .filter(|(n, _)| !consumed.contains(n))
        .map(|(n, _)| n.clone())
        .collect();
    if late.is_empty() {
        return Ok(());
    }
    Err(RunError::Late {
        prefix: source.to_string(),
        through: through.to_string(),
        late,
    })
}

/// The names after the position, in order, at most `max_objects` of them
/// and `max_bytes` (at least one object is taken).
fn take_range(
    names: Vec<(String, u64)>,
    after: Option<&str>,
    max_objects: usize,
    max_bytes: Option<u64>,
) -> Vec<String> {
    let mut take = Vec::new();
    let mut bytes = 0u64;
    for (n, size) in names
        .into_iter()
        .filter(|(n, _)| after.is_none_or(|a| n.as_str() > a))
    {
        let full = take.len() >= max_objects
            || max_bytes.is_some_and(|m| !take.is_empty() && bytes + size > m);
        if full {
            break;
        }
        bytes += size;
        take.push(n);
    }
    take
}
