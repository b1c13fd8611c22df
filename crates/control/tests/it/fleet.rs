//! The fleet's figures for `/metrics` are the ones DNS and the API use.

use vantage_core::address::Level;

use crate::lab::Lab;

#[test]
fn figures_follow_the_last_pass() {
    let mut lab = Lab::new();
    let (p, _, _, _) = lab.one_node();
    lab.round(p, &["203.0.113.10"]);
    lab.tick();
    let f = lab.control.fleet(lab.now);
    assert_eq!(f.addresses.len(), 1);
    let a = &f.addresses[0];
    assert_eq!((a.node.as_str(), a.address.as_str(), a.level), ("edge-1", "203.0.113.10", Level::Primary));
    assert_eq!((a.failing, a.counting), (1, 1), "failing now");
    assert!(a.reachable, "not yet unreachable: failing-before-unreachable has not run out");
    assert_eq!(f.lines, vec![("video".to_owned(), "default".to_owned(), 1, false)]);
    assert_eq!(f.probers.len(), 1);
    assert!(f.probers[0].online);
    assert_eq!(f.probers[0].last_seen_age_s, Some(0.0));
    lab.advance(60);
    lab.round(p, &["203.0.113.10"]);
    lab.tick();
    let f = lab.control.fleet(lab.now);
    assert!(!f.addresses[0].reachable);
    assert_eq!(f.nodes[0].2, None, "no address left: the node has no level");
    assert_eq!(f.alerts_firing.get("address_unreachable"), Some(&1));
}
