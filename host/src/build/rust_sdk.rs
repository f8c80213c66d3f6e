//! The Rust guest SDK a guest crate builds against: the checkout idem was
//! built from while it is there and holds exactly what the binary does,
//! else the copy inside the binary (its workspace manifest and lock, the
//! WIT, `guest-sdk/` and the demo's `examples/daily_revenue/`), written
//! once into idem's cache (private, as the compiled-code cache: a crate
//! planted there would run its build script as the user), so an installed
//! `idem` (`cargo install`) runs `idem new` and `idem demo` with no
//! checkout.

use std::path::{Path, PathBuf};

use super::{BuildError, sdks};

/// The root of a workspace holding `guest-sdk/` and
/// `examples/daily_revenue/`: the checkout when it holds the same bytes as
/// the binary (not after a pull or a branch switch), else the embedded
/// copy. `IDEM_IGNORE_CHECKOUT=1` takes the copy even then (what an
/// installed binary without a checkout does; the tests use it).
pub fn sdk_root() -> Result<PathBuf, BuildError> {
    let checkout = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
    let ignore = std::env::var_os("IDEM_IGNORE_CHECKOUT").is_some_and(|v| v == "1");
    if !ignore && same_as_embedded(checkout) {
        return Ok(std::fs::canonicalize(checkout).unwrap_or_else(|_| checkout.to_path_buf()));
    }
    let base = crate::sandbox::default_cache_dir().ok_or_else(|| {
        BuildError::Project(
            "no cache dir for the Rust SDK (HOME, XDG_CACHE_HOME and IDEM_CACHE_DIR are all unset): set IDEM_CACHE_DIR to a folder of your own".into(),
        )
    })?;
    extract(&base)
}

/// Whether `root` holds every embedded file byte for byte.
fn same_as_embedded(root: &Path) -> bool {
    sdks::RUST
        .iter()
        .all(|(rel, bytes)| std::fs::read(root.join(rel)).is_ok_and(|b| b == *bytes))
}

/// `dir` is the user's own and no one else may write it.
fn private(dir: &Path) -> Result<(), BuildError> {
    super::target::private(
        dir,
        "the Rust SDK's folder",
        "Set IDEM_CACHE_DIR to a folder of your own",
    )
}

/// The embedded copy under `base` (`rust-sdk-<digest>`), written whole
/// once: to a temporary folder, then renamed into place.
fn extract(base: &Path) -> Result<PathBuf, BuildError> {
    let files = files()?;
    let refs: Vec<(&str, &[u8])> = files
        .iter()
        .map(|(p, b)| (p.as_str(), b.as_slice()))
        .collect();
    let name = format!(
        "rust-sdk-{}",
        hex::encode(&super::framed_sha256(&refs)[..8])
    );
    private(base)?;
    let dir = super::toolchain::written_once(base, &name, "", &refs)?;
    private(&dir)?;
    Ok(dir)
}

/// The embedded files, the workspace manifest naming only the members
/// that travel.
fn files() -> Result<Vec<(String, Vec<u8>)>, BuildError> {
    let mut out = Vec::with_capacity(sdks::RUST.len());
    for (rel, bytes) in sdks::RUST {
        let bytes = match *rel {
            "Cargo.toml" => members_only(bytes)?,
            _ => bytes.to_vec(),
        };
        out.push((rel.to_string(), bytes));
    }
    Ok(out)
}

/// The workspace manifest with `members` = the SDK and the demo.
fn members_only(manifest: &[u8]) -> Result<Vec<u8>, BuildError> {
    let bad = |e: String| BuildError::Project(format!("the embedded workspace manifest: {e}"));
    let text = std::str::from_utf8(manifest).map_err(|e| bad(e.to_string()))?;
    let mut doc: toml::Table = toml::from_str(text).map_err(|e| bad(e.to_string()))?;
    let ws = doc
        .get_mut("workspace")
        .and_then(|w| w.as_table_mut())
        .ok_or_else(|| bad("no [workspace]".into()))?;
    ws.insert(
        "members".into(),
        toml::Value::Array(vec!["guest-sdk".into(), "examples/daily_revenue".into()]),
    );
    ws.remove("default-members");
    Ok(toml::to_string(&doc)
        .map_err(|e| bad(e.to_string()))?
        .into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The copy is a workspace of the SDK and the demo, written once.
    #[test]
    fn the_embedded_sdk_is_a_workspace_of_the_sdk_and_the_demo() {
        let base = tempfile::tempdir().unwrap();
        let dir = extract(base.path()).unwrap();
        for f in [
            "guest-sdk/src/lib.rs",
            "wit/transform.wit",
            "Cargo.lock",
            "examples/daily_revenue/src/lib.rs",
        ] {
            assert!(dir.join(f).is_file(), "{f}");
        }
        let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
        let doc: toml::Table = toml::from_str(&manifest).unwrap();
        assert_eq!(
            doc["workspace"]["members"].as_array().unwrap().len(),
            2,
            "{manifest}"
        );
        assert!(doc["workspace"]["dependencies"].get("arrow").is_some());
        assert_eq!(extract(base.path()).unwrap(), dir);
    }
}
