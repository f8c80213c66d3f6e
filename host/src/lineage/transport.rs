//! Where events go: `file://DIR` (one JSON file per event, written
//! atomically) or `http(s)://HOST/PATH` (the OpenLineage HTTP transport:
//! a POST of the event, a bearer token from `OPENLINEAGE_API_KEY`, a few
//! bounded attempts). Delivery never fails a run: a failure is returned
//! for the caller to report.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Attempts per event while the receiver has not failed yet.
const ATTEMPTS: u32 = 3;
/// Each attempt's limit (connect + send + answer).
const TIMEOUT: Duration = Duration::from_secs(5);
/// The environment variable holding the receiver's API key.
pub const TOKEN_ENV: &str = "OPENLINEAGE_API_KEY";

/// After a delivery failed every attempt, events are not sent for this
/// long (a receiver that swallows connections would cost every slice a
/// timeout).
const DOWN_FOR: Duration = Duration::from_secs(60);

/// A place events are delivered to.
pub enum Transport {
    /// One file per event in this folder.
    Dir(PathBuf),
    /// POSTed to this URL.
    Http {
        url: url::Url,
        client: reqwest::Client,
        token: Option<String>,
        /// An event already failed every attempt: later ones try once.
        failed: AtomicBool,
        /// ... and none is tried before this.
        down_until: std::sync::Mutex<Option<std::time::Instant>>,
    },
}

impl std::fmt::Debug for Transport {
    /// The target only: never the token.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Transport({})", self.target())
    }
}

impl Transport {
    /// The transport `target` names (`file://DIR` or `http(s)://...`).
    pub fn parse(target: &str) -> Result<Transport, String> {
        let url = url::Url::parse(target).map_err(|e| {
            format!("--lineage `{target}` is not a URL ({e}): give file:///DIR or http://HOST/api/v1/lineage")
        })?;
        match url.scheme() {
            "file" => url
                .to_file_path()
                .map(Transport::Dir)
                .map_err(|_| format!("--lineage `{target}`: not a local folder")),
            "http" | "https" => {
                // A redirect would turn the POST into a GET and its 2xx
                // into a delivery that never happened.
                let client = reqwest::Client::builder()
                    .timeout(TIMEOUT)
                    .redirect(reqwest::redirect::Policy::none())
                    .build()
                    .map_err(|e| format!("--lineage `{target}`: {e}"))?;
                let token = std::env::var(TOKEN_ENV).ok().filter(|t| !t.is_empty());
                Ok(Transport::Http {
                    url,
                    client,
                    token,
                    failed: AtomicBool::new(false),
                    down_until: std::sync::Mutex::new(None),
                })
            }
            other => Err(format!(
                "--lineage `{target}`: the scheme `{other}` is not a transport: give file:///DIR or http(s)://HOST/api/v1/lineage"
            )),
        }
    }

    /// Where it delivers (for messages; never the token, nor a password
    /// in the URL).
    pub fn target(&self) -> String {
        match self {
            Transport::Dir(d) => format!("file://{}", d.display()),
            Transport::Http { url, .. } => {
                let mut u = url.clone();
                let _ = u.set_password(None);
                let _ = u.set_username("");
                u.to_string()
            }
        }
    }

    /// Deliver `event` (its JSON bytes), named `name` in a folder.
    pub fn send(&self, name: &str, event: Vec<u8>) -> Result<(), String> {
        match self {
            Transport::Dir(dir) => write_file(dir, name, &event),
            Transport::Http {
                url,
                client,
                token,
                failed,
                down_until,
            } => {
                let now = std::time::Instant::now();
                let down = *down_until.lock().unwrap_or_else(|e| e.into_inner());
                if down.is_some_and(|t| now < t) {
                    return Err("the receiver failed less than a minute ago: not sent".into());
                }
                let attempts = if failed.load(Ordering::Relaxed) {
                    1
                } else {
                    ATTEMPTS
                };
                let rt = crate::runtime::shared().map_err(|e| e.to_string())?;
                let mut why = String::new();
                for n in 0..attempts {
                    if n > 0 {
                        std::thread::sleep(Duration::from_millis(250 << n));
                    }
                    match rt.block_on(post(client, url, token.as_deref(), event.clone())) {
                        Ok(()) => return Ok(()),
                        Err(e) => why = e,
                    }
                }
                failed.store(true, Ordering::Relaxed);
                *down_until.lock().unwrap_or_else(|e| e.into_inner()) =
                    Some(std::time::Instant::now() + DOWN_FOR);
                Err(format!("{why} (after {attempts} attempts)"))
            }
        }
    }
}

async fn post(
    client: &reqwest::Client,
    url: &url::Url,
    token: Option<&str>,
    body: Vec<u8>,
) -> Result<(), String> {
    let mut req = client
        .post(url.clone())
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(body);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let resp = req.send().await.map_err(|e| e.to_string())?;
    match resp.status() {
        s if s.is_success() => Ok(()),
        s => Err(format!("the receiver answered {s}")),
    }
}

/// `dir/name` written whole or not at all.
fn write_file(dir: &std::path::Path, name: &str, bytes: &[u8]) -> Result<(), String> {
    let fail = |e: std::io::Error| format!("{}: {e}", dir.display());
    std::fs::create_dir_all(dir).map_err(fail)?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(fail)?;
    std::io::Write::write_all(&mut tmp, bytes).map_err(fail)?;
    tmp.persist(dir.join(name)).map_err(|e| fail(e.error))?;
    Ok(())
}
