//! Named checks for clusters end to end: a real server and prober probe a cluster listener at
//! the path of the check the cluster names (an edge server on 127.0.0.240 records what it was
//! asked), follow the check when it changes, and the API keeps the reference whole.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::json;
use vantage_testkit::EdgeServer;

use crate::ctl_mirrors::ctl;
use crate::harness::ServerProcess;

/// Waits until `edge` was asked for `path`.
async fn asked_for(edge: &EdgeServer, path: &str, limit: Duration) {
    let started = Instant::now();
    while !edge.requests().iter().any(|r| r.target == path) {
        let seen: Vec<String> = edge.requests().into_iter().map(|r| r.target).collect();
        assert!(started.elapsed() < limit, "no request for {path} within {limit:?}; seen {seen:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cluster_listener_naming_a_check_is_probed_at_its_path() {
    let temp = tempfile::tempdir().unwrap();
    let s = ServerProcess::start_in(&temp.path().join("server"), &["--allow-loopback-addresses"]).await;
    s.call(
        Method::PUT,
        "/v1/settings/probes",
        Some(json!({"interval_s": 5, "timeout_ms": 1000, "attempts": 1})),
    )
    .await;
    let region =
        s.create("/v1/regions", json!({"code": "eu-de", "name": "Frankfurt"})).await["id"].as_i64().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let edge = EdgeServer::start(([127, 0, 0, 240], port).into()).await.unwrap();
    let check = s.create("/v1/checks", json!({"name": "light", "path": "/light-health"})).await["id"]
        .as_i64()
        .unwrap();

    // A name that is no check is refused by its field, and nothing is created.
    let listeners = format!(r#"listeners=[{{"port":{port},"protocol":"http"}}]"#);
    let (code, _, err) = ctl(
        &s,
        &["clusters", "create", "name=video", "domain=cdn.test.example", &listeners, "check_name=nope"],
    )
    .await;
    assert_ne!(code, Some(0));
    assert!(err.contains("check_name") && err.contains("nope"), "{err}");
    let (code, out, err) = ctl(
        &s,
        &[
            "--json",
            "clusters",
            "create",
            "name=video",
            "domain=cdn.test.example",
            &listeners,
            "check_name=light",
        ],
    )
    .await;
    assert_eq!(code, Some(0), "{err}");
    let cluster: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(cluster["probed_with"]["source"], "named", "{cluster}");
    assert_eq!(cluster["probed_with"]["check"]["path"], "/light-health", "{cluster}");
    let (code, out, err) = ctl(&s, &["clusters", "list"]).await;
    assert_eq!(code, Some(0), "{err}");
    assert!(out.lines().any(|l| l.contains("video") && l.contains("check light")), "{out}");

    let id = cluster["id"].as_i64().unwrap();
    let g =
        s.create(&format!("/v1/clusters/{id}/groups"), json!({"name": "fra"})).await["id"].as_i64().unwrap();
    let n = s.create("/v1/nodes", json!({"cluster": id, "group": g, "name": "edge-240"})).await["id"]
        .as_i64()
        .unwrap();
    s.call(Method::PUT, &format!("/v1/nodes/{n}/addresses"), Some(json!([{"ip": "127.0.0.240"}]))).await;
    let _prober = s.start_prober("fra-1", region, temp.path()).await;
    asked_for(&edge, "/light-health", Duration::from_secs(30)).await;
    assert!(
        edge.requests().iter().all(|r| r.target == "/light-health"),
        "only the named check's path: {:?}",
        edge.requests()
    );

    // The check changes: the next round asks for its new path.
    let (status, v) =
        s.call(Method::PATCH, &format!("/v1/checks/{check}"), Some(json!({"path": "/light-v2"}))).await;
    assert_eq!(status, 200, "{v}");
    asked_for(&edge, "/light-v2", Duration::from_secs(20)).await;

    // It cannot go while the cluster names it.
    let (status, v) = s.call(Method::DELETE, &format!("/v1/checks/{check}"), None).await;
    assert_eq!(status, 409, "{v}");
    assert!(v["error"]["reason"].as_str().is_some_and(|r| r.contains("cluster video")), "{v}");
}
