//! Prometheus metrics of the control plane: the fleet as the control core sees it (addresses,
//! levels, lines, probers, probe loss and RTT by cluster and region, revisions, alerts,
//! publications, webhook deliveries), how evaluation keeps up, the process, HTTP requests by
//! route and status, objects by kind, store latency. Rendered as OpenMetrics at `/metrics`.

use std::borrow::Cow;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use vantage_control::config::Config;
use vantage_control::fleet::ProbePlace;
use vantage_control::view::Figures;
use vantage_core::Timestamp;

mod availability;
mod fleet;
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

/// A geo database file.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct GeoLabels {
    pub file: String,
    pub database_type: String,
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
    fleet: Arc<fleet::FleetCollector>,
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
    /// When each geo database in use was built.
    geo_built: Family<GeoLabels, Gauge>,
    /// Changed geo databases that did not read (the last good ones stayed in use).
    geo_reload_failures: Counter,
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
        let fleet = Arc::new(fleet::FleetCollector::default());
        registry.register_collector(Box::new(fleet.clone()));
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
        let geo_built = Family::<GeoLabels, Gauge>::default();
        registry.register(
            "vantage_geo_database_build_timestamp_seconds",
            "When each geo database in use was built (Unix time), by file and database type",
            geo_built.clone(),
        );
        let geo_reload_failures = Counter::default();
        registry.register(
            "vantage_geo_database_reload_failures",
            "Changed geo database files that did not read; the last good databases stayed in use",
            geo_reload_failures.clone(),
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
            fleet,
            revisions,
            publications,
            deliveries,
            probe_rtt,
            rtt_places: Mutex::default(),
            evaluation,
            results_waiting,
            results_unstored,
            geo_built,
            geo_reload_failures,
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

    /// Shows the geo databases now in use.
    pub(crate) fn set_geo(&self, geo: Option<&vantage_dns::GeoDb>) {
        self.geo_built.clear();
        for f in geo.map(vantage_dns::GeoDb::files).unwrap_or_default() {
            let built = i64::try_from(f.build_epoch).unwrap_or(i64::MAX);
            self.geo_built
                .get_or_create(&GeoLabels { file: f.name, database_type: f.database_type })
                .set(built);
        }
    }

    /// Counts a changed geo database that did not read.
    pub(crate) fn geo_reload_failed(&self) {
        self.geo_reload_failures.inc();
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

    /// The fleet's figures the next rendering writes (its nodes, lines, probers, probed
    /// targets and certificates), read at `now`.
    pub(crate) fn show_fleet(&self, figures: Arc<Figures>, now: Timestamp) {
        self.fleet.show(figures, now);
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

    /// Figures of one address and one HTTPS target, as the replica deciding (`evaluator`) or a
    /// follower shows them: cluster `video` (2) with node `edge "1"` (101), whose address the
    /// last pass saw failing from one of three probers.
    fn figures(evaluator: bool, now: Timestamp) -> Arc<Figures> {
        use vantage_control::config::{Config, Object};
        use vantage_control::snapshot::ClusterSnapshot;
        use vantage_core::address::Level;
        use vantage_core::evaluate::{AddressStatus, NodeStatus};
        use vantage_core::ids::ClusterId;
        use vantage_core::reachability::{AddressCondition, Condition, Reachability, Tally};

        let key = TargetKey { node: NodeId(7), ip: "203.0.113.10".parse().unwrap(), port: 443 };
        let mut config = Config::default();
        for (id, mut o) in vantage_control::fixtures::large_fleet(1, 0).puts {
            if let Object::Node(rec) = &mut o {
                rec.node.name = "edge \"1\"".into();
            }
            config.put(id, o, now, now);
        }
        let address = AddressStatus {
            ip: "203.0.113.10".parse().unwrap(),
            level: Level::Backup1,
            reachability: Reachability::Reachable,
            verdict: Tally { counting: 3, failing: 1, ..Tally::default() },
            regions: Arc::default(),
            in_use: true,
            damping: 1,
            condition: AddressCondition { condition: Condition::Reachable, since: None, changes_at: None },
            line: None,
        };
        let node = NodeStatus {
            node: NodeId(101),
            online: false,
            serving: true,
            level: Some(Level::Backup1),
            held_by: None,
            addresses: vec![address],
        };
        let snapshot =
            ClusterSnapshot { nodes: BTreeMap::from([(node.node, Arc::new(node))]), ..Default::default() };
        Arc::new(Figures {
            at: now,
            passes: 1,
            fleet: vantage_control::fleet::Fleet {
                config: Arc::new(config),
                snapshots: Arc::new(BTreeMap::from([(ClusterId(2), Arc::new(snapshot))])),
                evaluator,
                ..Default::default()
            },
            expiries: Arc::new(BTreeMap::from([(key, now.plus_secs(86_400))])),
            ..Default::default()
        })
    }

    #[test]
    fn the_fleet_is_written_from_the_figures_shown_and_gone_series_go() {
        let m = Metrics::new();
        let now = Timestamp::from_secs(1_800_000_000);
        let text = m.render();
        assert!(
            text.contains("# TYPE vantage_address_reachable gauge")
                && text.contains("vantage_evaluator_lease 0")
        );
        m.show_fleet(figures(true, now), now);
        let text = m.render();
        for line in [
            r#"vantage_address_reachable{cluster="video",node="edge \"1\"",address="203.0.113.10",level="backup1"} 1"#,
            r#"vantage_address_probers_failing{cluster="video",node="edge \"1\"",address="203.0.113.10",level="backup1"} 1"#,
            r#"vantage_address_probers_counting{cluster="video",node="edge \"1\"",address="203.0.113.10",level="backup1"} 3"#,
            r#"vantage_certificate_expiry_seconds{target="n7/203.0.113.10/443"} 86400"#,
            "vantage_evaluator_lease 1",
        ] {
            assert!(text.contains(line), "{line} in {text}");
        }
        assert!(text.ends_with("# EOF\n"), "{text}");
        // A follower does not export the fleet's certificates.
        m.show_fleet(figures(false, now), now);
        let text = m.render();
        assert!(
            !text.contains("n7/203.0.113.10/443") && text.contains("vantage_evaluator_lease 0"),
            "{text}"
        );
        m.show_fleet(Arc::new(Figures { fleet: Default::default(), ..(*figures(true, now)).clone() }), now);
        assert!(!m.render().contains("vantage_address_reachable{"));
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
