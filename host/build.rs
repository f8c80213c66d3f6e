//! Derive the engine fingerprint's crate versions from the lock file, so a
//! dependency upgrade that could change output bytes changes every run key.
//! The result is the `IDEM_ENGINE_CRATES` environment variable, read by
//! `sandbox::profile` with `env!`.

use std::path::PathBuf;

/// The crates whose version can change what a run outputs or how it is
/// digested: the compiler and its component encoder, the Arrow and Parquet
/// code that reads inputs and decodes/digests outputs, the canonical JSON of
/// params and run keys, the hash, and the Delta writer.
const OUTPUT_CRATES: &[&str] = &[
    "wasmtime",
    "cranelift-codegen",
    "wit-component",
    "arrow-array",
    "arrow-ipc",
    "arrow-digest",
    "parquet",
    "serde_jcs",
    "sha2",
    "deltalake-core",
];

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    // A packaged crate carries its own lock file; in the workspace it is
    // one level up.
    let lock = [dir.join("Cargo.lock"), dir.join("../Cargo.lock")]
        .into_iter()
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "no Cargo.lock next to or above {}: the engine fingerprint is derived from it",
                dir.display()
            )
        });
    println!("cargo:rerun-if-changed={}", lock.display());
    let text = std::fs::read_to_string(&lock)
        .unwrap_or_else(|e| panic!("reading {}: {e}", lock.display()));
    let packages = parse_lock(&text);
    let Some(idem) = packages.iter().find(|p| p.name == "idem") else {
        panic!(
            "{} has no `idem` package: not this workspace's lock file",
            lock.display()
        );
    };
    let mut parts = Vec::new();
    for name in OUTPUT_CRATES {
        let versions: Vec<&str> = packages
            .iter()
            .filter(|p| p.name == *name)
            .map(|p| p.version.as_str())
            .collect();
        // With several versions in the lock, idem's own dependency entry
        // names the one it uses ("sha2 0.11.1").
        let direct = idem.dependencies.iter().find_map(|d| {
            d.split_once(' ')
                .filter(|(n, _)| n == name)
                .map(|(_, v)| v.split(' ').next().unwrap_or(v))
        });
        // Else the version one of idem's direct dependencies uses (arrow
        // 59 names "arrow-array 59.3.2"; another dependency's own copy, such
        // as the iceberg crate's arrow 58, is not what idem runs with).
        let via_direct = || {
            idem.dependencies.iter().find_map(|d| {
                let mut it = d.split(' ');
                let (dn, dv) = (it.next()?, it.next());
                let pkg = packages
                    .iter()
                    .find(|p| p.name == dn && dv.is_none_or(|v| p.version == v))?;
                pkg.dependencies.iter().find_map(|x| {
                    let mut it = x.split(' ');
                    (it.next()? == *name).then(|| it.next().map(str::to_string))?
                })
            })
        };
        let version = match (versions.as_slice(), direct) {
            ([], _) => panic!(
                "{name} is not in {}: update OUTPUT_CRATES in host/build.rs",
                lock.display()
            ),
            (_, Some(v)) => v.to_string(),
            ([v], None) => v.to_string(),
            (_, None) if via_direct().is_some() => via_direct().unwrap_or_default(),
            (vs, None) => {
                let mut vs = vs.to_vec();
                vs.sort();
                vs.join("|")
            }
        };
        parts.push(format!("{name}/{version}"));
    }
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_else(|_| "unknown".into());
    parts.push(format!("target/{arch}"));
    println!("cargo:rustc-env=IDEM_ENGINE_CRATES={}", parts.join(" "));
    embed_guest_sdks(&dir);
}

/// The JavaScript and Python guest SDKs travel inside the binary, so that
/// `idem build` of a JS or Python transform needs no checkout of idem:
/// writes `$OUT_DIR/guest_sdks.rs` with (relative path, bytes) of every
/// file `guest-sdk/js/{package.json,src/}` and
/// `guest-sdk/python/idem_guest/` hold (tests and caches excluded). The
/// Rust SDK travels too, as the part of the workspace a guest crate
/// builds against (its manifest and lock, the WIT, `guest-sdk/` and the
/// demo's `examples/daily_revenue/`), so `idem new` and `idem demo` need
/// no checkout either.
fn embed_guest_sdks(host: &std::path::Path) {
    let sdk = host.join("../guest-sdk");
    let root = host.join("..");
    let mut out = String::new();
    for (name, base, parts) in [
        ("JS", sdk.join("js"), &["package.json", "src"][..]),
        ("PYTHON", sdk.join("python"), &["idem_guest"][..]),
        (
            "RUST",
            root.clone(),
            &[
                "Cargo.toml",
                "Cargo.lock",
                "wit",
                "guest-sdk/Cargo.toml",
                "guest-sdk/src",
                "examples/daily_revenue/Cargo.toml",
                "examples/daily_revenue/src",
            ][..],
        ),
    ] {
        let mut files = Vec::new();
        for part in parts {
            let p = base.join(part);
            println!("cargo:rerun-if-changed={}", p.display());
            collect(&base, &p, &mut files);
        }
        files.sort();
        // Every Rust part is needed: a guest crate builds against all.
        if name == "RUST" {
            for part in parts {
                assert!(
                    base.join(part).exists(),
                    "{} is missing: is the checkout complete?",
                    base.join(part).display()
                );
            }
        }
        // A binary without an SDK would fail every build of that language
        // with "no module idem_guest": refuse to produce one.
        assert!(
            files.iter().any(|(rel, _)| rel.ends_with(".js")
                || rel.ends_with(".py")
                || rel.ends_with(".rs")),
            "{} has no SDK sources to embed: is the checkout complete?",
            base.display()
        );
        out.push_str(&format!("pub const {name}: &[(&str, &[u8])] = &[\n"));
        for (rel, abs) in files {
            out.push_str(&format!("    ({rel:?}, include_bytes!({abs:?})),\n"));
        }
        out.push_str("];\n");
    }
    let dest = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    std::fs::write(dest.join("guest_sdks.rs"), out).expect("writing guest_sdks.rs");
}

/// Files under `p` (or `p` itself), as (path relative to `base` with `/`,
/// absolute path); skips caches and tests' output.
fn collect(base: &std::path::Path, p: &std::path::Path, files: &mut Vec<(String, String)>) {
    let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if name == "__pycache__" || name == "node_modules" || name.starts_with('.') {
        return;
    }
    if p.is_dir() {
        for e in std::fs::read_dir(p).into_iter().flatten().flatten() {
            collect(base, &e.path(), files);
        }
    } else if p.is_file() && !name.ends_with(".pyc") {
        let abs = std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
        let rel = p.strip_prefix(base).unwrap_or(p);
        let rel: Vec<String> = rel
            .iter()
            .map(|c| c.to_string_lossy().into_owned())
            .collect();
        files.push((rel.join("/"), abs.display().to_string()));
    }
}

struct Package {
    name: String,
    version: String,
    dependencies: Vec<String>,
}

/// The `[[package]]` entries of a Cargo.lock: name, version and the raw
/// dependency strings ("name" or "name version" or "name version (source)").
fn parse_lock(text: &str) -> Vec<Package> {
    let mut out: Vec<Package> = Vec::new();
    // Lines belong to the last package until another table starts.
    let mut in_package = false;
    let mut in_deps = false;
    let unquote = |s: &str| s.trim().trim_end_matches(',').trim_matches('"').to_string();
    for line in text.lines() {
        let line = line.trim();
        if line == "[[package]]" {
            out.push(Package {
                name: String::new(),
                version: String::new(),
                dependencies: Vec::new(),
            });
            in_package = true;
            in_deps = false;
            continue;
        }
        if !in_deps && line.starts_with('[') {
            // Another table ([metadata], [[patch.unused]]): not a package.
            in_package = false;
            continue;
        }
        let Some(p) = out.last_mut().filter(|_| in_package) else {
            continue;
        };
        if in_deps {
            if line.starts_with(']') {
                in_deps = false;
            } else {
                p.dependencies.push(unquote(line));
            }
        } else if let Some(v) = line.strip_prefix("name = ") {
            p.name = unquote(v);
        } else if let Some(v) = line.strip_prefix("version = ") {
            p.version = unquote(v);
        } else if line.starts_with("dependencies = [") {
            in_deps = !line.ends_with(']');
        }
    }
    out
}
