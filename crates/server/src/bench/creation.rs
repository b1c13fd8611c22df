//! How fast an operator can add nodes to a large fleet through the API (issue 32's figure):
//! with 1,000 and then 10,000 nodes × 3 addresses × 2 listeners, every address verified and
//! published by the results of 50 probers' full rounds (recorded again, untimed, before every
//! 40 creations, so that they stay fresh and the probers online), 200 nodes are created one
//! after the other as `ctl` or the UI does it — `POST /v1/nodes`, then
//! `PUT /v1/nodes/{id}/addresses` — while the driver runs the passes they cause. Prints how
//! many addresses the fleet published (before the first creation and after the last), the
//! creations per second, each creation's p50, p99 and worst, what the database files grew by
//! during the creations (pages freed and written again do not count), and what each save of
//! the cluster's state writes whole.
//!
//! `cargo test -p vantage-server --release --lib creation -- --ignored --nocapture`

use std::time::Duration;

use axum::body::Body;
use axum::http::{Method, Request, header};
use tokio::time::Instant;
use vantage_control::fixtures::large_fleet;

use super::{Running, summary, timed};

const PROBERS: i64 = 50;
/// Nodes created at each size.
const CREATED: u32 = 200;
/// Nodes created between two rounds of the probers: at 10,000 nodes, a few seconds' worth.
const BATCH: u32 = 40;

/// A request of the API with the admin token and a JSON body.
fn request(method: Method, uri: &str, token: &str, body: serde_json::Value) -> Request<Body> {
    Request::builder()
        .method(method)
        .uri(uri)
        .header(header::AUTHORIZATION, format!("Bearer {token}"))
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body.to_string()))
        .expect("a request")
}

/// The database's size with its write-ahead log.
fn stored(db: &std::path::Path) -> u64 {
    let size = |p: std::path::PathBuf| std::fs::metadata(p).map_or(0, |m| m.len());
    size(db.to_path_buf()) + size(db.with_extension("db-wal"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a benchmark: cargo test -p vantage-server --release --lib creation -- --ignored --nocapture"]
async fn nodes_created_one_by_one_in_a_large_fleet() {
    for nodes in [1_000u32, 10_000] {
        let fleet = large_fleet(nodes, PROBERS);
        let running = Running::start(fleet.puts).await;
        let api = crate::api::router(running.app.clone());
        let published = || {
            let view = running.app.view();
            view.snapshots
                .values()
                .filter_map(|s| s.published.as_ref())
                .map(|p| p.records.all.len())
                .sum::<usize>()
        };
        let (mut took, mut passes, mut grown, mut times) = (Duration::ZERO, 0, 0, Vec::new());
        let mut published_first = None;
        for i in 0..CREATED {
            // The probers report again before each batch (untimed), so that their results
            // stay fresh and they stay online through the run.
            if i % BATCH == 0 {
                running.record_rounds(&fleet.probers).await;
                published_first.get_or_insert_with(published);
            }
            let (size_before, passes_before) = (stored(&running.db), running.app.view().passes);
            let t = Instant::now();
            let node = serde_json::json!({"cluster": 2, "group": 3, "name": format!("new-{i}")});
            let (_, body) = timed(&api, request(Method::POST, "/v1/nodes", &running.token, node)).await;
            let id = serde_json::from_slice::<serde_json::Value>(&body).expect("json")["id"].clone();
            let ip = format!("172.16.{}.{}", i / 200, i % 200 + 1);
            let addresses = serde_json::json!([{"ip": ip, "level": "primary"}]);
            let uri = format!("/v1/nodes/{id}/addresses");
            timed(&api, request(Method::PUT, &uri, &running.token, addresses)).await;
            times.push(t.elapsed());
            took += t.elapsed();
            passes += running.app.view().passes - passes_before;
            grown += stored(&running.db).saturating_sub(size_before);
        }
        let published = (published_first.unwrap_or_default(), published());
        let store = running.app.store().clone();
        running.stop().await;
        // What every save of the cluster writes whole (its addresses go one row each, by difference).
        let rest = store.states("cluster:2").await.expect("the states");
        let rest = rest.iter().find(|(k, _)| k == "cluster:2").map_or(0, |(_, v)| v.len());
        println!(
            "{nodes} nodes, {} addresses published (at the end {}): {CREATED} created in {:.1} s, {:.1} per second; {passes} passes; database grew {} KiB ({:.1} KiB a node)",
            published.0,
            published.1,
            took.as_secs_f64(),
            f64::from(CREATED) / took.as_secs_f64(),
            grown / 1024,
            grown as f64 / 1024.0 / f64::from(CREATED)
        );
        println!("  {}", summary("creation (POST + PUT addresses)", times));
        println!("  the cluster's state saved whole with every save: {:.1} KiB", rest as f64 / 1024.0);
    }
}
