//! A cluster's evaluator state as it is saved: by difference. Most of it is the hysteresis of
//! every address of the cluster (30,000 entries at 10,000 nodes), and between two saves few
//! of them move — none but a new node's when an operator adds one. So a save carries the rest
//! of the state whole and only the addresses that moved since the one before; the first save
//! of a core (after a start, or once it takes the evaluator lease) carries every address and
//! replaces what was saved of them. The published records (one per address) are not saved
//! at all: they are the latest revision's, which the store holds, and a start takes them from it.

use std::collections::BTreeMap;
use std::net::IpAddr;

use vantage_core::evaluate::{ClusterState, FastSet};
use vantage_core::ids::{ClusterId, NodeId};
use vantage_core::reachability::AddressHealth;

/// What a save writes of a cluster's state.
#[derive(Debug, Clone, PartialEq)]
pub struct StateSave {
    pub cluster: ClusterId,
    /// The state without its addresses' hysteresis and its published records.
    pub rest: ClusterState,
    /// The addresses whose hysteresis moved since the last save, by key order, each as it is
    /// now (`None`: forgotten, to delete); every address when `whole`.
    pub addresses: Vec<((NodeId, IpAddr), Option<AddressHealth>)>,
    /// `addresses` is every address: whatever was saved of the cluster's addresses before goes.
    pub whole: bool,
}

impl StateSave {
    /// The save of `state` (whole, or of the addresses in `unsaved`, which it empties), made
    /// without copying its addresses' map or its published records.
    pub fn of(
        cluster: ClusterId,
        state: &mut ClusterState,
        unsaved: &mut FastSet<(NodeId, IpAddr)>,
        whole: bool,
    ) -> StateSave {
        let kept = std::mem::take(&mut state.addresses);
        let published = state.published.take();
        let rest = state.clone();
        state.published = published;
        let mut addresses: Vec<_> = if whole {
            kept.iter().map(|(k, h)| (*k, Some(*h))).collect()
        } else {
            unsaved.iter().map(|k| (*k, kept.get(k).copied())).collect()
        };
        addresses.sort_unstable_by_key(|(k, _)| *k);
        unsaved.clear();
        state.addresses = kept;
        StateSave { cluster, rest, addresses, whole }
    }

    /// `save` joins what waits in `saves`: folded into its cluster's, or in its own place.
    pub fn fold_into(saves: &mut BTreeMap<ClusterId, StateSave>, save: StateSave) {
        match saves.get_mut(&save.cluster) {
            Some(held) => held.then(save),
            None => drop(saves.insert(save.cluster, save)),
        }
    }

    /// Folds in `newer`, a save of the same cluster handed over after this one: one save that
    /// writes what the two would, one after the other.
    pub fn then(&mut self, newer: StateSave) {
        debug_assert_eq!(self.cluster, newer.cluster, "saves of one cluster");
        if newer.whole {
            *self = newer;
            return;
        }
        // Newer first: a stable sort keeps it first among its key's, and the dedup keeps the first.
        let mut addresses = newer.addresses;
        addresses.append(&mut self.addresses);
        addresses.sort_by_key(|(k, _)| *k);
        addresses.dedup_by_key(|(k, _)| *k);
        self.addresses = addresses;
        self.rest = newer.rest;
    }

    /// The state a whole save and the differences after it come back to, at a start: `rest`
    /// with the saved addresses in (its published records are the latest revision's, which
    /// [`crate::Control::new`] puts in). A rest that holds addresses itself was saved whole by an
    /// older version, after any rows (a save by difference writes a rest without them): its
    /// addresses are the state's, and the rows are left out.
    pub fn restore(
        mut rest: ClusterState,
        addresses: impl IntoIterator<Item = ((NodeId, IpAddr), AddressHealth)>,
    ) -> ClusterState {
        if rest.addresses.is_empty() {
            rest.addresses.extend(addresses);
        }
        rest
    }
}

#[cfg(test)]
mod tests {
    use vantage_core::Timestamp;
    use vantage_core::reachability::Reachability;

    use super::*;

    fn key(n: i64) -> (NodeId, IpAddr) {
        (NodeId(n), IpAddr::from([192, 0, 2, u8::try_from(n).unwrap()]))
    }

    fn down(at: i64) -> AddressHealth {
        AddressHealth {
            state: Reachability::Unreachable,
            since: Some(Timestamp::from_secs(at)),
            ..AddressHealth::default()
        }
    }

    /// Saves folded together write what they would one after the other; a whole one replaces
    /// what came before it.
    #[test]
    fn saves_fold_into_the_newest_of_each_address() {
        let mut state = ClusterState::default();
        state.addresses.extend([(key(1), down(1)), (key(2), down(2)), (key(3), down(3))]);
        state.published = Some(vantage_core::evaluate::Records::default());
        let mut unsaved = FastSet::default();
        let whole = StateSave::of(ClusterId(1), &mut state, &mut unsaved, true);
        assert_eq!(whole.addresses.len(), 3);
        assert!(whole.rest.addresses.is_empty() && state.addresses.len() == 3, "the map is put back");
        assert!(whole.rest.published.is_none() && state.published.is_some(), "the records stay, unsaved");

        state.addresses.insert(key(2), down(20));
        state.addresses.remove(&key(3));
        unsaved.extend([key(2), key(3)]);
        let first = StateSave::of(ClusterId(1), &mut state, &mut unsaved, false);
        assert_eq!(first.addresses, [(key(2), Some(down(20))), (key(3), None)]);
        assert!(unsaved.is_empty());

        state.addresses.insert(key(3), down(30));
        state.checked_at = Some(Timestamp::from_secs(99));
        unsaved.insert(key(3));
        let second = StateSave::of(ClusterId(1), &mut state, &mut unsaved, false);
        let mut folded = first.clone();
        folded.then(second.clone());
        assert_eq!(folded.addresses, [(key(2), Some(down(20))), (key(3), Some(down(30)))]);
        assert_eq!(folded.rest.checked_at, Some(Timestamp::from_secs(99)), "the newest rest");
        assert!(!folded.whole);

        let mut onto_whole = whole.clone();
        onto_whole.then(folded);
        assert!(onto_whole.whole, "a whole save stays whole with what followed");
        assert_eq!(onto_whole.addresses.len(), 3);
        let mut replaced = first;
        replaced.then(whole.clone());
        assert_eq!(replaced, whole);
    }
}
