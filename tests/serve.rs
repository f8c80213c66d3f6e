//! `idem serve`: the service as tenants use it, over real HTTP (curl, as
//! the README shows), with real modules, data and Delta tables.

mod common;

use common::dsse_check;

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const TOKEN_A: &str = "token-of-tenant-a";
const TOKEN_B: &str = "token-of-tenant-b";

fn sha(token: &str) -> String {
    use sha2::Digest as _;
    hex::encode(sha2::Sha256::digest(token.as_bytes()))
}

/// A running `idem serve`, killed when dropped.
struct Server {
    child: Child,
    url: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The config for tenants a and b under `dir` (limits small enough for
/// hostile modules to hit them fast).
fn config(dir: &Path, extra_a: &str) -> PathBuf {
    let text = format!(
        r#"listen = "127.0.0.1:0"
state-dir = "state"
workers = 2

[[tenant]]
name = "a"
token-sha256 = "{a}"
root = "a"
max-concurrent = 2
max-queued = 50
max-memory-mb = 64
deadline-ms = 3000
max-output-mb = 8
{extra_a}

[[tenant]]
name = "b"
token-sha256 = "{b}"
root = "b"
max-concurrent = 2
"#,
        a = sha(TOKEN_A),
        b = sha(TOKEN_B),
    );
    std::fs::create_dir_all(dir.join("a")).unwrap();
    std::fs::create_dir_all(dir.join("b")).unwrap();
    let path = dir.join("serve.toml");
    std::fs::write(&path, text).unwrap();
    path
}

fn start(config: &Path, env: &[(&str, &str)]) -> Server {
    start_in(None, config, env)
}

/// [`start`] with the service's working directory at `cwd` (a config
/// named relative to it then has relative roots).
fn start_in(cwd: Option<&Path>, config: &Path, env: &[(&str, &str)]) -> Server {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_idem"));
    cmd.args(["serve", "--config", config.to_str().unwrap()])
        .env("IDEM_CACHE_DIR", common::test_cache())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    for (k, v) in env {
        cmd.env(k, v);
    }
    if let Some(d) = cwd {
        cmd.current_dir(d);
    }
    let mut child = cmd.spawn().unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("no address: {line}"))
        .to_string();
    Server {
        child,
        url: format!("http://{addr}"),
    }
}

/// `curl -X METHOD URL [-H token] [--data-binary body]`: (status, body).
fn curl(method: &str, url: &str, token: Option<&str>, body: Option<&[u8]>) -> (u16, String) {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = Command::new("curl");
    cmd.args([
        "-s",
        "-S",
        "--path-as-is",
        "-X",
        method,
        "-w",
        "\n%{http_code}",
        url,
    ]);
    if let Some(t) = token {
        cmd.args(["-H", &format!("Authorization: Bearer {t}")]);
    }
    if let Some(b) = body {
        let f = dir.path().join("body");
        std::fs::write(&f, b).unwrap();
        cmd.args(["--data-binary", &format!("@{}", f.display())]);
    }
    let out = cmd.output().expect("running curl");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
    (code.trim().parse().unwrap_or(0), body.to_string())
}

fn json_of(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"))
}

fn upload(s: &Server, token: &str, module: &Path) -> (u16, Value) {
    let (code, body) = curl(
        "POST",
        &format!("{}/v1/modules", s.url),
        Some(token),
        Some(&std::fs::read(module).unwrap()),
    );
    (code, json_of(&body))
}

fn submit(s: &Server, token: &str, req: &Value) -> (u16, Value) {
    let (code, body) = curl(
        "POST",
        &format!("{}/v1/runs", s.url),
        Some(token),
        Some(req.to_string().as_bytes()),
    );
    (code, json_of(&body))
}

/// Poll a run until it has ended.
fn wait(s: &Server, token: &str, id: &str) -> Value {
    let start = Instant::now();
    loop {
        let (code, body) = curl("GET", &format!("{}/v1/runs/{id}", s.url), Some(token), None);
        assert_eq!(code, 200, "{body}");
        let v = json_of(&body);
        if matches!(v["state"].as_str(), Some("succeeded" | "failed")) {
            return v;
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "run {id} never ended: {v}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn day_request(module: &str, table: &str, date: &str) -> Value {
    json!({
        "module": module,
        "input": "orders",
        "partition": format!("date={date}"),
        "table": table,
        "logicalDate": date,
        "batchRows": 1000,
    })
}

/// Tokens, uploads, runs, joins, isolation; a service run is the CLI's run.
#[test]
fn tenants_run_through_the_service_as_through_the_cli_and_see_only_their_own() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "");
    let root_a = dir.path().join("a");
    common::orders(&root_a.join("orders"), "2026-10-01", 2_000, 2);
    common::orders(&dir.path().join("b/orders"), "2026-10-01", 500, 1);
    // Runs pause 1 s before committing: a resubmission finds them running.
    let s = start(&cfg, &[("IDEM_FAULT_SLEEP_MS", "before-commit:1000")]);

    assert_eq!(curl("GET", &format!("{}/health", s.url), None, None).0, 200);
    // No token, a wrong token: 401, and no hint of what exists.
    for token in [None, Some("nope")] {
        let (code, body) = curl("GET", &format!("{}/v1/runs", s.url), token, None);
        assert_eq!(code, 401, "{body}");
    }

    let revenue = common::guest("examples/daily_revenue");
    let (code, up) = upload(&s, TOKEN_A, &revenue);
    assert_eq!(code, 201, "{up}");
    let module = up["module"].as_str().unwrap().to_string();
    assert!(
        root_a
            .join("_modules")
            .join(format!("{}.wasm", &module[7..]))
            .exists()
    );

    // B cannot run A's module, nor see A's run, log or manifest.
    let req = day_request(&module, "tables/revenue", "2026-10-01");
    let (code, v) = submit(&s, TOKEN_B, &req);
    assert_eq!(code, 404, "{v}");
    assert!(v["error"].as_str().unwrap().contains("no module"), "{v}");

    let (code, v) = submit(&s, TOKEN_A, &req);
    assert_eq!(code, 202, "{v}");
    let id = v["id"].as_str().unwrap().to_string();
    // The same request while it is queued or running joins it.
    let (code, again) = submit(&s, TOKEN_A, &req);
    assert_eq!(code, 202);
    assert_eq!(again["joined"], true, "{again}");
    assert_eq!(again["id"], v["id"]);
    let done = wait(&s, TOKEN_A, &id);
    assert_eq!(done["state"], "succeeded", "{done}");
    assert_eq!(done["result"]["kind"], "committed", "{done}");
    for path in [format!("/v1/runs/{id}"), format!("/v1/runs/{id}/manifest")] {
        let (code, body) = curl("GET", &format!("{}{path}", s.url), Some(TOKEN_B), None);
        assert_eq!(code, 404, "{path}: {body}");
    }

    // The CLI sees the same run: same run key (a memo hit), the same
    // manifest bytes.
    let table = root_a.join("tables/revenue");
    let (code, manifest) = curl(
        "GET",
        &format!("{}/v1/runs/{id}/manifest", s.url),
        Some(TOKEN_A),
        None,
    );
    assert_eq!(code, 200);
    let (code, shown, err) = common::idem(&[
        "show",
        &format!("{}#date=2026-10-01", table.display()),
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(manifest.trim_end(), shown.trim_end());
    let args = common::day_args(
        revenue.to_str().unwrap(),
        root_a.join("orders").to_str().unwrap(),
        "2026-10-01",
        table.to_str().unwrap(),
        &["--logical-date", "2026-10-01", "--json"],
    );
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, out, err) = common::idem(&args);
    assert_eq!(code, 0, "{err}");
    assert_eq!(json_of(&out)["outcome"]["kind"], "memo", "{out}");
    assert_eq!(json_of(&out)["runKey"], done["result"]["runKey"], "{out}");

    // A second submission after the first ended is a memo hit.
    let (_, v) = submit(&s, TOKEN_A, &req);
    let memo = wait(&s, TOKEN_A, v["id"].as_str().unwrap());
    assert_eq!(memo["result"]["kind"], "memo", "{memo}");

    // Paths outside the root, however spelled, are refused, and the
    // refusal does not say what is there.
    let b_root = dir.path().join("b").display().to_string();
    for (field, value) in [
        ("table", "../b/tables/x"),
        ("table", "/tmp/x"),
        ("table", "s3://bucket/x"),
        ("table", "tables/../../b/x"),
        ("table", "_modules/x"),
        ("input", "../b/orders"),
        ("input", "orders/../../b/orders"),
    ] {
        let mut r = req.clone();
        r[field] = json!(value);
        let (code, v) = submit(&s, TOKEN_A, &r);
        assert_eq!(code, 400, "{field}={value}: {v}");
        assert!(!v.to_string().contains(&b_root), "{v}");
    }
    // B has a table; A names it through encodings, dots and a symlink
    // inside its own root: refused (400), never B's log.
    let (_, up) = upload(&s, TOKEN_B, &revenue);
    let (_, v) = submit(
        &s,
        TOKEN_B,
        &day_request(
            up["module"].as_str().unwrap(),
            "tables/revenue",
            "2026-10-01",
        ),
    );
    assert_eq!(
        wait(&s, TOKEN_B, v["id"].as_str().unwrap())["state"],
        "succeeded"
    );
    std::os::unix::fs::symlink(dir.path().join("b"), root_a.join("link")).unwrap();
    for path in [
        "..%2Fb%2Ftables%2Frevenue",
        "%252e%252e/b/tables/revenue",
        "tables/%252e%252e/%252e%252e/b/tables/revenue",
        "./../b/tables/revenue",
        "link/tables/revenue",
    ] {
        let (code, body) = curl(
            "GET",
            &format!("{}/v1/log/{path}", s.url),
            Some(TOKEN_A),
            None,
        );
        assert_eq!(code, 400, "{path}: {body}");
        assert!(!body.contains(&b_root), "{body}");
    }
    for (field, value) in [
        ("table", "link/tables/revenue"),
        ("input", "link/orders"),
        ("table", "%2e%2e/b/tables/x"),
        ("table", "./_modules/x"),
        ("table", "."),
    ] {
        let mut r = req.clone();
        r[field] = json!(value);
        let (code, v) = submit(&s, TOKEN_A, &r);
        assert_eq!(code, 400, "{field}={value}: {v}");
    }
    let mut r = req.clone();
    r["batchRows"] = json!(4_294_967_295u64);
    assert_eq!(submit(&s, TOKEN_A, &r).0, 400);
    let mut r = req.clone();
    r["params"] = json!({"big": 0});
    let text = r
        .to_string()
        .replace("\"big\":0", "\"big\":123456789012345678901");
    let (code, body) = curl(
        "POST",
        &format!("{}/v1/runs", s.url),
        Some(TOKEN_A),
        Some(text.as_bytes()),
    );
    assert_eq!(code, 400, "{body}");
    assert!(body.contains("params.big"), "{body}");
    // No token: refused before the body is read.
    let big = vec![b'x'; 8 << 20];
    assert_eq!(
        curl("POST", &format!("{}/v1/modules", s.url), None, Some(&big)).0,
        401
    );

    // Log and audit of the tenant's own table, as the CLI prints them.
    let (code, body) = curl(
        "GET",
        &format!("{}/v1/log/tables/revenue", s.url),
        Some(TOKEN_A),
        None,
    );
    assert_eq!(code, 200, "{body}");
    // The service's run, the CLI's memo hit, the service's memo hit.
    assert_eq!(
        json_of(&body)["runs"].as_array().unwrap().len(),
        3,
        "{body}"
    );
    let (code, body) = curl(
        "GET",
        &format!("{}/v1/audit/tables/revenue", s.url),
        Some(TOKEN_A),
        None,
    );
    assert_eq!(code, 200, "{body}");
    assert_eq!(json_of(&body)["proven"], true, "{body}");

    // Metrics: Prometheus text with A's two succeeded runs.
    let (code, m) = curl("GET", &format!("{}/metrics", s.url), None, None);
    assert_eq!(code, 200);
    assert!(
        m.contains("idem_runs{tenant=\"a\",state=\"succeeded\"} 2"),
        "{m}"
    );
    assert!(m.contains("idem_queue_depth{tenant=\"b\"} 0"), "{m}");
    assert!(
        m.contains("idem_runs{tenant=\"b\",state=\"succeeded\"} 1"),
        "{m}"
    );
    assert!(m.contains("idem_run_seconds_count 3"), "{m}");
}

/// Hostile modules fail only their own runs; the other tenant's run at the
/// same time completes; a forbidden import, and a guest too big for an
/// instance slot, are refused at upload, named.
#[test]
fn hostile_modules_fail_their_own_runs_and_the_service_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "");
    common::orders(&dir.path().join("a/orders"), "2026-10-01", 2_000, 1);
    common::orders(&dir.path().join("b/orders"), "2026-10-01", 2_000, 1);
    let s = start(&cfg, &[]);

    let (code, v) = upload(
        &s,
        TOKEN_A,
        &common::root().join("tests/wat/import-wall-clock.wat"),
    );
    assert_eq!(code, 422, "{v}");
    assert!(
        v["error"]
            .as_str()
            .unwrap()
            .contains("wasi:clocks/wall-clock"),
        "{v}"
    );
    // The service's engine reserves its instance slots (the pooling
    // allocator): a guest that would not fit one is refused at upload, not
    // left to fail every run.
    let (code, v) = upload(
        &s,
        TOKEN_A,
        &common::root().join("tests/wat/many-memories.wat"),
    );
    assert_eq!(code, 422, "{v}");
    assert!(
        v["error"]
            .as_str()
            .unwrap()
            .contains("14 Wasm linear memories"),
        "{v}"
    );

    let (code, up) = upload(&s, TOKEN_A, &common::guest("tests/guests/hostile"));
    assert_eq!(code, 201, "{up}");
    let hostile = up["module"].as_str().unwrap().to_string();
    let (_, up) = upload(&s, TOKEN_B, &common::guest("examples/daily_revenue"));
    let good = up["module"].as_str().unwrap().to_string();

    let mut ids = Vec::new();
    // Every hostile mode the suite knows (tests/guests/hostile): each fails
    // its own run, with a bounded message, and the service neither dies
    // nor restarts.
    for (mode, extra) in [
        ("spin", json!({})),
        ("oom", json!({})),
        ("big", json!({"bytes": 16 << 20})),
        ("garbage", json!({})),
        ("union", json!({})),
        ("panic", json!({})),
        ("schema_flip", json!({})),
        ("fail", json!({})),
        ("bad_schema", json!({})),
        ("views", json!({"views": 200_000, "view_len": 4096})),
        ("rows_bomb", json!({})),
        ("long_error", json!({"len": 20_000_000})),
        ("long_panic", json!({"len": 5_000_000})),
        ("long_columns", json!({"len": 1_000_000})),
        (
            "echo",
            json!({"dictionaries_panic": true, "dictionaries": ["customer"]}),
        ),
    ] {
        let mut params = extra.clone();
        params["mode"] = json!(mode);
        let mut req = day_request(&hostile, &format!("tables/{mode}"), "2026-10-01");
        req["params"] = params;
        req["mode"] = json!("append");
        let (code, v) = submit(&s, TOKEN_A, &req);
        assert_eq!(code, 202, "{v}");
        ids.push((mode, v["id"].as_str().unwrap().to_string()));
    }
    // A hostile input too: a few KB of zstd Parquet holding 3 x 200 MB
    // strings, read by the echo mode under a 64 MB tenant.
    let bomb = dir.path().join("a/bombs/date=2026-10-01/bomb.parquet");
    std::fs::create_dir_all(bomb.parent().unwrap()).unwrap();
    let made = Command::new(common::python())
        .arg(common::root().join("tests/parquet_corpus.py"))
        .args(["bomb", bomb.to_str().unwrap(), &(200 << 20).to_string()])
        .output()
        .unwrap();
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let mut req = day_request(&hostile, "tables/bomb", "2026-10-01");
    req["input"] = json!("bombs");
    req["params"] = json!({"mode": "echo"});
    req["mode"] = json!("append");
    let (code, v) = submit(&s, TOKEN_A, &req);
    assert_eq!(code, 202, "{v}");
    let bomb_id = v["id"].as_str().unwrap().to_string();
    let (_, v) = submit(
        &s,
        TOKEN_B,
        &day_request(&good, "tables/revenue", "2026-10-01"),
    );
    let b_id = v["id"].as_str().unwrap().to_string();

    let b = wait(&s, TOKEN_B, &b_id);
    assert_eq!(b["state"], "succeeded", "{b}");
    assert_eq!(b["result"]["kind"], "committed", "{b}");
    for (mode, id) in ids {
        let r = wait(&s, TOKEN_A, &id);
        assert_eq!(r["state"], "failed", "{mode}: {r}");
        let msg = r["error"]["message"].as_str().unwrap();
        let want = match mode {
            "spin" => "deadline",
            "oom" => "memory",
            "big" | "views" => "output",
            "panic" | "echo" => "panicked",
            "garbage" | "bad_schema" => "not an Arrow IPC stream",
            "union" => "Union",
            "schema_flip" => "same schema",
            "long_columns" => "a column name of 1000001 bytes",
            "fail" => "refuses batch",
            "rows_bomb" => "rows in output batch 0",
            "long_error" | "long_panic" => "more bytes cut",
            other => panic!("no expectation for {other}"),
        };
        assert!(
            msg.contains(want),
            "{mode}: {}",
            &msg[..msg.len().min(2_000)]
        );
        assert!(
            msg.len() < 12_000,
            "{mode}: a message of {} bytes",
            msg.len()
        );
        assert_eq!(r["error"]["kind"], "guest", "{mode}: {r}");
        assert!(
            !dir.path()
                .join("a/tables")
                .join(mode)
                .join("_delta_log")
                .exists()
                || common::read_table(&dir.path().join("a/tables").join(mode), None)
                    .rows
                    .is_empty()
        );
    }
    let r = wait(&s, TOKEN_A, &bomb_id);
    assert_eq!(r["state"], "failed", "{r}");
    assert_eq!(r["error"]["kind"], "input", "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("over the input budget"),
        "{r}"
    );
    assert_eq!(curl("GET", &format!("{}/health", s.url), None, None).0, 200);
    // The same process served it all (no crash, no restart), and the run
    // list stays small whatever the guests said.
    let mut s = s;
    assert!(s.child.try_wait().unwrap().is_none(), "the service died");
    let (code, list) = curl("GET", &format!("{}/v1/runs", s.url), Some(TOKEN_A), None);
    assert_eq!(code, 200, "{list}");
    assert!(
        list.len() < 200_000,
        "GET /v1/runs returned {} bytes",
        list.len()
    );
}

/// kill -9 in the middle of a run, restart: the run is run again and ends
/// succeeded; SIGTERM lets the running run finish and keeps the queued one
/// for the next start. Tables equal one clean CLI run.
#[test]
fn a_killed_or_stopped_service_finishes_its_runs_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "");
    for d in ["2026-10-01", "2026-10-02"] {
        common::orders(&dir.path().join("a/orders"), d, 2_000, 1);
    }
    let revenue = common::guest("examples/daily_revenue");
    // Every run pauses 2 s inside its execution.
    let slow = [("IDEM_FAULT_SLEEP_MS", "before-commit:2000")];
    let s = start(&cfg, &slow);
    let (_, up) = upload(&s, TOKEN_A, &revenue);
    let module = up["module"].as_str().unwrap().to_string();
    let (_, v) = submit(
        &s,
        TOKEN_A,
        &day_request(&module, "tables/revenue", "2026-10-01"),
    );
    let id1 = v["id"].as_str().unwrap().to_string();
    let start_t = Instant::now();
    loop {
        let (_, body) = curl(
            "GET",
            &format!("{}/v1/runs/{id1}", s.url),
            Some(TOKEN_A),
            None,
        );
        if json_of(&body)["state"] == "running" {
            break;
        }
        assert!(start_t.elapsed() < Duration::from_secs(30));
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(s); // SIGKILL mid-run

    // Restarted (still slow): the run is queued again and finishes.
    let mut s = start(&cfg, &slow);
    let r = wait(&s, TOKEN_A, &id1);
    assert_eq!(r["state"], "succeeded", "{r}");
    assert_eq!(r["attempts"], 2, "{r}");

    // SIGTERM with two runs running and one queued.
    let (_, v) = submit(
        &s,
        TOKEN_A,
        &day_request(&module, "tables/revenue", "2026-10-02"),
    );
    let id2 = v["id"].as_str().unwrap().to_string();
    let mut req3 = day_request(&module, "tables/other", "2026-10-02");
    req3["batchRows"] = json!(500);
    let (_, v) = submit(&s, TOKEN_A, &req3);
    let id3 = v["id"].as_str().unwrap().to_string();
    let mut req4 = day_request(&module, "tables/third", "2026-10-02");
    req4["batchRows"] = json!(250);
    let (_, v) = submit(&s, TOKEN_A, &req4);
    let id4 = v["id"].as_str().unwrap().to_string();
    // SIGTERM once two of them are running (not after a guessed pause).
    let start_t = Instant::now();
    loop {
        let running = [&id2, &id3, &id4]
            .iter()
            .filter(|id| {
                let (_, body) = curl(
                    "GET",
                    &format!("{}/v1/runs/{id}", s.url),
                    Some(TOKEN_A),
                    None,
                );
                json_of(&body)["state"] == "running"
            })
            .count();
        if running == 2 {
            break;
        }
        assert!(
            start_t.elapsed() < Duration::from_secs(60),
            "two runs never ran at once"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: the child is our own process, alive until we wait for it.
    unsafe {
        libc::kill(s.child.id() as i32, libc::SIGTERM);
    }
    let status = s.child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    let persisted = |id: &str| -> Value {
        json_of(&std::fs::read_to_string(dir.path().join(format!("state/runs/{id}.json"))).unwrap())
    };
    // Two ran to the end (tenant a runs two at once); the third waited and
    // is still queued on disk.
    let ended = [persisted(&id2), persisted(&id3), persisted(&id4)];
    let states: Vec<&str> = ended.iter().map(|r| r["state"].as_str().unwrap()).collect();
    assert_eq!(states, ["succeeded", "succeeded", "queued"], "{ended:?}");
    let s = start(&cfg, &[]);
    for id in [&id2, &id3, &id4] {
        assert_eq!(wait(&s, TOKEN_A, id)["state"], "succeeded");
    }
    // The tables equal clean CLI runs.
    let clean = dir.path().join("clean");
    for d in ["2026-10-01", "2026-10-02"] {
        let args = common::day_args(
            revenue.to_str().unwrap(),
            dir.path().join("a/orders").to_str().unwrap(),
            d,
            clean.to_str().unwrap(),
            &["--logical-date", d],
        );
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        assert_eq!(common::idem(&args).0, 0);
    }
    assert_eq!(
        common::read_table(&dir.path().join("a/tables/revenue"), None).rows,
        common::read_table(&clean, None).rows
    );
}

/// One tenant's flood does not starve another: tenant a queues 16 runs,
/// then b one; workers take tenants in turn, so b's run ends while most
/// of a's still wait.
#[test]
fn a_tenants_flood_does_not_starve_another() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "");
    common::orders(&dir.path().join("a/orders"), "2026-10-01", 500, 1);
    common::orders(&dir.path().join("b/orders"), "2026-10-01", 500, 1);
    let revenue = common::guest("examples/daily_revenue");
    let s = start(&cfg, &[("IDEM_FAULT_SLEEP_MS", "before-commit:300")]);
    let (_, up) = upload(&s, TOKEN_A, &revenue);
    let module = up["module"].as_str().unwrap().to_string();
    let (_, up) = upload(&s, TOKEN_B, &revenue);
    assert_eq!(up["module"].as_str().unwrap(), module);
    let mut a_ids = Vec::new();
    for i in 0..16 {
        let (code, v) = submit(
            &s,
            TOKEN_A,
            &day_request(&module, &format!("tables/t{i}"), "2026-10-01"),
        );
        assert_eq!(code, 202, "{v}");
        a_ids.push(v["id"].as_str().unwrap().to_string());
    }
    let (_, v) = submit(&s, TOKEN_B, &day_request(&module, "tables/t", "2026-10-01"));
    let b = wait(&s, TOKEN_B, v["id"].as_str().unwrap());
    assert_eq!(b["state"], "succeeded", "{b}");
    let b_done = b["finishedMs"].as_u64().unwrap();
    let mut later = 0;
    for id in &a_ids {
        let r = wait(&s, TOKEN_A, id);
        assert_eq!(r["state"], "succeeded", "{r}");
        if r["finishedMs"].as_u64().unwrap() > b_done {
            later += 1;
        }
    }
    assert!(
        later >= 10,
        "only {later} of a's 16 runs ended after b's one"
    );
    // Beyond its queue quota a tenant is told to come back later.
    let small = config(dir.path(), "");
    let text =
        std::fs::read_to_string(&small)
            .unwrap()
            .replacen("max-queued = 50", "max-queued = 2", 1);
    std::fs::write(&small, text).unwrap();
    drop(s);
    let s = start(&small, &[("IDEM_FAULT_SLEEP_MS", "before-commit:1000")]);
    let codes: Vec<u16> = (0..6)
        .map(|i| {
            submit(
                &s,
                TOKEN_A,
                &day_request(&module, &format!("tables/q{i}"), "2026-10-01"),
            )
            .0
        })
        .collect();
    // At most 2 running and 2 waiting: the rest is refused.
    let accepted = codes.iter().filter(|c| **c == 202).count();
    assert!(
        codes.contains(&429) && (2..=4).contains(&accepted),
        "{codes:?}"
    );
}

/// Write the record of tenant a's run `id` of `req` as a service that
/// stopped three times during it leaves it: running, 3 attempts.
fn forge_running(dir: &Path, id: &str, req: &Value) {
    let rec = json!({
        "id": id, "tenant": "a", "request": req, "state": "running",
        "submittedMs": 1, "attempts": 3,
    });
    std::fs::write(dir.join(format!("state/runs/{id}.json")), rec.to_string()).unwrap();
}

/// A panic inside idem during a run fails that run (kind "bug") and the
/// service goes on; a run that was running through 3 service stops is
/// failed on the next start, not run a fourth time.
#[test]
fn a_host_panic_fails_its_run_and_a_poison_run_is_not_retried_forever() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "");
    common::orders(&dir.path().join("a/orders"), "2026-10-01", 500, 1);
    let revenue = common::guest("examples/daily_revenue");
    let s = start(&cfg, &[("IDEM_FAULT_PANIC", "before-commit")]);
    let (_, up) = upload(&s, TOKEN_A, &revenue);
    let module = up["module"].as_str().unwrap().to_string();
    let req = day_request(&module, "tables/revenue", "2026-10-01");
    let (_, v) = submit(&s, TOKEN_A, &req);
    let r = wait(&s, TOKEN_A, v["id"].as_str().unwrap());
    assert_eq!(r["state"], "failed", "{r}");
    assert_eq!(r["error"]["kind"], "bug", "{r}");
    // The slot is free and the join entry gone: the same request runs anew.
    let (_, again) = submit(&s, TOKEN_A, &req);
    assert_ne!(again["id"], v["id"]);
    assert_eq!(
        wait(&s, TOKEN_A, again["id"].as_str().unwrap())["state"],
        "failed"
    );
    assert_eq!(curl("GET", &format!("{}/health", s.url), None, None).0, 200);
    assert!(!dir.path().join("a/tables/revenue/_delta_log").exists());
    drop(s);

    // With a metrics token, /metrics asks for it.
    let text = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(
        &cfg,
        format!(
            "metrics-token-sha256 = \"{}\"\n{text}",
            sha("metrics-secret")
        ),
    )
    .unwrap();

    // A record left running by three stops.
    let id = "run-000000000000000000000000";
    forge_running(dir.path(), id, &req);
    let s = start(&cfg, &[]);
    let r = wait(&s, TOKEN_A, id);
    assert_eq!(r["state"], "failed", "{r}");
    assert!(
        r["error"]["message"].as_str().unwrap().contains("3 times"),
        "{r}"
    );
    let metrics = format!("{}/metrics", s.url);
    assert_eq!(curl("GET", &metrics, None, None).0, 401);
    assert_eq!(curl("GET", &metrics, Some(TOKEN_A), None).0, 401);
    let (code, m) = curl("GET", &metrics, Some("metrics-secret"), None);
    assert_eq!(code, 200);
    assert!(
        m.contains("idem_runs{tenant=\"a\",state=\"failed\"}"),
        "{m}"
    );
    // A second service on the same state dir is refused.
    let out = Command::new(env!("CARGO_BIN_EXE_idem"))
        .args(["serve", "--config", cfg.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("another idem serve"));
}

/// A run over its tenant's `run-timeout-ms` (held 3.5 s before its commit
/// by a fault point, over a 3 s limit) fails, naming the limit, with
/// nothing committed; the other tenant's same run (default limit) commits.
#[test]
fn a_run_over_its_time_limit_commits_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "run-timeout-ms = 3000");
    for t in ["a", "b"] {
        common::orders(&dir.path().join(t).join("orders"), "2026-10-01", 500, 1);
    }
    let s = start(&cfg, &[("IDEM_FAULT_SLEEP_MS", "before-commit:3500")]);
    let revenue = common::guest("examples/daily_revenue");
    let mut ids = Vec::new();
    for token in [TOKEN_A, TOKEN_B] {
        let (_, up) = upload(&s, token, &revenue);
        let req = day_request(
            up["module"].as_str().unwrap(),
            "tables/revenue",
            "2026-10-01",
        );
        let (code, v) = submit(&s, token, &req);
        assert_eq!(code, 202, "{v}");
        ids.push(v["id"].as_str().unwrap().to_string());
    }
    let a = wait(&s, TOKEN_A, &ids[0]);
    assert_eq!(a["state"], "failed", "{a}");
    // Over while waiting to commit: the host's time, a retry is worth it.
    assert_eq!(a["error"]["kind"], "storage", "{a}");
    let m = a["error"]["message"].as_str().unwrap();
    assert!(
        m.contains("time limit of 3000 ms") && m.contains("run-timeout-ms"),
        "{m}"
    );
    assert!(!dir.path().join("a/tables/revenue/_delta_log").exists());
    let b = wait(&s, TOKEN_B, &ids[1]);
    assert_eq!(b["state"], "succeeded", "{b}");
    assert_eq!(b["result"]["kind"], "committed", "{b}");
}

/// The web page in a real headless browser: a wrong token is refused, the
/// tenant logs in, sees its run appear and finish (the page refreshes
/// itself), its table's slice proven, and the run's manifest; another
/// tenant's session does not list the run.
#[test]
fn the_web_page_shows_a_run_appear_and_finish_in_a_browser() {
    let Some(python) = common::browser_python() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "");
    common::orders(&dir.path().join("a/orders"), "2026-10-01", 1_000, 1);
    // The run waits before its commit until the browser has seen it
    // pending (it then adds itself to the barrier).
    let barrier = dir.path().join("barrier");
    let held = format!("before-commit:2:{}", barrier.display());
    let s = start(&cfg, &[("IDEM_FAULT_BARRIER", held.as_str())]);
    let (_, up) = upload(&s, TOKEN_A, &common::guest("examples/daily_revenue"));
    let module = up["module"].as_str().unwrap().to_string();
    let (_, v) = submit(
        &s,
        TOKEN_A,
        &day_request(&module, "tables/revenue", "2026-10-01"),
    );
    let id = v["id"].as_str().unwrap().to_string();
    let shot = dir.path().join("run.png");
    let out = Command::new(&python)
        .arg(common::root().join("tests/browser.py"))
        .args([&s.url, TOKEN_A, &id])
        .arg(&shot)
        .arg(&barrier)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let seen = json_of(String::from_utf8_lossy(&out.stdout).trim());
    assert_eq!(seen["wrong_token_refused"], true, "{seen}");
    let states: Vec<&str> = seen["states"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    assert_eq!(states.last(), Some(&"succeeded"), "{seen}");
    assert!(
        states.len() >= 2 && matches!(states[0], "queued" | "running"),
        "the run was seen before it finished: {seen}"
    );
    assert_eq!(seen["audit"], "proven", "{seen}");
    let run = wait(&s, TOKEN_A, &id);
    let key = run["result"]["runKey"].as_str().unwrap();
    assert!(seen["manifest"].as_str().unwrap().contains(key), "{seen}");
    // The run's page: its fields like `idem show`, within the window's
    // width (the manifest wrapped, not one 10,000 px line), screenshot
    // taken.
    assert_eq!(seen["state"], "succeeded", "{seen}");
    assert_eq!(
        seen["result"],
        format!("committed, version {}", run["result"]["version"]),
        "{seen}"
    );
    assert_eq!(
        seen["rows"],
        format!(
            "{} in, {} out",
            run["result"]["rowsIn"], run["result"]["rowsOut"]
        ),
        "{seen}"
    );
    assert!(seen["duration"].as_str().unwrap().ends_with(" s"), "{seen}");
    for f in [
        "table",
        "slice",
        "module",
        "params",
        "logical date",
        "submitted",
        "finished",
        "run key",
        "inputs",
        "output",
    ] {
        assert!(
            seen["fields"].as_array().unwrap().iter().any(|x| x == f),
            "{f}: {seen}"
        );
    }
    assert!(
        seen["page_width"].as_u64().unwrap() <= seen["window_width"].as_u64().unwrap(),
        "the run page is wider than the window: {seen}"
    );
    assert!(std::fs::metadata(&shot).unwrap().len() > 10_000);
    // Tenant b's session lists none of a's runs.
    let (code, head) = page_login(&s, TOKEN_B, "127.0.0.1", &[]);
    assert_eq!(code, 303, "{head}");
    let session = cookie(&head, "idem_session").unwrap();
    let (_, _, page) = curl_i(
        &format!("{}/", s.url),
        &["-H", &format!("Cookie: idem_session={session}")],
    );
    assert!(page.contains("tenant b") && !page.contains(&id), "{page}");
}

/// A bounded load (3 tenants, many duplicate submissions, a few hostile)
/// with the service SIGKILLed partway, restarted and everything submitted
/// again: every table converges to one clean CLI run per slice, no slice
/// committed twice for one output, every resubmission ends.
#[test]
fn a_load_killed_partway_and_resubmitted_converges_to_clean_runs() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = [TOKEN_A, TOKEN_B];
    let cfg = config(dir.path(), "");
    let dates = ["2026-10-01", "2026-10-02", "2026-10-03", "2026-10-04"];
    for t in ["a", "b"] {
        for d in dates {
            common::orders(&dir.path().join(t).join("orders"), d, 1_000, 1);
        }
    }
    let revenue = common::guest("examples/daily_revenue");
    let hostile = common::guest("tests/guests/hostile");
    let slow = [("IDEM_FAULT_SLEEP_MS", "before-commit:150")];
    let s = start(&cfg, &slow);
    let good = upload(&s, TOKEN_A, &revenue).1["module"]
        .as_str()
        .unwrap()
        .to_string();
    upload(&s, TOKEN_B, &revenue);
    // Hostile runs on tenant a (3 s deadline).
    let bad = upload(&s, TOKEN_A, &hostile).1["module"]
        .as_str()
        .unwrap()
        .to_string();
    let requests: Vec<(&str, Value)> = (0..40)
        .map(|i| {
            let token = tokens[i % 2];
            let d = dates[(i / 2) % dates.len()];
            let mut r = day_request(&good, "tables/revenue", d);
            if token == TOKEN_A && i % 10 == 4 {
                r = day_request(&bad, "tables/hostile", d);
                r["params"] = json!({"mode": "spin"});
                r["mode"] = json!("append");
            }
            (token, r)
        })
        .collect();
    for (token, r) in &requests[..20] {
        assert_eq!(submit(&s, token, r).0, 202);
    }
    std::thread::sleep(Duration::from_millis(700));
    drop(s); // SIGKILL with runs queued and running

    let s = start(&cfg, &slow);
    let mut ids = Vec::new();
    for (token, r) in &requests {
        let (code, v) = submit(&s, token, r);
        assert_eq!(code, 202, "{v}");
        ids.push((
            *token,
            v["id"].as_str().unwrap().to_string(),
            r["params"]["mode"] == "spin",
        ));
    }
    for (token, id, spin) in &ids {
        let r = wait(&s, token, id);
        assert_eq!(
            r["state"],
            if *spin { "failed" } else { "succeeded" },
            "{r}"
        );
    }
    // Every run the killed service had accepted ended too.
    for token in tokens {
        let (_, body) = curl("GET", &format!("{}/v1/runs", s.url), Some(token), None);
        for r in json_of(&body)["runs"].as_array().unwrap() {
            let id = r["id"].as_str().unwrap();
            let end = wait(&s, token, id);
            assert!(
                end["state"] == "succeeded" || end["state"] == "failed",
                "{end}"
            );
        }
    }
    for t in ["a", "b"] {
        let table = dir.path().join(t).join("tables/revenue");
        let clean = dir.path().join(format!("clean-{t}"));
        for d in dates {
            let args = common::day_args(
                revenue.to_str().unwrap(),
                dir.path().join(t).join("orders").to_str().unwrap(),
                d,
                clean.to_str().unwrap(),
                &["--logical-date", d],
            );
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            assert_eq!(common::idem(&args).0, 0);
        }
        assert_eq!(
            common::read_table(&table, None).rows,
            common::read_table(&clean, None).rows,
            "{t}"
        );
        // One commit per slice, read from the Delta log itself (a run
        // killed after its commit but before its run-log line is not lost
        // from this count).
        let commits = common::commits_per_slice(&table);
        assert_eq!(commits.len(), dates.len(), "{t}: {commits:?}");
        assert!(commits.values().all(|n| *n == 1), "{t}: {commits:?}");
    }
}

/// Read what the service sends on `t` until it closes the connection (or
/// `limit` passes): (text, seconds it took).
fn read_until_closed(t: &mut std::net::TcpStream, limit: Duration) -> (String, f64) {
    use std::io::Read as _;
    let start = Instant::now();
    t.set_read_timeout(Some(limit)).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match t.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => panic!("still open after {limit:?}: {e}"),
        }
    }
    (
        String::from_utf8_lossy(&got).into_owned(),
        start.elapsed().as_secs_f64(),
    )
}

/// `curl --interface FROM GET URL`: the status (0 when the connection was
/// closed unanswered).
fn curl_from(from: &str, url: &str) -> u16 {
    let out = Command::new("curl")
        .args([
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "--interface",
            from,
            url,
        ])
        .output()
        .expect("running curl");
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or(0)
}

/// Slow and surplus clients cannot hold the service: a connection past
/// `max-connections-per-peer` or `max-connections` is closed on arrival;
/// headers that never end and idle keep-alive connections are cut at
/// `header-timeout-ms`; a trickled body fails at `body-timeout-ms`
/// (naming it); a client that pipelines requests and never reads the
/// answers is cut at `write-timeout-ms`; SIGTERM with a slow client open
/// still stops the service; in between, the service answers others.
#[test]
fn slow_and_surplus_connections_are_cut_off() {
    use std::io::{Read as _, Write as _};
    use std::net::TcpStream;
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "");
    let text = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(
        &cfg,
        format!(
            "max-connections = 4\nmax-connections-per-peer = 3\nheader-timeout-ms = 1500\nbody-timeout-ms = 1500\nwrite-timeout-ms = 1500\n{text}"
        ),
    )
    .unwrap();
    let mut s = start(&cfg, &[]);
    let addr = s.url.strip_prefix("http://").unwrap().to_string();
    let port = addr.rsplit_once(':').unwrap().1.to_string();
    let health_from = |ip: &str| curl_from(ip, &format!("http://127.0.0.1:{port}/health"));
    let slow_headers = || {
        let mut t = TcpStream::connect(&addr).unwrap();
        t.write_all(b"GET /health HTTP/1.1\r\nHost: idem\r\n")
            .unwrap();
        t
    };

    // Three connections from 127.0.0.1 that never finish their headers
    // fill that peer's share.
    let opened = Instant::now();
    let mut slow: Vec<TcpStream> = (0..3).map(|_| slow_headers()).collect();
    std::thread::sleep(Duration::from_millis(300));
    // A fourth from the same peer is closed on arrival, unanswered...
    let mut fourth = TcpStream::connect(&addr).unwrap();
    let _ = fourth.write_all(b"GET /health HTTP/1.1\r\nHost: idem\r\n\r\n");
    let (answer, took) = read_until_closed(&mut fourth, Duration::from_secs(5));
    assert!(
        !answer.contains("200"),
        "served past the peer cap: {answer}"
    );
    assert!(took < 1.0, "the surplus connection was held {took} s");
    // ...while another peer is served.
    assert_eq!(health_from("127.0.0.2"), 200);
    // A fourth slow connection, from 127.0.0.2, fills the service's cap:
    // a third peer is refused too.
    std::thread::sleep(Duration::from_millis(200));
    let mut holder = Command::new(common::python())
        .args([
            "-c",
            "import socket,sys,time\ns=socket.socket()\ns.bind(('127.0.0.2',0))\ns.connect(('127.0.0.1',int(sys.argv[1])))\ns.sendall(b'GET /health HTTP/1.1\\r\\nHost: idem\\r\\n')\nprint('held',flush=True)\ntime.sleep(30)",
            &port,
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(holder.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "held");
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(health_from("127.0.0.3"), 0, "served past max-connections");
    // The slow ones are cut at the header timeout, unanswered.
    for t in slow.iter_mut() {
        let (answer, _) = read_until_closed(t, Duration::from_secs(10));
        assert!(!answer.contains("200 OK"), "{answer}");
    }
    let held = opened.elapsed().as_secs_f64();
    assert!((1.4..6.0).contains(&held), "slow headers held for {held} s");
    let _ = holder.kill();
    let _ = holder.wait();

    // An idle keep-alive connection is cut at the header timeout too.
    let mut idle = TcpStream::connect(&addr).unwrap();
    idle.write_all(b"GET /health HTTP/1.1\r\nHost: idem\r\n\r\n")
        .unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    idle.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    while !String::from_utf8_lossy(&got).ends_with("ok\n") {
        let n = idle.read(&mut buf).unwrap();
        assert!(n > 0, "closed before answering");
        got.extend_from_slice(&buf[..n]);
    }
    let (more, idle_for) = read_until_closed(&mut idle, Duration::from_secs(10));
    assert!(more.is_empty(), "{more}");
    assert!(
        (1.2..6.0).contains(&idle_for),
        "idle connection kept {idle_for} s"
    );

    // A body trickled slower than body-timeout-ms: the request fails,
    // naming the setting.
    let mut t = TcpStream::connect(&addr).unwrap();
    t.write_all(
        format!(
            "POST /v1/runs HTTP/1.1\r\nHost: idem\r\nAuthorization: Bearer {TOKEN_A}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{{"
        )
        .as_bytes(),
    )
    .unwrap();
    let (answer, took) = read_until_closed(&mut t, Duration::from_secs(10));
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(answer.contains("body-timeout-ms"), "{answer}");
    assert!((1.4..6.0).contains(&took), "body held for {took} s");

    // A client that pipelines requests and never reads an answer: once
    // the socket buffers are full the service cannot write, and cuts the
    // connection at write-timeout-ms (its writes then fail).
    let mut greedy = TcpStream::connect(&addr).unwrap();
    greedy
        .set_write_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let requests = b"GET /health HTTP/1.1\r\nHost: idem\r\n\r\n".repeat(1000);
    let began = Instant::now();
    let cut = loop {
        assert!(
            began.elapsed() < Duration::from_secs(30),
            "a client that never reads held its connection for 30 s"
        );
        match greedy.write(&requests) {
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(e) => break e,
        }
    };
    assert!(
        matches!(
            cut.kind(),
            std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::BrokenPipe
        ),
        "{cut}"
    );

    // And the service serves as before.
    assert_eq!(curl("GET", &format!("{}/health", s.url), None, None).0, 200);
    let (code, v) = curl(
        "GET",
        &format!("{}/v1/runs?limit=5", s.url),
        Some(TOKEN_A),
        None,
    );
    assert_eq!(code, 200, "{v}");
    let (code, _) = curl(
        "GET",
        &format!("{}/v1/runs?limit=0", s.url),
        Some(TOKEN_A),
        None,
    );
    assert_eq!(code, 400);

    // SIGTERM with a slow client open: the service still stops.
    let _open = slow_headers();
    std::thread::sleep(Duration::from_millis(200));
    unsafe {
        libc::kill(s.child.id() as i32, libc::SIGTERM);
    }
    let stopping = Instant::now();
    loop {
        if let Some(status) = s.child.try_wait().unwrap() {
            assert!(status.success(), "{status}");
            break;
        }
        assert!(
            stopping.elapsed() < Duration::from_secs(8),
            "SIGTERM did not stop the service with a slow client open"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A tenant whose storage root is an object store (a real S3-compatible
/// server on 127.0.0.1): its uploaded module, its inputs and its table all
/// live under `s3://bucket/<tenant>/`, the run commits there, its log is
/// served, and the CLI reads the same table from the store.
#[test]
fn a_tenant_rooted_in_object_storage_runs_there() {
    const TOKEN_C: &str = "token-of-tenant-c";
    let s3 = common::S3::start("lake");
    let (code, _, err) = s3.idem(
        &[
            "sample",
            "--out",
            &s3.url("c/orders"),
            "--dates",
            "2026-10-01",
            "--rows",
            "2000",
            "--files",
            "1",
        ],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("serve.toml");
    std::fs::write(
        &cfg,
        format!(
            "listen = \"127.0.0.1:0\"\nstate-dir = \"state\"\n\n[[tenant]]\nname = \"c\"\ntoken-sha256 = \"{}\"\nroot = \"{}\"\n",
            sha(TOKEN_C),
            s3.url("c")
        ),
    )
    .unwrap();
    let env = s3.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let s = start(&cfg, &env);
    let (code, up) = upload(&s, TOKEN_C, &common::guest("examples/daily_revenue"));
    assert_eq!(code, 201, "{up}");
    let module = up["module"].as_str().unwrap();
    let (code, v) = submit(
        &s,
        TOKEN_C,
        &day_request(module, "tables/revenue", "2026-10-01"),
    );
    assert_eq!(code, 202, "{v}");
    let r = wait(&s, TOKEN_C, v["id"].as_str().unwrap());
    assert_eq!(r["state"], "succeeded", "{r}");
    assert_eq!(r["result"]["kind"], "committed", "{r}");
    let (code, log) = curl(
        "GET",
        &format!("{}/v1/log/tables/revenue", s.url),
        Some(TOKEN_C),
        None,
    );
    assert_eq!(code, 200, "{log}");
    assert!(log.contains("date=2026-10-01"), "{log}");
    // The table is in the store, where the CLI finds the run's slice.
    let (code, out, err) = s3.idem(&["log", &s3.url("c/tables/revenue"), "--json"], &[]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("date=2026-10-01"), "{out}");
    // Nothing of the tenant's landed on local disk.
    assert!(!dir.path().join("c").exists());
}

/// `curl -s -i ARGS URL`: (status, response head, body).
fn curl_i(url: &str, args: &[&str]) -> (u16, String, String) {
    let out = Command::new("curl")
        .args(["-s", "-S", "-i", "--path-as-is"])
        .args(args)
        .arg(url)
        .output()
        .expect("running curl");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (code, head.to_string(), body.to_string())
}

/// The values of header `name` in a response head.
fn headers<'a>(head: &'a str, name: &str) -> Vec<&'a str> {
    head.lines()
        .filter_map(|l| l.split_once(':'))
        .filter(|(k, _)| k.trim().eq_ignore_ascii_case(name))
        .map(|(_, v)| v.trim())
        .collect()
}

/// The value a response sets cookie `name` to.
fn cookie(head: &str, name: &str) -> Option<String> {
    headers(head, "set-cookie").into_iter().find_map(|c| {
        c.strip_prefix(&format!("{name}="))
            .map(|v| v.split(';').next().unwrap_or("").to_string())
    })
}

/// The `Set-Cookie` line of cookie `name`, whole.
fn set_cookie(head: &str, name: &str) -> String {
    headers(head, "set-cookie")
        .into_iter()
        .find(|c| c.starts_with(&format!("{name}=")))
        .unwrap_or_else(|| panic!("no cookie {name} in {head}"))
        .to_string()
}

/// The hidden `csrf` field of a form in `page`.
fn csrf_field(page: &str) -> String {
    let start = page
        .find("name=\"csrf\" value=\"")
        .unwrap_or_else(|| panic!("no csrf field in {page}"))
        + "name=\"csrf\" value=\"".len();
    page[start..].split('"').next().unwrap().to_string()
}

/// Log in on the page from address `from` with `token`, as a browser
/// does (the form, its CSRF cookie and field): (status, response head).
fn page_login(s: &Server, token: &str, from: &str, extra: &[&str]) -> (u16, String) {
    let (code, head, body) = curl_i(&format!("{}/", s.url), &["--interface", from]);
    assert_eq!(code, 200, "{head}");
    let csrf = cookie(&head, "idem_csrf").unwrap_or_else(|| panic!("no CSRF cookie: {head}"));
    let mut args = vec![
        "--interface".to_string(),
        from.to_string(),
        "-H".to_string(),
        format!("Cookie: idem_csrf={csrf}"),
        "--data-urlencode".to_string(),
        format!("token={token}"),
        "--data-urlencode".to_string(),
        format!("csrf={}", csrf_field(&body)),
    ];
    args.extend(extra.iter().map(|a| a.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, head, _) = curl_i(&format!("{}/login", s.url), &args);
    (code, head)
}

/// The web page's session: a random server-side id (not the token) in an
/// HttpOnly, SameSite=Strict cookie that expires (Secure behind TLS);
/// the login and logout forms carry a CSRF token; every page forbids
/// framing and sniffing; a peer's failed logins past 5 a minute are
/// answered 429 with Retry-After while another peer logs in.
#[test]
fn the_page_uses_expiring_sessions_csrf_and_login_backoff() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "");
    let s = start(&cfg, &[]);
    let url = |p: &str| format!("{}{p}", s.url);

    let (code, head, body) = curl_i(&url("/"), &[]);
    assert_eq!(code, 200, "{head}");
    assert_eq!(headers(&head, "x-frame-options"), ["DENY"], "{head}");
    assert_eq!(
        headers(&head, "x-content-type-options"),
        ["nosniff"],
        "{head}"
    );
    let csp = headers(&head, "content-security-policy").join(";");
    assert!(
        csp.contains("default-src 'none'") && csp.contains("frame-ancestors 'none'"),
        "{head}"
    );
    assert!(body.contains("name=\"csrf\""), "{body}");
    // The JSON API says nosniff too.
    let (_, head, _) = curl_i(&url("/health"), &[]);
    assert_eq!(
        headers(&head, "x-content-type-options"),
        ["nosniff"],
        "{head}"
    );

    // A login without the form's CSRF token, or with another one, is
    // refused even with the right token.
    let (code, head, _) = curl_i(
        &url("/login"),
        &["--data-urlencode", &format!("token={TOKEN_A}")],
    );
    assert_eq!(code, 403, "{head}");
    assert!(cookie(&head, "idem_session").is_none(), "{head}");
    let (code, head, _) = curl_i(
        &url("/login"),
        &[
            "-H",
            "Cookie: idem_csrf=aaaa",
            "--data-urlencode",
            &format!("token={TOKEN_A}"),
            "--data-urlencode",
            "csrf=bbbb",
        ],
    );
    assert_eq!(code, 403, "{head}");

    // The session: a random id, not the token, expiring, HttpOnly,
    // SameSite=Strict; Secure when the request came over TLS.
    let (code, head) = page_login(&s, TOKEN_A, "127.0.0.1", &[]);
    assert_eq!(code, 303, "{head}");
    let line = set_cookie(&head, "idem_session");
    let session = cookie(&head, "idem_session").unwrap();
    assert!(
        session.len() == 64 && session.chars().all(|c| c.is_ascii_hexdigit()),
        "{line}"
    );
    assert!(!line.contains(TOKEN_A), "{line}");
    for attr in ["HttpOnly", "SameSite=Strict", "Max-Age=43200", "Path=/"] {
        assert!(line.contains(attr), "{attr}: {line}");
    }
    assert!(!line.contains("Secure"), "{line}");
    let (code, head) = page_login(
        &s,
        TOKEN_A,
        "127.0.0.1",
        &["-H", "X-Forwarded-Proto: https"],
    );
    assert_eq!(code, 303, "{head}");
    assert!(
        set_cookie(&head, "idem_session").contains("; Secure"),
        "{head}"
    );

    let with = |c: &str| format!("Cookie: {c}");
    let (code, _, page) = curl_i(
        &url("/"),
        &["-H", &with(&format!("idem_session={session}"))],
    );
    assert_eq!(code, 200);
    assert!(page.contains("tenant a"), "{page}");
    // The token itself is no session.
    let (_, _, page) = curl_i(&url("/"), &["-H", &with(&format!("idem_token={TOKEN_A}"))]);
    assert!(
        !page.contains("tenant a") && page.contains("id=\"token\""),
        "{page}"
    );
    let (code, _, _) = curl_i(
        &url("/"),
        &["-H", &with(&format!("idem_session={}", "0".repeat(64)))],
    );
    assert_eq!(code, 200);

    // Logout needs the session's CSRF token; then the session is gone.
    let (code, _, _) = curl_i(
        &url("/logout"),
        &[
            "-H",
            &with(&format!("idem_session={session}")),
            "-d",
            "csrf=nope",
        ],
    );
    assert_eq!(code, 403);
    let (_, _, still) = curl_i(
        &url("/"),
        &["-H", &with(&format!("idem_session={session}"))],
    );
    assert!(still.contains("tenant a"), "{still}");
    let (code, head, _) = curl_i(
        &url("/logout"),
        &[
            "-H",
            &with(&format!("idem_session={session}")),
            "--data-urlencode",
            &format!("csrf={}", csrf_field(&still)),
        ],
    );
    assert_eq!(code, 303, "{head}");
    let (_, _, gone) = curl_i(
        &url("/"),
        &["-H", &with(&format!("idem_session={session}"))],
    );
    assert!(!gone.contains("tenant a"), "{gone}");

    // Back-off: a peer's sixth wrong token within a minute is answered
    // 429 with Retry-After, and so is its right token then; another peer
    // logs in.
    for i in 0..5 {
        let (code, head) = page_login(&s, &format!("guess-{i}"), "127.0.0.3", &[]);
        assert_eq!(code, 401, "guess {i}: {head}");
    }
    let (code, head) = page_login(&s, "guess-5", "127.0.0.3", &[]);
    assert_eq!(code, 429, "{head}");
    let retry: u64 = headers(&head, "retry-after")[0].parse().unwrap();
    assert!((1..=60).contains(&retry), "{head}");
    let (code, head) = page_login(&s, TOKEN_A, "127.0.0.3", &[]);
    assert_eq!(code, 429, "{head}");
    let (code, head) = page_login(&s, TOKEN_A, "127.0.0.4", &[]);
    assert_eq!(code, 303, "{head}");
}

/// Send one HTTP request whose body is all sent, and leave the connection
/// open (the caller drops it to disconnect).
fn send_request(
    url: &str,
    method: &str,
    path: &str,
    extra: &str,
    body: &[u8],
) -> std::net::TcpStream {
    use std::io::Write as _;
    let addr = url.strip_prefix("http://").unwrap();
    let mut t = std::net::TcpStream::connect(addr).unwrap();
    t.write_all(
        format!(
            "{method} {path} HTTP/1.1\r\nHost: idem\r\n{extra}Content-Length: {}\r\n\r\n",
            body.len()
        )
        .as_bytes(),
    )
    .unwrap();
    t.write_all(body).unwrap();
    t
}

/// Wait until something arrived at a fault barrier in `dir`.
fn arrived(dir: &Path) {
    let start = Instant::now();
    while std::fs::read_dir(dir).map(|d| d.count()).unwrap_or(0) == 0 {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "nothing reached {}",
            dir.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A heavy request (an upload's compile, an audit, the page's tables)
/// whose client hangs up keeps its tenant's one slot and its share of
/// `workers` until its work ends: the tenant's next heavy request is 429
/// while the work is held (a fault barrier inside it), and with one
/// worker another tenant's log waits for it.
#[test]
fn a_disconnected_heavy_request_holds_its_slot_until_its_work_ends() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "");
    let text = std::fs::read_to_string(&cfg)
        .unwrap()
        .replace("workers = 2", "workers = 1")
        .replace("max-concurrent = 2", "max-concurrent = 1");
    std::fs::write(&cfg, text).unwrap();
    common::orders(&dir.path().join("a/orders"), "2026-10-01", 500, 1);
    let revenue = common::guest("examples/daily_revenue");
    let wasm = std::fs::read(&revenue).unwrap();
    // A succeeded run gives the page a table to read.
    let s = start(&cfg, &[]);
    let (_, up) = upload(&s, TOKEN_A, &revenue);
    let module = up["module"].as_str().unwrap().to_string();
    let (_, v) = submit(
        &s,
        TOKEN_A,
        &day_request(&module, "tables/revenue", "2026-10-01"),
    );
    assert_eq!(
        wait(&s, TOKEN_A, v["id"].as_str().unwrap())["state"],
        "succeeded"
    );
    drop(s);
    std::fs::remove_file(dir.path().join(format!("a/_modules/{}.wasm", &module[7..]))).unwrap();

    let bearer = format!("Authorization: Bearer {TOKEN_A}\r\n");
    for kind in ["upload", "audit", "page"] {
        let held = dir.path().join(format!("held-{kind}"));
        let barrier = format!("heavy-a:2:{}", held.display());
        let s = start(&cfg, &[("IDEM_FAULT_BARRIER", barrier.as_str())]);
        let conn = match kind {
            "upload" => send_request(&s.url, "POST", "/v1/modules", &bearer, &wasm),
            "audit" => send_request(&s.url, "GET", "/v1/audit/tables/revenue", &bearer, b""),
            _ => {
                let (code, head) = page_login(&s, TOKEN_A, "127.0.0.1", &[]);
                assert_eq!(code, 303, "{head}");
                let session = cookie(&head, "idem_session").unwrap();
                send_request(
                    &s.url,
                    "GET",
                    "/",
                    &format!("Cookie: idem_session={session}\r\n"),
                    b"",
                )
            }
        };
        arrived(&held);
        drop(conn); // the client hangs up while the work is held
        // The tenant's next heavy requests are refused while it runs...
        for _ in 0..8 {
            let (code, head, body) = curl_i(
                &format!("{}/v1/log/tables/revenue", s.url),
                &[
                    "--max-time",
                    "5",
                    "-H",
                    &format!("Authorization: Bearer {TOKEN_A}"),
                ],
            );
            assert_eq!(code, 429, "{kind}: {head}{body}");
            std::thread::sleep(Duration::from_millis(100));
        }
        // ...and the one worker's share is taken: b's log waits.
        let (code, _, _) = curl_i(
            &format!("{}/v1/log/tables/none", s.url),
            &[
                "--max-time",
                "2",
                "-H",
                &format!("Authorization: Bearer {TOKEN_B}"),
            ],
        );
        assert_eq!(
            code, 0,
            "{kind}: b was served while a's work held the only worker"
        );
        std::fs::write(held.join("go"), b"").unwrap();
        // Once the work ends, both are served again.
        let start_t = Instant::now();
        loop {
            let (code, body) = curl(
                "GET",
                &format!("{}/v1/log/tables/revenue", s.url),
                Some(TOKEN_A),
                None,
            );
            if code == 200 {
                break;
            }
            assert_eq!(code, 429, "{kind}: {body}");
            assert!(
                start_t.elapsed() < Duration::from_secs(60),
                "{kind}: a's slot never came back"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let (code, _) = curl(
            "GET",
            &format!("{}/v1/log/tables/none", s.url),
            Some(TOKEN_B),
            None,
        );
        assert_eq!(code, 404, "{kind}");
        if kind == "upload" {
            // The work went on to its end: the module is stored.
            assert!(
                dir.path()
                    .join(format!("a/_modules/{}.wasm", &module[7..]))
                    .exists()
            );
        }
    }
}

/// A run whose commit landed but whose service stopped before recording it,
/// three times over, is found committed on the next start: succeeded
/// (memo, its version and run key), never failed; a run that never
/// committed is still failed.
#[test]
fn a_committed_run_is_never_failed_by_the_restart_limit() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "");
    common::orders(&dir.path().join("a/orders"), "2026-10-01", 500, 1);
    common::orders(&dir.path().join("a/orders"), "2026-10-02", 500, 1);
    let s = start(&cfg, &[]);
    let (_, up) = upload(&s, TOKEN_A, &common::guest("examples/daily_revenue"));
    let module = up["module"].as_str().unwrap().to_string();
    let req = day_request(&module, "tables/revenue", "2026-10-01");
    let (_, v) = submit(&s, TOKEN_A, &req);
    let done = wait(&s, TOKEN_A, v["id"].as_str().unwrap());
    assert_eq!(done["result"]["kind"], "committed", "{done}");
    drop(s);

    let committed = "run-111111111111111111111111";
    let never = "run-222222222222222222222222";
    // As if the service died after the log entry and before the memo
    // index (`_idem/runs/`), which is written last: the commit decides.
    let table = dir.path().join("a/tables/revenue");
    std::fs::remove_dir_all(table.join("_idem/runs")).unwrap();
    forge_running(dir.path(), committed, &req);
    let other_day = day_request(&module, "tables/revenue", "2026-10-02");
    forge_running(dir.path(), never, &other_day);
    let s = start(&cfg, &[]);
    let r = wait(&s, TOKEN_A, committed);
    assert_eq!(r["state"], "succeeded", "{r}");
    assert_eq!(r["result"]["kind"], "memo", "{r}");
    assert_eq!(r["result"]["version"], done["result"]["version"], "{r}");
    assert_eq!(r["result"]["runKey"], done["result"]["runKey"], "{r}");
    assert_eq!(r["result"]["manifest"], done["result"]["manifest"], "{r}");
    let r = wait(&s, TOKEN_A, never);
    assert_eq!(r["state"], "failed", "{r}");
    assert!(
        r["error"]["message"].as_str().unwrap().contains("3 times"),
        "{r}"
    );
    // Nothing ran: the table holds its one commit.
    let commits = common::commits_per_slice(&dir.path().join("a/tables/revenue"));
    assert_eq!(commits.values().sum::<usize>(), 1, "{commits:?}");
}

/// Run records are bounded: a record's message is cut to 4 KiB (saying
/// how much was cut) when loaded, a record file over the size bound is
/// not loaded at all, and `GET /v1/runs` pages (`limit`, `after`), each
/// run listed once.
#[test]
fn run_records_are_bounded_and_listed_in_pages() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "");
    drop(start(&cfg, &[]));
    let runs = dir.path().join("state/runs");
    let record = |id: &str, ms: u64, message: &str| {
        json!({
            "id": id, "tenant": "a", "state": "failed",
            "request": {"module": "sha256:00", "table": "t"},
            "submittedMs": ms, "finishedMs": ms + 1, "attempts": 1,
            "error": {"kind": "guest", "message": message},
        })
        .to_string()
    };
    for i in 0..250u64 {
        let id = format!("run-{i:024}");
        std::fs::write(
            runs.join(format!("{id}.json")),
            record(&id, 1000 + i, "small"),
        )
        .unwrap();
    }
    let long = "E".repeat(200_000);
    let long_id = "run-long00000000000000000000";
    std::fs::write(
        runs.join(format!("{long_id}.json")),
        record(long_id, 5000, &long),
    )
    .unwrap();
    let huge_id = "run-huge00000000000000000000";
    std::fs::write(
        runs.join(format!("{huge_id}.json")),
        record(huge_id, 6000, &"E".repeat(3 << 20)),
    )
    .unwrap();

    let s = start(&cfg, &[]);
    let (code, body) = curl(
        "GET",
        &format!("{}/v1/runs/{long_id}", s.url),
        Some(TOKEN_A),
        None,
    );
    assert_eq!(code, 200, "{body}");
    let message = json_of(&body)["error"]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(message.len() <= 4200, "{} bytes", message.len());
    assert!(
        message.contains("195904 more bytes cut"),
        "{:?}",
        message.get(4000..)
    );
    // Not loaded (it would have been the newest).
    let (code, _) = curl(
        "GET",
        &format!("{}/v1/runs/{huge_id}", s.url),
        Some(TOKEN_A),
        None,
    );
    assert_eq!(code, 404);

    let mut seen = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let q = match &after {
            None => String::new(),
            Some(c) => format!("?after={c}"),
        };
        let (code, body) = curl("GET", &format!("{}/v1/runs{q}", s.url), Some(TOKEN_A), None);
        assert_eq!(code, 200, "{body}");
        let page = json_of(&body);
        let ids: Vec<String> = page["runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["id"].as_str().unwrap().to_string())
            .collect();
        assert!(ids.len() <= 100, "{}", ids.len());
        seen.extend(ids);
        match page["next"].as_str() {
            Some(c) => after = Some(c.to_string()),
            None => break,
        }
    }
    assert_eq!(seen.len(), 251);
    assert_eq!(seen[0], long_id);
    assert_eq!(seen[250], format!("run-{:024}", 0));
    let mut unique = seen.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), 251);
    let (_, body) = curl(
        "GET",
        &format!("{}/v1/runs?limit=1000", s.url),
        Some(TOKEN_A),
        None,
    );
    assert_eq!(json_of(&body)["runs"].as_array().unwrap().len(), 251);
    for bad in ["limit=1001", "after=nonsense"] {
        let (code, body) = curl(
            "GET",
            &format!("{}/v1/runs?{bad}", s.url),
            Some(TOKEN_A),
            None,
        );
        assert_eq!(code, 400, "{bad}: {body}");
    }
}

/// An error naming a path under the tenant's root names it relative to
/// the root, intact, without the host's folders, also when the config
/// and roots are relative (the service started from their folder).
#[test]
fn error_messages_name_paths_relative_to_the_root() {
    let dir = tempfile::tempdir().unwrap();
    config(dir.path(), "");
    let files = common::orders(&dir.path().join("b/orders"), "2026-10-01", 500, 1);
    let file = files[0].file_name().unwrap().to_str().unwrap().to_string();
    let s = start_in(Some(dir.path()), Path::new("serve.toml"), &[]);
    let (_, up) = upload(&s, TOKEN_B, &common::guest("examples/daily_revenue"));
    let module = up["module"].as_str().unwrap().to_string();
    let rel = format!("orders/date=2026-10-01/{file}");
    std::fs::write(dir.path().join("b/plain"), b"a file").unwrap();
    let host = dir.path().canonicalize().unwrap().display().to_string();
    for table in [format!("{rel}/t"), "plain/t".to_string()] {
        let (code, v) = submit(&s, TOKEN_B, &day_request(&module, &table, "2026-10-01"));
        assert_eq!(code, 202, "{v}");
        let r = wait(&s, TOKEN_B, v["id"].as_str().unwrap());
        assert_eq!(r["state"], "failed", "{r}");
        let m = r["error"]["message"].as_str().unwrap();
        assert!(
            !m.contains(&host) && !m.contains("file:/") && !m.contains("/tmp"),
            "{m}"
        );
        assert!(m.contains(&table), "{table}: {m}");
    }
}

#[test]
fn the_service_signs_each_tenants_runs_with_its_key_and_serves_the_attestation() {
    let dir = tempfile::tempdir().unwrap();
    let key = |name: &str| dir.path().join(name).display().to_string();
    let (code, _, err) = common::idem(&["keygen", "--out", &key("service.pem")]);
    assert_eq!(code, 0, "{err}");
    dsse_check(&["keygen", &key("b.pem"), &key("b.pub.pem")]).unwrap();
    // The service's key for every tenant; tenant b has its own.
    let cfg = config(dir.path(), "");
    let text = std::fs::read_to_string(&cfg)
        .unwrap()
        .replace("root = \"b\"", "root = \"b\"\nsign-key = \"b.pem\"");
    // OpenLineage events too, each tenant's jobs in its own namespace.
    let events = dir.path().join("events");
    let head = format!(
        "sign-key = \"service.pem\"\nlineage = \"file://{}\"\n",
        events.display()
    );
    std::fs::write(&cfg, format!("{head}{text}")).unwrap();
    common::orders(&dir.path().join("a/orders"), "2026-10-01", 500, 1);
    common::orders(&dir.path().join("b/orders"), "2026-10-01", 500, 1);
    let s = start(&cfg, &[]);

    let revenue = common::guest("examples/daily_revenue");
    let mut envelopes = Vec::new();
    for (token, public) in [
        (TOKEN_A, key("service.pub.pem")),
        (TOKEN_B, key("b.pub.pem")),
    ] {
        let (_, up) = upload(&s, token, &revenue);
        let req = day_request(
            up["module"].as_str().unwrap(),
            "tables/revenue",
            "2026-10-01",
        );
        let (code, v) = submit(&s, token, &req);
        assert_eq!(code, 202, "{v}");
        let id = v["id"].as_str().unwrap().to_string();
        let done = wait(&s, token, &id);
        assert_eq!(done["state"], "succeeded", "{done}");
        assert!(done["result"]["envelope"].is_string(), "{done}");
        let url = format!("{}/v1/runs/{id}/attestation", s.url);
        let (code, body) = curl("GET", &url, Some(token), None);
        assert_eq!(code, 200, "{body}");
        let file = dir.path().join(format!("{id}.dsse.json"));
        std::fs::write(&file, &body).unwrap();
        // Checked by securesystemslib with the key the tenant was given:
        // the payload is the run's manifest.
        let (code, pem) = curl(
            "GET",
            &format!("{}/v1/attestation-key", s.url),
            Some(token),
            None,
        );
        assert_eq!(code, 200);
        assert_eq!(pem, std::fs::read_to_string(&public).unwrap());
        let v: Value =
            serde_json::from_str(&dsse_check(&["verify", &s_(&file), &public]).unwrap()).unwrap();
        assert_eq!(
            format!("sha256:{}", v["payloadSha256"].as_str().unwrap()),
            done["result"]["manifest"].as_str().unwrap()
        );
        envelopes.push((id, file));
    }
    // Each tenant's runs are signed by its own key only, and neither sees
    // the other's attestation.
    let (b_id, b_file) = &envelopes[1];
    assert!(dsse_check(&["verify", &s_(b_file), &key("service.pub.pem")]).is_err());
    let url = format!("{}/v1/runs/{b_id}/attestation", s.url);
    assert_eq!(curl("GET", &url, Some(TOKEN_A), None).0, 404);
    // The table proves it too.
    let table = dir.path().join("a/tables/revenue").display().to_string();
    let (code, out, err) = common::idem(&["audit", &table, "--key", &key("service.pub.pem")]);
    assert_eq!(code, 0, "{out}{err}");
    let (code, ..) = common::idem(&["audit", &table, "--key", &key("b.pub.pem")]);
    assert_eq!(code, 1);
    let mut seen: Vec<(String, String)> = std::fs::read_dir(&events)
        .unwrap()
        .map(|e| {
            let v: Value =
                serde_json::from_slice(&std::fs::read(e.unwrap().path()).unwrap()).unwrap();
            let ns = v["job"]["namespace"].as_str().unwrap().to_string();
            (ns, v["eventType"].as_str().unwrap().to_string())
        })
        .collect();
    seen.sort();
    let want: Vec<(String, String)> = ["idem/a", "idem/a", "idem/b", "idem/b"]
        .iter()
        .zip(["COMPLETE", "START", "COMPLETE", "START"])
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    assert_eq!(seen, want);
}

fn s_(p: &Path) -> String {
    p.display().to_string()
}
