//! Probers and node agents in the admin API: enrollment tokens, the prober list's runtime
//! columns, per-prober and per-node results with their window strips, and a cluster's
//! revisions and current records.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::routing::{get, post};
use axum::{Extension, Json};
use serde::Deserialize;
use serde_json::{Value, json};
use utoipa::openapi::path::HttpMethod;
use vantage_core::ids::{ClusterId, NodeId, RegionId};
use vantage_core::window::strip;

use super::Api;
use crate::app::{Actor, App, Change};
use crate::auth::new_token;
use crate::error::{ApiError, parse_json};
use crate::support::now;
use vantage_control::config::{Config, EnrollToken, NodeRecord, Object, Role};
use vantage_control::identity::Caller;
use vantage_control::observe::{Latest, agent_online};
use vantage_control::target::TargetKey;

pub(super) fn routes(api: &mut Api) {
    api.add(
        HttpMethod::Get,
        "/v1/probers/tokens",
        "probers",
        "List prober enrollment tokens",
        get(prober_tokens),
    );
    api.add(
        HttpMethod::Post,
        "/v1/probers/tokens",
        "probers",
        "Create a prober enrollment token (shown once)",
        post(prober_token),
    );
    api.add(HttpMethod::Get, "/v1/nodes/tokens", "nodes", "List node enrollment tokens", get(node_tokens));
    api.add(
        HttpMethod::Post,
        "/v1/nodes/tokens",
        "nodes",
        "Create a node enrollment token (shown once)",
        post(node_token),
    );
    api.add(
        HttpMethod::Get,
        "/v1/probers/{id}/results",
        "probers",
        "A prober's latest results",
        get(prober_results),
    );
    api.add(
        HttpMethod::Get,
        "/v1/nodes/{id}/results",
        "nodes",
        "Every prober's latest results for a node",
        get(node_results),
    );
    api.add(
        HttpMethod::Get,
        "/v1/clusters/{id}/revisions",
        "clusters",
        "A cluster's revisions, newest first",
        get(revisions),
    );
    api.add(
        HttpMethod::Get,
        "/v1/clusters/{id}/dns",
        "clusters",
        "A cluster's current records per line",
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

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProberTokenBody {
    name: String,
    region: Option<RegionId>,
    valid_for_s: Option<i64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NodeTokenBody {
    node: NodeId,
    valid_for_s: Option<i64>,
}

async fn make_token(
    app: &App,
    actor: &Actor,
    role: Role,
    token: EnrollToken,
    audit: Value,
) -> Result<(i64, String), ApiError> {
    let t = new_token(if role == Role::Prober { "vtp" } else { "vtn" });
    let kind = if role == Role::Prober { "prober" } else { "node" };
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
    expires: vantage_core::Timestamp,
    command: &str,
) -> Value {
    let server = agent_url(app, headers);
    json!({
        "id": id,
        "token": token,
        "expires_at": expires,
        "server": server,
        "ca_sha256": app.ca().fingerprint,
        "command": format!("vantage {command} --server {server} --token {token} --ca-sha256 {} --state-dir /var/lib/vantage-{command}", app.ca().fingerprint),
    })
}

async fn prober_token(
    State(app): State<Arc<App>>,
    Extension(actor): Extension<Actor>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
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
) -> Result<(StatusCode, Json<Value>), ApiError> {
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

fn list_tokens(c: &Config, role: Role) -> Json<Value> {
    let at = now();
    let items: Vec<Value> = c
        .enroll_tokens
        .iter()
        .filter(|(_, t)| t.value.role == role)
        .map(|(id, t)| {
            let state = t.value.state(at);
            json!({"id": id, "prefix": t.value.prefix, "name": t.value.name, "region": t.value.region, "node": t.value.node,
                   "expires_at": t.value.expires_at, "used_at": t.value.used_at, "state": state, "created_at": t.created_at})
        })
        .collect();
    Json(json!({ "items": items }))
}

async fn prober_tokens(State(app): State<Arc<App>>) -> Json<Value> {
    list_tokens(&app.config(), Role::Prober)
}

async fn node_tokens(State(app): State<Arc<App>>) -> Json<Value> {
    list_tokens(&app.config(), Role::Node)
}

/// Adds the prober list's columns (§3.5) to a prober's view.
pub(super) fn prober_runtime(app: &App, c: &Config, caller: Caller, v: &mut Value) {
    let control = app.control();
    let r = control.observations().probers.get(&caller);
    v["status"] = json!(control.prober_status(caller, now()));
    v["last_seen"] = json!(r.and_then(|r| r.last_seen));
    v["version"] = json!(r.and_then(|r| r.version.clone()));
    v["hostname"] = json!(r.and_then(|r| r.hostname.clone()));
    v["targets"] = json!(r.map_or(0, |r| r.targets));
    v["last_round"] = json!(r.and_then(|r| r.last_round));
    v["region_code"] =
        json!(c.regions.get(&v["region"].as_i64().unwrap_or_default()).map(|r| r.value.code.clone()));
}

/// Adds what the agent and the last pass know to a node's view: connection, metrics, reported
/// addresses, and each scheduling address with its source, reachability and use; the level DNS
/// uses and the rule that holds it there.
pub(super) fn node_runtime(app: &App, id: i64, rec: &NodeRecord, v: &mut Value) {
    let control = app.control();
    let agent = control.observations().nodes.get(&NodeId(id));
    v["online"] = json!(agent_online(agent.and_then(|a| a.last_heartbeat), now()));
    v["last_heartbeat"] = json!(agent.and_then(|a| a.last_heartbeat));
    v["version"] = json!(agent.and_then(|a| a.version.clone()));
    v["hostname"] = json!(agent.and_then(|a| a.hostname.clone()));
    v["connects_from"] = json!(agent.and_then(|a| a.connects_from));
    v["capabilities"] = json!(agent.map(|a| a.capabilities.clone()).unwrap_or_default());
    v["metrics"] = json!(agent.and_then(|a| a.metrics));
    v["reported_addresses"] = json!(agent.map(|a| a.addresses.clone()).unwrap_or_default());
    let source = if rec.addresses.is_empty() { "reported" } else { "configured" };
    let in_use = control.addresses_of(NodeId(id)).unwrap_or_default();
    let status = control.node_status(NodeId(id));
    let rows: Vec<Value> = in_use
        .as_slice()
        .iter()
        .map(|a| {
            let s = status.and_then(|s| s.addresses.iter().find(|x| x.ip == a.ip));
            json!({"ip": a.ip, "level": a.level, "source": source,
                   "reachability": s.map(|s| s.reachability), "in_use": s.is_some_and(|s| s.in_use),
                   "probers": s.map(|s| s.verdict)})
        })
        .collect();
    v["addresses"] = json!(rows);
    v["level"] = json!(status.and_then(|s| s.level));
    v["serving"] = json!(status.map(|s| s.serving));
    let held_by = status.and_then(|s| s.held_by);
    let c = app.config();
    v["held_by"] = json!(held_by.map(|r| json!({
        "rule": r,
        "name": c.rules.get(&r.0).map(|x| x.value.rule.name.clone()),
    })));
}

/// One result row with its window strip.
fn result_row(c: &Config, key: TargetKey, caller: Caller, l: &Latest) -> Value {
    let node = c.nodes.get(&key.node.0);
    let cluster = node.and_then(|n| c.clusters.get(&n.value.cluster.0));
    let listener = cluster.and_then(|cl| cl.value.listeners.iter().find(|x| x.port == key.port));
    let (window, threshold) =
        cluster.map_or((8, 3), |cl| (cl.value.check.window(), cl.value.check.threshold()));
    let ipv6 = key.ip.is_ipv6();
    let prober = caller.id();
    let (prober_name, region) = match caller {
        Caller::Prober(p) => match c.probers.get(&p.0) {
            Some(p) => (p.value.name.clone(), Some(p.value.region)),
            None => (format!("prober {prober}"), None),
        },
        Caller::Node(n) => {
            (c.nodes.get(&n.0).map_or_else(|| format!("node {n}"), |n| n.value.node.name.clone()), None)
        }
    };
    json!({
        "target": key.to_string(),
        "node": key.node,
        "node_name": node.map(|n| n.value.node.name.clone()),
        "address": key.ip,
        "port": key.port,
        "method": listener.map(|x| x.protocol.method()),
        "prober": prober,
        "prober_name": prober_name,
        "prober_kind": caller.kind(),
        "region": region,
        "sent": l.sent,
        "lost": l.lost,
        "loss_pct": if l.sent == 0 { 0.0 } else { f64::from(l.lost) * 100.0 / f64::from(l.sent) },
        "rtt_ms": l.rtt_us.map(|us| f64::from(us) / 1000.0),
        "error": l.error,
        "checked": l.at,
        "window": {
            "good": l.register.good_in(window),
            "threshold": threshold,
            "window": window,
            "avg_rtt_ms": l.register.avg_rtt_ms,
            "connected": strip(l.register.connected, if ipv6 { '6' } else { '4' }),
            "sent": strip(l.register.sent, 'X'),
            "received": strip(l.register.received, 'R'),
            "good_strip": strip(l.register.good, 'H'),
            "text": l.register.render(window, threshold, ipv6),
        },
    })
}

/// The caller behind an id of the prober list: a prober, or a node that probes.
fn caller_of(c: &Config, id: i64) -> Option<Caller> {
    if c.probers.contains_key(&id) {
        Some(Caller::Prober(vantage_core::ids::ProberId(id)))
    } else {
        c.nodes.contains_key(&id).then_some(Caller::Node(NodeId(id)))
    }
}

async fn prober_results(State(app): State<Arc<App>>, Path(id): Path<i64>) -> Result<Json<Value>, ApiError> {
    let c = app.config();
    let caller = caller_of(&c, id).ok_or_else(|| ApiError::NotFound(format!("Prober {id} not found")))?;
    let control = app.control();
    let mut rows: Vec<(TargetKey, Value)> = control
        .observations()
        .results
        .iter()
        .filter_map(|(k, per)| per.get(&caller).map(|l| (*k, result_row(&c, *k, caller, l))))
        .collect();
    drop(control);
    rows.sort_by_key(|(k, _)| k.to_string());
    Ok(Json(json!({ "items": rows.into_iter().map(|(_, v)| v).collect::<Vec<_>>() })))
}

async fn node_results(State(app): State<Arc<App>>, Path(id): Path<i64>) -> Result<Json<Value>, ApiError> {
    let c = app.config();
    if !c.nodes.contains_key(&id) {
        return Err(ApiError::NotFound(format!("Node {id} not found")));
    }
    let control = app.control();
    let mut rows: Vec<((String, i64), Value)> = control
        .observations()
        .results
        .iter()
        .filter(|(k, _)| k.node == NodeId(id))
        .flat_map(|(k, per)| per.iter().map(|(p, l)| ((k.to_string(), p.id()), result_row(&c, *k, *p, l))))
        .collect();
    drop(control);
    rows.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(Json(json!({ "items": rows.into_iter().map(|(_, v)| v).collect::<Vec<_>>() })))
}

fn line_names(c: &Config, cluster: ClusterId) -> BTreeMap<String, Value> {
    let mut m: BTreeMap<String, Value> = c
        .lines_of(cluster)
        .map(|(id, l)| {
            (
                id.0.to_string(),
                json!({"name": l.value.line.name, "client_networks": l.value.line.client_networks}),
            )
        })
        .collect();
    m.entry(vantage_core::evaluate::DEFAULT_LINE.0.to_string())
        .or_insert(json!({"name": "default", "client_networks": []}));
    m
}

async fn revisions(
    State(app): State<Arc<App>>,
    Path(id): Path<i64>,
    Query(q): Query<BTreeMap<String, String>>,
) -> Result<Json<Value>, ApiError> {
    let c = app.config();
    if !c.clusters.contains_key(&id) {
        return Err(ApiError::NotFound(format!("Cluster {id} not found")));
    }
    let limit = match q.get("limit") {
        Some(l) => l
            .parse::<u32>()
            .map_err(|_| ApiError::invalid("limit", format!("must be a whole number, got {l:?}")))?,
        None => 50,
    };
    let rows = app.store().revisions(id, limit.min(1000)).await?;
    Ok(Json(json!({ "items": rows, "lines": line_names(&c, ClusterId(id)) })))
}

async fn dns(State(app): State<Arc<App>>, Path(id): Path<i64>) -> Result<Json<Value>, ApiError> {
    let c = app.config();
    let cluster = c.clusters.get(&id).ok_or_else(|| ApiError::NotFound(format!("Cluster {id} not found")))?;
    let snapshot = app.control().snapshots().get(&ClusterId(id)).cloned();
    let p = snapshot.as_ref().and_then(|s| s.published.as_deref());
    let lines: Vec<Value> = p
        .map(|p| {
            p.lines()
                .map(|(lid, line, records)| {
                    json!({"id": lid, "name": line.name, "client_networks": line.client_networks, "records": records})
                })
                .collect()
        })
        .unwrap_or_default();
    // What DNS answers: the zone as of the published revision, until a first one exists.
    let (domain, aliases, ttl) = p.map_or_else(
        || (&cluster.value.domain, &cluster.value.aliases, cluster.value.ttl),
        |p| (&p.zone.domain, &p.zone.aliases, p.zone.ttl),
    );
    Ok(Json(json!({
        "domain": domain,
        "aliases": aliases,
        "ttl": ttl,
        "revision": p.map(|p| p.number),
        "at": p.map(|p| p.at),
        "lines": lines,
        "all": p.map(|p| p.records.all.clone()).unwrap_or_default(),
    })))
}
