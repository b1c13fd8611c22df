//! Rounds: attempts in a row, results in target order, many targets at once.

use std::time::{Duration, Instant};

use vantage_core::check::CheckInput;
use vantage_core::result::ErrorCode;
use vantage_probe::{Method, ProbeTarget, RoundConfig, run_round};
use vantage_testkit::{Behavior, EdgeOptions, EdgeServer, any_loopback, closed_port, hls_paths};

use crate::{check, target};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_target_gets_its_attempts_and_one_result_in_order() {
    let good = EdgeServer::start(any_loopback()).await.unwrap();
    let bad = EdgeServer::start_with(any_loopback(), EdgeOptions::new(Behavior::Health).with_status(500))
        .await
        .unwrap();
    let hls = EdgeServer::start_with(any_loopback(), EdgeOptions::new(Behavior::Hls)).await.unwrap();
    let hls_check = check(CheckInput { method: Some(Method::Hls), ..Default::default() });
    let mut targets = vec![
        target(&good, Method::Http),
        ProbeTarget::new("closed", closed_port().unwrap(), Method::Tcp, check(CheckInput::default())),
        target(&bad, Method::Http),
        ProbeTarget::from_url("hls", &hls.url(hls_paths::FRESH), hls_check).await.unwrap(),
    ];
    targets[0].key = "good".into();
    targets[2].key = "bad".into();
    let cfg = RoundConfig {
        attempts: 3,
        timeout: Duration::from_secs(2),
        concurrency: 2,
        ..RoundConfig::default()
    };
    let results = run_round(&targets, &cfg).await;
    let keys: Vec<&str> = results.iter().map(|r| r.target.as_str()).collect();
    assert_eq!(keys, ["good", "closed", "bad", "hls"]);
    for r in &results {
        assert_eq!(r.sent(), 3, "{r:?}");
    }
    assert_eq!(results[0].lost(), 0);
    assert!(results[0].median_rtt_ms().is_some());
    assert_eq!(results[1].lost(), 3);
    assert_eq!(results[1].last_error(), Some(ErrorCode::Refused));
    assert_eq!(results[2].last_error(), Some(ErrorCode::Status));
    assert_eq!(good.requests().len(), 3, "attempts in a row, one request each");
    assert_eq!(results[3].lost(), 0);
    assert!(results[3].hls.unwrap().segment_fetchable);
    assert!(results[0].hls.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_targets_run_at_once_so_the_round_takes_attempts_times_timeout() {
    let silent =
        EdgeServer::start_with(any_loopback(), EdgeOptions::new(Behavior::Silent).with_backlog(1024))
            .await
            .unwrap();
    let targets: Vec<ProbeTarget> = (0..200).map(|_| target(&silent, Method::Http)).collect();
    let timeout = Duration::from_millis(250);
    let cfg = RoundConfig { attempts: 2, timeout, concurrency: 1000, ..RoundConfig::default() };
    let started = Instant::now();
    let results = run_round(&targets, &cfg).await;
    let took = started.elapsed();
    assert!(results.iter().all(|r| r.lost() == 2));
    assert!(results.iter().all(|r| r.last_error() == Some(ErrorCode::Timeout)));
    assert!(took >= timeout * 2, "{took:?}");
    assert!(took < timeout * 2 + Duration::from_millis(700), "{took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_concurrency_bound_holds() {
    let silent = EdgeServer::start_with(any_loopback(), EdgeOptions::new(Behavior::Silent)).await.unwrap();
    let targets: Vec<ProbeTarget> = (0..4).map(|_| target(&silent, Method::Tcp)).collect();
    // `tcp` against a listener that accepts is good at once; use http so each attempt waits.
    let targets: Vec<ProbeTarget> = targets
        .into_iter()
        .map(|mut t| {
            t.method = Method::Http;
            t
        })
        .collect();
    let timeout = Duration::from_millis(200);
    let cfg = RoundConfig { attempts: 1, timeout, concurrency: 2, ..RoundConfig::default() };
    let started = Instant::now();
    let results = run_round(&targets, &cfg).await;
    let took = started.elapsed();
    assert_eq!(results.len(), 4);
    assert!(took >= timeout * 2, "two waves of two: {took:?}");
    assert!(took < timeout * 4, "{took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endpoint_target_is_timed_by_its_check() {
    let silent = EdgeServer::start_with(any_loopback(), EdgeOptions::new(Behavior::Silent)).await.unwrap();
    let c = check(CheckInput { timeout_ms: Some(200), ..Default::default() });
    let t = ProbeTarget::from_url("e", &silent.url("/"), c).await.unwrap();
    let cfg = RoundConfig {
        attempts: 2,
        timeout: Duration::from_secs(10),
        concurrency: 10,
        ..RoundConfig::default()
    };
    let started = Instant::now();
    let results = run_round(&[t], &cfg).await;
    assert_eq!(results[0].last_error(), Some(ErrorCode::Timeout));
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn an_empty_round_is_empty() {
    assert!(run_round(&[], &RoundConfig::default()).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_round_of_silent_targets_opens_up_beyond_the_initial_lane() {
    let limit = vantage_probe::raise_nofile_limit();
    assert!(limit.max_concurrency() >= 1500, "{limit:?}");
    let mut servers = Vec::new();
    for _ in 0..3 {
        servers
            .push(EdgeServer::start_with(any_loopback(), EdgeOptions::new(Behavior::Silent)).await.unwrap());
    }
    // 600 targets: 256 at once would take three timeouts; the round opens up after the
    // first quiet tick and takes one.
    let targets: Vec<ProbeTarget> =
        (0..600).map(|i| target(&servers[i % servers.len()], Method::Http)).collect();
    let timeout = Duration::from_millis(400);
    let cfg = RoundConfig { attempts: 1, timeout, ..RoundConfig::default() };
    let started = Instant::now();
    let results = run_round(&targets, &cfg).await;
    let took = started.elapsed();
    assert!(results.iter().all(|r| r.last_error() == Some(ErrorCode::Timeout)));
    assert!(took >= timeout, "{took:?}");
    assert!(took < timeout * 2 + Duration::from_millis(200), "{took:?}");
}
