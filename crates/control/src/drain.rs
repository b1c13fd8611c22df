//! Drain: an enabled node out of the answers by the operator's word (its own flag, its group's,
//! or an open maintenance window), still probed. It reads `draining` until every published
//! answer has been without its addresses for twice the cluster's TTL — resolvers have then
//! let go of them and clients have moved — and `drained` after.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::json;
use vantage_core::Timestamp;
use vantage_core::evaluate::NodeStatus;
use vantage_core::ids::{ClusterId, NodeId};

use crate::config::Config;
use crate::events::{EventKind, EventLog};
use crate::snapshot::Snapshots;

/// Why a node is out of the answers while enabled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(tag = "by", rename_all = "snake_case")]
pub enum DrainCause {
    /// The operator drained the node.
    Node,
    /// The operator drained its group.
    Group,
    /// An open maintenance window (by id).
    Maintenance { id: i64 },
}

impl DrainCause {
    /// In words, for events and pages.
    pub fn describe(self, c: &Config) -> String {
        match self {
            DrainCause::Node => "drained by an operator".to_owned(),
            DrainCause::Group => "its group is drained".to_owned(),
            DrainCause::Maintenance { id } => match c.maintenance.get(&id) {
                Some(m) => format!("maintenance {id} ({})", m.value.name),
                None => format!("maintenance {id}"),
            },
        }
    }
}

/// A drained node's progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
pub struct Drain {
    /// Why.
    pub cause: DrainCause,
    /// Since when (the first pass that took it out; after a restart, the first pass since).
    pub since: Timestamp,
    /// When the published answers stopped naming its addresses (`None`: they still do — its
    /// address is shared with a node that serves).
    pub left_at: Option<Timestamp>,
    /// When clients have moved: `left_at` + 2 × the cluster's TTL.
    pub moved_at: Option<Timestamp>,
    /// They have, as of the pass: the node reads `drained` (else `draining`).
    pub drained: bool,
}

/// The drains of cluster `cluster` after a pass at `now`: `before`'s carried on, new ones
/// begun, ended ones gone, each told once as an event — but not on the first pass after a
/// start (`before` never evaluated), which only finds again what was told before it.
/// `statuses` are the pass's nodes, `answered` every address the published revision names
/// (sorted) and since when it has, `ttl` the cluster's. A node first seen drained that the
/// answer does not name has been out of it at least since that revision (after a restart,
/// the stored one), so clients may have moved already.
pub(crate) fn follow(
    c: &Config,
    (cluster, ttl): (ClusterId, u32),
    (before, before_evaluated): (&BTreeMap<NodeId, Drain>, bool),
    (statuses, drained): (&[Arc<NodeStatus>], &[(NodeId, DrainCause)]),
    (answered, answered_since): (&[IpAddr], Timestamp),
    events: &mut EventLog,
    now: Timestamp,
) -> BTreeMap<NodeId, Drain> {
    let mut drains = BTreeMap::new();
    let mut events = (before_evaluated).then_some(events);
    debug_assert!(drained.is_sorted_by_key(|(id, _)| *id), "drained nodes in node order");
    // Only the nodes drained now or before, in node order, among those with a status: the
    // rest have nothing to follow (a walk of every node otherwise, issue 32).
    let mut ids: Vec<NodeId> = before.keys().copied().chain(drained.iter().map(|(id, _)| *id)).collect();
    ids.sort_unstable();
    ids.dedup();
    let in_order = statuses.is_sorted_by_key(|s| s.node);
    let status_of = |id: NodeId| match in_order {
        true => statuses.binary_search_by_key(&id, |s| s.node).ok().map(|i| &statuses[i]),
        false => statuses.iter().find(|s| s.node == id),
    };
    for s in ids.into_iter().filter_map(status_of) {
        // Named only for a node drained or back from a drain.
        let node = || c.node_name(s.node);
        let scope = (Some(cluster), Some(s.node));
        let cause = drained.binary_search_by_key(&s.node, |(id, _)| *id).ok().map(|i| drained[i].1);
        let Some(cause) = cause else {
            if before.contains_key(&s.node) {
                let node = node();
                let summary = format!("{node} is back from its drain: answered again as its health allows");
                if let Some(e) = events.as_deref_mut() {
                    e.push(now, EventKind::NodeUndrained, scope, summary, json!({"node": node}));
                }
            }
            continue;
        };
        let node = node();
        let named = s.addresses.iter().any(|a| answered.binary_search(&a.ip).is_ok());
        let old = before.get(&s.node);
        let left_at =
            if named { None } else { old.and_then(|d| d.left_at).or(Some(answered_since.min(now))) };
        // Never earlier than once said (a TTL lowered during a drain: resolvers may hold the
        // longer one), and drained stays drained.
        let moved_at = match (left_at.map(|t| t.plus_secs(2 * u64::from(ttl))), old) {
            (_, Some(d)) if d.drained => d.moved_at,
            (Some(t), Some(d)) => Some(d.moved_at.map_or(t, |m| m.max(t))),
            (t, _) => t,
        };
        let drained = old.is_some_and(|d| d.drained) || moved_at.is_some_and(|t| t <= now);
        let drain = Drain { cause, since: old.map_or(now, |d| d.since), left_at, moved_at, drained };
        let why = cause.describe(c);
        if old.is_none() && !drained {
            let summary = format!(
                "{node} is draining ({why}): out of the answers, still probed; clients move within 2 × TTL ({} s)",
                2 * ttl
            );
            if let Some(e) = events.as_deref_mut() {
                e.push(now, EventKind::NodeDraining, scope, summary, json!({"node": node, "cause": cause}));
            }
        }
        if drained && !old.is_some_and(|d| d.drained) {
            let summary = format!(
                "{node} is drained ({why}): out of the answers for 2 × TTL ({} s), clients have moved",
                2 * ttl
            );
            if let Some(e) = events.as_deref_mut() {
                e.push(now, EventKind::NodeDrained, scope, summary, json!({"node": node, "cause": cause}));
            }
        }
        drains.insert(s.node, drain);
    }
    drains
}

/// The next moment a draining node of `drains` reads drained.
pub(crate) fn next_moved(drains: &BTreeMap<NodeId, Drain>) -> Option<Timestamp> {
    drains.values().filter(|d| !d.drained).filter_map(|d| d.moved_at).min()
}

/// A line a drain would leave below its minimum.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
pub struct Shortfall {
    /// The cluster's name.
    pub cluster: String,
    /// The line's name (`default` for a cluster without lines).
    pub line: String,
    /// Addresses it answers now.
    pub now: usize,
    /// Addresses it would answer without the drained nodes.
    pub after: usize,
    /// Its minimum of healthy addresses.
    pub min_healthy: u32,
}

impl std::fmt::Display for Shortfall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "line {} of {} would answer {} of its {} addresses, below its minimum of {}",
            self.line, self.cluster, self.after, self.now, self.min_healthy
        )
    }
}

/// The pre-flight of draining `nodes` under configuration `c` at `now`: every line whose
/// published answer would fall below its minimum of healthy addresses without them and without
/// the nodes `c` drains already (a drain the last pass has not published yet counts), so that
/// two drains checked one after the other are checked together. Its backup groups, or its
/// all-down policy, would then answer. Read from the published revisions and the last passes.
pub fn shortfalls(
    c: &Config,
    snapshots: &Snapshots,
    nodes: &BTreeSet<NodeId>,
    now: Timestamp,
) -> Vec<Shortfall> {
    let clusters: BTreeSet<ClusterId> =
        nodes.iter().filter_map(|n| c.nodes.get(&n.0)).map(|n| n.value.cluster).collect();
    let drained = clusters
        .iter()
        .flat_map(|cl| c.nodes_of(*cl))
        .map(|(n, _)| n)
        .filter(|n| c.drain_of(*n, now).is_some());
    let nodes: BTreeSet<NodeId> = nodes.iter().copied().chain(drained).collect();
    let mut out = Vec::new();
    for cluster in clusters {
        let Some(snapshot) = snapshots.get(&cluster) else { continue };
        let Some(published) = &snapshot.published else { continue };
        let leaving: BTreeSet<IpAddr> = (nodes.iter())
            .filter_map(|n| snapshot.nodes.get(n))
            .flat_map(|s| s.addresses.iter().map(|a| a.ip))
            .collect();
        for (line, records) in &published.records.lines {
            let min_healthy = c.lines.get(&line.0).map_or(1, |l| l.value.line.min_healthy);
            let after = records.iter().filter(|ip| !leaving.contains(ip)).count();
            if after < records.len() && after < min_healthy as usize {
                out.push(Shortfall {
                    cluster: published.zone.name.clone(),
                    line: published.zone.line_name(*line),
                    now: records.len(),
                    after,
                    min_healthy,
                });
            }
        }
    }
    out
}
