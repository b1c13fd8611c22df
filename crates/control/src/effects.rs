//! What a configuration change means beyond the objects it saves: whose results stop
//! counting, and which clusters must be evaluated at once, with the reason their revision
//! carries.

use std::collections::BTreeSet;

use vantage_core::Timestamp;
use vantage_core::ids::{ClusterId, NodeId, ProberId};

use crate::config::{Config, NodeRecord, Object};
use crate::identity::Caller;

/// The consequences of one change.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Effects {
    /// Probers (or probing nodes) whose results must go.
    pub forget: BTreeSet<Caller>,
    /// Of those, the ones that counted until this change: only they can have results stored
    /// (the others' went when they stopped counting). Saving a node that does not probe
    /// forgets it again, and a deletion in the store for each of 10,000 nodes saved at once
    /// would hold up the results stored behind it.
    pub counted: BTreeSet<Caller>,
    /// Evaluate every cluster (probers or settings changed).
    pub all: bool,
    /// Clusters to evaluate, with the reason of the change, naming what changed (`Addresses
    /// of sin-1a saved`; `None`: rules, which cut their own revisions when they act).
    pub clusters: Vec<(ClusterId, Option<String>)>,
}

impl Effects {
    /// The effects of saving `puts` and deleting `deletes` on configuration `before` at `now`.
    pub fn of(before: &Config, puts: &[(i64, Object)], deletes: &[i64], now: Timestamp) -> Effects {
        let mut e = Effects::default();
        let said = |what: String, new: bool| Some(format!("{what} {}", if new { "added" } else { "saved" }));
        for (id, o) in puts {
            match o {
                Object::Settings(_) | Object::Detection(_) => e.all = true,
                Object::Prober(p) => {
                    e.all = true;
                    if !p.enabled {
                        e.forget.insert(Caller::Prober(ProberId(*id)));
                    }
                }
                Object::Cluster(c) => e.clusters.push((
                    ClusterId(*id),
                    said(format!("Cluster {}", c.name), !before.clusters.contains_key(id)),
                )),
                Object::Group(g) => {
                    let old = before.groups.get(id).map(|o| o.value.group.drained);
                    let why = match old {
                        Some(was) if was != g.group.drained => Some(format!(
                            "Group {} {}",
                            g.group.name,
                            if g.group.drained { "drained" } else { "back from its drain" }
                        )),
                        _ => said(format!("Group {}", g.group.name), old.is_none()),
                    };
                    e.clusters.push((g.cluster, why));
                }
                Object::Line(l) => e
                    .clusters
                    .push((l.cluster, said(format!("Line {}", l.line.name), !before.lines.contains_key(id)))),
                Object::Rule(r) => e.clusters.push((r.cluster, None)),
                Object::Node(n) => {
                    e.clusters.push((n.cluster, node_reason(before.nodes.get(id).map(|o| &*o.value), n)));
                    if !n.node.also_probes || !n.node.enabled {
                        e.forget.insert(Caller::Node(NodeId(*id)));
                    }
                    e.all |= before
                        .nodes
                        .get(id)
                        .is_some_and(|old| old.value.node.also_probes != n.node.also_probes);
                }
                Object::Region(_)
                | Object::AdminToken(_)
                | Object::EnrollToken(_)
                | Object::Webhook(_)
                | Object::Check(_)
                | Object::MirrorSettings(_)
                | Object::Monitor(_)
                | Object::Silence(_)
                | Object::StatusPage(_) => {}
                Object::Maintenance(m) => {
                    // Only a window open now (or open before the change) changes what is
                    // drained now; one that opens later does so at its time.
                    let old = before.maintenance.get(id).map(|o| &*o.value).filter(|o| o.is_open(now));
                    let why = format!("Maintenance {} saved", m.name);
                    let windows = old.into_iter().chain(Some(m).filter(|m| m.is_open(now)));
                    e.clusters
                        .extend(windows.flat_map(|w| w.clusters(before)).map(|c| (c, Some(why.clone()))));
                }
            }
        }
        for id in deletes {
            if before.probers.contains_key(id) {
                e.forget.insert(Caller::Prober(ProberId(*id)));
                e.all = true;
            }
            if let Some(n) = before.nodes.get(id) {
                e.forget.insert(Caller::Node(NodeId(*id)));
                e.clusters.push((n.value.cluster, Some(format!("Node {} deleted", n.value.node.name))));
                e.all |= n.value.node.also_probes;
            }
            if let Some(g) = before.groups.get(id) {
                e.clusters.push((g.value.cluster, Some(format!("Group {} deleted", g.value.group.name))));
            }
            if let Some(m) = before.maintenance.get(id).filter(|m| m.value.is_open(now)) {
                let why = format!("Maintenance {} deleted", m.value.name);
                e.clusters.extend(m.value.clusters(before).into_iter().map(|c| (c, Some(why.clone()))));
            }
            if let Some(l) = before.lines.get(id) {
                e.clusters.push((l.value.cluster, Some(format!("Line {} deleted", l.value.line.name))));
            }
            if let Some(r) = before.rules.get(id) {
                e.clusters.push((r.value.cluster, None));
            }
        }
        e.counted = e.forget.iter().copied().filter(|c| counted(before, *c)).collect();
        e
    }
}

/// Whether `caller`'s results counted under `config`: an enabled prober, or an enabled node
/// that also probes.
fn counted(config: &Config, caller: Caller) -> bool {
    match caller {
        Caller::Prober(p) => config.probers.get(&p.0).is_some_and(|r| r.value.enabled),
        Caller::Node(n) => {
            config.nodes.get(&n.0).is_some_and(|r| r.value.node.enabled && r.value.node.also_probes)
        }
    }
}

/// What saving node `n` changed, in the words of a revision's reason: its addresses, its being
/// enabled, or anything else about it.
fn node_reason(old: Option<&NodeRecord>, n: &NodeRecord) -> Option<String> {
    let name = &n.node.name;
    Some(match old {
        None => format!("Node {name} added"),
        Some(o) if o.node.enabled != n.node.enabled => {
            format!("Node {name} {}", if n.node.enabled { "enabled" } else { "disabled" })
        }
        Some(o) if o.node.drained != n.node.drained => {
            format!("Node {name} {}", if n.node.drained { "drained" } else { "back from its drain" })
        }
        Some(o) if o.addresses != n.addresses => format!("Addresses of {name} saved"),
        Some(_) => format!("Node {name} saved"),
    })
}
