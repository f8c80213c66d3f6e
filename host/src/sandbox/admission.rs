//! Admission: what a module imports and exports, decided before anything
//! runs. A wit-bindgen core module is encoded into a component first.

use wasmtime::Engine;
use wasmtime::component::Component;
use wasmtime::component::types::ComponentItem;

use super::error::SandboxError;
use super::profile::Profile;

/// The export every transform must have.
pub const TRANSFORM_EXPORT: &str = "idem:transform/transform@0.2.0";
/// The only import the host itself answers.
pub const HOST_IMPORT: &str = "idem:transform/host@0.2.0";

/// What the host does with one import.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImportVerdict {
    /// Answered by the host, deterministically.
    Allowed,
    /// Nondeterministic or outside the sandbox: rejected, with the reason.
    Forbidden(String),
}

/// The admission report of one module.
#[derive(Debug, Clone)]
pub struct Admission {
    /// Every import with its verdict, in the module's order.
    pub imports: Vec<(String, ImportVerdict)>,
    /// Every export's name.
    pub exports: Vec<String>,
    /// `Err` with the reason when the transform export is missing or wrong.
    pub transform_export: Result<(), String>,
}

impl Admission {
    /// `Ok` when the module may run; otherwise the first reason it may not.
    pub fn verdict(&self) -> Result<(), SandboxError> {
        for (import, v) in &self.imports {
            if let ImportVerdict::Forbidden(reason) = v {
                return Err(SandboxError::Forbidden {
                    import: import.clone(),
                    reason: reason.clone(),
                });
            }
        }
        self.transform_export
            .clone()
            .map_err(SandboxError::NotATransform)
    }
}

const CORE_HEADER: [u8; 8] = [0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00];
const COMPONENT_HEADER: [u8; 8] = [0x00, 0x61, 0x73, 0x6d, 0x0d, 0x00, 0x01, 0x00];

/// Component bytes for `bytes`: a component as is, a core module built by
/// wit-bindgen encoded with wit-component, WAT text parsed.
pub fn to_component(bytes: &[u8]) -> Result<Vec<u8>, SandboxError> {
    if bytes.starts_with(&COMPONENT_HEADER) {
        return Ok(bytes.to_vec());
    }
    if bytes.starts_with(&CORE_HEADER) {
        return wit_component::ComponentEncoder::default()
            .module(bytes)
            .and_then(|e| e.validate(true).encode())
            .map_err(|e| {
                SandboxError::NotATransform(format!(
                    "a core wasm module that cannot be encoded as an idem:transform component ({e:#})"
                ))
            });
    }
    // Anything else may be WAT text (handy for tests and tiny modules).
    match wat::parse_bytes(bytes) {
        Ok(bin) if bin.starts_with(&CORE_HEADER) || bin.starts_with(&COMPONENT_HEADER) => to_component(&bin),
        Ok(_) => Err(SandboxError::Compile("WAT did not produce a module or component".into())),
        Err(e) if looks_like_text(bytes) => Err(SandboxError::Compile(format!(
            "WAT text does not parse: {e}"
        ))),
        Err(e) if bytes.starts_with(b"\0asm") => Err(SandboxError::Compile(format!(
            "unsupported wasm version header ({e}): expected a core module or a component"
        ))),
        Err(_) => Err(SandboxError::Compile(
            "not a wasm module, component or WAT text (bad magic header): pass the .wasm that `idem build` wrote".into(),
        )),
    }
}

/// Whether `bytes` start like WAT text (a form or a comment), so a parse
/// error is worth showing.
fn looks_like_text(bytes: &[u8]) -> bool {
    let start = bytes.trim_ascii_start();
    start.starts_with(b"(") || start.starts_with(b";;")
}

/// Refuse a module of `len` bytes over `limit` before it is parsed, encoded
/// or compiled: compile time and memory grow with size.
pub fn check_size(len: usize, limit: usize) -> Result<(), SandboxError> {
    if len > limit {
        return Err(SandboxError::ModuleTooLarge { bytes: len, limit });
    }
    Ok(())
}

/// The top-level import names of component bytes, read by parsing alone:
/// nothing is validated or compiled, so a forbidden import costs one pass
/// over the bytes. Imports of nested components and core modules are
/// satisfied inside the component, never by the host, so they are skipped.
pub fn declared_imports(component: &[u8]) -> Result<Vec<String>, SandboxError> {
    use wasmparser::{Parser, Payload};
    let bad = |e: wasmparser::BinaryReaderError| {
        SandboxError::Compile(format!("the component does not parse: {e}"))
    };
    let mut names = Vec::new();
    // `parse_all` walks nested modules and components inline; each one
    // ends with its own `End`.
    let mut depth = 0usize;
    for payload in Parser::new(0).parse_all(component) {
        match payload.map_err(bad)? {
            Payload::ModuleSection { .. } | Payload::ComponentSection { .. } => depth += 1,
            Payload::End(_) => depth = depth.saturating_sub(1),
            Payload::ComponentImportSection(reader) if depth == 0 => {
                for import in reader {
                    names.push(import.map_err(bad)?.name.name.to_string());
                }
            }
            _ => {}
        }
    }
    Ok(names)
}

/// Refuse the first forbidden name of `imports` under `profile`.
pub fn check_imports(imports: &[String], profile: Profile) -> Result<(), SandboxError> {
    // Built against another version of the contract (an idem-guest before
    // the last WIT change): not forbidden, outdated; say how to fix it.
    if let Some(old) = imports
        .iter()
        .find(|i| i.starts_with("idem:transform/host@") && i.as_str() != HOST_IMPORT)
    {
        return Err(SandboxError::NotATransform(format!(
            "it was built for {old} and this host speaks {HOST_IMPORT}: rebuild it with this idem's idem-guest (`idem build`)"
        )));
    }
    for import in imports {
        if let ImportVerdict::Forbidden(reason) = classify(import, profile) {
            return Err(SandboxError::Forbidden {
                import: import.clone(),
                reason,
            });
        }
    }
    Ok(())
}

/// Check every import and the transform export of a compiled component.
pub fn admit(engine: &Engine, component: &Component, profile: Profile) -> Admission {
    let ty = component.component_type();
    let imports = ty
        .imports(engine)
        .map(|(name, _)| (name.to_string(), classify(name, profile)))
        .collect();
    let exports: Vec<String> = ty.exports(engine).map(|(n, _)| n.to_string()).collect();
    let transform_export = match ty.get_export(engine, TRANSFORM_EXPORT) {
        None if exports.is_empty() => Err(
            "it exports nothing (a core module without wit-bindgen's component-type section encodes to an empty component)"
                .to_string(),
        ),
        None if exports.iter().any(|e| e.starts_with("idem:transform/transform@")) => Err(format!(
            "it was built for {} and this host speaks {TRANSFORM_EXPORT}: rebuild it with this idem's idem-guest (`idem build`)",
            exports.join(", ")
        )),
        None => Err(format!("it exports {} but not {TRANSFORM_EXPORT}", exports.join(", "))),
        Some(ext) => match ext.ty {
            ComponentItem::ComponentInstance(inst) => {
                let missing: Vec<&str> = ["open", "push", "finish"]
                    .into_iter()
                    .filter(|f| !matches!(inst.get_export(engine, f).map(|e| e.ty), Some(ComponentItem::ComponentFunc(_))))
                    .collect();
                if missing.is_empty() {
                    Ok(())
                } else {
                    Err(format!("its {TRANSFORM_EXPORT} lacks {}", missing.join(", ")))
                }
            }
            _ => Err(format!("its {TRANSFORM_EXPORT} export is not an interface")),
        },
    };
    Admission {
        imports,
        exports,
        transform_export,
    }
}

/// The verdict on one import name under `profile`.
pub fn classify(name: &str, profile: Profile) -> ImportVerdict {
    let Profile::Strict = profile;
    let bare = name.split('@').next().unwrap_or(name);
    let forbid = |r: &str| ImportVerdict::Forbidden(r.to_string());
    if name == HOST_IMPORT {
        return ImportVerdict::Allowed;
    }
    let (ns, iface) = bare.split_once('/').unwrap_or((bare, ""));
    match ns {
        "wasi:clocks" => forbid(
            "clock: wall or monotonic time differs between runs; use the logical date from the context",
        ),
        "wasi:random" if iface == "insecure-seed" => forbid(
            "entropy seed: the strict profile provides no WASI; build for wasm32-unknown-unknown",
        ),
        "wasi:random" => forbid("entropy: random bytes differ between runs"),
        "wasi:sockets" => forbid("socket: network access is outside the sandbox"),
        "wasi:http" => forbid("http: network access is outside the sandbox"),
        "wasi:filesystem" => forbid("filesystem: inputs come only through the slice"),
        "wasi:io" | "wasi:cli" => forbid(
            "WASI: this host links no WASI (only idem:transform/host); build for wasm32-unknown-unknown with idem-guest",
        ),
        _ if bare == "idem:transform/host" => forbid(
            "idem:transform/host at another version than 0.2.0: rebuild against this host's WIT (`idem build`)",
        ),
        _ => forbid("unknown import: the host provides only idem:transform/host@0.2.0"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_the_nondeterministic_families() {
        for (name, word) in [
            ("wasi:clocks/wall-clock@0.2.0", "clock"),
            ("wasi:clocks/monotonic-clock@0.2.3", "clock"),
            ("wasi:random/random@0.2.0", "entropy"),
            ("wasi:sockets/tcp@0.2.0", "socket"),
            ("wasi:filesystem/types@0.2.0", "filesystem"),
            ("wasi:http/outgoing-handler@0.2.0", "http"),
            ("acme:spy/phone-home", "unknown"),
        ] {
            match classify(name, Profile::Strict) {
                ImportVerdict::Forbidden(r) => assert!(r.starts_with(word), "{name}: {r}"),
                ImportVerdict::Allowed => panic!("{name} allowed"),
            }
        }
        assert_eq!(
            classify(HOST_IMPORT, Profile::Strict),
            ImportVerdict::Allowed
        );
    }

    #[test]
    fn imports_are_read_without_compiling() {
        let wat = br#"(component
            (import "wasi:clocks/wall-clock@0.2.0" (instance))
            (component $inner (import "acme:inner/thing" (instance)))
            (import "idem:transform/host@0.2.0" (instance)))"#;
        let bytes = to_component(wat).unwrap();
        let names = declared_imports(&bytes).unwrap();
        // The nested component's import is not the host's business.
        assert_eq!(
            names,
            ["wasi:clocks/wall-clock@0.2.0", "idem:transform/host@0.2.0"]
        );
        assert!(matches!(
            check_imports(&names, Profile::Strict),
            Err(SandboxError::Forbidden { import, .. }) if import == "wasi:clocks/wall-clock@0.2.0"
        ));
        assert!(check_imports(&names[1..], Profile::Strict).is_ok());
        // Truncated bytes are an error, not a panic.
        assert!(matches!(
            declared_imports(&bytes[..bytes.len() - 3]),
            Err(SandboxError::Compile(_))
        ));
    }

    #[test]
    fn module_size_is_checked_against_the_limit() {
        assert!(check_size(64 << 20, 64 << 20).is_ok());
        let e = check_size((80 << 20) + 1, 64 << 20).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("80.0 MiB") && msg.contains("64 MiB"), "{msg}");
        assert!(msg.contains("--max-module-mb"), "{msg}");
    }

    #[test]
    fn rejects_bytes_that_are_not_wasm() {
        assert!(matches!(
            to_component(b"PAR1 not wasm"),
            Err(SandboxError::Compile(_))
        ));
    }
}
