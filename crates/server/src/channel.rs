//! The agent channel: HTTPS with mutual TLS on its own listener. Enrollment needs no client
//! certificate (it carries a single-use token); every other call is identified by its client
//! certificate, whose fingerprint must be the current one of an enabled prober or of a node.
//! Prober certificates can call only prober endpoints, node certificates only node endpoints.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Extension, Json, Router};

use self::body::Body;
use serde_json::json;
use tokio::sync::watch;
use vantage_control::config::Config;
use vantage_control::enrollment::Refusal;
use vantage_control::identity::{Caller, Refused};
use vantage_core::ids::NodeId;
use vantage_core::wire;

use crate::app::{Actor, App, Change};
use crate::auth::sha256_hex;
use crate::error::ApiError;
use crate::listen::HttpLimits;
use crate::owner::Input;
use crate::support::{now, stopped};

mod body;
mod intake;

pub(crate) use intake::{Intake, Then};

/// The client certificate of a connection, if it sent one.
#[derive(Debug, Clone)]
struct Peer {
    fingerprint: Option<String>,
    remote: SocketAddr,
}

/// Serves the channel on `listener` until `stop` turns true, each connection within `limits`
/// and admitted by `gate`.
pub(crate) async fn serve(
    app: Arc<App>,
    listener: tokio::net::TcpListener,
    (limits, gate): (HttpLimits, Arc<vantage_dns::listen::Gate>),
    mut stop: watch::Receiver<bool>,
) {
    let tls = match app.ca().server_config() {
        Ok(c) => tokio_rustls::TlsAcceptor::from(c),
        Err(e) => {
            tracing::error!(error = %e, "agent channel cannot start");
            return;
        }
    };
    let router = router(app.clone(), limits);
    loop {
        let (tcp, remote, admitted) = tokio::select! {
            a = vantage_dns::listen::accept(&listener, &gate, "agent channel") => a,
            _ = stopped(&mut stop) => {
                // What was acknowledged is stored before the server goes on stopping.
                app.intake().settled().await;
                return;
            }
        };
        let tls = tls.clone();
        let router = router.clone();
        let stop = stop.clone();
        tokio::spawn(async move {
            let _admitted = admitted;
            let activity = vantage_dns::listen::Activity::default();
            let tcp = crate::listen::Watched::new(tcp, activity.clone());
            let stream = match tokio::time::timeout(crate::listen::HANDSHAKE_TIMEOUT, tls.accept(tcp)).await {
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
            let svc = crate::listen::with_extension(router, Peer { fingerprint, remote });
            crate::listen::serve(stream, activity, svc, limits, stop).await;
        });
    }
}

/// The channel's routes, each request bounded by `limits`; a connection's [`Peer`] is added to
/// each of its requests.
pub(crate) fn router(app: Arc<App>, limits: HttpLimits) -> Router {
    // Work, reports and heartbeats need a known certificate, checked before the body is read;
    // so does renewal, by its own rule (a disabled prober may renew). Each route reads at most
    // what its largest honest body needs.
    let known = || axum::middleware::from_fn_with_state(app.clone(), known_certificate);
    let routes = Router::new()
        .route(wire::ENROLL, post(enroll).layer(DefaultBodyLimit::max(SMALL_BODY)))
        .route(
            wire::RENEW,
            post(renew)
                .layer(DefaultBodyLimit::max(SMALL_BODY))
                .route_layer(axum::middleware::from_fn_with_state(app.clone(), renewing)),
        )
        .route(wire::PROBER_WORK, get(prober_work).route_layer(known()))
        .route(
            wire::PROBER_REPORT,
            post(prober_report).layer(DefaultBodyLimit::max(REPORT_BODY)).route_layer(known()),
        )
        .route(
            wire::NODE_HEARTBEAT,
            post(heartbeat).layer(DefaultBodyLimit::max(HEARTBEAT_BODY)).route_layer(known()),
        )
        .route(wire::NODE_WORK, get(node_work).route_layer(known()))
        .route(wire::PROBER_RECHECK, get(prober_recheck).route_layer(known()))
        .route(wire::NODE_RECHECK, get(node_recheck).route_layer(known()))
        .route(
            wire::NODE_REPORT,
            post(node_report).layer(DefaultBodyLimit::max(REPORT_BODY)).route_layer(known()),
        )
        .fallback(|| async { ApiError::NotFound("no such channel route".into()) })
        .method_not_allowed_fallback(|| async {
            ApiError::NotAllowed("this channel route takes another method".into())
        })
        .with_state(app);
    crate::listen::bounded(routes, limits.deadline)
}

/// A request to the channel as the connection of the certificate whose SHA-256 is
/// `fingerprint`, from 127.0.0.1 (for the server's own benchmarks).
#[cfg(test)]
pub(crate) fn as_peer<B>(req: &mut axum::http::Request<B>, fingerprint: &str) {
    req.extensions_mut()
        .insert(Peer { fingerprint: Some(fingerprint.to_owned()), remote: ([127, 0, 0, 1], 1).into() });
}

/// Enrollment and renewal bodies: a token and a CSR of a few hundred bytes.
const SMALL_BODY: usize = 16 << 10;
/// A heartbeat: metrics and at most 32 addresses, capabilities and links.
const HEARTBEAT_BODY: usize = 256 << 10;
/// A report: up to 10,000 results of up to 10 attempts.
const REPORT_BODY: usize = 32 << 20;

/// Refuses a caller without a known certificate before its body is read: an unauthenticated
/// client cannot make the server read and parse megabytes.
async fn known_certificate(
    State(app): State<Arc<App>>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let Some(peer) = req.extensions().get::<Peer>() else {
        return ApiError::Unauthorized("a client certificate is required; enroll first".into())
            .into_response();
    };
    if let Err(e) = identify(&app.config(), peer) {
        return e.into_response();
    }
    next.run(req).await
}

/// Refuses a renewal from a certificate that may not renew before its body is read, as
/// [`known_certificate`] does for the other routes.
async fn renewing(
    State(app): State<Arc<App>>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let fingerprint = req.extensions().get::<Peer>().and_then(|p| p.fingerprint.as_deref());
    if let Err(r) = app.config().renewer(fingerprint) {
        return refusal(r).into_response();
    }
    next.run(req).await
}

/// Identifies the caller by its certificate.
fn identify(c: &Config, peer: &Peer) -> Result<Caller, ApiError> {
    c.identify(peer.fingerprint.as_deref()).map_err(refusal)
}

fn refusal(r: Refused) -> ApiError {
    match r {
        Refused::NoCertificate => {
            ApiError::Unauthorized("a client certificate is required; enroll first".into())
        }
        Refused::Disabled { name, .. } => ApiError::Forbidden(format!("prober {name:?} is disabled")),
        Refused::Unknown => ApiError::Unauthorized("unknown or revoked certificate".into()),
    }
}

fn as_prober(c: &Config, peer: &Peer) -> Result<Caller, ApiError> {
    match identify(c, peer)? {
        p @ Caller::Prober(_) => Ok(p),
        Caller::Node(_) => Err(ApiError::Forbidden("a node certificate cannot call prober endpoints".into())),
    }
}

fn as_node(c: &Config, peer: &Peer) -> Result<NodeId, ApiError> {
    match identify(c, peer)? {
        Caller::Node(id) => Ok(id),
        Caller::Prober(_) => {
            Err(ApiError::Forbidden("a prober certificate cannot call node endpoints".into()))
        }
    }
}

fn as_probing_node(c: &Config, peer: &Peer) -> Result<Caller, ApiError> {
    let id = as_node(c, peer)?;
    if !c.node_probes(id) {
        return Err(ApiError::Forbidden(
            "this node does not probe (turn on also_probes; its group needs a region)".into(),
        ));
    }
    Ok(Caller::Node(id))
}

async fn enroll(
    State(app): State<Arc<App>>,
    Extension(peer): Extension<Peer>,
    Body(req): Body<wire::EnrollRequest>,
) -> Result<Json<wire::EnrollResponse>, ApiError> {
    let hash = sha256_hex(req.token.trim().as_bytes());
    let at = now();
    let hostname = vantage_control::enrollment::hostname(&req.hostname);
    let (caller, name, pem) = app
        .change(&Actor::system(), |c| {
            let admission = c.admit(&hash, at).map_err(|r| match r {
                r if r.is_token() => ApiError::Unauthorized(r.to_string()),
                r @ Refusal::Malformed(_) => ApiError::Internal(r.to_string()),
                r => ApiError::Conflict(r.to_string()),
            })?;
            let caller = admission.caller();
            let (pem, fp) =
                app.ca().issue_client(&req.csr_pem, caller.id(), caller.role()).map_err(csr_error)?;
            let e = admission.enrolled(fp, peer.remote.ip(), &hostname, &req.version, at);
            let mut ch = Change { puts: e.puts, actor: Some(Actor(e.actor)), ..Change::default() };
            ch.audit(e.action, e.object, e.metadata);
            Ok((ch, (caller, e.name, pem)))
        })
        .await?;
    app.relay(now(), || vantage_control::Relayed::Enrolled {
        caller,
        hostname: hostname.clone(),
        version: req.version.clone(),
    });
    app.owner().ask(|done| Input::Enrolled { caller, hostname, version: req.version, done }).await?;
    Ok(Json(wire::EnrollResponse {
        id: caller.id(),
        role: caller.role(),
        name,
        certificate_pem: pem,
        ca_pem: app.ca().cert_pem().to_owned(),
    }))
}

fn csr_error(e: crate::ca::CaError) -> ApiError {
    ApiError::invalid("csr_pem", format!("not a valid certificate signing request: {e}"))
}

async fn renew(
    State(app): State<Arc<App>>,
    Extension(peer): Extension<Peer>,
    Body(req): Body<wire::RenewRequest>,
) -> Result<Json<wire::RenewResponse>, ApiError> {
    let c = app.config();
    let caller = c.renewer(peer.fingerprint.as_deref()).map_err(refusal)?;
    let id = caller.id();
    let kind = caller.kind();
    let pem = app
        .change(&Actor(format!("{kind}:{id}")), |c| {
            let renewal = c.renewal(caller).ok_or_else(|| ApiError::Unauthorized("revoked".into()))?;
            let (pem, fp) = app.ca().issue_client(&req.csr_pem, id, caller.role()).map_err(csr_error)?;
            let (object, action) = renewal.renewed(fp, now());
            let mut ch = Change::default();
            ch.audit(action, format!("{kind}:{id}"), json!({}));
            ch.puts.push((id, object));
            Ok((ch, pem))
        })
        .await?;
    Ok(Json(wire::RenewResponse { certificate_pem: pem }))
}

async fn prober_work(
    State(app): State<Arc<App>>,
    Extension(peer): Extension<Peer>,
) -> Result<Json<wire::Work>, ApiError> {
    let caller = as_prober(&app.config(), &peer)?;
    Ok(Json(work(&app, caller).await?))
}

async fn node_work(
    State(app): State<Arc<App>>,
    Extension(peer): Extension<Peer>,
) -> Result<Json<wire::Work>, ApiError> {
    let caller = as_probing_node(&app.config(), &peer)?;
    Ok(Json(work(&app, caller).await?))
}

/// `caller`'s work, which the other replicas hand out alike (their cores then accept the
/// reports it leads to).
async fn work(app: &App, caller: Caller) -> Result<wire::Work, ApiError> {
    let work = app.owner().ask(|reply| Input::Work { caller, reply }).await?;
    app.relay(now(), || vantage_control::Relayed::Work { caller });
    Ok(work)
}

async fn prober_recheck(
    State(app): State<Arc<App>>,
    Extension(peer): Extension<Peer>,
) -> Result<Json<wire::Recheck>, ApiError> {
    let caller = as_prober(&app.config(), &peer)?;
    Ok(Json(recheck(&app, caller).await?))
}

async fn node_recheck(
    State(app): State<Arc<App>>,
    Extension(peer): Extension<Peer>,
) -> Result<Json<wire::Recheck>, ApiError> {
    let caller = as_probing_node(&app.config(), &peer)?;
    Ok(Json(recheck(&app, caller).await?))
}

/// Held open until the control core has confirmations for `caller`, at most
/// [`wire::RECHECK_WAIT_S`]; then what it has (possibly nothing).
async fn recheck(app: &App, caller: Caller) -> Result<wire::Recheck, ApiError> {
    // Subscribed before looking, so a confirmation asked in between still wakes this one.
    let mut woken = app.rechecks();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(wire::RECHECK_WAIT_S);
    loop {
        let r = app.owner().ask(|reply| Input::Rechecks { caller, reply }).await?;
        if !r.targets.is_empty() {
            return Ok(r);
        }
        if !matches!(tokio::time::timeout_at(deadline, woken.changed()).await, Ok(Ok(()))) {
            return Ok(r);
        }
    }
}

async fn prober_report(
    State(app): State<Arc<App>>,
    Extension(peer): Extension<Peer>,
    Body(report): Body<wire::Report>,
) -> Result<StatusCode, ApiError> {
    let caller = as_prober(&app.config(), &peer)?;
    intake::ingest(&app, caller, report).await
}

async fn node_report(
    State(app): State<Arc<App>>,
    Extension(peer): Extension<Peer>,
    Body(report): Body<wire::Report>,
) -> Result<StatusCode, ApiError> {
    let caller = as_probing_node(&app.config(), &peer)?;
    intake::ingest(&app, caller, report).await
}

async fn heartbeat(
    State(app): State<Arc<App>>,
    Extension(peer): Extension<Peer>,
    Body(hb): Body<wire::Heartbeat>,
) -> Result<Json<wire::HeartbeatReply>, ApiError> {
    let id = as_node(&app.config(), &peer)?;
    let from = peer.remote.ip().to_canonical();
    app.relay(now(), || vantage_control::Relayed::Heartbeat { node: id, heartbeat: hb.clone(), from });
    Ok(Json(app.owner().ask(|reply| Input::Heartbeat { node: id, heartbeat: hb, from, reply }).await?))
}
