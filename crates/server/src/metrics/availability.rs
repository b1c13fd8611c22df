//! Availability metrics: the share of time each node, line, mirror and monitor served over
//! the last 24 h, 7 d and 30 d (maintenance left out), from the core's ledger. Addresses are
//! left to the API (`/v1/availability?kind=address`): a series per address and window would
//! triple the address series for a figure their node already gives.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use vantage_control::availability::Ledger;
use vantage_control::config::Config;
use vantage_core::Timestamp;

/// A subject and a window.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct AvailabilityLabels {
    /// `node`, `line`, `mirror` or `monitor`.
    pub kind: &'static str,
    /// `node:7`, `line:1/4`, `mirror:HOST`, `monitor:3`.
    pub subject: String,
    /// Its name in words.
    pub name: String,
    /// `24h`, `7d` or `30d`.
    pub window: String,
}

/// The availability family.
#[derive(Debug)]
pub(crate) struct AvailabilityFamilies {
    ratio: Family<AvailabilityLabels, super::FloatGauge>,
}

impl AvailabilityFamilies {
    pub(crate) fn new(r: &mut Registry) -> Self {
        let f = AvailabilityFamilies { ratio: Family::default() };
        r.register(
            "vantage_availability_ratio",
            "Share of the window a node, line, mirror or monitor served (up or degraded), maintenance and unknown time left out; absent while nothing was counted",
            f.ratio.clone(),
        );
        f
    }

    /// Every subject of `c` the ledger knows, at `now` (a subject gone goes with its series).
    pub(crate) fn set(&self, c: &Config, ledger: &Ledger, now: Timestamp) {
        self.ratio.clear();
        for (subject, _) in ledger.all().filter(|(s, _)| s.kind() != "address" && s.exists(c)) {
            let report = ledger.report(c, &subject, (None, 0, false), now);
            for w in &report.windows {
                let Some(pct) = w.times.availability_pct else { continue };
                let labels = AvailabilityLabels {
                    kind: subject.kind(),
                    subject: report.subject.clone(),
                    name: report.name.clone(),
                    window: w.window.clone(),
                };
                self.ratio.get_or_create(&labels).set(pct / 100.0);
            }
        }
    }
}
