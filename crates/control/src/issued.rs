//! Which target keys each prober was given, in a bit per key. Every key a work names has a
//! place in one index, shared by the works built on it; a work's keys are a bit per place.
//! Fifty probers each given 40,000 keys of a 10,000-node fleet held a set of 65,536 buckets of
//! 33 bytes each, about a quarter of the core's memory per result (issue 32); the index holds
//! every key once and a work's keys take 8 KiB.
//!
//! A work keeps the index it was built on, so a later index (one that added keys, or one built
//! afresh without the keys no work names any more) takes nothing from it: a report is checked
//! against the keys its prober was given, whatever came since. Keys are added to a small part
//! of the index, which alone is copied while works hold it: while nodes are created, each
//! prober's work may name new keys, and a copy of the whole index for each would hold more
//! than the sets did.

use std::sync::Arc;

use vantage_core::Timestamp;
use vantage_core::evaluate::FastMap;

use crate::target::TargetKey;

/// A place of the index that no work gave for this long is gone when the index is next built
/// afresh: the probers ask for work every round, and results go after an hour too.
const KEPT_MS: i64 = 3_600_000;
/// The index is built afresh, without the places no work gave within [`KEPT_MS`], when keys
/// are added and it would hold more than twice those given, plus this many.
const SLACK: usize = 4_096;
/// The keys added since the index was last folded are folded into the rest once they are
/// more than a 32nd of it, and this many: a copy of the rest per 32nd of new keys.
const FOLD_AFTER: usize = 1_024;

/// Keys, each at its place.
#[derive(Debug, Clone, Default)]
struct Places {
    places: FastMap<TargetKey, u32>,
    keys: Vec<TargetKey>,
}

impl Places {
    /// `key` at `place`, the one after the last.
    fn push(&mut self, key: TargetKey, place: u32) {
        self.places.insert(key, place);
        self.keys.push(key);
    }
}

/// Every key a work named, each at a place of its own, in two parts never changed once a work
/// holds them: the keys up to the last fold, and those added since, after them. Keys are added
/// to a copy of the second part; once it outgrows a 32nd of the first, the two are folded into
/// one.
#[derive(Debug, Clone, Default)]
struct KeyIndex {
    folded: Arc<Places>,
    added: Arc<Places>,
}

impl KeyIndex {
    /// The place of `key`, if it has one.
    fn place(&self, key: &TargetKey) -> Option<u32> {
        self.folded.places.get(key).or_else(|| self.added.places.get(key)).copied()
    }

    /// Keys in it.
    fn len(&self) -> usize {
        self.folded.keys.len() + self.added.keys.len()
    }

    /// Every key, in the order of their places.
    fn keys(&self) -> impl Iterator<Item = &TargetKey> {
        self.folded.keys.iter().chain(&self.added.keys)
    }

    /// Gives `key` the next place.
    fn push(&mut self, key: TargetKey) -> u32 {
        let place = u32::try_from(self.len()).unwrap_or(u32::MAX);
        Arc::make_mut(&mut self.added).push(key, place);
        place
    }

    /// Folds the keys added into the rest once they outgrow a 32nd of it; every place stays.
    fn fold(&mut self) {
        if self.added.keys.len() <= FOLD_AFTER.max(self.folded.keys.len() / 32) {
            return;
        }
        let added = std::mem::take(&mut self.added);
        let folded = Arc::make_mut(&mut self.folded);
        folded.places.extend(added.places.iter().map(|(k, p)| (*k, *p)));
        folded.keys.extend_from_slice(&added.keys);
    }
}

/// The keys one work gave: a bit per place of the index it was built on.
#[derive(Debug, Clone, Default)]
pub struct GivenKeys {
    index: KeyIndex,
    bits: Vec<u64>,
}

impl GivenKeys {
    /// Whether `key` was given.
    pub fn contains(&self, key: &TargetKey) -> bool {
        self.place(key).is_some()
    }

    /// The place of `key` when it was given: one key, one place, so that a report's targets
    /// are told apart by a bit each ([`Self::none`], [`Self::give`]).
    pub fn place(&self, key: &TargetKey) -> Option<u32> {
        self.index.place(key).filter(|p| self.has(*p))
    }

    /// None of the keys of the index these were given from.
    pub fn none(&self) -> GivenKeys {
        GivenKeys { index: self.index.clone(), bits: vec![0; self.bits.len()] }
    }

    /// How many keys were given.
    fn len(&self) -> usize {
        self.bits.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// The keys given, in the order of their places.
    fn iter(&self) -> impl Iterator<Item = &TargetKey> {
        (self.index.keys().enumerate()).filter(|(p, _)| self.has(*p as u32)).map(|(_, k)| k)
    }

    fn has(&self, place: u32) -> bool {
        self.bits.get(place as usize / 64).is_some_and(|w| w & (1 << (place % 64)) != 0)
    }

    /// Gives `place`; whether it was not given before (a place past the index is never given).
    pub fn give(&mut self, place: u32) -> bool {
        let Some(w) = self.bits.get_mut(place as usize / 64) else { return false };
        let bit = 1 << (place % 64);
        let new = *w & bit == 0;
        *w |= bit;
        new
    }
}

/// The same keys given, whatever index each was built on.
impl PartialEq for GivenKeys {
    fn eq(&self, other: &GivenKeys) -> bool {
        self.len() == other.len() && self.iter().all(|k| other.contains(k))
    }
}

/// The index works are built on now, and when each of its places was last given.
#[derive(Debug, Default)]
pub struct Keys {
    index: KeyIndex,
    given_at: Vec<Timestamp>,
}

impl Keys {
    /// A work gives `keys` at `now`. Keys new to the index are added to it (to a copy of the
    /// keys added since the last fold, while works hold them); when that would leave it holding
    /// more than twice the keys given within [`KEPT_MS`] (nodes deleted, addresses changed), it
    /// is built afresh from those.
    pub fn give(&mut self, keys: &[TargetKey], now: Timestamp) -> GivenKeys {
        let mut places: Vec<Option<u32>> = keys.iter().map(|k| self.index.place(k)).collect();
        let new = places.iter().filter(|p| p.is_none()).count();
        if new > 0 {
            let since = now.plus_millis(-KEPT_MS);
            let live = self.given_at.iter().filter(|t| **t >= since).count();
            if self.index.len() + new > 2 * (live + new) + SLACK {
                self.rebuild(since);
                places = keys.iter().map(|k| self.index.place(k)).collect();
            }
            for (key, place) in keys.iter().zip(&mut places) {
                if place.is_none() {
                    // The same key may be named twice by one work.
                    *place = Some(self.index.place(key).unwrap_or_else(|| self.index.push(*key)));
                }
            }
            self.index.fold();
            self.given_at.resize(self.index.len(), now);
        }
        let mut given = GivenKeys { index: self.index.clone(), bits: vec![0; self.index.len().div_ceil(64)] };
        for p in places.into_iter().flatten() {
            given.give(p);
            self.given_at[p as usize] = now;
        }
        given
    }

    /// A new index of the keys given since `since`, in their order.
    fn rebuild(&mut self, since: Timestamp) {
        let mut folded = Places::default();
        let mut given_at = Vec::new();
        for (key, at) in self.index.keys().zip(&self.given_at).filter(|(_, at)| **at >= since) {
            folded.push(*key, u32::try_from(folded.keys.len()).unwrap_or(u32::MAX));
            given_at.push(*at);
        }
        self.index = KeyIndex { folded: Arc::new(folded), added: Arc::default() };
        self.given_at = given_at;
    }

    /// Keys in the index.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.index.len()
    }
}

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv4Addr};

    use vantage_core::ids::NodeId;

    use super::*;

    fn key(n: i64) -> TargetKey {
        TargetKey { node: NodeId(n), ip: IpAddr::V4(Ipv4Addr::new(192, 0, 2, (n % 250) as u8)), port: 443 }
    }

    fn keys(r: std::ops::Range<i64>) -> Vec<TargetKey> {
        r.map(key).collect()
    }

    /// Each work's keys are what it was given, and nothing else, whatever later works add;
    /// a key named twice counts once.
    #[test]
    fn a_work_holds_the_keys_it_gave() {
        let now = Timestamp::from_secs(1_800_000_000);
        let mut k = Keys::default();
        let mut first = keys(0..100);
        first.push(key(7));
        let a = k.give(&first, now);
        let b = k.give(&keys(50..300), now);
        assert_eq!(k.len(), 300, "one place per key");
        assert_eq!(a.len(), 100);
        assert_eq!(b.len(), 250);
        assert!(a.contains(&key(0)) && a.contains(&key(99)) && !a.contains(&key(100)));
        assert!(!b.contains(&key(49)) && b.contains(&key(50)) && b.contains(&key(299)));
        assert_eq!(a.iter().copied().collect::<Vec<_>>(), keys(0..100));
        assert!(GivenKeys::default().len() == 0 && !GivenKeys::default().contains(&key(0)));
        assert_eq!(k.give(&keys(0..100), now), a, "the same keys, from a later index");
        assert_ne!(k.give(&keys(0..99), now), a);
    }

    /// Keys added while works hold the index copy only what was added since the last fold;
    /// a fold keeps every place, so works from before and after it agree.
    #[test]
    fn keys_are_added_to_a_small_part() {
        let now = Timestamp::from_secs(1_800_000_000);
        let mut k = Keys::default();
        let a = k.give(&keys(0..2_000), now);
        let b = k.give(&keys(0..2_001), now);
        let c = k.give(&keys(0..2_002), now);
        assert!(
            Arc::ptr_eq(&a.index.folded, &b.index.folded) && Arc::ptr_eq(&b.index.folded, &c.index.folded)
        );
        assert_eq!((b.index.added.keys.len(), c.index.added.keys.len()), (1, 2), "b keeps its own");
        assert!(b.contains(&key(2_000)) && !b.contains(&key(2_001)) && c.contains(&key(2_001)));
        let d = k.give(&keys(0..3_102), now);
        assert!(!Arc::ptr_eq(&d.index.folded, &a.index.folded) && d.index.added.keys.is_empty(), "folded");
        assert_eq!(d.iter().copied().collect::<Vec<_>>(), keys(0..3_102), "every place kept");
        assert_eq!(k.give(&keys(0..2_002), now), c);
        assert!(a.contains(&key(1_999)) && !a.contains(&key(2_000)) && a.len() == 2_000);
    }

    /// Keys no work named for an hour leave the index when new ones would double it; works
    /// built before still hold theirs, and the places of the keys still given are kept.
    #[test]
    fn the_index_sheds_the_keys_no_work_names() {
        let start = Timestamp::from_secs(1_800_000_000);
        let mut k = Keys::default();
        let old = k.give(&keys(0..10_000), start);
        let later = start.plus_secs(3_601);
        let kept = k.give(&keys(9_000..10_000), later);
        assert_eq!(k.len(), 10_000, "nothing new: nothing shed");
        let fresh = k.give(&keys(20_000..20_100), later);
        assert_eq!(k.len(), 1_100, "the thousand still given and the hundred new");
        assert!(old.contains(&key(0)) && old.contains(&key(9_999)) && old.len() == 10_000);
        assert!(kept.contains(&key(9_000)) && !kept.contains(&key(20_000)));
        assert!(fresh.contains(&key(20_000)) && !fresh.contains(&key(9_000)));
        assert_eq!(k.give(&keys(9_000..10_000), later), kept, "the same keys after the rebuild");
        // Within the slack, or with enough still given, nothing is shed.
        let mut k = Keys::default();
        k.give(&keys(0..3_000), start);
        k.give(&keys(5_000..5_010), later);
        assert_eq!(k.len(), 3_010);
    }
}
