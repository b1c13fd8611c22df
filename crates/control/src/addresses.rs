//! The cluster addresses' book: every prober's latest result for each address and listener
//! (what a cluster pass reads: the pass is this book's verdict, run on the cluster's timer),
//! the attempt rates each `ip:port` receives, and the certificates the probers saw.

use std::collections::BTreeMap;
use std::collections::hash_map::Entry;
use std::net::IpAddr;
use std::sync::Arc;

use vantage_core::Timestamp;
use vantage_core::evaluate::FastMap;
use vantage_core::reachability::sees_failing;
use vantage_core::wire;

use crate::alerts::{AlertAbout, AlertKey, AlertKind, CertificateExpiry, Firing};
use crate::book::{Asking, Finding, Records, Reported, SubjectBook, Took, Work};
use crate::config::Config;
use crate::control::{Output, Upkeep};
use crate::expiry::Expiry;
use crate::identity::Caller;
use crate::observe::{Given, Latest};
use crate::rates::ProbeRates;
use crate::seen::{ProberTable, Seen};
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

/// Latest results by address and listener, then by the prober that probed it.
pub type Results = FastMap<TargetKey, FastMap<Caller, Latest>>;

/// The cluster addresses' book.
#[derive(Debug, Default)]
pub struct Addresses {
    /// The core's fast hasher: keys are ids and addresses the server handed out, never chosen
    /// by a peer (a report may carry only issued targets), and every report looks up
    /// thousands.
    results: Results,
    /// What a pass reads of them: each address's observations, kept in place as results
    /// arrive, indexed by `table`.
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
}

impl Addresses {
    /// An empty book whose certificates alert `certificate_warning_days` before they expire.
    pub fn new(certificate_warning_days: u64) -> Addresses {
        Addresses { certificate_warning_days, ..Addresses::default() }
    }

    /// A stored latest result, at start.
    pub(crate) fn restore(&mut self, key: TargetKey, caller: Caller, latest: Latest) {
        self.results.entry(key).or_default().insert(caller, latest);
    }

    /// Every latest result.
    pub fn results(&self) -> &Results {
        &self.results
    }

    /// Indexes every latest result by the probers of `c`, built afresh (at a start, and when
    /// the table is worn), by when it expires and by its certificate.
    pub(crate) fn start(&mut self, c: &Config) {
        let mut table = ProberTable::of(c);
        for (key, per) in &self.results {
            for caller in per.keys() {
                table.place_of(*caller);
            }
            if let Some(due) = falls_due(per) {
                self.expiry.file(*key, due);
            }
        }
        self.table = Arc::new(table);
        self.seen = Seen::of(&self.results, &self.table);
        self.count_certificates();
    }

    /// Every target's earliest certificate expiry, counted afresh.
    fn count_certificates(&mut self) {
        let mut out = BTreeMap::new();
        for (key, per) in &self.results {
            if let Some(t) = earliest_certificate(per) {
                out.insert(*key, t);
            }
        }
        self.certificates = Arc::new(out);
    }

    /// `key`'s earliest certificate expiry, counted again from its results.
    fn recount_certificate(&mut self, key: TargetKey) {
        let earliest = self.results.get(&key).and_then(earliest_certificate);
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

    /// What a pass reads of `node`'s address `ip` on the cluster's `ports`.
    pub(crate) fn observations(
        &self,
        node: vantage_core::ids::NodeId,
        ip: IpAddr,
        ports: &[u16],
    ) -> vantage_core::reachability::Observations {
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

/// When a target's oldest result turns stale (none without results).
fn falls_due(per: &FastMap<Caller, Latest>) -> Option<Timestamp> {
    per.values().map(|l| l.at).min().map(|oldest| oldest.plus_millis(LATEST_KEPT_MS))
}

/// The earliest certificate expiry a target's results saw.
fn earliest_certificate(per: &FastMap<Caller, Latest>) -> Option<Timestamp> {
    per.values().filter_map(|l| l.cert_not_after).min()
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
        work.given.issued = keys;
        work.given.aliases = aliases;
    }

    /// Results not updated for an hour go: here, the targets that fell due; in the store,
    /// once a minute, when the certificates the probers saw are looked at too.
    fn sweep(&mut self, c: &Config, now: Timestamp) -> Vec<Finding> {
        let before = now.plus_millis(-LATEST_KEPT_MS);
        let most = DUE_PER_SWEEP.max(self.results.len() / 60);
        for key in self.expiry.take_due(now, most) {
            let Some(per) = self.results.get_mut(&key) else { continue };
            let (table, seen) = (&self.table, &mut self.seen);
            let mut certificate_gone = false;
            per.retain(|caller, l| {
                let kept = l.at >= before;
                if !kept {
                    certificate_gone |= l.cert_not_after.is_some();
                    if let Some(&p) = table.index.get(caller) {
                        seen.remove(key, p);
                    }
                }
                kept
            });
            match falls_due(per) {
                Some(due) => self.expiry.file(key, due),
                None => {
                    self.results.remove(&key);
                }
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
        if !self.seen.made_any(p) {
            return;
        }
        self.seen.forget(p);
        let mut certificates = Vec::new();
        for (key, per) in &mut self.results {
            if per.remove(&caller).is_some_and(|l| l.cert_not_after.is_some()) {
                certificates.push(*key);
            }
        }
        self.results.retain(|_, per| !per.is_empty());
        for key in certificates {
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

    fn given(given: &Given, key: &TargetKey) -> bool {
        given.issued.contains(key)
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
            let per = self.results.entry(*k).or_default();
            if per.is_empty() {
                self.expiry.file(*k, now.plus_millis(LATEST_KEPT_MS));
            }
            let slot = per.entry(r.caller);
            let prev = match &slot {
                Entry::Occupied(o) => Some(o.get()),
                Entry::Vacant(_) => None,
            };
            let was_failing = prev.map(|l| sees_failing(l.sent, l.lost, &c.settings));
            // What the check assumes of a target first seen: looked up only then (it walks the
            // cluster's check, and most results follow one before).
            let initial = if prev.is_none() { c.initial_of(*k) } else { 0 };
            let certificate_before = prev.and_then(|l| l.cert_not_after);
            let mut latest = Latest::after(res, now, prev, initial);
            latest.failed_at = failed_at;
            if *k == key
                && was_failing.is_some_and(|w| w != sees_failing(latest.sent, latest.lost, &c.settings))
            {
                took.findings.push(Finding::Confirm { key, from: r.caller });
            }
            self.seen.put(*k, place, &latest);
            let certificate = latest.cert_not_after;
            slot.insert_entry(latest.clone());
            took.rows.push((Subject::Address(*k), latest));
            if certificate != certificate_before {
                self.certificate_seen(*k, certificate_before, certificate);
            }
            took.node_moved(c, k.node);
        }
    }
}
