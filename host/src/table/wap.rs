//! Write-audit-publish on a branch (Iceberg): the output is committed to a
//! branch ref, never to `main`; the run audits the branch's rows; then
//! [`super::Table::publish`] fast-forwards `main` to the branch's snapshot
//! in one catalog swap, naming the run's manifest. A failed audit leaves
//! `main` as it was and the branch there to inspect ([`Pending`]). Delta
//! has no branches: there the audit runs before the commit.

use super::mode::Mode;
use crate::digest::Digest;

/// Why a Delta table takes no branch.
pub const NO_BRANCHES: &str = "a Delta table has no branches, so --wap-branch is for Iceberg tables: on Delta, --expect and --audit-module already audit the output before anything is committed (write-audit-publish without a branch)";

/// An output committed to a branch, awaiting its audit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Branched {
    /// The branch.
    pub branch: String,
    /// Its snapshot holding the output (the child of `main`'s).
    pub snapshot: i64,
    /// That snapshot's sequence number (what `version` means elsewhere).
    pub version: u64,
}

/// Publishing a branch: the slice, its output (checked current on `main`
/// first: a twin run may have published it) and the manifest the
/// slice's record names from now on.
pub struct Publish<'a> {
    /// The slice.
    pub slice: &'a str,
    /// Its commit mode.
    pub mode: &'a Mode,
    /// The output's digest.
    pub output_digest: &'a Digest,
    /// The run's manifest, with the audit's verdicts.
    pub manifest_digest: &'a Digest,
    /// Its signed envelope, when the run signs.
    pub envelope_digest: Option<&'a Digest>,
    /// What the branch write made.
    pub branched: &'a Branched,
}

/// A slice's output written to a branch and not published (its audit
/// failed, or has not finished): what `idem show` names.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Pending {
    /// The branch.
    pub branch: String,
    /// Its snapshot and that snapshot's sequence number.
    pub snapshot: i64,
    pub version: u64,
    /// The run that wrote it and its output.
    pub run_key: String,
    pub output_digest: String,
    /// Whether the branch still points at that snapshot (another tool
    /// may have moved or dropped it).
    pub branch_there: bool,
    /// Whether the slice has a published commit on `main` (an earlier
    /// output).
    pub published: bool,
}

/// Check a branch name: a ref name engines can spell.
pub fn check_branch_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 200
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.=/".contains(c));
    if !ok {
        return Err(format!(
            "--wap-branch `{name}` is not a branch name: use 1 to 200 letters, digits and - _ . = /"
        ));
    }
    if name == "main" {
        return Err(
            "--wap-branch cannot be `main`: the branch is where the output waits for its audit, and main is what readers see".into(),
        );
    }
    Ok(())
}

/// The branch a run of `slice` writes to when none is named:
/// `wap/<slice>`, or `wap/<16 hex of sha256(slice)>` for a slice id that
/// is no branch name (spaces, quotes, non-ASCII; too long).
pub fn default_branch(slice: &str) -> String {
    let plain = format!("wap/{slice}");
    match check_branch_name(&plain) {
        Ok(()) => plain,
        Err(_) => {
            let hex = Digest::of_bytes(slice.as_bytes()).hex().to_string();
            format!("wap/{}", &hex[..16])
        }
    }
}
