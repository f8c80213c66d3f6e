//! A tenant at run time: its settings from `serve.toml`, its root
//! resolved, its sandbox (the shared engine with its limits) and the
//! spellings of its root that messages must not show.

use std::path::PathBuf;
use std::sync::Arc;

use crate::attest::SigningKey;
use crate::sandbox::{Limits, Pool, Sandbox, SandboxConfig};

use super::config::{ServeConfig, TenantConfig};
use super::scrub::RootNames;

/// A tenant at run time.
pub struct Tenant {
    /// Its settings.
    pub cfg: TenantConfig,
    /// Its root, resolved (symlinks followed), as a directory URL: every
    /// location a request names must resolve inside it.
    pub root_url: url::Url,
    /// Its sandbox: the shared engine with its limits.
    pub sandbox: Sandbox,
    /// The spellings of its root, taken out of messages.
    pub roots: RootNames,
    /// The key its manifests are signed with (its own, else the
    /// service's), if any.
    pub signer: Option<Arc<SigningKey>>,
    /// Where its runs' OpenLineage events go (namespace `.../<tenant>`).
    pub lineage: Option<Arc<crate::lineage::Lineage>>,
    /// sha256 of its token.
    token: [u8; 32],
}

impl Tenant {
    /// Whether its token's sha256 is `hash`, compared in constant time.
    pub fn has_token_hash(&self, hash: &[u8; 32]) -> bool {
        use subtle::ConstantTimeEq as _;
        bool::from(self.token.ct_eq(hash))
    }
}

/// The tenants at run time: their roots resolved, their sandboxes on the
/// shared engine(s).
pub fn tenants(cfg: &ServeConfig, cache_dir: Option<PathBuf>) -> Result<Vec<Tenant>, String> {
    // One engine for every tenant (each run has its tenant's limits;
    // fuel metering is compiled in, so metered tenants share a second
    // one), its instance slots reserved once: one per worker (a
    // service run has no audit module).
    let max_memory = cfg
        .tenants
        .iter()
        .map(|t| t.limits().max_memory_bytes)
        .max();
    let engine = |fuel: Option<u64>| {
        Sandbox::new(SandboxConfig {
            cache_dir: cache_dir.clone(),
            pool: Some(Pool {
                instances: cfg.workers as u32,
                max_memory_bytes: max_memory.unwrap_or(0),
            }),
            limits: Limits {
                fuel,
                max_memory_bytes: max_memory.unwrap_or(0),
                ..Limits::default()
            },
            ..SandboxConfig::default()
        })
        .map_err(|e| e.to_string())
    };
    let base = engine(None)?;
    let metered = match cfg.tenants.iter().any(|t| t.fuel.is_some()) {
        true => Some(engine(Some(1))?),
        false => None,
    };
    let service_key = signer(cfg.sign_key.as_deref(), "sign-key")?;
    let mut tenants = Vec::new();
    for t in &cfg.tenants {
        let own = signer(
            t.sign_key.as_deref(),
            &format!("tenant `{}`: sign-key", t.name),
        )?;
        let mut token = [0u8; 32];
        hex::decode_to_slice(&t.token_sha256, &mut token).map_err(|e| e.to_string())?;
        let root_url = crate::storage::locate(&t.root)
            .map(|u| crate::storage::as_dir(&u))
            .map_err(|e| format!("tenant `{}`: root: {e}", t.name))?;
        tenants.push(Tenant {
            roots: RootNames::new(&t.root, &root_url),
            root_url,
            sandbox: match (&metered, t.fuel) {
                (Some(m), Some(_)) => m,
                _ => &base,
            }
            .with_limits(t.limits())
            .map_err(|e| e.to_string())?,
            cfg: t.clone(),
            token,
            signer: own.or_else(|| service_key.clone()),
            lineage: lineage_of(cfg, &t.name)?,
        });
    }
    Ok(tenants)
}

/// The service's lineage receiver, with tenant `name`'s namespace.
fn lineage_of(
    cfg: &ServeConfig,
    name: &str,
) -> Result<Option<Arc<crate::lineage::Lineage>>, String> {
    let Some(target) = &cfg.lineage else {
        return Ok(None);
    };
    let ns = cfg.lineage_namespace.as_deref().unwrap_or("idem");
    crate::lineage::Lineage::new(target, Some(format!("{ns}/{name}")))
        .map(|l| Some(Arc::new(l)))
        .map_err(|e| format!("lineage: {e}"))
}

/// The signing key at `path`, read once at start.
fn signer(path: Option<&std::path::Path>, what: &str) -> Result<Option<Arc<SigningKey>>, String> {
    path.map(|p| {
        SigningKey::from_file(p)
            .map(Arc::new)
            .map_err(|e| format!("{what}: {e}"))
    })
    .transpose()
}

/// `m` with the tenant's root taken out (objects named relative to it)
/// and any other host path masked: see [`RootNames::scrub`].
pub fn scrub(t: &Tenant, m: &str) -> String {
    t.roots.scrub(m)
}
