//! Which line answers a client: the most specific client network containing its address, else
//! the line claiming its place (by the geo database: AS, then country, then continent), else
//! the default line; and how far that choice reaches (the ECS scope prefix).
//!
//! One binary trie per address family, built with the answer table and never changed; a
//! lookup walks at most 32 or 128 nodes and allocates nothing. The geo database is asked only
//! when no network holds the address and some line claims places.

use std::net::IpAddr;

use vantage_core::geo::{Places, claimant};

use crate::geo::Located;
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
    /// Lines claiming places, in priority order.
    places: Vec<(u32, Places)>,
    fallback: u32,
}

impl LineChooser {
    pub(crate) fn new(lines: &[LineAnswers]) -> Self {
        let mut v4 = NetTrie::new(32);
        let mut v6 = NetTrie::new(128);
        let mut fallback = None;
        let mut places = Vec::new();
        for (i, line) in lines.iter().enumerate() {
            let i = i as u32;
            if line.is_default() {
                fallback.get_or_insert(i);
            }
            if !line.places.is_empty() {
                places.push((i, line.places.clone()));
            }
            for net in &line.client_networks {
                match net.addr() {
                    IpAddr::V4(a) => v4.insert(u128::from(u32::from(a)) << 96, net.prefix(), i),
                    IpAddr::V6(a) => v6.insert(u128::from(a), net.prefix(), i),
                }
            }
        }
        LineChooser { v4, v6, places, fallback: fallback.unwrap_or(lines.len() as u32) }
    }

    /// The choice for a client address, and the ECS scope prefix it is valid for (in the
    /// address's own family: an IPv4-mapped IPv6 address is chosen for as IPv4, and its scope
    /// counts the 96 bits of the mapping, so that a resolver never applies it to other mapped
    /// addresses); `locate` places the address (`None`: no geo database).
    pub(crate) fn choose(&self, asked: IpAddr, locate: impl FnOnce(IpAddr) -> Option<Located>) -> (u32, u8) {
        let (line, scope) = self.choose_canonical(asked.to_canonical(), locate);
        let mapped = asked.is_ipv6() && asked.to_canonical().is_ipv4();
        (line, if mapped { scope + 96 } else { scope })
    }

    fn choose_canonical(&self, addr: IpAddr, locate: impl FnOnce(IpAddr) -> Option<Located>) -> (u32, u8) {
        let (line, scope) = match addr {
            IpAddr::V4(a) => self.v4.lookup(u128::from(u32::from(a)) << 96),
            IpAddr::V6(a) => self.v6.lookup(u128::from(a)),
        };
        if let Some(line) = line {
            return (line, scope);
        }
        if self.places.is_empty() {
            return (self.fallback, scope);
        }
        let Some(at) = locate(addr) else { return (self.fallback, scope) };
        let claimed = claimant(self.places.iter().map(|(i, p)| (*i, p)), &at.place);
        // Every address of the database's network is placed alike, and none of them is in a
        // line's network beyond `scope`: the choice holds for the longer of the two.
        (claimed.unwrap_or(self.fallback), scope.max(at.prefix))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vantage_core::geo::{Continent, Place};

    fn line(name: &str, nets: &[&str]) -> LineAnswers {
        LineAnswers {
            name: name.into(),
            client_networks: nets.iter().map(|n| n.parse().unwrap()).collect(),
            places: Default::default(),
            records: vec![],
            ttl: None,
        }
    }

    fn choose(c: &LineChooser, ip: &str) -> (u32, u8) {
        c.choose(ip.parse().unwrap(), |_| None)
    }

    fn claiming(
        name: &str,
        nets: &[&str],
        countries: &[&str],
        continents: &[Continent],
        asns: &[u32],
    ) -> LineAnswers {
        let countries = countries.iter().map(|c| c.parse().unwrap()).collect();
        LineAnswers {
            places: Places::new(countries, continents.to_vec(), asns.to_vec()).unwrap(),
            ..line(name, nets)
        }
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
        // IPv4-mapped IPv6 addresses (dual-stack sockets, ECS of family 2) count as IPv4, their
        // scope in IPv6 bits.
        assert_eq!(choose(&c, "::ffff:10.1.0.9"), (1, 112));
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

    #[test]
    fn places_choose_after_networks_most_specific_first_with_the_database_scope() {
        let c = LineChooser::new(&[
            claiming("europe", &[], &[], &[Continent::EU], &[]),
            claiming("germany", &[], &["DE"], &[], &[]),
            claiming("office", &["192.0.2.0/24"], &["FR"], &[], &[]),
            claiming("isp", &[], &[], &[], &[3320]),
            line("default", &[]),
        ]);
        // The database holds the client in a /20 in Germany, in AS 3320.
        let berlin = |asn| {
            move |_| {
                let place =
                    Place { country: Some("DE".parse().unwrap()), continent: Some(Continent::EU), asn };
                Some(Located { place, prefix: 20 })
            }
        };
        let at = |ip: &str| ip.parse::<IpAddr>().unwrap();
        assert_eq!(c.choose(at("198.51.100.7"), berlin(Some(3320))), (3, 20), "an AS before a country");
        assert_eq!(c.choose(at("198.51.100.7"), berlin(None)), (1, 20), "a country before a continent");
        // A network before any place, and the database is not asked.
        assert_eq!(c.choose(at("192.0.2.9"), |_| panic!("asked")), (2, 24));
        // Unknown to the database, or no database: the default line.
        assert_eq!(
            c.choose(at("198.51.100.7"), |_| Some(Located { place: Place::default(), prefix: 8 })),
            (4, 8)
        );
        assert_eq!(c.choose(at("198.51.100.7"), |_| None), (4, 6), "the scope excludes 192.0.2.0/24");
        // Near a line's network, the scope still excludes it.
        let narrow = |_| Some(Located { place: Place::default(), prefix: 4 });
        assert_eq!(c.choose(at("192.0.3.1"), narrow), (4, 24));
        // A cluster without places never asks.
        let plain = LineChooser::new(&[line("a", &["192.0.2.0/24"]), line("default", &[])]);
        assert_eq!(plain.choose(at("198.51.100.7"), |_| panic!("asked")), (1, 6));
    }
}
