//! Online status in one place, and the alerts about silence (SPEC §3.5, §5.3).

use vantage_control::config::Object;
use vantage_control::identity::Caller;
use vantage_control::observe::{ProberStatus, agent_online};
use vantage_core::address::Level::Primary;
use vantage_core::ids::ProberId;

use crate::lab::{CLUSTER, Lab, T0, alerts};

#[test]
fn a_prober_is_online_for_three_intervals_at_least_30_s() {
    let mut lab = Lab::new();
    let r = lab.region("eu");
    let p = lab.prober("fra", r);
    assert_eq!(lab.control.prober_status(p, lab.now), ProberStatus::Offline, "never seen");
    lab.control.handle_work(p, lab.now);
    // Default interval 10 s: online for 30 s after it was last seen.
    assert_eq!(lab.control.prober_status(p, lab.now.plus_secs(30)), ProberStatus::Online);
    assert_eq!(lab.control.prober_status(p, lab.now.plus_secs(31)), ProberStatus::Offline);
    let Caller::Prober(ProberId(id)) = p else { unreachable!() };
    let mut rec = (*lab.control.config().probers[&id].value).clone();
    rec.enabled = false;
    lab.replace(id, Object::Prober(rec));
    assert_eq!(lab.control.prober_status(p, lab.now), ProberStatus::Disabled);
}

#[test]
fn an_agent_is_online_for_45_s_after_its_heartbeat() {
    assert!(!agent_online(None, T0));
    assert!(agent_online(Some(T0), T0.plus_secs(45)));
    assert!(!agent_online(Some(T0), T0.plus_secs(46)));
}

#[test]
fn a_silent_prober_alerts_after_its_window_but_not_in_the_first_window_after_start() {
    let mut lab = Lab::new();
    let r = lab.region("eu");
    let p = lab.prober("fra", r);
    lab.take();
    lab.advance(29);
    assert!(alerts(&lab.take()).is_empty(), "nothing fires in the first window after a start");
    lab.advance(11);
    let fired = alerts(&lab.take());
    assert!(fired.contains(&(format!("prober_offline/prober:{}", p.id()), true)), "{fired:?}");
    lab.control.handle_work(p, lab.now);
    lab.advance(10);
    let resolved = alerts(&lab.take());
    assert!(resolved.contains(&(format!("prober_offline/prober:{}", p.id()), false)), "{resolved:?}");
}

#[test]
fn an_enrolled_node_without_heartbeat_alerts_and_one_never_enrolled_does_not() {
    let mut lab = Lab::new();
    let c = lab.cluster(CLUSTER);
    let g = lab.group(c, "fra-1", None);
    let quiet = lab.node(c, g, "edge-1", &[("203.0.113.10", Primary)]);
    let enrolled = lab.node(c, g, "edge-2", &[("203.0.113.20", Primary)]);
    let mut rec = (*lab.control.config().nodes[&enrolled.0].value).clone();
    rec.cert_sha256 = Some("fp-edge-2".into());
    lab.replace(enrolled.0, Object::Node(rec));
    lab.take();
    lab.advance(60);
    let fired = alerts(&lab.take());
    assert!(fired.contains(&(format!("node_offline/node:{enrolled}"), true)), "{fired:?}");
    assert!(!fired.iter().any(|(k, _)| k == &format!("node_offline/node:{quiet}")), "{fired:?}");
}
