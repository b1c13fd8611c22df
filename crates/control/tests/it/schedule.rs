//! When clusters are evaluated (SPEC §5.5): every 10 s, after a report at most every 2 s, at
//! once after a configuration change, and exactly when a timer runs out.

use vantage_core::address::Level::{Backup1, Primary};

use crate::lab::{CLUSTER, Lab, revisions};

#[test]
fn a_new_cluster_is_evaluated_at_once_then_every_10_s() {
    let mut lab = Lab::new();
    let c = lab.cluster(CLUSTER);
    let g = lab.group(c, "fra-1", None);
    lab.node(c, g, "edge-1", &[("203.0.113.10", Primary)]);
    assert_eq!(lab.control.poll_timeout(), Some(lab.now), "due now");
    lab.tick();
    let snap = lab.control.snapshots()[&c].clone();
    assert_eq!(snap.evaluated_at, Some(lab.now));
    assert_eq!(revisions(&lab.take()), vec![(1, "Cluster video added".to_owned())]);
    let first = lab.now;
    lab.advance(9);
    assert_eq!(lab.control.snapshots()[&c].evaluated_at, Some(first), "not again within 10 s");
    lab.advance(1);
    assert_eq!(lab.control.snapshots()[&c].evaluated_at, Some(first.plus_secs(10)));
}

#[test]
fn reports_trigger_a_pass_at_most_every_2_s() {
    let mut lab = Lab::new();
    let (p, c, ..) = lab.one_node();
    lab.tick();
    let first = lab.now;
    lab.advance_ms(500);
    lab.round(p, &[]);
    assert_eq!(lab.control.poll_timeout(), Some(first.plus_secs(2)), "2 s after the last pass");
    lab.advance_ms(1_500);
    assert_eq!(lab.control.snapshots()[&c].evaluated_at, Some(first.plus_secs(2)));
    lab.advance(5);
    lab.round(p, &[]);
    assert_eq!(lab.control.poll_timeout(), Some(lab.now), "long after the last pass: at once");
}

#[test]
fn a_configuration_change_evaluates_at_once_and_a_rule_change_cuts_no_revision() {
    let mut lab = Lab::new();
    let c = lab.cluster(CLUSTER);
    let g = lab.group(c, "fra-1", None);
    lab.node(c, g, "edge-1", &[("203.0.113.10", Primary), ("198.51.100.10", Backup1)]);
    lab.tick();
    lab.take();
    lab.advance(3);
    lab.rule(c, r#"{"name":"cpu","conditions":[{"metric":"cpu","comparison":">","threshold":90}]}"#);
    assert_eq!(lab.control.poll_timeout(), Some(lab.now), "evaluated at once");
    lab.tick();
    assert!(revisions(&lab.take()).is_empty(), "a rule that does not act changes no record");
    lab.advance(1);
    lab.group(c, "fra-2", None);
    lab.tick();
    assert_eq!(revisions(&lab.take()), vec![(2, "Group fra-2 added".to_owned())]);
}

/// The next pass is due when a timer of the pass runs out, not only at the 10 s sweep: with
/// 5 s failing-before-unreachable, an address seen failing at t becomes unreachable at t + 5.
#[test]
fn a_pass_is_due_when_a_timer_runs_out() {
    let mut lab = Lab::new();
    let r = lab.region("eu");
    let probers: Vec<_> = ["a", "b", "c"].iter().map(|n| lab.prober(n, r)).collect();
    let settings: vantage_core::settings::ProbeSettings = serde_json::from_str(
        r#"{"interval_s":5,"timeout_ms":1000,"failing_before_unreachable_s":5,"answering_before_reachable_s":5}"#,
    )
    .unwrap();
    lab.put(vantage_control::config::Object::Settings(settings));
    let c = lab.cluster(CLUSTER);
    let g = lab.group(c, "fra-1", Some(r));
    lab.node(c, g, "edge-1", &[("203.0.113.10", Primary), ("198.51.100.10", Backup1)]);
    for p in &probers {
        lab.round(*p, &["203.0.113.10"]);
    }
    lab.tick();
    let failing_since = lab.now;
    lab.take();
    assert_eq!(lab.control.poll_timeout(), Some(failing_since.plus_secs(5)));
    lab.advance(5);
    let revs = revisions(&lab.take());
    assert_eq!(revs.len(), 1, "{revs:?}");
    assert_eq!(
        lab.control.snapshots()[&c].published.as_ref().unwrap().records.all,
        vec![crate::lab::ip("198.51.100.10")]
    );
}
