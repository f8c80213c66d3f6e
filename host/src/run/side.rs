//! Side inputs: tables a run reads whole beside its slice (a customer
//! dimension to join with), named by the caller (`--side NAME=TABLE`),
//! pinned and hashed into the run key like the slice, and given to the
//! guest before `open`, every batch of each in name order.

use std::path::Path;

use arrow::record_batch::RecordBatch;

use super::RunError;
use super::resolve::{check_not_inside, resolve_whole};
use crate::execute::{ExecError, Transformer};
use crate::manifest::{SideRecord, SliceRecord};
use crate::slice::ResolvedSlice;

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
        let (location, version) = match rest.rsplit_once('@') {
            Some((l, v)) if !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) => {
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

/// `specs` with every table's version named: the current one, looked up
/// now (a backfill pins its side inputs once, so every slice reads the
/// same version of a dimension however long the backfill takes).
pub fn pin_current(specs: &[SideSpec]) -> Result<Vec<SideSpec>, RunError> {
    check_specs(specs)?;
    let rt = super::runtime()?;
    specs
        .iter()
        .map(|s| {
            if s.version.is_some() || !is_table(&s.location) {
                return Ok(s.clone());
            }
            let t = rt.block_on(crate::table::Table::open_existing(&s.location))?;
            Ok(SideSpec {
                version: t.version(),
                ..s.clone()
            })
        })
        .collect()
}

/// Whether a side input's location names a table: a URL (Delta on object
/// storage, an Iceberg catalog entry) or a folder with `_delta_log/`.
fn is_table(location: &str) -> bool {
    location.contains("://")
        || crate::table::iceberg::is_iceberg(location)
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
/// record it; refused when one lies inside the target table (the run
/// would read its own output) or could never fit the guest's memory.
pub(super) fn resolve_sides(
    rt: &tokio::runtime::Runtime,
    specs: &[SideSpec],
    table: &url::Url,
    limits: &crate::sandbox::Limits,
) -> Result<Vec<(SideInput, SideRecord)>, RunError> {
    let memory = limits.max_memory_bytes;
    check_specs(specs)?;
    let mut sorted: Vec<&SideSpec> = specs.iter().collect();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    let mut sides = Vec::with_capacity(sorted.len());
    for spec in sorted {
        let (slice, kind, version, table_name) = pin(rt, spec)?;
        check_not_inside(table, &slice, kind)?;
        let bytes: u64 = slice.inputs.iter().map(|i| i.size).sum();
        if bytes > memory as u64 {
            return Err(RunError::Usage(format!(
                "side input `{}` is {bytes} bytes of files, more than the guest's whole memory ({memory} bytes): it is read whole, so give a smaller table (a filtered dimension) or raise --max-memory-mb",
                spec.name
            )));
        }
        let record = SideRecord {
            name: spec.name.clone(),
            table: table_name,
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
        let name = spec.name.clone();
        let budget = limits.input_budget();
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

/// One side input's files: a table's at its version (the current one
/// when none is named), or a Parquet file or a local folder's Parquet
/// files. Returns them, their kind, and the table's version and name.
#[allow(clippy::type_complexity)]
fn pin(
    rt: &tokio::runtime::Runtime,
    spec: &SideSpec,
) -> Result<(ResolvedSlice, &'static str, Option<u64>, Option<String>), RunError> {
    let local = Path::new(&spec.location);
    if is_table(&spec.location) {
        let (slice, version, name) = resolve_whole(rt, &spec.location, spec.version)?;
        return Ok((slice, "delta", Some(version), Some(name)));
    }
    if spec.version.is_some() {
        return Err(RunError::Usage(format!(
            "side input `{}`: {} is no table (no _delta_log/ there), so it has no version: drop @{}",
            spec.name,
            spec.location,
            spec.version.unwrap_or_default()
        )));
    }
    let files = parquet_files(local).map_err(|why| {
        RunError::Usage(format!(
            "side input `{}`: {} {why}: give a Delta or Iceberg table, a Parquet file or a folder of them",
            spec.name, spec.location
        ))
    })?;
    let slice = ResolvedSlice::from_files(&spec.name, &files).map_err(RunError::from)?;
    Ok((slice, "files", None, None))
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
