//! Shared helpers for the end-to-end tests: real guest components built
//! from `examples/` and `tests/guests/`, real Parquet data.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use idem::sandbox::{Limits, Sandbox, SandboxConfig};

pub mod postgres;

/// The workspace root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Build (once per test process; cargo makes repeats no-ops) the guest crate
/// at `rel` (e.g. `examples/clean_orders`) and return its component path.
pub fn guest(rel: &str) -> PathBuf {
    static BUILT: OnceLock<Mutex<std::collections::HashMap<String, PathBuf>>> = OnceLock::new();
    let map = BUILT.get_or_init(Default::default);
    let mut map = map.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(p) = map.get(rel) {
        return p.clone();
    }
    // The build compiles the component into the tests' compiled cache, with
    // time for a JS or Python engine on busy cores.
    let sandbox = Sandbox::new(SandboxConfig {
        cache_dir: Some(test_cache()),
        limits: Limits {
            compile_deadline_ms: 600_000,
            ..Limits::default()
        },
        ..SandboxConfig::default()
    })
    .unwrap();
    let target = guest_target();
    let built = idem::build::build_guest(&root().join(rel), &target, None, &sandbox)
        .unwrap_or_else(|e| panic!("building guest {rel}: {e}"));
    map.insert(rel.to_string(), built.path.clone());
    built.path
}

/// The bytes of a guest component.
pub fn guest_bytes(rel: &str) -> Vec<u8> {
    std::fs::read(guest(rel)).unwrap()
}

/// The guests' target dir (absolute): the tests' own, never the user's
/// cache (`IDEM_GUEST_TARGET_DIR`, else `$CARGO_TARGET_DIR/idem-guests`,
/// else `target/idem-guests` of the checkout).
pub fn guest_target() -> PathBuf {
    let target = match (
        std::env::var_os("IDEM_GUEST_TARGET_DIR"),
        std::env::var_os("CARGO_TARGET_DIR"),
    ) {
        (Some(d), _) => PathBuf::from(d),
        (None, Some(d)) => PathBuf::from(d).join("idem-guests"),
        (None, None) => PathBuf::from("target").join("idem-guests"),
    };
    if target.is_absolute() {
        target
    } else {
        root().join(target)
    }
}

/// A compiled-code cache shared by the tests of one checkout, so each
/// module is compiled once per suite, not once per test.
pub fn test_cache() -> PathBuf {
    guest_target().join("test-compiled-cache")
}

/// A sandbox with `limits`: a fresh engine each time, sharing the tests'
/// compiled-code cache.
pub fn sandbox_with(limits: Limits) -> Sandbox {
    Sandbox::new(SandboxConfig {
        limits,
        cache_dir: Some(test_cache()),
        ..SandboxConfig::default()
    })
    .unwrap()
}

/// Run the `idem` binary; returns (exit code, stdout, stderr).
pub fn idem(args: &[&str]) -> (i32, String, String) {
    idem_env(args, &[])
}

/// Run the `idem` binary with extra environment variables.
pub fn idem_env(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_idem"));
    cmd.args(args).env("IDEM_CACHE_DIR", test_cache());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("running idem");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Wait for a spawned `idem` with piped output: exit code, stdout, stderr.
pub fn wait(child: std::process::Child) -> (i32, String, String) {
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `idem run --module M --input ROOT --partition date=D --table T
/// --batch-rows 1000 ...extra` (paths or URLs).
pub fn day_args(module: &str, root: &str, date: &str, table: &str, extra: &[&str]) -> Vec<String> {
    let partition = format!("date={date}");
    let args = [
        "run",
        "--module",
        module,
        "--input",
        root,
        "--partition",
        &partition,
        "--table",
        table,
        "--batch-rows",
        "1000",
    ];
    args.iter().chain(extra).map(|a| a.to_string()).collect()
}

/// `idem args`, started in the background and held at fault point `point`
/// until `n` processes have reached it (`IDEM_FAULT_BARRIER`, each
/// announced by a file in `dir`); its output piped.
pub fn idem_at_barrier(args: &[String], point: &str, n: usize, dir: &Path) -> std::process::Child {
    barrier_command(args, point, n, dir).spawn().unwrap()
}

/// The command [`idem_at_barrier`] spawns, to adjust before spawning.
pub fn barrier_command(
    args: &[String],
    point: &str,
    n: usize,
    dir: &Path,
) -> std::process::Command {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_idem"));
    cmd.args(args)
        .env("IDEM_CACHE_DIR", test_cache())
        .env(
            "IDEM_FAULT_BARRIER",
            format!("{point}:{n}:{}", dir.display()),
        )
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    cmd
}

/// Sample orders for `date`: `rows` rows in `files` files under `dir`.
pub fn orders(dir: &Path, date: &str, rows: u64, files: usize) -> Vec<PathBuf> {
    idem::sample::write_day(dir, date, rows, files).unwrap()
}

/// What the independent Python reader (`deltalake` + `polars` from PyPI)
/// sees in a Delta table: its version and its rows as sorted JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableView {
    pub version: i64,
    pub rows: Vec<String>,
}

/// Read `table` (optionally at `version`) with two independent readers:
/// tests/read_delta.py (PyPI deltalake + polars, delta-rs underneath) and
/// tests/read_delta_raw.py (its own replay of `_delta_log` + pyarrow, no
/// delta-rs at all). They must agree; the view is returned.
pub fn read_table(table: &Path, version: Option<u64>) -> TableView {
    let a = python_view("tests/read_delta.py", table, version);
    let b = python_view("tests/read_delta_raw.py", table, version);
    assert_eq!(
        a,
        b,
        "the two independent readers disagree on {}",
        table.display()
    );
    a
}

/// Read `table` with tests/read_delta.py alone (PyPI deltalake + polars):
/// for a log that starts at a checkpoint (older commits cleaned up), which
/// the raw reader, replaying JSON commits only, does not read.
pub fn read_table_from_checkpoint(table: &Path) -> TableView {
    python_view("tests/read_delta.py", table, None)
}

/// The rows of one Parquet file, in the same form as [`read_table`].
pub fn read_parquet_rows(file: &Path) -> Vec<String> {
    python_view("tests/read_delta_raw.py", file, None).rows
}

/// The Python with the tests' packages: `IDEM_PYTHON` (set by
/// scripts/test to its virtual environment), else that environment's
/// default place, else `python3`.
pub fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("IDEM_PYTHON") {
        return PathBuf::from(p);
    }
    let venv = PathBuf::from("/var/tmp/idem-venv/bin/python");
    if venv.exists() {
        venv
    } else {
        PathBuf::from("python3")
    }
}

fn python_view(script: &str, table: &Path, version: Option<u64>) -> TableView {
    python_view_env(script, table.to_str().unwrap(), version, &[])
}

/// Read a table on S3 (`s3://...`) with both independent readers, which
/// must agree (see [`read_table`]).
pub fn read_table_s3(table: &str, s3: &S3, version: Option<u64>) -> TableView {
    let env = s3.env();
    let a = python_view_env("tests/read_delta.py", table, version, &env);
    let b = python_view_env("tests/read_delta_raw.py", table, version, &env);
    assert_eq!(a, b, "the two independent readers disagree on {table}");
    a
}

fn python_view_env(
    script: &str,
    table: &str,
    version: Option<u64>,
    env: &[(&str, String)],
) -> TableView {
    let mut cmd = std::process::Command::new(python());
    cmd.arg(root().join(script)).arg(table);
    for (k, v) in env {
        cmd.env(k, v);
    }
    if let Some(v) = version {
        cmd.arg(v.to_string());
    }
    let out = cmd.output().expect("python3");
    assert!(
        out.status.success(),
        "{script} could not read {}: {}",
        table,
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    TableView {
        version: v["version"].as_i64().unwrap(),
        rows: v["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r.as_str().unwrap().to_string())
            .collect(),
    }
}

/// Run the native build of transform `T` over `inputs` (Parquet files, in
/// order, in batches of `batch_rows`) and write its output to `out`; returns
/// the output's logical digest (what a manifest records).
pub fn native_output<T: idem_guest::Transform>(
    inputs: &[PathBuf],
    params: &str,
    logical_date: Option<&str>,
    batch_rows: u32,
    out: &Path,
) -> idem::digest::Digest {
    use idem::execute::{Native, execute};
    let slice = idem::slice::ResolvedSlice::from_files("native", inputs).unwrap();
    let reader = slice.reader(batch_rows as usize).unwrap();
    let ctx = idem::sandbox::GuestContext {
        slice_id: "native".into(),
        logical_date: logical_date.map(str::to_string),
        params: params.into(),
        input_schema: reader.schema(),
        batch_rows,
    };
    let mut w = idem::output::ParquetOutput::new(out).unwrap();
    let mut t = Native::<T>::default();
    let o = execute(
        &mut t,
        &ctx,
        |c| reader.narrow(c),
        |b| {
            w.write(b)
                .map_err(|e| idem::execute::ExecError::Sink(e.to_string()))
        },
    )
    .unwrap();
    w.commit().unwrap();
    o.output_digest
}

/// The value after `label` on the first line that starts with it.
pub fn field(stdout: &str, label: &str) -> String {
    stdout
        .lines()
        .find_map(|l| l.strip_prefix(label))
        .unwrap_or_else(|| panic!("no `{label}` line in:\n{stdout}"))
        .trim()
        .to_string()
}

/// What PyIceberg's SqlCatalog (tests/read_iceberg.py, sharing no code
/// with idem) reads in table `ident` of the catalog `db` (a SQLite file or
/// a SQLAlchemy URI) whose files are under `warehouse`: rows (sorted
/// canonical JSON), version, snapshots, schema.
pub fn read_iceberg(db: &str, warehouse: &Path, ident: &str) -> serde_json::Value {
    let out = std::process::Command::new(python())
        .arg(root().join("tests/read_iceberg.py"))
        .arg(db)
        .arg(warehouse)
        .arg(ident)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "pyiceberg could not read {ident}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A real S3-compatible server on 127.0.0.1 (tests/s3_server.py: moto's
/// S3 with atomic conditional PUTs and enforced credentials), with one
/// bucket. Stopped when dropped (its stdin closes).
pub struct S3 {
    child: std::process::Child,
    pub endpoint: String,
    pub key: String,
    pub secret: String,
    pub bucket: String,
}

impl S3 {
    /// Start a server with bucket `bucket`.
    pub fn start(bucket: &str) -> S3 {
        Self::start_with(bucket, &[])
    }

    /// Start a server with bucket `bucket` and tests/s3_server.py `flags`.
    pub fn start_with(bucket: &str, flags: &[&str]) -> S3 {
        use std::io::BufRead;
        let mut child = std::process::Command::new(python())
            .arg(root().join("tests/s3_server.py"))
            .arg(bucket)
            .args(flags)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("starting tests/s3_server.py (run scripts/test once to install moto)");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let v: serde_json::Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("tests/s3_server.py did not start ({e}): {line:?}"));
        let s = |k: &str| v[k].as_str().unwrap().to_string();
        S3 {
            endpoint: s("endpoint"),
            key: s("key"),
            secret: s("secret"),
            bucket: s("bucket"),
            child,
        }
    }

    /// The standard AWS variables that point a client at this server.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ENDPOINT_URL", self.endpoint.clone()),
            ("AWS_ACCESS_KEY_ID", self.key.clone()),
            ("AWS_SECRET_ACCESS_KEY", self.secret.clone()),
            ("AWS_REGION", "us-east-1".into()),
            ("AWS_ALLOW_HTTP", "true".into()),
        ]
    }

    /// `s3://<bucket>/<rel>`.
    pub fn url(&self, rel: &str) -> String {
        format!("s3://{}/{rel}", self.bucket)
    }

    /// The requests the server served since the last call (then reset):
    /// by method (`"GET"`: n) and, under `"keys"`, by method and folder
    /// (`"GET tables/t/_delta_log/"`: n). See tests/s3_server.py.
    pub fn take_requests(&self) -> serde_json::Value {
        self.post_json("/_idem/requests")
    }

    /// The most requests the server held at once since the last call
    /// (then counted afresh): how concurrent a client was.
    pub fn take_max_in_flight(&self) -> u64 {
        let v = self.post_json("/_idem/in-flight");
        v["max"]
            .as_u64()
            .unwrap_or_else(|| panic!("requests in flight: {v}"))
    }

    /// POST to one of tests/s3_server.py's own (uncounted) paths.
    fn post_json(&self, path: &str) -> serde_json::Value {
        use std::io::{Read, Write};
        let host = self.endpoint.trim_start_matches("http://");
        let mut conn = std::net::TcpStream::connect(host).expect("connecting to the S3 server");
        write!(
            conn,
            "POST {path} HTTP/1.0\r\nHost: {host}\r\nContent-Length: 0\r\n\r\n"
        )
        .unwrap();
        let mut reply = String::new();
        conn.read_to_string(&mut reply).unwrap();
        let body = reply.split("\r\n\r\n").nth(1).unwrap_or_default();
        serde_json::from_str(body).unwrap_or_else(|e| panic!("{path} ({e}): {reply}"))
    }

    /// Run idem against this server, with `extra` variables on top.
    pub fn idem(&self, args: &[&str], extra: &[(&str, &str)]) -> (i32, String, String) {
        let env = self.env();
        let mut all: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        all.extend_from_slice(extra);
        idem_env(args, &all)
    }
}

impl Drop for S3 {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

/// Check each `(schema, document)` against `schemas/<schema>.schema.json`
/// (JSON Schema 2020-12, with the Python `jsonschema` package; the schema
/// itself is checked too). `Err` lists every violation.
pub fn check_schemas(docs: &[(&str, &str)]) -> Result<(), String> {
    let dir = tempfile::tempdir().unwrap();
    let mut args = Vec::new();
    for (i, (schema, doc)) in docs.iter().enumerate() {
        let path = dir.path().join(format!("{i}.json"));
        std::fs::write(&path, doc).unwrap();
        args.push(format!("{schema}={}", path.display()));
    }
    let script = r#"
import json, pathlib, sys
import jsonschema
root = pathlib.Path(sys.argv[1])
bad = []
for arg in sys.argv[2:]:
    name, path = arg.split("=", 1)
    schema = json.loads((root / f"{name}.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    text = pathlib.Path(path).read_text()
    try:
        doc = json.loads(text)
    except ValueError as e:
        bad.append(f"{name}: not JSON ({e}): {text[:200]!r}")
        continue
    for e in jsonschema.Draft202012Validator(schema).iter_errors(doc):
        bad.append(f"{name}: {e.message} at {list(e.absolute_path)}")
print("\n".join(bad))
sys.exit(1 if bad else 0)
"#;
    let out = std::process::Command::new(python())
        .arg("-c")
        .arg(script)
        .arg(root().join("schemas"))
        .args(&args)
        .output()
        .expect("running python");
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// Under `IDEM_NO_SKIP=1` (CI sets it) a test that would skip fails
/// instead: a green CI run has run every test.
fn no_skip(why: &str) {
    if std::env::var("IDEM_NO_SKIP").is_ok_and(|v| v == "1") {
        panic!("IDEM_NO_SKIP=1 and this test would skip: {why}");
    }
}

/// The `airflow` command of the Airflow test's virtual environment:
/// `IDEM_AIRFLOW`, else scripts/test's default place. `None` only when
/// scripts/test could not install the package and said why in
/// `IDEM_AIRFLOW_SKIP`; otherwise a missing Airflow fails the test.
pub fn airflow() -> Option<PathBuf> {
    let path = std::env::var_os("IDEM_AIRFLOW")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/tmp/idem-airflow/bin/airflow"));
    if path.exists() {
        return Some(path);
    }
    if let Ok(why) = std::env::var("IDEM_AIRFLOW_SKIP") {
        no_skip(&format!("Airflow could not be installed from PyPI: {why}"));
        eprintln!("SKIPPED: Airflow could not be installed from PyPI: {why}");
        return None;
    }
    panic!(
        "no Airflow at {}: run the suite with scripts/test (it installs apache-airflow from tests/airflow-requirements.txt into /var/tmp/idem-airflow)",
        path.display()
    );
}

/// The Python with Playwright for the browser test (`IDEM_BROWSER_PYTHON`,
/// else scripts/test's default place), when Debian's chromium is there
/// too. `None` only when scripts/test could not install them and said why
/// in `IDEM_BROWSER_SKIP`; otherwise their absence fails the test.
pub fn browser_python() -> Option<PathBuf> {
    let py = std::env::var_os("IDEM_BROWSER_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/tmp/idem-browser/bin/python"));
    if py.exists() && Path::new("/usr/bin/chromium").exists() {
        return Some(py);
    }
    if let Ok(why) = std::env::var("IDEM_BROWSER_SKIP") {
        no_skip(&format!("no browser: {why}"));
        eprintln!("SKIPPED: no browser: {why}");
        return None;
    }
    panic!(
        "no Playwright at {} or no /usr/bin/chromium: run the suite with scripts/test (it installs Debian's chromium and Playwright from tests/browser-requirements.txt into /var/tmp/idem-browser)",
        py.display()
    );
}

/// How many commits of the Delta log name each idem slice.
pub fn commits_per_slice(table: &Path) -> std::collections::BTreeMap<String, usize> {
    let mut out = std::collections::BTreeMap::new();
    for e in std::fs::read_dir(table.join("_delta_log")).unwrap() {
        let path = e.unwrap().path();
        if path.extension().is_none_or(|x| x != "json") {
            continue;
        }
        for line in std::fs::read_to_string(&path).unwrap().lines() {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            if let Some(slice) = v["commitInfo"]["idem.slice"].as_str() {
                *out.entry(slice.to_string()).or_default() += 1;
            }
        }
    }
    out
}

/// What one `idem` process did: exit code, stdout, stderr, peak resident
/// memory (KiB) and wall time.
pub struct Ran {
    pub code: i32,
    pub out: String,
    pub err: String,
    pub peak_kib: i64,
    pub took: std::time::Duration,
}

/// Run `idem args` and measure its own peak RSS (wait4 on its pid).
pub fn idem_measured(args: &[&str]) -> Ran {
    let t = std::time::Instant::now();
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_idem"))
        .args(args)
        .env("IDEM_CACHE_DIR", test_cache())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("running idem");
    let pid = child.id() as libc::pid_t;
    // Drain the pipes on threads so the child never blocks on them.
    let mut child = child;
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let o = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut stdout, &mut s).unwrap();
        s
    });
    let e = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut stderr, &mut s).unwrap();
        s
    });
    let mut status = 0;
    // SAFETY: a zeroed rusage is a valid value for wait4 to fill.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our child, not yet waited for; both pointers are valid.
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(r, pid, "wait4 failed");
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -1
    };
    Ran {
        code,
        out: o.join().unwrap(),
        err: e.join().unwrap(),
        peak_kib: usage.ru_maxrss,
        took: t.elapsed(),
    }
}

/// `python tests/dsse_check.py args` (securesystemslib over
/// pyca/cryptography: a DSSE implementation that shares no code with
/// idem): stdout, or stderr on failure.
pub fn dsse_check(args: &[&str]) -> Result<String, String> {
    let out = std::process::Command::new(python())
        .arg(root().join("tests/dsse_check.py"))
        .args(args)
        .output()
        .unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    match out.status.success() {
        true => Ok(text(&out.stdout)),
        false => Err(text(&out.stderr)),
    }
}

/// OpenLineage events a `file://` receiver folder holds, in the order
/// they were written.
pub fn lineage_events(dir: &Path) -> Vec<serde_json::Value> {
    let mut names: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| d.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default();
    names.retain(|p| p.extension().is_some_and(|e| e == "json"));
    names.sort();
    names
        .iter()
        .map(|p| serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap())
        .collect()
}

/// Every OpenLineage event valid under the official spec 2-0-2 and its
/// facets' schemas (tests/validate_openlineage.py, PyPI jsonschema).
pub fn validate_lineage(events: &[serde_json::Value]) {
    let mut child = std::process::Command::new(python())
        .arg(root().join("tests/validate_openlineage.py"))
        .arg("-")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write as _;
        let mut stdin = child.stdin.take().unwrap();
        for e in events {
            writeln!(stdin, "{e}").unwrap();
        }
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["events"], events.len());
}

/// Every file below `dir` (none when it does not exist), in no order.
pub fn files_below(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files_below(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// Rewrite every input file of `date` with one more column, `coupon`
/// (text, null on every third row), or with `order_id` retyped to text
/// (`retype`): what an upstream change looks like to a transform that
/// passes its input's columns through.
pub fn change_input_columns(root: &Path, date: &str, retype: bool) {
    use arrow::array::{Array, ArrayRef, AsArray, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};
    for f in files_below(&root.join(format!("date={date}"))) {
        let file = std::fs::File::open(&f).unwrap();
        let batches: Vec<arrow::array::RecordBatch> =
            parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)
                .unwrap()
                .build()
                .unwrap()
                .map(Result::unwrap)
                .collect();
        let changed: Vec<arrow::array::RecordBatch> = batches
            .iter()
            .map(|b| {
                let mut fields: Vec<Field> = b
                    .schema()
                    .fields()
                    .iter()
                    .map(|f| f.as_ref().clone())
                    .collect();
                let mut cols: Vec<ArrayRef> = b.columns().to_vec();
                if retype {
                    let i = b.schema().index_of("order_id").unwrap();
                    let q = arrow::compute::cast(b.column(i), &DataType::Utf8).unwrap();
                    fields[i] = Field::new("order_id", DataType::Utf8, q.is_nullable());
                    cols[i] = q;
                } else {
                    let ids = b.column_by_name("order_id").unwrap();
                    let ids = ids.as_primitive::<arrow::datatypes::Int64Type>();
                    let coupon: StringArray = ids
                        .iter()
                        .map(|id| id.filter(|id| id % 3 != 0).map(|id| format!("C{}", id % 7)))
                        .collect();
                    fields.push(Field::new("coupon", DataType::Utf8, true));
                    cols.push(std::sync::Arc::new(coupon));
                }
                arrow::array::RecordBatch::try_new(std::sync::Arc::new(Schema::new(fields)), cols)
                    .unwrap()
            })
            .collect();
        let mut w = parquet::arrow::ArrowWriter::try_new(
            std::fs::File::create(&f).unwrap(),
            changed[0].schema(),
            None,
        )
        .unwrap();
        for b in &changed {
            w.write(b).unwrap();
        }
        w.close().unwrap();
    }
}

/// Run a Python snippet with the tests' Python (its packages: PyPI
/// deltalake, pyarrow): another writer, say. Its stderr is the failure.
pub fn python_script(script: &str) {
    python_stdout(script, &[]);
}

/// [`python_script`] with `args` as its `sys.argv[1:]`: its stdout.
pub fn python_stdout(script: &str, args: &[&std::ffi::OsStr]) -> Vec<u8> {
    let out = std::process::Command::new(python())
        .args(["-c", script])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// Each slice's status in a backfill's `--json` output, in its order.
pub fn slice_statuses(out: &str) -> Vec<(String, String)> {
    let v: serde_json::Value = serde_json::from_str(out).unwrap_or_else(|e| panic!("{e}: {out}"));
    v["slices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["slice"].as_str().unwrap().to_string(),
                s["status"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}
