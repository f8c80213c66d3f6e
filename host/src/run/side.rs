//! Side inputs: tables a run reads whole beside its slice (a customer
//! dimension to join with), named by the caller (`--side NAME=TABLE`),
//! pinned and hashed into the run key like the slice, and given to the
//! guest before `open`, every batch of each in name order.

use std::path::Path;

use arrow::record_batch::RecordBatch;

use std::sync::Arc;

use super::RunError;
use super::resolve::list_whole;
use crate::execute::{ExecError, Transformer};
use crate::manifest::{SideRecord, SliceRecord};
use crate::slice::{ResolvedSlice, SliceError};

/// Most side inputs one run takes (the guest SDKs take as many).
pub const MAX_SIDES: usize = idem_guest::MAX_SIDE_INPUTS;

/// A side input as a caller names it: `NAME=LOCATION[@VERSION]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SideSpec {
    /// The name the transform asks for (`ctx.side_input("customers")`).
    pub name: String,
    /// A Delta or Iceberg table, or a Parquet file or local folder of them.
    pub location: String,
    /// The table version read (`None`: the current one, pinned now).
    pub version: Option<u64>,
}

impl std::str::FromStr for SideSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let shown = crate::text::clip_str(s, 300);
        let Some((name, rest)) = s.split_once('=') else {
            return Err(format!(
                "--side `{shown}` must look like NAME=TABLE (e.g. customers=lake/dim_customers, or customers=lake/dim_customers@7 for version 7)"
            ));
        };
        check_name(name)?;
        // `TABLE@7` is version 7, unless a local path is named so.
        let (location, version) = match rest.rsplit_once('@') {
            Some((l, v))
                if !v.is_empty()
                    && v.bytes().all(|b| b.is_ascii_digit())
                    && !Path::new(rest).exists() =>
            {
                let v = v.parse::<u64>().map_err(|_| {
                    format!("--side `{shown}`: version `{v}` is not a table version")
                })?;
                (l, Some(v))
            }
            _ => (rest, None),
        };
        if location.is_empty() {
            return Err(format!(
                "--side `{shown}` names no table: NAME=TABLE[@VERSION]"
            ));
        }
        Ok(SideSpec {
            name: name.to_string(),
            location: location.to_string(),
            version,
        })
    }
}

impl SideSpec {
    /// A stage read as a side input goes by the stage's name: refused when
    /// that is no side input name (too long).
    pub fn check_name_of_stage(name: &str) -> Result<(), String> {
        check_name(name).map_err(|e| format!("stage `{name}` cannot be a side input: {e}"))
    }
}

impl std::fmt::Display for SideSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}={}", self.name, self.location)?;
        match self.version {
            Some(v) => write!(f, "@{v}"),
            None => Ok(()),
        }
    }
}

/// A side input's name: what a transform spells in code (letters, digits,
/// `_` and `-`, at most 64 bytes).
pub fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    match ok {
        true => Ok(()),
        false => Err(format!(
            "side input name `{}` must be 1 to 64 letters, digits, _ or - (the name the transform asks for)",
            crate::text::clip_str(name, 100)
        )),
    }
}

/// The side inputs checked as a set: each name once, at most [`MAX_SIDES`].
pub fn check_specs(specs: &[SideSpec]) -> Result<(), RunError> {
    if specs.len() > MAX_SIDES {
        return Err(RunError::Usage(format!(
            "{} side inputs: at most {MAX_SIDES}",
            specs.len()
        )));
    }
    for (i, s) in specs.iter().enumerate() {
        check_name(&s.name).map_err(RunError::Usage)?;
        if specs[..i].iter().any(|t| t.name == s.name) {
            return Err(RunError::Usage(format!(
                "side input `{}` is given twice: each name once",
                s.name
            )));
        }
    }
    Ok(())
}

/// Side inputs pinned once for many runs (a backfill's, a pipeline's
/// `[sides]`): every slice reads the same files, hashed once, however
/// long the runs take.
#[derive(Debug, Clone, Default)]
pub struct PinnedSides(Arc<Vec<(SideInput, SideRecord)>>);

impl PinnedSides {
    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Pin `specs` now, once (see [`PinnedSides`]); the guest's `limits` bound
/// their size. Where they lie against a run's target is checked by each run.
pub fn pin_sides(
    specs: &[SideSpec],
    target: &str,
    limits: &crate::sandbox::Limits,
) -> Result<PinnedSides, RunError> {
    let rt = super::runtime()?;
    // The table's folder; one that does not exist yet, where it will be.
    let url = match rt.block_on(crate::table::Table::open_existing(target)) {
        Ok(t) => t.url().clone(),
        Err(_) => crate::table::table_url(target)?,
    };
    let pinned = resolve_sides(rt, specs, Some(&url), limits, 0)?;
    Ok(PinnedSides(Arc::new(pinned)))
}

impl PinnedSides {
    /// These and `more` (each name once: `more`'s are taken for names
    /// these lack).
    pub fn with(&self, more: &PinnedSides) -> PinnedSides {
        let mut all: Vec<(SideInput, SideRecord)> = self.0.as_ref().clone();
        for side in more.0.iter() {
            if !all.iter().any(|(s, _)| s.name == side.0.name) {
                all.push(side.clone());
            }
        }
        PinnedSides(Arc::new(all))
    }

    /// The bytes of their files.
    fn bytes(&self) -> u64 {
        let sizes = self
            .0
            .iter()
            .flat_map(|(s, _)| s.slice.inputs.iter().map(|i| i.size));
        sizes.fold(0, u64::saturating_add)
    }
}

/// Whether a side input's location names a table: a URL (Delta on object
/// storage, an Iceberg catalog entry) or a folder with `_delta_log/`.
fn is_table(location: &str) -> bool {
    crate::table::iceberg::is_iceberg(location)
        || (location.contains("://") && !location.ends_with(".parquet"))
        || Path::new(location).join("_delta_log").is_dir()
}

/// A side input pinned: its name and its files.
#[derive(Debug, Clone)]
pub struct SideInput {
    /// The name the transform asks for.
    pub name: String,
    /// What is read, pinned.
    pub slice: ResolvedSlice,
    /// Most bytes one decoded batch of it may hold (the guest's input
    /// budget).
    pub budget: u64,
}

/// Pin every side input (in name order, as the guest gets them) and
/// record it. Before any file is hashed, refused: one that is the
/// `target` table or lies inside it (the run would read its own output),
/// and side inputs that together could never fit the guest's memory.
pub(super) fn resolve_sides(
    rt: &tokio::runtime::Runtime,
    specs: &[SideSpec],
    target: Option<&url::Url>,
    limits: &crate::sandbox::Limits,
    taken: u64,
) -> Result<Vec<(SideInput, SideRecord)>, RunError> {
    check_specs(specs)?;
    let mut sorted: Vec<&SideSpec> = specs.iter().collect();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    let memory = limits.max_memory_bytes as u64;
    let mut room = Room {
        left: memory.saturating_sub(taken),
        memory,
    };
    let mut sides = Vec::with_capacity(sorted.len());
    for spec in sorted {
        let (slice, kind, version, table) = pin(rt, spec, target, &mut room)?;
        let record = SideRecord {
            name: spec.name.clone(),
            table,
            input: SliceRecord {
                id: slice.id.clone(),
                kind: kind.into(),
                root: slice.root.to_string(),
                inputs: slice.inputs.clone(),
                delta_version: version,
                delta_slice: None,
                text: None,
            },
        };
        let (name, budget) = (spec.name.clone(), limits.input_budget());
        sides.push((
            SideInput {
                name,
                slice,
                budget,
            },
            record,
        ));
    }
    Ok(sides)
}

/// A run's side inputs: `named` pinned now, with the `pinned` ones (each
/// checked against the run's `target`), in name order; and their records.
#[allow(clippy::type_complexity)]
pub(super) fn planned(
    rt: &tokio::runtime::Runtime,
    (named, pinned): (&[SideSpec], &PinnedSides),
    target: &url::Url,
    limits: &crate::sandbox::Limits,
) -> Result<(Vec<SideInput>, Vec<SideRecord>), RunError> {
    // Together with the pinned ones, at most the guest's memory.
    let taken = pinned.bytes();
    let memory = limits.max_memory_bytes as u64;
    if taken > memory {
        return Err(Room::over("the pinned side inputs", taken, memory, memory));
    }
    let mut all = resolve_sides(rt, named, Some(target), limits, taken)?;
    for (side, record) in pinned.0.iter() {
        if all.iter().any(|(s, _)| s.name == side.name) {
            return Err(RunError::Usage(format!(
                "side input `{}` is given twice: each name once",
                side.name
            )));
        }
        for i in &side.slice.inputs {
            check_target(&side.name, &side.slice.url_of(i), Some(target))?;
        }
        check_target(
            &side.name,
            &crate::storage::as_dir(&side.slice.root),
            Some(target),
        )?;
        all.push((side.clone(), record.clone()));
    }
    if all.len() > MAX_SIDES {
        return Err(RunError::Usage(format!(
            "{} side inputs: at most {MAX_SIDES}",
            all.len()
        )));
    }
    all.sort_by(|a, b| a.0.name.cmp(&b.0.name));
    Ok(all.into_iter().unzip())
}

/// The guest memory the side inputs' files may still take (they are read
/// whole into it).
struct Room {
    left: u64,
    memory: u64,
}

impl Room {
    /// Take `bytes` for side input `name`, or refuse it before it is read.
    fn take(&mut self, name: &str, bytes: u64) -> Result<(), RunError> {
        if bytes > self.left {
            let what = format!("side input `{name}`");
            return Err(Self::over(&what, bytes, self.memory, self.left));
        }
        self.left -= bytes;
        Ok(())
    }

    /// `what`, of `bytes` bytes of files, refused: over the `left` of the
    /// guest's `memory`.
    fn over(what: &str, bytes: u64, memory: u64, left: u64) -> RunError {
        RunError::Usage(format!(
            "{what} is {bytes} bytes of files (compressed), and the side inputs together may take at most the guest's memory ({memory} bytes; {left} left): they are read whole, so give a smaller table (a filtered dimension) or raise --max-memory-mb"
        ))
    }
}

/// Refused when `at` (a side table's folder, or one of its files) is the
/// target table's folder or lies inside it: the run would read its own
/// output (an empty target included).
pub(super) fn check_target(
    name: &str,
    at: &url::Url,
    target: Option<&url::Url>,
) -> Result<(), RunError> {
    let Some(target) = target else {
        return Ok(());
    };
    if crate::storage::contains(&crate::storage::as_dir(target), at) {
        return Err(RunError::Usage(format!(
            "side input `{name}` ({at}) is the target table {target} or lies inside it: the run would read its own output"
        )));
    }
    Ok(())
}

/// One side input's files: a table's at its version (the current one
/// when none is named), or a Parquet file or a local folder's Parquet
/// files. Returns them, their kind, and the table's version and name.
#[allow(clippy::type_complexity)]
fn pin(
    rt: &tokio::runtime::Runtime,
    spec: &SideSpec,
    target: Option<&url::Url>,
    room: &mut Room,
) -> Result<(ResolvedSlice, &'static str, Option<u64>, Option<String>), RunError> {
    let name = &spec.name;
    if is_table(&spec.location) {
        let whole = list_whole(rt, &spec.location, spec.version)?;
        check_target(name, &crate::storage::as_dir(whole.root()), target)?;
        let store = crate::storage::Store::open(whole.root()).map_err(SliceError::from)?;
        let names: Vec<String> = whole.names().map(str::to_string).collect();
        let sizes = store.sizes(&names).map_err(SliceError::from)?;
        room.take(name, total(&names, sizes)?)?;
        let (version, table) = (whole.version, whole.name.clone());
        return Ok((whole.pin()?, "delta", Some(version), Some(table)));
    }
    if let Some(v) = spec.version {
        return Err(RunError::Usage(format!(
            "side input `{name}`: {} is no table (no _delta_log/ there), so it has no version: drop @{v}",
            spec.location,
        )));
    }
    let files = match spec.location.contains("://") {
        true => vec![std::path::PathBuf::from(&spec.location)],
        false => parquet_files(Path::new(&spec.location)).map_err(|why| {
            RunError::Usage(format!(
                "side input `{name}`: {} {why}: give a Delta or Iceberg table, a Parquet file or a folder of them",
                spec.location
            ))
        })?,
    };
    // Where each file is and its size, before any is hashed.
    let urls = files
        .iter()
        .map(|f| crate::storage::locate(&f.to_string_lossy()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(SliceError::from)?;
    for u in &urls {
        check_target(name, u, target)?;
    }
    let shown: Vec<String> = urls.iter().map(url::Url::to_string).collect();
    let sizes = crate::storage::sizes_of(&urls).map_err(SliceError::from)?;
    room.take(name, total(&shown, sizes)?)?;
    let slice = ResolvedSlice::from_files(name, &files).map_err(RunError::from)?;
    Ok((slice, "files", None, None))
}

/// The sum of `sizes`, each of the file named beside it in `names`: one
/// that is missing is refused, naming it.
fn total(names: &[String], sizes: Vec<Option<u64>>) -> Result<u64, RunError> {
    let mut bytes = 0u64;
    for (n, size) in names.iter().zip(sizes) {
        let size = size
            .ok_or_else(|| RunError::Slice(SliceError::NotFound(crate::text::clip_str(n, 300))))?;
        bytes = bytes.saturating_add(size);
    }
    Ok(bytes)
}

/// `path` itself (a file), or the `.parquet` files directly in it (a
/// folder), sorted by name.
fn parquet_files(path: &Path) -> Result<Vec<std::path::PathBuf>, String> {
    if path.is_file() {
        return Ok(vec![path.to_path_buf()]);
    }
    let entries = std::fs::read_dir(path).map_err(|e| format!("cannot be read ({e})"))?;
    let mut files = Vec::new();
    for e in entries {
        let p = e.map_err(|e| format!("cannot be listed ({e})"))?.path();
        if p.is_file() && p.extension().is_some_and(|x| x == "parquet") {
            files.push(p);
        }
    }
    if files.is_empty() {
        return Err("holds no .parquet files".into());
    }
    files.sort();
    Ok(files)
}

/// Give the transform every batch of every side input, before `open`:
/// inputs in name order, batches in read order, all columns (a side input
/// without rows: one batch of none, for its schema).
pub(crate) fn feed(
    t: &mut dyn Transformer,
    sides: &[SideInput],
    batch_rows: u32,
) -> Result<(), ExecError> {
    for side in sides {
        let reader = side
            .slice
            .reader(batch_rows as usize)?
            .with_input_budget(side.budget);
        let schema = reader.schema();
        let mut fed = false;
        for batch in reader {
            let batch = batch?;
            t.side_input(&side.name, &batch)?;
            fed = true;
        }
        if !fed {
            t.side_input(&side.name, &RecordBatch::new_empty(schema))?;
        }
    }
    Ok(())
}
