//! What the prober list says of each prober's reports: its last complete cluster round, and
//! beside it (never in it) its last endpoint checks and its last confirmation.

use vantage_control::config::Object;
use vantage_control::identity::Caller;
use vantage_control::observe::{ProberRuntime, RoundSummary};
use vantage_core::Timestamp;
use vantage_core::address::Level::Primary;
use vantage_core::monitor::Monitor;
use vantage_core::result::ProbeResult;
use vantage_core::wire;

use crate::lab::{CLUSTER, Lab, attempt, report_at};

/// Region `eu` with prober `fra`, region `us` with prober `iad`; two nodes on 203.0.113.10
/// and .20 (port 80) and a monitor with one endpoint in `eu`.
fn fleet(lab: &mut Lab) -> (Caller, Caller) {
    let eu = lab.region("eu");
    let us = lab.region("us");
    let fra = lab.prober("fra", eu);
    let iad = lab.prober("iad", us);
    let c = lab.cluster(CLUSTER);
    let g = lab.group(c, "fra-1", Some(eu));
    lab.node(c, g, "edge-1", &[("203.0.113.10", Primary)]);
    lab.node(c, g, "edge-2", &[("203.0.113.20", Primary)]);
    let m: Monitor = serde_json::from_value(serde_json::json!({
        "name": "live",
        "regions": [{"region": "eu", "weight": 1, "endpoints": ["http://127.0.0.1:9001/live.m3u8"]}],
    }))
    .unwrap();
    lab.put(Object::Monitor(m));
    lab.take();
    (fra, iad)
}

/// `target` probed three times, every attempt `good` or refused.
fn result(target: &str, good: bool) -> ProbeResult {
    ProbeResult {
        target: target.into(),
        attempts: (0..3).map(|_| attempt(good)).collect(),
        hls: None,
        cert_not_after: None,
        failed_at: None,
    }
}

fn report(started_at: Timestamp, results: Vec<ProbeResult>, confirmation: bool) -> wire::Report {
    wire::Report { confirmation, ..report_at(started_at, results) }
}

fn runtime(lab: &Lab, p: Caller) -> &ProberRuntime {
    &lab.control.observations().probers[&p]
}

/// (targets, loss %, mean RTT ms, unreachable) of a summary.
fn figures(s: Option<RoundSummary>) -> Option<(u32, f64, Option<f64>, u32)> {
    s.map(|s| (s.targets, s.loss_pct, s.mean_rtt_ms, s.unreachable))
}

#[test]
fn the_last_round_stays_the_cluster_round_beside_endpoint_checks_and_confirmations() {
    let mut lab = Lab::new();
    let (fra, iad) = fleet(&mut lab);
    // Both probers' rounds: both nodes answer.
    let work = lab.round(fra, &[]);
    lab.round(iad, &[]);
    let round = Some((2, 0.0, Some(12.0), 0));
    assert_eq!(figures(runtime(&lab, fra).last_round), round);
    assert_eq!(runtime(&lab, fra).last_round.unwrap().started_at, lab.now);

    // The monitor's endpoint, probed beside the rounds, is refused.
    lab.advance(1);
    let endpoint = work.endpoints[0].key.clone();
    lab.control.handle_report(fra, &report(lab.now, vec![result(&endpoint, false)], false), lab.now).unwrap();
    let p = runtime(&lab, fra);
    assert_eq!(figures(p.last_endpoint_checks), Some((1, 100.0, None, 1)));
    assert_eq!(p.last_endpoint_checks.unwrap().started_at, lab.now);
    assert_eq!(figures(p.last_round), round, "an endpoint report is no round");
    assert_eq!(p.last_confirmation, None);

    // iad's round sees edge-1 refuse: fra is asked to confirm, and its confirmation agrees.
    lab.advance(1);
    lab.round(iad, &["203.0.113.10"]);
    let asked = lab.control.take_rechecks(fra).targets;
    assert_eq!(asked.len(), 1, "{asked:?}");
    let confirmation = report(lab.now, vec![result(&asked[0], false)], true);
    lab.control.handle_report(fra, &confirmation, lab.now).unwrap();
    let p = runtime(&lab, fra);
    assert_eq!(figures(p.last_confirmation), Some((1, 100.0, None, 1)));
    assert_eq!(figures(p.last_round), round, "a confirmation is no round");
    assert_eq!(figures(p.last_endpoint_checks), Some((1, 100.0, None, 1)));
    // iad's own last round is the one that saw the refusal.
    assert_eq!(figures(runtime(&lab, iad).last_round), Some((2, 50.0, Some(12.0), 1)));

    // fra's next round replaces its last round, and only it.
    lab.advance(5);
    lab.round(fra, &["203.0.113.10"]);
    let p = runtime(&lab, fra);
    assert_eq!(figures(p.last_round), Some((2, 50.0, Some(12.0), 1)));
    assert_eq!(p.last_round.unwrap().started_at, lab.now);
    assert_eq!(figures(p.last_confirmation), Some((1, 100.0, None, 1)));
}

/// A round sends one report per `MAX_RESULTS` targets: it shows once every target is in, and
/// a round cut short (or the confirmation of an agent that does not say so) never shows.
#[test]
fn the_last_round_shows_once_its_reports_carry_every_target_of_the_work() {
    let mut lab = Lab::new();
    let (fra, _) = fleet(&mut lab);
    let work = lab.round(fra, &[]);
    let first = runtime(&lab, fra).last_round;
    let (a, b) = (&work.targets[0].key, &work.targets[1].key);

    lab.advance(5);
    lab.control.handle_work(fra, lab.now);
    let started = lab.now;
    lab.control.handle_report(fra, &report(started, vec![result(a, false)], false), lab.now).unwrap();
    assert_eq!(runtime(&lab, fra).last_round, first, "half a round is not shown");
    lab.control.handle_report(fra, &report(started, vec![result(b, true)], false), lab.now).unwrap();
    let last = runtime(&lab, fra).last_round.unwrap();
    assert_eq!((last.started_at, figures(Some(last))), (started, Some((2, 50.0, Some(12.0), 1))));

    // One target alone, unmarked (an older agent's confirmation, or a round whose other report
    // was lost), and then the next round: the last round goes from one whole round to the next.
    lab.advance(1);
    lab.control.handle_report(fra, &report(lab.now, vec![result(b, false)], false), lab.now).unwrap();
    assert_eq!(runtime(&lab, fra).last_round, Some(last));
    lab.advance(4);
    lab.round(fra, &[]);
    assert_eq!(figures(runtime(&lab, fra).last_round), Some((2, 0.0, Some(12.0), 0)));
}
