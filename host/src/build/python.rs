//! Python guests: the project's module (`[tool.idem] module` in
//! `pyproject.toml`, else `app`) and idem's embedded `idem_guest` SDK are
//! embedded in CPython by componentize-py, with WASI stubbed out (every
//! WASI call traps, so nothing reaches a clock, entropy or a file).

use std::path::{Path, PathBuf};
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
    let project = read_pyproject(dir)?;
    let module = module_of(dir, &project)?;
    let python = python_version()?;
    let tools = install_toolchain(toolchains, &python)?;
    let work = super::work_dir()?;
    // componentize-py reads (and writes bytecode caches into) the folders
    // it is given: it gets a copy of the project's files, which are then
    // exactly what the reuse key covers.
    let copied = read_project(dir)?;
    let as_files: Vec<(&str, &[u8])> = copied
        .iter()
        .map(|(r, b)| (r.as_str(), b.as_slice()))
        .collect();
    super::write_files(&work.path().join("project"), &as_files)?;
    super::write_files(&work.path().join("sdk"), sdks::PYTHON)?;
    let entry_text = entry_module(&module);
    super::write_files(
        &work.path().join("entry"),
        &[("idem_app.py", entry_text.as_bytes())],
    )?;
    super::write_files(work.path(), &[("transform.wit", WIT.as_bytes())])?;
    let mut inputs: Vec<(&str, &[u8])> =
        vec![("entry", entry_text.as_bytes()), ("wit", WIT.as_bytes())];
    inputs.extend(sdks::PYTHON.iter().copied());
    inputs.extend(TOOLCHAIN.iter().map(|t| ("toolchain", t.as_bytes())));
    inputs.extend(as_files.iter().copied());
    let component = super::reuse(reuse_dir, super::Language::Python, &inputs, || {
        componentize(work.path(), &tools, dir)
    })?;
    let name = project
        .get("project")
        .and_then(|p| p.get("name"))
        .and_then(|n| n.as_str());
    Ok((component, super::file_stem(name, dir)))
}

/// The project's `pyproject.toml`, empty when it has none.
fn read_pyproject(dir: &Path) -> Result<toml::Table, BuildError> {
    let pyproject = dir.join("pyproject.toml");
    if !pyproject.is_file() {
        return Ok(toml::Table::new());
    }
    let text = std::fs::read_to_string(&pyproject)
        .map_err(|e| BuildError::Project(format!("reading {}: {e}", pyproject.display())))?;
    text.parse().map_err(|e| {
        BuildError::Project(format!(
            "{} is not TOML ({e}): fix the file",
            pyproject.display()
        ))
    })
}

/// The transform's module (`[tool.idem] module`, else `app`): a dotted
/// Python name whose top level is in `dir`, and not one of idem's own.
fn module_of(dir: &Path, project: &toml::Table) -> Result<String, BuildError> {
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
    Ok(module)
}

/// `python3 --version`, refused when older than 3.9.
fn python_version() -> Result<String, BuildError> {
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
    Ok(python)
}

/// The toolchain folder for `python` (installed by pip on first use).
fn install_toolchain(toolchains: &Path, python: &str) -> Result<PathBuf, BuildError> {
    let files = [("requirements.txt", TOOLCHAIN[0])];
    let spec = Spec {
        what: "Python",
        prefix: "python",
        registry: "PyPI",
        files: &files,
        extra: format!("{python} {}", toolchain::platform()),
    };
    toolchain::ensure(toolchains, &spec, |d| {
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
    })
}

/// The project's source files as (relative path, bytes), sorted.
fn read_project(dir: &Path) -> Result<Vec<(String, Vec<u8>)>, BuildError> {
    let mut files = Vec::new();
    super::project_files(dir, dir, 0, &mut files);
    files.sort();
    let mut copied: Vec<(String, Vec<u8>)> = Vec::new();
    for (rel, path) in &files {
        let bytes = std::fs::read(path)
            .map_err(|e| BuildError::Project(format!("reading {}: {e}", path.display())))?;
        copied.push((rel.clone(), bytes));
    }
    Ok(copied)
}

/// The component's entry module, `idem_app`, importing the transform's
/// `module`. The SDK first: it arms the sandbox's guards (clock,
/// randomness, stdout) before the transform's module imports anything, so
/// even `from time import time` there gets the guarded function.
fn entry_module(module: &str) -> String {
    format!(
        "# Written by `idem build`: the SDK's export (and guards), then the transform's module.\nfrom idem_guest._world import SideInputs, Transform  # noqa: F401\nimport {module}  # noqa: F401\n\n# A module that exports no transform fails the build, not its first run.\nfrom idem_guest.transform import exported_class\n\nexported_class()\n"
    )
}

/// Run componentize-py over the folders written under `work` (the SDK,
/// the project's copy, the entry module and the WIT world); returns the
/// component.
fn componentize(work: &Path, tools: &Path, dir: &Path) -> Result<Vec<u8>, BuildError> {
    let out = work.join("component.wasm");
    let result = Command::new("python3")
        .args(["-c", LAUNCH, "--quiet", "-d"])
        .arg(work.join("transform.wit"))
        .args(["-w", "transform-world", "componentize", "--stub-wasi", "-p"])
        .arg(work.join("sdk"))
        .arg("-p")
        .arg(work.join("project"))
        .arg("-p")
        .arg(work.join("entry"))
        .arg("idem_app")
        .arg("-o")
        .arg(&out)
        .env("PYTHONPATH", tools.join("site"))
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("RUST_BACKTRACE", "0")
        .current_dir(work)
        .output()
        .map_err(|source| BuildError::Missing {
            what: WHAT,
            program: "python3".into(),
            fix: PYTHON_FIX,
            source,
        })?;
    if !result.status.success() {
        return Err(super::builder_failed(
            "the Python build (componentize-py)",
            dir,
            tools,
            &result,
        ));
    }
    super::read_built(&out)
}
