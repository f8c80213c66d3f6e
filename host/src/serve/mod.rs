//! `idem serve`: idem as a multi-tenant HTTP service. Tenants (declared in
//! `serve.toml`, each with a hashed token, a storage root and quotas)
//! upload modules and submit runs; runs execute on a bounded pool of worker
//! threads (never on the async executor), one shared wasmtime engine and
//! compiled-code cache, each with its tenant's limits. A run through the
//! service is the same run as through the CLI: same run key, same manifest.
//!
//! Isolation: a tenant names modules by digest and paths relative to its
//! root; `..`, absolute paths, schemes and anything outside the root are
//! refused, and errors are worded relative to the root, so nothing about
//! the host or other tenants shows.

pub mod api;
pub mod config;
pub mod conn;
pub mod heavy;
pub mod page;
pub mod queue;
pub mod scrub;
pub mod session;

use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{Value, json};

use crate::run::{Run, RunOutcome, SliceSpec};
use crate::sandbox::{Limits, Pool, Sandbox, SandboxConfig};
use crate::table::Mode;
use config::{ServeConfig, TenantConfig};
use queue::{Queue, RunRequest};

/// Where a tenant's uploaded modules live, below its root.
pub const MODULES_DIR: &str = "_modules";

/// The largest manifest the service reads to show it (a real one is
/// kilobytes; a tenant can plant any file under its root, and many
/// requests at once must not hold gigabytes).
pub const MAX_MANIFEST_BYTES: u64 = 4 << 20;

/// The largest `batchRows` a tenant may ask for (the host reserves a
/// batch's buffers up front).
pub const MAX_BATCH_ROWS: u32 = 1 << 20;

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
    pub roots: scrub::RootNames,
    /// sha256 of its token.
    token: [u8; 32],
}

/// The service: tenants and the queue.
pub struct Service {
    /// The tenants, in config order.
    pub tenants: Vec<Tenant>,
    /// The runs.
    pub queue: Queue,
    /// Heavy requests outside the run queue (module compiles, logs,
    /// audits, the page's tables): `workers` at once, one per tenant.
    pub heavy: heavy::HeavySlots,
    /// The page's logged-in sessions.
    pub sessions: session::Sessions,
    /// Failed page logins, for the back-off.
    pub throttle: session::Throttle,
    /// Whether the page's cookies are always `Secure`.
    pub secure_cookies: bool,
    /// sha256 of the token /metrics asks for, if any.
    metrics_token: Option<[u8; 32]>,
}

/// A refused request: HTTP status and a message for the caller.
#[derive(Debug)]
pub struct Refusal(pub u16, pub String);

impl Service {
    /// Build the service from its config (engine, tenants, persisted runs).
    pub fn new(cfg: &ServeConfig, cache_dir: Option<PathBuf>) -> Result<Service, String> {
        let tenants = tenants(cfg, cache_dir)?;
        let queue = Queue::open(
            &cfg.state_dir,
            cfg.tenants
                .iter()
                .map(|t| (t.name.clone(), t.max_concurrent, t.max_queued))
                .collect(),
            cfg.keep_ended_runs,
            &|r| {
                let t = tenants.iter().find(|t| t.cfg.name == r.tenant)?;
                settle(t, &r.request)
            },
        )
        .map_err(|e| format!("state dir {}: {e}", cfg.state_dir.display()))?;
        let metrics_token = match &cfg.metrics_token_sha256 {
            None => None,
            Some(h) => {
                let mut b = [0u8; 32];
                hex::decode_to_slice(h, &mut b)
                    .map_err(|_| "metrics-token-sha256 must be 64 hex digits".to_string())?;
                Some(b)
            }
        };
        Ok(Service {
            tenants,
            queue,
            heavy: heavy::HeavySlots::new(cfg.workers),
            sessions: Default::default(),
            throttle: Default::default(),
            secure_cookies: cfg.secure_cookies,
            metrics_token,
        })
    }

    /// The tenant whose token this is. Every tenant's hash is compared, in
    /// constant time, so timing says nothing about which one matched.
    pub fn tenant(&self, token: &str) -> Option<&Tenant> {
        use sha2::Digest as _;
        use subtle::ConstantTimeEq as _;
        let h: [u8; 32] = sha2::Sha256::digest(token.as_bytes()).into();
        let mut found = None;
        for t in &self.tenants {
            if bool::from(t.token.ct_eq(&h)) {
                found = Some(t);
            }
        }
        found
    }

    /// Whether `token` may read /metrics (anyone, unless the config sets
    /// `metrics-token-sha256`).
    pub fn metrics_allowed(&self, token: Option<&str>) -> bool {
        use sha2::Digest as _;
        use subtle::ConstantTimeEq as _;
        match (&self.metrics_token, token) {
            (None, _) => true,
            (Some(_), None) => false,
            (Some(want), Some(t)) => {
                let h: [u8; 32] = sha2::Sha256::digest(t.as_bytes()).into();
                bool::from(want.ct_eq(&h))
            }
        }
    }

    /// Run worker threads until the queue stops; returns their handles.
    pub fn start_workers(self: &Arc<Self>, n: usize) -> Vec<std::thread::JoinHandle<()>> {
        (0..n)
            .map(|i| {
                let svc = self.clone();
                std::thread::Builder::new()
                    .name(format!("idem-worker-{i}"))
                    // As deep as the CLI's main thread: a run's host side
                    // (Parquet, DataFusion) never has less stack here.
                    .stack_size(16 << 20)
                    .spawn(move || {
                        while let Some(r) = svc.queue.take() {
                            // Whatever happens in the run, it ends with a
                            // state: a panic anywhere in it fails the run
                            // (and frees its tenant's slot), not the worker.
                            let result = std::panic::catch_unwind(AssertUnwindSafe(|| {
                                match svc.tenants.iter().find(|t| t.cfg.name == r.tenant) {
                                    Some(t) => execute(t, &r.request),
                                    None => Err(json!({"kind": "input", "message": "unknown tenant"})),
                                }
                            }))
                            .unwrap_or_else(|_| Err(json!({
                                "kind": "bug",
                                "message": "the run panicked inside idem (a bug; the service goes on): nothing was committed",
                            })));
                            svc.queue.finish(&r.id, result);
                        }
                    })
                    .expect("spawning a worker thread")
            })
            .collect()
    }
}

/// The tenants at run time: their roots resolved, their sandboxes on the
/// shared engine(s).
fn tenants(cfg: &ServeConfig, cache_dir: Option<PathBuf>) -> Result<Vec<Tenant>, String> {
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
    let mut tenants = Vec::new();
    for t in &cfg.tenants {
        let mut token = [0u8; 32];
        hex::decode_to_slice(&t.token_sha256, &mut token).map_err(|e| e.to_string())?;
        let root_url = crate::storage::locate(&t.root)
            .map(|u| crate::storage::as_dir(&u))
            .map_err(|e| format!("tenant `{}`: root: {e}", t.name))?;
        tenants.push(Tenant {
            roots: scrub::RootNames::new(&t.root, &root_url),
            root_url,
            sandbox: match (&metered, t.fuel) {
                (Some(m), Some(_)) => m,
                _ => &base,
            }
            .with_limits(t.limits())
            .map_err(|e| e.to_string())?,
            cfg: t.clone(),
            token,
        });
    }
    Ok(tenants)
}

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
    Ok(format!("{MODULES_DIR}/{hex}.wasm"))
}

/// Check a request against the tenant before it is queued: paths inside
/// the root, the module uploaded, a known mode.
pub fn check(t: &Tenant, r: &RunRequest) -> Result<(), Refusal> {
    let rel = module_rel(&r.module)?;
    let store = crate::storage::Store::at(&t.cfg.root)
        .map_err(|_| Refusal(500, "the tenant's storage is not reachable".into()))?;
    match store.size(&rel) {
        Ok(Some(_)) => {}
        Ok(None) => {
            return Err(Refusal(
                404,
                format!(
                    "no module {} was uploaded by this tenant: POST it to /v1/modules first",
                    r.module
                ),
            ));
        }
        Err(_) => return Err(Refusal(503, "the tenant's storage is not reachable".into())),
    }
    for p in r
        .input
        .iter()
        .chain(&r.files)
        .chain(std::iter::once(&r.table))
    {
        under(t, p, "path")?;
    }
    if r.batch_rows.is_some_and(|n| n == 0 || n > MAX_BATCH_ROWS) {
        return Err(Refusal(
            400,
            format!("batchRows must be from 1 to {MAX_BATCH_ROWS}"),
        ));
    }
    if r.input.is_some() != r.files.is_empty() {
        return Err(Refusal(
            400,
            "give one slice: `input` with `partition`, or `files`".into(),
        ));
    }
    if r.input.is_some() && r.partition.is_none() {
        return Err(Refusal(
            400,
            "`input` needs `partition` (column=value)".into(),
        ));
    }
    mode_of(r)?;
    for e in &r.expect {
        e.parse::<crate::expect::Expectation>()
            .map_err(|err| Refusal(400, format!("expect `{e}`: {err}")))?;
    }
    Ok(())
}

fn mode_of(r: &RunRequest) -> Result<Option<Mode>, Refusal> {
    Ok(match r.mode.as_deref() {
        None => None,
        Some("overwrite-partition") => {
            // As the CLI: the slice's partition is the target's.
            let (column, value) = match &r.partition {
                Some(p) => {
                    crate::run::parse_partition(p).map_err(|e| Refusal(400, e.to_string()))?
                }
                None => (String::new(), String::new()),
            };
            Some(Mode::OverwritePartition { column, value })
        }
        Some("merge") if r.key.is_empty() => {
            return Err(Refusal(400, "mode merge needs `key`".into()));
        }
        Some("merge") => Some(Mode::Merge {
            keys: r.key.clone(),
        }),
        Some("append") => Some(Mode::Append),
        Some(other) => {
            return Err(Refusal(
                400,
                format!("unknown mode `{other}`: overwrite-partition, merge or append"),
            ));
        }
    })
}

/// `m` with the tenant's root taken out (objects named relative to it)
/// and any other host path masked: see [`scrub::RootNames::scrub`].
pub fn scrub(t: &Tenant, m: &str) -> String {
    t.roots.scrub(m)
}

/// The [`Run`] a request of tenant `t` asks for, its paths resolved
/// below the root.
fn build_run(t: &Tenant, r: &RunRequest) -> Result<Run, Refusal> {
    check(t, r)?;
    let module = under(t, &module_rel(&r.module)?, "module")?;
    let slice = match (&r.input, &r.partition) {
        (Some(input), Some(p)) => {
            let (column, value) =
                crate::run::parse_partition(p).map_err(|e| Refusal(400, e.to_string()))?;
            SliceSpec::Partition {
                root: PathBuf::from(under(t, input, "input")?),
                column,
                value,
            }
        }
        _ => SliceSpec::Files {
            files: r
                .files
                .iter()
                .map(|f| under(t, f, "file").map(PathBuf::from))
                .collect::<Result<_, _>>()?,
            id: r.partition.clone(),
        },
    };
    let mut run = Run::new(module, slice, under(t, &r.table, "table")?)
        .params(r.params.to_string())
        .logical_date(r.logical_date.clone())
        .batch_rows(r.batch_rows.unwrap_or(8192))
        .time_limit(Some(std::time::Duration::from_millis(t.cfg.run_timeout_ms)))
        .expect(r.expect.iter().filter_map(|e| e.parse().ok()).collect());
    if let Some(m) = mode_of(r)? {
        run = run.mode(m);
    }
    Ok(run)
}

/// A run's result as recorded (`{kind, version, runKey, manifest,
/// rowsIn, rowsOut, outputDigest}`).
fn result_of(
    kind: &str,
    version: Option<u64>,
    manifest: &crate::manifest::Manifest,
    digest: &crate::digest::Digest,
) -> Value {
    json!({
        "kind": kind,
        "version": version,
        "runKey": manifest.run_key.to_string(),
        "manifest": digest.to_string(),
        "rowsIn": manifest.result.rows_in,
        "rowsOut": manifest.result.rows_out,
        "outputDigest": manifest.result.output_digest.to_string(),
    })
}

/// Whether tenant `t`'s table holds request `r` committed: the run
/// planned (inputs pinned and hashed, nothing executed or written) has a
/// run key that the slice's current commit has. Its result (kind `memo`, as a rerun would say), else `None`,
/// also when the table cannot be read.
pub fn settle(t: &Tenant, r: &RunRequest) -> Option<Value> {
    let explained = std::panic::catch_unwind(AssertUnwindSafe(|| {
        build_run(t, r).ok()?.explain(&t.sandbox).ok()
    }))
    .ok()
    .flatten()?;
    // The slice's current commit (app transactions, not sidecars) names a
    // manifest of this run key: committed. Not the memo index, which is
    // written after the log entry, in the very window a crash leaves.
    let (version, manifest) = explained.current?;
    if manifest.run_key != explained.run_key {
        return None;
    }
    Some(result_of(
        "memo",
        Some(version),
        &manifest,
        &manifest.digest(),
    ))
}

/// Execute one run for tenant `t`: `Ok({kind, version, runKey, manifest,
/// rowsIn, rowsOut})` or `Err({kind, message})`. A panic in the run's work
/// fails the run, never the service.
pub fn execute(t: &Tenant, r: &RunRequest) -> Result<Value, Value> {
    // Messages name objects relative to the root: the host's layout and
    // other tenants stay out of them.
    let fail = |kind: &str, m: String| json!({"kind": kind, "message": scrub(t, &m)});
    let run = build_run(t, r).map_err(|Refusal(_, m)| fail("input", m))?;
    let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| run.execute(&t.sandbox)));
    match outcome {
        Err(_) => Err(fail(
            "bug",
            "the run panicked inside idem (a bug; the service goes on): nothing was committed"
                .into(),
        )),
        Ok(Err(e)) => Err(fail(e.kind().name(), e.to_string())),
        Ok(Ok(report)) => {
            let (kind, version) = match &report.outcome {
                RunOutcome::Committed { version, .. } => ("committed", Some(*version)),
                RunOutcome::Unchanged { since, .. } => ("unchanged", *since),
                RunOutcome::Memo { since } => ("memo", *since),
            };
            Ok(result_of(
                kind,
                version,
                &report.manifest,
                &report.manifest_digest,
            ))
        }
    }
}
