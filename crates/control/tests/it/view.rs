//! The view the core's owner publishes: parts shared while unchanged, the fleet's figures made
//! again at a pass, a change or a second, and the node page's region cells from the pass.

use std::sync::Arc;

use vantage_core::ids::NodeId;

use crate::lab::Lab;

#[test]
fn a_view_shares_what_did_not_change_and_its_figures_follow_passes_and_seconds() {
    let mut lab = Lab::new();
    let (p, _, _, n) = lab.one_node();
    lab.round(p, &[]);
    lab.tick();
    let first = lab.control.view(lab.now);
    assert_eq!(first.figures.fleet.addresses().len(), 1, "made at once");
    assert_eq!(first.prober_status(p, lab.now), vantage_control::observe::ProberStatus::Online);

    // Nothing happened: the next view is the same parts, figures included.
    let again = lab.control.view(lab.now.plus_millis(500));
    assert!(Arc::ptr_eq(&first.config, &again.config) && Arc::ptr_eq(&first.snapshots, &again.snapshots));
    assert!(Arc::ptr_eq(&first.agents, &again.agents) && Arc::ptr_eq(&first.alerts, &again.alerts));
    assert!(Arc::ptr_eq(&first.figures, &again.figures), "less than a second old, no pass");
    assert_eq!(lab.control.view_expires(), first.figures.at.plus_millis(1_000));

    // A heartbeat copies the agents, not the rest; the figures are a second old by then.
    lab.advance_ms(1_000);
    let hb = vantage_core::wire::Heartbeat {
        version: "test".into(),
        hostname: "edge-1.example".into(),
        metrics: None,
        addresses: Vec::new(),
        capabilities: Vec::new(),
        links: Vec::new(),
    };
    lab.control.handle_heartbeat(n, hb, "198.51.100.7".parse().unwrap(), lab.now);
    let later = lab.control.view(lab.now);
    assert!(!Arc::ptr_eq(&first.agents, &later.agents));
    assert_eq!(later.agents.get(&n).and_then(|a| a.hostname.as_deref()), Some("edge-1.example"));
    assert!(first.agents.get(&n).is_none(), "a published view never changes");
    assert!(Arc::ptr_eq(&first.config, &later.config));
    assert!(!Arc::ptr_eq(&first.figures, &later.figures), "a second old: made again");
    assert_eq!(later.source_address(n), Some("198.51.100.7".parse().unwrap()));

    // A pass makes them again at once, with the node's address failing from its region.
    lab.advance(10);
    lab.round(p, &["203.0.113.10"]);
    let passes = lab.control.passes();
    lab.advance_ms(2_000);
    assert!(lab.control.passes() > passes);
    let after = lab.control.view(lab.now);
    let a = &after.node_status(NodeId(n.0)).unwrap().addresses[0];
    assert_eq!((a.verdict.failing, a.verdict.counting), (1, 1));
    let eu = after.config.regions.iter().find(|(_, r)| r.value.code == "eu").map(|(id, _)| *id).unwrap();
    assert_eq!(a.regions.len(), 1);
    assert_eq!(a.regions[0].0.0, eu);
    assert_eq!(a.regions[0].1, a.verdict, "one region: its cell is the verdict");
    assert_eq!(after.figures.fleet.addresses()[0].failing, 1);
    assert_eq!(after.figures.passes, lab.control.passes());
}

/// A pass keeps the status of a node that did not change — the same one, shared — so that a
/// reader holding it (a node list) knows it by its pointer; a node whose status changed gets a
/// new one.
#[test]
fn a_pass_shares_the_statuses_that_did_not_change() {
    let mut lab = Lab::new();
    let (p, _, _, n) = lab.one_node();
    let status = |lab: &mut Lab| {
        let cluster = lab.control.config().nodes[&n.0].value.cluster;
        lab.control.snapshots()[&cluster].nodes[&NodeId(n.0)].clone()
    };
    lab.round(p, &[]);
    lab.tick();
    let first = status(&mut lab);
    for failing in [&[][..], &[][..]] {
        lab.advance(10);
        let passes = lab.control.passes();
        lab.round(p, failing);
        lab.advance_ms(2_000);
        assert!(lab.control.passes() > passes);
    }
    let same = status(&mut lab);
    assert!(Arc::ptr_eq(&first, &same), "two passes of the same results: the same status");
    lab.advance(10);
    lab.round(p, &["203.0.113.10"]);
    lab.advance_ms(2_000);
    let failing = status(&mut lab);
    assert!(!Arc::ptr_eq(&first, &failing) && failing.addresses[0].verdict.failing == 1);
}

/// A node's level holds since the pass that moved it, through the passes after, while a node
/// whose level never moved has no such time; a node deleted takes its time with it.
#[test]
fn a_level_holds_since_the_pass_that_moved_it() {
    use vantage_core::address::Level::{Backup1, Primary};
    let mut lab = Lab::new();
    let (p, c, a, b) = lab.one_with_a_backup();
    let since = |lab: &Lab, n: NodeId| lab.control.snapshots()[&c].level_since.get(&n).copied();
    let level = |lab: &Lab, n: NodeId| lab.control.snapshots()[&c].nodes[&n].level;
    lab.round(p, &[]);
    lab.tick();
    let mut moved = None;
    for _ in 0..8 {
        lab.advance(10);
        lab.round(p, &["203.0.113.10"]);
        lab.advance_ms(2_000);
        if moved.is_none() && level(&lab, a) == Some(Backup1) {
            moved = since(&lab, a);
            assert!(moved.is_some_and(|t| t <= lab.now), "since the pass that moved it: {moved:?}");
        }
    }
    assert!(moved.is_some(), "edge-1 moved to its backup");
    assert_eq!(since(&lab, a), moved, "through the passes after");
    assert_eq!(since(&lab, b), None, "edge-2 never moved");
    lab.delete(a.0);
    lab.tick();
    assert_eq!(since(&lab, a), None, "gone with its node");
    assert_eq!(level(&lab, b), Some(Primary));
}
