//! What waits on the control core while its passes run (issue 31's figure): the control plane
//! holds 10,000 nodes × 3 addresses × 2 listeners, 50 probers send their full rounds (60,000
//! results each, in reports of 10,000) through the channel's real routes, an operator reads
//! `GET /v1/nodes` every 100 ms and Prometheus scrapes `/metrics` every second, while the
//! driver runs the passes. Prints each one's p50, p99 and worst, and the passes it ran.
//!
//! `cargo test -p vantage-server --release --lib contention -- --ignored --nocapture`
//! (`VANTAGE_BENCH_PROBERS=10` for fewer probers: a load the machine can carry, where what an
//! acknowledgement waits for shows rather than the queue of a saturated machine).
//!
//! Requests go through the same routers as on the listeners, without the sockets and TLS, so
//! the figures are the server's own time: waiting for the core, parsing, storing.

use std::time::Duration;

use axum::body::Body;
use axum::http::{Method, Request, header};
use tokio::time::Instant;
use vantage_control::fixtures::{good_round, large_fleet};
use vantage_core::wire;

use super::{Running, summary, timed};
use crate::owner::Input;
use crate::support::now;

const NODES: u32 = 10_000;
/// Probers unless `VANTAGE_BENCH_PROBERS` says otherwise.
const PROBERS: i64 = 50;
/// How long the load runs.
const RUN: Duration = Duration::from_secs(40);
/// A prober's round (the probe interval of the default settings).
const ROUND: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a benchmark: cargo test -p vantage-server --release --lib contention -- --ignored --nocapture"]
async fn reports_reads_and_scrapes_while_passes_run() {
    let counted: i64 =
        std::env::var("VANTAGE_BENCH_PROBERS").ok().and_then(|p| p.parse().ok()).unwrap_or(PROBERS);
    let fleet = large_fleet(NODES, counted);
    let running = Running::start(fleet.puts).await;
    let (app, token) = (running.app.clone(), running.token.clone());

    // Each prober's round as it sends it, made once.
    let mut rounds: Vec<(String, Vec<Vec<u8>>)> = Vec::new();
    for (i, caller) in fleet.probers.iter().enumerate() {
        let work = app.owner().ask(|reply| Input::Work { caller: *caller, reply }).await.expect("work");
        let bodies = good_round(&work, now()).iter().map(|r| serde_json::to_vec(r).expect("json")).collect();
        rounds.push((format!("fp-{i}"), bodies));
    }
    let limits = crate::listen::ListenerLimits::of(4096).channel;
    let channel = crate::channel::router(app.clone(), limits);
    let api = crate::api::router(app.clone());
    let passes_before = app.view().passes;
    let deadline = Instant::now() + RUN;

    // The probers, phased apart over the round as the server spreads them.
    let mut probers = Vec::new();
    for (i, (fingerprint, bodies)) in rounds.into_iter().enumerate() {
        let channel = channel.clone();
        let phase = ROUND.mul_f64(i as f64 / counted as f64);
        probers.push(tokio::spawn(async move {
            let mut times = Vec::new();
            let mut round = Instant::now() + phase;
            tokio::time::sleep_until(round).await;
            while Instant::now() < deadline {
                for body in &bodies {
                    let mut req = Request::builder()
                        .method(Method::POST)
                        .uri(wire::PROBER_REPORT)
                        .header(header::CONTENT_TYPE, "application/json")
                        .body(Body::from(body.clone()))
                        .expect("a request");
                    crate::channel::as_peer(&mut req, &fingerprint);
                    times.push(timed(&channel, req).await.0);
                }
                round += ROUND;
                tokio::time::sleep_until(round).await;
            }
            times
        }));
    }
    let reader =
        tokio::spawn(reading(api.clone(), token.clone(), "/v1/nodes", Duration::from_millis(100), deadline));
    let scraper = tokio::spawn(reading(api, token, "/metrics", Duration::from_secs(1), deadline));

    let mut reports = Vec::new();
    for p in probers {
        reports.extend(p.await.expect("a prober"));
    }
    let reads = reader.await.expect("the reader");
    let scrapes = scraper.await.expect("the scraper");
    let passes = app.view().passes - passes_before;
    running.stop().await;
    println!("{NODES} nodes × 3 addresses × 2 listeners, {counted} probers, {} s", RUN.as_secs());
    println!("{}", summary("report acknowledgement", reports));
    println!("{}", summary("GET /v1/nodes", reads));
    println!("{}", summary("GET /metrics", scrapes));
    println!("passes run meanwhile: {passes}");
}

/// `GET uri` with the admin token every `every` until `deadline`; how long each took.
async fn reading(
    api: axum::Router,
    token: String,
    uri: &'static str,
    every: Duration,
    deadline: Instant,
) -> Vec<Duration> {
    let mut times = Vec::new();
    while Instant::now() < deadline {
        let req = Request::get(uri)
            .header(header::AUTHORIZATION, format!("Bearer {token}"))
            .body(Body::empty())
            .expect("a request");
        times.push(timed(&api, req).await.0);
        tokio::time::sleep(every).await;
    }
    times
}
