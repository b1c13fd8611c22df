//! Rules within a pass: which rules' actions end because they changed, which nodes each rule
//! looks at, stepping every rule for every such node, and the preview (§5.4).

use super::*;

/// Rules whose behaviour changed, or that are disabled or gone: their states start over.
/// Returns (name, rule, nodes it was acting on) for those that were acting.
pub(super) fn end_changed_rules(
    view: &ClusterView<'_>,
    state: &mut ClusterState,
) -> Vec<(String, RuleId, Vec<NodeId>)> {
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
pub(super) fn in_scope(rule: &Rule, lines: &[LineSpec]) -> Option<Vec<GroupId>> {
    let l = rule.line?;
    let Some(line) = lines.iter().find(|x| x.id == l) else { return Some(Vec::new()) };
    let mut g: Vec<GroupId> = line.group.into_iter().collect();
    if rule.action != Action::BackupGroups {
        g.extend(&line.backup_groups);
    }
    Some(g)
}

/// Calls `f` for every enabled rule × every enabled node it looks at, with each condition's
/// current value (`None`: no data). `taken`: each node's probe metrics when the caller took
/// them already (a pass, in its walk of the verdicts); empty, they are taken here as needed.
pub(super) fn for_each_rule_node(
    view: &ClusterView<'_>,
    lines: &[LineSpec],
    (taken, now): (&[ProbeSummary], Timestamp),
    mut f: impl FnMut(RuleId, &Rule, &NodeView, &[Option<f64>]),
) {
    // Room to take them in only where they were not taken.
    let lazy = taken.is_empty();
    let mut summaries: Vec<Option<ProbeSummary>> = vec![None; if lazy { view.nodes.len() } else { 0 }];
    let mut scratch = Scratch::new(if lazy { view.probers.len() } else { 0 });
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
                    let s = match taken.get(i) {
                        Some(s) => s,
                        None => {
                            summaries[i].get_or_insert_with(|| probe_summary(view, node, now, &mut scratch))
                        }
                    };
                    s.value(c.metric, c.aggregate, c.region)
                } else {
                    node.metrics.filter(|m| m.fresh(now)).and_then(|m| m.value(c.metric))
                };
                values.push(v);
            }
            f(*id, rule, node, &values);
        }
    }
}

/// Whether `rule` may look at the nodes of `group` whichever group latency puts first on its
/// line: every group of the line, a superset of [`in_scope`] under any order of `lines`.
pub(super) fn may_look_at(rule: &Rule, lines: &[LineSpec], group: GroupId) -> bool {
    rule.line.is_none_or(|l| {
        lines
            .iter()
            .find(|x| x.id == l)
            .is_some_and(|line| line.group == Some(group) || line.backup_groups.contains(&group))
    })
}

/// States worth keeping: not idle, or a comparison holding (its for-time is running).
pub(super) fn worth_keeping(s: &RuleState) -> bool {
    s.status != Status::Idle || s.held_since.iter().any(Option::is_some)
}

/// Steps every enabled rule for every node it looks at (`summaries`: the nodes' probe metrics
/// as the pass took them, see [`for_each_rule_node`]).
pub(super) fn step_rules(
    view: &ClusterView<'_>,
    lines: &[LineSpec],
    state: &mut ClusterState,
    summaries: &[ProbeSummary],
    now: Timestamp,
) -> Vec<(RuleEvent, Transition)> {
    let mut transitions = Vec::new();
    // Keys of kept states visited this pass; a state not visited lost its node or scope.
    let mut visited: FastSet<(RuleId, NodeId)> = FastSet::default();
    for_each_rule_node(view, lines, (summaries, now), |id, rule, node, values| {
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
    pub rule: RuleId,
    /// Rule name.
    pub rule_name: String,
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
    let mut lines = effective_lines(view.lines);
    latency::in_order(view, &mut lines, state);
    let fresh = RuleState::default();
    let mut rows = Vec::new();
    for_each_rule_node(view, &lines, (&[], now), |id, rule, node, values| {
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
