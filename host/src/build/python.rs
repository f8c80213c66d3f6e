//! Python guests: the project's module (`[tool.idem] module` in
//! `pyproject.toml`, else `app`) and idem's embedded `idem_guest` SDK are
//! embedded in CPython by componentize-py, with WASI stubbed out (every
//! WASI call traps, so nothing reaches a clock, entropy or a file).

use std::path::Path;
use std::process::Command;

use super::toolchain::{self, Spec};
use super::{BuildError, WIT, sdks};

/// The toolchain's pinned packages.
pub(super) const TOOLCHAIN: &[&str] = &[include_str!("../../toolchains/python/requirements.txt")];

const WHAT: &str = "a Python build";
const PYTHON_FIX: &str = "install Python 3.9 or newer with pip (e.g. `apt install python3 python3-pip`) and make sure `python3` is on PATH";

/// Runs componentize-py's command line from the toolchain folder's
/// packages (a `pip install --target` folder, which, unlike a virtual
/// environment, still works after it is renamed into place).
const LAUNCH: &str = "import sys; from componentize_py import script; sys.argv[0] = 'componentize-py'; sys.exit(script())";

/// Build the project at `dir`; returns the component and its file stem.
pub(super) fn build(
    dir: &Path,
    toolchains: &Path,
    reuse_dir: &Path,
) -> Result<(Vec<u8>, String), BuildError> {
    let pyproject = dir.join("pyproject.toml");
    let project: toml::Table = if pyproject.is_file() {
        let text = std::fs::read_to_string(&pyproject)
            .map_err(|e| BuildError::Project(format!("reading {}: {e}", pyproject.display())))?;
        text.parse().map_err(|e| {
            BuildError::Project(format!(
                "{} is not TOML ({e}): fix the file",
                pyproject.display()
            ))
        })?
    } else {
        toml::Table::new()
    };
    let module = project
        .get("tool")
        .and_then(|t| t.get("idem"))
        .and_then(|t| t.get("module"))
        .and_then(|m| m.as_str())
        .unwrap_or("app")
        .to_string();
    let valid = module
        .split('.')
        .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'));
    let top = module.split('.').next().unwrap_or_default();
    if !valid || !(dir.join(format!("{top}.py")).is_file() || dir.join(top).is_dir()) {
        return Err(BuildError::Project(format!(
            "{}: no Python module `{module}` ({top}.py): put the transform in app.py, or name its module with `[tool.idem] module = \"...\"` in pyproject.toml",
            dir.display()
        )));
    }
    if module == "idem_app" || top == "idem_guest" {
        return Err(BuildError::Project(format!(
            "{}: the module name `{module}` is idem's own: rename it",
            dir.display()
        )));
    }
    let python = toolchain::version("python3", WHAT, PYTHON_FIX)?;
    let minor: Option<(u32, u32)> = python
        .trim_start_matches("Python ")
        .split('.')
        .take(2)
        .map(|p| p.parse().ok())
        .collect::<Option<Vec<u32>>>()
        .and_then(|v| Some((*v.first()?, *v.get(1)?)));
    if minor.is_none_or(|v| v < (3, 9)) {
        return Err(BuildError::Missing {
            what: WHAT,
            program: "python3".into(),
            fix: PYTHON_FIX,
            source: std::io::Error::other(format!("it is {python}, older than 3.9")),
        });
    }
    let files = [("requirements.txt", TOOLCHAIN[0])];
    let spec = Spec {
        what: "Python",
        prefix: "python",
        registry: "PyPI",
        files: &files,
        extra: format!("{python} {}", toolchain::platform()),
    };
    let tools = toolchain::ensure(toolchains, &spec, |d| {
        // pip is a package of its own on some systems (Debian's python3-pip).
        let pip = Command::new("python3")
            .args(["-m", "pip", "--version"])
            .output()
            .is_ok_and(|o| o.status.success());
        if !pip {
            return Err(format!(
                "`python3 -m pip` does not run: pip is not installed; {PYTHON_FIX}"
            ));
        }
        toolchain::run_step(
            Command::new("python3")
                .args([
                    "-m",
                    "pip",
                    "install",
                    "--quiet",
                    "--disable-pip-version-check",
                    "--no-warn-script-location",
                    "--target",
                ])
                .arg(d.join("site"))
                .arg("-r")
                .arg(d.join("requirements.txt"))
                .env("PIP_ROOT_USER_ACTION", "ignore"),
        )
    })?;
    let work = tempfile::tempdir().map_err(|e| BuildError::Write {
        path: std::env::temp_dir().display().to_string(),
        source: e,
    })?;
    // componentize-py reads (and writes bytecode caches into) the folders
    // it is given: it gets a copy of the project's files, which are then
    // exactly what the reuse key covers.
    let mut files = Vec::new();
    super::project_files(dir, dir, 0, &mut files);
    files.sort();
    let mut copied: Vec<(String, Vec<u8>)> = Vec::new();
    for (rel, path) in &files {
        let bytes = std::fs::read(path)
            .map_err(|e| BuildError::Project(format!("reading {}: {e}", path.display())))?;
        copied.push((rel.clone(), bytes));
    }
    let project_dir = work.path().join("project");
    let as_files: Vec<(&str, &[u8])> = copied
        .iter()
        .map(|(r, b)| (r.as_str(), b.as_slice()))
        .collect();
    super::write_files(&project_dir, &as_files)?;
    let sdk = work.path().join("sdk");
    super::write_files(&sdk, sdks::PYTHON)?;
    let entry = work.path().join("entry");
    // The SDK first: it arms the sandbox's guards (clock, randomness,
    // stdout) before the transform's module imports anything, so even
    // `from time import time` there gets the guarded function.
    let entry_text = format!(
        "# Written by `idem build`: the SDK's export (and guards), then the transform's module.\nfrom idem_guest._world import Transform  # noqa: F401\nimport {module}  # noqa: F401\n\n# A module that exports no transform fails the build, not its first run.\nfrom idem_guest.transform import exported_class\n\nexported_class()\n"
    );
    super::write_files(&entry, &[("idem_app.py", entry_text.as_bytes())])?;
    super::write_files(work.path(), &[("transform.wit", WIT.as_bytes())])?;
    let mut inputs: Vec<(&str, &[u8])> =
        vec![("entry", entry_text.as_bytes()), ("wit", WIT.as_bytes())];
    inputs.extend(sdks::PYTHON.iter().copied());
    inputs.extend(TOOLCHAIN.iter().map(|t| ("toolchain", t.as_bytes())));
    inputs.extend(as_files.iter().copied());
    let component = super::reuse(reuse_dir, super::Language::Python, &inputs, || {
        let out = work.path().join("component.wasm");
        let result = Command::new("python3")
            .args(["-c", LAUNCH, "--quiet", "-d"])
            .arg(work.path().join("transform.wit"))
            .args(["-w", "transform-world", "componentize", "--stub-wasi", "-p"])
            .arg(&sdk)
            .arg("-p")
            .arg(&project_dir)
            .arg("-p")
            .arg(&entry)
            .arg("idem_app")
            .arg("-o")
            .arg(&out)
            .env("PYTHONPATH", tools.join("site"))
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .env("RUST_BACKTRACE", "0")
            .current_dir(work.path())
            .output()
            .map_err(|source| BuildError::Missing {
                what: WHAT,
                program: "python3".into(),
                fix: PYTHON_FIX,
                source,
            })?;
        if !result.status.success() {
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&result.stdout),
                String::from_utf8_lossy(&result.stderr)
            );
            return Err(BuildError::Componentize {
                what: "the Python build (componentize-py)",
                dir: dir.display().to_string(),
                detail: format!(
                    "{}\n(if the toolchain in {} is damaged, delete that folder: the next build reinstalls it)",
                    super::tail(&text, 25),
                    tools.display()
                ),
            });
        }
        std::fs::read(&out).map_err(|e| BuildError::Write {
            path: out.display().to_string(),
            source: e,
        })
    })?;
    let name = project
        .get("project")
        .and_then(|p| p.get("name"))
        .and_then(|n| n.as_str());
    Ok((component, super::file_stem(name, dir)))
}
