//! Monitors over HTTP (SPEC §7): the verdict with each region's tuple, the history for
//! charts (per-region series straight from the time series, and the verdict changes). The
//! public content-steering manifests are `steer`'s. Monitor objects themselves go through the
//! generic object routes (`/v1/monitors`).

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::routing::get;
use vantage_control::monitors::EndpointKey;
use vantage_core::Timestamp;
use vantage_core::ids::MonitorId;
use vantage_core::monitor::Monitor;

use super::history::Range;
use super::{Api, Op};
use crate::app::App;
use crate::error::ApiError;
use crate::support::now;
use crate::views::{MonitorHistory, MonitorPoint, MonitorVerdictView, RegionHistory, RegionVerdictView};

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

fn find(app: &App, id: i64) -> Result<Monitor, ApiError> {
    app.config()
        .monitors
        .get(&id)
        .map(|m| Monitor::clone(&m.value))
        .ok_or_else(|| ApiError::NotFound(format!("Monitor {id} not found")))
}

/// A monitor's verdict as the API shows it.
pub(crate) fn verdict_view(app: &App, id: i64, m: &Monitor) -> MonitorVerdictView {
    // One published view for all of it; the verdict and its reasons as the core took them last,
    // computed here only before the first.
    let view = app.view();
    let state = view.monitors.state(MonitorId(id)).cloned().unwrap_or_default();
    let at = now();
    let interval_s = view.config.monitor_check(m).check.interval_s();
    let health = state.health(m, interval_s, at);
    let shares = view.monitors.weights(m, at);
    let weights =
        state.verdict.map_or_else(|| vantage_control::monitors::weighed(m, &health, &shares), |v| v.verdict);
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
    let table = app.steering();
    let steering = table.find(&id.to_string());
    MonitorVerdictView {
        id,
        name: m.name.clone(),
        global: state.verdict.map(|v| v.verdict.global),
        since: state.verdict.map(|v| v.at),
        down_weight: weights.down_weight_pct / 100.0,
        stale_weight: weights.stale_weight_pct / 100.0,
        reasons: weights.reasons,
        weighting: m.weighting,
        weights: shares,
        demand: {
            let day = view.monitors.demand(at);
            m.regions.iter().map(|r| day.get(&r.region).copied().unwrap_or(0)).collect()
        },
        regions,
        // The order players get, as published (with its hysteresis), not computed again.
        pathway_priority: steering.map(|s| s.everyone.order.clone()).unwrap_or_default(),
        pathway_priority_by_region: steering
            .map(|s| s.by_region.iter().map(|(r, o)| (r.clone(), o.order.clone())).collect())
            .unwrap_or_default(),
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
    super::known_params(&q, &["range"], "range=15m|1h|24h|14d")?;
    let range = Range::parse(q.get("range").map_or("1h", String::as_str))?;
    let m = find(&app, id)?;
    let (since, until) = range.window(now());
    let width = range.bucket_ms();
    let mut regions = Vec::with_capacity(m.regions.len());
    for r in &m.regions {
        let mut buckets: BTreeMap<i64, Acc> = BTreeMap::new();
        for index in 0..r.endpoints.len() {
            let key = EndpointKey { monitor: MonitorId(id), region: r.region.clone(), index, from: None };
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
        .view()
        .monitors
        .state(MonitorId(id))
        .map(|s| s.history.iter().filter(|v| v.at >= since).copied().collect())
        .unwrap_or_default();
    Ok(Json(MonitorHistory { range: range.name().into(), bucket_s: width / 1000, regions, verdicts }))
}
