//! Which addresses of a node count and what each prober probes: the configured scheduling
//! addresses, else the ones its agent reported; every enabled node × every listener of its
//! cluster, where a node that probes skips itself (SPEC §3.2, §5.2) — each address, listener
//! and check once, within the probe budget.

use std::collections::hash_map::Entry;
use std::net::IpAddr;

use vantage_core::address::{AddressList, AddressPolicy};
use vantage_core::check::Listener;
use vantage_core::evaluate::FastMap;
use vantage_core::ids::{ClusterId, NodeId};
use vantage_core::wire;

use vantage_core::Timestamp;

use crate::config::Config;
use crate::identity::Caller;
use crate::observe::agent_online;
use crate::spread::Spread;
use crate::target::TargetKey;

/// A node's scheduling addresses in use: the configured ones while any exist, else the
/// reported ones (all primary).
pub fn addresses_in_use(
    configured: &AddressList,
    reported: Option<&[IpAddr]>,
    policy: AddressPolicy,
) -> AddressList {
    if !configured.is_empty() {
        return configured.clone();
    }
    AddressList::reported(reported.unwrap_or_default(), policy)
}

impl Config {
    /// How many probers the probe budget lets probe each target: the window the spread gives
    /// a target, and the room an address is given for its results.
    pub fn probers_per_target(&self) -> usize {
        let s = &self.settings;
        self.detection.probers_per_target(s.attempts(), s.interval_s())
    }

    /// A node that probes: enabled, *also probes* on, and its group has a region.
    pub fn node_probes(&self, node: NodeId) -> bool {
        self.nodes.get(&node.0).is_some_and(|n| {
            n.value.node.enabled
                && n.value.node.also_probes
                && self.groups.get(&n.value.node.group.0).is_some_and(|g| g.value.group.region.is_some())
        })
    }

    /// A prober's or probing node's status at `now` (SPEC §3.5), last seen at `last_seen`: the
    /// one reading of the core and of its published views.
    pub fn prober_status(
        &self,
        caller: Caller,
        last_seen: Option<Timestamp>,
        now: Timestamp,
    ) -> crate::observe::ProberStatus {
        let enabled = match caller {
            Caller::Prober(p) => self.probers.get(&p.0).is_some_and(|p| p.value.enabled),
            Caller::Node(n) => self.node_probes(n),
        };
        crate::observe::prober_status(enabled, last_seen, &self.settings, now)
    }

    /// The check `initial` of a target's cluster: good attempts assumed when it is first seen.
    pub fn initial_of(&self, target: TargetKey) -> u8 {
        self.nodes
            .get(&target.node.0)
            .and_then(|n| self.clusters.get(&n.value.cluster.0))
            .map_or(0, |c| self.cluster_check(&c.value).check.initial())
    }
}

/// Why a cluster's listeners are probed by TCP connect instead of its check (reference 000):
/// enabled nodes of the cluster whose agent is online and reports capabilities without
/// `probe-health-v1` cannot answer the health endpoint. Nodes without an agent, or whose
/// agent is offline, follow the cluster's check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TcpFallback {
    /// The names of those nodes.
    pub nodes: Vec<String>,
}

impl TcpFallback {
    /// The cluster's fallback at `now`, if any of its nodes calls for one.
    pub fn of(
        c: &Config,
        cluster: ClusterId,
        runtime: &crate::observe::Agents,
        now: Timestamp,
    ) -> Option<TcpFallback> {
        let nodes: Vec<String> = c
            .nodes_of(cluster)
            .filter(|(id, n)| {
                n.value.node.enabled
                    && runtime.get(id).is_some_and(|r| {
                        agent_online(r.last_heartbeat, now)
                            && !r.capabilities.iter().any(|c| c == wire::CAP_PROBE_HEALTH)
                    })
            })
            .map(|(_, n)| n.value.node.name.clone())
            .collect();
        (!nodes.is_empty()).then_some(TcpFallback { nodes })
    }

    /// In words, for the cluster's view.
    pub fn reason(&self) -> String {
        let (one, agents) = (self.nodes.len() == 1, self.nodes.join(", "));
        format!(
            "listeners are probed by TCP connect: the agent of node{} {agents} do{} not report {}",
            if one { "" } else { "s" },
            if one { "es" } else { "" },
            wire::CAP_PROBE_HEALTH
        )
    }
}

/// What one work answer gives a prober: the checks its targets index, one target per probe,
/// and how the keys of the answer relate to every key they stand for.
#[derive(Debug, Default)]
pub struct Issued {
    pub checks: Vec<vantage_core::check::Check>,
    pub targets: Vec<wire::Target>,
    /// The keys of `targets`, in their order: reports may carry only these.
    pub keys: Vec<TargetKey>,
    /// Keys probed under another key's probe: the same address, listener and check listed
    /// again (by another cluster), probed once per round. Key given → the others.
    pub aliases: FastMap<TargetKey, Vec<TargetKey>>,
}

/// The targets `caller` probes: every enabled node's addresses in use × its cluster's
/// listeners, but each (address, listener, check) once, and only the addresses whose probers
/// within the probe budget include `caller` (see [`Spread`]). The listeners of a cluster
/// `tcp_fallback` names get its check by TCP connect ([`TcpFallback`]).
pub fn targets(
    c: &Config,
    caller: Caller,
    reported: impl Fn(NodeId) -> Option<Vec<IpAddr>>,
    tcp_fallback: impl Fn(ClusterId) -> bool,
    policy: AddressPolicy,
    spread: &Spread,
) -> Issued {
    let mut out = Issued::default();
    let mut probe_of: FastMap<(IpAddr, Listener, u32), TargetKey> = FastMap::default();
    for (cid, cluster) in &c.clusters {
        // Clusters probed with the same check share one; a cluster in the TCP fallback is
        // probed by TCP connect with the rest of its check.
        let probed = c.cluster_check(&cluster.value).check;
        let probed = if tcp_fallback(ClusterId(*cid)) { probed.as_tcp() } else { probed };
        let check = match out.checks.iter().position(|k| *k == probed) {
            Some(i) => i,
            None => {
                out.checks.push(probed);
                out.checks.len() - 1
            }
        };
        let check = u32::try_from(check).unwrap_or(u32::MAX);
        for (nid, n) in c.nodes_of(ClusterId(*cid)) {
            if !n.value.node.enabled || caller == Caller::Node(nid) {
                continue;
            }
            let reported = reported(nid);
            for a in addresses_in_use(&n.value.addresses, reported.as_deref(), policy).as_slice() {
                for l in &cluster.value.listeners {
                    if !spread.probes(caller, a.ip, l.port, Caller::Node(nid)) {
                        continue;
                    }
                    let key = TargetKey { node: nid, ip: a.ip, port: l.port };
                    match probe_of.entry((a.ip, *l, check)) {
                        Entry::Occupied(given) => out.aliases.entry(*given.get()).or_default().push(key),
                        Entry::Vacant(v) => {
                            v.insert(key);
                            out.keys.push(key);
                            out.targets.push(wire::Target {
                                key: key.to_string(),
                                ip: a.ip,
                                listener: *l,
                                check,
                            });
                        }
                    }
                }
            }
        }
    }
    out
}
