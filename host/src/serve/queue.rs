//! The run queue: per-tenant FIFO queues served round-robin (a flood from
//! one tenant waits behind its own quota, never in front of others), a
//! bounded worker pool, identical submissions joined, every state change
//! persisted under the state dir so a restarted service finishes what was
//! queued or running (runs are idempotent: re-running one is safe).

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;
use serde_json::Value;

use super::record::read_record;
pub use super::record::{
    MAX_MESSAGE_BYTES, MAX_RECORD_BYTES, RunRecord, RunRequest, State, bound_text,
};

/// Why a submission was refused.
#[derive(Debug)]
pub enum Refused {
    /// The tenant's queue is full.
    Full(usize),
    /// The service is shutting down.
    Stopping,
    /// The run could not be recorded (nothing was queued).
    Persist,
}

/// Runs interrupted by this many service stops are failed, not retried
/// (a run that takes the service down with it must not do so forever),
/// unless their table shows they committed.
pub const MAX_ATTEMPTS: u32 = 3;

/// The records under `runs_dir` of the `tenants`, in submission order;
/// unreadable or oversized ones, and other tenants', are left alone.
fn read_records(
    runs_dir: &Path,
    tenants: &[(String, usize, usize)],
) -> std::io::Result<Vec<RunRecord>> {
    let mut found = Vec::new();
    for e in std::fs::read_dir(runs_dir)? {
        let path = e?.path();
        if path.extension().is_none_or(|x| x != "json") {
            continue;
        }
        match read_record(&path) {
            Ok(r) if tenants.iter().any(|(t, ..)| *t == r.tenant) => found.push(r),
            Ok(r) => tracing::warn!(
                "run {} belongs to tenant `{}`, which the config no longer has: left alone",
                r.id,
                r.tenant
            ),
            Err(e) => tracing::warn!("ignoring the run record {}: {e}", path.display()),
        }
    }
    found.sort_by(|a: &RunRecord, b| (a.submitted_ms, &a.id).cmp(&(b.submitted_ms, &b.id)));
    Ok(found)
}

/// A page of a tenant's runs, newest first.
#[derive(Debug, Serialize)]
pub struct Page {
    /// The runs.
    pub runs: Vec<RunRecord>,
    /// The cursor of the next page (`after=`), when there are more.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
}

/// The most a page of runs holds, serialized: it ends early (with a
/// cursor) rather than grow past it.
const MAX_PAGE_BYTES: usize = 8 << 20;

/// A run's place in the newest-first order, as a page cursor.
fn cursor(r: &RunRecord) -> String {
    format!("{}.{}", r.submitted_ms, r.id)
}

/// The place a cursor names: `(submitted_ms, id)`.
pub fn parse_cursor(c: &str) -> Option<(u64, String)> {
    let (ms, id) = c.split_once('.')?;
    Some((ms.parse().ok()?, id.to_string()))
}

#[derive(Default)]
struct Inner {
    runs: HashMap<String, RunRecord>,
    queued: HashMap<String, VecDeque<String>>,
    running: HashMap<String, usize>,
    /// (tenant, canonical request) -> id of a queued or running run.
    active: HashMap<(String, String), String>,
    /// Each tenant's ended runs, oldest first: the records kept.
    ended_order: HashMap<String, VecDeque<String>>,
    /// Round-robin position over `order`.
    next: usize,
    stopping: bool,
    /// Submit-to-done seconds of ended runs, per histogram bucket.
    latency: Vec<u64>,
    latency_sum: f64,
    ended: HashMap<(String, State), u64>,
}

/// Histogram buckets (seconds) of submit-to-done latency.
pub const BUCKETS: [f64; 10] = [0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 30.0, 120.0];

/// The queue shared by the API and the workers.
pub struct Queue {
    /// Held for the life of the queue: one service per state dir.
    _lock: std::fs::File,
    inner: Mutex<Inner>,
    wake: Condvar,
    dir: PathBuf,
    /// Tenants in config order, with their concurrency limit.
    order: Vec<(String, usize, usize)>,
    /// Ended runs kept per tenant; older ones are forgotten (record
    /// deleted; their tables keep what they committed).
    keep_ended: usize,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

fn new_id() -> String {
    let mut b = [0u8; 12];
    // An id only names a run; uniqueness, not secrecy, matters.
    let _ = getrandom::fill(&mut b);
    format!("run-{}", hex::encode(b))
}

/// The canonical text of a request (keys sorted): equal texts are the
/// same run.
fn canonical(r: &RunRequest) -> String {
    serde_json::to_value(r)
        .map(|v| v.to_string())
        .unwrap_or_default()
}

impl Queue {
    /// A queue persisting under `dir/runs`, for tenants `(name,
    /// max_concurrent, max_queued)`, keeping the last `keep_ended` ended
    /// runs of each; runs found there that were queued or running are
    /// queued again (in submission order).
    ///
    /// A run that was running through [`MAX_ATTEMPTS`] stops is not run
    /// again; `settle` says whether its table holds it committed (its
    /// result, then recorded as succeeded), else it is failed.
    pub fn open(
        dir: &Path,
        tenants: Vec<(String, usize, usize)>,
        keep_ended: usize,
        settle: &dyn Fn(&RunRecord) -> Option<Value>,
    ) -> std::io::Result<Queue> {
        let runs_dir = dir.join("runs");
        std::fs::create_dir_all(&runs_dir)?;
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join("lock"))?;
        if lock.try_lock().is_err() {
            return Err(std::io::Error::other(format!(
                "another idem serve uses the state dir {}: one service per state dir",
                dir.display()
            )));
        }
        let mut inner = Inner {
            latency: vec![0; BUCKETS.len() + 1],
            ..Inner::default()
        };
        let found = read_records(&runs_dir, &tenants)?;
        let q = Queue {
            _lock: lock,
            inner: Mutex::new(Inner::default()),
            wake: Condvar::new(),
            dir: runs_dir,
            order: tenants,
            keep_ended,
        };
        for mut r in found {
            // An old record may hold texts of any size: bounded, and
            // written back so.
            if r.bound() {
                let _ = q.persist(&r);
            }
            if r.state == State::Running && r.attempts >= MAX_ATTEMPTS {
                q.end_poisoned(&mut r, settle);
            }
            if matches!(r.state, State::Queued | State::Running) {
                // A run that was running when the service stopped is run
                // again: its commit either landed (the rerun finds it:
                // memo or unchanged) or never did.
                r.state = State::Queued;
                let _ = q.persist(&r);
                inner
                    .active
                    .insert((r.tenant.clone(), canonical(&r.request)), r.id.clone());
                inner
                    .queued
                    .entry(r.tenant.clone())
                    .or_default()
                    .push_back(r.id.clone());
            }
            inner.runs.insert(r.id.clone(), r);
        }
        let mut ended: Vec<&RunRecord> = inner
            .runs
            .values()
            .filter(|r| matches!(r.state, State::Succeeded | State::Failed))
            .collect();
        ended.sort_by_key(|r| (r.finished_ms, r.submitted_ms, r.id.clone()));
        let mut order: HashMap<String, VecDeque<String>> = HashMap::new();
        for r in ended {
            order
                .entry(r.tenant.clone())
                .or_default()
                .push_back(r.id.clone());
        }
        inner.ended_order = order;
        for (tenant, ..) in &q.order {
            q.forget_old(&mut inner, tenant);
        }
        *q.inner.lock().unwrap_or_else(|e| e.into_inner()) = inner;
        Ok(q)
    }

    /// End a run that was running through [`MAX_ATTEMPTS`] stops without
    /// running it again: succeeded when its table holds it committed
    /// (its commit landed each time, the stop came before its record),
    /// else failed. A run's record never says failed of a committed run.
    fn end_poisoned(&self, r: &mut RunRecord, settle: &dyn Fn(&RunRecord) -> Option<Value>) {
        match settle(r) {
            Some(result) => {
                r.state = State::Succeeded;
                r.result = Some(result);
            }
            None => {
                r.state = State::Failed;
                r.error = Some(serde_json::json!({
                    "kind": "bug",
                    "message": format!("the service stopped during this run {} times: it is not run again (its table holds no commit of it)", r.attempts),
                }));
            }
        }
        r.bound();
        r.finished_ms = Some(now_ms());
        let _ = self.persist(r);
    }

    /// Forget `tenant`'s oldest ended runs beyond `keep_ended`: out of
    /// memory and off disk.
    fn forget_old(&self, inner: &mut Inner, tenant: &str) {
        let Some(order) = inner.ended_order.get_mut(tenant) else {
            return;
        };
        while order.len() > self.keep_ended {
            let Some(id) = order.pop_front() else { break };
            inner.runs.remove(&id);
            let path = self.dir.join(format!("{id}.json"));
            if let Err(e) = std::fs::remove_file(&path)
                && e.kind() != std::io::ErrorKind::NotFound
            {
                tracing::warn!("cannot remove the old run record {}: {e}", path.display());
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Write a record durably and atomically (temp file, fsync, rename).
    fn persist(&self, r: &RunRecord) -> std::io::Result<()> {
        use std::io::Write as _;
        let path = self.dir.join(format!("{}.json", r.id));
        let tmp = self.dir.join(format!(".{}.tmp", r.id));
        let done = (|| {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(&serde_json::to_vec(r).map_err(std::io::Error::other)?)?;
            f.sync_all()?;
            std::fs::rename(&tmp, &path)?;
            std::fs::File::open(&self.dir)?.sync_all()
        })();
        if let Err(e) = &done {
            tracing::error!(
                "cannot persist run {} under {}: {e}",
                r.id,
                self.dir.display()
            );
        }
        done
    }

    /// Queue `request` for `tenant`, or join the identical run already
    /// queued or running. `(record, joined)`.
    pub fn submit(&self, tenant: &str, request: RunRequest) -> Result<(RunRecord, bool), Refused> {
        let mut inner = self.lock();
        if inner.stopping {
            return Err(Refused::Stopping);
        }
        let key = (tenant.to_string(), canonical(&request));
        if let Some(id) = inner.active.get(&key)
            && let Some(r) = inner.runs.get(id)
        {
            return Ok((r.clone(), true));
        }
        let max = self
            .order
            .iter()
            .find(|(t, ..)| t == tenant)
            .map(|(_, _, q)| *q)
            .unwrap_or(0);
        let waiting = inner.queued.get(tenant).map(VecDeque::len).unwrap_or(0);
        if waiting >= max {
            return Err(Refused::Full(max));
        }
        let r = RunRecord {
            id: new_id(),
            tenant: tenant.to_string(),
            request,
            state: State::Queued,
            submitted_ms: now_ms(),
            finished_ms: None,
            result: None,
            error: None,
            attempts: 0,
        };
        if self.persist(&r).is_err() {
            return Err(Refused::Persist);
        }
        inner.active.insert(key, r.id.clone());
        inner
            .queued
            .entry(tenant.to_string())
            .or_default()
            .push_back(r.id.clone());
        inner.runs.insert(r.id.clone(), r.clone());
        drop(inner);
        self.wake.notify_one();
        Ok((r, false))
    }

    /// The next run to execute (round-robin over tenants below their
    /// concurrency limit); blocks; `None` once the queue stops.
    pub fn take(&self) -> Option<RunRecord> {
        let mut inner = self.lock();
        loop {
            if inner.stopping {
                return None;
            }
            let n = self.order.len();
            for k in 0..n {
                let i = (inner.next + k) % n;
                let (tenant, max_running, _) = &self.order[i];
                let running = inner.running.get(tenant).copied().unwrap_or(0);
                if running >= *max_running {
                    continue;
                }
                let Some(id) = inner.queued.get_mut(tenant).and_then(VecDeque::pop_front) else {
                    continue;
                };
                inner.next = (i + 1) % n;
                *inner.running.entry(tenant.clone()).or_default() += 1;
                let rec = inner.runs.get_mut(&id).map(|r| {
                    r.state = State::Running;
                    r.attempts += 1;
                    r.clone()
                });
                if let Some(r) = rec {
                    let _ = self.persist(&r);
                    return Some(r);
                }
            }
            inner = self.wake.wait(inner).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Record how run `id` ended.
    pub fn finish(&self, id: &str, result: Result<Value, Value>) {
        let mut inner = self.lock();
        let Some(r) = inner.runs.get_mut(id) else {
            return;
        };
        let (state, res, err) = match result {
            Ok(v) => (State::Succeeded, Some(v), None),
            Err(e) => (State::Failed, None, Some(e)),
        };
        r.state = state;
        r.result = res;
        r.error = err;
        r.finished_ms = Some(now_ms());
        // What a guest or a store said may be of any size: the record
        // (kept, listed, read back at each start) is bounded.
        r.bound();
        let r = r.clone();
        let secs = r.finished_ms.unwrap_or(0).saturating_sub(r.submitted_ms) as f64 / 1000.0;
        let bucket = BUCKETS
            .iter()
            .position(|b| secs <= *b)
            .unwrap_or(BUCKETS.len());
        inner.latency[bucket] += 1;
        inner.latency_sum += secs;
        *inner.ended.entry((r.tenant.clone(), state)).or_default() += 1;
        if let Some(n) = inner.running.get_mut(&r.tenant) {
            *n = n.saturating_sub(1);
        }
        inner
            .active
            .remove(&(r.tenant.clone(), canonical(&r.request)));
        let _ = self.persist(&r);
        inner
            .ended_order
            .entry(r.tenant.clone())
            .or_default()
            .push_back(r.id.clone());
        self.forget_old(&mut inner, &r.tenant);
        drop(inner);
        self.wake.notify_all();
    }

    /// Stop: refuse new runs and hand out no more; queued runs stay
    /// persisted as queued (a restart runs them).
    pub fn stop(&self) {
        self.lock().stopping = true;
        self.wake.notify_all();
    }

    /// Whether the queue stopped.
    pub fn stopping(&self) -> bool {
        self.lock().stopping
    }

    /// One run, if it is `tenant`'s.
    pub fn get(&self, tenant: &str, id: &str) -> Option<RunRecord> {
        self.lock()
            .runs
            .get(id)
            .filter(|r| r.tenant == tenant)
            .cloned()
    }

    /// The tenant's newest `limit` runs, newest first (only those are
    /// copied).
    pub fn list(&self, tenant: &str, limit: usize) -> Vec<RunRecord> {
        self.page(tenant, limit, None).runs
    }

    /// A page of the tenant's runs, newest first: at most `limit`, those
    /// after the cursor `after` (`(submitted_ms, id)` of the previous
    /// page's last run), and at most `MAX_PAGE_BYTES` of them.
    pub fn page(&self, tenant: &str, limit: usize, after: Option<&(u64, String)>) -> Page {
        let inner = self.lock();
        let mut v: Vec<&RunRecord> = inner
            .runs
            .values()
            .filter(|r| r.tenant == tenant)
            .filter(|r| after.is_none_or(|(ms, id)| (r.submitted_ms, &r.id) < (*ms, id)))
            .collect();
        v.sort_by(|a, b| (b.submitted_ms, &b.id).cmp(&(a.submitted_ms, &a.id)));
        let mut runs = Vec::new();
        let mut bytes = 0;
        for r in &v {
            bytes += serde_json::to_vec(r).map(|b| b.len()).unwrap_or(0);
            if runs.len() == limit || (bytes > MAX_PAGE_BYTES && !runs.is_empty()) {
                break;
            }
            runs.push((*r).clone());
        }
        let next = (runs.len() < v.len())
            .then(|| runs.last().map(cursor))
            .flatten();
        Page { runs, next }
    }

    /// Prometheus text: runs by tenant and state, queue depth per tenant,
    /// submit-to-done latency histogram.
    pub fn metrics(&self) -> String {
        let inner = self.lock();
        let mut out = String::new();
        out.push_str("# HELP idem_runs Runs by tenant and state (queued and running now; succeeded and failed since start).\n# TYPE idem_runs gauge\n");
        for (tenant, ..) in &self.order {
            let queued = inner.queued.get(tenant).map(VecDeque::len).unwrap_or(0) as u64;
            let running = inner.running.get(tenant).copied().unwrap_or(0) as u64;
            for (state, n) in [
                ("queued", queued),
                ("running", running),
                (
                    "succeeded",
                    inner
                        .ended
                        .get(&(tenant.clone(), State::Succeeded))
                        .copied()
                        .unwrap_or(0),
                ),
                (
                    "failed",
                    inner
                        .ended
                        .get(&(tenant.clone(), State::Failed))
                        .copied()
                        .unwrap_or(0),
                ),
            ] {
                out.push_str(&format!(
                    "idem_runs{{tenant=\"{tenant}\",state=\"{state}\"}} {n}\n"
                ));
            }
        }
        out.push_str("# HELP idem_queue_depth Runs waiting for a worker, per tenant.\n# TYPE idem_queue_depth gauge\n");
        for (tenant, ..) in &self.order {
            let q = inner.queued.get(tenant).map(VecDeque::len).unwrap_or(0);
            out.push_str(&format!("idem_queue_depth{{tenant=\"{tenant}\"}} {q}\n"));
        }
        out.push_str("# HELP idem_run_seconds Submit-to-done latency of ended runs.\n# TYPE idem_run_seconds histogram\n");
        let mut cumulative = 0;
        for (i, b) in BUCKETS.iter().enumerate() {
            cumulative += inner.latency[i];
            out.push_str(&format!(
                "idem_run_seconds_bucket{{le=\"{b}\"}} {cumulative}\n"
            ));
        }
        cumulative += inner.latency[BUCKETS.len()];
        out.push_str(&format!(
            "idem_run_seconds_bucket{{le=\"+Inf\"}} {cumulative}\n"
        ));
        out.push_str(&format!("idem_run_seconds_sum {}\n", inner.latency_sum));
        out.push_str(&format!("idem_run_seconds_count {cumulative}\n"));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(table: &str) -> RunRequest {
        serde_json::from_value(serde_json::json!({"module": "sha256:00", "table": table})).unwrap()
    }

    fn records(dir: &Path) -> usize {
        std::fs::read_dir(dir.join("runs"))
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .path()
                    .extension()
                    .is_some_and(|x| x == "json")
            })
            .count()
    }

    /// Ended runs beyond `keep-ended-runs` are forgotten, oldest first, in
    /// memory and on disk, per tenant; runs still queued never are; a
    /// restart with a smaller number forgets down to it.
    #[test]
    fn old_ended_runs_are_forgotten_per_tenant() {
        let dir = tempfile::tempdir().unwrap();
        let tenants = vec![("a".to_string(), 4, 10), ("b".to_string(), 2, 10)];
        let q = Queue::open(dir.path(), tenants.clone(), 2, &|_| None).unwrap();
        let (b_run, _) = q.submit("b", request("b0")).unwrap();
        let mut ids = Vec::new();
        for i in 0..4 {
            let (r, _) = q.submit("a", request(&format!("t{i}"))).unwrap();
            ids.push(r.id);
        }
        let (b_ended, _) = q.submit("b", request("b1")).unwrap();
        // a's four end in the order 3, 1, 0, 2 (not their submission
        // order), b's second run ends among them, b's first stays running.
        let mut taken = HashMap::new();
        for _ in 0..6 {
            let r = q.take().unwrap();
            taken.insert(r.id.clone(), r);
        }
        assert!(taken.contains_key(&b_run.id) && taken.contains_key(&b_ended.id));
        for id in [&ids[3], &ids[1], &b_ended.id, &ids[0], &ids[2]] {
            // Records order ended runs by their end, in ms.
            std::thread::sleep(std::time::Duration::from_millis(2));
            q.finish(id, Ok(serde_json::json!({})));
        }
        // a keeps its last two to end; b's ended run is b's own to keep.
        let kept: Vec<String> = q.list("a", 10).into_iter().map(|r| r.id).collect();
        assert_eq!(kept.len(), 2);
        assert!(kept.contains(&ids[0]) && kept.contains(&ids[2]), "{kept:?}");
        assert!(q.get("a", &ids[3]).is_none() && q.get("a", &ids[1]).is_none());
        assert_eq!(q.get("b", &b_ended.id).unwrap().state, State::Succeeded);
        assert_eq!(q.get("b", &b_run.id).unwrap().state, State::Running);
        assert_eq!(records(dir.path()), 4);
        drop(q);

        let q = Queue::open(dir.path(), tenants, 1, &|_| None).unwrap();
        let kept: Vec<String> = q.list("a", 10).into_iter().map(|r| r.id).collect();
        assert_eq!(kept, vec![ids[2].clone()]);
        assert!(q.get("b", &b_ended.id).is_some());
        // b's run, running when the service stopped, is queued again.
        assert_eq!(q.get("b", &b_run.id).unwrap().state, State::Queued);
        assert_eq!(records(dir.path()), 3);
    }

    /// A guest's huge message is cut when its run ends: the record, on
    /// disk and listed, stays a few KiB and says how much was cut.
    #[test]
    fn a_huge_message_is_cut_when_the_run_ends() {
        let dir = tempfile::tempdir().unwrap();
        let q = Queue::open(dir.path(), vec![("a".into(), 1, 10)], 10, &|_| None).unwrap();
        let (r, _) = q.submit("a", request("t")).unwrap();
        q.take().unwrap();
        let huge = "é".repeat(500_000);
        q.finish(
            &r.id,
            Err(serde_json::json!({"kind": "guest", "message": huge})),
        );
        let size = std::fs::metadata(dir.path().join(format!("runs/{}.json", r.id)))
            .unwrap()
            .len();
        assert!(size < 8192, "{size} bytes on disk");
        let got = q.get("a", &r.id).unwrap();
        let m = got.error.unwrap()["message"].as_str().unwrap().to_string();
        assert!(m.len() <= MAX_MESSAGE_BYTES + 40, "{}", m.len());
        assert!(m.ends_with("… [995904 more bytes cut]"), "{}", &m[4000..]);
    }

    /// Records on disk are read bounded: one over the size bound is not
    /// loaded (nor deleted), one with a long message is cut and written
    /// back cut.
    #[test]
    fn records_are_read_bounded() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("runs")).unwrap();
        let record = |id: &str, message: &str| {
            serde_json::json!({
                "id": id, "tenant": "a", "state": "failed", "request": request("t"),
                "submittedMs": 1, "finishedMs": 2, "attempts": 1,
                "error": {"kind": "guest", "message": message},
            })
            .to_string()
        };
        let big = dir.path().join("runs/run-big.json");
        std::fs::write(
            &big,
            record("run-big", &"x".repeat(MAX_RECORD_BYTES as usize)),
        )
        .unwrap();
        let long = dir.path().join("runs/run-long.json");
        std::fs::write(&long, record("run-long", &"x".repeat(100_000))).unwrap();
        let q = Queue::open(dir.path(), vec![("a".into(), 1, 10)], 10, &|_| None).unwrap();
        assert!(q.get("a", "run-big").is_none());
        assert!(big.exists());
        let m = q.get("a", "run-long").unwrap().error.unwrap()["message"].clone();
        assert!(
            m.as_str().unwrap().ends_with("… [95904 more bytes cut]"),
            "{m}"
        );
        assert!(std::fs::metadata(&long).unwrap().len() < 8192);
    }

    /// A run left running by [`MAX_ATTEMPTS`] stops is not queued again:
    /// succeeded with what `settle` found in its table, else failed.
    #[test]
    fn a_poisoned_run_ends_as_its_table_says() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("runs")).unwrap();
        for id in ["run-landed", "run-never"] {
            let rec = serde_json::json!({
                "id": id, "tenant": "a", "state": "running", "request": request(id),
                "submittedMs": 1, "attempts": MAX_ATTEMPTS,
            });
            std::fs::write(dir.path().join(format!("runs/{id}.json")), rec.to_string()).unwrap();
        }
        let settle = |r: &RunRecord| {
            (r.request.table == "run-landed")
                .then(|| serde_json::json!({"kind": "memo", "version": 0}))
        };
        let q = Queue::open(dir.path(), vec![("a".into(), 1, 10)], 10, &settle).unwrap();
        let landed = q.get("a", "run-landed").unwrap();
        assert_eq!(landed.state, State::Succeeded);
        assert_eq!(landed.result.unwrap()["kind"], "memo");
        let never = q.get("a", "run-never").unwrap();
        assert_eq!(never.state, State::Failed);
        assert_eq!(never.error.unwrap()["kind"], "bug");
        drop(q);
        // As persisted.
        let q = Queue::open(dir.path(), vec![("a".into(), 1, 10)], 10, &|_| None).unwrap();
        assert_eq!(q.get("a", "run-landed").unwrap().state, State::Succeeded);
    }

    /// Pages follow each other by cursor, each run once, newest first.
    #[test]
    fn runs_are_listed_in_pages() {
        let dir = tempfile::tempdir().unwrap();
        let q = Queue::open(dir.path(), vec![("a".into(), 1, 100)], 10, &|_| None).unwrap();
        for i in 0..7 {
            q.submit("a", request(&format!("t{i}"))).unwrap();
        }
        let mut seen = Vec::new();
        let mut after = None;
        loop {
            let page = q.page("a", 3, after.as_ref());
            assert!(page.runs.len() <= 3);
            seen.extend(page.runs.iter().map(|r| (r.submitted_ms, r.id.clone())));
            match page.next {
                Some(c) => after = Some(parse_cursor(&c).unwrap()),
                None => break,
            }
        }
        assert_eq!(seen.len(), 7);
        let mut sorted = seen.clone();
        sorted.sort_by(|a, b| b.cmp(a));
        sorted.dedup();
        assert_eq!(seen, sorted);
        assert!(q.page("b", 3, None).runs.is_empty());
        assert!(parse_cursor("nonsense").is_none());
    }
}
