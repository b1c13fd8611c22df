//! What waits on the control core while its passes run (issue 31's figure): the control plane
//! holds 10,000 nodes × 3 addresses × 2 listeners, 50 probers send their full rounds (60,000
//! results each, in reports of 10,000) through the channel's real routes, an operator reads
//! `GET /v1/nodes` every 100 ms and Prometheus scrapes `/metrics` every second, while the
//! driver runs the passes. Prints each one's p50, p99 and worst, and the passes it ran.
//!
//! `cargo test -p vantage-server --release --lib contention -- --ignored --nocapture`
//!
//! Requests go through the same routers as on the listeners, without the sockets and TLS, so
//! the figures are the server's own time: waiting for the core, parsing, storing.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Method, Request, header};
use tokio::time::Instant;
use tower::ServiceExt;
use vantage_control::Start;
use vantage_control::fixtures::{good_round, large_fleet};
use vantage_core::wire;
use vantage_store::Store;

use crate::app::{Actor, App, Parts};
use crate::owner::Input;
use crate::support::now;

const NODES: u32 = 10_000;
const PROBERS: i64 = 50;
/// How long the load runs.
const RUN: Duration = Duration::from_secs(40);
/// A prober's round (the probe interval of the default settings).
const ROUND: Duration = Duration::from_secs(10);

/// Times of one kind of request, sorted.
fn summary(name: &str, mut times: Vec<Duration>) -> String {
    times.sort();
    let at =
        |q: f64| times.get(((times.len() as f64 - 1.0) * q).round() as usize).copied().unwrap_or_default();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    format!(
        "{name}: {} requests, p50 {:.1} ms, p99 {:.1} ms, worst {:.1} ms",
        times.len(),
        ms(at(0.5)),
        ms(at(0.99)),
        ms(at(1.0))
    )
}

/// Sends `req` through `router` and reads the whole answer; how long it took.
async fn timed(router: &axum::Router, req: Request<Body>) -> Duration {
    let started = Instant::now();
    let resp = router.clone().oneshot(req).await.expect("the router answers");
    let status = resp.status();
    axum::body::to_bytes(resp.into_body(), usize::MAX).await.expect("a body");
    assert!(status.is_success(), "{status}");
    started.elapsed()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a benchmark: cargo test -p vantage-server --release --lib contention -- --ignored --nocapture"]
async fn reports_reads_and_scrapes_while_passes_run() {
    let dir = tempfile::tempdir().expect("a directory");
    let store = Store::open_sqlite(&dir.path().join("vantage.db")).await.expect("a store");
    let ca = crate::ca::Ca::load_or_create(&dir.path().join("ca")).expect("a CA");
    let settings = crate::config::ServeConfig { data_dir: dir.path().into(), ..Default::default() };
    let metrics = Arc::new(crate::metrics::Metrics::new());
    let (app, decided) =
        App::new(Parts { start: Start::default(), store, metrics, settings, ca, replica: None });
    let app = Arc::new(app);
    let fleet = large_fleet(NODES, PROBERS);
    app.apply(fleet.puts, Vec::new(), now()).await.expect("the fleet");
    let (_, token) =
        crate::api::create_admin_token(&app, &Actor::system(), "bench", false).await.expect("a token");

    let (notices, mut notice_rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move { while notice_rx.recv().await.is_some() {} });
    let (saves, writer) = crate::saves::queue();
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let driver = tokio::spawn(crate::driver::run(app.clone(), decided, notices, saves, stopped));
    let writer = tokio::spawn(writer.run(app.store().clone()));

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
        let phase = ROUND.mul_f64(i as f64 / PROBERS as f64);
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
                    times.push(timed(&channel, req).await);
                }
                round += ROUND;
                tokio::time::sleep_until(round).await;
            }
            times
        }));
    }
    let reader = {
        let (api, token) = (api.clone(), token.clone());
        tokio::spawn(async move {
            let mut times = Vec::new();
            while Instant::now() < deadline {
                let req = Request::get("/v1/nodes")
                    .header(header::AUTHORIZATION, format!("Bearer {token}"))
                    .body(Body::empty())
                    .expect("a request");
                times.push(timed(&api, req).await);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            times
        })
    };
    let scraper = tokio::spawn(async move {
        let mut times = Vec::new();
        while Instant::now() < deadline {
            let req = Request::get("/metrics")
                .header(header::AUTHORIZATION, format!("Bearer {token}"))
                .body(Body::empty())
                .expect("a request");
            times.push(timed(&api, req).await);
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        times
    });

    let mut reports = Vec::new();
    for p in probers {
        reports.extend(p.await.expect("a prober"));
    }
    let reads = reader.await.expect("the reader");
    let scrapes = scraper.await.expect("the scraper");
    let passes = app.view().passes - passes_before;
    stop.send_replace(true);
    driver.await.expect("the driver");
    writer.await.expect("the writer");
    println!("{NODES} nodes × 3 addresses × 2 listeners, {PROBERS} probers, {} s", RUN.as_secs());
    println!("{}", summary("report acknowledgement", reports));
    println!("{}", summary("GET /v1/nodes", reads));
    println!("{}", summary("GET /metrics", scrapes));
    println!("passes run meanwhile: {passes}");
}
