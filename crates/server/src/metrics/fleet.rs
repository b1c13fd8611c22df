//! The fleet's families — every address, node, line, prober and probed target, and the
//! certificates probers saw — written at each scrape straight from the figures the control core
//! published, not kept in labelled families and refilled. At 10,000 nodes that is about
//! 200,000 series: clearing and recreating them (a hashed, allocated label set each) cost a
//! scrape some 300 ms of CPU, and two scrapes at once could each read a family the other had
//! just cleared. Written from one `Figures`, a scrape is one consistent reading.

use std::fmt;
use std::sync::Arc;

use arc_swap::ArcSwapOption;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeGaugeValue, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::gauge::ConstGauge;
use vantage_control::fleet::{AddressFigure, Fleet, ProberFigure};
use vantage_control::view::Figures;
use vantage_core::Timestamp;
use vantage_core::address::Level;

/// The figures a scrape writes, and its moment (certificate expiries are counted from it).
#[derive(Debug)]
struct Shown {
    figures: Arc<Figures>,
    now: Timestamp,
}

/// Writes the fleet's families from the figures last shown to it.
#[derive(Debug, Default)]
pub(super) struct FleetCollector {
    shown: ArcSwapOption<Shown>,
}

impl FleetCollector {
    /// The figures the next rendering writes, at `now`.
    pub(super) fn show(&self, figures: Arc<Figures>, now: Timestamp) {
        self.shown.store(Some(Arc::new(Shown { figures, now })));
    }
}

/// One gauge family: its `# HELP` and `# TYPE`, then a line per labelled value.
fn gauges<L: EncodeLabelSet, V: EncodeGaugeValue>(
    encoder: &mut DescriptorEncoder,
    (name, help): (&str, &str),
    series: impl IntoIterator<Item = (L, V)>,
) -> fmt::Result {
    let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (labels, value) in series {
        ConstGauge::new(value).encode(family.encode_family(&labels)?)?;
    }
    Ok(())
}

/// One figure of an address.
type PerAddress = fn(&AddressFigure) -> i64;

/// An address's labels.
fn address(a: &AddressFigure) -> [(&str, &str); 4] {
    let level = match a.level {
        Level::Primary => "primary",
        Level::Backup1 => "backup1",
        Level::Backup2 => "backup2",
    };
    [("cluster", &a.cluster), ("node", &a.node), ("address", &a.address), ("level", level)]
}

impl Collector for FleetCollector {
    fn encode(&self, mut e: DescriptorEncoder) -> fmt::Result {
        let shown = self.shown.load_full();
        let empty = Fleet::default();
        let f = shown.as_ref().map_or(&empty, |s| &s.figures.fleet);
        let per_address: [(&str, &str, PerAddress); 5] = [
            ("vantage_address_reachable", "1 while an address is reachable (hysteresis applied)", |a| {
                i64::from(a.reachable)
            }),
            (
                "vantage_address_probers_failing",
                "Counting probers whose latest round failed the address",
                |a| i64::from(a.failing),
            ),
            ("vantage_address_probers_counting", "Probers whose results count for the address", |a| {
                i64::from(a.counting)
            }),
            (
                "vantage_address_damping_multiplier",
                "Flap damping: how many times the usual answering-before-reachable an address must answer to come back (1: not damped)",
                |a| i64::from(a.damping),
            ),
            (
                "vantage_address_failing",
                "1 while an address is still reachable but a strict majority of counting probers sees it failing (unreachable if that lasts failing-before-unreachable)",
                |a| i64::from(a.suspect),
            ),
        ];
        // Read from the snapshots once, written five times.
        let addresses = f.addresses();
        for (name, help, value) in per_address {
            gauges(&mut e, (name, help), addresses.iter().map(|a| (address(a), value(a))))?;
        }
        gauges(
            &mut e,
            (
                "vantage_target_probe_rate",
                "Probe attempts per second an ip:port received from every prober together, over the last minute",
            ),
            f.probe_rates.iter().map(|(target, rate)| ([("target", target.to_string())], *rate)),
        )?;
        gauges(
            &mut e,
            ("vantage_node_level", "The level DNS uses for a node: 0 primary, 1 backup1, 2 backup2, -1 none"),
            f.nodes().iter().map(|(cluster, node, level)| {
                let value = match level {
                    None => -1,
                    Some(Level::Primary) => 0,
                    Some(Level::Backup1) => 1,
                    Some(Level::Backup2) => 2,
                };
                ([("cluster", cluster.as_str()), ("node", node.as_str())], value)
            }),
        )?;
        gauges(
            &mut e,
            (
                "vantage_node_drained",
                "For each drained node (its own drain, its group's or a maintenance window's): 0 while it drains, 1 once the answers have been without it for 2 x TTL",
            ),
            f.drains().iter().map(|(cluster, node, drained)| {
                ([("cluster", cluster.as_str()), ("node", node.as_str())], i64::from(*drained))
            }),
        )?;
        let line =
            |cluster: &'_ String, line: &'_ String| [("cluster", cluster.clone()), ("line", line.clone())];
        let lines = f.lines();
        gauges(
            &mut e,
            ("vantage_line_records", "Records a line answers now"),
            lines.iter().map(|(c, l, records, _)| (line(c, l), i64::try_from(*records).unwrap_or(i64::MAX))),
        )?;
        gauges(
            &mut e,
            ("vantage_revision_held", "1 while the protection holds a line's previous records"),
            lines.iter().map(|(c, l, _, held)| (line(c, l), i64::from(*held))),
        )?;
        let prober = |p: &ProberFigure| [("prober", p.name.clone()), ("region", p.region.clone())];
        gauges(
            &mut e,
            ("vantage_prober_online", "1 while a prober is online"),
            f.probers.iter().map(|p| (prober(p), i64::from(p.online))),
        )?;
        gauges(
            &mut e,
            ("vantage_prober_last_report_age_seconds", "Seconds since a prober last asked or reported"),
            f.probers.iter().filter_map(|p| Some((prober(p), p.last_seen_age_s?))),
        )?;
        gauges(
            &mut e,
            ("vantage_alerts_firing", "Alerts firing, by kind"),
            f.alerts_firing
                .iter()
                .map(|(kind, n)| ([("kind", kind.to_string())], i64::try_from(*n).unwrap_or(i64::MAX))),
        )?;
        gauges(
            &mut e,
            (
                "vantage_probe_loss_ratio",
                "Lost attempts over sent attempts (0-1) of the results the cluster's last pass counted, by target cluster and prober region",
            ),
            f.probe_loss.iter().map(|(place, ratio)| {
                ([("cluster", place.cluster.as_str()), ("region", place.region.as_str())], *ratio)
            }),
        )?;
        gauges(
            &mut e,
            (
                "vantage_evaluation_lag_seconds",
                "How long reports wait for the pass that uses them: the oldest report of the last pass, or a report still waiting if longer",
            ),
            f.evaluation_lag.iter().map(|(cluster, seconds)| ([("cluster", cluster.as_str())], *seconds)),
        )?;
        let lease = e.encode_descriptor(
            "vantage_evaluator_lease",
            "1 while this replica decides for the fleet: it holds the evaluator lease, or it is the only one (SQLite)",
            None,
            MetricType::Gauge,
        )?;
        ConstGauge::new(i64::from(f.evaluator)).encode(lease)?;
        // The fleet's certificates are the lease holder's to export, as the rest of its figures.
        let expiries = shown.as_ref().filter(|_| f.evaluator).map(|s| (&s.figures.expiries, s.now));
        gauges(
            &mut e,
            (
                "vantage_certificate_expiry_seconds",
                "Seconds until an HTTPS target's certificate expires (negative: expired), as probers last saw it",
            ),
            expiries.into_iter().flat_map(|(expiries, now)| {
                expiries.iter().map(move |(key, not_after)| {
                    ([("target", key.to_string())], not_after.millis_since(now) / 1000)
                })
            }),
        )
    }
}
