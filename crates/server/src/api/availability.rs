//! Availability reports: for every address, node, line, mirror and monitor, the share of
//! time it served over the last 24 h, 7 d and 30 d (maintenance left out), the error budget
//! left against a target, its days and its incidents — read from the core's ledger.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::routing::get;
use vantage_control::availability::{Report, Tracked};
use vantage_core::ids::ClusterId;

use super::{Api, Op};
use crate::app::App;
use crate::error::ApiError;
use crate::support::now;
use crate::views::Items;

/// Days of bars a list gives each subject, and a subject's own report.
const LIST_DAYS: u32 = 30;
const OWN_DAYS: u32 = 90;

pub(super) fn routes(api: &mut Api) {
    api.add(
        Op::get(
            "/v1/availability",
            "availability",
            "Every subject's availability over 24 h, 7 d and 30 d, with 30 daily bars (kind=address|node|line|mirror|monitor, cluster=ID, target=PCT)",
        )
        .lists::<Report>(),
        get(list),
    );
    api.add(
        Op::get(
            "/v1/availability/{subject}",
            "availability",
            "One subject's availability (node:7, address:7%2F192.0.2.1, line:1%2F4, mirror:HOST, monitor:3; a / written %2F): windows, 90 daily bars, incidents (target=PCT)",
        )
        .answers::<Report>(),
        get(one),
    );
}

/// `target=PCT`: above 0, below 100.
fn target(q: &BTreeMap<String, String>) -> Result<Option<f64>, ApiError> {
    let Some(t) = q.get("target") else { return Ok(None) };
    match t.parse::<f64>() {
        Ok(v) if v > 0.0 && v < 100.0 => Ok(Some(v)),
        _ => {
            Err(ApiError::invalid("target", format!("a percentage above 0 and below 100 (99.9), got {t:?}")))
        }
    }
}

async fn list(
    State(app): State<Arc<App>>,
    Query(q): Query<BTreeMap<String, String>>,
) -> Result<Json<Items<Report>>, ApiError> {
    super::known_params(&q, &["kind", "cluster", "target"], "kind=, cluster=ID, target=PCT")?;
    let target = target(&q)?;
    let kind = q.get("kind").map(String::as_str);
    if let Some(k) = kind.filter(|k| !Tracked::KINDS.contains(k)) {
        return Err(ApiError::invalid("kind", format!("one of {}, got {k:?}", Tracked::KINDS.join(", "))));
    }
    let cluster = match q.get("cluster") {
        Some(c) => Some(ClusterId(
            c.parse().map_err(|_| ApiError::invalid("cluster", format!("a cluster id, got {c:?}")))?,
        )),
        None => None,
    };
    let core = app.view();
    let at = now();
    let items = (core.availability.all())
        .filter(|(s, _)| kind.is_none_or(|k| s.kind() == k) && s.exists(&core.config))
        .filter(|(s, _)| cluster.is_none_or(|c| s.cluster(&core.config) == Some(c)))
        .map(|(s, _)| core.availability.report(&core.config, &s, (target, LIST_DAYS, false), at))
        .collect();
    Ok(Json(Items { items }))
}

async fn one(
    State(app): State<Arc<App>>,
    Path(subject): Path<String>,
    Query(q): Query<BTreeMap<String, String>>,
) -> Result<Json<Report>, ApiError> {
    super::known_params(&q, &["target"], "target=PCT")?;
    let target = target(&q)?;
    let s: Tracked = subject.parse().map_err(|e: String| ApiError::invalid("subject", e))?;
    let core = app.view();
    if !s.exists(&core.config) {
        return Err(ApiError::NotFound(format!("no {} {subject}", s.kind())));
    }
    Ok(Json(core.availability.report(&core.config, &s, (target, OWN_DAYS, true), now())))
}
