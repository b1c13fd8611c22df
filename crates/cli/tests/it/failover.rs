//! The whole loop with real processes: one server, three probers in three regions, four edge
//! HTTP servers on loopback addresses, and a node that moves to its backup address when its
//! primary's edge stops — and back when it returns. One prober alone changes nothing.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};
use vantage_testkit::EdgeServer;

use crate::harness::{ServerProcess, dig};

/// A free TCP port on 127.0.0.1 (the edges share it on their own addresses).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn all(v: &Value) -> Vec<String> {
    v["all"]
        .as_array()
        .map(|a| a.iter().map(|x| x.as_str().unwrap_or_default().to_owned()).collect())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn primary_down_moves_to_backup_within_11s_and_back_and_one_prober_changes_nothing() {
    let temp = tempfile::tempdir().unwrap();
    let s = ServerProcess::start_in(&temp.path().join("server"), &["--allow-loopback-addresses"]).await;
    // The fastest allowed settings.
    let (st, v) = s
        .call(
            Method::PUT,
            "/v1/settings/probes",
            Some(json!({"interval_s": 5, "timeout_ms": 1000, "attempts": 3,
                        "failing_before_unreachable_s": 5, "answering_before_reachable_s": 5})),
        )
        .await;
    assert_eq!(st, 200, "{v}");
    let mut regions = Vec::new();
    for (code, name) in [("ap-sg", "Singapore"), ("eu-de", "Frankfurt"), ("us-va", "Virginia")] {
        regions
            .push(s.create("/v1/regions", json!({"code": code, "name": name})).await["id"].as_i64().unwrap());
    }

    let port = free_port();
    let ips: Vec<IpAddr> = (10..14).map(|i| IpAddr::from([127, 0, 0, i])).collect();
    let mut edges = Vec::new();
    for ip in &ips {
        edges.push(EdgeServer::start(SocketAddr::new(*ip, port)).await.unwrap());
    }
    let cluster = s
        .create("/v1/clusters", json!({"name": "video", "domain": "cdn.test.example", "listeners": [{"port": port, "protocol": "http"}]}))
        .await["id"]
        .as_i64()
        .unwrap();
    let group = s.create(&format!("/v1/clusters/{cluster}/groups"), json!({"name": "pop-1"})).await["id"]
        .as_i64()
        .unwrap();
    s.create(&format!("/v1/clusters/{cluster}/lines"), json!({"name": "default", "group": group})).await;
    let addresses = [
        json!([{"ip": "127.0.0.10", "level": "primary"}, {"ip": "127.0.0.11", "level": "backup1"}]),
        json!([{"ip": "127.0.0.12"}]),
        json!([{"ip": "127.0.0.13"}]),
    ];
    for (i, a) in addresses.into_iter().enumerate() {
        let node = s
            .create("/v1/nodes", json!({"cluster": cluster, "group": group, "name": format!("edge-{i}")}))
            .await;
        let (st, v) = s.call(Method::PUT, &format!("/v1/nodes/{}/addresses", node["id"]), Some(a)).await;
        assert_eq!(st, 200, "{v}");
    }

    let mut probers = Vec::new();
    for (i, r) in regions.iter().enumerate() {
        probers.push(s.start_prober(&format!("prober-{i}"), *r, temp.path()).await);
    }
    s.wait_for("/v1/probers", Duration::from_secs(30), |v| {
        v["items"].as_array().is_some_and(|p| {
            p.len() == 3 && p.iter().all(|x| x["status"] == "online" && !x["last_round"].is_null())
        })
    })
    .await;
    let dns = format!("/v1/clusters/{cluster}/dns");
    s.wait_for(&dns, Duration::from_secs(30), |v| all(v) == ["127.0.0.10", "127.0.0.12", "127.0.0.13"]).await;
    let (_, probers_list) = s.call(Method::GET, "/v1/probers", None).await;
    assert_eq!(probers_list["items"][0]["targets"], 4, "every address × listener");

    // The primary's edge stops: connections are refused.
    edges[0].stop().await;
    let failover = s
        .wait_for(&dns, Duration::from_secs(30), |v| {
            let a = all(v);
            a.contains(&"127.0.0.11".to_owned()) && !a.contains(&"127.0.0.10".to_owned())
        })
        .await;
    println!("failover: primary stopped → backup published in {:.1} s", failover.as_secs_f64());
    assert!(failover <= Duration::from_secs(11), "took {failover:?}");
    // The built-in DNS answers the new records.
    assert_eq!(dig(s.dns(), "cdn.test.example").await, ["127.0.0.11", "127.0.0.12", "127.0.0.13"]);
    let (_, revs) = s.call(Method::GET, &format!("/v1/clusters/{cluster}/revisions"), None).await;
    assert_eq!(revs["items"][0]["reason"], "Node health changed");
    let (_, node) = s.call(Method::GET, "/v1/nodes?x=1", None).await;
    let edge0 = &node["items"].as_array().unwrap()[0];
    assert_eq!(edge0["addresses"][0]["reachability"], "unreachable", "{edge0}");
    assert_eq!(edge0["addresses"][1]["in_use"], true, "{edge0}");
    let (_, results) = s.call(Method::GET, &format!("/v1/nodes/{}/results", edge0["id"]), None).await;
    let refused = results["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["address"] == "127.0.0.10" && r["error"] == "refused")
        .count();
    assert_eq!(refused, 3, "each prober saw the refusal: {results}");

    let (_, alerts) = s.call(Method::GET, "/v1/alerts", None).await;
    assert!(
        alerts["open"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["kind"] == "address_unreachable"
                && a["summary"] == "127.0.0.10 of edge-0 is unreachable"),
        "{alerts}"
    );

    // It comes back: primary again after answering-before-reachable.
    edges[0].restart().await.unwrap();
    let recovery =
        s.wait_for(&dns, Duration::from_secs(30), |v| all(v).contains(&"127.0.0.10".to_owned())).await;
    println!("recovery: primary restarted → primary published in {:.1} s", recovery.as_secs_f64());
    assert!(recovery >= Duration::from_secs(5), "not before answering-before-reachable: {recovery:?}");

    // One prober alone: stop it; with results from the two others nothing changes.
    let (_, before) = s.call(Method::GET, &format!("/v1/clusters/{cluster}/revisions"), None).await;
    let n = before["items"][0]["number"].as_i64().unwrap();
    probers.pop().unwrap().kill().await;
    // Its results stop counting after 15 s; it is offline after 30 s (3 intervals, at least 30 s).
    tokio::time::sleep(Duration::from_secs(32)).await;
    let (_, after) = s.call(Method::GET, &format!("/v1/clusters/{cluster}/revisions"), None).await;
    assert_eq!(after["items"][0]["number"].as_i64().unwrap(), n, "{after}");
    let (_, v) = s.call(Method::GET, &dns, None).await;
    assert_eq!(all(&v), ["127.0.0.10", "127.0.0.12", "127.0.0.13"]);
    let (_, list) = s.call(Method::GET, "/v1/probers", None).await;
    let gone = list["items"].as_array().unwrap().iter().find(|p| p["name"] == "prober-2").unwrap();
    assert_eq!(gone["status"], "offline", "{list}");
    let (_, alerts) = s.call(Method::GET, "/v1/alerts", None).await;
    assert!(
        alerts["recent"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["kind"] == "address_unreachable" && a["state"] == "resolved"),
        "{alerts}"
    );
    s.wait_for("/v1/alerts", Duration::from_secs(20), |v| {
        v["open"].as_array().is_some_and(|o| {
            o.iter().any(|a| a["kind"] == "prober_offline" && a["summary"] == "prober prober-2 is offline")
        })
    })
    .await;
}
