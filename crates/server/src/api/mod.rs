//! The admin API under `/v1`: routes, authentication, request metrics and the OpenAPI
//! document, which is built from the same table that registers the routes so it lists
//! every route there is.

mod admin;
mod agents;
mod availability;
mod clients;

pub(crate) use admin::create_admin_token;
pub(crate) use history::Range;
pub(crate) use objects::written::Written;
pub(crate) mod doors;
mod events;
mod history;
pub(crate) mod mirrors;
pub(crate) mod monitors;
mod objects;
mod revisions;
mod rules;
mod status;
mod steer;
mod webhooks;

use std::sync::Arc;
use tokio::time::Instant;

use axum::Router;
use axum::extract::{MatchedPath, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, get};
use utoipa::ToSchema;
use utoipa::openapi::path::{HttpMethod, OperationBuilder, Parameter, ParameterBuilder, ParameterIn};
use utoipa::openapi::request_body::RequestBodyBuilder;
use utoipa::openapi::schema::{
    ArrayBuilder, KnownFormat, Object, ObjectBuilder, OneOfBuilder, Schema, SchemaFormat, Type,
};
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{
    ComponentsBuilder, ContentBuilder, InfoBuilder, OpenApi, OpenApiBuilder, Paths, Ref, RefOr, Required,
    ResponseBuilder,
};

use vantage_control::config::Config;

use crate::app::{Actor, App};
use crate::auth::sha256_hex;
use crate::error::ApiError;
use crate::ui::{Sessions, session};
use crate::views::ErrorBody;

/// The route table: axum routes and their documentation side by side, with the schema of
/// every body each operation takes and answers.
struct Api {
    router: Router<Arc<App>>,
    paths: Paths,
    schemas: Schemas,
}

/// What one operation takes and answers, for the document.
pub(super) struct Op {
    method: HttpMethod,
    path: &'static str,
    tag: &'static str,
    summary: String,
    takes: Option<Body>,
    /// Every answer but the refusals: (status, description, body).
    answers: Vec<(&'static str, &'static str, Body)>,
}

/// The document's named schemas, as they are collected.
type Schemas = Vec<(String, RefOr<Schema>)>;

/// Registers a type's schema and answers a reference to it.
type Component = fn(&mut Schemas) -> RefOr<Schema>;

/// A body's schema: a named component, a list of one, a stream of server-sent events each
/// carrying one of two (as its `data`), or nothing.
enum Body {
    Named(Component),
    List(Component),
    Events(Component, Component),
    Empty,
}

/// Registers `T` (and what it refers to) as components; returns a reference to it.
fn component<T: ToSchema>(schemas: &mut Schemas) -> RefOr<Schema> {
    schemas.push((T::name().into_owned(), T::schema()));
    T::schemas(schemas);
    RefOr::Ref(Ref::from_schema_name(T::name()))
}

impl Body {
    fn schema(&self, schemas: &mut Schemas) -> Option<RefOr<Schema>> {
        match self {
            Body::Named(f) => Some(f(schemas)),
            Body::List(f) => Some(
                ObjectBuilder::new()
                    .property("items", ArrayBuilder::new().items(f(schemas)))
                    .required("items")
                    .into(),
            ),
            Body::Events(f, g) => Some(OneOfBuilder::new().item(f(schemas)).item(g(schemas)).into()),
            Body::Empty => None,
        }
    }

    /// Its media type.
    fn media_type(&self) -> &'static str {
        match self {
            Body::Events(..) => "text/event-stream",
            _ => "application/json",
        }
    }
}

impl Op {
    fn new(method: HttpMethod, path: &'static str, tag: &'static str, summary: impl Into<String>) -> Op {
        Op {
            method,
            path,
            tag,
            summary: summary.into(),
            takes: None,
            answers: vec![("200", "Success", Body::Empty)],
        }
    }
    pub(super) fn get(path: &'static str, tag: &'static str, summary: impl Into<String>) -> Op {
        Op::new(HttpMethod::Get, path, tag, summary)
    }
    pub(super) fn post(path: &'static str, tag: &'static str, summary: impl Into<String>) -> Op {
        Op::new(HttpMethod::Post, path, tag, summary)
    }
    pub(super) fn put(path: &'static str, tag: &'static str, summary: impl Into<String>) -> Op {
        Op::new(HttpMethod::Put, path, tag, summary)
    }
    pub(super) fn patch(path: &'static str, tag: &'static str, summary: impl Into<String>) -> Op {
        Op::new(HttpMethod::Patch, path, tag, summary)
    }
    pub(super) fn delete(path: &'static str, tag: &'static str, summary: impl Into<String>) -> Op {
        Op { answers: vec![("204", "Done", Body::Empty)], ..Op::new(HttpMethod::Delete, path, tag, summary) }
    }
    /// It takes a JSON body of type `T`.
    pub(super) fn takes<T: ToSchema>(self) -> Op {
        Op { takes: Some(Body::Named(component::<T>)), ..self }
    }
    /// It answers 200 with a `T`.
    pub(super) fn answers<T: ToSchema>(self) -> Op {
        Op { answers: vec![("200", "Success", Body::Named(component::<T>))], ..self }
    }
    /// It answers 200 with `{"items": [T…]}`.
    pub(super) fn lists<T: ToSchema>(self) -> Op {
        Op { answers: vec![("200", "Success", Body::List(component::<T>))], ..self }
    }
    /// It answers 200 with server-sent events, each event's data a `T` or (a notice among
    /// them) a `U`.
    pub(super) fn streams<T: ToSchema, U: ToSchema>(self) -> Op {
        Op { answers: vec![("200", "Success", Body::Events(component::<T>, component::<U>))], ..self }
    }
    /// It answers 201 with the `T` it created.
    pub(super) fn creates<T: ToSchema>(self) -> Op {
        Op { answers: vec![("201", "Created", Body::Named(component::<T>))], ..self }
    }
    /// It answers 201 with the `T` it created, or 200 with the `T` it replaced (a `PUT` by name).
    pub(super) fn puts<T: ToSchema>(self) -> Op {
        let answers = vec![
            ("200", "Replaced", Body::Named(component::<T>)),
            ("201", "Created", Body::Named(component::<T>)),
        ];
        Op { answers, ..self }
    }
    /// It answers 202 with a `T`: the work has begun, and goes on after the answer.
    pub(super) fn accepts<T: ToSchema>(self) -> Op {
        Op { answers: vec![("202", "Accepted", Body::Named(component::<T>))], ..self }
    }
    /// It may answer 503 with the error body, when `why` (nothing can serve the request now).
    pub(super) fn unavailable_when(mut self, why: &'static str) -> Op {
        self.answers.push(("503", why, Body::Named(component::<ErrorBody>)));
        self
    }
}

/// The parameters in `path` (`{id}`, `{host}`): ids are whole numbers, the rest text.
fn path_parameters(path: &str) -> Vec<Parameter> {
    path.split('/')
        .filter_map(|part| part.strip_prefix('{')?.strip_suffix('}'))
        .map(|name| {
            let schema = match name {
                "id" | "child" | "from" | "to" => ObjectBuilder::new()
                    .schema_type(Type::Integer)
                    .format(Some(SchemaFormat::KnownFormat(KnownFormat::Int64))),
                _ => ObjectBuilder::new().schema_type(Type::String),
            };
            ParameterBuilder::new()
                .name(name)
                .parameter_in(ParameterIn::Path)
                .required(Required::True)
                .schema(Some(schema))
                .build()
        })
        .collect()
}

/// utoipa writes a struct with a `#[serde(flatten)]` field as `allOf: [flattened, own
/// fields]`; when the flattened type refuses unknown fields (`additionalProperties: false`),
/// each part refuses the other's fields and no value matches. Every such schema becomes one
/// object with the fields of all its parts.
fn merge_flattened(schemas: &mut Schemas) {
    let by_name: std::collections::BTreeMap<String, RefOr<Schema>> = schemas.iter().cloned().collect();
    for (_, schema) in schemas.iter_mut() {
        if matches!(schema, RefOr::T(Schema::AllOf(_)))
            && let Some(merged) = as_object(schema, &by_name)
        {
            *schema = RefOr::T(Schema::Object(merged));
        }
    }
}

/// `schema` as one object: itself, what it refers to, or its `allOf` parts merged.
fn as_object(
    schema: &RefOr<Schema>,
    by_name: &std::collections::BTreeMap<String, RefOr<Schema>>,
) -> Option<Object> {
    match schema {
        RefOr::Ref(r) => {
            as_object(by_name.get(r.ref_location.strip_prefix("#/components/schemas/")?)?, by_name)
        }
        RefOr::T(Schema::Object(o)) => Some(o.clone()),
        RefOr::T(Schema::AllOf(all)) => {
            let mut merged =
                ObjectBuilder::new().schema_type(Type::Object).description(all.description.clone()).build();
            for part in &all.items {
                let o = as_object(part, by_name)?;
                merged.properties.extend(o.properties);
                merged.required.extend(o.required);
                if o.additional_properties.is_some() {
                    merged.additional_properties = o.additional_properties;
                }
            }
            Some(merged)
        }
        _ => None,
    }
}

/// The JSON Schema (2020-12) of `T`, from the same schemas the OpenAPI document holds: its
/// named parts under `$defs`, flattened structs merged as there.
pub(crate) fn json_schema<T: ToSchema>() -> serde_json::Value {
    let mut schemas = Schemas::new();
    let root = component::<T>(&mut schemas);
    merge_flattened(&mut schemas);
    let defs: serde_json::Map<String, serde_json::Value> =
        schemas.into_iter().map(|(name, s)| (name, serde_json::to_value(s).unwrap_or_default())).collect();
    let doc = serde_json::json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": T::name(),
        "$ref": serde_json::to_value(root).unwrap_or_default()["$ref"],
        "$defs": defs,
    });
    // The OpenAPI document's references point into its components; here they point to `$defs`.
    let text = doc.to_string().replace("#/components/schemas/", "#/$defs/");
    serde_json::from_str(&text).unwrap_or(doc)
}

fn json_content(schema: RefOr<Schema>) -> utoipa::openapi::Content {
    ContentBuilder::new().schema(Some(schema)).build()
}

impl Api {
    fn new() -> Self {
        Api { router: Router::new(), paths: Paths::new(), schemas: Vec::new() }
    }

    /// Adds one route with its documentation.
    fn add(&mut self, op: Op, route: MethodRouter<Arc<App>>) {
        let router = std::mem::take(&mut self.router);
        self.router = router.route(op.path, route);
        let mut b = OperationBuilder::new()
            .summary(Some(op.summary.clone()))
            .tag(op.tag)
            .operation_id(Some(format!(
                "{}_{}",
                method_name(&op.method),
                op.path.trim_start_matches("/v1/").replace(['/', '{', '}', '-'], "_")
            )))
            .security(SecurityRequirement::new("bearer", Vec::<String>::new()))
            .parameters(Some(path_parameters(op.path)));
        if let Some(schema) = op.takes.as_ref().and_then(|t| t.schema(&mut self.schemas)) {
            let body = RequestBodyBuilder::new()
                .content("application/json", json_content(schema))
                .required(Some(Required::True))
                .build();
            b = b.request_body(Some(body));
        }
        for (status, description, answer) in &op.answers {
            let mut ok = ResponseBuilder::new().description(*description);
            if let Some(schema) = answer.schema(&mut self.schemas) {
                ok = ok.content(answer.media_type(), json_content(schema));
            }
            b = b.response(*status, ok.build());
        }
        let error = component::<ErrorBody>(&mut self.schemas);
        let refused = ResponseBuilder::new()
            .description("Refused: the error names the field and the reason")
            .content("application/json", json_content(error))
            .build();
        b = b.response("4XX", refused);
        self.paths.add_path_operation(op.path, vec![op.method], b.build());
    }

    fn openapi(paths: Paths, mut schemas: Schemas) -> OpenApi {
        merge_flattened(&mut schemas);
        let components = ComponentsBuilder::new()
            .security_scheme("bearer", SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)))
            .schemas_from_iter(schemas)
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

/// Refuses a query parameter a route does not take, naming it and what the route takes.
pub(crate) fn known_params(
    q: &std::collections::BTreeMap<String, String>,
    known: &[&str],
    usage: &str,
) -> Result<(), ApiError> {
    match q.keys().find(|k| !known.contains(&k.as_str())) {
        Some(k) => Err(ApiError::invalid(k.clone(), format!("unknown parameter; use {usage}"))),
        None => Ok(()),
    }
}

/// The admin listener's application: `/v1` and the UI (authenticated), `/metrics`
/// (authenticated unless `metrics_public`), `/healthz`, `/readyz` — and the public face's
/// `/go`, `/steer` and status pages unless it has a listener of its own.
pub(crate) fn router(app: Arc<App>) -> Router {
    let mut api = table();
    let doc = Arc::new(Api::openapi(std::mem::take(&mut api.paths), std::mem::take(&mut api.schemas)));
    let sessions = Arc::new(Sessions::default());
    let auth = Auth { app: app.clone(), sessions: sessions.clone() };
    let v1 = std::mem::take(&mut api.router)
        .route("/v1/openapi.json", get(move || std::future::ready(axum::Json(doc.as_ref().clone()))))
        .route_layer(middleware::from_fn_with_state(auth, require_admin))
        .layer(middleware::map_response(crate::error::json_refusals));
    // The web UI reads through the same routes, with the same authentication.
    let ui = crate::ui::router(app.clone(), sessions.clone(), v1.clone().with_state(app.clone()));
    let scrape = Router::new().route("/metrics", get(metrics));
    let scrape = if app.settings().metrics_public {
        scrape
    } else {
        // The fleet's every node, address and prober is listed there: for admin tokens only
        // (a read-only one is enough; Prometheus sends it with `authorization`).
        scrape.route_layer(middleware::from_fn_with_state(Auth { app: app.clone(), sessions }, require_admin))
    };
    let mut admin = Router::new().merge(v1).merge(ui).merge(scrape).route("/readyz", get(ready));
    if app.settings().public_listen.is_none() {
        admin = admin.merge(doors::public()).merge(steer::public()).merge(status::public());
    }
    served(admin, app)
}

/// The public listener's application: `/go`, `/steer`, status pages and `/healthz`, nothing
/// else.
pub(crate) fn public_router(app: Arc<App>) -> Router {
    served(Router::new().merge(doors::public()).merge(steer::public()).merge(status::public()), app)
}

/// `routes` with `/healthz`, the plain 404 of every other path and the request metrics.
fn served(routes: Router<Arc<App>>, app: Arc<App>) -> Router {
    routes
        .route("/healthz", get(|| async { "ok\n" }))
        .fallback(|| async { ApiError::NotFound("no such route".into()) })
        .layer(middleware::from_fn_with_state(app.clone(), count_requests))
        .with_state(app)
}

/// Every `/v1` route with its documentation.
fn table() -> Api {
    let mut api = Api::new();
    objects::routes(&mut api);
    admin::routes(&mut api);
    rules::routes(&mut api);
    history::routes(&mut api);
    events::routes(&mut api);
    revisions::routes(&mut api);
    mirrors::routes(&mut api);
    doors::routes(&mut api);
    clients::routes(&mut api);
    monitors::routes(&mut api);
    webhooks::routes(&mut api);
    availability::routes(&mut api);
    api
}

/// The admin token a request was authenticated with (a web UI session's too): what a
/// request that outlives its authentication, an event stream, checks again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TokenId(pub(crate) i64);

/// What the caller's token (or web UI session) may do, for the routes that answer a
/// read-only caller differently.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Access {
    /// It may read and plan, and change nothing.
    pub(crate) read_only: bool,
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
        if let Err(e) = may(user.read_only, &req, &user.name) {
            return e.into_response();
        }
        req.extensions_mut().insert(Actor(format!("admin:{}", user.name)));
        req.extensions_mut().insert(TokenId(user.token));
        req.extensions_mut().insert(Access { read_only: user.read_only });
        return next.run(req).await;
    }
    let Some(token) = presented else {
        return ApiError::Unauthorized("an admin token is required (Authorization: Bearer vta_…)".into())
            .into_response();
    };
    let hash = sha256_hex(token.as_bytes());
    let config = app.config();
    let Some((id, t)) = config.admin_tokens.iter().find(|(_, t)| t.value.sha256 == hash) else {
        return ApiError::Unauthorized("the admin token is not valid".into()).into_response();
    };
    if let Err(e) = may(t.value.read_only, &req, &t.value.name) {
        return e.into_response();
    }
    req.extensions_mut().insert(Actor(format!("admin:{}", t.value.name)));
    req.extensions_mut().insert(TokenId(*id));
    req.extensions_mut().insert(Access { read_only: t.value.read_only });
    next.run(req).await
}

/// A read-only token may read (`GET`, `HEAD`), plan a fleet file and preview a drafted rule
/// (which write nothing: a review job runs `ctl plan` with such a token, and a read-only
/// session sees what a rule would do), and nothing else.
fn may(read_only: bool, req: &Request, name: &str) -> Result<(), ApiError> {
    use axum::http::Method;
    let method = req.method();
    let reads = method == Method::GET || method == Method::HEAD;
    let path = req.uri().path();
    let previews = path.starts_with("/v1/clusters/") && path.ends_with("/preview");
    let plans = method == Method::POST && (path == "/v1/fleet/plan" || previews);
    if read_only && !reads && !plans {
        return Err(ApiError::Forbidden(format!(
            "the admin token {name:?} is read-only: it may look at everything and change nothing"
        )));
    }
    Ok(())
}

/// The method as a metric label: the standard ones by name, any other as `other`, so that
/// made-up methods cannot grow the metrics without bound.
fn method_label(m: &axum::http::Method) -> &'static str {
    use axum::http::Method;
    match *m {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        _ => "other",
    }
}

async fn count_requests(State(app): State<Arc<App>>, req: Request, next: Next) -> Response {
    let matched = req.extensions().get::<MatchedPath>().cloned();
    let route = matched.as_ref().map_or("unmatched", MatchedPath::as_str);
    let method = method_label(req.method());
    let started = Instant::now();
    let resp = next.run(req).await;
    app.metrics().request(route.to_owned().into(), method, resp.status().as_u16());
    tracing::debug!(%route, %method, status = resp.status().as_u16(), ms = started.elapsed().as_millis() as u64, "request");
    resp
}

async fn metrics(State(app): State<Arc<App>>) -> Result<Response, ApiError> {
    // One scrape at a time: the families set at each scrape (mirrors, monitors, availability,
    // webhooks, round trips) are cleared or pruned and refilled, and a second scrape rendering
    // meanwhile would read them half done. Taken before a blocking thread's turn, so that a
    // waiting scrape does not hold a turn a list could use.
    static SCRAPING: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    let one = SCRAPING.lock().await;
    off_worker(move || {
        let _one = one;
        scrape(&app)
    })
    .await
}

/// A scrape: the families set from the view, then rendered (tens of thousands of series at
/// 10,000 nodes: a blocking thread's work, see [`off_worker`]).
fn scrape(app: &App) -> Response {
    let now = crate::support::now();
    let core = app.view();
    // The figures that need every latest result were made by the core's owner (at most a
    // second ago, or at the last pass or change); the rest is read from the view.
    let figures = &core.figures;
    // The fleet's mirrors, monitors, certificates and webhook deliveries are the lease
    // holder's to export, as the rest of the fleet's figures are (`Fleet::evaluator`).
    let exported = if figures.fleet.evaluator { core.config.clone() } else { Arc::new(Config::default()) };
    app.metrics().mirrors().set(&exported, core.mirrors.book());
    app.metrics().monitors().set(&exported, &core.monitors, now);
    app.metrics().availability().set(&exported, &core.availability, now);
    // Only the lease holder delivers alerts: a follower's deliveries would be a row of zeros.
    app.metrics().set_webhooks(&exported);
    let config = &core.config;
    app.metrics().retain_rtt(|cluster, region| {
        config.clusters.values().any(|x| x.value.name == cluster) && config.has_region(region)
    });
    app.metrics().show_fleet(core.figures.clone(), now);
    app.metrics().set_results_waiting(app.intake().waiting());
    (
        [(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")],
        app.metrics().render(),
    )
        .into_response()
}

/// Runs `answer` on a blocking thread: an answer that takes tens of milliseconds of CPU (a
/// scrape, a list of 10,000 nodes) would otherwise hold one of the few async workers, and
/// every request behind it on that worker — a prober's report among them — would wait for it.
/// Two at a time (one per core): more would only share the same CPU, and a flood of scrapes
/// must not take a thread each.
pub(crate) async fn off_worker(
    answer: impl FnOnce() -> Response + Send + 'static,
) -> Result<Response, ApiError> {
    static MAKING: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(2);
    let turn = MAKING.acquire().await.map_err(|e| ApiError::Internal(e.to_string()))?;
    // The turn is the job's: a request given up (a deadline, a client gone) leaves its job
    // running, and still counted.
    tokio::task::spawn_blocking(move || {
        let _turn = turn;
        answer()
    })
    .await
    .map_err(|e| ApiError::Internal(format!("the answer could not be made: {e}")))
}

/// How long `/readyz` waits for the store. A readiness probe gives up after a second
/// (Kubernetes' default), and `ctl status` reads it first: a store that has not answered by
/// then (a database host gone silent, whose connections neither answer nor fail) is not ready.
const READY_WITHIN: std::time::Duration = std::time::Duration::from_secs(1);

async fn ready(State(app): State<Arc<App>>) -> Response {
    let unavailable = |why: String| (StatusCode::SERVICE_UNAVAILABLE, format!("store unavailable: {why}\n"));
    match tokio::time::timeout(READY_WITHIN, app.store().ping()).await {
        Ok(Ok(())) => (StatusCode::OK, "ready\n").into_response(),
        Ok(Err(e)) => unavailable(e.to_string()).into_response(),
        Err(_) => unavailable(format!("no answer within {} s", READY_WITHIN.as_secs())).into_response(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

    /// Every `$ref` in `v`.
    fn refs<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
        match v {
            Value::Object(m) => {
                if let Some(Value::String(r)) = m.get("$ref") {
                    out.push(r);
                }
                m.values().for_each(|x| refs(x, out));
            }
            Value::Array(a) => a.iter().for_each(|x| refs(x, out)),
            _ => {}
        }
    }

    fn document() -> Value {
        let mut api = table();
        serde_json::to_value(Api::openapi(std::mem::take(&mut api.paths), std::mem::take(&mut api.schemas)))
            .unwrap()
    }

    /// What schemathesis found (`crates/cli/tests/it/openapi.rs`): path parameters declared,
    /// every status a handler answers with declared, flattened views as one object, one
    /// schema per name.
    #[test]
    fn the_document_declares_what_is_served() {
        let doc = document();
        for (path, item) in doc["paths"].as_object().unwrap() {
            for (method, op) in item.as_object().unwrap() {
                let declared: Vec<&str> = op["parameters"]
                    .as_array()
                    .map(|p| {
                        p.iter().filter(|p| p["in"] == "path").map(|p| p["name"].as_str().unwrap()).collect()
                    })
                    .unwrap_or_default();
                let used: Vec<&str> =
                    path.split('/').filter_map(|s| s.strip_prefix('{')?.strip_suffix('}')).collect();
                assert_eq!(declared, used, "{method} {path}");
            }
        }
        let id = &doc["paths"]["/v1/clusters/{id}/lines/{child}"]["get"]["parameters"];
        assert_eq!(
            (id[0]["schema"]["type"].as_str(), id[1]["schema"]["type"].as_str()),
            (Some("integer"), Some("integer"))
        );
        let statuses = |path: &str, method: &str| -> Vec<String> {
            doc["paths"][path][method]["responses"].as_object().unwrap().keys().cloned().collect()
        };
        assert_eq!(statuses("/v1/mirrors/{host}", "put"), ["200", "201", "4XX"]);
        assert_eq!(statuses("/v1/mirrors/check", "post"), ["202", "4XX"]);
        assert_eq!(statuses("/v1/doors/select", "get"), ["200", "4XX", "503"]);
        let schemas = &doc["components"]["schemas"];
        for name in ["WebhookView", "CheckCreate", "RuleView", "PreviewItem"] {
            let s = &schemas[name];
            assert!(s["allOf"].is_null() && s["properties"].is_object(), "{name}: {s}");
        }
        let webhook = schemas["WebhookView"]["properties"].as_object().unwrap();
        assert!(["id", "created_at", "name", "url", "enabled"].iter().all(|f| webhook.contains_key(*f)));
        assert!(schemas["CheckCreate"]["properties"]["name"].is_object());
        assert_eq!(
            doc["paths"]["/v1/clusters/{id}/preview"]["get"]["responses"]["200"]["content"]["application/json"]
                ["schema"]["$ref"],
            "#/components/schemas/RulePreviews"
        );
        assert_eq!(schemas["RevisionView"]["properties"]["held"]["propertyNames"]["type"], "string");
    }

    /// Two types of one name would share one component, and one of them would be documented
    /// with the other's schema.
    #[test]
    fn one_schema_per_name() {
        let mut api = table();
        let mut seen = std::collections::BTreeMap::new();
        for (name, schema) in std::mem::take(&mut api.schemas) {
            let schema = serde_json::to_value(schema).unwrap();
            let first = seen.entry(name.clone()).or_insert_with(|| schema.clone());
            assert_eq!(*first, schema, "two schemas named {name}");
        }
    }

    #[test]
    fn made_up_methods_share_one_label() {
        let m = |s: &str| axum::http::Method::from_bytes(s.as_bytes()).unwrap();
        assert_eq!(method_label(&m("GET")), "GET");
        assert_eq!(method_label(&m("DELETE")), "DELETE");
        assert_eq!(method_label(&m("FOO1")), "other");
        assert_eq!(method_label(&m("FOO2")), "other");
    }

    /// The document has a schema for the body of every operation that takes one and for every
    /// answer with a body, and every reference in it resolves.
    #[test]
    fn every_operation_has_schemas_and_every_reference_resolves() {
        let doc = document();
        let mut operations = 0;
        for (path, item) in doc["paths"].as_object().unwrap() {
            for (method, op) in item.as_object().unwrap() {
                operations += 1;
                let responses = op["responses"].as_object().unwrap();
                let (status, ok) = responses.iter().find(|(s, _)| s.starts_with('2')).unwrap();
                if status != "204" {
                    let content = &ok["content"];
                    let schema = content.get("application/json").or(content.get("text/event-stream"));
                    assert!(schema.is_some_and(|c| c["schema"].is_object()), "{method} {path}: {ok}");
                }
                assert!(
                    responses["4XX"]["content"]["application/json"]["schema"].is_object(),
                    "{method} {path}"
                );
                if ["post", "put", "patch"].contains(&method.as_str()) {
                    let body = &op["requestBody"]["content"]["application/json"]["schema"];
                    assert!(body.is_object(), "{method} {path} takes a body without a schema");
                }
            }
        }
        assert!(operations >= 55, "{operations} operations");
        let schemas = doc["components"]["schemas"].as_object().unwrap();
        let mut all = Vec::new();
        refs(&doc, &mut all);
        for r in all {
            let name = r.strip_prefix("#/components/schemas/").unwrap();
            assert!(schemas.contains_key(name), "{r} does not resolve");
        }
        for name in [
            "NodeView",
            "ProberView",
            "ResultView",
            "ClusterInput",
            "ErrorBody",
            "DnsView",
            "MirrorList",
            "MirrorView",
            "MirrorInput",
            "DoorChoice",
            "CheckView",
            "MonitorInput",
            "MonitorView",
            "MonitorVerdictView",
            "MonitorHistory",
        ] {
            assert!(schemas.contains_key(name), "{name} is in the components");
        }
        for path in
            ["/v1/mirrors", "/v1/mirrors/{host}", "/v1/mirrors/check", "/v1/doors/select", "/v1/tenants"]
        {
            assert!(doc["paths"].get(path).is_some(), "{path} is documented");
        }
    }
}
