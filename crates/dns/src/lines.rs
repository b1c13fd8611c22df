//! Which line answers a client: the most specific client network containing its address,
//! and how far that choice reaches (the ECS scope prefix).
//!
//! One binary trie per address family, built with the answer table and never changed; a
//! lookup walks at most 32 or 128 nodes and allocates nothing.

use std::net::IpAddr;

use crate::table::LineAnswers;

const NONE: u32 = u32::MAX;

#[derive(Debug, Clone, Copy)]
struct Node {
    child: [u32; 2],
    line: u32,
}

impl Node {
    const EMPTY: Node = Node { child: [NONE, NONE], line: NONE };
}

/// Networks of one family; addresses are left-aligned in a `u128`.
#[derive(Debug, Clone)]
struct NetTrie {
    nodes: Vec<Node>,
    bits: u8,
}

impl NetTrie {
    fn new(bits: u8) -> Self {
        NetTrie { nodes: vec![Node::EMPTY], bits }
    }

    /// Adds a network; the first line to claim a network keeps it (lines come in priority order).
    fn insert(&mut self, addr: u128, prefix: u8, line: u32) {
        let mut node = 0usize;
        for depth in 0..prefix.min(self.bits) {
            let bit = ((addr >> (127 - u32::from(depth))) & 1) as usize;
            let next = self.nodes[node].child[bit];
            node = if next == NONE {
                let id = self.nodes.len();
                self.nodes.push(Node::EMPTY);
                // Node counts stay far below u32::MAX: at most 128 per network.
                self.nodes[node].child[bit] = id as u32;
                id
            } else {
                next as usize
            };
        }
        if self.nodes[node].line == NONE {
            self.nodes[node].line = line;
        }
    }

    /// The line of the longest network containing `addr` (if any) and the scope: the prefix
    /// length within which every address gets the same choice. Besides the matched network's
    /// own length, the scope must be long enough to exclude every more specific network that
    /// shares `addr`'s leading bits but not `addr` itself.
    fn lookup(&self, addr: u128) -> (Option<u32>, u8) {
        let mut node = 0usize;
        let mut depth = 0u8;
        let mut best = None;
        let mut best_depth = 0u8;
        let mut need = 0u8;
        while let Some(n) = self.nodes.get(node) {
            if n.line != NONE {
                best = Some(n.line);
                best_depth = depth;
            }
            if depth >= self.bits {
                break;
            }
            let bit = ((addr >> (127 - u32::from(depth))) & 1) as usize;
            if n.child[1 - bit] != NONE {
                need = depth + 1;
            }
            let next = n.child[bit];
            if next == NONE {
                break;
            }
            node = next as usize;
            depth += 1;
        }
        (best, best_depth.max(need))
    }
}

/// The line choice of one cluster. A choice is an index into the cluster's lines, or
/// `lines.len()` for the union (`all`), used when no line matches and there is no default line.
#[derive(Debug, Clone)]
pub(crate) struct LineChooser {
    v4: NetTrie,
    v6: NetTrie,
    fallback: u32,
}

impl LineChooser {
    pub(crate) fn new(lines: &[LineAnswers]) -> Self {
        let mut v4 = NetTrie::new(32);
        let mut v6 = NetTrie::new(128);
        let mut fallback = None;
        for (i, line) in lines.iter().enumerate() {
            let i = i as u32;
            if line.client_networks.is_empty() {
                fallback.get_or_insert(i);
            }
            for net in &line.client_networks {
                match net.addr() {
                    IpAddr::V4(a) => v4.insert(u128::from(u32::from(a)) << 96, net.prefix(), i),
                    IpAddr::V6(a) => v6.insert(u128::from(a), net.prefix(), i),
                }
            }
        }
        LineChooser { v4, v6, fallback: fallback.unwrap_or(lines.len() as u32) }
    }

    /// The choice for a client address, and the ECS scope prefix it is valid for.
    pub(crate) fn choose(&self, addr: IpAddr) -> (u32, u8) {
        let (line, scope) = match addr.to_canonical() {
            IpAddr::V4(a) => self.v4.lookup(u128::from(u32::from(a)) << 96),
            IpAddr::V6(a) => self.v6.lookup(u128::from(a)),
        };
        (line.unwrap_or(self.fallback), scope)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(name: &str, nets: &[&str]) -> LineAnswers {
        LineAnswers {
            name: name.into(),
            client_networks: nets.iter().map(|n| n.parse().unwrap()).collect(),
            records: vec![],
            ttl: None,
        }
    }

    fn choose(c: &LineChooser, ip: &str) -> (u32, u8) {
        c.choose(ip.parse().unwrap())
    }

    #[test]
    fn most_specific_network_wins_and_scope_excludes_nested_networks() {
        let c = LineChooser::new(&[
            line("wide", &["10.0.0.0/8"]),
            line("narrow", &["10.1.0.0/16"]),
            line("default", &[]),
        ]);
        assert_eq!(choose(&c, "10.1.2.3"), (1, 16));
        // Inside /8 but the /16 of another line shares the first 15 bits: scope must reach 16.
        assert_eq!(choose(&c, "10.0.2.3"), (0, 16));
        // Far from the /16: the scope only needs to exclude it.
        assert_eq!(choose(&c, "10.200.0.1"), (0, 9));
        assert_eq!(choose(&c, "192.0.2.1").0, 2);
        assert_eq!(choose(&c, "2001:db8::1"), (2, 0));
        // IPv4-mapped IPv6 addresses (dual-stack sockets) count as IPv4.
        assert_eq!(choose(&c, "::ffff:10.1.0.9"), (1, 16));
    }

    #[test]
    fn no_default_line_falls_back_to_all_and_priority_breaks_ties() {
        let c =
            LineChooser::new(&[line("a", &["192.0.2.0/24"]), line("b", &["192.0.2.0/24", "2001:db8::/32"])]);
        assert_eq!(choose(&c, "192.0.2.7"), (0, 24));
        assert_eq!(choose(&c, "198.51.100.1").0, 2);
        assert_eq!(choose(&c, "2001:db8:5::1"), (1, 32));
        let whole = LineChooser::new(&[line("everyone", &["0.0.0.0/0"])]);
        assert_eq!(choose(&whole, "203.0.113.5"), (0, 0));
    }
}
