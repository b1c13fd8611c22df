//! The cluster addresses' book: every prober's latest result for each address and listener
//! (what a cluster pass reads: the pass is this book's verdict, run on the cluster's timer),
//! the attempt rates each `ip:port` receives, and the certificates the probers saw.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;

use vantage_core::Timestamp;
use vantage_core::evaluate::FastMap;
use vantage_core::ids::NodeId;
use vantage_core::reachability::sees_failing;
use vantage_core::wire;

use crate::alerts::{AlertAbout, AlertKey, AlertKind, CertificateExpiry, Firing};
use crate::book::{Asking, Finding, GivenAs, Records, Reported, SubjectBook, Took, Work};
use crate::config::Config;
use crate::control::{Output, Upkeep};
use crate::expiry::Expiry;
use crate::identity::Caller;
use crate::issued::Keys;
use crate::observe::{Given, Latest};
use crate::rates::ProbeRates;
pub use crate::seen::RECORD_BYTES;
use crate::seen::{ProberTable, Put, Seen};
use crate::target::{Subject, TargetKey};
use crate::work::{Issued, TcpFallback, targets};

/// Latest results not updated for this long are deleted (SPEC §8).
const LATEST_KEPT_MS: i64 = 3_600_000;
/// The store's expiry of latest results, and the certificates' look, run this often.
const EXPIRE_EVERY_S: u64 = 60;
/// Targets whose results expire are looked at in sweeps of at most this many, or a sixtieth
/// of every target if more: a whole fleet falling due together (an hour after a start) is
/// looked at over about ten minutes of sweeps, never in one.
const DUE_PER_SWEEP: usize = 4_096;
const DAY_MS: i64 = 86_400_000;

/// Every latest result, read through the book: kept by address, one record per result,
/// each caller named by its place in the prober table.
#[derive(Debug, Clone, Copy)]
pub struct Results<'a> {
    seen: &'a Seen,
    table: &'a ProberTable,
}

impl<'a> Results<'a> {
    /// Who is at `place`.
    fn caller(&self, place: u32) -> Caller {
        // Every place a result names was given by the table.
        debug_assert!((place as usize) < self.table.callers.len(), "place {place} has a caller");
        self.table.callers.get(place as usize).copied().unwrap_or(Caller::Node(NodeId(0)))
    }

    /// The latest results of `key`, each with its caller.
    pub fn of(self, key: &TargetKey) -> impl Iterator<Item = (Caller, Latest)> + 'a {
        self.seen.of_target(*key).map(move |(p, l)| (self.caller(p), l))
    }

    /// Every latest result, by target and caller.
    pub fn iter(self) -> impl Iterator<Item = (TargetKey, Caller, Latest)> + 'a {
        self.seen.all().map(move |(k, p, l)| (k, self.caller(p), l))
    }

    /// The latest results `caller` made, by target.
    pub fn of_caller(self, caller: Caller) -> impl Iterator<Item = (TargetKey, Latest)> + 'a {
        let place = self.table.index.get(&caller).copied();
        place.into_iter().flat_map(move |p| self.seen.of_place(p))
    }

    /// The latest results of `node`'s addresses, by target and caller.
    pub fn of_node(self, node: NodeId) -> impl Iterator<Item = (TargetKey, Caller, Latest)> + 'a {
        self.seen.of_node(node).map(move |(k, p, l)| (k, self.caller(p), l))
    }

    /// Targets (an address and a port) with a result.
    pub fn targets(self) -> usize {
        self.seen.targets()
    }

    /// Whether there is no result.
    pub fn is_empty(self) -> bool {
        self.seen.targets() == 0
    }
}

/// The cluster addresses' book.
#[derive(Debug, Default)]
pub struct Addresses {
    /// Stored latest results, until [`start`](Self::start) places their callers.
    restored: Vec<(TargetKey, Caller, Latest)>,
    /// Every latest result and what a pass reads of it, kept by address as results arrive,
    /// their callers indexed by `table`.
    seen: Seen,
    table: Arc<ProberTable>,
    rates: ProbeRates,
    /// When each target's results fall due for expiry.
    expiry: Expiry,
    /// Each HTTPS target's earliest certificate expiry any prober saw, kept as results arrive
    /// and go (shared with the published figures).
    certificates: Arc<BTreeMap<TargetKey, Timestamp>>,
    /// An edge certificate expiring within this many days alerts.
    certificate_warning_days: u64,
    /// When the store's results next expire (`None`: at the first sweep).
    next_expiry: Option<Timestamp>,
    /// The index the works' keys are given over.
    keys: Keys,
}

impl Addresses {
    /// An empty book whose certificates alert `certificate_warning_days` before they expire.
    pub fn new(certificate_warning_days: u64) -> Addresses {
        Addresses { certificate_warning_days, ..Addresses::default() }
    }

    /// A stored latest result, at start.
    pub(crate) fn restore(&mut self, key: TargetKey, caller: Caller, latest: Latest) {
        self.restored.push((key, caller, latest));
    }

    /// Every latest result.
    pub fn results(&self) -> Results<'_> {
        Results { seen: &self.seen, table: &self.table }
    }

    /// Indexes every latest result by the probers of `c`, built afresh (at a start, and when
    /// the table is worn), by when it expires and by its certificate.
    pub(crate) fn start(&mut self, c: &Config) {
        let mut rows = std::mem::take(&mut self.restored);
        let before = &self.table.callers;
        let kept = std::mem::take(&mut self.seen).into_rows();
        rows.extend(kept.into_iter().filter_map(|(k, p, l)| Some((k, *before.get(p as usize)?, l))));
        let mut table = ProberTable::of(c);
        let mut oldest: FastMap<TargetKey, Timestamp> = FastMap::default();
        let placed = (rows.into_iter())
            .map(|(key, caller, latest)| {
                let t = oldest.entry(key).or_insert(latest.at);
                *t = (*t).min(latest.at);
                (key, table.place_of(caller), latest)
            })
            .collect();
        for (key, t) in oldest {
            self.expiry.file(key, t.plus_millis(LATEST_KEPT_MS));
        }
        self.table = Arc::new(table);
        self.seen = Seen::of(placed);
        self.count_certificates();
    }

    /// Every target's earliest certificate expiry, counted afresh.
    fn count_certificates(&mut self) {
        let mut out: BTreeMap<TargetKey, Timestamp> = BTreeMap::new();
        for (key, _, latest) in self.seen.all() {
            if let Some(t) = latest.cert_not_after {
                let e = out.entry(key).or_insert(t);
                *e = (*e).min(t);
            }
        }
        self.certificates = Arc::new(out);
    }

    /// `key`'s earliest certificate expiry, counted again from its results.
    fn recount_certificate(&mut self, key: TargetKey) {
        let earliest = self.seen.of_target(key).filter_map(|(_, l)| l.cert_not_after).min();
        let certificates = Arc::make_mut(&mut self.certificates);
        match earliest {
            Some(t) => certificates.insert(key, t),
            None => certificates.remove(&key),
        };
    }

    /// A result of `key` saw certificate `now_seen` where it saw `before`: the earliest
    /// moves without looking at the others, unless the one it held went.
    fn certificate_seen(&mut self, key: TargetKey, before: Option<Timestamp>, now_seen: Option<Timestamp>) {
        let earliest = self.certificates.get(&key).copied();
        match now_seen {
            Some(t) if earliest.is_none_or(|e| t < e) => {
                Arc::make_mut(&mut self.certificates).insert(key, t);
            }
            _ if before.is_some() && before == earliest => self.recount_certificate(key),
            _ => {}
        }
    }

    /// The probers of a new configuration `c` take their places: the table keeps every place
    /// it has, unless it is worn, when it and the observations are built afresh.
    pub(crate) fn follow_config(&mut self, c: &Config) {
        let next = self.table.follow(c);
        if next.worn() {
            self.start(c);
        } else {
            self.table = Arc::new(next);
        }
    }

    /// Every address's observations kept in place (for the test that rebuilds them).
    #[cfg(test)]
    pub(crate) fn seen(&self) -> &Seen {
        &self.seen
    }

    /// The prober table the observations are indexed by.
    pub(crate) fn table(&self) -> &Arc<ProberTable> {
        &self.table
    }

    /// Reads what recording a result of `caller` for `key` will touch first, returning a
    /// figure of it only so that the reads are made: at a fleet's scale each is a cache miss,
    /// and a report's results read ahead a few at a time wait for them together (issue 32).
    pub(crate) fn touch(&self, key: &TargetKey, caller: Caller) -> u64 {
        let Some(place) = self.table.index.get(&caller) else { return 0 };
        self.rates.touch(key.ip, key.port) ^ self.seen.touch(*key, *place)
    }

    /// Reads what [`observations`](Self::observations) of `node`'s address `ip` reads first,
    /// returning a figure of it only so that the reads are made (see [`touch`](Self::touch)).
    pub(crate) fn touch_address(&self, node: NodeId, ip: IpAddr) -> u64 {
        self.seen.touch_address(node, ip)
    }

    /// What a pass reads of `node`'s address `ip` on the cluster's `ports`.
    pub(crate) fn observations(
        &self,
        node: NodeId,
        ip: IpAddr,
        ports: &[u16],
    ) -> std::borrow::Cow<'_, vantage_core::reachability::Observations> {
        self.seen.of_address(node, ip, ports)
    }

    /// Attempts per second each `ip:port` received over the last minute, from every prober.
    pub fn probe_rates(&self, now: Timestamp) -> Vec<(std::net::SocketAddr, f64)> {
        self.rates.rates(now)
    }

    /// When each HTTPS target's certificate expires, as the probers last saw it (the earliest
    /// any of them saw, so that an edge serving an old certificate to some is not hidden).
    pub fn certificate_expiries(&self) -> &Arc<BTreeMap<TargetKey, Timestamp>> {
        &self.certificates
    }

    /// Certificates that expire within the warning window alert until they are renewed (or
    /// the target is gone); one alert per target.
    fn certificates(&self, c: &Config, now: Timestamp) -> Vec<Finding> {
        let window_ms =
            i64::try_from(self.certificate_warning_days).map_or(i64::MAX, |d| d.saturating_mul(DAY_MS));
        let key = |target: TargetKey| {
            AlertKey::new(AlertKind::CertificateExpiring, AlertAbout::Certificate(target))
        };
        let expiring = &self.certificates;
        let mut out = Vec::new();
        for (target, not_after) in expiring.iter() {
            if not_after.millis_since(now) > window_ms {
                out.push(Finding::Resolve(key(*target)));
                continue;
            }
            let node = c.node_name(target.node);
            let days = not_after.millis_since(now).div_euclid(DAY_MS);
            let summary = if days < 0 {
                format!("certificate of {node} ({}:{}) expired at {not_after}", target.ip, target.port)
            } else {
                format!(
                    "certificate of {node} ({}:{}) expires in {days} days, at {not_after}",
                    target.ip, target.port
                )
            };
            let details = CertificateExpiry {
                node,
                address: target.ip.to_string(),
                port: target.port,
                not_after: *not_after,
            };
            out.push(Finding::Fire(Firing::CertificateExpiring { target: *target, details }, summary));
        }
        // The open alerts of targets gone since (their key names the target).
        out.push(Finding::OnlyOpen {
            kind: AlertKind::CertificateExpiring,
            keep: expiring.keys().map(|t| key(*t)).collect(),
            about: |s| s.parse().ok().map(AlertAbout::Certificate),
        });
        out
    }
}

impl SubjectBook for Addresses {
    fn issue(&mut self, asking: &Asking, work: &mut Work) {
        let (c, agents) = (asking.config, asking.agents);
        let Issued { checks, targets, keys, aliases } = targets(
            c,
            asking.caller,
            |n| agents.get(&n).map(|r| r.addresses.clone()),
            |cluster| TcpFallback::of(c, cluster, agents, asking.now).is_some(),
            asking.policy,
            asking.spread,
        );
        // Its targets index its checks from 0: placed after any a book before added.
        let base = u32::try_from(work.checks.len()).unwrap_or(u32::MAX);
        work.checks.extend(checks);
        work.targets
            .extend(targets.into_iter().map(|t| wire::Target { check: t.check.saturating_add(base), ..t }));
        work.given.issued = self.keys.give(&keys, asking.now);
        work.given.aliases = aliases;
    }

    /// Results not updated for an hour go: here, the targets that fell due; in the store,
    /// once a minute, when the certificates the probers saw are looked at too.
    fn sweep(&mut self, c: &Config, now: Timestamp) -> Vec<Finding> {
        let before = now.plus_millis(-LATEST_KEPT_MS);
        let most = DUE_PER_SWEEP.max(self.seen.targets() / 60);
        for key in self.expiry.take_due(now, most) {
            let (certificate_gone, due) = self.seen.expire(key, before, LATEST_KEPT_MS);
            if let Some(due) = due {
                self.expiry.file(key, due);
            }
            if certificate_gone {
                self.recount_certificate(key);
            }
        }
        if self.next_expiry.is_some_and(|t| now < t) {
            return Vec::new();
        }
        self.rates.prune(now);
        self.next_expiry = Some(now.plus_secs(EXPIRE_EVERY_S));
        let mut out = vec![Finding::Upkeep(Upkeep::ExpireResults { before })];
        out.extend(self.certificates(c, now));
        out
    }

    /// Nothing to follow: the results of addresses a change removed expire, and the clusters
    /// it touches are evaluated by the change itself.
    fn follow(&mut self, _: &Config, _: Timestamp) -> Vec<Finding> {
        Vec::new()
    }

    /// Walks the results only when the caller has any: every caller with a result has a place
    /// and made an observation of it.
    fn forget(&mut self, caller: Caller) {
        let Some(&p) = self.table.index.get(&caller) else { return };
        for key in self.seen.forget(p) {
            self.recount_certificate(key);
        }
    }

    /// Results are stored as they come ([`Took::rows`]); each cluster's evaluator state is
    /// saved by its pass.
    fn take_save(&mut self, _: Timestamp) -> Option<Output> {
        None
    }
}

impl Records for Addresses {
    type Key = TargetKey;

    fn given(given: &Given, key: &TargetKey) -> Option<GivenAs> {
        given.issued.place(key).map(GivenAs::At)
    }

    /// The result becomes the latest under its key and every alias the caller was given it
    /// for; its window register advances from the one before. A change of what the caller
    /// sees asks the others to confirm; the node's cluster is evaluated soon.
    fn record(&mut self, c: &Config, key: &TargetKey, r: Reported, took: &mut Took) {
        let (key, res, now) = (*key, r.result, r.now);
        self.rates.record(key.ip, key.port, res.sent(), now);
        let failed_at = crate::observe::failed_at(r.report, res, now);
        let aliases = r.given.aliases.get(&key).into_iter().flatten();
        let place = match self.table.index.get(&r.caller) {
            Some(p) => *p,
            None => Arc::make_mut(&mut self.table).place_of(r.caller),
        };
        for k in std::iter::once(&key).chain(aliases) {
            let (mut was_failing, mut certificate_before) = (None, None);
            let room = || expected_results(c, &self.table, k.node);
            let put = self.seen.put(*k, place, room, |prev| {
                was_failing = prev.map(|l| sees_failing(l.sent, l.lost, &c.settings));
                certificate_before = prev.and_then(|l| l.cert_not_after);
                // What the check assumes of a target first seen: looked up only then (it walks
                // the cluster's check, and most results follow one before).
                let initial = if prev.is_none() { c.initial_of(*k) } else { 0 };
                let mut latest = Latest::after(res, now, prev, initial);
                latest.failed_at = failed_at;
                latest
            });
            let Put { latest, first_of_target } = put;
            if first_of_target {
                self.expiry.file(*k, now.plus_millis(LATEST_KEPT_MS));
            }
            if *k == key
                && was_failing.is_some_and(|w| w != sees_failing(latest.sent, latest.lost, &c.settings))
            {
                took.findings.push(Finding::Confirm { key, from: r.caller });
            }
            let certificate = latest.cert_not_after;
            took.rows.push((Subject::Address(*k), latest));
            if certificate != certificate_before {
                self.certificate_seen(*k, certificate_before, certificate);
            }
            took.node_moved(c, k.node);
        }
    }
}

/// How many results an address of `node` will hold: one on each listener of its cluster
/// from every prober that probes it — each counting caller, within the probe budget. Counted
/// over the configured callers, not the online ones (`Spread::per_address_of`, which a pass
/// asks): the room is made once, and a prober offline at that moment reports later.
fn expected_results(c: &Config, table: &ProberTable, node: NodeId) -> usize {
    let probers = table.counting().min(c.probers_per_target());
    let cluster = c.nodes.get(&node.0).and_then(|n| c.clusters.get(&n.value.cluster.0));
    probers * cluster.map_or(0, |cl| cl.value.listeners.len())
}

#[cfg(test)]
mod tests {
    use vantage_core::Timestamp;

    use super::*;
    use crate::fixtures::large_fleet;
    use crate::{Control, Start};

    /// A node's address is given room for one result on each listener from each counting
    /// prober within the probe budget (33 of 40 with the default budget), and an address of
    /// a node the configuration does not hold none.
    #[test]
    fn room_for_the_probers_within_the_budget_on_each_listener() {
        for (probers, each) in [(5, 5), (40, 33)] {
            let now = Timestamp::from_secs(1_800_000_000);
            let mut control = Control::new(Start::default(), now);
            control.handle_change(large_fleet(2, probers).puts, Vec::new(), now);
            let (c, table) = (control.config(), control.addresses().table().clone());
            let first_node = NodeId(101 + probers);
            assert_eq!(expected_results(&c, &table, first_node), each * 2, "{probers} probers");
            assert_eq!(expected_results(&c, &table, NodeId(99_999)), 0);
        }
    }
}
