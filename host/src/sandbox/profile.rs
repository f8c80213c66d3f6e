//! The deterministic engine profile: one function that builds the wasmtime
//! `Config`, with a line per knob saying which nondeterminism it removes.

use wasmtime::{Config, OptLevel};

use super::{Limits, Pool, limits};

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

/// The exact versions, read from Cargo.lock at build time (`host/build.rs`),
/// of every crate that can change output bytes, and the target
/// architecture: `wasmtime/48.0.8 cranelift-codegen/... target/x86_64`.
pub const ENGINE_CRATES: &str = env!("IDEM_ENGINE_CRATES");

/// idem version + the crates that shape output + target + profile (+ fuel
/// metering, which changes the compiled code). Part of every run key.
pub fn fingerprint(profile: Profile, metered: bool) -> String {
    format!(
        "idem/{} {} profile/{}{}",
        env!("CARGO_PKG_VERSION"),
        ENGINE_CRATES,
        profile.name(),
        if metered { "+fuel" } else { "" }
    )
}

/// Build the engine configuration for `profile`.
pub fn engine_config(profile: Profile, limits: &Limits, pool: Option<Pool>) -> Config {
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
    // Allocation only (results are the same either way, and so is the
    // compiled code, so the compiled-code cache is shared with the plain
    // engine): slots for instances, memories and tables reserved once and
    // reused, so a guest starts without mapping fresh memory. Sized to what
    // the limiter admits anyway, so a guest that fits its limits fits a
    // slot. Each memory slot reserves the default 4 GiB of address space
    // (+ guard), which lets compiled code skip bounds checks: address
    // space, not memory; a pool of N instances reserves N x 8 x ~4 GiB.
    if let Some(pool) = pool {
        let mut p = wasmtime::PoolingAllocationConfig::new();
        let per = limits::MAX_INSTANCES as u32;
        p.total_component_instances(pool.instances)
            .total_core_instances(pool.instances * per)
            .max_core_instances_per_component(per)
            .total_memories(pool.instances * limits::MAX_MEMORIES as u32)
            .max_memories_per_component(limits::MAX_MEMORIES as u32)
            .max_memories_per_module(limits::MAX_MEMORIES as u32)
            .total_tables(pool.instances * limits::MAX_TABLES as u32)
            .max_tables_per_component(limits::MAX_TABLES as u32)
            .max_tables_per_module(limits::MAX_TABLES as u32)
            .table_elements(limits::MAX_TABLE_ELEMENTS)
            // Bounds on an instance's context (which grows with its
            // functions, globals and tables), only checked, never reserved:
            // as large as the limits above can make it.
            .max_core_instance_size(16 << 20)
            .max_component_instance_size(16 << 20)
            // wasm32 memories end at 4 GiB; the reservation is that large.
            .max_memory_size(pool.max_memory_bytes.clamp(64 << 10, 4 << 30));
        c.allocation_strategy(wasmtime::InstanceAllocationStrategy::Pooling(p));
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The version of `name` in the workspace's Cargo.lock, read here
    /// independently of build.rs.
    fn locked(name: &str) -> String {
        let lock =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../Cargo.lock")).unwrap();
        let at = lock
            .find(&format!("name = \"{name}\"\n"))
            .unwrap_or_else(|| panic!("{name} not in Cargo.lock"));
        let rest = &lock[at..];
        let v = rest.split("version = \"").nth(1).unwrap();
        v[..v.find('"').unwrap()].to_string()
    }

    #[test]
    fn the_fingerprint_names_exact_locked_versions_and_the_target() {
        let f = fingerprint(Profile::Strict, true);
        let wasmtime = locked("wasmtime");
        assert!(wasmtime.split('.').count() == 3, "{wasmtime}");
        assert!(f.contains(&format!(" wasmtime/{wasmtime} ")), "{f}");
        assert!(
            f.contains(&format!(
                " cranelift-codegen/{} ",
                locked("cranelift-codegen")
            )),
            "{f}"
        );
        // arrow-array is locked twice (the iceberg crate uses 58): the one
        // idem's arrow uses is named, alone.
        assert!(
            f.contains(&format!(" arrow-array/{} ", locked("arrow"))),
            "{f}"
        );
        assert!(
            f.contains(&format!(" arrow-ipc/{} ", locked("arrow"))),
            "{f}"
        );
        assert!(!f.contains('|'), "{f}");
        // sha2 is locked twice (cranelift uses 0.10): idem's own is named.
        assert!(f.contains(" sha2/0.11."), "{f}");
        assert!(
            f.contains(&format!(" target/{} ", std::env::consts::ARCH)),
            "{f}"
        );
        assert!(
            f.starts_with(&format!("idem/{} ", env!("CARGO_PKG_VERSION"))),
            "{f}"
        );
        assert!(f.ends_with(" profile/strict+fuel"), "{f}");
        assert_eq!(
            fingerprint(Profile::Strict, false),
            f.trim_end_matches("+fuel")
        );
    }
}
