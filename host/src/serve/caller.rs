//! The caller of an API request: the tenant its `Authorization: Bearer
//! <token>` names, as an axum extractor. A handler that takes a
//! [`Caller`] runs only for a valid token; any other request is refused
//! 401 (with `WWW-Authenticate: Bearer`) before its body is read. A
//! caller also runs its tenant's blocking and heavy work.

use std::ops::Deref;
use std::sync::Arc;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, header};

use super::Service;
use super::reply::Refusal;
use super::tenant::Tenant;

/// The tenant a request's token names (a [`Tenant`] by deref), with the
/// service it belongs to: owned, so it moves into blocking work.
#[derive(Clone)]
pub struct Caller {
    svc: Arc<Service>,
    index: usize,
}

impl Deref for Caller {
    type Target = Tenant;

    fn deref(&self) -> &Tenant {
        &self.svc.tenants[self.index]
    }
}

/// The token of `Authorization: Bearer <token>`, as sent.
pub fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
}

impl FromRequestParts<Arc<Service>> for Caller {
    type Rejection = Refusal;

    async fn from_request_parts(parts: &mut Parts, svc: &Arc<Service>) -> Result<Caller, Refusal> {
        let unauthorized = |m: &str| Refusal(401, m.to_string());
        match bearer(&parts.headers).map(str::trim) {
            None | Some("") => Err(unauthorized(
                "missing token: send Authorization: Bearer <your tenant token>",
            )),
            Some(token) => match svc.tenant_index(token) {
                Some(index) => Ok(Caller {
                    svc: svc.clone(),
                    index,
                }),
                None => Err(unauthorized("the token is not valid")),
            },
        }
    }
}

impl Caller {
    /// Run `f`, a heavy request of this tenant (an upload, a log, an
    /// audit), on a blocking thread: one per tenant (else 429), `workers`
    /// in all. Its slot is held until `f` ends, even when the client hangs
    /// up first.
    pub async fn heavy<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Tenant) -> T + Send + 'static,
    ) -> Result<T, Refusal> {
        let held = self
            .svc
            .heavy
            .start(&self.cfg.name)
            .await
            .ok_or_else(too_busy)?;
        let me = self.clone();
        held.run(move || f(&me)).await.map_err(|_| failed_inside())
    }
}

/// Run `f`, a request's blocking work (storage, parsing), on a blocking
/// thread.
pub async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, Refusal> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|_| failed_inside())
}

/// A tenant's second heavy request (upload, log, audit) while its first
/// runs.
fn too_busy() -> Refusal {
    Refusal(
        429,
        "one upload, log or audit at a time per tenant: retry when the last one has answered"
            .into(),
    )
}

/// A request's blocking work that panicked.
fn failed_inside() -> Refusal {
    Refusal(500, "the request's work failed inside idem (a bug)".into())
}
