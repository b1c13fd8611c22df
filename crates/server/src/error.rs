//! Errors of the control plane and how the API answers them: a status and a JSON body that
//! names the field and the reason, so a client can show them as they are.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use crate::views::{ErrorBody, ErrorDetail};

/// Why a request failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum ApiError {
    /// Bad input: a field and the reason (400).
    #[error("{field}: {reason}")]
    Invalid {
        /// Field path.
        field: String,
        reason: String,
    },
    /// The object does not exist (404).
    #[error("{0}")]
    NotFound(String),
    /// The change conflicts with other objects (409), e.g. deleting a region in use.
    #[error("{0}")]
    Conflict(String),
    /// No valid credentials (401).
    #[error("{0}")]
    Unauthorized(String),
    /// Valid credentials without the right to this endpoint (403).
    #[error("{0}")]
    Forbidden(String),
    /// The route does not take this method (405).
    #[error("{0}")]
    NotAllowed(String),
    /// The request is too large (413).
    #[error("{0}")]
    TooLarge(String),
    /// Asked again too soon (429); may be tried after this many seconds.
    #[error("{reason}")]
    TooSoon {
        /// Why.
        reason: String,
        /// Seconds to wait (the `Retry-After` header).
        retry_after_s: u64,
    },
    /// The request (its body, most often) did not arrive within its deadline (408).
    #[error("{0}")]
    TimedOut(String),
    /// Nothing can serve the request now (503), e.g. no mirror is eligible.
    #[error("{0}")]
    Unavailable(String),
    /// The store failed (503): the change was not made.
    #[error("storage unavailable: {0}")]
    Store(#[from] vantage_store::Error),
    /// Something else went wrong (500).
    #[error("{0}")]
    Internal(String),
}

impl ApiError {
    /// A bad-input error.
    pub(crate) fn invalid(field: impl Into<String>, reason: impl Into<String>) -> Self {
        ApiError::Invalid { field: field.into(), reason: reason.into() }
    }

    /// The HTTP status.
    pub(crate) fn status(&self) -> StatusCode {
        match self {
            ApiError::Invalid { .. } => StatusCode::BAD_REQUEST,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::Conflict(_) => StatusCode::CONFLICT,
            ApiError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden(_) => StatusCode::FORBIDDEN,
            ApiError::NotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::TimedOut(_) => StatusCode::REQUEST_TIMEOUT,
            ApiError::TooSoon { .. } => StatusCode::TOO_MANY_REQUESTS,
            ApiError::Store(_) | ApiError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

impl From<vantage_core::Error> for ApiError {
    fn from(e: vantage_core::Error) -> Self {
        ApiError::Invalid { field: e.field().to_owned(), reason: e.reason().to_owned() }
    }
}

impl From<vantage_control::invariants::Refusal> for ApiError {
    fn from(r: vantage_control::invariants::Refusal) -> Self {
        match r {
            vantage_control::invariants::Refusal::Invalid { field, reason } => {
                ApiError::Invalid { field, reason }
            }
            vantage_control::invariants::Refusal::Conflict(m) => ApiError::Conflict(m),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        if status.is_server_error() {
            tracing::warn!(error = %self, "request failed");
        }
        let (field, reason) = match &self {
            ApiError::Invalid { field, reason } => (Some(field.clone()), reason.clone()),
            other => (None, other.to_string()),
        };
        let body = ErrorBody { error: ErrorDetail { status: status.as_u16(), field, reason } };
        let mut r = (status, Json(body)).into_response();
        if let ApiError::TooSoon { retry_after_s, .. } = &self {
            r.headers_mut()
                .insert(axum::http::header::RETRY_AFTER, axum::http::HeaderValue::from(*retry_after_s));
        }
        if status == StatusCode::UNAUTHORIZED {
            r.headers_mut().insert("www-authenticate", axum::http::HeaderValue::from_static("Bearer"));
        }
        r
    }
}

/// Middleware: a 4xx that is not already the JSON error shape — axum's own refusals of a body
/// that is not JSON, a wrong content type, an id in the path that is not a number, a method a
/// route does not take — becomes `{"error":{"status","field","reason"}}` in plain words.
pub(crate) async fn json_refusals(r: Response) -> Response {
    let status = r.status();
    let is_json = r
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with("application/json"));
    if !status.is_client_error() || is_json {
        return r;
    }
    let (parts, body) = r.into_parts();
    let text = axum::body::to_bytes(body, 64 << 10).await.unwrap_or_default();
    let (field, reason) = refusal_words(status, &String::from_utf8_lossy(&text));
    let body = ErrorBody { error: ErrorDetail { status: status.as_u16(), field, reason } };
    let mut out = (status, Json(body)).into_response();
    for name in
        [axum::http::header::ALLOW, axum::http::header::RETRY_AFTER, axum::http::header::WWW_AUTHENTICATE]
    {
        if let Some(v) = parts.headers.get(&name) {
            out.headers_mut().insert(name, v.clone());
        }
    }
    out
}

/// The field and plain reason of an extractor's text refusal.
fn refusal_words(status: StatusCode, text: &str) -> (Option<String>, String) {
    use vantage_core::plain::plain;
    let text = text.trim();
    let body = |reason: String| (Some("body".to_owned()), reason);
    if let Some(rest) = text.strip_prefix("Failed to parse the request body as JSON: ") {
        return body(format!("not valid JSON: {}", plain(rest)));
    }
    // serde_path_to_error's "field: reason", else the whole message under `default`.
    let named = |rest: &str, default: &str| match rest.split_once(": ") {
        Some((field, reason)) if !field.contains(' ') => (Some(field.to_owned()), plain(reason)),
        _ => (Some(default.to_owned()), plain(rest)),
    };
    if let Some(rest) = text.strip_prefix("Failed to deserialize the JSON body into the target type: ") {
        return named(rest, "body");
    }
    if text.starts_with("Expected request with `Content-Type: application/json`") {
        return body("send the body as JSON, with the header Content-Type: application/json".into());
    }
    if status == StatusCode::PAYLOAD_TOO_LARGE || text.contains("length limit exceeded") {
        return body("the body is too large".into());
    }
    if let Some(rest) = text.strip_prefix("Invalid URL: ") {
        // `Cannot parse `abc` to a `i64``, or with two parameters `Cannot parse value at index 1
        // with value `abc` to a `i64``.
        let value = rest
            .strip_prefix("Cannot parse ")
            .and_then(|r| r.split_once("` to a `"))
            .map(|(v, _)| v.split_once(" with value `").map_or(v.trim_start_matches('`'), |(_, v)| v));
        let reason = match value {
            Some(value) => format!("{value:?} is not an id (ids are whole numbers)"),
            None => plain(rest),
        };
        return (Some("path".to_owned()), reason);
    }
    if let Some(rest) = text.strip_prefix("Failed to deserialize query string: ") {
        return named(rest, "query");
    }
    if status == StatusCode::METHOD_NOT_ALLOWED {
        return (None, "this route does not take that method (the Allow header lists those it takes)".into());
    }
    let reason =
        if text.is_empty() { status.canonical_reason().unwrap_or("refused").to_owned() } else { plain(text) };
    (None, reason)
}

/// Refuses a body that is not a JSON object where one belongs: serde would read an array as
/// a struct's fields in order (`[]` as every default).
pub(crate) fn object_body(v: &serde_json::Value) -> Result<(), ApiError> {
    if v.is_object() { Ok(()) } else { Err(ApiError::invalid("body", "must be a JSON object of fields")) }
}

/// Parses a JSON body into `T`, naming the field of a type error or unknown key. A body is
/// an object of fields: anything else (an array, which serde would read as the fields in
/// order) is refused on `body`.
pub(crate) fn parse_json<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> Result<T, ApiError> {
    object_body(&value)?;
    Ok(vantage_core::from_value(value)?)
}

/// A JSON body of at most `max` bytes that may be left out (then the defaults), parsed as
/// [`parse_json`] does.
pub(crate) fn optional_json<T: Default + serde::de::DeserializeOwned>(
    body: &[u8],
    max: usize,
) -> Result<T, ApiError> {
    if body.len() > max {
        return Err(ApiError::TooLarge(format!("at most {max} bytes")));
    }
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    let v: serde_json::Value = serde_json::from_slice(body).map_err(|e| {
        ApiError::invalid("body", format!("not JSON: {}", vantage_core::plain::plain(&e.to_string())))
    })?;
    parse_json(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use vantage_core::model::Cluster;

    #[test]
    fn extractor_refusals_in_plain_words() {
        for (status, text, field, reason) in [
            (
                StatusCode::BAD_REQUEST,
                "Failed to parse the request body as JSON: expected value at line 1 column 1",
                Some("body"),
                "not valid JSON: expected value",
            ),
            (
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "Expected request with `Content-Type: application/json`",
                Some("body"),
                "send the body as JSON, with the header Content-Type: application/json",
            ),
            (
                StatusCode::BAD_REQUEST,
                "Invalid URL: Cannot parse `abc` to a `i64`",
                Some("path"),
                r#""abc" is not an id (ids are whole numbers)"#,
            ),
            (
                StatusCode::BAD_REQUEST,
                "Invalid URL: Cannot parse value at index 1 with value `x1` to a `i64`",
                Some("path"),
                r#""x1" is not an id (ids are whole numbers)"#,
            ),
            (
                StatusCode::BAD_REQUEST,
                r#"Failed to deserialize query string: limit: invalid digit found in string"#,
                Some("limit"),
                "invalid digit found in string",
            ),
            (
                StatusCode::METHOD_NOT_ALLOWED,
                "",
                None,
                "this route does not take that method (the Allow header lists those it takes)",
            ),
        ] {
            let (f, r) = refusal_words(status, text);
            assert_eq!((f.as_deref(), r.as_str()), (field, reason), "{text}");
        }
    }

    #[test]
    fn json_errors_name_the_field() {
        let e =
            parse_json::<Cluster>(serde_json::json!({"name": "c", "domain": "cdn.example.net", "ttl": 0}))
                .unwrap_err();
        assert_eq!(e.to_string(), "ttl: must be between 1 and 86400, got 0");
        let e =
            parse_json::<Cluster>(serde_json::json!({"name": "c", "domain": "cdn.example.net", "tll": 3}))
                .unwrap_err();
        assert_eq!(e.to_string(), "tll: unknown field");
        let e =
            parse_json::<Cluster>(serde_json::json!({"name": "c", "domain": "cdn.example.net", "ttl": "x"}))
                .unwrap_err();
        assert_eq!(e.to_string(), r#"ttl: must be a whole number, got the text "x""#);
        let e = parse_json::<Cluster>(
            serde_json::json!({"name": "c", "domain": "cdn.example.net", "listeners": [{"port": 80, "protocol": "gopher"}]}),
        )
        .unwrap_err();
        assert!(e.to_string().starts_with("listeners[0].protocol: must be one of http, https"), "{e}");
    }
}
