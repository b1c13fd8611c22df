//! What each prober is given and what its reports may carry (SPEC §3.2, §3.4).

use vantage_control::config::Object;
use vantage_control::identity::Caller;
use vantage_core::address::Level::{Backup1, Primary};
use vantage_core::wire;

use crate::lab::{CLUSTER, Lab, attempt, ip, report_at};

fn keys(w: &wire::Work) -> Vec<String> {
    let mut k: Vec<String> = w.targets.iter().map(|t| t.key.clone()).collect();
    k.sort();
    k
}

/// A prober in `eu` and a cluster with an HTTP and an HTTPS listener, with one group there.
fn two_listeners(lab: &mut Lab) -> (Caller, vantage_core::ids::ClusterId, vantage_core::ids::GroupId) {
    let r = lab.region("eu");
    let p = lab.prober("fra", r);
    let c = lab.cluster(
        r#"{"name":"video","domain":"cdn.example.net","listeners":[{"port":80,"protocol":"http"},{"port":443,"protocol":"https"}]}"#,
    );
    (p, c, lab.group(c, "fra-1", Some(r)))
}

#[test]
fn work_is_every_address_of_every_enabled_node_times_every_listener() {
    let mut lab = Lab::new();
    let (p, c, g) = two_listeners(&mut lab);
    let n1 = lab.node(c, g, "edge-1", &[("203.0.113.10", Primary), ("198.51.100.10", Backup1)]);
    let n2 = lab.node(c, g, "edge-2", &[("203.0.113.20", Primary)]);
    let w = lab.control.handle_work(p, lab.now);
    assert_eq!(w.targets.len(), 6, "3 addresses × 2 listeners");
    assert!(keys(&w).contains(&format!("n{n1}/198.51.100.10/443")));
    // A disabled node is not probed.
    let mut rec = (*lab.control.config().nodes[&n2.0].value).clone();
    rec.node.enabled = false;
    lab.replace(n2.0, Object::Node(rec));
    assert_eq!(lab.control.handle_work(p, lab.now).targets.len(), 4);
}

#[test]
fn a_node_that_probes_skips_itself_and_reported_addresses_count_while_none_are_configured() {
    let mut lab = Lab::new();
    let r = lab.region("eu");
    let p = lab.prober("fra", r);
    let c = lab.cluster(CLUSTER);
    let g = lab.group(c, "fra-1", Some(r));
    let n1 = lab.node(c, g, "edge-1", &[]);
    let n2 = lab.node(c, g, "edge-2", &[("203.0.113.20", Primary)]);
    let mut rec = (*lab.control.config().nodes[&n1.0].value).clone();
    rec.node.also_probes = true;
    lab.replace(n1.0, Object::Node(rec));
    let hb = wire::Heartbeat {
        version: "1".into(),
        hostname: "edge-1".into(),
        metrics: None,
        // A private address is not reportable; the public one is.
        addresses: vec![ip("10.0.0.5"), ip("203.0.113.10")],
        capabilities: Vec::new(),
        links: Vec::new(),
    };
    let reply = lab.control.handle_heartbeat(n1, hb, ip("203.0.113.10"), lab.now);
    assert!(reply.also_probes);
    assert_eq!(
        keys(&lab.control.handle_work(p, lab.now)),
        vec![format!("n{n1}/203.0.113.10/80"), format!("n{n2}/203.0.113.20/80")]
    );
    assert_eq!(
        keys(&lab.control.handle_work(Caller::Node(n1), lab.now)),
        vec![format!("n{n2}/203.0.113.20/80")],
        "a node that probes skips itself"
    );
}

#[test]
fn a_report_may_carry_only_targets_given_and_one_to_ten_attempts() {
    let mut lab = Lab::new();
    let (p, _, _, n) = lab.one_node();
    let report = |target: String, attempts: usize| {
        report_at(
            lab.now,
            vec![vantage_core::result::ProbeResult {
                target,
                attempts: vec![attempt(true); attempts],
                hls: None,
                cert_not_after: None,
                failed_at: None,
            }],
        )
    };
    let given = format!("n{n}/203.0.113.10/80");
    let e = lab.control.handle_report(p, &report(given.clone(), 3), lab.now).unwrap_err();
    assert_eq!(e.field(), "results[0].target", "nothing given yet: {e}");
    lab.control.handle_work(p, lab.now);
    for bad in ["n999/203.0.113.10/80", "garbage"] {
        let e = lab.control.handle_report(p, &report(bad.into(), 3), lab.now).unwrap_err();
        assert_eq!(e.field(), "results[0].target", "{bad}: {e}");
    }
    for n in [0, 11] {
        let e = lab.control.handle_report(p, &report(given.clone(), n), lab.now).unwrap_err();
        assert_eq!(e.field(), "results[0].attempts");
    }
    // A good attempt with an error code, or a failed one without: not a probe's result.
    let mut odd = report(given.clone(), 3);
    odd.results[0].attempts[1].error = Some(vantage_core::result::ErrorCode::Refused);
    let e = lab.control.handle_report(p, &odd, lab.now).unwrap_err();
    assert_eq!(e.field(), "results[0].attempts[1].error", "{e}");
    let mut odd = report(given.clone(), 3);
    odd.results[0].attempts[2] = vantage_core::result::Attempt { error: None, ..attempt(false) };
    assert_eq!(
        lab.control.handle_report(p, &odd, lab.now).unwrap_err().field(),
        "results[0].attempts[2].error"
    );
    // One target under two spellings is that target twice.
    let mut twice = report(given.clone(), 3);
    let mut other = twice.results[0].clone();
    other.target = format!("n0{n}/203.0.113.10/80");
    twice.results.push(other);
    let e = lab.control.handle_report(p, &twice, lab.now).unwrap_err();
    assert_eq!(e.field(), "results[1].target", "{e}");
    assert!(lab.control.addresses().results().is_empty(), "a refused report changes nothing");
    assert_eq!(lab.control.handle_report(p, &report(given, 3), lab.now).unwrap().rows.len(), 1);
}

/// The window register of a new target starts with the check's `initial` good attempts
/// assumed (SPEC §3.4): with window 8 / threshold 3 / initial 2 the target is healthy after
/// its first good probe.
#[test]
fn a_new_target_starts_with_the_checks_initial_good_attempts() {
    let mut lab = Lab::new();
    let r = lab.region("eu");
    let p = lab.prober("fra", r);
    let c = lab.cluster(
        r#"{"name":"video","domain":"cdn.example.net","listeners":[{"port":80,"protocol":"http"}],"check":{"window":8,"threshold":3,"initial":2}}"#,
    );
    let g = lab.group(c, "fra-1", Some(r));
    lab.node(c, g, "edge-1", &[("203.0.113.10", Primary)]);
    let work = lab.control.handle_work(p, lab.now);
    let report = report_at(
        lab.now,
        vec![vantage_core::result::ProbeResult {
            target: work.targets[0].key.clone(),
            attempts: vec![attempt(true)],
            hls: None,
            cert_not_after: None,
            failed_at: None,
        }],
    );
    let rows = lab.control.handle_report(p, &report, lab.now).unwrap().rows;
    let register = rows[0].1.register;
    assert_eq!(register.good_in(8), 3, "2 assumed + 1 good");
    assert!(register.good_in(8) >= 3, "healthy after the first good probe");
    // The next report continues the same register.
    let rows = lab.control.handle_report(p, &report, lab.now).unwrap().rows;
    assert_eq!(rows[0].1.register.good_in(8), 4);
}

/// Reference 000's fallback: while an active node's agent reports capabilities without
/// `probe-health-v1`, every listener of its cluster is probed by TCP connect, and the cluster
/// says why; nodes without an agent, or whose agent went silent, follow the cluster's check.
#[test]
fn an_active_node_without_probe_health_makes_its_clusters_listeners_tcp_probed() {
    use vantage_core::check::Method;
    let mut lab = Lab::new();
    let (p, c, g) = two_listeners(&mut lab);
    let n1 = lab.node(c, g, "edge-1", &[("203.0.113.10", Primary)]);
    let n2 = lab.node(c, g, "edge-2", &[("203.0.113.20", Primary)]);
    let methods = |lab: &mut Lab| {
        let w = lab.control.handle_work(p, lab.now);
        w.targets.iter().map(|t| w.checks[t.check as usize].method()).collect::<Vec<_>>()
    };
    let heartbeat = |lab: &mut Lab, node, caps: &[&str]| {
        let hb = wire::Heartbeat {
            version: "1".into(),
            hostname: "h".into(),
            metrics: None,
            addresses: Vec::new(),
            capabilities: caps.iter().map(|c| (*c).to_owned()).collect(),
            links: Vec::new(),
        };
        lab.control.handle_heartbeat(node, hb, ip("203.0.113.10"), lab.now);
    };
    assert_eq!(methods(&mut lab), [None; 4], "no agent: the cluster's check");
    assert_eq!(lab.control.tcp_fallback(c, lab.now), None);

    heartbeat(&mut lab, n2, &[wire::CAP_PROBE_HEALTH]);
    assert_eq!(methods(&mut lab), [None; 4], "every agent answers the health endpoint");
    heartbeat(&mut lab, n1, &["metrics-v1"]);
    assert_eq!(methods(&mut lab), [Some(Method::Tcp); 4], "every listener of every node");
    assert_eq!(
        lab.control.tcp_fallback(c, lab.now).map(|f| f.reason()).as_deref(),
        Some("listeners are probed by TCP connect: the agent of node edge-1 does not report probe-health-v1")
    );

    // A disabled node is not active.
    let mut rec = (*lab.control.config().nodes[&n1.0].value).clone();
    rec.node.enabled = false;
    lab.replace(n1.0, Object::Node(rec.clone()));
    assert_eq!(methods(&mut lab), [None; 2]);
    rec.node.enabled = true;
    lab.replace(n1.0, Object::Node(rec));
    assert_eq!(methods(&mut lab), [Some(Method::Tcp); 4]);

    // Upgraded, the node reports the capability: back to the check.
    heartbeat(&mut lab, n1, &["metrics-v1", wire::CAP_PROBE_HEALTH]);
    assert_eq!(methods(&mut lab), [None; 4]);

    // An agent that went silent is not active: its last capabilities no longer count.
    heartbeat(&mut lab, n1, &["metrics-v1"]);
    assert_eq!(methods(&mut lab), [Some(Method::Tcp); 4]);
    lab.advance(45);
    heartbeat(&mut lab, n2, &[wire::CAP_PROBE_HEALTH]);
    assert_eq!(methods(&mut lab), [Some(Method::Tcp); 4], "online for 3 × 15 s");
    lab.advance(1);
    assert_eq!(methods(&mut lab), [None; 4]);
}
