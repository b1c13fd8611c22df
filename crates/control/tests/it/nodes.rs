//! The node list's facts the core decides: no public address, where an agent connects from,
//! the source address an operator may add, and fresh metrics (reference 000).

use vantage_control::Start;
use vantage_control::config::Object;
use vantage_core::address::{AddressPolicy, Level};
use vantage_core::evaluate::NodeMetrics;
use vantage_core::wire;

use crate::lab::{CLUSTER, Lab, ip};

fn heartbeat(addresses: &[&str]) -> wire::Heartbeat {
    wire::Heartbeat {
        version: "1".into(),
        hostname: "edge".into(),
        metrics: None,
        addresses: addresses.iter().map(|a| ip(a)).collect(),
        capabilities: Vec::new(),
        links: Vec::new(),
    }
}

/// A node behind NAT reports only private addresses: with none configured it has no
/// scheduling address, even in lab mode (which adds loopback, and nothing else). Its agent's
/// source address is the one an operator may add.
#[test]
fn a_nat_only_node_has_no_scheduling_address_and_its_source_may_be_added() {
    let mut lab = Lab::with_policy(Start::default(), AddressPolicy { allow_loopback: true });
    let c = lab.cluster(CLUSTER);
    let g = lab.group(c, "fra-1", None);
    let nat = lab.node(c, g, "behind-nat", &[]);
    let lo = lab.node(c, g, "on-loopback", &[]);
    lab.control.handle_heartbeat(
        nat,
        heartbeat(&["10.0.0.5", "192.168.1.7", "100.64.0.9"]),
        ip("198.51.100.7"),
        lab.now,
    );
    lab.control.handle_heartbeat(lo, heartbeat(&["127.0.0.221", "10.0.0.6"]), ip("127.0.0.221"), lab.now);
    assert!(lab.control.addresses_of(nat).unwrap().is_empty(), "private addresses are never public");
    assert_eq!(lab.control.observations().nodes[&nat].addresses, Vec::<std::net::IpAddr>::new());
    let lo_in_use: Vec<_> = lab.control.addresses_of(lo).unwrap().as_slice().iter().map(|a| a.ip).collect();
    assert_eq!(lo_in_use, vec![ip("127.0.0.221")], "lab mode reports loopback");
    assert_eq!(lab.control.source_address(nat), Some(ip("198.51.100.7")));
    assert_eq!(lab.control.addable_source(nat), Some(ip("198.51.100.7")));
    // Once configured, there is nothing left to add.
    let mut rec = (*lab.control.config().nodes[&nat.0].value).clone();
    rec.addresses = vantage_core::address::AddressList::parse(
        &[
            vantage_core::address::AddressInput {
                ip: "198.51.100.7".into(),
                level: Level::Backup1,
                trusted: false,
                line: None,
            },
            vantage_core::address::AddressInput {
                ip: "203.0.113.70".into(),
                level: Level::Primary,
                trusted: false,
                line: None,
            },
        ],
        AddressPolicy::default(),
    )
    .unwrap();
    lab.replace(nat.0, Object::Node(rec));
    assert_eq!(lab.control.addable_source(nat), None);
    assert_eq!(lab.control.addresses_of(nat).unwrap().as_slice().len(), 2);
}

/// Connects from: the latest heartbeat's source, else the enrollment's (kept with the node,
/// so it outlives a restart); a private source is never offered.
#[test]
fn the_source_address_is_the_latest_heartbeat_else_the_enrollment() {
    let mut lab = Lab::new();
    let c = lab.cluster(CLUSTER);
    let g = lab.group(c, "fra-1", None);
    let n = lab.node(c, g, "edge-1", &[]);
    assert_eq!(lab.control.source_address(n), None, "never connected");
    let mut rec = (*lab.control.config().nodes[&n.0].value).clone();
    rec.enrolled_from = Some(ip("203.0.113.50"));
    lab.replace(n.0, Object::Node(rec));
    assert_eq!(lab.control.source_address(n), Some(ip("203.0.113.50")));
    assert_eq!(lab.control.addable_source(n), Some(ip("203.0.113.50")));
    lab.advance(5);
    lab.control.handle_heartbeat(n, heartbeat(&[]), ip("198.51.100.8"), lab.now);
    assert_eq!(lab.control.source_address(n), Some(ip("198.51.100.8")), "the latest heartbeat wins");
    lab.advance(15);
    lab.control.handle_heartbeat(n, heartbeat(&[]), ip("10.9.8.7"), lab.now);
    assert_eq!(lab.control.source_address(n), Some(ip("10.9.8.7")));
    assert_eq!(lab.control.addable_source(n), None, "a private source address is not public");
}

/// The Metrics column shows what scheduling rules see: metrics received within 60 s.
#[test]
fn metrics_are_fresh_for_sixty_seconds() {
    let lab = Lab::new();
    let m = NodeMetrics { at: lab.now, cpu_pct: 42.5, ..NodeMetrics::default() };
    assert!(m.fresh(lab.now.plus_secs(60)));
    assert!(!m.fresh(lab.now.plus_secs(61)));
}
