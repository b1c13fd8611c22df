//! The records of one stage of a pass: the rule effects in force, each line's answer, the
//! protection's holds, and why an activation changed nothing.

use super::*;

/// Addresses a revision's reason names one by one; more are counted.
const NAMED: usize = 16;

/// The records of one stage, and what the answers said.
pub(super) struct StageResult {
    pub(super) records: Records,
    pub(super) held: BTreeMap<LineId, LineHold>,
    /// Lines that answer a never-empty fallback's records.
    pub(super) fallback: std::collections::BTreeSet<LineId>,
    /// Each line's answer; its records moved into `records.lines` (not copied: a pass where
    /// many rules act has a stage for each, each the size of the line).
    pub(super) answers: BTreeMap<LineId, LineAnswer>,
}

impl StageResult {
    /// The answers of the lines that answer by their all-down policy, with their records.
    pub(super) fn held_answers(mut self) -> BTreeMap<LineId, LineAnswer> {
        (self.answers.into_iter())
            .filter(|(_, a)| a.source.hold().is_some())
            .map(|(line, mut a)| {
                a.records = self.records.lines.remove(&line).unwrap_or_default();
                (line, a)
            })
            .collect()
    }

    /// The revision of this stage: `reason`, then each line that answers by its all-down
    /// policy (by name), which and why. The records move into it: the pass publishes the last
    /// revision's, rather than keep a copy of every stage's.
    pub(super) fn draft(&mut self, mut reason: String, lines: &[LineSpec]) -> RevisionDraft {
        for (line, hold) in &self.held {
            reason.push_str(&format!("; {}", hold.describe(&line_name(lines, *line))));
        }
        for (line, a) in &self.answers {
            let empty = self.records.lines.get(line).is_none_or(Vec::is_empty);
            if let (true, Source::Fallback { tier }) = (empty, &a.source) {
                reason.push_str(&format!("; line {} answers no records: {tier}", line_name(lines, *line)));
            }
        }
        RevisionDraft { reason, records: std::mem::take(&mut self.records), held: self.held.clone() }
    }
}

/// A line's name among `lines`, or its id where it is not one of them.
fn line_name(lines: &[LineSpec], id: LineId) -> String {
    lines.iter().find(|l| l.id == id).map_or_else(|| id.to_string(), |l| l.name.clone())
}

/// The `(rule, node)` pairs in effect and what they do to each node, kept in step: a pass
/// where many rules act changes one pair a stage, and making every node's effects again for
/// each stage (an allocation the size of the cluster) was a quarter of a stage.
#[derive(Debug, Clone)]
pub(super) struct InEffect {
    pub(super) pairs: FastSet<(RuleId, NodeId)>,
    /// Aligned with the facts (empty until a pair with a node among them is in effect; the
    /// default for a node nothing acts on).
    pub(super) effects: Vec<Effects>,
}

impl InEffect {
    /// Whether each node's effects are those of `other` (a node past the end, or in an empty
    /// list, has none): what a stage kept in step is checked against one made afresh in
    /// debugging builds.
    pub(super) fn same_effects(&self, other: &InEffect) -> bool {
        let none = Effects::default();
        let len = self.effects.len().max(other.effects.len());
        (0..len).all(|i| self.effects.get(i).unwrap_or(&none) == other.effects.get(i).unwrap_or(&none))
    }
}

/// The rule-effect-dependent part of a pass.
pub(super) struct Stage<'a> {
    pub(super) view: &'a ClusterView<'a>,
    pub(super) lines: &'a [LineSpec],
    pub(super) facts: &'a [NodeFacts],
    pub(super) groups: &'a GroupIndex,
    /// Addresses failing by a strict majority and still reachable.
    pub(super) suspect: &'a FastSet<IpAddr>,
    /// Addresses waiting to be verified, sorted.
    pub(super) pending: &'a [IpAddr],
    /// Lines with nothing to protect in this pass: the old records leave by decision or were
    /// never the line's own (a group order latency changed, a fallback).
    unprotected: &'a FastSet<LineId>,
    /// Each node's place among the facts, and the rules by id: made once a pass, not once a
    /// stage (a pass where many rules act has a stage for each).
    index: FastMap<NodeId, usize>,
    rules: FastMap<RuleId, &'a Rule>,
}

impl<'a> Stage<'a> {
    /// The stages of a pass of `view`.
    pub(super) fn new(
        view: &'a ClusterView<'a>,
        lines: &'a [LineSpec],
        (facts, groups): (&'a [NodeFacts], &'a GroupIndex),
        (suspect, pending): (&'a FastSet<IpAddr>, &'a [IpAddr]),
        unprotected: &'a FastSet<LineId>,
    ) -> Stage<'a> {
        // Only rule effects look nodes up: a cluster without rules makes no index.
        let index = if view.rules.is_empty() {
            FastMap::default()
        } else {
            facts.iter().enumerate().map(|(i, f)| (f.id, i)).collect()
        };
        let rules = view.rules.iter().map(|(id, r)| (*id, r)).collect();
        Stage { view, lines, facts, groups, suspect, pending, unprotected, index, rules }
    }

    /// The `(rule, node)` pairs in `pairs` with each node's effects (aligned with the facts).
    pub(super) fn in_effect(&self, pairs: FastSet<(RuleId, NodeId)>) -> InEffect {
        let mut effects = Vec::new();
        for (rule, node) in &pairs {
            self.add(&mut effects, *rule, *node);
        }
        InEffect { pairs, effects }
    }

    /// `ev`'s pair comes into effect or leaves it (`t`); its node's effects follow: one more
    /// effect, or the node's made again from the pairs left.
    pub(super) fn apply(&self, e: &mut InEffect, ev: &RuleEvent, t: Transition) {
        match t {
            Transition::Activated => {
                e.pairs.insert((ev.rule, ev.node));
                self.add(&mut e.effects, ev.rule, ev.node);
            }
            Transition::Recovered => {
                e.pairs.remove(&(ev.rule, ev.node));
                let Some(&i) = self.index.get(&ev.node) else { return };
                if let Some(effects) = e.effects.get_mut(i) {
                    *effects = Effects::default();
                }
                for (rule, node) in e.pairs.iter().filter(|(_, n)| *n == ev.node) {
                    self.add(&mut e.effects, *rule, *node);
                }
            }
        }
    }

    /// Adds `rule`'s effect to `node`'s among `effects` (sized to the facts on first use).
    fn add(&self, effects: &mut Vec<Effects>, rule: RuleId, node: NodeId) {
        let (Some(rule), Some(&i)) = (self.rules.get(&rule), self.index.get(&node)) else { return };
        if effects.is_empty() {
            effects.resize(self.facts.len(), Effects::default());
        }
        match rule.action {
            Action::RemoveNode => effects[i].removed.add(rule.line),
            Action::BackupIp => effects[i].backup_ip.add(rule.line),
            Action::BackupGroups => {}
        }
    }

    /// Records with the effects of the `(rule, node)` pairs in effect, against `previous` (the
    /// records over the removal window, oldest first, the published ones last); `force_held`
    /// lines answer as given there.
    pub(super) fn records(
        &self,
        in_effect: &InEffect,
        previous: &[&Records],
        force_held: &BTreeMap<LineId, LineAnswer>,
    ) -> StageResult {
        let backup_lines: FastSet<LineId> = (in_effect.pairs.iter())
            .filter_map(|(r, _)| self.rules.get(r))
            .filter(|r| r.action == Action::BackupGroups)
            .filter_map(|r| r.line)
            .collect();
        let ctx = LineContext {
            nodes: self.facts,
            groups: self.groups,
            effects: &in_effect.effects,
            mode: self.view.cluster.dns_mode,
            mass_removal_pct: self.view.cluster.mass_removal_pct,
            pending: self.pending,
        };
        let mut out = StageResult {
            records: Records::default(),
            held: BTreeMap::new(),
            fallback: Default::default(),
            answers: BTreeMap::new(),
        };
        let mut window: Vec<&[IpAddr]> = Vec::with_capacity(previous.len());
        for line in self.lines {
            window.clear();
            // A line the published records lack is new (or back); an unprotected one has
            // nothing to protect either.
            if previous.last().is_some_and(|p| p.lines.contains_key(&line.id))
                && !self.unprotected.contains(&line.id)
            {
                window.extend(previous.iter().filter_map(|p| p.lines.get(&line.id)).map(Vec::as_slice));
            }
            let mut a = ctx.answer(line, backup_lines.contains(&line.id), &window);
            if let Some(held) = force_held.get(&line.id) {
                a.records.clone_from(&held.records);
                a.source = held.source.clone();
            }
            if let Some(hold) = a.source.hold() {
                out.held.insert(line.id, hold);
            }
            // A fallback answered with nothing to protect: the line never had records of its own
            // (one that had, and fell back, is protected as before).
            if matches!(a.source, Source::Fallback { .. }) && !a.records.is_empty() && window.is_empty() {
                out.fallback.insert(line.id);
            }
            if a.records.iter().any(|ip| self.suspect.contains(ip)) {
                out.records.ttls.insert(line.id, self.view.cluster.suspect_ttl_s());
            }
            out.records.lines.insert(line.id, std::mem::take(&mut a.records));
            out.answers.insert(line.id, a);
        }
        out.records.orders = (self.lines.iter())
            .filter(|l| l.latency.is_some())
            .map(|l| (l.id, l.groups().collect()))
            .collect();
        // Each line's records are sorted without duplicates: one line's are all of them.
        out.records.all = if out.records.lines.len() == 1 {
            out.records.lines.values().next().cloned().unwrap_or_default()
        } else {
            let mut all: Vec<IpAddr> = out.records.lines.values().flatten().copied().collect();
            all.sort_unstable();
            all.dedup();
            all
        };
        out
    }

    /// The reason of a revision that health cut: the addresses whose reachability changed in
    /// this pass (`events`) and the records that left and came, or which suspect addresses
    /// shortened which lines' TTL when that is all that changed.
    pub(super) fn health_reason(
        &self,
        before: Option<&Records>,
        after: &Records,
        events: &[Event],
    ) -> String {
        let lines_same = before.is_some_and(|b| b.lines == after.lines);
        if !lines_same || before.is_some_and(|b| b.ttls == after.ttls) {
            let what = self.changes(before, after, events);
            return if what.is_empty() {
                "Node health changed".to_owned()
            } else {
                format!("Node health changed: {}", what.join("; "))
            };
        }
        let mut failing: Vec<String> = self.suspect.iter().map(IpAddr::to_string).collect();
        failing.sort_unstable();
        if after.ttls.is_empty() {
            "Node health changed: no address failing any more, full TTL again".to_owned()
        } else {
            let ttl = self.view.cluster.suspect_ttl_s();
            format!("Node health changed: {} failing, TTL {ttl} s until it is decided", failing.join(", "))
        }
    }

    /// What moved between `before` and `after`: the addresses whose reachability changed in
    /// this pass (`events`), then each line's records that came and went, by name.
    pub(super) fn changes(&self, before: Option<&Records>, after: &Records, events: &[Event]) -> Vec<String> {
        let name = |n: &NodeId| {
            self.view
                .nodes
                .iter()
                .find(|x| x.id == *n)
                .map_or_else(|| format!("node {n}"), |x| x.name.clone())
        };
        // The addresses that moved, up to [`NAMED`] of them by name, the rest counted: a
        // reason of a large fleet stays a sentence.
        let moved: Vec<&Event> = (events.iter())
            .filter(|e| matches!(e, Event::AddressUnreachable { .. } | Event::AddressReachable { .. }))
            .collect();
        let mut what: Vec<String> = (moved.iter().take(NAMED))
            .filter_map(|e| match e {
                Event::AddressUnreachable { node, ip, .. } => {
                    Some(format!("{ip} of {} unreachable", name(node)))
                }
                Event::AddressReachable { node, ip } => {
                    Some(format!("{ip} of {} reachable again", name(node)))
                }
                _ => None,
            })
            .collect();
        if moved.len() > NAMED {
            what.push(format!("{} more addresses", moved.len() - NAMED));
        }
        // Then each line whose records changed, by name: what came and what went.
        let words = |ips: Vec<IpAddr>| {
            if ips.len() > NAMED {
                format!("{} addresses", ips.len())
            } else {
                ips.iter().map(|ip| ip.to_string()).collect::<Vec<_>>().join(" ")
            }
        };
        for line in self.lines {
            let now: &[IpAddr] = after.lines.get(&line.id).map_or(&[], Vec::as_slice);
            let was: &[IpAddr] = before.and_then(|b| b.lines.get(&line.id)).map_or(&[], Vec::as_slice);
            let (came, gone) = came_and_gone(was, now);
            let change = match (came.is_empty(), gone.is_empty()) {
                (true, true) => continue,
                (false, true) => format!("{} in", words(came)),
                (true, false) => format!("{} out", words(gone)),
                (false, false) => format!("{} in, {} out", words(came), words(gone)),
            };
            what.push(format!("line {}: {change}", line.name));
        }
        what
    }

    /// The reason of a revision cut because which lines answer by their all-down policy
    /// changed while the records did not (`before`, `after`): the lines that answer by health
    /// again (the draft adds the ones that answer by their policy).
    pub(super) fn hold_reason(
        &self,
        before: &BTreeMap<LineId, LineHold>,
        after: &BTreeMap<LineId, LineHold>,
    ) -> String {
        let back: Vec<String> = before
            .keys()
            .filter(|l| !after.contains_key(l))
            .map(|l| format!("line {} answers by health again", line_name(self.lines, *l)))
            .collect();
        if back.is_empty() {
            "Node health changed".to_owned()
        } else {
            format!("Node health changed: {}", back.join("; "))
        }
    }

    /// Why an activation changed nothing, if it did not.
    pub(super) fn no_effect(&self, ev: &RuleEvent, result: &StageResult) -> Option<String> {
        if self.view.cluster.dns_mode == DnsMode::Manual {
            return Some("manual DNS mode".into());
        }
        let covered = |l: &LineId| ev.line.is_none_or(|x| x == *l);
        match ev.action {
            Action::RemoveNode => {
                let mut held = result.held.iter().filter(|(l, _)| covered(l)).map(|(_, h)| h.policy);
                held.next().map(|p| match p {
                    AllDown::Hold => "the mass-removal protection held it".into(),
                    p => format!("the line's all-down policy {} answered instead", p.as_str()),
                })
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
