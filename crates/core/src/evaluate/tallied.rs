//! What a pass tallied of each address, kept for the next (issue 32: a pass tallies again only
//! the addresses whose observations moved, or one of whose counted results stopped counting,
//! since it last did).
//!
//! An address's tally — its verdict, its tally by region, what its probers sent and lost — is
//! a function of its observations, the prober table, the probe settings and the time, and it
//! reads the time only to tell which results still count. Observations are kept in editions
//! (every change a new one), and results only ever stop counting as time goes on; so a tally
//! taken at `at` of an edition holds at any later moment before the first of its counted
//! results stops counting, over the same probers and settings. A pass soon after another (a
//! configuration change, a node created while no report came in between) reads most
//! addresses' tallies back instead of walking their observations.
//!
//! The tallies are kept in the order the pass met their addresses, and the next pass finds
//! each where it meets its address (a look-up by key only once an address is not where it
//! was: nodes or addresses added or removed before it), so that keeping them costs a pass over
//! a fleet whose every address moved next to nothing.

use super::kept::{Made, NodeKept, PassInputs};
use super::*;
use crate::reachability::Verdict;

/// One address's tally as a pass took it, and while it holds.
#[derive(Debug, Default)]
pub(super) struct Taken {
    /// The edition of the observations tallied.
    edition: u64,
    /// When it was taken (`None`: never, it holds nothing).
    at: Option<Timestamp>,
    /// The first moment one of its counted results stops counting (`None`: none counted).
    until: Option<Timestamp>,
    verdict: Verdict,
    /// Shared with the statuses made from it.
    regions: ByRegion,
    /// Attempts sent and lost by its counting probers, by region (in the pass's order).
    loss: Vec<(u64, u64)>,
}

impl Taken {
    /// Whether it is the tally of the observations at `edition` at `now`.
    fn holds(&self, edition: u64, now: Timestamp) -> bool {
        self.edition == edition && self.at.is_some_and(|at| at <= now) && self.until.is_none_or(|u| now < u)
    }

    /// Its verdict and tally by region, if it holds for the observations at `edition` at
    /// `now`; its attempts are then added to `loss`.
    pub(super) fn read(
        &self,
        (edition, now): (u64, Timestamp),
        loss: &mut [(u64, u64)],
    ) -> Option<(Verdict, ByRegion)> {
        if !self.holds(edition, now) {
            return None;
        }
        add_loss(loss, &self.loss);
        Some((self.verdict, Arc::clone(&self.regions)))
    }

    /// The tally by region it holds, if it holds one (whether or not it holds now): the next
    /// tally shares it when it is the same.
    pub(super) fn regions(&self) -> Option<&ByRegion> {
        self.at.map(|_| &self.regions)
    }

    /// Becomes the tally the observations at `edition` gave at `now`, holding until `until`.
    pub(super) fn set(
        &mut self,
        (edition, now, until): (u64, Timestamp, Option<Timestamp>),
        verdict: Verdict,
        regions: &ByRegion,
        loss: &[(u64, u64)],
    ) {
        (self.edition, self.at, self.until, self.verdict) = (edition, Some(now), until, verdict);
        self.regions = Arc::clone(regions);
        self.loss.clear();
        self.loss.extend_from_slice(loss);
    }
}

/// A node's probe metrics as a pass took them, over its summarised addresses' observations
/// (the edition of each, in order), and while they hold. The editions alone tell the same
/// metrics: each edition is one content, but for the empty lists' (0), which add nothing.
#[derive(Debug, Default)]
pub(super) struct NodeTaken {
    editions: Vec<u64>,
    /// When it was taken (`None`: never).
    at: Option<Timestamp>,
    /// The first moment a result one of those addresses counted stops counting.
    until: Option<Timestamp>,
    summary: ProbeSummary,
}

impl NodeTaken {
    /// The metrics, if they are those of the observations at `summarised` (the editions of
    /// the summarised addresses') at `now`.
    pub(super) fn read(&self, summarised: &[u64], now: Timestamp) -> Option<ProbeSummary> {
        let holds = self.editions == summarised
            && self.at.is_some_and(|at| at <= now)
            && self.until.is_none_or(|u| now < u);
        holds.then(|| self.summary.clone())
    }

    /// Becomes the metrics `summary` of `summarised` at `now`, holding until `until`.
    pub(super) fn set(
        &mut self,
        summarised: &[u64],
        (now, until): (Timestamp, Option<Timestamp>),
        summary: &ProbeSummary,
    ) {
        self.editions.clear();
        self.editions.extend_from_slice(summarised);
        (self.at, self.until, self.summary.all) = (Some(now), until, summary.all);
        self.summary.regions.clone_from(&summary.regions);
    }
}

/// Things kept by key in the order the last pass met them, which the next meets them in too
/// unless keys came or went before them: each is then used in place. Once a key is not where
/// it was, the rest are found by key and moved into a new order, this pass's.
#[derive(Debug)]
struct InOrder<K, T> {
    kept: Vec<(K, T)>,
    /// Keys met so far in this pass, while they are where they were.
    met: usize,
    /// Once one was not: this pass's order so far, and where each key is in `kept`.
    moved: Option<Moved<K, T>>,
}

/// A pass's order so far, once a key was not where it was: what it met, and where each key not
/// met yet is kept.
type Moved<K, T> = (Vec<(K, T)>, FastMap<K, usize>);

impl<K, T> Default for InOrder<K, T> {
    fn default() -> Self {
        InOrder { kept: Vec::new(), met: 0, moved: None }
    }
}

impl<K: Copy + Eq + std::hash::Hash, T: Default> InOrder<K, T> {
    /// What is kept of `key`, met next in this pass (a default when nothing is).
    fn at(&mut self, key: K) -> &mut T {
        let i = self.met;
        if self.moved.is_none() {
            if self.kept.get(i).is_some_and(|(k, _)| *k == key) {
                self.met += 1;
                return &mut self.kept[i].1;
            }
            let places = self.kept.iter().enumerate().skip(i).map(|(i, (k, _))| (*k, i)).collect();
            let mut order = Vec::with_capacity(self.kept.len().max(i + 1));
            order.extend(self.kept.drain(..i));
            // `kept` lost its first `i`: the places of the rest move back as many.
            self.moved = Some((order, places));
            self.met = i;
        }
        let (order, places) = self.moved.get_or_insert_with(Default::default);
        let at = places.remove(&key).and_then(|p| p.checked_sub(self.met));
        let t = at.and_then(|p| self.kept.get_mut(p)).map(|(_, t)| std::mem::take(t)).unwrap_or_default();
        order.push((key, t));
        let last = order.len() - 1;
        &mut order[last].1
    }

    /// What is kept of `key`, if it is met `n` keys after the next, without meeting it: where
    /// the keys are in place, what is `n` places on (nothing, if another key is there); once
    /// the order moved, what is kept of `key` wherever it is.
    fn ahead(&self, n: usize, key: K) -> Option<&T> {
        let at = match &self.moved {
            None => self.met + n,
            Some((_, places)) => places.get(&key)?.checked_sub(self.met)?,
        };
        self.kept.get(at).filter(|(k, _)| *k == key).map(|(_, t)| t)
    }

    /// What is kept of the key met last.
    fn last(&mut self) -> Option<&mut T> {
        match &mut self.moved {
            Some((order, _)) => order.last_mut().map(|(_, t)| t),
            None => self.met.checked_sub(1).and_then(|i| self.kept.get_mut(i)).map(|(_, t)| t),
        }
    }

    /// Ends a pass: what it did not meet is forgotten.
    fn end(&mut self) {
        match self.moved.take() {
            Some((order, _)) => self.kept = order,
            None => self.kept.truncate(self.met),
        }
        self.met = 0;
    }

    fn clear(&mut self) {
        *self = InOrder::default();
    }
}

/// The tallies a cluster's passes took, kept from one pass to the next by its evaluator (never
/// saved: a start tallies every address).
#[derive(Debug, Default)]
pub struct Tallied {
    /// For one pass alone ([`Tallied::none`]): what it tallies goes to one spare room each,
    /// nothing is kept.
    alone: bool,
    spare: (Taken, NodeTaken),
    probers: Vec<ProberView>,
    /// The regions with an active prober among them: the columns of a tally by region.
    regions: Vec<RegionId>,
    settings: Option<ProbeSettings>,
    addresses: InOrder<(NodeId, IpAddr), Taken>,
    nodes: InOrder<NodeId, NodeTaken>,
    /// What each node's part of the last pass made, and the settings it was made with.
    kept: InOrder<NodeId, NodeKept>,
    pass: Option<PassInputs>,
    /// The last pass's list of facts, emptied.
    facts_room: Vec<NodeFacts>,
    /// Addresses the last pass read back, and those it tallied.
    counts: (usize, usize),
    /// Nodes the last pass took as the one before made them.
    taken_as_they_were: usize,
}

impl Tallied {
    /// For one pass alone: nothing kept, nothing read back (`default` keeps them).
    pub fn none() -> Tallied {
        Tallied { alone: true, ..Tallied::default() }
    }

    /// Begins a pass over `probers`, whose active ones are in `regions`, with `settings`:
    /// tallies taken over other settings, or over probers that are not the first of these
    /// with the same regions, are forgotten. Probers added after the others (a node created
    /// takes a place in the table, probing or not) made none of the observations tallied, so
    /// unless one brings a region of its own, each tally holds. What the nodes' parts of a
    /// pass with other inputs (`pass`) made is forgotten.
    pub(super) fn begin(&mut self, probers: &[ProberView], regions: &[RegionId], pass: PassInputs) {
        let settings = &pass.settings;
        if self.pass != Some(pass) {
            self.kept.clear();
            self.pass = Some(pass);
        }
        let kept = probers.get(..self.probers.len()).is_some_and(|p| p == self.probers)
            && regions == self.regions
            && self.settings == Some(*settings);
        if !kept {
            self.addresses.clear();
            self.nodes.clear();
            self.regions = regions.to_vec();
            self.settings = Some(*settings);
        }
        // Kept as they are now: the next pass compares with these.
        if !kept || self.probers.len() != probers.len() {
            self.probers = probers.to_vec();
        }
        self.counts = (0, 0);
        self.taken_as_they_were = 0;
    }

    /// How many addresses the last pass read back, and how many it tallied again.
    pub fn last_pass(&self) -> (usize, usize) {
        self.counts
    }

    /// The tally kept of address `key`, met next in this pass: to read back or set.
    pub(super) fn address(&mut self, key: (NodeId, IpAddr)) -> &mut Taken {
        if self.alone {
            self.spare.0.at = None;
            return &mut self.spare.0;
        }
        self.addresses.at(key)
    }

    /// Whether the tally kept of address `key`, if it is met `n` addresses after the next,
    /// is that of the observations at `edition` at `now`: a pass reads ahead the observations
    /// of only the addresses it will tally again. A guess (`false` where keys came or went
    /// before it) that costs at worst a read in vain, never a decision.
    pub(super) fn holds_ahead(
        &self,
        n: usize,
        key: (NodeId, IpAddr),
        (edition, now): (u64, Timestamp),
    ) -> bool {
        !self.alone && self.addresses.ahead(n, key).is_some_and(|t| t.holds(edition, now))
    }

    /// How many nodes the last pass took as the pass before made them.
    pub fn nodes_as_they_were(&self) -> usize {
        self.taken_as_they_were
    }

    /// Counts an address's tally read back (`reused`) or taken again.
    pub(super) fn count(&mut self, reused: bool) {
        if reused { self.counts.0 += 1 } else { self.counts.1 += 1 }
    }

    /// The probe metrics kept of `node`, met next in this pass among those a rule reads.
    pub(super) fn node(&mut self, node: NodeId) -> &mut NodeTaken {
        if self.alone {
            self.spare.1.at = None;
            return &mut self.spare.1;
        }
        self.nodes.at(node)
    }

    /// The probe metrics kept of the node met last, to set.
    pub(super) fn last_node(&mut self) -> Option<&mut NodeTaken> {
        if self.alone {
            return Some(&mut self.spare.1);
        }
        self.nodes.last()
    }

    /// What the last pass made of `node`, met next in this pass (every node is, once): for a
    /// pass alone, nothing.
    pub(super) fn node_kept(&mut self, node: NodeId) -> Option<&mut NodeKept> {
        (!self.alone).then(|| self.kept.at(node))
    }

    /// What is kept of the node met last, to take or set.
    pub(super) fn last_kept(&mut self) -> Option<&mut NodeKept> {
        self.kept.last()
    }

    /// What the last pass made of the node met last, taken as it was (counted).
    pub(super) fn take_kept(&mut self) -> Option<Made> {
        let made = self.kept.last()?.take()?;
        self.taken_as_they_were += 1;
        Some(made)
    }

    /// Ends a pass: what it did not take (addresses and nodes gone) is forgotten.
    pub(super) fn end(&mut self) {
        self.addresses.end();
        self.nodes.end();
        self.kept.end();
    }

    /// The facts of the pass's nodes, in the order it met them, given back to be taken by the
    /// next pass for the nodes that stay as they were.
    /// The list itself is kept empty for the next pass's facts: a list of 10,000 nodes' facts
    /// allocated and freed at every pass was a large block for the allocator to find and merge.
    pub(super) fn keep_facts(&mut self, mut facts: Vec<NodeFacts>) {
        debug_assert!(self.alone || self.kept.kept.len() == facts.len(), "every node met once");
        if self.kept.kept.len() == facts.len() {
            for ((_, k), f) in self.kept.kept.iter_mut().zip(facts.drain(..)) {
                k.keep_facts(f);
            }
        }
        facts.clear();
        self.facts_room = facts;
    }

    /// An empty list for a pass's facts of `nodes` nodes: the last pass's.
    pub(super) fn facts_room(&mut self, nodes: usize) -> Vec<NodeFacts> {
        let mut room = std::mem::take(&mut self.facts_room);
        room.reserve(nodes);
        room
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What one pass met, each key with what it kept: the next finds each key's whatever came
    /// or went before it, and forgets those it does not meet.
    fn pass(order: &mut InOrder<u32, u32>, keys: &[u32]) -> Vec<u32> {
        let found = keys.iter().map(|k| std::mem::replace(order.at(*k), k * 10)).collect();
        order.end();
        found
    }

    #[test]
    fn each_key_is_found_where_it_is_or_by_key_once_the_order_moved() {
        let mut order = InOrder::default();
        assert_eq!(pass(&mut order, &[1, 2, 3, 4]), [0, 0, 0, 0], "nothing kept yet");
        assert_eq!(pass(&mut order, &[1, 2, 3, 4]), [10, 20, 30, 40], "each where it was");
        assert_eq!(pass(&mut order, &[1, 3, 5, 4]), [10, 30, 0, 40], "2 gone, 5 new");
        assert_eq!(pass(&mut order, &[1, 3, 5, 4]), [10, 30, 50, 40], "the new order kept");
        assert_eq!(pass(&mut order, &[1, 3]), [10, 30], "the last ones gone");
        assert_eq!(pass(&mut order, &[3, 1, 3]), [30, 10, 0], "a key met twice: once kept");
        assert_eq!(order.kept.len(), 3);
    }

    /// What a pass sees ahead of a key it meets later is what it finds when it meets it, once
    /// the order moved too; before, only keys where they were are seen ahead (a guess, not a
    /// search: a key not seen ahead is only read ahead in vain).
    #[test]
    fn what_is_seen_ahead_is_what_is_found() {
        let mut order = InOrder::default();
        pass(&mut order, &[1, 2, 3, 4]);
        let mut guessed = Vec::new();
        for (keys, seen) in
            [(&[1, 2, 3, 4][..], 4), (&[1, 2, 4][..], 2), (&[1, 5, 2, 4][..], 3), (&[4, 2, 5, 1][..], 3)]
        {
            let mut found_ahead = 0;
            let at_start = (0..keys.len()).filter(|n| order.ahead(*n, keys[*n]).is_some()).count();
            for (i, k) in keys.iter().enumerate() {
                let ahead: Vec<Option<u32>> =
                    (i..keys.len()).map(|n| order.ahead(n - i, keys[n]).copied()).collect();
                let found = std::mem::replace(order.at(*k), k * 10);
                if let Some(v) = ahead[0] {
                    assert_eq!(v, found, "{keys:?}: {k} seen ahead as it is found");
                    found_ahead += 1;
                }
                for (n, later) in ahead.iter().enumerate().skip(1) {
                    let now = order.ahead(n - 1, keys[i + n]).copied();
                    assert!(
                        later.is_none() || *later == now,
                        "{keys:?}: {} seen ahead, then not",
                        keys[i + n]
                    );
                }
            }
            order.end();
            assert_eq!(found_ahead, seen, "{keys:?}: keys seen ahead");
            guessed.push(at_start);
        }
        assert_eq!(guessed, [4, 2, 1, 0], "keys seen ahead from the start, where they are in place");
    }
}
