//! OpenLineage events end to end: the real `idem` binary emitting to a
//! folder and to an HTTP receiver on 127.0.0.1 (tests/lineage_receiver.py),
//! every event validated against the official spec 2-0-2 and its facets'
//! schemas with PyPI jsonschema (tests/validate_openlineage.py).

mod common;

use std::io::BufRead as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

fn s(p: &Path) -> String {
    p.to_str().unwrap().to_string()
}

struct Fixture {
    dir: tempfile::TempDir,
    module: String,
}

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        for d in ["2026-10-01", "2026-10-02", "2026-10-03"] {
            common::orders(&dir.path().join("orders"), d, 1_000, 1);
        }
        Fixture {
            dir,
            module: s(&common::guest("examples/clean_orders")),
        }
    }
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
    /// `idem run --json` of `date` into `table` with `extra`: exit code,
    /// JSON (or null), stderr.
    fn run(&self, module: &str, date: &str, table: &str, extra: &[&str]) -> (i32, Value, String) {
        let mut args = common::day_args(module, &s(&self.path("orders")), date, table, &["--json"]);
        args.extend(extra.iter().map(|a| a.to_string()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, out, err) = common::idem_env(&args, &[("OPENLINEAGE_API_KEY", "s3cret")]);
        (code, serde_json::from_str(&out).unwrap_or(Value::Null), err)
    }
}

/// The run id idem derives from a run key, computed here: the first 16
/// bytes as a UUID with version 8 and RFC 9562's variant.
fn run_id_of(run_key: &str) -> String {
    let mut b = hex::decode(&run_key["sha256:".len()..][..32]).unwrap();
    b[6] = (b[6] & 0x0f) | 0x80;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h = hex::encode(b);
    format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    )
}

fn kinds(events: &[Value]) -> Vec<&str> {
    events
        .iter()
        .map(|e| e["eventType"].as_str().unwrap())
        .collect()
}

#[test]
fn runs_backfills_and_failures_emit_events_valid_under_the_spec() {
    let fx = Fixture::new();
    let table = s(&fx.path("t"));
    let dir = fx.path("events");
    let to = format!("file://{}", dir.display());
    let lineage = ["--lineage", to.as_str()];
    let checks = ["--expect", "not_null(customer)", "--expect", "rows(1..)"];
    let extra: Vec<&str> = lineage.iter().chain(&checks).copied().collect();

    // A run: START once planned, COMPLETE with the table's version,
    // schema, row count and the expectations' verdicts.
    let (code, r, err) = fx.run(&fx.module, "2026-10-01", &table, &extra);
    assert_eq!(code, 0, "{err}");
    let ev = common::lineage_events(&dir);
    assert_eq!(kinds(&ev), ["START", "COMPLETE"]);
    let id = run_id_of(r["runKey"].as_str().unwrap());
    assert!(
        ev.iter().all(|e| e["run"]["runId"] == id.as_str()),
        "{ev:?}"
    );
    let (start, done) = (&ev[0], &ev[1]);
    assert_eq!(start["job"]["namespace"], "idem");
    assert_eq!(start["job"]["name"], format!("file://{table}/"));
    let input = &start["inputs"][0];
    assert_eq!(input["namespace"], "file");
    assert_eq!(input["name"], s(&fx.path("orders")));
    let part = &input["inputFacets"]["subset"]["inputCondition"]["partitions"][0];
    assert_eq!(part["dimensions"]["date"], "2026-10-01");
    assert_eq!(
        start["run"]["facets"]["nominalTime"]["nominalStartTime"],
        "2026-10-01T00:00:00Z"
    );
    let out = &done["outputs"][0];
    assert_eq!(out["namespace"], "file");
    assert_eq!(out["name"], table);
    assert_eq!(
        out["facets"]["version"]["datasetVersion"],
        r["outcome"]["version"].to_string()
    );
    assert_eq!(
        out["outputFacets"]["outputStatistics"]["rowCount"],
        r["rowsOut"]
    );
    let fields: Vec<&str> = out["facets"]["schema"]["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert!(
        fields.contains(&"customer") && fields.contains(&"total"),
        "{fields:?}"
    );
    let assertions = &out["outputFacets"]["dataQualityAssertions"]["assertions"];
    assert_eq!(assertions[0]["assertion"], "not_null");
    assert_eq!(assertions[0]["column"], "customer");
    assert_eq!(assertions[0]["success"], true);
    assert_eq!(assertions.as_array().unwrap().len(), 2);
    let m = &done["run"]["facets"]["idem_manifest"];
    assert_eq!(m["outcome"], "committed");
    assert_eq!(m["manifestDigest"], r["manifestDigest"]);
    assert_eq!(m["outputDigest"], r["outputDigest"]);

    // Again (a memo hit) and forced (unchanged): the same run to a
    // lineage store, each a COMPLETE saying which.
    for (flag, outcome) in [(None, "memo"), (Some("--force"), "unchanged")] {
        let mut more = extra.clone();
        more.extend(flag);
        let (code, _, err) = fx.run(&fx.module, "2026-10-01", &table, &more);
        assert_eq!(code, 0, "{err}");
        let ev = common::lineage_events(&dir);
        let last = &ev[ev.len() - 2..];
        assert_eq!(kinds(last), ["START", "COMPLETE"]);
        assert!(last.iter().all(|e| e["run"]["runId"] == id.as_str()));
        assert_eq!(
            last[1]["run"]["facets"]["idem_manifest"]["outcome"],
            outcome
        );
    }

    // A backfill: every slice's events name the backfill as parent.
    let (code, _, err) = common::idem(&[
        "backfill",
        "--module",
        &fx.module,
        "--input",
        &s(&fx.path("orders")),
        "--table",
        &table,
        "--from",
        "2026-10-02",
        "--to",
        "2026-10-03",
        "--lineage",
        &to,
        "-q",
    ]);
    assert_eq!(code, 0, "{err}");
    let ev = common::lineage_events(&dir);
    let slices = &ev[6..];
    assert_eq!(slices.len(), 4);
    let parent = &slices[0]["run"]["facets"]["parent"];
    assert_eq!(parent["job"]["name"], format!("backfill {table}"));
    assert!(
        slices
            .iter()
            .all(|e| e["run"]["facets"]["parent"] == *parent)
    );
    assert_ne!(parent["run"]["runId"], slices[0]["run"]["runId"]);

    // A guest that traps: START, then FAIL with the guest's message.
    let hostile = s(&common::guest("tests/guests/hostile"));
    let trap = [
        "--lineage",
        to.as_str(),
        "--params",
        r#"{"panic_on_slice": "date=2026-10-01"}"#,
        "--batch-rows",
        "8192",
    ];
    let mut args = vec!["run", "--module", &hostile, "--input"];
    let orders = s(&fx.path("orders"));
    let t2 = s(&fx.path("t2"));
    args.extend([
        orders.as_str(),
        "--partition",
        "date=2026-10-01",
        "--table",
        &t2,
    ]);
    args.extend(trap);
    let (code, _, err) = common::idem(&args);
    assert_eq!(code, 3, "{err}");
    let ev = common::lineage_events(&dir);
    let failed = &ev[10..];
    assert_eq!(kinds(failed), ["START", "FAIL"]);
    assert_eq!(failed[0]["run"]["runId"], failed[1]["run"]["runId"]);
    let message = failed[1]["run"]["facets"]["errorMessage"]["message"]
        .as_str()
        .unwrap();
    assert!(
        message.starts_with("guest: ") && message.contains("deliberate panic"),
        "{message}"
    );

    // A date without input fails before its plan: a START and a FAIL
    // under an id of their own.
    let (code, _, _) = fx.run(&fx.module, "2026-09-30", &table, &lineage);
    assert_eq!(code, 2);
    let ev = common::lineage_events(&dir);
    let missing = &ev[12..];
    assert_eq!(kinds(missing), ["START", "FAIL"]);
    assert_eq!(missing[0]["run"]["runId"], missing[1]["run"]["runId"]);
    assert!(
        missing[1]["run"]["facets"]["errorMessage"]["message"]
            .as_str()
            .unwrap()
            .starts_with("input: "),
        "{}",
        missing[1]
    );
    assert_eq!(ev.len(), 14);

    // A bug inside the run (a panic) before the commit ends its events
    // with a FAIL; after the commit, with the COMPLETE the commit made.
    for (i, (point, end)) in [("execute", "FAIL"), ("after-log-write", "COMPLETE")]
        .into_iter()
        .enumerate()
    {
        let t = s(&fx.path(&format!("panics{i}")));
        let mut args = common::day_args(&fx.module, &s(&fx.path("orders")), "2026-10-01", &t, &[]);
        args.extend(["--lineage".to_string(), to.clone()]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, _, err) = common::idem_env(&args, &[("IDEM_FAULT_PANIC", point)]);
        assert_ne!(code, 0, "{err}");
        assert!(err.contains("panicked"), "{err}");
        let ev = common::lineage_events(&dir);
        let last = &ev[ev.len() - 2..];
        assert_eq!(kinds(last), ["START", end], "{point}");
        assert_eq!(last[0]["run"]["runId"], last[1]["run"]["runId"]);
    }
    let ev = common::lineage_events(&dir);
    assert_eq!(ev.len(), 18);
    let message = &ev[15]["run"]["facets"]["errorMessage"]["message"];
    assert!(
        message.as_str().unwrap().contains("idem panicked"),
        "{message}"
    );
    assert_eq!(
        ev[17]["run"]["facets"]["idem_manifest"]["outcome"],
        "committed"
    );
    common::validate_lineage(&ev);
}

/// `python tests/lineage_receiver.py OUT [--fail N]`, killed when dropped.
struct Receiver {
    child: Child,
    port: u16,
    out: PathBuf,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Receiver {
    fn start(out: PathBuf, fail: usize) -> Self {
        let mut child = Command::new(common::python())
            .arg(common::root().join("tests/lineage_receiver.py"))
            .arg(&out)
            .args(["--fail", &fail.to_string()])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap()
            .parse()
            .unwrap();
        Receiver { child, port, out }
    }
    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/api/v1/lineage", self.port)
    }
    /// What it received: (Authorization header, event).
    fn received(&self) -> Vec<(Value, Value)> {
        std::fs::read_to_string(&self.out)
            .unwrap_or_default()
            .lines()
            .map(|l| {
                let v: Value = serde_json::from_str(l).unwrap();
                (v["authorization"].clone(), v["event"].clone())
            })
            .collect()
    }
}

#[test]
fn an_http_receiver_gets_each_run_retried_and_a_dead_one_fails_nothing() {
    let fx = Fixture::new();
    let table = s(&fx.path("t"));
    // The first request is answered 503: the event is sent again.
    let rx = Receiver::start(fx.path("received.jsonl"), 1);
    let url = rx.url();
    let (code, r, err) = fx.run(&fx.module, "2026-10-01", &table, &["--lineage", &url]);
    assert_eq!(code, 0, "{err}");
    let got = rx.received();
    let events: Vec<Value> = got.iter().map(|(_, e)| e.clone()).collect();
    assert_eq!(kinds(&events), ["START", "COMPLETE"]);
    assert!(
        got.iter().all(|(auth, _)| auth == "Bearer s3cret"),
        "{got:?}"
    );
    let id = run_id_of(r["runKey"].as_str().unwrap());
    // The same run again, forced: the same run id.
    let (code, _, err) = fx.run(
        &fx.module,
        "2026-10-01",
        &table,
        &["--lineage", &url, "--force"],
    );
    assert_eq!(code, 0, "{err}");
    let events: Vec<Value> = rx.received().into_iter().map(|(_, e)| e).collect();
    assert_eq!(events.len(), 4);
    assert!(events.iter().all(|e| e["run"]["runId"] == id.as_str()));
    common::validate_lineage(&events);

    // Nobody listening: the run commits, and says what was not delivered.
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let nobody = format!("http://127.0.0.1:{dead}/api/v1/lineage");
    let t = Instant::now();
    let (code, r, err) = fx.run(&fx.module, "2026-10-02", &table, &["--lineage", &nobody]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(r["outcome"]["kind"], "committed");
    assert!(err.contains("OpenLineage START event"), "{err}");
    assert!(
        err.contains("not delivered") && err.contains("the run goes on"),
        "{err}"
    );
    assert!(t.elapsed() < Duration::from_secs(30), "{:?}", t.elapsed());
    // Bad receivers are refused before anything runs.
    let (code, _, err) = fx.run(
        &fx.module,
        "2026-10-03",
        &table,
        &["--lineage", "ftp://x/y"],
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("not a transport"), "{err}");
}

/// Wait (up to 60 s) until `ready` holds.
fn wait_until(what: &str, ready: impl Fn() -> bool) {
    let t = Instant::now();
    while !ready() {
        assert!(t.elapsed() < Duration::from_secs(60), "never: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The signal that ended `child` (it dies by the signal, as it would
/// without idem's handler, after telling ABORT), and its stderr.
fn ended_by(child: Child) -> (Option<i32>, String) {
    use std::os::unix::process::ExitStatusExt as _;
    let out = child.wait_with_output().unwrap();
    (
        out.status.signal(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `idem args` held at fault point `point` (until two processes arrive:
/// one never does), with
/// SIGINT as `sigint` (`SIG_DFL`: as a terminal's foreground job has it,
/// whatever the test runner inherited; a background job of a shell
/// without job control inherits `SIG_IGN`) and SIGTERM at its default.
fn held(args: &[String], point: &str, dir: &Path, sigint: libc::sighandler_t) -> Child {
    use std::os::unix::process::CommandExt as _;
    let mut cmd = common::barrier_command(args, point, 2, dir);
    // SAFETY: signal() is async-signal-safe, as pre_exec requires.
    unsafe {
        cmd.pre_exec(move || {
            libc::signal(libc::SIGINT, sigint);
            libc::signal(libc::SIGTERM, libc::SIG_DFL);
            Ok(())
        });
    }
    cmd.spawn().unwrap()
}

fn signal(child: &Child, sig: libc::c_int) {
    // SAFETY: kill() on our own child's pid.
    assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, sig) }, 0);
}

/// Interrupted runs are told ABORT: a run's Ctrl-C, and a backfill's
/// SIGTERM after its first Ctrl-C (which only stops new slices), each
/// while runs are held inside their execution (a fault-point barrier).
#[test]
fn an_interrupted_run_is_aborted_with_the_events_it_started() {
    let fx = Fixture::new();
    let events = fx.path("events");
    let url = format!("file://{}", s(&events));
    let table = s(&fx.path("t"));
    let orders = s(&fx.path("orders"));
    let held_dir = fx.path("held");
    let args = common::day_args(
        &fx.module,
        &orders,
        "2026-10-01",
        &table,
        &["--lineage", &url],
    );
    let child = held(&args, "execute", &held_dir, libc::SIG_DFL);
    wait_until("the run is held", || {
        std::fs::read_dir(&held_dir).is_ok_and(|mut d| d.next().is_some())
    });
    signal(&child, libc::SIGINT);
    let (sig, err) = ended_by(child);
    assert_eq!(sig, Some(libc::SIGINT), "{err}");
    assert!(err.contains("ABORT for 1 run"), "{err}");
    let got = common::lineage_events(&events);
    common::validate_lineage(&got);
    assert_eq!(kinds(&got), ["START", "ABORT"]);
    assert_eq!(got[0]["run"]["runId"], got[1]["run"]["runId"]);
    assert!(
        !fx.path("t").join("_delta_log").exists(),
        "the interrupted run committed"
    );
    // Run again, it completes (the same run id).
    let (code, v, err) = fx.run(&fx.module, "2026-10-01", &table, &["--lineage", &url]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(v["outcome"]["kind"], "committed");
    let got = common::lineage_events(&events);
    assert_eq!(kinds(&got)[2..], ["START", "COMPLETE"]);
    assert_eq!(got[3]["run"]["runId"], got[1]["run"]["runId"]);

    // A backfill: the first Ctrl-C starts nothing new (the held slices go
    // on); SIGTERM then ends it, each started slice told ABORT.
    std::fs::remove_dir_all(&events).unwrap();
    let held_dir = fx.path("held2");
    let args: Vec<String> = [
        "backfill",
        "--module",
        &fx.module,
        "--input",
        &orders,
        "--table",
        &s(&fx.path("b")),
        "--from",
        "2026-10-01",
        "--to",
        "2026-10-03",
        "--jobs",
        "2",
        "--lineage",
        &url,
    ]
    .iter()
    .map(|a| a.to_string())
    .collect();
    let mut child = held(&args, "execute", &held_dir, libc::SIG_DFL);
    wait_until("both slices started", || {
        common::lineage_events(&events).len() == 2
    });
    signal(&child, libc::SIGINT);
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        child.try_wait().unwrap().is_none(),
        "the first Ctrl-C ended the backfill"
    );
    signal(&child, libc::SIGTERM);
    let (sig, err) = ended_by(child);
    assert_eq!(sig, Some(libc::SIGTERM), "{err}");
    assert!(err.contains("ABORT for 2 run"), "{err}");
    let got = common::lineage_events(&events);
    common::validate_lineage(&got);
    assert_eq!(kinds(&got), ["START", "START", "ABORT", "ABORT"]);
    let ids = |k: &str| {
        let mut v: Vec<String> = got
            .iter()
            .filter(|e| e["eventType"] == k)
            .map(|e| e["run"]["runId"].to_string())
            .collect();
        v.sort();
        v
    };
    assert_eq!(ids("START"), ids("ABORT"));
    assert!(got.iter().all(|e| e["run"]["facets"]["parent"].is_object()));

    // Started ignoring SIGINT (a background job of a script): Ctrl-C stays
    // ignored; SIGTERM still aborts it.
    std::fs::remove_dir_all(&events).unwrap();
    let held_dir = fx.path("held3");
    let args = common::day_args(
        &fx.module,
        &orders,
        "2026-10-02",
        &table,
        &["--lineage", &url],
    );
    let mut child = held(&args, "execute", &held_dir, libc::SIG_IGN);
    wait_until("the run is held", || {
        common::lineage_events(&events).len() == 1
    });
    signal(&child, libc::SIGINT);
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        child.try_wait().unwrap().is_none(),
        "an ignored SIGINT ended the run"
    );
    signal(&child, libc::SIGTERM);
    let (sig, err) = ended_by(child);
    assert_eq!(sig, Some(libc::SIGTERM), "{err}");
    assert_eq!(kinds(&common::lineage_events(&events)), ["START", "ABORT"]);

    // Interrupted after its commit (before its run log is written): the
    // run is told COMPLETE, not ABORT, and nothing after.
    std::fs::remove_dir_all(&events).unwrap();
    let held_dir = fx.path("held4");
    let args = common::day_args(
        &fx.module,
        &orders,
        "2026-10-03",
        &table,
        &["--lineage", &url],
    );
    let child = held(&args, "after-log-write", &held_dir, libc::SIG_DFL);
    wait_until("the run is held after its commit", || {
        std::fs::read_dir(&held_dir).is_ok_and(|mut d| d.next().is_some())
    });
    signal(&child, libc::SIGINT);
    let (sig, err) = ended_by(child);
    assert_eq!(sig, Some(libc::SIGINT), "{err}");
    assert!(err.contains("ABORT for 0 run"), "{err}");
    let got = common::lineage_events(&events);
    common::validate_lineage(&got);
    assert_eq!(kinds(&got), ["START", "COMPLETE"]);
    assert_eq!(
        got[1]["run"]["facets"]["idem_manifest"]["outcome"],
        "committed"
    );
}
