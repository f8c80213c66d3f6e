//! Proving a table, not only a manifest: for every slice, the commit that
//! made its output current -> the manifest it names (its digest checked) ->
//! the rows the table holds for the slice now, read back and digested ->
//! optionally a replay of the manifest. `idem verify` runs the same chain
//! for one manifest. Nothing here takes a `_idem/` file's word: manifests
//! and sidecars can be edited by anyone with write access to the table.

use crate::attest::{self, PublicKey};
use crate::digest::Digest;
use crate::manifest::Manifest;
use crate::run::record::manifest_path;
use crate::run::{RunError, Verdict, replay};
use crate::sandbox::Sandbox;
use crate::table::{SliceCommit, Table};

/// How far a slice was proven.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Proof {
    /// Commit -> manifest -> the table's rows all agree (and the replay,
    /// when asked for, reproduced the output).
    Proven,
    /// Merge slices share rows by key with other slices, so there is no
    /// per-slice row set to digest: commit -> manifest agree and no other
    /// writer committed since (and the replay, when asked, matched).
    ChainOnly,
    /// Something disagrees; the detail says what.
    Failed,
}

impl Proof {
    /// Its name in `idem audit`'s output and the Python package.
    pub fn name(&self) -> &'static str {
        match self {
            Proof::Proven => "proven",
            Proof::ChainOnly => "chain-proven",
            Proof::Failed => "failed",
        }
    }
}

/// One slice's audit.
#[derive(Debug, Clone)]
pub struct SliceAudit {
    /// Slice id.
    pub slice: String,
    /// The version whose commit made the slice's output current.
    pub version: u64,
    /// The verdict.
    pub proof: Proof,
    /// What was checked, or the first disagreement.
    pub detail: String,
}

/// Options of [`audit`].
#[derive(Default)]
pub struct AuditOptions<'a> {
    /// Only this slice.
    pub slice: Option<String>,
    /// Re-run each manifest in this sandbox and compare.
    pub replay: Option<&'a Sandbox>,
    /// When given, every manifest must be signed by one of these keys.
    pub keys: &'a [PublicKey],
}

/// Audit every slice of `table` (or one).
pub fn audit(table: &str, opts: &AuditOptions<'_>) -> Result<Vec<SliceAudit>, RunError> {
    let rt = crate::run::runtime()?;
    let t = rt.block_on(Table::open_existing(table))?;
    let commits = rt.block_on(commits_to_audit(&t, opts.slice.as_deref()))?;
    if let Some(s) = &opts.slice
        && !commits.iter().any(|c| &c.slice == s)
    {
        return Err(RunError::Usage(format!(
            "table {table} has no commit for slice `{s}` (see `idem log {table}`)"
        )));
    }
    let mut out = Vec::new();
    for c in commits
        .iter()
        .filter(|c| opts.slice.as_ref().is_none_or(|s| s == &c.slice))
    {
        let (proof, detail) = match rt.block_on(prove(&t, c, opts.keys)) {
            Ok((proof, detail, bytes)) => match (&proof, opts.replay) {
                (Proof::Failed, _) | (_, None) => (proof, detail),
                // A replay that fails (a guest that now traps, inputs that
                // are gone) fails this slice's proof, not the whole audit.
                (_, Some(sandbox)) => match replay(&bytes, sandbox) {
                    Ok(Verdict::Match { .. }) => (proof, format!("{detail}; replay reproduced it")),
                    Ok(Verdict::Mismatch(why)) => (Proof::Failed, format!("replay: {why}")),
                    Err(e) => (Proof::Failed, format!("replay failed: {e}")),
                },
            },
            Err(why) => (Proof::Failed, why),
        };
        out.push(SliceAudit {
            slice: c.slice.clone(),
            version: c.version,
            proof,
            detail,
        });
    }
    if opts.slice.is_none() {
        out.extend(unowned(&t, &commits, rt)?);
    }
    Ok(out)
}

/// The commits an audit proves: every slice's latest (the history, read
/// once), or one slice's current commit, read by version (and, when its
/// app transactions name none, its latest commit in the history, so an
/// edited log still fails the slice rather than hiding it).
async fn commits_to_audit(
    t: &Table,
    slice: Option<&str>,
) -> Result<Vec<SliceCommit>, crate::table::TableError> {
    if let Some(s) = slice
        && let Some(c) = t.slice_commit(s).await?
    {
        return Ok(vec![c]);
    }
    t.slice_commits().await
}

/// The slice id under which audit reports files that belong to no slice.
pub const NO_SLICE: &str = "(no slice)";

/// Every live data file must belong to exactly one slice's current commit:
/// a file another writer added where no slice owns the partition is rows
/// readers see that no manifest accounts for. Each one fails the audit,
/// named.
fn unowned(
    t: &Table,
    commits: &[SliceCommit],
    rt: &tokio::runtime::Runtime,
) -> Result<Vec<SliceAudit>, RunError> {
    let files = rt.block_on(t.unowned_files(commits))?;
    let version = t.version().unwrap_or(0);
    Ok(files
        .into_iter()
        .map(|f| SliceAudit {
            slice: NO_SLICE.into(),
            version,
            proof: Proof::Failed,
            detail: format!(
                "data file {f} belongs to no slice's current commit (another writer added it, or it survived a commit that should have replaced it): readers see rows that no manifest accounts for; remove it, or rerun the slice that should own it"
            ),
        })
        .collect())
}

/// Commit -> manifest (-> its signature, with `keys`) -> rows for one
/// slice. `Err` is the first disagreement; `Ok` carries the manifest
/// bytes for a replay.
async fn prove(
    t: &Table,
    c: &SliceCommit,
    keys: &[PublicKey],
) -> Result<(Proof, String, Vec<u8>), String> {
    let fail = |s: String| Err::<(Proof, String, Vec<u8>), String>(s);
    if !c.current {
        return fail(format!(
            "the log's app transactions do not name version {}'s output as current (the log was edited)",
            c.version
        ));
    }
    let (Some(md), Some(od)) = (&c.manifest_digest, &c.output_digest) else {
        return fail(format!(
            "the commit at version {} names no manifest",
            c.version
        ));
    };
    let bytes = match t.get_sidecar(&manifest_path(md)).await {
        Ok(Some(b)) => b,
        Ok(None) => {
            return fail(format!(
                "manifest {md} named by version {} is missing",
                c.version
            ));
        }
        Err(e) => return fail(e.to_string()),
    };
    let actual = Digest::of_bytes(&bytes);
    if &actual != md {
        return fail(format!(
            "the stored manifest for {md} was edited: its bytes hash to {actual}"
        ));
    }
    let m = Manifest::from_bytes(&bytes).map_err(|e| e.to_string())?;
    if &m.result.output_digest != od
        || m.spec.slice.id != c.slice
        || Some(&m.run_key) != c.run_key.as_ref()
    {
        return fail(format!(
            "the manifest disagrees with the commit at version {} (output {} vs {od}, slice {} vs {})",
            c.version, m.result.output_digest, m.spec.slice.id, c.slice
        ));
    }
    // A slice copied whole from another table (files, commit, manifest
    // and its signature) is that table's run, not this one's.
    let target = &m.spec.target;
    let partition = target.partition.as_ref().map(|p| p.to_string());
    if target.table != t.target_name() || target.mode != c.mode || partition != c.partition {
        return fail(format!(
            "the manifest is of a run into {} ({}), not into this table ({}, {}): the slice was copied from another table",
            target.table,
            target.mode,
            t.target_name(),
            c.mode
        ));
    }
    let signed = match keys {
        [] => String::new(),
        _ => format!(
            ", signed by key {}",
            attest::short(&signed_by(t, md, c.envelope_digest.as_ref(), &bytes, keys).await?)
        ),
    };
    if let Some(why) = drift(t, c).await? {
        return fail(why);
    }
    if c.mode == "merge" {
        return Ok((
            Proof::ChainOnly,
            format!(
                "commit v{} -> manifest {md}{signed} agree; no other writer since (merge: rows are shared by key, not digested per slice)",
                c.version
            ),
            bytes,
        ));
    }
    let (rows_digest, rows) = t.digest_slice_rows(c).await.map_err(|e| e.to_string())?;
    if &rows_digest != od || rows != m.result.rows_out {
        return fail(format!(
            "the table's rows for the slice digest to {rows_digest} ({rows} rows), but the manifest says {od} ({} rows)",
            m.result.rows_out
        ));
    }
    Ok((
        Proof::Proven,
        format!(
            "commit v{} -> manifest {md}{signed} -> {rows} rows in the table digest to {od}",
            c.version
        ),
        bytes,
    ))
}

/// The key id that signed manifest `md` (its `bytes`): the envelope the
/// commit `named` first, then any other stored for the manifest (a key
/// that signed it after the commit: a memo hit with a new key, a
/// rotation). `Err`: why none of them is by one of `keys`.
async fn signed_by(
    t: &Table,
    md: &Digest,
    named: Option<&Digest>,
    bytes: &[u8],
    keys: &[PublicKey],
) -> Result<String, String> {
    let dir = attest::envelopes_of(md);
    let mut paths: Vec<String> = named
        .map(|e| attest::envelope_path(md, e))
        .into_iter()
        .collect();
    let listed = t
        .list_sidecar_at_most(&dir, attest::MAX_ENVELOPES)
        .await
        .map_err(|e| e.to_string())?;
    for name in listed.iter().filter_map(|n| n.rsplit('/').next()) {
        let path = format!("{dir}{name}");
        if name.ends_with(".json") && !paths.contains(&path) {
            paths.push(path);
        }
    }
    let mut why = Vec::new();
    for path in paths.iter().take(attest::MAX_ENVELOPES) {
        match t
            .get_sidecar_at_most(path, attest::MAX_ENVELOPE_BYTES)
            .await
        {
            Ok(Some(envelope)) => match attest::check(&envelope, bytes, keys) {
                Ok(keyid) => return Ok(keyid),
                Err(w) => why.push(w),
            },
            Ok(None) => why.push(format!("the envelope the commit names ({path}) is missing")),
            Err(e) => why.push(e.to_string()),
        }
    }
    Err(match why.is_empty() {
        true => format!(
            "manifest {md} is not signed (no envelope under _idem/{dir}): the run had no --sign-key; rerun the slice with one"
        ),
        false => format!("manifest {md}: {}", why.join("; ")),
    })
}

/// Why the table no longer holds what slice `c`'s commit made (`None`
/// when it does): its shape (readers see the files through the table's
/// schema, which a metadata-only commit can rename under them), then, for
/// a merge slice, any other writer's commit since, else its own files.
async fn drift(t: &Table, c: &SliceCommit) -> Result<Option<String>, String> {
    let shape = t.slice_shape_drift(c).await.map_err(|e| e.to_string())?;
    if shape.is_some() {
        return Ok(shape);
    }
    let files = if c.mode == "merge" {
        t.foreign_commit_since(Some(c.version)).await
    } else {
        t.slice_drift(c).await
    };
    files.map_err(|e| e.to_string())
}

/// What [`verify_manifest`] found.
#[derive(Debug, Clone)]
pub struct ManifestCheck {
    /// The replay's verdict (with the table checks folded in).
    pub verdict: Verdict,
    /// What was checked, line by line.
    pub notes: Vec<String>,
}

/// `idem verify`: one manifest file (or its DSSE envelope), checked
/// against its own name, its signature (with `keys`), the table that it
/// claims to describe, and a replay. A manifest from another engine is
/// refused unless `allow_engine`.
pub fn verify_manifest(
    file_name: Option<&str>,
    bytes: &[u8],
    sandbox: &Sandbox,
    allow_engine: bool,
    keys: &[PublicKey],
) -> Result<ManifestCheck, RunError> {
    let mut notes = Vec::new();
    let mismatch = |why: String, notes: Vec<String>| {
        Ok(ManifestCheck {
            verdict: Verdict::Mismatch(why),
            notes,
        })
    };
    let given = match unwrap_envelope(file_name, bytes, keys) {
        Ok(u) => u,
        Err(why) => return mismatch(why, notes),
    };
    notes.extend(given.note);
    let (bytes, file_name, signed) = (&given.manifest[..], given.file_name, given.signed);
    let digest = Digest::of_bytes(bytes);
    let m = match read_manifest(file_name, bytes, &digest)? {
        Ok(m) => m,
        Err(why) => return mismatch(why, notes),
    };
    if m.spec.engine != sandbox.fingerprint() {
        if !allow_engine {
            return Err(RunError::Usage(format!(
                "the manifest was produced by engine `{}`, this host is `{}`: outputs may differ for reasons outside the manifest. Pass --allow-engine to re-run it anyway and report whether the output still matches",
                m.spec.engine,
                sandbox.fingerprint()
            )));
        }
        notes.push(format!(
            "engine differs (manifest `{}`, host `{}`): compared anyway (--allow-engine)",
            m.spec.engine,
            sandbox.fingerprint()
        ));
    }
    match against_table(&m, &digest)? {
        Ok(note) => notes.push(note),
        Err(why) => return mismatch(why, notes),
    }
    if !keys.is_empty() && !signed {
        let rt = crate::run::runtime()?;
        let t = rt.block_on(Table::open_existing(&m.spec.target.table))?;
        match rt.block_on(signed_by(&t, &digest, None, bytes, keys)) {
            Ok(k) => notes.push(format!("signature: signed by key {}", attest::short(&k))),
            Err(why) => return mismatch(format!("signature: {why}"), notes),
        }
    }
    let verdict = replay(bytes, sandbox)?;
    Ok(ManifestCheck { verdict, notes })
}

/// What `idem verify` was given: a manifest, or the envelope of one.
struct Given<'a> {
    manifest: Vec<u8>,
    /// The file name to check against the manifest's digest (none for an
    /// envelope).
    file_name: Option<&'a str>,
    /// Whether a key's signature was checked already.
    signed: bool,
    note: Option<String>,
}

/// The manifest to verify: `bytes` themselves, or the payload of the DSSE
/// envelope they are (checked against `keys` when given); `Err` why the
/// envelope fails.
fn unwrap_envelope<'a>(
    file_name: Option<&'a str>,
    bytes: &[u8],
    keys: &[PublicKey],
) -> Result<Given<'a>, String> {
    if !attest::is_envelope(bytes) {
        return Ok(Given {
            manifest: bytes.to_vec(),
            file_name,
            signed: false,
            note: None,
        });
    }
    let opened = attest::open(bytes, keys).map_err(|why| format!("envelope: {why}"))?;
    let note = match &opened.keyid {
        Some(k) => format!("envelope: signed by key {}", attest::short(k)),
        None => "envelope: its signature was not checked (pass --key PUB.pem)".into(),
    };
    Ok(Given {
        signed: opened.keyid.is_some(),
        manifest: opened.payload,
        file_name: None,
        note: Some(note),
    })
}

/// The manifest, when its bytes are the ones its file is named for, it
/// parses, and every input it names is a plain path; else why not (a
/// mismatch). Bytes that are no manifest at all are an input error.
fn read_manifest(
    file_name: Option<&str>,
    bytes: &[u8],
    digest: &Digest,
) -> Result<Result<Manifest, String>, RunError> {
    if let Some(stem) = file_name.and_then(|n| n.strip_suffix(".json"))
        && stem.len() == 64
        && stem.bytes().all(|b| b.is_ascii_hexdigit())
        && stem != digest.hex()
    {
        return Ok(Err(format!(
            "the file is named for manifest sha256:{stem}, but its bytes hash to {digest}: it was edited"
        )));
    }
    // An edited manifest fails verification (exit 1); bytes that are no
    // manifest at all are an input error.
    let m = match Manifest::from_bytes(bytes) {
        Ok(m) => m,
        Err(e @ crate::manifest::ManifestError::Edited(_)) => return Ok(Err(e.to_string())),
        Err(e) => return Err(e.into()),
    };
    if let Err(e) = crate::run::check_input_paths(&m) {
        return Ok(Err(e.to_string()));
    }
    Ok(Ok(m))
}

/// What the table says of the manifest: a note, or why it does not
/// describe the table (a mismatch).
fn against_table(m: &Manifest, digest: &Digest) -> Result<Result<String, String>, RunError> {
    let rt = crate::run::runtime()?;
    let t = rt.block_on(Table::open_existing(&m.spec.target.table))?;
    // The slice's current commit naming this manifest: read by version.
    if let Some(c) = rt.block_on(t.slice_commit(&m.spec.slice.id))?
        && c.manifest_digest.as_ref() == Some(digest)
    {
        return Ok(match rt.block_on(prove(&t, &c, &[])) {
            Ok((_, detail, _)) => Ok(format!("table: {detail}")),
            Err(why) => Err(format!("table: {why}")),
        });
    }
    // Anything else (superseded, never committed, equivalent): the history.
    let commits = rt.block_on(t.slice_commits())?;
    let history = rt.block_on(t.idem_history())?;
    let ours = t.made_by_idem(&history);
    let named_by: Vec<u64> = history
        .iter()
        .filter(|c| ours.as_ref().is_none_or(|o| o.contains(&c.version)))
        .filter(|c| c.get_str("idem.manifestDigest") == Some(digest.as_str()))
        .map(|c| c.version)
        .collect();
    let current = commits.iter().find(|c| c.slice == m.spec.slice.id);
    // A rerun with a new run key (new module version, batch size, ...) and
    // the same output commits nothing: its manifest is named by no commit,
    // but describes the slice's current output exactly.
    let equivalent = |c: &SliceCommit| {
        named_by.is_empty() && c.output_digest.as_ref() == Some(&m.result.output_digest)
    };
    let last = named_by.iter().max().copied().unwrap_or(0);
    Ok(match current {
        Some(c) if c.manifest_digest.as_ref() == Some(digest) || equivalent(c) => {
            let how = if equivalent(c) {
                "no commit names this manifest, but it describes the slice's current output: "
            } else {
                ""
            };
            match rt.block_on(prove(&t, c, &[])) {
                Ok((_, detail, _)) => Ok(format!("table: {how}{detail}")),
                Err(why) => Err(format!("table: {why}")),
            }
        }
        _ if named_by.is_empty() => Err(format!(
            "no commit of table {} names this manifest ({digest}): it was never committed there (forged, or from another table)",
            m.spec.target.table
        )),
        Some(c) => Ok(format!(
            "table: committed at version {last}, superseded: slice {} is now at version {} (manifest {})",
            c.slice,
            c.version,
            c.manifest_digest
                .as_ref()
                .map(|d| d.as_str())
                .unwrap_or("?")
        )),
        None => Ok(format!(
            "table: committed at version {last}, but the slice has no current commit"
        )),
    })
}
