//! Replay: re-run a manifest from what it names alone (the replay step of
//! `idem verify` and `idem audit --replay`, see [`crate::audit`]): the
//! module fetched by digest from the table's `_idem/modules/`, the inputs
//! from the slice root, checked against their recorded digests, then
//! executed and compared.

use super::drive::{Feed, Job, drive};
use super::record::module_path;
use super::resolve::resolve;
use super::{RunError, SliceSpec, params_text};
use crate::digest::Digest;
use crate::manifest::Manifest;
use crate::sandbox::Sandbox;
use crate::slice::{ResolvedSlice, SliceError};
use crate::table::Table;

/// A manifest is untrusted text: every input it names must be a plain
/// relative path below its slice root, or nothing is read.
pub(crate) fn check_input_paths(m: &Manifest) -> Result<(), RunError> {
    check_side_records(&m.spec.sides)?;
    let sides = m.spec.sides.iter().flat_map(|s| &s.input.inputs);
    for input in m.spec.slice.inputs.iter().chain(sides) {
        let p = std::path::Path::new(&input.path);
        if input.path.is_empty()
            || p.is_absolute()
            || input.path.contains('\\')
            || p.components()
                .any(|c| !matches!(c, std::path::Component::Normal(_)))
        {
            return Err(RunError::Usage(format!(
                "the manifest names input `{}`, which is not a plain path below the slice root: refused (the manifest was edited)",
                input.path
            )));
        }
    }
    Ok(())
}

/// A manifest's side inputs as a run records them, or refused as edited:
/// at most [`super::MAX_SIDES`], named as `--side` names them, in name
/// order, each once; a table's (`delta`, the table named, at a version,
/// read whole) or Parquet files (`files`), nothing else.
fn check_side_records(sides: &[crate::manifest::SideRecord]) -> Result<(), RunError> {
    let edited = |why: String| {
        Err(RunError::Usage(format!(
            "the manifest's side inputs {why}: refused (the manifest was edited)"
        )))
    };
    if sides.len() > super::MAX_SIDES {
        return edited(format!(
            "are {}, more than {}",
            sides.len(),
            super::MAX_SIDES
        ));
    }
    for (i, s) in sides.iter().enumerate() {
        if let Err(why) = super::side::check_name(&s.name) {
            return edited(why);
        }
        if i > 0 && sides[i - 1].name >= s.name {
            return edited(format!(
                "are not in name order, each once (at `{}`)",
                s.name
            ));
        }
        let r = &s.input;
        let whole = match (r.kind.as_str(), r.delta_version, &s.table) {
            ("delta", Some(v), Some(_)) => r.id == format!("delta-v{v}"),
            ("files", None, None) => r.id == s.name,
            _ => false,
        };
        if !whole || r.delta_slice.is_some() || r.text.is_some() {
            return edited(format!(
                "record `{}` as no run reads a side input (kind {})",
                s.name,
                crate::text::clip_str(&r.kind, 40)
            ));
        }
    }
    Ok(())
}

/// The verdict of [`replay`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The re-run produced the recorded output digest.
    Match {
        /// The digest.
        output_digest: Digest,
    },
    /// Something differs; the first difference found.
    Mismatch(String),
}

/// Re-run a manifest from what it names alone, and compare.
pub fn replay(manifest_bytes: &[u8], sandbox: &Sandbox) -> Result<Verdict, RunError> {
    let m = Manifest::from_bytes(manifest_bytes)?;
    let rt = super::runtime()?;
    let bytes = match stored_module(rt, &m, &m.spec.module)? {
        Ok(bytes) => bytes,
        Err(why) => return Ok(Verdict::Mismatch(why)),
    };
    // Its imports checked once: for admission, and against the manifest.
    let id = sandbox.identify(&bytes)?;
    if let Some(why) = other_imports(rt, &m, &id.imports)? {
        return Ok(Verdict::Mismatch(why));
    }
    check_input_paths(&m)?;
    let slice = match pinned_again(rt, &m.spec.slice, None)? {
        Ok(slice) => slice,
        Err(why) => return Ok(Verdict::Mismatch(why)),
    };
    if let Some(why) = changed_input(&m.spec.slice, &slice) {
        return Ok(Verdict::Mismatch(why));
    }
    let sides = match sides_again(rt, &m, sandbox)? {
        Ok(sides) => sides,
        Err(why) => return Ok(Verdict::Mismatch(why)),
    };
    // Text inputs decoded as recorded (the schema is not inferred again).
    let slice = match m.spec.slice.text.as_ref().map(|t| t.input()) {
        None => slice,
        Some(Ok(text)) => slice.with_recorded_text(text)?,
        Some(Err(why)) => return Ok(Verdict::Mismatch(why)),
    };
    let module = sandbox.load_identified(&id)?;
    let reader = slice.reader(m.spec.batch_rows as usize)?;
    let rejected = reader.rejected();
    let job = Job {
        slice_id: m.spec.slice.id.clone(),
        logical_date: m.spec.logical_date.clone(),
        params: params_text(&m.spec.params),
        batch_rows: m.spec.batch_rows,
        sides,
    };
    let mut instance = sandbox.instantiate(&module)?;
    let out = drive(&mut instance, &job, Feed::Read(reader), |_| Ok(()))?;
    if let Some(n) = m.result.rejected_rows
        && n != rejected.rows()
    {
        return Ok(Verdict::Mismatch(format!(
            "the inputs now have {} bad rows skipped, the manifest records {n}",
            rejected.rows()
        )));
    }
    Ok(compare(&m, out))
}

/// The module `digest` the manifest names, from the table's
/// `_idem/modules/`, or why it cannot be the one.
fn stored_module(
    rt: &tokio::runtime::Runtime,
    m: &Manifest,
    digest: &Digest,
) -> Result<Result<Vec<u8>, String>, RunError> {
    let table = rt.block_on(Table::open_existing(&m.spec.target.table))?;
    let mod_path = module_path(digest);
    let Some(bytes) = rt.block_on(table.get_sidecar(&mod_path))? else {
        return Ok(Err(format!(
            "the module {digest} is not stored at _idem/{mod_path}"
        )));
    };
    let now = Digest::of_bytes(&bytes);
    if &now != digest {
        return Ok(Err(format!(
            "the stored module _idem/{mod_path} does not match its digest: recorded {digest}, the file is {now} (it was swapped or corrupted)"
        )));
    }
    Ok(Ok(bytes))
}

/// A v2 manifest states the imports its modules were admitted with: why
/// they are not the stored modules' own (`module`'s, read already), if
/// they are not.
fn other_imports(
    rt: &tokio::runtime::Runtime,
    m: &Manifest,
    module: &[String],
) -> Result<Option<String>, RunError> {
    let Some(p) = &m.provenance else {
        return Ok(None);
    };
    let differ = |what: &str, stated: &[String], actual: &[String]| {
        (stated != actual).then(|| {
            format!("the manifest states the {what} imports {stated:?}, the stored module declares {actual:?} (the manifest was edited)")
        })
    };
    if let Some(why) = differ("module's", &p.imports, module) {
        return Ok(Some(why));
    }
    // Reading the manifest required an audit module and its imports
    // together, or neither.
    let (Some(a), Some(stated)) = (&m.spec.audit, &p.audit_imports) else {
        return Ok(None);
    };
    let bytes = match stored_module(rt, m, &a.module)? {
        Ok(bytes) => bytes,
        Err(why) => return Ok(Some(why)),
    };
    Ok(differ(
        "audit module's",
        stated,
        &crate::sandbox::declared_imports(&bytes)?,
    ))
}

/// The manifest's side inputs pinned again as they are now (each checked
/// against its record), or why not.
fn sides_again(
    rt: &tokio::runtime::Runtime,
    m: &Manifest,
    sandbox: &Sandbox,
) -> Result<Result<Vec<super::SideInput>, String>, RunError> {
    let mut sides = Vec::with_capacity(m.spec.sides.len());
    // Read whole into the guest: at most its memory, checked before any
    // file is read.
    let recorded = m
        .spec
        .sides
        .iter()
        .flat_map(|s| s.input.inputs.iter().map(|i| i.size));
    let bytes = recorded.fold(0u64, u64::saturating_add);
    let memory = sandbox.config().limits.max_memory_bytes as u64;
    if bytes > memory {
        return Ok(Err(format!(
            "its side inputs are {bytes} bytes of files, more than the guest's memory ({memory} bytes): replay it with the limits it ran with (--max-memory-mb)"
        )));
    }
    for s in &m.spec.sides {
        let at = |why: String| Ok(Err(format!("side input `{}`: {why}", s.name)));
        // A Delta table is named by its folder: the recorded root, or the
        // manifest was edited (checked before it is opened).
        if let Some(t) = s
            .table
            .as_deref()
            .filter(|t| !crate::table::iceberg::is_iceberg(t))
        {
            let dir = |u: &str| crate::storage::locate(u).map(|u| crate::storage::as_dir(&u));
            if dir(t).ok() != dir(&s.input.root).ok() {
                return at(format!(
                    "its table {t} is not at the recorded root {} (the manifest was edited)",
                    s.input.root
                ));
            }
        }
        let slice = match pinned_again(rt, &s.input, s.table.as_deref())? {
            Ok(slice) => slice,
            Err(why) => return at(why),
        };
        // The table named must be the one whose files are recorded.
        if crate::storage::as_dir(&slice.root).as_str()
            != crate::storage::as_dir(
                &crate::storage::locate(&s.input.root).map_err(SliceError::from)?,
            )
            .as_str()
        {
            return at(format!(
                "its table {} is not at the recorded root {} (the manifest was edited)",
                s.table.as_deref().unwrap_or("?"),
                s.input.root
            ));
        }
        if let Some(why) = changed_input(&s.input, &slice) {
            return at(why);
        }
        sides.push(super::SideInput {
            name: s.name.clone(),
            slice,
            budget: sandbox.config().limits.input_budget(),
        });
    }
    Ok(Ok(sides))
}

/// A recorded slice's inputs pinned again as they are now, or why not
/// (`table`: the table a side input named, when it is not its root).
fn pinned_again(
    rt: &tokio::runtime::Runtime,
    rec: &crate::manifest::SliceRecord,
    table: Option<&str>,
) -> Result<Result<ResolvedSlice, String>, RunError> {
    if rec.kind == "delta" {
        // Through the pinned snapshot again: the same files and the
        // partition values the log holds for them.
        let Some(version) = rec.delta_version else {
            return Ok(Err(
                "the manifest does not record the pinned Delta version of its input (made by an older idem): it cannot be replayed".into(),
            ));
        };
        let slice = rec.delta_slice.clone();
        let whole = slice.is_none() && rec.id == format!("delta-v{version}");
        let table = table.unwrap_or(&rec.root);
        if whole {
            // A whole table (a side input's may be empty).
            let (slice, ..) = super::resolve::resolve_whole(rt, table, Some(version))?;
            return Ok(Ok(slice));
        }
        let partition = crate::slice::Partition::from_spelled(&rec.id);
        let spec = SliceSpec::Delta {
            table: table.to_string(),
            version,
            partition: partition.filter(|_| slice.is_none()),
            slice,
        };
        return Ok(Ok(resolve(rt, &spec)?.0));
    }
    let root_url = crate::storage::locate(&rec.root).map_err(SliceError::from)?;
    let root = crate::storage::Store::open(&root_url).map_err(SliceError::from)?;
    let mut names = Vec::with_capacity(rec.inputs.len());
    for input in &rec.inputs {
        if root.size(&input.path).map_err(SliceError::from)?.is_none() {
            return Ok(Err(format!(
                "input {} is missing ({})",
                input.path,
                root.url_of(&input.path)
            )));
        }
        names.push(input.path.clone());
    }
    // Pin the recorded names as they are; every recorded input must
    // come back with its recorded digest.
    Ok(Ok(ResolvedSlice::from_names(&rec.id, root.url(), names)?))
}

/// The first recorded input that did not come back as it was.
fn changed_input(rec: &crate::manifest::SliceRecord, slice: &ResolvedSlice) -> Option<String> {
    // By name on both sides, except for a read of several upstream slices
    // (`date=D/*`), which is in slice order, not name order: that order
    // must come back too.
    let in_order = rec
        .delta_slice
        .as_deref()
        .is_some_and(|s| crate::slice::under(s).is_some());
    let mut recorded: Vec<&crate::slice::InputObject> = rec.inputs.iter().collect();
    let mut now: Vec<&crate::slice::InputObject> = slice.inputs.iter().collect();
    if !in_order {
        recorded.sort_by(|a, b| a.path.cmp(&b.path));
        now.sort_by(|a, b| a.path.cmp(&b.path));
    }
    if recorded.len() != now.len() {
        return Some(format!(
            "the manifest records {} inputs, {} distinct names were found",
            recorded.len(),
            now.len()
        ));
    }
    recorded
        .iter()
        .zip(&now)
        .find(|(rec, now)| rec.path != now.path || rec.digest != now.digest)
        .map(|(rec, now)| {
            format!(
                "input {} changed: recorded {}, now {}",
                rec.path, rec.digest, now.digest
            )
        })
}

/// The re-run against the manifest's result.
fn compare(m: &Manifest, out: crate::execute::Outcome) -> Verdict {
    if out.columns != m.result.columns {
        return Verdict::Mismatch(format!(
            "the transform now declares the input columns {:?}, the manifest records {:?}",
            out.columns, m.result.columns
        ));
    }
    if out.dictionaries != m.result.dictionaries {
        return Verdict::Mismatch(format!(
            "the transform now takes the columns {:?} dictionary-encoded, the manifest records {:?}",
            out.dictionaries, m.result.dictionaries
        ));
    }
    if out.output_digest == m.result.output_digest && out.rows_out == m.result.rows_out {
        Verdict::Match {
            output_digest: out.output_digest,
        }
    } else {
        Verdict::Mismatch(format!(
            "output differs: recorded {} ({} rows), re-run gave {} ({} rows)",
            m.result.output_digest, m.result.rows_out, out.output_digest, out.rows_out
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::{SideRecord, SliceRecord};

    fn side(name: &str, kind: &str, version: Option<u64>) -> SideRecord {
        SideRecord {
            name: name.into(),
            table: version.map(|_| "file:///dim/".into()),
            input: SliceRecord {
                id: match version {
                    Some(v) => format!("delta-v{v}"),
                    None => name.into(),
                },
                kind: kind.into(),
                root: "file:///dim/".into(),
                inputs: vec![],
                delta_version: version,
                delta_slice: None,
                text: None,
            },
        }
    }

    /// A manifest is untrusted: side input records no run writes are
    /// refused before anything is read.
    #[test]
    fn side_records_no_run_writes_are_refused() {
        let good = vec![side("a", "delta", Some(3)), side("b", "files", None)];
        check_side_records(&good).unwrap();
        let refused = |sides: Vec<SideRecord>, says: &str| {
            let e = check_side_records(&sides).unwrap_err().to_string();
            assert!(e.contains(says) && e.contains("edited"), "{says}: {e}");
        };
        refused(good.iter().rev().cloned().collect(), "not in name order");
        refused(
            vec![side("a", "delta", Some(3)), side("a", "files", None)],
            "not in name order",
        );
        refused(vec![side("a", "partition", None)], "as no run reads");
        refused(vec![side("a", "files", Some(3))], "as no run reads");
        let mut s = side("a", "delta", Some(3));
        s.input.id = "date=2026-10-01".into();
        refused(vec![s], "as no run reads");
        let mut s = side("a", "delta", Some(3));
        s.input.delta_slice = Some("date=2026-10-01".into());
        refused(vec![s], "as no run reads");
        let mut s = side("a", "delta", Some(3));
        s.table = None;
        refused(vec![s], "as no run reads");
        refused(vec![side("a\nb", "files", None)], "must be 1 to 64");
        let many = (0..17)
            .map(|i| side(&format!("s{i:02}"), "files", None))
            .collect();
        refused(many, "more than 16");
    }
}
