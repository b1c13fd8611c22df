//! What the control plane has observed besides its configuration: the latest result type with
//! its window register (the books keep them: `addresses`, `mirrors`, `monitors`), what each
//! prober and node agent last said, and the targets each prober was given. Online status is decided here, in one place.

use std::collections::{BTreeSet, HashMap};
use std::net::IpAddr;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use vantage_core::Timestamp;
use vantage_core::address::{AddressPolicy, is_unicast};
use vantage_core::evaluate::{AGENT_ONLINE_S, FastMap, LinkState, NodeMetrics};
use vantage_core::result::{ErrorCode, HlsDetail, ProbeResult};
use vantage_core::settings::ProbeSettings;
use vantage_core::window::WindowRegister;
use vantage_core::wire;

use crate::identity::Caller;
use crate::target::TargetKey;

/// The latest result of one (prober, target).
#[derive(Debug, Clone, PartialEq)]
pub struct Latest {
    /// When reported.
    pub at: Timestamp,
    /// Attempts sent.
    pub sent: u32,
    /// Attempts lost.
    pub lost: u32,
    /// Median RTT of good attempts, µs.
    pub rtt_us: Option<u32>,
    /// Last error code.
    pub error: Option<ErrorCode>,
    /// The window register, advanced by every attempt since the target was first seen.
    pub register: WindowRegister,
    /// HLS tuple; boxed, as most results have none: the record is 32 bytes smaller for it,
    /// and a fleet holds millions.
    pub hls: Option<Box<HlsDetail>>,
    /// When the edge's TLS certificate expires (HTTPS targets).
    pub cert_not_after: Option<Timestamp>,
    /// When the round's first failed attempt ended, in the server's time ([`failed_at`]).
    pub failed_at: Option<Timestamp>,
}

impl Latest {
    /// The latest after `r`, reported at `at`: the register continues from `prev`, or starts
    /// with the check's `initial` good attempts assumed when the target is new (SPEC §3.4).
    pub fn after(r: &ProbeResult, at: Timestamp, prev: Option<&Latest>, initial: u8) -> Latest {
        let mut register = prev.map_or_else(|| WindowRegister::new(initial), |l| l.register);
        for a in &r.attempts {
            register.push(a);
        }
        Latest {
            at,
            sent: r.sent(),
            lost: r.lost(),
            rtt_us: r.median_rtt_ms().map(|ms| (ms * 1000.0).round() as u32),
            error: r.last_error(),
            register,
            hls: r.hls.map(Box::new),
            cert_not_after: r.cert_not_after,
            failed_at: None,
        }
    }
}

/// When a result's first failed attempt ended, in the server's time: as long before `at` (the
/// report's arrival) as the prober says it was before the end of its round, and never more
/// than the round lasted, so an offset of the prober's clock cannot move it.
pub fn failed_at(report: &wire::Report, r: &ProbeResult, at: Timestamp) -> Option<Timestamp> {
    let failed = r.failed_at?;
    let round = report.finished_at.millis_since(report.started_at).max(0);
    Some(at.plus_millis(-report.finished_at.millis_since(failed).clamp(0, round)))
}

/// The figures of a prober's last reports of one kind (a cluster round, endpoint checks, a
/// confirmation), as the prober list shows them.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
pub struct RoundSummary {
    /// When the round (the endpoint checks that came due together, the confirmation) started.
    pub started_at: Timestamp,
    /// Loss over every target, %.
    pub loss_pct: f64,
    /// Mean RTT of the answering targets, ms.
    pub mean_rtt_ms: Option<f64>,
    /// Targets that lost every attempt.
    pub unreachable: u32,
    /// Targets in the round.
    pub targets: u32,
}

impl RoundSummary {
    /// The summary of `results`; reports of one round (same start as `prev`) add up,
    /// weighted by targets.
    pub fn of(prev: Option<RoundSummary>, started_at: Timestamp, results: &[&ProbeResult]) -> RoundSummary {
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
        let this_loss = (sent > 0).then(|| lost as f64 * 100.0 / sent as f64);
        let this_rtt = (rtt_n > 0).then(|| rtt_sum / f64::from(rtt_n));
        let Some(p) = prev.filter(|p| p.started_at == started_at) else {
            return RoundSummary {
                started_at,
                loss_pct: this_loss.unwrap_or(0.0),
                mean_rtt_ms: this_rtt,
                unreachable,
                targets,
            };
        };
        let all_targets = p.targets + targets;
        let loss = this_loss.map_or(p.loss_pct, |l| {
            (p.loss_pct * f64::from(p.targets) + l * f64::from(targets)) / f64::from(all_targets.max(1))
        });
        let rtt =
            this_rtt.map_or(p.mean_rtt_ms, |this| Some(p.mean_rtt_ms.map_or(this, |a| (a + this) / 2.0)));
        RoundSummary {
            started_at,
            loss_pct: loss,
            mean_rtt_ms: rtt,
            unreachable: p.unreachable + unreachable,
            targets: all_targets,
        }
    }
}

/// What a prober (or a node that probes) last said.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ProberRuntime {
    /// Last request of any kind. Never moves back: an input relayed by another replica is
    /// taken at the earlier time that replica took it.
    pub last_seen: Option<Timestamp>,
    /// Agent version.
    pub version: Option<String>,
    /// Host name given at enrollment.
    pub hostname: Option<String>,
    /// Its last complete cluster round.
    pub last_round: Option<RoundSummary>,
    /// The cluster round whose reports are still coming in (a round sends one report per
    /// [`wire::MAX_RESULTS`] targets), shown once complete.
    pub round_so_far: Option<RoundSummary>,
    /// Its last endpoint checks (mirrors, monitors): the ones that came due together.
    pub last_endpoint_checks: Option<RoundSummary>,
    /// Its last confirmation (a recheck another prober's report asked for).
    pub last_confirmation: Option<RoundSummary>,
    /// When its last report arrived (the server's time; never moves back, as `last_seen`).
    pub last_report: Option<Timestamp>,
    /// Targets in its last work.
    pub targets: u32,
    /// Cluster targets in its last work: a round is complete once its reports carry a result
    /// for each.
    pub round_targets: u32,
    /// What its last work gave it.
    pub given: Arc<Given>,
}

/// What a prober's last work gave it: what its reports may carry. Replaced whole by each work,
/// and shared, so that a published view holds a prober's record without copying 60,000 keys.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Given {
    /// Target keys: reports may only carry these.
    pub issued: crate::issued::GivenKeys,
    /// Keys probed under one of `issued` (the same probe listed by another cluster).
    pub aliases: FastMap<TargetKey, Vec<TargetKey>>,
    /// Mirror hosts of its endpoint targets.
    pub endpoints: BTreeSet<String>,
    /// Monitor endpoints.
    pub monitors: BTreeSet<crate::monitors::EndpointKey>,
}

impl ProberRuntime {
    /// Books the figures of a report started at `started_at`, each kind apart: the results
    /// of endpoint targets (told by their keys) are endpoint checks; the others are a
    /// confirmation when the report says so, else (and an empty report too: a round without
    /// targets) a part of a cluster round, which becomes the last round once complete. A
    /// round cut short (a report lost) is never shown; the previous one stays.
    pub fn book(
        &mut self,
        started_at: Timestamp,
        confirmation: bool,
        cluster: &[&ProbeResult],
        endpoints: &[&ProbeResult],
    ) {
        if !endpoints.is_empty() {
            self.last_endpoint_checks =
                Some(RoundSummary::of(self.last_endpoint_checks, started_at, endpoints));
        }
        if confirmation {
            if !cluster.is_empty() {
                self.last_confirmation = Some(RoundSummary::of(self.last_confirmation, started_at, cluster));
            }
        } else if !cluster.is_empty() || endpoints.is_empty() {
            let so_far = RoundSummary::of(self.round_so_far, started_at, cluster);
            if so_far.targets >= self.round_targets {
                self.last_round = Some(so_far);
                self.round_so_far = None;
            } else {
                self.round_so_far = Some(so_far);
            }
        }
    }

    /// The key under which this prober probes `key`, if it does.
    pub fn given_as(&self, key: TargetKey) -> Option<TargetKey> {
        if self.given.issued.contains(&key) {
            return Some(key);
        }
        self.given.aliases.iter().find(|(_, others)| others.contains(&key)).map(|(given, _)| *given)
    }
}

/// What a node agent last said.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct NodeRuntime {
    /// Last heartbeat (never moves back, as a prober's `last_seen`).
    pub last_heartbeat: Option<Timestamp>,
    /// Agent version.
    pub version: Option<String>,
    /// Host name.
    pub hostname: Option<String>,
    /// Metrics of the last heartbeat.
    pub metrics: Option<NodeMetrics>,
    /// Addresses it reported (already filtered to the reportable ones).
    pub addresses: Vec<IpAddr>,
    pub capabilities: Vec<String>,
    pub links: Vec<LinkState>,
    /// The source address of its latest heartbeat connection (a NAT's or a proxy's public
    /// address when it connects through one).
    pub connects_from: Option<IpAddr>,
}

/// What each node agent last said, by node.
pub type Agents = HashMap<vantage_core::ids::NodeId, Arc<NodeRuntime>>;

/// A prober's status in the prober list (SPEC §3.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ProberStatus {
    /// Asked for targets or reported within its online window.
    Online,
    /// Silent for longer.
    Offline,
    /// Disabled by the operator.
    Disabled,
}

/// The one definition of a prober being online: it asked or reported within 3 intervals (at
/// least 30 s).
pub fn prober_status(
    enabled: bool,
    last_seen: Option<Timestamp>,
    s: &ProbeSettings,
    now: Timestamp,
) -> ProberStatus {
    if !enabled {
        ProberStatus::Disabled
    } else if last_seen.is_some_and(|t| t.within_secs_of(now, s.prober_online_s())) {
        ProberStatus::Online
    } else {
        ProberStatus::Offline
    }
}

/// The one definition of a node agent being connected: a heartbeat within 3 × 15 s.
pub fn agent_online(last_heartbeat: Option<Timestamp>, now: Timestamp) -> bool {
    last_heartbeat.is_some_and(|t| t.within_secs_of(now, AGENT_ONLINE_S))
}

/// Addresses a heartbeat may report, and a source address an operator may add: unicast and
/// public (lab mode adds loopback only, as it does for every address; a private address is
/// never public).
pub fn reportable(ip: IpAddr, policy: AddressPolicy) -> bool {
    if !is_unicast(ip, policy) {
        return false;
    }
    match ip {
        IpAddr::V4(v4) => !(v4.is_private() || (v4.octets()[0] == 100 && (v4.octets()[1] & 0xc0) == 64)),
        IpAddr::V6(v6) => (v6.segments()[0] & 0xfe00) != 0xfc00,
    }
}

/// What has been observed of the probers and node agents, in memory (their results are the
/// subject books').
#[derive(Debug, Default)]
pub struct Observations {
    /// Probers and probing nodes, shared with the published view like the agents (what each
    /// was given sits behind its own pointer, so a copy of the map is small).
    pub probers: Arc<HashMap<Caller, ProberRuntime>>,
    /// Node agents, shared with the published [`View`](crate::view::View) (a heartbeat copies
    /// the map of pointers once per publication, and the one agent it changes).
    pub nodes: Arc<Agents>,
}
