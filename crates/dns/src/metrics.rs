//! Query counters for `/metrics`: by zone and response code, address answers by cluster and
//! line, plus truncated and dropped; and the demand the address answers show ([`DnsDemand`]).
//!
//! The counters live in a [`prometheus_client`] family so the control plane registers them
//! once. The hot path never touches the family: each UDP worker resolves plain
//! [`Counter`] handles (one atomic each) for the zones of the table it serves, once per table
//! swap, and increments those.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use crate::demand::{DnsDemand, LocalDemand};
use crate::table::AnswerTable;
use crate::wire::Answered;

/// Response codes the server sends, in the order of [`Rcode`]'s discriminants.
const RCODE_NAMES: [&str; 7] = ["NOERROR", "FORMERR", "SERVFAIL", "NXDOMAIN", "NOTIMP", "REFUSED", "BADVERS"];

/// A response code the server sends (extended codes included).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rcode {
    NoError = 0,
    FormErr = 1,
    ServFail = 2,
    NxDomain = 3,
    NotImp = 4,
    Refused = 5,
    BadVers = 6,
}

impl Rcode {
    /// The 12-bit DNS value.
    pub(crate) fn value(self) -> u16 {
        match self {
            Rcode::NoError => 0,
            Rcode::FormErr => 1,
            Rcode::ServFail => 2,
            Rcode::NxDomain => 3,
            Rcode::NotImp => 4,
            Rcode::Refused => 5,
            Rcode::BadVers => 16,
        }
    }

    pub(crate) fn name(self) -> &'static str {
        RCODE_NAMES[self as usize]
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QueryLabels {
    /// The zone that answered; empty when no zone's data answered (REFUSED, FORMERR…).
    zone: String,
    rcode: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LineLabels {
    /// The cluster whose name was asked.
    cluster: String,
    /// The line the client was given (`all`: none matched and there is no default line).
    line: String,
}

/// The DNS server's counters. Create one, [`register`](Self::register) it, and hand an
/// `Arc` of it to [`crate::DnsServer::start`].
#[derive(Debug, Default)]
pub struct DnsMetrics {
    queries: Family<QueryLabels, Counter>,
    lines: Family<LineLabels, Counter>,
    truncated: Counter,
    dropped: Counter,
    demand: DnsDemand,
}

impl DnsMetrics {
    /// New counters, all zero.
    pub fn new() -> Self {
        DnsMetrics::default()
    }

    /// Adds the counters to `registry`: `vantage_dns_queries_total{zone,rcode}`,
    /// `vantage_dns_line_answers_total{cluster,line}`, `vantage_dns_truncated_total`,
    /// `vantage_dns_dropped_total` and `vantage_dns_demand_unattributed_total`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "vantage_dns_queries",
            "DNS queries answered, by zone (empty: answered from no zone) and response code",
            self.queries.clone(),
        );
        registry.register(
            "vantage_dns_line_answers",
            "Address answers (A, AAAA, ANY) of a cluster's names given whole (a truncated UDP answer is counted when its TCP retry is answered), by the line the client was given (all: no line matched and there is no default line)",
            self.lines.clone(),
        );
        registry.register(
            "vantage_dns_truncated",
            "UDP answers sent truncated (TC) because they exceeded 512 bytes or the EDNS size",
            self.truncated.clone(),
        );
        registry.register(
            "vantage_dns_dropped",
            "Datagrams dropped without an answer (not a query, or too short to answer)",
            self.dropped.clone(),
        );
        registry.register(
            "vantage_dns_demand_unattributed",
            "Address answers left out of demand by region: their client's network found the bound of networks counted between two hand-overs (16,384) full",
            self.demand.unattributed.clone(),
        );
    }

    /// Queries answered for `zone` (empty: from no zone) with `rcode` (`NOERROR`, `NXDOMAIN`…).
    pub fn queries(&self, zone: &str, rcode: &str) -> u64 {
        self.queries.get_or_create(&QueryLabels { zone: zone.to_owned(), rcode: rcode.to_owned() }).get()
    }

    /// Address answers of `cluster`'s names that gave the client `line`.
    pub fn line_answers(&self, cluster: &str, line: &str) -> u64 {
        self.lines.get_or_create(&LineLabels { cluster: cluster.to_owned(), line: line.to_owned() }).get()
    }

    /// Truncated UDP answers.
    pub fn truncated(&self) -> u64 {
        self.truncated.get()
    }

    /// Dropped datagrams.
    pub fn dropped(&self) -> u64 {
        self.dropped.get()
    }

    pub(crate) fn counter(&self, zone: &str, rcode: Rcode) -> Counter {
        self.queries
            .get_or_create_owned(&QueryLabels { zone: zone.to_owned(), rcode: rcode.name().to_owned() })
    }

    fn line_counter(&self, cluster: &str, line: &str) -> Counter {
        self.lines.get_or_create_owned(&LineLabels { cluster: cluster.to_owned(), line: line.to_owned() })
    }

    /// The address answers by the network that chose their line, not yet taken.
    pub fn demand(&self) -> &DnsDemand {
        &self.demand
    }

    /// Counts one answer the slow way (the TCP path): a family lookup per call.
    pub(crate) fn count(&self, table: &AnswerTable, a: &Answered) {
        let zone = a.zone.and_then(|z| table.zones.get(z as usize)).map_or("", |z| z.label.as_str());
        self.counter(zone, a.rcode).inc();
        if let Some(given) = a.line {
            if let Some((cluster, line)) = table.line_name(given.steering, given.choice) {
                self.line_counter(cluster, line).inc();
            }
            if let Some(client) = given.demand {
                self.demand.add(client);
            }
        }
    }

    pub(crate) fn truncated_counter(&self) -> &Counter {
        &self.truncated
    }

    pub(crate) fn dropped_counter(&self) -> &Counter {
        &self.dropped
    }
}

/// Counter handles for one answer table: NOERROR and NXDOMAIN per zone, every code for
/// answers given from no zone, address answers per cluster and line. Built once per table
/// swap by each worker. The worker's demand counts live here too, kept across swaps.
#[derive(Debug)]
pub(crate) struct TableCounters {
    generation: u64,
    zones: Vec<[Counter; 2]>,
    /// By steering, then choice.
    lines: Vec<Vec<Counter>>,
    other: Vec<Counter>,
    truncated: Counter,
    dropped: Counter,
    demand: LocalDemand,
}

impl TableCounters {
    pub(crate) fn new(metrics: &DnsMetrics, table: &AnswerTable) -> Self {
        let zones = table
            .zone_names()
            .iter()
            .map(|z| [metrics.counter(z, Rcode::NoError), metrics.counter(z, Rcode::NxDomain)])
            .collect();
        let lines = table
            .line_names()
            .map(|(cluster, names)| names.iter().map(|l| metrics.line_counter(cluster, l)).collect())
            .collect();
        let other = [
            Rcode::NoError,
            Rcode::FormErr,
            Rcode::ServFail,
            Rcode::NxDomain,
            Rcode::NotImp,
            Rcode::Refused,
            Rcode::BadVers,
        ]
        .iter()
        .map(|r| metrics.counter("", *r))
        .collect();
        TableCounters {
            generation: table.generation(),
            zones,
            lines,
            other,
            truncated: metrics.truncated_counter().clone(),
            dropped: metrics.dropped_counter().clone(),
            demand: LocalDemand::new(),
        }
    }

    /// The counters of a new `table`, with the demand counted so far.
    pub(crate) fn renew(self, metrics: &DnsMetrics, table: &AnswerTable) -> Self {
        TableCounters { demand: self.demand, ..TableCounters::new(metrics, table) }
    }

    pub(crate) fn generation(&self) -> u64 {
        self.generation
    }

    /// Counts one answer.
    pub(crate) fn count(&mut self, a: &Answered, metrics: &DnsMetrics) {
        let Answered { zone, line, rcode, truncated } = *a;
        if let Some(given) = line {
            if let Some(c) =
                self.lines.get(given.steering as usize).and_then(|l| l.get(given.choice as usize))
            {
                c.inc();
            }
            if let Some(client) = given.demand {
                self.demand.add(client, &metrics.demand);
            }
        }
        let zone_counter = zone.and_then(|z| self.zones.get(z as usize)).and_then(|c| match rcode {
            Rcode::NoError => Some(&c[0]),
            Rcode::NxDomain => Some(&c[1]),
            _ => None,
        });
        match zone_counter {
            Some(c) => {
                c.inc();
            }
            None => {
                if let Some(c) = self.other.get(rcode as usize) {
                    c.inc();
                }
            }
        }
        if truncated {
            self.truncated.inc();
        }
    }

    pub(crate) fn count_dropped(&self) {
        self.dropped.inc();
    }

    /// Hands the demand counted to `metrics` when it is due (once a second).
    pub(crate) fn merge_demand(&mut self, metrics: &DnsMetrics) {
        self.demand.merge_if_due(&metrics.demand);
    }
}
