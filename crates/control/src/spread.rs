//! How the probers share the fleet's targets and the interval: which probers probe a target
//! when more would exceed the probe budget, and when each prober's rounds start.
//!
//! Every counting prober that is online (enabled probers, nodes that probe; a window of
//! offline probers would leave an address unprobed) takes a place in one order that
//! interleaves the regions (the first of each region, then the second of each…). A target over
//! budget is probed by a window of consecutive places, starting where its address hashes to,
//! so the window holds every region about equally and the same `ip:port` gets the same
//! probers whichever cluster lists it. A prober's phase is its place times a stride coprime
//! with the number of probers, over the interval: the phases are evenly spaced, and any window
//! of places is spread over the whole interval rather than bunched in one part of it.

use std::collections::BTreeMap;
use std::net::IpAddr;

use vantage_core::evaluate::FastMap;
use vantage_core::ids::{NodeId, ProberId, RegionId};

use crate::config::Config;
use crate::identity::Caller;

/// The places of the counting probers, for one configuration.
#[derive(Debug, Clone)]
pub struct Spread {
    /// Looked up twice for every target of a work: hashed with the core's fast hasher.
    place: FastMap<Caller, usize>,
    /// Probers per target within the budget.
    window: usize,
    stride: usize,
}

impl Spread {
    /// The places of `c`'s counting probers for which `online` holds.
    pub fn of(c: &Config, online: impl Fn(Caller) -> bool) -> Spread {
        let mut by_region: BTreeMap<RegionId, Vec<Caller>> = BTreeMap::new();
        for (id, p) in &c.probers {
            let caller = Caller::Prober(ProberId(*id));
            if p.value.enabled && online(caller) {
                by_region.entry(p.value.region).or_default().push(caller);
            }
        }
        // Most nodes do not probe: their own flag rules them out before any look-up (at 10,000
        // nodes this loop was 8 % of the core's time in creating nodes).
        for id in c.nodes.iter().filter(|(_, n)| n.value.node.also_probes).map(|(id, _)| id) {
            let node = Caller::Node(NodeId(*id));
            if let Some(region) = c.region_of(node)
                && c.node_probes(NodeId(*id))
                && online(node)
            {
                by_region.entry(region).or_default().push(node);
            }
        }
        let mut order = Vec::new();
        let deepest = by_region.values().map(Vec::len).max().unwrap_or(0);
        for i in 0..deepest {
            order.extend(by_region.values().filter_map(|v| v.get(i)).copied());
        }
        let n = order.len();
        Spread {
            place: order.into_iter().enumerate().map(|(i, c)| (c, i)).collect(),
            window: c.probers_per_target(),
            stride: stride(n),
        }
    }

    /// How many probers probe each target: every counting prober online, within the budget.
    pub fn per_target(&self) -> usize {
        self.window.min(self.place.len())
    }

    /// How many probers probe an address of the node `own`: those of
    /// [`per_target`](Self::per_target), less `own` itself when it would be one of them (a node
    /// never probes its own addresses; over budget, the window is one place longer instead, so
    /// the count stays the budget).
    pub fn per_address_of(&self, own: Caller) -> usize {
        let n = self.place.len();
        if n <= self.window { n - usize::from(self.place.contains_key(&own)) } else { self.window }
    }

    /// Whether `caller` probes `ip:port` of the node `own` (which does not probe itself):
    /// always, unless the probers together would exceed the budget; then only the target's
    /// window does, one place longer when `own` holds a place in it. A caller without a place
    /// (not counting) probes what it is given.
    pub fn probes(&self, caller: Caller, ip: IpAddr, port: u16, own: Caller) -> bool {
        let n = self.place.len();
        if n <= self.window {
            return true;
        }
        let Some(&place) = self.place.get(&caller) else { return true };
        let start = usize::try_from(hash(ip, port) % n as u64).unwrap_or(0);
        let offset = |p: usize| (p + n - start) % n;
        let window =
            self.window + usize::from(self.place.get(&own).is_some_and(|&p| offset(p) < self.window));
        offset(place) < window
    }

    /// When `caller`'s rounds start within an interval of `interval_s`, ms.
    pub fn phase_ms(&self, caller: Caller, interval_s: u32) -> Option<u64> {
        let n = self.place.len() as u64;
        let place = *self.place.get(&caller)? as u64;
        let slot = (place * self.stride as u64) % n;
        Some(slot * u64::from(interval_s) * 1000 / n)
    }
}

/// The stride of the phases: the integer nearest `n` / φ that is coprime with `n`.
fn stride(n: usize) -> usize {
    if n < 3 {
        return 1;
    }
    let mut s = ((n as f64) * 0.618_034).round() as usize;
    while gcd(s, n) != 1 {
        s += 1;
    }
    s
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// FNV-1a over the address and port: stable across processes and versions, so a restart
/// keeps every target's probers.
fn hash(ip: IpAddr, port: u16) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let bytes = match ip {
        IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
        IpAddr::V6(v6) => v6.octets(),
    };
    for b in bytes.iter().chain(&port.to_be_bytes()) {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strides_are_coprime_and_phases_evenly_spaced() {
        for n in 1..60 {
            let s = stride(n);
            assert_eq!(gcd(s, n.max(1)), 1, "n = {n}");
            let mut slots: Vec<usize> = (0..n).map(|p| (p * s) % n).collect();
            slots.sort_unstable();
            assert_eq!(slots, (0..n).collect::<Vec<_>>(), "a permutation, n = {n}");
        }
        assert_eq!(stride(3), 2);
    }
}
