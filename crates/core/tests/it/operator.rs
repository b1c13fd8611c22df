//! Configuration wins over protection, each line's all-down policy, and one truth for "held":
//! the published revision says a line is held exactly while it is.

use vantage_core::address::Level::Primary;
use vantage_core::evaluate::{Evaluation, Event, evaluate};
use vantage_core::ids::{LineId, NodeId};
use vantage_core::model::AllDown;

use crate::evaluation::three_on_a_line;
use crate::fleet::{Fleet, ips};

/// One pass after a configuration change (`reason`), as the control core runs it.
fn changed(f: &mut Fleet, reason: &str) -> Evaluation {
    let mut state = std::mem::take(&mut f.state);
    let e = evaluate(
        &vantage_core::evaluate::ClusterView { reason: Some(reason), ..f.view() },
        &mut state,
        f.now,
    );
    f.state = state;
    e
}

/// Two of three failing until the line is held.
fn hold_two_of_three(f: &mut Fleet) {
    for _ in 0..3 {
        f.report("203.0.113.1", &[0]);
        f.report("203.0.113.2", &[0]);
        f.report("203.0.113.3", &[]);
        f.eval();
        f.advance(5);
    }
    assert!(f.state.held.contains_key(&LineId(1)), "held: {:?}", f.state.held);
    assert_eq!(f.line_records(1).len(), 3);
}

#[test]
fn a_node_deleted_while_its_line_is_held_leaves_dns_in_the_next_revision() {
    let mut f = three_on_a_line();
    hold_two_of_three(&mut f);
    f.nodes.retain(|n| n.id != NodeId(1));
    let e = changed(&mut f, "Node edge-1 deleted");
    let records = &e.revisions.last().expect("a revision").records.lines[&LineId(1)];
    assert!(!records.contains(&"203.0.113.1".parse().unwrap()), "{records:?}");
    // And no later pass puts it back, held or not.
    for _ in 0..4 {
        f.report("203.0.113.2", &[0]);
        f.report("203.0.113.3", &[]);
        f.eval();
        assert!(!f.line_records(1).contains(&"203.0.113.1".parse().unwrap()), "{:?}", f.line_records(1));
        f.advance(5);
    }
}

#[test]
fn a_lines_only_node_deleted_or_disabled_leaves_no_record_behind() {
    for delete in [true, false] {
        let mut f = Fleet::new(1).fast().line(1, 1, &[], 1).node(1, 1, &[("203.0.113.1", Primary)]);
        f.report_all_ok();
        f.eval();
        assert_eq!(f.line_records(1), ips(&["203.0.113.1"]));
        if delete {
            f.nodes.clear();
        } else {
            f.node_mut(1).enabled = false;
        }
        let e = changed(&mut f, "Node edge-1 changed");
        let r = e.revisions.last().expect("a revision");
        assert!(r.records.lines[&LineId(1)].is_empty(), "{r:?}");
        assert!(r.held.is_empty(), "nothing the operator removed is held: {r:?}");
        assert!(r.reason.contains("line line-1 answers no records"), "{}", r.reason);
        f.advance(5);
        f.eval();
        assert!(f.line_records(1).is_empty());
        assert!(f.state.held.is_empty());
    }
}

#[test]
fn addresses_waiting_for_verification_are_not_held() {
    // Seven counting probers are to verify the address; at first none has reported, then
    // three, which see it answer: not yet a strict majority of the seven.
    let mut f = Fleet::new(3).fast().line(1, 1, &[], 1).node(1, 1, &[("203.0.113.1", Primary)]);
    f.nodes[0].addresses[0].expected_probers = 7;
    let first = f.eval();
    assert_eq!(f.line_records(1), ips(&["203.0.113.1"]), "served by the never-empty rule");
    assert!(first.revisions.iter().all(|r| r.held.is_empty()), "{first:?}");
    f.advance(5);
    f.report("203.0.113.1", &[]);
    let e = f.eval();
    assert!(e.revisions.is_empty(), "the same records, nothing held: {e:?}");
    assert!(!e.events.iter().any(|e| matches!(e, Event::Held { .. })), "{:?}", e.events);
    assert!(f.state.held.is_empty());
    f.advance(5);
    f.nodes[0].addresses[0].expected_probers = 0;
    f.report_all_ok();
    let e = f.eval();
    assert!(e.revisions.is_empty(), "verified, with the same records: {e:?}");
    assert_eq!(f.line_records(1), ips(&["203.0.113.1"]));
}

#[test]
fn a_hold_released_with_the_same_records_is_a_revision_that_says_so() {
    let mut f = Fleet::new(1).fast().line(1, 1, &[], 1).node(1, 1, &[("203.0.113.1", Primary)]);
    f.report_all_ok();
    f.eval();
    let mut held = None;
    for _ in 0..4 {
        f.report("203.0.113.1", &[0]);
        held = held.or(f.eval().revisions.into_iter().find(|r| !r.held.is_empty()));
        f.advance(5);
    }
    let held = held.expect("a held revision");
    assert_eq!(held.records.lines[&LineId(1)], ips(&["203.0.113.1"]));
    let mut released = None;
    for _ in 0..6 {
        f.report_all_ok();
        released = released.or(f.eval().revisions.into_iter().next());
        f.advance(5);
    }
    let released = released.expect("a revision when the hold ends");
    assert!(released.held.is_empty(), "{released:?}");
    assert_eq!(released.records.lines[&LineId(1)], ips(&["203.0.113.1"]));
    assert_eq!(released.reason, "Node health changed: line line-1 answers by health again");
}

#[test]
fn each_all_down_policy_answers_as_it_says() {
    for (policy, expect) in [
        (AllDown::Hold, ips(&["203.0.113.1", "203.0.113.2"])),
        (AllDown::Online, ips(&["203.0.113.2"])),
        (AllDown::Nodata, Vec::new()),
    ] {
        let mut f = Fleet::new(1).fast().line(1, 1, &[], 1).node(1, 1, &[("203.0.113.1", Primary)]).node(
            2,
            1,
            &[("203.0.113.2", Primary)],
        );
        f.lines[0].all_down = policy;
        f.report_all_ok();
        f.eval();
        // Node 2's agent is connected; then every address fails.
        f.node_mut(2).last_heartbeat = Some(f.now);
        let mut last = None;
        for _ in 0..4 {
            f.node_mut(2).last_heartbeat = Some(f.now);
            f.report("203.0.113.1", &[0]);
            f.report("203.0.113.2", &[0]);
            last = f.eval().revisions.pop().or(last);
            f.advance(5);
        }
        assert_eq!(f.line_records(1), expect, "{policy:?}");
        let r = last.expect("a revision");
        assert_eq!(r.held[&LineId(1)].policy, policy, "{r:?}");
        assert!(r.reason.contains("line line-1"), "{}", r.reason);
    }
}

#[test]
fn a_lines_target_addresses_stand_in_for_the_nodes_scheduling_ones_without_levels() {
    use vantage_core::address::Level::Backup1;
    use vantage_core::address::SchedulingAddress;
    use vantage_core::evaluate::AddressView;
    let mut f = Fleet::new(1)
        .fast()
        .line(1, 1, &[], 1)
        .line(2, 1, &[], 1)
        .node(1, 1, &[("203.0.113.1", Primary), ("198.51.100.1", Backup1)])
        .node(2, 1, &[("203.0.113.2", Primary)]);
    f.node_mut(1).addresses.push(AddressView {
        address: SchedulingAddress {
            ip: "192.0.2.1".parse().unwrap(),
            level: Primary,
            trusted: false,
            line: Some(LineId(2)),
        },
        observations: Default::default(),
        expected_probers: 0,
    });
    let rounds = |f: &mut Fleet, failing: &[&str]| {
        for _ in 0..4 {
            for a in ["203.0.113.1", "198.51.100.1", "203.0.113.2", "192.0.2.1"] {
                f.report(a, if failing.contains(&a) { &[0] } else { &[] });
            }
            f.eval();
            f.advance(5);
        }
    };
    rounds(&mut f, &[]);
    assert_eq!(f.line_records(1), ips(&["203.0.113.1", "203.0.113.2"]));
    assert_eq!(f.line_records(2), ips(&["192.0.2.1", "203.0.113.2"]), "the target, not the primary");
    // The primary fails: line 1 switches to the backup; line 2 keeps its target.
    rounds(&mut f, &["203.0.113.1"]);
    assert_eq!(f.line_records(1), ips(&["198.51.100.1", "203.0.113.2"]));
    assert_eq!(f.line_records(2), ips(&["192.0.2.1", "203.0.113.2"]));
    // The target fails: line 2 leaves the node out rather than switch to a level.
    rounds(&mut f, &["203.0.113.1", "192.0.2.1"]);
    assert_eq!(f.line_records(2), ips(&["203.0.113.2"]));
    assert_eq!(f.line_records(1), ips(&["198.51.100.1", "203.0.113.2"]));
}

#[test]
fn the_preview_says_what_each_policy_answers_before_every_address_fails() {
    use vantage_core::evaluate::line_outlooks;
    for (policy, words) in [
        (AllDown::Hold, "line line-1 holds its current records (2 addresses)"),
        (AllDown::Online, "line line-1 answers every online node (1 address)"),
        (AllDown::Nodata, "line line-1 answers no records (NOERROR, no data)"),
    ] {
        let mut f = Fleet::new(1).fast().line(1, 1, &[], 1).node(1, 1, &[("203.0.113.1", Primary)]).node(
            2,
            1,
            &[("203.0.113.2", Primary)],
        );
        f.lines[0].all_down = policy;
        f.node_mut(2).last_heartbeat = Some(f.now);
        f.report_all_ok();
        f.eval();
        let outlook = line_outlooks(&f.view(), &f.state, f.now);
        let [line] = outlook.as_slice() else { panic!("one line: {outlook:?}") };
        assert_eq!((line.line, line.all_down, &line.applies_now), (LineId(1), policy, &None));
        assert_eq!(line.records, ips(&["203.0.113.1", "203.0.113.2"]));
        assert_eq!(line.if_all_down_text, words, "{policy:?}");
        // Then every address fails, and the pass answers what the preview said.
        for _ in 0..4 {
            f.node_mut(2).last_heartbeat = Some(f.now);
            f.report("203.0.113.1", &[0]);
            f.report("203.0.113.2", &[0]);
            f.eval();
            f.advance(5);
        }
        assert_eq!(f.line_records(1), line.if_all_down, "{policy:?}");
        let now = line_outlooks(&f.view(), &f.state, f.now);
        assert_eq!(now[0].applies_now.as_ref().map(|h| h.policy), Some(policy), "{now:?}");
    }
}

/// A fleet set up line by line: a line whose group has no node yet answers the cluster's
/// records (never empty); when its own node answers, it moves to that node's address — three
/// of three records at once, and no mass removal by health, so nothing is held.
#[test]
fn a_line_leaves_the_fallback_for_its_own_node_without_a_hold() {
    let mut f = Fleet::new(3)
        .line(1, 1, &[], 1)
        .line(2, 2, &[], 1)
        .node(1, 1, &[("203.0.113.1", Primary)])
        .node(2, 1, &[("203.0.113.2", Primary)])
        .node(3, 1, &[("203.0.113.3", Primary)]);
    f.report_all_ok();
    f.eval();
    assert_eq!(f.line_records(2), ips(&["203.0.113.1", "203.0.113.2", "203.0.113.3"]), "the fallback");
    f.nodes.push(Fleet::new(0).node(4, 2, &[("198.51.100.4", Primary)]).nodes.remove(0));
    f.advance(5);
    f.report_all_ok();
    let e = f.eval();
    assert_eq!(f.line_records(2), ips(&["198.51.100.4"]));
    assert!(f.state.held.is_empty() && !e.events.iter().any(|x| matches!(x, Event::Held { .. })), "{e:?}");
    assert!(!e.revisions[0].reason.contains("held"), "{}", e.revisions[0].reason);
    // Once its own, the line's records are protected again: two of three failing is held.
    let mut f = f.node(5, 2, &[("198.51.100.5", Primary)]).node(6, 2, &[("198.51.100.6", Primary)]);
    for _ in 0..3 {
        f.advance(5);
        f.report_all_ok();
        f.eval();
    }
    assert_eq!(f.line_records(2).len(), 3);
    for _ in 0..8 {
        f.advance(5);
        f.report_all_ok();
        f.report("198.51.100.4", &[0, 1, 2]);
        f.report("198.51.100.5", &[0, 1, 2]);
        f.eval();
    }
    assert!(f.state.held.contains_key(&LineId(2)), "{:?}", f.line_records(2));
}
