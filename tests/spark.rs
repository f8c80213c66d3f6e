//! idem's slices as Apache Spark tasks (`idem.spark`, python/idem/spark.py)
//! on a real standalone cluster started here on loopback: pyspark 4.3.0
//! from PyPI (scripts/test installs it into /var/tmp/idem-spark with the
//! idem wheel) on Debian's OpenJDK 17, one master and two workers of one
//! core each (on 127.0.0.1 and 127.0.0.2: Spark never runs a speculative
//! copy on the host of the original), executors in their own JVMs and
//! Python workers. Tables live on the loopback S3 server (one on a local
//! path every worker sees, and one Iceberg table in a shared SQLite
//! catalog). Every job is compared with the same slices run by one `idem
//! backfill` process: rows by two independent readers, and each slice
//! committed exactly once, counted from the Delta log.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::S3;
use serde_json::{Value, json};

/// The single-host reference's days, and the plain job's.
const DAYS: usize = 20;
/// The days of the speculation and lost-worker jobs (their premise is
/// one slice; fewer days keep the suite short).
const SHORT: usize = 10;

/// The Python of the Spark environment (pyspark and the idem wheel).
fn spark_python() -> PathBuf {
    let py = std::env::var_os("IDEM_SPARK_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/tmp/idem-spark/bin/python"));
    let ok = Command::new(&py)
        .args(["-c", "import pyspark, idem.spark"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "no pyspark and idem at {}: run the suite with scripts/test (it installs tests/spark-requirements.txt and the idem wheel there)",
        py.display()
    );
    py
}

/// The standalone cluster of tests/spark/cluster.py (a master and two
/// workers, each worker's processes in a group of their own), up until
/// this is dropped (its stdin closes).
struct Cluster {
    child: Child,
    url: String,
    workers: Vec<i32>,
    dir: PathBuf,
}

impl Cluster {
    fn start(py: &Path, env: &[(&'static str, String)]) -> Cluster {
        use std::io::BufRead;
        let mut cmd = Command::new(py);
        cmd.arg(common::root().join("tests/spark/cluster.py"))
            .env("IDEM_CACHE_DIR", common::test_cache())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let v: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("tests/spark/cluster.py did not start ({e}): {line:?}"));
        Cluster {
            child,
            url: v["url"].as_str().unwrap().to_string(),
            workers: v["workers"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p.as_i64().unwrap() as i32)
                .collect(),
            dir: PathBuf::from(v["dir"].as_str().unwrap()),
        }
    }

    /// Which worker `pid` runs under (its parent chain reaches the worker).
    fn worker_of(&self, pid: i32) -> usize {
        let parents = parents();
        let mut p = pid;
        loop {
            if let Some(i) = self.workers.iter().position(|w| *w == p) {
                return i;
            }
            p = *parents
                .get(&p)
                .unwrap_or_else(|| panic!("process {pid} runs under no worker"));
        }
    }

    /// SIGKILL worker `i` and everything under it (its executor JVM, the
    /// PySpark daemon, which makes a process group of its own, and its
    /// Python workers) at once: a lost machine.
    fn kill_worker(&mut self, i: usize) {
        let parents = parents();
        let root = self.workers[i];
        let under = |mut p: i32| {
            while p > 1 {
                if p == root {
                    return true;
                }
                p = parents.get(&p).copied().unwrap_or(0);
            }
            false
        };
        let doomed: Vec<i32> = parents.keys().copied().filter(|p| under(*p)).collect();
        for &p in &doomed {
            // A process may have ended since the listing (a Python worker
            // finishing its task): gone is what the kill is for.
            let killed = unsafe { libc::kill(p, libc::SIGKILL) } == 0;
            let gone = std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
            assert!(killed || gone, "kill -KILL {p} (of {doomed:?})");
        }
    }

    /// Start the driver of one application running `plan`'s jobs.
    fn driver(&self, py: &Path, env: &[(&'static str, String)], plan: &Value) -> Child {
        let mut cmd = Command::new(py);
        cmd.arg(common::root().join("tests/spark/driver.py"))
            .arg(&self.url)
            .arg(plan.to_string())
            .env("IDEM_CACHE_DIR", common::test_cache())
            .env("SPARK_LOCAL_IP", "127.0.0.1")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.spawn().unwrap()
    }

    /// Run one application to its end: each job's outcome rows, by name.
    fn run(&self, py: &Path, env: &[(&'static str, String)], plan: &Value) -> Jobs {
        self.finish(self.driver(py, env, plan))
    }

    /// Wait for a driver: each job's outcome rows, by name.
    fn finish(&self, child: Child) -> Jobs {
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "the Spark driver failed:\n{stdout}\n{}\nexecutors:\n{}",
            tail(&stderr, 6000),
            executor_logs(&self.dir)
        );
        let mut jobs = Jobs::new();
        for line in stdout.lines().filter(|l| l.starts_with('{')) {
            let v: Value = serde_json::from_str(line).unwrap();
            eprintln!(
                "spark job {}: {:.1} s",
                v["job"].as_str().unwrap(),
                v["seconds"].as_f64().unwrap()
            );
            jobs.insert(
                v["job"].as_str().unwrap().to_string(),
                v["rows"].as_array().unwrap().clone(),
            );
        }
        jobs
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

/// Every process's parent, from /proc.
fn parents() -> BTreeMap<i32, i32> {
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        // "pid (comm) state ppid ...": comm may hold spaces.
        if let Some(ppid) = stat[stat.rfind(')').unwrap_or(0) + 2..]
            .split(' ')
            .nth(1)
            .and_then(|p| p.parse().ok())
        {
            out.insert(pid, ppid);
        }
    }
    out
}

/// The executors' stderr files (their Python tracebacks), cut.
fn executor_logs(dir: &Path) -> String {
    let mut out = String::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.file_name().is_some_and(|n| n == "stderr") {
                let text = std::fs::read_to_string(&p).unwrap_or_default();
                out.push_str(&format!("== {}\n{}\n", p.display(), tail(&text, 3000)));
            }
        }
    }
    out
}

/// Each job's outcome rows, by job name.
type Jobs = BTreeMap<String, Vec<Value>>;

fn tail(s: &str, n: usize) -> &str {
    let mut start = s.len().saturating_sub(n);
    while !s.is_char_boundary(start) {
        start += 1;
    }
    &s[start..]
}

/// The outcome of each slice in a job's rows.
fn outcomes(rows: &[Value]) -> BTreeMap<String, String> {
    rows.iter()
        .map(|r| {
            (
                r["slice"].as_str().unwrap().to_string(),
                r["outcome"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn days(n: usize) -> Vec<String> {
    (1..=n).map(|d| format!("2026-10-{d:02}")).collect()
}

/// Rows and per-slice commit counts of a Delta table, by both independent
/// readers (which must agree on the rows).
fn delta_view(table: &str, env: &[(&'static str, String)]) -> (Vec<String>, BTreeMap<String, u64>) {
    let read = |script: &str| -> Value {
        let mut cmd = Command::new(common::python());
        cmd.arg(common::root().join(script)).arg(table);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "{script} {table}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let (a, b) = (read("tests/read_delta.py"), read("tests/read_delta_raw.py"));
    assert_eq!(a["rows"], b["rows"], "the two readers disagree on {table}");
    let rows = a["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap().to_string())
        .collect();
    let commits = b["commits"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_u64().unwrap()))
        .collect();
    (rows, commits)
}

/// The same table run by one `idem backfill --jobs 2` process; its exit
/// code must be `code`.
fn single_host(
    env: &[(&'static str, String)],
    (module, input, table): (&str, &str, &str),
    n: usize,
    extra: &[&str],
    code: i32,
) {
    let days = days(n);
    let mut args = vec![
        "backfill",
        "--module",
        module,
        "--input",
        input,
        "--table",
        table,
        "--from",
        &days[0],
        "--to",
        &days[n - 1],
        "--jobs",
        "2",
    ];
    args.extend_from_slice(extra);
    let e: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let (got, out, err) = common::idem_env(&args, &e);
    assert_eq!(got, code, "idem backfill of {table}:\n{out}\n{err}");
}

fn assert_each_slice_committed_once(commits: &BTreeMap<String, u64>, n: usize, what: &str) {
    assert_eq!(commits.len(), n, "{what}: slices committed: {commits:?}");
    assert!(
        commits.values().all(|c| *c == 1),
        "{what}: a slice committed more than once: {commits:?}"
    );
}

/// One `idem.spark.backfill` job of the driver's plan: clean_orders over
/// the first `n` days.
fn backfill_job(name: &str, module: &str, input: &str, table: &str, n: usize) -> Value {
    let d = days(n);
    json!({"name": name, "call": "backfill", "args": {
        "module": module, "input": input, "table": table, "start": d[0], "end": d[n - 1],
        "batch_rows": 700, "params": {"min_amount": 10}, "job_name": name,
    }})
}

/// What every case shares: the S3 server, the sample days, the modules,
/// the Iceberg catalog, and the single-host reference's rows.
struct Fixture {
    py: PathBuf,
    s3: S3,
    env: Vec<(&'static str, String)>,
    work: tempfile::TempDir,
    input: String,
    module: String,
    hostile: String,
    want: Vec<String>,
}

const TRAP_PARAMS: &str = r#"{"panic_on_slice": "date=2026-10-03"}"#;

impl Fixture {
    /// The data, and the same slices run by one `idem backfill` process:
    /// 20 days on S3, the trapping guest's 6 on a local table, 5 into
    /// Iceberg.
    fn new() -> Fixture {
        let py = spark_python();
        let s3 = S3::start("lake");
        let env = s3.env();
        let work = tempfile::tempdir().unwrap();
        let data = work.path().join("orders");
        for d in days(DAYS) {
            common::orders(&data, &d, 3_000, 2);
        }
        let path = |p: PathBuf| p.to_str().unwrap().to_string();
        let mut fx = Fixture {
            py,
            env,
            input: path(data),
            module: path(common::guest("examples/clean_orders")),
            hostile: path(common::guest("tests/guests/hostile")),
            want: Vec::new(),
            s3,
            work,
        };
        let clean = ["--batch-rows", "700", "--params", r#"{"min_amount": 10}"#];
        let reference = fx.s3.url("reference");
        single_host(
            &fx.env,
            (&fx.module, &fx.input, &reference),
            DAYS,
            &clean,
            0,
        );
        let (want, ref_commits) = delta_view(&reference, &fx.env);
        assert_each_slice_committed_once(&ref_commits, DAYS, "the reference");
        fx.want = want;
        // The trapping slice fails there too: exit 3, a guest failure.
        let trap_ref = fx.local("trap_reference");
        single_host(
            &fx.env,
            (&fx.hostile, &fx.input, &trap_ref),
            6,
            &["--params", TRAP_PARAMS],
            3,
        );
        single_host(
            &fx.env,
            (&fx.module, &fx.input, &fx.iceberg("reference")),
            5,
            &clean,
            0,
        );
        fx
    }

    fn local(&self, name: &str) -> String {
        self.work.path().join(name).to_str().unwrap().to_string()
    }

    fn catalog(&self) -> PathBuf {
        self.work.path().join("lake/catalog.db")
    }

    fn iceberg(&self, name: &str) -> String {
        format!("iceberg+sqlite://{}#sales.{name}", self.catalog().display())
    }

    fn job(&self, name: &str, table: &str, n: usize) -> Value {
        backfill_job(name, &self.module, &self.input, table, n)
    }

    fn trap_job(&self) -> Value {
        let mut trap = backfill_job("trap", &self.hostile, &self.input, &self.local("trap"), 6);
        trap["args"]["params"] = serde_json::from_str(TRAP_PARAMS).unwrap();
        trap["args"]["batch_rows"] = json!(8192);
        trap
    }

    /// A Delta table the cluster wrote: the single host's rows (of its
    /// first `n` days), each slice committed once.
    fn assert_equals_reference(&self, table: &str, n: usize, what: &str) {
        let env = if table.starts_with("s3://") {
            &self.env[..]
        } else {
            &[]
        };
        let (got, commits) = delta_view(table, env);
        let days = days(n);
        let want: Vec<&String> = self
            .want
            .iter()
            .filter(|r| {
                days.iter()
                    .any(|d| r.contains(&format!("\"date\": \"{d}\"")))
            })
            .collect();
        assert!(!want.is_empty() && want.len() <= self.want.len());
        assert!(
            got.iter().collect::<Vec<_>>() == want,
            "{what}: the table differs from the single-host one"
        );
        assert_each_slice_committed_once(&commits, n, what);
    }
}

#[test]
fn slices_run_as_spark_tasks_commit_exactly_once_whatever_spark_retries() {
    let fx = Fixture::new();
    let mut cluster = Cluster::start(&fx.py, &fx.env);
    plain_trap_and_iceberg(&fx, &cluster);
    speculation(&fx, &cluster);
    lost_worker(&fx, &mut cluster);
    // The whole set again, after all that: memo hits (the trap still
    // traps: its guest is deterministic).
    let plan = json!({"app": "idem-rerun", "jobs": [
        fx.job("speculated", &fx.local("speculated"), SHORT),
        fx.job("killed", &fx.s3.url("killed"), SHORT),
        fx.trap_job(),
    ]});
    let jobs = cluster.run(&fx.py, &fx.env, &plan);
    for (name, rows) in &jobs {
        let memo = outcomes(rows).values().filter(|o| *o == "memo").count();
        let want = if name == "trap" { 5 } else { SHORT };
        assert_eq!(memo, want, "rerun of {name}: {rows:?}");
    }
    assert_eq!(outcomes(&jobs["trap"])["date=2026-10-03"], "failed");
    fx.assert_equals_reference(&fx.s3.url("killed"), SHORT, "the table after the rerun");
}

/// Twenty slices on S3, a guest that traps on one slice (a local table),
/// and Iceberg, in one application.
fn plain_trap_and_iceberg(fx: &Fixture, cluster: &Cluster) {
    let plain = fx.s3.url("plain");
    // The plain job's tasks sign their manifests (a key file every
    // executor reads).
    let key = fx.local("team.pem");
    let (code, _, err) = common::idem(&["keygen", "--out", &key]);
    assert_eq!(code, 0, "{err}");
    let mut signed = fx.job("plain", &plain, DAYS);
    signed["args"]["sign_key"] = json!(key);
    // The trap job's tasks send OpenLineage events to a folder both
    // workers reach.
    let events = fx.local("events");
    let mut trap = fx.trap_job();
    trap["args"]["lineage"] = json!(format!("file://{events}"));
    let plan = json!({"app": "idem-plain", "jobs": [
        signed, trap, fx.job("iceberg", &fx.iceberg("spark"), 5),
    ]});
    let jobs = cluster.run(&fx.py, &fx.env, &plan);
    let rows = &jobs["plain"];
    assert_eq!(rows.len(), DAYS);
    assert!(
        outcomes(rows).values().all(|o| o == "committed"),
        "{rows:?}"
    );
    fx.assert_equals_reference(&plain, DAYS, "the cluster's table");
    let env: Vec<(&str, &str)> = fx.env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let public = fx.local("team.pub.pem");
    let (code, out, err) = common::idem_env(&["audit", &plain, "--key", &public], &env);
    assert_eq!(code, 0, "every slice signed by the tasks' key: {out}{err}");
    assert_eq!(out.matches("signed by key").count(), DAYS, "{out}");
    for r in rows {
        let a = r["attempts"].as_array().unwrap();
        assert_eq!(a.len(), 1, "one attempt logged per slice: {r}");
        assert_eq!(
            (&a[0]["attempt"], &a[0]["outcome"]),
            (&r["attempt"], &json!("committed"))
        );
    }

    // The trap: one failed slice, kind guest, with its message; the
    // others committed, as the single host committed them.
    let trap = outcomes(&jobs["trap"]);
    assert_eq!(trap["date=2026-10-03"], "failed", "{trap:?}");
    let failed = jobs["trap"]
        .iter()
        .find(|r| r["outcome"] == "failed")
        .unwrap();
    assert_eq!(failed["error_kind"], "guest", "{failed}");
    assert!(
        failed["error"]
            .as_str()
            .unwrap()
            .contains("deliberate panic"),
        "{failed}"
    );
    assert_eq!(trap.values().filter(|o| *o == "committed").count(), 5);
    let (t, tc) = delta_view(&fx.local("trap"), &[]);
    let (r, _) = delta_view(&fx.local("trap_reference"), &[]);
    assert!(
        t == r && !t.is_empty(),
        "the trap job's table differs from the single host's"
    );
    assert_each_slice_committed_once(&tc, 5, "the trap job's table");
    // Its events: each slice's START and its end (FAIL for the trap, with
    // the guest's kind), all naming the one Spark job as their parent.
    let events = common::lineage_events(Path::new(&events));
    common::validate_lineage(&events);
    let kinds = |k: &str| events.iter().filter(|e| e["eventType"] == k).count();
    assert_eq!(
        (kinds("START"), kinds("COMPLETE"), kinds("FAIL")),
        (6, 5, 1),
        "{events:?}"
    );
    let parents: std::collections::BTreeSet<String> = events
        .iter()
        .map(|e| e["run"]["facets"]["parent"]["run"]["runId"].to_string())
        .collect();
    assert_eq!(parents.len(), 1, "{parents:?}");
    let parent = &events[0]["run"]["facets"]["parent"]["job"]["name"];
    assert!(
        parent.as_str().unwrap().starts_with("spark trap "),
        "{parent}"
    );
    let fail = events.iter().find(|e| e["eventType"] == "FAIL").unwrap();
    let message = fail["run"]["facets"]["errorMessage"]["message"]
        .as_str()
        .unwrap();
    assert!(
        message.starts_with("guest:") && message.contains("deliberate panic"),
        "{message}"
    );

    // Iceberg: the single host's rows, one snapshot per slice.
    assert!(
        outcomes(&jobs["iceberg"])
            .values()
            .all(|o| o == "committed")
    );
    let got = read_iceberg(&fx.catalog(), "sales.spark");
    assert_eq!(
        got["rows"],
        read_iceberg(&fx.catalog(), "sales.reference")["rows"]
    );
    let mut per_slice = BTreeMap::<String, u64>::new();
    for s in got["snapshots"].as_array().unwrap() {
        if let Some(slice) = s["idem.slice"].as_str() {
            *per_slice.entry(slice.into()).or_default() += 1;
        }
    }
    assert_each_slice_committed_once(&per_slice, 5, "the Iceberg table");
}

/// Speculation forced on: the first attempt of 2026-10-05 commits and
/// records its run, then stalls (a task that never reports back); Spark
/// starts a twin on the other host, which finds the run committed.
fn speculation(fx: &Fixture, cluster: &Cluster) {
    let table = fx.local("speculated");
    let plan = json!({"app": "idem-speculation", "conf": {
        "spark.speculation": "true",
        "spark.speculation.multiplier": "1.5",
        "spark.speculation.quantile": "0.5",
        "spark.speculation.interval": "100ms",
        "spark.speculation.minTaskRuntime": "1s",
        "spark.executorEnv.IDEM_FAULT_SLEEP_MS": "after-record@date=2026-10-05:120000",
        "spark.executorEnv.IDEM_FAULT_ONCE": fx.local("fault-once"),
    }, "jobs": [fx.job("speculated", &table, SHORT)]});
    let jobs = cluster.run(&fx.py, &fx.env, &plan);
    let slow = jobs["speculated"]
        .iter()
        .find(|r| r["slice"] == "date=2026-10-05")
        .unwrap();
    assert_eq!(
        slow["attempt"], 1,
        "Spark kept the speculative twin: {slow}"
    );
    assert_eq!(
        slow["outcome"], "memo",
        "the twin found the run committed: {slow}"
    );
    let attempts: Vec<(i64, &str)> = slow["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["attempt"].as_i64().unwrap(),
                a["outcome"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        attempts,
        [(0, "committed"), (1, "memo")],
        "the outcomes say which attempt committed and which found it done"
    );
    fx.assert_equals_reference(&table, SHORT, "the speculated table");
}

/// A worker killed with SIGKILL (with its executor and Python workers) in
/// the middle of the job: the first attempt of 2026-10-05 announces itself
/// and stalls at its execution (once), the test kills the worker it runs
/// on, and Spark reruns the task on the other one.
fn lost_worker(fx: &Fixture, cluster: &mut Cluster) {
    let table = fx.s3.url("killed");
    let here = fx.work.path().join("arrived");
    let plan = json!({"app": "idem-kill", "conf": {
        "spark.executorEnv.IDEM_FAULT_SLEEP_MS": "execute@date=2026-10-05:120000",
        "spark.executorEnv.IDEM_FAULT_ONCE": fx.local("fault-once-kill"),
        "spark.executorEnv.IDEM_FAULT_BARRIER": format!("execute@date=2026-10-05:1:{}", here.display()),
    }, "jobs": [fx.job("killed", &table, SHORT)]});
    let child = cluster.driver(&fx.py, &fx.env, &plan);
    let pid = first_arrival(&here);
    let worker = cluster.worker_of(pid);
    cluster.kill_worker(worker);
    let jobs = cluster.finish(child);
    let rows = &jobs["killed"];
    assert_eq!(rows.len(), SHORT);
    let done = ["committed", "unchanged", "memo"];
    assert!(
        outcomes(rows).values().all(|o| done.contains(&o.as_str())),
        "{rows:?}"
    );
    let lost = rows
        .iter()
        .find(|r| r["slice"] == "date=2026-10-05")
        .unwrap();
    let survivor = ["127.0.0.1:", "127.0.0.2:"][1 - worker];
    assert!(
        lost["attempt"].as_i64().unwrap() >= 1
            && lost["executor"].as_str().unwrap().starts_with(survivor),
        "the lost task ran again on the other worker: {lost}"
    );
    fx.assert_equals_reference(&table, SHORT, "the table after the lost worker");
}

/// The pid of the first process to arrive at a fault barrier in `dir`.
fn first_arrival(dir: &Path) -> i32 {
    let start = Instant::now();
    loop {
        let pids: Vec<i32> = std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse().ok())
            .collect();
        if let Some(p) = pids.first() {
            return *p;
        }
        assert!(
            start.elapsed() < Duration::from_secs(180),
            "no task reached the fault point"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn read_iceberg(catalog: &Path, ident: &str) -> Value {
    let warehouse = catalog.parent().unwrap().join("warehouse");
    common::read_iceberg(catalog.to_str().unwrap(), &warehouse, ident)
}
