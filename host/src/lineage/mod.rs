//! OpenLineage events of runs (spec 2-0-2): START when a run is planned,
//! COMPLETE (committed, unchanged or memo: the `idem_manifest` facet says
//! which) or FAIL when it ends, delivered to a folder or an HTTP receiver
//! ([`transport`]). The run id is derived from the run key, so the
//! retries and twins of a run are one run to a lineage store. Emitting is
//! a step of the run (`run/emit.rs`, [`crate::run::Run::lineage`]) and
//! never fails it:
//! an event not delivered is reported on stderr.

pub(crate) mod event;
mod transport;

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

pub use event::{JobName, Parent, dataset, run_id};
pub use transport::{TOKEN_ENV, Transport};

use crate::digest::Digest;
use crate::manifest::RunSpec;

/// Where a process's runs send their events, and their job namespace.
#[derive(Debug)]
pub struct Lineage {
    transport: Transport,
    namespace: String,
    /// The runs started and not ended yet: what an interrupt aborts.
    open: Mutex<Vec<Open>>,
    /// Set once an interrupt told the open runs' ends: nothing more is
    /// sent (a run ending meanwhile would tell a second end).
    aborting: std::sync::atomic::AtomicBool,
}

/// A run told START and not yet its end.
#[derive(Debug)]
struct Open {
    token: u64,
    run_id: String,
    parent: Option<Parent>,
    spec: RunSpec,
    /// The run committed: its COMPLETE, told if the process is
    /// interrupted before the run ends.
    complete: Option<serde_json::Value>,
}

impl Lineage {
    /// Events to `target` (`file:///DIR` or `http(s)://HOST/PATH`), jobs
    /// in `namespace` (default `idem`).
    pub fn new(target: &str, namespace: Option<String>) -> Result<Self, String> {
        if namespace.as_deref().is_some_and(|n| n.trim().is_empty()) {
            return Err(
                "the lineage namespace is empty: name one (e.g. the team or environment), or leave it out for `idem`".into(),
            );
        }
        Ok(Lineage {
            transport: Transport::parse(target)?,
            namespace: namespace.unwrap_or_else(|| "idem".into()),
            open: Mutex::new(Vec::new()),
            aborting: Default::default(),
        })
    }

    /// The job that writes `table`.
    pub fn job(&self, table: &str) -> JobName {
        JobName {
            namespace: self.namespace.clone(),
            name: table.to_string(),
        }
    }

    /// A parent run (a backfill's, a pipeline's) named `name`, with a
    /// fresh id.
    pub fn parent(&self, name: &str) -> Parent {
        let mut seed = [0u8; 32];
        let _ = getrandom::fill(&mut seed);
        Parent {
            run_id: run_id(&Digest::of_bytes(&seed)),
            job: self.job(name),
        }
    }

    /// The parent run `run_id` (a UUID its caller made: a Spark job's
    /// driver, say, whose tasks run elsewhere) named `name`.
    pub fn parent_with_id(&self, name: &str, run_id: &str) -> Result<Parent, String> {
        let b = run_id.as_bytes();
        let uuid = b.len() == 36
            && b.iter().enumerate().all(|(i, c)| match i {
                8 | 13 | 18 | 23 => *c == b'-',
                _ => c.is_ascii_hexdigit(),
            });
        if !uuid {
            return Err(format!(
                "the parent run id `{}` is not a UUID (OpenLineage run ids are): pass str(uuid.uuid4())",
                crate::text::clip_str(run_id, 64).escape_debug()
            ));
        }
        Ok(Parent {
            run_id: run_id.to_ascii_lowercase(),
            job: self.job(name),
        })
    }

    /// A run about to be told START: open until [`Lineage::closed`] with
    /// the token.
    pub(crate) fn opened(&self, run_id: &str, parent: Option<&Parent>, spec: &RunSpec) -> u64 {
        static TOKENS: AtomicU64 = AtomicU64::new(0);
        let token = TOKENS.fetch_add(1, Ordering::Relaxed);
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        open.push(Open {
            token,
            run_id: run_id.to_string(),
            parent: parent.cloned(),
            spec: spec.clone(),
            complete: None,
        });
        token
    }

    /// The run `token` committed: an interrupt before its end tells
    /// `complete` rather than ABORT.
    pub(crate) fn committed(&self, token: u64, complete: serde_json::Value) {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(o) = open.iter_mut().find(|o| o.token == token) {
            o.complete = Some(complete);
        }
    }

    /// The run `token` ended.
    pub(crate) fn closed(&self, token: u64) {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        open.retain(|o| o.token != token);
    }

    /// ABORT every run started and not ended (COMPLETE for one that
    /// committed already): the process is being interrupted (a signal),
    /// so their ends would never be told. Nothing is sent after. Returns
    /// how many were aborted.
    pub fn abort_open(&self) -> usize {
        let open = {
            let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
            self.aborting.store(true, Ordering::SeqCst);
            std::mem::take(&mut *open)
        };
        let at = now();
        let mut aborted = 0;
        for o in &open {
            let event = match &o.complete {
                Some(complete) => complete.clone(),
                None => {
                    aborted += 1;
                    let job = self.job(&o.spec.target.table);
                    event::abort(&at, &job, o.parent.as_ref(), &o.run_id, Some(&o.spec))
                }
            };
            self.deliver(&event);
        }
        aborted
    }

    pub(crate) fn send(&self, event: &serde_json::Value) {
        if !self.aborting.load(Ordering::SeqCst) {
            self.deliver(event);
        }
    }

    fn deliver(&self, event: &serde_json::Value) {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let kind = event["eventType"].as_str().unwrap_or("OTHER");
        let id = event["run"]["runId"].as_str().unwrap_or("run");
        // Twins of a run share its id (and may share a pid, in
        // containers): the process's random tag keeps their files apart.
        let name = format!(
            "{:015}-{}-{:06}-{id}-{kind}.json",
            now_ms(),
            process_tag(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        let bytes = serde_json::to_vec(event).unwrap_or_default();
        if let Err(why) = self.transport.send(&name, bytes) {
            tracing::warn!(
                "OpenLineage {kind} event of run {id} not delivered to {}: {why}; the run goes on",
                self.transport.target()
            );
        }
    }
}

pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// 8 hex digits drawn once per process.
fn process_tag() -> &'static str {
    static TAG: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TAG.get_or_init(|| {
        let mut b = [0u8; 4];
        let _ = getrandom::fill(&mut b);
        hex::encode(b)
    })
}

/// Now, as RFC 3339 UTC with milliseconds.
pub(crate) fn now() -> String {
    rfc3339(now_ms() as i64)
}

/// Milliseconds since the epoch as RFC 3339 UTC with milliseconds.
pub(crate) fn rfc3339(ms: i64) -> String {
    let (days, rest) = (ms.div_euclid(86_400_000), ms.rem_euclid(86_400_000));
    format!(
        "{}T{:02}:{:02}:{:02}.{:03}Z",
        crate::schedule::date_of(days),
        rest / 3_600_000,
        rest / 60_000 % 60,
        rest / 1000 % 60,
        rest % 1000
    )
}
