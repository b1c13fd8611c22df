//! A newly saved address serves only once the probers have seen it answer: a typo never
//! reaches DNS, a new edge does at its first round, and without any prober the save warns.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::json;

use crate::harness::{LabFleet, ServerProcess, all_answers, dig};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_typo_never_reaches_dns_and_a_new_edge_does_once_the_probers_see_it() {
    let LabFleet { s, port, nodes, edges: _edges, probers: _probers, dns_path: dns, temp: _temp, .. } =
        LabFleet::start("cdn.verify.example", 70).await;
    let before = ["127.0.0.70", "127.0.0.72", "127.0.0.73"];
    assert_eq!(dig(s.dns(), "cdn.verify.example").await, before);

    // A typo: nothing listens on 127.0.0.79. Probers check the cluster, so the save has no
    // warning, and the address waits.
    let path = format!("/v1/nodes/{}/addresses", nodes[1]);
    let (status, saved) =
        s.call(Method::PUT, &path, Some(json!([{"ip": "127.0.0.72"}, {"ip": "127.0.0.79"}]))).await;
    assert_eq!(status, 200, "{saved}");
    assert!(saved.get("warnings").is_none(), "{saved}");
    let node = format!("/v1/nodes/{}", nodes[1]);
    s.wait_for(&node, Duration::from_secs(5), |v| {
        v["addresses"][1]["condition"] == "unverified" && v["addresses"][1]["in_use"] == false
    })
    .await;
    // Over several rounds (1 s each) DNS never answers it.
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(5) {
        assert_eq!(dig(s.dns(), "cdn.verify.example").await, before, "the typo reached DNS");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (_, events) =
        s.call(Method::GET, &format!("/v1/events?node={}&kind=address_unverified", nodes[1]), None).await;
    assert!(
        events["items"].as_array().unwrap().iter().any(|e| e["summary"]
            == "127.0.0.79 of edge-1 is new: out of DNS until a strict majority of the probers sees it answer"),
        "{events}"
    );

    // A new edge that answers: in DNS once the probers have seen it.
    let _edge = vantage_testkit::EdgeServer::start(([127, 0, 0, 78], port).into()).await.unwrap();
    let path = format!("/v1/nodes/{}/addresses", nodes[2]);
    let saved_at = Instant::now();
    let (status, saved) =
        s.call(Method::PUT, &path, Some(json!([{"ip": "127.0.0.73"}, {"ip": "127.0.0.78"}]))).await;
    assert_eq!(status, 200, "{saved}");
    let node2 = format!("/v1/nodes/{}", nodes[2]);
    let started = Instant::now();
    while !all_answers(&s.call(Method::GET, &dns, None).await.1).contains(&"127.0.0.78".to_owned()) {
        let (_, v) = s.call(Method::GET, &node2, None).await;
        assert!(started.elapsed() < Duration::from_secs(20), "not in DNS: {}", v["addresses"]);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    println!("verify: a new edge reached DNS {:.1} s after it was saved", saved_at.elapsed().as_secs_f64());
    // Events are stored by a task of their own: the list holds it a moment after DNS.
    let verified = format!("/v1/events?node={}&kind=address_verified", nodes[2]);
    s.wait_for(&verified, Duration::from_secs(5), |v| {
        v["items"].as_array().is_some_and(|e| {
            e.iter().any(|e| {
                e["summary"].as_str().is_some_and(|t| t.starts_with("127.0.0.78 of edge-2 is verified: "))
            })
        })
    })
    .await;
}

#[tokio::test]
async fn without_a_prober_a_new_address_serves_and_the_save_says_so() {
    let s = ServerProcess::start().await;
    let cluster = s
        .create(
            "/v1/clusters",
            json!({"name": "solo", "domain": "solo.example", "listeners": [{"port": 80, "protocol": "http"}]}),
        )
        .await["id"]
        .as_i64()
        .unwrap();
    let group = s.create(&format!("/v1/clusters/{cluster}/groups"), json!({"name": "pop"})).await["id"]
        .as_i64()
        .unwrap();
    let node = s.create("/v1/nodes", json!({"cluster": cluster, "group": group, "name": "edge"})).await["id"]
        .as_i64()
        .unwrap();
    let path = format!("/v1/nodes/{node}/addresses");
    let (status, saved) = s.call(Method::PUT, &path, Some(json!([{"ip": "203.0.113.5"}]))).await;
    assert_eq!(status, 200, "{saved}");
    assert_eq!(
        saved["warnings"],
        json!(["no prober checks this node yet: 203.0.113.5 serves before any prober has seen it answer"]),
        "{saved}"
    );
    s.wait_for(&format!("/v1/clusters/{cluster}/dns"), Duration::from_secs(5), |v| {
        all_answers(v) == ["203.0.113.5"]
    })
    .await;
    // Trusted: no warning, whoever checks.
    let (_, saved) = s
        .call(
            Method::PUT,
            &path,
            Some(json!([{"ip": "203.0.113.5"}, {"ip": "203.0.113.6", "trusted": true}])),
        )
        .await;
    assert!(saved.get("warnings").is_none(), "{saved}");
    assert_eq!(saved["configured"][1]["trusted"], true, "{saved}");
}
