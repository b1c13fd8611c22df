//! A node's probe metrics for rules (`probe_loss`, `probe_latency_ms`): per counting prober,
//! then aggregated overall and per region.

use super::*;

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
    pub(super) sent: Vec<u32>,
    pub(super) lost: Vec<u32>,
    pub(super) rtt_sum: Vec<f64>,
    pub(super) rtt_n: Vec<u32>,
    pub(super) touched: Vec<u32>,
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
}

/// Each counting prober's loss (share of lost attempts) and latency (mean of its median RTTs)
/// over every port of the node's lowest-level addresses, summarised.
pub(super) fn probe_summary(
    view: &ClusterView<'_>,
    node: &NodeView,
    now: Timestamp,
    s: &mut Scratch,
) -> ProbeSummary {
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
