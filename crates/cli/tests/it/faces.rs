//! The two faces of `vantage serve` and the fetch policy, end to end: the public listener
//! serves `/go`, `/steer` and `/healthz` and nothing private; `/metrics` needs a token; a
//! prober sent at the control plane's own listener refuses to connect.

use std::time::Duration;

use serde_json::{Value, json};
use vantage_testkit::{EdgeServer, any_loopback};

use crate::harness::ServerProcess;

/// The public face's URL, from what the server wrote at start.
fn public_url(s: &ServerProcess) -> String {
    let info: Value =
        serde_json::from_str(&std::fs::read_to_string(s.dir.join("serve.json")).unwrap()).unwrap();
    info["public"].as_str().expect("a public listener").to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_public_face_serves_doors_and_steering_and_nothing_private() {
    let temp = tempfile::tempdir().unwrap();
    let s = ServerProcess::start_in(&temp.path().join("server"), &["--public-listen", "127.0.0.1:0"]).await;
    let public = public_url(&s);
    let client = reqwest::Client::new();
    let get = |url: String| {
        let client = client.clone();
        let token = s.token.clone();
        async move {
            let r = client.get(url).bearer_auth(token).send().await.unwrap();
            (r.status().as_u16(), r.text().await.unwrap())
        }
    };
    // Nothing private, even with a valid admin token.
    for path in ["/v1/regions", "/v1/openapi.json", "/metrics", "/ui", "/ui/login", "/readyz"] {
        let (status, body) = get(format!("{public}{path}")).await;
        assert_eq!((status, body.contains("no such route")), (404, true), "public {path}: {body}");
    }
    assert_eq!(get(format!("{public}/healthz")).await, (200, "ok\n".to_owned()));
    // Status pages are served there (and only there once it exists).
    let (status, body) = get(format!("{public}/status/nosuch")).await;
    assert_eq!((status, body.contains("no such status page")), (404, true), "{body}");
    let (status, body) = get(format!("{}/status/nosuch", s.url.trim_end_matches('/'))).await;
    assert_eq!((status, body.contains("no such route")), (404, true), "not on the admin listener: {body}");
    // Doors and steering answer there, from their own handlers.
    let (status, body) = get(format!("{public}/steer/nosuch")).await;
    assert_eq!((status, body.as_str()), (404, "no such monitor\n"));
    let (_, body) = get(format!("{public}/go/nosuch/pool/x.deb")).await;
    assert!(!body.contains("no such route"), "{body}");
    // The listener's threads each take connections: doors answer on every one of them and
    // are counted under the router's templates; what is no door's goes to the router.
    for i in 0..8 {
        let fresh = reqwest::Client::new();
        let path = ["/go/nosuch/pool/x.deb", "/go/nosuch/", "/go/nosuch"][i % 3];
        let r = fresh.get(format!("{public}{path}")).send().await.unwrap();
        assert_eq!(r.status(), 404, "{path}");
        assert_eq!(r.headers()["cache-control"], "no-store", "{path}");
        assert_eq!(r.text().await.unwrap(), "no such tenant\n", "{path}");
    }
    let r = client.post(format!("{public}/go/nosuch/x")).send().await.unwrap();
    assert_eq!(r.status(), 405, "a door takes GET only");
    assert_eq!(get(format!("{public}/go//x")).await, (404, "no such tenant\n".to_owned()));
    let (status, body) = get(format!("{public}/go/")).await;
    assert_eq!((status, body.contains("no such route")), (404, true), "no tenant: {body}");
    let metrics = s.metrics().await;
    for (route, n) in [("/go/{tenant}/{*path}", 5), ("/go/{tenant}/", 3), ("/go/{tenant}", 2)] {
        let line = format!(r#"vantage_http_requests_total{{route="{route}",method="GET",status="404"}} {n}"#);
        assert!(metrics.lines().any(|l| l == line), "{line} in {metrics}");
    }
    // The admin listener keeps the rest and no longer serves the public routes.
    assert_eq!(get(format!("{}/v1/regions", s.url)).await.0, 200);
    for path in ["/steer/nosuch", "/go/nosuch/pool/x.deb"] {
        let (status, body) = get(format!("{}{path}", s.url)).await;
        assert_eq!((status, body.contains("no such route")), (404, true), "admin {path}: {body}");
    }
}

/// A monitor whose endpoint is the control plane's own listener: the prober never connects to
/// it (the work's fetch policy refuses it), while an allowed loopback endpoint is probed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probers_refuse_to_fetch_from_the_control_plane_itself() {
    let temp = tempfile::tempdir().unwrap();
    let s = ServerProcess::start_in(
        &temp.path().join("server"),
        &["--allow-loopback-addresses", "--public-listen", "127.0.0.1:0"],
    )
    .await;
    let public = public_url(&s);
    let edge = EdgeServer::start(any_loopback()).await.unwrap();
    // Entered as an address, the control plane's own listener is refused at once.
    let (status, v) = s
        .call(
            reqwest::Method::POST,
            "/v1/webhooks",
            Some(json!({"name": "loop", "url": format!("{public}/healthz")})),
        )
        .await;
    assert_eq!(status, 400, "{v}");
    assert!(v["error"]["reason"].as_str().unwrap().contains("a listener of the control plane itself"), "{v}");
    let ap = s.create("/v1/regions", json!({"code": "ap", "name": "ap"})).await["id"].as_i64().unwrap();
    let eu = s.create("/v1/regions", json!({"code": "eu", "name": "eu"})).await["id"].as_i64().unwrap();
    let check = json!({"method": "http", "interval_s": 1, "timeout_ms": 500});
    let m = s
        .create(
            "/v1/monitors",
            json!({
                "name": "own",
                "check": check,
                "failure_quorum": 1,
                "quorum_window": 1,
                "regions": [
                    {"region": "ap", "weight": 1, "endpoints": [edge.url("/live.m3u8")]},
                    // By name: an address is refused when entered, a name when fetched.
                    {"region": "eu", "weight": 1, "endpoints": [format!("{}/healthz", public.replace("127.0.0.1", "localhost"))]},
                ],
            }),
        )
        .await;
    let verdict = format!("/v1/monitors/{}/verdict", m["id"]);
    let probers =
        [s.start_prober("p-ap", ap, temp.path()).await, s.start_prober("p-eu", eu, temp.path()).await];
    s.wait_for(&verdict, Duration::from_secs(30), |v| {
        let region =
            |code: &str| v["regions"].as_array().unwrap().iter().find(|r| r["region"] == code).cloned();
        region("ap").is_some_and(|r| r["health"] == "healthy")
            && region("eu").is_some_and(|r| r["health"] == "down" && r["reachable"] == false)
    })
    .await;
    assert!(!edge.requests().is_empty(), "the allowed endpoint was probed");
    // Nothing reached the public listener's /healthz: no request was counted there.
    let metrics = s.metrics().await;
    assert!(!metrics.contains(r#"route="/healthz""#), "a prober reached the control plane: {metrics}");
    drop(probers);
}

/// Addresses the fetch policy refuses are refused when they are entered, however they are
/// spelled, naming the field; credentials in a URL never get stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_destinations_are_refused_when_entered() {
    let s = ServerProcess::start().await;
    s.create("/v1/regions", json!({"code": "ap", "name": "ap"})).await;
    let monitor = |url: &str| json!({"name": "m", "check": {"method": "http"}, "regions": [{"region": "ap", "weight": 1, "endpoints": [url]}]});
    for (url, says) in [
        ("http://169.254.169.254/latest/meta-data/", "a link-local address"),
        ("http://[fd00:ec2::254]/", "a cloud metadata address"),
        ("http://0x7f.1:8080/", "a loopback address"),
        ("http://2852039166/", "a link-local address"),
        ("http://user:pass@cdn.example.net/live.m3u8", "must not carry a user name or password"),
    ] {
        let (status, v) = s.call(reqwest::Method::POST, "/v1/monitors", Some(monitor(url))).await;
        assert_eq!(
            (status, v["error"]["field"].as_str()),
            (400, Some("regions[0].endpoints[0]")),
            "{url}: {v}"
        );
        let reason = v["error"]["reason"].as_str().unwrap();
        assert!(reason.contains(says) && !reason.contains("user:pass@cdn"), "{url}: {reason}");
    }
    let (status, v) = s
        .call(
            reqwest::Method::POST,
            "/v1/webhooks",
            Some(json!({"name": "ops", "url": "http://127.0.0.1:9/hook"})),
        )
        .await;
    assert_eq!((status, v["error"]["field"].as_str()), (400, Some("url")), "{v}");
    let (_, list) = s.call(reqwest::Method::GET, "/v1/monitors", None).await;
    assert_eq!(list["items"], json!([]), "nothing was stored");
}
