//! Latency steering of a line on the virtual clock: a faster group leads only after the hold,
//! noise within the margin never moves a line, health still decides, and without figures the
//! configured order stands.

use vantage_core::address::Level::Primary;
use vantage_core::evaluate::{ClusterState, line_outlooks};

use crate::fleet::{Fleet, T0, ips};

/// Line 1 answers group 1, then group 2, ordered by the RTT of the probers of region 1 (prober
/// 0; probers 1 and 2 are in regions 2 and 3). The cluster's TTL is 30 s and its interval 5 s:
/// a challenger leads after 90 s.
fn fleet() -> Fleet {
    Fleet::new(3).fast().line(1, 1, &[2], 1).latency(1, 1).node(1, 1, &[("10.0.1.1", Primary)]).node(
        2,
        2,
        &[("10.0.2.1", Primary)],
    )
}

/// A round of every prober: region 1 measures group 1 in `g1` ms and group 2 in `g2`; the other
/// regions see the opposite, which must not count.
fn round(f: &mut Fleet, g1: f32, g2: f32) {
    f.report_rtt("10.0.1.1", |p| if p == 0 { g1 } else { g2 });
    f.report_rtt("10.0.2.1", |p| if p == 0 { g2 } else { g1 });
}

/// A noise source in [-1, 1), the same every run.
struct Noise(u64);

impl Noise {
    fn next(&mut self) -> f32 {
        self.0 = self.0.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        ((self.0 >> 33) as f32 / (1u64 << 31) as f32) * 2.0 - 1.0
    }
}

#[test]
fn a_faster_backup_leads_after_the_hold_and_the_records_follow() {
    let mut f = fleet();
    round(&mut f, 150.0, 20.0);
    let e = f.eval();
    assert_eq!(f.line_records(1), ips(&["10.0.1.1"]), "the configured order first");
    assert_eq!(e.next_deadline, Some(T0.plus_secs(90)), "the challenger's hold asks for a pass");
    for _ in 0..17 {
        f.advance(5);
        round(&mut f, 150.0, 20.0);
        assert!(f.eval().revisions.is_empty(), "nothing moves within the hold");
        assert_eq!(f.line_records(1), ips(&["10.0.1.1"]));
    }
    f.advance(5);
    round(&mut f, 150.0, 20.0);
    let e = f.eval();
    assert_eq!(f.now, T0.plus_secs(90));
    assert_eq!(f.line_records(1), ips(&["10.0.2.1"]), "group 2 leads after 90 s");
    assert_eq!(e.revisions.len(), 1);
    let reason = &e.revisions[0].reason;
    assert!(
        reason.starts_with("Latency: line line-1 by RTT from r1: group-2 20.0 ms, group-1 150.0 ms"),
        "{reason}"
    );
    assert!(reason.contains("20 % and 20 ms faster for 1 min 30 s"), "{reason}");
    assert!(reason.ends_with("; line line-1: 10.0.2.1 in, 10.0.1.1 out"), "{reason}");
    let state = &f.state.latency[&vantage_core::ids::LineId(1)];
    assert_eq!(state.changes, 1);
    assert!(state.groups.iter().all(|g| g.challenging_since.is_none()));

    // The preview shows the order and its figures, as the pass keeps them.
    let outlook = line_outlooks(&f.view(), &f.state, f.now);
    assert_eq!(outlook[0].latency.as_ref(), Some(state));
    let text = outlook[0].latency_text.as_deref().unwrap_or_default();
    assert!(text.starts_with("line line-1 by RTT from r1: group-2 20.0 ms, group-1 150.0 ms"), "{text}");
    assert_eq!(outlook[0].if_all_down, ips(&["10.0.2.1"]), "held on the group the order answers");

    // Kept across a restart: the saved state reads back the same.
    let saved = serde_json::to_string(&f.state).unwrap();
    assert_eq!(serde_json::from_str::<ClusterState>(&saved).unwrap(), f.state);
}

#[test]
fn noise_within_the_margin_never_moves_a_line_in_half_an_hour() {
    for (g1, g2) in [(100.0, 100.0), (100.0, 85.0)] {
        let mut f = fleet();
        let mut noise = Noise(7);
        for i in 0..360 {
            // ±10 % on every measurement, every 5 s.
            let (a, b) = (g1 * (1.0 + 0.1 * noise.next()), g2 * (1.0 + 0.1 * noise.next()));
            round(&mut f, a, b);
            let e = f.eval();
            assert!(i == 0 || e.revisions.is_empty(), "{g1} against {g2}: moved at {i}: {:?}", e.revisions);
            f.advance(5);
        }
        assert_eq!(f.line_records(1), ips(&["10.0.1.1"]));
        assert_eq!(f.state.latency[&vantage_core::ids::LineId(1)].changes, 0);
    }
}

#[test]
fn a_group_faster_by_the_margin_under_noise_moves_once() {
    let mut f = fleet();
    let mut noise = Noise(11);
    let mut revisions = 0;
    for _ in 0..360 {
        let (a, b) = (150.0 * (1.0 + 0.1 * noise.next()), 60.0 * (1.0 + 0.1 * noise.next()));
        round(&mut f, a, b);
        revisions += f.eval().revisions.len();
        f.advance(5);
    }
    assert_eq!(f.line_records(1), ips(&["10.0.2.1"]));
    assert_eq!(
        (revisions, f.state.latency[&vantage_core::ids::LineId(1)].changes),
        (2, 1),
        "first and one move"
    );
}

#[test]
fn health_still_decides_and_without_figures_the_configured_order_stands() {
    let mut f = fleet();
    for _ in 0..=18 {
        round(&mut f, 150.0, 20.0);
        f.eval();
        f.advance(5);
    }
    assert_eq!(f.line_records(1), ips(&["10.0.2.1"]));
    // Group 2 fails for every prober: the line answers group 1, its backup in the order.
    for _ in 0..4 {
        f.report_rtt("10.0.1.1", |_| 150.0);
        f.report("10.0.2.1", &[0, 1, 2]);
        f.eval();
        f.advance(5);
    }
    assert_eq!(f.line_records(1), ips(&["10.0.1.1"]), "the faster group is down: health answers");
    let order: Vec<i64> =
        f.state.latency[&vantage_core::ids::LineId(1)].groups.iter().map(|g| g.group.0).collect();
    assert_eq!(order, [2, 1], "an unmeasured group is not passed: it leads again once it answers");
    // Back, then every result goes stale (the region's prober is gone): the configured order.
    for _ in 0..4 {
        round(&mut f, 150.0, 20.0);
        f.eval();
        f.advance(5);
    }
    assert_eq!(f.line_records(1), ips(&["10.0.2.1"]));
    f.advance(60);
    let e = f.eval();
    assert_eq!(f.line_records(1), ips(&["10.0.1.1"]));
    assert_eq!(e.revisions.len(), 1);
    assert!(e.revisions[0].reason.contains("no RTT from its probers, so the configured order"), "{e:?}");
}

/// Runs passes every 5 s with region 1 measuring group 1 in `g1` ms and group 2 in `g2` for
/// `s` seconds.
fn rounds(f: &mut Fleet, (g1, g2): (f32, f32), s: u64) -> usize {
    let mut revisions = 0;
    let addrs: Vec<(String, i64)> = (f.nodes.iter())
        .flat_map(|n| n.addresses.iter().map(move |a| (a.address.ip.to_string(), n.group.0)))
        .collect();
    for _ in 0..s / 5 {
        for (a, g) in &addrs {
            let ms = if *g == 1 { g1 } else { g2 };
            f.report_rtt(a, |p| if p == 0 { ms } else { 1.0 });
        }
        revisions += f.eval().revisions.len();
        f.advance(5);
    }
    revisions
}

#[test]
fn a_move_to_a_smaller_group_is_no_mass_removal() {
    // Four addresses in group 1, one in group 2: moving to group 2 takes 3 of 4 records, above
    // the 50 % limit, and is still no removal by health.
    let mut f = Fleet::new(3)
        .fast()
        .line(1, 1, &[2], 1)
        .latency(1, 1)
        .node(1, 1, &[("10.0.1.1", Primary)])
        .node(2, 1, &[("10.0.1.2", Primary)])
        .node(3, 1, &[("10.0.1.3", Primary)])
        .node(4, 1, &[("10.0.1.4", Primary)])
        .node(5, 2, &[("10.0.2.1", Primary)]);
    rounds(&mut f, (150.0, 20.0), 90);
    assert_eq!(f.line_records(1).len(), 4);
    assert_eq!(rounds(&mut f, (150.0, 20.0), 5), 1);
    assert_eq!(f.line_records(1), ips(&["10.0.2.1"]));
    assert!(f.state.held.is_empty(), "{:?}", f.state.held);
    // Nor in the passes after, within the removal window.
    assert_eq!(rounds(&mut f, (150.0, 20.0), 60), 0);
    assert_eq!(f.line_records(1), ips(&["10.0.2.1"]));
    assert!(f.state.held.is_empty());
}

#[test]
fn another_region_keeps_the_order_until_its_own_figures_move_it() {
    let mut f = fleet();
    rounds(&mut f, (150.0, 20.0), 95);
    assert_eq!(f.line_records(1), ips(&["10.0.2.1"]));
    // Region 2 (prober 1) now speaks for the line; it sees the groups the other way round.
    f.lines[0].latency.as_mut().unwrap().region = vantage_core::ids::RegionId(2);
    let kept = f.eval();
    assert!(kept.revisions.is_empty(), "the order stays: {:?}", kept.revisions);
    let l = &f.state.latency[&vantage_core::ids::LineId(1)];
    assert_eq!((l.region.0, l.groups[0].group.0), (2, 2));
    // `rounds` gives every prober but the first 1 ms to both groups: equal from region 2,
    // so nothing moves.
    assert_eq!(rounds(&mut f, (150.0, 20.0), 100), 0);
    assert_eq!(f.line_records(1), ips(&["10.0.2.1"]));
}

#[test]
fn manual_mode_answers_as_configured() {
    let mut f = fleet().cluster_json(r#"{"name":"video","domain":"cdn.example.net","dns_mode":"manual"}"#);
    assert_eq!(rounds(&mut f, (150.0, 20.0), 300), 1, "the first revision only");
    assert_eq!(f.line_records(1), ips(&["10.0.1.1"]));
}

#[test]
fn two_groups_of_two_are_measured_by_the_middle_of_their_results() {
    // Group 2's two nodes answer in 10 and 50 ms: its median is 30, not the slower 50.
    let mut f = fleet().node(3, 2, &[("10.0.2.2", Primary)]);
    f.report_rtt("10.0.1.1", |_| 100.0);
    f.report_rtt("10.0.2.1", |_| 10.0);
    f.report_rtt("10.0.2.2", |_| 50.0);
    f.eval();
    let l = &f.state.latency[&vantage_core::ids::LineId(1)];
    let g2 = l.groups.iter().find(|g| g.group.0 == 2).unwrap();
    assert_eq!((g2.measured_ms, g2.samples), (Some(30.0), 2));
}

#[test]
fn a_challenge_left_from_automatic_mode_asks_for_no_pass_in_manual_mode() {
    let mut f = fleet();
    round(&mut f, 150.0, 20.0);
    assert_eq!(f.eval().next_deadline, Some(T0.plus_secs(90)));
    f.cluster =
        serde_json::from_str(r#"{"name":"video","domain":"cdn.example.net","dns_mode":"manual"}"#).unwrap();
    f.advance(200);
    round(&mut f, 150.0, 20.0);
    let e = f.eval();
    assert!(e.next_deadline.is_none_or(|d| d > f.now), "{:?} at {:?}", e.next_deadline, f.now);
    let outlook = line_outlooks(&f.view(), &f.state, f.now);
    assert_eq!(
        (outlook[0].latency.as_ref(), outlook[0].latency_text.as_ref()),
        (None, None),
        "manual: as configured"
    );
}

#[test]
fn a_swap_among_the_backups_keeps_the_protection() {
    // Three groups: 1 answers, 2 and 3 its backups; 3 overtakes 2 while 1 stays first.
    let mut f = Fleet::new(3)
        .fast()
        .line(1, 1, &[2, 3], 1)
        .latency(1, 1)
        .node(1, 1, &[("10.0.1.1", Primary)])
        .node(2, 1, &[("10.0.1.2", Primary)])
        .node(3, 1, &[("10.0.1.3", Primary)])
        .node(4, 2, &[("10.0.2.1", Primary)])
        .node(5, 3, &[("10.0.3.1", Primary)]);
    let rtt = |ip: &str| match &ip[..7] {
        "10.0.1." => 10.0,
        "10.0.2." => 200.0,
        _ => 100.0,
    };
    let report = |f: &mut Fleet, failing: bool| {
        for a in ["10.0.1.1", "10.0.1.2", "10.0.1.3", "10.0.2.1", "10.0.3.1"] {
            f.report_rtt(a, |p| if p == 0 { rtt(a) } else { 1.0 });
        }
        if failing {
            f.report("10.0.1.1", &[0, 1, 2]);
            f.report("10.0.1.2", &[0, 1, 2]);
        }
    };
    for _ in 0..17 {
        report(&mut f, false);
        f.eval();
        f.advance(5);
    }
    // From 85 s two of group 1's three addresses fail for every prober: they are unreachable
    // at 90 s, the pass where group 3 passes group 2 (a swap among the backups). The cut of
    // two of three is still held, as any.
    let mut moved = false;
    for _ in 0..6 {
        report(&mut f, true);
        let e = f.eval();
        moved |= e.revisions.iter().any(|r| r.reason.starts_with("Latency:"));
        f.advance(5);
    }
    assert!(moved, "group 3 passed group 2");
    let order: Vec<i64> =
        f.state.latency[&vantage_core::ids::LineId(1)].groups.iter().map(|g| g.group.0).collect();
    assert_eq!(order, [1, 3, 2]);
    assert!(
        f.state.held.contains_key(&vantage_core::ids::LineId(1)),
        "the cut is held: {:?}",
        f.line_records(1)
    );
}
