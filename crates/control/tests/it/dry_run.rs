//! The dry run a fleet plan shows: what a configuration change would make DNS answer, from the
//! current observations, without changing anything.

use vantage_core::address::Level::Primary;
use vantage_core::model::AllDown;
use vantage_core::reachability::Reachability;

use crate::lab::{CLUSTER, Lab, ip};

#[test]
fn removing_the_last_healthy_node_shows_the_line_held_and_changes_nothing() {
    let mut lab = Lab::new();
    let r = lab.region("eu");
    let p = lab.prober("fra", r);
    let c = lab.cluster(CLUSTER);
    let g = lab.group(c, "fra-1", Some(r));
    let healthy = lab.node(c, g, "edge-1", &[("203.0.113.10", Primary)]);
    let failing = lab.node(c, g, "edge-2", &[("203.0.113.11", Primary)]);
    lab.round(p, &[]);
    lab.advance(1);
    let down = |lab: &Lab| {
        let s = lab.control.node_status(failing).unwrap();
        s.addresses[0].reachability == Reachability::Unreachable
    };
    while !down(&lab) {
        lab.round(p, &["203.0.113.11"]);
        lab.advance(1);
    }
    lab.take();
    let published = |lab: &Lab| lab.control.snapshots()[&c].published.clone().unwrap();
    let before = published(&lab);
    assert_eq!(before.records.all, vec![ip("203.0.113.10")]);

    let after = lab.control.dry_run(&[], &[healthy.0], lab.now);
    assert_eq!(after.len(), 1, "{after:?}");
    let line = &after[0].lines[0];
    assert_eq!((after[0].cluster.as_str(), line.line.as_str()), ("video", "default"));
    assert_eq!(line.now, vec![ip("203.0.113.10")]);
    let held = line.held.as_ref().expect("nothing healthy is left: the line answers by its policy");
    assert_eq!(held.policy, AllDown::Hold, "{held:?}");
    assert!(!line.after.contains(&ip("203.0.113.10")), "a deleted node is never answered: {line:?}");
    assert_eq!(after[0].revisions.len(), 1, "{after:?}");

    // Nothing moved: no output, the same published revision, the node still there.
    assert!(lab.take().is_empty());
    assert_eq!(published(&lab), before);
    assert!(lab.control.config().nodes.contains_key(&healthy.0));

    // A change that touches no cluster shows none; deleting the cluster shows every line gone.
    assert!(lab.control.dry_run(&[], &[r.0 + 1000], lab.now).is_empty());
    let gone = lab.control.dry_run(&[], &[c.0], lab.now);
    assert!(gone[0].lines.iter().all(|l| l.removed && l.after.is_empty()), "{gone:?}");
}

#[test]
fn disabling_a_rule_that_acts_shows_its_actions_ending_and_the_node_back() {
    let mut lab = Lab::new();
    let r = lab.region("eu");
    let p = lab.prober("fra", r);
    let c = lab.cluster(CLUSTER);
    let g = lab.group(c, "fra-1", Some(r));
    lab.node(c, g, "edge-1", &[("203.0.113.10", Primary)]);
    lab.node(c, g, "edge-2", &[("203.0.113.11", Primary)]);
    let rule = lab.rule(
        c,
        r#"{"name":"lossy","hold_s":0,"recover_s":0,"conditions":[{"metric":"probe_loss","comparison":">","threshold":50,"for_s":0}]}"#,
    );
    lab.round(p, &[]);
    lab.advance(1);
    // Lossy from the prober's view, yet not long enough to be unreachable: only the rule acts.
    lab.round(p, &["203.0.113.11"]);
    lab.advance(3);
    let published = |lab: &Lab| lab.control.snapshots()[&c].published.clone().unwrap().records.all.clone();
    assert_eq!(published(&lab), vec![ip("203.0.113.10")], "the rule took edge-2 out");
    lab.take();

    let mut disabled = (*lab.control.config().rules[&rule].value).clone();
    disabled.rule.enabled = false;
    let after = lab.control.dry_run(&[(rule, vantage_control::config::Object::Rule(disabled))], &[], lab.now);
    assert_eq!(
        after[0].rules,
        vec!["lossy changed: its actions on edge-2 would end".to_owned()],
        "{after:?}"
    );
    assert_eq!(after[0].lines[0].after, vec![ip("203.0.113.10"), ip("203.0.113.11")], "{after:?}");
    assert!(lab.take().is_empty(), "nothing moved");
    assert_eq!(published(&lab), vec![ip("203.0.113.10")]);
}
