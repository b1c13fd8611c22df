//! Configuration objects over HTTP: list, get, create, change (JSON merge patch) and delete,
//! for regions, clusters, node groups, lines, nodes, rules and probers, plus the probe
//! settings and a node's scheduling addresses. Every change is validated by the core, checked
//! against the other objects, audited, and refused whole when anything is wrong.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, patch, post, put};
use axum::{Extension, Json};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use utoipa::ToSchema;
use vantage_core::address::{AddressInput, AddressList, AddressSource, Level};
use vantage_core::detection::{DetectionSettings, DetectionSettingsInput};
use vantage_core::ids::{ClusterId, RegionId};
use vantage_core::model::{
    Cluster, ClusterInput, GroupInput, Line, LineInput, Node, NodeGroup, NodeInput, PublisherInput, Region,
    RegionInput,
};
use vantage_core::monitor::{Monitor, MonitorInput};
use vantage_core::rules::{Rule, RuleInput};
use vantage_core::settings::{ProbeSettings, ProbeSettingsInput};

mod drain;
mod fleet;
mod kinds;
mod settings;
pub(crate) mod written;
use written::{List, Plain, Written};

use super::{Api, Op};
use crate::app::{Actor, App, Change};
use crate::error::{ApiError, parse_json};
use crate::views::{
    Addresses, CheckCreate, CheckView, ClusterView, GroupView, LineView, MonitorView, NodeCreate, NodeView,
    ProberBody, ProberView, RegionView, RuleView, SilenceState, SilenceView, SourceAddressBody,
    StatusPageView, WebhookView,
};
use settings::{
    addresses_add_source, addresses_get, addresses_put, detection_get, detection_put, settings_get,
    settings_put,
};
use vantage_control::alerts::{HIDDEN, Hold, Silence, SilenceCreate, SmtpServer, Webhook, WebhookFormat};
use vantage_control::config::{
    Config, GroupRecord, LineRecord, NamedCheck, NodeRecord, Object, ProberRecord, RuleRecord, Stored,
};
use vantage_control::invariants::Invariants;
use vantage_control::maintenance::Maintenance;
use vantage_control::status_page::StatusPage;
use vantage_control::view::View as CoreView;

/// A kind of configuration object, as the generic handlers see it.
trait Kind: Clone + Serialize + Send + Sync + Sized + Invariants + 'static {
    /// What the API answers for one object.
    type View: Serialize + PartialEq + ToSchema + Send + 'static;
    /// What a create body holds (a change is a JSON merge patch of it).
    type Input: ToSchema;
    /// Kind name in audit actions and object references (`region`).
    const NAME: &'static str;
    /// Label in messages (`Region`).
    const LABEL: &'static str;
    /// The objects of this kind.
    fn map(c: &Config) -> &BTreeMap<i64, Stored<Self>>;
    /// As a stored object.
    fn wrap(self) -> Object;
    /// The cluster a child object belongs to.
    fn cluster(&self) -> Option<ClusterId> {
        None
    }
    /// The editable document (what a create body holds), for merge patches.
    fn doc(&self) -> Value;
    /// Validates a document. `cluster` is the parent of a child object.
    fn parse(doc: Value, cluster: Option<ClusterId>, app: &App) -> Result<Self, ApiError>;
    /// The API representation (with what the runtime knows, for probers and nodes).
    fn view(id: i64, s: &Stored<Self>, core: &CoreView) -> Self::View;
    /// `{"items":[…]}` of `objects` (in their order) through `written`, which writes each
    /// unchanged view from the bytes of the last list. A kind whose views can name what they are
    /// made of (nodes) writes those whose inputs are unchanged without making their views.
    fn write_list<'a>(
        written: &Written,
        list: List,
        objects: impl Iterator<Item = (i64, &'a Stored<Self>)>,
        core: &CoreView,
    ) -> serde_json::Result<Vec<u8>> {
        written.list(list, objects.map(|(id, s)| (id, Plain(Self::view(id, s, core)))))
    }
    /// Audit action for `op` (`create`, `update`, `delete`).
    fn action(op: &str) -> String {
        format!("{}.{op}", Self::NAME)
    }
    /// The audit entries, as (action, metadata), of a change from `old` to `new` by the merge
    /// patch `patch`: one update with the patch.
    fn update_audit(_old: &Self, _new: &Self, patch: Value) -> Vec<(String, Value)> {
        vec![(Self::action("update"), patch)]
    }
    /// Refuses a patch that names a field no change may set (who made an object), before
    /// anything else is looked at.
    fn refuse_patch(_patch: &Value) -> Result<(), ApiError> {
        Ok(())
    }
    /// Fills in what a patch may leave out of a list it replaces (a publisher's secret, which
    /// views never show), from `old`, before it is merged.
    fn fill_patch(_old: &Self, _patch: &mut Value) -> Result<(), ApiError> {
        Ok(())
    }
    /// Refuses a change from `old` to `new` by `patch` that no single object's check can tell
    /// (a secret kept for a new destination).
    fn refuse_change(_old: &Self, _new: &Self, _patch: &Value) -> Result<(), ApiError> {
        Ok(())
    }
}

fn to_doc<T: Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

fn parse_as<T: DeserializeOwned>(doc: Value) -> Result<T, ApiError> {
    parse_json(doc)
}

fn not_found<K: Kind>(id: i64) -> ApiError {
    ApiError::NotFound(format!("{} {id} not found", K::LABEL))
}

/// The object `id` of kind `K`, which must belong to `cluster` when one is given.
fn find<K: Kind>(c: &Config, id: i64, cluster: Option<ClusterId>) -> Result<&Stored<K>, ApiError> {
    K::map(c)
        .get(&id)
        .filter(|s| cluster.is_none_or(|cl| s.value.cluster() == Some(cl)))
        .ok_or_else(|| not_found::<K>(id))
}

/// Every object of a kind (of a cluster), made and written off the async workers: 10,000 node
/// views take tens of milliseconds (the items unchanged since the last list are not serialised
/// again, and nodes whose inputs are unchanged not even made: [`written`]).
async fn list<K: Kind>(app: &Arc<App>, cluster: Option<ClusterId>) -> Result<Response, ApiError> {
    // One reading for the whole list: every item as of the same view.
    let core = app.view();
    if let Some(cl) = cluster {
        find::<Cluster>(&core.config, cl.0, None)?;
    }
    let app = app.clone();
    crate::api::off_worker(move || {
        let objects = K::map(&core.config)
            .iter()
            .filter(|(_, s)| cluster.is_none_or(|cl| s.value.cluster() == Some(cl)))
            .map(|(id, s)| (*id, s));
        match K::write_list(app.written(), (K::NAME, cluster), objects, &core) {
            Ok(body) => ([(axum::http::header::CONTENT_TYPE, "application/json")], body).into_response(),
            Err(e) => ApiError::Internal(format!("the list could not be written: {e}")).into_response(),
        }
    })
    .await
}

fn one<K: Kind>(app: &App, id: i64, cluster: Option<ClusterId>) -> Result<Json<K::View>, ApiError> {
    let core = app.view();
    let s = find::<K>(&core.config, id, cluster)?;
    Ok(Json(K::view(id, s, &core)))
}

async fn create<K: Kind>(
    app: &App,
    actor: &Actor,
    body: Value,
    cluster: Option<ClusterId>,
) -> Result<(StatusCode, Json<K::View>), ApiError> {
    if let Some(cl) = cluster {
        find::<Cluster>(&app.config(), cl.0, None)?;
    }
    crate::error::object_body(&body)?;
    let value = K::parse(body, cluster, app)?;
    insert::<K>(app, actor, value).await
}

/// Stores a new object made from a create body, audited, and answers its view.
async fn insert<K: Kind>(
    app: &App,
    actor: &Actor,
    value: K,
) -> Result<(StatusCode, Json<K::View>), ApiError> {
    let id = app
        .change(actor, |c| {
            let id = c.allocate();
            value.check(id, c)?;
            let mut ch = Change::default();
            ch.audit(K::action("create"), format!("{}:{id}", K::NAME), value.doc());
            ch.puts.push((id, value.wrap()));
            Ok((ch, id))
        })
        .await?;
    let core = app.view();
    let s = find::<K>(&core.config, id, None)?;
    Ok((StatusCode::CREATED, Json(K::view(id, s, &core))))
}

async fn change<K: Kind>(
    app: &App,
    actor: &Actor,
    id: i64,
    patch: Value,
    cluster: Option<ClusterId>,
    keep: impl FnOnce(&K, K) -> K,
) -> Result<Json<K::View>, ApiError> {
    change_checked(app, actor, (id, patch, cluster), keep, |_| Ok(())).await
}

/// [`change`], after `check` passed on the configuration the change applies to (taken one
/// change at a time: two changes cannot both pass a check that the pair would fail).
async fn change_checked<K: Kind>(
    app: &App,
    actor: &Actor,
    (id, patch, cluster): (i64, Value, Option<ClusterId>),
    keep: impl FnOnce(&K, K) -> K,
    check: impl FnOnce(&Config) -> Result<(), ApiError>,
) -> Result<Json<K::View>, ApiError> {
    if !patch.is_object() {
        return Err(ApiError::invalid("body", "a JSON object with the fields to change"));
    }
    app.change(actor, |c| {
        let old = find::<K>(c, id, cluster)?.value.clone();
        check(c)?;
        K::refuse_patch(&patch)?;
        let mut filled = patch.clone();
        K::fill_patch(&old, &mut filled)?;
        let mut doc = old.doc();
        vantage_core::patch::merge(&mut doc, filled);
        let new = keep(&old, K::parse(doc, old.cluster(), app)?);
        K::refuse_change(&old, &new, &patch)?;
        new.check(id, c)?;
        let mut ch = Change::default();
        // A patch that changes nothing saves nothing: no audit entry, no numbered change, and
        // no revision (a configuration change always cuts one, naming what was saved).
        if let (Ok(was), Ok(is)) = (serde_json::to_value(&old), serde_json::to_value(&new))
            && was == is
        {
            return Ok((ch, ()));
        }
        for (action, metadata) in K::update_audit(&old, &new, patch) {
            ch.audit(action, format!("{}:{id}", K::NAME), metadata);
        }
        ch.puts.push((id, new.wrap()));
        Ok((ch, ()))
    })
    .await?;
    one::<K>(app, id, cluster)
}

/// `?force=true`: the operator's word for a delete that changes what DNS answers beyond the
/// object itself (the last enabled node a line answers with).
fn forced(q: &BTreeMap<String, String>) -> Result<bool, ApiError> {
    match q.get("force").map(String::as_str) {
        None | Some("false") => Ok(false),
        Some("true") => Ok(true),
        Some(other) => Err(ApiError::invalid("force", format!("must be true or false, got {other:?}"))),
    }
}

async fn remove<K: Kind>(
    app: &App,
    actor: &Actor,
    id: i64,
    cluster: Option<ClusterId>,
    q: BTreeMap<String, String>,
) -> Result<StatusCode, ApiError> {
    let force = forced(&q)?;
    app.change(actor, |c| {
        let old = find::<K>(c, id, cluster)?;
        if !force {
            K::check_unforced_delete(id, c)?;
        }
        let cascade = K::check_delete(id, c)?;
        let mut ch = Change::default();
        ch.audit(
            K::action("delete"),
            format!("{}:{id}", K::NAME),
            json!({"name": old.value.doc().get("name"), "with": cascade, "force": force}),
        );
        ch.deletes.push(id);
        ch.deletes.extend(cascade);
        Ok((ch, ()))
    })
    .await?;
    Ok(StatusCode::NO_CONTENT)
}

type Ctx = (State<Arc<App>>, Extension<Actor>);

/// Top-level kinds: `/v1/<plural>` and `/v1/<plural>/{id}`.
macro_rules! top_level {
    ($api:ident, $kind:ty, $path:literal, $tag:literal, $label:literal, create: $create:literal) => {{
        $api.add(
            Op::get($path, $tag, concat!("List ", $label, "s")).lists::<<$kind as Kind>::View>(),
            get(|State(app): State<Arc<App>>| async move { list::<$kind>(&app, None).await }),
        );
        if $create {
            $api.add(
                Op::post($path, $tag, concat!("Create a ", $label))
                    .takes::<<$kind as Kind>::Input>()
                    .creates::<<$kind as Kind>::View>(),
                post(|(State(app), Extension(actor)): Ctx, Json(body): Json<Value>| async move {
                    create::<$kind>(&app, &actor, body, None).await
                }),
            );
        }
        $api.add(
            Op::get(concat!($path, "/{id}"), $tag, concat!("Get a ", $label)).answers::<<$kind as Kind>::View>(),
            get(|State(app): State<Arc<App>>, Path(id): Path<i64>| async move { one::<$kind>(&app, id, None) }),
        );
        $api.add(
            Op::patch(concat!($path, "/{id}"), $tag, concat!("Change a ", $label, " (JSON merge patch of its fields)"))
                .takes::<<$kind as Kind>::Input>()
                .answers::<<$kind as Kind>::View>(),
            patch(|(State(app), Extension(actor)): Ctx, Path(id): Path<i64>, Json(body): Json<Value>| async move {
                change::<$kind>(&app, &actor, id, body, None, keep_private).await
            }),
        );
        $api.add(
            Op::delete(concat!($path, "/{id}"), $tag, concat!("Delete a ", $label)),
            delete(|(State(app), Extension(actor)): Ctx, Path(id): Path<i64>, Query(q): Query<BTreeMap<String, String>>| async move {
                remove::<$kind>(&app, &actor, id, None, q).await
            }),
        );
    }};
}

/// Children of a cluster: `/v1/clusters/{id}/<plural>` and `…/{child}`.
macro_rules! children {
    ($api:ident, $kind:ty, $path:literal, $tag:literal, $label:literal) => {{
        $api.add(
            Op::get(concat!("/v1/clusters/{id}/", $path), $tag, concat!("List a cluster's ", $label, "s"))
                .lists::<<$kind as Kind>::View>(),
            get(|State(app): State<Arc<App>>, Path(id): Path<i64>| async move { list::<$kind>(&app, Some(ClusterId(id))).await }),
        );
        $api.add(
            Op::post(concat!("/v1/clusters/{id}/", $path), $tag, concat!("Create a ", $label))
                .takes::<<$kind as Kind>::Input>()
                .creates::<<$kind as Kind>::View>(),
            post(|(State(app), Extension(actor)): Ctx, Path(id): Path<i64>, Json(body): Json<Value>| async move {
                create::<$kind>(&app, &actor, body, Some(ClusterId(id))).await
            }),
        );
        $api.add(
            Op::get(concat!("/v1/clusters/{id}/", $path, "/{child}"), $tag, concat!("Get a ", $label))
                .answers::<<$kind as Kind>::View>(),
            get(|State(app): State<Arc<App>>, Path((id, child)): Path<(i64, i64)>| async move {
                one::<$kind>(&app, child, Some(ClusterId(id)))
            }),
        );
        $api.add(
            Op::patch(
                concat!("/v1/clusters/{id}/", $path, "/{child}"),
                $tag,
                concat!("Change a ", $label, " (JSON merge patch of its fields)"),
            )
            .takes::<<$kind as Kind>::Input>()
            .answers::<<$kind as Kind>::View>(),
            patch(|(State(app), Extension(actor)): Ctx, Path((id, child)): Path<(i64, i64)>, Json(body): Json<Value>| async move {
                change::<$kind>(&app, &actor, child, body, Some(ClusterId(id)), keep_private).await
            }),
        );
        $api.add(
            Op::delete(concat!("/v1/clusters/{id}/", $path, "/{child}"), $tag, concat!("Delete a ", $label)),
            delete(|(State(app), Extension(actor)): Ctx, Path((id, child)): Path<(i64, i64)>, Query(q): Query<BTreeMap<String, String>>| async move {
                remove::<$kind>(&app, &actor, child, Some(ClusterId(id)), q).await
            }),
        );
    }};
}

/// Fields that are not part of the editable document survive a change.
fn keep_private<K: Kind + KeepPrivate>(old: &K, new: K) -> K {
    new.keep_from(old)
}

/// Fields a change through the API must not reset.
trait KeepPrivate {
    fn keep_from(self, old: &Self) -> Self;
}

impl KeepPrivate for Region {
    fn keep_from(self, _: &Self) -> Self {
        self
    }
}
impl KeepPrivate for Cluster {
    fn keep_from(self, _: &Self) -> Self {
        self
    }
}
impl KeepPrivate for GroupRecord {
    fn keep_from(self, _: &Self) -> Self {
        self
    }
}
impl KeepPrivate for LineRecord {
    fn keep_from(self, _: &Self) -> Self {
        self
    }
}
impl KeepPrivate for RuleRecord {
    fn keep_from(self, _: &Self) -> Self {
        self
    }
}
impl KeepPrivate for NodeRecord {
    fn keep_from(self, old: &Self) -> Self {
        NodeRecord {
            addresses: old.addresses.clone(),
            cert_sha256: old.cert_sha256.clone(),
            cert_issued_at: old.cert_issued_at,
            enrolled_from: old.enrolled_from,
            ..self
        }
    }
}
impl KeepPrivate for ProberRecord {
    fn keep_from(self, old: &Self) -> Self {
        ProberRecord { cert_sha256: old.cert_sha256.clone(), cert_issued_at: old.cert_issued_at, ..self }
    }
}

/// Silences kept at most, expired ones included.
const MAX_SILENCES: usize = 1_000;

pub(super) fn routes(api: &mut Api) {
    super::agents::routes(api);
    fleet::routes(api);
    top_level!(api, Region, "/v1/regions", "regions", "region", create: true);
    top_level!(api, Cluster, "/v1/clusters", "clusters", "cluster", create: true);
    top_level!(api, NodeRecord, "/v1/nodes", "nodes", "node", create: true);
    top_level!(api, ProberRecord, "/v1/probers", "probers", "prober", create: false);
    top_level!(api, Webhook, "/v1/webhooks", "alerts", "webhook", create: true);
    top_level!(api, NamedCheck, "/v1/checks", "checks", "check", create: true);
    top_level!(api, Monitor, "/v1/monitors", "monitors", "monitor", create: true);
    top_level!(api, Silence, "/v1/silences", "alerts", "silence", create: false);
    top_level!(api, StatusPage, "/v1/status-pages", "status pages", "status page", create: true);
    api.add(
        Op::post("/v1/silences", "alerts", "Silence the notifications of some alerts for a while")
            .takes::<SilenceCreate>()
            .creates::<SilenceView>(),
        post(|(State(app), Extension(actor)): Ctx, Json(body): Json<Value>| async move {
            crate::error::object_body(&body)?;
            let ask: SilenceCreate = parse_json(body)?;
            // Every firing is matched against every silence: their number is bounded.
            if app.config().silences.len() >= MAX_SILENCES {
                return Err(ApiError::invalid(
                    "matchers",
                    format!("{MAX_SILENCES} silences exist: delete the expired ones first"),
                ));
            }
            let silence = ask.silence(&actor.0, crate::support::now())?;
            insert::<Silence>(&app, &actor, silence).await
        }),
    );
    children!(api, GroupRecord, "groups", "clusters", "node group");
    top_level!(api, Maintenance, "/v1/maintenance", "alerts", "maintenance window", create: false);
    drain::routes(api);
    children!(api, LineRecord, "lines", "clusters", "line");
    children!(api, RuleRecord, "rules", "rules", "rule");
    api.add(
        Op::get("/v1/settings/probes", "settings", "Get the probe settings").answers::<ProbeSettings>(),
        get(settings_get),
    );
    api.add(
        Op::put("/v1/settings/probes", "settings", "Replace the probe settings")
            .takes::<ProbeSettingsInput>()
            .answers::<ProbeSettings>(),
        put(settings_put),
    );
    api.add(
        Op::get(
            "/v1/settings/detection",
            "settings",
            "Get the detection settings: confirmation, flap damping, probe budget",
        )
        .answers::<DetectionSettings>(),
        get(detection_get),
    );
    api.add(
        Op::put("/v1/settings/detection", "settings", "Replace the detection settings")
            .takes::<DetectionSettingsInput>()
            .answers::<DetectionSettings>(),
        put(detection_put),
    );
    api.add(
        Op::get("/v1/nodes/{id}/addresses", "nodes", "Get a node's scheduling addresses")
            .answers::<Addresses>(),
        get(addresses_get),
    );
    api.add(
        Op::put(
            "/v1/nodes/{id}/addresses",
            "nodes",
            "Set a node's scheduling addresses (empty: use the reported ones)",
        )
        .takes::<Vec<AddressInput>>()
        .answers::<Addresses>(),
        put(addresses_put),
    );
    api.add(
        Op::post(
            "/v1/nodes/{id}/addresses/source",
            "nodes",
            "Add source address: add the address the node's agent connects from to its configured addresses",
        )
        .takes::<SourceAddressBody>()
        .answers::<Addresses>(),
        post(addresses_add_source),
    );
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::http::{Method, Request, header};
    use tower::ServiceExt;
    use vantage_store::AuditFilter;

    use super::*;
    use crate::app::lab;

    /// `method uri` with `body` as the admin; the status.
    async fn send(app: &Arc<App>, token: &str, (method, uri): (Method, &str), body: Value) -> StatusCode {
        let req = Request::builder()
            .method(method)
            .uri(uri)
            .header(header::AUTHORIZATION, format!("Bearer {token}"))
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(body.to_string()))
            .unwrap();
        crate::api::router(app.clone()).oneshot(req).await.unwrap().status()
    }

    /// A patch that sets what is already set is answered as a change would be, and saves
    /// nothing: no audit entry, the same configuration; a patch that changes something does.
    #[tokio::test]
    async fn a_patch_that_changes_nothing_saves_nothing() {
        let (_dir, app, token) = lab().await;
        let region: Region = serde_json::from_value(json!({"code": "eu", "name": "Europe"})).unwrap();
        app.apply(vec![(1, Object::Region(region))], Vec::new(), crate::support::now()).await.unwrap();
        let entries = || async { app.store().audit(&AuditFilter::default()).await.unwrap().len() };
        let (before, config) = (entries().await, app.config());
        let patch = |body| send(&app, &token, (Method::PATCH, "/v1/regions/1"), body);
        assert_eq!(patch(json!({"name": "Europe"})).await, StatusCode::OK);
        assert_eq!(patch(json!({})).await, StatusCode::OK);
        assert_eq!(entries().await, before, "no audit entry");
        assert!(Arc::ptr_eq(&config, &app.config()), "the same configuration");
        assert_eq!(patch(json!({"name": "Europa"})).await, StatusCode::OK);
        assert_eq!(entries().await, before + 1);
        assert_eq!(app.config().regions[&1].value.name, "Europa");
    }

    /// The same scheduling addresses put again save nothing; other ones do.
    #[tokio::test]
    async fn the_same_addresses_put_again_save_nothing() {
        let (_dir, app, token) = lab().await;
        let fleet = vantage_control::fixtures::large_fleet(1, 0);
        app.apply(fleet.puts, Vec::new(), crate::support::now()).await.unwrap();
        let node = *app.config().nodes.keys().next().unwrap();
        let uri = format!("/v1/nodes/{node}/addresses");
        let put =
            || send(&app, &token, (Method::PUT, &uri), json!([{"ip": "203.0.113.10", "level": "primary"}]));
        let entries = || async { app.store().audit(&AuditFilter::default()).await.unwrap().len() };
        let before = entries().await;
        assert_eq!(put().await, StatusCode::OK);
        assert_eq!(entries().await, before + 1, "a change");
        let config = app.config();
        assert_eq!(put().await, StatusCode::OK);
        assert_eq!(entries().await, before + 1, "no audit entry");
        assert!(Arc::ptr_eq(&config, &app.config()), "the same configuration");
    }

    /// The probe and detection settings put again as they are save nothing; other ones do.
    #[tokio::test]
    async fn the_same_settings_put_again_save_nothing() {
        let (_dir, app, token) = lab().await;
        let entries = || async { app.store().audit(&AuditFilter::default()).await.unwrap().len() };
        for (uri, changed) in [
            ("/v1/settings/probes", json!({"interval_s": 5, "timeout_ms": 1000})),
            ("/v1/settings/detection", json!({"confirm": false, "damping_max_multiplier": 1})),
        ] {
            let put = |body| send(&app, &token, (Method::PUT, uri), body);
            let before = entries().await;
            assert_eq!(put(changed.clone()).await, StatusCode::OK, "{uri}");
            assert_eq!(entries().await, before + 1, "{uri}: a change");
            let config = app.config();
            assert_eq!(put(changed).await, StatusCode::OK, "{uri}");
            assert_eq!(entries().await, before + 1, "{uri}: no audit entry");
            assert!(Arc::ptr_eq(&config, &app.config()), "{uri}: the same configuration");
        }
    }
}
