//! One evaluation pass of a cluster (§5.5): reachability of every address first, then every
//! rule for every node it looks at, then the records of every line, cut into revisions — one
//! for health and configuration changes, one per rule activation or recovery.

use std::borrow::Cow;
use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::hash::BuildHasherDefault;
use std::net::IpAddr;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::address::{Level, SchedulingAddress};
use crate::answer::{
    Effects, GroupIndex, LineAnswer, LineContext, LineHold, LineSpec, NodeFacts, Source, in_use, not_in,
};
use crate::beside::Beside;
use crate::detection::DetectionSettings;
use crate::hash::FastHasher;
use crate::ids::RegionId;
use crate::ids::{GroupId, LineId, NodeId, RuleId};
use crate::model::{AllDown, Cluster, DnsMode};
use crate::reachability::{
    AddressCondition, AddressHealth, ByRegion, Condition, Observations, ProberView, Reachability, Tallies,
    Tally, verdicts_by_region,
};
use crate::rules::{Action, Aggregate, Metric, Rule, RuleState, Status, Transition};
use crate::settings::ProbeSettings;
use crate::time::Timestamp;

mod kept;
mod latency;
mod outlook;
mod probe;
mod rules;
mod stage;
mod tallied;

pub use latency::{GroupLatency, LineLatency};
pub use outlook::{LineOutlook, line_outlooks};
use probe::{ProbeSummary, Scratch, probe_summary, summarised};
pub use rules::{PreviewRow, preview};
use rules::{end_changed_rules, may_look_at, step_rules};
use stage::Stage;
pub use tallied::Tallied;

/// Replaced records kept for the removal window at most: a bound on what a flapping fleet
/// costs each pass.
pub const MAX_SUPERSEDED: usize = 16;
/// Seconds after which an agent without a heartbeat is offline (3 × 15 s).
pub const AGENT_ONLINE_S: u64 = 45;
/// Seconds after which a link without a handshake is stale.
pub const LINK_FRESH_S: u64 = 180;
/// Seconds after which node metrics are missing.
pub const METRICS_FRESH_S: u64 = 60;
/// Line id of the implicit default line of a cluster without lines.
pub const DEFAULT_LINE: LineId = LineId(0);

/// Host metrics from a node's heartbeat.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
pub struct NodeMetrics {
    /// When the server received them.
    pub at: Timestamp,
    /// Whole-host CPU usage, %.
    pub cpu_pct: f64,
    /// Load averages.
    pub load1: f64,
    /// 5-minute load.
    pub load5: f64,
    /// 15-minute load.
    pub load15: f64,
    /// Memory used (total − available), bytes.
    pub memory_used_bytes: u64,
    /// Memory total, bytes.
    pub memory_total_bytes: u64,
    /// Egress rate of the non-loopback interfaces, Mbit/s.
    pub egress_mbps: f64,
    /// Active connections.
    pub connections: u64,
}

impl NodeMetrics {
    /// Whether they are fresh at `now`: received within [`METRICS_FRESH_S`]. Older metrics
    /// are missing, for scheduling rules and for the node list alike.
    pub fn fresh(&self, now: Timestamp) -> bool {
        self.at.within_secs_of(now, METRICS_FRESH_S)
    }

    /// The value of a node metric (`None` for probe metrics).
    pub fn value(&self, m: Metric) -> Option<f64> {
        match m {
            Metric::Cpu => Some(self.cpu_pct),
            Metric::Load1 => Some(self.load1),
            Metric::Memory => (self.memory_total_bytes > 0)
                .then(|| self.memory_used_bytes as f64 * 100.0 / self.memory_total_bytes as f64),
            Metric::EgressMbps => Some(self.egress_mbps),
            Metric::Connections => Some(self.connections as f64),
            Metric::ProbeLoss | Metric::ProbeLatencyMs => None,
        }
    }
}

/// A link a node agent reports (a tunnel, for example).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
pub struct LinkState {
    pub name: String,
    /// Last handshake.
    pub last_handshake: Option<Timestamp>,
}

/// One scheduling address of a node with its latest results.
#[derive(Debug, Clone, PartialEq)]
pub struct AddressView<'a> {
    pub address: SchedulingAddress,
    /// Every prober's latest result on every port: borrowed from their keeper for a pass, which
    /// then takes no count of a shared list it may not read (a kept node's addresses are not
    /// read; issue 32), or owned (a list made for the pass, a harness's own).
    pub observations: Cow<'a, Observations>,
    /// How many counting probers probe it (every one online, within the probe budget): while
    /// it waits to be verified, a strict majority of them must see it answer, not just of the
    /// first ones that reported. A verified address ignores it (the driver need not look its
    /// state up to say which it is: a second look-up of every address each pass).
    pub expected_probers: u32,
}

impl AddressView<'_> {
    /// The same, owning its observations.
    fn into_owned(self) -> AddressView<'static> {
        let AddressView { address, observations, expected_probers } = self;
        AddressView { address, observations: Cow::Owned(observations.into_owned()), expected_probers }
    }
}

/// A node as the evaluator sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeView<'a> {
    pub id: NodeId,
    /// Name (for revision reasons).
    pub name: String,
    pub group: GroupId,
    pub enabled: bool,
    /// Last heartbeat from its agent.
    pub last_heartbeat: Option<Timestamp>,
    /// Links its agent reported.
    pub links: Vec<LinkState>,
    /// Latest host metrics.
    pub metrics: Option<NodeMetrics>,
    /// Scheduling addresses in use (configured, else reported).
    pub addresses: Vec<AddressView<'a>>,
}

impl NodeView<'_> {
    /// The same without its addresses, which borrow what the node may outlive: room for the
    /// next view of the node, keeping the allocations of its name, links and list of addresses.
    pub fn emptied(self) -> NodeView<'static> {
        let NodeView { id, name, group, enabled, last_heartbeat, links, metrics, mut addresses } = self;
        addresses.clear();
        // An empty list, its allocation taken over by std's collection in place (same layout;
        // not promised: without it, a list allocated for each node at each pass).
        let addresses = addresses.into_iter().map(AddressView::into_owned).collect();
        NodeView { id, name, group, enabled, last_heartbeat, links, metrics, addresses }
    }
}

/// Everything one pass reads.
#[derive(Debug, Clone, Copy)]
pub struct ClusterView<'a> {
    /// Probe settings.
    pub settings: &'a ProbeSettings,
    /// Flap damping and the other detection policies.
    pub detection: &'a DetectionSettings,
    pub cluster: &'a Cluster,
    /// Its lines; empty: an implicit default line over every group.
    pub lines: &'a [LineSpec],
    /// Its nodes.
    pub nodes: &'a [NodeView<'a>],
    /// The prober table that observations index.
    pub probers: &'a [ProberView],
    /// Its rules.
    pub rules: &'a [(RuleId, Rule)],
    /// Reason for a change caused by configuration (`Addresses of sin-1a saved`): the pass then always cuts
    /// a revision. `None`: health, which cuts one only when the records change.
    pub reason: Option<&'a str>,
    /// The statuses the last pass published, if any: a node's that comes out the same is
    /// that one again, shared instead of made anew, so that whoever kept it (the pass's own
    /// events, a node list, the availability ledger) knows by its pointer that it did not
    /// change (issue 32).
    pub statuses: Option<&'a BTreeMap<NodeId, Arc<NodeStatus>>>,
}

/// A cluster's published records: per line, and `all` (the union).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
pub struct Records {
    /// Per line (by line id), sorted.
    #[cfg_attr(feature = "schema", schema(value_type = BTreeMap<String, Vec<String>>))]
    pub lines: BTreeMap<LineId, Vec<IpAddr>>,
    /// The union of every line.
    #[cfg_attr(feature = "schema", schema(value_type = Vec<String>))]
    pub all: Vec<IpAddr>,
    /// Lines answered with a shorter TTL than the cluster's, s: those naming an address that
    /// is failing but not yet unreachable (the cluster's `suspect_ttl`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[cfg_attr(feature = "schema", schema(value_type = BTreeMap<String, u32>))]
    pub ttls: BTreeMap<LineId, u32>,
    /// Lines that steer by latency: their groups in the order they answer from (the first
    /// answers, the rest are its backups in turn). Carried with the records so that a replica
    /// that publishes them knows the order they were answered by.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[cfg_attr(feature = "schema", schema(value_type = BTreeMap<String, Vec<i64>>))]
    pub orders: BTreeMap<LineId, Vec<GroupId>>,
}

/// What `now` holds that `was` lacks, and what `was` held that `now` lacks, each in its
/// list's order, in linear time (the revision's reason, its event and the stored difference
/// all ask this of lines of 10,000 records, once per revision of a pass): sorted lists (as a
/// line's records are) in one walk of both, others by hash.
pub fn came_and_gone(was: &[IpAddr], now: &[IpAddr]) -> (Vec<IpAddr>, Vec<IpAddr>) {
    if was.is_sorted() && now.is_sorted() {
        return (not_in(now.iter(), was).copied().collect(), not_in(was.iter(), now).copied().collect());
    }
    let (was_set, now_set): (FastSet<&IpAddr>, FastSet<&IpAddr>) =
        (was.iter().collect(), now.iter().collect());
    (
        now.iter().filter(|ip| !was_set.contains(ip)).copied().collect(),
        was.iter().filter(|ip| !now_set.contains(ip)).copied().collect(),
    )
}

/// A revision to publish.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RevisionDraft {
    /// Why.
    pub reason: String,
    /// The records after it.
    pub records: Records,
    /// Lines that answer by their all-down policy, which and why.
    pub held: BTreeMap<LineId, LineHold>,
}

/// Something alerts, audit and logs care about.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Event {
    /// An address became unreachable.
    AddressUnreachable {
        node: NodeId,
        /// Address.
        ip: IpAddr,
        /// The flap damping multiplier of its *answering before reachable* (1: not damped).
        damping: u32,
    },
    /// An address is reachable again.
    AddressReachable {
        node: NodeId,
        /// Address.
        ip: IpAddr,
    },
    /// A rule's action started on a node.
    RuleActivated(RuleEvent),
    /// A rule's action on a node ended.
    RuleRecovered(RuleEvent),
    /// A rule was changed, disabled or deleted: its actions ended at once.
    RuleEnded {
        rule: RuleId,
        /// Nodes it was acting on.
        nodes: Vec<NodeId>,
        /// Revision (index into the pass's revisions).
        revision: usize,
    },
    /// A line answers by its all-down policy (held by the protection, or `online`/`nodata`).
    Held {
        line: LineId,
        /// Which policy, and why.
        hold: LineHold,
    },
    /// A line answers by health again.
    HoldReleased { line: LineId },
}

/// A rule activation or recovery.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RuleEvent {
    pub rule: RuleId,
    /// Rule name.
    pub rule_name: String,
    pub node: NodeId,
    /// Node name.
    pub node_name: String,
    pub action: Action,
    /// Line (`None`: all lines).
    pub line: Option<LineId>,
    /// Each condition's value.
    pub values: Vec<Option<f64>>,
    /// Why an activation changed nothing, when it did not.
    pub no_effect: Option<String>,
    /// Revision (index into the pass's revisions).
    pub revision: usize,
}

/// One address in a node's status.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AddressStatus {
    /// Address.
    pub ip: IpAddr,
    pub level: Level,
    pub reachability: Reachability,
    /// How the counting probers see it: the verdict's tally, without what only the
    /// hysteresis reads (it moves with every round, and a status that changes with every pass
    /// would make every reader of it work anew).
    pub verdict: Tally,
    /// How the counting probers of each region with an active prober see it, by region: where
    /// a failure is seen from, tallied in the same pass as `verdict` (which sums them up).
    /// Shared with the tally kept for the next pass, which reads it back (issue 32): a pass
    /// over addresses whose observations did not move copies no list.
    #[serde(default, skip_serializing_if = "<[_]>::is_empty")]
    pub regions: ByRegion,
    /// DNS uses it now: at the node's level, which a backup-IP action in effect may hold on a
    /// backup level (on the lines that action covers).
    pub in_use: bool,
    /// Flap damping multiplier of its *answering before reachable* (1: not damped).
    #[serde(default = "one")]
    pub damping: u32,
    /// Its condition (failing before the verdict, recovering before it is reachable again)
    /// and since when.
    #[serde(default = "unknown_condition")]
    pub condition: AddressCondition,
    /// The line it is a target address of (`None`: a scheduling address).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<LineId>,
}

/// What a status stored before conditions existed reads as: its reachability, since unknown.
fn unknown_condition() -> AddressCondition {
    AddressCondition { condition: Condition::Reachable, since: None, changes_at: None }
}

fn one() -> u32 {
    1
}

/// A node's state after a pass.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeStatus {
    pub node: NodeId,
    /// Agent connected.
    pub online: bool,
    /// Answered (enabled, and connected with fresh links where required).
    pub serving: bool,
    /// Level in use.
    pub level: Option<Level>,
    /// The backup-IP rule that holds the node on a backup level, while one does (the lowest id
    /// when several do).
    #[serde(default)]
    pub held_by: Option<RuleId>,
    pub addresses: Vec<AddressStatus>,
}

/// A rule's state for one node after a pass.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RuleNodeStatus {
    pub rule: RuleId,
    pub node: NodeId,
    pub status: Status,
}

/// What a pass decided.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Evaluation {
    /// Revisions to publish, in order.
    pub revisions: Vec<RevisionDraft>,
    /// Events, in order.
    pub events: Vec<Event>,
    /// Every node's status, in the view's order: the one before where it did not change (see
    /// [`ClusterView::statuses`]; but for a node a backup-IP action holds on a backup level,
    /// whose status before is the action's: compared only once the action is applied, by the
    /// driver).
    pub nodes: Vec<Arc<NodeStatus>>,
    /// Every non-idle rule state.
    pub rules: Vec<RuleNodeStatus>,
    /// The earliest time a timer runs out with the inputs unchanged.
    pub next_deadline: Option<Timestamp>,
    /// Attempts sent and lost over the results this pass counted, by the region of the
    /// probers that made them (regions whose probers sent nothing left out): the fleet's
    /// probe loss, tallied in the walk the verdicts take anyway.
    pub probe_loss: Vec<(RegionId, u64, u64)>,
    /// The addresses whose hysteresis state ([`ClusterState::addresses`]) this pass added,
    /// changed or forgot: what a save by difference writes.
    pub moved: Vec<(NodeId, IpAddr)>,
}

/// A hash map with the core's fast hasher (keys are ids and addresses, not attacker-chosen).
pub type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FastHasher>>;
/// A hash set with the core's fast hasher.
pub type FastSet<K> = HashSet<K, BuildHasherDefault<FastHasher>>;

/// What a cluster's evaluator remembers between passes.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ClusterState {
    /// Hysteresis per (node, address).
    #[serde(with = "pairs")]
    pub addresses: FastMap<(NodeId, IpAddr), AddressHealth>,
    /// Rule state per (rule, node); idle states without a running for-time are not kept.
    #[serde(with = "pairs")]
    pub rules: FastMap<(RuleId, NodeId), RuleState>,
    /// What each rule's states were built under; a change ends its actions.
    #[serde(with = "pairs")]
    pub behaviours: FastMap<RuleId, crate::rules::Behaviour>,
    /// The published records (`None`: nothing published yet). Always the records of the
    /// cluster's latest revision, which the store keeps: a save leaves them out, and a start
    /// puts them back from that revision (an older version's saved state may still hold them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub published: Option<Records>,
    /// Records published before these and replaced within the removal window (2 probe
    /// intervals), oldest first, each with when it was replaced: the protection measures a
    /// change against them too. Only sets whose lines differ from their successor's; emptied
    /// by a configuration change, which is no removal to protect against.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub superseded: Vec<(Timestamp, Records)>,
    /// Lines that answer by their all-down policy.
    pub held: BTreeMap<LineId, LineHold>,
    /// Lines whose published records are a never-empty fallback (the line had no healthy
    /// address of its own yet): leaving those for the line's own is no removal by health.
    #[serde(default, skip_serializing_if = "std::collections::BTreeSet::is_empty")]
    pub fallback: std::collections::BTreeSet<LineId>,
    /// The group order of each line that steers by latency, and its figures.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub latency: BTreeMap<LineId, LineLatency>,
    /// When the cluster was last evaluated: every address then in its view was, so a failing
    /// streak of one starts no earlier (see [`AddressHealth::step`]). Kept once for the
    /// cluster, not per address, so that a pass changes only the addresses whose state moved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checked_at: Option<Timestamp>,
}

impl ClusterState {
    /// The `(rule, node)` pairs whose action is in effect.
    pub(super) fn rules_in_effect(&self) -> FastSet<(RuleId, NodeId)> {
        self.rules.iter().filter(|(_, s)| s.status.in_effect()).map(|(k, _)| *k).collect()
    }

    /// `records` are published from `at` on; the ones they replace join the removal window when
    /// their lines differ. Past [`MAX_SUPERSEDED`] the second oldest goes: the oldest holds the
    /// records from before a cut that many passes notice.
    pub fn publish(&mut self, records: Option<Records>, at: Timestamp) {
        let replaced = std::mem::replace(&mut self.published, records);
        if let Some(old) = replaced
            && self.published.as_ref().is_none_or(|p| p.lines != old.lines)
        {
            self.superseded.push((at, old));
            if self.superseded.len() > MAX_SUPERSEDED {
                self.superseded.remove(1);
            }
        }
    }
}

mod pairs {
    //! Maps with non-string keys as lists of pairs, for JSON.
    use std::collections::HashMap;
    use std::hash::{BuildHasher, Hash};

    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub(super) fn serialize<K: Serialize, V: Serialize, H, S: Serializer>(
        m: &HashMap<K, V, H>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.collect_seq(m.iter())
    }

    pub(super) fn deserialize<'de, K, V, H, D>(d: D) -> Result<HashMap<K, V, H>, D::Error>
    where
        K: Deserialize<'de> + Eq + Hash,
        V: Deserialize<'de>,
        H: BuildHasher + Default,
        D: Deserializer<'de>,
    {
        Ok(Vec::<(K, V)>::deserialize(d)?.into_iter().collect())
    }
}

/// Runs one pass at `now`, updating `state`.
pub fn evaluate(view: &ClusterView<'_>, state: &mut ClusterState, now: Timestamp) -> Evaluation {
    evaluate_again(view, state, &mut Tallied::none(), now)
}

/// [`evaluate`], reading back from `tallied` the tallies of addresses whose observations did
/// not move since the passes that took them (and keeping this pass's there for the next): the
/// same decisions, for less.
pub fn evaluate_again(
    view: &ClusterView<'_>,
    state: &mut ClusterState,
    tallied: &mut Tallied,
    now: Timestamp,
) -> Evaluation {
    let mut out = Evaluation::default();
    let mut lines = effective_lines(view.lines);

    // 1. Reachability of every address.
    let Found { facts, mut statuses, pending, probe_loss, streaks_end, summaries, moved } =
        reachability(view, state, (now, true), tallied, &mut out.events);
    out.probe_loss = probe_loss;
    out.moved = moved;

    // Lines that steer by latency take their groups in the order their region's RTT gives,
    // before the rules look at which group a line answers with.
    let groups = GroupIndex::new(&facts);
    let reordered = latency::steer(view, &mut lines, (&facts, &groups), state, now);
    let latency = (!reordered.is_empty()).then(|| {
        let why: Vec<&str> = reordered.iter().map(|(_, why, _)| why.as_str()).collect();
        format!("Latency: {}", why.join("; "))
    });
    // Lines with nothing to protect this pass: those latency moved to another group first (a
    // swap among the backups changes no answer, and leaves the protection alone), and those
    // whose published records are a fallback (a fleet being set up: a line whose group had no
    // address yet answered the cluster's, and its own address is no mass removal of those).
    let unprotected: FastSet<LineId> = (reordered.into_iter())
        .filter(|(_, _, leader)| *leader)
        .map(|(l, _, _)| l)
        .chain(state.fallback.iter().copied())
        .collect();

    // 2. Rules whose behaviour changed, or that were disabled or deleted, end at once.
    let ended = end_changed_rules(view, state);
    let in_effect = state.rules_in_effect();

    // 3. Every enabled rule for every node it looks at.
    let transitions = step_rules(view, &lines, state, &summaries, now);

    // 4. Records, stage by stage: one stage for health and configuration, one per rule
    // transition. Protection compares every stage with the records published before the pass
    // and those replaced within the removal window ("at once" means within the window), and a
    // line the final stage holds is held in every stage, with the same records, so that a pass
    // never publishes a removal it then takes back.
    let suspect: FastSet<IpAddr> = statuses
        .iter()
        .flat_map(|n| &n.addresses)
        .filter(|a| a.reachability == Reachability::Reachable && a.verdict.is_failing())
        .map(|a| a.ip)
        .collect();
    let stage = Stage::new(view, &lines, (&facts, &groups), (&suspect, &pending), &unprotected);
    let mut in_effect = stage.in_effect(in_effect);
    let baseline = state.published.clone();
    let window_s = view.settings.removal_window_s();
    state.superseded.retain(|(replaced, _)| !now.at_least_secs_after(*replaced, window_s));
    // Protection guards against health, never against the operator: what is to be protected
    // leaves out every address no enabled node of the cluster has any more.
    let protected = operator_kept(view, state.superseded.iter().map(|(_, r)| r).chain(&baseline));
    let previous: Vec<&Records> = protected.iter().map(|r| &**r).collect();
    let mut final_effect = in_effect.clone();
    for (ev, t) in &transitions {
        stage.apply(&mut final_effect, ev, *t);
    }
    let final_held = stage.records(&final_effect, &previous, &BTreeMap::new()).held_answers();
    let mut first = stage.records(&in_effect, &previous, &final_held);
    // The operator's change (of rules as well) starts the window afresh: what it took out is no
    // removal a hold should put back later.
    let configured = view.reason.is_some() || !ended.is_empty();
    let first_reason = if !ended.is_empty() {
        let names: Vec<String> = ended
            .iter()
            .map(|(name, _, _)| format!("Scheduling: {name} changed, its actions ended"))
            .collect();
        Some(names.join("; "))
    } else if let Some(reason) = view.reason {
        // A configuration change always makes a revision: names, TTLs and publishers may have
        // changed even where the records did not, and the external servers need them.
        Some(reason.to_owned())
    } else if let Some(order) = &latency {
        // A new order is a revision of its own, whether or not health lets the records follow.
        let mut what = vec![order.clone()];
        if baseline.as_ref() != Some(&first.records) {
            what.extend(stage.changes(baseline.as_ref(), &first.records, &out.events));
        }
        Some(what.join("; "))
    } else if baseline.as_ref() != Some(&first.records) {
        Some(stage.health_reason(baseline.as_ref(), &first.records, &out.events))
    } else if first.held != state.held {
        // The published revision says which lines answer by their policy: a hold that starts,
        // changes or ends with the same records is a revision of its own.
        Some(stage.hold_reason(&state.held, &first.held))
    } else {
        None
    };
    let first_reason = match (first_reason, &latency) {
        (Some(r), Some(order)) if !r.starts_with("Latency: ") => Some(format!("{r}; {order}")),
        (r, _) => r,
    };
    let mut last_held = first.held.clone();
    let mut last_fallback = first.fallback.clone();
    if let Some(reason) = first_reason {
        for (_, rule, nodes) in ended {
            out.events.push(Event::RuleEnded { rule, nodes, revision: out.revisions.len() });
        }
        out.revisions.push(first.draft(reason, &lines));
    }
    for (mut ev, t) in transitions {
        stage.apply(&mut in_effect, &ev, t);
        debug_assert!(
            in_effect.same_effects(&stage.in_effect(in_effect.pairs.clone())),
            "the effects kept in step are those of the pairs in effect"
        );
        let mut result = stage.records(&in_effect, &previous, &final_held);
        let verb = match t {
            Transition::Activated => {
                ev.no_effect = stage.no_effect(&ev, &result);
                "activated"
            }
            Transition::Recovered => "recovered",
        };
        let mut reason = format!("Scheduling: {} on {} — {} {verb}", ev.rule_name, ev.node_name, ev.action);
        if let Some(why) = &ev.no_effect {
            reason.push_str(&format!(" (no effect: {why})"));
        }
        ev.revision = out.revisions.len();
        out.revisions.push(result.draft(reason, &lines));
        out.events.push(match t {
            Transition::Activated => Event::RuleActivated(ev),
            Transition::Recovered => Event::RuleRecovered(ev),
        });
        last_held = result.held;
        last_fallback = result.fallback;
    }

    // 5. Holds that started or ended.
    for (line, hold) in &last_held {
        if state.held.get(line) != Some(hold) {
            out.events.push(Event::Held { line: *line, hold: hold.clone() });
        }
    }
    for line in state.held.keys().filter(|l| !last_held.contains_key(l)) {
        out.events.push(Event::HoldReleased { line: *line });
    }
    state.held = last_held;
    state.fallback = last_fallback;
    // What the last revision holds is published; without one, what was stays.
    if let Some(last) = out.revisions.last() {
        state.publish(Some(last.records.clone()), now);
    }
    if configured {
        state.superseded.clear();
    }
    // A line that moved to another group by latency left the old group's records by decision,
    // not by health, and a fallback was never the line's own: the removal window forgets them,
    // as it forgets an operator's change.
    for (_, r) in &mut state.superseded {
        r.lines.retain(|l, _| !unprotected.contains(l));
    }

    // 6. Statuses and the next deadline.
    let backup_ip_rules: FastSet<RuleId> =
        view.rules.iter().filter(|(_, r)| r.action == Action::BackupIp).map(|(id, _)| *id).collect();
    for ((status, f), e) in statuses.iter_mut().zip(&facts).zip(&in_effect.effects) {
        if view.cluster.dns_mode == DnsMode::Automatic && e.backup_ip != Default::default() {
            let held_by = (in_effect.pairs.iter())
                .filter(|(r, n)| *n == status.node && backup_ip_rules.contains(r))
                .map(|(r, _)| *r)
                .min()
                .filter(|_| f.in_use_backup.level.is_some_and(|l| l != Level::Primary));
            let in_use = |a: &AddressStatus| f.in_use_backup.ips.contains(&a.ip);
            // A status shared with the snapshot is copied only when the action changes it.
            let same = (status.level, status.held_by) == (f.in_use_backup.level, held_by)
                && status.addresses.iter().all(|a| a.in_use == in_use(a));
            if !same {
                let status = Arc::make_mut(status);
                (status.level, status.held_by) = (f.in_use_backup.level, held_by);
                for a in &mut status.addresses {
                    a.in_use = in_use(a);
                }
            }
        }
    }
    out.nodes = statuses;
    tallied.keep_facts(facts);
    out.rules = state
        .rules
        .iter()
        .filter(|(_, s)| s.status != Status::Idle)
        .map(|(&(rule, node), s)| RuleNodeStatus { rule, node, status: s.status })
        .collect();
    out.rules.sort_by_key(|r| (r.rule, r.node));
    out.next_deadline = deadline(view, state, streaks_end);
    out
}

/// `records` without the addresses that no enabled node of the cluster has any more: the
/// operator took those out, and no protection may put them back. Copied only where one has gone.
fn operator_kept<'r>(
    view: &ClusterView<'_>,
    records: impl Iterator<Item = &'r Records>,
) -> Vec<Cow<'r, Records>> {
    let records: Vec<&Records> = records.collect();
    let enabled: FastSet<IpAddr> = view
        .nodes
        .iter()
        .filter(|n| n.enabled)
        .flat_map(|n| n.addresses.iter().map(|a| a.address.ip))
        .collect();
    records
        .into_iter()
        .map(|r| {
            if r.all.iter().all(|ip| enabled.contains(ip)) {
                return Cow::Borrowed(r);
            }
            let keep = |ips: &Vec<IpAddr>| ips.iter().copied().filter(|ip| enabled.contains(ip)).collect();
            Cow::Owned(Records {
                lines: r.lines.iter().map(|(l, ips)| (*l, keep(ips))).collect(),
                all: keep(&r.all),
                ttls: r.ttls.clone(),
                orders: r.orders.clone(),
            })
        })
        .collect()
}

fn effective_lines(lines: &[LineSpec]) -> Vec<LineSpec> {
    if lines.is_empty() {
        vec![LineSpec {
            id: DEFAULT_LINE,
            name: "default".into(),
            group: None,
            backup_groups: Vec::new(),
            min_healthy: 1,
            all_down: AllDown::Hold,
            latency: None,
        }]
    } else {
        lines.to_vec()
    }
}

/// What the reachability step finds.
struct Found {
    /// Each node's facts, in the view's order.
    facts: Vec<NodeFacts>,
    /// Each node's status, without rule effects: the one before where it is the same.
    statuses: Vec<Arc<NodeStatus>>,
    /// The addresses that wait to be verified, sorted.
    pending: Vec<IpAddr>,
    /// The probe loss by region.
    probe_loss: Vec<(RegionId, u64, u64)>,
    /// The earliest time a streak of an address of the view ends if it goes on.
    streaks_end: Option<Timestamp>,
    /// Each node's probe metrics, when an enabled rule reads one (else empty; empty too for
    /// a node no such rule may look at): taken in the walk of the verdicts, which reads the
    /// same tallies — a second walk of every observation for the rules was 15 of about
    /// 105 ms of a pass at 10,000 nodes.
    summaries: Vec<ProbeSummary>,
    /// The addresses whose hysteresis state was added, changed or forgotten.
    moved: Vec<(NodeId, IpAddr)>,
}

/// Steps every address's hysteresis. The end of its streak is taken as each is stepped: a
/// second look-up of every address for it was about a tenth of the evaluation (`perf` of the
/// node creation benchmark at 10,000 nodes). With `probe_metrics`, it takes the nodes' probe
/// metrics for the rules too (a pass; an outlook has no rules to step). An address whose
/// observations did not move since `tallied` took its tally, none of whose counted results
/// stopped counting since, has it read back instead of walking them (and a node's probe
/// metrics likewise, with all its summarised addresses'). A node as it was at the last pass,
/// whose every address's tally holds, is taken as that pass made it ([`kept`]).
fn reachability(
    view: &ClusterView<'_>,
    state: &mut ClusterState,
    (now, probe_metrics): (Timestamp, bool),
    tallied: &mut Tallied,
    events: &mut Vec<Event>,
) -> Found {
    let settings = view.settings;
    let mode = view.cluster.dns_mode;
    let mut seen = 0usize;
    let mut streaks_end: Option<Timestamp> = None;
    let mut facts = tallied.facts_room(view.nodes.len());
    let mut statuses = Vec::with_capacity(view.nodes.len());
    let mut pairs: Vec<(SchedulingAddress, bool)> = Vec::new();
    let mut pending: Vec<IpAddr> = Vec::new();
    let mut targets: Vec<(LineId, IpAddr, bool)> = Vec::new();
    let mut tallies = Tallies::new(view.probers);
    let mut loss = vec![(0, 0); tallies.regions().len()];
    // One address's attempts by region, added to `loss` and kept with its tally.
    let mut lost_here = loss.clone();
    tallied.begin(view.probers, tallies.regions(), kept::PassInputs::of(view));
    let mut summarised_here: Vec<u64> = Vec::new();
    let probe_rules: Vec<&Rule> = (view.rules.iter().map(|(_, r)| r))
        .filter(|r| probe_metrics && r.enabled && r.conditions.iter().any(|c| c.metric.is_probe()))
        .collect();
    let wanted =
        |node: &NodeView| node.enabled && probe_rules.iter().any(|r| may_look_at(r, view.lines, node.group));
    let mut scratch = (!probe_rules.is_empty()).then(|| Scratch::new(view.probers.len()));
    let mut summaries = Vec::with_capacity(if probe_rules.is_empty() { 0 } else { view.nodes.len() });
    let checked_at = state.checked_at.replace(now);
    let mut moved = Vec::new();
    // The statuses before, walked beside the nodes; each node's addresses are made in
    // `addresses` and copied out only when they differ.
    let mut olds = view.statuses.map(Beside::new);
    let mut addresses: Vec<AddressStatus> = Vec::new();
    for run in view.nodes.chunks(READ_AHEAD) {
        // Each address's observations and its state are a cache miss or two at a fleet's
        // scale: read the run's first, together — the observations only of the addresses whose
        // kept tallies will not hold. (A node's probe metrics are kept over the same editions
        // and stop holding with its addresses' tallies; only where none are kept — a rule
        // reading them just added — are addresses whose tallies hold walked unread ahead.)
        let each = run.iter().flat_map(|n| n.addresses.iter().map(move |a| (n.id, a)));
        // An address whose tally holds most likely belongs to a node taken as it was, whose
        // addresses' states are not read either.
        let read = each.enumerate().fold(0, |r, (ahead, (id, a))| {
            let key = (id, a.address.ip);
            if tallied.holds_ahead(ahead, key, (a.observations.edition(), now)) {
                return r;
            }
            let health = state.addresses.get(&key).map_or(0, |h| u64::from(h.doublings));
            r ^ health ^ a.observations.touch()
        });
        std::hint::black_box(read);
        for node in run {
            pairs.clear();
            addresses.clear();
            let summarised = summarised(node);
            let wanted = wanted(node);
            // A node whose probe metrics a rule reads reads its summarised addresses' tallies
            // back only with its metrics, all together; else it tallies them all again, in
            // their order, into its metrics.
            summarised_here.clear();
            if wanted {
                let each = node.addresses.iter().filter(|a| summarised(a));
                summarised_here.extend(each.map(|a| a.observations.edition()));
            }
            let summary = wanted.then(|| tallied.node(node.id).read(&summarised_here, now)).flatten();
            let online = node.last_heartbeat.is_some_and(|t| t.within_secs_of(now, AGENT_ONLINE_S));
            let links_fresh = view.cluster.required_links.iter().all(|name| {
                node.links.iter().any(|l| {
                    &l.name == name && l.last_handshake.is_some_and(|t| t.within_secs_of(now, LINK_FRESH_S))
                })
            });
            let serving = node.enabled && (!view.cluster.agent_required || online) && links_fresh;
            // A node as it was at the last pass, whose every address's tally holds, is taken
            // as that pass made it.
            let as_it_was =
                tallied.node_kept(node.id).is_some_and(|k| k.holds(node, wanted, (online, serving), now))
                    && (!wanted || summary.is_some())
                    && node.addresses.iter().enumerate().all(|(ahead, a)| {
                        tallied.holds_ahead(ahead, (node.id, a.address.ip), (a.observations.edition(), now))
                    });
            if let Some(made) = as_it_was.then(|| tallied.take_kept()).flatten() {
                for a in &node.addresses {
                    let read = tallied
                        .address((node.id, a.address.ip))
                        .read((a.observations.edition(), now), &mut loss);
                    debug_assert!(read.is_some(), "a tally seen ahead to hold holds");
                    tallied.count(true);
                }
                seen += node.addresses.len();
                pending.extend_from_slice(&made.pending);
                streaks_end = earliest(streaks_end, made.streaks_end);
                statuses.push(made.status);
                facts.push(made.facts);
                if let Some(s) = &mut scratch {
                    summaries.push(summary.unwrap_or_else(|| s.finish(view.probers)));
                }
                continue;
            }
            // The first moment a result the node's metrics counted stops counting.
            let mut metrics_until: Option<Timestamp> = None;
            // The node's own: the first moment one of its addresses' states may move with the
            // same input, the earliest end of a streak, and where its pending addresses start.
            let (mut steady_until, mut node_streaks_end, pending_from) = (None, None, pending.len());
            for a in &node.addresses {
                let key = (node.id, a.address.ip);
                let into_metrics = wanted && summary.is_none() && summarised(a);
                let edition = a.observations.edition();
                let taken = tallied.address(key);
                let reused = (!into_metrics).then(|| taken.read((edition, now), &mut loss)).flatten();
                let is_reused = reused.is_some();
                let (v, by_region) = match reused {
                    Some(read) => read,
                    None => {
                        lost_here.fill((0, 0));
                        let (v, by_region) = verdicts_by_region(
                            &a.observations,
                            view.probers,
                            (settings, now),
                            (&mut lost_here, taken.regions()),
                            &mut tallies,
                        );
                        add_loss(&mut loss, &lost_here);
                        let until = tallies.holds_until(settings);
                        if let Some(s) = scratch.as_mut().filter(|_| into_metrics) {
                            tallies.counted().for_each(|t| s.add(t));
                            metrics_until = earliest(metrics_until, until);
                        }
                        taken.set((edition, now, until), v, &by_region, &lost_here);
                        (v, by_region)
                    }
                };
                tallied.count(is_reused);
                let trusted = a.address.trusted;
                // An address new since the last pass was not evaluated then.
                let (health, previous, before) = match state.addresses.entry((node.id, a.address.ip)) {
                    Entry::Occupied(e) => {
                        let before = *e.get();
                        (e.into_mut(), checked_at, Some(before))
                    }
                    Entry::Vacant(e) => (e.insert(AddressHealth::added(trusted)), None, None),
                };
                health.verify(&v, a.expected_probers, trusted);
                seen += 1;
                match health.observe(&v, previous, now, settings, view.detection.damping()) {
                    Some(Reachability::Unreachable) => events.push(Event::AddressUnreachable {
                        node: node.id,
                        ip: a.address.ip,
                        damping: health.multiplier(),
                    }),
                    Some(Reachability::Reachable) => {
                        events.push(Event::AddressReachable { node: node.id, ip: a.address.ip })
                    }
                    None => {}
                }
                node_streaks_end = earliest(node_streaks_end, health.deadline(settings));
                let steady = health.steady_until(&v, now, (settings, view.detection.damping()));
                steady_until = earliest(steady_until, steady);
                if before.as_ref() != Some(health) {
                    moved.push((node.id, a.address.ip));
                }
                let tally = v.tally();
                let unchecked = AddressHealth::unchecked(&tally, a.expected_probers);
                if !health.verified && !unchecked {
                    pending.push(a.address.ip);
                }
                let usable = health.is_reachable() && (health.verified || unchecked);
                match a.address.line {
                    // Manual mode answers a line's targets as it answers primaries: as configured.
                    Some(line) => targets.push((line, a.address.ip, usable || mode == DnsMode::Manual)),
                    None => pairs.push((a.address, usable)),
                }
                addresses.push(AddressStatus {
                    ip: a.address.ip,
                    level: a.address.level,
                    reachability: health.state,
                    verdict: tally,
                    regions: by_region,
                    in_use: false,
                    damping: health.multiplier(),
                    condition: health.condition(settings),
                    line: a.address.line,
                });
            }
            streaks_end = earliest(streaks_end, node_streaks_end);
            let normal = in_use(&pairs, false, mode);
            let backup = in_use(&pairs, true, mode);
            for s in &mut addresses {
                s.in_use = normal.ips.contains(&s.ip)
                    || targets.iter().any(|(_, ip, usable)| *ip == s.ip && *usable);
            }
            let old = olds.as_mut().and_then(|b| b.get(node.id));
            let same = old.filter(|o| {
                (o.online, o.serving, o.level, o.held_by) == (online, serving, normal.level, None)
                    && o.addresses == addresses
            });
            let status = match same {
                Some(o) => Arc::clone(o),
                None => Arc::new(NodeStatus {
                    node: node.id,
                    online,
                    serving,
                    level: normal.level,
                    held_by: None,
                    addresses: addresses.clone(),
                }),
            };
            if let Some(k) = tallied.last_kept() {
                k.set(
                    (node, wanted),
                    (now, steady_until),
                    (&status, &pending[pending_from..], node_streaks_end),
                );
            }
            statuses.push(status);
            facts.push(NodeFacts {
                id: node.id,
                group: node.group,
                enabled: node.enabled,
                online,
                serving,
                primaries: pairs
                    .iter()
                    .filter(|(a, _)| a.level == Level::Primary)
                    .map(|(a, _)| a.ip)
                    .collect(),
                in_use: normal,
                in_use_backup: backup,
                targets: std::mem::take(&mut targets),
            });
            if let Some(s) = &mut scratch {
                let summary = summary.unwrap_or_else(|| {
                    let made = s.finish(view.probers);
                    if let Some(m) = tallied.last_node().filter(|_| wanted) {
                        m.set(&summarised_here, (now, metrics_until), &made);
                    }
                    made
                });
                summaries.push(summary);
            }
        }
    }
    let probe_loss = (tallies.regions().iter().zip(loss))
        .filter(|(_, (sent, _))| *sent > 0)
        .map(|(r, (s, l))| (*r, s, l))
        .collect();
    // Forget addresses that are gone (only when some are: the common pass skips this). A node
    // whose agent has not reported since a start, and that has no configured addresses, has
    // lost none: its reported addresses keep their verification until the agent says.
    if seen != state.addresses.len() {
        let current: FastSet<(NodeId, IpAddr)> =
            view.nodes.iter().flat_map(|n| n.addresses.iter().map(move |a| (n.id, a.address.ip))).collect();
        let unknown: FastSet<NodeId> = view
            .nodes
            .iter()
            .filter(|n| n.addresses.is_empty() && n.last_heartbeat.is_none())
            .map(|n| n.id)
            .collect();
        state.addresses.retain(|k, _| {
            let kept = current.contains(k) || unknown.contains(&k.0);
            if !kept {
                moved.push(*k);
            }
            kept
        });
    }
    pending.sort_unstable();
    pending.dedup();
    tallied.end();
    Found { facts, statuses, pending, probe_loss, streaks_end, summaries, moved }
}

/// The earlier of two moments, either of which may be none.
fn earliest(a: Option<Timestamp>, b: Option<Timestamp>) -> Option<Timestamp> {
    a.into_iter().chain(b).min()
}

/// Adds one address's attempts sent and lost by region to the pass's.
fn add_loss(loss: &mut [(u64, u64)], address: &[(u64, u64)]) {
    for ((sent, lost), (s, l)) in loss.iter_mut().zip(address) {
        *sent += s;
        *lost += l;
    }
}

/// Nodes whose addresses a pass reads ahead at a time (see [`reachability`]).
const READ_AHEAD: usize = 8;

/// The next time a pass must run: the earliest end of an address's streak (`streaks_end`, of
/// the addresses in the view alone: one kept for a node not heard from since a start is not
/// stepped, so its streak's deadline would stay in the past and ask for a pass at once, again
/// and again) or of a rule's for-time.
fn deadline(
    view: &ClusterView<'_>,
    state: &ClusterState,
    streaks_end: Option<Timestamp>,
) -> Option<Timestamp> {
    let rules: FastMap<RuleId, &Rule> = view.rules.iter().map(|(id, r)| (*id, r)).collect();
    let r = state.rules.iter().filter_map(|((id, _), s)| rules.get(id).and_then(|rule| s.deadline(rule)));
    streaks_end.into_iter().chain(r).chain(latency::deadline(view, state)).min()
}
