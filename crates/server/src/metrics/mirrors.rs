//! Mirror and door metrics (SPEC §6): verdicts, failing regions, manual blocks and check
//! durations of every mirror, reload failures of the registry, and door redirects.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use vantage_control::config::Config;
use vantage_control::mirrors::book::Book;
use vantage_core::mirror::MirrorVerdict;

/// A mirror.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct HostLabel {
    pub host: String,
}

/// A door's answer.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct DoorLabels {
    pub tenant: String,
    /// `redirected`, `fallback`, `unknown_tenant` or `none_eligible`.
    pub outcome: &'static str,
}

fn duration_histogram() -> Histogram {
    Histogram::new([0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0])
}

/// The mirror families.
#[derive(Debug)]
pub(crate) struct MirrorFamilies {
    verdict: Family<HostLabel, Gauge>,
    failing: Family<HostLabel, Gauge>,
    manual: Gauge,
    stale: Family<HostLabel, Gauge>,
    lag: Family<HostLabel, Gauge>,
    durations: Family<HostLabel, Histogram, fn() -> Histogram>,
    reload_errors: Counter,
    redirects: Family<DoorLabels, Counter>,
}

impl MirrorFamilies {
    pub(crate) fn new(r: &mut Registry) -> Self {
        let f = MirrorFamilies {
            verdict: Family::default(),
            failing: Family::default(),
            manual: Gauge::default(),
            stale: Family::default(),
            lag: Family::default(),
            durations: Family::new_with_constructor(duration_histogram),
            reload_errors: Counter::default(),
            redirects: Family::default(),
        };
        r.register(
            "vantage_mirror_verdict",
            "A mirror's verdict, higher is healthier: 2 live, 1 degraded, 0 blocked, -1 not yet known",
            f.verdict.clone(),
        );
        r.register(
            "vantage_mirror_regions_failing",
            "Regions where a mirror times out, refuses or shows a block page",
            f.failing.clone(),
        );
        r.register("vantage_mirror_manual_blocked", "Mirrors an operator blocked", f.manual.clone());
        r.register(
            "vantage_mirror_stale",
            "1 while a mirror is further behind its reference than its freshness check allows",
            f.stale.clone(),
        );
        r.register(
            "vantage_mirror_lag_seconds",
            "How far a mirror's trace file was behind its reference at the last check",
            f.lag.clone(),
        );
        r.register(
            "vantage_mirror_check_duration_seconds",
            "Duration of each probe of a mirror, from every region",
            f.durations.clone(),
        );
        r.register(
            "vantage_mirror_registry_reload_errors",
            "Reloads of the mirror registry refused (the previous registry kept serving)",
            f.reload_errors.clone(),
        );
        r.register("vantage_door_redirects", "Door answers, by tenant and outcome", f.redirects.clone());
        f
    }

    /// Sets the gauges from the registry and the book (mirrors that went, go).
    pub(crate) fn set(&self, c: &Config, book: &Book) {
        self.verdict.clear();
        self.failing.clear();
        self.stale.clear();
        self.lag.clear();
        for host in c.mirrors.mirrors.keys() {
            let labels = HostLabel { host: host.clone() };
            let state = book.state(host);
            self.verdict
                .get_or_create(&labels)
                .set(state.map_or(MirrorVerdict::Unknown.gauge(), |s| s.verdict.gauge()));
            let failing = state.map_or(0, |s| s.regions_failing());
            self.failing.get_or_create(&labels).set(i64::try_from(failing).unwrap_or(i64::MAX));
            if let Some(f) = state.and_then(|s| s.freshness.as_ref()) {
                self.stale.get_or_create(&labels).set(i64::from(f.stale));
                if let Some(lag) = f.lag_s {
                    self.lag.get_or_create(&labels).set(lag);
                }
            }
        }
        let manual = c.mirrors.mirrors.values().filter(|m| m.manual_block).count();
        self.manual.set(i64::try_from(manual).unwrap_or(i64::MAX));
    }

    /// One probe of `host` took `seconds`.
    pub(crate) fn check_took(&self, host: &str, seconds: f64) {
        self.durations.get_or_create(&HostLabel { host: host.to_owned() }).observe(seconds);
    }

    /// A reload was refused.
    pub(crate) fn reload_failed(&self) {
        self.reload_errors.inc();
    }

    /// A door answered.
    pub(crate) fn redirect(&self, tenant: &str, outcome: &'static str) {
        self.redirects.get_or_create(&DoorLabels { tenant: tenant.to_owned(), outcome }).inc();
    }
}
