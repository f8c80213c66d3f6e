//! How the API answers: a JSON body (pretty, with a final newline) with
//! its status, and a [`Refusal`], the answer of a request refused, which
//! every handler (and the [`super::caller::Caller`] extractor) returns as
//! its error: `{"error": message}` with the refusal's status.

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// A refused request: HTTP status and a message for the caller.
#[derive(Debug)]
pub struct Refusal(pub u16, pub String);

/// `v` as the JSON answer of status `status`.
pub fn reply(status: u16, v: Value) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        format!("{v:#}\n"),
    )
        .into_response()
}

/// `{"error": message}` with the refusal's status; a 401 also says how
/// to authenticate (`WWW-Authenticate: Bearer`).
impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        let Refusal(status, message) = self;
        let mut r = reply(status, json!({"error": message}));
        if status == 401 {
            r.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                "Bearer".parse().expect("static header"),
            );
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A refusal answers `{"error": message}`, pretty with a final
    /// newline, as JSON; only a 401 says how to authenticate.
    #[tokio::test]
    async fn a_refusal_answers_its_status_and_message() {
        for (status, www) in [(401, Some("Bearer")), (429, None)] {
            let r = Refusal(status, "no".into()).into_response();
            assert_eq!(r.status().as_u16(), status);
            assert_eq!(r.headers()[header::CONTENT_TYPE], "application/json");
            assert_eq!(
                r.headers()
                    .get(header::WWW_AUTHENTICATE)
                    .map(|v| v.to_str().unwrap()),
                www
            );
            let body = axum::body::to_bytes(r.into_body(), 1 << 10).await.unwrap();
            assert_eq!(&body[..], b"{\n  \"error\": \"no\"\n}\n");
        }
    }
}
