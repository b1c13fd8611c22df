//! Monitor metrics (SPEC §7): the global verdict, each region's down flag and segment age, the
//! time to first byte of every probe, and how often the steering order changed.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use vantage_control::config::Config;
use vantage_control::monitors::Monitors;
use vantage_core::ids::MonitorId;
use vantage_core::monitor::{GlobalVerdict, RegionHealth};

/// A monitor.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct MonitorLabel {
    pub monitor: String,
}

/// One part of a monitor region's health tuple.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct TupleLabels {
    pub monitor: String,
    pub region: String,
    /// `reachable`, `manifest_valid` or `segment_fetchable`.
    pub check: String,
}

/// A region of a monitor.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct MonitorRegionLabels {
    pub monitor: String,
    pub region: String,
}

fn ttfb_histogram() -> Histogram {
    Histogram::new([0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0])
}

type FloatGauge = Gauge<f64, std::sync::atomic::AtomicU64>;

/// The monitor families.
#[derive(Debug)]
pub(crate) struct MonitorFamilies {
    verdict: Family<MonitorLabel, Gauge>,
    down: Family<MonitorRegionLabels, Gauge>,
    age: Family<MonitorRegionLabels, FloatGauge>,
    tuple: Family<TupleLabels, Gauge>,
    ttfb: Family<MonitorRegionLabels, Histogram, fn() -> Histogram>,
    order_changes: Family<MonitorLabel, Counter>,
    weight: Family<WeightLabels, FloatGauge>,
    demand: Family<DemandLabels, Counter>,
    demand_day: Family<RegionLabel, Gauge>,
}

/// One of a monitor region's weights.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct WeightLabels {
    pub monitor: String,
    pub region: String,
    /// `configured`, `learned` or `effective`.
    pub weights: &'static str,
}

/// Requests from a region's clients, by where Vantage saw them.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct DemandLabels {
    pub region: String,
    /// `door` or `steer`.
    pub source: &'static str,
}

/// A region.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct RegionLabel {
    pub region: String,
}

impl MonitorFamilies {
    pub(crate) fn new(r: &mut Registry) -> Self {
        let f = MonitorFamilies {
            verdict: Family::default(),
            down: Family::default(),
            age: Family::default(),
            tuple: Family::default(),
            ttfb: Family::new_with_constructor(ttfb_histogram),
            order_changes: Family::default(),
            weight: Family::default(),
            demand: Family::default(),
            demand_day: Family::default(),
        };
        r.register(
            "vantage_monitor_region_weight_ratio",
            "A monitor region's share of the audience: as configured, as learned from demand, and what the verdict weighs by",
            f.weight.clone(),
        );
        r.register(
            "vantage_demand_requests",
            "Requests from a region's clients that Vantage saw: door redirects, steering polls and DNS address answers (by the client subnet, else the resolver)",
            f.demand.clone(),
        );
        r.register(
            "vantage_demand_day_requests",
            "Requests from a region's clients over the last day, which learned weights are shares of",
            f.demand_day.clone(),
        );
        r.register(
            "vantage_monitor_verdict",
            "A monitor's global verdict, higher is healthier: 2 healthy, 1 degraded, 0 down, -1 not yet known",
            f.verdict.clone(),
        );
        r.register("vantage_monitor_region_down", "1 while a monitor's region is down", f.down.clone());
        r.register(
            "vantage_segment_age_seconds",
            "The worst known age of the newest media segment in a monitor region's window",
            f.age.clone(),
        );
        r.register(
            "vantage_monitor_region_ok",
            "The newest probe of a monitor region: 1 when the edge was reachable, the manifest valid, the segment fetchable (by check)",
            f.tuple.clone(),
        );
        r.register(
            "vantage_monitor_ttfb_seconds",
            "Time to the manifest's first byte of each monitor probe",
            f.ttfb.clone(),
        );
        r.register(
            "vantage_steering_order_changes",
            "Changes of a monitor's content-steering order (each moves its players to another pathway)",
            f.order_changes.clone(),
        );
        f
    }

    /// `n` requests from `region`'s clients, seen at `source` (`door`, `steer` or `dns`).
    pub(crate) fn demand(&self, region: &str, source: &'static str, n: u64) {
        self.demand.get_or_create(&DemandLabels { region: region.to_owned(), source }).inc_by(n);
    }

    /// Sets the gauges from every monitor's state (monitors and regions that went, go).
    pub(crate) fn set(&self, c: &Config, monitors: &Monitors, now: vantage_core::Timestamp) {
        self.verdict.clear();
        self.down.clear();
        self.age.clear();
        self.tuple.clear();
        self.weight.clear();
        self.demand_day.clear();
        for (region, n) in monitors.demand(now) {
            self.demand_day.get_or_create(&RegionLabel { region }).set(i64::try_from(n).unwrap_or(i64::MAX));
        }
        for (id, m) in &c.monitors {
            let m = &m.value;
            let state = monitors.state(MonitorId(*id));
            let value = match state.and_then(|s| s.verdict).map(|v| v.verdict.global) {
                Some(GlobalVerdict::Healthy) => 2,
                Some(GlobalVerdict::Degraded) => 1,
                Some(GlobalVerdict::Down) => 0,
                None => -1,
            };
            let label = MonitorLabel { monitor: m.name.clone() };
            self.verdict.get_or_create(&label).set(value);
            let w = monitors.weights(m, now);
            let kinds = [
                ("configured", Some(&w.configured)),
                ("learned", w.learned.as_ref()),
                ("effective", Some(&w.effective)),
            ];
            for (weights, shares) in kinds {
                for (r, share) in m.regions.iter().zip(shares.into_iter().flatten()) {
                    let labels = WeightLabels { monitor: m.name.clone(), region: r.region.clone(), weights };
                    self.weight.get_or_create(&labels).set(share / 100.0);
                }
            }
            let Some(state) = state else { continue };
            // The core counts the changes; the counter catches up with its count (it starts
            // again from the saved count after a restart, as a counter reset).
            let changes = self.order_changes.get_or_create(&label);
            changes.inc_by(state.steering.changes.saturating_sub(changes.get()));
            let interval_s = c.monitor_check(m).check.interval_s();
            for (r, h) in m.regions.iter().zip(state.health(m, interval_s, now)) {
                let labels = MonitorRegionLabels { monitor: m.name.clone(), region: r.region.clone() };
                self.down.get_or_create(&labels).set(i64::from(h == RegionHealth::Down));
                let window = state.windows.get(&r.region);
                if let Some(age) = window.and_then(|w| w.worst_age()) {
                    self.age.get_or_create(&labels).set(age);
                }
                if let Some(p) = window.and_then(|w| w.latest()) {
                    let d = p.detail;
                    for (check, ok) in [
                        ("reachable", d.reachable),
                        ("manifest_valid", d.manifest_valid),
                        ("segment_fetchable", d.segment_fetchable),
                    ] {
                        let labels = TupleLabels {
                            monitor: m.name.clone(),
                            region: r.region.clone(),
                            check: check.into(),
                        };
                        self.tuple.get_or_create(&labels).set(i64::from(ok));
                    }
                }
            }
        }
    }

    /// One probe of a monitor region answered its manifest's first byte after `seconds`.
    pub(crate) fn ttfb(&self, monitor: &str, region: &str, seconds: f64) {
        let labels = MonitorRegionLabels { monitor: monitor.to_owned(), region: region.to_owned() };
        self.ttfb.get_or_create(&labels).observe(seconds);
    }
}
