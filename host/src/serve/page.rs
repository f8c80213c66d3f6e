//! The read-only web page at `/`: server-rendered HTML, no script, no
//! build step. A tenant logs in with its token and gets a session (a
//! random id in an HttpOnly, SameSite=Strict cookie that expires, see
//! [`super::session`]); it sees its runs with their state, its tables with
//! each slice's current output digest and audit state, and a run's
//! manifest. It refreshes itself every 2 seconds while a run is pending.

use std::sync::Arc;
use std::time::Instant;

use axum::Extension;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::Service;
use super::manifest::{manifest_hex, read_manifest};
use super::paths::under;
use super::queue::State as RunState;
use super::session::Peer;
use super::session::{Session, cookie, random_token, same_token};
use super::tenant::Tenant;
use super::text::{esc, short};

/// The session cookie: a random id, never the token.
const SESSION_COOKIE: &str = "idem_session";

/// The login form's CSRF cookie (double-submitted: the form repeats it).
const CSRF_COOKIE: &str = "idem_csrf";

/// The most of a run's error the list of runs shows (its page shows it
/// all, itself bounded by the run record).
const LIST_TEXT: usize = 300;

/// The page's style. Long digests, paths and messages wrap inside the
/// page's width (a manifest is one long JSON text otherwise).
const STYLE: &str = "body{font-family:sans-serif;margin:2em;max-width:100%}table{border-collapse:collapse;max-width:100%}td,th{border:1px solid #ccc;padding:.3em .6em;text-align:left;vertical-align:top;overflow-wrap:anywhere}th{white-space:nowrap}code{font-size:90%;overflow-wrap:anywhere}pre{white-space:pre-wrap;overflow-wrap:anywhere;max-width:100%;background:#f6f6f6;padding:.6em}form.inline{display:inline}\n";

fn html(status: StatusCode, title: &str, refresh: bool, body: &str) -> Response {
    let meta = if refresh {
        r#"<meta http-equiv="refresh" content="2">"#
    } else {
        ""
    };
    let page = format!(
        r#"<!doctype html><html><head><meta charset="utf-8">{meta}<title>{t}</title>
<link rel="stylesheet" href="/style.css">
</head><body>{body}</body></html>"#,
        t = esc(title)
    );
    (
        status,
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        page,
    )
        .into_response()
}

/// GET /style.css: the page's style (a file, so the page's policy allows
/// no inline style or script at all).
pub async fn style() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/css; charset=utf-8"),
            (header::CACHE_CONTROL, "max-age=3600"),
        ],
        STYLE,
    )
        .into_response()
}

/// Whether cookies set for this request are `Secure`: configured so, or
/// the request came through a TLS proxy.
fn secure(svc: &Service, headers: &HeaderMap) -> bool {
    svc.secure_cookies
        || headers
            .get("x-forwarded-proto")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|p| p.trim().eq_ignore_ascii_case("https"))
}

/// A `Set-Cookie` value: HttpOnly, SameSite=Strict, for `max_age`
/// seconds (0 forgets it), Secure when asked.
fn set_cookie(name: &str, value: &str, path: &str, max_age: u64, secure: bool) -> String {
    format!(
        "{name}={value}; HttpOnly; SameSite=Strict; Path={path}; Max-Age={max_age}{}",
        if secure { "; Secure" } else { "" }
    )
}

/// The login form, with a fresh CSRF token in a cookie and in the form.
fn login_form(status: StatusCode, note: &str, secure: bool) -> Response {
    let Some(csrf) = random_token() else {
        return html(
            StatusCode::SERVICE_UNAVAILABLE,
            "idem",
            false,
            "<p>No login is possible now (the system has no randomness to give): retry later.</p>",
        );
    };
    let body = format!(
        r#"<h1>idem</h1><p>{}</p><form method="post" action="/login">
<input type="hidden" name="csrf" value="{csrf}">
<label>Tenant token <input type="password" name="token" id="token" autocomplete="off"></label>
<button type="submit" id="login">Log in</button></form>"#,
        esc(note)
    );
    let mut r = html(status, "idem: log in", false, &body);
    if let Ok(v) = set_cookie(CSRF_COOKIE, &csrf, "/login", 3600, secure).parse() {
        r.headers_mut().insert(header::SET_COOKIE, v);
    }
    r
}

/// The value of cookie `name` in the request.
fn cookie_of<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    cookie(headers.get(header::COOKIE)?.to_str().ok()?, name)
}

/// A form field of a `application/x-www-form-urlencoded` body.
fn field(body: &[u8], name: &str) -> String {
    url::form_urlencoded::parse(body)
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
        .unwrap_or_default()
}

/// The session of the request's cookie, with its id and tenant.
fn session<'a>(svc: &'a Service, headers: &HeaderMap) -> Option<(String, Session, &'a Tenant)> {
    let id = cookie_of(headers, SESSION_COOKIE)?;
    let s = svc.sessions.get(id, Instant::now())?;
    let t = svc.tenants.iter().find(|t| t.cfg.name == s.tenant)?;
    Some((id.to_string(), s, t))
}

/// The rows of the runs table.
fn run_rows(runs: &[super::queue::RunRecord]) -> String {
    let mut rows = String::new();
    for r in runs {
        let slice = r
            .request
            .partition
            .clone()
            .unwrap_or_else(|| "files".into());
        let (result, version) = match (&r.result, &r.error) {
            (Some(v), _) => (
                v["kind"].as_str().unwrap_or("").to_string(),
                v["version"]
                    .as_u64()
                    .map(|v| v.to_string())
                    .unwrap_or_default(),
            ),
            (_, Some(e)) => (
                short(e["message"].as_str().unwrap_or(""), LIST_TEXT),
                String::new(),
            ),
            _ => (String::new(), String::new()),
        };
        rows.push_str(&format!(
            "<tr class=\"run\" data-id=\"{id}\"><td><a href=\"/runs/{id}\">{id}</a></td><td class=\"state\">{state}</td><td>{table}</td><td>{slice}</td><td>{result}</td><td>{version}</td></tr>",
            id = esc(&r.id),
            state = r.state.name(),
            table = esc(&short(&r.request.table, LIST_TEXT)),
            slice = esc(&short(&slice, LIST_TEXT)),
            result = esc(&result),
            version = esc(&version),
        ));
    }
    rows
}

/// Each table's log and audit, read on a blocking thread as a heavy
/// request of `t` (the slot held until the reading ends); `None` when
/// another heavy request of `t` is running.
async fn read_tables(
    svc: &Service,
    t: &Tenant,
    tables: Vec<String>,
) -> Option<
    Vec<(
        String,
        Vec<crate::run::LogEntry>,
        Vec<crate::audit::SliceAudit>,
    )>,
> {
    let held = svc.heavy.start(&t.cfg.name).await?;
    let full: Vec<(String, String)> = tables
        .into_iter()
        .filter_map(|table| under(t, &table, "table").ok().map(|f| (table, f)))
        .collect();
    held.run(move || {
        full.into_iter()
            .map(|(table, full)| {
                let opts = crate::audit::AuditOptions {
                    slice: None,
                    replay: None,
                    keys: &[],
                };
                let log = crate::run::run_log(&full).unwrap_or_default();
                let audit = crate::audit::audit(&full, &opts).unwrap_or_default();
                (table, log, audit)
            })
            .collect()
    })
    .await
    .ok()
}

/// The tables section: each slice's current output, version and proof,
/// the slice linked to the listed run of this service that made its
/// current output (by run key), when there is one.
fn table_rows(
    tables: &[(
        String,
        Vec<crate::run::LogEntry>,
        Vec<crate::audit::SliceAudit>,
    )],
    runs: &[super::queue::RunRecord],
) -> String {
    let mut body = String::new();
    for (table, log, audit) in tables {
        body.push_str(&format!(
            "<h3>{}</h3><table class=\"table\"><tr><th>slice</th><th>current output</th><th>version</th><th>audit</th></tr>",
            esc(table)
        ));
        for s in audit {
            let last = log.iter().rev().find(|e| e.slice == s.slice);
            let digest = last
                .map(|e| e.output_digest.to_string())
                .unwrap_or_default();
            // The run that committed it: same run key and version (a
            // later memo hit of the same run names it too, but made
            // nothing).
            let key = last.map(|e| e.run_key.to_string());
            let made_by = runs.iter().find(|r| {
                let v = r.result.as_ref();
                r.request.table == *table
                    && key.is_some()
                    && v.and_then(|v| v["runKey"].as_str()) == key.as_deref()
                    && v.is_some_and(|v| v["kind"] == "committed")
                    && v.and_then(|v| v["version"].as_u64()) == Some(s.version)
            });
            let slice = match made_by {
                Some(r) => format!(
                    "<a class=\"slice\" href=\"/runs/{}\">{}</a>",
                    esc(&r.id),
                    esc(&s.slice)
                ),
                None => esc(&s.slice),
            };
            let proof = match s.proof {
                crate::audit::Proof::Proven => "proven",
                crate::audit::Proof::ChainOnly => "chain-proven",
                crate::audit::Proof::Failed => "FAILED",
            };
            body.push_str(&format!(
                "<tr><td>{slice}</td><td><code>{}</code></td><td>{}</td><td class=\"audit\">{proof}</td></tr>",
                esc(&digest),
                s.version
            ));
        }
        body.push_str("</table>");
    }
    body
}

/// GET /: the login form, or the tenant's runs and tables.
pub async fn index(State(svc): State<Arc<Service>>, headers: HeaderMap) -> Response {
    let Some((_, session, t)) = session(&svc, &headers) else {
        return login_form(
            StatusCode::OK,
            "Log in with your tenant's API token.",
            secure(&svc, &headers),
        );
    };
    let runs = svc.queue.list(&t.cfg.name, 50);
    let pending = runs
        .iter()
        .any(|r| matches!(r.state, RunState::Queued | RunState::Running));
    let mut body = format!(
        "<h1>idem: tenant {}</h1><h2>Runs</h2><table id=\"runs\"><tr><th>run</th><th>state</th><th>table</th><th>slice</th><th>result</th><th>version</th></tr>{}</table><h2>Tables</h2>",
        esc(&t.cfg.name),
        run_rows(&runs)
    );
    let mut tables: Vec<String> = runs
        .iter()
        .filter(|r| r.state == RunState::Succeeded)
        .map(|r| r.request.table.clone())
        .collect();
    tables.sort();
    tables.dedup();
    // Reading tables is heavy work: shared with uploads, logs and audits.
    match read_tables(&svc, t, tables).await {
        Some(read) => body.push_str(&table_rows(&read, &runs)),
        None => body.push_str("<p>(shown when no upload, log or audit of yours is running)</p>"),
    }
    body.push_str(&format!(
        r#"<form class="inline" method="post" action="/logout"><input type="hidden" name="csrf" value="{}"><button type="submit" id="logout">Log out</button></form>"#,
        esc(&session.csrf)
    ));
    html(StatusCode::OK, "idem", pending, &body)
}

/// POST /login (form `token`, `csrf`): a new session. Refused (403)
/// without the form's CSRF token; a peer (or everyone) with too many
/// failed logins in the last minute is answered 429 with Retry-After
/// before its token is looked at.
pub async fn login(
    State(svc): State<Arc<Service>>,
    peer: Option<Extension<Peer>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let secure = secure(&svc, &headers);
    let peer = peer.map(|Extension(Peer(ip))| ip);
    let now = Instant::now();
    if let Err(wait) = svc.throttle.check(peer, now) {
        let mut r = login_form(
            StatusCode::TOO_MANY_REQUESTS,
            "Too many failed logins: wait a minute, then try again.",
            secure,
        );
        if let Ok(v) = wait.as_secs().to_string().parse() {
            r.headers_mut().insert(header::RETRY_AFTER, v);
        }
        return r;
    }
    let sent = field(&body, "csrf");
    if !cookie_of(&headers, CSRF_COOKIE).is_some_and(|c| same_token(c, &sent)) {
        return login_form(
            StatusCode::FORBIDDEN,
            "The form had expired: log in again.",
            secure,
        );
    }
    let Some(t) = svc.tenant(&field(&body, "token")) else {
        svc.throttle.failed(peer, now);
        return login_form(StatusCode::UNAUTHORIZED, "That token is not valid.", secure);
    };
    let Some((id, _)) = svc.sessions.open(&t.cfg.name, now) else {
        return login_form(
            StatusCode::SERVICE_UNAVAILABLE,
            "No session could be made (the system has no randomness to give): retry later.",
            secure,
        );
    };
    let ttl = super::session::SESSION_TTL.as_secs();
    let mut r = (StatusCode::SEE_OTHER, [(header::LOCATION, "/".to_string())]).into_response();
    for c in [
        set_cookie(SESSION_COOKIE, &id, "/", ttl, secure),
        set_cookie(CSRF_COOKIE, "", "/login", 0, secure),
    ] {
        if let Ok(v) = c.parse() {
            r.headers_mut().append(header::SET_COOKIE, v);
        }
    }
    r
}

/// POST /logout (form `csrf`, the session's): ends the session, here and
/// in the browser.
pub async fn logout(State(svc): State<Arc<Service>>, headers: HeaderMap, body: Bytes) -> Response {
    let secure = secure(&svc, &headers);
    if let Some((id, s, _)) = session(&svc, &headers) {
        if !same_token(&s.csrf, &field(&body, "csrf")) {
            return html(
                StatusCode::FORBIDDEN,
                "idem",
                false,
                "<p>That form had expired.</p><p><a href=\"/\">Back</a></p>",
            );
        }
        svc.sessions.close(&id);
    }
    (
        StatusCode::SEE_OTHER,
        [
            (header::LOCATION, "/".to_string()),
            (
                header::SET_COOKIE,
                set_cookie(SESSION_COOKIE, "", "/", 0, secure),
            ),
        ],
    )
        .into_response()
}

/// GET /runs/{id}: one run and its manifest.
pub async fn run(
    State(svc): State<Arc<Service>>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    let Some((_, _, t)) = session(&svc, &headers) else {
        return login_form(
            StatusCode::UNAUTHORIZED,
            "Log in first.",
            secure(&svc, &headers),
        );
    };
    let Some(r) = svc.queue.get(&t.cfg.name, &id) else {
        return html(
            StatusCode::NOT_FOUND,
            "idem",
            false,
            "<p>No such run.</p><p><a href=\"/\">Back</a></p>",
        );
    };
    // Read, checked against its digest and laid out off the async workers
    // (a file the tenant planted under its root is neither trusted nor
    // cheap).
    let table = under(t, &r.request.table, "table").ok();
    let roots = t.roots.clone();
    let record = r.clone();
    let body = tokio::task::spawn_blocking(move || {
        let manifest = match (manifest_hex(&record), table) {
            (Some(hex), Some(table)) => read_manifest(&table, &hex)
                .filter(|b| crate::digest::Digest::of_bytes(b).as_str() == format!("sha256:{hex}")),
            _ => None,
        };
        super::run_view::render(&record, manifest.as_deref(), &|s| roots.scrub(s))
    })
    .await;
    let Ok(mut body) = body else {
        return html(
            StatusCode::INTERNAL_SERVER_ERROR,
            "idem",
            false,
            "<p>The run could not be shown.</p><p><a href=\"/\">Back</a></p>",
        );
    };
    body.push_str("<p><a href=\"/\">Back</a></p>");
    let pending = matches!(r.state, RunState::Queued | RunState::Running);
    html(StatusCode::OK, "idem run", pending, &body)
}
