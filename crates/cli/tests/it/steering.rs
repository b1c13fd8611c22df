//! Content steering as players on other origins meet it: HLS and DASH-IF manifests, CORS
//! with its preflight, and caching for the TTL.

use reqwest::Method;
use serde_json::{Value, json};

use crate::harness::ServerProcess;

/// A monitor `live` with pathways `cdn-a` and `cdn-b` (no prober: both unknown, in name order).
async fn monitor(s: &ServerProcess) {
    for code in ["ap", "eu"] {
        s.create("/v1/regions", json!({"code": code, "name": code})).await;
    }
    s.create(
        "/v1/monitors",
        json!({"name": "live", "steering_ttl_s": 10, "regions": [
            {"region": "ap", "weight": 1, "endpoints": ["http://127.0.0.1:9/a.m3u8"], "pathway": "cdn-a"},
            {"region": "eu", "weight": 1, "endpoints": ["http://127.0.0.1:9/b.m3u8"], "pathway": "cdn-b"},
        ]}),
    )
    .await;
}

fn header<'a>(r: &'a reqwest::Response, name: &str) -> Option<&'a str> {
    r.headers().get(name).and_then(|v| v.to_str().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hls_and_dash_players_on_other_origins_read_the_steering_manifest() {
    let s = ServerProcess::start_lab().await;
    monitor(&s).await;
    let client = reqwest::Client::new();
    let origin = "https://player.example";

    let r = client
        .get(format!("{}/steer/live?session=1&_HLS_pathway=cdn-b&_HLS_throughput=9", s.url))
        .header("Origin", origin)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(header(&r, "access-control-allow-origin"), Some("*"));
    assert_eq!(header(&r, "cache-control"), Some("max-age=10"));
    let hls: Value = r.json().await.unwrap();
    assert_eq!(
        hls,
        json!({"VERSION": 1, "TTL": 10, "RELOAD-URI": "/steer/live?session=1", "PATHWAY-PRIORITY": ["cdn-a", "cdn-b"]})
    );

    let r = client
        .get(format!("{}/steer/live/dash?_DASH_pathway=cdn-b&session=1", s.url))
        .header("Origin", origin)
        .send()
        .await
        .unwrap();
    assert_eq!(header(&r, "access-control-allow-origin"), Some("*"));
    let dash: Value = r.json().await.unwrap();
    assert_eq!(
        dash,
        json!({"VERSION": 1, "TTL": 10, "RELOAD-URI": "/steer/live/dash?session=1",
            "PATHWAY-PRIORITY": ["cdn-a", "cdn-b"], "SERVICE-LOCATION-PRIORITY": ["cdn-a", "cdn-b"]})
    );

    // The browser asks first when the player sends a header of its own.
    for path in ["/steer/live", "/steer/live/dash"] {
        let r = client
            .request(Method::OPTIONS, format!("{}{path}", s.url))
            .header("Origin", origin)
            .header("Access-Control-Request-Method", "GET")
            .header("Access-Control-Request-Headers", "x-session")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 204, "{path}");
        assert_eq!(header(&r, "access-control-allow-origin"), Some("*"));
        assert_eq!(header(&r, "access-control-allow-methods"), Some("GET, OPTIONS"));
        assert_eq!(header(&r, "access-control-allow-headers"), Some("x-session"));
        assert_eq!(header(&r, "access-control-max-age"), Some("86400"));
    }
    let r = client.get(format!("{}/steer/nosuch/dash", s.url)).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_listed_origins_may_read_it_from_a_page() {
    let temp = tempfile::tempdir().unwrap();
    let s = ServerProcess::start_in(
        &temp.path().join("server"),
        &["--allow-loopback-addresses", "--steering-origins", "https://player.example"],
    )
    .await;
    monitor(&s).await;
    let client = reqwest::Client::new();
    let get =
        |origin: &'static str| client.get(format!("{}/steer/live", s.url)).header("Origin", origin).send();
    let r = get("https://player.example").await.unwrap();
    assert_eq!(header(&r, "access-control-allow-origin"), Some("https://player.example"));
    assert_eq!(header(&r, "vary"), Some("Origin"));
    let r = get("https://elsewhere.example").await.unwrap();
    assert_eq!((r.status().as_u16(), header(&r, "access-control-allow-origin")), (200, None));
    let r = client
        .request(Method::OPTIONS, format!("{}/steer/live", s.url))
        .header("Origin", "https://elsewhere.example")
        .header("Access-Control-Request-Method", "GET")
        .send()
        .await
        .unwrap();
    assert_eq!((r.status().as_u16(), header(&r, "access-control-allow-methods")), (204, None));
}
