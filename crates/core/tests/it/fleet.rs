//! A small fleet description for tests: build a `ClusterView`, feed it probe results and
//! metrics, step a virtual clock.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;

use vantage_core::Timestamp;
use vantage_core::address::{Level, SchedulingAddress};
use vantage_core::answer::{LatencySpec, LineSpec};
use vantage_core::evaluate::{
    AddressView, ClusterState, ClusterView, Evaluation, NodeMetrics, NodeStatus, NodeView, Tallied,
    evaluate_again,
};
use vantage_core::ids::{GroupId, LineId, NodeId, RegionId, RuleId};
use vantage_core::model::{AllDown, Cluster};
use vantage_core::reachability::{Observation, Observations, ProberView};
use vantage_core::rules::Rule;
use vantage_core::settings::{ProbeSettings, ProbeSettingsInput};

pub(crate) const T0: Timestamp = Timestamp::from_secs(1_800_000_000);

pub(crate) fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

pub(crate) fn ips(list: &[&str]) -> Vec<IpAddr> {
    list.iter().map(|s| ip(s)).collect()
}

/// A cluster under test with its own state and clock.
pub(crate) struct Fleet {
    pub settings: ProbeSettings,
    pub detection: vantage_core::detection::DetectionSettings,
    pub cluster: Cluster,
    pub lines: Vec<LineSpec>,
    pub nodes: Vec<NodeView<'static>>,
    pub probers: Vec<ProberView>,
    pub rules: Vec<(RuleId, Rule)>,
    pub state: ClusterState,
    /// What its passes tallied, read back by the next as the control core's passes do.
    pub tallied: Tallied,
    /// The statuses of its last pass, which the next shares where they did not change, as
    /// the control core's passes do.
    pub statuses: BTreeMap<NodeId, Arc<NodeStatus>>,
    pub now: Timestamp,
    pub listeners: u32,
}

impl Fleet {
    /// A cluster with `probers` probers in regions 1, 2, 3, … and default settings.
    pub(crate) fn new(probers: usize) -> Self {
        Fleet {
            settings: ProbeSettings::default(),
            detection: Default::default(),
            cluster: serde_json::from_str(r#"{"name":"video","domain":"cdn.example.net"}"#).unwrap(),
            lines: Vec::new(),
            nodes: Vec::new(),
            probers: (0..probers)
                .map(|i| ProberView { region: RegionId(i as i64 + 1), active: true })
                .collect(),
            rules: Vec::new(),
            state: ClusterState::default(),
            tallied: Tallied::default(),
            statuses: BTreeMap::new(),
            now: T0,
            listeners: 1,
        }
    }

    pub(crate) fn fast(mut self) -> Self {
        self.settings = ProbeSettings::parse(ProbeSettingsInput {
            interval_s: 5,
            timeout_ms: 1000,
            failing_before_unreachable_s: 5,
            answering_before_reachable_s: 5,
            ..Default::default()
        })
        .unwrap();
        self
    }

    pub(crate) fn cluster_json(mut self, json: &str) -> Self {
        self.cluster = serde_json::from_str(json).unwrap();
        self
    }

    pub(crate) fn line(mut self, id: i64, group: i64, backups: &[i64], min: u32) -> Self {
        self.lines.push(LineSpec {
            id: LineId(id),
            name: format!("line-{id}"),
            group: Some(GroupId(group)),
            backup_groups: backups.iter().map(|g| GroupId(*g)).collect(),
            min_healthy: min,
            all_down: AllDown::Hold,
            latency: None,
        });
        self
    }

    /// Line `id` steers by the RTT of the probers of `region`; groups are named `group-N`.
    pub(crate) fn latency(mut self, id: i64, region: i64) -> Self {
        let line = self.lines.iter_mut().find(|l| l.id == LineId(id)).unwrap();
        let groups = line.group.into_iter().chain(line.backup_groups.iter().copied());
        line.latency = Some(LatencySpec {
            region: RegionId(region),
            region_name: format!("r{region}"),
            group_names: groups.map(|g| (g, format!("group-{g}"))).collect(),
        });
        self
    }

    /// Adds a node with addresses `(ip, level)`.
    pub(crate) fn node(mut self, id: i64, group: i64, addresses: &[(&str, Level)]) -> Self {
        self.nodes.push(NodeView {
            id: NodeId(id),
            name: format!("edge-{id}"),
            group: GroupId(group),
            enabled: true,
            last_heartbeat: None,
            links: Vec::new(),
            metrics: None,
            addresses: addresses
                .iter()
                .map(|(a, level)| AddressView {
                    expected_probers: 0,
                    address: SchedulingAddress { ip: ip(a), level: *level, trusted: false, line: None },
                    observations: Cow::Owned(Observations::default()),
                })
                .collect(),
        });
        self
    }

    pub(crate) fn rule(mut self, id: i64, json: &str) -> Self {
        self.rules.push((RuleId(id), serde_json::from_str(json).unwrap()));
        self
    }

    pub(crate) fn node_mut(&mut self, id: i64) -> &mut NodeView<'static> {
        self.nodes.iter_mut().find(|n| n.id == NodeId(id)).unwrap()
    }

    /// Every prober in `failing` loses every attempt to `addr`; the others lose none. All
    /// report now, on every listener.
    pub(crate) fn report(&mut self, addr: &str, failing: &[usize]) {
        let now = self.now;
        let attempts = self.settings.attempts() as u16;
        let listeners = self.listeners;
        let n = self.probers.len();
        let target = ip(addr);
        for node in &mut self.nodes {
            for a in &mut node.addresses {
                if a.address.ip != target {
                    continue;
                }
                let mut obs = Vec::new();
                for p in 0..n {
                    for _ in 0..listeners {
                        let lost = if failing.contains(&p) { attempts } else { 0 };
                        obs.push(Observation {
                            prober: p as u32,
                            sent: attempts,
                            lost,
                            rtt_us: (lost < attempts).then_some(12_000),
                            reported_at: now,
                            failed_at: None,
                        });
                    }
                }
                a.observations = Cow::Owned(Observations::new(obs));
            }
        }
    }

    /// Every prober reports `addr` answering now on every listener, prober `p` in `rtt(p)` ms.
    pub(crate) fn report_rtt(&mut self, addr: &str, rtt: impl Fn(usize) -> f32) {
        let (now, attempts, listeners, n, target) =
            (self.now, self.settings.attempts() as u16, self.listeners, self.probers.len(), ip(addr));
        let a =
            self.nodes.iter_mut().flat_map(|n| &mut n.addresses).find(|a| a.address.ip == target).unwrap();
        let obs = (0..n).flat_map(|p| (0..listeners).map(move |_| (p, attempts)));
        a.observations = Cow::Owned(Observations::new(
            obs.map(|(p, sent)| Observation {
                prober: p as u32,
                sent,
                lost: 0,
                rtt_us: Some((rtt(p) * 1000.0).round() as u32),
                reported_at: now,
                failed_at: None,
            })
            .collect(),
        ));
    }

    /// Every prober reports every address of the fleet answering, except those listed.
    pub(crate) fn report_all_ok(&mut self) {
        let all: Vec<String> =
            self.nodes.iter().flat_map(|n| n.addresses.iter().map(|a| a.address.ip.to_string())).collect();
        for a in all {
            self.report(&a, &[]);
        }
    }

    pub(crate) fn metrics(&mut self, node: i64, cpu: f64) {
        let now = self.now;
        let n = self.node_mut(node);
        n.last_heartbeat = Some(now);
        n.metrics = Some(NodeMetrics {
            at: now,
            cpu_pct: cpu,
            memory_total_bytes: 100,
            memory_used_bytes: 50,
            ..Default::default()
        });
    }

    /// The view of the fleet as it is.
    pub(crate) fn view(&self) -> ClusterView<'_> {
        ClusterView {
            settings: &self.settings,
            detection: &self.detection,
            cluster: &self.cluster,
            lines: &self.lines,
            nodes: &self.nodes,
            probers: &self.probers,
            rules: &self.rules,
            reason: None,
            statuses: Some(&self.statuses),
        }
    }

    /// Runs one pass now.
    pub(crate) fn eval(&mut self) -> Evaluation {
        let (mut state, mut tallied) = (std::mem::take(&mut self.state), std::mem::take(&mut self.tallied));
        let e = evaluate_again(&self.view(), &mut state, &mut tallied, self.now);
        (self.state, self.tallied) = (state, tallied);
        self.statuses = e.nodes.iter().map(|s| (s.node, Arc::clone(s))).collect();
        e
    }

    /// Advances the clock by `s` seconds.
    pub(crate) fn advance(&mut self, s: u64) {
        self.now = self.now.plus_secs(s);
    }

    /// Published records of a line.
    pub(crate) fn line_records(&self, line: i64) -> Vec<IpAddr> {
        self.state.published.as_ref().and_then(|r| r.lines.get(&LineId(line)).cloned()).unwrap_or_default()
    }
}
