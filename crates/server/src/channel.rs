//! The agent channel: HTTPS with mutual TLS on its own listener. Enrollment needs no client
//! certificate (it carries a single-use token); every other call is identified by its client
//! certificate, whose fingerprint must be the current one of an enabled prober or of a node.
//! Prober certificates can call only prober endpoints, node certificates only node endpoints.

use std::collections::HashSet;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use serde_json::json;
use tokio::sync::watch;
use vantage_core::address::{AddressList, AddressPolicy};
use vantage_core::evaluate::NodeMetrics;
use vantage_core::ids::ClusterId;
use vantage_core::result::ProbeResult;
use vantage_core::window::WindowRegister;
use vantage_core::wire::{self, Role};
use vantage_store::ResultRow;

use crate::app::{Actor, App, Change, now};
use crate::auth::sha256_hex;
use crate::ca::renew_in_s;
use crate::error::ApiError;
use crate::evaluator::Trigger;
use crate::registry::{Config, Object, ProberRecord};
use crate::runtime::{Latest, RoundSummary, lock, parse_key, target_key};

/// The client certificate of a connection, if it sent one.
#[derive(Debug, Clone)]
struct Peer {
    fingerprint: Option<String>,
    remote: SocketAddr,
}

/// Who is calling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Caller {
    Prober(i64),
    Node(i64),
}

impl Caller {
    fn id(self) -> i64 {
        match self {
            Caller::Prober(id) | Caller::Node(id) => id,
        }
    }
}

/// Serves the channel on `listener` until `stop` turns true.
pub async fn serve(app: Arc<App>, listener: tokio::net::TcpListener, mut stop: watch::Receiver<bool>) {
    let tls = match app.ca.server_config() {
        Ok(c) => tokio_rustls::TlsAcceptor::from(c),
        Err(e) => {
            tracing::error!(error = %e, "agent channel cannot start");
            return;
        }
    };
    let router = Router::new()
        .route(wire::ENROLL, post(enroll))
        .route(wire::RENEW, post(renew))
        .route(wire::PROBER_WORK, get(prober_work))
        .route(wire::PROBER_REPORT, post(prober_report))
        .route(wire::NODE_HEARTBEAT, post(heartbeat))
        .route(wire::NODE_WORK, get(node_work))
        .route(wire::NODE_REPORT, post(node_report))
        .fallback(|| async { ApiError::NotFound("no such channel route".into()) })
        .layer(DefaultBodyLimit::max(32 << 20))
        .with_state(app);
    loop {
        let (tcp, remote) = tokio::select! {
            r = listener.accept() => match r {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!(error = %e, "agent channel accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            _ = crate::app::stopped(&mut stop) => return,
        };
        let tls = tls.clone();
        let router = router.clone();
        tokio::spawn(async move {
            let stream = match tokio::time::timeout(Duration::from_secs(10), tls.accept(tcp)).await {
                Ok(Ok(s)) => s,
                Ok(Err(e)) => {
                    tracing::debug!(%remote, error = %e, "agent channel handshake failed");
                    return;
                }
                Err(_) => return,
            };
            let fingerprint = stream
                .get_ref()
                .1
                .peer_certificates()
                .and_then(|c| c.first())
                .map(|c| sha256_hex(c.as_ref()));
            let peer = Peer { fingerprint, remote };
            let svc = hyper::service::service_fn(move |mut req: hyper::Request<hyper::body::Incoming>| {
                req.extensions_mut().insert(peer.clone());
                let router = router.clone();
                async move { tower::ServiceExt::oneshot(router, req.map(axum::body::Body::new)).await }
            });
            let builder = hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new());
            let conn = builder.serve_connection(hyper_util::rt::TokioIo::new(stream), svc);
            if let Err(e) = conn.await {
                tracing::debug!(%remote, error = %e, "agent channel connection ended");
            }
        });
    }
}

/// Identifies the caller by its certificate.
fn identify(c: &Config, peer: &Peer) -> Result<Caller, ApiError> {
    let fp = peer
        .fingerprint
        .as_deref()
        .ok_or_else(|| ApiError::Unauthorized("a client certificate is required; enroll first".into()))?;
    if let Some((id, p)) = c.probers.iter().find(|(_, p)| p.value.cert_sha256.as_deref() == Some(fp)) {
        if !p.value.enabled {
            return Err(ApiError::Forbidden(format!("prober {:?} is disabled", p.value.name)));
        }
        return Ok(Caller::Prober(*id));
    }
    if let Some((id, _)) = c.nodes.iter().find(|(_, n)| n.value.cert_sha256.as_deref() == Some(fp)) {
        return Ok(Caller::Node(*id));
    }
    Err(ApiError::Unauthorized("unknown or revoked certificate".into()))
}

fn as_prober(c: &Config, peer: &Peer) -> Result<i64, ApiError> {
    match identify(c, peer)? {
        Caller::Prober(id) => Ok(id),
        Caller::Node(_) => Err(ApiError::Forbidden("a node certificate cannot call prober endpoints".into())),
    }
}

fn as_node(c: &Config, peer: &Peer) -> Result<i64, ApiError> {
    match identify(c, peer)? {
        Caller::Node(id) => Ok(id),
        Caller::Prober(_) => {
            Err(ApiError::Forbidden("a prober certificate cannot call node endpoints".into()))
        }
    }
}

/// A node that probes: enabled, *also probes* on, and its group has a region.
pub fn node_probes(c: &Config, node: i64) -> bool {
    c.nodes.get(&node).is_some_and(|n| {
        n.value.node.enabled
            && n.value.node.also_probes
            && c.groups.get(&n.value.node.group.0).is_some_and(|g| g.value.group.region.is_some())
    })
}

fn as_probing_node(c: &Config, peer: &Peer) -> Result<i64, ApiError> {
    let id = as_node(c, peer)?;
    if !node_probes(c, id) {
        return Err(ApiError::Forbidden(
            "this node does not probe (turn on also_probes; its group needs a region)".into(),
        ));
    }
    Ok(id)
}

async fn enroll(
    State(app): State<Arc<App>>,
    Extension(peer): Extension<Peer>,
    Json(req): Json<wire::EnrollRequest>,
) -> Result<Json<wire::EnrollResponse>, ApiError> {
    let hash = sha256_hex(req.token.trim().as_bytes());
    let at = now();
    let hostname: String = req.hostname.chars().filter(|c| !c.is_control()).take(253).collect();
    let (id, role, name, pem) = app
        .change(&Actor::system(), |c| {
            let (token_id, token) = c
                .enroll_tokens
                .iter()
                .find(|(_, t)| t.value.sha256 == hash)
                .map(|(i, t)| (*i, t.value.clone()))
                .ok_or_else(|| ApiError::Unauthorized("unknown enrollment token".into()))?;
            if let Some(used) = token.used_at {
                return Err(ApiError::Unauthorized(format!("this enrollment token was already used at {used}")));
            }
            if token.expires_at < at {
                return Err(ApiError::Unauthorized(format!("this enrollment token expired at {}", token.expires_at)));
            }
            let mut ch = Change::default();
            let (id, role, name, object, pem) = match token.role {
                crate::registry::Role::Prober => {
                    let region = token.region.ok_or_else(|| ApiError::Internal("prober token without region".into()))?;
                    if c.probers.values().any(|p| p.value.name == token.name) {
                        return Err(ApiError::Conflict(format!("a prober named {:?} already exists", token.name)));
                    }
                    let id = c.allocate();
                    let (pem, fp) = app.ca.issue_client(&req.csr_pem, id, Role::Prober).map_err(csr_error)?;
                    let rec = ProberRecord {
                        name: token.name.clone(),
                        region,
                        enabled: true,
                        cert_sha256: Some(fp),
                        cert_issued_at: Some(at),
                    };
                    (id, Role::Prober, token.name.clone(), Object::Prober(rec), pem)
                }
                crate::registry::Role::Node => {
                    let node = token.node.ok_or_else(|| ApiError::Internal("node token without node".into()))?;
                    let mut rec = c
                        .nodes
                        .get(&node.0)
                        .ok_or_else(|| ApiError::Conflict(format!("node {node} no longer exists")))?
                        .value
                        .clone();
                    let (pem, fp) = app.ca.issue_client(&req.csr_pem, node.0, Role::Node).map_err(csr_error)?;
                    rec.cert_sha256 = Some(fp);
                    rec.cert_issued_at = Some(at);
                    let name = rec.node.name.clone();
                    (node.0, Role::Node, name, Object::Node(rec), pem)
                }
            };
            let mut used = token;
            used.used_at = Some(at);
            let kind = if role == Role::Prober { "prober" } else { "node" };
            ch.audit(
                format!("{kind}.enroll"),
                format!("{kind}:{id}"),
                json!({"name": name, "hostname": hostname, "version": req.version, "token": used.prefix, "from": peer.remote.ip()}),
            );
            ch.puts.push((token_id, Object::EnrollToken(used)));
            ch.puts.push((id, object));
            Ok((ch, (id, role, name, pem)))
        })
        .await?;
    {
        let mut probers = lock(&app.runtime.probers);
        let r = probers.entry(id).or_default();
        r.hostname = Some(hostname);
        r.version = Some(req.version);
        r.last_seen = Some(at);
    }
    app.trigger_all();
    Ok(Json(wire::EnrollResponse {
        id,
        role,
        name,
        certificate_pem: pem,
        ca_pem: app.ca.cert_pem().to_owned(),
    }))
}

fn csr_error(e: crate::ca::CaError) -> ApiError {
    ApiError::invalid("csr_pem", format!("not a valid certificate signing request: {e}"))
}

async fn renew(
    State(app): State<Arc<App>>,
    Extension(peer): Extension<Peer>,
    Json(req): Json<wire::RenewRequest>,
) -> Result<Json<wire::RenewResponse>, ApiError> {
    let c = app.config();
    // Renewal stays open to a disabled prober, so that it can come back when re-enabled.
    let fp = peer.fingerprint.clone().unwrap_or_default();
    let caller = match identify(&c, &peer) {
        Ok(caller) => caller,
        Err(ApiError::Forbidden(_)) => c
            .probers
            .iter()
            .find(|(_, p)| p.value.cert_sha256.as_deref() == Some(fp.as_str()))
            .map(|(id, _)| Caller::Prober(*id))
            .ok_or_else(|| ApiError::Unauthorized("unknown or revoked certificate".into()))?,
        Err(e) => return Err(e),
    };
    let id = caller.id();
    let pem = app
        .change(
            &Actor(format!("{}:{id}", if matches!(caller, Caller::Prober(_)) { "prober" } else { "node" })),
            |c| {
                let mut ch = Change::default();
                let (object, pem, kind) = match caller {
                    Caller::Prober(id) => {
                        let mut p = c
                            .probers
                            .get(&id)
                            .ok_or_else(|| ApiError::Unauthorized("revoked".into()))?
                            .value
                            .clone();
                        let (pem, fp) =
                            app.ca.issue_client(&req.csr_pem, id, Role::Prober).map_err(csr_error)?;
                        p.cert_sha256 = Some(fp);
                        p.cert_issued_at = Some(now());
                        (Object::Prober(p), pem, "prober")
                    }
                    Caller::Node(id) => {
                        let mut n = c
                            .nodes
                            .get(&id)
                            .ok_or_else(|| ApiError::Unauthorized("revoked".into()))?
                            .value
                            .clone();
                        let (pem, fp) =
                            app.ca.issue_client(&req.csr_pem, id, Role::Node).map_err(csr_error)?;
                        n.cert_sha256 = Some(fp);
                        n.cert_issued_at = Some(now());
                        (Object::Node(n), pem, "node")
                    }
                };
                ch.audit(format!("{kind}.certificate_renew"), format!("{kind}:{id}"), json!({}));
                ch.puts.push((id, object));
                Ok((ch, pem))
            },
        )
        .await?;
    Ok(Json(wire::RenewResponse { certificate_pem: pem }))
}

/// The targets of `caller`: every scheduling address of every enabled node × every listener
/// of its cluster; a node that probes skips itself.
fn work(app: &App, caller: Caller) -> wire::Work {
    let c = app.config();
    let reported = lock(&app.runtime.nodes)
        .iter()
        .map(|(id, n)| (*id, n.addresses.clone()))
        .collect::<std::collections::HashMap<_, _>>();
    let mut checks = Vec::new();
    let mut targets = Vec::new();
    for (cid, cluster) in &c.clusters {
        let check = u32::try_from(checks.len()).unwrap_or(u32::MAX);
        checks.push(cluster.value.check.clone());
        for (nid, n) in c.nodes_of(ClusterId(*cid)) {
            if !n.value.node.enabled || caller == Caller::Node(nid.0) {
                continue;
            }
            for a in
                addresses_in_use(&n.value.addresses, reported.get(&nid.0), app.address_policy()).as_slice()
            {
                for l in &cluster.value.listeners {
                    targets.push(wire::Target {
                        key: target_key(nid.0, a.ip, l.port),
                        ip: a.ip,
                        listener: *l,
                        check,
                    });
                }
            }
        }
    }
    let issued: HashSet<String> = targets.iter().map(|t| t.key.clone()).collect();
    let at = now();
    let mut probers = lock(&app.runtime.probers);
    let r = probers.entry(caller.id()).or_default();
    r.last_seen = Some(at);
    r.targets = u32::try_from(targets.len()).unwrap_or(u32::MAX);
    r.issued = issued;
    let renew = cert_issued_at(&c, caller.id()).map_or(0, |t| renew_in_s(t.millis(), at.millis()));
    wire::Work { id: caller.id(), settings: c.settings, checks, targets, renew_in_s: renew }
}

/// When the current certificate of prober or node `id` was issued.
fn cert_issued_at(c: &Config, id: i64) -> Option<vantage_core::Timestamp> {
    c.probers
        .get(&id)
        .and_then(|p| p.value.cert_issued_at)
        .or_else(|| c.nodes.get(&id).and_then(|n| n.value.cert_issued_at))
}

/// A node's scheduling addresses in use: the configured ones, else the reported ones.
pub fn addresses_in_use(
    configured: &AddressList,
    reported: Option<&Vec<IpAddr>>,
    policy: AddressPolicy,
) -> AddressList {
    if !configured.is_empty() {
        return configured.clone();
    }
    AddressList::reported(reported.map(Vec::as_slice).unwrap_or_default(), policy)
}

async fn prober_work(
    State(app): State<Arc<App>>,
    Extension(peer): Extension<Peer>,
) -> Result<Json<wire::Work>, ApiError> {
    let id = as_prober(&app.config(), &peer)?;
    Ok(Json(work(&app, Caller::Prober(id))))
}

async fn node_work(
    State(app): State<Arc<App>>,
    Extension(peer): Extension<Peer>,
) -> Result<Json<wire::Work>, ApiError> {
    let id = as_probing_node(&app.config(), &peer)?;
    Ok(Json(work(&app, Caller::Node(id))))
}

async fn prober_report(
    State(app): State<Arc<App>>,
    Extension(peer): Extension<Peer>,
    Json(report): Json<wire::Report>,
) -> Result<StatusCode, ApiError> {
    let id = as_prober(&app.config(), &peer)?;
    ingest(&app, id, report).await
}

async fn node_report(
    State(app): State<Arc<App>>,
    Extension(peer): Extension<Peer>,
    Json(report): Json<wire::Report>,
) -> Result<StatusCode, ApiError> {
    let id = as_probing_node(&app.config(), &peer)?;
    ingest(&app, id, report).await
}

/// Checks a report whole (size, targets given, attempts), then stores every result, updates
/// the window registers and triggers the clusters it concerns.
async fn ingest(app: &App, prober: i64, report: wire::Report) -> Result<StatusCode, ApiError> {
    if report.results.len() > wire::MAX_RESULTS {
        return Err(ApiError::TooLarge(format!(
            "a report carries at most {} results, got {}; send several reports",
            wire::MAX_RESULTS,
            report.results.len()
        )));
    }
    {
        let probers = lock(&app.runtime.probers);
        let issued = probers.get(&prober).map(|r| &r.issued);
        for (i, r) in report.results.iter().enumerate() {
            if !issued.is_some_and(|s| s.contains(&r.target)) {
                return Err(ApiError::invalid(
                    format!("results[{i}].target"),
                    format!("target {:?} was not given to this prober (fetch the work first)", r.target),
                ));
            }
            if r.attempts.is_empty() || r.attempts.len() > 10 {
                return Err(ApiError::invalid(format!("results[{i}].attempts"), "1 to 10 attempts"));
            }
        }
    }
    let at = now();
    let rows: Vec<ResultRow> = {
        let results = lock(&app.runtime.results);
        report
            .results
            .iter()
            .map(|r| row(prober, r, at, results.get(&r.target).and_then(|m| m.get(&prober))))
            .collect()
    };
    // Memory first, so verdicts keep following the fleet while storage is slow or down; the
    // report is acknowledged only once it is stored (the prober does not resend a refused one).
    let mut clusters = HashSet::new();
    let c = app.config();
    {
        let mut results = lock(&app.runtime.results);
        for r in &rows {
            results.entry(r.target.clone()).or_default().insert(prober, Latest::from(r));
            if let Some(cl) =
                parse_key(&r.target).and_then(|(n, _, _)| c.nodes.get(&n)).map(|n| n.value.cluster)
            {
                clusters.insert(cl);
            }
        }
    }
    {
        let mut probers = lock(&app.runtime.probers);
        let p = probers.entry(prober).or_default();
        p.last_seen = Some(at);
        p.version = Some(report.version.chars().take(64).collect());
        let prev = p.last_round.filter(|s| s.started_at == report.started_at);
        p.last_round = Some(summarise(prev, report.started_at, &report.results));
    }
    for cl in clusters {
        app.trigger(Trigger::report(cl));
    }
    app.results.write(rows).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// A stored row for one result, with the register advanced by its attempts.
fn row(prober: i64, r: &ProbeResult, at: vantage_core::Timestamp, prev: Option<&Latest>) -> ResultRow {
    let mut register = prev.map_or_else(|| WindowRegister::new(0), |l| l.register);
    for a in &r.attempts {
        register.push(a);
    }
    ResultRow {
        prober,
        target: r.target.clone(),
        at,
        sent: r.sent(),
        lost: r.lost(),
        rtt_us: r.median_rtt_ms().map(|ms| (ms * 1000.0).round() as u32),
        error: r.last_error(),
        register,
        hls: r.hls,
    }
}

/// The prober list's "last round": loss, mean RTT of answering targets, targets that lost
/// every attempt. Reports of one round (same start) add up.
fn summarise(
    prev: Option<RoundSummary>,
    started_at: vantage_core::Timestamp,
    results: &[ProbeResult],
) -> RoundSummary {
    let (mut sent, mut lost, mut rtt_sum, mut rtt_n, mut unreachable) = (0u64, 0u64, 0.0, 0u32, 0u32);
    for r in results {
        sent += u64::from(r.sent());
        lost += u64::from(r.lost());
        if let Some(ms) = r.median_rtt_ms() {
            rtt_sum += ms;
            rtt_n += 1;
        }
        unreachable += u32::from(r.sent() > 0 && r.lost() == r.sent());
    }
    let targets = u32::try_from(results.len()).unwrap_or(u32::MAX);
    if let Some(p) = prev {
        // Weighted by targets: earlier chunks of the same round.
        let prev_sent = f64::from(p.targets);
        let all_targets = p.targets + targets;
        let loss = if sent == 0 {
            p.loss_pct
        } else {
            (p.loss_pct * prev_sent + lost as f64 * 100.0 / sent as f64 * f64::from(targets))
                / f64::from(all_targets.max(1))
        };
        let rtt = if rtt_n == 0 {
            p.mean_rtt_ms
        } else {
            let this = rtt_sum / f64::from(rtt_n);
            Some(p.mean_rtt_ms.map_or(this, |a| (a + this) / 2.0))
        };
        return RoundSummary {
            started_at,
            loss_pct: loss,
            mean_rtt_ms: rtt,
            unreachable: p.unreachable + unreachable,
            targets: all_targets,
        };
    }
    RoundSummary {
        started_at,
        loss_pct: if sent == 0 { 0.0 } else { lost as f64 * 100.0 / sent as f64 },
        mean_rtt_ms: (rtt_n > 0).then(|| rtt_sum / f64::from(rtt_n)),
        unreachable,
        targets,
    }
}

async fn heartbeat(
    State(app): State<Arc<App>>,
    Extension(peer): Extension<Peer>,
    Json(hb): Json<wire::Heartbeat>,
) -> Result<Json<wire::HeartbeatReply>, ApiError> {
    let c = app.config();
    let id = as_node(&c, &peer)?;
    let at = now();
    let policy = app.address_policy();
    let addresses: Vec<IpAddr> =
        hb.addresses.iter().copied().filter(|ip| reportable(*ip, policy)).take(32).collect();
    let metrics = hb.metrics.map(|m| NodeMetrics {
        at,
        cpu_pct: m.cpu_pct,
        load1: m.load1,
        load5: m.load5,
        load15: m.load15,
        memory_used_bytes: m.memory_used_bytes,
        memory_total_bytes: m.memory_total_bytes,
        egress_mbps: m.egress_mbps,
        connections: m.connections,
    });
    let (was_online, addresses_changed) = {
        let mut nodes = lock(&app.runtime.nodes);
        let n = nodes.entry(id).or_default();
        let was_online =
            n.last_heartbeat.is_some_and(|t| t.within_secs_of(at, vantage_core::evaluate::AGENT_ONLINE_S));
        let changed = n.addresses != addresses;
        n.last_heartbeat = Some(at);
        n.version = Some(hb.version.chars().take(64).collect());
        n.hostname = Some(hb.hostname.chars().take(253).collect());
        n.metrics = metrics;
        n.addresses = addresses;
        n.capabilities = hb.capabilities.into_iter().take(32).map(|c| c.chars().take(64).collect()).collect();
        n.links = hb.links.into_iter().take(32).collect();
        n.connects_from = Some(peer.remote.ip());
        (was_online, changed)
    };
    if let Some(cluster) = c.nodes.get(&id).map(|n| n.value.cluster) {
        let reason = if addresses_changed && c.nodes.get(&id).is_some_and(|n| n.value.addresses.is_empty()) {
            Some("Reported addresses changed")
        } else if !was_online {
            Some("Node agent connected")
        } else {
            None
        };
        app.trigger(Trigger { cluster, reason, immediate: reason.is_some() });
    }
    let renew = cert_issued_at(&c, id).map_or(0, |t| renew_in_s(t.millis(), at.millis()));
    Ok(Json(wire::HeartbeatReply { also_probes: node_probes(&c, id), renew_in_s: renew }))
}

/// Addresses a heartbeat may report: unicast, and public unless the server runs in lab mode.
fn reportable(ip: IpAddr, policy: AddressPolicy) -> bool {
    if !vantage_core::address::is_unicast(ip, policy) {
        return false;
    }
    if policy.allow_loopback {
        return true;
    }
    match ip {
        IpAddr::V4(v4) => !(v4.is_private() || (v4.octets()[0] == 100 && (v4.octets()[1] & 0xc0) == 64)),
        IpAddr::V6(v6) => (v6.segments()[0] & 0xfe00) != 0xfc00,
    }
}
