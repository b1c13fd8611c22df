//! How fast an operator can add nodes to a large fleet through the API (issue 32's figure):
//! with 1,000 and then 10,000 nodes × 3 addresses × 2 listeners, every address verified and
//! published from a full round of 50 probers' results, 200 nodes are created one after the
//! other as `ctl` or the UI does it — `POST /v1/nodes`, then `PUT /v1/nodes/{id}/addresses` —
//! while the driver runs the passes they cause. Prints how many addresses the fleet published,
//! the creations per second, each creation's p50, p99 and worst, and what the database grew by
//! (its files: pages freed and written again do not count; the bytes written are the process's
//! `File system outputs` under `/usr/bin/time -v`).
//!
//! `cargo test -p vantage-server --release --lib creation -- --ignored --nocapture`

use axum::body::Body;
use axum::http::{Method, Request, header};
use tokio::time::Instant;
use vantage_control::fixtures::large_fleet;

use super::{Running, summary, timed};

const PROBERS: i64 = 50;
/// Nodes created at each size.
const CREATED: u32 = 200;

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
        running.record_rounds(&fleet.probers).await;
        let published = running
            .app
            .view()
            .snapshots
            .values()
            .filter_map(|s| s.published.as_ref())
            .map(|p| p.records.all.len())
            .sum::<usize>();
        let api = crate::api::router(running.app.clone());
        let (size_before, passes_before) = (stored(&running.db), running.app.view().passes);
        let started = Instant::now();
        let mut times = Vec::new();
        for i in 0..CREATED {
            let t = Instant::now();
            let node = serde_json::json!({"cluster": 2, "group": 3, "name": format!("new-{i}")});
            let (_, body) = timed(&api, request(Method::POST, "/v1/nodes", &running.token, node)).await;
            let id = serde_json::from_slice::<serde_json::Value>(&body).expect("json")["id"].clone();
            let ip = format!("172.16.{}.{}", i / 200, i % 200 + 1);
            let addresses = serde_json::json!([{"ip": ip, "level": "primary"}]);
            let uri = format!("/v1/nodes/{id}/addresses");
            timed(&api, request(Method::PUT, &uri, &running.token, addresses)).await;
            times.push(t.elapsed());
        }
        let took = started.elapsed();
        let passes = running.app.view().passes - passes_before;
        let grown = stored(&running.db).saturating_sub(size_before);
        let store = running.app.store().clone();
        running.stop().await;
        // What every save of the cluster writes whole (its addresses go one row each, by difference).
        let rest = store.states("cluster:2").await.expect("the states");
        let rest = rest.iter().find(|(k, _)| k == "cluster:2").map_or(0, |(_, v)| v.len());
        println!(
            "{nodes} nodes, {published} addresses published: {CREATED} created in {:.1} s, {:.1} per second; {passes} passes; database grew {} KiB ({:.1} KiB a node)",
            took.as_secs_f64(),
            f64::from(CREATED) / took.as_secs_f64(),
            grown / 1024,
            grown as f64 / 1024.0 / f64::from(CREATED)
        );
        println!("  {}", summary("creation (POST + PUT addresses)", times));
        println!("  the cluster's state saved whole with every save: {:.1} KiB", rest as f64 / 1024.0);
    }
}
