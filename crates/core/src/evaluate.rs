//! One evaluation pass of a cluster (§5.5): reachability of every address first, then every
//! rule for every node it looks at, then the records of every line, cut into revisions — one
//! for health and configuration changes, one per rule activation or recovery.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use crate::address::{Level, SchedulingAddress};
use crate::answer::{LineAnswer, LineContext, LineSpec, NodeFacts, Scope, Source, in_use};
use crate::ids::{GroupId, LineId, NodeId, RuleId};
use crate::model::{Cluster, DnsMode};
use crate::reachability::{
    AddressHealth, Observations, ProberView, Reachability, Verdict, verdict,
};
use crate::rules::{Action, Metric, Rule, RuleState, Status, Transition};
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
    /// Reason for a change caused by configuration (`Binding saved`); health otherwise.
    pub reason: Option<&'a str>,
}

/// A cluster's published records: per line, and `all` (the union).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Records {
    /// Per line, sorted.
    pub lines: BTreeMap<LineId, Vec<IpAddr>>,
    /// The union of every line.
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
    /// DNS uses it now (on lines without a backup-IP action).
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

/// What a cluster's evaluator remembers between passes.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ClusterState {
    /// Hysteresis per (node, address).
    #[serde(with = "pairs")]
    pub addresses: HashMap<(NodeId, IpAddr), AddressHealth>,
    /// Rule state per (rule, node).
    #[serde(with = "pairs")]
    pub rules: HashMap<(RuleId, NodeId), RuleState>,
    /// What each rule's state was built under; a change ends its actions.
    #[serde(with = "pairs")]
    pub behaviours: HashMap<RuleId, crate::rules::Behaviour>,
    /// The published records (`None`: nothing published yet).
    pub published: Option<Records>,
    /// Lines held by the protection.
    pub held: BTreeMap<LineId, String>,
}

mod pairs {
    //! Maps with non-string keys as lists of pairs, for JSON.
    use std::collections::HashMap;
    use std::hash::Hash;

    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub(super) fn serialize<K: Serialize, V: Serialize, S: Serializer>(
        m: &HashMap<K, V>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.collect_seq(m.iter())
    }

    pub(super) fn deserialize<'de, K, V, D>(d: D) -> Result<HashMap<K, V>, D::Error>
    where
        K: Deserialize<'de> + Eq + Hash,
        V: Deserialize<'de>,
        D: Deserializer<'de>,
    {
        Ok(Vec::<(K, V)>::deserialize(d)?.into_iter().collect())
    }
}

/// Per node: facts without rule effects.
struct Base {
    facts: Vec<NodeFacts>,
    statuses: Vec<NodeStatus>,
}

/// Runs one pass at `now`, updating `state`.
pub fn evaluate(view: &ClusterView<'_>, state: &mut ClusterState, now: Timestamp) -> Evaluation {
    let mut out = Evaluation::default();
    let mode = view.cluster.dns_mode;
    let lines = effective_lines(view.lines);

    // 1. Reachability of every address.
    let base = reachability(view, state, now, &mut out);

    // 2. Rules whose behaviour changed, or that were disabled or deleted, end at once.
    let ended = end_changed_rules(view, state);
    let mut in_effect: HashSet<(RuleId, NodeId)> = state
        .rules
        .iter()
        .filter(|(_, s)| s.status.in_effect())
        .map(|(k, _)| *k)
        .collect();

    // 3. Every enabled rule for every node it looks at.
    let transitions = step_rules(view, &lines, state, now);

    // 4. Records, stage by stage.
    let ctx = Stage {
        view,
        lines: &lines,
        base: &base,
        mode,
    };
    let mut current = state.published.clone();
    let (records, stage_held, _) = ctx.records(&in_effect, current.as_ref());
    let first_reason = if !ended.is_empty() {
        let names: Vec<String> = ended
            .iter()
            .map(|(name, _, _)| format!("Scheduling: {name} changed, its actions ended"))
            .collect();
        Some(names.join("; "))
    } else if current.as_ref() != Some(&records)
        || (stage_held != state.held && !stage_held.is_empty())
    {
        Some(view.reason.unwrap_or("Node health changed").to_owned())
    } else {
        None
    };
    if let Some(reason) = first_reason {
        let idx = out.revisions.len();
        for (_, rule, nodes) in ended {
            out.events.push(Event::RuleEnded {
                rule,
                nodes,
                revision: idx,
            });
        }
        out.revisions.push(RevisionDraft {
            reason: with_held(reason, &stage_held),
            records: records.clone(),
            held: stage_held.clone(),
        });
        current = Some(records);
    }
    let mut last_held = stage_held;
    for (mut ev, t) in transitions {
        match t {
            Transition::Activated => in_effect.insert((ev.rule, ev.node)),
            Transition::Recovered => in_effect.remove(&(ev.rule, ev.node)),
        };
        let (records, stage_held, answers) = ctx.records(&in_effect, current.as_ref());
        if t == Transition::Activated {
            ev.no_effect = ctx.no_effect(&ev, &answers, &stage_held);
        }
        let verb = if t == Transition::Activated {
            "activated"
        } else {
            "recovered"
        };
        let mut reason = format!(
            "Scheduling: {} on {} — {} {verb}",
            ev.rule_name, ev.node_name, ev.action
        );
        if let Some(why) = &ev.no_effect {
            reason.push_str(&format!(" (no effect: {why})"));
        }
        ev.revision = out.revisions.len();
        out.revisions.push(RevisionDraft {
            reason: with_held(reason, &stage_held),
            records: records.clone(),
            held: stage_held.clone(),
        });
        out.events.push(if t == Transition::Activated {
            Event::RuleActivated(ev)
        } else {
            Event::RuleRecovered(ev)
        });
        current = Some(records);
        last_held = stage_held;
    }

    // 5. Holds that started or ended.
    for (line, reason) in &last_held {
        if state.held.get(line) != Some(reason) {
            out.events.push(Event::Held {
                line: *line,
                reason: reason.clone(),
            });
        }
    }
    for line in state.held.keys() {
        if !last_held.contains_key(line) {
            out.events.push(Event::HoldReleased { line: *line });
        }
    }
    state.held = last_held;
    state.published = current;

    // 6. Statuses and the next deadline.
    out.nodes = base.statuses;
    for (node, f) in out.nodes.iter_mut().zip(&base.facts) {
        if in_effect_backup(&in_effect, view, node.node) {
            node.level = f.in_use_backup.level;
        }
    }
    let mut rules: Vec<RuleNodeStatus> = state
        .rules
        .iter()
        .filter(|(_, s)| s.status != Status::Idle)
        .map(|(&(rule, node), s)| RuleNodeStatus {
            rule,
            node,
            status: s.status,
        })
        .collect();
    rules.sort_by_key(|r| (r.rule, r.node));
    out.rules = rules;
    out.next_deadline = deadline(view, state);
    out
}

fn in_effect_backup(
    in_effect: &HashSet<(RuleId, NodeId)>,
    view: &ClusterView<'_>,
    node: NodeId,
) -> bool {
    view.rules
        .iter()
        .any(|(id, r)| r.action == Action::BackupIp && in_effect.contains(&(*id, node)))
}

fn with_held(mut reason: String, held: &BTreeMap<LineId, String>) -> String {
    for (line, why) in held {
        reason.push_str(&format!("; line {line} held: {why}"));
    }
    reason
}

fn effective_lines(lines: &[LineSpec]) -> Vec<LineSpec> {
    if lines.is_empty() {
        vec![LineSpec {
            id: DEFAULT_LINE,
            group: None,
            backup_groups: Vec::new(),
            min_healthy: 1,
        }]
    } else {
        lines.to_vec()
    }
}

fn reachability(
    view: &ClusterView<'_>,
    state: &mut ClusterState,
    now: Timestamp,
    out: &mut Evaluation,
) -> Base {
    let settings = view.settings;
    let mode = view.cluster.dns_mode;
    let mut seen: HashSet<(NodeId, IpAddr)> = HashSet::new();
    let mut facts = Vec::with_capacity(view.nodes.len());
    let mut statuses = Vec::with_capacity(view.nodes.len());
    let mut pairs: Vec<(SchedulingAddress, bool)> = Vec::new();
    for node in view.nodes {
        pairs.clear();
        let mut addresses = Vec::with_capacity(node.addresses.len());
        for a in &node.addresses {
            let key = (node.id, a.address.ip);
            seen.insert(key);
            let v = verdict(&a.observations, view.probers, settings, now);
            let health = state.addresses.entry(key).or_default();
            match health.step(v.is_failing(), now, settings) {
                Some(Reachability::Unreachable) => out.events.push(Event::AddressUnreachable {
                    node: node.id,
                    ip: a.address.ip,
                }),
                Some(Reachability::Reachable) => out.events.push(Event::AddressReachable {
                    node: node.id,
                    ip: a.address.ip,
                }),
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
        let online = node
            .last_heartbeat
            .is_some_and(|t| t.within_secs_of(now, AGENT_ONLINE_S));
        let links_fresh = view.cluster.required_links.iter().all(|name| {
            node.links.iter().any(|l| {
                &l.name == name
                    && l.last_handshake
                        .is_some_and(|t| t.within_secs_of(now, LINK_FRESH_S))
            })
        });
        let serving = node.enabled && (!view.cluster.agent_required || online) && links_fresh;
        statuses.push(NodeStatus {
            node: node.id,
            online,
            serving,
            level: normal.level,
            addresses,
        });
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
            removed: Scope::Nowhere,
            backup_ip: Scope::Nowhere,
        });
    }
    state.addresses.retain(|k, _| seen.contains(k));
    Base { facts, statuses }
}

/// Rules whose behaviour changed, or that are disabled or gone: their states start over.
/// Returns (name, rule, nodes it was acting on) for those that were acting.
fn end_changed_rules(
    view: &ClusterView<'_>,
    state: &mut ClusterState,
) -> Vec<(String, RuleId, Vec<NodeId>)> {
    let current: HashMap<RuleId, &Rule> = view
        .rules
        .iter()
        .filter(|(_, r)| r.enabled)
        .map(|(id, r)| (*id, r))
        .collect();
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
fn rule_scope<'a>(rule: &Rule, lines: &[LineSpec], nodes: &'a [NodeView]) -> Vec<&'a NodeView> {
    let groups: Option<Vec<GroupId>> = match rule.line {
        None => None,
        Some(l) => {
            let Some(line) = lines.iter().find(|x| x.id == l) else {
                return Vec::new();
            };
            let mut g: Vec<GroupId> = line.group.into_iter().collect();
            if rule.action != Action::BackupGroups {
                g.extend(&line.backup_groups);
            }
            Some(g)
        }
    };
    nodes
        .iter()
        .filter(|n| n.enabled && groups.as_ref().is_none_or(|g| g.contains(&n.group)))
        .collect()
}

fn step_rules(
    view: &ClusterView<'_>,
    lines: &[LineSpec],
    state: &mut ClusterState,
    now: Timestamp,
) -> Vec<(RuleEvent, Transition)> {
    let mut transitions = Vec::new();
    let needs_probe = view
        .rules
        .iter()
        .any(|(_, r)| r.enabled && r.conditions.iter().any(|c| c.metric.is_probe()));
    let mut probe_cache: HashMap<NodeId, Vec<ProberValue>> = HashMap::new();
    let mut scratch = Scratch::new(view.probers.len());
    let mut keep: HashSet<(RuleId, NodeId)> = HashSet::new();
    let mut values: Vec<Option<f64>> = Vec::new();
    for (id, rule) in view.rules.iter().filter(|(_, r)| r.enabled) {
        for node in rule_scope(rule, lines, view.nodes) {
            keep.insert((*id, node.id));
            let probe = if needs_probe {
                Some(
                    probe_cache
                        .entry(node.id)
                        .or_insert_with(|| probe_values(view, node, now, &mut scratch))
                        .as_slice(),
                )
            } else {
                None
            };
            values.clear();
            values.extend(
                rule.conditions
                    .iter()
                    .map(|c| condition_value(c, node, probe, view.probers, now)),
            );
            let st = state.rules.entry((*id, node.id)).or_default();
            if let Some(t) = st.step(rule, &values, now) {
                transitions.push((
                    RuleEvent {
                        rule: *id,
                        rule_name: rule.name.clone(),
                        node: node.id,
                        node_name: node.name.clone(),
                        action: rule.action,
                        line: rule.line,
                        values: values.clone(),
                        no_effect: None,
                        revision: 0,
                    },
                    t,
                ));
            }
        }
    }
    state.rules.retain(|k, s| {
        keep.contains(k) && (s.status != Status::Idle || s.held_since.iter().any(Option::is_some))
    });
    transitions
}

/// One prober's probe metrics for one node.
#[derive(Debug, Clone, Copy)]
struct ProberValue {
    prober: u32,
    loss_pct: f64,
    latency_ms: Option<f64>,
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

/// Each counting prober's loss and latency over the node's lowest-level addresses.
fn probe_values(
    view: &ClusterView<'_>,
    node: &NodeView,
    now: Timestamp,
    s: &mut Scratch,
) -> Vec<ProberValue> {
    let Some(lowest) = node.addresses.iter().map(|a| a.address.level).min() else {
        return Vec::new();
    };
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
    let mut out = Vec::with_capacity(s.touched.len());
    for &p in &s.touched {
        let i = p as usize;
        out.push(ProberValue {
            prober: p,
            loss_pct: f64::from(s.lost[i]) * 100.0 / f64::from(s.sent[i]),
            latency_ms: (s.rtt_n[i] > 0).then(|| s.rtt_sum[i] / f64::from(s.rtt_n[i])),
        });
        s.sent[i] = 0;
        s.lost[i] = 0;
        s.rtt_sum[i] = 0.0;
        s.rtt_n[i] = 0;
    }
    s.touched.clear();
    out
}

fn condition_value(
    c: &crate::rules::Condition,
    node: &NodeView,
    probe: Option<&[ProberValue]>,
    probers: &[ProberView],
    now: Timestamp,
) -> Option<f64> {
    if c.metric.is_probe() {
        let values = probe?
            .iter()
            .filter(|v| {
                c.region.is_none_or(|r| {
                    probers
                        .get(v.prober as usize)
                        .is_some_and(|p| p.region == r)
                })
            })
            .filter_map(|v| {
                if c.metric == Metric::ProbeLoss {
                    Some(v.loss_pct)
                } else {
                    v.latency_ms
                }
            });
        c.aggregate.combine(values)
    } else {
        node.metrics
            .filter(|m| m.at.within_secs_of(now, METRICS_FRESH_S))
            .and_then(|m| m.value(c.metric))
    }
}

/// The rule-effect-dependent part of a pass.
struct Stage<'a> {
    view: &'a ClusterView<'a>,
    lines: &'a [LineSpec],
    base: &'a Base,
    mode: DnsMode,
}

impl Stage<'_> {
    /// Records with the effects of the `(rule, node)` pairs in effect.
    fn records(
        &self,
        in_effect: &HashSet<(RuleId, NodeId)>,
        previous: Option<&Records>,
    ) -> (
        Records,
        BTreeMap<LineId, String>,
        BTreeMap<LineId, LineAnswer>,
    ) {
        let mut facts = self.base.facts.clone();
        let mut backup_lines: HashSet<LineId> = HashSet::new();
        if self.mode == DnsMode::Automatic {
            let index: HashMap<NodeId, usize> =
                facts.iter().enumerate().map(|(i, f)| (f.id, i)).collect();
            let rules: HashMap<RuleId, &Rule> =
                self.view.rules.iter().map(|(id, r)| (*id, r)).collect();
            for (rule_id, node) in in_effect {
                let (Some(rule), Some(&i)) = (rules.get(rule_id), index.get(node)) else {
                    continue;
                };
                match rule.action {
                    Action::RemoveNode => facts[i].removed.add(rule.line),
                    Action::BackupIp => facts[i].backup_ip.add(rule.line),
                    Action::BackupGroups => {
                        if let Some(l) = rule.line {
                            backup_lines.insert(l);
                        }
                    }
                }
            }
        }
        let ctx = LineContext {
            nodes: &facts,
            mode: self.mode,
            mass_removal_pct: self.view.cluster.mass_removal_pct,
        };
        let mut records = Records::default();
        let mut held = BTreeMap::new();
        let mut answers = BTreeMap::new();
        for line in self.lines {
            let prev = previous
                .and_then(|p| p.lines.get(&line.id))
                .map(Vec::as_slice);
            let a = ctx.answer(line, backup_lines.contains(&line.id), prev);
            if let Source::Held { reason } = &a.source {
                held.insert(line.id, reason.clone());
            }
            records.lines.insert(line.id, a.records.clone());
            answers.insert(line.id, a);
        }
        let mut all: Vec<IpAddr> = records.lines.values().flatten().copied().collect();
        all.sort();
        all.dedup();
        records.all = all;
        (records, held, answers)
    }

    /// Why an activation changed nothing, if it did not.
    fn no_effect(
        &self,
        ev: &RuleEvent,
        answers: &BTreeMap<LineId, LineAnswer>,
        held: &BTreeMap<LineId, String>,
    ) -> Option<String> {
        if self.mode == DnsMode::Manual {
            return Some("manual DNS mode".into());
        }
        let covered = |l: &LineId| ev.line.is_none_or(|x| x == *l);
        match ev.action {
            Action::RemoveNode => held
                .keys()
                .any(covered)
                .then(|| "the mass-removal protection held it".into()),
            Action::BackupGroups => answers
                .iter()
                .any(|(l, a)| covered(l) && a.backup_groups_unavailable)
                .then(|| "no backup group with the minimum of healthy addresses".into()),
            Action::BackupIp => {
                let f = self.base.facts.iter().find(|f| f.id == ev.node)?;
                (f.in_use_backup.level == f.in_use.level)
                    .then(|| "no reachable backup address".into())
            }
        }
    }
}

fn deadline(view: &ClusterView<'_>, state: &ClusterState) -> Option<Timestamp> {
    let a = state
        .addresses
        .values()
        .filter_map(|h| h.deadline(view.settings));
    let rules: HashMap<RuleId, &Rule> = view.rules.iter().map(|(id, r)| (*id, r)).collect();
    let r = state
        .rules
        .iter()
        .filter_map(|((id, _), s)| rules.get(id).and_then(|rule| s.deadline(rule)));
    a.chain(r).min()
}
