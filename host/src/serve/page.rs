//! The read-only web page at `/`: server-rendered HTML, no script, no
//! build step. A tenant logs in with its token (kept in an HttpOnly,
//! SameSite=Strict cookie) and sees its runs with their state, its tables
//! with each slice's current output digest and audit state, and a run's
//! manifest. It refreshes itself every 2 seconds while a run is pending.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::queue::State as RunState;
use super::{Service, Tenant, under};

const COOKIE: &str = "idem_token";

/// Text made safe inside HTML.
fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

fn html(status: StatusCode, title: &str, refresh: bool, body: &str) -> Response {
    let meta = if refresh {
        r#"<meta http-equiv="refresh" content="2">"#
    } else {
        ""
    };
    let page = format!(
        r#"<!doctype html><html><head><meta charset="utf-8">{meta}<title>{t}</title>
<style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:.3em .6em;text-align:left}}code{{font-size:90%}}</style>
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

fn login_form(status: StatusCode, note: &str) -> Response {
    let body = format!(
        r#"<h1>idem</h1><p>{}</p><form method="post" action="/login">
<label>Tenant token <input type="password" name="token" id="token" autocomplete="off"></label>
<button type="submit" id="login">Log in</button></form>"#,
        esc(note)
    );
    html(status, "idem: log in", false, &body)
}

/// The tenant of the session cookie.
fn session<'a>(svc: &'a Service, headers: &HeaderMap) -> Option<&'a Tenant> {
    let cookies = headers.get(header::COOKIE)?.to_str().ok()?;
    let token = cookies
        .split(';')
        .filter_map(|c| c.trim().split_once('='))
        .find(|(k, _)| *k == COOKIE)
        .map(|(_, v)| v)?;
    let token = percent_encoding::percent_decode_str(token)
        .decode_utf8()
        .ok()?;
    svc.tenant(&token)
}

/// GET /: the login form, or the tenant's runs and tables.
pub async fn index(State(svc): State<Arc<Service>>, headers: HeaderMap) -> Response {
    let Some(t) = session(&svc, &headers) else {
        return login_form(StatusCode::OK, "Log in with your tenant's API token.");
    };
    let runs = svc.queue.list(&t.cfg.name, 50);
    let pending = runs
        .iter()
        .any(|r| matches!(r.state, RunState::Queued | RunState::Running));
    let mut body = format!(
        "<h1>idem: tenant {}</h1><h2>Runs</h2><table id=\"runs\"><tr><th>run</th><th>state</th><th>table</th><th>slice</th><th>result</th><th>version</th></tr>",
        esc(&t.cfg.name)
    );
    for r in &runs {
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
                e["message"].as_str().unwrap_or("").to_string(),
                String::new(),
            ),
            _ => (String::new(), String::new()),
        };
        body.push_str(&format!(
            "<tr class=\"run\" data-id=\"{id}\"><td><a href=\"/runs/{id}\">{id}</a></td><td class=\"state\">{state}</td><td>{table}</td><td>{slice}</td><td>{result}</td><td>{version}</td></tr>",
            id = esc(&r.id),
            state = r.state.name(),
            table = esc(&r.request.table),
            slice = esc(&slice),
            result = esc(&result),
            version = esc(&version),
        ));
    }
    body.push_str("</table><h2>Tables</h2>");
    let mut tables: Vec<String> = runs
        .iter()
        .filter(|r| r.state == RunState::Succeeded)
        .map(|r| r.request.table.clone())
        .collect();
    tables.sort();
    tables.dedup();
    // Reading tables is heavy work: shared with uploads, logs and audits.
    let busy = svc.start_heavy(&t.cfg.name);
    let permit = match &busy {
        Some(_) => svc.heavy.acquire().await.ok(),
        None => None,
    };
    if permit.is_none() {
        tables.clear();
        body.push_str("<p>(shown when no upload, log or audit of yours is running)</p>");
    }
    for table in tables {
        let Ok(full) = under(t, &table, "table") else {
            continue;
        };
        let opts = crate::audit::AuditOptions {
            slice: None,
            replay: None,
        };
        let outputs = {
            let full = full.clone();
            tokio::task::spawn_blocking(move || {
                let log = crate::run::run_log(&full).unwrap_or_default();
                let audit = crate::audit::audit(&full, &opts).unwrap_or_default();
                (log, audit)
            })
            .await
            .unwrap_or_default()
        };
        let (log, audit) = outputs;
        body.push_str(&format!(
            "<h3>{}</h3><table class=\"table\"><tr><th>slice</th><th>current output</th><th>version</th><th>audit</th></tr>",
            esc(&table)
        ));
        for s in &audit {
            let digest = log
                .iter()
                .rev()
                .find(|e| e.slice == s.slice)
                .map(|e| e.output_digest.to_string())
                .unwrap_or_default();
            let proof = match s.proof {
                crate::audit::Proof::Proven => "proven",
                crate::audit::Proof::ChainOnly => "chain-proven",
                crate::audit::Proof::Failed => "FAILED",
            };
            body.push_str(&format!(
                "<tr><td>{}</td><td><code>{}</code></td><td>{}</td><td class=\"audit\">{proof}</td></tr>",
                esc(&s.slice),
                esc(&digest),
                s.version
            ));
        }
        body.push_str("</table>");
    }
    body.push_str("<p><a href=\"/logout\">Log out</a></p>");
    html(StatusCode::OK, "idem", pending, &body)
}

/// POST /login (form `token=...`): sets the session cookie.
pub async fn login(State(svc): State<Arc<Service>>, body: Bytes) -> Response {
    let token = url::form_urlencoded::parse(&body)
        .find(|(k, _)| k == "token")
        .map(|(_, v)| v.into_owned())
        .unwrap_or_default();
    if svc.tenant(&token).is_none() {
        return login_form(StatusCode::UNAUTHORIZED, "That token is not valid.");
    }
    let cookie = format!(
        "{COOKIE}={}; HttpOnly; SameSite=Strict; Path=/",
        percent_encoding::utf8_percent_encode(&token, percent_encoding::NON_ALPHANUMERIC)
    );
    (
        StatusCode::SEE_OTHER,
        [
            (header::LOCATION, "/".to_string()),
            (header::SET_COOKIE, cookie),
        ],
    )
        .into_response()
}

/// GET /logout: forgets the session cookie.
pub async fn logout() -> Response {
    (
        StatusCode::SEE_OTHER,
        [
            (header::LOCATION, "/".to_string()),
            (
                header::SET_COOKIE,
                format!("{COOKIE}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0"),
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
    let Some(t) = session(&svc, &headers) else {
        return login_form(StatusCode::UNAUTHORIZED, "Log in first.");
    };
    let Some(r) = svc.queue.get(&t.cfg.name, &id) else {
        return html(
            StatusCode::NOT_FOUND,
            "idem",
            false,
            "<p>No such run.</p><p><a href=\"/\">Back</a></p>",
        );
    };
    let mut body = format!(
        "<h1>Run {}</h1><p>state <b id=\"state\">{}</b>, table {}</p>",
        esc(&r.id),
        r.state.name(),
        esc(&r.request.table)
    );
    if let Some(e) = &r.error {
        body.push_str(&format!(
            "<p>error: {}</p>",
            esc(e["message"].as_str().unwrap_or(""))
        ));
    }
    let manifest = r
        .result
        .as_ref()
        .and_then(|v| v["manifest"].as_str())
        .and_then(|d| d.strip_prefix("sha256:"))
        .map(str::to_string);
    if let (Some(hex), Ok(table)) = (manifest, under(t, &r.request.table, "table")) {
        let text = tokio::task::spawn_blocking(move || {
            crate::storage::Store::at(&table)
                .ok()
                .and_then(|s| s.get(&format!("_idem/manifests/{hex}.json")).ok().flatten())
        })
        .await
        .ok()
        .flatten();
        if let Some(bytes) = text {
            body.push_str(&format!(
                "<h2>Manifest</h2><pre id=\"manifest\">{}</pre>",
                esc(&super::scrub(
                    t,
                    String::from_utf8_lossy(&bytes).into_owned()
                ))
            ));
        }
    }
    body.push_str("<p><a href=\"/\">Back</a></p>");
    let pending = matches!(r.state, RunState::Queued | RunState::Running);
    html(StatusCode::OK, "idem run", pending, &body)
}
