//! Named checks for clusters and monitors (reference 002): one check object named by any number
//! of clusters and monitors, `default` where one has no check and names none, the reference
//! kept whole (no unknown name, no delete or rename under its users), and the work following a
//! changed check.

use vantage_control::config::{CheckSource, NamedCheck, Object};
use vantage_control::identity::Caller;
use vantage_control::invariants::{Invariants, Refusal};
use vantage_core::address::Level;
use vantage_core::check::{Check, CheckInput, Method};
use vantage_core::ids::{ClusterId, MonitorId};
use vantage_core::model::Cluster;
use vantage_core::monitor::Monitor;
use vantage_core::wire;

use crate::lab::Lab;

fn check(path: &str) -> Check {
    Check::parse(CheckInput { path: Some(path.into()), ..CheckInput::default() }).unwrap()
}

fn named(name: &str, check: Check) -> Object {
    Object::Check(NamedCheck { name: name.into(), check })
}

fn cluster_json(extra: &str) -> String {
    format!(
        r#"{{"name":"video","domain":"cdn.example.net","listeners":[{{"port":80,"protocol":"http"}}]{extra}}}"#
    )
}

/// Region `eu`, prober `fra`, and cluster `video` (with `extra` fields) whose node `edge-1` is on
/// 203.0.113.10.
fn fleet(lab: &mut Lab, extra: &str) -> (Caller, ClusterId) {
    let r = lab.region("eu");
    let p = lab.prober("fra", r);
    let c = lab.cluster(&cluster_json(extra));
    let g = lab.group(c, "fra-1", Some(r));
    lab.node(c, g, "edge-1", &[("203.0.113.10", Level::Primary)]);
    (p, c)
}

/// The path every cluster target of `work` is probed at (they share one check here).
fn probed_path(work: &wire::Work) -> String {
    let paths: Vec<&str> = work.targets.iter().map(|t| work.checks[t.check as usize].path()).collect();
    assert!(!paths.is_empty(), "no targets");
    assert!(paths.iter().all(|p| *p == paths[0]), "{paths:?}");
    paths[0].to_owned()
}

#[test]
fn a_cluster_naming_a_check_is_probed_with_it_and_a_change_reissues_the_work() {
    let mut lab = Lab::new();
    let light = lab.put(named("light", check("/light")));
    let (p, c) = fleet(&mut lab, r#","check_name":"light""#);
    assert_eq!(probed_path(&lab.control.handle_work(p, lab.now)), "/light");
    let probed = lab.control.config().cluster_check(&lab.control.config().clusters[&c.0].value);
    assert_eq!((probed.source, probed.name.as_deref()), (CheckSource::Named, Some("light")));
    // The check changes: the next work answer carries it, for the same targets.
    let before = lab.control.handle_work(p, lab.now);
    lab.replace(light, named("light", check("/light-v2")));
    let after = lab.control.handle_work(p, lab.now);
    assert_eq!(probed_path(&after), "/light-v2");
    let keys = |w: &wire::Work| w.targets.iter().map(|t| t.key.clone()).collect::<Vec<_>>();
    assert_eq!(keys(&before), keys(&after), "the targets (and their windows) stay");
    // Naming a check and having one of its own is refused where the cluster is read.
    let both =
        serde_json::from_str::<Cluster>(&cluster_json(r#","check_name":"light","check":{"path":"/x"}"#));
    assert!(both.unwrap_err().to_string().contains("check_name"));
}

#[test]
fn default_applies_to_a_cluster_without_a_check_and_its_own_check_wins() {
    let mut lab = Lab::new();
    let (p, c) = fleet(&mut lab, "");
    assert_eq!(probed_path(&lab.control.handle_work(p, lab.now)), "/.vantage/health", "built-in");
    let default = lab.put(named("default", check("/default-health")));
    assert_eq!(probed_path(&lab.control.handle_work(p, lab.now)), "/default-health");
    let config = lab.control.config();
    assert_eq!(config.cluster_check(&config.clusters[&c.0].value).source, CheckSource::Default);
    // A cluster with a check of its own keeps it.
    let own: Cluster = serde_json::from_str(&cluster_json(r#","check":{"path":"/own"}"#)).unwrap();
    lab.replace(c.0, Object::Cluster(own));
    assert_eq!(probed_path(&lab.control.handle_work(p, lab.now)), "/own");
    // `default` may go: the clusters relying on it fall back to the built-in check.
    let plain: Cluster = serde_json::from_str(&cluster_json("")).unwrap();
    lab.replace(c.0, Object::Cluster(plain));
    assert_eq!(NamedCheck::check_delete(default, &lab.control.config()), Ok(Vec::new()));
    lab.delete(default);
    assert_eq!(probed_path(&lab.control.handle_work(p, lab.now)), "/.vantage/health");
}

#[test]
fn a_check_a_cluster_or_monitor_names_is_kept_whole() {
    let mut lab = Lab::new();
    let light = lab.put(named("light", check("/light")));
    let (_, c) = fleet(&mut lab, r#","check_name":"light""#);
    let config = lab.control.config();
    assert_eq!(
        NamedCheck::check_delete(light, &config),
        Err(Refusal::Conflict(
            "this check is still named by cluster video; point it at another check first".into()
        ))
    );
    let renamed = NamedCheck { name: "heavy".into(), check: check("/light") };
    assert!(matches!(renamed.check(light, &config), Err(Refusal::Invalid { field, .. }) if field == "name"));
    // A name that is no check is refused by the field that names it.
    let unknown: Cluster = serde_json::from_str(&cluster_json(r#","check_name":"nope""#)).unwrap();
    assert_eq!(unknown.check(c.0, &config), Err(Refusal::invalid("check_name", "no check named \"nope\"")));
    // A monitor naming it too: both are named in the refusal.
    lab.put(Object::Monitor(monitor(r#""check_name":"light","#)));
    assert_eq!(
        NamedCheck::check_delete(light, &lab.control.config()),
        Err(Refusal::Conflict(
            "this check is still named by cluster video, monitor live; point them at another check first"
                .into()
        ))
    );
}

fn monitor(extra: &str) -> Monitor {
    serde_json::from_str(&format!(
        r#"{{"name":"live",{extra}"regions":[{{"region":"eu","weight":1,"endpoints":["http://127.0.0.1:9001/live.m3u8"]}}]}}"#
    ))
    .unwrap()
}

#[test]
fn a_monitor_is_probed_with_the_check_it_names_else_default_else_hls() {
    let mut lab = Lab::new();
    let r = lab.region("eu");
    let p = lab.prober("fra", r);
    let id = MonitorId(lab.put(Object::Monitor(monitor(""))));
    let method = |lab: &mut Lab| {
        let w = lab.control.handle_work(p, lab.now);
        w.checks[w.endpoints[0].check as usize].clone()
    };
    assert_eq!(method(&mut lab).method(), Some(Method::Hls), "built-in");
    let http = |path: &str| {
        Check::parse(CheckInput {
            method: Some(Method::Http),
            path: Some(path.into()),
            ..CheckInput::default()
        })
        .unwrap()
    };
    // A monitor probes content: `default` cannot become `tcp` while a monitor without a check
    // is probed with it.
    let default = lab.put(named("default", http("/d")));
    assert_eq!(method(&mut lab).method(), Some(Method::Http), "default");
    let tcp = Check::parse(CheckInput { method: Some(Method::Tcp), ..CheckInput::default() }).unwrap();
    let default_tcp = NamedCheck { name: "default".into(), check: tcp.clone() };
    assert!(
        matches!(default_tcp.check(default, &lab.control.config()), Err(Refusal::Invalid { field, reason })
        if field == "method" && reason.contains("monitor live"))
    );
    let slow = lab
        .put(named("slow", Check::parse(CheckInput { interval_s: Some(20), ..http("/s").into() }).unwrap()));
    lab.replace(id.0, Object::Monitor(monitor(r#""check_name":"slow","#)));
    assert_eq!(method(&mut lab).interval_s(), 20, "named");
    let config = lab.control.config();
    assert_eq!(config.monitor_check(&config.monitors[&id.0].value).source, CheckSource::Named);
    // Nor can the check it names, and it cannot name a `tcp` check.
    let to_tcp = NamedCheck { name: "slow".into(), check: tcp.clone() };
    assert!(matches!(to_tcp.check(slow, &config), Err(Refusal::Invalid { field, reason })
        if field == "method" && reason.contains("monitor live")));
    lab.put(named("plain-tcp", tcp));
    let names_tcp = monitor(r#""check_name":"plain-tcp","#);
    assert!(
        matches!(names_tcp.check(id.0, &lab.control.config()), Err(Refusal::Invalid { field, .. }) if field == "check_name")
    );
}

#[test]
fn stored_clusters_and_monitors_keep_their_checks_and_references() {
    // As an earlier version stored them: every cluster and monitor with a check of its own.
    let own = serde_json::to_value(check("/health")).unwrap();
    let old_cluster = serde_json::json!({
        "name": "video", "domain": "cdn.example.net", "aliases": [], "dns_mode": "automatic", "ttl": 30,
        "listeners": [{"port": 80, "protocol": "http", "proxy_protocol": false}], "check": own,
        "mass_removal_pct": 50, "agent_required": false, "required_links": [], "publishers": [],
    });
    let Object::Cluster(c) = Object::parse("cluster", &old_cluster.to_string()).unwrap() else { panic!() };
    assert_eq!((c.check, c.check_name), (Some(check("/health")), None));
    let hls = serde_json::to_value(vantage_core::monitor::builtin_check()).unwrap();
    let old_monitor = serde_json::json!({
        "name": "live", "check": hls, "failure_quorum": 3, "quorum_window": 5, "max_segment_age_s": 30,
        "down_weight_budget_pct": 15.0, "stale_weight_budget_pct": 10.0, "steering_ttl_s": 30,
        "regions": [{"region": "eu", "weight": 1.0, "endpoints": ["http://127.0.0.1:9001/live.m3u8"]}],
    });
    let Object::Monitor(m) = Object::parse("monitor", &old_monitor.to_string()).unwrap() else { panic!() };
    assert_eq!((m.check, m.check_name), (Some(vantage_core::monitor::builtin_check()), None));
    // A reference and an absent check survive the store as they were entered.
    for o in [
        Object::Cluster(serde_json::from_str(&cluster_json(r#","check_name":"light""#)).unwrap()),
        Object::Cluster(serde_json::from_str(&cluster_json("")).unwrap()),
        Object::Monitor(monitor(r#""check_name":"light","#)),
        Object::Monitor(monitor("")),
    ] {
        let body = o.body().unwrap();
        assert_eq!(Object::parse(o.kind(), &body).unwrap(), o, "{body}");
    }
}
