//! Public status pages (SPEC §10): a cluster's page says what its users may know — its state,
//! 90 days of bars, an outage while it lasts, its planned maintenance — and nothing private
//! (no address, no node or prober name, no cause) unless the page opts in; with a badge.

use std::time::Duration;

use reqwest::Method;
use serde_json::json;

use crate::harness::LabFleet;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_clusters_status_page_shows_its_state_and_nothing_private() {
    let LabFleet { s, cluster, nodes, dns_path, edges, probers: _probers, temp: _temp, .. } =
        LabFleet::start("cdn.status.example", 240).await;
    let base = s.url.trim_end_matches('/').to_owned();
    let (st, v) = s
        .call(
            Method::POST,
            "/v1/status-pages",
            Some(json!({"slug": "Video!", "title": "Video", "clusters": [cluster]})),
        )
        .await;
    assert_eq!((st, v["error"]["field"].as_str()), (400, Some("slug")), "{v}");
    let (st, v) = s
        .call(
            Method::POST,
            "/v1/status-pages",
            Some(json!({"slug": "video", "title": "Video", "clusters": [999_999]})),
        )
        .await;
    assert_eq!((st, v["error"]["field"].as_str()), (400, Some("clusters[0]")), "{v}");
    let out = s
        .ctl(&["status-pages", "create", "slug=video", "title=Video delivery", r#"clusters=["video"]"#])
        .await;
    assert!(out.status.success(), "{out:?}");
    // A window planned for a node, in the operator's words: not on the page without details.
    let ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis();
    let in_an_hour = vantage_core::Timestamp::from_millis(i64::try_from(ms).unwrap() + 3_600_000).to_string();
    let window = json!({"name": "edge-0 disk swap", "starts_at": in_an_hour, "duration_s": 3600,
                        "nodes": [nodes[0]], "comment": "rack 4, pop-1"});
    let (st, v) = s.call(Method::POST, "/v1/maintenance", Some(window)).await;
    assert_eq!(st, 201, "{v}");

    let client = reqwest::Client::new();
    let get = |path: String| {
        let client = client.clone();
        async move {
            let r = client.get(path).send().await.unwrap();
            let ct =
                r.headers().get("content-type").map(|v| v.to_str().unwrap().to_owned()).unwrap_or_default();
            (r.status().as_u16(), ct, r.text().await.unwrap())
        }
    };
    // Without a token: a public page.
    let json_path = format!("{base}/status/video/status.json");
    // The page's JSON once it reads `state` (polled, within 30 s).
    let reads = |state: &'static str| {
        let (get, path) = (&get, json_path.clone());
        async move {
            let wanted = format!("\"state\":\"{state}\"");
            let poll = async {
                loop {
                    let (_, _, body) = get(path.clone()).await;
                    if body.contains(&wanted) {
                        return body;
                    }
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            };
            tokio::time::timeout(Duration::from_secs(30), poll)
                .await
                .unwrap_or_else(|_| panic!("{state} within 30 s"))
        }
    };
    let up = reads("operational").await;
    assert!(up.contains("\"name\":\"video\"") && up.contains("Scheduled maintenance"), "{up}");
    let (st, ct, html) = get(format!("{base}/status/video")).await;
    assert_eq!(st, 200);
    assert!(
        ct.starts_with("text/html") && html.contains("Video delivery") && html.contains("operational"),
        "{html}"
    );
    for private in ["127.0.0.24", "edge-", "prober-", "pop-1"] {
        assert!(!html.contains(private) && !up.contains(private), "{private} leaked: {html}");
    }
    let (st, ct, svg) = get(format!("{base}/status/video/badge.svg")).await;
    assert_eq!((st, ct.as_str()), (200, "image/svg+xml"), "{svg}");
    assert!(svg.starts_with("<svg") && svg.contains("Video delivery: operational"), "{svg}");
    let (st, _, body) = get(format!("{base}/status/nosuch")).await;
    assert_eq!(st, 404, "{body}");

    // Every edge stops answering: an outage, said without its cause; with details, its cause.
    for e in &edges {
        e.set_status(500);
    }
    s.wait_for(&dns_path, Duration::from_secs(30), |v| v["lines"][0]["held"].is_object()).await;
    let down = reads("outage").await;
    assert!(down.contains("\"incidents\":[{\"since\"") && !down.contains("cause"), "{down}");
    let (_, list) = s.call(Method::GET, "/v1/status-pages", None).await;
    let id = list["items"][0]["id"].as_i64().unwrap();
    assert_eq!(list["items"][0]["path"], "/status/video", "{list}");
    s.call(Method::PATCH, &format!("/v1/status-pages/{id}"), Some(json!({"details": true}))).await;
    let (_, _, detailed) = get(json_path.clone()).await;
    assert!(detailed.contains("\"cause\":") && detailed.contains("edge-0 disk swap"), "{detailed}");
    let (_, _, svg) = get(format!("{base}/status/video/badge.svg")).await;
    assert!(svg.contains("Video delivery: outage") && svg.contains("#d64545"), "{svg}");
}
