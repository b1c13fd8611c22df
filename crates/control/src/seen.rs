//! What each cluster address's probers last saw, kept in place as results arrive: every
//! latest result with the observation a pass reads of it, one record per result (issue 32),
//! lent to the pass rather than gathered and sorted from every latest result of the fleet
//! at every pass. Observations name their prober by its
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

use std::borrow::Cow;
use std::net::IpAddr;

use vantage_core::Timestamp;
use vantage_core::evaluate::FastMap;
use vantage_core::ids::{NodeId, ProberId, RegionId};
use vantage_core::reachability::{Observation, Observations, ProberView};
use vantage_core::result::{ErrorCode, HlsDetail};
use vantage_core::window::WindowRegister;

use crate::config::Config;
use crate::identity::Caller;
use crate::observe::Latest;
use crate::target::TargetKey;

/// Holes a table may hold before it is built afresh, beyond as many as it has living places
/// (few in tests, so that they build it afresh too).
const SPARE_HOLES: usize = if cfg!(test) { 2 } else { 64 };

/// Results an address is given room for at most when first seen (beyond, its lists grow as
/// they fill): room made for probers that never report is memory no result uses.
const MAX_ROOM: usize = 512;

/// The probers observations are indexed by — every prober and every node (built afresh:
/// probers first; followed: those added since after the others, gone ones as holes) — each
/// with its place.
#[derive(Debug, Clone, Default)]
pub(crate) struct ProberTable {
    /// What the evaluator knows of each, by place; a hole is inactive.
    pub(crate) views: Vec<ProberView>,
    /// Each one's place.
    pub(crate) index: FastMap<Caller, u32>,
    /// Who is at each place (aligned with `views`).
    pub(crate) callers: Vec<Caller>,
    /// Places of callers no longer configured.
    holes: usize,
    /// Places that count (active), of callers configured.
    counting: usize,
}

impl ProberTable {
    /// The table of `c`, built afresh.
    pub(crate) fn of(c: &Config) -> ProberTable {
        let mut t = ProberTable::default();
        for (caller, view) in entries(c) {
            t.index.insert(caller, u32::try_from(t.views.len()).unwrap_or(u32::MAX));
            t.views.push(view);
            t.callers.push(caller);
        }
        t.counting = counting(&t.views);
        t
    }

    /// The table of `c` keeping every place of this one: a caller still configured keeps its
    /// place with what is known of it now, a new one is appended, a gone one stays as an
    /// inactive hole (its observations count for nothing until they go).
    pub(crate) fn follow(&self, c: &Config) -> ProberTable {
        let mut next = ProberTable {
            views: self.views.clone(),
            index: self.index.clone(),
            callers: self.callers.clone(),
            holes: 0,
            counting: 0,
        };
        let mut living = vec![false; next.views.len()];
        for (caller, view) in entries(c) {
            let place = match next.index.get(&caller) {
                Some(p) => *p,
                None => {
                    let p = u32::try_from(next.views.len()).unwrap_or(u32::MAX);
                    next.index.insert(caller, p);
                    next.views.push(view);
                    next.callers.push(caller);
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
        next.counting = counting(&next.views);
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
        self.callers.push(caller);
        self.holes += 1;
        p
    }

    /// How many places count (every counting caller configured, online or not).
    pub(crate) fn counting(&self) -> usize {
        self.counting
    }

    /// Whether the holes outnumber the living places (and the spare): the table is then built
    /// afresh.
    pub(crate) fn worn(&self) -> bool {
        self.holes > SPARE_HOLES + (self.views.len() - self.holes)
    }
}

/// How many of `views` count.
fn counting(views: &[ProberView]) -> usize {
    views.iter().filter(|v| v.active).count()
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
    let nodes = c.nodes.iter().map(|(nid, n)| {
        let node = Caller::Node(NodeId(*nid));
        // Only a node that probes counts, and only a place that counts has its region read: the
        // look-ups are left to the few that probe (at 10,000 nodes they were most of following
        // a change to one node).
        match n.value.node.also_probes.then(|| c.region_of(node)).flatten() {
            Some(region) => (node, ProberView { region, active: c.node_probes(NodeId(*nid)) }),
            None => (node, ProberView { region: NO_REGION, active: false }),
        }
    });
    probers.chain(nodes).collect()
}

/// Whose an observation is and the port it was made on; and the result's error, which fits
/// in the room those two leave (issue 32: memory per result).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Made {
    prober: u32,
    port: u16,
    error: Option<ErrorCode>,
}

/// What a latest result holds beyond its observation and who made it: the report's time,
/// the counts, the RTT and the failed attempt's end are the observation's, the error is with
/// who made it, none kept twice (issue 32: memory per result).
#[derive(Debug, Clone, PartialEq)]
struct Kept {
    register: WindowRegister,
    hls: Option<Box<HlsDetail>>,
    cert_not_after: Option<Timestamp>,
}

impl Kept {
    /// `latest` of the caller at place `prober` on `port`: its observation, who made it, and
    /// the rest.
    fn split(prober: u32, port: u16, latest: Latest) -> (Observation, Made, Kept) {
        let o = Observation {
            prober,
            sent: u16::try_from(latest.sent).unwrap_or(u16::MAX),
            lost: u16::try_from(latest.lost).unwrap_or(u16::MAX),
            rtt_us: latest.rtt_us,
            reported_at: latest.at,
            failed_at: latest.failed_at,
        };
        let Latest { error, register, hls, cert_not_after, .. } = latest;
        (o, Made { prober, port, error }, Kept { register, hls, cert_not_after })
    }

    /// The latest result of `o`, made as `m`, and this.
    fn join(&self, m: &Made, o: &Observation) -> Latest {
        Latest {
            at: o.reported_at,
            sent: u32::from(o.sent),
            lost: u32::from(o.lost),
            rtt_us: o.rtt_us,
            error: m.error,
            register: self.register,
            hls: self.hls.clone(),
            cert_not_after: self.cert_not_after,
            failed_at: o.failed_at,
        }
    }
}

/// Bytes of one latest result's record as kept — its observation, who made it on which port,
/// and the rest — beside its share of the tables and the lists' spare room.
pub const RECORD_BYTES: usize = size_of::<Observation>() + size_of::<Made>() + size_of::<Kept>();

/// One address's latest results, every port, every caller: each as its observation (what a
/// pass reads), who made it on which port, and the rest of it, the three in the same order —
/// one record per result, found with one look-up of its address and one search of who made
/// what.
#[derive(Debug, Clone, Default)]
struct AddressSeen {
    observations: Observations,
    /// Who made each observation, in the same order: searched instead of the observations,
    /// a quarter of their size, so that a result finds its place in fewer cache lines.
    made: Vec<Made>,
    /// The rest of each latest result, in the same order.
    kept: Vec<Kept>,
    /// The ports it has results on, each with how many: a pass asks whether every one is
    /// still the cluster's for each address, and a walk of every result for it was most of
    /// gathering a cluster's view (19 ms of it at 10,000 nodes, 7 without).
    ports: PortCounts,
}

/// The ports an address has results on, each with how many: the first two beside the address
/// (a cluster seldom listens on more), the rest in a list. A pass asks of every address's
/// ports, and with all of them in a list of their own that read missed the cache once more
/// per address: two fifths of gathering a cluster's view at 10,000 nodes (issue 32).
#[derive(Debug, Clone, Default)]
struct PortCounts {
    /// Two ports with their counts; a count of 0 is a free slot.
    near: [(u16, u32); 2],
    /// Beyond those.
    more: Vec<(u16, u32)>,
}

impl PortCounts {
    /// Each port with how many results are on it.
    fn iter(&self) -> impl Iterator<Item = &(u16, u32)> {
        self.near.iter().filter(|(_, n)| *n > 0).chain(&self.more)
    }

    /// One result more on `port`.
    fn add(&mut self, port: u16) {
        let mut held = self.near.iter_mut().filter(|(_, n)| *n > 0).chain(&mut self.more);
        if let Some((_, n)) = held.find(|(p, _)| *p == port) {
            *n += 1;
        } else if let Some(free) = self.near.iter_mut().find(|(_, n)| *n == 0) {
            *free = (port, 1);
        } else {
            self.more.push((port, 1));
        }
    }

    /// One result fewer on `port`.
    fn remove(&mut self, port: u16) {
        if let Some((_, n)) = self.near.iter_mut().find(|(p, n)| *p == port && *n > 0) {
            *n -= 1;
        } else if let Some(k) = self.more.iter().position(|(p, _)| *p == port) {
            self.more[k].1 -= 1;
            if self.more[k].1 == 0 {
                self.more.swap_remove(k);
            }
        }
    }
}

impl AddressSeen {
    /// None yet, with room for `n` results.
    fn with_room(n: usize) -> AddressSeen {
        AddressSeen {
            observations: Observations::new(Vec::with_capacity(n)),
            made: Vec::with_capacity(n),
            kept: Vec::with_capacity(n),
            ports: PortCounts::default(),
        }
    }

    /// The place of `prober`'s observation on `port`, among results from `places` places.
    fn place(&self, prober: u32, port: u16, places: usize) -> Option<usize> {
        let from = start_near(&self.made, prober, places);
        let mut mine = self.made[from..].iter().take_while(|m| m.prober == prober);
        mine.position(|m| m.port == port).map(|i| from + i)
    }

    /// Whether any result of it is on `port`.
    fn has_port(&self, port: u16) -> bool {
        self.ports.iter().any(|(p, _)| *p == port)
    }

    /// Whether every result of it is on one of `ports`.
    fn only_on(&self, ports: &[u16]) -> bool {
        self.ports.iter().all(|(p, _)| ports.contains(p))
    }

    /// Inserts a result after its prober's others: the observation `o`, who made it on which
    /// port, and the rest of it.
    fn insert(&mut self, o: Observation, made: Made, kept: Kept) {
        // With no place given, a place is always found (after the prober's others).
        let i = self.observations.put(None, o).unwrap_or(self.made.len());
        self.ports.add(made.port);
        self.made.insert(i, made);
        self.kept.insert(i, kept);
    }

    /// The latest result at `i`.
    fn latest(&self, i: usize) -> Option<Latest> {
        Some(self.kept.get(i)?.join(self.made.get(i)?, self.observations.as_slice().get(i)?))
    }

    /// When the result at `i` was reported.
    fn at(&self, i: usize) -> Timestamp {
        self.observations.as_slice().get(i).map_or(Timestamp::EPOCH, |o| o.reported_at)
    }

    /// The latest results `keep` keeps by who made them on which port, each with that: only
    /// those kept are joined.
    fn each<'a>(&'a self, keep: impl Fn(Made) -> bool + 'a) -> impl Iterator<Item = (Made, Latest)> + 'a {
        let parts = self.made.iter().copied().zip(self.observations.as_slice()).zip(&self.kept);
        parts.filter(move |((m, _), _)| keep(*m)).map(|((m, o), k)| (m, k.join(&m, o)))
    }

    /// Removes the result at `i`; whether it saw a certificate.
    fn remove(&mut self, i: usize) -> bool {
        self.observations.remove(i);
        self.ports.remove(self.made.remove(i).port);
        self.kept.remove(i).cert_not_after.is_some()
    }
}

/// Where `prober`'s results start in `made` (sorted by prober), with results from `places`
/// places: searched outwards from where an even spread would put them, as an address has a
/// result from most places when few callers besides the probers have places. A search from
/// the middle reads four or five cache lines of a hundred results, each a miss at a fleet's
/// scale; this one reads one or two (issue 32: a report's cost is its cache misses). Where the
/// places far outnumber the results (thousands of nodes that probe, each address probed by
/// the budget's few), a guess would be far off, and the search starts from the middle.
fn start_near(made: &[Made], prober: u32, places: usize) -> usize {
    let n = made.len();
    if places > 2 * n {
        return made.partition_point(|m| m.prober < prober);
    }
    let below = |i: usize| made[i].prober < prober;
    let guess = (prober as usize).saturating_mul(n).checked_div(places).unwrap_or(0).min(n);
    // Bracket the start between a place below `prober` and one not below it, doubling the
    // stride from the guess; then search the bracket.
    let (lo, hi) = if guess < n && below(guess) {
        let mut stride = 1;
        while guess + stride < n && below(guess + stride) {
            stride *= 2;
        }
        (guess + stride / 2 + 1, (guess + stride).min(n))
    } else {
        let mut stride = 1;
        while stride <= guess && !below(guess - stride) {
            stride *= 2;
        }
        ((guess + 1).saturating_sub(stride), guess - stride / 2)
    };
    lo + made[lo..hi].partition_point(|m| m.prober < prober)
}

/// Every cluster address's latest results and their observations, kept as results arrive.
#[derive(Debug, Clone, Default)]
pub(crate) struct Seen {
    by_address: FastMap<(NodeId, IpAddr), AddressSeen>,
    /// How many observations each place made: a caller with none has nothing to forget, so
    /// a change to a node that does not probe walks nothing.
    made_by: Vec<u32>,
    /// Targets (an address and a port) with a result.
    targets: usize,
}

/// What a result put in place found and left.
pub(crate) struct Put {
    /// The latest result now.
    pub(crate) latest: Latest,
    /// Whether its target had no result before (of any caller).
    pub(crate) first_of_target: bool,
}

impl Seen {
    /// The latest results `rows` (by target and the place of their caller), as at a start or
    /// when the prober table is built afresh.
    pub(crate) fn of(rows: Vec<(TargetKey, u32, Latest)>) -> Seen {
        let mut per_address: FastMap<(NodeId, IpAddr), usize> = FastMap::default();
        for (key, ..) in &rows {
            *per_address.entry((key.node, key.ip)).or_default() += 1;
        }
        let mut seen = Seen::default();
        for (key, place, latest) in rows {
            let room = || per_address.get(&(key.node, key.ip)).copied().unwrap_or(0);
            seen.put(key, place, room, |_| latest);
        }
        seen
    }

    /// `prober`'s latest result for `key` in place of the one before (`next` makes it from
    /// that one). An address seen for the first time has room made for as many results as
    /// `room` says it will hold: lists grown one result at a time double again and again,
    /// and at a fleet's scale what they left behind was a third of the memory (issue 32).
    pub(crate) fn put(
        &mut self,
        key: TargetKey,
        prober: u32,
        room: impl FnOnce() -> usize,
        next: impl FnOnce(Option<&Latest>) -> Latest,
    ) -> Put {
        let places = self.made_by.len();
        let a = (self.by_address.entry((key.node, key.ip)))
            .or_insert_with(|| AddressSeen::with_room(room().min(MAX_ROOM)));
        if let Some(i) = a.place(prober, key.port, places) {
            let latest = next(a.latest(i).as_ref());
            let (o, made, kept) = Kept::split(prober, key.port, latest.clone());
            a.observations.put(Some(i), o);
            a.made[i] = made;
            a.kept[i] = kept;
            return Put { latest, first_of_target: false };
        }
        let latest = next(None);
        let first_of_target = !a.has_port(key.port);
        let (o, made, kept) = Kept::split(prober, key.port, latest.clone());
        a.insert(o, made, kept);
        let place = prober as usize;
        if self.made_by.len() <= place {
            self.made_by.resize(place + 1, 0);
        }
        self.made_by[place] += 1;
        self.targets += usize::from(first_of_target);
        Put { latest, first_of_target }
    }

    /// Reads what a [`put`](Self::put) of `prober`'s result for `key` reads first — the
    /// address, the place among its results, the observation and the rest there — and returns
    /// a figure of them only so that the reads are made. A report's results read a few at a
    /// time before they are put wait for memory together instead of one after another.
    pub(crate) fn touch(&self, key: TargetKey, prober: u32) -> u64 {
        let Some(a) = self.by_address.get(&(key.node, key.ip)) else { return 0 };
        let Some(i) = a.place(prober, key.port, self.made_by.len()) else { return 0 };
        let sent = a.observations.as_slice().get(i).map_or(0, |o| o.sent);
        u64::from(sent) ^ a.kept.get(i).map_or(0, |k| k.register.good)
    }

    /// Reads the entry [`of_address`](Self::of_address) looks up, and returns a figure of it
    /// only so that the read is made, as [`touch`](Self::touch). Kept to the look-up alone: a
    /// run of them then waits for its misses together (reading the ports and the list's count
    /// too, each a read that waits for the entry, the run waited as long as without it).
    pub(crate) fn touch_address(&self, node: NodeId, ip: IpAddr) -> u64 {
        self.by_address.get(&(node, ip)).map_or(0, |a| a.observations.edition())
    }

    /// The results of `key` reported before `before` go; whether one of them saw a
    /// certificate, and when the oldest left turns `kept_ms` old (`None`: none left).
    pub(crate) fn expire(
        &mut self,
        key: TargetKey,
        before: Timestamp,
        kept_ms: i64,
    ) -> (bool, Option<Timestamp>) {
        let at = (key.node, key.ip);
        let Some(a) = self.by_address.get_mut(&at) else { return (false, None) };
        let had = a.has_port(key.port);
        let (mut certificate_gone, mut oldest) = (false, None::<Timestamp>);
        let mut i = 0;
        while i < a.made.len() {
            if a.made[i].port != key.port {
                i += 1;
                continue;
            }
            let at = a.at(i);
            if at >= before {
                oldest = Some(oldest.map_or(at, |o| o.min(at)));
                i += 1;
                continue;
            }
            let prober = a.made[i].prober;
            certificate_gone |= a.remove(i);
            if let Some(n) = self.made_by.get_mut(prober as usize) {
                *n = n.saturating_sub(1);
            }
        }
        if had && oldest.is_none() {
            self.targets = self.targets.saturating_sub(1);
        }
        if a.made.is_empty() {
            self.by_address.remove(&at);
        }
        (certificate_gone, oldest.map(|t| t.plus_millis(kept_ms)))
    }

    /// Whether `prober` made any observation.
    pub(crate) fn made_any(&self, prober: u32) -> bool {
        self.made_by.get(prober as usize).is_some_and(|n| *n > 0)
    }

    /// Every result of `prober` goes; the targets where one of them saw a certificate.
    pub(crate) fn forget(&mut self, prober: u32) -> Vec<TargetKey> {
        let mut certificates = Vec::new();
        if !self.made_any(prober) {
            return certificates;
        }
        if let Some(n) = self.made_by.get_mut(prober as usize) {
            *n = 0;
        }
        for (&(node, ip), a) in &mut self.by_address {
            while let Some(i) = a.made.iter().position(|m| m.prober == prober) {
                let port = a.made[i].port;
                if a.remove(i) {
                    certificates.push(TargetKey { node, ip, port });
                }
                if !a.has_port(port) {
                    self.targets = self.targets.saturating_sub(1);
                }
            }
        }
        self.by_address.retain(|_, a| !a.made.is_empty());
        certificates
    }

    /// What a pass reads of `node`'s address `ip`: the observations on the cluster's
    /// `ports` — borrowed as they are (no count of a shared list taken and dropped for each
    /// address at each pass: a third of gathering the view of a pass after a change; issue 32),
    /// or a copy without those of a port the cluster no longer listens on (until they expire).
    pub(crate) fn of_address(&self, node: NodeId, ip: IpAddr, ports: &[u16]) -> Cow<'_, Observations> {
        let Some(a) = self.by_address.get(&(node, ip)) else { return Cow::Owned(Observations::default()) };
        if a.only_on(ports) {
            return Cow::Borrowed(&a.observations);
        }
        let kept = (a.observations.as_slice().iter().zip(&a.made))
            .filter(|(_, m)| ports.contains(&m.port))
            .map(|(o, _)| *o)
            .collect();
        Cow::Owned(Observations::new(kept))
    }

    /// The latest results of `key`, each with the place of its caller.
    pub(crate) fn of_target(&self, key: TargetKey) -> impl Iterator<Item = (u32, Latest)> + '_ {
        let a = self.by_address.get(&(key.node, key.ip));
        let port = key.port;
        a.into_iter().flat_map(move |a| a.each(move |m| m.port == port).map(|(m, l)| (m.prober, l)))
    }

    /// The latest results of the caller at `place`, by target: only theirs are joined.
    pub(crate) fn of_place(&self, place: u32) -> impl Iterator<Item = (TargetKey, Latest)> + '_ {
        self.by_address.iter().flat_map(move |(&(node, ip), a)| {
            a.each(move |m| m.prober == place).map(move |(m, l)| (TargetKey { node, ip, port: m.port }, l))
        })
    }

    /// Every latest result, by target and the place of its caller.
    pub(crate) fn all(&self) -> impl Iterator<Item = (TargetKey, u32, Latest)> + '_ {
        self.of_addresses(|_| true)
    }

    /// The latest results of `node`'s addresses: only theirs are taken apart, not every
    /// result of the fleet.
    pub(crate) fn of_node(&self, node: NodeId) -> impl Iterator<Item = (TargetKey, u32, Latest)> + '_ {
        self.of_addresses(move |(n, _)| *n == node)
    }

    /// The latest results of the addresses `keep` keeps, by target and the place of their
    /// caller.
    fn of_addresses<'a>(
        &'a self,
        keep: impl Fn(&(NodeId, IpAddr)) -> bool + 'a,
    ) -> impl Iterator<Item = (TargetKey, u32, Latest)> + 'a {
        self.by_address.iter().filter(move |(at, _)| keep(at)).flat_map(|(&(node, ip), a)| {
            a.each(|_| true).map(move |(m, l)| (TargetKey { node, ip, port: m.port }, m.prober, l))
        })
    }

    /// Targets with a result.
    pub(crate) fn targets(&self) -> usize {
        self.targets
    }

    /// Every latest result, taken out, by target and the place of its caller.
    pub(crate) fn into_rows(self) -> Vec<(TargetKey, u32, Latest)> {
        let mut rows = Vec::new();
        for (&(node, ip), a) in &self.by_address {
            rows.extend(a.each(|_| true).map(|(m, l)| (TargetKey { node, ip, port: m.port }, m.prober, l)));
        }
        rows
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use vantage_core::Timestamp;
    use vantage_core::result::{Attempt, ErrorCode, Stages};

    use super::*;
    use crate::config::Object;
    use crate::dice::Dice;
    use crate::fixtures::{good_round, large_fleet};
    use crate::{Control, Start};

    /// One counting observation as (caller, its region, the result's figures), comparable.
    fn row(caller: Caller, region: RegionId, o: &Observation) -> String {
        format!(
            "{caller:?} {region} {} {} {:?} {:?} {:?}",
            o.sent, o.lost, o.rtt_us, o.reported_at, o.failed_at
        )
    }

    /// What the gather before issue 32 gave a pass of `node`'s address `ip` on `ports`: every
    /// latest result on those ports, under a table built afresh, of the callers that count.
    fn gathered(control: &Control, node: NodeId, ip: IpAddr, ports: &[u16]) -> Vec<String> {
        let fresh = ProberTable::of(&control.config());
        let mut out = Vec::new();
        for port in ports {
            for (caller, l) in control.addresses().results().of(&TargetKey { node, ip, port: *port }) {
                let Some(view) =
                    fresh.index.get(&caller).map(|p| fresh.views[*p as usize]).filter(|v| v.active)
                else {
                    continue;
                };
                let o = Observation {
                    prober: 0,
                    sent: u16::try_from(l.sent).unwrap_or(u16::MAX),
                    lost: u16::try_from(l.lost).unwrap_or(u16::MAX),
                    rtt_us: l.rtt_us,
                    reported_at: l.at,
                    failed_at: l.failed_at,
                };
                out.push(row(caller, view.region, &o));
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
        let latest =
            (control.addresses().results().iter()).map(|(key, c, l)| (id(&c), key, l.clone())).collect();
        Control::new(Start { config: (*control.config()).clone(), latest, ..Start::default() }, now)
    }

    /// Observations kept in place through random reports (partial, failing, of any size, from
    /// probers and from nodes that probe), probers disabled, deleted and added again, nodes
    /// deleted, a group losing and regaining its region, a listener dropped, time passing the
    /// results' expiry, tables worn and built afresh, and restarts, are at every step what the
    /// gather before them gave a pass: the same results of the same counting callers, each in
    /// its region — and they stay in their order by prober, each address's ports counted. And
    /// the availability ledger, following only the nodes that changed, would note at every step
    /// what a follow of every node would.
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
                    let (id, puts, deletes) = dice.prober_change(fleet.probers.len() as u64);
                    done.push(format!("prober {id}"));
                    control.handle_change(puts, deletes, now);
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
            control.assert_followed_as_from_scratch(now);
            let mut addresses: Vec<(NodeId, IpAddr)> =
                control.addresses().results().iter().map(|(k, ..)| (k.node, k.ip)).collect();
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
            let oldest = a.results().iter().map(|(.., l)| l.at).min();
            assert!(
                oldest.is_none_or(|t| now.millis_since(t) < 3_600_000 + 70_000),
                "step {step} from seed {seed:#x}: a result of {oldest:?} kept at {now}"
            );
            let mut certificates = BTreeMap::new();
            for (key, _, l) in a.results().iter() {
                if let Some(t) = l.cert_not_after {
                    let e = certificates.entry(key).or_insert(t);
                    *e = (*e).min(t);
                }
            }
            assert_eq!(**a.certificate_expiries(), certificates, "step {step} from seed {seed:#x}");
            let fresh = Seen::of(a.seen().all().collect());
            for s in a.seen().by_address.values() {
                let whose = s.observations.as_slice().iter().map(|o| o.prober);
                assert!(whose.eq(s.made.iter().map(|m| m.prober)), "step {step}: each made by its own");
                assert_eq!(s.kept.len(), s.made.len(), "step {step}: each result whole");
                let mut ports: Vec<(u16, u32)> = Vec::new();
                for m in &s.made {
                    match ports.iter_mut().find(|(p, _)| *p == m.port) {
                        Some((_, n)) => *n += 1,
                        None => ports.push((m.port, 1)),
                    }
                }
                let mut counted: Vec<(u16, u32)> = s.ports.iter().copied().collect();
                ports.sort_unstable();
                counted.sort_unstable();
                assert_eq!(counted, ports, "step {step} from seed {seed:#x}: the ports counted");
            }
            for node in a.results().iter().map(|(k, ..)| k.node).take(3) {
                let whole = a.results().iter().filter(|(k, ..)| k.node == node).count();
                assert_eq!(a.results().of_node(node).count(), whole, "step {step}: node {node}'s results");
            }
            let targets: std::collections::BTreeSet<TargetKey> =
                a.results().iter().map(|(k, ..)| k).collect();
            assert_eq!(
                a.seen().targets(),
                targets.len(),
                "step {step} from seed {seed:#x}: the targets counted"
            );
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

    /// Ports are counted beside the address for the first two held and in the list beyond,
    /// whatever the order they come and go in: each held port with its count, no other.
    #[test]
    fn ports_are_counted_near_and_beyond() {
        let mut counts = PortCounts::default();
        for port in [80, 443, 80] {
            counts.add(port);
        }
        assert_eq!((counts.near, counts.more.as_slice()), ([(80, 2), (443, 1)], &[][..]), "two beside");
        counts.add(8080);
        assert_eq!(counts.more, [(8080, 1)], "a third beyond");
        counts.remove(80);
        counts.remove(80);
        counts.remove(53);
        counts.add(22);
        assert_eq!(
            (counts.near, counts.more.as_slice()),
            ([(22, 1), (443, 1)], &[(8080, 1)][..]),
            "a free place taken"
        );
        let mut counts = PortCounts::default();
        let mut model: BTreeMap<u16, u32> = BTreeMap::new();
        let mut dice = Dice(0x9047);
        for step in 0..2_000 {
            let port = [80, 443, 8080, 53, 22][dice.roll(5) as usize];
            if dice.roll(2) == 0 {
                counts.add(port);
                *model.entry(port).or_default() += 1;
            } else {
                // A port without results is removed too: nothing changes.
                counts.remove(port);
                if let Some(n) = model.get_mut(&port) {
                    *n -= 1;
                    if *n == 0 {
                        model.remove(&port);
                    }
                }
            }
            let mut held: Vec<(u16, u32)> = counts.iter().copied().collect();
            held.sort_unstable();
            assert_eq!(held, model.iter().map(|(p, n)| (*p, *n)).collect::<Vec<_>>(), "step {step}");
            assert!(held.iter().all(|(_, n)| *n > 0), "step {step}: no port held without a result");
        }
    }

    /// A new address has room for the results it is told it will hold, at most `MAX_ROOM`,
    /// and its lists stay where they are while they fill it.
    #[test]
    fn room_is_made_once_and_bounded() {
        let at = Timestamp::from_secs(1_800_000_000);
        let latest = || Latest {
            at,
            sent: 1,
            lost: 0,
            rtt_us: Some(900),
            error: None,
            register: WindowRegister::default(),
            hls: None,
            cert_not_after: None,
            failed_at: None,
        };
        let key = |n: i64, port: u16| TargetKey { node: NodeId(n), ip: "192.0.2.1".parse().unwrap(), port };
        let mut seen = Seen::default();
        seen.put(key(1, 80), 0, || 6, |_| latest());
        let a = &seen.by_address[&(NodeId(1), key(1, 80).ip)];
        let (room, at_first) = (a.made.capacity(), a.made.as_ptr());
        assert!(room >= 6, "room for 6: {room}");
        for prober in 0..3 {
            for port in [80, 443] {
                seen.put(key(1, port), prober, || unreachable!("room is made once"), |_| latest());
            }
        }
        let a = &seen.by_address[&(NodeId(1), key(1, 80).ip)];
        assert_eq!(
            (a.made.len(), a.made.capacity(), a.made.as_ptr()),
            (6, room, at_first),
            "filled in place"
        );
        seen.put(key(2, 80), 0, || 1_000_000, |_| latest());
        let big = seen.by_address[&(NodeId(2), key(2, 80).ip)].kept.capacity();
        assert!((MAX_ROOM..2 * MAX_ROOM).contains(&big), "room for {MAX_ROOM} at most: {big}");
    }

    /// The search from an even spread's guess finds where a prober's results start as a
    /// search from the middle does, however the results are spread: every prober, sparse,
    /// crowded at one end, from more places than the table's length says, and none.
    #[test]
    fn a_search_from_the_guess_finds_the_start() {
        let mut dice = Dice(0x2545_f491_4f6c_dd1d);
        for case in 0..2_000 {
            let places = 1 + dice.roll(120) as u32;
            let mut made = Vec::new();
            for prober in 0..places {
                if dice.roll(4) < case % 4 || (case % 7 == 0 && prober < places / 2) {
                    continue;
                }
                for port in 0..1 + dice.roll(3) as u16 {
                    made.push(Made { prober, port: 80 + port, error: None });
                }
            }
            for prober in 0..places + 3 {
                for told in [places as usize, 1 + places as usize / 3, 4 * places as usize, 0] {
                    assert_eq!(
                        start_near(&made, prober, told),
                        made.partition_point(|m| m.prober < prober),
                        "case {case}: prober {prober} of {places} places, told {told}"
                    );
                }
            }
        }
    }
}
