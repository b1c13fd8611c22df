//! The agent channel's messages: what probers and node agents send to the control plane and
//! what it answers, as plain serde types shared by both sides. The channel is HTTPS with
//! mutual TLS; paths are under [`PREFIX`].

use std::net::{IpAddr, SocketAddr};

use serde::{Deserialize, Serialize};

use crate::check::{Check, Listener};
use crate::evaluate::LinkState;
use crate::result::ProbeResult;
use crate::settings::ProbeSettings;
use crate::time::Timestamp;

/// Every channel path starts with this.
pub const PREFIX: &str = "/agent/v1";
/// `POST` [`EnrollRequest`] → [`EnrollResponse`]; no client certificate needed.
pub const ENROLL: &str = "/agent/v1/enroll";
/// `POST` [`RenewRequest`] → [`RenewResponse`]; either role.
pub const RENEW: &str = "/agent/v1/renew";
/// `GET` → [`Work`]; prober certificates only.
pub const PROBER_WORK: &str = "/agent/v1/prober/work";
/// `POST` [`Report`] → 204; prober certificates only.
pub const PROBER_REPORT: &str = "/agent/v1/prober/report";
/// `POST` [`Heartbeat`] → [`HeartbeatReply`]; node certificates only.
pub const NODE_HEARTBEAT: &str = "/agent/v1/node/heartbeat";
/// `GET` → [`Work`]; node certificates of nodes that also probe.
pub const NODE_WORK: &str = "/agent/v1/node/work";
/// `POST` [`Report`] → 204; node certificates of nodes that also probe.
pub const NODE_REPORT: &str = "/agent/v1/node/report";
/// `GET` → [`Recheck`]: held open until the control plane asks for a confirmation (at most
/// [`RECHECK_WAIT_S`], then an empty list); prober certificates only.
pub const PROBER_RECHECK: &str = "/agent/v1/prober/recheck";
/// The same for nodes that also probe.
pub const NODE_RECHECK: &str = "/agent/v1/node/recheck";
/// Longest a recheck request is held open, seconds.
pub const RECHECK_WAIT_S: u64 = 25;

/// The name the channel's server certificate carries. Clients verify the certificate against
/// this name (and the pinned CA), whatever host they connect to.
pub const SERVER_NAME: &str = "agent.vantage.invalid";
/// Most results in one report.
pub const MAX_RESULTS: usize = 10_000;
/// Seconds between heartbeats.
pub const HEARTBEAT_S: u64 = 15;

/// Who a certificate belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// A `vantage probe` process.
    Prober,
    /// A `vantage agent` on an edge node.
    Node,
}

/// First contact: a single-use token and a CSR for a key made on the agent's host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnrollRequest {
    /// `vtp_…` or `vtn_…`.
    pub token: String,
    /// PKCS #10 request, PEM; only its public key is used.
    pub csr_pem: String,
    /// The agent's host name (shown in lists).
    pub hostname: String,
    /// The agent's version.
    pub version: String,
}

/// The enrolled identity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnrollResponse {
    /// Prober or node id (the certificate's CN).
    pub id: i64,
    pub role: Role,
    /// Prober or node name.
    pub name: String,
    /// Client certificate, PEM (client auth only, 30 days).
    pub certificate_pem: String,
    /// The channel's CA certificate, PEM, to trust from now on.
    pub ca_pem: String,
}

/// A new certificate for a new key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RenewRequest {
    /// PKCS #10 request, PEM.
    pub csr_pem: String,
}

/// The renewed certificate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RenewResponse {
    /// Client certificate, PEM.
    pub certificate_pem: String,
}

/// One target of a round.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Target {
    /// Key to report the result under.
    pub key: String,
    /// Address.
    pub ip: IpAddr,
    /// Listener (port, protocol, PROXY flag).
    pub listener: Listener,
    /// Index into [`Work::checks`].
    pub check: u32,
}

/// One endpoint target (a mirror host, a video edge): a URL probed on its own check's
/// interval, one attempt each time, independently of the cluster round. One prober's opinion
/// of it is the window register the server keeps over those attempts (SPEC §3.4).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndpointTarget {
    /// Key to report the result under.
    pub key: String,
    /// `http://` or `https://` URL: scheme, `Host` header and SNI, path and query.
    pub url: String,
    /// Where to connect instead of resolving the URL's host (an operator's pinned address).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<SocketAddr>,
    /// Index into [`Work::checks`]; its interval spaces the attempts and its timeout bounds
    /// each one.
    pub check: u32,
    /// Any HTTP answer is a good attempt, whatever its status, unless it is a block page
    /// (the check's pattern, read from the body of any status, or one of its block
    /// statuses): a mirror is `ok` when it answers at all (reference 004). False: the
    /// check's expected status decides, as for every other target. Absent from the work of
    /// servers that predate it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub any_status: bool,
    /// Hosts other than the URL's own that an `hls` chain may lead to (`host` or
    /// `host:port`); a playlist URI on any other origin is refused, not fetched.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_hosts: Vec<String>,
}

/// What to probe this round.
///
/// [`FetchPolicy`]: crate::fetch::FetchPolicy
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Work {
    /// The caller's id.
    pub id: i64,
    /// Probe settings (interval, timeout, attempts…).
    pub settings: ProbeSettings,
    /// Checks, shared by targets.
    pub checks: Vec<Check>,
    pub targets: Vec<Target>,
    /// Endpoint targets, each probed on its own check's interval. Absent from the work of
    /// servers that predate them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub endpoints: Vec<EndpointTarget>,
    /// An operator asked for a check run: probe every endpoint target now rather than when
    /// its interval is due. Set in one work answer per prober and run.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub check_now: bool,
    /// Seconds before the certificate should be renewed (0: now).
    pub renew_in_s: u64,
    /// Rounds start when the Unix time in milliseconds, modulo the interval, is this: the
    /// control plane spreads its probers over the interval. Absent from older servers' work
    /// (a round then starts one interval after the previous one started).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase_ms: Option<u64>,
    /// Where the prober may connect ([`FetchPolicy`]); absent from older servers' work,
    /// which then gets the default: every special-purpose address refused.
    #[serde(default)]
    pub fetch: crate::fetch::FetchPolicy,
}

/// Targets to probe at once, outside the rounds: another prober saw them change.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Recheck {
    /// Keys of the work's targets.
    pub targets: Vec<String>,
}

/// One round's results (at most [`MAX_RESULTS`] per report; a round may send several).
/// Unknown fields are refused at every level: a field this server does not know is a
/// figure it would silently drop.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Report {
    /// When the round started.
    pub started_at: Timestamp,
    /// When it finished.
    pub finished_at: Timestamp,
    /// The agent's version.
    pub version: String,
    pub results: Vec<ProbeResult>,
    /// The report answers a confirmation the server asked for (a recheck), not a round: the
    /// server cannot tell the two apart by their targets (a confirmation probes some of the
    /// round's), and keeps their figures apart. Absent (false) from agents before it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub confirmation: bool,
}

impl Report {
    /// Refuses figures no probe measures: a negative (or infinite) segment age or time to
    /// first byte, which would otherwise reach the metrics and the verdicts as sent.
    pub fn check(&self) -> Result<(), crate::Error> {
        for (i, r) in self.results.iter().enumerate() {
            let Some(h) = &r.hls else { continue };
            for (name, v) in [("segment_age_s", h.segment_age_s), ("ttfb_ms", h.ttfb_ms)] {
                if let Some(v) = v
                    && !(v.is_finite() && v >= 0.0)
                {
                    return Err(crate::Error::invalid(
                        format!("results[{i}].hls.{name}"),
                        format!("must be a duration of at least 0, got {v}"),
                    ));
                }
            }
        }
        Ok(())
    }
}

/// Host metrics of a node.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostMetrics {
    /// Whole-host CPU usage, % (from `/proc/stat` differences).
    pub cpu_pct: f64,
    /// 1-minute load.
    pub load1: f64,
    /// 5-minute load.
    pub load5: f64,
    /// 15-minute load.
    pub load15: f64,
    /// Memory used (MemTotal − MemAvailable), bytes.
    pub memory_used_bytes: u64,
    /// Memory total, bytes.
    pub memory_total_bytes: u64,
    /// Egress rate of the non-loopback interfaces, Mbit/s.
    pub egress_mbps: f64,
    pub connections: u64,
}

/// Capability: the node's listeners answer the health endpoint, so its cluster's listeners
/// may be probed by the cluster's check rather than by TCP connect.
pub const CAP_PROBE_HEALTH: &str = "probe-health-v1";

/// A node agent's heartbeat (every 15 s).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Heartbeat {
    pub version: String,
    /// Host name.
    pub hostname: String,
    /// Host metrics; `None` where the agent cannot read them.
    pub metrics: Option<HostMetrics>,
    /// The node's addresses (used as its scheduling addresses while none are configured).
    pub addresses: Vec<IpAddr>,
    /// Capabilities (`metrics-v1`, `probe-health-v1`…).
    pub capabilities: Vec<String>,
    /// Links and their last handshakes.
    pub links: Vec<LinkState>,
}

/// The answer to a heartbeat.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeartbeatReply {
    /// Run the prober loop too.
    pub also_probes: bool,
    /// Seconds before the certificate should be renewed (0: now).
    pub renew_in_s: u64,
}

/// The channel's error body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// Details.
    pub error: ErrorDetail,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorDetail {
    /// HTTP status.
    pub status: u16,
    /// The field at fault, when one is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// Why.
    pub reason: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(result: &str) -> Vec<u8> {
        format!(r#"{{"started_at":"2027-01-15T08:00:00Z","finished_at":"2027-01-15T08:00:01Z","version":"1","results":[{result}]}}"#)
            .into_bytes()
    }

    /// The endpoint reports a hostile agent sent: each is refused naming its field.
    #[test]
    fn hostile_endpoint_reports_are_refused_by_field() {
        let good = r#"{"target":"m/a.example.net","attempts":[{"stages":15,"rtt_us":900}],"hls":{"reachable":true,"manifest_valid":true,"segment_fetchable":true,"segment_age_s":4,"ttfb_ms":30}}"#;
        let r: Report = crate::strict::from_slice(&report(good)).unwrap();
        assert!(r.check().is_ok());
        for (bad, field) in [
            (good.replace(r#""segment_age_s":4"#, r#""segment_age_s":-5"#), "results[0].hls.segment_age_s"),
            (good.replace(r#""ttfb_ms":30"#, r#""ttfb_ms":-1"#), "results[0].hls.ttfb_ms"),
        ] {
            let r: Report = crate::strict::from_slice(&report(&bad)).unwrap();
            assert_eq!(r.check().unwrap_err().field(), field, "{bad}");
        }
        for (bad, field) in [
            (r#"{"target":"m/a","attempts":[],"hls":[true,true,true,-5]}"#.to_owned(), "results[0].hls"),
            (good.replace(r#""rtt_us":900"#, r#""rtt_us":900,"x":1"#), "results[0].attempts[0].x"),
            (good.replace(r#""ttfb_ms":30"#, r#""ttfb_ms":30,"extra":1"#), "results[0].hls.extra"),
            (good.replace(r#""target""#, r#""note":"x","target""#), "results[0].note"),
        ] {
            let e = crate::strict::from_slice::<Report>(&report(&bad)).unwrap_err();
            assert_eq!(e.field(), field, "{bad}: {e}");
        }
    }
}
