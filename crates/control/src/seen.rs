//! What each cluster address's probers last saw, kept in place as results arrive: the
//! observations a pass reads, shared with it rather than gathered and sorted from every
//! latest result of the fleet at every pass (issue 32). Observations name their prober by its
//! place in the prober table; places are stable across configuration changes (a new prober
//! or node is appended, a gone one leaves an inactive hole), so a change does not touch the
//! observations — until holes outnumber the living, when the table is built afresh and the
//! observations with it.

use std::net::IpAddr;

use vantage_core::evaluate::FastMap;
use vantage_core::ids::{NodeId, ProberId};
use vantage_core::reachability::{Observation, Observations, ProberView};

use crate::config::Config;
use crate::identity::Caller;
use crate::observe::Latest;
use crate::target::TargetKey;

/// Holes a table may hold before it is built afresh, beyond as many as it has living places.
const SPARE_HOLES: usize = 64;

/// The probers observations are indexed by — every prober, then every node that may probe —
/// each with its place.
#[derive(Debug, Clone, Default)]
pub(crate) struct ProberTable {
    /// What the evaluator knows of each, by place; a hole is inactive.
    pub(crate) views: Vec<ProberView>,
    /// Each one's place.
    pub(crate) index: FastMap<Caller, u32>,
    /// Places of callers no longer configured.
    holes: usize,
}

impl ProberTable {
    /// The table of `c`, built afresh.
    pub(crate) fn of(c: &Config) -> ProberTable {
        let mut t = ProberTable::default();
        for (caller, view) in entries(c) {
            t.index.insert(caller, u32::try_from(t.views.len()).unwrap_or(u32::MAX));
            t.views.push(view);
        }
        t
    }

    /// The table of `c` keeping every place of this one: a caller still configured keeps its
    /// place with what is known of it now, a new one is appended, a gone one stays as an
    /// inactive hole (its observations count for nothing until they go).
    pub(crate) fn follow(&self, c: &Config) -> ProberTable {
        let mut next = ProberTable { views: self.views.clone(), index: self.index.clone(), holes: 0 };
        let mut living = vec![false; next.views.len()];
        for (caller, view) in entries(c) {
            let place = match next.index.get(&caller) {
                Some(p) => *p,
                None => {
                    let p = u32::try_from(next.views.len()).unwrap_or(u32::MAX);
                    next.index.insert(caller, p);
                    next.views.push(view);
                    living.push(true);
                    p
                }
            };
            if let Some(v) = next.views.get_mut(place as usize) {
                *v = view;
            }
            if let Some(l) = living.get_mut(place as usize) {
                *l = true;
            }
        }
        for (view, alive) in next.views.iter_mut().zip(&living) {
            if !alive {
                view.active = false;
                next.holes += 1;
            }
        }
        next
    }

    /// Whether the holes outnumber the living places (and the spare): the table is then built
    /// afresh.
    pub(crate) fn worn(&self) -> bool {
        self.holes > SPARE_HOLES + (self.views.len() - self.holes)
    }
}

/// Every caller observations may come from, in the table's order for a fresh one: every
/// prober, then every node in a region (active when it probes).
fn entries(c: &Config) -> Vec<(Caller, ProberView)> {
    let probers = c.probers.iter().map(|(pid, p)| {
        (Caller::Prober(ProberId(*pid)), ProberView { region: p.value.region, active: p.value.enabled })
    });
    let nodes = c.nodes.keys().filter_map(|nid| {
        let node = Caller::Node(NodeId(*nid));
        let region = c.region_of(node)?;
        Some((node, ProberView { region, active: c.node_probes(NodeId(*nid)) }))
    });
    probers.chain(nodes).collect()
}

/// One address's observations, each with the port it was made on.
#[derive(Debug, Clone, Default)]
struct AddressSeen {
    observations: Observations,
    /// The port of each observation, in the same order.
    ports: Vec<u16>,
}

impl AddressSeen {
    /// The place of `prober`'s observation on `port`.
    fn place(&self, prober: u32, port: u16) -> Option<usize> {
        let obs = self.observations.as_slice();
        let from = obs.partition_point(|o| o.prober < prober);
        (from..obs.len()).take_while(|i| obs[*i].prober == prober).find(|i| self.ports[*i] == port)
    }
}

/// Every cluster address's observations, kept as results arrive.
#[derive(Debug, Clone, Default)]
pub(crate) struct Seen {
    by_address: FastMap<(NodeId, IpAddr), AddressSeen>,
}

impl Seen {
    /// The observations of `results` indexed by `table` (at a start, and when the table is
    /// built afresh).
    pub(crate) fn of(results: &crate::addresses::Results, table: &ProberTable) -> Seen {
        let mut seen = Seen::default();
        for (key, per) in results {
            for (caller, latest) in per {
                if let Some(&p) = table.index.get(caller) {
                    seen.put(*key, p, latest);
                }
            }
        }
        seen
    }

    /// `prober`'s latest result for `key`, in place of the one before.
    pub(crate) fn put(&mut self, key: TargetKey, prober: u32, latest: &Latest) {
        let o = Observation {
            prober,
            sent: latest.sent,
            lost: latest.lost,
            rtt_ms: latest.rtt_us.map(|us| us as f32 / 1000.0),
            reported_at: latest.at,
            failed_at: latest.failed_at,
        };
        let a = self.by_address.entry((key.node, key.ip)).or_default();
        match a.place(prober, key.port) {
            Some(i) => {
                a.observations.put(Some(i), o);
            }
            None => {
                if let Some(i) = a.observations.put(None, o) {
                    a.ports.insert(i, key.port);
                }
            }
        }
    }

    /// `prober`'s result for `key` is gone.
    pub(crate) fn remove(&mut self, key: TargetKey, prober: u32) {
        let at = (key.node, key.ip);
        let Some(a) = self.by_address.get_mut(&at) else { return };
        if let Some(i) = a.place(prober, key.port) {
            a.observations.remove(i);
            a.ports.remove(i);
        }
        if a.ports.is_empty() {
            self.by_address.remove(&at);
        }
    }

    /// Every result of `prober` is gone.
    pub(crate) fn forget(&mut self, prober: u32) {
        for a in self.by_address.values_mut() {
            while let Some(i) = a.observations.as_slice().iter().position(|o| o.prober == prober) {
                a.observations.remove(i);
                a.ports.remove(i);
            }
        }
        self.by_address.retain(|_, a| !a.ports.is_empty());
    }

    /// What a pass reads of `node`'s address `ip`: the observations on the cluster's
    /// `ports` — shared as they are, or a copy without those of a port the cluster no longer
    /// listens on (until they expire).
    pub(crate) fn of_address(&self, node: NodeId, ip: IpAddr, ports: &[u16]) -> Observations {
        let Some(a) = self.by_address.get(&(node, ip)) else { return Observations::default() };
        if a.ports.iter().all(|p| ports.contains(p)) {
            return a.observations.clone();
        }
        let kept = (a.observations.as_slice().iter().zip(&a.ports))
            .filter(|(_, p)| ports.contains(p))
            .map(|(o, _)| *o)
            .collect();
        Observations::new(kept)
    }
}

#[cfg(test)]
mod tests {
    use vantage_core::Timestamp;
    use vantage_core::result::{Attempt, ErrorCode, Stages};

    use super::*;
    use crate::config::{Object, ProberRecord};
    use crate::fixtures::{good_round, large_fleet};
    use crate::{Control, Start};

    /// A small deterministic generator (xorshift), so a failure replays.
    struct Dice(u64);

    impl Dice {
        fn roll(&mut self, n: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 % n
        }
    }

    /// Each address's observations, as multisets in a comparable order.
    fn sorted(o: &Observations) -> Vec<String> {
        let mut v: Vec<String> = o.as_slice().iter().map(|x| format!("{x:?}")).collect();
        v.sort();
        v
    }

    /// Observations kept in place through random reports (partial, failing, of any size),
    /// probers disabled and enabled again, nodes deleted and a listener dropped, and time
    /// passing the results' expiry, are at every step the observations built afresh from the
    /// latest results — and the order by prober holds.
    #[test]
    fn kept_in_place_they_are_what_a_fresh_build_makes() {
        let mut now = Timestamp::from_secs(1_800_000_000);
        let mut control = Control::new(Start::default(), now);
        let fleet = large_fleet(12, 6);
        control.handle_change(fleet.puts.clone(), Vec::new(), now);
        let mut dice = Dice(0x9e37_79b9_7f4a_7c15);
        let bad = Attempt { stages: Stages::empty(), rtt_us: 0, error: Some(ErrorCode::Timeout) };
        let mut most = 0;
        for step in 0..300 {
            match dice.roll(10) {
                0..=5 => {
                    let p = fleet.probers[dice.roll(fleet.probers.len() as u64) as usize];
                    let work = control.handle_work(p, now);
                    for mut report in good_round(&work, now) {
                        report.results.retain(|_| dice.roll(3) > 0);
                        for r in &mut report.results {
                            r.attempts.truncate(1 + dice.roll(3) as usize);
                            if dice.roll(4) == 0 {
                                r.attempts = vec![bad; r.attempts.len()];
                            }
                        }
                        let _ = control.handle_report(p, &report, now);
                    }
                }
                6 => {
                    let k = dice.roll(fleet.probers.len() as u64) as usize;
                    let id = 101 + k as i64;
                    let rec = ProberRecord {
                        name: format!("p{k}"),
                        region: vantage_core::ids::RegionId(1),
                        enabled: dice.roll(2) == 0,
                        cert_sha256: Some(format!("fp-{k}")),
                        cert_issued_at: None,
                    };
                    control.handle_change(vec![(id, Object::Prober(rec))], Vec::new(), now);
                }
                7 => {
                    let nodes: Vec<i64> = control.config().nodes.keys().copied().collect();
                    if nodes.len() > 4 {
                        let id = nodes[dice.roll(nodes.len() as u64) as usize];
                        control.handle_change(Vec::new(), vec![id], now);
                    }
                }
                8 => {
                    let (id, cluster) = fleet.puts[1].clone();
                    let Object::Cluster(mut c) = cluster else { unreachable!() };
                    c.listeners.truncate(1 + dice.roll(2) as usize);
                    control.handle_change(vec![(id, Object::Cluster(c))], Vec::new(), now);
                }
                _ => {
                    now = now.plus_secs(1 + dice.roll(900));
                    control.handle_timeout(now);
                }
            }
            while control.poll_output().is_some() {}
            let a = control.addresses();
            let fresh = Seen::of(a.results(), a.table());
            let mut addresses: Vec<(NodeId, IpAddr)> = a.results().keys().map(|k| (k.node, k.ip)).collect();
            addresses.sort();
            addresses.dedup();
            for ports in [&[80u16][..], &[80, 443][..]] {
                for (node, ip) in &addresses {
                    let kept = a.observations(*node, *ip, ports);
                    let probers: Vec<u32> = kept.as_slice().iter().map(|o| o.prober).collect();
                    assert!(probers.is_sorted(), "step {step}: {probers:?}");
                    assert_eq!(
                        sorted(&kept),
                        sorted(&fresh.of_address(*node, *ip, ports)),
                        "step {step}: {node} {ip}"
                    );
                }
            }
            let kept: usize = a.seen().by_address.values().map(|s| s.ports.len()).sum();
            let fresh: usize = fresh.by_address.values().map(|s| s.ports.len()).sum();
            assert_eq!(kept, fresh, "step {step}: nothing kept that is gone");
            most = most.max(kept);
        }
        assert!(most > 100, "the steps reported results: at most {most} observations");
    }
}
