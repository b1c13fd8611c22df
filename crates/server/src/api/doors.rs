//! Doors (SPEC §6): `GET /v1/doors/select` for scripts and other front doors, and the public
//! redirect `GET /go/{tenant}/{path…}`. Both choose from the published view's doors snapshot,
//! never waiting for the control core, and answer only the mirror chosen.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::extract::{ConnectInfo, Query, Request, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
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

/// The door's route templates, which are also its requests' `route` label.
const GO_PATH: &str = "/go/{tenant}/{*path}";
const GO_SLASH: &str = "/go/{tenant}/";
const GO: &str = "/go/{tenant}";

/// The public redirect, outside `/v1` and its authentication.
pub(crate) fn public() -> Router<Arc<App>> {
    Router::new().route(GO_PATH, get(go)).route(GO_SLASH, get(go)).route(GO, get(go))
}

/// The route template a `GET` of `path` matches among [`public`]'s, or `None` when it is
/// no door's (another method, another path, nothing after `/go/`): what lets the public face
/// answer a door without its router, and count it under the same label. As in the router, a
/// tenant may be empty (`/go//x`: no such tenant).
pub(crate) fn route_of(method: &Method, path: &str) -> Option<&'static str> {
    let rest = path.strip_prefix("/go/").filter(|r| !r.is_empty() && method == Method::GET)?;
    Some(match rest.split_once('/').map(|(_, path)| path) {
        None => GO,
        Some("") => GO_SLASH,
        Some(_) => GO_PATH,
    })
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
    let visit = Visit {
        tenant: q.tenant,
        exclude_regions: regions(q.exclude_regions.as_deref()),
        place: q.client.and_then(|ip| app.place(ip)),
        client: q.client,
    };
    let m = doors.choose(&visit, rand::random()).map_err(|e| match e {
        NoMirror::UnknownTenant => ApiError::NotFound(e.reason().into()),
        NoMirror::NoneEligible => ApiError::Unavailable(e.reason().into()),
    })?;
    Ok(Json(DoorChoice { host: m.host.clone(), url: doors.location(m, "", None) }))
}

fn forwarded_for(h: &HeaderMap) -> Option<&str> {
    h.get("x-forwarded-for").and_then(|v| v.to_str().ok())
}

async fn go(
    State(app): State<Arc<App>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    req: Request,
) -> Response {
    redirect(&app, req.uri(), req.headers(), peer)
}

/// `/go/{tenant}/{path…}`: 302 to the chosen mirror's base with the path and query appended
/// (an empty path: the base itself); without an eligible mirror, 302 to the tenant's fallback
/// origin when it has one (said in `X-Vantage-Door: fallback`), else 503 with a plain reason;
/// 404 for a tenant that does not exist. The visitor's own region is excluded by the
/// settings' default (the visitor is the peer, or `X-Forwarded-For` from trusted proxies);
/// the query belongs to the visitor and is passed on whole.
pub(crate) fn redirect(app: &App, uri: &Uri, headers: &HeaderMap, peer: SocketAddr) -> Response {
    let rest = uri.path().strip_prefix("/go/").unwrap_or_default();
    let (tenant, path) = rest.split_once('/').unwrap_or((rest, ""));
    let query = uri.query();
    let doors = app.doors();
    let client = doors.settings.client(peer.ip(), forwarded_for(headers));
    let visit = Visit {
        tenant: Some(tenant.to_owned()),
        exclude_regions: Vec::new(),
        client: Some(client),
        place: app.place(client),
    };
    let label = tenant_label(&doors, tenant);
    // A visit for a tenant that exists counts for its region, served or not.
    if doors.tenants.contains_key(tenant) {
        crate::demand::count(app, &doors, (client, visit.place.as_ref()), crate::demand::Source::Door);
    }
    let found = |location: String| ([(header::LOCATION, location)], [(header::CACHE_CONTROL, "no-store")]);
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

#[cfg(test)]
mod tests {
    use axum::extract::MatchedPath;

    use super::*;

    /// The public face answers doors without the router: it must take exactly the requests
    /// the router's door routes take, under the same templates.
    #[tokio::test]
    async fn a_door_is_recognised_as_the_router_would_match_it() {
        let echo = get(|p: MatchedPath| async move { p.as_str().to_owned() });
        let router: Router =
            Router::new().route(GO_PATH, echo.clone()).route(GO_SLASH, echo.clone()).route(GO, echo);
        let paths = [
            "/go",
            "/go/",
            "/go//",
            "/go//x",
            "/go/t",
            "/go/t/",
            "/go/t//",
            "/go/t/a/b.deb",
            "/go/t%20x/a",
            "/go/t/a/",
            "/gone/t/a",
            "/steer/t",
        ];
        for path in paths {
            for method in [Method::GET, Method::POST, Method::HEAD] {
                let req = Request::builder().method(method.clone()).uri(path).body(axum::body::Body::empty());
                let resp = tower::ServiceExt::oneshot(router.clone(), req.unwrap()).await.unwrap();
                let routed = resp.status() == StatusCode::OK;
                let body = axum::body::to_bytes(resp.into_body(), 1 << 10).await.unwrap();
                let matched =
                    (routed && method == Method::GET).then(|| String::from_utf8(body.to_vec()).unwrap());
                assert_eq!(route_of(&method, path).map(str::to_owned), matched, "{method} {path}");
            }
        }
    }
}
