//! The HTTP API (axum): every route but `/health` and `/metrics` needs
//! `Authorization: Bearer <token>`, which names the tenant; a tenant only
//! ever sees its own runs, modules and tables. Blocking work (storage,
//! compiling, Delta logs) runs on blocking threads, runs on the workers.

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

use super::queue::{Refused, RunRequest};
use super::{MODULES_DIR, Refusal, Service, Tenant, check, under};

type Svc = State<Arc<Service>>;

fn reply(status: u16, v: Value) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        format!("{v:#}\n"),
    )
        .into_response()
}

/// A tenant's second heavy request (upload, log, audit) while its first
/// runs.
fn too_busy() -> Response {
    reply(
        429,
        json!({"error": "one upload, log or audit at a time per tenant: retry when the last one has answered"}),
    )
}

/// Run `f`, a heavy request of `tenant`, on a blocking thread: one per
/// tenant (else 429), `workers` in all. Its slot is held until `f` ends,
/// even when the client hangs up first.
async fn heavy<T: Send + 'static>(
    svc: &Service,
    tenant: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, Response> {
    let held = svc.heavy.start(tenant).await.ok_or_else(too_busy)?;
    held.run(f).await.map_err(|_| failed_inside())
}

/// A request's blocking work that panicked.
fn failed_inside() -> Response {
    reply(
        500,
        json!({"error": "the request's work failed inside idem (a bug)"}),
    )
}

fn refuse(Refusal(status, message): Refusal) -> Response {
    reply(status, json!({"error": message}))
}

/// The caller's tenant, from `Authorization: Bearer <token>`.
fn tenant<'a>(svc: &'a Service, headers: &HeaderMap) -> Result<&'a Tenant, Box<Response>> {
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    let unauthorized = |m: &str| {
        let mut r = reply(401, json!({"error": m}));
        r.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            "Bearer".parse().expect("static header"),
        );
        Box::new(r)
    };
    match token {
        None | Some("") => Err(unauthorized(
            "missing token: send Authorization: Bearer <your tenant token>",
        )),
        Some(t) => svc
            .tenant(t)
            .ok_or_else(|| unauthorized("the token is not valid")),
    }
}

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

/// Refuse a request without a valid token before its body is read.
async fn authorize(
    State(svc): Svc,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    match tenant(&svc, req.headers()) {
        Ok(_) => next.run(req).await,
        Err(r) => *r,
    }
}

async fn metrics(State(svc): Svc, headers: HeaderMap) -> Response {
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    if !svc.metrics_allowed(token) {
        return reply(401, json!({"error": "/metrics needs the metrics token"}));
    }
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        svc.queue.metrics(),
    )
        .into_response()
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, Response> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|_| failed_inside())
}

/// POST /v1/modules (the .wasm as the body): admission-checked (size,
/// imports), compiled into the shared cache, stored under the tenant as
/// `_modules/<sha256>.wasm`. 201 `{module, size}`; 422 names the reason.
async fn upload(State(svc): Svc, headers: HeaderMap, body: Bytes) -> Response {
    let name = match tenant(&svc, &headers) {
        Ok(t) => t.cfg.name.clone(),
        Err(r) => return *r,
    };
    let svc2 = svc.clone();
    let who = name.clone();
    let done = heavy(&svc, &who, move || {
        let Some(t) = svc2.tenants.iter().find(|t| t.cfg.name == name) else {
            return Err(Refusal(401, "the token is not valid".into()));
        };
        let id = t
            .sandbox
            .identify(&body)
            .map_err(|e| Refusal(422, format!("module refused: {e}")))?;
        t.sandbox
            .load_identified(&id)
            .map_err(|e| Refusal(422, format!("module refused: {e}")))?;
        let rel = format!("{MODULES_DIR}/{}.wasm", id.digest.hex());
        let store = crate::storage::Store::at(&t.cfg.root)
            .map_err(|_| Refusal(503, "the tenant's storage is not reachable".into()))?;
        store
            .put(&rel, Bytes::from(id.bytes.as_ref().clone()))
            .map_err(|_| Refusal(503, "the tenant's storage refused the module".into()))?;
        Ok(json!({"module": id.digest.to_string(), "size": id.bytes.len()}))
    })
    .await;
    match done {
        Err(r) => r,
        Ok(Err(refusal)) => refuse(refusal),
        Ok(Ok(v)) => reply(201, v),
    }
}

/// POST /v1/runs (a JSON run request): checked, then queued, or joined
/// to the identical run already queued or running. 202 `{id, state,
/// joined}`.
async fn submit(State(svc): Svc, headers: HeaderMap, body: Bytes) -> Response {
    let name = match tenant(&svc, &headers) {
        Ok(t) => t.cfg.name.clone(),
        Err(r) => return *r,
    };
    let svc2 = svc.clone();
    let checked = blocking(move || {
        let request: RunRequest = serde_json::from_slice(&body)
            .map_err(|e| Refusal(400, format!("not a run request: {e}")))?;
        // An integer too long for the JSON numbers the run key hashes is
        // refused, as by the CLI (only the text shows it).
        let text = String::from_utf8_lossy(&body);
        crate::manifest::check_params_text(&text, &request.params)
            .map_err(|e| Refusal(400, e.to_string()))?;
        let t = svc2
            .tenants
            .iter()
            .find(|t| t.cfg.name == name)
            .ok_or_else(|| Refusal(401, "the token is not valid".into()))?;
        check(t, &request)?;
        match svc2.queue.submit(&t.cfg.name, request) {
            Ok((r, joined)) => Ok(json!({"id": r.id, "state": r.state.name(), "joined": joined})),
            Err(Refused::Full(n)) => Err(Refusal(
                429,
                format!("your queue is full ({n} runs waiting): retry later"),
            )),
            Err(Refused::Stopping) => Err(Refusal(503, "the service is shutting down".into())),
            Err(Refused::Persist) => Err(Refusal(
                503,
                "the service cannot record the run (its state dir refused the write): nothing was queued; retry later".into(),
            )),
        }
    })
    .await;
    match checked {
        Err(r) => r,
        Ok(Err(refusal)) => refuse(refusal),
        Ok(Ok(v)) => reply(202, v),
    }
}

/// GET /v1/runs[?limit=N][&after=CURSOR]: a page of the tenant's runs,
/// newest first (100 unless asked, at most 1000), and `next`, the cursor
/// of the next page, when there are more.
async fn list(State(svc): Svc, headers: HeaderMap, uri: axum::http::Uri) -> Response {
    let t = match tenant(&svc, &headers) {
        Ok(t) => t,
        Err(r) => return *r,
    };
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
            return reply(
                400,
                json!({"error": "limit must be a number from 1 to 1000"}),
            );
        }
    };
    let after = match asked("after").map(super::queue::parse_cursor) {
        None => None,
        Some(Some(c)) => Some(c),
        Some(None) => {
            return reply(
                400,
                json!({"error": "after must be the `next` of the page before, as given"}),
            );
        }
    };
    let page = svc.queue.page(&t.cfg.name, limit, after.as_ref());
    reply(200, serde_json::to_value(page).unwrap_or_default())
}

fn not_found(id: &str) -> Response {
    reply(
        404,
        json!({"error": format!("no run `{id}` for this tenant")}),
    )
}

async fn status(State(svc): Svc, headers: HeaderMap, Path(id): Path<String>) -> Response {
    let t = match tenant(&svc, &headers) {
        Ok(t) => t,
        Err(r) => return *r,
    };
    match svc.queue.get(&t.cfg.name, &id) {
        Some(r) => reply(200, serde_json::to_value(r).unwrap_or_default()),
        None => not_found(&id),
    }
}

/// GET /v1/runs/{id}/manifest: the stored manifest, byte for byte.
async fn manifest(State(svc): Svc, headers: HeaderMap, Path(id): Path<String>) -> Response {
    let t = match tenant(&svc, &headers) {
        Ok(t) => t,
        Err(r) => return *r,
    };
    let Some(r) = svc.queue.get(&t.cfg.name, &id) else {
        return not_found(&id);
    };
    let Some(hex) = r
        .result
        .as_ref()
        .and_then(|v| v["manifest"].as_str())
        .and_then(|d| d.strip_prefix("sha256:"))
        .map(str::to_string)
    else {
        return reply(
            409,
            json!({"error": format!("run `{id}` is {} and has no manifest", r.state.name())}),
        );
    };
    let Ok(table) = under(t, &r.request.table, "table") else {
        return not_found(&id);
    };
    let got = blocking(move || {
        crate::storage::Store::at(&table).ok().and_then(|s| {
            s.get_at_most(
                &format!("_idem/manifests/{hex}.json"),
                crate::serve::MAX_MANIFEST_BYTES,
            )
            .ok()
            .flatten()
        })
    })
    .await;
    match got {
        Err(r) => r,
        Ok(None) => reply(404, json!({"error": "the manifest is gone from the table"})),
        Ok(Some(bytes)) => ([(header::CONTENT_TYPE, "application/json")], bytes).into_response(),
    }
}

/// GET /v1/log/{table}: the table's runs, as `idem log --json`.
async fn log(State(svc): Svc, headers: HeaderMap, Path(table): Path<String>) -> Response {
    let t = match tenant(&svc, &headers) {
        Ok(t) => t,
        Err(r) => return *r,
    };
    let full = match under(t, &table, "table") {
        Ok(f) => f,
        Err(r) => return refuse(r),
    };
    match heavy(&svc, &t.cfg.name, move || crate::run::run_log(&full)).await {
        Err(r) => r,
        Ok(Err(_)) => reply(
            404,
            json!({"error": format!("no table `{table}` with idem runs")}),
        ),
        Ok(Ok(runs)) => reply(200, json!({"table": table, "runs": runs})),
    }
}

/// GET /v1/audit/{table}: every slice proven, as `idem audit --json`.
async fn audit(State(svc): Svc, headers: HeaderMap, Path(table): Path<String>) -> Response {
    let t = match tenant(&svc, &headers) {
        Ok(t) => t,
        Err(r) => return *r,
    };
    let full = match under(t, &table, "table") {
        Ok(f) => f,
        Err(r) => return refuse(r),
    };
    let opts = crate::audit::AuditOptions {
        slice: None,
        replay: None,
    };
    match heavy(&svc, &t.cfg.name, move || crate::audit::audit(&full, &opts)).await {
        Err(r) => r,
        Ok(Err(_)) => reply(
            404,
            json!({"error": format!("no table `{table}` with idem runs")}),
        ),
        Ok(Ok(report)) => {
            let state = |p: &crate::audit::Proof| match p {
                crate::audit::Proof::Proven => "proven",
                crate::audit::Proof::ChainOnly => "chain-proven",
                crate::audit::Proof::Failed => "failed",
            };
            let slices: Vec<Value> = report
                .iter()
                .map(|s| json!({"slice": s.slice, "version": s.version, "proof": state(&s.proof), "detail": super::scrub(t, &s.detail)}))
                .collect();
            let proven = report
                .iter()
                .all(|s| s.proof != crate::audit::Proof::Failed);
            reply(
                200,
                json!({"table": table, "slices": slices, "proven": proven}),
            )
        }
    }
}
