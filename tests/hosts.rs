//! Many hosts on one table: N `idem` processes run overlapping sets of
//! slices at once, some with other params, some killed with SIGKILL inside
//! their commits (at fault points) or after a random delay; then all of
//! them run every slice with the final params at once. The table must end exactly as one clean single-host
//! run leaves it (row by row, two independent readers, no duplicates),
//! and `idem audit` must prove every slice. On local disk (overwrite-
//! partition and append tables), on the S3 test server, and as Iceberg
//! tables in a SQL catalog on a real PostgreSQL server (read back by
//! PyIceberg's SqlCatalog on the same database).

mod common;

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::postgres::Postgres;
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

/// How a run of the plan ends.
#[derive(Clone, Copy)]
enum Fate {
    /// Runs to the end.
    Finish,
    /// Killed exactly at this commit fault point (it must get there).
    KillAt(&'static str),
    /// Killed after this many milliseconds, wherever it is.
    KillAfter(u64),
}

/// What the hosts did.
#[derive(Default)]
struct Tally {
    /// Table versions that runs reported as their commit.
    claimed: Vec<String>,
    /// Kills per fault point, and kills after a delay that landed.
    at_point: std::collections::BTreeMap<&'static str, usize>,
    after_delay: usize,
}

/// Run `(day, params, fate)` on `host`, recording what happened.
#[allow(clippy::too_many_arguments)]
fn run_one(
    env: &[(&'static str, String)],
    module: &str,
    root: &str,
    table: &str,
    mode: &str,
    (day, params, fate): (&str, u32, Fate),
    tally: &std::sync::Mutex<Tally>,
) {
    let mut cmd = run_cmd(env, module, root, day, table, mode, params);
    let flag = tempfile::tempdir().unwrap();
    if let Fate::KillAt(point) = fate {
        cmd.env(
            "IDEM_FAULT_BARRIER",
            format!("{point}:1:{}", flag.path().display()),
        )
        .env("IDEM_FAULT_SLEEP_MS", format!("{point}:60000"));
    }
    let mut child: Child = cmd.spawn().unwrap();
    match fate {
        Fate::Finish => {}
        Fate::KillAt(point) => {
            let deadline = std::time::Instant::now() + Duration::from_secs(120);
            while std::fs::read_dir(flag.path()).unwrap().count() == 0 {
                if let Some(status) = child.try_wait().unwrap() {
                    let out = child.wait_with_output().unwrap();
                    panic!(
                        "day {day} params {params}: ended ({status}) before reaching {point}: {}{}",
                        String::from_utf8_lossy(&out.stdout),
                        String::from_utf8_lossy(&out.stderr)
                    );
                }
                assert!(
                    std::time::Instant::now() < deadline,
                    "{point} never reached"
                );
                std::thread::sleep(Duration::from_millis(10));
            }
            child.kill().unwrap();
            *tally.lock().unwrap().at_point.entry(point).or_default() += 1;
        }
        Fate::KillAfter(ms) => {
            std::thread::sleep(Duration::from_millis(ms));
            if child.try_wait().unwrap().is_none() {
                child.kill().unwrap();
                tally.lock().unwrap().after_delay += 1;
            }
        }
    }
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    if let Some(r) = stdout.lines().find_map(|l| l.strip_prefix("result:"))
        && let Some(v) = r.trim().strip_prefix("committed version ")
    {
        let v = v.split_whitespace().next().unwrap_or("").to_string();
        tally.lock().unwrap().claimed.push(v);
    }
    let code = out.status.code();
    assert!(
        code.is_none() || code == Some(0),
        "day {day} params {params}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Three phases, each with all hosts at once:
/// A. every host runs every day (rotated), params 5: every slice commits;
/// B. each host runs one day with params of its own (so its output is new
///    and it must reach its commit) and is killed exactly at a commit fault
///    point, `before-log-write` (data files written, log not) or
///    `after-log-write` (log written, sidecars not), then runs another day
///    with params 25;
/// C. every host runs every day with the final params 10, two of them
///    killed after a pseudo-random delay first.
///
/// Every table version a run reports as its commit must be reported by that
/// run alone: two runs claiming one version means one commit replaced
/// another's log entry (what conditional writes prevent).
fn chaos(
    env: &[(&'static str, String)],
    module: &str,
    root: &str,
    table: &str,
    mode: &str,
    days: &[&str],
) -> Tally {
    let tally = std::sync::Mutex::new(Tally::default());
    let n = days.len();
    let points = ["before-log-write", "after-log-write"];
    // Per host, per phase, the runs: (day, params, fate).
    type Plan<'a> = Vec<Vec<(&'a str, u32, Fate)>>;
    let plans: Vec<Plan> = (0..HOSTS)
        .map(|h| {
            let mut rng = Lcg(h as u64 + 7);
            let a = (0..n)
                .map(|i| (days[(i + h) % n], 5, Fate::Finish))
                .collect();
            let b = vec![
                (days[h % n], 40 + h as u32, Fate::KillAt(points[h % 2])),
                (days[(h + 1) % n], 25, Fate::Finish),
            ];
            let mut c: Vec<(&str, u32, Fate)> = (0..n)
                .map(|i| (days[(i + h) % n], 10, Fate::Finish))
                .collect();
            if h % 2 == 1 {
                // Params of its own: the run must execute and commit (a
                // memo hit could end before any delay), so the kill lands
                // inside real work (a debug run here takes 100-300 ms).
                c.insert(
                    0,
                    (
                        days[h % n],
                        60 + h as u32,
                        Fate::KillAfter(20 + rng.next(200)),
                    ),
                );
            }
            vec![a, b, c]
        })
        .collect();
    for phase in 0..3 {
        std::thread::scope(|scope| {
            for plan in &plans {
                let tally = &tally;
                scope.spawn(move || {
                    for &run in &plan[phase] {
                        run_one(env, module, root, table, mode, run, tally);
                    }
                });
            }
        });
    }
    let mut tally = tally.into_inner().unwrap();
    let claimed = tally.claimed.len();
    tally.claimed.sort();
    tally.claimed.dedup();
    assert_eq!(
        tally.claimed.len(),
        claimed,
        "two runs claim one table version: {:?}",
        tally.claimed
    );
    assert!(
        claimed >= n,
        "fewer commits than slices: {:?}",
        tally.claimed
    );
    // Every planned kill at a fault point happened there, and at least one
    // kill after a delay caught its run alive (else phase C proved
    // nothing about random kills).
    assert_eq!(tally.at_point.get(points[0]), Some(&(HOSTS / 2)));
    assert_eq!(tally.at_point.get(points[1]), Some(&(HOSTS / 2)));
    assert!(
        tally.after_delay >= 1,
        "no kill after a delay landed: every such run ended first"
    );
    tally
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
        chaos(&[], module, root, table.to_str().unwrap(), mode, &days);
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
    chaos(&env, module, &root, &table, "overwrite-partition", &days);
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

/// The rows PyIceberg's SqlCatalog reads in `ident` of the catalog at
/// `uri`, sorted, as canonical JSON.
fn read_iceberg(uri: &str, warehouse: &std::path::Path, ident: &str) -> Vec<String> {
    common::read_iceberg(uri, warehouse, ident)["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn many_hosts_on_an_iceberg_catalog_in_postgres_end_as_one_clean_run() {
    let pg = Postgres::start();
    let env = pg.env();
    let module = common::guest("examples/clean_orders");
    let module = module.to_str().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("data");
    let days = ["2026-10-01", "2026-10-02", "2026-10-03"];
    for d in days {
        common::orders(&root, d, 3000, 2);
    }
    let root = root.to_str().unwrap();
    let warehouse = dir.path().join("warehouse");
    let wh = warehouse.to_str().unwrap();
    for mode in ["overwrite-partition", "append"] {
        let name = mode.replace('-', "_");
        let table = pg.table(wh, &format!("sales.chaos_{name}"));
        let reference = pg.table(wh, &format!("sales.clean_{name}"));
        let tally = chaos(&env, module, root, &table, mode, &days);
        clean(&env, module, root, &reference, mode, &days);
        let got = read_iceberg(
            &pg.sqlalchemy_uri(),
            &warehouse,
            &format!("sales.chaos_{name}"),
        );
        let want = read_iceberg(
            &pg.sqlalchemy_uri(),
            &warehouse,
            &format!("sales.clean_{name}"),
        );
        assert!(!want.is_empty());
        assert_eq!(got.len(), want.len(), "{mode}: row count (duplicates?)");
        assert!(got == want, "{mode}: rows differ from one clean run");
        audit(&env, &table, days.len());
        // Every commit a run reported is a snapshot the catalog's row
        // moved through: the row names the newest metadata file and the
        // one before it.
        let row = pg.psql(
            common::postgres::DB,
            &format!(
                "SELECT metadata_location, previous_metadata_location FROM iceberg_tables \
                 WHERE table_namespace = 'sales' AND table_name = 'chaos_{name}'"
            ),
        );
        let (current, previous) = row.trim().split_once('|').unwrap();
        assert!(
            current.ends_with(".metadata.json") && previous.ends_with(".metadata.json"),
            "{row}"
        );
        assert!(tally.claimed.len() >= days.len());
    }
}
