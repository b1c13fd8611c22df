//! The public content-steering manifests (SPEC §7): `GET /steer/{monitor}` for HLS
//! (`PATHWAY-PRIORITY`) and `GET /steer/{monitor}/dash` for DASH-IF content steering
//! (`PATHWAY-PRIORITY`, which dash.js reads, and `SERVICE-LOCATION-PRIORITY` of DASH-IF's
//! draft), read from the steering table of the control core's published view (never waiting
//! for it). Players on other origins read them: CORS as configured, preflights answered.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{ConnectInfo, Path, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};

use crate::app::App;
use crate::views::SteeringManifest;

/// The steering routes, outside `/v1` and its authentication: players call them.
pub(crate) fn public() -> Router<Arc<App>> {
    Router::new()
        .route("/steer/{monitor}", get(hls).options(preflight))
        .route("/steer/{monitor}/dash", get(dash).options(preflight))
}

/// Which specification a manifest follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Hls,
    Dash,
}

impl Format {
    /// The prefix of the query parameters players of this format add themselves.
    fn player_prefix(self) -> &'static str {
        match self {
            Format::Hls => "_HLS_",
            Format::Dash => "_DASH_",
        }
    }

    /// The path after the monitor's.
    fn suffix(self) -> &'static str {
        match self {
            Format::Hls => "",
            Format::Dash => "/dash",
        }
    }
}

/// Path segment bytes that stay as they are: RFC 3986's unreserved characters.
const SEGMENT: &percent_encoding::AsciiSet =
    &percent_encoding::NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~');

/// The steering reload URI: this monitor's path with the query parameters a player sent,
/// less the ones its format's players add themselves, each decoded and encoded again. The
/// name (decoded from the path) and the parameters are the player's bytes: a space, `#`, `?`
/// or stray `%` in them would otherwise change what the URI says.
fn reload_uri(monitor: &str, format: Format, query: Option<&str>) -> String {
    let mut uri =
        format!("/steer/{}{}", percent_encoding::utf8_percent_encode(monitor, SEGMENT), format.suffix());
    let pairs = url::form_urlencoded::parse(query.unwrap_or_default().as_bytes());
    let mut kept = url::form_urlencoded::Serializer::new(String::new());
    kept.extend_pairs(pairs.filter(|(k, _)| !k.starts_with(format.player_prefix())));
    let kept = kept.finish();
    if !kept.is_empty() {
        uri.push('?');
        uri.push_str(&kept);
    }
    uri
}

/// The pathway a player says it is on (`_HLS_pathway`, `_DASH_pathway`).
fn current_pathway(format: Format, query: Option<&str>) -> Option<String> {
    let key = format!("{}pathway", format.player_prefix());
    url::form_urlencoded::parse(query.unwrap_or_default().as_bytes())
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v.into())
}

async fn hls(State(app): State<Arc<App>>, Path(monitor): Path<String>, req: Request) -> Response {
    steer(&app, &monitor, Format::Hls, &req)
}

async fn dash(State(app): State<Arc<App>>, Path(monitor): Path<String>, req: Request) -> Response {
    steer(&app, &monitor, Format::Dash, &req)
}

/// A monitor's pathways (by name or id), preferred first, for a player that reloads every TTL:
/// the published order, with the player's own pathway first while it is healthy and not
/// beaten by the margin. Cached for the TTL, as players reload.
fn steer(app: &App, monitor: &str, format: Format, req: &Request) -> Response {
    let table = app.steering();
    let cors = cors(app, req.headers());
    let Some(found) = table.find(monitor) else {
        return (StatusCode::NOT_FOUND, cors, "no such monitor\n").into_response();
    };
    // The player's address (behind trusted proxies, as the doors take it) counts for its
    // region, and picks the region's order where the monitor steers by the client's region.
    let doors = app.doors();
    let region = req.extensions().get::<ConnectInfo<SocketAddr>>().and_then(|ConnectInfo(peer)| {
        let forwarded = req.headers().get("x-forwarded-for").and_then(|v| v.to_str().ok());
        let client = doors.settings.client(peer.ip(), forwarded);
        crate::demand::count(app, &doors, (client, app.place(client).as_ref()), crate::demand::Source::Steer)
    });
    let query = req.uri().query();
    let reload_uri = reload_uri(monitor, format, query);
    let order = found.for_player(region, current_pathway(format, query).as_deref());
    let cache = [(header::CACHE_CONTROL, format!("max-age={}", found.ttl_s))];
    let service_location_priority = matches!(format, Format::Dash).then(|| order.clone());
    let manifest = SteeringManifest {
        version: 1,
        ttl: found.ttl_s,
        reload_uri,
        pathway_priority: order,
        service_location_priority,
    };
    (cors, cache, Json(manifest)).into_response()
}

/// `OPTIONS` before a cross-origin `GET`: 204 with what the player may send.
async fn preflight(State(app): State<Arc<App>>, req: Request) -> Response {
    let mut headers = cors(&app, req.headers());
    if headers.contains_key(header::ACCESS_CONTROL_ALLOW_ORIGIN) {
        headers.insert(header::ACCESS_CONTROL_ALLOW_METHODS, HeaderValue::from_static("GET, OPTIONS"));
        if let Some(asked) = req.headers().get(header::ACCESS_CONTROL_REQUEST_HEADERS) {
            headers.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, asked.clone());
        }
        headers.insert(header::ACCESS_CONTROL_MAX_AGE, HeaderValue::from_static("86400"));
    }
    (StatusCode::NO_CONTENT, headers).into_response()
}

/// The CORS headers for a request from `Origin`: `*` when every origin is allowed (the
/// default), the origin itself when it is listed, none otherwise.
fn cors(app: &App, request: &HeaderMap) -> HeaderMap {
    let mut out = HeaderMap::new();
    let allowed = &app.settings().steering_origins;
    if allowed.iter().any(|o| o == "*") {
        out.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
        return out;
    }
    out.insert(header::VARY, HeaderValue::from_static("Origin"));
    if let Some(origin) = request.get(header::ORIGIN)
        && origin.to_str().is_ok_and(|o| allowed.iter().any(|a| a == o))
    {
        out.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin.clone());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{Format, current_pathway, reload_uri};

    /// What a player sends comes back encoded: the name, `#`, stray `%` and all.
    #[test]
    fn the_reload_uri_is_percent_encoded() {
        let hls = |m, q| reload_uri(m, Format::Hls, q);
        assert_eq!(hls("live", Some("_HLS_pathway=a&session=abc")), "/steer/live?session=abc");
        assert_eq!(hls("sec live#1", Some("x=%&_HLS_throughput=9")), "/steer/sec%20live%231?x=%25");
        assert_eq!(hls("live", Some("a=b c&d=%26")), "/steer/live?a=b+c&d=%26");
        assert_eq!(hls("live", None), "/steer/live");
    }

    #[test]
    fn dash_players_keep_their_own_parameters_out_of_the_reload_uri() {
        let q = Some("_DASH_pathway=cdn-b&_DASH_throughput=5000&session=7");
        assert_eq!(reload_uri("live", Format::Dash, q), "/steer/live/dash?session=7");
        assert_eq!(current_pathway(Format::Dash, q).as_deref(), Some("cdn-b"));
        assert_eq!(current_pathway(Format::Hls, q), None);
        assert_eq!(current_pathway(Format::Hls, Some("_HLS_pathway=a%20b")).as_deref(), Some("a b"));
    }
}
