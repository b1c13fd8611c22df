//! The content-steering order of a monitor's pathways (§7), kept stable: health moves a
//! pathway at once, latency only with hysteresis.
//!
//! Every change of the order moves every player of the monitor to another CDN, so a
//! sub-millisecond TTFB difference must not reorder two healthy pathways. A pathway moves
//! ahead of the one before it on latency only once it has been faster by a margin (20 % and
//! 20 ms) for a hold time (three steering TTLs); a player that says which pathway it is on
//! stays on it while that pathway is healthy and nothing beats it by the same margin.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::monitor::{Monitor, RegionHealth};
use crate::time::Timestamp;

/// How much faster a challenger must be: both by this share of the holder's TTFB…
pub const MARGIN_PCT: f64 = 20.0;
/// …and by at least this many milliseconds.
pub const MARGIN_MS: f64 = 20.0;
/// The hold time, in steering TTLs: players reload once per TTL, so three reloads see the
/// challenger faster before it leads.
pub const HOLD_TTLS: i64 = 3;

/// What one pathway is judged on: the worst health of its regions and the fastest TTFB.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PathwayFigure {
    pub pathway: String,
    /// Preference by health: 0 healthy, 1 unknown, 2 stale, 3 down.
    pub rank: u8,
    /// The fastest TTFB of its regions' newest probes, ms.
    pub ttfb_ms: Option<f64>,
}

/// Each pathway's figure, in the monitor's order of first mention. A pathway several regions
/// share is as bad as its worst region and as fast as its fastest.
pub fn figures(m: &Monitor, health: &[RegionHealth], ttfb_ms: &[Option<f64>]) -> Vec<PathwayFigure> {
    let mut out: Vec<PathwayFigure> = Vec::new();
    for (i, r) in m.regions.iter().enumerate() {
        let rank = health.get(i).copied().unwrap_or(RegionHealth::Unknown).rank();
        let ttfb = ttfb_ms.get(i).copied().flatten();
        match out.iter_mut().find(|f| f.pathway == r.pathway()) {
            Some(f) => {
                f.rank = f.rank.max(rank);
                f.ttfb_ms = match (f.ttfb_ms, ttfb) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
            }
            None => out.push(PathwayFigure { pathway: r.pathway().to_owned(), rank, ttfb_ms: ttfb }),
        }
    }
    out
}

/// The order without history: healthy, then unknown, then degraded (stale), then down; ties
/// by TTFB (unknown last), then by name. What a monitor starts from.
pub fn pathway_priority(m: &Monitor, health: &[RegionHealth], ttfb_ms: &[Option<f64>]) -> Vec<String> {
    let mut f = figures(m, health, ttfb_ms);
    f.sort_by(|a, b| {
        a.rank
            .cmp(&b.rank)
            .then_with(|| match (a.ttfb_ms, b.ttfb_ms) {
                (Some(x), Some(y)) => x.total_cmp(&y),
                (Some(_), None) => std::cmp::Ordering::Less,
                (None, Some(_)) => std::cmp::Ordering::Greater,
                (None, None) => std::cmp::Ordering::Equal,
            })
            .then_with(|| a.pathway.cmp(&b.pathway))
    });
    f.into_iter().map(|f| f.pathway).collect()
}

/// Whether a pathway at `challenger` ms is faster than one at `holder` ms by the margin.
pub fn beats(challenger: Option<f64>, holder: Option<f64>) -> bool {
    match (challenger, holder) {
        (Some(c), Some(h)) => c <= h * (1.0 - MARGIN_PCT / 100.0) && h - c >= MARGIN_MS,
        _ => false,
    }
}

/// A monitor's published order and the challenges under way.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct SteeringOrder {
    /// Pathways, preferred first (empty before the first update).
    pub order: Vec<String>,
    /// Pathway → since when it has been faster by the margin than the pathway just ahead.
    #[serde(default)]
    pub challenging: BTreeMap<String, Timestamp>,
    /// How many times the order changed.
    #[serde(default)]
    pub changes: u64,
}

impl SteeringOrder {
    /// The order at `now` from the pathways' figures (`hold_ms`: how long a challenger must be
    /// faster). Health reorders at once; within one health, a pathway moves one place ahead
    /// once it has beaten the one before it for `hold_ms`. Returns whether the order changed.
    pub fn update(&mut self, figures: &[PathwayFigure], hold_ms: i64, now: Timestamp) -> bool {
        let rank = |p: &String| figures.iter().find(|f| &f.pathway == p).map_or(u8::MAX, |f| f.rank);
        let ttfb = |p: &String| figures.iter().find(|f| &f.pathway == p).and_then(|f| f.ttfb_ms);
        let mut next: Vec<String> =
            self.order.iter().filter(|p| figures.iter().any(|f| &f.pathway == *p)).cloned().collect();
        let mut fresh: Vec<&PathwayFigure> = figures.iter().filter(|f| !next.contains(&f.pathway)).collect();
        fresh.sort_by(|a, b| match (a.ttfb_ms, b.ttfb_ms) {
            (Some(x), Some(y)) => x.total_cmp(&y),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (None, None) => a.pathway.cmp(&b.pathway),
        });
        next.extend(fresh.into_iter().map(|f| f.pathway.clone()));
        // Health first, keeping the order within each health (a stable sort).
        next.sort_by_key(|p| rank(p));
        advance(&mut next, &mut self.challenging, (rank, ttfb), hold_ms, now);
        self.challenging.retain(|p, _| next.contains(p));
        let changed = next != self.order;
        if changed {
            self.order = next;
            self.changes += 1;
        }
        changed
    }
}

/// One step of latency hysteresis over `order` (sorted by rank already): each entry that
/// beats the one just ahead of it at the same rank ([`beats`]) is a challenger from the first
/// pass it does (`challenging`), and moves one place ahead once it has done so for `hold_ms`;
/// a challenge that lapses, or whose entry ahead changes, starts again. The one rule for a
/// monitor's pathways, a line's groups and a tenant's mirrors alike.
pub fn advance<K: Ord + Clone>(
    order: &mut [K],
    challenging: &mut BTreeMap<K, Timestamp>,
    (rank, ms): (impl Fn(&K) -> u8, impl Fn(&K) -> Option<f64>),
    hold_ms: i64,
    now: Timestamp,
) {
    for i in 1..order.len() {
        let (ahead, me) = (&order[i - 1], &order[i]);
        if rank(ahead) != rank(me) || !beats(ms(me), ms(ahead)) {
            challenging.remove(me);
            continue;
        }
        let since = *challenging.entry(me.clone()).or_insert(now);
        if now.millis_since(since) >= hold_ms {
            challenging.remove(me);
            order.swap(i - 1, i);
            // The one behind now has another ahead of it: its challenge, if any, starts again.
            if let Some(next) = order.get(i + 1) {
                challenging.remove(next);
            }
        }
    }
}

/// The order one player gets: `order`, with the player's own pathway first when it is
/// healthy and the leader does not beat it by the margin — a player is not moved for
/// nothing.
pub fn for_player(order: &[String], figures: &[PathwayFigure], current: Option<&str>) -> Vec<String> {
    let figure = |p: &str| figures.iter().find(|f| f.pathway == p);
    let mut out = order.to_vec();
    let (Some(current), Some(leader)) = (current, order.first()) else { return out };
    let (Some(mine), Some(lead)) = (figure(current), figure(leader)) else { return out };
    if mine.rank == 0
        && lead.rank == 0
        && !beats(lead.ttfb_ms, mine.ttfb_ms)
        && let Some(i) = out.iter().position(|p| p == current)
    {
        let p = out.remove(i);
        out.insert(0, p);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::monitor::tests::monitor;

    fn fig(pathway: &str, rank: u8, ttfb_ms: f64) -> PathwayFigure {
        PathwayFigure { pathway: pathway.into(), rank, ttfb_ms: Some(ttfb_ms) }
    }

    #[test]
    fn pathways_are_ordered_healthy_degraded_down_then_by_ttfb() {
        use RegionHealth::*;
        let mut m = monitor();
        m.regions[0].pathway = Some("cdn-a".into());
        m.regions[1].pathway = Some("cdn-a".into());
        let order = pathway_priority(
            &m,
            &[Healthy, Stale, Healthy, Down, Healthy, Unknown],
            &[Some(5.0), Some(1.0), Some(30.0), Some(1.0), Some(20.0), None],
        );
        // cdn-a is as bad as its stale region; sg and ph are healthy, sg faster.
        assert_eq!(order, ["ph", "sg", "br", "cdn-a", "id"]);
        assert_eq!(pathway_priority(&m, &[], &[]).len(), 5, "unknown health still lists every pathway");
    }

    #[test]
    fn noise_within_the_margin_never_reorders_for_five_minutes() {
        let mut s = SteeringOrder::default();
        let t0 = Timestamp::from_secs(1_800_000_000);
        assert!(s.update(&[fig("a", 0, 50.0), fig("b", 0, 52.0)], 90_000, t0));
        assert_eq!(s.order, ["a", "b"]);
        // TTFB noise of ±10 ms every second: the two swap places in TTFB 300 times.
        for i in 1..=300 {
            let (a, b) = if i % 2 == 0 { (60.0, 45.0) } else { (45.0, 60.0) };
            s.update(&[fig("a", 0, a), fig("b", 0, b)], 90_000, t0.plus_millis(i * 1000));
        }
        assert_eq!((&s.order[..], s.changes), (&["a".to_owned(), "b".to_owned()][..], 1));
    }

    #[test]
    fn health_moves_at_once_and_latency_only_after_the_hold() {
        let mut s = SteeringOrder::default();
        let t0 = Timestamp::from_secs(1_800_000_000);
        s.update(&[fig("a", 0, 50.0), fig("b", 0, 80.0)], 90_000, t0);
        // b becomes much faster: not at once, after the hold.
        let faster = [fig("a", 0, 100.0), fig("b", 0, 20.0)];
        assert!(!s.update(&faster, 90_000, t0.plus_millis(1_000)));
        assert!(!s.update(&faster, 90_000, t0.plus_millis(90_999)));
        assert!(s.update(&faster, 90_000, t0.plus_millis(91_000)));
        assert_eq!(s.order, ["b", "a"]);
        // A challenge that lapses starts again.
        let back = [fig("a", 0, 10.0), fig("b", 0, 100.0)];
        s.update(&back, 90_000, t0.plus_millis(100_000));
        s.update(&[fig("a", 0, 100.0), fig("b", 0, 100.0)], 90_000, t0.plus_millis(150_000));
        assert!(!s.update(&back, 90_000, t0.plus_millis(191_000)), "the challenge lapsed at 150 s");
        // b goes down: last at once, whatever its speed.
        assert!(s.update(&[fig("a", 0, 100.0), fig("b", 3, 1.0)], 90_000, t0.plus_millis(192_000)));
        assert_eq!((&s.order[..], s.changes), (&["a".to_owned(), "b".to_owned()][..], 3));
        // Back healthy, it stays behind until it beats a for the hold.
        assert!(!s.update(&[fig("a", 0, 100.0), fig("b", 0, 95.0)], 90_000, t0.plus_millis(500_000)));
    }

    #[test]
    fn a_challenge_is_against_the_one_ahead_and_starts_again_when_that_changes() {
        let t0 = Timestamp::from_secs(1_800_000_000);
        let mut s = SteeringOrder { order: vec!["a".into(), "b".into(), "c".into()], ..Default::default() };
        let f = [fig("a", 0, 300.0), fig("b", 0, 200.0), fig("c", 0, 100.0)];
        // From t0 b challenges a and c challenges b. At the hold b passes a: c is then behind
        // a, and the time it spent beating b does not count against a.
        assert!(!s.update(&f, 90_000, t0));
        assert!(s.update(&f, 90_000, t0.plus_millis(90_000)));
        assert_eq!(s.order, ["b", "a", "c"]);
        assert_eq!(s.challenging.get("c"), Some(&t0.plus_millis(90_000)), "c starts again behind a");
        assert!(!s.update(&f, 90_000, t0.plus_millis(179_999)), "not before its own hold against a");
        assert!(s.update(&f, 90_000, t0.plus_millis(180_000)));
        assert_eq!(s.order, ["b", "c", "a"]);
    }

    #[test]
    fn a_player_stays_on_its_healthy_pathway_unless_it_is_beaten() {
        let order = vec!["a".to_owned(), "b".to_owned(), "c".to_owned()];
        let f = [fig("a", 0, 50.0), fig("b", 0, 55.0), fig("c", 2, 10.0)];
        assert_eq!(for_player(&order, &f, Some("b")), ["b", "a", "c"]);
        assert_eq!(for_player(&order, &f, Some("c")), order, "stale: moved");
        assert_eq!(for_player(&order, &f, None), order);
        assert_eq!(for_player(&order, &f, Some("nosuch")), order);
        let f = [fig("a", 0, 20.0), fig("b", 0, 100.0), fig("c", 0, 10.0)];
        assert_eq!(for_player(&order, &f, Some("b")), order, "beaten by the margin: moved");
    }
}
