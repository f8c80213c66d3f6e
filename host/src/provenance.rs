//! What a v2 manifest tells an auditor who does not read idem's source:
//! the determinism profile the module ran under (NaN canonicalization,
//! relaxed SIMD, no threads, the imports it was admitted with, the
//! limits and fuel), and the run in SLSA Provenance v1's terms
//! (`buildDefinition.externalParameters`, `internalParameters`,
//! `resolvedDependencies`, `runDetails.builder.id`). Everything but the
//! determinism profile is derived from the run spec, so a manifest whose
//! provenance disagrees with its spec is refused as edited; the profile
//! is the signer's statement (a signed envelope binds it).

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::manifest::RunSpec;
use crate::sandbox::Sandbox;

/// How the module was sandboxed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Determinism {
    /// The admission profile (`strict`: only imports the host answers
    /// deterministically; clocks, entropy, sockets, files refused).
    pub profile: String,
    /// Every NaN a float operation makes is canonical.
    pub nan_canonicalization: bool,
    /// Relaxed SIMD instructions give their deterministic results.
    pub relaxed_simd_deterministic: bool,
    /// Shared-memory threads (never: a run is single-threaded).
    pub threads: bool,
    /// The module's imports, all admitted.
    pub imports: Vec<String>,
    /// The limits it ran under.
    pub limits: LimitsRecord,
}

/// The sandbox limits, as a manifest records them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LimitsRecord {
    pub max_memory_bytes: u64,
    pub max_output_bytes: u64,
    pub max_output_rows: u64,
    pub max_stack_bytes: u64,
    pub deadline_ms: u64,
    /// Fuel, when metered (deterministic CPU budget).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fuel: Option<u64>,
}

impl Determinism {
    /// The profile of `sandbox` for a module with `imports`.
    pub fn of(sandbox: &Sandbox, imports: Vec<String>) -> Self {
        let l = &sandbox.config().limits;
        Determinism {
            profile: sandbox.config().profile.name().into(),
            // What `sandbox::profile::engine_config` sets, always.
            nan_canonicalization: true,
            relaxed_simd_deterministic: true,
            threads: false,
            imports,
            limits: LimitsRecord {
                max_memory_bytes: l.max_memory_bytes as u64,
                max_output_bytes: l.max_output_bytes as u64,
                max_output_rows: l.max_output_rows,
                max_stack_bytes: l.max_stack_bytes as u64,
                deadline_ms: l.deadline_ms,
                fuel: l.fuel,
            },
        }
    }
}

/// SLSA's `buildType` for an idem run.
pub const BUILD_TYPE: &str = "https://idem.dev/run/v1";

/// `buildDefinition`: the run's parameters, the engine and profile, and
/// every artifact it read, by digest.
pub fn build_definition(spec: &RunSpec, d: &Determinism) -> Value {
    json!({
        "buildType": BUILD_TYPE,
        "externalParameters": {
            "module": spec.module.as_str(),
            "slice": spec.slice.id,
            "params": spec.params,
            "logicalDate": spec.logical_date,
            "batchRows": spec.batch_rows,
            "target": spec.target,
            "expectations": spec.expectations,
        },
        "internalParameters": {"engine": spec.engine, "determinism": d},
        "resolvedDependencies": dependencies(spec),
    })
}

/// The module, the audit module and each input, as SLSA resource
/// descriptors.
fn dependencies(spec: &RunSpec) -> Vec<Value> {
    let digest = |d: &crate::digest::Digest| json!({"sha256": d.hex()});
    let mut out = vec![json!({"name": "module", "digest": digest(&spec.module)})];
    if let Some(a) = &spec.audit {
        out.push(json!({"name": "audit-module", "digest": digest(&a.module)}));
    }
    for i in &spec.slice.inputs {
        let mut d = json!({
            "uri": format!("{}{}", spec.slice.root, i.path),
            "digest": digest(&i.digest),
            "annotations": {"size": i.size},
        });
        if let Some(v) = spec.slice.delta_version {
            d["annotations"]["deltaVersion"] = v.into();
        }
        out.push(d);
    }
    out
}

/// `runDetails`: who ran it (this idem) and the run key as invocation id.
pub fn run_details(run_key: &crate::digest::Digest) -> Value {
    json!({
        "builder": {"id": format!("https://idem.dev/host/v{}", env!("CARGO_PKG_VERSION"))},
        "metadata": {"invocationId": run_key.as_str()},
    })
}
