//! What a configuration change means beyond the objects it saves: whose results stop
//! counting, and which clusters must be evaluated at once, with the reason their revision
//! carries.

use std::collections::BTreeSet;

use vantage_core::ids::{ClusterId, NodeId, ProberId};

use crate::config::{Config, Object};
use crate::identity::Caller;

/// The reason of a revision cut because configuration changed.
pub const BINDING_SAVED: &str = "Binding saved";

/// The consequences of one change.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Effects {
    /// Probers (or probing nodes) whose results must go.
    pub forget: BTreeSet<Caller>,
    /// Evaluate every cluster (probers or settings changed).
    pub all: bool,
    /// Clusters to evaluate, with the reason of the change (`None`: rules, which cut their own
    /// revisions when they act).
    pub clusters: Vec<(ClusterId, Option<&'static str>)>,
}

impl Effects {
    /// The effects of saving `puts` and deleting `deletes` on configuration `before`.
    pub fn of(before: &Config, puts: &[(i64, Object)], deletes: &[i64]) -> Effects {
        let mut e = Effects::default();
        let saved = Some(BINDING_SAVED);
        for (id, o) in puts {
            match o {
                Object::Settings(_) | Object::Detection(_) => e.all = true,
                Object::Prober(p) => {
                    e.all = true;
                    if !p.enabled {
                        e.forget.insert(Caller::Prober(ProberId(*id)));
                    }
                }
                Object::Cluster(_) => e.clusters.push((ClusterId(*id), saved)),
                Object::Group(g) => e.clusters.push((g.cluster, saved)),
                Object::Line(l) => e.clusters.push((l.cluster, saved)),
                Object::Rule(r) => e.clusters.push((r.cluster, None)),
                Object::Node(n) => {
                    e.clusters.push((n.cluster, saved));
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
                | Object::Monitor(_) => {}
            }
        }
        for id in deletes {
            if before.probers.contains_key(id) {
                e.forget.insert(Caller::Prober(ProberId(*id)));
                e.all = true;
            }
            if let Some(n) = before.nodes.get(id) {
                e.forget.insert(Caller::Node(NodeId(*id)));
                e.clusters.push((n.value.cluster, saved));
                e.all |= n.value.node.also_probes;
            }
            if let Some(g) = before.groups.get(id) {
                e.clusters.push((g.value.cluster, saved));
            }
            if let Some(l) = before.lines.get(id) {
                e.clusters.push((l.value.cluster, saved));
            }
            if let Some(r) = before.rules.get(id) {
                e.clusters.push((r.value.cluster, None));
            }
        }
        e
    }
}
