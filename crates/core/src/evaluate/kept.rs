//! What a pass made of each node, kept for the next (issue 32: a pass re-evaluates only what
//! changed). A pass soon after another — a configuration change, a node created while no
//! report came in between — meets most nodes as they were: the same configuration, the same
//! observations, the same heartbeat. Stepping such a node's addresses again changes nothing
//! (each step with the input of the last one leaves the hysteresis as it was, until a streak
//! ends, a doubling is forgiven, or reports dated ahead move its time answered:
//! [`AddressHealth::steady_until`]), so the pass takes its
//! status, its facts and its addresses waiting to be verified as the last pass made them,
//! without a look-up of its addresses' states, instead of making them anew.
//!
//! A node is taken as it was only when all of this is as it was then: its group, whether it
//! is enabled and whether a rule reads its probe metrics (and, if one does, they hold); each
//! of its addresses with its observations' edition and the probers expected, and each
//! address's tally holds; whether it is online and served; the pass's probe settings, flap
//! damping and DNS mode; and none of its addresses' states may move yet. Anything
//! else is a miss, and the node is made anew.

use super::*;
use crate::detection::Damping;

/// What a node's part of a pass was made of, besides its addresses' tallies.
#[derive(Debug, Default)]
struct Inputs {
    group: Option<GroupId>,
    enabled: bool,
    /// A rule reads its probe metrics.
    wanted: bool,
    /// Each address, its observations' edition and the probers expected to probe it.
    addresses: Vec<(SchedulingAddress, u64, u32)>,
}

impl Inputs {
    fn are(&self, node: &NodeView, wanted: bool) -> bool {
        self.group == Some(node.group)
            && self.enabled == node.enabled
            && self.wanted == wanted
            && self.addresses.len() == node.addresses.len()
            && self.addresses.iter().zip(&node.addresses).all(|((address, edition, expected), a)| {
                *address == a.address
                    && *edition == a.observations.edition()
                    && *expected == a.expected_probers
            })
    }

    fn set(&mut self, node: &NodeView, wanted: bool) {
        (self.group, self.enabled, self.wanted) = (Some(node.group), node.enabled, wanted);
        self.addresses.clear();
        (self.addresses)
            .extend(node.addresses.iter().map(|a| (a.address, a.observations.edition(), a.expected_probers)));
    }
}

/// What a pass made of one node, and while it holds.
#[derive(Debug, Default)]
pub(super) struct NodeKept {
    /// When it was made (`None`: never, it holds nothing).
    at: Option<Timestamp>,
    /// The first moment one of its addresses' states may move with the same input.
    until: Option<Timestamp>,
    inputs: Inputs,
    /// Its status as the reachability step made it (before a backup-IP action's effects).
    status: Option<Arc<NodeStatus>>,
    /// Its facts: lent to the pass that takes them, and given back at its end.
    facts: Option<NodeFacts>,
    /// Its addresses that wait to be verified.
    pending: Vec<IpAddr>,
    /// The earliest end of one of its addresses' streaks.
    streaks_end: Option<Timestamp>,
}

/// What the last pass made of a node, taken by the next.
pub(super) struct Made {
    pub(super) status: Arc<NodeStatus>,
    pub(super) facts: NodeFacts,
    pub(super) pending: Vec<IpAddr>,
    pub(super) streaks_end: Option<Timestamp>,
}

impl NodeKept {
    /// Whether the node is as it was when this was made, at `now` (its addresses' tallies
    /// apart: the caller checks those).
    pub(super) fn holds(
        &self,
        node: &NodeView,
        wanted: bool,
        (online, serving): (bool, bool),
        now: Timestamp,
    ) -> bool {
        self.at.is_some_and(|at| at <= now)
            && self.until.is_none_or(|u| now < u)
            && self.status.as_ref().is_some_and(|s| (s.online, s.serving) == (online, serving))
            && self.facts.is_some()
            && self.inputs.are(node, wanted)
    }

    /// What was made, the facts lent until the pass ends.
    pub(super) fn take(&mut self) -> Option<Made> {
        Some(Made {
            status: Arc::clone(self.status.as_ref()?),
            facts: self.facts.take()?,
            pending: self.pending.clone(),
            streaks_end: self.streaks_end,
        })
    }

    /// Becomes what a pass at `now` made of `node`; `until` is the first moment one of its
    /// addresses' states may move with the same input. The facts come back at the pass's end.
    pub(super) fn set(
        &mut self,
        (node, wanted): (&NodeView, bool),
        (now, until): (Timestamp, Option<Timestamp>),
        (status, pending, streaks_end): (&Arc<NodeStatus>, &[IpAddr], Option<Timestamp>),
    ) {
        (self.at, self.until, self.streaks_end) = (Some(now), until, streaks_end);
        // Until the pass gives this node's new facts back, none are to be taken.
        self.facts = None;
        self.inputs.set(node, wanted);
        self.status = Some(Arc::clone(status));
        self.pending.clear();
        self.pending.extend_from_slice(pending);
    }

    /// The facts the pass made or took, given back.
    pub(super) fn keep_facts(&mut self, facts: NodeFacts) {
        self.facts = Some(facts);
    }
}

/// What every node kept depends on beyond its own inputs: a pass with other settings makes
/// every node anew.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct PassInputs {
    pub(super) settings: ProbeSettings,
    pub(super) damping: Damping,
    pub(super) mode: DnsMode,
}

impl PassInputs {
    pub(super) fn of(view: &ClusterView<'_>) -> PassInputs {
        PassInputs {
            settings: *view.settings,
            damping: *view.detection.damping(),
            mode: view.cluster.dns_mode,
        }
    }
}
