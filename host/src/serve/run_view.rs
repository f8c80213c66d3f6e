//! A run's page laid out as `idem show` prints it: what was asked (table,
//! slice, module, params, logical date), when (submitted, finished, how
//! long), how it ended (result, version, rows, run key, error), what the
//! manifest states beyond that (inputs, engine, target, output, checks),
//! and the manifest itself, pretty-printed and wrapped to the page's
//! width. Every text a tenant or a guest supplied is escaped and its
//! root paths scrubbed.

use serde_json::Value;

use super::queue::RunRecord;
use super::text::{esc, short};

/// The most of one field's text a row shows (the manifest below holds
/// it whole).
const FIELD_TEXT: usize = 2_000;

/// The run page's body for `r`, with the manifest's bytes when it has
/// one; `scrub` hides the tenant's root paths.
pub(super) fn render(
    r: &RunRecord,
    manifest: Option<&[u8]>,
    scrub: &dyn Fn(&str) -> String,
) -> String {
    let mut rows: Vec<(&str, String)> = vec![
        ("state", format!("<b id=\"state\">{}</b>", r.state.name())),
        ("table", text(scrub, &r.request.table)),
        ("slice", text(scrub, &slice_of(r))),
        ("module", code(&r.request.module)),
        ("params", code(&scrub(&r.request.params.to_string()))),
        (
            "logical date",
            text(scrub, r.request.logical_date.as_deref().unwrap_or("(none)")),
        ),
        ("submitted", esc(&utc(r.submitted_ms))),
    ];
    if let Some(done) = r.finished_ms {
        rows.push(("finished", esc(&utc(done))));
        let secs = done.saturating_sub(r.submitted_ms) as f64 / 1000.0;
        rows.push((
            "duration",
            format!("<span id=\"duration\">{secs:.1} s</span>"),
        ));
    }
    if r.attempts > 1 {
        rows.push(("attempts", r.attempts.to_string()));
    }
    rows.extend(result_rows(r, scrub));
    let parsed = manifest.and_then(|b| serde_json::from_slice::<Value>(b).ok());
    if let Some(m) = &parsed {
        rows.extend(manifest_rows(m, scrub));
    }
    let mut body = format!(
        "<h1>Run {}</h1><table class=\"run\" id=\"run\">",
        esc(&r.id)
    );
    for (name, value) in rows {
        body.push_str(&format!("<tr><th>{name}</th><td>{value}</td></tr>"));
    }
    body.push_str("</table>");
    if let Some(m) = &parsed {
        let pretty = serde_json::to_string_pretty(m).unwrap_or_default();
        body.push_str(&format!(
            "<h2>Manifest</h2><pre id=\"manifest\">{}</pre>",
            esc(&scrub(&pretty))
        ));
    }
    body
}

/// How the run ended: its result's kind, version, rows and run key, or
/// its error.
fn result_rows(r: &RunRecord, scrub: &dyn Fn(&str) -> String) -> Vec<(&'static str, String)> {
    let mut rows = Vec::new();
    if let Some(v) = &r.result {
        let kind = v["kind"].as_str().unwrap_or("");
        let version = v["version"]
            .as_u64()
            .map(|n| format!(", version {n}"))
            .unwrap_or_default();
        rows.push((
            "result",
            format!("<span id=\"result\">{}{}</span>", esc(kind), esc(&version)),
        ));
        if let (Some(i), Some(o)) = (v["rowsIn"].as_u64(), v["rowsOut"].as_u64()) {
            rows.push(("rows", format!("<span id=\"rows\">{i} in, {o} out</span>")));
        }
        if let Some(k) = v["runKey"].as_str() {
            rows.push(("run key", code(k)));
        }
    }
    if let Some(e) = &r.error {
        let kind = e["kind"].as_str().unwrap_or("");
        let message = e["message"].as_str().unwrap_or("");
        rows.push(("error", format!("{}: {}", esc(kind), text(scrub, message))));
    }
    rows
}

/// What the manifest states beyond the run record.
fn manifest_rows(m: &Value, scrub: &dyn Fn(&str) -> String) -> Vec<(&'static str, String)> {
    let p = &m["predicate"];
    let (spec, result) = (&p["run"], &p["result"]);
    let mut rows = Vec::new();
    if let Some(inputs) = spec["slice"]["inputs"].as_array() {
        let bytes = inputs
            .iter()
            .filter_map(|i| i["size"].as_u64())
            .fold(0u64, u64::saturating_add);
        rows.push((
            "inputs",
            format!("{} object(s), {bytes} bytes", inputs.len()),
        ));
    }
    if let Some(e) = spec["engine"].as_str() {
        rows.push(("engine", code(&scrub(e))));
    }
    let target = &spec["target"];
    if let Some(mode) = target["mode"].as_str() {
        rows.push((
            "target",
            text(
                scrub,
                &format!("{} ({mode})", target["table"].as_str().unwrap_or("")),
            ),
        ));
    }
    if let Some(d) = result["outputDigest"].as_str() {
        rows.push(("output", code(&scrub(d))));
    }
    if let Some(audits) = result["audits"].as_array().filter(|a| !a.is_empty()) {
        let checks: Vec<String> = audits
            .iter()
            .map(|a| {
                let verdict = if a["passed"] == true {
                    "passed"
                } else {
                    "FAILED"
                };
                format!("{verdict} {}", a["expectation"].as_str().unwrap_or(""))
            })
            .collect();
        rows.push(("checks", text(scrub, &checks.join("; "))));
    }
    rows
}

/// The run's slice as asked: its partition, or its files.
fn slice_of(r: &RunRecord) -> String {
    match &r.request.partition {
        Some(p) => p.clone(),
        None => format!("{} file(s)", r.request.files.len()),
    }
}

/// Unix milliseconds as `YYYY-MM-DD HH:MM:SS UTC`.
fn utc(ms: u64) -> String {
    format!("{} UTC", crate::schedule::time_of(ms))
}

/// A tenant's or guest's text, scrubbed, cut and escaped.
fn text(scrub: &dyn Fn(&str) -> String, s: &str) -> String {
    esc(&short(&scrub(s), FIELD_TEXT))
}

/// A digest or JSON value, as code.
fn code(s: &str) -> String {
    format!("<code>{}</code>", esc(&short(s, FIELD_TEXT)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::queue::State;

    fn record() -> RunRecord {
        let request = serde_json::from_value(serde_json::json!({
            "module": "sha256:ab",
            "input": "orders",
            "partition": "date=2026-10-01",
            "table": "/root/a/tables/<revenue>",
            "params": {"min_amount": 5},
        }))
        .unwrap();
        RunRecord {
            id: "r1".into(),
            tenant: "a".into(),
            request,
            state: State::Succeeded,
            submitted_ms: 1_796_106_600_000,
            finished_ms: Some(1_796_106_602_500),
            result: Some(serde_json::json!({
                "kind": "committed", "version": 3, "rowsIn": 1000, "rowsOut": 4,
                "runKey": "sha256:cd", "manifest": "sha256:ef",
            })),
            error: None,
            attempts: 1,
        }
    }

    /// Times, duration, params, rows and result in rows of their own; the
    /// tenant's text escaped and scrubbed; the manifest pretty-printed.
    #[test]
    fn a_run_is_laid_out_field_by_field() {
        let scrub = |s: &str| s.replace("/root/a/", "");
        let manifest = br#"{"predicate":{"run":{"slice":{"inputs":[{"size":10},{"size":5}]},"engine":"e1","target":{"table":"/root/a/t","mode":"append"}},"result":{"outputDigest":"sha256:99","audits":[{"passed":true,"expectation":"rows(1..)"}]}}}"#;
        let html = render(&record(), Some(manifest), &scrub);
        for want in [
            "<tr><th>submitted</th><td>2026-12-01 06:30:00 UTC</td></tr>",
            "<span id=\"duration\">2.5 s</span>",
            "<code>{&quot;min_amount&quot;:5}</code>",
            "<span id=\"rows\">1000 in, 4 out</span>",
            "<span id=\"result\">committed, version 3</span>",
            "tables/&lt;revenue&gt;",
            "2 object(s), 15 bytes",
            "t (append)",
            "passed rows(1..)",
            "<pre id=\"manifest\">{\n",
        ] {
            assert!(html.contains(want), "{want}\n{html}");
        }
        assert!(!html.contains("/root/a/"), "{html}");
    }
}
