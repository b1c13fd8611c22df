//! Prometheus metrics of the control plane: the fleet as the control core sees it (addresses,
//! levels, lines, probers, probe loss and RTT by cluster and region, revisions, alerts,
//! publications, webhook deliveries), how evaluation keeps up, the process, HTTP requests by
//! route and status, objects by kind, store latency. Rendered as OpenMetrics at `/metrics`.

use std::borrow::Cow;
use std::sync::Mutex;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use vantage_control::config::Config;
use vantage_control::fleet::ProbePlace;

mod availability;
mod mirrors;
mod monitors;
mod process;

/// Labels of an HTTP request.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct RequestLabels {
    /// Route template (`/v1/nodes/{id}`): borrowed where the template is a constant (the
    /// public face's doors), so counting a redirect allocates nothing for it.
    pub route: Cow<'static, str>,
    pub method: &'static str,
    /// Status code.
    pub status: u16,
}

/// One label: a kind or an operation.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct KindLabel {
    pub kind: String,
}

/// A target label (`n{node}/{ip}/{port}`).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct TargetLabel {
    pub target: String,
}

/// An address of a node.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct AddressLabels {
    pub cluster: String,
    pub node: String,
    pub address: String,
    pub level: String,
}

/// A node of a cluster.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct NodeLabels {
    pub cluster: String,
    pub node: String,
}

/// A line of a cluster.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct LineLabels {
    pub cluster: String,
    pub line: String,
}

/// A cluster.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ClusterLabel {
    pub cluster: String,
}

/// Where a probe is counted: its target's cluster and its prober's region.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct PlaceLabels {
    pub cluster: String,
    pub region: String,
}

impl From<&ProbePlace> for PlaceLabels {
    fn from(p: &ProbePlace) -> Self {
        PlaceLabels { cluster: p.cluster.clone(), region: p.region.clone() }
    }
}

/// A prober and its region.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ProberLabels {
    pub prober: String,
    pub region: String,
}

/// A revision's cluster and cause.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct RevisionLabels {
    pub cluster: String,
    pub cause: String,
}

/// A push to an external DNS server and how it ended.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct PublicationLabels {
    pub cluster: String,
    pub target: String,
    pub outcome: String,
}

/// An alert's delivery to a webhook and how it ended.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct DeliveryLabels {
    pub webhook: String,
    pub outcome: String,
}

/// This build.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct BuildLabels {
    pub version: String,
}

/// Store operation label.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct OpLabel {
    /// Operation.
    pub op: String,
}

fn latency_histogram() -> Histogram {
    Histogram::new([0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5])
}

/// Round trips of good probe attempts: from a rack away to across the world, up to the
/// 2 s default timeout and beyond.
fn rtt_histogram() -> Histogram {
    Histogram::new([0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.25, 0.5, 1.0, 2.5])
}

pub(crate) type FloatGauge = Gauge<f64, std::sync::atomic::AtomicU64>;

/// The control plane's metrics.
#[derive(Debug)]
pub(crate) struct Metrics {
    registry: Mutex<Registry>,
    requests: Family<RequestLabels, Counter>,
    objects: Family<KindLabel, Gauge>,
    store_latency: Family<OpLabel, Histogram, fn() -> Histogram>,
    certificates: Family<TargetLabel, Gauge>,
    fleet: FleetFamilies,
    revisions: Family<RevisionLabels, Counter>,
    publications: Family<PublicationLabels, Counter>,
    deliveries: Family<DeliveryLabels, Counter>,
    probe_rtt: Family<PlaceLabels, Histogram, fn() -> Histogram>,
    /// The places `probe_rtt` has series for (its family cannot list them), so that the
    /// series of a deleted cluster or region can go.
    rtt_places: Mutex<std::collections::HashSet<PlaceLabels>>,
    evaluation: Histogram,
    /// Results acknowledged to probers and not yet stored (set at each scrape).
    results_waiting: Gauge,
    /// Results acknowledged to probers that the store refused.
    results_unstored: Counter,
    mirrors: mirrors::MirrorFamilies,
    monitors: monitors::MonitorFamilies,
    availability: availability::AvailabilityFamilies,
}

/// The families `/metrics` fills from the control core's figures at every scrape.
#[derive(Debug, Default)]
struct FleetFamilies {
    reachable: Family<AddressLabels, Gauge>,
    failing: Family<AddressLabels, Gauge>,
    counting: Family<AddressLabels, Gauge>,
    damping: Family<AddressLabels, Gauge>,
    suspect: Family<AddressLabels, Gauge>,
    probe_rate: Family<TargetLabel, FloatGauge>,
    level: Family<NodeLabels, Gauge>,
    drained: Family<NodeLabels, Gauge>,
    records: Family<LineLabels, Gauge>,
    held: Family<LineLabels, Gauge>,
    prober_online: Family<ProberLabels, Gauge>,
    prober_age: Family<ProberLabels, FloatGauge>,
    alerts: Family<KindLabel, Gauge>,
    loss: Family<PlaceLabels, FloatGauge>,
    lag: Family<ClusterLabel, FloatGauge>,
    evaluator: Gauge,
}

impl FleetFamilies {
    fn register(&self, r: &mut Registry) {
        r.register(
            "vantage_address_reachable",
            "1 while an address is reachable (hysteresis applied)",
            self.reachable.clone(),
        );
        r.register(
            "vantage_address_probers_failing",
            "Counting probers whose latest round failed the address",
            self.failing.clone(),
        );
        r.register(
            "vantage_address_probers_counting",
            "Probers whose results count for the address",
            self.counting.clone(),
        );
        r.register(
            "vantage_address_damping_multiplier",
            "Flap damping: how many times the usual answering-before-reachable an address must answer to come back (1: not damped)",
            self.damping.clone(),
        );
        r.register(
            "vantage_address_failing",
            "1 while an address is still reachable but a strict majority of counting probers sees it failing (unreachable if that lasts failing-before-unreachable)",
            self.suspect.clone(),
        );
        r.register(
            "vantage_target_probe_rate",
            "Probe attempts per second an ip:port received from every prober together, over the last minute",
            self.probe_rate.clone(),
        );
        r.register(
            "vantage_node_level",
            "The level DNS uses for a node: 0 primary, 1 backup1, 2 backup2, -1 none",
            self.level.clone(),
        );
        r.register(
            "vantage_node_drained",
            "For each drained node (its own drain, its group's or a maintenance window's): 0 while it drains, 1 once the answers have been without it for 2 x TTL",
            self.drained.clone(),
        );
        r.register("vantage_line_records", "Records a line answers now", self.records.clone());
        r.register(
            "vantage_revision_held",
            "1 while the protection holds a line's previous records",
            self.held.clone(),
        );
        r.register("vantage_prober_online", "1 while a prober is online", self.prober_online.clone());
        r.register(
            "vantage_prober_last_report_age_seconds",
            "Seconds since a prober last asked or reported",
            self.prober_age.clone(),
        );
        r.register("vantage_alerts_firing", "Alerts firing, by kind", self.alerts.clone());
        r.register(
            "vantage_probe_loss_ratio",
            "Lost attempts over sent attempts (0-1) of the results the cluster's last pass counted, by target cluster and prober region",
            self.loss.clone(),
        );
        r.register(
            "vantage_evaluation_lag_seconds",
            "How long reports wait for the pass that uses them: the oldest report of the last pass, or a report still waiting if longer",
            self.lag.clone(),
        );
        r.register(
            "vantage_evaluator_lease",
            "1 while this replica decides for the fleet: it holds the evaluator lease, or it is the only one (SQLite)",
            self.evaluator.clone(),
        );
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Creates and registers every metric.
    pub(crate) fn new() -> Self {
        let mut registry = Registry::default();
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "vantage_http_requests",
            "HTTP requests by route, method and status",
            requests.clone(),
        );
        let objects = Family::<KindLabel, Gauge>::default();
        registry.register("vantage_objects", "Configuration objects by kind", objects.clone());
        let store_latency =
            Family::<OpLabel, Histogram, fn() -> Histogram>::new_with_constructor(latency_histogram);
        registry.register("vantage_store_latency_seconds", "Store operation latency", store_latency.clone());
        let certificates = Family::<TargetLabel, Gauge>::default();
        registry.register(
            "vantage_certificate_expiry_seconds",
            "Seconds until an HTTPS target's certificate expires (negative: expired), as probers last saw it",
            certificates.clone(),
        );
        let fleet = FleetFamilies::default();
        fleet.register(&mut registry);
        let build = Family::<BuildLabels, Gauge>::default();
        build.get_or_create(&BuildLabels { version: env!("CARGO_PKG_VERSION").into() }).set(1);
        // A gauge named `…_info` rather than an OpenMetrics info: the older text format, which
        // promtool and many tools still read, has no info type.
        registry.register("vantage_build_info", "This build (value 1)", build);
        let probe_rtt =
            Family::<PlaceLabels, Histogram, fn() -> Histogram>::new_with_constructor(rtt_histogram);
        registry.register(
            "vantage_probe_rtt_seconds",
            "Round trip of good probe attempts as reports arrive, by target cluster and prober region",
            probe_rtt.clone(),
        );
        let evaluation = latency_histogram();
        registry.register(
            "vantage_evaluation_duration_seconds",
            "Wall time of the control core's evaluation of the clusters that were due",
            evaluation.clone(),
        );
        let results_waiting = Gauge::default();
        registry.register(
            "vantage_results_waiting",
            "Probe results acknowledged and not yet stored (a store falling behind; reports wait beyond 500,000)",
            results_waiting.clone(),
        );
        let results_unstored = Counter::default();
        registry.register(
            "vantage_results_unstored",
            "Probe results acknowledged that the store refused (a gap in their history; verdicts were not affected)",
            results_unstored.clone(),
        );
        registry.register_collector(Box::new(process::Process));
        let revisions = Family::<RevisionLabels, Counter>::default();
        registry.register("vantage_revisions", "Revisions cut, by cluster and cause", revisions.clone());
        let publications = Family::<PublicationLabels, Counter>::default();
        registry.register(
            "vantage_publications",
            "Pushes of revisions to external DNS servers, by outcome (published, failed)",
            publications.clone(),
        );
        let deliveries = Family::<DeliveryLabels, Counter>::default();
        registry.register(
            "vantage_webhook_deliveries",
            "Alert deliveries to webhooks, by outcome (delivered, failed after every retry)",
            deliveries.clone(),
        );
        let mirrors = mirrors::MirrorFamilies::new(&mut registry);
        let monitors = monitors::MonitorFamilies::new(&mut registry);
        let availability = availability::AvailabilityFamilies::new(&mut registry);
        Metrics {
            mirrors,
            monitors,
            availability,
            registry: Mutex::new(registry),
            requests,
            objects,
            store_latency,
            certificates,
            fleet,
            revisions,
            publications,
            deliveries,
            probe_rtt,
            rtt_places: Mutex::default(),
            evaluation,
            results_waiting,
            results_unstored,
        }
    }

    /// Registers the DNS server's metrics with the same registry.
    pub(crate) fn register_dns(&self, dns: &vantage_dns::DnsMetrics) {
        if let Ok(mut r) = self.registry.lock() {
            dns.register(&mut r);
        }
    }

    /// Counts one request.
    pub(crate) fn request(&self, route: Cow<'static, str>, method: &'static str, status: u16) {
        self.requests.get_or_create(&RequestLabels { route, method, status }).inc();
    }

    /// Counts a revision of `cluster`.
    pub(crate) fn revision(&self, cluster: &str, cause: &str) {
        self.revisions.get_or_create(&RevisionLabels { cluster: cluster.into(), cause: cause.into() }).inc();
    }

    /// The counter of pushes to an external DNS server that ended `published` or not.
    fn publications_of(&self, cluster: &str, target: &str, published: bool) -> Counter {
        let outcome = if published { "published" } else { "failed" };
        let labels =
            PublicationLabels { cluster: cluster.into(), target: target.into(), outcome: outcome.into() };
        self.publications.get_or_create(&labels).clone()
    }

    /// Counts a push to an external DNS server.
    pub(crate) fn publication(&self, cluster: &str, target: &str, published: bool) {
        self.publications_of(cluster, target, published).inc();
    }

    /// A publisher now exists: both its outcomes are shown from 0, so that `increase()` sees
    /// its first failure (a series that starts at 1 shows no increase).
    pub(crate) fn publisher(&self, cluster: &str, target: &str) {
        for published in [true, false] {
            self.publications_of(cluster, target, published);
        }
    }

    fn deliveries_of(&self, webhook: &str, delivered: bool) -> Counter {
        let outcome = if delivered { "delivered" } else { "failed" };
        self.deliveries
            .get_or_create(&DeliveryLabels { webhook: webhook.into(), outcome: outcome.into() })
            .clone()
    }

    /// Counts an alert's delivery to a webhook.
    pub(crate) fn delivery(&self, webhook: &str, delivered: bool) {
        self.deliveries_of(webhook, delivered).inc();
    }

    /// Shows both outcomes of every configured webhook from 0, for the reason given at
    /// [`publisher`](Self::publisher).
    pub(crate) fn set_webhooks(&self, c: &Config) {
        for w in c.webhooks.values() {
            for delivered in [true, false] {
                self.deliveries_of(&w.value.name, delivered);
            }
        }
    }

    /// Records the round trips of one result's good attempts, counted at `place` (the series
    /// is looked up once per result, not per attempt: a report carries up to 10,000).
    pub(crate) fn probe_rtts(&self, place: &ProbePlace, seconds: impl IntoIterator<Item = f64>) {
        let mut seconds = seconds.into_iter().peekable();
        if seconds.peek().is_none() {
            return;
        }
        let labels = PlaceLabels::from(place);
        let histogram = self.probe_rtt.get_or_create(&labels);
        seconds.for_each(|s| histogram.observe(s));
        drop(histogram);
        crate::support::lock(&self.rtt_places).insert(labels);
    }

    /// Drops the round-trip series of places no longer configured (`keep` says which are: a
    /// cluster and a region that both exist).
    pub(crate) fn retain_rtt(&self, keep: impl Fn(&str, &str) -> bool) {
        crate::support::lock(&self.rtt_places).retain(|p| {
            let kept = keep(&p.cluster, &p.region);
            if !kept {
                self.probe_rtt.remove(p);
            }
            kept
        });
    }

    /// Records how long an evaluation of the due clusters took.
    pub(crate) fn evaluation(&self, d: Duration) {
        self.evaluation.observe(d.as_secs_f64());
    }

    /// Results acknowledged and not yet stored, now.
    pub(crate) fn set_results_waiting(&self, n: usize) {
        self.results_waiting.set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    /// `n` acknowledged results the store refused.
    pub(crate) fn results_unstored(&self, n: usize) {
        self.results_unstored.inc_by(n as u64);
    }

    /// Mirror and door metrics.
    pub(crate) fn mirrors(&self) -> &mirrors::MirrorFamilies {
        &self.mirrors
    }

    /// Monitor metrics.
    pub(crate) fn monitors(&self) -> &monitors::MonitorFamilies {
        &self.monitors
    }

    /// Availability metrics.
    pub(crate) fn availability(&self) -> &availability::AvailabilityFamilies {
        &self.availability
    }

    /// Counts a refused reload of the mirror registry.
    pub(crate) fn mirror_reload_failed(&self) {
        self.mirrors.reload_failed();
    }

    /// Records a store operation's duration.
    pub(crate) fn store_op(&self, op: &str, d: Duration) {
        self.store_latency.get_or_create(&OpLabel { op: op.into() }).observe(d.as_secs_f64());
    }

    /// Sets the object gauges from a configuration.
    pub(crate) fn set_objects(&self, c: &Config) {
        for (kind, n) in c.counts() {
            self.objects
                .get_or_create(&KindLabel { kind: kind.into() })
                .set(i64::try_from(n).unwrap_or(i64::MAX));
        }
    }

    /// Sets the certificate gauges: one per HTTPS target with a known expiry, at `now`.
    pub(crate) fn set_certificates(
        &self,
        expiries: &std::collections::BTreeMap<vantage_control::target::TargetKey, vantage_core::Timestamp>,
        now: vantage_core::Timestamp,
    ) {
        self.certificates.clear();
        for (key, not_after) in expiries {
            let left = not_after.millis_since(now) / 1000;
            self.certificates.get_or_create(&TargetLabel { target: key.to_string() }).set(left);
        }
    }

    /// Sets the fleet's families from the control core's figures (series of nodes, lines and
    /// probers that are gone go too).
    pub(crate) fn set_fleet(&self, f: &vantage_control::fleet::Fleet) {
        let m = &self.fleet;
        for family in [&m.reachable, &m.failing, &m.counting, &m.damping, &m.suspect] {
            family.clear();
        }
        m.probe_rate.clear();
        for (target, rate) in &f.probe_rates {
            m.probe_rate.get_or_create(&TargetLabel { target: target.to_string() }).set(*rate);
        }
        m.level.clear();
        m.drained.clear();
        m.records.clear();
        m.held.clear();
        m.prober_online.clear();
        m.prober_age.clear();
        m.alerts.clear();
        m.loss.clear();
        m.lag.clear();
        for (place, ratio) in &f.probe_loss {
            m.loss.get_or_create(&place.into()).set(*ratio);
        }
        for (cluster, seconds) in &f.evaluation_lag {
            m.lag.get_or_create(&ClusterLabel { cluster: cluster.clone() }).set(*seconds);
        }
        m.evaluator.set(i64::from(f.evaluator));
        let word = |l: vantage_core::address::Level| match l {
            vantage_core::address::Level::Primary => "primary",
            vantage_core::address::Level::Backup1 => "backup1",
            vantage_core::address::Level::Backup2 => "backup2",
        };
        for a in &f.addresses {
            let labels = AddressLabels {
                cluster: a.cluster.clone(),
                node: a.node.clone(),
                address: a.address.clone(),
                level: word(a.level).into(),
            };
            m.reachable.get_or_create(&labels).set(i64::from(a.reachable));
            m.failing.get_or_create(&labels).set(i64::from(a.failing));
            m.counting.get_or_create(&labels).set(i64::from(a.counting));
            m.damping.get_or_create(&labels).set(i64::from(a.damping));
            m.suspect.get_or_create(&labels).set(i64::from(a.suspect));
        }
        for (cluster, node, level) in &f.nodes {
            let value = match level {
                None => -1,
                Some(vantage_core::address::Level::Primary) => 0,
                Some(vantage_core::address::Level::Backup1) => 1,
                Some(vantage_core::address::Level::Backup2) => 2,
            };
            m.level.get_or_create(&NodeLabels { cluster: cluster.clone(), node: node.clone() }).set(value);
        }
        for (cluster, node, drained) in &f.drains {
            m.drained
                .get_or_create(&NodeLabels { cluster: cluster.clone(), node: node.clone() })
                .set(i64::from(*drained));
        }
        for (cluster, line, records, held) in &f.lines {
            let labels = LineLabels { cluster: cluster.clone(), line: line.clone() };
            m.records.get_or_create(&labels).set(i64::try_from(*records).unwrap_or(i64::MAX));
            m.held.get_or_create(&labels).set(i64::from(*held));
        }
        for p in &f.probers {
            let labels = ProberLabels { prober: p.name.clone(), region: p.region.clone() };
            m.prober_online.get_or_create(&labels).set(i64::from(p.online));
            if let Some(age) = p.last_seen_age_s {
                m.prober_age.get_or_create(&labels).set(age);
            }
        }
        for (kind, n) in &f.alerts_firing {
            m.alerts
                .get_or_create(&KindLabel { kind: kind.to_string() })
                .set(i64::try_from(*n).unwrap_or(i64::MAX));
        }
    }

    /// The text exposition.
    pub(crate) fn render(&self) -> String {
        let mut out = String::new();
        if let Ok(r) = self.registry.lock() {
            // Writing to a String cannot fail.
            let _ = prometheus_client::encoding::text::encode(&mut out, &r);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use vantage_control::target::TargetKey;
    use vantage_core::Timestamp;
    use vantage_core::ids::NodeId;

    use super::*;

    #[test]
    fn certificate_expiry_is_one_gauge_per_target_and_gone_targets_go() {
        let m = Metrics::new();
        let key = TargetKey { node: NodeId(7), ip: "203.0.113.10".parse().unwrap(), port: 443 };
        let now = Timestamp::from_secs(1_800_000_000);
        m.set_certificates(&BTreeMap::from([(key, now.plus_secs(86_400))]), now);
        let text = m.render();
        assert!(
            text.contains(r#"vantage_certificate_expiry_seconds{target="n7/203.0.113.10/443"} 86400"#),
            "{text}"
        );
        m.set_certificates(&BTreeMap::new(), now);
        assert!(!m.render().contains("n7/203.0.113.10/443"));
    }

    #[test]
    fn round_trip_series_of_a_deleted_cluster_or_region_go() {
        let m = Metrics::new();
        let place =
            |cluster: &str, region: &str| ProbePlace { cluster: cluster.into(), region: region.into() };
        for (c, r) in [("video", "ap-sg"), ("video", "eu-de"), ("gone", "ap-sg")] {
            m.probe_rtts(&place(c, r), [0.012]);
        }
        let count = |text: &str, c: &str, r: &str| {
            text.contains(&format!(r#"vantage_probe_rtt_seconds_count{{cluster="{c}",region="{r}"}} 1"#))
        };
        assert!(count(&m.render(), "gone", "ap-sg"));
        m.retain_rtt(|c, r| c == "video" && r == "ap-sg");
        let text = m.render();
        assert!(count(&text, "video", "ap-sg"), "{text}");
        assert!(!text.contains(r#"cluster="gone""#) && !text.contains(r#"region="eu-de""#), "{text}");
    }
}
