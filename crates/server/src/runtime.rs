//! What the control plane knows at run time besides its configuration: the latest result of
//! every (prober, target) with its window register, what each prober and node agent last
//! said, the targets each prober was given, and each node's status from the last evaluation.
//! Kept in memory for the evaluator and the API; results are also written to the store.

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use vantage_core::Timestamp;
use vantage_core::evaluate::{LinkState, NodeMetrics, NodeStatus};
use vantage_core::ids::NodeId;
use vantage_core::result::{ErrorCode, HlsDetail};
use vantage_core::window::WindowRegister;
use vantage_store::ResultRow;

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
    /// The window register.
    pub register: WindowRegister,
    /// HLS tuple.
    pub hls: Option<HlsDetail>,
}

impl From<&ResultRow> for Latest {
    fn from(r: &ResultRow) -> Self {
        Latest {
            at: r.at,
            sent: r.sent,
            lost: r.lost,
            rtt_us: r.rtt_us,
            error: r.error,
            register: r.register,
            hls: r.hls,
        }
    }
}

/// A prober's last round, as the prober list shows it.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct RoundSummary {
    /// When the round started.
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

/// What a prober (or a node that probes) last said.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ProberRuntime {
    /// Last request of any kind.
    pub last_seen: Option<Timestamp>,
    /// Agent version.
    pub version: Option<String>,
    /// Host name given at enrollment.
    pub hostname: Option<String>,
    /// The last round.
    pub last_round: Option<RoundSummary>,
    /// Targets in its last work.
    pub targets: u32,
    /// Target keys of its last work (reports may only carry these).
    #[serde(skip)]
    pub issued: HashSet<String>,
}

/// What a node agent last said.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct NodeRuntime {
    /// Last heartbeat.
    pub last_heartbeat: Option<Timestamp>,
    /// Agent version.
    pub version: Option<String>,
    /// Host name.
    pub hostname: Option<String>,
    /// Metrics of the last heartbeat.
    pub metrics: Option<NodeMetrics>,
    /// Addresses it reported.
    pub addresses: Vec<IpAddr>,
    /// Capabilities.
    pub capabilities: Vec<String>,
    /// Links.
    pub links: Vec<LinkState>,
    /// Where its last heartbeat came from.
    pub connects_from: Option<IpAddr>,
}

/// Results by target key, then by prober.
pub type ResultMap = HashMap<String, HashMap<i64, Latest>>;

/// The runtime state.
#[derive(Debug, Default)]
pub struct Runtime {
    /// Latest results.
    pub results: Mutex<ResultMap>,
    /// Probers (and nodes that probe), by id.
    pub probers: Mutex<HashMap<i64, ProberRuntime>>,
    /// Node agents, by node id.
    pub nodes: Mutex<HashMap<i64, NodeRuntime>>,
    /// Node statuses from the last evaluation.
    pub statuses: Mutex<HashMap<NodeId, NodeStatus>>,
}

/// Locks a mutex, recovering the data of a holder that panicked: every critical section here
/// leaves the data consistent.
pub fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Runtime {
    /// Drops every result of `prober`.
    pub fn forget_prober(&self, prober: i64) {
        let mut r = lock(&self.results);
        for per in r.values_mut() {
            per.remove(&prober);
        }
        r.retain(|_, per| !per.is_empty());
    }

    /// Drops results not updated since `before`; returns how many.
    pub fn expire(&self, before: Timestamp) -> usize {
        let mut r = lock(&self.results);
        let mut n = 0;
        for per in r.values_mut() {
            let len = per.len();
            per.retain(|_, l| l.at >= before);
            n += len - per.len();
        }
        r.retain(|_, per| !per.is_empty());
        n
    }
}

/// The key of a cluster target: node, address, port.
pub fn target_key(node: i64, ip: IpAddr, port: u16) -> String {
    format!("n{node}/{ip}/{port}")
}

/// Parses a cluster target key.
pub fn parse_key(key: &str) -> Option<(i64, IpAddr, u16)> {
    let rest = key.strip_prefix('n')?;
    let (node, rest) = rest.split_once('/')?;
    let (ip, port) = rest.rsplit_once('/')?;
    Some((node.parse().ok()?, ip.parse().ok()?, port.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn target_keys_round_trip() {
        for ip in ["203.0.113.10", "2001:db8::10"] {
            let ip: IpAddr = ip.parse().unwrap();
            assert_eq!(parse_key(&target_key(12, ip, 443)), Some((12, ip, 443)));
        }
        assert_eq!(parse_key("m/mirror.example.net"), None);
    }
}
