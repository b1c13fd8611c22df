//! Prometheus metrics of the control plane: HTTP requests by route and status, objects by
//! kind, store latency. Rendered in the text format at `/metrics`.

use std::sync::Mutex;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use vantage_control::config::Config;

/// Labels of an HTTP request.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct RequestLabels {
    /// Route template (`/v1/nodes/{id}`).
    pub route: String,
    pub method: String,
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

/// Store operation label.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct OpLabel {
    /// Operation.
    pub op: String,
}

fn latency_histogram() -> Histogram {
    Histogram::new([0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5])
}

/// The control plane's metrics.
#[derive(Debug)]
pub(crate) struct Metrics {
    registry: Mutex<Registry>,
    requests: Family<RequestLabels, Counter>,
    objects: Family<KindLabel, Gauge>,
    store_latency: Family<OpLabel, Histogram, fn() -> Histogram>,
    certificates: Family<TargetLabel, Gauge>,
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
        Metrics { registry: Mutex::new(registry), requests, objects, store_latency, certificates }
    }

    /// Registers the DNS server's metrics with the same registry.
    pub(crate) fn register_dns(&self, dns: &vantage_dns::DnsMetrics) {
        if let Ok(mut r) = self.registry.lock() {
            dns.register(&mut r);
        }
    }

    /// Counts one request.
    pub(crate) fn request(&self, route: &str, method: &str, status: u16) {
        self.requests
            .get_or_create(&RequestLabels { route: route.into(), method: method.into(), status })
            .inc();
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
}
