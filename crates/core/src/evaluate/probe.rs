//! A node's probe metrics for rules (`probe_loss`, `probe_latency_ms`): per counting prober,
//! then aggregated overall and per region.

use super::*;
use crate::reachability::ProberTally;

/// Aggregates of one value over probers.
#[derive(Debug, Clone, Copy)]
pub(super) struct Stats {
    pub(super) sum: f64,
    pub(super) min: f64,
    pub(super) max: f64,
    pub(super) n: u32,
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
pub(super) struct ProbeSummary {
    pub(super) all: (Stats, Stats),
    pub(super) regions: Vec<(RegionId, Stats, Stats)>,
}

impl ProbeSummary {
    pub(super) fn value(
        &self,
        metric: Metric,
        aggregate: Aggregate,
        region: Option<RegionId>,
    ) -> Option<f64> {
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
pub(super) struct Scratch {
    sent: Vec<u32>,
    lost: Vec<u32>,
    rtt_sum: Vec<f64>,
    rtt_n: Vec<u32>,
    touched: Vec<u32>,
}

impl Scratch {
    pub(super) fn new(n: usize) -> Self {
        Scratch {
            sent: vec![0; n],
            lost: vec![0; n],
            rtt_sum: vec![0.0; n],
            rtt_n: vec![0; n],
            touched: Vec::new(),
        }
    }

    /// Adds one counting prober's tally over the ports of one of the node's addresses.
    pub(super) fn add(&mut self, t: &ProberTally) {
        let p = t.prober as usize;
        if self.sent[p] == 0 {
            self.touched.push(t.prober);
        }
        self.sent[p] += t.sent;
        self.lost[p] += t.lost;
        self.rtt_sum[p] += t.rtt_sum_ms;
        self.rtt_n[p] += t.rtt_n;
    }

    /// The summary of what was added since the last one, leaving the room empty for the next
    /// node.
    pub(super) fn finish(&mut self, probers: &[ProberView]) -> ProbeSummary {
        let mut out = ProbeSummary::default();
        for &p in &self.touched {
            let i = p as usize;
            let loss = f64::from(self.lost[i]) * 100.0 / f64::from(self.sent[i]);
            let latency = (self.rtt_n[i] > 0).then(|| self.rtt_sum[i] / f64::from(self.rtt_n[i]));
            let region = probers[i].region;
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
            self.sent[i] = 0;
            self.lost[i] = 0;
            self.rtt_sum[i] = 0.0;
            self.rtt_n[i] = 0;
        }
        self.touched.clear();
        out
    }
}

/// The addresses a node's probe metrics are taken over: its lowest level's.
pub(super) fn summarised(node: &NodeView) -> impl Fn(&AddressView) -> bool {
    let lowest = node.addresses.iter().map(|a| a.address.level).min();
    move |a| Some(a.address.level) == lowest
}

/// Each counting prober's loss (share of lost attempts) and latency (mean of its median RTTs)
/// over every port of the node's lowest-level addresses, summarised. A pass takes the same
/// figures in its walk of the verdicts ([`super::reachability`]); a preview, which takes no
/// verdicts, takes them here.
pub(super) fn probe_summary(
    view: &ClusterView<'_>,
    node: &NodeView,
    now: Timestamp,
    s: &mut Scratch,
) -> ProbeSummary {
    let keep = summarised(node);
    for a in node.addresses.iter().filter(|a| keep(a)) {
        a.observations.each_prober(view.probers, view.settings, now, |t| s.add(&t));
    }
    s.finish(view.probers)
}
