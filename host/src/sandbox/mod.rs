//! Everything wasmtime: the deterministic profile, admission of a module's
//! imports, resource limits, the compiled-code cache and the guest calls.
//! Nothing outside this module names a wasmtime type.

mod admission;
mod cache;
mod error;
mod guest;
mod limits;
mod output;
mod profile;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use wasmtime::Engine;
use wasmtime::component::Component;

pub use admission::{Admission, ImportVerdict, declared_imports};
pub use cache::CacheOutcome;
pub(crate) use cache::{check_private, make_private_dir};
pub use error::SandboxError;
pub use guest::{GuestContext, Instance, LogLine};
pub use limits::Limits;
pub use output::{DecodedOutput, OutputBudget, decode_guest_output};
pub use profile::Profile;

use crate::digest::Digest;

/// How often the epoch ticker advances: the granularity of the deadline.
const EPOCH_TICK: Duration = Duration::from_millis(10);

/// Settings of a [`Sandbox`].
#[derive(Debug, Clone)]
pub struct SandboxConfig {
    /// Which imports are admitted and how the engine is configured.
    pub profile: Profile,
    /// Per-run resource limits.
    pub limits: Limits,
    /// Where compiled code is cached; `None` compiles every time.
    pub cache_dir: Option<PathBuf>,
    /// Instance slots reserved up front (wasmtime's pooling allocator), for
    /// a long-running host that instantiates guest after guest; `None`
    /// allocates each instance on its own (one run per process).
    pub pool: Option<Pool>,
    /// Benchmarks only: an engine whose code has no epoch checks, so
    /// `Limits::deadline_ms` is not enforced (what the deadline costs a
    /// tight loop is measured against it). Never set by idem itself.
    #[doc(hidden)]
    pub unenforced_deadline: bool,
}

/// The pooling allocator's size: how many guests may be alive at once and
/// the largest memory limit of any of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pool {
    /// Guests (component instances) alive at once; one more fails to
    /// instantiate with an error naming the pool.
    pub instances: u32,
    /// The largest [`Limits::max_memory_bytes`] of the runs that share the
    /// engine: no memory grows past it (each slot reserves 4 GiB of
    /// address space regardless, see `profile::engine_config`). A sandbox
    /// with a larger memory limit is refused.
    pub max_memory_bytes: usize,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        SandboxConfig {
            profile: Profile::Strict,
            limits: Limits::default(),
            cache_dir: default_cache_dir(),
            pool: None,
            unenforced_deadline: false,
        }
    }
}

/// The default compiled-code cache: `$IDEM_CACHE_DIR`, else
/// `$XDG_CACHE_HOME/idem`, else `~/.cache/idem`.
pub fn default_cache_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("IDEM_CACHE_DIR") {
        return Some(PathBuf::from(d));
    }
    if let Some(d) = std::env::var_os("XDG_CACHE_HOME") {
        return Some(PathBuf::from(d).join("idem"));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache").join("idem"))
}

/// A deterministic wasm engine plus its compiled-code cache. Cheap to share;
/// one per process is enough.
pub struct Sandbox {
    engine: Engine,
    config: SandboxConfig,
    fingerprint: String,
    /// Stops the epoch ticker when dropped; shared by the sandboxes made
    /// with [`Sandbox::with_limits`], so the last one stops it.
    ticker: Arc<Ticker>,
}

/// Stops the epoch ticker thread when the last sandbox using it is gone.
struct Ticker(Arc<AtomicBool>);

impl Drop for Ticker {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// A module's component bytes and digest, its size and imports checked,
/// not compiled yet.
#[derive(Clone, Debug)]
pub struct ModuleId {
    /// sha256 of the component bytes (after encoding a core module).
    pub digest: Digest,
    /// The component bytes the digest covers.
    pub bytes: Arc<Vec<u8>>,
    /// The imports it declares, all admitted (a v2 manifest states them).
    pub imports: Vec<String>,
}

/// A module that passed admission and is compiled for this engine.
#[derive(Clone)]
pub struct GuestModule {
    /// sha256 of the component bytes (after encoding a core module).
    pub digest: Digest,
    /// The component bytes the digest covers.
    pub bytes: Arc<Vec<u8>>,
    /// Whether compiled code came from the on-disk cache.
    pub cache: CacheOutcome,
    /// The admission report: every import with its verdict.
    pub admission: Admission,
    component: Component,
}

impl Sandbox {
    /// Build the engine for `config.profile` and start the epoch ticker that
    /// enforces wall-clock deadlines.
    pub fn new(config: SandboxConfig) -> Result<Self, SandboxError> {
        check_pool(&config)?;
        let mut engine_config = profile::engine_config(config.profile, &config.limits, config.pool);
        engine_config.epoch_interruption(!config.unenforced_deadline);
        let engine =
            Engine::new(&engine_config).map_err(|e| SandboxError::Engine(format!("{e:#}")))?;
        let fingerprint = profile::fingerprint(config.profile, config.limits.fuel.is_some());
        let ticker_stop = Arc::new(AtomicBool::new(false));
        let (weak, stop) = (engine.weak(), ticker_stop.clone());
        std::thread::Builder::new()
            .name("idem-epoch".into())
            .spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(EPOCH_TICK);
                    match weak.upgrade() {
                        Some(e) => e.increment_epoch(),
                        None => break,
                    }
                }
            })
            .map_err(|e| SandboxError::Engine(format!("epoch thread: {e}")))?;
        Ok(Sandbox {
            engine,
            config,
            fingerprint,
            ticker: Arc::new(Ticker(ticker_stop)),
        })
    }

    /// The same engine (and compiled-code cache) with other per-run
    /// limits: many tenants share one engine. Fuel metering and the stack
    /// size are compiled into the code, so those must match; otherwise a
    /// new engine is built.
    pub fn with_limits(&self, limits: Limits) -> Result<Sandbox, SandboxError> {
        let same_code = limits.fuel.is_some() == self.config.limits.fuel.is_some()
            && limits.max_stack_bytes == self.config.limits.max_stack_bytes;
        let config = SandboxConfig {
            limits,
            ..self.config.clone()
        };
        if !same_code {
            return Sandbox::new(config);
        }
        check_pool(&config)?;
        Ok(Sandbox {
            engine: self.engine.clone(),
            fingerprint: self.fingerprint.clone(),
            config,
            ticker: self.ticker.clone(),
        })
    }

    /// The engine fingerprint that goes into run keys: idem version, the
    /// exact versions (from Cargo.lock) of every crate that shapes output
    /// bytes, the target architecture and the profile. Two hosts with the
    /// same fingerprint produce the same output for the same module and
    /// inputs.
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    /// The settings this sandbox was built with.
    pub fn config(&self) -> &SandboxConfig {
        &self.config
    }

    /// Admit and compile a module (a component, or a wit-bindgen core module
    /// that is encoded into one first). Its size is checked first, then its
    /// imports by parsing, and only then is it compiled (within
    /// [`Limits::compile_deadline_ms`]) or loaded from the cache, which is
    /// keyed by module digest + engine fingerprint.
    pub fn load(&self, bytes: &[u8]) -> Result<GuestModule, SandboxError> {
        self.load_identified(&self.identify(bytes)?)
    }

    /// The first half of [`Sandbox::load`], without compiled code: the size
    /// and import checks, and the digest a run key names. Enough to tell a
    /// memo hit, which then never loads the compiled code.
    pub fn identify(&self, bytes: &[u8]) -> Result<ModuleId, SandboxError> {
        self.identify_unbounded(bytes)
            .map_err(SandboxError::bounded)
    }

    fn identify_unbounded(&self, bytes: &[u8]) -> Result<ModuleId, SandboxError> {
        admission::check_size(bytes.len(), self.config.limits.max_module_bytes)?;
        let bytes = Arc::new(admission::to_component(bytes)?);
        let digest = Digest::of_bytes(&bytes);
        // A forbidden import costs a parse, never a compile or a cache entry.
        let imports = admission::declared_imports(&bytes)?;
        admission::check_imports(&imports, self.config.profile)?;
        Ok(ModuleId {
            digest,
            bytes,
            imports,
        })
    }

    /// The second half of [`Sandbox::load`]: compiled code (from the cache
    /// or compiled within the budget) and the admission of its exports.
    pub fn load_identified(&self, id: &ModuleId) -> Result<GuestModule, SandboxError> {
        self.load_unbounded(id).map_err(SandboxError::bounded)
    }

    fn load_unbounded(&self, id: &ModuleId) -> Result<GuestModule, SandboxError> {
        let (digest, bytes) = (id.digest.clone(), id.bytes.clone());
        let (component, cache) = self.compiled(&digest, &bytes)?;
        // The compiled view is checked too: the export's shape needs types.
        let admission = admission::admit(&self.engine, &component, self.config.profile);
        admission.verdict()?;
        Ok(GuestModule {
            digest,
            bytes,
            cache,
            admission,
            component,
        })
    }

    /// The compiled code of `bytes` (digest `digest`): from the cache, or
    /// compiled within the compile budget and cached.
    fn compiled(
        &self,
        digest: &Digest,
        bytes: &Arc<Vec<u8>>,
    ) -> Result<(Component, CacheOutcome), SandboxError> {
        cache::load_or_compile(
            &self.engine,
            self.config.cache_dir.as_deref(),
            digest,
            &self.fingerprint,
            bytes,
            self.config.limits.compile_deadline_ms,
        )
    }

    /// Read a module file, refusing it by its size before reading it.
    pub fn read_module(&self, location: &Path) -> Result<Vec<u8>, SandboxError> {
        let name = location.to_string_lossy();
        let read_err = |e: crate::storage::StorageError| SandboxError::ModuleStore {
            path: name.to_string(),
            source: e,
        };
        let limit = self.config.limits.max_module_bytes;
        let (store, file, url) = crate::storage::Store::of_file(&name).map_err(read_err)?;
        let len = store
            .size(&file)
            .map_err(read_err)?
            .ok_or_else(|| read_err(crate::storage::StorageError::NotFound(url.to_string())))?;
        admission::check_size(usize::try_from(len).unwrap_or(usize::MAX), limit)?;
        // The limit holds even if the object grows while being read. Not
        // hashed here: `identify` takes the digest of what it admits.
        let (_, _, bytes) = store
            .copy_through(
                &file,
                (limit as u64).saturating_add(1),
                Vec::with_capacity(len as usize),
                crate::storage::Hashes::none(),
            )
            .map_err(read_err)?;
        admission::check_size(bytes.len(), limit)?;
        Ok(bytes)
    }

    /// Inspect a module without rejecting it: digest, imports, exports and
    /// the admission verdict. The size limit and compile budget apply; the
    /// compiled code comes from (and goes to) the cache like a run's, so
    /// inspecting a 19 MB JavaScript component right after `idem build`
    /// compiles nothing.
    pub fn inspect(&self, bytes: &[u8]) -> Result<(Digest, Admission), SandboxError> {
        let limits = &self.config.limits;
        let inspected = (|| {
            admission::check_size(bytes.len(), limits.max_module_bytes)?;
            let bytes = Arc::new(admission::to_component(bytes)?);
            let digest = Digest::of_bytes(&bytes);
            let (component, _) = self.compiled(&digest, &bytes)?;
            Ok((
                digest,
                admission::admit(&self.engine, &component, self.config.profile),
            ))
        })();
        inspected.map_err(SandboxError::bounded)
    }

    /// A fresh instance for one run. Never reuse an instance across runs or
    /// after a trap.
    pub fn instantiate(&self, module: &GuestModule) -> Result<Instance, SandboxError> {
        Instance::new(
            &self.engine,
            &module.component,
            &self.config.limits,
            EPOCH_TICK,
        )
        .map_err(SandboxError::bounded)
    }
}

/// A memory limit larger than the pool's memory slots would let a memory
/// grow past its slot: the grow would fail as a bare trap instead of the
/// limit's clear error. Refused up front.
fn check_pool(config: &SandboxConfig) -> Result<(), SandboxError> {
    match config.pool {
        Some(p) if config.limits.max_memory_bytes > p.max_memory_bytes => {
            Err(SandboxError::Engine(format!(
                "a memory limit of {} bytes is larger than the instance pool's memory slots ({} bytes)",
                config.limits.max_memory_bytes, p.max_memory_bytes
            )))
        }
        _ => Ok(()),
    }
}

/// Component bytes for a module: components pass through, wit-bindgen core
/// modules are encoded with wit-component, WAT text is parsed.
pub fn encode(bytes: &[u8]) -> Result<Vec<u8>, SandboxError> {
    admission::to_component(bytes)
}
