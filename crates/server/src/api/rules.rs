//! Scheduling rules beyond their fields: the preview of every rule against every node it
//! looks at, and the nodes each rule acts on now.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::routing::{get, post};
use serde_json::Value;
use vantage_control::config::RuleRecord;
use vantage_control::invariants::Invariants;
use vantage_control::view::View;
use vantage_core::ids::{ClusterId, RuleId};
use vantage_core::rules::{Rule, RuleInput};

use super::{Api, Op};
use crate::app::App;
use crate::error::{ApiError, parse_json};
use crate::support::now;
use crate::views::{DraftPreview, Preview, PreviewItem};

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
    api.add(
        Op::post(
            "/v1/clusters/{id}/preview",
            "rules",
            "Preview a new rule as drafted against every node it would look at (writes nothing)",
        )
        .takes::<RuleInput>()
        .answers::<DraftPreview>(),
        post(|State(app): State<Arc<App>>, Path(id): Path<i64>, Json(body): Json<Value>| async move {
            draft_route(&app, ClusterId(id), None, body).await
        }),
    );
    api.add(
        Op::post(
            "/v1/clusters/{id}/rules/{child}/preview",
            "rules",
            "Preview a rule's fields as drafted, in its place, against every node it would look at \
             (writes nothing)",
        )
        .takes::<RuleInput>()
        .answers::<DraftPreview>(),
        post(
            |State(app): State<Arc<App>>, Path((id, child)): Path<(i64, i64)>, Json(body): Json<Value>| async move {
                draft_route(&app, ClusterId(id), Some(RuleId(child)), body).await
            },
        ),
    );
}

/// A draft previewed as a save would check it (its fields, then its name and references
/// among the cluster's objects), in place of the rule it edits or as a new one (id 0: no
/// rule has it, so its states start fresh).
async fn draft_route(
    app: &App,
    cluster: ClusterId,
    replaces: Option<RuleId>,
    body: Value,
) -> Result<Json<DraftPreview>, ApiError> {
    // Where before what: a draft for no cluster is not found, whatever it holds.
    let missing = move |config: &vantage_control::config::Config| !config.clusters.contains_key(&cluster.0);
    if missing(&app.config()) {
        return Err(ApiError::NotFound(format!("Cluster {cluster} not found")));
    }
    let rule: Rule = parse_json(body)?;
    let at = now();
    let items = app
        .owner()
        .read(move |c, _| {
            let config = c.config();
            if missing(&config) {
                return Err(ApiError::NotFound(format!("Cluster {cluster} not found")));
            }
            if let Some(r) =
                replaces.filter(|r| config.rules.get(&r.0).is_none_or(|s| s.value.cluster != cluster))
            {
                return Err(ApiError::NotFound(format!("Rule {r} not found")));
            }
            let id = replaces.unwrap_or(RuleId(0));
            RuleRecord { cluster, rule: rule.clone() }.check(id.0, &config)?;
            Ok(c.preview_draft(cluster, (id, rule), at).unwrap_or_default())
        })
        .await??;
    let items = items
        .into_iter()
        .map(|row| PreviewItem { outcome_text: row.preview.outcome.to_string(), row })
        .collect();
    Ok(Json(DraftPreview { at, items }))
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
