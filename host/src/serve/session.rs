//! The web page's logins: server-side sessions, CSRF tokens and the
//! back-off on failed logins.
//!
//! A session is a random id (32 bytes from the OS) that names a tenant on
//! this server for 12 hours; the cookie never holds the tenant's token, so
//! a leaked cookie expires and never opens the API. The login form is
//! protected by a double-submitted CSRF token (a cookie another site
//! cannot read or set, repeated in the form); a session's forms by the
//! session's own token. Failed logins are counted per peer address and
//! in all: past their limits within a minute a login is answered 429.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use subtle::ConstantTimeEq as _;

/// How long a session lasts from its login.
pub const SESSION_TTL: Duration = Duration::from_secs(12 * 3600);

/// Sessions kept at once; past it the oldest is forgotten (a session
/// needs a valid token, so only a tenant can fill this).
const MAX_SESSIONS: usize = 10_000;

/// The window failed logins are counted over.
pub const FAILURE_WINDOW: Duration = Duration::from_secs(60);

/// Failed logins from one peer address within the window; the next is
/// answered 429.
pub const PEER_FAILURES: usize = 5;

/// Failed logins from all peers within the window; the next is answered
/// 429 (many addresses guessing together).
pub const ALL_FAILURES: usize = 60;

/// Peer addresses whose failures are remembered at once; past it every
/// login counts as the global limit's.
const MAX_PEERS: usize = 10_000;

/// The address a request came from (a request extension).
#[derive(Debug, Clone, Copy)]
pub struct Peer(pub IpAddr);

/// The address failures are counted under: an IPv6 address's /64 (one
/// host holds a whole /64, so counting single addresses would give it
/// 2^64 tries), an IPv4 address itself.
fn bucket(peer: IpAddr) -> IpAddr {
    match peer {
        IpAddr::V4(_) => peer,
        IpAddr::V6(v6) => {
            let mut seg = v6.segments();
            seg[4..].fill(0);
            IpAddr::V6(std::net::Ipv6Addr::from(seg))
        }
    }
}

/// 32 random bytes from the OS, hex; `None` when the OS has none to give
/// (no session is then better than a guessable one).
pub fn random_token() -> Option<String> {
    let mut b = [0u8; 32];
    getrandom::fill(&mut b).ok()?;
    Some(hex::encode(b))
}

/// Whether two tokens are equal, in time independent of where they differ.
pub fn same_token(a: &str, b: &str) -> bool {
    !a.is_empty() && bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

/// The value of cookie `name` in a `Cookie` header.
pub fn cookie<'h>(header: &'h str, name: &str) -> Option<&'h str> {
    header
        .split(';')
        .filter_map(|c| c.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

/// A logged-in session.
#[derive(Debug, Clone)]
pub struct Session {
    /// The tenant's name.
    pub tenant: String,
    /// The token its forms carry.
    pub csrf: String,
    expires: Instant,
}

/// The live sessions, by the sha256 of their id (so a lookup's timing
/// says nothing about stored ids).
#[derive(Default)]
pub struct Sessions {
    by_id: Mutex<HashMap<[u8; 32], Session>>,
}

fn key(id: &str) -> [u8; 32] {
    use sha2::Digest as _;
    sha2::Sha256::digest(id.as_bytes()).into()
}

impl Sessions {
    /// A new session of `tenant` from `now`: `(id, session)`, or `None`
    /// when no random id could be made.
    pub fn open(&self, tenant: &str, now: Instant) -> Option<(String, Session)> {
        let id = random_token()?;
        let session = Session {
            tenant: tenant.to_string(),
            csrf: random_token()?,
            expires: now + SESSION_TTL,
        };
        let mut by_id = self.by_id.lock().ok()?;
        by_id.retain(|_, s| s.expires > now);
        if by_id.len() >= MAX_SESSIONS
            && let Some(oldest) = by_id.iter().min_by_key(|(_, s)| s.expires).map(|(k, _)| *k)
        {
            by_id.remove(&oldest);
        }
        by_id.insert(key(&id), session.clone());
        Some((id, session))
    }

    /// The session `id` names, while it lasts.
    pub fn get(&self, id: &str, now: Instant) -> Option<Session> {
        let mut by_id = self.by_id.lock().ok()?;
        let k = key(id);
        match by_id.get(&k) {
            Some(s) if s.expires > now => Some(s.clone()),
            Some(_) => {
                by_id.remove(&k);
                None
            }
            None => None,
        }
    }

    /// End session `id`.
    pub fn close(&self, id: &str) {
        if let Ok(mut by_id) = self.by_id.lock() {
            by_id.remove(&key(id));
        }
    }
}

/// Failed logins, per peer address and in all, within the last minute.
#[derive(Default)]
pub struct Throttle {
    failures: Mutex<Failures>,
}

#[derive(Default)]
struct Failures {
    by_peer: HashMap<IpAddr, VecDeque<Instant>>,
    all: VecDeque<Instant>,
}

/// Drop the times of `q` older than the window.
fn expire(q: &mut VecDeque<Instant>, now: Instant) {
    while q
        .front()
        .is_some_and(|t| now.saturating_duration_since(*t) >= FAILURE_WINDOW)
    {
        q.pop_front();
    }
}

/// When the oldest of `q`'s failures leaves the window, if `q` is at
/// `limit`.
fn blocked(q: &VecDeque<Instant>, limit: usize, now: Instant) -> Option<Duration> {
    (q.len() >= limit).then(|| {
        let oldest = q.front().copied().unwrap_or(now);
        FAILURE_WINDOW.saturating_sub(now.saturating_duration_since(oldest))
    })
}

impl Throttle {
    /// May `peer` try a login at `now`? `Err(retry_after)` when it, or
    /// everyone, failed too often within the window.
    pub fn check(&self, peer: Option<IpAddr>, now: Instant) -> Result<(), Duration> {
        let peer = peer.map(bucket);
        let Ok(mut f) = self.failures.lock() else {
            return Err(FAILURE_WINDOW);
        };
        let f = &mut *f;
        expire(&mut f.all, now);
        f.by_peer.retain(|_, q| {
            expire(q, now);
            !q.is_empty()
        });
        let failing = peer.and_then(|p| f.by_peer.get(&p));
        let peer_wait = failing.and_then(|q| blocked(q, PEER_FAILURES, now));
        // The global limit holds back only peers that have failed too (or
        // that cannot be told apart): many addresses guessing together must
        // not lock out everyone who has not guessed.
        let suspect = peer.is_none() || failing.is_some() || f.by_peer.len() >= MAX_PEERS;
        let all_wait = suspect
            .then(|| blocked(&f.all, ALL_FAILURES, now))
            .flatten();
        match peer_wait.or(all_wait) {
            // At least a second: `Retry-After` counts whole seconds.
            Some(wait) => Err(wait.max(Duration::from_secs(1))),
            None => Ok(()),
        }
    }

    /// Count a failed login of `peer` at `now`.
    pub fn failed(&self, peer: Option<IpAddr>, now: Instant) {
        let peer = peer.map(bucket);
        let Ok(mut f) = self.failures.lock() else {
            return;
        };
        f.all.push_back(now);
        if f.all.len() > ALL_FAILURES {
            f.all.pop_front();
        }
        if let Some(p) = peer
            && (f.by_peer.len() < MAX_PEERS || f.by_peer.contains_key(&p))
        {
            let q = f.by_peer.entry(p).or_default();
            q.push_back(now);
            if q.len() > PEER_FAILURES {
                q.pop_front();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_are_random_expire_and_close() {
        let s = Sessions::default();
        let t0 = Instant::now();
        let (id, a) = s.open("a", t0).unwrap();
        let (id2, _) = s.open("a", t0).unwrap();
        assert_ne!(id, id2);
        assert_eq!(id.len(), 64);
        assert_ne!(a.csrf, id);
        assert_eq!(
            s.get(&id, t0 + Duration::from_secs(3600)).unwrap().tenant,
            "a"
        );
        assert!(s.get(&id, t0 + SESSION_TTL).is_none(), "expired");
        assert!(s.get(&id, t0).is_none(), "an expired session is forgotten");
        assert!(s.get("not-an-id", t0).is_none());
        s.close(&id2);
        assert!(s.get(&id2, t0).is_none());
    }

    #[test]
    fn failed_logins_back_off_per_peer_and_in_all() {
        let th = Throttle::default();
        let t0 = Instant::now();
        let p1: IpAddr = "10.0.0.1".parse().unwrap();
        let p2: IpAddr = "10.0.0.2".parse().unwrap();
        for i in 0..PEER_FAILURES {
            assert!(th.check(Some(p1), t0).is_ok(), "failure {i}");
            th.failed(Some(p1), t0 + Duration::from_secs(i as u64));
        }
        let now = t0 + Duration::from_secs(10);
        // Until the first failure leaves the minute: 50 s more.
        assert_eq!(th.check(Some(p1), now), Err(Duration::from_secs(50)));
        assert!(th.check(Some(p2), now).is_ok(), "another peer");
        assert!(
            th.check(Some(p1), t0 + FAILURE_WINDOW).is_ok(),
            "a minute on"
        );

        // Many peers, a few failures each: the global limit.
        let th = Throttle::default();
        for i in 0..ALL_FAILURES {
            let p = IpAddr::from([10, 1, (i / 256) as u8, (i % 256) as u8]);
            assert!(th.check(Some(p), t0).is_ok());
            th.failed(Some(p), t0);
        }
        // A guessing peer is held back by the global limit...
        let p0 = IpAddr::from([10, 1, 0, 0]);
        let wait = th.check(Some(p0), t0 + Duration::from_secs(1)).unwrap_err();
        assert_eq!(wait, Duration::from_secs(59));
        // ...but a peer that has not failed is not locked out by others
        // (one that cannot be told apart is).
        assert!(th.check(Some(p2), t0 + Duration::from_secs(1)).is_ok());
        assert!(th.check(None, t0 + Duration::from_secs(1)).is_err());
        assert!(th.check(Some(p0), t0 + FAILURE_WINDOW).is_ok());

        // An IPv6 host's /64 is one peer: other addresses of it share its
        // failures.
        let th = Throttle::default();
        for i in 0..PEER_FAILURES {
            let p: IpAddr = format!("2001:db8:1:2::{i}").parse().unwrap();
            th.failed(Some(p), t0);
        }
        let same: IpAddr = "2001:db8:1:2:ffff::1".parse().unwrap();
        let other: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert!(th.check(Some(same), t0).is_err());
        assert!(th.check(Some(other), t0).is_ok());
    }

    #[test]
    fn tokens_and_cookies() {
        assert!(same_token("abc", "abc") && !same_token("abc", "abd") && !same_token("", ""));
        assert_eq!(
            cookie("a=1; idem_session=xyz; b=2", "idem_session"),
            Some("xyz")
        );
        assert_eq!(cookie("idem_sessionx=1", "idem_session"), None);
    }
}
