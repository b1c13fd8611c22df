//! Looking up a map of nodes for nodes met in node order: a walk beside the map instead of a
//! search for each (issue 32: a pass meets every node of a cluster, and a search is a cache
//! miss or several at a fleet's scale).

use std::collections::BTreeMap;
use std::collections::btree_map::Iter;
use std::iter::Peekable;

use crate::ids::NodeId;

/// `map`'s entries for the nodes asked of it, walked beside while they are asked in ascending
/// order, looked up by key for one asked out of order.
#[derive(Debug)]
pub struct Beside<'a, V> {
    map: &'a BTreeMap<NodeId, V>,
    walk: Peekable<Iter<'a, NodeId, V>>,
    /// The node asked last in order: the walk stands at the first entry not before it.
    last: Option<NodeId>,
}

impl<'a, V> Beside<'a, V> {
    pub fn new(map: &'a BTreeMap<NodeId, V>) -> Self {
        Beside { map, walk: map.iter().peekable(), last: None }
    }

    /// The entry of `node`, if the map has one.
    pub fn get(&mut self, node: NodeId) -> Option<&'a V> {
        if self.last.is_some_and(|l| node < l) {
            return self.map.get(&node);
        }
        self.last = Some(node);
        while self.walk.next_if(|(id, _)| **id < node).is_some() {}
        self.walk.peek().filter(|(id, _)| **id == node).map(|(_, v)| *v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_asked_in_any_order_find_what_a_look_up_finds() {
        let map: BTreeMap<NodeId, u32> =
            [2, 4, 6, 8].into_iter().map(|i| (NodeId(i), i as u32 * 10)).collect();
        let mut beside = Beside::new(&map);
        for i in [1, 2, 4, 5, 8, 3, 6, 8, 9, 2] {
            assert_eq!(beside.get(NodeId(i)), map.get(&NodeId(i)), "node {i}");
        }
    }
}
