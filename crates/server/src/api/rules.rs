//! Scheduling rules beyond their fields: the preview of every rule against every node it
//! looks at, and the nodes each rule acts on now.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::routing::get;
use serde_json::{Value, json};
use utoipa::openapi::path::HttpMethod;
use vantage_core::ids::{ClusterId, RuleId};

use super::Api;
use crate::app::App;
use crate::error::ApiError;
use crate::support::now;

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
    let at = now();
    let rows = app
        .control()
        .preview(ClusterId(id), at)
        .ok_or_else(|| ApiError::NotFound(format!("Cluster {id} not found")))?;
    let items: Vec<Value> = rows
        .into_iter()
        .map(|row| {
            let mut v = serde_json::to_value(&row).unwrap_or_default();
            v["outcome_text"] = json!(row.preview.outcome.to_string());
            v
        })
        .collect();
    Ok(Json(json!({ "at": at, "items": items })))
}

/// The nodes a rule acts on now (active or recovering), by name, from its cluster's last pass.
pub(super) fn acting_on(app: &App, cluster: ClusterId, rule: i64) -> Vec<String> {
    let c = app.config();
    let snapshot = app.control().snapshots().get(&cluster).cloned();
    let mut names: Vec<String> = snapshot
        .iter()
        .flat_map(|s| s.rules.iter())
        .filter(|r| r.rule == RuleId(rule) && r.status.in_effect())
        .filter_map(|r| c.nodes.get(&r.node.0).map(|n| n.value.node.name.clone()))
        .collect();
    names.sort();
    names
}
