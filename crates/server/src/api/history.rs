//! A node's result history as chart series: loss and RTT over 15 min, 1 h, 24 h or 14 days,
//! per scheduling address (every port, every prober), per prober region of each address, and
//! per prober region over every address, cut into at most a few hundred time buckets here so a
//! chart never gets more; with each series the latest round, which a wide bucket would blur.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::routing::get;
use vantage_core::Timestamp;
use vantage_core::ids::RegionId;
use vantage_store::{DailyPoint, HistoryPoint};

use super::{Api, Op};
use crate::app::App;
use crate::error::ApiError;
use crate::support::now;
use crate::views::{AddressSeries, History, RegionSeries, SeriesPoint};
use vantage_control::config::Config;
use vantage_control::target::TargetKey;
use vantage_core::ids::NodeId;

pub(super) fn routes(api: &mut Api) {
    api.add(
        Op::get(
            "/v1/nodes/{id}/history",
            "nodes",
            "Loss and RTT of a node over time (range=15m|1h|24h|14d), per address and per prober region",
        )
        .answers::<History>(),
        get(history),
    );
}

/// A chart's time span and bucket width.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Range {
    /// The last 15 minutes, 5 s buckets (180): one per round at the shortest interval.
    Quarter,
    /// The last hour, 20 s buckets (180).
    Hour,
    /// The last day, 5 min buckets (288).
    Day,
    /// The last 14 days, 1 h buckets (336).
    Fortnight,
}

impl Range {
    /// Every range, shortest first.
    pub(crate) const ALL: [Range; 4] = [Range::Quarter, Range::Hour, Range::Day, Range::Fortnight];

    pub(crate) fn parse(s: &str) -> Result<Range, ApiError> {
        Range::ALL
            .into_iter()
            .find(|r| r.name() == s)
            .ok_or_else(|| ApiError::invalid("range", format!("must be 15m, 1h, 24h or 14d, got {s:?}")))
    }

    /// As `?range=` names it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Range::Quarter => "15m",
            Range::Hour => "1h",
            Range::Day => "24h",
            Range::Fortnight => "14d",
        }
    }

    /// As people read it: `15 min`.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Range::Quarter => "15 min",
            Range::Hour => "1 h",
            Range::Day => "24 h",
            Range::Fortnight => "14 d",
        }
    }

    pub(super) fn bucket_ms(self) -> i64 {
        match self {
            Range::Quarter => 5_000,
            Range::Hour => 20_000,
            Range::Day => 300_000,
            Range::Fortnight => 3_600_000,
        }
    }

    fn buckets(self) -> usize {
        match self {
            Range::Quarter | Range::Hour => 180,
            Range::Day => 288,
            Range::Fortnight => 336,
        }
    }

    /// The shortest range that spans `ms` (the longest when none does): what a chart of data
    /// that began `ms` ago shows by default, so that a new fleet's fills the chart.
    pub(crate) fn covering(ms: i64) -> Range {
        Range::ALL.into_iter().find(|r| r.length_ms() >= ms).unwrap_or(Range::Fortnight)
    }

    fn length_ms(self) -> i64 {
        self.bucket_ms() * i64::try_from(self.buckets()).unwrap_or(i64::MAX)
    }

    /// `[since, until)` of whole buckets ending with the one that holds `at`.
    pub(crate) fn window(self, at: Timestamp) -> (Timestamp, Timestamp) {
        let b = self.bucket_ms();
        let until = (at.millis().div_euclid(b) + 1) * b;
        let n = i64::try_from(self.buckets()).unwrap_or(i64::MAX);
        (Timestamp::from_millis(until - n * b), Timestamp::from_millis(until))
    }
}

/// Sums of one bucket.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Acc {
    sent: f64,
    lost: f64,
    rtt_us: f64,
    rtt_n: f64,
}

impl Acc {
    fn add_point(&mut self, p: &HistoryPoint) {
        self.sent += f64::from(p.sent);
        self.lost += f64::from(p.lost);
        if let Some(r) = p.rtt_us {
            self.rtt_us += f64::from(r);
            self.rtt_n += 1.0;
        }
    }

    fn add(&mut self, o: &Acc) {
        self.sent += o.sent;
        self.lost += o.lost;
        self.rtt_us += o.rtt_us;
        self.rtt_n += o.rtt_n;
    }

    /// The sums as a point at `at`.
    fn point(&self, at: Timestamp) -> SeriesPoint {
        let rtt = (self.rtt_n > 0.0).then(|| round(self.rtt_us / self.rtt_n / 1000.0, 3));
        SeriesPoint {
            at,
            loss_pct: round(self.lost * 100.0 / self.sent, 2),
            rtt_ms: rtt,
            attempts: self.sent.round(),
        }
    }

    /// A share (`1/k`) of a day's roll-up.
    fn add_share(&mut self, d: &DailyPoint, k: f64) {
        self.sent += d.sent as f64 / k;
        self.lost += d.lost as f64 / k;
        if let Some(r) = d.rtt_avg_us {
            let n = f64::from(d.rounds) / k;
            self.rtt_us += f64::from(r) * n;
            self.rtt_n += n;
        }
    }
}

/// Bucketed series, and the latest round apart.
#[derive(Debug, Clone, PartialEq)]
struct Series {
    start: i64,
    width: i64,
    buckets: Vec<Acc>,
    /// Every (prober, target)'s newest result that still counts (§5.1's freshness).
    latest: Acc,
    /// The newest of those.
    latest_at: Option<Timestamp>,
}

impl Series {
    fn new(range: Range, since: Timestamp) -> Self {
        Series {
            start: since.millis(),
            width: range.bucket_ms(),
            buckets: vec![Acc::default(); range.buckets()],
            latest: Acc::default(),
            latest_at: None,
        }
    }

    fn index(&self, at: i64) -> Option<usize> {
        usize::try_from((at - self.start).div_euclid(self.width)).ok().filter(|i| *i < self.buckets.len())
    }

    fn add_latest(&mut self, p: &HistoryPoint) {
        self.latest.add_point(p);
        self.latest_at = self.latest_at.max(Some(p.at));
    }

    /// Adds another series of the same range, bucket by bucket.
    fn add(&mut self, o: &Series) {
        for (a, b) in self.buckets.iter_mut().zip(&o.buckets) {
            a.add(b);
        }
        self.latest.add(&o.latest);
        self.latest_at = self.latest_at.max(o.latest_at);
    }

    /// The buckets with attempts, as points.
    fn points(&self) -> Vec<SeriesPoint> {
        self.buckets
            .iter()
            .enumerate()
            .filter(|(_, a)| a.sent > 0.0)
            .map(|(i, a)| {
                a.point(Timestamp::from_millis(self.start + i64::try_from(i).unwrap_or(0) * self.width))
            })
            .collect()
    }

    /// The latest round as one point (`None`: no result counts now).
    fn latest(&self) -> Option<SeriesPoint> {
        self.latest_at.filter(|_| self.latest.sent > 0.0).map(|at| self.latest.point(at))
    }
}

/// Series per prober region (`None`: probing nodes without one).
type ByRegion = HashMap<Option<RegionId>, Series>;

fn round(v: f64, digits: i32) -> f64 {
    let f = 10f64.powi(digits);
    (v * f).round() / f
}

/// The region of the prober or probing node whose id a stored point names.
fn region_of(c: &Config, prober: i64) -> Option<RegionId> {
    c.region_of(c.caller(prober)?)
}

/// Adds one target's raw points and daily roll-ups to its address's series and that
/// address's region series. A day's roll-up is spread evenly over the buckets of that day that
/// lie before the target's first raw point (roll-ups hold only what was deleted from the raw
/// rows). Each prober's newest raw point, when it still counts at `now`, is the latest round.
fn add_target(
    c: &Config,
    raw: &[HistoryPoint],
    daily: &[DailyPoint],
    address: &mut Series,
    regions: &mut ByRegion,
    fresh: &Series,
    now: Timestamp,
) {
    for p in raw {
        if let Some(i) = address.index(p.at.millis()) {
            address.buckets[i].add_point(p);
            regions.entry(region_of(c, p.prober)).or_insert_with(|| fresh.clone()).buckets[i].add_point(p);
        }
    }
    // Raw points come oldest first: the last one of each prober is its newest.
    let mut newest: HashMap<i64, &HistoryPoint> = HashMap::new();
    for p in raw {
        newest.insert(p.prober, p);
    }
    for p in newest.values().filter(|p| c.settings.result_counts(p.at, now)) {
        address.add_latest(p);
        regions.entry(region_of(c, p.prober)).or_insert_with(|| fresh.clone()).add_latest(p);
    }
    let raw_start = raw.first().map_or(i64::MAX, |p| p.at.millis());
    for d in daily {
        let day = d.day.millis();
        let covered: Vec<usize> = (0..address.buckets.len())
            .filter(|i| {
                let at = address.start + i64::try_from(*i).unwrap_or(0) * address.width;
                at >= day && at < day + 86_400_000 && at < raw_start
            })
            .collect();
        if covered.is_empty() {
            continue;
        }
        let k = covered.len() as f64;
        let region = regions.entry(region_of(c, d.prober)).or_insert_with(|| fresh.clone());
        for i in covered {
            address.buckets[i].add_share(d, k);
            region.buckets[i].add_share(d, k);
        }
    }
}

/// The region series by region code (probing nodes without a region last).
fn region_series(c: &Config, regions: &ByRegion) -> Vec<RegionSeries> {
    let mut out: Vec<(String, RegionSeries)> = regions
        .iter()
        .map(|(r, s)| {
            let region = r.and_then(|r| c.regions.get(&r.0));
            let code = region.map(|x| x.value.code.clone());
            let sort = code.clone().unwrap_or_else(|| "\u{10FFFF}".into());
            (
                sort,
                RegionSeries {
                    region: *r,
                    code,
                    name: region.map(|x| x.value.name.clone()),
                    points: s.points(),
                    latest: s.latest(),
                },
            )
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out.into_iter().map(|(_, v)| v).collect()
}

async fn history(
    State(app): State<Arc<App>>,
    Path(id): Path<i64>,
    Query(q): Query<BTreeMap<String, String>>,
) -> Result<Json<History>, ApiError> {
    super::known_params(&q, &["range"], "range=15m|1h|24h|14d")?;
    let range = Range::parse(q.get("range").map_or("1h", String::as_str))?;
    let c = app.config();
    let node = c.nodes.get(&id).ok_or_else(|| ApiError::NotFound(format!("Node {id} not found")))?;
    let ports: Vec<u16> = c
        .clusters
        .get(&node.value.cluster.0)
        .map(|cl| cl.value.listeners.iter().map(|l| l.port).collect())
        .unwrap_or_default();
    let addresses = app.view().addresses_of(NodeId(id)).unwrap_or_default();
    let at = now();
    let (since, until) = range.window(at);
    let fresh = Series::new(range, since);
    let mut node_regions = ByRegion::new();
    let mut per_address = Vec::new();
    for a in addresses.as_slice() {
        let mut series = fresh.clone();
        let mut regions = ByRegion::new();
        for port in &ports {
            let key = TargetKey { node: NodeId(id), ip: a.ip, port: *port }.to_string();
            let raw = app.store().history(&key, since, until).await?;
            let daily = app.store().history_daily(&key, since, until).await?;
            add_target(&c, &raw, &daily, &mut series, &mut regions, &fresh, at);
        }
        for (r, s) in &regions {
            node_regions.entry(*r).or_insert_with(|| fresh.clone()).add(s);
        }
        per_address.push(AddressSeries {
            ip: a.ip,
            level: a.level,
            points: series.points(),
            latest: series.latest(),
            regions: region_series(&c, &regions),
        });
    }
    Ok(Json(History {
        node: NodeId(id),
        range: range.name().to_owned(),
        since,
        until,
        bucket_s: range.bucket_ms() / 1000,
        addresses: per_address,
        regions: region_series(&c, &node_regions),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(at: i64, prober: i64, sent: u32, lost: u32, rtt: Option<u32>) -> HistoryPoint {
        HistoryPoint {
            at: Timestamp::from_millis(at),
            prober,
            sent,
            lost,
            rtt_us: rtt,
            error: None,
            segment_age_s: None,
        }
    }

    #[test]
    fn ranges_are_whole_buckets_ending_now() {
        for r in Range::ALL {
            let at = Timestamp::from_millis(1_790_000_123_456);
            let (since, until) = r.window(at);
            assert!(since < at && at < until);
            assert_eq!(until.millis_since(since), r.bucket_ms() * i64::try_from(r.buckets()).unwrap());
            assert_eq!(since.millis() % r.bucket_ms(), 0);
            assert!(r.buckets() <= 400, "a chart gets at most a few hundred points");
            assert_eq!(Range::parse(r.name()).unwrap(), r);
        }
        assert!(Range::parse("7d").is_err());
    }

    #[test]
    fn points_sum_attempts_and_average_rtt_per_bucket() {
        let c = Config::default();
        let (since, _) = Range::Hour.window(Timestamp::from_millis(3_600_000 * 1000));
        let s0 = since.millis();
        let fresh = Series::new(Range::Hour, since);
        let mut address = fresh.clone();
        let mut regions = HashMap::new();
        let raw = [
            point(s0 + 1_000, 1, 3, 0, Some(2_000)),
            point(s0 + 5_000, 2, 3, 3, None),
            point(s0 + 25_000, 1, 3, 1, Some(4_000)),
        ];
        add_target(&c, &raw, &[], &mut address, &mut regions, &fresh, since.plus_millis(30_000));
        let p = address.points();
        assert_eq!(p.len(), 2, "{p:?}");
        assert_eq!(p[0].loss_pct, 50.0);
        assert_eq!(p[0].rtt_ms, Some(2.0));
        assert_eq!(p[0].attempts, 6.0);
        assert_eq!(p[1].loss_pct, 33.33);
        assert_eq!(p[1].at, Timestamp::from_millis(s0 + 20_000));
        // Unknown probers fall in the region `None`.
        assert_eq!(regions.len(), 1);
    }

    /// After a recovery inside a wide bucket, the bucket still averages the outage in; the
    /// latest round does not, and a prober whose newest result no longer counts is left out.
    #[test]
    fn the_latest_round_is_each_probers_newest_result_that_counts() {
        let c = Config::default(); // interval 10 s: results count for 30 s
        let (since, _) = Range::Day.window(Timestamp::from_millis(86_400_000 * 1000));
        let s0 = since.millis();
        let fresh = Series::new(Range::Day, since);
        let mut address = fresh.clone();
        let mut regions = HashMap::new();
        let raw = [
            point(s0 + 1_000, 1, 3, 3, None),
            point(s0 + 1_000, 2, 3, 3, None),
            point(s0 + 1_000, 3, 3, 3, None),
            point(s0 + 60_000, 1, 3, 0, Some(2_000)),
            point(s0 + 61_000, 2, 3, 0, Some(4_000)),
        ];
        add_target(&c, &raw, &[], &mut address, &mut regions, &fresh, Timestamp::from_millis(s0 + 70_000));
        let p = address.points();
        assert_eq!(p.len(), 1, "one 5 min bucket: {p:?}");
        assert_eq!(p[0].loss_pct, 60.0);
        let latest = address.latest().unwrap();
        assert_eq!((latest.loss_pct, latest.rtt_ms, latest.attempts), (0.0, Some(3.0), 6.0));
        assert_eq!(latest.at, Timestamp::from_millis(s0 + 61_000));
        assert_eq!(regions[&None].latest().unwrap().loss_pct, 0.0);
        // Long after, nothing counts.
        let mut later = fresh.clone();
        add_target(
            &c,
            &raw,
            &[],
            &mut later,
            &mut HashMap::new(),
            &fresh,
            Timestamp::from_millis(s0 + 200_000),
        );
        assert!(later.latest().is_none());
    }

    #[test]
    fn a_daily_roll_up_is_spread_over_its_day_before_the_raw_rows() {
        let c = Config::default();
        let at = Timestamp::from_millis(86_400_000 * 20_000 + 12 * 3_600_000);
        let (since, _) = Range::Fortnight.window(at);
        let fresh = Series::new(Range::Fortnight, since);
        let mut address = fresh.clone();
        let mut regions = HashMap::new();
        let day = since.millis().div_euclid(86_400_000) * 86_400_000 + 86_400_000;
        let daily = [DailyPoint {
            day: Timestamp::from_millis(day),
            prober: 1,
            rounds: 240,
            sent: 720,
            lost: 72,
            rtt_avg_us: Some(10_000),
            rtt_max_us: Some(20_000),
        }];
        // Raw rows start in the middle of that day.
        let raw = [point(day + 12 * 3_600_000, 1, 3, 0, Some(1_000))];
        add_target(&c, &raw, &daily, &mut address, &mut regions, &fresh, at);
        let p = address.points();
        assert_eq!(p.len(), 13, "12 hourly shares and one raw bucket");
        assert_eq!(p[0].loss_pct, 10.0);
        assert_eq!(p[0].rtt_ms, Some(10.0));
        assert_eq!(p[0].attempts, 60.0);
        assert_eq!(p[12].rtt_ms, Some(1.0));
    }
}
