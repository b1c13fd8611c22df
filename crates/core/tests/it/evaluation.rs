//! Cluster passes, step by step on a virtual clock: every rule of SPEC §5 in a scenario.

use std::borrow::Cow;
use vantage_core::address::Level::{Backup1, Backup2, Primary};
use vantage_core::evaluate::{DEFAULT_LINE, Event};
use vantage_core::ids::{LineId, NodeId, RegionId, RuleId};
use vantage_core::reachability::{ProberView, Reachability};
use vantage_core::rules::Status;

use crate::fleet::{Fleet, ips};

/// The reference's example: 203.0.113.10 (primary) and 198.51.100.10 (backup 1). After most
/// probers fail to reach the primary for 30 s, DNS answers with the backup; after the primary
/// answers again for 60 s, DNS moves back.
#[test]
fn backup_ip_example_203_0_113_10_switches_after_30s_and_back_after_60s() {
    let mut f = Fleet::new(3).node(1, 1, &[("203.0.113.10", Primary), ("198.51.100.10", Backup1)]);
    f.report_all_ok();
    let e = f.eval();
    assert_eq!(e.revisions.len(), 1, "the first pass publishes");
    assert_eq!(f.line_records(0), ips(&["203.0.113.10"]));

    // Two of three probers lose the primary.
    let (mut switched_at, mut shortened_at) = (None, None);
    for s in (0..=40).step_by(10) {
        f.report("203.0.113.10", &[0, 1]);
        f.report("198.51.100.10", &[]);
        let e = f.eval();
        for r in &e.revisions {
            if r.reason.starts_with("Node health changed: 203.0.113.10 of edge-1 unreachable") {
                switched_at.get_or_insert(s);
                assert!(r.records.ttls.is_empty(), "the failing primary left: full TTL again");
            } else {
                // While failing and not yet unreachable, the line answers with half the TTL.
                assert_eq!(
                    r.reason,
                    "Node health changed: 203.0.113.10 failing, TTL 15 s until it is decided"
                );
                assert_eq!(r.records.ttls, [(LineId(0), 15)].into());
                assert_eq!(r.records.lines[&LineId(0)], ips(&["203.0.113.10"]));
                shortened_at.get_or_insert(s);
            }
        }
        f.advance(10);
    }
    assert_eq!((shortened_at, switched_at), (Some(0), Some(30)));
    assert_eq!(f.line_records(0), ips(&["198.51.100.10"]));

    // The primary answers again (from t = 50): back after 60 s.
    let mut back_at = None;
    for s in (50..=130).step_by(10) {
        f.report_all_ok();
        let e = f.eval();
        if !e.revisions.is_empty() {
            back_at.get_or_insert(s);
        }
        f.advance(10);
    }
    assert_eq!(back_at, Some(110));
    assert_eq!(f.line_records(0), ips(&["203.0.113.10"]));
}

#[test]
fn a_minority_of_probers_cannot_fail_an_address() {
    let mut f = Fleet::new(3).node(1, 1, &[("203.0.113.10", Primary), ("198.51.100.10", Backup1)]);
    f.report_all_ok();
    f.eval();
    for _ in 0..100 {
        f.report("203.0.113.10", &[2]);
        let e = f.eval();
        assert!(e.revisions.is_empty());
        assert!(e.events.is_empty());
        f.advance(10);
    }
    assert_eq!(f.line_records(0), ips(&["203.0.113.10"]));
}

#[test]
fn a_status_that_did_not_change_is_the_one_before_shared() {
    let mut f =
        Fleet::new(3).node(1, 1, &[("203.0.113.10", Primary)]).node(2, 1, &[("203.0.113.20", Primary)]);
    f.report_all_ok();
    let first = f.eval();
    f.advance(1);
    let second = f.eval();
    for (a, b) in first.nodes.iter().zip(&second.nodes) {
        assert!(std::sync::Arc::ptr_eq(a, b), "node {}: the same status, shared", a.node);
    }
    // One node's address fails for two of three probers: its status is made anew, the
    // other's is still the one before.
    f.advance(1);
    f.report("203.0.113.20", &[0, 1]);
    let third = f.eval();
    assert!(std::sync::Arc::ptr_eq(&second.nodes[0], &third.nodes[0]));
    assert!(!std::sync::Arc::ptr_eq(&second.nodes[1], &third.nodes[1]));
    assert_eq!(third.nodes[1].addresses[0].verdict.failing, 2);
}

#[test]
fn address_events_fire_when_reachability_changes() {
    let mut f = Fleet::new(1).fast().node(1, 1, &[("203.0.113.10", Primary), ("198.51.100.10", Backup1)]);
    // Both answer first (a new address serves once the probers have seen it answer).
    f.report_all_ok();
    f.eval();
    f.report("203.0.113.10", &[0]);
    f.eval();
    f.advance(5);
    f.report("203.0.113.10", &[0]);
    let e = f.eval();
    assert!(e.events.contains(&Event::AddressUnreachable {
        node: NodeId(1),
        ip: "203.0.113.10".parse().unwrap(),
        damping: 1
    }));
    let status = &e.nodes[0].addresses[0];
    assert_eq!(status.reachability, Reachability::Unreachable);
    assert!(!status.in_use);
    assert_eq!(e.nodes[0].level, Some(Backup1));
}

#[test]
fn stale_results_stop_counting() {
    // Results older than 3 intervals (30 s) no longer count: an address whose failing
    // probers went silent is not failing.
    let mut f = Fleet::new(3).node(1, 1, &[("203.0.113.10", Primary), ("198.51.100.10", Backup1)]);
    f.report("203.0.113.10", &[0, 1, 2]);
    f.eval();
    f.advance(31);
    f.eval();
    f.advance(30);
    let e = f.eval();
    assert!(e.revisions.iter().all(|r| r.records.all == ips(&["203.0.113.10"])));
    assert_eq!(f.state.addresses.values().next().unwrap().state, Reachability::Reachable);
}

#[test]
fn next_deadline_is_when_a_timer_runs_out() {
    let mut f = Fleet::new(1).node(1, 1, &[("203.0.113.10", Primary)]);
    f.report("203.0.113.10", &[0]);
    let e = f.eval();
    assert_eq!(e.next_deadline, Some(f.now.plus_secs(30)));
}

#[test]
fn line_below_minimum_answers_with_a_backup_group() {
    let mut f = Fleet::new(1).fast().line(1, 1, &[2], 1).node(1, 1, &[("203.0.113.1", Primary)]).node(
        2,
        2,
        &[("198.51.100.1", Primary)],
    );
    f.report_all_ok();
    f.eval();
    assert_eq!(f.line_records(1), ips(&["203.0.113.1"]));
    for _ in 0..2 {
        f.report("203.0.113.1", &[0]);
        f.eval();
        f.advance(5);
    }
    assert_eq!(f.line_records(1), ips(&["198.51.100.1"]));
}

#[test]
fn mass_removal_is_held_with_an_alert_and_released() {
    let mut f = three_on_a_line();
    let all = ips(&["203.0.113.1", "203.0.113.2", "203.0.113.3"]);
    let (mut events, mut held) = (Vec::new(), 0);
    for _ in 0..2 {
        f.report("203.0.113.1", &[0]);
        f.report("203.0.113.2", &[0]);
        let e = f.eval();
        events.extend(e.events);
        for r in e.revisions.iter().filter(|r| r.records.ttls.is_empty()) {
            assert_eq!(r.records.lines[&LineId(1)], all, "held");
            assert!(r.reason.contains("held: would remove 2 of 3 records"), "{}", r.reason);
            held += 1;
        }
        f.advance(5);
    }
    assert!(held > 0, "a held revision was cut");
    assert!(events.iter().any(|e| matches!(e, Event::Held { line: LineId(1), .. })));
    assert_eq!(f.line_records(1), all);
    // They answer again: the hold is released.
    let mut released = false;
    for _ in 0..3 {
        f.report_all_ok();
        released |= f.eval().events.contains(&Event::HoldReleased { line: LineId(1) });
        f.advance(5);
    }
    assert!(released);
}

/// Three nodes on line 1, all answering and published, on the fast settings (5 s interval:
/// a 10 s removal window).
pub(crate) fn three_on_a_line() -> Fleet {
    let mut f = Fleet::new(1)
        .fast()
        .line(1, 1, &[], 1)
        .node(1, 1, &[("203.0.113.1", Primary)])
        .node(2, 1, &[("203.0.113.2", Primary)])
        .node(3, 1, &[("203.0.113.3", Primary)]);
    f.report_all_ok();
    f.eval();
    f
}

/// One probe round: the addresses in `failing` fail, the others answer; then a pass, and the
/// clock moves on by an interval.
fn round(f: &mut Fleet, failing: &[&str]) -> Vec<Event> {
    for a in ["203.0.113.1", "203.0.113.2", "203.0.113.3"] {
        f.report(a, if failing.contains(&a) { &[0] } else { &[] });
    }
    let e = f.eval();
    f.advance(5);
    e.events
}

#[test]
fn a_cut_noticed_over_two_passes_is_held_as_one_with_the_records_from_before_it() {
    let mut f = three_on_a_line();
    let all = ips(&["203.0.113.1", "203.0.113.2", "203.0.113.3"]);
    // The probers' way to every edge goes between the probes of one round: the first address
    // is unreachable a round before the other two.
    round(&mut f, &["203.0.113.1"]);
    round(&mut f, &["203.0.113.1", "203.0.113.2", "203.0.113.3"]);
    assert_eq!(f.line_records(1), ips(&["203.0.113.2", "203.0.113.3"]), "one of three goes");
    // The state an evaluator saves carries the window: a take-over decides the same.
    let saved = serde_json::to_string(&f.state).unwrap();
    f.state = serde_json::from_str(&saved).unwrap();
    let events = round(&mut f, &["203.0.113.1", "203.0.113.2", "203.0.113.3"]);
    assert_eq!(f.line_records(1), all, "the records from before the cut, not the two left");
    assert!(
        events.iter().any(|e| matches!(e, Event::Held { line: LineId(1), hold }
            if hold.reason == "no healthy address; keeping the previous records")),
        "{events:?}"
    );
    // Held for as long as the cut lasts, then released with every address back.
    for _ in 0..4 {
        round(&mut f, &["203.0.113.1", "203.0.113.2", "203.0.113.3"]);
        assert_eq!(f.line_records(1), all);
    }
    let mut released = false;
    for _ in 0..3 {
        released |= round(&mut f, &[]).contains(&Event::HoldReleased { line: LineId(1) });
    }
    assert!(released);
    assert_eq!(f.line_records(1), all);
}

#[test]
fn removals_further_apart_than_the_window_are_not_one() {
    let mut f = three_on_a_line();
    round(&mut f, &["203.0.113.1"]);
    round(&mut f, &["203.0.113.1"]);
    assert_eq!(f.line_records(1), ips(&["203.0.113.2", "203.0.113.3"]));
    // Two rounds (10 s) later the second address goes: one of two, and the first is not put back.
    round(&mut f, &["203.0.113.1"]);
    round(&mut f, &["203.0.113.1", "203.0.113.2"]);
    round(&mut f, &["203.0.113.1", "203.0.113.2"]);
    assert_eq!(f.line_records(1), ips(&["203.0.113.3"]));
    assert!(f.state.held.is_empty(), "{:?}", f.state.held);
}

#[test]
fn what_the_operator_took_out_is_not_put_back_by_a_later_hold() {
    use vantage_core::evaluate::evaluate;
    let mut f = three_on_a_line().node(4, 1, &[("203.0.113.4", Primary)]);
    f.report_all_ok();
    f.eval();
    assert_eq!(f.line_records(1).len(), 4);
    // Nodes 1 and 2 are disabled: two of four, at the limit, so they go.
    f.node_mut(1).enabled = false;
    f.node_mut(2).enabled = false;
    let mut view = f.view();
    view.reason = Some("Nodes edge-1 and edge-2 disabled");
    let mut state = f.state.clone();
    evaluate(&view, &mut state, f.now);
    f.state = state;
    assert_eq!(f.line_records(1), ips(&["203.0.113.3", "203.0.113.4"]));
    // Within the window, node 3 becomes unreachable: one of two, not three of four.
    for _ in 0..4 {
        f.report("203.0.113.3", &[0]);
        f.eval();
        f.advance(2);
    }
    assert_eq!(f.line_records(1), ips(&["203.0.113.4"]));
    assert!(f.state.held.is_empty(), "{:?}", f.state.held);
}

#[test]
fn the_window_keeps_changed_lines_only_and_the_oldest_past_its_bound() {
    use std::collections::BTreeMap;
    use vantage_core::evaluate::{ClusterState, MAX_SUPERSEDED, Records};
    use vantage_core::time::Timestamp;
    let records = |n: u8, ttl: bool| Records {
        lines: BTreeMap::from([(LineId(1), vec![format!("203.0.113.{n}").parse().unwrap()])]),
        all: Vec::new(),
        ttls: if ttl { BTreeMap::from([(LineId(1), 15)]) } else { BTreeMap::new() },
        orders: BTreeMap::new(),
    };
    let mut state = ClusterState::default();
    state.publish(Some(records(0, false)), Timestamp::from_secs(0));
    assert!(state.superseded.is_empty(), "nothing was replaced");
    // A shorter TTL alone changes no line: nothing to measure a removal against.
    state.publish(Some(records(0, true)), Timestamp::from_secs(1));
    assert!(state.superseded.is_empty());
    for i in 1..=40u8 {
        state.publish(Some(records(i, false)), Timestamp::from_secs(i64::from(i) + 1));
    }
    assert_eq!(state.superseded.len(), MAX_SUPERSEDED);
    assert_eq!(state.superseded[0], (Timestamp::from_secs(2), records(0, true)), "the oldest stays");
    assert_eq!(state.superseded.last().unwrap().1, records(39, false));
}

#[test]
fn never_empty_with_every_address_unreachable_from_the_start() {
    let mut f =
        Fleet::new(1).fast().node(1, 1, &[("203.0.113.1", Primary)]).node(2, 1, &[("203.0.113.2", Primary)]);
    for _ in 0..3 {
        f.report("203.0.113.1", &[0]);
        f.report("203.0.113.2", &[0]);
        f.eval();
        f.advance(5);
    }
    assert_eq!(f.line_records(0), ips(&["203.0.113.1", "203.0.113.2"]));
}

#[test]
fn agent_required_answers_only_connected_nodes() {
    let mut f = Fleet::new(1)
        .cluster_json(r#"{"name":"c","domain":"cdn.example.net","agent_required":true}"#)
        .node(1, 1, &[("203.0.113.1", Primary)])
        .node(2, 1, &[("203.0.113.2", Primary)]);
    f.report_all_ok();
    f.metrics(1, 10.0);
    f.metrics(2, 10.0);
    f.eval();
    assert_eq!(f.line_records(0).len(), 2);
    f.advance(46);
    f.metrics(1, 10.0);
    f.report_all_ok();
    let e = f.eval();
    assert_eq!(f.line_records(0), ips(&["203.0.113.1"]));
    assert!(!e.nodes[1].online);
}

#[test]
fn required_links_must_be_fresh() {
    use vantage_core::evaluate::LinkState;
    let mut f = Fleet::new(1)
        .cluster_json(r#"{"name":"c","domain":"cdn.example.net","required_links":["wg0"]}"#)
        .node(1, 1, &[("203.0.113.1", Primary)])
        .node(2, 1, &[("203.0.113.2", Primary)]);
    let now = f.now;
    f.node_mut(1).links = vec![LinkState { name: "wg0".into(), last_handshake: Some(now) }];
    f.node_mut(2).links =
        vec![LinkState { name: "wg0".into(), last_handshake: Some(now.plus_secs(0).plus_millis(-181_000)) }];
    f.report_all_ok();
    f.eval();
    assert_eq!(f.line_records(0), ips(&["203.0.113.1"]));
}

#[test]
fn manual_mode_lists_primaries_and_ignores_reachability() {
    let mut f = Fleet::new(1)
        .fast()
        .cluster_json(r#"{"name":"c","domain":"cdn.example.net","dns_mode":"manual"}"#)
        .node(1, 1, &[("203.0.113.1", Primary), ("198.51.100.1", Backup1)]);
    for _ in 0..4 {
        f.report("203.0.113.1", &[0]);
        f.eval();
        f.advance(5);
    }
    assert_eq!(f.line_records(0), ips(&["203.0.113.1"]));
}

#[test]
fn all_is_the_union_of_every_line() {
    let mut f = Fleet::new(1)
        .line(1, 1, &[], 1)
        .line(2, 2, &[], 1)
        .node(1, 1, &[("203.0.113.1", Primary)])
        .node(2, 2, &[("2001:db8::2", Primary)]);
    f.report_all_ok();
    let e = f.eval();
    assert_eq!(e.revisions[0].records.all, ips(&["203.0.113.1", "2001:db8::2"]));
    assert!(!e.revisions[0].records.lines.contains_key(&DEFAULT_LINE));
}

fn cpu_fleet(hold: u32, recover: u32) -> Fleet {
    Fleet::new(1)
        .line(1, 1, &[], 1)
        .node(1, 1, &[("203.0.113.1", Primary)])
        .node(2, 1, &[("203.0.113.2", Primary)])
        .node(3, 1, &[("203.0.113.3", Primary)])
        .rule(
            7,
            &format!(
                r#"{{"name":"cpu-high","hold_s":{hold},"recover_s":{recover},"conditions":[{{"metric":"cpu","comparison":">","threshold":90,"for_s":60}}]}}"#
            ),
        )
}

/// Feeds CPU values to every node (node 1 gets `cpu1`) and evaluates; returns the revision reasons.
fn tick(f: &mut Fleet, cpu1: f64) -> Vec<String> {
    f.report_all_ok();
    f.metrics(1, cpu1);
    f.metrics(2, 10.0);
    f.metrics(3, 10.0);
    let e = f.eval();
    f.advance(10);
    e.revisions.into_iter().map(|r| r.reason).collect()
}

#[test]
fn rule_remove_node_after_for_time_and_back_after_recover_and_hold() {
    let mut f = cpu_fleet(300, 120);
    tick(&mut f, 10.0);
    let mut log = Vec::new();
    for s in (10..=400).step_by(10) {
        let cpu = if s < 200 { 95.0 } else { 10.0 };
        for r in tick(&mut f, cpu) {
            log.push((s, r));
        }
    }
    // CPU high from 10 s: for 60 s → active at 70 s. Clear from 200 s: recover-after 120 s →
    // 320 s, hold-at-least 300 s from 70 s → 370 s; recovers at 370 s.
    assert_eq!(
        log,
        vec![
            (70, "Scheduling: cpu-high on edge-1 — remove the node activated".to_owned()),
            (370, "Scheduling: cpu-high on edge-1 — remove the node recovered".to_owned()),
        ]
    );
    assert_eq!(f.line_records(1).len(), 3);
}

#[test]
fn rule_activation_removes_the_node_from_its_line_and_all() {
    let mut f = cpu_fleet(300, 300);
    for _ in 0..8 {
        tick(&mut f, 95.0);
    }
    assert_eq!(f.line_records(1), ips(&["203.0.113.2", "203.0.113.3"]));
    assert_eq!(f.state.published.as_ref().unwrap().all, ips(&["203.0.113.2", "203.0.113.3"]));
}

/// Activations that land in one pass cut a revision each, each stage with the effects of
/// those before it; one that recovers later takes only its own node's effect away.
#[test]
fn activations_in_one_pass_stack_stage_by_stage_and_recover_one_by_one() {
    // Six nodes: two out of six is within the mass-removal protection.
    let mut f = cpu_fleet(0, 0)
        .node(4, 1, &[("203.0.113.4", Primary)])
        .node(5, 1, &[("203.0.113.5", Primary)])
        .node(6, 1, &[("203.0.113.6", Primary)]);
    let cpu = |f: &mut Fleet, a: f64, b: f64| {
        f.report_all_ok();
        f.metrics(1, a);
        f.metrics(2, b);
        for n in 3..=6 {
            f.metrics(n, 10.0);
        }
        let e = f.eval();
        f.advance(10);
        e.revisions.into_iter().map(|r| r.records.all).collect::<Vec<_>>()
    };
    cpu(&mut f, 10.0, 10.0);
    let mut cut = Vec::new();
    for _ in 0..8 {
        cut.extend(cpu(&mut f, 95.0, 95.0));
    }
    let (rest, two_out) =
        (&["203.0.113.3", "203.0.113.4", "203.0.113.5", "203.0.113.6"], ips(&["203.0.113.2"]));
    let one_out: Vec<std::net::IpAddr> = two_out.iter().copied().chain(ips(rest)).collect();
    assert_eq!(
        cut,
        [one_out.clone(), ips(rest)],
        "one revision per activation, the second with both nodes out"
    );
    assert_eq!(f.line_records(1), ips(rest));
    let mut cut = Vec::new();
    for _ in 0..8 {
        cut.extend(cpu(&mut f, 95.0, 10.0));
    }
    assert_eq!(cut, std::slice::from_ref(&one_out), "edge-2 back, edge-1 still out");
    assert_eq!(f.state.published.as_ref().unwrap().all, one_out);
}

#[test]
fn rule_events_carry_values_and_revision_index() {
    let mut f = cpu_fleet(0, 0);
    let mut seen = None;
    for _ in 0..8 {
        f.report_all_ok();
        f.metrics(1, 97.5);
        f.metrics(2, 10.0);
        f.metrics(3, 10.0);
        let e = f.eval();
        for ev in e.events {
            if let Event::RuleActivated(a) = ev {
                seen = Some((a.rule, a.node, a.values, a.revision, e.revisions.len()));
            }
        }
        f.advance(10);
    }
    let (rule, node, values, revision, count) = seen.unwrap();
    assert_eq!((rule, node, values), (RuleId(7), NodeId(1), vec![Some(97.5)]));
    assert!(revision < count);
}

#[test]
fn rule_change_of_conditions_ends_actions_at_once_but_renaming_does_not() {
    let mut f = cpu_fleet(300, 300);
    for _ in 0..8 {
        tick(&mut f, 95.0);
    }
    assert_eq!(f.line_records(1).len(), 2);
    // Renaming and new hold/recover times keep the action.
    f.rules[0].1.name = "cpu-very-high".into();
    f.rules[0].1.hold_s = 0;
    assert!(tick(&mut f, 95.0).is_empty());
    assert_eq!(f.line_records(1).len(), 2);
    // Changing a condition ends it at once, and its states start over.
    f.rules[0].1.conditions[0].threshold = 96.0;
    let reasons = tick(&mut f, 95.0);
    assert_eq!(reasons, vec!["Scheduling: cpu-very-high changed, its actions ended".to_owned()]);
    assert_eq!(f.line_records(1).len(), 3);
    assert!(f.state.rules.values().all(|s| s.status == Status::Idle));
}

#[test]
fn rule_disabled_or_deleted_ends_its_actions() {
    let mut f = cpu_fleet(300, 300);
    for _ in 0..8 {
        tick(&mut f, 95.0);
    }
    f.rules[0].1.enabled = false;
    assert_eq!(tick(&mut f, 95.0), vec!["Scheduling: cpu-high changed, its actions ended".to_owned()]);
    assert_eq!(f.line_records(1).len(), 3);
    f.rules[0].1.enabled = true;
    for _ in 0..8 {
        tick(&mut f, 95.0);
    }
    f.rules.clear();
    assert_eq!(tick(&mut f, 95.0), vec!["Scheduling: rule 7 changed, its actions ended".to_owned()]);
}

#[test]
fn rule_metrics_older_than_60s_are_missing() {
    let mut f = cpu_fleet(0, 0);
    f.metrics(1, 95.0);
    f.advance(61);
    for _ in 0..10 {
        f.report_all_ok();
        let e = f.eval();
        assert!(e.revisions.iter().all(|r| !r.reason.starts_with("Scheduling")));
        f.advance(10);
    }
}

#[test]
fn rule_switch_to_backup_groups_on_probe_loss_from_one_region() {
    // Line 1 answers with group 1; a rule on probe loss seen from region 1 (prober 0) switches
    // it to its backup group 2. Other regions see no loss, so reachability is unchanged.
    let mut f = Fleet::new(3)
        .line(1, 1, &[2], 1)
        .node(1, 1, &[("203.0.113.1", Primary)])
        .node(2, 2, &[("198.51.100.1", Primary)])
        .rule(
            1,
            r#"{"name":"east-loss","line":1,"action":"backup_groups","hold_s":0,"recover_s":30,
                "conditions":[{"metric":"probe_loss","comparison":">=","threshold":50,"for_s":30,"aggregate":"avg","region":1}]}"#,
        );
    f.report_all_ok();
    f.eval();
    let mut reasons = Vec::new();
    for s in (0..=40).step_by(10) {
        f.report("203.0.113.1", &[0]);
        f.report("198.51.100.1", &[]);
        for r in f.eval().revisions {
            reasons.push((s, r.reason));
        }
        f.advance(10);
    }
    assert_eq!(
        reasons,
        vec![(30, "Scheduling: east-loss on edge-1 — switch to backup groups activated".to_owned())]
    );
    assert_eq!(f.line_records(1), ips(&["198.51.100.1"]));
    assert_eq!(f.state.addresses.values().filter(|h| h.state == Reachability::Unreachable).count(), 0);
}

#[test]
fn rule_switch_to_backup_ip_and_its_no_effect_reason() {
    let mut f = Fleet::new(1)
        .node(1, 1, &[("203.0.113.10", Primary), ("198.51.100.10", Backup1)])
        .node(2, 1, &[("203.0.113.20", Primary)])
        .rule(1, r#"{"name":"egress","action":"backup_ip","hold_s":0,"recover_s":0,"conditions":[{"metric":"cpu","comparison":">","threshold":90,"for_s":0}]}"#);
    f.report_all_ok();
    f.metrics(1, 95.0);
    f.metrics(2, 95.0);
    let e = f.eval();
    let reasons: Vec<&str> = e.revisions.iter().map(|r| r.reason.as_str()).collect();
    assert_eq!(
        reasons,
        vec![
            "Node health changed: line default: 203.0.113.10 203.0.113.20 in",
            "Scheduling: egress on edge-1 — switch to backup IP activated",
            "Scheduling: egress on edge-2 — switch to backup IP activated (no effect: no reachable backup address)",
        ]
    );
    assert_eq!(f.line_records(0), ips(&["198.51.100.10", "203.0.113.20"]));
    assert_eq!(e.nodes[0].level, Some(Backup1));
}

/// A backup-IP rule that activates while its node is already on backup 1 (primary
/// unreachable) holds that level: the activation has an effect, and after the primary
/// recovers the status keeps showing the level DNS uses, the addresses in use, and the rule.
#[test]
fn backup_ip_rule_on_a_node_already_on_backup_holds_it_and_says_so() {
    let mut f = Fleet::new(3)
        .fast()
        .node(1, 1, &[("203.0.113.10", Primary), ("198.51.100.10", Backup1)])
        .rule(7, r#"{"name":"egress","action":"backup_ip","hold_s":0,"recover_s":0,"conditions":[{"metric":"cpu","comparison":">","threshold":90,"for_s":0}]}"#);
    f.report_all_ok();
    f.metrics(1, 10.0);
    f.eval();
    // The primary fails from every prober for longer than failing-before-unreachable.
    for _ in 0..3 {
        f.report("203.0.113.10", &[0, 1, 2]);
        f.report("198.51.100.10", &[]);
        f.metrics(1, 10.0);
        f.eval();
        f.advance(5);
    }
    assert_eq!(f.line_records(0), ips(&["198.51.100.10"]));
    // Now the rule activates, with the node already on its backup.
    f.report("203.0.113.10", &[0, 1, 2]);
    f.report("198.51.100.10", &[]);
    f.metrics(1, 95.0);
    let e = f.eval();
    let reasons: Vec<&str> = e.revisions.iter().map(|r| r.reason.as_str()).collect();
    assert_eq!(reasons, vec!["Scheduling: egress on edge-1 — switch to backup IP activated"]);
    assert_eq!(e.nodes[0].held_by, Some(RuleId(7)));
    // The primary recovers; the rule keeps holding the backup.
    for _ in 0..4 {
        f.advance(5);
        f.report_all_ok();
        f.metrics(1, 95.0);
        f.eval();
    }
    let e = f.eval();
    let s = &e.nodes[0];
    assert_eq!(s.addresses[0].reachability, Reachability::Reachable, "the primary is reachable again");
    assert_eq!(f.line_records(0), ips(&["198.51.100.10"]), "DNS stays on the backup while the rule holds");
    assert_eq!(s.level, Some(Backup1));
    assert_eq!(s.held_by, Some(RuleId(7)));
    let in_use: Vec<bool> = s.addresses.iter().map(|a| a.in_use).collect();
    assert_eq!(in_use, vec![false, true], "the backup is in use, not the primary");
}

#[test]
fn rule_remove_node_held_by_protection_says_so() {
    let mut f = Fleet::new(1)
        .line(1, 1, &[], 1)
        .node(1, 1, &[("203.0.113.1", Primary)])
        .node(2, 1, &[("203.0.113.2", Primary)])
        .node(3, 1, &[("203.0.113.3", Primary)])
        .rule(1, r#"{"name":"hot","hold_s":0,"recover_s":0,"conditions":[{"metric":"cpu","comparison":">","threshold":90,"for_s":0}]}"#);
    f.report_all_ok();
    f.metrics(1, 10.0);
    f.metrics(2, 10.0);
    f.metrics(3, 10.0);
    f.eval();
    f.advance(10);
    f.report_all_ok();
    for n in 1..=3 {
        f.metrics(n, 99.0);
    }
    let e = f.eval();
    let last = e.revisions.last().unwrap();
    assert!(last.reason.contains("(no effect: the mass-removal protection held it)"), "{}", last.reason);
    assert_eq!(f.line_records(1).len(), 3);
}

#[test]
fn rule_in_manual_mode_has_no_effect() {
    let mut f = Fleet::new(1)
        .cluster_json(r#"{"name":"c","domain":"cdn.example.net","dns_mode":"manual"}"#)
        .node(1, 1, &[("203.0.113.1", Primary)])
        .node(2, 1, &[("203.0.113.2", Primary)])
        .rule(1, r#"{"name":"hot","hold_s":0,"recover_s":0,"conditions":[{"metric":"cpu","comparison":">","threshold":90,"for_s":0}]}"#);
    f.report_all_ok();
    f.metrics(1, 99.0);
    f.metrics(2, 10.0);
    let e = f.eval();
    assert!(e.revisions.last().unwrap().reason.ends_with("(no effect: manual DNS mode)"));
    assert_eq!(f.line_records(0).len(), 2);
}

#[test]
fn rule_on_one_line_looks_at_its_group_and_backup_groups() {
    let mut f = Fleet::new(1)
        .line(1, 1, &[2], 1)
        .line(2, 3, &[], 1)
        .node(1, 1, &[("203.0.113.1", Primary)])
        .node(2, 2, &[("198.51.100.1", Primary)])
        .node(3, 3, &[("192.0.2.1", Primary)])
        .rule(1, r#"{"name":"hot","line":1,"hold_s":0,"recover_s":0,"conditions":[{"metric":"cpu","comparison":">","threshold":90,"for_s":0}]}"#);
    f.report_all_ok();
    for n in 1..=3 {
        f.metrics(n, 99.0);
    }
    let e = f.eval();
    let nodes: Vec<NodeId> = e.rules.iter().map(|r| r.node).collect();
    assert_eq!(nodes, vec![NodeId(1), NodeId(2)], "node 3 is not on line 1");
}

#[test]
fn preview_shows_every_rule_node_pair_and_writes_nothing() {
    use vantage_core::evaluate::preview;
    use vantage_core::rules::Outcome;
    let mut f = cpu_fleet(300, 300);
    tick(&mut f, 95.0); // pending from now
    f.advance(50);
    f.report_all_ok();
    f.metrics(1, 95.0);
    f.metrics(2, 10.0);
    f.metrics(3, 10.0);
    let before = f.state.clone();
    let rows = preview(&f.view(), &f.state, f.now);
    assert_eq!(f.state, before, "the preview writes nothing");
    assert_eq!(rows.len(), 3, "one rule × three nodes");
    let r1 = rows.iter().find(|r| r.node == NodeId(1)).unwrap();
    assert_eq!(r1.preview.status, Status::Pending);
    assert_eq!(r1.preview.outcome, Outcome::ActsAtNextEvaluation, "held 60 s by now");
    assert_eq!((r1.preview.conditions[0].held_s, r1.preview.conditions[0].required_s), (60, 60));
    let r2 = rows.iter().find(|r| r.node == NodeId(2)).unwrap();
    assert_eq!((r2.preview.status, r2.preview.outcome), (Status::Idle, Outcome::NoChange));
    // A node without fresh metrics shows No data.
    f.node_mut(3).metrics = None;
    let rows = preview(&f.view(), &f.state, f.now);
    assert_eq!(rows.iter().find(|r| r.node == NodeId(3)).unwrap().preview.conditions[0].value, None);
}

#[test]
fn a_configuration_change_always_makes_a_revision_with_its_reason() {
    use vantage_core::evaluate::evaluate;
    let mut f = Fleet::new(1).node(1, 1, &[("203.0.113.1", Primary)]);
    f.report_all_ok();
    f.eval();
    assert!(f.eval().revisions.is_empty(), "nothing changed");
    let mut view = f.view();
    view.reason = Some("Binding saved");
    let mut state = f.state.clone();
    let e = evaluate(&view, &mut state, f.now);
    assert_eq!(e.revisions.len(), 1);
    assert_eq!(e.revisions[0].reason, "Binding saved");
}

#[test]
fn a_suspect_address_that_answers_again_gets_its_full_ttl_back_without_leaving_dns() {
    let mut f = Fleet::new(3).node(1, 1, &[("203.0.113.10", Primary), ("198.51.100.10", Backup1)]);
    f.report_all_ok();
    f.eval();
    f.report("203.0.113.10", &[0, 1]);
    let e = f.eval();
    assert_eq!(e.revisions.len(), 1);
    assert_eq!(e.revisions[0].records.ttls, [(DEFAULT_LINE, 15)].into());
    // One prober alone failing is not suspect.
    f.advance(10);
    f.report_all_ok();
    f.report("203.0.113.10", &[0]);
    let e = f.eval();
    assert_eq!(e.revisions.len(), 1);
    assert_eq!(e.revisions[0].reason, "Node health changed: no address failing any more, full TTL again");
    assert!(e.revisions[0].records.ttls.is_empty());
    assert_eq!(f.line_records(0), ips(&["203.0.113.10"]), "it never left");
    f.advance(10);
    assert!(f.eval().revisions.is_empty());
}

/// The probe metrics a pass acts on are the ones the preview shows and the ones worked by hand:
/// over the lowest level's addresses, overall and by region, loss and latency.
#[test]
fn probe_metrics_a_pass_acts_on_are_the_previews() {
    use vantage_core::evaluate::preview;
    use vantage_core::reachability::{Observation, Observations};
    let mut f = Fleet::new(4)
        .node(1, 1, &[("203.0.113.1", Primary), ("198.51.100.1", Backup1)])
        .node(2, 1, &[("203.0.113.2", Primary), ("203.0.113.3", Primary)])
        .node(3, 1, &[("198.51.100.4", Backup1)])
        .node(4, 1, &[])
        .rule(
            1,
            r#"{"name":"seen","hold_s":0,"recover_s":0,"conditions":[
                {"metric":"probe_loss","comparison":">=","threshold":0,"for_s":0,"aggregate":"avg"},
                {"metric":"probe_loss","comparison":">=","threshold":0,"for_s":0,"aggregate":"max","region":2},
                {"metric":"probe_latency_ms","comparison":">=","threshold":0,"for_s":0,"aggregate":"min"},
                {"metric":"probe_latency_ms","comparison":">=","threshold":0,"for_s":0,"aggregate":"avg","region":3}]}"#,
        );
    let now = f.now;
    for (k, node) in f.nodes.iter_mut().enumerate() {
        for (j, a) in node.addresses.iter_mut().enumerate() {
            let obs = (0..4u32)
                .flat_map(|p| (0..2u32).map(move |port| (p, port)))
                .map(|(p, port)| {
                    let lost = (p + port + j as u32 + k as u32) % 4;
                    Observation {
                        prober: p,
                        sent: 3,
                        lost: lost.min(3) as u16,
                        rtt_us: (lost < 3).then_some((5 + p * 7 + port * 3 + j as u32) * 1000),
                        reported_at: now,
                        failed_at: None,
                    }
                })
                .collect();
            a.observations = Cow::Owned(Observations::new(obs));
        }
    }
    let rows = preview(&f.view(), &f.state, now);
    let previewed: Vec<(NodeId, Vec<Option<f64>>)> =
        rows.iter().map(|r| (r.node, r.preview.conditions.iter().map(|c| c.value).collect())).collect();
    let mut acted: Vec<(NodeId, Vec<Option<f64>>)> = f
        .eval()
        .events
        .into_iter()
        .filter_map(|e| match e {
            Event::RuleActivated(ev) => Some((ev.node, ev.values)),
            _ => None,
        })
        .collect();
    acted.sort_by_key(|(n, _)| *n);
    assert_eq!(acted.len(), 3, "every node with addresses: {acted:?}");
    assert!(acted.iter().all(|(_, v)| v.iter().all(Option::is_some)), "{acted:?}");
    for (node, values) in &acted {
        let (_, shown) = previewed.iter().find(|(n, _)| n == node).unwrap();
        assert_eq!(values, shown, "node {node}");
    }
    // Node 3's one address, worked by hand: its probers lose 5, 3, 1 and 3 of their 6
    // attempts (83.3, 50, 16.7 and 50 %), and answer in 5, 15, 20.5 and 27.5 ms on average
    // over their answering ports. Region 2 is prober 1's, region 3 prober 2's.
    let (_, node3) = acted.iter().find(|(n, _)| *n == NodeId(3)).unwrap();
    let want = [50.0, 50.0, 5.0, 20.5];
    for (got, want) in node3.iter().zip(want) {
        assert!(got.is_some_and(|g| (g - want).abs() < 1e-9), "{node3:?} against {want:?}");
    }
}

/// A pass names exactly the addresses whose hysteresis state it added, changed or forgot: a
/// save by difference of that state writes those and nothing else.
#[test]
fn a_pass_names_the_addresses_whose_state_it_moved() {
    use std::collections::BTreeSet;
    let mut f = Fleet::new(3)
        .fast()
        .node(1, 1, &[("203.0.113.10", Primary), ("198.51.100.10", Backup1)])
        .node(2, 1, &[("203.0.113.20", Primary)]);
    let mut named = 0;
    for step in 0..60u32 {
        // The primary fails from 10 to 30; the second node's address is gone from 40.
        let failing: &[usize] = if (10..30).contains(&step) { &[0, 1] } else { &[] };
        f.report("203.0.113.10", failing);
        f.report("198.51.100.10", &[]);
        if step == 40 {
            f.node_mut(2).addresses.clear();
            f.node_mut(2).last_heartbeat = Some(f.now);
        } else if step < 40 {
            f.report("203.0.113.20", &[]);
        }
        let before = f.state.addresses.clone();
        let e = f.eval();
        let after = &f.state.addresses;
        let differ: BTreeSet<_> =
            (before.keys().chain(after.keys())).filter(|k| before.get(k) != after.get(k)).copied().collect();
        let moved: BTreeSet<_> = e.moved.iter().copied().collect();
        assert_eq!(moved, differ, "step {step}");
        assert_eq!(moved.len(), e.moved.len(), "each named once");
        named += moved.len();
        f.advance(3);
    }
    assert!(named >= 6, "the first pass, the failure, the recovery and the removal move some: {named}");
    assert!(!f.state.addresses.keys().any(|(n, _)| *n == NodeId(2)), "node 2's address forgotten");
}

/// A pass tallies again only the addresses whose observations moved since the last, or one of
/// whose counted results stopped counting; the others' tallies are read back (issue 32). The
/// scenarios above run through the same passes, so each decides as a pass that tallies all.
#[test]
fn a_pass_tallies_again_only_what_moved_or_went_stale() {
    let mut f = Fleet::new(3).node(1, 1, &[("203.0.113.10", Primary), ("198.51.100.10", Backup1)]);
    f.report_all_ok();
    f.eval();
    assert_eq!(f.tallied.last_pass(), (0, 2), "the first pass tallies every address");
    f.advance(5);
    let e = f.eval();
    assert!(e.revisions.is_empty() && e.events.is_empty());
    assert_eq!(f.tallied.last_pass(), (2, 0), "nothing moved: both read back");
    f.report("203.0.113.10", &[0, 1]);
    f.eval();
    assert_eq!(f.tallied.last_pass(), (1, 1), "the primary's observations moved");
    assert!(f.state.addresses.values().any(|h| h.failing_since.is_some()), "and its tally is the new one");
    // The backup's results, reported at the start, stop counting 30 s later (3 intervals).
    f.advance(25);
    f.eval();
    assert_eq!(f.tallied.last_pass(), (2, 0));
    f.advance(1);
    f.eval();
    assert_eq!(f.tallied.last_pass(), (1, 1), "the backup's results no longer count");
    f.advance(5);
    f.eval();
    assert_eq!(f.tallied.last_pass(), (1, 1), "nor the primary's");

    // A node created takes a place at the end of the prober table, probing or not: it made
    // none of the observations, so every tally holds, unless it brings a region of its own.
    f.report_all_ok();
    f.eval();
    f.probers.push(ProberView { region: RegionId(1), active: false });
    f.eval();
    assert_eq!(f.tallied.last_pass(), (2, 0), "a node that does not probe");
    f.probers.push(ProberView { region: RegionId(2), active: true });
    f.eval();
    assert_eq!(f.tallied.last_pass(), (2, 0), "one that probes, from a region already probing");
    f.probers.push(ProberView { region: RegionId(9), active: true });
    let e = f.eval();
    assert_eq!(f.tallied.last_pass(), (0, 2), "a new region: a column more in every tally");
    assert!(e.nodes.iter().flat_map(|n| &n.addresses).all(|a| a.regions.len() == 4));
    f.probers[0].active = false;
    f.eval();
    assert_eq!(f.tallied.last_pass(), (0, 2), "a prober no longer counting");
    f.eval();
    assert_eq!(f.tallied.last_pass(), (2, 0), "then kept over the table as it is now");
}

/// A node as it was at the last pass — the same configuration, observations and heartbeat,
/// every address's tally holding, no streak ending — is taken as that pass made it (issue 32);
/// one that changed in any of these is made anew, and decides as a pass that makes all anew
/// (the scenarios above run through the same passes).
#[test]
fn a_node_as_it_was_is_taken_as_the_last_pass_made_it() {
    let mut f = Fleet::new(3).fast().node(1, 1, &[("203.0.113.10", Primary)]).node(
        2,
        1,
        &[("203.0.113.20", Primary), ("198.51.100.20", Backup1)],
    );
    f.report_all_ok();
    f.eval();
    assert_eq!(f.tallied.nodes_as_they_were(), 0, "the first pass makes every node");
    f.advance(1);
    let before = f.eval();
    assert_eq!(f.tallied.nodes_as_they_were(), 2, "nothing moved");
    // A level changed by the operator: that node is made anew, with its new level.
    f.node_mut(2).addresses[1].address.level = Backup2;
    let e = f.eval();
    assert_eq!(f.tallied.nodes_as_they_were(), 1);
    assert!(std::sync::Arc::ptr_eq(&before.nodes[0], &e.nodes[0]), "node 1's status, shared");
    assert_eq!(e.nodes[1].addresses[1].level, Backup2);
    // Its primary fails for two of three probers: made anew, failing, not yet unreachable.
    f.report("203.0.113.20", &[0, 1]);
    let e = f.eval();
    assert_eq!(f.tallied.nodes_as_they_were(), 1);
    assert!(e.events.is_empty() && e.nodes[1].addresses[0].reachability == Reachability::Reachable);
    f.advance(1);
    f.eval();
    assert_eq!(f.tallied.nodes_as_they_were(), 2, "a failing streak under way changes nothing yet");
    // With no report since, its streak ends: the node is made anew, and unreachable.
    let deadline = f.eval().next_deadline.expect("the streak's end");
    f.now = deadline;
    let e = f.eval();
    assert_eq!(f.tallied.nodes_as_they_were(), 1, "the node whose streak ended is made anew");
    assert!(e.events.iter().any(|ev| matches!(ev, Event::AddressUnreachable { node: NodeId(2), .. })));
    assert_eq!(e.nodes[1].level, Some(Backup2));
    // An agent last heard from 44 s ago: online, then offline at its moment, made anew.
    f.report_all_ok();
    f.node_mut(1).last_heartbeat = Some(f.now.plus_millis(-44_000));
    assert!(f.eval().nodes[0].online);
    f.advance(1);
    assert!(f.eval().nodes[0].online);
    assert_eq!(f.tallied.nodes_as_they_were(), 2);
    f.advance(1);
    let e = f.eval();
    assert!(!e.nodes[0].online, "offline once its heartbeat is stale");
    assert_eq!(f.tallied.nodes_as_they_were(), 1);
}
