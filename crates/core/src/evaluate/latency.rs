//! Latency steering of a line (§10a): its groups — its own and its backups — ordered by the
//! RTT Vantage's probers in one region measure to them, with the hysteresis content steering
//! uses, so that a line moves its clients to a faster group only when that group has been
//! faster by a margin for a hold time, and never on noise.
//!
//! Each pass measures every group of the line: the median RTT of the region's fresh results to
//! the in-use addresses of the group's serving nodes. The order compares an exponentially
//! weighted mean of those medians (time constant three probe intervals, by the time passed, so
//! it does not depend on how often passes run); a group moves one place ahead once it has
//! beaten the group just ahead of it by the margin (20 % and 20 ms, [`steering::beats`]) for
//! three TTLs or three probe intervals, whichever is longer — resolvers ask again once per
//! TTL, and the mean needs a few rounds. Without any figure the line keeps its configured
//! order. The order only decides which group is the line's own and which are its backups:
//! health (the minimum of healthy addresses, the backups, the protection) answers as ever.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use std::net::IpAddr;

use crate::answer::{Effects, GroupIndex, LatencySpec, LineSpec, NodeFacts};
use crate::ids::{GroupId, LineId, RegionId};
use crate::model::DnsMode;
use crate::steering::{self, HOLD_TTLS};
use crate::time::{Timestamp, span};

use super::{ClusterState, ClusterView};

/// The mean's time constant, in probe intervals.
const EWMA_INTERVALS: f64 = 3.0;

/// A line's latency order and the figures it is made from: what a pass keeps and the preview
/// shows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
pub struct LineLatency {
    /// The region whose probers measure (another region starts afresh).
    pub region: RegionId,
    /// The line's groups in the order it uses them: the first answers, the rest are its
    /// backups in turn.
    pub groups: Vec<GroupLatency>,
    /// How many times the order changed.
    pub changes: u64,
}

/// One group of a line steered by latency.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
pub struct GroupLatency {
    pub group: GroupId,
    /// The median RTT of the region's fresh results to its in-use addresses at the last pass,
    /// ms (none: no such result).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured_ms: Option<f64>,
    /// How many results that median is of.
    #[serde(default)]
    pub samples: u32,
    /// The mean of the medians the order compares, ms (none: no figure, so it neither moves
    /// nor is passed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub smoothed_ms: Option<f64>,
    /// When the mean last moved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<Timestamp>,
    /// Since when it has beaten the group just ahead of it by the margin.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub challenging_since: Option<Timestamp>,
}

/// How long a challenger must lead before it moves ahead, ms: three TTLs or three probe
/// intervals, whichever is longer.
pub(super) fn hold_ms(view: &ClusterView<'_>) -> i64 {
    HOLD_TTLS * i64::from(view.cluster.ttl.max(view.settings.interval_s())) * 1000
}

/// The median RTT of `region`'s fresh results to the addresses `line` answers from `group`'s
/// nodes (before rule effects: the rules are stepped on the order this gives), and how many
/// results it is of.
fn measure(
    view: &ClusterView<'_>,
    (facts, index): (&[NodeFacts], &GroupIndex),
    (line, group, region): (LineId, GroupId, RegionId),
    now: Timestamp,
    (ips, rtts): (&mut Vec<IpAddr>, &mut Vec<f32>),
) -> Option<(f64, u32)> {
    rtts.clear();
    for &i in index.members(group) {
        let (Some(node), Some(f)) = (view.nodes.get(i), facts.get(i)) else { continue };
        ips.clear();
        f.answers_into(line, &Effects::default(), view.cluster.dns_mode, ips);
        for a in node.addresses.iter().filter(|a| ips.contains(&a.address.ip)) {
            rtts.extend(a.observations.as_slice().iter().filter_map(|o| {
                let p = view.probers.get(o.prober as usize)?;
                let counts = p.active
                    && p.region == region
                    && o.sent > o.lost
                    && view.settings.result_counts(o.reported_at, now);
                counts.then(|| o.rtt_ms()).flatten()
            }));
        }
    }
    let n = u32::try_from(rtts.len()).ok().filter(|n| *n > 0)?;
    Some((median(rtts), n))
}

/// The median of `v` (not empty), the mean of the middle two of an even count.
fn median(v: &mut [f32]) -> f64 {
    let (mid, odd) = (v.len() / 2, v.len() % 2 == 1);
    let (low, m, _) = v.select_nth_unstable_by(mid, f32::total_cmp);
    let upper = f64::from(*m);
    if odd {
        return upper;
    }
    let lower = low.iter().copied().max_by(f32::total_cmp).map_or(upper, f64::from);
    (lower + upper) / 2.0
}

/// `kept` without the groups no longer `configured`, then the configured ones it lacks, in
/// their configured order: an order that follows the operator's edits.
fn reconciled(kept: impl Iterator<Item = GroupId>, configured: &[GroupId]) -> Vec<GroupId> {
    let mut out: Vec<GroupId> = kept.filter(|g| configured.contains(g)).collect();
    let missing: Vec<GroupId> = configured.iter().filter(|g| !out.contains(g)).copied().collect();
    out.extend(missing);
    out
}

impl GroupLatency {
    /// A group without figures yet.
    fn new(group: GroupId) -> Self {
        GroupLatency {
            group,
            measured_ms: None,
            samples: 0,
            smoothed_ms: None,
            at: None,
            challenging_since: None,
        }
    }
}

impl LineLatency {
    /// A line not ordered yet, measured from `region`.
    pub fn new(region: RegionId) -> Self {
        LineLatency { region, groups: Vec::new(), changes: 0 }
    }

    /// The groups of `spec` as the line configures them, when it steers by latency.
    fn configured(line: &LineSpec) -> Option<Vec<GroupId>> {
        line.latency.as_ref()?;
        Some(line.groups().collect())
    }

    /// Takes the pass's figures (`measured`, by group, in the configured order) at `now` and
    /// moves the order by the hysteresis; when the order changed, the reason and whether
    /// another group answers first. Another region's
    /// figures and challenges are dropped, the order kept (a move waits for the new region's
    /// figures and hold); a line steered for the first time (`fresh`) starts in its configured
    /// order, which tells nothing.
    fn update(
        &mut self,
        (name, spec): (&str, &LatencySpec),
        measured: &[(GroupId, Option<(f64, u32)>)],
        (interval_s, hold_ms): (u32, i64),
        (now, fresh): (Timestamp, bool),
    ) -> Option<(String, bool)> {
        if self.region != spec.region {
            self.region = spec.region;
            for g in &mut self.groups {
                *g = GroupLatency::new(g.group);
            }
        }
        let configured: Vec<GroupId> = measured.iter().map(|(g, _)| *g).collect();
        let before = reconciled(self.groups.iter().map(|g| g.group), &configured);
        let mut kept = std::mem::take(&mut self.groups);
        self.groups = (before.iter())
            .map(|g| match kept.iter().position(|x| x.group == *g) {
                Some(i) => kept.swap_remove(i),
                None => GroupLatency::new(*g),
            })
            .collect();
        let tau_ms = EWMA_INTERVALS * f64::from(interval_s) * 1000.0;
        for g in &mut self.groups {
            match measured.iter().find(|(x, _)| *x == g.group).and_then(|(_, m)| *m) {
                Some((ms, n)) => {
                    let dt = g.at.map_or(0, |at| now.millis_since(at)).max(0) as f64;
                    g.smoothed_ms = Some(match g.smoothed_ms {
                        Some(s) => s + (ms - s) * (1.0 - (-dt / tau_ms).exp()),
                        None => ms,
                    });
                    (g.measured_ms, g.samples, g.at) = (Some(ms), n, Some(now));
                }
                None => *g = GroupLatency::new(g.group),
            }
        }
        let mut order = before.clone();
        let mut challenging: BTreeMap<GroupId, Timestamp> =
            self.groups.iter().filter_map(|g| Some((g.group, g.challenging_since?))).collect();
        if self.groups.iter().all(|g| g.smoothed_ms.is_none()) {
            order.clone_from(&configured);
            challenging.clear();
        } else {
            let ms = |k: &GroupId| self.groups.iter().find(|g| g.group == *k).and_then(|g| g.smoothed_ms);
            steering::advance(&mut order, &mut challenging, (|_: &GroupId| 0, ms), hold_ms, now);
        }
        self.groups.sort_by_key(|g| order.iter().position(|x| *x == g.group));
        for g in &mut self.groups {
            g.challenging_since = challenging.get(&g.group).copied();
        }
        if fresh || before == order {
            return None;
        }
        self.changes += 1;
        Some((self.describe(name, spec, hold_ms), before.first() != order.first()))
    }

    /// Takes `order` — the lease holder's, published with its records — as this line's order
    /// (on a replica that publishes them): the figures kept, the challenges started afresh
    /// against their new neighbours.
    pub fn adopt(&mut self, order: &[GroupId]) {
        for g in order {
            if !self.groups.iter().any(|x| x.group == *g) {
                self.groups.push(GroupLatency::new(*g));
            }
        }
        if self.groups.iter().map(|g| g.group).eq(order.iter().copied()) {
            return;
        }
        self.groups.sort_by_key(|g| order.iter().position(|x| *x == g.group).unwrap_or(usize::MAX));
        for g in &mut self.groups {
            g.challenging_since = None;
        }
    }

    /// The order in words: each group with its figure, and why it is first.
    pub fn describe(&self, line: &str, spec: &LatencySpec, hold_ms: i64) -> String {
        let name = |g: GroupId| spec.group_name(g);
        let figure = |g: &GroupLatency| match g.smoothed_ms {
            Some(ms) => format!("{} {ms:.1} ms", name(g.group)),
            None => format!("{} no RTT", name(g.group)),
        };
        let list: Vec<String> = self.groups.iter().map(figure).collect();
        let why = if self.groups.iter().all(|g| g.smoothed_ms.is_none()) {
            "no RTT from its probers, so the configured order".to_owned()
        } else {
            format!(
                "a group moves ahead once {} % and {} ms faster for {}",
                steering::MARGIN_PCT,
                steering::MARGIN_MS,
                span(hold_ms)
            )
        };
        format!("line {line} by RTT from {}: {} ({why})", spec.region_name, list.join(", "))
    }

    /// When a challenger's hold ends, if one is under way.
    fn deadline(&self, hold_ms: i64) -> Option<Timestamp> {
        self.groups.iter().filter_map(|g| g.challenging_since).min().map(|t| t.plus_millis(hold_ms))
    }
}

/// Orders the groups of every line that steers by latency (`lines`, in place) by this pass's
/// figures, keeping each line's order in `state`; the lines whose order changed, each with its
/// reason and whether another group answers first. Manual mode answers as configured, so
/// nothing is steered (the state stays for a return to automatic).
pub(super) fn steer(
    view: &ClusterView<'_>,
    lines: &mut [LineSpec],
    (facts, index): (&[NodeFacts], &GroupIndex),
    state: &mut ClusterState,
    now: Timestamp,
) -> Vec<(LineId, String, bool)> {
    state.latency.retain(|id, _| lines.iter().any(|l| l.id == *id && l.latency.is_some()));
    if view.cluster.dns_mode == DnsMode::Manual {
        return Vec::new();
    }
    let hold = hold_ms(view);
    let mut reasons = Vec::new();
    let (mut ips, mut rtts) = (Vec::new(), Vec::new());
    for line in lines.iter() {
        let (Some(configured), Some(spec)) = (LineLatency::configured(line), line.latency.as_ref()) else {
            continue;
        };
        let measured: Vec<(GroupId, Option<(f64, u32)>)> = (configured.iter())
            .map(|g| {
                (*g, measure(view, (facts, index), (line.id, *g, spec.region), now, (&mut ips, &mut rtts)))
            })
            .collect();
        let fresh = !state.latency.contains_key(&line.id);
        let kept = state.latency.entry(line.id).or_insert_with(|| LineLatency::new(spec.region));
        let timing = (view.settings.interval_s(), hold);
        if let Some((why, leader)) = kept.update((&line.name, spec), &measured, timing, (now, fresh)) {
            reasons.push((line.id, why, leader));
        }
    }
    in_order(view, lines, state);
    reasons
}

/// Gives each line that steers by latency its groups in the order `state` keeps for it (with
/// the operator's edits since: [`reconciled`]); in manual mode, as configured.
pub(super) fn in_order(view: &ClusterView<'_>, lines: &mut [LineSpec], state: &ClusterState) {
    if view.cluster.dns_mode == DnsMode::Manual {
        return;
    }
    for line in lines.iter_mut() {
        let (Some(configured), Some(kept)) = (LineLatency::configured(line), state.latency.get(&line.id))
        else {
            continue;
        };
        let mut order = reconciled(kept.groups.iter().map(|g| g.group), &configured).into_iter();
        line.group = order.next().or(line.group);
        line.backup_groups = order.collect();
    }
}

/// The earliest end of a challenger's hold among the lines of `state`.
pub(super) fn deadline(view: &ClusterView<'_>, state: &ClusterState) -> Option<Timestamp> {
    // Manual mode steps no order: a challenge left from automatic mode asks for no pass.
    if view.cluster.dns_mode == DnsMode::Manual {
        return None;
    }
    let hold = hold_ms(view);
    state.latency.values().filter_map(|l| l.deadline(hold)).min()
}
