//! Scheduling rules beyond their fields: the preview of every rule against every node it
//! looks at, and the nodes each rule acts on now.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::routing::get;
use vantage_control::view::View;
use vantage_core::ids::{ClusterId, RuleId};

use super::{Api, Op};
use crate::app::App;
use crate::error::ApiError;
use crate::support::now;
use crate::views::{Preview, PreviewItem};

pub(super) fn routes(api: &mut Api) {
    api.add(
        Op::get(
            "/v1/clusters/{id}/preview",
            "rules",
            "Preview every rule against every node it looks at (writes nothing)",
        )
        .answers::<Preview>(),
        get(preview_route),
    );
}

async fn preview_route(State(app): State<Arc<App>>, Path(id): Path<i64>) -> Result<Json<Preview>, ApiError> {
    let at = now();
    let cluster = ClusterId(id);
    let (rows, lines) = app
        .owner()
        .read(move |c, _| c.preview(cluster, at))
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("Cluster {id} not found")))?;
    let items = rows
        .into_iter()
        .map(|row| PreviewItem { outcome_text: row.preview.outcome.to_string(), row })
        .collect();
    Ok(Json(Preview { at, items, lines }))
}

/// The nodes a rule acts on now (active or recovering), by name, from its cluster's last pass.
pub(super) fn acting_on(core: &View, cluster: ClusterId, rule: i64) -> Vec<String> {
    let c = &core.config;
    let mut names: Vec<String> = core
        .snapshots
        .get(&cluster)
        .into_iter()
        .flat_map(|s| s.rules.iter())
        .filter(|r| r.rule == RuleId(rule) && r.status.in_effect())
        .filter_map(|r| c.nodes.get(&r.node.0).map(|n| n.value.node.name.clone()))
        .collect();
    names.sort();
    names
}
