//! What a configuration change re-evaluates and whose results it drops.

use vantage_control::config::Object;
use vantage_control::identity::Caller;
use vantage_control::{Output, Start, Upkeep};
use vantage_core::address::Level::Primary;

use crate::lab::{CLUSTER, Lab};

#[test]
fn disabling_or_deleting_a_prober_drops_its_results_and_evaluates_every_cluster() {
    let mut lab = Lab::new();
    let r = lab.region("eu");
    let p = lab.prober("fra", r);
    let q = lab.prober("ams", r);
    let c = lab.cluster(CLUSTER);
    let g = lab.group(c, "fra-1", Some(r));
    lab.node(c, g, "edge-1", &[("203.0.113.10", Primary)]);
    lab.round(p, &[]);
    lab.round(q, &[]);
    lab.tick();
    lab.take();
    lab.advance(3);
    let Caller::Prober(id) = p else { unreachable!() };
    let mut rec = (*lab.control.config().probers[&id.0].value).clone();
    rec.enabled = false;
    lab.replace(id.0, Object::Prober(rec));
    assert!(lab.take().contains(&Output::ForgetResults(p)));
    let results = lab.control.addresses().results();
    let targets: std::collections::BTreeSet<_> = results.iter().map(|(k, ..)| k).collect();
    assert!(targets.iter().all(|k| results.of(k).all(|(c, _)| c != p) && results.of(k).any(|(c, _)| c == q)));
    assert_eq!(lab.control.poll_timeout(), Some(lab.now), "every cluster at once");
    lab.delete(q.id());
    assert!(lab.take().contains(&Output::ForgetResults(q)));
    assert!(lab.control.addresses().results().is_empty());
}

/// Only what counted until the change has stored results to delete: saving a node that does
/// not probe asks for no deletion (a fleet of 10,000 saved at once would ask for 10,000), its
/// turning to probe and back asks for one.
#[test]
fn only_a_prober_that_stops_counting_has_its_stored_results_deleted() {
    let mut lab = Lab::new();
    let r = lab.region("eu");
    let c = lab.cluster(CLUSTER);
    let g = lab.group(c, "fra-1", Some(r));
    let n = lab.node(c, g, "edge-1", &[("203.0.113.10", Primary)]);
    let deletions =
        |lab: &mut Lab| lab.take().into_iter().filter(|o| matches!(o, Output::ForgetResults(_))).count();
    assert_eq!(deletions(&mut lab), 0, "a new node that does not probe");
    let mut rec = (*lab.control.config().nodes[&n.0].value).clone();
    rec.node.name = "edge-one".into();
    lab.replace(n.0, Object::Node(rec.clone()));
    assert_eq!(deletions(&mut lab), 0, "saved, still not probing");
    rec.node.also_probes = true;
    lab.replace(n.0, Object::Node(rec.clone()));
    assert_eq!(deletions(&mut lab), 0, "it starts probing");
    rec.node.also_probes = false;
    lab.replace(n.0, Object::Node(rec));
    assert!(lab.take().contains(&Output::ForgetResults(Caller::Node(n))), "it stops");
}

#[test]
fn results_not_updated_for_an_hour_expire() {
    let mut lab = Lab::new();
    let (p, ..) = lab.one_node();
    lab.round(p, &[]);
    lab.advance(3_600);
    assert_eq!(lab.control.addresses().results().targets(), 1, "an hour old: kept");
    lab.advance(60);
    assert!(lab.control.addresses().results().is_empty());
    assert!(lab.take().iter().any(|o| matches!(o, Output::Upkeep(Upkeep::ExpireResults { .. }))));
}

#[test]
fn the_history_is_rolled_up_by_whole_utc_days_past_the_retention() {
    let mut lab = Lab::new();
    lab.advance(3_700);
    let cut = lab.take().into_iter().find_map(|o| match o {
        Output::Upkeep(Upkeep::RollUpHistory { before, .. }) => Some(before),
        _ => None,
    });
    let before = cut.expect("a roll-up within the hour");
    assert_eq!(before.millis() % 86_400_000, 0, "a day boundary: {before}");
    let retained = lab.now.millis() - before.millis();
    assert!((14 * 86_400_000..15 * 86_400_000).contains(&retained), "14 days and part of one: {retained}");
}

#[test]
fn a_revision_names_what_the_change_saved() {
    use vantage_core::address::{AddressInput, AddressList, AddressPolicy};

    use crate::lab::revisions;
    let mut lab = Lab::new();
    let (_, c, _, n) = lab.one_node();
    lab.tick();
    lab.take();
    let mut rec = (*lab.control.config().nodes[&n.0].value).clone();
    let rows = [AddressInput { ip: "203.0.113.11".into(), level: Primary, trusted: false, line: None }];
    rec.addresses = AddressList::parse(&rows, AddressPolicy::default()).unwrap();
    lab.replace(n.0, Object::Node(rec.clone()));
    lab.tick();
    assert_eq!(revisions(&lab.take()), vec![(2, "Addresses of edge-1 saved".to_owned())]);
    rec.node.enabled = false;
    lab.replace(n.0, Object::Node(rec));
    lab.tick();
    assert_eq!(
        revisions(&lab.take()),
        vec![(
            3,
            "Node edge-1 disabled; line default answers no records: no enabled node has an address"
                .to_owned()
        )]
    );
    let line: vantage_core::model::Line =
        serde_json::from_value(serde_json::json!({"name": "local", "group": lab.control.config().groups.keys().next().unwrap(), "client_networks": ["192.0.2.0/24"]})).unwrap();
    let l = lab.put(Object::Line(vantage_control::config::LineRecord { cluster: c, line }));
    lab.tick();
    // Its only node is disabled: the line says it answers nothing, rather than a node the
    // operator took out.
    assert_eq!(
        revisions(&lab.take()),
        vec![(
            4,
            "Line local added; line local answers no records: no enabled node has an address".to_owned()
        )]
    );
    lab.delete(l);
    lab.tick();
    assert_eq!(
        revisions(&lab.take()),
        vec![(
            5,
            "Line local deleted; line default answers no records: no enabled node has an address".to_owned()
        )]
    );
}

/// A cluster that leaves the configuration leaves storage too: its saved state goes, and a
/// start that finds the state of a cluster gone since drops it at once.
#[test]
fn a_gone_clusters_saved_state_is_dropped() {
    let mut lab = Lab::new();
    let r = lab.region("eu");
    let p = lab.prober("fra", r);
    let c = lab.cluster(CLUSTER);
    let g = lab.group(c, "fra-1", Some(r));
    let n = lab.node(c, g, "edge-1", &[("203.0.113.10", Primary)]);
    lab.round(p, &[]);
    lab.tick();
    let state = lab.saved_state(c).expect("the state was saved");
    assert!(!lab.take().contains(&Output::DropState(c)));
    lab.delete(n.0);
    lab.delete(g.0);
    assert!(!lab.take().contains(&Output::DropState(c)), "only the cluster's going drops it");
    lab.delete(c.0);
    assert!(lab.take().contains(&Output::DropState(c)));

    let config = (*lab.control.config()).clone();
    let mut again = Lab::with_start(Start { config, states: vec![(c, state)], ..Start::default() });
    assert!(again.take().contains(&Output::DropState(c)));
}
