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
            ApiError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
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

/// Refuses a body that is not a JSON object where one belongs: serde would read an array as
/// a struct's fields in order (`[]` as every default).
pub(crate) fn object_body(v: &serde_json::Value) -> Result<(), ApiError> {
    if v.is_object() { Ok(()) } else { Err(ApiError::invalid("body", "must be a JSON object of fields")) }
}

/// Parses a JSON body into `T`, naming the field of a type error or unknown key.
pub(crate) fn parse_json<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> Result<T, ApiError> {
    Ok(vantage_core::from_value(value)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use vantage_core::model::Cluster;

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
        assert!(e.to_string().starts_with("ttl: invalid type"), "{e}");
        let e = parse_json::<Cluster>(
            serde_json::json!({"name": "c", "domain": "cdn.example.net", "listeners": [{"port": 80, "protocol": "gopher"}]}),
        )
        .unwrap_err();
        assert!(e.to_string().starts_with("listeners[0].protocol: unknown variant"), "{e}");
    }
}
