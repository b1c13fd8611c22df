//! Where the address queries of cluster names come from, for demand by region (SPEC §10a).
//!
//! The server knows no regions: it counts each steered address answer by the network that
//! chose its line — the client subnet's when the query names one, else the resolver's address
//! — cut to a /24 (IPv4) or a /56 (IPv6), the prefixes resolvers send. Each UDP worker counts
//! into a map of its own (one hash and one addition per answer, no lock, no clock) and merges
//! it into the shared [`DnsDemand`] about once a second; the control plane [`take`]s the
//! counts every few seconds and places each prefix in a region once, off the query path.
//!
//! [`take`]: DnsDemand::take

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use foldhash::fast::FixedState;
use prometheus_client::metrics::counter::Counter;

/// Distinct prefixes held between two takes; answers from further ones are counted as
/// unattributed (a bound on memory and on the work of placing them).
const MAX_PREFIXES: usize = 16_384;
/// How often a worker merges its counts into the shared ones.
const MERGE_EVERY: Duration = Duration::from_secs(1);

/// The prefix an answer is counted under (an IPv4 client of a dual-stack socket, given as
/// IPv4-mapped IPv6, as the IPv4 address it is).
pub(crate) fn prefix(ip: IpAddr) -> IpAddr {
    let ip = ip.to_canonical();
    vantage_core::net::mask(ip, if ip.is_ipv4() { 24 } else { 56 })
}

type Counts = HashMap<IpAddr, u64, FixedState>;

/// The counts of every worker not yet taken, by prefix.
#[derive(Debug, Default)]
pub struct DnsDemand {
    counts: Mutex<Counts>,
    /// Answers whose prefix found the map full (`vantage_dns_demand_unattributed_total`).
    pub(crate) unattributed: Counter,
}

impl DnsDemand {
    /// The answers counted since the last take, by prefix (each the network address of a /24
    /// or /56).
    pub fn take(&self) -> Vec<(IpAddr, u64)> {
        let counts = std::mem::take(&mut *self.counts.lock().unwrap_or_else(PoisonError::into_inner));
        counts.into_iter().collect()
    }

    /// Adds one answer chosen by `client` (the TCP path: one lock per answer).
    pub(crate) fn add(&self, client: IpAddr) {
        let mut counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        add_bounded(&mut counts, prefix(client), 1, &self.unattributed);
    }

    fn merge(&self, local: &mut Counts) {
        let mut counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        for (p, n) in local.drain() {
            add_bounded(&mut counts, p, n, &self.unattributed);
        }
    }
}

fn add_bounded(counts: &mut Counts, p: IpAddr, n: u64, unattributed: &Counter) {
    if counts.len() < MAX_PREFIXES || counts.contains_key(&p) {
        *counts.entry(p).or_default() += n;
    } else {
        unattributed.inc_by(n);
    }
}

/// One UDP worker's counts since its last merge.
#[derive(Debug)]
pub(crate) struct LocalDemand {
    counts: Counts,
    merged: Instant,
}

impl LocalDemand {
    pub(crate) fn new() -> Self {
        LocalDemand { counts: Counts::default(), merged: Instant::now() }
    }

    /// Counts one answer chosen by `client`; a prefix the map has no room for is kept for the
    /// shared map to refuse, so the bound is the shared one.
    pub(crate) fn add(&mut self, client: IpAddr, shared: &DnsDemand) {
        let p = prefix(client);
        if self.counts.len() >= MAX_PREFIXES && !self.counts.contains_key(&p) {
            self.merge(shared);
        }
        *self.counts.entry(p).or_default() += 1;
    }

    /// Merges into `shared` when a second has passed since the last merge (called once per
    /// batch of datagrams, and when the socket is idle).
    pub(crate) fn merge_if_due(&mut self, shared: &DnsDemand) {
        if !self.counts.is_empty() && self.merged.elapsed() >= MERGE_EVERY {
            self.merge(shared);
        }
    }

    fn merge(&mut self, shared: &DnsDemand) {
        shared.merge(&mut self.counts);
        self.merged = Instant::now();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn answers_are_counted_by_the_prefix_resolvers_send() {
        let shared = DnsDemand::default();
        let mut local = LocalDemand::new();
        for c in
            ["198.51.100.7", "::ffff:198.51.100.200", "203.0.113.9", "2001:db8:1:2ff::1", "2001:db8:1:200::9"]
        {
            local.add(ip(c), &shared);
        }
        assert_eq!(shared.take(), [], "nothing merged before its second");
        local.merged -= MERGE_EVERY;
        local.merge_if_due(&shared);
        shared.add(ip("203.0.113.250"));
        let mut counts = shared.take();
        counts.sort();
        assert_eq!(
            counts,
            [(ip("198.51.100.0"), 2), (ip("203.0.113.0"), 2), (ip("2001:db8:1:200::"), 2)],
            "a /24 and a /56 each; an IPv4-mapped client as its IPv4 address"
        );
        assert_eq!(shared.unattributed.get(), 0);
        assert_eq!(shared.take(), [], "taken once");
    }

    #[test]
    fn prefixes_past_the_bound_are_counted_as_unattributed() {
        let shared = DnsDemand::default();
        let mut local = LocalDemand::new();
        let nth = |i: usize| IpAddr::from([10, (i >> 8) as u8, i as u8, 1]);
        for i in 0..MAX_PREFIXES + 10 {
            local.add(nth(i), &shared);
        }
        // The local map merged when it filled; the shared one holds the bound.
        local.add(nth(0), &shared);
        local.merged -= MERGE_EVERY;
        local.merge_if_due(&shared);
        let counts = shared.take();
        assert_eq!((counts.len(), shared.unattributed.get()), (MAX_PREFIXES, 10));
        assert_eq!(counts.iter().map(|(_, n)| n).sum::<u64>(), MAX_PREFIXES as u64 + 1, "none lost");
    }
}
