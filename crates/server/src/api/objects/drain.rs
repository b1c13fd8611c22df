//! Drain and maintenance over HTTP: draining a node or a node group (with the pre-flight that
//! names the lines it would leave below their minimum), putting it back, and planning
//! maintenance windows.

use std::collections::BTreeSet;

use axum::body::Bytes;
use vantage_control::drain::Shortfall;
use vantage_control::maintenance::{Maintenance, MaintenanceCreate};
use vantage_core::ids::NodeId;

use super::*;
use crate::error::optional_json;
use crate::views::{DrainBody, MaintenanceView, UndrainBody};

/// Largest drain body.
const MAX_BODY: usize = 1024;
/// Windows kept at most, closed ones included (every alert and every pass looks at each).
const MAX_WINDOWS: usize = 1_000;

/// The refusal of a drain that would leave lines below their minimum, naming them.
fn short_of(what: &str, short: &[Shortfall]) -> ApiError {
    let lines: Vec<String> = short.iter().map(ToString::to_string).collect();
    ApiError::Conflict(format!(
        "draining {what}: {}; its backup groups or its all-down policy would answer. Drain with confirm (ctl … drain --confirm) to go ahead",
        lines.join("; ")
    ))
}

/// The pre-flight of draining `nodes` (node or group `what`) on the configuration `c` the
/// drain applies to: refused, naming the lines, unless `confirm`.
fn preflight(
    app: &App,
    c: &Config,
    what: &str,
    nodes: &BTreeSet<NodeId>,
    confirm: bool,
) -> Result<(), ApiError> {
    if confirm {
        return Ok(());
    }
    let short = vantage_control::drain::shortfalls(c, &app.view().snapshots, nodes, crate::support::now());
    if short.is_empty() { Ok(()) } else { Err(short_of(what, &short)) }
}

async fn drain_node(
    (State(app), Extension(actor)): Ctx,
    Path(id): Path<i64>,
    body: Bytes,
) -> Result<Json<NodeView>, ApiError> {
    let req: DrainBody = optional_json(&body, MAX_BODY)?;
    let name = find::<NodeRecord>(&app.config(), id, None)?.value.node.name.clone();
    let nodes = [NodeId(id)].into();
    let check = |c: &Config| preflight(&app, c, &format!("node {name}"), &nodes, req.confirm);
    change_checked::<NodeRecord>(&app, &actor, (id, json!({"drained": true}), None), keep_private, check)
        .await
}

async fn undrain_node(
    (State(app), Extension(actor)): Ctx,
    Path(id): Path<i64>,
    body: Bytes,
) -> Result<Json<NodeView>, ApiError> {
    optional_json::<UndrainBody>(&body, MAX_BODY)?;
    change::<NodeRecord>(&app, &actor, id, json!({"drained": false}), None, keep_private).await
}

async fn drain_group(
    (State(app), Extension(actor)): Ctx,
    Path((cluster, id)): Path<(i64, i64)>,
    body: Bytes,
) -> Result<Json<GroupView>, ApiError> {
    let req: DrainBody = optional_json(&body, MAX_BODY)?;
    let cluster = Some(ClusterId(cluster));
    let name = find::<GroupRecord>(&app.config(), id, cluster)?.value.group.name.clone();
    let check = |c: &Config| {
        let nodes = (c.nodes.iter())
            .filter(|(_, n)| n.value.node.group.0 == id)
            .map(|(nid, _)| NodeId(*nid))
            .collect();
        preflight(&app, c, &format!("group {name}"), &nodes, req.confirm)
    };
    change_checked::<GroupRecord>(&app, &actor, (id, json!({"drained": true}), cluster), keep_private, check)
        .await
}

async fn undrain_group(
    (State(app), Extension(actor)): Ctx,
    Path((cluster, id)): Path<(i64, i64)>,
    body: Bytes,
) -> Result<Json<GroupView>, ApiError> {
    optional_json::<UndrainBody>(&body, MAX_BODY)?;
    change::<GroupRecord>(&app, &actor, id, json!({"drained": false}), Some(ClusterId(cluster)), keep_private)
        .await
}

async fn plan(
    (State(app), Extension(actor)): Ctx,
    Json(body): Json<Value>,
) -> Result<(StatusCode, Json<MaintenanceView>), ApiError> {
    crate::error::object_body(&body)?;
    let ask: MaintenanceCreate = parse_json(body)?;
    if app.config().maintenance.len() >= MAX_WINDOWS {
        return Err(ApiError::invalid(
            "name",
            format!("{MAX_WINDOWS} maintenance windows exist: delete the closed ones first"),
        ));
    }
    let window = ask.maintenance(&actor.0, crate::support::now())?;
    insert::<Maintenance>(&app, &actor, window).await
}

pub(super) fn routes(api: &mut Api) {
    api.add(
        Op::post("/v1/nodes/{id}/drain", "nodes", "Drain a node: out of the answers at once, still probed")
            .takes::<DrainBody>()
            .answers::<NodeView>(),
        post(drain_node),
    );
    api.add(
        Op::post("/v1/nodes/{id}/undrain", "nodes", "Put a drained node back in the answers")
            .takes::<UndrainBody>()
            .answers::<NodeView>(),
        post(undrain_node),
    );
    api.add(
        Op::post("/v1/clusters/{id}/groups/{child}/drain", "clusters", "Drain every node of a group")
            .takes::<DrainBody>()
            .answers::<GroupView>(),
        post(drain_group),
    );
    api.add(
        Op::post("/v1/clusters/{id}/groups/{child}/undrain", "clusters", "Put a drained group back")
            .takes::<UndrainBody>()
            .answers::<GroupView>(),
        post(undrain_group),
    );
    api.add(
        Op::post("/v1/maintenance", "alerts", "Plan a maintenance window")
            .takes::<MaintenanceCreate>()
            .creates::<MaintenanceView>(),
        post(plan),
    );
}

impl Kind for Maintenance {
    type View = MaintenanceView;
    type Input = MaintenanceCreate;
    const NAME: &'static str = "maintenance";
    const LABEL: &'static str = "Maintenance window";
    fn map(c: &Config) -> &BTreeMap<i64, Stored<Self>> {
        &c.maintenance
    }
    fn wrap(self) -> Object {
        Object::Maintenance(self)
    }
    fn doc(&self) -> Value {
        to_doc(self)
    }
    /// A change (other times, other targets; an end now or past closes it now): checked at
    /// the time it is made.
    fn parse(doc: Value, _: Option<ClusterId>, _: &App) -> Result<Self, ApiError> {
        Ok(parse_as::<Maintenance>(doc)?.check(crate::support::now())?)
    }
    /// Who planned it is the server's to say.
    fn refuse_patch(patch: &Value) -> Result<(), ApiError> {
        match patch.get("created_by") {
            Some(_) => {
                Err(ApiError::invalid("created_by", "set when the window is planned; it cannot change"))
            }
            None => Ok(()),
        }
    }
    fn view(id: i64, s: &Stored<Self>, core: &CoreView) -> MaintenanceView {
        let now = crate::support::now();
        let m = &s.value;
        let state = m.state(now);
        let holds = (core.held_alerts(now).into_iter())
            .filter(|(_, by)| *by == Hold::Maintenance(id))
            .map(|(key, _)| key)
            .collect();
        MaintenanceView {
            id,
            created_at: s.created_at,
            updated_at: s.updated_at,
            targets: m.targets(&core.config),
            maintenance: Maintenance::clone(m),
            state,
            holds,
        }
    }
}

impl KeepPrivate for Maintenance {
    /// Who planned it is the server's to say.
    fn keep_from(self, old: &Self) -> Self {
        Maintenance { created_by: old.created_by.clone(), ..self }
    }
}
