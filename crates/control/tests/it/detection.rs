//! Faster and gentler detection: cross-region confirmation, the evidence of a hung edge, the
//! probers' phases, the probe budget, one probe per address listed twice, flap damping and the
//! shorter TTL while an address is suspect.

use std::collections::{BTreeMap, BTreeSet};

use vantage_control::Output;
use vantage_control::config::Object;
use vantage_control::identity::Caller;
use vantage_core::Timestamp;
use vantage_core::address::Level::{Backup1, Primary};
use vantage_core::detection::{DetectionSettings, DetectionSettingsInput};
use vantage_core::evaluate::DEFAULT_LINE;
use vantage_core::ids::{ClusterId, NodeId, RegionId};
use vantage_core::result::ProbeResult;
use vantage_core::settings::{ProbeSettings, ProbeSettingsInput};
use vantage_core::wire;

use crate::lab::{CLUSTER, Lab, alerts, attempt, ip};

/// Three probers in three regions and one node with a primary and a backup1 address.
fn three_regions(lab: &mut Lab) -> (Vec<Caller>, ClusterId, NodeId) {
    let probers = ["eu", "us", "ap"]
        .iter()
        .map(|code| {
            let r = lab.region(code);
            lab.prober(&format!("p-{code}"), r)
        })
        .collect();
    let c = lab.cluster(CLUSTER);
    let g = lab.group(c, "g", None);
    let n = lab.node(c, g, "edge-1", &[("203.0.113.10", Primary), ("198.51.100.10", Backup1)]);
    (probers, c, n)
}

fn detection(i: DetectionSettingsInput) -> Object {
    Object::Detection(DetectionSettings::parse(i).unwrap())
}

fn rechecks(outputs: &[Output]) -> usize {
    outputs.iter().filter(|o| matches!(o, Output::Recheck)).count()
}

/// A report of `caller` on `target` alone: `failing` or good, the round running from
/// `started` to `finished` on the prober's clock, the first attempt failing `failed_after` ms
/// into it.
fn report_one(
    target: &str,
    failing: bool,
    (started, finished): (Timestamp, Timestamp),
    failed_after: i64,
) -> wire::Report {
    let r = ProbeResult {
        target: target.into(),
        attempts: (0..3).map(|_| attempt(!failing)).collect(),
        hls: None,
        cert_not_after: None,
        failed_at: failing.then(|| started.plus_millis(failed_after)),
    };
    wire::Report {
        started_at: started,
        finished_at: finished,
        version: "test".into(),
        results: vec![r],
        confirmation: false,
    }
}

#[test]
fn a_change_one_prober_sees_is_confirmed_by_every_other_prober_at_once_and_once_per_interval() {
    let mut lab = Lab::new();
    let (p, _, n) = three_regions(&mut lab);
    let primary = format!("n{n}/203.0.113.10/80");
    for &caller in &p {
        lab.round(caller, &[]);
    }
    assert_eq!(rechecks(&lab.take()), 0, "no change, nothing to confirm");
    // The first prober's round sees the primary refuse: the others are asked at once.
    lab.round(p[0], &["203.0.113.10"]);
    assert_eq!(rechecks(&lab.take()), 1);
    assert_eq!(lab.control.take_rechecks(p[1]).targets, std::slice::from_ref(&primary));
    assert_eq!(lab.control.take_rechecks(p[2]).targets, std::slice::from_ref(&primary));
    assert!(lab.control.take_rechecks(p[1]).targets.is_empty(), "collected once");
    assert!(lab.control.take_rechecks(p[0]).targets.is_empty(), "not the prober that saw it");
    // Their confirmations change their own view too, but the target was confirmed within the
    // interval: no second round of confirmations.
    lab.round(p[1], &["203.0.113.10"]);
    lab.advance(5);
    lab.round(p[0], &["203.0.113.10"]);
    assert_eq!(rechecks(&lab.take()), 0);
    // An interval later, answering again is a change worth confirming too.
    lab.advance(6);
    lab.round(p[0], &[]);
    assert_eq!(rechecks(&lab.take()), 1);
    assert_eq!(lab.control.take_rechecks(p[1]).targets, std::slice::from_ref(&primary));
    assert_eq!(lab.control.take_rechecks(p[2]).targets, std::slice::from_ref(&primary));
    // Turned off, a change asks nobody.
    lab.put(detection(DetectionSettingsInput { confirm: false, ..Default::default() }));
    for &caller in &p {
        lab.round(caller, &[]);
    }
    lab.advance(11);
    lab.round(p[0], &["203.0.113.10"]);
    assert_eq!(rechecks(&lab.take()), 0);
    assert!(lab.control.take_rechecks(p[2]).targets.is_empty());
}

#[test]
fn a_hung_edge_counts_as_failing_from_the_first_failed_attempt_whatever_the_probers_clocks() {
    let mut lab = Lab::new();
    let (p, _, n) = three_regions(&mut lab);
    let primary = format!("n{n}/203.0.113.10/80");
    for &caller in &p {
        lab.round(caller, &[]);
    }
    lab.advance(10);
    // Two probers' rounds each ran 9 s (3 attempts × 3 s timeouts) and reported at their end;
    // their first attempt failed 3 s in. The first prober's clock is an hour fast, the
    // second's a minute slow: only the offsets within each round count.
    let round = |lab: &Lab, skew_s: i64| {
        let end = lab.now.plus_millis(skew_s * 1000);
        (end.plus_millis(-9_000), end)
    };
    let r0 = report_one(&primary, true, round(&lab, 3600), 3_000);
    lab.control.handle_report(p[0], &r0, lab.now).unwrap();
    let first = lab.now;
    lab.advance(3);
    let r1 = report_one(&primary, true, round(&lab, -60), 3_000);
    lab.control.handle_report(p[1], &r1, lab.now).unwrap();
    lab.advance(2);
    let status = lab.control.node_status(n).unwrap();
    let v = status.addresses.iter().find(|a| a.ip == ip("203.0.113.10")).unwrap().verdict;
    assert!(v.is_failing());
    // The strict majority dates from the second prober's evidence, 6 s before its report
    // (the streak itself starts no earlier than the pass before, which saw it answering).
    assert_eq!(v.failing_from, Some(first.plus_millis(3_000 - 6_000)));
    let health = lab.control.snapshots()[&lab.control.config().nodes[&n.0].value.cluster].nodes[&n].clone();
    assert_eq!(health.addresses[0].reachability, vantage_core::reachability::Reachability::Reachable);
}

#[test]
fn probers_get_evenly_spaced_phases() {
    let mut lab = Lab::new();
    let (p, _, _) = three_regions(&mut lab);
    // Alone, a prober's phase is 0; once all three are online they share the interval.
    assert_eq!(lab.control.handle_work(p[0], lab.now).phase_ms, Some(0));
    for c in &p {
        lab.control.handle_work(*c, lab.now);
    }
    let mut phases: Vec<u64> =
        p.iter().map(|c| lab.control.handle_work(*c, lab.now).phase_ms.unwrap()).collect();
    phases.sort_unstable();
    assert_eq!(phases, [0, 3_333, 6_666]);
    // A fourth prober: the phases move to quarters.
    let r = lab.region("sa");
    let q = lab.prober("p-sa", r);
    lab.control.handle_work(q, lab.now);
    let mut phases: Vec<u64> =
        p.iter().chain([&q]).map(|c| lab.control.handle_work(*c, lab.now).phase_ms.unwrap()).collect();
    phases.sort_unstable();
    assert_eq!(phases, [0, 2_500, 5_000, 7_500]);
}

#[test]
fn over_budget_each_address_is_probed_by_a_region_balanced_share_of_the_probers() {
    let mut lab = Lab::new();
    let regions: Vec<RegionId> = ["eu", "us", "ap", "sa"].iter().map(|c| lab.region(c)).collect();
    let mut probers = Vec::new();
    for i in 0..12 {
        probers.push((lab.prober(&format!("p{i}"), regions[i % 4]), i % 4));
    }
    let c = lab.cluster(CLUSTER);
    let g = lab.group(c, "g", None);
    for i in 0..40 {
        lab.node(c, g, &format!("edge-{i}"), &[(&format!("203.0.113.{}", i + 1), Primary)]);
    }
    // 1 probe per second per target, 3 attempts every 10 s: 3 probers per target.
    lab.put(detection(DetectionSettingsInput { probe_budget_per_s: 1, ..Default::default() }));
    // Every prober asks once: they are online, and the budget shares the targets among them.
    for (caller, _) in &probers {
        lab.control.handle_work(*caller, lab.now);
    }
    let mut per_target: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    let mut per_prober = Vec::new();
    for (caller, region) in &probers {
        let w = lab.control.handle_work(*caller, lab.now);
        per_prober.push(w.targets.len());
        for t in w.targets {
            per_target.entry(t.key).or_default().push(*region);
        }
    }
    assert_eq!(per_target.len(), 40, "every address is probed");
    for (key, regions) in &per_target {
        let distinct: BTreeSet<_> = regions.iter().collect();
        assert_eq!((regions.len(), distinct.len()), (3, 3), "{key}: three probers in three regions");
    }
    assert_eq!(per_prober.iter().sum::<usize>(), 120);
    assert!(per_prober.iter().all(|n| (4..=16).contains(n)), "the load is shared: {per_prober:?}");
    // A window is made of online probers: with the others silent past their online window,
    // the last one probes everything.
    lab.advance(31);
    assert_eq!(lab.control.handle_work(probers[11].0, lab.now).targets.len(), 40);
    // Within the default budget (33 probers a target), every prober probes everything.
    lab.put(detection(DetectionSettingsInput::default()));
    assert!(probers.iter().all(|(caller, _)| lab.control.handle_work(*caller, lab.now).targets.len() == 40));
}

#[test]
fn an_address_listed_by_two_clusters_is_probed_once_and_counts_for_both() {
    let mut lab = Lab::new();
    let r = lab.region("eu");
    let p = lab.prober("fra", r);
    let a = lab.cluster(CLUSTER);
    let b = lab.cluster(
        r#"{"name":"live","domain":"live.example.net","listeners":[{"port":80,"protocol":"http"}]}"#,
    );
    let other_check = lab.cluster(
        r#"{"name":"api","domain":"api.example.net","listeners":[{"port":80,"protocol":"http"}],"check":{"path":"/health"}}"#,
    );
    let mut nodes = Vec::new();
    for c in [a, b, other_check] {
        let g = lab.group(c, "g", None);
        nodes.push(lab.node(c, g, "edge", &[("203.0.113.10", Primary)]));
    }
    let w = lab.control.handle_work(p, lab.now);
    let keys: Vec<&str> = w.targets.iter().map(|t| t.key.as_str()).collect();
    assert_eq!(
        keys,
        [format!("n{}/203.0.113.10/80", nodes[0]), format!("n{}/203.0.113.10/80", nodes[2])],
        "same address, listener and check once; another check is another probe"
    );
    lab.round(p, &[]);
    let results = lab.control.addresses().results();
    for n in &nodes {
        let key = vantage_control::target::TargetKey { node: *n, ip: ip("203.0.113.10"), port: 80 };
        assert!(results.of(&key).any(|(c, _)| c == p), "node {n} has the shared result");
    }
    // What the edge receives: one round of 3 attempts per probe, over a minute.
    for _ in 0..6 {
        lab.advance(10);
        lab.round(p, &[]);
    }
    let rates = lab.control.probe_rates(lab.now);
    assert_eq!(rates.len(), 1, "one address:port");
    let expected = 2.0 * 3.0 * 6.0 / 60.0; // two probes (two checks), 3 attempts, 6 rounds
    assert!((rates[0].1 - expected).abs() < 0.05, "{rates:?}");
}

#[test]
fn an_address_that_flaps_waits_longer_each_time_and_says_so() {
    let mut lab = Lab::new();
    let r = lab.region("eu");
    let p = lab.prober("fra", r);
    let fast = ProbeSettings::parse(ProbeSettingsInput {
        interval_s: 5,
        timeout_ms: 1000,
        failing_before_unreachable_s: 5,
        answering_before_reachable_s: 5,
        ..Default::default()
    })
    .unwrap();
    lab.put(Object::Settings(fast));
    let c = lab.cluster(CLUSTER);
    let g = lab.group(c, "g", Some(r));
    let n = lab.node(c, g, "edge-1", &[("203.0.113.10", Primary), ("198.51.100.10", Backup1)]);
    let status = |lab: &Lab| {
        let s = lab.control.node_status(n).unwrap();
        s.addresses.iter().find(|a| a.ip == ip("203.0.113.10")).unwrap().clone()
    };
    lab.round(p, &[]);
    lab.advance(1);
    let mut back_after = Vec::new();
    for _ in 0..4 {
        // Down until unreachable.
        while status(&lab).reachability == vantage_core::reachability::Reachability::Reachable {
            lab.round(p, &["203.0.113.10"]);
            lab.advance(1);
        }
        let down = lab.now;
        // Answering until reachable again.
        while status(&lab).reachability == vantage_core::reachability::Reachability::Unreachable {
            lab.round(p, &[]);
            lab.advance(1);
        }
        back_after.push(lab.now.millis_since(down) / 1000);
    }
    assert_eq!(status(&lab).damping, 8);
    // 5 s, then 10, 20, 40 (each within a second of a pass).
    assert!(back_after[0] <= 7 && (10..=12).contains(&back_after[1]), "{back_after:?}");
    assert!((20..=22).contains(&back_after[2]) && (40..=42).contains(&back_after[3]), "{back_after:?}");
    // The alert of the last outage named the multiplier.
    let outputs = lab.take();
    let fired = outputs.iter().rev().find_map(|o| match o {
        Output::Alert(a)
            if a.kind == "address_unreachable" && a.state == vantage_control::alerts::AlertState::Firing =>
        {
            Some(a.clone())
        }
        _ => None,
    });
    assert!(alerts(&outputs).iter().any(|(k, _)| k.starts_with("address_unreachable/")));
    let fired = fired.expect("an unreachable alert");
    assert_eq!(fired.details["damping"], 8, "{:?}", fired.details);
    assert!(fired.summary.contains("8×"), "{}", fired.summary);
}

#[test]
fn a_suspect_address_shortens_its_lines_ttl_in_the_published_revision() {
    let mut lab = Lab::new();
    let (p, c, _) = three_regions(&mut lab);
    for &caller in &p {
        lab.round(caller, &[]);
    }
    lab.advance(3);
    lab.take();
    lab.round(p[0], &["203.0.113.10"]);
    lab.round(p[1], &["203.0.113.10"]);
    lab.advance(3);
    let published = lab.control.snapshots()[&c].published.clone().unwrap();
    assert_eq!(published.records.ttls, [(DEFAULT_LINE, 15)].into());
    assert_eq!(published.records.lines[&DEFAULT_LINE], [ip("203.0.113.10")], "still answered");
    let revisions = crate::lab::revisions(&lab.take());
    assert!(revisions.iter().any(|(_, why)| why.contains("203.0.113.10 failing, TTL 15 s")), "{revisions:?}");
}
