//! Heavy requests outside the run queue (module uploads, which compile;
//! logs; audits; the page's tables): at most `workers` at once over all
//! tenants, and one at a time per tenant (a second is refused, 429).
//!
//! A request's work runs on a blocking thread, which goes on when the
//! client hangs up and its request is dropped: so the slot is an owned
//! guard that moves into that work and is given back when the work ends,
//! not when the request does. Otherwise a tenant could start any number
//! of compiles by disconnecting from each.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The slots of heavy requests: `workers` in all, one per tenant.
pub struct HeavySlots {
    all: Arc<Semaphore>,
    busy: Arc<Mutex<HashSet<String>>>,
}

/// One tenant's heavy request in progress: its tenant's one slot and one
/// of the `workers`, until dropped.
pub struct Heavy {
    tenant: String,
    busy: Arc<Mutex<HashSet<String>>>,
    permit: Option<OwnedSemaphorePermit>,
}

impl Drop for Heavy {
    fn drop(&mut self) {
        if let Ok(mut b) = self.busy.lock() {
            b.remove(&self.tenant);
        }
    }
}

impl HeavySlots {
    /// Slots for `workers` heavy requests at once.
    pub fn new(workers: usize) -> HeavySlots {
        HeavySlots {
            all: Arc::new(Semaphore::new(workers)),
            busy: Default::default(),
        }
    }

    /// Start a heavy request of `tenant`: `None` at once when it has one
    /// in progress; else it waits for one of the `workers`.
    pub async fn start(&self, tenant: &str) -> Option<Heavy> {
        let mut heavy = {
            let mut b = self.busy.lock().ok()?;
            if !b.insert(tenant.to_string()) {
                return None;
            }
            Heavy {
                tenant: tenant.to_string(),
                busy: self.busy.clone(),
                permit: None,
            }
        };
        // Dropped while waiting (the client went away): the tenant's slot
        // is given back with it.
        heavy.permit = Some(self.all.clone().acquire_owned().await.ok()?);
        Some(heavy)
    }
}

impl Heavy {
    /// Run `f` on a blocking thread holding this slot until `f` returns,
    /// whether or not anyone still waits for its answer.
    pub async fn run<T: Send + 'static>(
        self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, tokio::task::JoinError> {
        tokio::task::spawn_blocking(move || {
            let held = self;
            // Test hook: holds the work here (a slow compile, say).
            crate::fault::point(&format!("heavy-{}", held.tenant));
            f()
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The slot stays taken while the work runs, though its request (the
    /// future awaiting it) was dropped; it comes back when the work ends.
    #[test]
    fn a_dropped_request_keeps_its_slot_until_its_work_ends() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let slots = HeavySlots::new(1);
            let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
            let (started_tx, started_rx) = tokio::sync::oneshot::channel();
            let (done_tx, done_rx) = std::sync::mpsc::channel();
            let heavy = slots.start("a").await.unwrap();
            let request = tokio::spawn(heavy.run(move || {
                let _ = started_tx.send(());
                let _ = go_rx.recv();
                let _ = done_tx.send(());
            }));
            started_rx.await.unwrap();
            // The client hangs up: its request is dropped.
            request.abort();
            let _ = request.await;
            assert!(slots.start("a").await.is_none(), "a second request of a");
            // b waits for the one worker.
            let b = tokio::time::timeout(std::time::Duration::from_millis(200), slots.start("b"));
            assert!(b.await.is_err(), "b was given the one worker");
            go_tx.send(()).unwrap();
            tokio::task::spawn_blocking(move || done_rx.recv().unwrap())
                .await
                .unwrap();
            // The work ended: both slots come back.
            // (Given back just after the work's last line: wait for it.)
            let mut again = None;
            for _ in 0..500 {
                again = slots.start("a").await;
                if again.is_some() {
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
            assert!(again.is_some(), "a's slot never came back");
        });
    }
}
