//! Finding stored runs for people: a manifest by its location, by its run
//! key (or manifest digest, or a unique prefix of either) in a table, or as
//! the current run of a table's slice (`TABLE#SLICE`); and which table
//! version holds a manifest's output. What `idem show` and `idem explain`
//! read. Nothing here proves anything (that is [`crate::audit`]): it shows
//! what is stored.

use crate::digest::Digest;
use crate::manifest::{Manifest, ManifestError};
use crate::run::RunError;
pub use crate::run::record::current_run;
use crate::run::record::{RunIndex, manifest_path, run_index_path};
use crate::table::{Table, TableError};

/// A stored manifest.
#[derive(Debug, Clone)]
pub struct Found {
    /// Parsed.
    pub manifest: Manifest,
    /// Exactly as stored.
    pub bytes: Vec<u8>,
    /// sha256 of the stored bytes.
    pub digest: Digest,
    /// Where it was read.
    pub location: String,
}

/// Which version of its table holds a manifest's output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Holding {
    /// The slice's current commit holds this output.
    Current {
        /// The version that committed it.
        version: u64,
        /// The current commit names this very manifest (not another run
        /// with the same output).
        same_manifest: bool,
    },
    /// The slice's current commit holds another output.
    Superseded {
        /// The current commit's version.
        version: u64,
    },
    /// The table has no commit for the slice.
    NoCommit,
    /// The table could not be read.
    Unknown(String),
}

/// Find the manifest `reference` names: a run key or manifest digest in
/// `table` (`sha256:<hex>`, or a unique hex prefix of at least 8 digits,
/// as `idem log` prints them), `TABLE#SLICE`, or a manifest file (path or
/// URL).
pub fn find(reference: &str, table: Option<&str>) -> Result<Found, RunError> {
    let rt = crate::run::runtime()?;
    if looks_like_key(reference) {
        let Some(table) = table else {
            return Err(RunError::Usage(format!(
                "`{reference}` looks like a run key or manifest digest: say which table holds it with --table TABLE"
            )));
        };
        return rt.block_on(by_key(table, reference));
    }
    // A manifest file (named `<hex>.json`; its path may hold a `#`), else
    // TABLE#SLICE split at the first `#` (slice ids may hold one); an
    // Iceberg table's own name holds one (`...#NAMESPACE.TABLE#SLICE`).
    let read = || crate::storage::read_location(reference).map_err(|e| RunError::Table(e.into()));
    let bytes = match split_slice(reference) {
        Some((table, slice)) if !reference.ends_with(".json") => {
            return rt.block_on(by_slice(table, slice));
        }
        Some((table, slice)) => match read() {
            Ok(b) => b,
            Err(_) => return rt.block_on(by_slice(table, slice)),
        },
        None => read()?,
    }
    .to_vec();
    let manifest = Manifest::from_bytes(&bytes)?;
    // Exactly the bytes idem writes, or `show --json` would echo a document
    // that is not the manifest its digest names.
    if manifest.to_bytes() != bytes {
        return Err(RunError::Manifest(ManifestError::Invalid(format!(
            "{reference} is not a manifest as idem stores it (its bytes are not the canonical JSON of its contents): it was reformatted or edited"
        ))));
    }
    Ok(Found {
        manifest,
        digest: Digest::of_bytes(&bytes),
        bytes,
        location: reference.to_string(),
    })
}

/// `TABLE#SLICE` split at the first `#` (slice ids may hold one); an
/// Iceberg table's own name holds one (`...#NAMESPACE.TABLE#SLICE`).
fn split_slice(reference: &str) -> Option<(&str, &str)> {
    if crate::table::iceberg::is_iceberg(reference) {
        reference.split_once('#').and_then(|(catalog, rest)| {
            let (name, slice) = rest.split_once('#')?;
            Some((&reference[..catalog.len() + 1 + name.len()], slice))
        })
    } else {
        reference.split_once('#')
    }
}

/// For `TABLE#SLICE`: the slice's output written to a branch and not
/// published (write-audit-publish), when the table has one
/// ([`crate::table::Pending::published`]: whether an earlier output is).
pub fn pending(reference: &str) -> Option<crate::table::Pending> {
    let (table, slice) = split_slice(reference).filter(|_| !looks_like_key(reference))?;
    let rt = crate::run::runtime().ok()?;
    rt.block_on(async { Table::open_existing(table).await.ok()?.pending(slice) })
}

/// The current commit of each slice of the table at `location`, when it
/// names an existing table (and nothing else: a manifest file, a run
/// key, `TABLE#SLICE`); `None` otherwise.
pub fn table_slices(location: &str) -> Result<Option<Vec<crate::table::SliceCommit>>, RunError> {
    let iceberg = crate::table::iceberg::is_iceberg(location);
    let slice_named = location.matches('#').count() > usize::from(iceberg);
    if looks_like_key(location) || location.ends_with(".json") || slice_named {
        return Ok(None);
    }
    let rt = crate::run::runtime()?;
    rt.block_on(async {
        // Not a table (or not one that opens): `find` says what it is.
        let Ok(table) = Table::open_existing(location).await else {
            return Ok(None);
        };
        let mut commits = table.slice_commits().await?;
        commits.retain(|c| c.current);
        commits.sort_by(|a, b| a.slice.cmp(&b.slice));
        Ok(Some(commits))
    })
}

/// The hex (lowercase) of `sha256:<hex>` or of bare hex, when it is one.
fn key_hex(reference: &str) -> Option<String> {
    let hex = reference.strip_prefix("sha256:").unwrap_or(reference);
    (hex.len() >= 8 && hex.len() <= 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| hex.to_ascii_lowercase())
}

fn looks_like_key(reference: &str) -> bool {
    key_hex(reference).is_some()
}

async fn read_manifest(table: &Table, digest: &Digest) -> Result<Option<Found>, RunError> {
    let Some(bytes) = table.get_sidecar(&manifest_path(digest)).await? else {
        return Ok(None);
    };
    let manifest = Manifest::from_bytes(&bytes)?;
    Ok(Some(Found {
        manifest,
        digest: Digest::of_bytes(&bytes),
        bytes,
        location: format!("{}_idem/{}", table.url(), manifest_path(digest)),
    }))
}

async fn by_slice(location: &str, slice: &str) -> Result<Found, RunError> {
    let table = Table::open_existing(location).await?;
    let Some(c) = table.slice_commit(slice).await?.filter(|c| c.current) else {
        return Err(RunError::Usage(format!(
            "table {location} has no current commit for slice `{slice}` (see `idem log {location}`)"
        )));
    };
    let missing = || {
        RunError::Table(TableError::Sidecar {
            path: format!("manifests/ (named by version {})", c.version),
            detail: "the manifest the commit names is missing; `idem audit` reports it".into(),
        })
    };
    let md = c.manifest_digest.clone().ok_or_else(missing)?;
    read_manifest(&table, &md).await?.ok_or_else(missing)
}

async fn by_key(location: &str, reference: &str) -> Result<Found, RunError> {
    let hex = key_hex(reference).ok_or_else(|| {
        RunError::Usage(format!(
            "`{reference}` is not a run key or manifest digest (sha256:<hex>, or at least 8 hex digits of one)"
        ))
    })?;
    let table = Table::open_existing(location).await?;
    // Run keys first (what `idem log` and `idem run` print), then manifests.
    let mut matches: Vec<(bool, String)> = Vec::new();
    for (is_run, dir) in [(true, "runs"), (false, "manifests")] {
        for name in table.list_sidecar(dir).await? {
            let stem = name.rsplit('/').next().unwrap_or(&name);
            if let Some(h) = stem.strip_suffix(".json")
                && h.starts_with(hex.as_str())
            {
                matches.push((is_run, h.to_string()));
            }
        }
        if !matches.is_empty() {
            break;
        }
    }
    match matches.as_slice() {
        [] => Err(RunError::Usage(format!(
            "no run key or manifest in {location} starts with `{hex}` (see `idem log {location}`)"
        ))),
        [(is_run, h)] => {
            let digest = Digest::parse(&format!("sha256:{h}")).map_err(RunError::Usage)?;
            let manifest = if *is_run {
                let index = table
                    .get_sidecar(&run_index_path(&digest))
                    .await?
                    .and_then(|b| serde_json::from_slice::<RunIndex>(&b).ok())
                    .ok_or_else(|| {
                        RunError::Usage(format!("the memo index of run key {digest} is unreadable"))
                    })?;
                index.manifest
            } else {
                digest
            };
            read_manifest(&table, &manifest).await?.ok_or_else(|| {
                RunError::Table(TableError::Sidecar {
                    path: manifest_path(&manifest),
                    detail: "the manifest is missing; `idem audit` reports it".into(),
                })
            })
        }
        many => Err(RunError::Usage(format!(
            "`{hex}` is ambiguous in {location}: {} runs or manifests start with it; give more digits",
            many.len()
        ))),
    }
}

/// Which version of the manifest's own target table holds its output.
pub fn holding(found: &Found) -> Holding {
    let m = &found.manifest;
    let run = || -> Result<Holding, RunError> {
        let rt = crate::run::runtime()?;
        rt.block_on(async {
            let table = Table::open_existing(&m.spec.target.table).await?;
            let current = table.slice_commit(&m.spec.slice.id).await?;
            Ok(match current.filter(|c| c.current) {
                None => Holding::NoCommit,
                Some(c) if c.output_digest.as_ref() == Some(&m.result.output_digest) => {
                    Holding::Current {
                        version: c.version,
                        same_manifest: c.manifest_digest.as_ref() == Some(&found.digest),
                    }
                }
                Some(c) => Holding::Superseded { version: c.version },
            })
        })
    };
    run().unwrap_or_else(|e| Holding::Unknown(e.to_string()))
}
