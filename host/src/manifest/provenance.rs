//! What a v2 manifest tells an auditor who does not read idem's source:
//! the run in SLSA Provenance v1's terms (`buildDefinition` with
//! `buildType`, `externalParameters`, `internalParameters` and
//! `resolvedDependencies`; `runDetails` with `builder.id` and the run key
//! as `metadata.invocationId`), including the determinism profile the
//! module ran under.
//!
//! Everything here is derived, by the derivation of [`BUILD_TYPE`], from
//! the run spec (which the run key covers) and from the modules' bytes
//! (whose digests the run spec holds): the admitted imports. So every
//! host that runs the same spec writes the same bytes (twins, retries and
//! an auditor's replay agree), a manifest whose provenance does not follow
//! from its spec is refused as edited ([`super::Manifest::from_bytes`]),
//! and audit's replay checks the imports against the stored module. Host
//! settings that cannot change the output (the memory, output, stack and
//! time limits; a guest over one traps, it is never told) are not part of
//! it: twins and auditors with other limits must agree on the bytes.
//!
//! The derivation of a `buildType` never changes once written: a new
//! profile knob or field is a new `buildType`, and the old derivation
//! stays for the manifests that name it.

use percent_encoding::{AsciiSet, CONTROLS, utf8_percent_encode};
use serde_json::{Value, json};

use super::spec::RunSpec;
use crate::digest::Digest;

/// SLSA's `buildType` of an idem run, and the derivation below.
pub const BUILD_TYPE: &str = "https://idem.dev/run/v1";
/// The `buildType` of a run with side inputs: v1's derivation, and the
/// side inputs (`externalParameters.sides`; their files among the
/// `resolvedDependencies`, annotated with the side input's name). A run
/// without side inputs keeps v1, so its bytes are what they were.
pub const BUILD_TYPE_SIDES: &str = "https://idem.dev/run/v2";
/// `runDetails.builder.id`: idem (its version is in the engine
/// fingerprint, `internalParameters.engine`, which the run key covers).
pub const BUILDER_ID: &str = "https://idem.dev/host";

/// What the provenance holds beyond the run spec: the imports each module
/// declared and was admitted with (read from its bytes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Provenance {
    /// The transform module's imports.
    pub imports: Vec<String>,
    /// The audit module's, when the run has one.
    pub audit_imports: Option<Vec<String>>,
}

/// `buildDefinition` of a run of `spec` with `p`.
pub fn build_definition(spec: &RunSpec, p: &Provenance) -> Value {
    let mut external = json!({
        "module": spec.module.as_str(),
        "slice": spec.slice.id,
        "params": spec.params,
        "logicalDate": spec.logical_date,
        "batchRows": spec.batch_rows,
        "target": spec.target,
        "expectations": spec.expectations,
    });
    if let Some(a) = &spec.audit {
        external["audit"] = json!({"module": a.module.as_str(), "params": a.params});
    }
    if let Some(t) = &spec.slice.text {
        external["inputDecoding"] = json!(t);
    }
    if !spec.sides.is_empty() {
        let sides: Vec<Value> = spec
            .sides
            .iter()
            .map(|s| json!({"name": s.name, "table": s.table, "deltaVersion": s.input.delta_version}))
            .collect();
        external["sides"] = json!(sides);
    }
    json!({
        "buildType": build_type(spec),
        "externalParameters": external,
        "internalParameters": {
            "engine": spec.engine,
            "determinism": determinism(&spec.engine, p),
        },
        "resolvedDependencies": dependencies(spec),
    })
}

/// The `buildType` whose derivation gives `spec`'s provenance.
fn build_type(spec: &RunSpec) -> &'static str {
    match spec.sides.is_empty() {
        true => BUILD_TYPE,
        false => BUILD_TYPE_SIDES,
    }
}

/// The profiles this `buildType`'s derivation knows: the engine
/// fingerprint's `profile/...` part, and whether it meters fuel.
const PROFILES: [(&str, bool); 2] = [("strict", false), ("strict+fuel", true)];

/// The profile an engine fingerprint names, or why this `buildType`
/// cannot state it (a new profile is a new `buildType`).
pub fn profile_of(engine: &str) -> Result<(&'static str, bool), String> {
    let named = engine.rsplit_once(" profile/").map(|(_, p)| p);
    PROFILES
        .iter()
        .find(|(p, _)| Some(*p) == named)
        .map(|(_, metered)| ("strict", *metered))
        .ok_or_else(|| {
            format!(
                "engine `{}` names no profile {BUILD_TYPE} knows (strict, strict+fuel)",
                crate::text::clip_str(engine, 256).escape_debug()
            )
        })
}

/// The determinism profile: what the engine fingerprint's `profile/NAME`
/// (`+fuel` when metered) means, spelled out.
fn determinism(engine: &str, p: &Provenance) -> Value {
    let (name, metered) = match profile_of(engine) {
        Ok((name, metered)) => (Some(name), metered),
        // Never written: `from_bytes` refuses such a manifest, and idem's
        // own fingerprints all name a known profile (a unit test).
        Err(_) => (None, false),
    };
    let mut d = json!({
        // `strict`: only imports the host answers deterministically are
        // admitted; clocks, entropy, sockets, files and http are refused
        // before anything runs.
        "profile": name,
        // Every NaN a float operation makes has one bit pattern.
        "nanCanonicalization": true,
        // Relaxed SIMD instructions give their deterministic results.
        "relaxedSimdDeterministic": true,
        // No shared memory, no atomics.wait: a run is single-threaded.
        "threads": false,
        // Fuel metering (the fuel used is the result's `fuel`).
        "fuelMetered": metered,
        // Growing memory past the limit, running out of fuel or time, or
        // overflowing the stack traps the guest: limits never change an
        // output, they only stop a run.
        "limitsTrap": true,
        "imports": p.imports,
    });
    if let Some(a) = &p.audit_imports {
        d["auditImports"] = json!(a);
    }
    d
}

/// What a path's characters must be escaped from to be part of a URI (an
/// object name may hold a space, `#`, `%` or `?`).
const PATH: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'<')
    .add(b'>')
    .add(b'?')
    .add(b'[')
    .add(b'\\')
    .add(b']')
    .add(b'^')
    .add(b'`')
    .add(b'{')
    .add(b'|')
    .add(b'}');

/// The module, the audit module and each input, as SLSA resource
/// descriptors.
fn dependencies(spec: &RunSpec) -> Vec<Value> {
    let digest = |d: &Digest| json!({"sha256": d.hex()});
    let mut out = vec![json!({"name": "module", "digest": digest(&spec.module)})];
    if let Some(a) = &spec.audit {
        out.push(json!({"name": "audit-module", "digest": digest(&a.module)}));
    }
    inputs(&spec.slice, None, &mut out);
    for s in &spec.sides {
        inputs(&s.input, Some(&s.name), &mut out);
    }
    out
}

/// Each input of `slice` as a resource descriptor (annotated with the
/// side input's name, for a side input's).
fn inputs(slice: &crate::manifest::SliceRecord, side: Option<&str>, out: &mut Vec<Value>) {
    for i in &slice.inputs {
        let mut d = json!({
            "uri": format!("{}{}", slice.root, utf8_percent_encode(&i.path, PATH)),
            "digest": {"sha256": i.digest.hex()},
            "annotations": {"size": i.size},
        });
        if let Some(v) = slice.delta_version {
            d["annotations"]["deltaVersion"] = v.into();
        }
        if let Some(name) = side {
            d["annotations"]["side"] = name.into();
        }
        out.push(d);
    }
}

/// `runDetails`: idem as the builder, the run key as invocation id.
pub fn run_details(run_key: &Digest) -> Value {
    json!({
        "builder": {"id": BUILDER_ID},
        "metadata": {"invocationId": run_key.as_str()},
    })
}

/// Why a stored `buildDefinition` cannot be read.
#[derive(Debug)]
pub enum Unread {
    /// A later `buildType` of idem's (`https://idem.dev/run/vN`, N > 1).
    Newer(String),
    /// Anything else: not what idem writes.
    Edited(String),
}

/// The [`Provenance`] a stored `buildDefinition` states, or why it cannot
/// be read.
pub fn read(build_definition: &Value) -> Result<Provenance, Unread> {
    let ty = &build_definition["buildType"];
    if ty != BUILD_TYPE && ty != BUILD_TYPE_SIDES {
        let later = ty
            .as_str()
            .and_then(|t| t.strip_prefix("https://idem.dev/run/v"))
            .and_then(|n| n.parse::<u32>().ok())
            .is_some_and(|n| n > 2);
        return Err(match later {
            true => Unread::Newer(format!(
                "buildType {ty} is a later idem's (this idem reads {BUILD_TYPE} and {BUILD_TYPE_SIDES}): read it with that idem"
            )),
            false => Unread::Edited(format!("buildType {ty} is not one idem writes")),
        });
    }
    let d = &build_definition["internalParameters"]["determinism"];
    let names = |v: &Value| -> Result<Vec<String>, Unread> {
        serde_json::from_value(v.clone())
            .map_err(|e| Unread::Edited(format!("determinism imports: {e}")))
    };
    Ok(Provenance {
        imports: names(&d["imports"])?,
        audit_imports: match &d["auditImports"] {
            Value::Null => None,
            v => Some(names(v)?),
        },
    })
}
