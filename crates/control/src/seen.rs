//! What each cluster address's probers last saw, kept in place as results arrive: the
//! observations a pass reads, shared with it rather than gathered and sorted from every
//! latest result of the fleet at every pass (issue 32). Observations name their prober by its
//! place in the prober table; places are stable across configuration changes (a new prober
//! or node is appended, a gone one leaves an inactive hole), so a change does not touch the
//! observations — until holes outnumber the living, when the table is built afresh and the
//! observations with it. Every caller with a result has a place, counting or not — every
//! configured prober and node (a node in no region never counts), and any other a result came
//! from — so that a caller that starts to count is seen at once with the results it has.
//!
//! A place's order is history (appended callers follow the others): per-prober figures are
//! summed in that order, so an average can differ in its last bit from the one a core just
//! started would make. Only a threshold met to the last bit could tell.

use std::net::IpAddr;

use vantage_core::evaluate::FastMap;
use vantage_core::ids::{NodeId, ProberId, RegionId};
use vantage_core::reachability::{Observation, Observations, ProberView};

use crate::config::Config;
use crate::identity::Caller;
use crate::observe::Latest;
use crate::target::TargetKey;

/// Holes a table may hold before it is built afresh, beyond as many as it has living places
/// (few in tests, so that they build it afresh too).
const SPARE_HOLES: usize = if cfg!(test) { 2 } else { 64 };

/// The probers observations are indexed by — every prober and every node (built afresh:
/// probers first; followed: those added since after the others, gone ones as holes) — each
/// with its place.
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

    /// The place of `caller`, which a result came from: a caller the configuration does not
    /// name (yet) takes an inactive place at the end, so that its results have observations
    /// the moment it counts.
    pub(crate) fn place_of(&mut self, caller: Caller) -> u32 {
        if let Some(p) = self.index.get(&caller) {
            return *p;
        }
        let p = u32::try_from(self.views.len()).unwrap_or(u32::MAX);
        self.index.insert(caller, p);
        self.views.push(ProberView { region: NO_REGION, active: false });
        self.holes += 1;
        p
    }

    /// Whether the holes outnumber the living places (and the spare): the table is then built
    /// afresh.
    pub(crate) fn worn(&self) -> bool {
        self.holes > SPARE_HOLES + (self.views.len() - self.holes)
    }
}

/// The region of a place that does not count (a node in no region, a caller no longer or not
/// yet configured): never read.
const NO_REGION: RegionId = RegionId(0);

/// Every caller observations may come from, in the table's order for a fresh one: every
/// prober, then every node (counting when it probes, which takes a region).
fn entries(c: &Config) -> Vec<(Caller, ProberView)> {
    let probers = c.probers.iter().map(|(pid, p)| {
        (Caller::Prober(ProberId(*pid)), ProberView { region: p.value.region, active: p.value.enabled })
    });
    let nodes = c.nodes.keys().map(|nid| {
        let node = Caller::Node(NodeId(*nid));
        match c.region_of(node) {
            Some(region) => (node, ProberView { region, active: c.node_probes(NodeId(*nid)) }),
            None => (node, ProberView { region: NO_REGION, active: false }),
        }
    });
    probers.chain(nodes).collect()
}

/// Whose an observation is and the port it was made on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Made {
    prober: u32,
    port: u16,
}

/// One address's observations, each with who made it on which port.
#[derive(Debug, Clone, Default)]
struct AddressSeen {
    observations: Observations,
    /// Who made each observation, in the same order: searched instead of the observations,
    /// a sixth of their size, so that a result finds its place in fewer cache lines.
    made: Vec<Made>,
}

impl AddressSeen {
    /// The place of `prober`'s observation on `port`.
    fn place(&self, prober: u32, port: u16) -> Option<usize> {
        let from = self.made.partition_point(|m| m.prober < prober);
        let mut mine = self.made[from..].iter().take_while(|m| m.prober == prober);
        mine.position(|m| m.port == port).map(|i| from + i)
    }
}

/// Every cluster address's observations, kept as results arrive.
#[derive(Debug, Clone, Default)]
pub(crate) struct Seen {
    by_address: FastMap<(NodeId, IpAddr), AddressSeen>,
    /// How many observations each place made: a caller with none has nothing to forget, so
    /// a change to a node that does not probe walks nothing.
    made_by: Vec<u32>,
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
                    a.made.insert(i, Made { prober, port: key.port });
                    let place = prober as usize;
                    if self.made_by.len() <= place {
                        self.made_by.resize(place + 1, 0);
                    }
                    self.made_by[place] += 1;
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
            a.made.remove(i);
            if let Some(n) = self.made_by.get_mut(prober as usize) {
                *n = n.saturating_sub(1);
            }
        }
        if a.made.is_empty() {
            self.by_address.remove(&at);
        }
    }

    /// Whether `prober` made any observation.
    pub(crate) fn made_any(&self, prober: u32) -> bool {
        self.made_by.get(prober as usize).is_some_and(|n| *n > 0)
    }

    /// Every result of `prober` is gone.
    pub(crate) fn forget(&mut self, prober: u32) {
        if !self.made_any(prober) {
            return;
        }
        if let Some(n) = self.made_by.get_mut(prober as usize) {
            *n = 0;
        }
        for a in self.by_address.values_mut() {
            while let Some(i) = a.made.iter().position(|m| m.prober == prober) {
                a.observations.remove(i);
                a.made.remove(i);
            }
        }
        self.by_address.retain(|_, a| !a.made.is_empty());
    }

    /// What a pass reads of `node`'s address `ip`: the observations on the cluster's
    /// `ports` — shared as they are, or a copy without those of a port the cluster no longer
    /// listens on (until they expire).
    pub(crate) fn of_address(&self, node: NodeId, ip: IpAddr, ports: &[u16]) -> Observations {
        let Some(a) = self.by_address.get(&(node, ip)) else { return Observations::default() };
        if a.made.iter().all(|m| ports.contains(&m.port)) {
            return a.observations.clone();
        }
        let kept = (a.observations.as_slice().iter().zip(&a.made))
            .filter(|(_, m)| ports.contains(&m.port))
            .map(|(o, _)| *o)
            .collect();
        Observations::new(kept)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

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

    /// One counting observation as (caller, its region, the result's figures), comparable.
    fn row(caller: Caller, region: RegionId, o: &Observation) -> String {
        format!(
            "{caller:?} {region} {} {} {:?} {:?} {:?}",
            o.sent, o.lost, o.rtt_ms, o.reported_at, o.failed_at
        )
    }

    /// What the gather before issue 32 gave a pass of `node`'s address `ip` on `ports`: every
    /// latest result on those ports, under a table built afresh, of the callers that count.
    fn gathered(control: &Control, node: NodeId, ip: IpAddr, ports: &[u16]) -> Vec<String> {
        let fresh = ProberTable::of(&control.config());
        let mut out = Vec::new();
        for port in ports {
            let Some(per) = control.addresses().results().get(&TargetKey { node, ip, port: *port }) else {
                continue;
            };
            for (caller, l) in per {
                let Some(view) =
                    fresh.index.get(caller).map(|p| fresh.views[*p as usize]).filter(|v| v.active)
                else {
                    continue;
                };
                let o = Observation {
                    prober: 0,
                    sent: l.sent,
                    lost: l.lost,
                    rtt_ms: l.rtt_us.map(|us| us as f32 / 1000.0),
                    reported_at: l.at,
                    failed_at: l.failed_at,
                };
                out.push(row(*caller, view.region, &o));
            }
        }
        out.sort();
        out
    }

    /// What a pass reads of it now: the observations kept in place, of the callers that count.
    fn kept(control: &Control, node: NodeId, ip: IpAddr, ports: &[u16]) -> Vec<String> {
        let a = control.addresses();
        let table = a.table();
        let callers: FastMap<u32, Caller> = table.index.iter().map(|(c, p)| (*p, *c)).collect();
        let obs = a.observations(node, ip, ports);
        let probers: Vec<u32> = obs.as_slice().iter().map(|o| o.prober).collect();
        assert!(probers.is_sorted(), "in their order by prober: {probers:?}");
        let mut out: Vec<String> = (obs.as_slice().iter())
            .filter(|o| table.views[o.prober as usize].active)
            .map(|o| row(callers[&o.prober], table.views[o.prober as usize].region, o))
            .collect();
        out.sort();
        out
    }

    /// The core started again from what it would have stored.
    fn restarted(control: &Control, now: Timestamp) -> Control {
        let id = |c: &Caller| match c {
            Caller::Prober(p) => p.0,
            Caller::Node(n) => n.0,
        };
        let latest = (control.addresses().results().iter())
            .flat_map(|(key, per)| per.iter().map(move |(c, l)| (id(c), *key, l.clone())))
            .collect();
        Control::new(Start { config: (*control.config()).clone(), latest, ..Start::default() }, now)
    }

    /// Observations kept in place through random reports (partial, failing, of any size, from
    /// probers and from nodes that probe), probers disabled, deleted and added again, nodes
    /// deleted, a group losing and regaining its region, a listener dropped, time passing the
    /// results' expiry, tables worn and built afresh, and restarts, are at every step what the
    /// gather before them gave a pass: the same results of the same counting callers, each in
    /// its region — and they stay in their order by prober.
    #[test]
    fn kept_in_place_they_are_what_a_fresh_gather_makes() {
        for seed in
            [0x9e37_79b9_7f4a_7c15, 0x1234_5678_9abc_def1, 0x0fed_cba9_8765_4321, 0x5555_aaaa_3333_cccc]
        {
            steps_from(seed);
        }
    }

    /// 400 random steps from `seed`, each checked.
    fn steps_from(seed: u64) {
        let mut now = Timestamp::from_secs(1_800_000_000);
        let mut control = Control::new(Start::default(), now);
        let fleet = large_fleet(12, 6);
        control.handle_change(fleet.puts.clone(), Vec::new(), now);
        // Two nodes probe too.
        let probing: Vec<(i64, Object)> = (fleet.puts.iter())
            .filter_map(|(id, o)| match o {
                Object::Node(n) if *id <= 108 => {
                    let mut n = n.clone();
                    n.node.also_probes = true;
                    Some((*id, Object::Node(n)))
                }
                _ => None,
            })
            .collect();
        let mut callers = fleet.probers.clone();
        callers.extend(probing.iter().map(|(id, _)| Caller::Node(NodeId(*id))));
        control.handle_change(probing, Vec::new(), now);
        let mut dice = Dice(seed);
        let bad = Attempt { stages: Stages::empty(), rtt_us: 0, error: Some(ErrorCode::Timeout) };
        let mut most = 0;
        let mut done: Vec<String> = Vec::new();
        for step in 0..400 {
            let roll = dice.roll(14);
            done.push(format!("{step}: {roll}"));
            match roll {
                0..=6 => {
                    let p = callers[dice.roll(callers.len() as u64) as usize];
                    done.push(format!("{p:?} reports"));
                    let work = control.handle_work(p, now);
                    for mut report in good_round(&work, now) {
                        report.results.retain(|_| dice.roll(3) > 0);
                        for r in &mut report.results {
                            r.attempts.truncate(1 + dice.roll(3) as usize);
                            if dice.roll(4) == 0 {
                                r.attempts = vec![bad; r.attempts.len()];
                            }
                            // Certificates seen, renewed, and gone.
                            r.cert_not_after =
                                (dice.roll(3) > 0).then(|| now.plus_secs(86_400 * (1 + dice.roll(4))));
                        }
                        let _ = control.handle_report(p, &report, now);
                    }
                }
                7 => {
                    let k = dice.roll(fleet.probers.len() as u64) as usize;
                    let id = 101 + k as i64;
                    done.push(format!("prober {id}"));
                    if dice.roll(3) == 0 {
                        control.handle_change(Vec::new(), vec![id], now);
                    } else {
                        let rec = ProberRecord {
                            name: format!("p{k}"),
                            region: RegionId(1),
                            enabled: dice.roll(2) == 0,
                            cert_sha256: Some(format!("fp-{k}")),
                            cert_issued_at: None,
                        };
                        control.handle_change(vec![(id, Object::Prober(rec))], Vec::new(), now);
                    }
                }
                8 => {
                    let nodes: Vec<i64> =
                        control.config().nodes.keys().copied().filter(|n| *n > 108).collect();
                    if nodes.len() > 4 {
                        let id = nodes[dice.roll(nodes.len() as u64) as usize];
                        control.handle_change(Vec::new(), vec![id], now);
                    }
                }
                9 => {
                    let (id, cluster) = fleet.puts[1].clone();
                    let Object::Cluster(mut c) = cluster else { unreachable!() };
                    c.listeners.truncate(1 + dice.roll(2) as usize);
                    control.handle_change(vec![(id, Object::Cluster(c))], Vec::new(), now);
                }
                10 => {
                    let Object::Group(mut group) = fleet.puts[2].1.clone() else { unreachable!() };
                    group.group.region = (dice.roll(2) == 0).then_some(RegionId(1));
                    control.handle_change(vec![(3, Object::Group(group))], Vec::new(), now);
                }
                11 => control = restarted(&control, now),
                _ => {
                    now = now.plus_secs(1 + dice.roll(900));
                    control.handle_timeout(now);
                }
            }
            while control.poll_output().is_some() {}
            let mut addresses: Vec<(NodeId, IpAddr)> =
                control.addresses().results().keys().map(|k| (k.node, k.ip)).collect();
            addresses.sort();
            addresses.dedup();
            for ports in [&[80u16][..], &[80, 443][..]] {
                for (node, ip) in &addresses {
                    let (kept, gathered) =
                        (kept(&control, *node, *ip, ports), gathered(&control, *node, *ip, ports));
                    assert_eq!(
                        kept,
                        gathered,
                        "step {step} from seed {seed:#x}: {node} {ip} {ports:?} after {:?}",
                        &done[done.len().saturating_sub(12)..]
                    );
                }
            }
            let a = control.addresses();
            // Expiry by time: nothing kept past its hour and the minute it falls due in, and a
            // sweep's ten seconds.
            let oldest = a.results().values().flat_map(|per| per.values()).map(|l| l.at).min();
            assert!(
                oldest.is_none_or(|t| now.millis_since(t) < 3_600_000 + 70_000),
                "step {step} from seed {seed:#x}: a result of {oldest:?} kept at {now}"
            );
            let mut certificates = BTreeMap::new();
            for (key, per) in a.results() {
                if let Some(t) = per.values().filter_map(|l| l.cert_not_after).min() {
                    certificates.insert(*key, t);
                }
            }
            assert_eq!(**a.certificate_expiries(), certificates, "step {step} from seed {seed:#x}");
            let fresh = Seen::of(a.results(), a.table());
            for s in a.seen().by_address.values() {
                let whose = s.observations.as_slice().iter().map(|o| o.prober);
                assert!(whose.eq(s.made.iter().map(|m| m.prober)), "step {step}: each made by its own");
            }
            let mut made_by = vec![0u32; a.seen().made_by.len()];
            for m in a.seen().by_address.values().flat_map(|s| &s.made) {
                made_by[m.prober as usize] += 1;
            }
            assert_eq!(a.seen().made_by, made_by, "step {step} from seed {seed:#x}: each place's count");
            let held: usize = a.seen().by_address.values().map(|s| s.made.len()).sum();
            let all: usize = fresh.by_address.values().map(|s| s.made.len()).sum();
            assert_eq!(held, all, "step {step}: nothing kept that is gone, nothing missing");
            most = most.max(held);
        }
        assert!(most > 100, "the steps reported results: at most {most} observations");
    }
}
