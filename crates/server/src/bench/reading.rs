//! What one long read costs alone (issue 31's reads, without the contention around them): with
//! 10,000 nodes × 3 addresses × 2 listeners, 50 probers' full rounds recorded and a pass run,
//! `GET /v1/nodes` and `/metrics` are read 20 times each, one after the other. Prints each
//! one's p50 and worst, and the size of its answer.
//!
//! `cargo test -p vantage-server --release --lib reading -- --ignored --nocapture`

use axum::body::Body;
use axum::http::{Request, header};
use vantage_control::fixtures::large_fleet;

use super::{Running, summary, timed};

const NODES: u32 = 10_000;
const PROBERS: i64 = 50;
const READS: usize = 20;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a benchmark: cargo test -p vantage-server --release --lib reading -- --ignored --nocapture"]
async fn node_lists_and_scrapes_alone() {
    let fleet = large_fleet(NODES, PROBERS);
    let running = Running::start(fleet.puts).await;
    running.record_rounds(&fleet.probers).await;
    let api = crate::api::router(running.app.clone());
    println!("{NODES} nodes × 3 addresses × 2 listeners, {PROBERS} probers' rounds recorded");
    for uri in ["/v1/nodes", "/metrics"] {
        let mut times = Vec::new();
        let mut size = 0;
        for _ in 0..READS {
            let req = Request::get(uri)
                .header(header::AUTHORIZATION, format!("Bearer {}", running.token))
                .body(Body::empty())
                .expect("a request");
            let (took, body) = timed(&api, req).await;
            times.push(took);
            size = body.len();
        }
        println!("{}, {:.1} MB", summary(&format!("GET {uri}"), times), size as f64 / 1e6);
    }
    running.stop().await;
}
