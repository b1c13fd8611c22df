//! Demand by region (§10a): how many requests Vantage's own traffic — door redirects,
//! steering polls and DNS address answers — saw from each region's clients, over a sliding
//! day, and the audience weights a monitor learns from it.
//!
//! A day in 24 hourly buckets: a share over the last day moves with the audience's day
//! without keeping a count per request, and an hour is as coarse as a weight needs. The
//! learned share of a region is its part of the demand of the monitor's regions, never below a
//! floor (a region nobody asked from last night still has viewers who will, and an outage there
//! must still count): regions below it are given the floor, the others share what is left in
//! their proportions.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::monitor::{Monitor, Weighting};
use crate::time::Timestamp;

/// Buckets in the window: one per hour of a day.
pub const HOURS: usize = 24;

/// Requests per region over the last day, by the hour.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Demand {
    /// The hour (since the epoch) of the newest bucket.
    hour: i64,
    /// Region code → requests per hour; hour `h` at `h % 24`, for the 24 hours up to `hour`.
    regions: BTreeMap<String, [u64; HOURS]>,
}

fn hour_of(t: Timestamp) -> i64 {
    t.millis_since(Timestamp::EPOCH).div_euclid(3_600_000)
}

fn slot(hour: i64) -> usize {
    usize::try_from(hour.rem_euclid(HOURS as i64)).unwrap_or(0)
}

impl Demand {
    /// Counts `n` requests from `region`'s clients at `now`. A count older than the newest hour
    /// by a day or more is dropped; one of an earlier hour of the day joins that hour.
    pub fn add(&mut self, region: &str, n: u64, now: Timestamp) {
        let h = hour_of(now);
        if h > self.hour {
            let gone = usize::try_from(h - self.hour).unwrap_or(HOURS).min(HOURS);
            for b in self.regions.values_mut() {
                for k in 1..=gone {
                    b[slot(self.hour + k as i64)] = 0;
                }
            }
            self.hour = h;
        }
        if h <= self.hour - HOURS as i64 {
            return;
        }
        let b = self.regions.entry(region.to_owned()).or_insert([0; HOURS]);
        b[slot(h)] = b[slot(h)].saturating_add(n);
    }

    /// Keeps the regions `keep` names (a region deleted takes its day with it). Returns whether
    /// any went.
    pub fn retain(&mut self, keep: impl Fn(&str) -> bool) -> bool {
        let before = self.regions.len();
        self.regions.retain(|r, _| keep(r));
        before != self.regions.len()
    }

    /// Requests per region over the day up to `now`.
    pub fn totals(&self, now: Timestamp) -> BTreeMap<String, u64> {
        let (to, newest) = (hour_of(now), self.hour);
        let hours: Vec<i64> =
            (to - HOURS as i64 + 1..=to).filter(|h| *h <= newest && *h > newest - HOURS as i64).collect();
        (self.regions.iter())
            .map(|(r, b)| (r.clone(), hours.iter().map(|h| b[slot(*h)]).fold(0u64, u64::saturating_add)))
            .filter(|(_, n)| *n > 0)
            .collect()
    }
}

/// A monitor's audience weights, each region's share in %, in the monitor's order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
pub struct Weights {
    /// As configured.
    pub configured: Vec<f64>,
    /// As the demand of the last day gives them, with the floor (none: no demand from any of
    /// the monitor's regions yet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub learned: Option<Vec<f64>>,
    /// What the verdict weighs by: configured, learned or their mean, by the monitor's
    /// weighting (configured while nothing is learned).
    pub effective: Vec<f64>,
}

/// `shares` (summing to 100) with every share at least `floor`: the regions below it get the
/// floor, the rest share what is left in their proportions — again until none falls below
/// (at most one round per region). A floor the regions cannot all have (`floor` × their number
/// over 100, refused when a monitor is saved) gives each an equal share.
fn floored(shares: &[f64], floor: f64) -> Vec<f64> {
    let n = shares.len();
    if floor * n as f64 >= 100.0 {
        return vec![100.0 / n as f64; n];
    }
    let mut at_floor = vec![false; n];
    loop {
        let fixed = at_floor.iter().filter(|f| **f).count() as f64;
        let free: f64 = shares.iter().zip(&at_floor).filter(|(_, f)| !**f).map(|(s, _)| s).sum();
        let scale = if free > 0.0 { (100.0 - floor * fixed) / free } else { 0.0 };
        let mut moved = false;
        for (s, f) in shares.iter().zip(at_floor.iter_mut()) {
            if !*f && s * scale < floor {
                *f = true;
                moved = true;
            }
        }
        if !moved {
            return shares.iter().zip(&at_floor).map(|(s, f)| if *f { floor } else { s * scale }).collect();
        }
    }
}

/// `m`'s weights with `totals` (requests per region code over the day).
pub fn weights(m: &Monitor, totals: &BTreeMap<String, u64>) -> Weights {
    let shares = |v: Vec<f64>| -> Vec<f64> {
        let sum: f64 = v.iter().sum();
        if sum > 0.0 {
            v.iter().map(|x| x * 100.0 / sum).collect()
        } else {
            vec![100.0 / v.len() as f64; v.len()]
        }
    };
    let configured = shares(m.regions.iter().map(|r| r.weight).collect());
    let demand: Vec<f64> =
        m.regions.iter().map(|r| totals.get(&r.region).copied().unwrap_or(0) as f64).collect();
    let learned = (demand.iter().sum::<f64>() > 0.0).then(|| floored(&shares(demand), m.learned_floor_pct));
    let effective = match (m.weighting, &learned) {
        (Weighting::Learned, Some(l)) => l.clone(),
        (Weighting::Blend, Some(l)) => configured.iter().zip(l).map(|(c, l)| (c + l) / 2.0).collect(),
        _ => configured.clone(),
    };
    Weights { configured, learned, effective }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::monitor::tests::monitor;

    const T0: Timestamp = Timestamp::from_secs(1_800_000_000);

    #[test]
    fn a_day_slides_by_the_hour() {
        let mut d = Demand::default();
        d.add("eu", 10, T0);
        d.add("us", 5, T0.plus_secs(3600));
        assert_eq!(d.totals(T0.plus_secs(3600)), [("eu".to_owned(), 10), ("us".to_owned(), 5)].into());
        // 24 hours after the first count it has left the day; the second has an hour to go.
        assert_eq!(d.totals(T0.plus_secs(24 * 3600)), [("us".to_owned(), 5)].into());
        d.add("eu", 1, T0.plus_secs(24 * 3600));
        assert_eq!(d.totals(T0.plus_secs(24 * 3600))["eu"], 1, "the old hour's bucket was emptied");
        assert!(d.totals(T0.plus_secs(60 * 3600)).is_empty(), "a quiet day and more: nothing");
        d.add("eu", 7, T0);
        assert_eq!(d.totals(T0.plus_secs(24 * 3600))["eu"], 1, "a count older than the day is dropped");
    }

    #[test]
    fn learned_shares_have_a_floor_and_fall_back_to_the_configured() {
        let mut m = monitor();
        let codes: Vec<String> = m.regions.iter().map(|r| r.region.clone()).collect();
        let none = weights(&m, &BTreeMap::new());
        assert_eq!((none.learned.as_ref(), &none.effective), (None, &none.configured), "no demand yet");
        m.weighting = Weighting::Learned;
        // All the demand from the first region: the others keep the floor.
        let totals: BTreeMap<String, u64> = [(codes[0].clone(), 1000)].into();
        let w = weights(&m, &totals);
        let learned = w.learned.clone().unwrap();
        assert!(learned[1..].iter().all(|x| (x - 5.0).abs() < 1e-9), "the floor itself: {learned:?}");
        assert!((learned[0] - 75.0).abs() < 1e-9, "what is left: {learned:?}");
        // Floored in two rounds: 0.8 % lifted to 5 takes from the rest, which brings 5.2 % under.
        let f = floored(&[50.0, 44.0, 5.2, 0.8], 5.0);
        assert!((f[2] - 5.0).abs() < 1e-9 && (f[3] - 5.0).abs() < 1e-9, "{f:?}");
        assert!((f[0] / f[1] - 50.0 / 44.0).abs() < 1e-9 && (f.iter().sum::<f64>() - 100.0).abs() < 1e-9);
        assert_eq!(w.effective, learned);
        m.weighting = Weighting::Blend;
        let b = weights(&m, &totals);
        assert!((b.effective[0] - (b.configured[0] + learned[0]) / 2.0).abs() < 1e-9);
    }

    /// A day of steady demand in one mix after a day in another: by the end of the window the
    /// learned shares are the new mix.
    #[test]
    fn learned_weights_converge_to_the_demand_mix_within_the_window() {
        let mut m = monitor();
        m.weighting = Weighting::Learned;
        m.learned_floor_pct = 0.0;
        let codes: Vec<String> = m.regions.iter().map(|r| r.region.clone()).collect();
        let (old, new) = ([10u64, 30, 60], [60u64, 30, 10]);
        // Each mix for its minutes, a minute at a time: the demand and the time after.
        let feed = |mixes: &[([u64; 3], u32)]| {
            let (mut d, mut now) = (Demand::default(), T0);
            for (mix, minutes) in mixes {
                for _ in 0..*minutes {
                    for (code, n) in codes.iter().zip(mix) {
                        d.add(code, *n, now);
                    }
                    now = now.plus_secs(60);
                }
            }
            weights(&m, &d.totals(now)).effective
        };
        let w = feed(&[(old, 24 * 60), (new, 24 * 60)]);
        for (got, want) in w.iter().zip([60.0, 30.0, 10.0]) {
            assert!((got - want).abs() < 0.5, "{w:?}");
        }
        assert!(w[3..].iter().all(|x| *x == 0.0), "regions with no demand and no floor: {w:?}");
        // Half a day into the new mix the shares are half-way.
        let half = feed(&[(old, 24 * 60), (new, 12 * 60)]);
        assert!((half[0] - 35.0).abs() < 2.5 && (half[2] - 35.0).abs() < 2.5, "{half:?}");
    }
}
