//! JavaScript guests: the project (a `package.json` whose `main`, else
//! `src/index.js` or `index.js`, exports `transform`) is bundled by esbuild
//! with idem's embedded `idem-guest` SDK and embedded in StarlingMonkey by
//! componentize-js, with every WASI feature disabled.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::toolchain::{self, Spec};
use super::{BuildError, WIT, sdks};

/// The toolchain's pinned packages, their lock file and the build driver.
pub(super) const TOOLCHAIN: &[&str] = &[
    include_str!("../../toolchains/js/package.json"),
    include_str!("../../toolchains/js/package-lock.json"),
    include_str!("../../toolchains/js/build.mjs"),
];

const WHAT: &str = "a JavaScript build";
const NODE_FIX: &str = "install Node.js 18 or newer with npm (e.g. `apt install nodejs npm`) and make sure `node` and `npm` are on PATH";

/// Build the project at `dir`; returns the component and its file stem.
pub(super) fn build(
    dir: &Path,
    toolchains: &Path,
    reuse_dir: &Path,
) -> Result<(Vec<u8>, String), BuildError> {
    let package = read_package(dir)?;
    let entry = entry_of(dir, &package)?;
    let major = node_major()?;
    version("npm")?;
    let tools = install_toolchain(toolchains, major)?;
    let work = super::work_dir()?;
    let (bundle, code) = bundle_entry(work.path(), &tools, dir, entry)?;
    // The bundle is everything of the project that reaches the component.
    let mut inputs: Vec<(&str, &[u8])> = vec![("bundle", &code), ("wit", WIT.as_bytes())];
    inputs.extend(TOOLCHAIN.iter().map(|t| ("toolchain", t.as_bytes())));
    let component = super::reuse(reuse_dir, super::Language::JavaScript, &inputs, || {
        let out = work.path().join("component.wasm");
        let wit = work.path().join("transform.wit");
        step(
            &tools,
            dir,
            &[
                "componentize".as_ref(),
                bundle.as_os_str(),
                wit.as_os_str(),
                out.as_os_str(),
            ],
        )?;
        super::read_built(&out)
    })?;
    let name = package.get("name").and_then(|n| n.as_str());
    Ok((component, super::file_stem(name, dir)))
}

/// The project's `package.json`.
fn read_package(dir: &Path) -> Result<serde_json::Value, BuildError> {
    let manifest = dir.join("package.json");
    let text = std::fs::read_to_string(&manifest)
        .map_err(|e| BuildError::Project(format!("reading {}: {e}", manifest.display())))?;
    serde_json::from_str(&text).map_err(|e| {
        BuildError::Project(format!(
            "{} is not JSON ({e}): fix the file",
            manifest.display()
        ))
    })
}

/// The entry module: the package's `main`, else `src/index.js` or
/// `index.js`; it must exist.
fn entry_of(dir: &Path, package: &serde_json::Value) -> Result<PathBuf, BuildError> {
    let entry = match package.get("main").and_then(|m| m.as_str()) {
        Some(main) => dir.join(main),
        None => ["src/index.js", "index.js"]
            .iter()
            .map(|f| dir.join(f))
            .find(|p| p.is_file())
            .unwrap_or_else(|| dir.join("src/index.js")),
    };
    if !entry.is_file() {
        return Err(BuildError::Project(format!(
            "{}: no entry module {}: set \"main\" in package.json to the file that does `export const transform = exportTransform(...)`",
            dir.display(),
            entry.display()
        )));
    }
    Ok(entry)
}

/// Node's major version, refused when older than 18.
fn node_major() -> Result<u32, BuildError> {
    let node = version("node")?;
    let major: u32 = node
        .trim_start_matches('v')
        .split('.')
        .next()
        .and_then(|m| m.parse().ok())
        .unwrap_or(0);
    if major < 18 {
        return Err(BuildError::Missing {
            what: WHAT,
            program: "node".into(),
            fix: NODE_FIX,
            source: std::io::Error::other(format!("it is {node}, older than 18")),
        });
    }
    Ok(major)
}

/// The toolchain folder for Node `major` (installed by `npm ci` on first
/// use).
fn install_toolchain(toolchains: &Path, major: u32) -> Result<PathBuf, BuildError> {
    let files = [
        ("package.json", TOOLCHAIN[0]),
        ("package-lock.json", TOOLCHAIN[1]),
        ("build.mjs", TOOLCHAIN[2]),
    ];
    let spec = Spec {
        what: "JavaScript",
        prefix: "js",
        registry: "the npm registry",
        files: &files,
        extra: format!("node {major} {}", toolchain::platform()),
    };
    toolchain::ensure(toolchains, &spec, |d| {
        toolchain::run_step(
            Command::new("npm")
                .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
                .current_dir(d),
        )
    })
}

/// Bundle `entry` with the SDK into `work`/bundle.js (the WIT world
/// written beside it); returns the bundle's path and bytes.
fn bundle_entry(
    work: &Path,
    tools: &Path,
    dir: &Path,
    entry: PathBuf,
) -> Result<(PathBuf, Vec<u8>), BuildError> {
    // At a stable path: the bundle names its modules' paths in comments,
    // and the reuse key is the bundle.
    let sdk = toolchain::sdk_dir(tools, sdks::JS)?.join("idem-guest");
    super::write_files(work, &[("transform.wit", WIT.as_bytes())])?;
    let entry = std::fs::canonicalize(&entry).unwrap_or(entry);
    let bundle = work.join("bundle.js");
    step(
        tools,
        dir,
        &[
            "bundle".as_ref(),
            entry.as_os_str(),
            sdk.as_os_str(),
            bundle.as_os_str(),
        ],
    )?;
    let mut code = super::read_built(&bundle)?;
    // The world's `side-inputs` export, from the SDK: a project's entry
    // exports only `transform` (as projects did before side inputs).
    code.extend_from_slice(SIDE_INPUTS_EXPORT.as_bytes());
    super::write_files(work, &[("bundle.js", &code)])?;
    Ok((bundle, code))
}

/// Appended to every bundle: the SDK's `side-inputs` export object, which
/// `exportTransform`'s module puts on the global object when it loads,
/// under a name no project's code uses (`sideInputs` is the export's name:
/// a project must not export that name itself).
const SIDE_INPUTS_EXPORT: &str = "
const __idem_side_inputs_export = globalThis[Symbol.for('idem.sideInputs')];
if (__idem_side_inputs_export === undefined) {
  throw new Error(\"the module never loads idem-guest's exportTransform: write `export const transform = exportTransform(YourClass)` with `import { exportTransform } from 'idem-guest'`\");
}
export { __idem_side_inputs_export as sideInputs };
";

/// One step of the driver (`node build.mjs STEP ARGS...`) in the project's
/// folder; its output becomes the error when it fails.
fn step(tools: &Path, dir: &Path, args: &[&std::ffi::OsStr]) -> Result<(), BuildError> {
    let result = Command::new("node")
        .arg(tools.join("build.mjs"))
        .args(args)
        .current_dir(dir)
        .env("RUST_BACKTRACE", "0")
        .output()
        .map_err(|source| BuildError::Missing {
            what: WHAT,
            program: "node".into(),
            fix: NODE_FIX,
            source,
        })?;
    if result.status.success() {
        return Ok(());
    }
    Err(super::builder_failed(
        "the JavaScript build (esbuild, componentize-js)",
        dir,
        tools,
        &result,
    ))
}

fn version(program: &str) -> Result<String, BuildError> {
    toolchain::version(program, WHAT, NODE_FIX)
}
