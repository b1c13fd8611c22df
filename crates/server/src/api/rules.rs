//! Scheduling rules beyond their fields: the preview of every rule against every node it
//! looks at, and the nodes each rule acts on now.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::routing::get;
use serde_json::{Value, json};
use utoipa::openapi::path::HttpMethod;
use vantage_core::evaluate::preview;
use vantage_core::ids::{ClusterId, RuleId};

use super::Api;
use crate::app::{App, now};
use crate::error::ApiError;
use crate::evaluator::ViewParts;

pub(super) fn routes(api: &mut Api) {
    api.add(
        HttpMethod::Get,
        "/v1/clusters/{id}/preview",
        "rules",
        "Preview every rule against every node it looks at (writes nothing)",
        get(preview_route),
    );
}

async fn preview_route(State(app): State<Arc<App>>, Path(id): Path<i64>) -> Result<Json<Value>, ApiError> {
    let c = app.config();
    let cluster = c.clusters.get(&id).ok_or_else(|| ApiError::NotFound(format!("Cluster {id} not found")))?;
    let parts = ViewParts::gather(&app, &c, ClusterId(id))
        .ok_or_else(|| ApiError::NotFound(format!("Cluster {id} not found")))?;
    let state = app.rule_states(ClusterId(id));
    let at = now();
    let items: Vec<Value> = preview(&parts.view(&c, &cluster.value, None), &state, at)
        .into_iter()
        .map(|row| {
            let mut v = serde_json::to_value(&row).unwrap_or_default();
            v["outcome_text"] = json!(row.preview.outcome.to_string());
            v
        })
        .collect();
    Ok(Json(json!({ "at": at, "items": items })))
}

/// The nodes a rule acts on now (active or recovering), by name.
pub(super) fn acting_on(app: &App, cluster: ClusterId, rule: i64) -> Vec<String> {
    let c = app.config();
    let state = app.rule_states(cluster);
    let mut names: Vec<String> = state
        .rules
        .iter()
        .filter(|((r, _), s)| *r == RuleId(rule) && s.status.in_effect())
        .filter_map(|((_, n), _)| c.nodes.get(&n.0).map(|n| n.value.node.name.clone()))
        .collect();
    names.sort();
    names
}
