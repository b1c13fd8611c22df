//! What a proposed configuration would make DNS answer, before it is applied: the pass a
//! change would trigger, run on copies of the clusters' states against the current
//! observations. `vantage ctl plan` shows it beside the change itself, so that an operator
//! reviewing a file sees the answers, holds and rule actions it leads to — not only the fields.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use vantage_core::Timestamp;
use vantage_core::answer::LineHold;
use vantage_core::evaluate::{Event, evaluate};
use vantage_core::ids::{ClusterId, LineId};

use super::{Control, Parts};
use crate::config::{Config, Object};
use crate::effects::Effects;

/// One line's answer now and after the change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
pub struct LineAfter {
    /// The line's name (`default`: the implicit line of a cluster without lines).
    pub line: String,
    /// What it answers now (empty: nothing published, or a new line).
    #[cfg_attr(feature = "schema", schema(value_type = Vec<String>))]
    pub now: Vec<IpAddr>,
    /// What it would answer after the change (empty: the line goes, or answers nothing).
    #[cfg_attr(feature = "schema", schema(value_type = Vec<String>))]
    pub after: Vec<IpAddr>,
    /// The line is no longer configured after the change.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub removed: bool,
    /// The all-down policy it would answer by after the change, and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held: Option<LineHold>,
}

/// A cluster the change touches, as its next pass would leave it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
pub struct ClusterAfter {
    /// The cluster's name.
    pub cluster: String,
    /// Every line, now and after.
    pub lines: Vec<LineAfter>,
    /// The reasons of the revisions the pass would cut, in order.
    pub revisions: Vec<String>,
    /// Rule actions the pass would start, end or recover, in words.
    pub rules: Vec<String>,
}

/// What every cluster's dry pass reads alike: the configuration after the change, its prober
/// table, who probes what, and when.
#[derive(Clone, Copy)]
struct Place<'a> {
    next: &'a Config,
    table: &'a Arc<crate::seen::ProberTable>,
    spread: &'a crate::spread::Spread,
    now: Timestamp,
}

impl Control {
    /// What the pass that saving `puts` and deleting `deletes` triggers would publish, per
    /// cluster it touches (every cluster when probe or detection settings change), from
    /// copies of their states: nothing here changes. A deleted cluster is listed with every
    /// line removed.
    pub fn dry_run(&self, puts: &[(i64, Object)], deletes: &[i64], now: Timestamp) -> Vec<ClusterAfter> {
        let effects = Effects::of(&self.config, puts, deletes, now);
        let next = super::changed(&self.config, puts.iter().cloned(), deletes, now);
        // Each cluster's pass with the reason `handle_change` would give it: the first one its
        // effects name (rules and settings give none: rules cut their own revisions).
        let mut touched: BTreeMap<ClusterId, Option<String>> = BTreeMap::new();
        for (c, reason) in &effects.clusters {
            let r = touched.entry(*c).or_default();
            if r.is_none() {
                r.clone_from(reason);
            }
        }
        if effects.all {
            for id in next.clusters.keys() {
                touched.entry(ClusterId(*id)).or_default();
            }
        }
        // A cluster that goes takes its answers with it.
        for id in deletes.iter().filter(|id| self.config.clusters.contains_key(id)) {
            touched.entry(ClusterId(*id)).or_default();
        }
        // The observations keep their places: the table follows the next configuration.
        let table = Arc::new(self.addresses.table().follow(&next));
        let spread = self.online_spread(now);
        let at = Place { next: &next, table: &table, spread: &spread, now };
        touched
            .into_iter()
            .filter_map(|(id, reason)| self.cluster_after(&at, id, reason.as_deref()))
            .collect()
    }

    fn cluster_after(&self, at: &Place<'_>, id: ClusterId, reason: Option<&str>) -> Option<ClusterAfter> {
        let Place { next, table, spread, now } = *at;
        let published = self.snapshots.get(&id).and_then(|s| s.published.clone());
        let line_name = |c: &Config, line: LineId| {
            c.lines.get(&line.0).map(|l| l.value.line.name.clone()).unwrap_or_else(|| "default".into())
        };
        let Some(cluster) = next.clusters.get(&id.0) else {
            let name = self.config.clusters.get(&id.0)?.value.name.clone();
            let lines = published.iter().flat_map(|p| p.records.lines.iter());
            let lines = lines
                .map(|(line, ips)| LineAfter {
                    line: line_name(&self.config, *line),
                    now: ips.clone(),
                    after: Vec::new(),
                    removed: true,
                    held: None,
                })
                .collect();
            return Some(ClusterAfter { cluster: name, lines, revisions: Vec::new(), rules: Vec::new() });
        };
        let mut state = self.slots.get(&id).map(|s| s.state.clone()).unwrap_or_default();
        let parts =
            Parts::gather(next, self.seen(), self.policy, (id, now), spread, (table.clone(), Vec::new()));
        let out = evaluate(&parts.view(next, &cluster.value, (reason, None)), &mut state, now);
        let last = out.revisions.last();
        let after = last.map(|d| &d.records).or(published.as_ref().map(|p| &p.records));
        let held = last.map(|d| &d.held).or(published.as_ref().map(|p| &p.held));
        let mut ids: BTreeSet<LineId> = after.iter().flat_map(|r| r.lines.keys().copied()).collect();
        ids.extend(published.iter().flat_map(|p| p.records.lines.keys().copied()));
        let lines = ids
            .into_iter()
            .map(|line| {
                let gone = line.0 != 0 && !next.lines.contains_key(&line.0)
                    || line.0 == 0 && next.lines_of(id).next().is_some();
                LineAfter {
                    line: line_name(if gone { &self.config } else { next }, line),
                    now: published
                        .as_ref()
                        .and_then(|p| p.records.lines.get(&line))
                        .cloned()
                        .unwrap_or_default(),
                    after: if gone {
                        Vec::new()
                    } else {
                        after.and_then(|r| r.lines.get(&line)).cloned().unwrap_or_default()
                    },
                    removed: gone,
                    held: if gone { None } else { held.and_then(|h| h.get(&line)).cloned() },
                }
            })
            .collect();
        let rules = out.events.iter().filter_map(|e| rule_words([next, &self.config], e)).collect();
        Some(ClusterAfter {
            cluster: cluster.value.name.clone(),
            lines,
            revisions: out.revisions.iter().map(|d| d.reason.clone()).collect(),
            rules,
        })
    }
}

/// A rule event in words, naming rules and nodes from the next configuration or, for those it
/// deletes, the current one; `None` for events about addresses and holds (the lines say those).
fn rule_words([next, current]: [&Config; 2], e: &Event) -> Option<String> {
    match e {
        Event::RuleActivated(r) => {
            Some(format!("{} would act on {}: {}", r.rule_name, r.node_name, r.action))
        }
        Event::RuleRecovered(r) => Some(format!("{} would end its action on {}", r.rule_name, r.node_name)),
        Event::RuleEnded { rule, nodes, .. } => {
            let rule = next.rules.get(&rule.0).or(current.rules.get(&rule.0));
            let name = rule.map_or_else(|| "a deleted rule".into(), |r| r.value.rule.name.clone());
            let nodes: Vec<String> = nodes.iter().map(|n| current.node_name(*n)).collect();
            Some(format!("{name} changed: its actions on {} would end", nodes.join(", ")))
        }
        _ => None,
    }
}
