//! Many hosts on one table: N `idem` processes run overlapping sets of
//! slices at once, some with other params, some killed with SIGKILL at
//! arbitrary points; then all of them run every slice with the final
//! params at once. The table must end exactly as one clean single-host
//! run leaves it (row by row, two independent readers, no duplicates),
//! and `idem audit` must prove every slice. On local disk (overwrite-
//! partition and append tables) and on the S3 test server.

mod common;

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{S3, read_table, read_table_s3};

const HOSTS: usize = 4;

/// One `idem run` of clean_orders over `date` of `root` into `table`.
fn run_cmd(
    env: &[(&'static str, String)],
    module: &str,
    root: &str,
    date: &str,
    table: &str,
    mode: &str,
    min_amount: u32,
) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_idem"));
    cmd.args([
        "run",
        "--module",
        module,
        "--input",
        root,
        "--partition",
        &format!("date={date}"),
        "--table",
        table,
        "--mode",
        mode,
        "--batch-rows",
        "700",
        "--params",
        &format!("{{\"min_amount\": {min_amount}}}"),
    ])
    .env("IDEM_CACHE_DIR", common::test_cache())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

/// A deterministic pseudo-random sequence (no clock, no entropy).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

/// Phase 1: each host runs every day (rotated by its number), hosts 1 and
/// 3 with other params for their second half, and every third run is
/// killed after a pseudo-random delay. Phase 2: every host runs every day
/// with the final params. Returns how many runs were killed. Every table
/// version a run reports as its commit must be reported by that run alone:
/// two runs claiming one version means one commit replaced another's log
/// entry (what conditional writes prevent).
fn chaos(
    env: &[(&'static str, String)],
    module: &str,
    root: &str,
    table: &str,
    mode: &str,
    days: &[&str],
) -> usize {
    let killed = std::sync::atomic::AtomicUsize::new(0);
    let at_points = std::sync::atomic::AtomicUsize::new(0);
    let claimed = std::sync::Mutex::new(Vec::<String>::new());
    let claim = |out: &std::process::Output| {
        let stdout = String::from_utf8_lossy(&out.stdout);
        if let Some(r) = stdout.lines().find_map(|l| l.strip_prefix("result:"))
            && let Some(v) = r.trim().strip_prefix("committed version ")
        {
            let v = v.split_whitespace().next().unwrap_or("").to_string();
            claimed.lock().unwrap().push(v);
        }
    };
    let claim = &claim;
    std::thread::scope(|scope| {
        for host in 0..HOSTS {
            let (killed, at_points) = (&killed, &at_points);
            scope.spawn(move || {
                let mut rng = Lcg(host as u64 + 7);
                for (k, i) in (0..days.len()).enumerate() {
                    let d = days[(i + host) % days.len()];
                    let params = if host % 2 == 1 && k >= days.len() / 2 {
                        25
                    } else {
                        5
                    };
                    let mut cmd = run_cmd(env, module, root, d, table, mode, params);
                    // Every third run is killed: alternately exactly at a
                    // commit's fault point (data files written, log not
                    // yet; log written, sidecars not yet), or after a
                    // pseudo-random delay (start-up, pinning, executing).
                    let kill = (k + host) % 3 == 0;
                    let flag = std::env::temp_dir().join(format!(
                        "idem-hosts-{}-{host}-{k}-{}",
                        std::process::id(),
                        table.len()
                    ));
                    let _ = std::fs::remove_dir_all(&flag);
                    // Host 0's first run (the first of its day) always dies
                    // inside its commit, so every run of the test has one.
                    let first = host == 0 && k == 0;
                    let at_point = kill && (first || rng.next(3) < 2);
                    let point = if first {
                        "before-log-write"
                    } else {
                        ["before-log-write", "after-log-write"][rng.next(2) as usize]
                    };
                    if at_point {
                        cmd.env(
                            "IDEM_FAULT_BARRIER",
                            format!("{point}:1:{}", flag.display()),
                        )
                        .env("IDEM_FAULT_SLEEP_MS", format!("{point}:60000"));
                    }
                    let mut child: Child = cmd.spawn().unwrap();
                    if kill {
                        if at_point {
                            // Until it announces itself there, or ends without
                            // committing (its output was current already).
                            while child.try_wait().unwrap().is_none()
                                && std::fs::read_dir(&flag).map(|d| d.count()).unwrap_or(0) == 0
                            {
                                std::thread::sleep(Duration::from_millis(10));
                            }
                        } else {
                            std::thread::sleep(Duration::from_millis(100 + rng.next(900)));
                        }
                        if child.try_wait().unwrap().is_none() {
                            child.kill().unwrap();
                            killed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            if at_point {
                                at_points.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            }
                        }
                    }
                    let _ = std::fs::remove_dir_all(&flag);
                    let out = child.wait_with_output().unwrap();
                    claim(&out);
                    let code = out.status.code();
                    assert!(
                        code.is_none() || code == Some(0),
                        "host {host} day {d}: {}",
                        String::from_utf8_lossy(&out.stderr)
                    );
                }
            });
        }
    });
    std::thread::scope(|scope| {
        for host in 0..HOSTS {
            scope.spawn(move || {
                for i in 0..days.len() {
                    let d = days[(i + host) % days.len()];
                    let out = run_cmd(env, module, root, d, table, mode, 10)
                        .output()
                        .unwrap();
                    claim(&out);
                    assert!(
                        out.status.success(),
                        "host {host} day {d}: {}",
                        String::from_utf8_lossy(&out.stderr)
                    );
                }
            });
        }
    });
    let mut claimed = claimed.into_inner().unwrap();
    let n = claimed.len();
    claimed.sort();
    claimed.dedup();
    assert_eq!(
        claimed.len(),
        n,
        "two runs claim one table version: {claimed:?}"
    );
    assert!(n >= days.len(), "fewer commits than slices: {claimed:?}");
    assert!(
        at_points.into_inner() > 0,
        "no run was killed inside a commit: the test proves less than it says"
    );
    killed.into_inner()
}

/// The clean single-host reference: each day once, final params.
fn clean(
    env: &[(&'static str, String)],
    module: &str,
    root: &str,
    table: &str,
    mode: &str,
    days: &[&str],
) {
    for d in days {
        let out = run_cmd(env, module, root, d, table, mode, 10)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

fn audit(env: &[(&'static str, String)], table: &str, slices: usize) {
    let mut all: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    all.push(("IDEM_LOG", "off"));
    let (code, out, err) = common::idem_env(&["audit", table], &all);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        out.contains(&format!("all {slices} slices proven")),
        "{out}"
    );
}

#[test]
fn many_local_hosts_with_kills_and_changed_params_end_as_one_clean_run() {
    let module = common::guest("examples/clean_orders");
    let module = module.to_str().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("data");
    let days = [
        "2026-10-01",
        "2026-10-02",
        "2026-10-03",
        "2026-10-04",
        "2026-10-05",
    ];
    for d in days {
        common::orders(&root, d, 4000, 2);
    }
    let root = root.to_str().unwrap();
    for mode in ["overwrite-partition", "append"] {
        let table = dir.path().join(format!("chaos-{mode}"));
        let reference = dir.path().join(format!("clean-{mode}"));
        let killed = chaos(&[], module, root, table.to_str().unwrap(), mode, &days);
        assert!(
            killed > 0,
            "no run was killed: the test proves less than it says"
        );
        clean(&[], module, root, reference.to_str().unwrap(), mode, &days);
        let got = read_table(&table, None);
        let want = read_table(&reference, None);
        assert_eq!(
            got.rows.len(),
            want.rows.len(),
            "{mode}: row count (duplicates?)"
        );
        assert!(
            got.rows == want.rows,
            "{mode}: rows differ from one clean run"
        );
        audit(&[], table.to_str().unwrap(), days.len());
    }
}

#[test]
fn many_hosts_on_s3_end_as_one_clean_run() {
    let s3 = S3::start("lake");
    let env = s3.env();
    let module = common::guest("examples/clean_orders");
    let module = module.to_str().unwrap();
    let days = ["2026-10-01", "2026-10-02", "2026-10-03"];
    let root = s3.url("data");
    let mut args = vec![
        "sample", "--out", &root, "--rows", "3000", "--files", "2", "--dates",
    ];
    args.extend_from_slice(&days);
    let (code, _, err) = s3.idem(&args, &[]);
    assert_eq!(code, 0, "{err}");
    let (table, reference) = (s3.url("chaos"), s3.url("clean"));
    let killed = chaos(&env, module, &root, &table, "overwrite-partition", &days);
    assert!(killed > 0, "no run was killed");
    clean(
        &env,
        module,
        &root,
        &reference,
        "overwrite-partition",
        &days,
    );
    let got = read_table_s3(&table, &s3, None);
    let want = read_table_s3(&reference, &s3, None);
    assert_eq!(got.rows.len(), want.rows.len(), "row count (duplicates?)");
    assert!(got.rows == want.rows, "rows differ from one clean run");
    audit(&env, &table, days.len());
}
