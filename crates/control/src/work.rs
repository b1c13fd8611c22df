//! Which addresses of a node count and what each prober probes: the configured scheduling
//! addresses, else the ones its agent reported; every enabled node × every listener of its
//! cluster, where a node that probes skips itself (SPEC §3.2, §5.2).

use std::collections::BTreeSet;
use std::net::IpAddr;

use vantage_core::address::{AddressList, AddressPolicy};
use vantage_core::ids::{ClusterId, NodeId};
use vantage_core::wire;

use crate::config::Config;
use crate::identity::Caller;
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
    /// A node that probes: enabled, *also probes* on, and its group has a region.
    pub fn node_probes(&self, node: NodeId) -> bool {
        self.nodes.get(&node.0).is_some_and(|n| {
            n.value.node.enabled
                && n.value.node.also_probes
                && self.groups.get(&n.value.node.group.0).is_some_and(|g| g.value.group.region.is_some())
        })
    }

    /// The check `initial` of a target's cluster: good attempts assumed when it is first seen.
    pub fn initial_of(&self, target: TargetKey) -> u8 {
        self.nodes
            .get(&target.node.0)
            .and_then(|n| self.clusters.get(&n.value.cluster.0))
            .map_or(0, |c| c.value.check.initial())
    }
}

/// The targets `caller` probes, with the checks they index, and the set of their keys.
pub fn targets(
    c: &Config,
    caller: Caller,
    reported: impl Fn(NodeId) -> Option<Vec<IpAddr>>,
    policy: AddressPolicy,
) -> (Vec<vantage_core::check::Check>, Vec<wire::Target>, BTreeSet<TargetKey>) {
    let mut checks = Vec::new();
    let mut targets = Vec::new();
    let mut keys = BTreeSet::new();
    for (cid, cluster) in &c.clusters {
        let check = u32::try_from(checks.len()).unwrap_or(u32::MAX);
        checks.push(cluster.value.check.clone());
        for (nid, n) in c.nodes_of(ClusterId(*cid)) {
            if !n.value.node.enabled || caller == Caller::Node(nid) {
                continue;
            }
            let reported = reported(nid);
            for a in addresses_in_use(&n.value.addresses, reported.as_deref(), policy).as_slice() {
                for l in &cluster.value.listeners {
                    let key = TargetKey { node: nid, ip: a.ip, port: l.port };
                    keys.insert(key);
                    targets.push(wire::Target { key: key.to_string(), ip: a.ip, listener: *l, check });
                }
            }
        }
    }
    (checks, targets, keys)
}
