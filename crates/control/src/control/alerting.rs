//! The alert policy: which decision fires or resolves which alert (typed by
//! [`Firing`]/[`AlertKey`]), with the event each change makes and the book's save.

use std::sync::Arc;

use serde_json::json;
use vantage_core::Timestamp;
use vantage_core::evaluate::Event;
use vantage_core::ids::{ClusterId, NodeId, ProberId, RuleId};
use vantage_core::rules::Rule;

use super::{AuditEntry, Control, Output};
use crate::alerts::{
    AddressDown, Alert, AlertAbout, AlertKey, AlertKind, ConditionValue, Firing, LineHeld, NodeSilent,
    ProberSilent, RuleAction,
};
use crate::config::Config;
use crate::events::EventKind;
use crate::identity::Caller;
use crate::observe::{agent_online, prober_status};
use crate::snapshot::Zone;

impl Control {
    /// Fires `firing` (a change of details only updates the open alert, silently).
    pub(super) fn fire(&mut self, firing: Firing, summary: String, now: Timestamp) {
        let key = firing.key();
        let (name, details) = (key.to_string(), firing.details());
        // Firing already with these details: nothing changes (and the book is not copied).
        if self.alerts.open_details(&name) == Some(&details) {
            return;
        }
        if let Some(a) = Arc::make_mut(&mut self.alerts).fire(name, key.kind, summary, details, now) {
            // A silence or a maintenance window holds the notification back (until it ends);
            // the alert fires anyway.
            let hold = self.config.hold_of(&a, now);
            let note = hold.map(|h| format!(" (notification held by {h})"));
            self.alert_event(&a, &key, note, now);
            match hold {
                Some(_) => Arc::make_mut(&mut self.alerts).hold(&a.key),
                None => self.outputs.push_back(Output::Alert(a)),
            }
        }
        self.alerts_dirty = true;
    }

    pub(super) fn resolve(&mut self, key: &AlertKey, now: Timestamp) {
        let name = key.to_string();
        if self.alerts.open_details(&name).is_none() {
            return;
        }
        if let Some(a) = Arc::make_mut(&mut self.alerts).resolve(&name, now) {
            // Nobody was told it fired: nobody is told it resolved.
            let held = Arc::make_mut(&mut self.alerts).release(&name);
            let note =
                held.then(|| " (never notified: a silence or a maintenance window held it)".to_owned());
            self.alert_event(&a, key, note, now);
            if !held {
                self.outputs.push_back(Output::Alert(a));
            }
            self.alerts_dirty = true;
        }
    }

    /// The alerts still firing whose notification a silence or a window held back, and nothing
    /// holds now (it ended or went): their notification goes.
    pub(super) fn release_silenced(&mut self, now: Timestamp) {
        let c = self.config.clone();
        let due: Vec<Alert> = (self.alerts.held())
            .filter_map(|key| self.alerts.open(key))
            .filter(|a| c.hold_of(a, now).is_none())
            .cloned()
            .collect();
        for a in due {
            Arc::make_mut(&mut self.alerts).release(&a.key);
            self.outputs.push_back(Output::Alert(a));
            self.alerts_dirty = true;
        }
    }

    /// The event of an alert firing or resolving, about the node or cluster its key names, with
    /// what became of its notification when a silence held it (`note`).
    fn alert_event(&mut self, a: &Alert, key: &AlertKey, note: Option<String>, now: Timestamp) {
        let place = key.place(&self.config);
        let (kind, summary) = match a.resolved_at {
            None => (EventKind::AlertFired, format!("alert firing: {}", a.summary)),
            Some(end) => (
                EventKind::AlertResolved,
                format!(
                    "alert resolved after {}: {}",
                    vantage_core::time::span(end.millis_since(a.fired_at)),
                    a.summary
                ),
            ),
        };
        let summary = summary + note.as_deref().unwrap_or_default();
        let details = json!({"alert": a.id, "kind": a.kind, "key": a.key, "fired_at": a.fired_at, "resolved_at": a.resolved_at});
        self.events.push(now, kind, place, summary, details);
    }

    pub(super) fn flush_alerts(&mut self) {
        if std::mem::take(&mut self.alerts_dirty)
            && let Ok(json) = serde_json::to_string(&*self.alerts)
        {
            self.outputs.push_back(Output::SaveAlerts(json));
        }
    }

    /// Of `kind`, resolves every open alert not in `keep` (`about` reads what it is about
    /// from its key, past the kind).
    pub(super) fn only_open(
        &mut self,
        kind: AlertKind,
        keep: &[AlertKey],
        about: fn(&str) -> Option<AlertAbout>,
        now: Timestamp,
    ) {
        let prefix = format!("{kind}/");
        let keep: std::collections::HashSet<String> = keep.iter().map(ToString::to_string).collect();
        let gone: Vec<AlertKey> = self
            .alerts
            .list()
            .0
            .into_iter()
            .filter(|a| a.kind == kind)
            .filter_map(|a| about(a.key.strip_prefix(&prefix)?))
            .map(|about| AlertKey::new(kind, about))
            .filter(|key| !keep.contains(&key.to_string()))
            .collect();
        for key in gone {
            self.resolve(&key, now);
        }
    }

    /// Fires or resolves the alert of a pass's event; returns the audit entry of a rule
    /// activation or recovery.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn alert_of(
        &mut self,
        c: &Config,
        cluster_id: ClusterId,
        cluster: &vantage_core::model::Cluster,
        zone: &Zone,
        base: u32,
        rules: &[(RuleId, Rule)],
        e: &Event,
        now: Timestamp,
    ) -> Option<AuditEntry> {
        let rule_on = |rule: RuleId, node: NodeId| {
            AlertKey::new(AlertKind::SchedulingAction, AlertAbout::RuleOn { rule, node })
        };
        let line_key = |kind, line| AlertKey::new(kind, AlertAbout::Line { cluster: cluster_id, line });
        match e {
            Event::RuleActivated(ev) | Event::RuleRecovered(ev) => {
                let activated = matches!(e, Event::RuleActivated(_));
                let values = rules
                    .iter()
                    .find(|(r, _)| *r == ev.rule)
                    .map(|(_, r)| {
                        r.conditions
                            .iter()
                            .zip(&ev.values)
                            .map(|(cond, v)| ConditionValue {
                                metric: cond.metric,
                                value: *v,
                                comparison: cond.comparison,
                                threshold: cond.threshold,
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                let action = RuleAction {
                    cluster: cluster.name.clone(),
                    rule: ev.rule_name.clone(),
                    node: ev.node_name.clone(),
                    action: ev.action,
                    line: ev.line.map(|l| zone.line_name(l)),
                    values,
                    revision: base + u32::try_from(ev.revision).unwrap_or(0) + 1,
                    no_effect: ev.no_effect.clone(),
                };
                let details = serde_json::to_value(&action).unwrap_or_default();
                let on_line = ev.line.map(|l| format!(" on line {}", zone.line_name(l))).unwrap_or_default();
                let (kind, said) = if activated {
                    let effect =
                        ev.no_effect.as_ref().map(|why| format!(" (no effect: {why})")).unwrap_or_default();
                    let act = ev.action.describe();
                    (
                        EventKind::RuleActivated,
                        format!("rule {} acts on {}: {act}{on_line}{effect}", ev.rule_name, ev.node_name),
                    )
                } else {
                    (
                        EventKind::RuleRecovered,
                        format!("rule {} no longer acts on {}{on_line}", ev.rule_name, ev.node_name),
                    )
                };
                self.events.push(now, kind, (Some(cluster_id), Some(ev.node)), said, details.clone());
                if activated {
                    let summary = format!("{} · {}", ev.rule_name, ev.node_name);
                    let firing = Firing::SchedulingAction { rule: ev.rule, node: ev.node, details: action };
                    self.fire(firing, summary, now);
                } else {
                    self.resolve(&rule_on(ev.rule, ev.node), now);
                }
                Some(AuditEntry {
                    at: now,
                    action: if activated { "scheduling.activate" } else { "scheduling.recover" }.into(),
                    object: format!("node:{}", ev.node),
                    metadata: details,
                })
            }
            Event::RuleEnded { rule, nodes, .. } => {
                let name = rules
                    .iter()
                    .find(|(r, _)| r == rule)
                    .map_or_else(|| format!("rule {rule}"), |(_, r)| format!("rule {}", r.name));
                let names: Vec<String> = nodes.iter().map(|n| c.node_name(*n)).collect();
                let summary =
                    format!("{name} was changed or removed: its action on {} ended", names.join(", "));
                let details = json!({"cluster": cluster.name, "rule": rule, "nodes": names});
                self.events.push(now, EventKind::RuleEnded, (Some(cluster_id), None), summary, details);
                for n in nodes {
                    self.resolve(&rule_on(*rule, *n), now);
                }
                None
            }
            Event::AddressUnreachable { node, ip, damping } => {
                let summary = if *damping > 1 {
                    format!(
                        "{ip} of {} is unreachable (flapping: back only after {damping}× the usual wait)",
                        c.node_name(*node)
                    )
                } else {
                    format!("{ip} of {} is unreachable", c.node_name(*node))
                };
                let details = AddressDown {
                    cluster: cluster.name.clone(),
                    node: c.node_name(*node),
                    address: ip.to_string(),
                    damping: *damping,
                };
                self.fire(Firing::AddressUnreachable { node: *node, ip: *ip, details }, summary, now);
                None
            }
            Event::AddressReachable { node, ip } => {
                let about = AlertAbout::Address { node: *node, ip: *ip };
                self.resolve(&AlertKey::new(AlertKind::AddressUnreachable, about), now);
                None
            }
            Event::Held { line, hold } => {
                let line_name = zone.line_name(*line);
                let summary = format!("records of {}: {}", cluster.name, hold.describe(&line_name));
                let details = LineHeld {
                    cluster: cluster.name.clone(),
                    line: line_name,
                    policy: hold.policy,
                    reason: hold.reason.clone(),
                };
                // One alert per line, whatever the policy: its kind says which (a change of
                // policy while all down resolves one and fires the other).
                let (cluster, line) = (cluster_id, *line);
                let (firing, other) = match AlertKind::of_hold(hold.policy) {
                    AlertKind::RevisionHeld => {
                        (Firing::RevisionHeld { cluster, line, details }, AlertKind::LineAllDown)
                    }
                    _ => (Firing::LineAllDown { cluster, line, details }, AlertKind::RevisionHeld),
                };
                self.resolve(&line_key(other, line), now);
                self.fire(firing, summary, now);
                None
            }
            Event::HoldReleased { line } => {
                for kind in [AlertKind::RevisionHeld, AlertKind::LineAllDown] {
                    self.resolve(&line_key(kind, *line), now);
                }
                None
            }
        }
    }

    /// Alerts about silence: an enabled prober that has not asked or reported within its
    /// online window, an enrolled node agent without a heartbeat within 3 × 15 s. Nothing fires
    /// during the first window after the start, when no one has had a chance to call yet.
    pub(super) fn silence(&mut self, now: Timestamp) {
        let c = self.config.clone();
        let window = c.settings.prober_online_s();
        if !now.at_least_secs_after(self.started, window) {
            return;
        }
        for (id, p) in &c.probers {
            let prober = ProberId(*id);
            let last_seen = self.obs.probers.get(&Caller::Prober(prober)).and_then(|r| r.last_seen);
            // Details are made only to fire: this runs for every prober and node each period.
            if prober_status(p.value.enabled, last_seen, &c.settings, now)
                == crate::observe::ProberStatus::Offline
            {
                let details = ProberSilent { prober: p.value.name.clone(), last_seen };
                let firing = Firing::ProberOffline { prober, details };
                self.fire(firing, format!("prober {} is offline", p.value.name), now);
            } else {
                self.resolve(&AlertKey::new(AlertKind::ProberOffline, AlertAbout::Prober(prober)), now);
            }
        }
        for (id, n) in &c.nodes {
            let node = NodeId(*id);
            let last_heartbeat = self.obs.nodes.get(&node).and_then(|r| r.last_heartbeat);
            if n.value.cert_sha256.is_some() && n.value.node.enabled && !agent_online(last_heartbeat, now) {
                let details = NodeSilent { node: n.value.node.name.clone(), last_heartbeat };
                let firing = Firing::NodeOffline { node, details };
                self.fire(firing, format!("node {} is offline (no heartbeat)", n.value.node.name), now);
            } else {
                self.resolve(&AlertKey::new(AlertKind::NodeOffline, AlertAbout::Node(node)), now);
            }
        }
    }
}
