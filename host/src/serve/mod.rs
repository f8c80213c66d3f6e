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
//!
//! The parts, from the bottom up: [`config`] (`serve.toml`), [`tenant`]
//! (a tenant at run time), [`paths`] and [`request`] (what a request may
//! name, checked), [`execute`](mod@execute) (a run on a worker), [`record`] (a run as
//! stored), [`queue`] (the runs), [`heavy`] (uploads, logs and audits
//! outside the queue); this file, the [`Service`] holding them; then
//! HTTP: [`reply`] (answers and refusals), [`caller`] (the authenticated
//! tenant of a request), [`api`] and [`page`] (the routes), [`conn`] (the
//! connections).

pub mod api;
pub mod caller;
pub mod config;
pub mod conn;
pub mod execute;
pub mod heavy;
pub mod manifest;
pub mod page;
pub mod paths;
pub mod queue;
pub mod record;
pub mod reply;
pub mod request;
mod run_view;
pub mod scrub;
pub mod session;
pub mod tenant;
mod text;

use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::json;

use config::ServeConfig;
use queue::Queue;

pub use execute::{execute, settle};
pub use manifest::MAX_MANIFEST_BYTES;
pub use paths::{MODULES_DIR, module_rel, under};
pub use reply::Refusal;
pub use request::{MAX_BATCH_ROWS, check};
pub use tenant::{Tenant, scrub};

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

impl Service {
    /// Build the service from its config (engine, tenants, persisted runs).
    pub fn new(cfg: &ServeConfig, cache_dir: Option<PathBuf>) -> Result<Service, String> {
        let tenants = tenant::tenants(cfg, cache_dir)?;
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

    /// The tenant whose token this is.
    pub fn tenant(&self, token: &str) -> Option<&Tenant> {
        self.tenant_index(token).map(|i| &self.tenants[i])
    }

    /// The place in [`Service::tenants`] of the tenant whose token this
    /// is. Every tenant's hash is compared, in constant time, so timing
    /// says nothing about which one matched.
    pub fn tenant_index(&self, token: &str) -> Option<usize> {
        use sha2::Digest as _;
        let h: [u8; 32] = sha2::Sha256::digest(token.as_bytes()).into();
        let mut found = None;
        for (i, t) in self.tenants.iter().enumerate() {
            if t.has_token_hash(&h) {
                found = Some(i);
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
                    .spawn(move || svc.work())
                    .expect("spawning a worker thread")
            })
            .collect()
    }

    /// A worker's loop: take the next run, execute it, record how it
    /// ended; until the queue stops.
    fn work(&self) {
        while let Some(r) = self.queue.take() {
            // Whatever happens in the run, it ends with a state: a panic
            // anywhere in it fails the run (and frees its tenant's slot),
            // not the worker.
            let result = std::panic::catch_unwind(AssertUnwindSafe(|| {
                match self.tenants.iter().find(|t| t.cfg.name == r.tenant) {
                    Some(t) => execute(t, &r.request),
                    None => Err(json!({"kind": "input", "message": "unknown tenant"})),
                }
            }))
            .unwrap_or_else(|_| Err(json!({
                "kind": "bug",
                "message": "the run panicked inside idem (a bug; the service goes on): nothing was committed",
            })));
            self.queue.finish(&r.id, result);
        }
    }
}
