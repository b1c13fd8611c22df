//! One evaluation pass of a cluster (§5.5): reachability of every address first, then every
//! rule for every node it looks at, then the records of every line, cut into revisions — one
//! for health and configuration changes, one per rule activation or recovery.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::hash::BuildHasherDefault;
use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use crate::address::{Level, SchedulingAddress};
use crate::answer::{Effects, GroupIndex, LineAnswer, LineContext, LineSpec, NodeFacts, Source, in_use};
use crate::hash::FastHasher;
use crate::ids::RegionId;
use crate::ids::{GroupId, LineId, NodeId, RuleId};
use crate::model::{Cluster, DnsMode};
use crate::reachability::{AddressHealth, Observations, ProberView, Reachability, Verdict, verdict};
use crate::rules::{Action, Aggregate, Metric, Rule, RuleState, Status, Transition};
use crate::settings::ProbeSettings;
use crate::time::Timestamp;

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
    /// Name.
    pub name: String,
    /// Last handshake.
    pub last_handshake: Option<Timestamp>,
}

/// One scheduling address of a node with its latest results.
#[derive(Debug, Clone, PartialEq)]
pub struct AddressView {
    /// The address.
    pub address: SchedulingAddress,
    /// Every prober's latest result on every port.
    pub observations: Observations,
}

/// A node as the evaluator sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeView {
    /// Id.
    pub id: NodeId,
    /// Name (for revision reasons).
    pub name: String,
    /// Group.
    pub group: GroupId,
    /// Enabled.
    pub enabled: bool,
    /// Last heartbeat from its agent.
    pub last_heartbeat: Option<Timestamp>,
    /// Links its agent reported.
    pub links: Vec<LinkState>,
    /// Latest host metrics.
    pub metrics: Option<NodeMetrics>,
    /// Scheduling addresses in use (configured, else reported).
    pub addresses: Vec<AddressView>,
}

/// Everything one pass reads.
#[derive(Debug, Clone, Copy)]
pub struct ClusterView<'a> {
    /// Probe settings.
    pub settings: &'a ProbeSettings,
    /// The cluster.
    pub cluster: &'a Cluster,
    /// Its lines; empty: an implicit default line over every group.
    pub lines: &'a [LineSpec],
    /// Its nodes.
    pub nodes: &'a [NodeView],
    /// The prober table that observations index.
    pub probers: &'a [ProberView],
    /// Its rules.
    pub rules: &'a [(RuleId, Rule)],
    /// Reason for a change caused by configuration (`Binding saved`): the pass then always cuts
    /// a revision. `None`: health, which cuts one only when the records change.
    pub reason: Option<&'a str>,
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
}

/// A revision to publish.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RevisionDraft {
    /// Why.
    pub reason: String,
    /// The records after it.
    pub records: Records,
    /// Lines whose previous records were kept, and why.
    pub held: BTreeMap<LineId, String>,
}

/// Something alerts, audit and logs care about.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Event {
    /// An address became unreachable.
    AddressUnreachable {
        /// Node.
        node: NodeId,
        /// Address.
        ip: IpAddr,
    },
    /// An address is reachable again.
    AddressReachable {
        /// Node.
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
        /// Rule.
        rule: RuleId,
        /// Nodes it was acting on.
        nodes: Vec<NodeId>,
        /// Revision (index into the pass's revisions).
        revision: usize,
    },
    /// A line's records are held by the protection.
    Held {
        /// Line.
        line: LineId,
        /// Why.
        reason: String,
    },
    /// A line's records are no longer held.
    HoldReleased {
        /// Line.
        line: LineId,
    },
}

/// A rule activation or recovery.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RuleEvent {
    /// Rule.
    pub rule: RuleId,
    /// Rule name.
    pub rule_name: String,
    /// Node.
    pub node: NodeId,
    /// Node name.
    pub node_name: String,
    /// Action.
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
    /// Level.
    pub level: Level,
    /// Reachability.
    pub reachability: Reachability,
    /// How the counting probers see it.
    pub verdict: Verdict,
    /// DNS uses it now: at the node's level, which a backup-IP action in effect may hold on a
    /// backup level (on the lines that action covers).
    pub in_use: bool,
}

/// A node's state after a pass.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeStatus {
    /// Node.
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
    /// Addresses.
    pub addresses: Vec<AddressStatus>,
}

/// A rule's state for one node after a pass.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RuleNodeStatus {
    /// Rule.
    pub rule: RuleId,
    /// Node.
    pub node: NodeId,
    /// Status.
    pub status: Status,
}

/// What a pass decided.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Evaluation {
    /// Revisions to publish, in order.
    pub revisions: Vec<RevisionDraft>,
    /// Events, in order.
    pub events: Vec<Event>,
    /// Every node's status.
    pub nodes: Vec<NodeStatus>,
    /// Every non-idle rule state.
    pub rules: Vec<RuleNodeStatus>,
    /// The earliest time a timer runs out with the inputs unchanged.
    pub next_deadline: Option<Timestamp>,
}

/// A hash map with the core's fast hasher (keys are ids and addresses, not attacker-chosen).
pub type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FastHasher>>;
type FastSet<K> = HashSet<K, BuildHasherDefault<FastHasher>>;

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
    /// The published records (`None`: nothing published yet).
    pub published: Option<Records>,
    /// Lines held by the protection.
    pub held: BTreeMap<LineId, String>,
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
    let mut out = Evaluation::default();
    let lines = effective_lines(view.lines);

    // 1. Reachability of every address.
    let (facts, mut statuses) = reachability(view, state, now, &mut out.events);

    // 2. Rules whose behaviour changed, or that were disabled or deleted, end at once.
    let ended = end_changed_rules(view, state);
    let mut in_effect: FastSet<(RuleId, NodeId)> =
        state.rules.iter().filter(|(_, s)| s.status.in_effect()).map(|(k, _)| *k).collect();

    // 3. Every enabled rule for every node it looks at.
    let transitions = step_rules(view, &lines, state, now);

    // 4. Records, stage by stage: one stage for health and configuration, one per rule
    // transition. Protection compares every stage with the records published before the pass
    // ("at once" means within one pass), and a line the final stage holds is held in every
    // stage, so that a pass never publishes a removal it then takes back.
    let groups = GroupIndex::new(&facts);
    let stage = Stage { view, lines: &lines, facts: &facts, groups: &groups };
    let baseline = state.published.clone();
    let mut final_effect = in_effect.clone();
    for (ev, t) in &transitions {
        apply(&mut final_effect, ev, *t);
    }
    let final_held = stage.records(&final_effect, baseline.as_ref(), &BTreeMap::new()).held;
    let first = stage.records(&in_effect, baseline.as_ref(), &final_held);
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
    } else if baseline.as_ref() != Some(&first.records)
        || (first.held != state.held && !first.held.is_empty())
    {
        Some("Node health changed".to_owned())
    } else {
        None
    };
    let mut current = baseline.clone();
    let mut last_held = first.held.clone();
    if let Some(reason) = first_reason {
        for (_, rule, nodes) in ended {
            out.events.push(Event::RuleEnded { rule, nodes, revision: out.revisions.len() });
        }
        out.revisions.push(first.draft(reason));
        current = Some(first.records);
    }
    for (mut ev, t) in transitions {
        apply(&mut in_effect, &ev, t);
        let result = stage.records(&in_effect, baseline.as_ref(), &final_held);
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
        out.revisions.push(result.draft(reason));
        out.events.push(match t {
            Transition::Activated => Event::RuleActivated(ev),
            Transition::Recovered => Event::RuleRecovered(ev),
        });
        last_held = result.held;
        current = Some(result.records);
    }

    // 5. Holds that started or ended.
    for (line, reason) in &last_held {
        if state.held.get(line) != Some(reason) {
            out.events.push(Event::Held { line: *line, reason: reason.clone() });
        }
    }
    for line in state.held.keys().filter(|l| !last_held.contains_key(l)) {
        out.events.push(Event::HoldReleased { line: *line });
    }
    state.held = last_held;
    state.published = current;

    // 6. Statuses and the next deadline.
    let effects = stage.effects(&in_effect);
    let backup_ip_rules: FastSet<RuleId> =
        view.rules.iter().filter(|(_, r)| r.action == Action::BackupIp).map(|(id, _)| *id).collect();
    for ((status, f), e) in statuses.iter_mut().zip(&facts).zip(&effects) {
        if view.cluster.dns_mode == DnsMode::Automatic && e.backup_ip != Default::default() {
            status.level = f.in_use_backup.level;
            for a in &mut status.addresses {
                a.in_use = f.in_use_backup.ips.contains(&a.ip);
            }
            status.held_by = in_effect
                .iter()
                .filter(|(r, n)| *n == status.node && backup_ip_rules.contains(r))
                .map(|(r, _)| *r)
                .min()
                .filter(|_| f.in_use_backup.level.is_some_and(|l| l != Level::Primary));
        }
    }
    out.nodes = statuses;
    out.rules = state
        .rules
        .iter()
        .filter(|(_, s)| s.status != Status::Idle)
        .map(|(&(rule, node), s)| RuleNodeStatus { rule, node, status: s.status })
        .collect();
    out.rules.sort_by_key(|r| (r.rule, r.node));
    out.next_deadline = deadline(view, state);
    out
}

fn apply(set: &mut FastSet<(RuleId, NodeId)>, ev: &RuleEvent, t: Transition) {
    match t {
        Transition::Activated => set.insert((ev.rule, ev.node)),
        Transition::Recovered => set.remove(&(ev.rule, ev.node)),
    };
}

fn effective_lines(lines: &[LineSpec]) -> Vec<LineSpec> {
    if lines.is_empty() {
        vec![LineSpec { id: DEFAULT_LINE, group: None, backup_groups: Vec::new(), min_healthy: 1 }]
    } else {
        lines.to_vec()
    }
}

/// Steps every address's hysteresis; returns each node's facts and status (without rule effects).
fn reachability(
    view: &ClusterView<'_>,
    state: &mut ClusterState,
    now: Timestamp,
    events: &mut Vec<Event>,
) -> (Vec<NodeFacts>, Vec<NodeStatus>) {
    let settings = view.settings;
    let mode = view.cluster.dns_mode;
    let mut seen = 0usize;
    let mut facts = Vec::with_capacity(view.nodes.len());
    let mut statuses = Vec::with_capacity(view.nodes.len());
    let mut pairs: Vec<(SchedulingAddress, bool)> = Vec::new();
    for node in view.nodes {
        pairs.clear();
        let mut addresses = Vec::with_capacity(node.addresses.len());
        for a in &node.addresses {
            let v = verdict(&a.observations, view.probers, settings, now);
            let health = state.addresses.entry((node.id, a.address.ip)).or_default();
            seen += 1;
            match health.observe(&v, now, settings) {
                Some(Reachability::Unreachable) => {
                    events.push(Event::AddressUnreachable { node: node.id, ip: a.address.ip })
                }
                Some(Reachability::Reachable) => {
                    events.push(Event::AddressReachable { node: node.id, ip: a.address.ip })
                }
                None => {}
            }
            pairs.push((a.address, health.is_reachable()));
            addresses.push(AddressStatus {
                ip: a.address.ip,
                level: a.address.level,
                reachability: health.state,
                verdict: v,
                in_use: false,
            });
        }
        let normal = in_use(&pairs, false, mode);
        let backup = in_use(&pairs, true, mode);
        for s in &mut addresses {
            s.in_use = normal.ips.contains(&s.ip);
        }
        let online = node.last_heartbeat.is_some_and(|t| t.within_secs_of(now, AGENT_ONLINE_S));
        let links_fresh = view.cluster.required_links.iter().all(|name| {
            node.links.iter().any(|l| {
                &l.name == name && l.last_handshake.is_some_and(|t| t.within_secs_of(now, LINK_FRESH_S))
            })
        });
        let serving = node.enabled && (!view.cluster.agent_required || online) && links_fresh;
        statuses.push(NodeStatus {
            node: node.id,
            online,
            serving,
            level: normal.level,
            held_by: None,
            addresses,
        });
        facts.push(NodeFacts {
            id: node.id,
            group: node.group,
            enabled: node.enabled,
            online,
            serving,
            primaries: pairs.iter().filter(|(a, _)| a.level == Level::Primary).map(|(a, _)| a.ip).collect(),
            in_use: normal,
            in_use_backup: backup,
        });
    }
    // Forget addresses that are gone (only when some are: the common pass skips this).
    if seen != state.addresses.len() {
        let current: FastSet<(NodeId, IpAddr)> =
            view.nodes.iter().flat_map(|n| n.addresses.iter().map(move |a| (n.id, a.address.ip))).collect();
        state.addresses.retain(|k, _| current.contains(k));
    }
    (facts, statuses)
}

/// Rules whose behaviour changed, or that are disabled or gone: their states start over.
/// Returns (name, rule, nodes it was acting on) for those that were acting.
fn end_changed_rules(view: &ClusterView<'_>, state: &mut ClusterState) -> Vec<(String, RuleId, Vec<NodeId>)> {
    let current: FastMap<RuleId, &Rule> =
        view.rules.iter().filter(|(_, r)| r.enabled).map(|(id, r)| (*id, r)).collect();
    let mut stale: Vec<RuleId> = state
        .behaviours
        .iter()
        .filter(|(id, b)| current.get(id).is_none_or(|r| r.behaviour() != **b))
        .map(|(id, _)| *id)
        .collect();
    stale.sort();
    let mut ended = Vec::new();
    for id in stale {
        let mut nodes: Vec<NodeId> = state
            .rules
            .iter()
            .filter(|((r, _), s)| *r == id && s.status.in_effect())
            .map(|((_, n), _)| *n)
            .collect();
        nodes.sort();
        state.rules.retain(|(r, _), _| *r != id);
        state.behaviours.remove(&id);
        if !nodes.is_empty() {
            let name = view
                .rules
                .iter()
                .find(|(r, _)| *r == id)
                .map_or_else(|| format!("rule {id}"), |(_, r)| r.name.clone());
            ended.push((name, id, nodes));
        }
    }
    for (id, r) in &current {
        state.behaviours.entry(*id).or_insert_with(|| r.behaviour());
    }
    ended
}

/// The nodes a rule looks at: every enabled node for all lines; for one line the enabled
/// nodes of its group, and for remove-node and backup-IP also those of its backup groups.
fn in_scope(rule: &Rule, lines: &[LineSpec]) -> Option<Vec<GroupId>> {
    let l = rule.line?;
    let Some(line) = lines.iter().find(|x| x.id == l) else { return Some(Vec::new()) };
    let mut g: Vec<GroupId> = line.group.into_iter().collect();
    if rule.action != Action::BackupGroups {
        g.extend(&line.backup_groups);
    }
    Some(g)
}

/// Calls `f` for every enabled rule × every enabled node it looks at, with each condition's
/// current value (`None`: no data).
fn for_each_rule_node(
    view: &ClusterView<'_>,
    lines: &[LineSpec],
    now: Timestamp,
    mut f: impl FnMut(RuleId, &Rule, &NodeView, &[Option<f64>]),
) {
    let mut summaries: Vec<Option<ProbeSummary>> = vec![None; view.nodes.len()];
    let mut scratch = Scratch::new(view.probers.len());
    let mut values: Vec<Option<f64>> = Vec::new();
    for (id, rule) in view.rules.iter().filter(|(_, r)| r.enabled) {
        let groups = in_scope(rule, lines);
        for (i, node) in view.nodes.iter().enumerate() {
            if !node.enabled || groups.as_ref().is_some_and(|g| !g.contains(&node.group)) {
                continue;
            }
            values.clear();
            for c in &rule.conditions {
                let v = if c.metric.is_probe() {
                    let s = summaries[i].get_or_insert_with(|| probe_summary(view, node, now, &mut scratch));
                    s.value(c.metric, c.aggregate, c.region)
                } else {
                    node.metrics
                        .filter(|m| m.at.within_secs_of(now, METRICS_FRESH_S))
                        .and_then(|m| m.value(c.metric))
                };
                values.push(v);
            }
            f(*id, rule, node, &values);
        }
    }
}

/// States worth keeping: not idle, or a comparison holding (its for-time is running).
fn worth_keeping(s: &RuleState) -> bool {
    s.status != Status::Idle || s.held_since.iter().any(Option::is_some)
}

fn step_rules(
    view: &ClusterView<'_>,
    lines: &[LineSpec],
    state: &mut ClusterState,
    now: Timestamp,
) -> Vec<(RuleEvent, Transition)> {
    let mut transitions = Vec::new();
    // Keys of kept states visited this pass; a state not visited lost its node or scope.
    let mut visited: FastSet<(RuleId, NodeId)> = FastSet::default();
    for_each_rule_node(view, lines, now, |id, rule, node, values| {
        let key = (id, node.id);
        let transition = match state.rules.get_mut(&key) {
            Some(st) => {
                visited.insert(key);
                st.step(rule, values, now)
            }
            None => {
                let mut st = RuleState::default();
                let t = st.step(rule, values, now);
                if worth_keeping(&st) {
                    visited.insert(key);
                    state.rules.insert(key, st);
                }
                t
            }
        };
        if let Some(t) = transition {
            transitions.push((
                RuleEvent {
                    rule: id,
                    rule_name: rule.name.clone(),
                    node: node.id,
                    node_name: node.name.clone(),
                    action: rule.action,
                    line: rule.line,
                    values: values.to_vec(),
                    no_effect: None,
                    revision: 0,
                },
                t,
            ));
        }
    });
    state.rules.retain(|k, s| visited.contains(k) && worth_keeping(s));
    transitions
}

/// One row of the preview: a rule against a node it looks at.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
pub struct PreviewRow {
    /// Rule.
    pub rule: RuleId,
    /// Rule name.
    pub rule_name: String,
    /// Node.
    pub node: NodeId,
    /// Node name.
    pub node_name: String,
    /// Status, conditions and what the next evaluation will do.
    #[serde(flatten)]
    pub preview: crate::rules::Preview,
}

/// The preview (§5.4): every enabled rule against every node it looks at, under the current
/// values, from the states of `state`. Writes nothing. A rule whose behaviour changed since
/// its states were built is previewed from a fresh state, as the next pass will.
pub fn preview(view: &ClusterView<'_>, state: &ClusterState, now: Timestamp) -> Vec<PreviewRow> {
    let lines = effective_lines(view.lines);
    let fresh = RuleState::default();
    let mut rows = Vec::new();
    for_each_rule_node(view, &lines, now, |id, rule, node, values| {
        let current = state.behaviours.get(&id).is_some_and(|b| *b == rule.behaviour());
        let st = state.rules.get(&(id, node.id)).filter(|_| current).unwrap_or(&fresh);
        rows.push(PreviewRow {
            rule: id,
            rule_name: rule.name.clone(),
            node: node.id,
            node_name: node.name.clone(),
            preview: st.preview(rule, values, now),
        });
    });
    rows
}

/// Aggregates of one value over probers.
#[derive(Debug, Clone, Copy)]
struct Stats {
    sum: f64,
    min: f64,
    max: f64,
    n: u32,
}

impl Default for Stats {
    fn default() -> Self {
        Stats { sum: 0.0, min: f64::INFINITY, max: f64::NEG_INFINITY, n: 0 }
    }
}

impl Stats {
    fn add(&mut self, v: f64) {
        self.sum += v;
        self.min = self.min.min(v);
        self.max = self.max.max(v);
        self.n += 1;
    }

    fn get(&self, a: Aggregate) -> Option<f64> {
        (self.n > 0).then(|| match a {
            Aggregate::Avg => self.sum / f64::from(self.n),
            Aggregate::Max => self.max,
            Aggregate::Min => self.min,
        })
    }
}

/// A node's probe metrics over its counting probers, overall and per region:
/// (loss %, latency ms) statistics.
#[derive(Debug, Clone, Default)]
struct ProbeSummary {
    all: (Stats, Stats),
    regions: Vec<(RegionId, Stats, Stats)>,
}

impl ProbeSummary {
    fn value(&self, metric: Metric, aggregate: Aggregate, region: Option<RegionId>) -> Option<f64> {
        let (loss, latency) = match region {
            None => (&self.all.0, &self.all.1),
            Some(r) => {
                let (_, l, t) = self.regions.iter().find(|(x, _, _)| *x == r)?;
                (l, t)
            }
        };
        if metric == Metric::ProbeLoss { loss.get(aggregate) } else { latency.get(aggregate) }
    }
}

/// Per-prober sums, indexed by prober, reused across nodes.
struct Scratch {
    sent: Vec<u32>,
    lost: Vec<u32>,
    rtt_sum: Vec<f64>,
    rtt_n: Vec<u32>,
    touched: Vec<u32>,
}

impl Scratch {
    fn new(n: usize) -> Self {
        Scratch {
            sent: vec![0; n],
            lost: vec![0; n],
            rtt_sum: vec![0.0; n],
            rtt_n: vec![0; n],
            touched: Vec::new(),
        }
    }
}

/// Each counting prober's loss (share of lost attempts) and latency (mean of its median RTTs)
/// over every port of the node's lowest-level addresses, summarised.
fn probe_summary(view: &ClusterView<'_>, node: &NodeView, now: Timestamp, s: &mut Scratch) -> ProbeSummary {
    let mut out = ProbeSummary::default();
    let Some(lowest) = node.addresses.iter().map(|a| a.address.level).min() else { return out };
    for a in node.addresses.iter().filter(|a| a.address.level == lowest) {
        for t in a.observations.per_prober(view.probers, view.settings, now) {
            let p = t.prober as usize;
            if s.sent[p] == 0 {
                s.touched.push(t.prober);
            }
            s.sent[p] += t.sent;
            s.lost[p] += t.lost;
            s.rtt_sum[p] += t.rtt_sum_ms;
            s.rtt_n[p] += t.rtt_n;
        }
    }
    for &p in &s.touched {
        let i = p as usize;
        let loss = f64::from(s.lost[i]) * 100.0 / f64::from(s.sent[i]);
        let latency = (s.rtt_n[i] > 0).then(|| s.rtt_sum[i] / f64::from(s.rtt_n[i]));
        let region = view.probers[i].region;
        let slot = match out.regions.iter().position(|(r, _, _)| *r == region) {
            Some(k) => k,
            None => {
                out.regions.push((region, Stats::default(), Stats::default()));
                out.regions.len() - 1
            }
        };
        out.all.0.add(loss);
        out.regions[slot].1.add(loss);
        if let Some(l) = latency {
            out.all.1.add(l);
            out.regions[slot].2.add(l);
        }
        s.sent[i] = 0;
        s.lost[i] = 0;
        s.rtt_sum[i] = 0.0;
        s.rtt_n[i] = 0;
    }
    s.touched.clear();
    out
}

/// The records of one stage, and what the answers said.
struct StageResult {
    records: Records,
    held: BTreeMap<LineId, String>,
    answers: BTreeMap<LineId, LineAnswer>,
}

impl StageResult {
    fn draft(&self, mut reason: String) -> RevisionDraft {
        for (line, why) in &self.held {
            reason.push_str(&format!("; line {line} held: {why}"));
        }
        RevisionDraft { reason, records: self.records.clone(), held: self.held.clone() }
    }
}

/// The rule-effect-dependent part of a pass.
struct Stage<'a> {
    view: &'a ClusterView<'a>,
    lines: &'a [LineSpec],
    facts: &'a [NodeFacts],
    groups: &'a GroupIndex,
}

impl Stage<'_> {
    /// Each node's effects (aligned with the facts) from the `(rule, node)` pairs in effect.
    fn effects(&self, in_effect: &FastSet<(RuleId, NodeId)>) -> Vec<Effects> {
        let mut effects = Vec::new();
        if in_effect.is_empty() {
            return effects;
        }
        effects.resize(self.facts.len(), Effects::default());
        let index: FastMap<NodeId, usize> = self.facts.iter().enumerate().map(|(i, f)| (f.id, i)).collect();
        let rules: FastMap<RuleId, &Rule> = self.view.rules.iter().map(|(id, r)| (*id, r)).collect();
        for (rule_id, node) in in_effect {
            let (Some(rule), Some(&i)) = (rules.get(rule_id), index.get(node)) else { continue };
            match rule.action {
                Action::RemoveNode => effects[i].removed.add(rule.line),
                Action::BackupIp => effects[i].backup_ip.add(rule.line),
                Action::BackupGroups => {}
            }
        }
        effects
    }

    /// Records with the effects of the `(rule, node)` pairs in effect; `force_held` lines keep
    /// their `previous` records with the given reason.
    fn records(
        &self,
        in_effect: &FastSet<(RuleId, NodeId)>,
        previous: Option<&Records>,
        force_held: &BTreeMap<LineId, String>,
    ) -> StageResult {
        let effects = self.effects(in_effect);
        let rules: FastMap<RuleId, &Rule> = self.view.rules.iter().map(|(id, r)| (*id, r)).collect();
        let backup_lines: FastSet<LineId> = in_effect
            .iter()
            .filter_map(|(r, _)| rules.get(r))
            .filter(|r| r.action == Action::BackupGroups)
            .filter_map(|r| r.line)
            .collect();
        let ctx = LineContext {
            nodes: self.facts,
            groups: self.groups,
            effects: &effects,
            mode: self.view.cluster.dns_mode,
            mass_removal_pct: self.view.cluster.mass_removal_pct,
        };
        let mut out =
            StageResult { records: Records::default(), held: BTreeMap::new(), answers: BTreeMap::new() };
        for line in self.lines {
            let prev = previous.and_then(|p| p.lines.get(&line.id)).map(Vec::as_slice);
            let mut a = ctx.answer(line, backup_lines.contains(&line.id), prev);
            if let (Some(reason), Some(prev)) = (force_held.get(&line.id), prev) {
                a.records = prev.to_vec();
                a.source = Source::Held { reason: reason.clone() };
            }
            if let Source::Held { reason } = &a.source {
                out.held.insert(line.id, reason.clone());
            }
            out.records.lines.insert(line.id, a.records.clone());
            out.answers.insert(line.id, a);
        }
        let mut all: Vec<IpAddr> = out.records.lines.values().flatten().copied().collect();
        all.sort_unstable();
        all.dedup();
        out.records.all = all;
        out
    }

    /// Why an activation changed nothing, if it did not.
    fn no_effect(&self, ev: &RuleEvent, result: &StageResult) -> Option<String> {
        if self.view.cluster.dns_mode == DnsMode::Manual {
            return Some("manual DNS mode".into());
        }
        let covered = |l: &LineId| ev.line.is_none_or(|x| x == *l);
        match ev.action {
            Action::RemoveNode => {
                result.held.keys().any(covered).then(|| "the mass-removal protection held it".into())
            }
            Action::BackupGroups => result
                .answers
                .iter()
                .any(|(l, a)| covered(l) && a.backup_groups_unavailable)
                .then(|| "no backup group with the minimum of healthy addresses".into()),
            Action::BackupIp => {
                let f = self.facts.iter().find(|f| f.id == ev.node)?;
                // The action holds a backup level whenever one is reachable, even when the
                // node is already on it because its primary is down.
                let on_backup = f.in_use_backup.level.is_some_and(|l| l != Level::Primary);
                (!on_backup).then(|| "no reachable backup address".into())
            }
        }
    }
}

fn deadline(view: &ClusterView<'_>, state: &ClusterState) -> Option<Timestamp> {
    let a = state.addresses.values().filter_map(|h| h.deadline(view.settings));
    let rules: FastMap<RuleId, &Rule> = view.rules.iter().map(|(id, r)| (*id, r)).collect();
    let r = state.rules.iter().filter_map(|((id, _), s)| rules.get(id).and_then(|rule| s.deadline(rule)));
    a.chain(r).min()
}
