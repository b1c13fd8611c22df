//! How a page reads the admin API: the request goes through the `/v1` router in process, with
//! the visitor's session cookie and the UI header, exactly as the page's own `fetch()` calls
//! do. So the pages show what the API answers, under the same authentication.

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use serde::de::DeserializeOwned;
use tower::ServiceExt;

use crate::support::lock;

use super::session::{COOKIE, UI_HEADER};

/// Largest answer a page reads.
const MAX_BODY: usize = 64 * 1024 * 1024;

/// The API as one visitor sees it.
#[derive(Debug, Clone)]
pub(super) struct Client {
    api: Router,
    cookie: String,
    /// Why the store answered 503 to a [`get_stored`](Self::get_stored), for the page's
    /// banner.
    store_away: Arc<Mutex<Option<String>>>,
}

/// Why a page cannot be shown.
#[derive(Debug)]
pub(super) enum PageError {
    /// The session ended: log in again.
    LoggedOut,
    /// An object does not exist (404).
    NotFound(String),
    /// Anything else: a status and the API's reason.
    Failed(StatusCode, String),
}

impl Client {
    /// A client for the visitor with session `session`.
    pub(super) fn new(api: Router, session: &str) -> Self {
        Client { api, cookie: format!("{COOKIE}={session}"), store_away: Arc::default() }
    }

    /// `GET path` of what only the store keeps (stored revisions, events, history): while
    /// the store is away (503), nothing, and the reason is kept for the page to say that
    /// changes are paused. Everything else a page shows is read from memory.
    pub(super) async fn get_stored<T: DeserializeOwned + Default>(&self, path: &str) -> Result<T, PageError> {
        match self.get(path).await {
            Err(PageError::Failed(StatusCode::SERVICE_UNAVAILABLE, why)) => {
                *lock(&self.store_away) = Some(why);
                Ok(T::default())
            }
            other => other,
        }
    }

    /// Why the store could not be read for this page, if it could not.
    pub(super) fn store_away(&self) -> Option<String> {
        lock(&self.store_away).clone()
    }

    /// `GET path`, as JSON of type `T`.
    pub(super) async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, PageError> {
        let (status, body) = self.call(path).await?;
        if !status.is_success() {
            return Err(error(status, &body));
        }
        serde_json::from_slice(&body).map_err(|e| {
            PageError::Failed(StatusCode::BAD_GATEWAY, format!("GET {path} answered unreadable JSON: {e}"))
        })
    }

    /// `GET path` where a missing route or object is not an error.
    pub(super) async fn get_optional<T: DeserializeOwned>(&self, path: &str) -> Result<Option<T>, PageError> {
        match self.get(path).await {
            Ok(v) => Ok(Some(v)),
            Err(PageError::NotFound(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn call(&self, path: &str) -> Result<(StatusCode, axum::body::Bytes), PageError> {
        let req = Request::builder()
            .method(Method::GET)
            .uri(path)
            .header(header::COOKIE, &self.cookie)
            .header(UI_HEADER, "1")
            .body(Body::empty())
            .map_err(|e| PageError::Failed(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
        let resp = match self.api.clone().oneshot(req).await {
            Ok(r) => r,
            Err(never) => match never {},
        };
        let status = resp.status();
        let body = axum::body::to_bytes(resp.into_body(), MAX_BODY)
            .await
            .map_err(|e| PageError::Failed(StatusCode::BAD_GATEWAY, format!("GET {path}: {e}")))?;
        Ok((status, body))
    }
}

/// The API's error answer as a page error.
fn error(status: StatusCode, body: &[u8]) -> PageError {
    let reason = serde_json::from_slice::<crate::views::ErrorBody>(body)
        .map(|b| match b.error.field {
            Some(f) => format!("{f}: {}", b.error.reason),
            None => b.error.reason,
        })
        .unwrap_or_else(|_| status.canonical_reason().unwrap_or("error").to_owned());
    match status {
        StatusCode::UNAUTHORIZED => PageError::LoggedOut,
        StatusCode::NOT_FOUND => PageError::NotFound(reason),
        s => PageError::Failed(s, reason),
    }
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        let (status, message) = match self {
            PageError::LoggedOut => return Redirect::to("/ui/login").into_response(),
            PageError::NotFound(m) => (StatusCode::NOT_FOUND, m),
            PageError::Failed(s, m) => (s, m),
        };
        (status, super::pages::error_page(status, &message)).into_response()
    }
}
