//! The web UI, served by `vantage serve` on the API's port under `/ui`: server-rendered pages
//! that read the admin API in process (see [`client`]), and a small script that makes changes
//! with `fetch()` calls to the same `/v1` routes. Login takes an admin token and opens a
//! session (see [`session`]); every page and action needs one. Every asset is served from
//! here; nothing comes from another host.

mod chart;
mod client;
mod format;
pub(crate) use format::{bar, esc};
mod pages;
pub(crate) mod session;
mod views;

use std::sync::Arc;

use axum::extract::{Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::{Extension, Form, Router};
use serde::Deserialize;
use vantage_store::NewAudit;

use crate::app::App;
use crate::auth::sha256_hex;
use crate::support::now;
use session::SessionUser;
pub(crate) use session::Sessions;

/// What the UI's handlers share.
#[derive(Debug)]
struct Ui {
    sessions: Arc<Sessions>,
    /// The `/v1` router, for reading the API in process.
    api: Router,
}

/// A logged-in visitor (attached to every page request).
#[derive(Debug, Clone)]
struct Visitor {
    session: String,
    user: SessionUser,
}

/// The UI's routes. `api` is the `/v1` router with its state; `sessions` are shared with its
/// authentication.
pub(crate) fn router(app: Arc<App>, sessions: Arc<Sessions>, api: Router) -> Router<Arc<App>> {
    let ui = Arc::new(Ui { sessions, api });
    let pages = Router::new()
        .route("/ui", get(pages::overview))
        .route("/ui/", get(|| async { Redirect::to("/ui") }))
        .route("/ui/regions", get(pages::regions))
        .route("/ui/probers", get(pages::probers))
        .route("/ui/probers/{id}", get(pages::prober))
        .route("/ui/clusters", get(pages::clusters))
        .route("/ui/clusters/{id}", get(pages::cluster))
        .route("/ui/clusters/{id}/diff", get(pages::diff))
        .route("/ui/nodes/{id}", get(pages::node))
        .route("/ui/mirrors", get(pages::mirrors))
        .route("/ui/mirrors/{host}", get(pages::mirror))
        .route("/ui/monitors", get(pages::monitors))
        .route("/ui/monitors/{id}", get(pages::monitor))
        .route("/ui/tenants", get(pages::tenants))
        .route("/ui/checks", get(pages::checks))
        .route("/ui/audit", get(pages::audit))
        .route("/ui/alerts", get(pages::alerts))
        .route("/ui/maintenance", get(pages::maintenance))
        .route("/ui/status-pages", get(pages::status_pages))
        .route("/ui/tokens", get(pages::tokens))
        .route("/ui/logout", post(logout))
        .route("/ui/{*rest}", get(|| async { pages::not_found() }))
        .route_layer(middleware::from_fn_with_state(app, require_session));
    Router::new()
        .route("/", get(|| async { Redirect::to("/ui") }))
        .route("/ui/login", get(login_page).post(login))
        .route(
            "/ui/static/app.css",
            get(|h: HeaderMap| async move { asset(&h, &CSS, "text/css; charset=utf-8") }),
        )
        .route(
            "/ui/static/app.js",
            get(|h: HeaderMap| async move { asset(&h, &JS, "text/javascript; charset=utf-8") }),
        )
        .merge(pages)
        .layer(middleware::from_fn(security_headers))
        .layer(Extension(ui))
}

/// A page without a valid session goes to the login page, which comes back here afterwards.
async fn require_session(
    State(app): State<Arc<App>>,
    Extension(ui): Extension<Arc<Ui>>,
    mut req: Request,
    next: Next,
) -> Response {
    let found = session::cookie(req.headers())
        .and_then(|id| ui.sessions.resolve(id, &app.config()).map(|user| (id.to_owned(), user)));
    match found {
        Some((session, user)) => {
            req.extensions_mut().insert(Visitor { session, user });
            next.run(req).await
        }
        None => {
            let back = req.uri().path_and_query().map_or("/ui", |p| p.as_str());
            let to = if req.method() == axum::http::Method::GET && back != "/ui" {
                format!("/ui/login?next={}", pages::urlencode(back))
            } else {
                "/ui/login".to_owned()
            };
            Redirect::to(&to).into_response()
        }
    }
}

/// Pages and assets may only be framed, scripted and styled from this server.
async fn security_headers(req: Request, next: Next) -> Response {
    let mut resp = next.run(req).await;
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; \
             form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        ),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    if !h.contains_key(header::CACHE_CONTROL) {
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    resp
}

/// A static asset and its validator.
#[derive(Debug)]
struct Asset {
    body: &'static str,
    etag: std::sync::LazyLock<String>,
}

static CSS: Asset = Asset {
    body: include_str!("../../static/app.css"),
    etag: std::sync::LazyLock::new(|| {
        format!("\"{}\"", &sha256_hex(include_str!("../../static/app.css").as_bytes())[..16])
    }),
};
static JS: Asset = Asset {
    body: include_str!("../../static/app.js"),
    etag: std::sync::LazyLock::new(|| {
        format!("\"{}\"", &sha256_hex(include_str!("../../static/app.js").as_bytes())[..16])
    }),
};

fn asset(headers: &HeaderMap, a: &Asset, content_type: &'static str) -> Response {
    let etag = a.etag.as_str();
    let cache = [(header::CACHE_CONTROL, "no-cache"), (header::ETAG, etag)];
    if headers.get(header::IF_NONE_MATCH).is_some_and(|v| v.as_bytes() == etag.as_bytes()) {
        return (StatusCode::NOT_MODIFIED, cache).into_response();
    }
    (cache, [(header::CONTENT_TYPE, content_type)], a.body).into_response()
}

#[derive(Debug, Deserialize)]
struct LoginQuery {
    next: Option<String>,
}

#[derive(Debug, Deserialize)]
struct LoginForm {
    token: String,
    next: Option<String>,
}

/// Where to go after login: a UI path only (never another host).
fn safe_next(next: Option<&str>) -> String {
    match next {
        Some(n) if n.starts_with("/ui") && !n.contains('\\') && n.bytes().all(|b| b.is_ascii_graphic()) => {
            n.to_owned()
        }
        _ => "/ui".to_owned(),
    }
}

/// The login form; a visitor who is logged in already goes on at once.
async fn login_page(
    State(app): State<Arc<App>>,
    Extension(ui): Extension<Arc<Ui>>,
    headers: HeaderMap,
    Query(q): Query<LoginQuery>,
) -> Response {
    let next = safe_next(q.next.as_deref());
    if session::cookie(&headers).is_some_and(|id| ui.sessions.resolve(id, &app.config()).is_some()) {
        return Redirect::to(&next).into_response();
    }
    pages::login_page(&next, None, StatusCode::OK)
}

/// Checks the token; on success opens a session (audited as `ui.login`) and sets its cookie.
async fn login(
    State(app): State<Arc<App>>,
    Extension(ui): Extension<Arc<Ui>>,
    headers: HeaderMap,
    Form(f): Form<LoginForm>,
) -> Response {
    let next = safe_next(f.next.as_deref());
    if !same_origin(&headers) {
        return pages::login_page(
            &next,
            Some("The login form must be sent from this server's own page."),
            StatusCode::FORBIDDEN,
        );
    }
    let hash = sha256_hex(f.token.trim().as_bytes());
    let config = app.config();
    let Some((id, token)) = config.admin_tokens.iter().find(|(_, t)| t.value.sha256 == hash) else {
        tracing::info!("web UI login refused: not a valid admin token");
        return pages::login_page(&next, Some("That is not a valid admin token."), StatusCode::UNAUTHORIZED);
    };
    let session = ui.sessions.open(*id);
    audit(&app, &token.value.name, "ui.login", *id).await;
    let mut resp = Redirect::to(&next).into_response();
    if let Ok(v) = HeaderValue::from_str(&session::set_cookie(&session, app.settings().api_tls())) {
        resp.headers_mut().insert(header::SET_COOKIE, v);
    }
    resp
}

/// Ends the session (audited as `ui.logout`) and removes the cookie.
async fn logout(
    State(app): State<Arc<App>>,
    Extension(ui): Extension<Arc<Ui>>,
    Extension(v): Extension<Visitor>,
) -> Response {
    ui.sessions.close(&v.session);
    audit(&app, &v.user.name, "ui.logout", v.user.token).await;
    let mut resp = Redirect::to("/ui/login").into_response();
    if let Ok(c) = HeaderValue::from_str(&session::clear_cookie(app.settings().api_tls())) {
        resp.headers_mut().insert(header::SET_COOKIE, c);
    }
    resp
}

/// A browser sends `Origin` with a form post; one from another site is refused (with
/// `SameSite=Strict` the cookie would not come along anyway).
fn same_origin(headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get(header::ORIGIN).and_then(|o| o.to_str().ok()) else { return true };
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or_default();
    origin.split_once("://").is_some_and(|(_, rest)| rest == host)
}

async fn audit(app: &App, name: &str, action: &str, token: i64) {
    let entry = NewAudit {
        actor: format!("admin:{name}"),
        action: action.to_owned(),
        object: format!("admin_token:{token}"),
        metadata: serde_json::json!({}),
    };
    if let Err(e) = app.store().commit(&[], &[entry], now()).await {
        tracing::warn!(error = %e, action, "cannot audit a web UI session");
    }
}

/// Renders a template, or says why it could not be.
fn render<T: askama::Template>(t: &T) -> Response {
    match t.render() {
        Ok(html) => Html(html).into_response(),
        Err(e) => {
            tracing::warn!(error = %e, "a page failed to render");
            (StatusCode::INTERNAL_SERVER_ERROR, format!("the page failed to render: {e}")).into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn login_goes_back_to_ui_pages_only() {
        assert_eq!(safe_next(Some("/ui/nodes/3?range=24h")), "/ui/nodes/3?range=24h");
        assert_eq!(safe_next(Some("https://evil.example/")), "/ui");
        assert_eq!(safe_next(Some("//evil.example/ui")), "/ui");
        assert_eq!(safe_next(Some("/v1/regions")), "/ui");
        assert_eq!(safe_next(None), "/ui");
        assert_eq!(safe_next(Some("/ui\r\nSet-Cookie: x=1")), "/ui", "nothing that breaks a header");
    }

    #[test]
    fn cross_site_login_posts_are_refused() {
        let mut h = HeaderMap::new();
        h.insert(header::HOST, HeaderValue::from_static("127.0.0.1:8080"));
        assert!(same_origin(&h), "no Origin header: not a browser form post");
        h.insert(header::ORIGIN, HeaderValue::from_static("http://127.0.0.1:8080"));
        assert!(same_origin(&h));
        h.insert(header::ORIGIN, HeaderValue::from_static("https://evil.example"));
        assert!(!same_origin(&h));
    }
}
