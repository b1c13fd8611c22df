//! Probers and node agents in the admin API: enrollment tokens, the prober list's runtime
//! columns, per-prober and per-node results with their window strips, and a cluster's
//! current records (its revisions are in `revisions`).

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::routing::{get, post};
use axum::{Extension, Json};
use serde_json::{Value, json};
use vantage_core::Timestamp;
use vantage_core::address::{AddressPolicy, AddressSource};
use vantage_core::evaluate::NodeStatus;
use vantage_core::ids::{ClusterId, NodeId, ProberId, RegionId};
use vantage_core::reachability::Tally;

use super::objects::written::Made;
use super::{Api, Op};
use crate::app::{Actor, App, Change};
use crate::auth::new_token;
use crate::error::{ApiError, parse_json};
use crate::support::now;
use crate::views::{
    AddressRegionView, AddressView, DnsLine, DnsView, EnrollTokenView, HeldBy, Items, NewEnrollToken,
    NodeTokenBody, NodeUsage, NodeView, ProberKind, ProberTokenBody, ProberView, ResultView, WindowView,
};
use vantage_control::config::{Config, EnrollToken, NodeRecord, Object, ProberRecord, Role, Stored};
use vantage_control::drain::Drain;
use vantage_control::identity::Caller;
use vantage_control::observe::{Latest, NodeRuntime, agent_online};
use vantage_control::target::TargetKey;
use vantage_control::view::{Passed, View};

pub(super) fn routes(api: &mut Api) {
    api.add(
        Op::get("/v1/probers/tokens", "probers", "List prober enrollment tokens").lists::<EnrollTokenView>(),
        get(prober_tokens),
    );
    api.add(
        Op::post("/v1/probers/tokens", "probers", "Create a prober enrollment token (shown once)")
            .takes::<ProberTokenBody>()
            .creates::<NewEnrollToken>(),
        post(prober_token),
    );
    api.add(
        Op::get("/v1/nodes/tokens", "nodes", "List node enrollment tokens").lists::<EnrollTokenView>(),
        get(node_tokens),
    );
    api.add(
        Op::post("/v1/nodes/tokens", "nodes", "Create a node enrollment token (shown once)")
            .takes::<NodeTokenBody>()
            .creates::<NewEnrollToken>(),
        post(node_token),
    );
    api.add(
        Op::get("/v1/probers/{id}/results", "probers", "A prober's latest results").lists::<ResultView>(),
        get(prober_results),
    );
    api.add(
        Op::get("/v1/nodes/{id}/results", "nodes", "Every prober's latest results for a node")
            .lists::<ResultView>(),
        get(node_results),
    );
    api.add(
        Op::get("/v1/clusters/{id}/dns", "clusters", "What DNS answers for a cluster now, per line")
            .answers::<DnsView>(),
        get(dns),
    );
}

/// Token validity: 5 minutes to 7 days, 60 minutes by default.
fn validity(v: Option<i64>) -> Result<i64, ApiError> {
    let s = v.unwrap_or(3600);
    if !(300..=604_800).contains(&s) {
        return Err(ApiError::invalid(
            "valid_for_s",
            format!("must be between 300 (5 minutes) and 604800 (7 days), got {s}"),
        ));
    }
    Ok(s)
}

/// The channel URL for start commands: the configured one, else this server's host name as the
/// operator reached the API, with the channel's port.
fn agent_url(app: &App, headers: &HeaderMap) -> String {
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(|h| match h.rsplit_once(':') {
            Some((host, port)) if port.chars().all(|c| c.is_ascii_digit()) => host.to_owned(),
            _ => h.to_owned(),
        })
        .unwrap_or_else(|| "localhost".into());
    app.settings().agent_url(&host)
}

async fn make_token(
    app: &App,
    actor: &Actor,
    role: Role,
    token: EnrollToken,
    audit: Value,
) -> Result<(i64, String), ApiError> {
    let t = new_token(if role == Role::Prober { "vtp" } else { "vtn" });
    // A prober's token is audited as the reference names it (`probe.token_create`).
    let kind = if role == Role::Prober { "probe" } else { "node" };
    let id = app
        .change(actor, |c| {
            let id = c.allocate();
            let mut ch = Change::default();
            let mut meta = audit.clone();
            meta["prefix"] = json!(t.prefix);
            meta["expires_at"] = json!(token.expires_at);
            ch.audit(format!("{kind}.token_create"), format!("enroll_token:{id}"), meta);
            ch.puts.push((
                id,
                Object::EnrollToken(EnrollToken {
                    prefix: t.prefix.clone(),
                    sha256: t.sha256.clone(),
                    ..token
                }),
            ));
            Ok((ch, id))
        })
        .await?;
    Ok((id, t.token))
}

fn token_answer(
    app: &App,
    headers: &HeaderMap,
    id: i64,
    token: String,
    expires: Timestamp,
    command: &str,
) -> NewEnrollToken {
    let server = agent_url(app, headers);
    let ca = app.ca().fingerprint.clone();
    NewEnrollToken {
        id,
        // The token goes through the environment, not the command line, which every local
        // user can read (`ps`).
        command: format!(
            "VANTAGE_TOKEN={token} vantage {command} --server {server} --ca-sha256 {ca} --state-dir /var/lib/vantage-{command}"
        ),
        token,
        expires_at: expires,
        server,
        ca_sha256: ca,
    }
}

async fn prober_token(
    State(app): State<Arc<App>>,
    Extension(actor): Extension<Actor>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Result<(StatusCode, Json<NewEnrollToken>), ApiError> {
    let b: ProberTokenBody = parse_json(body)?;
    let c = app.config();
    if c.regions.is_empty() {
        return Err(ApiError::invalid("region", "Create a region first"));
    }
    let name = vantage_core::model::display_name("name", &b.name)?;
    if c.prober_named(&name).is_some() {
        return Err(ApiError::invalid("name", format!("a prober named {name:?} already exists")));
    }
    let region = b.region.ok_or_else(|| ApiError::invalid("region", "a region is required"))?;
    if !c.regions.contains_key(&region.0) {
        return Err(ApiError::invalid("region", format!("no region {region}")));
    }
    let expires_at = now().plus_secs(u64::try_from(validity(b.valid_for_s)?).unwrap_or(3600));
    let token = EnrollToken {
        role: Role::Prober,
        name: name.clone(),
        region: Some(region),
        node: None,
        prefix: String::new(),
        sha256: String::new(),
        expires_at,
        used_at: None,
    };
    let (id, t) =
        make_token(&app, &actor, Role::Prober, token, json!({"name": name, "region": region})).await?;
    Ok((StatusCode::CREATED, Json(token_answer(&app, &headers, id, t, expires_at, "probe"))))
}

async fn node_token(
    State(app): State<Arc<App>>,
    Extension(actor): Extension<Actor>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Result<(StatusCode, Json<NewEnrollToken>), ApiError> {
    let b: NodeTokenBody = parse_json(body)?;
    let c = app.config();
    let node =
        c.nodes.get(&b.node.0).ok_or_else(|| ApiError::invalid("node", format!("no node {}", b.node)))?;
    let expires_at = now().plus_secs(u64::try_from(validity(b.valid_for_s)?).unwrap_or(3600));
    let token = EnrollToken {
        role: Role::Node,
        name: node.value.node.name.clone(),
        region: None,
        node: Some(b.node),
        prefix: String::new(),
        sha256: String::new(),
        expires_at,
        used_at: None,
    };
    let (id, t) = make_token(&app, &actor, Role::Node, token, json!({"node": b.node})).await?;
    Ok((StatusCode::CREATED, Json(token_answer(&app, &headers, id, t, expires_at, "agent"))))
}

fn list_tokens(c: &Config, role: Role) -> Json<Items<EnrollTokenView>> {
    let at = now();
    let items = c
        .enroll_tokens
        .iter()
        .filter(|(_, t)| t.value.role == role)
        .map(|(id, t)| EnrollTokenView {
            id: *id,
            prefix: t.value.prefix.clone(),
            name: t.value.name.clone(),
            region: t.value.region,
            node: t.value.node,
            expires_at: t.value.expires_at,
            used_at: t.value.used_at,
            state: t.value.state(at),
            created_at: t.created_at,
        })
        .collect::<Vec<_>>();
    Json(items.into())
}

async fn prober_tokens(State(app): State<Arc<App>>) -> Json<Items<EnrollTokenView>> {
    list_tokens(&app.config(), Role::Prober)
}

async fn node_tokens(State(app): State<Arc<App>>) -> Json<Items<EnrollTokenView>> {
    list_tokens(&app.config(), Role::Node)
}

/// A prober with the prober list's columns (§3.5).
pub(super) fn prober_view(core: &View, id: i64, s: &Stored<ProberRecord>) -> ProberView {
    let (c, rec) = (&core.config, &s.value);
    let caller = Caller::Prober(ProberId(id));
    let r = core.probers.get(&caller);
    ProberView {
        name: rec.name.clone(),
        region: rec.region,
        region_code: c.regions.get(&rec.region.0).map(|r| r.value.code.clone()),
        enabled: rec.enabled,
        status: core.prober_status(caller, now()),
        last_seen: r.and_then(|r| r.last_seen),
        version: r.and_then(|r| r.version.clone()),
        hostname: r.and_then(|r| r.hostname.clone()),
        targets: r.map_or(0, |r| r.targets),
        last_round: r.and_then(|r| r.last_round),
        last_endpoint_checks: r.and_then(|r| r.last_endpoint_checks),
        last_confirmation: r.and_then(|r| r.last_confirmation),
        id,
        created_at: s.created_at,
        updated_at: s.updated_at,
    }
}

/// What a node's view is made of besides its record: compared before the view is made, so
/// that a list of 10,000 unchanged nodes makes none of their views ([`Made`]).
pub(super) struct NodeInputs {
    /// The configuration (the node's record; its cluster's, group's, regions', rules' and
    /// maintenance windows' names), held so that its pointer names it.
    config: Arc<Config>,
    /// What its agent last said, held likewise.
    agent: Option<Arc<NodeRuntime>>,
    /// What its cluster's last pass says of it, held likewise: a pass keeps a status that did
    /// not change (comparing 10,000 statuses at every list was most of a list's time).
    status: Option<Arc<NodeStatus>>,
    level_since: Option<Timestamp>,
    drain: Option<Drain>,
    policy: AddressPolicy,
    /// What the clock decides in it.
    clock: Clocked,
}

/// What the clock decides in a node's view: whether its agent is online (a heartbeat within
/// 45 s), and its usage while its metrics are fresh (60 s).
type Clocked = (bool, Option<NodeUsage>);

/// What a node's view reads beyond its record and the configuration at a moment, read once.
#[derive(Clone, Copy)]
struct Around<'a> {
    agent: Option<&'a Arc<NodeRuntime>>,
    passed: Passed<'a>,
    clock: Clocked,
}

impl<'a> Around<'a> {
    fn of(core: &'a View, node: NodeId, cluster: ClusterId, at: Timestamp) -> Around<'a> {
        let agent = core.agents.get(&node);
        let clock = (
            agent_online(agent.and_then(|a| a.last_heartbeat), at),
            agent.and_then(|a| a.metrics.as_ref()).and_then(|m| NodeUsage::of(m, at)),
        );
        Around { agent, passed: core.passed(node, cluster), clock }
    }
}

/// A node in a list at `at`, its view made only when its inputs changed.
pub(super) struct NodeItem<'a> {
    pub(super) core: &'a View,
    pub(super) node: i64,
    pub(super) stored: &'a Stored<NodeRecord>,
    pub(super) at: Timestamp,
}

impl NodeItem<'_> {
    fn around(&self) -> Around<'_> {
        Around::of(self.core, NodeId(self.node), self.stored.value.cluster, self.at)
    }
}

impl Made<NodeView, NodeInputs> for NodeItem<'_> {
    fn made_of(&self, was: &NodeInputs) -> bool {
        let now = self.around();
        Arc::ptr_eq(&was.config, &self.core.config)
            && same_arc(was.agent.as_ref(), now.agent)
            && same_arc(was.status.as_ref(), now.passed.status)
            && (was.level_since, was.drain) == (now.passed.level_since, now.passed.drain)
            && was.policy == self.core.policy
            && was.clock == now.clock
    }

    fn make(self) -> (Option<NodeInputs>, NodeView) {
        let around = self.around();
        let inputs = NodeInputs {
            config: self.core.config.clone(),
            agent: around.agent.cloned(),
            status: around.passed.status.cloned(),
            level_since: around.passed.level_since,
            drain: around.passed.drain,
            policy: self.core.policy,
            clock: around.clock,
        };
        (Some(inputs), view_of(self.core, self.node, self.stored, &around))
    }
}

/// Whether two held objects are the same one (or both absent).
fn same_arc<T>(a: Option<&Arc<T>>, b: Option<&Arc<T>>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => Arc::ptr_eq(a, b),
        (a, b) => a.is_none() && b.is_none(),
    }
}

/// A node with what its agent and the last pass know at `at`: connection, metrics, reported
/// addresses, and each scheduling address with its source, reachability and use; the level DNS
/// uses and the rule that holds it there.
pub(super) fn node_view(core: &View, node: i64, s: &Stored<NodeRecord>, at: Timestamp) -> NodeView {
    view_of(core, node, s, &Around::of(core, NodeId(node), s.value.cluster, at))
}

fn view_of(core: &View, node: i64, s: &Stored<NodeRecord>, around: &Around<'_>) -> NodeView {
    let (c, rec) = (&core.config, &s.value);
    let id = NodeId(node);
    let Around { agent, passed, clock: (online, usage) } = *around;
    let source = if rec.addresses.is_empty() { AddressSource::Reported } else { AddressSource::Configured };
    let status = passed.status;
    let addresses: Vec<AddressView> = core
        .addresses_of(id)
        .unwrap_or_default()
        .as_slice()
        .iter()
        .map(|a| {
            let s = status.and_then(|s| s.addresses.iter().find(|x| x.ip == a.ip));
            AddressView {
                ip: a.ip,
                level: a.level,
                line: a.line,
                source,
                reachability: s.map(|s| s.reachability),
                in_use: s.is_some_and(|s| s.in_use),
                probers: s.map(|s| s.verdict),
                damping: s.map_or(1, |s| s.damping),
                condition: s.map(|s| s.condition.condition),
                since: s.and_then(|s| s.condition.since),
                changes_at: s.and_then(|s| s.condition.changes_at),
                regions: region_views(c, s.map(|s| &*s.regions).unwrap_or_default()),
            }
        })
        .collect();
    NodeView {
        id: node,
        created_at: s.created_at,
        updated_at: s.updated_at,
        cluster: rec.cluster,
        cluster_name: c.clusters.get(&rec.cluster.0).map(|x| x.value.name.clone()).unwrap_or_default(),
        group: rec.node.group,
        group_name: c.groups.get(&rec.node.group.0).map(|g| g.value.group.name.clone()).unwrap_or_default(),
        name: rec.node.name.clone(),
        enabled: rec.node.enabled,
        drained: rec.node.drained,
        drain: passed.drain,
        drain_cause: passed.drain.map(|d| d.cause.describe(c)),
        also_probes: rec.node.also_probes,
        enrolled: rec.cert_sha256.is_some(),
        online,
        last_heartbeat: agent.and_then(|a| a.last_heartbeat),
        version: agent.and_then(|a| a.version.clone()),
        hostname: agent.and_then(|a| a.hostname.clone()),
        connects_from: agent.and_then(|a| a.connects_from),
        enrolled_from: rec.enrolled_from,
        addable_source: core.addable_source(id),
        capabilities: agent.map(|a| a.capabilities.clone()).unwrap_or_default(),
        metrics: agent.and_then(|a| a.metrics),
        usage,
        links: agent.map(|a| a.links.clone()).unwrap_or_default(),
        reported_addresses: agent.map(|a| a.addresses.clone()).unwrap_or_default(),
        no_public_address: addresses.is_empty(),
        addresses,
        level: status.and_then(|s| s.level),
        level_since: passed.level_since,
        serving: status.map(|s| s.serving),
        held_by: status
            .and_then(|s| s.held_by)
            .map(|r| HeldBy { rule: r, name: c.rules.get(&r.0).map(|x| x.value.rule.name.clone()) }),
    }
}

/// Each region's tally of an address under the region's code and name, by code.
fn region_views(c: &Config, verdicts: &[(RegionId, Tally)]) -> Vec<AddressRegionView> {
    let mut out: Vec<AddressRegionView> = verdicts
        .iter()
        .copied()
        .filter_map(|(r, probers)| {
            let region = &c.regions.get(&r.0)?.value;
            Some(AddressRegionView {
                region: r,
                code: region.code.clone(),
                name: region.name.clone(),
                probers,
            })
        })
        .collect();
    out.sort_by(|a, b| a.code.cmp(&b.code));
    out
}

/// One result row with its window strip.
fn result_row(c: &Config, key: TargetKey, caller: Caller, l: &Latest) -> ResultView {
    let node = c.nodes.get(&key.node.0);
    let cluster = node.and_then(|n| c.clusters.get(&n.value.cluster.0));
    let listener = cluster.and_then(|cl| cl.value.listeners.iter().find(|x| x.port == key.port));
    let (window, threshold) =
        cluster.map(|cl| c.cluster_check(&cl.value).check).map_or((8, 3), |k| (k.window(), k.threshold()));
    let ipv6 = key.ip.is_ipv6();
    let prober = caller.id();
    let (prober_name, region, prober_kind) = match caller {
        Caller::Prober(p) => match c.probers.get(&p.0) {
            Some(p) => (p.value.name.clone(), Some(p.value.region), ProberKind::Prober),
            None => (format!("prober {prober}"), None, ProberKind::Prober),
        },
        Caller::Node(n) => (
            c.nodes.get(&n.0).map_or_else(|| format!("node {n}"), |n| n.value.node.name.clone()),
            None,
            ProberKind::Node,
        ),
    };
    ResultView {
        target: key.to_string(),
        node: key.node,
        node_name: node.map(|n| n.value.node.name.clone()),
        address: key.ip,
        port: key.port,
        method: listener.map(|x| x.protocol.method().to_string()),
        prober,
        prober_name,
        prober_kind,
        region,
        sent: l.sent,
        lost: l.lost,
        loss_pct: if l.sent == 0 { 0.0 } else { f64::from(l.lost) * 100.0 / f64::from(l.sent) },
        rtt_ms: l.rtt_us.map(|us| f64::from(us) / 1000.0),
        error: l.error,
        checked: l.at,
        window: WindowView::of(&l.register, window, threshold, ipv6),
    }
}

async fn prober_results(
    State(app): State<Arc<App>>,
    Path(id): Path<i64>,
) -> Result<Json<Items<ResultView>>, ApiError> {
    let c = app.config();
    let caller = c.caller(id).ok_or_else(|| ApiError::NotFound(format!("Prober {id} not found")))?;
    // Every latest result is the core's alone: read between two of its inputs.
    let mut rows: Vec<(TargetKey, ResultView)> = app
        .owner()
        .read(move |core, _| {
            let c = core.config();
            let results = core.addresses().results().of_caller(caller);
            results.map(|(k, l)| (k, result_row(&c, k, caller, &l))).collect()
        })
        .await?;
    rows.sort_by_key(|(k, _)| k.to_string());
    Ok(Json(rows.into_iter().map(|(_, v)| v).collect::<Vec<_>>().into()))
}

async fn node_results(
    State(app): State<Arc<App>>,
    Path(id): Path<i64>,
) -> Result<Json<Items<ResultView>>, ApiError> {
    let c = app.config();
    if !c.nodes.contains_key(&id) {
        return Err(ApiError::NotFound(format!("Node {id} not found")));
    }
    let mut rows: Vec<((String, i64), ResultView)> = app
        .owner()
        .read(move |core, _| {
            let c = core.config();
            let results = core.addresses().results().of_node(NodeId(id));
            results.map(|(k, p, l)| ((k.to_string(), p.id()), result_row(&c, k, p, &l))).collect()
        })
        .await?;
    rows.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(Json(rows.into_iter().map(|(_, v)| v).collect::<Vec<_>>().into()))
}

async fn dns(State(app): State<Arc<App>>, Path(id): Path<i64>) -> Result<Json<DnsView>, ApiError> {
    let c = app.config();
    let cluster = c.clusters.get(&id).ok_or_else(|| ApiError::NotFound(format!("Cluster {id} not found")))?;
    let snapshot = app.view().snapshots.get(&ClusterId(id)).cloned();
    let p = snapshot.as_ref().and_then(|s| s.published.as_deref());
    let lines = p
        .map(|p| {
            p.lines()
                .map(|(id, line, records)| DnsLine {
                    id,
                    name: line.name.clone(),
                    client_networks: line.client_networks.clone(),
                    places: line.places.clone(),
                    records: records.to_vec(),
                    since: snapshot.as_ref().and_then(|s| s.line_since.get(&id).copied()),
                    held: p.held.get(&id).cloned(),
                })
                .collect()
        })
        .unwrap_or_default();
    // What DNS answers: the zone as of the published revision, until a first one exists.
    let (domain, aliases, ttl) = p.map_or_else(
        || (&cluster.value.domain, &cluster.value.aliases, cluster.value.ttl),
        |p| (&p.zone.domain, &p.zone.aliases, p.zone.ttl),
    );
    Ok(Json(DnsView {
        domain: domain.clone(),
        aliases: aliases.clone(),
        ttl,
        revision: p.map(|p| p.number),
        at: p.map(|p| p.at),
        reason: p.map(|p| p.reason.clone()),
        lines,
        all: p.map(|p| p.records.all.clone()).unwrap_or_default(),
    }))
}

#[cfg(test)]
mod tests {
    use vantage_control::fixtures::large_fleet;
    use vantage_control::{Control, Start};
    use vantage_core::wire;

    use super::*;
    use crate::api::objects::written::Written;

    /// Whatever a node's view is made of moves — its agent's heartbeat and metrics, the clock
    /// alone (45 s for online, 60 s for usage), a pass, a drain, a change of its record or of
    /// another object it names — a list written from the last one's bytes is what making every
    /// view would write.
    #[test]
    fn a_node_list_follows_what_its_views_are_made_of() {
        let mut now = Timestamp::from_secs(1_800_000_000);
        let mut control = Control::new(Start::default(), now);
        control.handle_change(large_fleet(3, 2).puts, Vec::new(), now);
        control.handle_timeout(now);
        let written = Written::default();
        let mut lists = Vec::new();
        let mut check = |core: &View, at: Timestamp| {
            let nodes = core.config.nodes.iter();
            let items = nodes.clone().map(|(id, stored)| (*id, NodeItem { core, node: *id, stored, at }));
            let listed = String::from_utf8(written.list(("node", None), items).unwrap()).unwrap();
            let views: Vec<NodeView> = nodes.map(|(id, s)| node_view(core, *id, s, at)).collect();
            let whole = serde_json::to_string(&Items::from(views)).unwrap();
            assert_eq!(listed, whole);
            lists.push(listed);
        };
        let first = *control.view(now).config.nodes.keys().next().unwrap();
        check(&control.view(now), now);
        check(&control.view(now), now);
        let metrics = wire::HostMetrics { cpu_pct: 12.0, memory_total_bytes: 100, ..Default::default() };
        let heartbeat = wire::Heartbeat {
            version: "1.0".into(),
            hostname: "edge".into(),
            metrics: Some(metrics),
            addresses: Vec::new(),
            capabilities: Vec::new(),
            links: Vec::new(),
        };
        control.handle_heartbeat(NodeId(first), heartbeat, "127.0.0.1".parse().unwrap(), now);
        let online = control.view(now);
        check(&online, now);
        // The same view 46 s on: offline by the clock alone, its usage still shown; 61 s on,
        // its usage gone too.
        check(&online, now.plus_secs(46));
        check(&online, now.plus_secs(61));
        now = now.plus_secs(70);
        control.handle_timeout(now);
        check(&control.view(now), now);
        let record = |c: &mut Control, id: i64| (*c.view(now).config.nodes[&id].value).clone();
        let mut renamed = record(&mut control, first);
        renamed.node.name = "renamed".into();
        control.handle_change(vec![(first, Object::Node(renamed))], Vec::new(), now);
        control.handle_timeout(now);
        check(&control.view(now), now);
        // Its cluster renamed: its record is the same object, its view names the cluster.
        let cluster = record(&mut control, first).cluster;
        let mut named = (*control.view(now).config.clusters[&cluster.0].value).clone();
        named.name = "elsewhere".into();
        control.handle_change(vec![(cluster.0, Object::Cluster(named))], Vec::new(), now);
        control.handle_timeout(now);
        check(&control.view(now), now);
        // Drained: the pass says so (its drain, and it no longer serves).
        let mut drained = record(&mut control, first);
        drained.node.drained = true;
        control.handle_change(vec![(first, Object::Node(drained))], Vec::new(), now);
        control.handle_timeout(now);
        let view = control.view(now);
        assert!(view.passed(NodeId(first), cluster).drain.is_some());
        check(&view, now);
        // The pass 70 s on has nothing new (no prober reports here, the agent offline as the
        // clock had said): it changes no view.
        let changed: Vec<bool> = lists.windows(2).map(|w| w[0] != w[1]).collect();
        assert_eq!(
            changed,
            [false, true, true, true, false, true, true, true],
            "what moved shows in the list"
        );
    }
}
