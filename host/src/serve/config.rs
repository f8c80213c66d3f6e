//! `serve.toml`: where the service listens, where it keeps its state, and
//! its tenants (token hash, storage root, quotas).

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::sandbox::Limits;

/// The file as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ServeConfig {
    /// `host:port` (default 127.0.0.1:8787).
    #[serde(default = "default_listen")]
    pub listen: String,
    /// Where runs are persisted (relative to the file).
    pub state_dir: PathBuf,
    /// Runs executed at once, over all tenants.
    #[serde(default = "default_workers")]
    pub workers: usize,
    /// sha256 of the token that /metrics asks for (`Authorization:
    /// Bearer`); without it /metrics is open (it names tenants).
    pub metrics_token_sha256: Option<String>,
    /// Open connections at once; one more is closed on arrival.
    #[serde(default = "default_connections")]
    pub max_connections: usize,
    /// Open connections from one peer address at once.
    #[serde(default = "default_connections_per_peer")]
    pub max_connections_per_peer: usize,
    /// A response the client takes no bytes of for this long closes its
    /// connection, ms.
    #[serde(default = "default_write_timeout")]
    pub write_timeout_ms: u64,
    /// A request's headers (and an idle connection's next request) must
    /// arrive within this, ms; else the connection is closed.
    #[serde(default = "default_header_timeout")]
    pub header_timeout_ms: u64,
    /// A request's body must arrive within this, ms, from its headers;
    /// else the request fails (400) and the connection is closed.
    #[serde(default = "default_body_timeout")]
    pub body_timeout_ms: u64,
    /// Ended runs kept per tenant (status, result, manifest link); older
    /// ones are forgotten. Their tables keep what they committed.
    #[serde(default = "default_keep")]
    pub keep_ended_runs: usize,
    /// Mark the page's cookies `Secure` (sent over HTTPS only): set it when
    /// the service is reached through a TLS proxy. They are marked so
    /// anyway for a request with `X-Forwarded-Proto: https`.
    #[serde(default)]
    pub secure_cookies: bool,
    /// The tenants.
    #[serde(rename = "tenant", default)]
    pub tenants: Vec<TenantConfig>,
    /// The service's signing key (Ed25519, PKCS#8 PEM): every tenant's
    /// manifests are signed with it unless the tenant names its own.
    #[serde(default)]
    pub sign_key: Option<PathBuf>,
    /// Where runs send OpenLineage events (`file:///DIR` or
    /// `http(s)://HOST/api/v1/lineage`); each tenant's jobs are in the
    /// namespace `<lineage-namespace>/<tenant>`.
    #[serde(default)]
    pub lineage: Option<String>,
    #[serde(default)]
    pub lineage_namespace: Option<String>,
}

/// One `[[tenant]]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct TenantConfig {
    /// Its name (metrics, logs; never part of a path a tenant gives).
    pub name: String,
    /// sha256 of its API token, hex (`idem serve --hash-token`).
    pub token_sha256: String,
    /// Its storage root (a path or an object-store URL): its modules,
    /// inputs and tables live below it and nowhere else.
    pub root: String,
    /// Runs of this tenant executing at once.
    #[serde(default = "one")]
    pub max_concurrent: usize,
    /// Runs of this tenant waiting; more are refused (429).
    #[serde(default = "hundred")]
    pub max_queued: usize,
    /// Guest memory per run, MiB.
    #[serde(default = "default_memory")]
    pub max_memory_mb: usize,
    /// Wall-clock budget per run, ms.
    #[serde(default = "default_deadline")]
    pub deadline_ms: u64,
    /// Wall-clock limit on a whole run (reading and hashing the inputs,
    /// executing, staging; a run over it commits nothing), ms; at least
    /// `deadline-ms`.
    #[serde(default = "default_run_timeout")]
    pub run_timeout_ms: u64,
    /// Fuel per run (deterministic CPU budget); unmetered when absent.
    pub fuel: Option<u64>,
    /// Output per run, MiB.
    #[serde(default = "default_output")]
    pub max_output_mb: usize,
    /// Largest module accepted, MiB.
    #[serde(default = "default_module")]
    pub max_module_mb: usize,
    /// This tenant's own signing key (instead of the service's).
    #[serde(default)]
    pub sign_key: Option<PathBuf>,
}

/// The longest timeout a config may set.
const DAY_MS: u64 = 86_400_000;

fn default_listen() -> String {
    "127.0.0.1:8787".into()
}
fn default_workers() -> usize {
    2
}
fn default_connections() -> usize {
    256
}
fn default_connections_per_peer() -> usize {
    64
}
fn default_write_timeout() -> u64 {
    30_000
}
fn default_header_timeout() -> u64 {
    10_000
}
fn default_body_timeout() -> u64 {
    60_000
}
fn default_keep() -> usize {
    1000
}
fn one() -> usize {
    1
}
fn hundred() -> usize {
    100
}
fn default_memory() -> usize {
    256
}
fn default_deadline() -> u64 {
    60_000
}
fn default_run_timeout() -> u64 {
    600_000
}
fn default_output() -> usize {
    256
}
fn default_module() -> usize {
    16
}

impl TenantConfig {
    /// The sandbox limits of one run of this tenant.
    pub fn limits(&self) -> Limits {
        Limits {
            max_memory_bytes: self.max_memory_mb << 20,
            max_output_bytes: self.max_output_mb << 20,
            deadline_ms: self.deadline_ms,
            fuel: self.fuel,
            max_module_bytes: self.max_module_mb << 20,
            ..Limits::default()
        }
    }
}

impl ServeConfig {
    /// Read and check `path`; relative paths start at its folder.
    pub fn load(path: &Path) -> Result<ServeConfig, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let mut c: ServeConfig =
            toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        // Absolute from here on: a root is compared, resolved and named in
        // messages the same whatever folder the service started in.
        let abs = std::path::absolute(path)
            .map_err(|e| format!("{}: cannot make it absolute: {e}", path.display()))?;
        let dir = abs.parent().unwrap_or(Path::new("/"));
        if c.state_dir.is_relative() {
            c.state_dir = dir.join(&c.state_dir);
        }
        let at_dir = |p: &mut Option<PathBuf>| {
            if let Some(k) = p.as_mut().filter(|k| k.is_relative()) {
                *k = dir.join(&*k);
            }
        };
        at_dir(&mut c.sign_key);
        for t in c.tenants.iter_mut() {
            at_dir(&mut t.sign_key);
        }
        if c.tenants.is_empty() {
            return Err(format!("{}: no [[tenant]]", path.display()));
        }
        if !(1..=64).contains(&c.workers) {
            return Err("workers must be from 1 to 64".into());
        }
        for (key, v, max) in [
            ("max-connections", c.max_connections as u64, 65_536),
            (
                "max-connections-per-peer",
                c.max_connections_per_peer as u64,
                65_536,
            ),
            ("header-timeout-ms", c.header_timeout_ms, DAY_MS),
            ("body-timeout-ms", c.body_timeout_ms, DAY_MS),
            ("write-timeout-ms", c.write_timeout_ms, DAY_MS),
            ("keep-ended-runs", c.keep_ended_runs as u64, 1_000_000),
        ] {
            if !(1..=max).contains(&v) {
                return Err(format!("{}: {key} must be from 1 to {max}", path.display()));
            }
        }
        for t in c.tenants.iter_mut() {
            let bad = |why: &str| format!("{}: tenant `{}`: {why}", path.display(), t.name);
            if t.token_sha256.len() != 64 || hex::decode(&t.token_sha256).is_err() {
                return Err(bad(
                    "token-sha256 must be 64 hex digits (idem serve --hash-token prints it)",
                ));
            }
            if t.max_concurrent == 0 || t.max_queued == 0 {
                return Err(bad("max-concurrent and max-queued must be at least 1"));
            }
            if t.run_timeout_ms < t.deadline_ms {
                return Err(bad("run-timeout-ms cannot be less than deadline-ms"));
            }
            if t.max_concurrent > c.workers {
                return Err(bad("max-concurrent cannot exceed the service's workers"));
            }
            if !t.root.contains("://") && Path::new(&t.root).is_relative() {
                t.root = dir.join(&t.root).to_string_lossy().into_owned();
            }
            t.root = t.root.trim_end_matches('/').to_string();
        }
        for (i, t) in c.tenants.iter().enumerate() {
            for u in &c.tenants[..i] {
                if u.name == t.name {
                    return Err(format!("two tenants are named `{}`", t.name));
                }
                if u.token_sha256.eq_ignore_ascii_case(&t.token_sha256) {
                    return Err(format!(
                        "tenants `{}` and `{}` share a token",
                        u.name, t.name
                    ));
                }
            }
        }
        check_roots_apart(&c.tenants)?;
        Ok(c)
    }
}

/// No tenant's root may hold another's, however spelled: roots are
/// compared resolved (symlinks followed, `..` taken out), as the paths a
/// request names are.
fn check_roots_apart(tenants: &[TenantConfig]) -> Result<(), String> {
    let mut resolved = Vec::new();
    for t in tenants {
        let url = crate::storage::locate(&t.root)
            .map_err(|e| format!("tenant `{}`: root: {e}", t.name))?;
        resolved.push(crate::storage::as_dir(&url));
    }
    for (i, t) in tenants.iter().enumerate() {
        for (j, u) in tenants[..i].iter().enumerate() {
            let (a, b) = (&resolved[j], &resolved[i]);
            if crate::storage::contains(a, b) || crate::storage::contains(b, a) {
                return Err(format!(
                    "the roots of tenants `{}` ({}) and `{}` ({}) overlap (both resolve into {}): each tenant needs a root of its own",
                    u.name,
                    u.root,
                    t.name,
                    t.root,
                    if crate::storage::contains(a, b) { a } else { b },
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(dir: &Path, roots: &[(&str, &str)]) -> PathBuf {
        let mut text = "state-dir = \"state\"\n".to_string();
        for (i, (name, root)) in roots.iter().enumerate() {
            text.push_str(&format!(
                "[[tenant]]\nname = \"{name}\"\ntoken-sha256 = \"{:064x}\"\nroot = \"{root}\"\n",
                i + 1
            ));
        }
        let path = dir.join("serve.toml");
        std::fs::write(&path, text).unwrap();
        path
    }

    /// Roots spelled apart but resolving into one another are refused,
    /// naming both tenants: a symlink, `..`, a trailing slash, nesting.
    #[test]
    fn overlapping_roots_are_refused_however_spelled() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("a/inner")).unwrap();
        std::fs::create_dir_all(dir.path().join("x")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("a"), dir.path().join("alias")).unwrap();
        for roots in [
            [("one", "a"), ("two", "alias")],
            [("one", "a"), ("two", "x/../a")],
            [("one", "a/"), ("two", "./a")],
            [("one", "alias/inner"), ("two", "a")],
            [("one", "a"), ("two", "x/../alias/inner/new")],
        ] {
            let err = ServeConfig::load(&config(dir.path(), &roots)).unwrap_err();
            assert!(
                err.contains("`one`") && err.contains("`two`") && err.contains("overlap"),
                "{roots:?}: {err}"
            );
        }
        for roots in [[("one", "a"), ("two", "x")], [("one", "a"), ("two", "ab")]] {
            ServeConfig::load(&config(dir.path(), &roots))
                .unwrap_or_else(|e| panic!("{roots:?}: {e}"));
        }
    }
}
