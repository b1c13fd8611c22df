//! Endpoint targets in the prober loop, against the stand-in channel and real edge servers
//! on loopback: probed on their own check's interval beside the cluster rounds, one attempt
//! per result, at once on a check run, and no more once the work drops them.

use std::net::IpAddr;
use std::time::Duration;

use vantage_agent::{ProberOptions, run_prober};
use vantage_core::check::{Check, CheckInput, Listener, Protocol};
use vantage_core::result::{ErrorCode, ProbeResult, Stages};
use vantage_core::settings::{ProbeSettings, ProbeSettingsInput};
use vantage_core::wire::{self, EndpointTarget, Report, Role, Target, Work};
use vantage_testkit::{EdgeServer, any_loopback};

use crate::options;
use crate::prober::Running;
use crate::support::{ChannelServer, eventually};

/// Work with rounds every `round_s` over one cluster target at `cluster_port` (none without
/// it), and `endpoints` timed by check 1: every `interval_s`, 1 s timeout.
fn work(round_s: u32, cluster_port: Option<u16>, interval_s: u32, endpoints: Vec<EndpointTarget>) -> Work {
    let settings = ProbeSettings::parse(ProbeSettingsInput {
        interval_s: round_s,
        timeout_ms: 500,
        attempts: 2,
        ..Default::default()
    })
    .unwrap();
    let ip: IpAddr = "127.0.0.1".parse().unwrap();
    let endpoint_check =
        CheckInput { interval_s: Some(interval_s), timeout_ms: Some(1000), ..Default::default() };
    Work {
        id: 42,
        settings,
        checks: vec![Check::parse(CheckInput::default()).unwrap(), Check::parse(endpoint_check).unwrap()],
        targets: cluster_port
            .map(|port| Target {
                key: "cluster".into(),
                ip,
                listener: Listener { port, protocol: Protocol::Http, proxy_protocol: false },
                check: 0,
            })
            .into_iter()
            .collect(),
        endpoints,
        check_now: false,
        renew_in_s: 86_400,
        phase_ms: None,
        fetch: vantage_core::fetch::FetchPolicy::any_address(),
    }
}

fn endpoint(key: &str, url: &str) -> EndpointTarget {
    EndpointTarget {
        key: key.into(),
        url: url.into(),
        address: None,
        check: 1,
        any_status: false,
        allowed_hosts: Vec::new(),
    }
}

fn reports(server: &ChannelServer) -> Vec<Report> {
    server.log.reports.lock().unwrap().iter().map(|(_, r)| r.clone()).collect()
}

/// Every result reported for `key`, in report order.
fn results_for(server: &ChannelServer, key: &str) -> Vec<ProbeResult> {
    reports(server).into_iter().flat_map(|r| r.results).filter(|r| r.target == key).collect()
}

fn prober(server: &ChannelServer, dir: &std::path::Path) -> Running {
    let opts = ProberOptions {
        concurrency: 64,
        source: "127.0.0.2".parse().unwrap(),
        ..ProberOptions::new(options(dir, server.url(), "vtp_good", server.ca.fingerprint()))
    };
    Running::start(move |stop| run_prober(opts, stop))
}

#[tokio::test]
async fn endpoints_are_probed_on_their_own_interval_beside_the_rounds() {
    vantage_testkit::init_tracing();
    let edge = EdgeServer::start(any_loopback()).await.unwrap();
    let server = ChannelServer::start(Role::Prober, "vtp_good").await;
    let pinned = EndpointTarget {
        address: Some(edge.addr()),
        ..endpoint("pinned", "http://mirror.vantage.test/pinned?x=1")
    };
    server.script().work = work(
        30,
        Some(edge.addr().port()),
        1,
        vec![endpoint("mirror", &edge.url("/page")), pinned, endpoint("bad", "not a url")],
    );
    let dir = tempfile::tempdir().unwrap();
    let running = prober(&server, dir.path());

    eventually(10, "three results of the endpoint", || results_for(&server, "mirror").len() >= 3).await;
    assert_eq!(server.requests_to(wire::PROBER_WORK).len(), 1, "one round so far: its interval is 30 s");
    let all = reports(&server);
    let (cluster, endpoints): (Vec<&Report>, Vec<&Report>) =
        all.iter().partition(|r| r.results.iter().any(|r| r.target == "cluster"));
    assert_eq!(cluster.len(), 1, "{all:?}");
    assert_eq!(cluster[0].results.len(), 1, "the round reports its targets only");
    assert_eq!(cluster[0].results[0].sent(), 2);
    // The endpoints came due together: one report each time, with all three.
    assert!(endpoints.len() >= 3, "{endpoints:?}");
    for r in &endpoints {
        let mut keys: Vec<&str> = r.results.iter().map(|r| r.target.as_str()).collect();
        keys.sort_unstable();
        assert_eq!(keys, ["bad", "mirror", "pinned"], "{r:?}");
        assert!(r.results.iter().all(|r| r.sent() == 1), "one attempt per result: {r:?}");
        assert!(r.started_at <= r.finished_at);
    }
    for pair in endpoints.windows(2) {
        let gap = pair[1].started_at.millis_since(pair[0].started_at);
        assert!((900..3000).contains(&gap), "about a second apart: {gap} ms");
    }
    for key in ["mirror", "pinned"] {
        let results = results_for(&server, key);
        assert!(results.iter().all(|r| r.lost() == 0), "{key}: {results:?}");
    }
    let bad = &results_for(&server, "bad")[0].attempts[0];
    assert_eq!((bad.error, bad.stages), (Some(ErrorCode::Unreachable), Stages::empty()), "{bad:?}");

    // The pinned endpoint connected to its address and asked for its URL's host and path.
    let seen = edge.requests();
    let pinned = seen.iter().find(|s| s.target == "/pinned?x=1").expect("the pinned endpoint was asked");
    assert_eq!(pinned.header("host"), Some("mirror.vantage.test"));
    assert!(seen.iter().any(|s| s.target == "/page"));
    // Endpoint attempts leave from the source address too.
    assert!(edge.peers().iter().all(|p| p.ip().to_string() == "127.0.0.2"), "{:?}", edge.peers());

    // Stopping the prober stops its endpoints.
    running.stop().await.unwrap();
    let asked = edge.requests().len();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(edge.requests().len(), asked, "no attempt after the prober stopped");
}

#[tokio::test]
async fn a_check_run_probes_every_endpoint_at_once() {
    let edge = EdgeServer::start(any_loopback()).await.unwrap();
    let server = ChannelServer::start(Role::Prober, "vtp_good").await;
    // Rounds every 5 s, endpoints every hour: only a check run probes them again soon.
    let endpoints = vec![endpoint("a", &edge.url("/a")), endpoint("b", &edge.url("/b"))];
    server.script().work = work(5, None, 3600, endpoints);
    let dir = tempfile::tempdir().unwrap();
    let running = prober(&server, dir.path());

    eventually(10, "the first endpoint results", || !results_for(&server, "b").is_empty()).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!((results_for(&server, "a").len(), results_for(&server, "b").len()), (1, 1));
    server.script().work.check_now = true;
    eventually(10, "results of the check run", || {
        results_for(&server, "a").len() == 2 && results_for(&server, "b").len() == 2
    })
    .await;
    let arrived = std::time::Instant::now();
    let asks = server.requests_to(wire::PROBER_WORK);
    assert_eq!(asks.len(), 2, "the check run came with the second work answer");
    assert!(arrived - asks[1].at < Duration::from_secs(1), "probed at once, not in an hour");
    let last = reports(&server).pop().unwrap();
    assert_eq!(last.results.len(), 2, "both in one report: {last:?}");
    running.stop().await.unwrap();
}

#[tokio::test]
async fn a_removed_endpoint_is_no_longer_probed_or_reported() {
    let edge = EdgeServer::start(any_loopback()).await.unwrap();
    let server = ChannelServer::start(Role::Prober, "vtp_good").await;
    let (keep, gone) = (endpoint("keep", &edge.url("/keep")), endpoint("gone", &edge.url("/gone")));
    server.script().work = work(5, None, 1, vec![keep.clone(), gone]);
    let dir = tempfile::tempdir().unwrap();
    let running = prober(&server, dir.path());

    eventually(10, "two results of each", || results_for(&server, "gone").len() >= 2).await;
    server.script().work.endpoints = vec![keep];
    eventually(10, "the next work answer", || server.requests_to(wire::PROBER_WORK).len() >= 2).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (reported, asked) = (results_for(&server, "gone").len(), gone_requests(&edge));
    let kept = results_for(&server, "keep").len();
    eventually(10, "two more results of the endpoint kept", || {
        results_for(&server, "keep").len() >= kept + 2
    })
    .await;
    assert_eq!(results_for(&server, "gone").len(), reported, "no result after its removal");
    assert_eq!(gone_requests(&edge), asked, "no attempt either");
    running.stop().await.unwrap();
}

fn gone_requests(edge: &EdgeServer) -> usize {
    edge.requests().iter().filter(|s| s.target == "/gone").count()
}
