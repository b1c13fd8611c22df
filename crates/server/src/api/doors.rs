//! Doors (SPEC §6): `GET /v1/doors/select` for scripts and other front doors, and the public
//! redirect `GET /go/{tenant}/{path…}`. Both choose from the doors snapshot without taking the
//! control core's lock, and answer only the mirror chosen.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::extract::{ConnectInfo, Query, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::Deserialize;
use vantage_control::mirrors::doors::{NoMirror, Visit};

use super::{Api, Op};
use crate::app::App;
use crate::error::ApiError;
use crate::views::DoorChoice;

pub(super) fn routes(api: &mut Api) {
    api.add(
        Op::get("/v1/doors/select", "mirrors", "Choose a mirror as a door would (tenant, exclude_regions)")
            .answers::<DoorChoice>()
            .unavailable_when("No mirror can take the visitor now (what a door answers with 503)"),
        get(select),
    );
}

/// The public redirect, outside `/v1` and its authentication.
pub(crate) fn public() -> Router<Arc<App>> {
    Router::new()
        .route("/go/{tenant}/{*path}", get(go))
        .route("/go/{tenant}/", get(go))
        .route("/go/{tenant}", get(go))
}

/// What `/v1/doors/select` takes.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SelectQuery {
    /// The tenant the visitor wants (absent: any mirror).
    tenant: Option<String>,
    /// Comma-separated region codes where the mirror must not be failing.
    exclude_regions: Option<String>,
    /// The visitor's address, to exclude mirrors failing in its region (absent: none).
    client: Option<IpAddr>,
}

fn regions(list: Option<&str>) -> Vec<String> {
    list.map(|l| l.split(',').map(str::trim).filter(|r| !r.is_empty()).map(str::to_owned).collect())
        .unwrap_or_default()
}

async fn select(
    State(app): State<Arc<App>>,
    Query(q): Query<SelectQuery>,
) -> Result<Json<DoorChoice>, ApiError> {
    let doors = app.doors();
    let visit =
        Visit { tenant: q.tenant, exclude_regions: regions(q.exclude_regions.as_deref()), client: q.client };
    let m = doors.choose(&visit, rand::random()).map_err(|e| match e {
        NoMirror::UnknownTenant => ApiError::NotFound(e.reason().into()),
        NoMirror::NoneEligible => ApiError::Unavailable(e.reason().into()),
    })?;
    Ok(Json(DoorChoice { host: m.host.clone(), url: doors.location(m, "", None) }))
}

/// The visitor behind the request: the peer, or `X-Forwarded-For` from trusted proxies.
fn visitor(app: &App, req: &Request) -> Option<IpAddr> {
    let peer = req.extensions().get::<ConnectInfo<SocketAddr>>()?.0.ip();
    let forwarded = forwarded_for(req.headers());
    Some(app.doors().settings.client(peer, forwarded))
}

fn forwarded_for(h: &HeaderMap) -> Option<&str> {
    h.get("x-forwarded-for").and_then(|v| v.to_str().ok())
}

async fn go(State(app): State<Arc<App>>, req: Request) -> Response {
    redirect(&app, req)
}

/// `/go/{tenant}/{path…}`: 302 to the chosen mirror's base with the path and query appended
/// (an empty path: the base itself); without an eligible mirror, 302 to the tenant's fallback
/// origin when it has one (said in `X-Vantage-Door: fallback`), else 503 with a plain reason;
/// 404 for a tenant that does not exist. The visitor's own region is excluded by the
/// settings' default; the query belongs to the visitor and is passed on whole.
fn redirect(app: &App, req: Request) -> Response {
    let rest = req.uri().path().strip_prefix("/go/").unwrap_or_default();
    let (tenant, path) = rest.split_once('/').unwrap_or((rest, ""));
    let query = req.uri().query();
    let visit =
        Visit { tenant: Some(tenant.to_owned()), exclude_regions: Vec::new(), client: visitor(app, &req) };
    let doors = app.doors();
    let label = tenant_label(&doors, tenant);
    let found =
        |location: String| [(header::LOCATION, location), (header::CACHE_CONTROL, "no-store".to_owned())];
    match doors.choose(&visit, rand::random()) {
        Ok(m) => {
            app.metrics().mirrors().redirect(label, "redirected");
            (StatusCode::FOUND, found(doors.location(m, path, query))).into_response()
        }
        Err(e @ NoMirror::UnknownTenant) => {
            app.metrics().mirrors().redirect(label, "unknown_tenant");
            (StatusCode::NOT_FOUND, [(header::CACHE_CONTROL, "no-store")], format!("{}\n", e.reason()))
                .into_response()
        }
        Err(e @ NoMirror::NoneEligible) => match doors.fallback(tenant, path, query) {
            Some(location) => {
                app.metrics().mirrors().redirect(label, "fallback");
                (StatusCode::FOUND, found(location), [("x-vantage-door", "fallback")]).into_response()
            }
            None => {
                app.metrics().mirrors().redirect(label, "none_eligible");
                (StatusCode::SERVICE_UNAVAILABLE, [(header::RETRY_AFTER, "30")], format!("{}\n", e.reason()))
                    .into_response()
            }
        },
    }
}

/// The metric label of a tenant: unknown names share one label, so visitors cannot grow the
/// metrics without bound.
fn tenant_label<'a>(doors: &'a vantage_control::mirrors::doors::Doors, tenant: &'a str) -> &'a str {
    if doors.tenants.contains_key(tenant) { tenant } else { "(unknown)" }
}
