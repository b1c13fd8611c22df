//! One owner of what is published: per-cluster snapshots that the API, the UI and DNS read,
//! and a zone that changes only with a revision (SPEC §5.5, §9).

use vantage_control::Output;
use vantage_control::config::Object;
use vantage_core::address::Level::Primary;
use vantage_core::reachability::Reachability;

use crate::lab::{CLUSTER, Lab, ip, revisions};

/// With two clusters, every node keeps its status after the other cluster's pass (the server
/// once kept only the statuses of the cluster evaluated last).
#[test]
fn every_clusters_node_statuses_survive_the_other_clusters_pass() {
    let mut lab = Lab::new();
    let r = lab.region("eu");
    let p = lab.prober("fra", r);
    let a = lab.cluster(CLUSTER);
    let b = lab
        .cluster(r#"{"name":"img","domain":"img.example.net","listeners":[{"port":80,"protocol":"http"}]}"#);
    let ga = lab.group(a, "fra-1", Some(r));
    let gb = lab.group(b, "fra-1", Some(r));
    let na = lab.node(a, ga, "edge-a", &[("203.0.113.10", Primary)]);
    let nb = lab.node(b, gb, "edge-b", &[("203.0.113.20", Primary)]);
    lab.round(p, &[]);
    lab.tick();
    // Only cluster a is evaluated again.
    lab.advance(3);
    lab.group(a, "fra-2", None);
    lab.tick();
    for n in [na, nb] {
        let s = lab.control.node_status(n).unwrap_or_else(|| panic!("{n} has a status"));
        assert!(s.serving);
        assert_eq!(s.level, Some(Primary));
        assert_eq!(s.addresses[0].reachability, Reachability::Reachable);
        assert!(s.addresses[0].in_use);
    }
}

/// A configuration change (here the TTL) reaches DNS with the revision it causes, under that
/// revision's serial — never under the old one.
#[test]
fn the_zone_changes_only_with_a_revision() {
    let mut lab = Lab::new();
    let c = lab.cluster(CLUSTER);
    let g = lab.group(c, "fra-1", None);
    lab.node(c, g, "edge-1", &[("203.0.113.10", Primary)]);
    lab.tick();
    let published = |lab: &Lab| lab.control.snapshots()[&c].published.clone().unwrap();
    assert_eq!((published(&lab).number, published(&lab).zone.ttl), (1, 30));
    lab.take();
    lab.advance(1);
    let mut cluster = (*lab.control.config().clusters[&c.0].value).clone();
    cluster.ttl = 60;
    lab.replace(c.0, Object::Cluster(cluster));
    let answers = |o: &Output| matches!(o, Output::Answers(_));
    assert!(!lab.take().iter().any(answers), "nothing for DNS before the revision");
    assert_eq!((published(&lab).number, published(&lab).zone.ttl), (1, 30), "still revision 1 with TTL 30");
    lab.tick();
    let out = lab.take();
    assert_eq!(revisions(&out), vec![(2, "Cluster video saved".to_owned())]);
    let revision = out.iter().position(|o| matches!(o, Output::Revision(_)));
    // DNS rebuilds from the new snapshot before the revision is stored (which may be slow).
    assert!(out.iter().position(answers) < revision, "DNS first, then the revision is stored: {out:?}");
    assert_eq!((published(&lab).number, published(&lab).zone.ttl), (2, 60));
}

#[test]
fn a_deleted_cluster_leaves_dns() {
    let mut lab = Lab::new();
    let c = lab.cluster(CLUSTER);
    let g = lab.group(c, "fra-1", None);
    let n = lab.node(c, g, "edge-1", &[("203.0.113.10", Primary)]);
    lab.tick();
    lab.take();
    for id in [n.0, g.0, c.0] {
        lab.delete(id);
    }
    assert!(lab.take().iter().any(|o| matches!(o, Output::Answers(s) if s.is_empty())));
    assert!(lab.control.snapshots().is_empty());
}

#[test]
fn a_restart_serves_the_stored_revision_before_the_first_pass() {
    let mut lab = Lab::new();
    let c = lab.cluster(CLUSTER);
    let g = lab.group(c, "fra-1", None);
    lab.node(c, g, "edge-1", &[("203.0.113.10", Primary)]);
    let config = (*lab.control.config()).clone();
    let start = vantage_control::Start {
        config,
        revisions: vec![vantage_control::StoredRevision {
            cluster: c,
            number: 7,
            at: lab.now,
            reason: "stored".into(),
            records: vantage_core::evaluate::Records {
                lines: [(vantage_core::evaluate::DEFAULT_LINE, vec![ip("203.0.113.10")])].into(),
                all: vec![ip("203.0.113.10")],
                ..Default::default()
            },
            held: Default::default(),
        }],
        ..Default::default()
    };
    let mut again = Lab::with_start(start);
    assert!(matches!(again.take().first(), Some(Output::Answers(s)) if s.contains_key(&c)));
    assert_eq!(again.control.snapshots()[&c].published.as_ref().unwrap().number, 7);
    again.tick();
    assert!(revisions(&again.take()).is_empty(), "records unchanged: no new revision after a restart");
}

/// A start publishes the latest stored revision's records and measures the next change against
/// them, whatever the saved state holds: a save leaves them out, and an older version's saved
/// state (or one written before a stop, while its revision was stored) holds older ones.
#[test]
fn a_restart_takes_the_published_records_from_the_latest_revision() {
    let mut lab = Lab::new();
    let r = lab.region("eu");
    let p = lab.prober("fra", r);
    let c = lab.cluster(CLUSTER);
    let g = lab.group(c, "fra-1", Some(r));
    lab.node(c, g, "edge-a", &[("203.0.113.10", Primary)]);
    let b = lab.node(c, g, "edge-b", &[("203.0.113.20", Primary)]);
    lab.round(p, &[]);
    lab.advance(3);
    let first = lab.control.snapshots()[&c].published.clone().unwrap();
    assert_eq!(first.records.all, [ip("203.0.113.10"), ip("203.0.113.20")]);
    let mut older = lab.stored();
    assert!(older.states[0].1.published.is_none(), "a save leaves the published records out");
    // As an older version saved it: with the records of the revision it followed.
    older.states[0].1.published = Some(first.records.clone());
    lab.delete(b.0);
    lab.tick();
    let stored = lab.stored();
    assert_eq!(stored.revisions[0].records.all, [ip("203.0.113.10")]);
    lab.take();
    let start = vantage_control::Start { states: older.states, ..stored };
    let mut again = Lab::with_start_at(start, lab.now.plus_secs(1));
    again.tick();
    assert!(revisions(&again.take()).is_empty(), "the stored revision's records are published: no new one");
}
