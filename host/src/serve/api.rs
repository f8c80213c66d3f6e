//! The HTTP API (axum): every route but `/health` and `/metrics` needs
//! `Authorization: Bearer <token>`, which names the tenant (the
//! [`Caller`] extractor); a tenant only ever sees its own runs, modules
//! and tables. Blocking work (storage, compiling, Delta logs) runs on
//! blocking threads, runs on the workers. A handler answers its work's
//! result or a [`Refusal`].

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

use super::Service;
use super::caller::{Caller, bearer, blocking};
use super::manifest::{envelope_hex, manifest_hex, read_manifest, read_manifest_file};
use super::paths::{module_at, under};
use super::queue::{Refused, RunRequest};
use super::reply::{Refusal, reply};
use super::request::check;
use super::tenant::scrub;

type Svc = State<Arc<Service>>;

/// What a handler answers: its response, or a refusal.
type Answer = Result<Response, Refusal>;

/// Largest run request body (kept with the run's record, so bounded
/// tighter than a module: `keep-ended-runs` of them per tenant).
const MAX_REQUEST_BYTES: usize = 256 << 10;

/// The router of the service. The token is checked before any body is
/// read; bodies are capped per route (a run request at 1 MiB, a module at
/// the largest tenant module limit).
pub fn router(svc: Arc<Service>) -> Router {
    let max_module = svc
        .tenants
        .iter()
        .map(|t| t.cfg.max_module_mb << 20)
        .max()
        .unwrap_or(0)
        // A core module grows a little when encoded as a component; the
        // tenant's own limit is checked on the bytes.
        + (1 << 20);
    let v1 = Router::new()
        .route(
            "/v1/modules",
            post(upload).layer(DefaultBodyLimit::max(max_module)),
        )
        .route(
            "/v1/runs",
            post(submit)
                .get(list)
                .layer(DefaultBodyLimit::max(MAX_REQUEST_BYTES)),
        )
        .route("/v1/runs/{id}", get(status))
        .route("/v1/runs/{id}/manifest", get(manifest))
        .route("/v1/runs/{id}/attestation", get(attestation))
        .route("/v1/attestation-key", get(attestation_key))
        .route("/v1/log/{*table}", get(log))
        .route("/v1/audit/{*table}", get(audit))
        .route_layer(axum::middleware::from_fn_with_state(svc.clone(), authorize));
    Router::new()
        .route("/", get(super::page::index))
        .route(
            "/login",
            post(super::page::login).layer(DefaultBodyLimit::max(16 << 10)),
        )
        .route(
            "/logout",
            post(super::page::logout).layer(DefaultBodyLimit::max(16 << 10)),
        )
        .route("/runs/{id}", get(super::page::run))
        .route("/style.css", get(super::page::style))
        .route("/health", get(|| async { "ok\n" }))
        .route("/metrics", get(metrics))
        .merge(v1)
        .layer(axum::middleware::map_response(guarded))
        .with_state(svc)
}

/// What every response says to a browser: never frame it (clickjacking),
/// never guess its type, load nothing but this service's own style sheet,
/// post forms only here, send no referrer.
async fn guarded(mut r: Response) -> Response {
    let h = r.headers_mut();
    for (name, value) in [
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (
            header::CONTENT_SECURITY_POLICY,
            "default-src 'none'; style-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        ),
        (header::REFERRER_POLICY, "no-referrer"),
    ] {
        h.insert(name, header::HeaderValue::from_static(value));
    }
    r
}

/// Refuse a request without a valid token before its body is read (the
/// [`Caller`] extractor refuses it).
async fn authorize(
    _: Caller,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    next.run(req).await
}

/// GET /metrics: Prometheus text, to anyone or to the metrics token.
async fn metrics(State(svc): Svc, headers: HeaderMap) -> Response {
    if !svc.metrics_allowed(bearer(&headers)) {
        return reply(401, json!({"error": "/metrics needs the metrics token"}));
    }
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        svc.queue.metrics(),
    )
        .into_response()
}

/// POST /v1/modules (the .wasm as the body): admission-checked (size,
/// imports), compiled into the shared cache, stored under the tenant as
/// `_modules/<sha256>.wasm`. 201 `{module, size}`; 422 names the reason.
async fn upload(t: Caller, body: Bytes) -> Answer {
    let stored = t.heavy(move |t| -> Result<Value, Refusal> {
        let refused = |e| Refusal(422, format!("module refused: {e}"));
        let id = t.sandbox.identify(&body).map_err(refused)?;
        t.sandbox.load_identified(&id).map_err(refused)?;
        let store = crate::storage::Store::at(&t.cfg.root)
            .map_err(|_| Refusal(503, "the tenant's storage is not reachable".into()))?;
        store
            .put(
                &module_at(id.digest.hex()),
                Bytes::from(id.bytes.as_ref().clone()),
            )
            .map_err(|_| Refusal(503, "the tenant's storage refused the module".into()))?;
        Ok(json!({"module": id.digest.to_string(), "size": id.bytes.len()}))
    });
    Ok(reply(201, stored.await??))
}

/// POST /v1/runs (a JSON run request): checked, then queued, or joined
/// to the identical run already queued or running. 202 `{id, state,
/// joined}`.
async fn submit(State(svc): Svc, t: Caller, body: Bytes) -> Answer {
    let queued = blocking(move || -> Result<Value, Refusal> {
        let request = run_request(&body)?;
        check(&t, &request)?;
        let (r, joined) = svc.queue.submit(&t.cfg.name, request).map_err(refused)?;
        Ok(json!({"id": r.id, "state": r.state.name(), "joined": joined}))
    });
    Ok(reply(202, queued.await??))
}

/// The run request of a body. An integer too long for the JSON numbers
/// the run key hashes is refused, as by the CLI (only the text shows it).
fn run_request(body: &[u8]) -> Result<RunRequest, Refusal> {
    let request: RunRequest = serde_json::from_slice(body)
        .map_err(|e| Refusal(400, format!("not a run request: {e}")))?;
    let text = String::from_utf8_lossy(body);
    crate::manifest::check_params_text(&text, &request.params)
        .map_err(|e| Refusal(400, e.to_string()))?;
    Ok(request)
}

/// Why the queue refused a run, as the tenant is told.
fn refused(why: Refused) -> Refusal {
    match why {
        Refused::Full(n) => Refusal(
            429,
            format!("your queue is full ({n} runs waiting): retry later"),
        ),
        Refused::Stopping => Refusal(503, "the service is shutting down".into()),
        Refused::Persist => Refusal(
            503,
            "the service cannot record the run (its state dir refused the write): nothing was queued; retry later".into(),
        ),
    }
}

/// GET /v1/runs[?limit=N][&after=CURSOR]: a page of the tenant's runs,
/// newest first (100 unless asked, at most 1000), and `next`, the cursor
/// of the next page, when there are more.
async fn list(State(svc): Svc, t: Caller, uri: axum::http::Uri) -> Answer {
    let query: Vec<(String, String)> =
        url::form_urlencoded::parse(uri.query().unwrap_or("").as_bytes())
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
    let asked = |key: &str| {
        query
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    };
    let limit = match asked("limit").map(str::parse::<usize>) {
        None => 100,
        Some(Ok(n)) if (1..=1000).contains(&n) => n,
        Some(_) => {
            return Err(Refusal(400, "limit must be a number from 1 to 1000".into()));
        }
    };
    let after = match asked("after").map(super::queue::parse_cursor) {
        None => None,
        Some(Some(c)) => Some(c),
        Some(None) => {
            return Err(Refusal(
                400,
                "after must be the `next` of the page before, as given".into(),
            ));
        }
    };
    let page = svc.queue.page(&t.cfg.name, limit, after.as_ref());
    Ok(reply(200, serde_json::to_value(page).unwrap_or_default()))
}

fn not_found(id: &str) -> Refusal {
    Refusal(404, format!("no run `{id}` for this tenant"))
}

/// GET /v1/runs/{id}: the run's record.
async fn status(State(svc): Svc, t: Caller, Path(id): Path<String>) -> Answer {
    let r = svc
        .queue
        .get(&t.cfg.name, &id)
        .ok_or_else(|| not_found(&id))?;
    Ok(reply(200, serde_json::to_value(r).unwrap_or_default()))
}

/// GET /v1/runs/{id}/manifest: the stored manifest, byte for byte.
async fn manifest(State(svc): Svc, t: Caller, Path(id): Path<String>) -> Answer {
    let r = svc
        .queue
        .get(&t.cfg.name, &id)
        .ok_or_else(|| not_found(&id))?;
    let hex = manifest_hex(&r).ok_or_else(|| {
        Refusal(
            409,
            format!("run `{id}` is {} and has no manifest", r.state.name()),
        )
    })?;
    let table = under(&t, &r.request.table, "table").map_err(|_| not_found(&id))?;
    let bytes = blocking(move || read_manifest(&table, &hex))
        .await?
        .ok_or_else(|| Refusal(404, "the manifest is gone from the table".into()))?;
    Ok(([(header::CONTENT_TYPE, "application/json")], bytes).into_response())
}

/// GET /v1/runs/{id}/attestation: the DSSE envelope the run's manifest
/// was signed into (the tenant's key, else the service's), byte for byte.
async fn attestation(State(svc): Svc, t: Caller, Path(id): Path<String>) -> Answer {
    let r = svc
        .queue
        .get(&t.cfg.name, &id)
        .ok_or_else(|| not_found(&id))?;
    let (Some(manifest), Some(envelope)) = (manifest_hex(&r), envelope_hex(&r)) else {
        return Err(Refusal(
            404,
            format!(
                "run `{id}` has no attestation: it is {}, or was not signed (the service signs only with a sign-key in its config, and not a run it settled from the table after a restart: resubmitting it signs it)",
                r.state.name()
            ),
        ));
    };
    let table = under(&t, &r.request.table, "table").map_err(|_| not_found(&id))?;
    let path = format!("attestations/{manifest}/{envelope}.json");
    let bytes = blocking(move || read_manifest_file(&table, &path))
        .await?
        .ok_or_else(|| Refusal(404, "the attestation is gone from the table".into()))?;
    // The table is the tenant's to write: serve the bytes the run signed.
    if crate::digest::Digest::of_bytes(&bytes).hex() != envelope {
        return Err(Refusal(
            409,
            "the attestation stored in the table is not the one the run made (it was replaced)"
                .into(),
        ));
    }
    let dsse = "application/vnd.dsse.envelope.v1+json";
    Ok(([(header::CONTENT_TYPE, dsse)], bytes).into_response())
}

/// GET /v1/attestation-key: the public key (SPKI PEM) the tenant's runs
/// are signed with, to give to whoever checks them.
async fn attestation_key(t: Caller) -> Answer {
    let key = t.signer.as_ref().ok_or_else(|| {
        Refusal(
            404,
            "this service signs no runs (no sign-key in its config)".into(),
        )
    })?;
    Ok((
        [(header::CONTENT_TYPE, "application/x-pem-file")],
        key.public_pem(),
    )
        .into_response())
}

/// A table that has no idem runs (or cannot be read).
fn no_runs(table: &str) -> Refusal {
    Refusal(404, format!("no table `{table}` with idem runs"))
}

/// GET /v1/log/{table}: the table's runs, as `idem log --json`.
async fn log(t: Caller, Path(table): Path<String>) -> Answer {
    let full = under(&t, &table, "table")?;
    let runs = t
        .heavy(move |_| crate::run::run_log(&full))
        .await?
        .map_err(|_| no_runs(&table))?;
    Ok(reply(200, json!({"table": table, "runs": runs})))
}

/// GET /v1/audit/{table}: every slice proven, as `idem audit --json`.
async fn audit(t: Caller, Path(table): Path<String>) -> Answer {
    let full = under(&t, &table, "table")?;
    let opts = crate::audit::AuditOptions {
        slice: None,
        replay: None,
        keys: &[],
    };
    let report = t
        .heavy(move |_| crate::audit::audit(&full, &opts))
        .await?
        .map_err(|_| no_runs(&table))?;
    let state = |p: &crate::audit::Proof| match p {
        crate::audit::Proof::Proven => "proven",
        crate::audit::Proof::ChainOnly => "chain-proven",
        crate::audit::Proof::Failed => "failed",
    };
    let slices: Vec<Value> = report
        .iter()
        .map(|s| json!({"slice": s.slice, "version": s.version, "proof": state(&s.proof), "detail": scrub(&t, &s.detail)}))
        .collect();
    let proven = report
        .iter()
        .all(|s| s.proof != crate::audit::Proof::Failed);
    Ok(reply(
        200,
        json!({"table": table, "slices": slices, "proven": proven}),
    ))
}
