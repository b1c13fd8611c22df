//! Configuration objects over HTTP: list, get, create, change (JSON merge patch) and delete,
//! for regions, clusters, node groups, lines, nodes, rules and probers, plus the probe
//! settings and a node's scheduling addresses. Every change is validated by the core, checked
//! against the other objects, audited, and refused whole when anything is wrong.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{delete, get, patch, post, put};
use axum::{Extension, Json};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use utoipa::ToSchema;
use vantage_core::address::{AddressInput, AddressList, AddressSource};
use vantage_core::ids::{ClusterId, RegionId};
use vantage_core::model::{
    Cluster, ClusterInput, GroupInput, Line, LineInput, Node, NodeGroup, NodeInput, PublisherInput, Region,
    RegionInput,
};
use vantage_core::rules::{Rule, RuleInput};
use vantage_core::settings::{ProbeSettings, ProbeSettingsInput};

use super::{Api, Op};
use crate::app::{Actor, App, Change};
use crate::error::{ApiError, parse_json};
use crate::views::{
    Addresses, ClusterView, GroupView, Items, LineView, NodeCreate, NodeView, ProberBody, ProberView,
    RegionView, RuleView, WebhookView,
};
use vantage_control::alerts::Webhook;
use vantage_control::config::{
    Config, GroupRecord, LineRecord, NodeRecord, Object, ProberRecord, RuleRecord, Stored,
};
use vantage_control::invariants::Invariants;

/// A kind of configuration object, as the generic handlers see it.
trait Kind: Clone + Serialize + Send + Sync + Sized + Invariants + 'static {
    /// What the API answers for one object.
    type View: Serialize + ToSchema + Send + 'static;
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
    fn view(id: i64, s: &Stored<Self>, c: &Config, app: &App) -> Self::View;
    /// Audit action for `op` (`create`, `update`, `delete`).
    fn action(op: &str) -> String {
        format!("{}.{op}", Self::NAME)
    }
}

fn to_doc<T: Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

fn parse_as<T: DeserializeOwned>(doc: Value) -> Result<T, ApiError> {
    parse_json(doc)
}

impl Kind for Region {
    type View = RegionView;
    type Input = RegionInput;
    const NAME: &'static str = "region";
    const LABEL: &'static str = "Region";
    fn map(c: &Config) -> &BTreeMap<i64, Stored<Self>> {
        &c.regions
    }
    fn wrap(self) -> Object {
        Object::Region(self)
    }
    fn doc(&self) -> Value {
        to_doc(self)
    }
    fn parse(doc: Value, _: Option<ClusterId>, _: &App) -> Result<Self, ApiError> {
        parse_as(doc)
    }
    fn view(id: i64, s: &Stored<Self>, c: &Config, _: &App) -> RegionView {
        let probers = c.probers.values().filter(|p| p.value.region == RegionId(id)).count();
        RegionView {
            id,
            created_at: s.created_at,
            updated_at: s.updated_at,
            code: s.value.code.clone(),
            name: s.value.name.clone(),
            probers,
        }
    }
}

impl Kind for Cluster {
    type View = ClusterView;
    type Input = ClusterInput;
    const NAME: &'static str = "cluster";
    const LABEL: &'static str = "Cluster";
    fn map(c: &Config) -> &BTreeMap<i64, Stored<Self>> {
        &c.clusters
    }
    fn wrap(self) -> Object {
        Object::Cluster(self)
    }
    fn doc(&self) -> Value {
        to_doc(self)
    }
    fn parse(doc: Value, _: Option<ClusterId>, _: &App) -> Result<Self, ApiError> {
        parse_as(doc)
    }
    fn view(id: i64, s: &Stored<Self>, _: &Config, _: &App) -> ClusterView {
        let c = ClusterInput::from(s.value.clone());
        ClusterView {
            id,
            created_at: s.created_at,
            updated_at: s.updated_at,
            name: c.name,
            domain: c.domain,
            aliases: c.aliases,
            dns_mode: c.dns_mode,
            ttl: c.ttl,
            listeners: c.listeners,
            check: c.check,
            mass_removal_pct: c.mass_removal_pct,
            agent_required: c.agent_required,
            required_links: c.required_links,
            // TSIG secrets are written, never read back.
            publishers: c
                .publishers
                .into_iter()
                .map(|p| PublisherInput { key_secret: "(hidden)".into(), ..PublisherInput::from(p) })
                .collect(),
        }
    }
}

fn parent(cluster: Option<ClusterId>) -> Result<ClusterId, ApiError> {
    cluster.ok_or_else(|| ApiError::Internal("child object without a cluster".into()))
}

/// The parts every child of a cluster has alike: where it is kept, its variant, and its
/// document (the inner value, with the cluster from the path).
macro_rules! child_kind {
    ($map:ident, $variant:ident, $field:ident, $inner:ty) => {
        fn map(c: &Config) -> &BTreeMap<i64, Stored<Self>> {
            &c.$map
        }
        fn wrap(self) -> Object {
            Object::$variant(self)
        }
        fn cluster(&self) -> Option<ClusterId> {
            Some(self.cluster)
        }
        fn doc(&self) -> Value {
            to_doc(&self.$field)
        }
        fn parse(doc: Value, cluster: Option<ClusterId>, _: &App) -> Result<Self, ApiError> {
            Ok(Self { cluster: parent(cluster)?, $field: parse_as::<$inner>(doc)? })
        }
    };
}

impl Kind for GroupRecord {
    type View = GroupView;
    type Input = GroupInput;
    const NAME: &'static str = "group";
    const LABEL: &'static str = "Node group";
    child_kind!(groups, Group, group, NodeGroup);
    fn view(id: i64, s: &Stored<Self>, _: &Config, _: &App) -> GroupView {
        GroupView {
            id,
            created_at: s.created_at,
            updated_at: s.updated_at,
            cluster: s.value.cluster,
            name: s.value.group.name.clone(),
            region: s.value.group.region,
        }
    }
}

impl Kind for LineRecord {
    type View = LineView;
    type Input = LineInput;
    const NAME: &'static str = "line";
    const LABEL: &'static str = "Line";
    child_kind!(lines, Line, line, Line);
    fn view(id: i64, s: &Stored<Self>, _: &Config, _: &App) -> LineView {
        let l = &s.value.line;
        LineView {
            id,
            created_at: s.created_at,
            updated_at: s.updated_at,
            cluster: s.value.cluster,
            name: l.name.clone(),
            group: l.group,
            backup_groups: l.backup_groups.clone(),
            min_healthy: l.min_healthy,
            client_networks: l.client_networks.clone(),
        }
    }
}

impl Kind for RuleRecord {
    type View = RuleView;
    type Input = RuleInput;
    const NAME: &'static str = "rule";
    const LABEL: &'static str = "Rule";
    child_kind!(rules, Rule, rule, Rule);
    fn view(id: i64, s: &Stored<Self>, _: &Config, app: &App) -> RuleView {
        RuleView {
            id,
            created_at: s.created_at,
            updated_at: s.updated_at,
            cluster: s.value.cluster,
            rule: s.value.rule.clone(),
            acting_on: super::rules::acting_on(app, s.value.cluster, id),
        }
    }
    fn action(op: &str) -> String {
        format!("scheduling.rule_{op}")
    }
}

/// A node as created: its cluster and the node's fields (checked by the core's `NodeInput`).
#[derive(Debug, serde::Deserialize)]
struct NodeBody {
    cluster: ClusterId,
    #[serde(flatten)]
    node: BTreeMap<String, Value>,
}

impl Kind for NodeRecord {
    type View = NodeView;
    type Input = NodeCreate;
    const NAME: &'static str = "node";
    const LABEL: &'static str = "Node";
    fn map(c: &Config) -> &BTreeMap<i64, Stored<Self>> {
        &c.nodes
    }
    fn wrap(self) -> Object {
        Object::Node(self)
    }
    fn cluster(&self) -> Option<ClusterId> {
        Some(self.cluster)
    }
    fn doc(&self) -> Value {
        let mut v = to_doc(&self.node);
        v["cluster"] = json!(self.cluster);
        v
    }
    fn parse(doc: Value, existing: Option<ClusterId>, _: &App) -> Result<Self, ApiError> {
        let body: NodeBody = parse_as(doc)?;
        if existing.is_some_and(|c| c != body.cluster) {
            return Err(ApiError::invalid(
                "cluster",
                "a node cannot move to another cluster; delete it and create it there",
            ));
        }
        let node: Node = parse_as::<NodeInput>(Value::Object(body.node.into_iter().collect()))?.try_into()?;
        Ok(NodeRecord {
            cluster: body.cluster,
            node,
            addresses: AddressList::default(),
            cert_sha256: None,
            cert_issued_at: None,
        })
    }
    fn view(id: i64, s: &Stored<Self>, c: &Config, app: &App) -> NodeView {
        super::agents::node_view(app, c, id, s)
    }
}

impl Kind for ProberRecord {
    type View = ProberView;
    type Input = ProberBody;
    const NAME: &'static str = "prober";
    const LABEL: &'static str = "Prober";
    fn map(c: &Config) -> &BTreeMap<i64, Stored<Self>> {
        &c.probers
    }
    fn wrap(self) -> Object {
        Object::Prober(self)
    }
    fn doc(&self) -> Value {
        json!({"name": self.name, "region": self.region, "enabled": self.enabled})
    }
    fn parse(doc: Value, _: Option<ClusterId>, _: &App) -> Result<Self, ApiError> {
        let b: ProberBody = parse_as(doc)?;
        let name = vantage_core::model::display_name("name", &b.name)?;
        Ok(ProberRecord {
            name,
            region: b.region,
            enabled: b.enabled,
            cert_sha256: None,
            cert_issued_at: None,
        })
    }
    fn view(id: i64, s: &Stored<Self>, c: &Config, app: &App) -> ProberView {
        super::agents::prober_view(app, c, id, s)
    }
}

impl Kind for Webhook {
    type View = WebhookView;
    type Input = Webhook;
    const NAME: &'static str = "webhook";
    const LABEL: &'static str = "Webhook";
    fn map(c: &Config) -> &BTreeMap<i64, Stored<Self>> {
        &c.webhooks
    }
    fn wrap(self) -> Object {
        Object::Webhook(self)
    }
    fn doc(&self) -> Value {
        to_doc(self)
    }
    fn parse(doc: Value, _: Option<ClusterId>, _: &App) -> Result<Self, ApiError> {
        Ok(parse_as::<Webhook>(doc)?.check()?)
    }
    fn view(id: i64, s: &Stored<Self>, _: &Config, _: &App) -> WebhookView {
        WebhookView { id, created_at: s.created_at, updated_at: s.updated_at, webhook: s.value.clone() }
    }
}

impl KeepPrivate for Webhook {
    fn keep_from(self, _: &Self) -> Self {
        self
    }
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

fn list<K: Kind>(app: &App, cluster: Option<ClusterId>) -> Result<Json<Items<K::View>>, ApiError> {
    let c = app.config();
    if let Some(cl) = cluster {
        find::<Cluster>(&c, cl.0, None)?;
    }
    let items: Vec<K::View> = K::map(&c)
        .iter()
        .filter(|(_, s)| cluster.is_none_or(|cl| s.value.cluster() == Some(cl)))
        .map(|(id, s)| K::view(*id, s, &c, app))
        .collect();
    Ok(Json(items.into()))
}

fn one<K: Kind>(app: &App, id: i64, cluster: Option<ClusterId>) -> Result<Json<K::View>, ApiError> {
    let c = app.config();
    let s = find::<K>(&c, id, cluster)?;
    Ok(Json(K::view(id, s, &c, app)))
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
    let value = K::parse(body, cluster, app)?;
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
    let c = app.config();
    let s = find::<K>(&c, id, None)?;
    Ok((StatusCode::CREATED, Json(K::view(id, s, &c, app))))
}

/// RFC 7396 JSON merge patch.
fn merge(target: &mut Value, patch: Value) {
    match (target, patch) {
        (Value::Object(t), Value::Object(p)) => {
            for (k, v) in p {
                if v.is_null() {
                    t.remove(&k);
                } else {
                    merge(t.entry(k).or_insert(Value::Null), v);
                }
            }
        }
        (t, p) => *t = p,
    }
}

async fn change<K: Kind>(
    app: &App,
    actor: &Actor,
    id: i64,
    patch: Value,
    cluster: Option<ClusterId>,
    keep: impl FnOnce(&K, K) -> K,
) -> Result<Json<K::View>, ApiError> {
    if !patch.is_object() {
        return Err(ApiError::invalid("body", "a JSON object with the fields to change"));
    }
    app.change(actor, |c| {
        let old = find::<K>(c, id, cluster)?.value.clone();
        let mut doc = old.doc();
        merge(&mut doc, patch.clone());
        let new = keep(&old, K::parse(doc, old.cluster(), app)?);
        new.check(id, c)?;
        let mut ch = Change::default();
        ch.audit(K::action("update"), format!("{}:{id}", K::NAME), patch);
        ch.puts.push((id, new.wrap()));
        Ok((ch, ()))
    })
    .await?;
    one::<K>(app, id, cluster)
}

async fn remove<K: Kind>(
    app: &App,
    actor: &Actor,
    id: i64,
    cluster: Option<ClusterId>,
) -> Result<StatusCode, ApiError> {
    app.change(actor, |c| {
        let old = find::<K>(c, id, cluster)?;
        let cascade = K::check_delete(id, c)?;
        let mut ch = Change::default();
        ch.audit(
            K::action("delete"),
            format!("{}:{id}", K::NAME),
            json!({"name": old.value.doc().get("name"), "with": cascade}),
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
            get(|State(app): State<Arc<App>>| async move { list::<$kind>(&app, None) }),
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
            delete(|(State(app), Extension(actor)): Ctx, Path(id): Path<i64>| async move {
                remove::<$kind>(&app, &actor, id, None).await
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
            get(|State(app): State<Arc<App>>, Path(id): Path<i64>| async move { list::<$kind>(&app, Some(ClusterId(id))) }),
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
            delete(|(State(app), Extension(actor)): Ctx, Path((id, child)): Path<(i64, i64)>| async move {
                remove::<$kind>(&app, &actor, child, Some(ClusterId(id))).await
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
            ..self
        }
    }
}
impl KeepPrivate for ProberRecord {
    fn keep_from(self, old: &Self) -> Self {
        ProberRecord { cert_sha256: old.cert_sha256.clone(), cert_issued_at: old.cert_issued_at, ..self }
    }
}

pub(super) fn routes(api: &mut Api) {
    super::agents::routes(api);
    top_level!(api, Region, "/v1/regions", "regions", "region", create: true);
    top_level!(api, Cluster, "/v1/clusters", "clusters", "cluster", create: true);
    top_level!(api, NodeRecord, "/v1/nodes", "nodes", "node", create: true);
    top_level!(api, ProberRecord, "/v1/probers", "probers", "prober", create: false);
    top_level!(api, Webhook, "/v1/webhooks", "alerts", "webhook", create: true);
    children!(api, GroupRecord, "groups", "clusters", "node group");
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
}

async fn settings_get(State(app): State<Arc<App>>) -> Json<ProbeSettings> {
    Json(app.config().settings)
}

async fn settings_put(
    (State(app), Extension(actor)): Ctx,
    Json(body): Json<Value>,
) -> Result<Json<ProbeSettings>, ApiError> {
    let settings: ProbeSettings = parse_json(body)?;
    app.change(&actor, |c| {
        let id = match c.settings_id {
            Some(id) => id,
            None => c.allocate(),
        };
        let mut ch = Change::default();
        ch.audit(
            "settings.probes_update",
            "settings:probes",
            json!({"before": c.settings, "after": settings}),
        );
        ch.puts.push((id, Object::Settings(settings)));
        Ok((ch, ()))
    })
    .await?;
    Ok(Json(app.config().settings))
}

async fn addresses_get(
    State(app): State<Arc<App>>,
    Path(id): Path<i64>,
) -> Result<Json<Addresses>, ApiError> {
    let c = app.config();
    let n = find::<NodeRecord>(&c, id, None)?;
    let source =
        if n.value.addresses.is_empty() { AddressSource::Reported } else { AddressSource::Configured };
    Ok(Json(Addresses { source, configured: n.value.addresses.as_slice().to_vec() }))
}

async fn addresses_put(
    (State(app), Extension(actor)): Ctx,
    Path(id): Path<i64>,
    Json(body): Json<Value>,
) -> Result<Json<Addresses>, ApiError> {
    let rows: Vec<AddressInput> = parse_json(body)?;
    let list = AddressList::parse(&rows, app.address_policy())?;
    app.change(&actor, |c| {
        let mut n = find::<NodeRecord>(c, id, None)?.value.clone();
        let before = n.addresses.clone();
        n.addresses = list.clone();
        let mut ch = Change::default();
        ch.audit("node.set_addresses", format!("node:{id}"), json!({"before": before, "after": list}));
        ch.puts.push((id, Object::Node(n)));
        Ok((ch, ()))
    })
    .await?;
    addresses_get(State(app), Path(id)).await
}
