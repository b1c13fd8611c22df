//! Fleet as code over HTTP: the configuration exported as one document by name, the plan of
//! what applying a document would change (objects, fields, and what DNS would answer), and
//! the apply of it in one audited change, refused when the configuration moved since the plan.

use std::collections::BTreeSet;

use axum::extract::DefaultBodyLimit;

mod desired;
mod export;

use super::*;
use crate::views::{
    ApplyRequest, FieldChange, FleetFile, FleetPlan, JsonSchema, ObjectChange, ObjectName, PlanOp,
    PlanRequest,
};
use desired::{Desired, Terms, desired};
use export::{Secrets, export, object_doc};

/// The largest fleet document taken: about 60,000 nodes with their addresses.
const MAX_FLEET_BODY: usize = 32 * 1024 * 1024;

pub(super) fn routes(api: &mut Api) {
    api.add(
        Op::get("/v1/fleet", "fleet", "Export the configuration as a fleet file (secrets read `stored`)")
            .answers::<FleetFile>(),
        get(|State(app): State<Arc<App>>| async move { Json(export(&app.config(), Secrets::Stored)) }),
    );
    api.add(
        Op::get("/v1/fleet.schema.json", "fleet", "The JSON Schema of a fleet file").answers::<JsonSchema>(),
        get(|| async { Json(JsonSchema(super::super::json_schema::<FleetFile>())) }),
    );
    api.add(
        Op::post("/v1/fleet/plan", "fleet", "What applying a fleet file would change (writes nothing)")
            .takes::<PlanRequest>()
            .answers::<FleetPlan>(),
        post(plan_route).layer(DefaultBodyLimit::max(MAX_FLEET_BODY)),
    );
    api.add(
        Op::post(
            "/v1/fleet/apply",
            "fleet",
            "Apply a fleet file in one change, if the configuration is still the planned one",
        )
        .takes::<ApplyRequest>()
        .answers::<FleetPlan>(),
        post(apply_route).layer(DefaultBodyLimit::max(MAX_FLEET_BODY)),
    );
}

/// The configuration's revision as a fleet file sees it: a digest of its export (secrets by
/// digest), so that any change to what a file holds moves it and nothing else does.
fn revision(c: &Config) -> String {
    let doc = serde_json::to_vec(&export(c, Secrets::Digest)).unwrap_or_default();
    crate::auth::sha256_hex(&doc)[..16].to_owned()
}

/// The plan of `file` against `current`, with the change it makes (what DNS would answer
/// after it is left to [`plan_route`], which a plan shows and an apply does not need).
fn plan(
    app: &App,
    current: &Config,
    file: &FleetFile,
    terms: Terms,
) -> Result<(Desired, FleetPlan), ApiError> {
    let now = crate::support::now();
    // Fields are named as the request body holds them: under `fleet`.
    let d = desired(app, current, file, terms, now).map_err(|e| match e {
        ApiError::Invalid { field, reason } => ApiError::Invalid { field: format!("fleet.{field}"), reason },
        e => e,
    })?;
    let changes = changes(current, &d);
    let plan = FleetPlan { revision: revision(current), changes, left: d.left.clone(), dns: Vec::new() };
    Ok((d, plan))
}

/// Every object the change creates, changes or deletes, with the fields that change.
fn changes(current: &Config, d: &Desired) -> Vec<ObjectChange> {
    let mut out = Vec::new();
    for (id, _) in &d.puts {
        let Some((object, after)) = object_doc(&d.next, *id, Secrets::Masked) else { continue };
        let after_digest = object_doc(&d.next, *id, Secrets::Digest).map(|(_, v)| v);
        let before = object_doc(current, *id, Secrets::Masked).map(|(_, v)| v);
        let before_digest = object_doc(current, *id, Secrets::Digest).map(|(_, v)| v);
        let op = if before.is_some() { PlanOp::Update } else { PlanOp::Create };
        let fields = fields([before.as_ref(), Some(&after)], [before_digest.as_ref(), after_digest.as_ref()]);
        if op == PlanOp::Update && fields.is_empty() {
            continue;
        }
        out.push(ObjectChange { op, object, fields });
    }
    for id in &d.deletes {
        if let Some((object, _)) = object_doc(current, *id, Secrets::Masked) {
            out.push(ObjectChange { op: PlanOp::Delete, object, fields: Vec::new() });
        }
    }
    let (before, after) = (&current.mirrors, &d.next.mirrors);
    registry_changes(&mut out, "tenant", &before.tenants, &after.tenants, to_doc);
    registry_changes(&mut out, "mirror", &before.mirrors, &after.mirrors, export::mirror_doc);
    out
}

/// The tenants or mirrors that change between two registries (they hold no secrets).
fn registry_changes<V: PartialEq>(
    out: &mut Vec<ObjectChange>,
    kind: &str,
    before: &BTreeMap<String, V>,
    after: &BTreeMap<String, V>,
    doc: impl Fn(&V) -> Value,
) {
    let object = |name: &String| ObjectName { kind: kind.into(), name: name.clone() };
    for (name, v) in after {
        let old = before.get(name);
        if old == Some(v) {
            continue;
        }
        let (b, a) = (old.map(&doc), doc(v));
        let op = if old.is_some() { PlanOp::Update } else { PlanOp::Create };
        let fields = fields([b.as_ref(), Some(&a)], [b.as_ref(), Some(&a)]);
        out.push(ObjectChange { op, object: object(name), fields });
    }
    for name in before.keys().filter(|n| !after.contains_key(*n)) {
        out.push(ObjectChange { op: PlanOp::Delete, object: object(name), fields: Vec::new() });
    }
}

/// The top-level fields that differ between two documents, as shown (`masked`); a field that
/// differs only in a secret (`digest`) says so without showing it.
fn fields(
    [before, after]: [Option<&Value>; 2],
    [before_d, after_d]: [Option<&Value>; 2],
) -> Vec<FieldChange> {
    let get = |v: Option<&Value>, k: &str| v.and_then(|v| v.get(k)).cloned();
    let keys: BTreeSet<&String> = [before_d, after_d]
        .into_iter()
        .flatten()
        .filter_map(Value::as_object)
        .flat_map(|o| o.keys())
        .collect();
    let mut out = Vec::new();
    for k in keys {
        if get(before_d, k) == get(after_d, k) {
            continue;
        }
        let (b, a) = (get(before, k), get(after, k));
        if b == a {
            out.push(FieldChange {
                field: format!("{k} (a secret)"),
                before: Some(json!("(secret)")),
                after: Some(json!("(new secret)")),
            });
        } else {
            out.push(FieldChange { field: k.clone(), before: b, after: a });
        }
    }
    out
}

async fn plan_route(
    State(app): State<Arc<App>>,
    Extension(access): Extension<crate::api::Access>,
    Json(body): Json<Value>,
) -> Result<Json<FleetPlan>, ApiError> {
    let req: PlanRequest = parse_json(body)?;
    let terms = Terms { prune: req.prune, force: req.force, compare_secrets: !access.read_only };
    let (d, mut plan) = plan(&app, &app.config(), &req.fleet, terms)?;
    if !plan.changes.is_empty() {
        // A dry run in the control core: the pass the change triggers, on copies of the
        // clusters' states against the current observations.
        plan.dns = app.owner().read(move |c, at| c.dry_run(&d.puts, &d.deletes, at)).await?;
    }
    Ok(Json(plan))
}

async fn apply_route(
    (State(app), Extension(actor)): Ctx,
    Json(body): Json<Value>,
) -> Result<Json<FleetPlan>, ApiError> {
    let req: ApplyRequest = parse_json(body)?;
    let terms = Terms { prune: req.prune, force: req.force, compare_secrets: true };
    // Compared under the change lock, once this replica has every other replica's changes:
    // a replica that lags the log must not refuse a plan made on one that does not.
    let mut applied = app
        .change(&actor, |c| {
            let (d, plan) = plan(&app, c, &req.fleet, terms)?;
            if plan.revision != req.expected_revision {
                return Err(ApiError::Conflict(format!(
                    "the configuration changed since the plan (planned against revision {}, now {}): plan again",
                    req.expected_revision, plan.revision
                )));
            }
            // Nothing to do writes nothing: an apply run twice leaves no second audit entry.
            let mut ch = Change::default();
            if !plan.changes.is_empty() {
                let summary = json!({"changes": plan.changes, "prune": terms.prune, "force": terms.force});
                ch.audit("fleet.apply", "fleet", summary);
            }
            ch.puts = d.puts;
            ch.deletes = d.deletes;
            ch.files = d.files;
            Ok((ch, plan))
        })
        .await?;
    applied.revision = revision(&app.config());
    Ok(Json(applied))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `docs/fleet.schema.json` is what the server publishes, so editors validating against
    /// the file in the repository see the same schema. `VANTAGE_WRITE_SCHEMA=1` rewrites it.
    #[test]
    fn the_schema_in_the_docs_is_the_one_served() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/fleet.schema.json");
        let schema = super::super::super::json_schema::<FleetFile>();
        let text = format!("{}\n", serde_json::to_string_pretty(&schema).unwrap());
        if std::env::var_os("VANTAGE_WRITE_SCHEMA").is_some() {
            std::fs::write(path, &text).unwrap();
        }
        let docs = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            docs == text,
            "docs/fleet.schema.json is out of date: run VANTAGE_WRITE_SCHEMA=1 cargo test -p vantage-server --lib fleet"
        );
    }
}
