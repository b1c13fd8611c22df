//! DNS from a running `vantage serve`: the built-in server answers each revision (lines by
//! client subnet, `all.`, TTL), answers from the first query after a restart, and every
//! revision is pushed to a real Knot DNS over RFC 2136 with TSIG — the outcome, good or bad,
//! recorded on the revision; and with its storage locked by another process, it keeps answering
//! the last revision while changes fail with 503 and change nothing.

use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};
use vantage_testkit::{KNOT_INITIAL_A, KnotServer, dig, dig_short};

use crate::harness::{ServerProcess, lock_storage};

const SECRET: &str = "dmFudGFnZS1lbmQtdG8tZW5kLXRzaWctc2VjcmV0IQ==";
const WRONG: &str = "c29tZS1vdGhlci1zZWNyZXQtdGhhdC1rbm90LWRvZXNudA==";

async fn short(server: std::net::SocketAddr, args: &[&str]) -> Vec<String> {
    let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    tokio::task::spawn_blocking(move || {
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        dig_short(server, &refs)
    })
    .await
    .unwrap()
}

async fn publish_status(s: &ServerProcess, cluster: i64) -> Value {
    let (_, revs) = s.call(Method::GET, &format!("/v1/clusters/{cluster}/revisions"), None).await;
    revs["items"][0]["publish"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn revisions_reach_the_built_in_server_and_knot_with_outcomes_recorded() {
    let knot = tokio::task::spawn_blocking(|| {
        KnotServer::start("cdn.test.example", "vantage-key", "hmac-sha256", SECRET)
    })
    .await
    .unwrap()
    .expect("knotd runs (Debian package knot)");
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("server");
    let s = ServerProcess::start_in(&dir, &["--allow-loopback-addresses"]).await;
    let publisher = |secret: &str| json!([{"name": "knot", "server": knot.addr().to_string(), "key_name": "vantage-key", "key_algorithm": "hmac-sha256", "key_secret": secret}]);
    let cluster = s
        .create("/v1/clusters", json!({"name": "video", "domain": "cdn.test.example", "aliases": ["cdn.test.example.org"], "ttl": 45, "publishers": publisher(SECRET)}))
        .await;
    assert_eq!(cluster["publishers"][0]["key_secret"], "(hidden)", "secrets are not read back");
    let cluster = cluster["id"].as_i64().unwrap();
    let g1 = s.create(&format!("/v1/clusters/{cluster}/groups"), json!({"name": "sin"})).await["id"]
        .as_i64()
        .unwrap();
    let g2 = s.create(&format!("/v1/clusters/{cluster}/groups"), json!({"name": "fra"})).await["id"]
        .as_i64()
        .unwrap();
    s.create(&format!("/v1/clusters/{cluster}/lines"), json!({"name": "default", "group": g1})).await;
    s.create(
        &format!("/v1/clusters/{cluster}/lines"),
        json!({"name": "europe", "group": g2, "client_networks": ["198.51.100.0/24"]}),
    )
    .await;
    for (g, name, ip) in
        [(g1, "sin-1", "192.0.2.10"), (g1, "sin-2", "192.0.2.11"), (g2, "fra-1", "203.0.113.20")]
    {
        let n = s.create("/v1/nodes", json!({"cluster": cluster, "group": g, "name": name})).await["id"]
            .as_i64()
            .unwrap();
        s.call(Method::PUT, &format!("/v1/nodes/{n}/addresses"), Some(json!([{"ip": ip}]))).await;
    }
    s.wait_for(&format!("/v1/clusters/{cluster}/dns"), Duration::from_secs(20), |v| {
        v["all"].as_array().is_some_and(|a| a.len() == 3)
    })
    .await;

    // The built-in server.
    let dns = s.dns();
    assert_eq!(short(dns, &["cdn.test.example", "A"]).await, ["192.0.2.10", "192.0.2.11"]);
    assert_eq!(
        short(dns, &["cdn.test.example.org", "A"]).await,
        ["192.0.2.10", "192.0.2.11"],
        "aliases answer alike"
    );
    assert_eq!(
        short(dns, &["cdn.test.example", "A", "+subnet=198.51.100.7/32"]).await,
        ["203.0.113.20"],
        "the line of the client subnet"
    );
    assert_eq!(
        short(dns, &["all.cdn.test.example", "A"]).await,
        ["192.0.2.10", "192.0.2.11", "203.0.113.20"]
    );
    let full = tokio::task::spawn_blocking(move || {
        dig(dns, &["cdn.test.example", "A", "+noall", "+answer"]).unwrap()
    })
    .await
    .unwrap();
    assert!(full.contains("\t45\tIN\tA\t192.0.2.10"), "the cluster's TTL: {full}");
    let refused =
        tokio::task::spawn_blocking(move || dig(dns, &["example.com", "A"]).unwrap()).await.unwrap();
    assert!(refused.contains("status: REFUSED"), "{refused}");
    let nx = tokio::task::spawn_blocking(move || dig(dns, &["nope.cdn.test.example", "A"]).unwrap())
        .await
        .unwrap();
    assert!(nx.contains("status: NXDOMAIN"), "{nx}");

    let (_, _) = s.call(Method::GET, "/healthz", None).await;
    let metrics = s.metrics().await;
    assert!(
        metrics.contains(r#"vantage_dns_queries_total{zone="cdn.test.example",rcode="NOERROR"}"#),
        "{metrics}"
    );
    assert!(metrics.contains(r#"rcode="REFUSED""#), "{metrics}");

    // Knot gets every revision (no lines there: the default line).
    let started = std::time::Instant::now();
    // The newest revision lands last: wait for it.
    while short(knot.addr(), &["all.cdn.test.example", "A"]).await
        != ["192.0.2.10", "192.0.2.11", "203.0.113.20"]
    {
        assert!(started.elapsed() < Duration::from_secs(20), "knot: {}", knot.log());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(short(knot.addr(), &["cdn.test.example", "A"]).await, ["192.0.2.10", "192.0.2.11"]);
    s.wait_for(&format!("/v1/clusters/{cluster}/revisions"), Duration::from_secs(10), |v| {
        v["items"][0]["publish"][0]["status"] == "published"
    })
    .await;
    // The push is counted before its outcome is recorded on the revision.
    let metrics = s.metrics().await;
    assert!(
        metrics.lines().any(|l| l.starts_with("vantage_publications_total{cluster=\"video\"")
            && l.contains("outcome=\"published\"")),
        "{metrics}"
    );
    assert!(
        metrics.contains(r#"vantage_revisions_total{cluster="video",cause="configuration"}"#),
        "{metrics}"
    );
    let p = publish_status(&s, cluster).await;
    assert_eq!(p[0]["target"], format!("rfc2136://{}", knot.addr()), "{p}");

    // A wrong key (and a new TTL: a configuration change always makes a revision): Knot
    // refuses, the outcome says so, Knot keeps its records.
    let (st, v) = s
        .call(
            Method::PATCH,
            &format!("/v1/clusters/{cluster}"),
            Some(json!({"publishers": publisher(WRONG), "ttl": 60})),
        )
        .await;
    assert_eq!(st, 200, "{v}");
    s.wait_for(&format!("/v1/clusters/{cluster}/revisions"), Duration::from_secs(20), |v| {
        v["items"][0]["publish"][0]["status"] == "failed"
    })
    .await;
    let p = publish_status(&s, cluster).await;
    let reason = p[0]["reason"].as_str().unwrap_or_default().to_owned();
    assert!(reason.contains("NOTAUTH"), "{p}");
    assert_ne!(short(knot.addr(), &["cdn.test.example", "A"]).await, [KNOT_INITIAL_A]);

    // A restart answers the last revision from the first query, before any evaluation.
    s.stop().await;
    let s = ServerProcess::start_in(&dir, &["--allow-loopback-addresses"]).await;
    assert_eq!(short(s.dns(), &["cdn.test.example", "A"]).await, ["192.0.2.10", "192.0.2.11"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn dns_keeps_answering_the_last_revision_while_storage_is_locked() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("server");
    let s = ServerProcess::start_in(&dir, &[]).await;
    let cluster =
        s.create("/v1/clusters", json!({"name": "video", "domain": "cdn.lock.example"})).await["id"]
            .as_i64()
            .unwrap();
    let group = s.create(&format!("/v1/clusters/{cluster}/groups"), json!({"name": "sin"})).await["id"]
        .as_i64()
        .unwrap();
    s.create(&format!("/v1/clusters/{cluster}/lines"), json!({"name": "default", "group": group})).await;
    let node =
        s.create("/v1/nodes", json!({"cluster": cluster, "group": group, "name": "edge-1"})).await["id"]
            .as_i64()
            .unwrap();
    let addresses = format!("/v1/nodes/{node}/addresses");
    let (st, v) = s.call(Method::PUT, &addresses, Some(json!([{"ip": "192.0.2.20"}]))).await;
    assert_eq!(st, 200, "{v}");
    s.wait_for(&format!("/v1/clusters/{cluster}/dns"), Duration::from_secs(20), |v| {
        v["all"] == json!(["192.0.2.20"])
    })
    .await;

    // Another process takes the database's write lock and keeps it: storage is down for the
    // server (its writes wait out the busy timeout, then fail).
    let lock = lock_storage(&dir).await;

    let change = s.call(Method::PUT, &addresses, Some(json!([{"ip": "192.0.2.21"}])));
    let answers = async {
        // While the change waits on storage, DNS answers the last revision from memory.
        let mut seen = Vec::new();
        for _ in 0..5 {
            seen.push(short(s.dns(), &["cdn.lock.example", "A"]).await);
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        seen
    };
    let ((st, v), seen) = tokio::join!(change, answers);
    assert_eq!(st, 503, "the change fails with storage down: {v}");
    assert!(v["error"]["reason"].as_str().is_some_and(|m| m.starts_with("storage unavailable")), "{v}");
    assert!(seen.iter().all(|a| a == &["192.0.2.20"]), "{seen:?}");
    assert_eq!(short(s.dns(), &["cdn.lock.example", "A"]).await, ["192.0.2.20"], "nothing changed");
    let (_, a) = s.call(Method::GET, &addresses, None).await;
    assert!(a.to_string().contains("192.0.2.20") && !a.to_string().contains("192.0.2.21"), "{a}");

    // Storage is back: the same change goes through and DNS follows.
    drop(lock);
    let (st, v) = s.call(Method::PUT, &addresses, Some(json!([{"ip": "192.0.2.21"}]))).await;
    assert_eq!(st, 200, "{v}");
    s.wait_for(&format!("/v1/clusters/{cluster}/dns"), Duration::from_secs(20), |v| {
        v["all"] == json!(["192.0.2.21"])
    })
    .await;
    assert_eq!(short(s.dns(), &["cdn.lock.example", "A"]).await, ["192.0.2.21"]);
}
