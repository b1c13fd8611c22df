//! What a configuration change re-evaluates and whose results it drops.

use vantage_control::Output;
use vantage_control::config::Object;
use vantage_control::identity::Caller;
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
    let mut rec = lab.control.config().probers[&id.0].value.clone();
    rec.enabled = false;
    lab.replace(id.0, Object::Prober(rec));
    assert!(lab.take().contains(&Output::ForgetResults(p)));
    let results = &lab.control.observations().results;
    assert!(results.values().all(|per| !per.contains_key(&p) && per.contains_key(&q)));
    assert_eq!(lab.control.poll_timeout(), Some(lab.now), "every cluster at once");
    lab.delete(q.id());
    assert!(lab.take().contains(&Output::ForgetResults(q)));
    assert!(lab.control.observations().results.is_empty());
}

#[test]
fn results_not_updated_for_an_hour_expire() {
    let mut lab = Lab::new();
    let (p, ..) = lab.one_node();
    lab.round(p, &[]);
    lab.advance(3_600);
    assert_eq!(lab.control.observations().results.len(), 1, "an hour old: kept");
    lab.advance(60);
    assert!(lab.control.observations().results.is_empty());
    assert!(lab.take().iter().any(|o| matches!(o, Output::ExpireResults { .. })));
}
