//! The admin API under `/v1`: routes, authentication, request metrics and the OpenAPI
//! document, which is built from the same table that registers the routes so it lists
//! every route there is.

mod admin;
mod agents;

pub(crate) use admin::create_admin_token;
mod history;
mod objects;
mod rules;

use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::extract::{MatchedPath, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, get};
use utoipa::openapi::path::{HttpMethod, OperationBuilder};
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{ComponentsBuilder, InfoBuilder, OpenApi, OpenApiBuilder, Paths};

use crate::app::{Actor, App};
use crate::auth::sha256_hex;
use crate::error::ApiError;
use crate::ui::{Sessions, session};

/// The route table: axum routes and their documentation side by side.
struct Api {
    router: Router<Arc<App>>,
    paths: Paths,
}

impl Api {
    fn new() -> Self {
        Api { router: Router::new(), paths: Paths::new() }
    }

    /// Adds one route with its method, summary and tag.
    fn add(
        &mut self,
        method: HttpMethod,
        path: &'static str,
        tag: &str,
        summary: &str,
        route: MethodRouter<Arc<App>>,
    ) {
        let router = std::mem::take(&mut self.router);
        self.router = router.route(path, route);
        let op = OperationBuilder::new()
            .summary(Some(summary))
            .tag(tag)
            .operation_id(Some(format!(
                "{}_{}",
                method_name(&method),
                path.trim_start_matches("/v1/").replace(['/', '{', '}', '-'], "_")
            )))
            .security(SecurityRequirement::new("bearer", Vec::<String>::new()))
            .build();
        self.paths.add_path_operation(path, vec![method], op);
    }

    fn openapi(paths: Paths) -> OpenApi {
        let components = ComponentsBuilder::new()
            .security_scheme("bearer", SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)))
            .build();
        OpenApiBuilder::new()
            .info(
                InfoBuilder::new()
                    .title("Vantage admin API")
                    .version(env!("CARGO_PKG_VERSION"))
                    .description(Some("Every route needs `Authorization: Bearer vta_…` (the web UI sends its session cookie with `X-Vantage-UI: 1` instead). Errors answer `{\"error\": {\"status\", \"field\", \"reason\"}}`."))
                    .build(),
            )
            .paths(paths)
            .components(Some(components))
            .build()
    }
}

fn method_name(m: &HttpMethod) -> &'static str {
    match m {
        HttpMethod::Get => "get",
        HttpMethod::Post => "post",
        HttpMethod::Put => "put",
        HttpMethod::Delete => "delete",
        HttpMethod::Patch => "patch",
        HttpMethod::Head => "head",
        HttpMethod::Options => "options",
        HttpMethod::Trace => "trace",
    }
}

/// The whole HTTP application: `/v1` (authenticated), `/metrics`, `/healthz`, `/readyz`.
pub(crate) fn router(app: Arc<App>) -> Router {
    let mut api = Api::new();
    objects::routes(&mut api);
    admin::routes(&mut api);
    rules::routes(&mut api);
    history::routes(&mut api);
    let doc = Arc::new(Api::openapi(std::mem::take(&mut api.paths)));
    let sessions = Arc::new(Sessions::default());
    let auth = Auth { app: app.clone(), sessions: sessions.clone() };
    let v1 = std::mem::take(&mut api.router)
        .route("/v1/openapi.json", get(move || std::future::ready(axum::Json(doc.as_ref().clone()))))
        .route_layer(middleware::from_fn_with_state(auth, require_admin));
    // The web UI reads through the same routes, with the same authentication.
    let ui = crate::ui::router(app.clone(), sessions, v1.clone().with_state(app.clone()));
    Router::new()
        .merge(v1)
        .merge(ui)
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(ready))
        .fallback(|| async { ApiError::NotFound("no such route".into()) })
        .layer(middleware::from_fn_with_state(app.clone(), count_requests))
        .with_state(app)
}

/// What `require_admin` checks against.
#[derive(Debug, Clone)]
struct Auth {
    app: Arc<App>,
    sessions: Arc<Sessions>,
}

/// Every `/v1` route needs a valid admin bearer token, or a web UI session cookie together
/// with `X-Vantage-UI: 1` (a cross-site form can send the cookie but not the header); the
/// actor (the admin token's name either way) is attached to the request.
async fn require_admin(State(Auth { app, sessions }): State<Auth>, mut req: Request, next: Next) -> Response {
    let presented = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    if presented.is_none()
        && let Some(id) = session::cookie(req.headers())
    {
        if !session::has_ui_header(req.headers()) {
            return ApiError::Unauthorized(
                "a web UI session counts only with the header X-Vantage-UI: 1; scripts use Authorization: Bearer vta_…".into(),
            )
            .into_response();
        }
        let Some(user) = sessions.resolve(id, &app.config()) else {
            return ApiError::Unauthorized("the web UI session has ended; log in again".into())
                .into_response();
        };
        req.extensions_mut().insert(Actor(format!("admin:{}", user.name)));
        return next.run(req).await;
    }
    let Some(token) = presented else {
        return ApiError::Unauthorized("an admin token is required (Authorization: Bearer vta_…)".into())
            .into_response();
    };
    let hash = sha256_hex(token.as_bytes());
    let config = app.config();
    let Some(t) = config.admin_tokens.values().find(|t| t.value.sha256 == hash) else {
        return ApiError::Unauthorized("the admin token is not valid".into()).into_response();
    };
    req.extensions_mut().insert(Actor(format!("admin:{}", t.value.name)));
    next.run(req).await
}

async fn count_requests(State(app): State<Arc<App>>, req: Request, next: Next) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |p| p.as_str().to_owned());
    let method = req.method().as_str().to_owned();
    let started = Instant::now();
    let resp = next.run(req).await;
    app.metrics().request(&route, &method, resp.status().as_u16());
    tracing::debug!(%route, %method, status = resp.status().as_u16(), ms = started.elapsed().as_millis() as u64, "request");
    resp
}

async fn metrics(State(app): State<Arc<App>>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")],
        app.metrics().render(),
    )
}

async fn ready(State(app): State<Arc<App>>) -> Response {
    match app.store().ping().await {
        Ok(()) => (StatusCode::OK, "ready\n").into_response(),
        Err(e) => (StatusCode::SERVICE_UNAVAILABLE, format!("store unavailable: {e}\n")).into_response(),
    }
}
