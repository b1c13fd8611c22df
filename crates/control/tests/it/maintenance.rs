//! Drain and maintenance windows (SPEC §10): a drained node leaves the answers at once, stays
//! probed, and reads drained once the answers have been without it for twice the TTL; a
//! window drains its targets between its times and holds their alerts' notifications.

use vantage_control::Output;
use vantage_control::config::Object;
use vantage_control::events::EventKind;
use vantage_control::maintenance::MaintenanceCreate;
use vantage_core::address::Level::Primary;
use vantage_core::ids::{ClusterId, NodeId};

use crate::lab::{CLUSTER, Lab, alerts, ip, revisions};

fn answered(lab: &Lab, c: ClusterId) -> Vec<String> {
    let p = lab.control.snapshots()[&c].published.clone().unwrap();
    p.records.all.iter().map(|ip| ip.to_string()).collect()
}

fn events(outputs: &[Output], kind: EventKind) -> Vec<String> {
    outputs
        .iter()
        .filter_map(|o| match o {
            Output::Events(e) => Some(e.iter().filter(|e| e.kind == kind).map(|e| e.summary.clone())),
            _ => None,
        })
        .flatten()
        .collect()
}

fn drained(lab: &Lab, c: ClusterId, n: NodeId) -> Option<bool> {
    lab.control.snapshots()[&c].drains.get(&n).map(|d| d.drained)
}

/// Two nodes answering; both addresses verified by one prober.
pub(crate) fn two_nodes(lab: &mut Lab) -> (vantage_control::identity::Caller, ClusterId, NodeId, NodeId) {
    let r = lab.region("eu");
    let p = lab.prober("fra", r);
    let c = lab.cluster(CLUSTER);
    let g = lab.group(c, "fra-1", Some(r));
    let a = lab.node(c, g, "edge-1", &[("203.0.113.10", Primary)]);
    let b = lab.node(c, g, "edge-2", &[("203.0.113.11", Primary)]);
    lab.round(p, &[]);
    lab.tick();
    assert_eq!(answered(lab, c), ["203.0.113.10", "203.0.113.11"]);
    lab.take();
    (p, c, a, b)
}

#[test]
fn a_drained_node_leaves_at_once_stays_probed_and_reads_drained_after_twice_the_ttl() {
    let mut lab = Lab::new();
    let (p, c, a, _) = two_nodes(&mut lab);
    let mut rec = (*lab.control.config().nodes[&a.0].value).clone();
    rec.node.drained = true;
    lab.replace(a.0, Object::Node(rec.clone()));
    lab.tick();
    let out = lab.take();
    // Half the records at once is past the mass-removal limit — but a drain is the operator's
    // word, not health: it goes through.
    assert_eq!(revisions(&out), [(2, "Node edge-1 drained".to_owned())]);
    assert_eq!(answered(&lab, c), ["203.0.113.11"]);
    let draining = events(&out, EventKind::NodeDraining);
    assert_eq!(
        draining,
        [
            "edge-1 is draining (drained by an operator): out of the answers, still probed; clients move within 2 × TTL (60 s)"
        ]
    );
    assert_eq!(drained(&lab, c, a), Some(false));
    // Still probed: its address is in the prober's work.
    let work = lab.round(p, &[]);
    assert!(work.targets.iter().any(|t| t.ip == ip("203.0.113.10")));
    // 60 s after it left the answers (TTL 30), it reads drained: told once.
    lab.advance(59);
    assert_eq!(drained(&lab, c, a), Some(false));
    assert!(events(&lab.take(), EventKind::NodeDrained).is_empty());
    lab.advance(1);
    assert_eq!(drained(&lab, c, a), Some(true));
    let out = lab.take();
    assert_eq!(
        events(&out, EventKind::NodeDrained),
        [
            "edge-1 is drained (drained by an operator): out of the answers for 2 × TTL (60 s), clients have moved"
        ]
    );
    lab.advance(30);
    assert!(events(&lab.take(), EventKind::NodeDrained).is_empty(), "told once");
    // Back: answered again, told.
    rec.node.drained = false;
    lab.replace(a.0, Object::Node(rec));
    lab.round(p, &[]);
    lab.tick();
    let out = lab.take();
    assert_eq!(revisions(&out), [(3, "Node edge-1 back from its drain".to_owned())]);
    assert_eq!(answered(&lab, c), ["203.0.113.10", "203.0.113.11"]);
    assert_eq!(events(&out, EventKind::NodeUndrained).len(), 1);
    assert_eq!(drained(&lab, c, a), None);
}

#[test]
fn a_window_drains_between_its_times_and_holds_its_targets_alerts() {
    let mut lab = Lab::new();
    let (p, c, a, b) = two_nodes(&mut lab);
    let ask = MaintenanceCreate {
        name: "kernel upgrade".into(),
        starts_at: Some(lab.now.plus_secs(60)),
        duration_s: Some(600),
        ends_at: None,
        nodes: vec![a],
        groups: Vec::new(),
        mirrors: Vec::new(),
        monitors: Vec::new(),
        comment: "reboots".into(),
    };
    let w = lab.put(Object::Maintenance(ask.maintenance("ops", lab.now).unwrap()));
    lab.tick();
    assert_eq!(answered(&lab, c), ["203.0.113.10", "203.0.113.11"], "not open yet");
    let out = lab.take();
    assert_eq!(revisions(&out), [], "{out:?}");
    // It opens at its time: edge-1 leaves, the window is told.
    lab.advance(60);
    let out = lab.take();
    assert_eq!(revisions(&out), [(2, "Maintenance kernel upgrade opened".to_owned())]);
    assert_eq!(
        events(&out, EventKind::Maintenance),
        [format!("maintenance {w} (kernel upgrade) opened: node edge-1")]
    );
    assert_eq!(answered(&lab, c), ["203.0.113.11"]);
    // edge-1 fails while in maintenance: its alert fires, held; edge-2's is told.
    for _ in 0..12 {
        lab.round(p, &["203.0.113.10", "203.0.113.11"]);
        lab.advance(10);
    }
    let out = lab.take();
    let told = alerts(&out);
    assert!(told.contains(&(format!("address_unreachable/node:{b}/203.0.113.11"), true)), "{told:?}");
    assert!(!told.iter().any(|(k, _)| k.contains(&format!("node:{a}/"))), "{told:?}");
    let fired = events(&out, EventKind::AlertFired);
    assert!(
        fired.iter().any(|f| f.ends_with(&format!("(notification held by maintenance {w})"))),
        "{fired:?}"
    );
    // It closes: edge-1 is back in the answers' reckoning, and its alert, still firing, is told.
    let mut out = Vec::new();
    for _ in 0..50 {
        lab.round(p, &["203.0.113.10", "203.0.113.11"]);
        lab.advance(10);
        out.extend(lab.take());
    }
    assert!(events(&out, EventKind::Maintenance).iter().any(|e| e.ends_with("closed: node edge-1")));
    assert!(revisions(&out).iter().any(|(_, r)| r.starts_with("Maintenance kernel upgrade closed")));
    assert!(alerts(&out).contains(&(format!("address_unreachable/node:{a}/203.0.113.10"), true)));
    assert_eq!(drained(&lab, c, a), None);
}

/// After a restart a drained node is found again without a word, and reads drained at once
/// when the stored revision has been without it for 2 × TTL already: late, never early, and
/// never told twice.
#[test]
fn a_restart_finds_a_drain_again_without_telling_it_twice() {
    let mut lab = Lab::new();
    let (_, c, a, _) = two_nodes(&mut lab);
    let mut rec = (*lab.control.config().nodes[&a.0].value).clone();
    rec.node.drained = true;
    lab.replace(a.0, Object::Node(rec));
    lab.tick();
    lab.advance(30);
    assert_eq!(drained(&lab, c, a), Some(false));
    // What the store holds: the cluster's last saved state and its newest revision.
    let start = lab.stored();
    // Back 40 s later: the stored answer has been without edge-1 for 70 s, more than 2 × TTL.
    let mut again = Lab::with_start_at(start, lab.now.plus_secs(40));
    again.tick();
    assert_eq!(drained(&again, c, a), Some(true));
    let out = again.take();
    assert!(
        events(&out, EventKind::NodeDrained).is_empty() && events(&out, EventKind::NodeDraining).is_empty()
    );
}
