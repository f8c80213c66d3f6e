//! Where a tenant's request may point: paths relative to its root that
//! stay inside it, and its uploaded modules, stored by digest under
//! `_modules/`. Anything else is refused without saying where it would
//! lead.

use super::reply::Refusal;
use super::tenant::Tenant;

/// Where a tenant's uploaded modules live, below its root.
pub const MODULES_DIR: &str = "_modules";

/// `rel` below the tenant's root: a plain relative path (no `..`, not
/// absolute, no scheme, no backslash, no NUL, no `%`, `?` or `#` that a URL
/// would decode), which must still lie inside the root once resolved
/// (symlinks followed, dots removed) and outside `_modules/`. Refused
/// without saying where it would lead.
pub fn under(t: &Tenant, rel: &str, what: &str) -> Result<String, Refusal> {
    let bad = || {
        Refusal(
            400,
            format!(
                "{what} `{rel}` is refused: give a path relative to your root, without `..`, `%`, a scheme or a leading `/`, that stays inside your root"
            ),
        )
    };
    if rel.contains("://")
        || rel.contains(['\\', '%', '?', '#'])
        || rel.starts_with('/')
        || rel.split('/').any(|seg| seg == ".")
    {
        return Err(bad());
    }
    crate::slice::validate_relative_path(rel).map_err(|_| bad())?;
    let joined = format!("{}/{rel}", t.cfg.root);
    let resolved = crate::storage::locate(&joined).map_err(|_| bad())?;
    let reserved = t
        .root_url
        .join(&format!("{MODULES_DIR}/"))
        .map_err(|_| bad())?;
    let inside = crate::storage::contains(&t.root_url, &resolved)
        && crate::storage::as_dir(&resolved) != t.root_url;
    if !inside || crate::storage::contains(&reserved, &resolved) && what != "module" {
        return Err(bad());
    }
    Ok(joined)
}

/// The stored module of `digest` (`sha256:<hex>`), relative to the root.
pub fn module_rel(digest: &str) -> Result<String, Refusal> {
    let hex = digest
        .strip_prefix("sha256:")
        .filter(|h| h.len() == 64 && h.chars().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()))
        .ok_or_else(|| Refusal(400, format!("module `{digest}` must be sha256:<64 lowercase hex digits>, as the upload returned")))?;
    Ok(module_at(hex))
}

/// Where the module of sha256 `hex` (lowercase) is stored, relative to
/// the root.
pub fn module_at(hex: &str) -> String {
    format!("{MODULES_DIR}/{hex}.wasm")
}
