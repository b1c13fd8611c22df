//! Monitors over HTTP (SPEC §7): the verdict with each region's tuple, the history for
//! charts (per-region series straight from the time series, and the verdict changes), and the
//! public content-steering manifest `GET /steer/{monitor}`. Monitor objects themselves go
//! through the generic object routes (`/v1/monitors`).

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::{Path, Query, Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use vantage_control::monitors::EndpointKey;
use vantage_core::Timestamp;
use vantage_core::ids::MonitorId;
use vantage_core::monitor::{Monitor, global_verdict};

use super::history::Range;
use super::{Api, Op};
use crate::app::App;
use crate::error::ApiError;
use crate::support::now;
use crate::views::{
    MonitorHistory, MonitorPoint, MonitorVerdictView, RegionHistory, RegionVerdictView, SteeringManifest,
};

pub(super) fn routes(api: &mut Api) {
    api.add(
        Op::get(
            "/v1/monitors/{id}/verdict",
            "monitors",
            "A monitor's verdict, weights and each region's tuple",
        )
        .answers::<MonitorVerdictView>(),
        get(verdict),
    );
    api.add(
        Op::get(
            "/v1/monitors/{id}/history",
            "monitors",
            "A monitor's per-region probes, failures and segment age over time (range=15m|1h|24h|14d), and its verdict changes",
        )
        .answers::<MonitorHistory>(),
        get(history),
    );
}

/// The public steering route, outside `/v1` and its authentication: players call it.
pub(crate) fn public() -> Router<Arc<App>> {
    Router::new().route("/steer/{monitor}", get(steer))
}

fn find(app: &App, id: i64) -> Result<Monitor, ApiError> {
    app.config()
        .monitors
        .get(&id)
        .map(|m| m.value.clone())
        .ok_or_else(|| ApiError::NotFound(format!("Monitor {id} not found")))
}

/// A monitor's verdict as the API shows it.
pub(crate) fn verdict_view(app: &App, id: i64, m: &Monitor) -> MonitorVerdictView {
    let control = app.control();
    let state = control.monitors().state(MonitorId(id)).cloned().unwrap_or_default();
    let at = now();
    let interval_s = app.config().monitor_check(m).check.interval_s();
    let health = state.health(m, interval_s, at);
    let weights = global_verdict(m, &health);
    let regions = m
        .regions
        .iter()
        .zip(&health)
        .map(|(r, h)| {
            let w = state.windows.get(&r.region);
            let latest = w.and_then(|w| w.latest());
            RegionVerdictView {
                region: r.region.clone(),
                weight: r.weight,
                pathway: r.pathway().to_owned(),
                health: *h,
                failures: w.map_or(0, |w| w.failures()),
                probes: w.map_or(0, |w| w.len()),
                worst_age_s: w.and_then(|w| w.worst_age()),
                reachable: latest.map(|p| p.detail.reachable),
                manifest_valid: latest.map(|p| p.detail.manifest_valid),
                segment_fetchable: latest.map(|p| p.detail.segment_fetchable),
                segment_age_s: latest.and_then(|p| p.detail.segment_age_s),
                ttfb_ms: latest.and_then(|p| p.detail.ttfb_ms),
                at: latest.map(|p| p.at),
            }
        })
        .collect();
    MonitorVerdictView {
        id,
        name: m.name.clone(),
        global: state.verdict.map(|v| v.verdict.global),
        since: state.verdict.map(|v| v.at),
        down_weight: weights.down_weight_pct / 100.0,
        stale_weight: weights.stale_weight_pct / 100.0,
        reasons: weights.reasons,
        regions,
        pathway_priority: control.monitors().steering(m, MonitorId(id), interval_s, at),
    }
}

async fn verdict(
    State(app): State<Arc<App>>,
    Path(id): Path<i64>,
) -> Result<Json<MonitorVerdictView>, ApiError> {
    let m = find(&app, id)?;
    Ok(Json(verdict_view(&app, id, &m)))
}

/// Sums of one bucket of one region.
#[derive(Debug, Clone, Copy, Default)]
struct Acc {
    probes: u32,
    failures: u32,
    max_age_s: Option<f64>,
    ttfb_ms: f64,
    ttfb_n: u32,
}

async fn history(
    State(app): State<Arc<App>>,
    Path(id): Path<i64>,
    Query(q): Query<BTreeMap<String, String>>,
) -> Result<Json<MonitorHistory>, ApiError> {
    if let Some(k) = q.keys().find(|k| k.as_str() != "range") {
        return Err(ApiError::invalid(k.clone(), "unknown parameter; use range=15m|1h|24h|14d"));
    }
    let range = Range::parse(q.get("range").map_or("1h", String::as_str))?;
    let m = find(&app, id)?;
    let (since, until) = range.window(now());
    let width = range.bucket_ms();
    let mut regions = Vec::with_capacity(m.regions.len());
    for r in &m.regions {
        let mut buckets: BTreeMap<i64, Acc> = BTreeMap::new();
        for index in 0..r.endpoints.len() {
            let key = EndpointKey { monitor: MonitorId(id), region: r.region.clone(), index };
            for p in app.store().history(&key.to_string(), since, until).await? {
                let b = buckets.entry(p.at.millis().div_euclid(width) * width).or_default();
                b.probes += p.sent;
                b.failures += p.lost;
                if let Some(age) = p.segment_age_s {
                    b.max_age_s = Some(b.max_age_s.map_or(age, |a: f64| a.max(age)));
                }
                if let Some(us) = p.rtt_us {
                    b.ttfb_ms += f64::from(us) / 1000.0;
                    b.ttfb_n += 1;
                }
            }
        }
        let points = buckets
            .into_iter()
            .map(|(at, a)| MonitorPoint {
                at: Timestamp::from_millis(at),
                probes: a.probes,
                failures: a.failures,
                max_age_s: a.max_age_s,
                ttfb_ms: (a.ttfb_n > 0).then(|| a.ttfb_ms / f64::from(a.ttfb_n)),
            })
            .collect();
        regions.push(RegionHistory { region: r.region.clone(), points });
    }
    let verdicts = app
        .control()
        .monitors()
        .state(MonitorId(id))
        .map(|s| s.history.iter().filter(|v| v.at >= since).copied().collect())
        .unwrap_or_default();
    Ok(Json(MonitorHistory { range: range.name().into(), bucket_s: width / 1000, regions, verdicts }))
}

/// Path segment bytes that stay as they are: RFC 3986's unreserved characters.
const SEGMENT: &percent_encoding::AsciiSet =
    &percent_encoding::NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~');

/// The steering reload URI: this monitor's path with the query parameters a player sent,
/// less the `_HLS_` ones it adds itself, each decoded and encoded again. The name (decoded
/// from the path) and the parameters are the player's bytes: a space, `#`, `?` or stray `%`
/// in them would otherwise change what the URI says.
fn reload_uri(monitor: &str, query: Option<&str>) -> String {
    let mut uri = format!("/steer/{}", percent_encoding::utf8_percent_encode(monitor, SEGMENT));
    let pairs = url::form_urlencoded::parse(query.unwrap_or_default().as_bytes());
    let mut kept = url::form_urlencoded::Serializer::new(String::new());
    kept.extend_pairs(pairs.filter(|(k, _)| !k.starts_with("_HLS_")));
    let kept = kept.finish();
    if !kept.is_empty() {
        uri.push('?');
        uri.push_str(&kept);
    }
    uri
}

/// `GET /steer/{monitor}` (by name or id): the monitor's pathways, preferred first, for
/// players that poll every TTL, from the steering table (no lock on the control core). The `_HLS_pathway` and `_HLS_throughput` parameters players
/// add are accepted; the reload URI keeps every other parameter (a session id, say).
async fn steer(State(app): State<Arc<App>>, Path(monitor): Path<String>, req: Request) -> Response {
    let table = app.steering();
    let Some(found) = table.find(&monitor) else {
        return (StatusCode::NOT_FOUND, "no such monitor\n").into_response();
    };
    let reload_uri = reload_uri(&monitor, req.uri().query());
    let manifest =
        SteeringManifest { version: 1, ttl: found.ttl_s, reload_uri, pathway_priority: found.order.clone() };
    ([(header::CACHE_CONTROL, "no-store")], Json(manifest)).into_response()
}

#[cfg(test)]
mod tests {
    use super::reload_uri;

    /// What a player sends comes back encoded: the name, `#`, stray `%` and all.
    #[test]
    fn the_reload_uri_is_percent_encoded() {
        assert_eq!(reload_uri("live", Some("_HLS_pathway=a&session=abc")), "/steer/live?session=abc");
        assert_eq!(reload_uri("sec live#1", Some("x=%&_HLS_throughput=9")), "/steer/sec%20live%231?x=%25");
        assert_eq!(reload_uri("live", Some("a=b c&d=%26")), "/steer/live?a=b+c&d=%26");
        assert_eq!(reload_uri("live", None), "/steer/live");
    }
}
