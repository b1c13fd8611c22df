//! Latency steering of a line (SPEC §10a) end to end: two node groups whose edges answer
//! after different delays, with ±10 % noise on every answer; real `vantage probe` processes
//! measure them; the line, configured to answer the slow group first, moves to the fast one
//! after the hold and not before, says why with the figures, stays put under the noise, and
//! moves back when the fast group slows down. `dig`, the revisions, the preview and `ctl`
//! all say the same.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Value, json};
use vantage_testkit::EdgeServer;

use crate::harness::{ServerProcess, dig};

/// The hold: three probe intervals of 5 s (the cluster's TTL, 5 s, is not longer).
const HOLD: Duration = Duration::from_secs(15);

/// The group the line's order puts first, by name, and when its challenger began, if one is
/// under way (from the preview).
async fn order(s: &ServerProcess, cluster: i64) -> (Vec<String>, Value) {
    let (_, p) = s.call(Method::GET, &format!("/v1/clusters/{cluster}/preview"), None).await;
    let line = &p["lines"][0];
    let names: Vec<String> = line["latency"]["groups"]
        .as_array()
        .map(|g| g.iter().map(|x| x["group"].to_string()).collect())
        .unwrap_or_default();
    (names, line.clone())
}

/// Revisions whose reason starts with `Latency:`, newest first.
async fn moves(s: &ServerProcess, cluster: i64) -> Vec<String> {
    let (_, r) = s.call(Method::GET, &format!("/v1/clusters/{cluster}/revisions"), None).await;
    (r["items"].as_array().unwrap().iter())
        .filter_map(|x| x["reason"].as_str())
        .filter(|x| x.starts_with("Latency:"))
        .map(str::to_owned)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_moves_to_the_faster_group_after_the_hold_and_never_on_noise() {
    let s = ServerProcess::start_lab().await;
    let temp = tempfile::tempdir().unwrap();
    let fastest = json!({"interval_s": 5, "timeout_ms": 1000, "attempts": 3,
                         "failing_before_unreachable_s": 5, "answering_before_reachable_s": 5});
    assert_eq!(s.call(Method::PUT, "/v1/settings/probes", Some(fastest)).await.0, 200);
    let eu =
        s.create("/v1/regions", json!({"code": "eu-de", "name": "Frankfurt"})).await["id"].as_i64().unwrap();
    let port = vantage_testkit::free_port().unwrap();
    let (slow, fast) = (
        EdgeServer::start(([127, 0, 0, 230], port).into()).await.unwrap(),
        EdgeServer::start(([127, 0, 0, 231], port).into()).await.unwrap(),
    );
    slow.set_delay(300, 10);
    fast.set_delay(40, 10);
    let listeners = json!([{"port": port, "protocol": "http"}]);
    let cluster = s
        .create(
            "/v1/clusters",
            json!({"name": "video", "domain": "steer.test", "ttl": 5, "listeners": listeners}),
        )
        .await["id"]
        .as_i64()
        .unwrap();
    let mut groups = Vec::new();
    for (name, edge) in [("slow", &slow), ("fast", &fast)] {
        let g = s.create(&format!("/v1/clusters/{cluster}/groups"), json!({"name": name})).await["id"]
            .as_i64()
            .unwrap();
        let node = s.create("/v1/nodes", json!({"cluster": cluster, "group": g, "name": name})).await["id"]
            .as_i64()
            .unwrap();
        let ip = edge.addr().ip();
        let (st, v) =
            s.call(Method::PUT, &format!("/v1/nodes/{node}/addresses"), Some(json!([{"ip": ip}]))).await;
        assert_eq!(st, 200, "{v}");
        groups.push(g);
    }
    let lines = format!("/v1/clusters/{cluster}/lines");
    // Latency steering needs a group to order: refused with the field named.
    let (st, v) = s
        .call(Method::POST, &lines, Some(json!({"name": "all", "group": groups[0], "latency_region": eu})))
        .await;
    assert_eq!((st, &v["error"]["field"]), (400, &json!("latency_region")), "{v}");
    let (st, v) = s
        .call(
            Method::POST,
            &lines,
            Some(json!({"name": "all", "group": groups[0], "backup_groups": [groups[1]], "latency_region": 999})),
        )
        .await;
    assert_eq!((st, &v["error"]["field"]), (400, &json!("latency_region")), "{v}");
    let line = s
        .create(
            &lines,
            json!({"name": "all", "group": groups[0], "backup_groups": [groups[1]], "latency_region": eu}),
        )
        .await;
    assert_eq!(line["latency_region"], eu);
    let (st, v) = s.call(Method::DELETE, &format!("/v1/regions/{eu}"), None).await;
    assert_eq!(st, 409, "a region a line steers by stays: {v}");
    assert!(
        v["error"]["reason"].as_str().unwrap().contains("lines steer by the latency from this region: all"),
        "{v}"
    );

    let _prober = s.start_prober("prober-eu", eu, temp.path()).await;
    let dns = s.dns();
    let started = Instant::now();
    // The configured order first: the slow group answers while the figures come in.
    s.wait_for(&format!("/v1/clusters/{cluster}/dns"), Duration::from_secs(30), |v| {
        v["all"] == json!(["127.0.0.230"])
    })
    .await;
    assert_eq!(dig(dns, "steer.test").await, ["127.0.0.230"]);

    // The challenge begins once both groups are measured; the line moves after the hold.
    let mut challenged: Option<Instant> = None;
    let moved = loop {
        assert!(started.elapsed() < Duration::from_secs(90), "no move: {:?}", order(&s, cluster).await.1);
        let (_, preview) = order(&s, cluster).await;
        let fast_figure = &preview["latency"]["groups"][1];
        if challenged.is_none() && !fast_figure["challenging_since"].is_null() {
            challenged = Some(Instant::now());
        }
        if dig(dns, "steer.test").await == ["127.0.0.231"] {
            break Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    let challenged = challenged.expect("the preview showed the challenge before the move");
    let held = moved - challenged;
    assert!(held >= HOLD - Duration::from_secs(1), "moved {held:?} after the challenge began");
    eprintln!(
        "latency: first answer by the configured order, the move {:.1} s after the start and {:.1} s after the challenge began",
        (moved - started).as_secs_f64(),
        held.as_secs_f64()
    );
    let reasons = moves(&s, cluster).await;
    assert_eq!(reasons.len(), 1, "{reasons:?}");
    assert!(reasons[0].starts_with("Latency: line all by RTT from eu-de: fast "), "{}", reasons[0]);
    assert!(reasons[0].contains(" ms, slow "), "{}", reasons[0]);
    assert!(reasons[0].contains("20 % and 20 ms faster for 15 s"), "{}", reasons[0]);
    assert!(reasons[0].ends_with("line all: 127.0.0.231 in, 127.0.0.230 out"), "{}", reasons[0]);
    let (order_now, preview) = order(&s, cluster).await;
    assert_eq!(order_now, [groups[1].to_string(), groups[0].to_string()], "{preview}");
    let fast_ms = preview["latency"]["groups"][0]["smoothed_ms"].as_f64().unwrap();
    let slow_ms = preview["latency"]["groups"][1]["smoothed_ms"].as_f64().unwrap();
    assert!((30.0..80.0).contains(&fast_ms) && (270.0..400.0).contains(&slow_ms), "{preview}");
    let out = s.ctl(&["rules", "--cluster", "video", "preview"]).await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("line all by RTT from eu-de: fast"), "{text}");

    // Two more rounds of noise: nothing moves.
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(moves(&s, cluster).await.len(), 1);
    assert_eq!(dig(dns, "steer.test").await, ["127.0.0.231"]);

    // The fast group slows down past the slow one: back after the hold.
    fast.set_delay(600, 10);
    let slowed = Instant::now();
    s.wait_for(&format!("/v1/clusters/{cluster}/dns"), Duration::from_secs(60), |v| {
        v["all"] == json!(["127.0.0.230"])
    })
    .await;
    assert!(slowed.elapsed() >= HOLD, "moved back after {:?}", slowed.elapsed());
    eprintln!(
        "latency: back on the other group {:.1} s after the fast one slowed",
        slowed.elapsed().as_secs_f64()
    );
    let reasons = moves(&s, cluster).await;
    assert_eq!(reasons.len(), 2, "{reasons:?}");
    assert!(reasons[0].starts_with("Latency: line all by RTT from eu-de: slow "), "{}", reasons[0]);
    assert_eq!(dig(dns, "steer.test").await, ["127.0.0.230"]);
}
