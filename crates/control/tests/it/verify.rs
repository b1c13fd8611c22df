//! A newly saved address stays out of DNS until a strict majority of the counting probers has
//! seen it answer; a trusted one serves at once, and so does one no prober can check.

use vantage_control::Output;
use vantage_control::config::Object;
use vantage_control::events::EventKind;
use vantage_core::address::{AddressInput, AddressList, AddressPolicy};
use vantage_core::ids::{ClusterId, NodeId};

use vantage_control::identity::Caller;

use crate::lab::{Lab, ip};

fn records(lab: &Lab, c: ClusterId) -> Vec<std::net::IpAddr> {
    lab.control.snapshots()[&c].published.as_ref().map(|p| p.records.all.clone()).unwrap_or_default()
}

fn set(lab: &mut Lab, n: NodeId, rows: &[(&str, bool)]) {
    let mut rec = (*lab.control.config().nodes[&n.0].value).clone();
    let rows: Vec<AddressInput> = rows
        .iter()
        .map(|(a, trusted)| AddressInput {
            ip: (*a).into(),
            level: vantage_core::address::Level::Primary,
            trusted: *trusted,
            line: None,
        })
        .collect();
    rec.addresses = AddressList::parse(&rows, AddressPolicy::default()).unwrap();
    lab.replace(n.0, Object::Node(rec));
}

fn kinds(outputs: &[Output]) -> Vec<(EventKind, String)> {
    outputs
        .iter()
        .filter_map(|o| match o {
            Output::Events(e) => Some(e.iter().map(|e| (e.kind, e.summary.clone())).collect::<Vec<_>>()),
            _ => None,
        })
        .flatten()
        .collect()
}

#[test]
fn a_typo_never_serves_and_a_new_address_serves_once_the_probers_see_it() {
    let mut lab = Lab::new();
    let (p, c, _, n) = lab.one_node();
    lab.round(p, &[]);
    lab.advance(10);
    assert_eq!(records(&lab, c), [ip("203.0.113.10")]);
    lab.take();

    // A typo: nothing answers there. It is saved, but never reaches DNS.
    set(&mut lab, n, &[("203.0.113.10", false), ("203.0.113.99", false)]);
    lab.tick();
    assert_eq!(records(&lab, c), [ip("203.0.113.10")], "not before a prober has seen it answer");
    let out = lab.take();
    assert!(
        kinds(&out).contains(&(
            EventKind::AddressUnverified,
            "203.0.113.99 of edge-1 is new: out of DNS until a strict majority of the probers sees it answer"
                .into()
        )),
        "{:?}",
        kinds(&out)
    );
    let status = &lab.control.node_status(n).unwrap().addresses[1];
    assert_eq!(status.condition.condition, vantage_core::reachability::Condition::Unverified);
    assert!(!status.in_use);
    for _ in 0..4 {
        lab.advance(5);
        lab.round(p, &["203.0.113.99"]);
    }
    lab.advance(5);
    assert_eq!(records(&lab, c), [ip("203.0.113.10")], "failing, it stays out");

    // Fixed: the prober sees it answer, and it serves.
    lab.take();
    lab.round(p, &[]);
    lab.advance(5);
    assert_eq!(records(&lab, c), [ip("203.0.113.10"), ip("203.0.113.99")]);
    let out = kinds(&lab.take());
    assert!(
        out.iter().any(|(k, s)| *k == EventKind::AddressVerified
            && s.starts_with("203.0.113.99 of edge-1 is verified: 1 of 1 probers see it answer")),
        "{out:?}"
    );
}

#[test]
fn a_trusted_address_serves_at_once() {
    let mut lab = Lab::new();
    let (p, c, _, n) = lab.one_node();
    lab.round(p, &[]);
    lab.advance(10);
    set(&mut lab, n, &[("203.0.113.10", false), ("203.0.113.77", true)]);
    lab.tick();
    assert_eq!(records(&lab, c), [ip("203.0.113.10"), ip("203.0.113.77")]);
}

#[test]
fn without_a_prober_that_counts_a_new_address_serves_unverified() {
    let mut lab = Lab::new();
    let c = lab.cluster(crate::lab::CLUSTER);
    let g = lab.group(c, "fra-1", None);
    let n = lab.node(c, g, "edge-1", &[("203.0.113.10", vantage_core::address::Level::Primary)]);
    lab.tick();
    assert_eq!(records(&lab, c), [ip("203.0.113.10")], "no prober: nothing could verify it");
    assert_eq!(lab.control.unchecked_addresses(n, &[ip("203.0.113.11")], lab.now), [ip("203.0.113.11")]);
    let status = &lab.control.node_status(n).unwrap().addresses[0];
    assert_eq!(status.condition.condition, vantage_core::reachability::Condition::Unverified);
    assert!(status.in_use, "it serves, unverified");
}

#[test]
fn the_first_prober_to_answer_is_not_a_majority_of_three() {
    let mut lab = Lab::new();
    let r = lab.region("eu");
    let probers: Vec<_> = ["a", "b", "c"].iter().map(|n| lab.prober(n, r)).collect();
    let c = lab.cluster(crate::lab::CLUSTER);
    let g = lab.group(c, "fra-1", Some(r));
    let n = lab.node(c, g, "edge-1", &[("203.0.113.10", vantage_core::address::Level::Primary)]);
    for p in &probers {
        lab.round(*p, &[]);
    }
    lab.advance(10);
    set(&mut lab, n, &[("203.0.113.10", false), ("203.0.113.11", false)]);
    lab.advance(3);
    // One of the three sees it answer: not yet.
    lab.round(probers[0], &[]);
    lab.advance(3);
    assert_eq!(records(&lab, c), [ip("203.0.113.10")], "1 of 3 is no majority");
    // Two of three: it serves.
    lab.round(probers[1], &[]);
    lab.advance(3);
    assert_eq!(records(&lab, c), [ip("203.0.113.10"), ip("203.0.113.11")]);
}

/// A node that probes never probes its own addresses: its new address waits for the other
/// probers only, and a majority of them is enough.
#[test]
fn a_probing_nodes_new_address_is_verified_by_the_others() {
    let mut lab = Lab::new();
    let (p, c, g, n) = lab.one_node();
    let mut rec = (*lab.control.config().nodes[&n.0].value).clone();
    rec.node = serde_json::from_value(serde_json::json!({"group": g, "name": "edge-1", "also_probes": true}))
        .unwrap();
    lab.replace(n.0, Object::Node(rec));
    let me = Caller::Node(n);
    let other = lab.node(c, g, "edge-2", &[("203.0.113.20", vantage_core::address::Level::Primary)]);
    for _ in 0..2 {
        lab.round(p, &[]);
        lab.round(me, &[]);
        lab.advance(5);
    }
    assert_eq!(records(&lab, c), [ip("203.0.113.10"), ip("203.0.113.20")]);
    assert!(lab.control.unchecked_addresses(n, &[ip("203.0.113.11")], lab.now).is_empty(), "fra checks it");

    set(&mut lab, n, &[("203.0.113.10", false), ("203.0.113.11", false)]);
    lab.advance(1);
    assert_eq!(records(&lab, c), [ip("203.0.113.10"), ip("203.0.113.20")], "not before fra sees it");
    let work = lab.round(me, &[]);
    assert!(work.targets.iter().all(|t| t.ip != ip("203.0.113.11")), "a node skips its own addresses");
    lab.round(p, &[]);
    lab.advance(3);
    assert_eq!(records(&lab, c), [ip("203.0.113.10"), ip("203.0.113.11"), ip("203.0.113.20")]);
    // edge-2's new address needs both: edge-1 probes it too.
    set(&mut lab, other, &[("203.0.113.20", false), ("203.0.113.21", false)]);
    lab.round(p, &[]);
    lab.advance(3);
    assert!(!records(&lab, c).contains(&ip("203.0.113.21")), "1 of 2 is no majority");
    lab.round(me, &[]);
    lab.advance(3);
    assert!(records(&lab, c).contains(&ip("203.0.113.21")));
}

/// A typo stays out of DNS, and the stream says the probers see it failing, by whom.
#[test]
fn an_unverified_address_that_fails_is_said_to_fail() {
    let mut lab = Lab::new();
    let (p, _, _, n) = lab.one_node();
    lab.round(p, &[]);
    lab.advance(10);
    set(&mut lab, n, &[("203.0.113.10", false), ("203.0.113.99", false)]);
    lab.tick();
    lab.take();
    lab.round(p, &["203.0.113.99"]);
    lab.advance(3);
    let out = kinds(&lab.take());
    assert!(
        out.contains(&(
            EventKind::AddressUnverified,
            "203.0.113.99 of edge-1 is new and failing: 1 of 1 probers see it failing (fra); out of DNS until a strict majority of the probers sees it answer".into()
        )),
        "{out:?}"
    );
    // Still failing: nothing new to say.
    lab.round(p, &["203.0.113.99"]);
    lab.advance(5);
    assert!(kinds(&lab.take()).iter().all(|(k, _)| *k != EventKind::AddressUnverified));
}

/// edge-1 of [`Lab::one_node`] with no configured addresses, its agent reporting 203.0.113.30,
/// and edge-2 on 203.0.113.20 (so that the line is never empty, which would serve anything),
/// both seen answering by the prober.
fn reported_fleet(lab: &mut Lab) -> (Caller, ClusterId, NodeId) {
    let (p, c, g, n) = lab.one_node();
    set(lab, n, &[]);
    lab.node(c, g, "edge-2", &[("203.0.113.20", vantage_core::address::Level::Primary)]);
    heartbeat(lab, n);
    for _ in 0..2 {
        lab.round(p, &[]);
        lab.advance(5);
    }
    assert_eq!(records(lab, c), [ip("203.0.113.20"), ip("203.0.113.30")]);
    (p, c, n)
}

/// edge-1's agent reports 203.0.113.30.
fn heartbeat(lab: &mut Lab, n: NodeId) {
    let hb = vantage_core::wire::Heartbeat {
        version: "test".into(),
        hostname: "edge-1".into(),
        metrics: None,
        addresses: vec![ip("203.0.113.30")],
        capabilities: Vec::new(),
        links: Vec::new(),
    };
    lab.control.handle_heartbeat(n, hb, ip("203.0.113.30"), lab.now);
}

/// A restart at `at` from `lab`'s configuration and the last state it saved, before any
/// heartbeat.
fn restarted(lab: &mut Lab, at: vantage_core::Timestamp) -> Lab {
    let start = lab.stored();
    assert!(!start.states.is_empty(), "the state was saved");
    let mut again = Lab::with_start(start);
    again.now = at;
    again.tick();
    again
}

/// Reported addresses (a node without configured ones) keep their verification across a
/// restart: until the agent's first heartbeat they are not gone, only not heard of yet.
#[test]
fn reported_addresses_stay_verified_across_a_restart() {
    let mut lab = Lab::new();
    let (p, c, n) = reported_fleet(&mut lab);
    let at = lab.now.plus_secs(1);
    let mut again = restarted(&mut lab, at);
    // The prober is back before the agent's heartbeat, and has not probed the address yet.
    again.control.handle_work(p, again.now);
    again.advance(5);
    heartbeat(&mut again, n);
    again.advance(1);
    assert_eq!(
        records(&again, c),
        [ip("203.0.113.20"), ip("203.0.113.30")],
        "verified before the restart, it serves at once"
    );
}

/// A kept address of a node not heard from since the start is not stepped: its failing streak
/// must not ask for a pass at once, again and again (the driver would spin).
#[test]
fn a_kept_failing_address_does_not_wake_the_core_at_once() {
    let mut lab = Lab::new();
    let (p, _, _) = reported_fleet(&mut lab);
    // It starts failing; the process stops mid-streak.
    lab.round(p, &["203.0.113.30"]);
    lab.advance(2);
    let at = lab.now.plus_secs(60);
    let again = restarted(&mut lab, at);
    let next = again.control.poll_timeout().expect("a next pass");
    assert!(next > again.now, "the next pass is due later, not at once: {next} at {}", again.now);
}

#[test]
fn a_new_address_the_line_serves_anyway_says_so() {
    let mut lab = Lab::new();
    let (p, c, _, n) = lab.one_node();
    lab.round(p, &[]);
    lab.advance(10);
    lab.take();
    // The node's only address is replaced: the new one waits for the probers, and the line has
    // no other address, so the never-empty rule serves it at once. One sentence says both.
    set(&mut lab, n, &[("203.0.113.99", false)]);
    lab.tick();
    assert_eq!(records(&lab, c), [ip("203.0.113.99")]);
    let out = lab.take();
    assert!(
        kinds(&out).contains(&(
            EventKind::AddressUnverified,
            "203.0.113.99 of edge-1 is new: not yet verified — served anyway: the line has no other address"
                .into()
        )),
        "{:?}",
        kinds(&out)
    );
}
