//! A cluster's revisions: the list (newest first, with the names of the lines they mention) and
//! the difference between two of them — what each line gained and lost, and every revision in
//! between with its reason.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::routing::get;
use vantage_control::config::Config;
use vantage_control::events::line_changes;
use vantage_core::evaluate::Records;
use vantage_core::ids::{ClusterId, LineId};
use vantage_store::RevisionRow;

use super::{Api, Op};
use crate::app::App;
use crate::error::ApiError;
use crate::views::{LineName, RevisionDiff, RevisionView, Revisions};

/// Revisions a diff lists between its two ends, at most.
const BETWEEN: u32 = 1_000;

pub(super) fn routes(api: &mut Api) {
    api.add(
        Op::get("/v1/clusters/{id}/revisions", "clusters", "A cluster's revisions, newest first")
            .answers::<Revisions>(),
        get(revisions),
    );
    api.add(
        Op::get(
            "/v1/clusters/{id}/revisions/{from}/diff/{to}",
            "clusters",
            "What changed from one revision to a later one: each line's records gained and lost, and the revisions in between",
        )
        .answers::<RevisionDiff>(),
        get(diff),
    );
}

/// The names of a cluster's lines (and of the implicit default line), by id.
fn line_names(c: &Config, cluster: ClusterId) -> BTreeMap<String, LineName> {
    let mut m: BTreeMap<String, LineName> = c
        .lines_of(cluster)
        .map(|(id, l)| {
            let l = &l.value.line;
            let name = LineName {
                name: l.name.clone(),
                client_networks: l.client_networks.clone(),
                places: l.places.clone(),
            };
            (id.0.to_string(), name)
        })
        .collect();
    m.entry(vantage_core::evaluate::DEFAULT_LINE.0.to_string())
        .or_insert_with(|| LineName { name: "default".into(), ..LineName::default() });
    m
}

fn view(r: RevisionRow) -> RevisionView {
    RevisionView {
        cluster: ClusterId(r.cluster),
        number: r.number,
        at: r.at,
        reason: r.reason,
        // Written by this server from these types; a row that no longer reads shows empty.
        records: serde_json::from_value(r.records).unwrap_or_default(),
        held: serde_json::from_value(r.held).unwrap_or_default(),
        publish: serde_json::from_value(r.publish).unwrap_or_default(),
    }
}

fn cluster_of(c: &Config, id: i64) -> Result<(), ApiError> {
    if c.clusters.contains_key(&id) {
        Ok(())
    } else {
        Err(ApiError::NotFound(format!("Cluster {id} not found")))
    }
}

async fn revisions(
    State(app): State<Arc<App>>,
    Path(id): Path<i64>,
    Query(q): Query<BTreeMap<String, String>>,
) -> Result<Json<Revisions>, ApiError> {
    let c = app.config();
    cluster_of(&c, id)?;
    let limit = match q.get("limit") {
        Some(l) => l
            .parse::<u32>()
            .map_err(|_| ApiError::invalid("limit", format!("must be a whole number, got {l:?}")))?,
        None => 50,
    };
    let rows = app.store().revisions(id, limit.min(1000)).await?;
    let items = rows.into_iter().map(view).collect();
    Ok(Json(Revisions { items, lines: line_names(&c, ClusterId(id)) }))
}

async fn diff(
    State(app): State<Arc<App>>,
    Path((id, from, to)): Path<(i64, u32, u32)>,
) -> Result<Json<RevisionDiff>, ApiError> {
    let c = app.config();
    cluster_of(&c, id)?;
    if to <= from {
        return Err(ApiError::invalid("to", format!("must come after revision {from}, got {to}")));
    }
    let one = async |n: u32| {
        app.store()
            .revision(id, n)
            .await?
            .map(view)
            .ok_or_else(|| ApiError::NotFound(format!("Cluster {id} has no revision {n}")))
    };
    let (before, after) = (one(from).await?, one(to).await?);
    let names = line_names(&c, ClusterId(id));
    let name =
        |l: LineId| names.get(&l.0.to_string()).map_or_else(|| format!("line {l}"), |n| n.name.clone());
    let lines = line_changes(Some(&before.records), &after.records, name);
    let revisions =
        app.store().revisions_between(id, from, to, BETWEEN).await?.into_iter().map(view).collect();
    let records = |r: &Records| r.all.len();
    Ok(Json(RevisionDiff {
        cluster: ClusterId(id),
        from: before.number,
        to: after.number,
        from_at: before.at,
        to_at: after.at,
        records_before: records(&before.records),
        records_after: records(&after.records),
        lines,
        revisions,
    }))
}
