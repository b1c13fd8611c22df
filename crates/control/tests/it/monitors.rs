//! Monitors on the virtual clock: endpoints in the work of each region's probers, region
//! windows, the weighted global verdict with its alerts and history, and the steering order.

use vantage_control::config::Object;
use vantage_control::identity::Caller;
use vantage_core::ids::MonitorId;
use vantage_core::monitor::{GlobalVerdict, Monitor, RegionHealth};
use vantage_core::result::{Attempt, ErrorCode, HlsDetail, ProbeResult, Stages};
use vantage_core::wire;

use crate::lab::{Lab, alerts, report_at};

/// Regions jp (60 %), kr (30 %) and sg (10 %) with a prober each, plus eu with no monitor.
fn fleet() -> (Lab, MonitorId, Vec<(&'static str, Caller)>) {
    let mut lab = Lab::new();
    let mut probers = Vec::new();
    for code in ["jp", "kr", "sg", "eu"] {
        let r = lab.region(code);
        probers.push((code, lab.prober(&format!("p-{code}"), r)));
    }
    let m: Monitor = serde_json::from_value(serde_json::json!({
        "name": "live",
        "max_segment_age_s": 20,
        "regions": [
            {"region": "jp", "weight": 60, "endpoints": ["http://127.0.0.1:9001/live.m3u8"], "pathway": "cdn-jp"},
            {"region": "kr", "weight": 30, "endpoints": ["http://127.0.0.1:9002/live.m3u8", "http://127.0.0.1:9003/live.m3u8"]},
            {"region": "sg", "weight": 10, "endpoints": ["http://127.0.0.1:9004/live.m3u8"]},
        ],
    }))
    .unwrap();
    let id = MonitorId(lab.put(Object::Monitor(m)));
    lab.take();
    (lab, id, probers)
}

/// What one HLS attempt found.
#[derive(Clone, Copy)]
enum Seen {
    Fresh,
    Aged(f64),
    Segment404,
}

/// `caller` fetches its work and reports every monitor endpoint once.
fn probe(lab: &mut Lab, caller: Caller, seen: Seen) -> wire::Work {
    let work = lab.control.handle_work(caller, lab.now);
    let results = work
        .endpoints
        .iter()
        .map(|e| {
            let (good, error, age, fetchable) = match seen {
                Seen::Fresh => (true, None, Some(2.0), true),
                Seen::Aged(a) => (true, None, Some(a), true),
                Seen::Segment404 => (false, Some(ErrorCode::Segment), None, false),
            };
            let stages =
                if good { Stages::ALL } else { Stages::CONNECTED.with(Stages::SENT).with(Stages::RECEIVED) };
            ProbeResult {
                target: e.key.clone(),
                attempts: vec![Attempt { stages, rtt_us: 30_000, error }],
                hls: Some(HlsDetail {
                    reachable: true,
                    manifest_valid: true,
                    segment_fetchable: fetchable,
                    segment_age_s: age,
                    ttfb_ms: Some(12.0),
                }),
                cert_not_after: None,
                failed_at: None,
            }
        })
        .collect();
    let report = report_at(lab.now, results);
    lab.control.handle_report(caller, &report, lab.now).unwrap();
    work
}

fn caller(probers: &[(&str, Caller)], region: &str) -> Caller {
    probers.iter().find(|(r, _)| *r == region).unwrap().1
}

fn global(lab: &Lab, id: MonitorId) -> Option<GlobalVerdict> {
    lab.control.monitors().state(id)?.verdict.map(|v| v.verdict.global)
}

#[test]
fn each_regions_probers_get_its_endpoints() {
    let (mut lab, id, probers) = fleet();
    let kr = lab.control.handle_work(caller(&probers, "kr"), lab.now);
    let keys: Vec<&str> = kr.endpoints.iter().map(|e| e.key.as_str()).collect();
    assert_eq!(keys, [format!("v{id}/kr/0"), format!("v{id}/kr/1")]);
    assert_eq!(kr.checks[kr.endpoints[0].check as usize].method(), Some(vantage_core::check::Method::Hls));
    assert!(lab.control.handle_work(caller(&probers, "eu"), lab.now).endpoints.is_empty());
    let other = report_at(
        lab.now,
        vec![ProbeResult {
            target: format!("v{id}/jp/0"),
            attempts: vec![Attempt { stages: Stages::ALL, rtt_us: 1, error: None }],
            hls: None,
            cert_not_after: None,
            failed_at: None,
        }],
    );
    assert!(
        lab.control.handle_report(caller(&probers, "kr"), &other, lab.now).is_err(),
        "jp's endpoint was not given to kr"
    );
}

#[test]
fn stale_weight_over_the_budget_degrades_and_a_small_region_does_not() {
    let (mut lab, id, probers) = fleet();
    for r in ["jp", "kr", "sg"] {
        probe(&mut lab, caller(&probers, r), Seen::Fresh);
    }
    assert_eq!(global(&lab, id), Some(GlobalVerdict::Healthy));
    lab.advance(5);
    probe(&mut lab, caller(&probers, "sg"), Seen::Aged(45.0));
    assert_eq!(global(&lab, id), Some(GlobalVerdict::Healthy), "10 % stale is not above the budget");
    probe(&mut lab, caller(&probers, "kr"), Seen::Aged(45.0));
    assert_eq!(global(&lab, id), Some(GlobalVerdict::Degraded), "stale in kr (30 %)");
    let out = lab.take();
    assert!(alerts(&out).contains(&(format!("monitor_degraded/monitor:{id}"), true)), "{:?}", alerts(&out));
    let s = lab.control.monitors().state(id).unwrap();
    assert_eq!(s.health(&lab.control.config().monitors[&id.0].value, 5, lab.now)[1], RegionHealth::Stale);
}

#[test]
fn one_failing_probe_is_not_down_and_the_quorum_is() {
    let (mut lab, id, probers) = fleet();
    let jp = caller(&probers, "jp");
    probe(&mut lab, jp, Seen::Fresh);
    probe(&mut lab, jp, Seen::Segment404);
    assert_eq!(global(&lab, id), Some(GlobalVerdict::Healthy), "1 of 5 failing (quorum 3)");
    probe(&mut lab, jp, Seen::Segment404);
    probe(&mut lab, jp, Seen::Segment404);
    assert_eq!(global(&lab, id), Some(GlobalVerdict::Down), "jp is 60 % of the audience");
    let out = lab.take();
    let a = alerts(&out);
    assert!(a.contains(&(format!("monitor_down/monitor:{id}"), true)), "{a:?}");
    let book = lab.control.alerts().list().0;
    let down = book.iter().find(|x| x.kind == "monitor_down").unwrap();
    assert_eq!(down.details["severity"], "critical");
    // The steering order puts the down pathway last.
    assert_eq!(
        lab.control.monitors().state(id).unwrap().steering.order.last().map(String::as_str),
        Some("cdn-jp")
    );
    let table = lab.control.steering();
    let by_name = table.find("live").unwrap();
    assert_eq!((by_name.everyone.order.last().map(String::as_str), by_name.ttl_s), (Some("cdn-jp"), 30));
    assert_eq!(table.find(&id.to_string()), Some(by_name), "found by id too");
    for _ in 0..5 {
        probe(&mut lab, jp, Seen::Fresh);
    }
    assert_eq!(global(&lab, id), Some(GlobalVerdict::Healthy));
    assert!(alerts(&lab.take()).contains(&(format!("monitor_down/monitor:{id}"), false)), "healthy resolves");
    let history: Vec<GlobalVerdict> =
        lab.control.monitors().state(id).unwrap().history.iter().map(|h| h.verdict.global).collect();
    assert_eq!(history, [GlobalVerdict::Healthy, GlobalVerdict::Down, GlobalVerdict::Healthy]);
}

#[test]
fn unknown_age_is_not_stale_and_state_survives_a_restart() {
    let (mut lab, id, probers) = fleet();
    let work = lab.control.handle_work(caller(&probers, "sg"), lab.now);
    let report = report_at(
        lab.now,
        vec![ProbeResult {
            target: work.endpoints[0].key.clone(),
            attempts: vec![Attempt { stages: Stages::ALL, rtt_us: 1, error: None }],
            hls: Some(HlsDetail {
                reachable: true,
                manifest_valid: true,
                segment_fetchable: true,
                segment_age_s: None,
                ttfb_ms: None,
            }),
            cert_not_after: None,
            failed_at: None,
        }],
    );
    lab.control.handle_report(caller(&probers, "sg"), &report, lab.now).unwrap();
    assert_eq!(global(&lab, id), Some(GlobalVerdict::Healthy));
    let saved = lab
        .take()
        .into_iter()
        .rev()
        .find_map(|o| match o {
            vantage_control::Output::SaveMonitors(j) => Some(j),
            _ => None,
        })
        .expect("the first verdict is saved at once");
    let restored = vantage_control::monitors::Monitors::restore(Some(&saved));
    assert_eq!(restored.state(id), lab.control.monitors().state(id));
}

#[test]
fn a_region_whose_probers_went_quiet_is_unknown_and_the_verdict_follows() {
    let (mut lab, id, probers) = fleet();
    let jp = caller(&probers, "jp");
    for _ in 0..3 {
        probe(&mut lab, jp, Seen::Segment404);
    }
    assert_eq!(global(&lab, id), Some(GlobalVerdict::Down));
    // kr keeps reporting; jp's prober goes silent: after three intervals (at least 30 s) jp is
    // unknown — neither down nor healthy — and the verdict follows the regions still known.
    for _ in 0..4 {
        lab.advance(10);
        probe(&mut lab, caller(&probers, "kr"), Seen::Fresh);
    }
    lab.advance(5);
    let m = lab.control.config().monitors[&id.0].value.clone();
    assert_eq!(lab.control.monitors().state(id).unwrap().health(&m, 5, lab.now)[0], RegionHealth::Unknown);
    assert_eq!(global(&lab, id), Some(GlobalVerdict::Healthy), "unknown regions count neither way");
    assert!(alerts(&lab.take()).contains(&(format!("monitor_down/monitor:{id}"), false)));
    // When every prober is quiet, nothing is known: the last verdict stands.
    for _ in 0..3 {
        probe(&mut lab, jp, Seen::Segment404);
    }
    assert_eq!(global(&lab, id), Some(GlobalVerdict::Down));
    lab.advance(120);
    assert_eq!(global(&lab, id), Some(GlobalVerdict::Down), "no news is not good news");
}

#[test]
fn one_prober_sending_many_attempts_fills_no_window_alone() {
    let (mut lab, id, probers) = fleet();
    let jp = caller(&probers, "jp");
    let work = lab.control.handle_work(jp, lab.now);
    let bad = Attempt { stages: Stages::CONNECTED, rtt_us: 1, error: Some(ErrorCode::Segment) };
    let good = Attempt { stages: Stages::ALL, rtt_us: 1, error: None };
    let result = |attempts: Vec<Attempt>| ProbeResult {
        target: work.endpoints[0].key.clone(),
        attempts,
        hls: None,
        cert_not_after: None,
        failed_at: None,
    };
    let report = |results| report_at(lab.now, results);
    let twice = report(vec![result(vec![bad]), result(vec![bad])]);
    let e = lab.control.handle_report(jp, &twice, lab.now).unwrap_err();
    assert_eq!(e.field(), "results[1].target", "a target appears once per report");
    let many = report(vec![result(vec![bad; 9].into_iter().chain([good]).collect())]);
    lab.control.handle_report(jp, &many, lab.now).unwrap();
    let s = lab.control.monitors().state(id).unwrap();
    assert_eq!(
        (s.windows["jp"].len(), s.windows["jp"].failures()),
        (1, 0),
        "one probe per result: the last attempt"
    );
}

/// A monitor that learns its weights: sg, 10 % as configured, drew nine requests in ten over
/// the day, so sg down is the monitor down — by its learned weights, which the verdict says;
/// by the configured ones it would only be degraded. The demand is saved with the states.
#[test]
fn learned_weights_decide_a_verdict_and_say_so() {
    let (mut lab, id, probers) = fleet();
    let mut m = Monitor::clone(&lab.control.config().monitors[&id.0].value);
    m.weighting = vantage_core::monitor::Weighting::Learned;
    lab.replace(id.0, Object::Monitor(m));
    let counts = [("sg".to_owned(), 900), ("jp".to_owned(), 50), ("kr".to_owned(), 50), ("eu".to_owned(), 7)];
    lab.control.handle_demand(&counts, lab.now);
    let sg = caller(&probers, "sg");
    probe(&mut lab, sg, Seen::Fresh);
    assert_eq!(global(&lab, id), Some(GlobalVerdict::Healthy));
    for _ in 0..3 {
        probe(&mut lab, sg, Seen::Segment404);
    }
    let state = lab.control.monitors().state(id).unwrap();
    let v = state.verdict.unwrap().verdict;
    assert_eq!(v.global, GlobalVerdict::Down, "{v:?}");
    assert!(v.reasons.by_learned_weights, "the configured weights would say degraded");
    let m = &lab.control.config().monitors[&id.0].value;
    let w = lab.control.monitors().weights(m, lab.now);
    assert_eq!(w.configured, [60.0, 30.0, 10.0]);
    assert_eq!(
        w.learned.as_ref().map(|l| l.iter().map(|x| x.round()).collect::<Vec<_>>()),
        Some(vec![5.0, 5.0, 90.0])
    );
    assert_eq!(w.effective, w.learned.clone().unwrap());
    let mut book = lab.control.monitors().clone();
    book.add_demand(&[("jp".to_owned(), 1)], lab.now);
    let saved = book.take_save(lab.now.plus_secs(10)).expect("new demand is saved within 10 s");
    let back = vantage_control::monitors::Monitors::restore(Some(&saved));
    assert_eq!((back.demand(lab.now)["sg"], back.demand(lab.now)["jp"]), (900, 51), "it survives a restart");
    assert!(back.state(id).is_some());
}

/// `caller` fetches its work and reports every endpoint it is given answering in
/// `ttfb(key)` ms.
fn probe_timed(lab: &mut Lab, caller: Caller, ttfb: impl Fn(&str) -> f64) -> Vec<String> {
    let work = lab.control.handle_work(caller, lab.now);
    let results = (work.endpoints.iter())
        .map(|e| ProbeResult {
            target: e.key.clone(),
            attempts: vec![Attempt { stages: Stages::ALL, rtt_us: 1_000, error: None }],
            hls: Some(HlsDetail {
                reachable: true,
                manifest_valid: true,
                segment_fetchable: true,
                segment_age_s: Some(2.0),
                ttfb_ms: Some(ttfb(&e.key)),
            }),
            cert_not_after: None,
            failed_at: None,
        })
        .collect();
    lab.control.handle_report(caller, &report_at(lab.now, results), lab.now).unwrap();
    work.endpoints.into_iter().map(|e| e.key).collect()
}

/// Steered by the client's region (SPEC §7): each region's probers measure the other region's
/// pathway too, and each region's players get the pathways in the order their own region
/// measures — after the hold, as everyone's order moves — while the verdict and everyone's
/// order still go by each region's own probes. Turned off, the extra probes and orders go.
#[test]
fn each_regions_players_get_the_order_their_region_measures() {
    let mut lab = Lab::new();
    let (eu, us) = (lab.region("eu"), lab.region("us"));
    let (p_eu, p_us) = (lab.prober("p-eu", eu), lab.prober("p-us", us));
    let mut m = serde_json::json!({
        "name": "live",
        "steering_ttl_s": 10,
        "steer_by_client_region": true,
        "regions": [
            {"region": "eu", "weight": 50, "endpoints": ["http://127.0.0.1:9001/live.m3u8"], "pathway": "cdn-eu"},
            {"region": "us", "weight": 50, "endpoints": ["http://127.0.0.1:9002/live.m3u8"], "pathway": "cdn-us"},
        ],
    });
    let id = MonitorId(lab.put(Object::Monitor(serde_json::from_value(m.clone()).unwrap())));
    // Each CDN is near its own region: eu sees cdn-eu at 20 ms and cdn-us at 120; us sees
    // cdn-us at 25 and cdn-eu at 150.
    let eu_sees = |k: &str| if k.contains("/eu/") { 20.0 } else { 120.0 };
    let us_sees = |k: &str| if k.contains("/us/") { 25.0 } else { 150.0 };
    let keys = probe_timed(&mut lab, p_eu, eu_sees);
    assert_eq!(keys, [format!("v{id}/eu/0"), format!("v{id}/us/0@eu")]);
    probe_timed(&mut lab, p_us, us_sees);
    let order = |lab: &Lab, region: Option<&str>| {
        lab.control.steering().find("live").unwrap().for_player(region, None)
    };
    // Everyone's order by each pathway's own region: cdn-eu at 20 ms before cdn-us at 25.
    assert_eq!(order(&lab, None), ["cdn-eu", "cdn-us"]);
    assert_eq!(order(&lab, Some("us")), ["cdn-eu", "cdn-us"], "each region starts from everyone's");
    let state = lab.control.monitors().state(id).unwrap();
    assert_eq!(state.windows["us"].len(), 1, "another region's probes are not in the us window");
    // cdn-us beats cdn-eu for us players by the margin: it leads after three TTLs.
    for _ in 0..3 {
        lab.advance(10);
        probe_timed(&mut lab, p_eu, eu_sees);
        probe_timed(&mut lab, p_us, us_sees);
    }
    assert_eq!(order(&lab, Some("us")), ["cdn-us", "cdn-eu"]);
    assert_eq!(order(&lab, Some("eu")), ["cdn-eu", "cdn-us"]);
    assert_eq!(order(&lab, None), ["cdn-eu", "cdn-us"], "5 ms is no reason to move everyone");
    assert_eq!(order(&lab, Some("ap")), ["cdn-eu", "cdn-us"], "a region the monitor lacks: everyone's");
    assert_eq!(global(&lab, id), Some(GlobalVerdict::Healthy));
    // Health still comes first: cdn-us down puts it last for us players too.
    for _ in 0..3 {
        let work = lab.control.handle_work(p_us, lab.now);
        let results = (work.endpoints.iter().filter(|e| e.key.starts_with(&format!("v{id}/us/0"))))
            .map(|e| ProbeResult {
                target: e.key.clone(),
                attempts: vec![Attempt {
                    stages: Stages::CONNECTED,
                    rtt_us: 0,
                    error: Some(ErrorCode::Refused),
                }],
                hls: None,
                cert_not_after: None,
                failed_at: None,
            })
            .collect();
        lab.control.handle_report(p_us, &report_at(lab.now, results), lab.now).unwrap();
    }
    assert_eq!(order(&lab, Some("us")), ["cdn-eu", "cdn-us"]);
    // Turned off: one order again, no cross probes in the work.
    m["steer_by_client_region"] = false.into();
    lab.replace(id.0, Object::Monitor(serde_json::from_value(m).unwrap()));
    assert_eq!(probe_timed(&mut lab, p_eu, eu_sees), [format!("v{id}/eu/0")]);
    let state = lab.control.monitors().state(id).unwrap();
    assert!(state.by_region.is_empty() && state.seen_from.is_empty(), "{state:?}");
    assert!(lab.control.steering().find("live").unwrap().by_region.is_empty());
}

/// Demand is kept for the regions that exist: a count for a region that is not (deleted while
/// the count was on its way) counts nowhere, and deleting a region takes its day with it.
#[test]
fn demand_follows_the_regions() {
    let (mut lab, _, _) = fleet();
    let af = lab.region("af");
    lab.control.handle_demand(&[("af".to_owned(), 5), ("zz".to_owned(), 3), ("jp".to_owned(), 2)], lab.now);
    let day = |lab: &Lab| lab.control.monitors().demand(lab.now);
    assert_eq!(day(&lab), [("af".to_owned(), 5), ("jp".to_owned(), 2)].into());
    lab.delete(af.0);
    assert_eq!(day(&lab), [("jp".to_owned(), 2)].into());
}

/// Steered by the client's region, a pathway a region's probers cannot reach is last for that
/// region's players at once (health moves without a hold), whatever everyone's order says; a
/// region whose probes of the others are three intervals old gives its players everyone's
/// order again.
#[test]
fn a_pathway_a_region_cannot_reach_is_last_for_its_players() {
    let mut lab = Lab::new();
    let (eu, us) = (lab.region("eu"), lab.region("us"));
    let (p_eu, p_us) = (lab.prober("p-eu", eu), lab.prober("p-us", us));
    let m = serde_json::json!({
        "name": "live",
        "steer_by_client_region": true,
        "regions": [
            {"region": "eu", "weight": 50, "endpoints": ["http://127.0.0.1:9001/live.m3u8"], "pathway": "cdn-eu"},
            {"region": "us", "weight": 50, "endpoints": ["http://127.0.0.1:9002/live.m3u8"], "pathway": "cdn-us"},
        ],
    });
    lab.put(Object::Monitor(serde_json::from_value(m).unwrap()));
    probe_timed(&mut lab, p_eu, |_| 20.0);
    // us reaches its own CDN and not cdn-eu (a route that is down from there).
    let work = lab.control.handle_work(p_us, lab.now);
    let results = (work.endpoints.iter())
        .map(|e| {
            let reached = !e.key.ends_with("@us");
            ProbeResult {
                target: e.key.clone(),
                attempts: vec![if reached {
                    Attempt { stages: Stages::ALL, rtt_us: 1_000, error: None }
                } else {
                    Attempt { stages: Stages::empty(), rtt_us: 0, error: Some(ErrorCode::Timeout) }
                }],
                hls: reached.then_some(HlsDetail {
                    reachable: true,
                    manifest_valid: true,
                    segment_fetchable: true,
                    segment_age_s: Some(2.0),
                    ttfb_ms: Some(30.0),
                }),
                cert_not_after: None,
                failed_at: None,
            }
        })
        .collect();
    lab.control.handle_report(p_us, &report_at(lab.now, results), lab.now).unwrap();
    let order = |lab: &Lab, region: Option<&str>| {
        lab.control.steering().find("live").unwrap().for_player(region, None)
    };
    assert_eq!(order(&lab, None), ["cdn-eu", "cdn-us"], "everyone's: both healthy, cdn-eu faster");
    assert_eq!(order(&lab, Some("us")), ["cdn-us", "cdn-eu"], "us cannot reach cdn-eu");
    assert_eq!(order(&lab, Some("eu")), ["cdn-eu", "cdn-us"]);
    // Three intervals (the built-in check's 5 s) on, with no probe of the others since, each
    // region's players get everyone's order.
    lab.advance(16);
    probe_timed(&mut lab, p_eu, |_| 20.0);
    let steering = lab.control.steering();
    let live = steering.find("live").unwrap();
    assert!(!live.by_region.contains_key("us"), "{:?}", live.by_region);
    assert_eq!(order(&lab, Some("us")), ["cdn-eu", "cdn-us"]);
}
