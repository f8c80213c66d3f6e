//! The deterministic engine profile: one function that builds the wasmtime
//! `Config`, with a line per knob saying which nondeterminism it removes.

use wasmtime::{Config, OptLevel};

use super::Limits;

/// Which imports a module may have and how the host answers them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Profile {
    /// Only imports the host answers deterministically are admitted; clocks,
    /// entropy, sockets, filesystem and http are rejected before anything
    /// runs. The default.
    #[default]
    Strict,
}

impl Profile {
    /// The profile's name as it appears in fingerprints and manifests.
    pub fn name(self) -> &'static str {
        match self {
            Profile::Strict => "strict",
        }
    }
}

/// The wasmtime version this host embeds (kept in step with Cargo.toml).
pub const WASMTIME_VERSION: &str = "48";

/// idem version + wasmtime version + profile (+ fuel metering, which changes
/// the compiled code). Part of every run key.
pub fn fingerprint(profile: Profile, metered: bool) -> String {
    format!(
        "idem/{} wasmtime/{} profile/{}{}",
        env!("CARGO_PKG_VERSION"),
        WASMTIME_VERSION,
        profile.name(),
        if metered { "+fuel" } else { "" }
    )
}

/// Build the engine configuration for `profile`.
pub fn engine_config(profile: Profile, limits: &Limits) -> Config {
    let Profile::Strict = profile;
    let mut c = Config::new();
    // Components only: the guest contract is a WIT world.
    c.wasm_component_model(true);
    // NaN bit patterns differ between CPUs; canonicalize every NaN a float
    // op produces so outputs are bit-identical everywhere.
    c.cranelift_nan_canonicalization(true);
    // Relaxed SIMD results are implementation-defined; pin them.
    c.relaxed_simd_deterministic(true);
    // Threads make interleavings observable; a run is single-threaded.
    // (wasmtime is built without its `threads` feature, so shared memories
    // and atomics.wait cannot even be compiled.)
    c.wasm_shared_everything_threads(false);
    // Wall-clock deadline: an epoch ticker interrupts runaway guests. Cheap
    // (~18%) compared with fuel, and does not affect results.
    c.epoch_interruption(true);
    // Fuel is a deterministic CPU bound (~2x cost), only when asked for.
    c.consume_fuel(limits.fuel.is_some());
    // Stack overflow is a trap, at the same depth on every host.
    c.max_wasm_stack(limits.max_stack_bytes);
    c.cranelift_opt_level(OptLevel::Speed);
    c.parallel_compilation(true);
    c
}
