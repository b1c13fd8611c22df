//! Drain and maintenance as an operator uses them (SPEC §10): a drained node leaves what `dig`
//! answers at once, stays probed, and reads drained once clients have had twice the TTL to
//! move; a drain that would leave a line below its minimum is refused, naming the line, until
//! confirmed; a maintenance window drains its node between its times and holds its alerts.

use std::time::Duration;

use reqwest::Method;
use serde_json::json;

use crate::harness::{LabFleet, all_answers, dig};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_drain_leaves_dns_at_once_and_a_window_drains_between_its_times() {
    let LabFleet { s, nodes, cluster, dns_path, edges, probers: _probers, temp: _temp, .. } =
        LabFleet::start("cdn.drain.example", 210).await;
    let (dns, name) = (s.dns(), "cdn.drain.example");
    assert_eq!(dig(dns, name).await, ["127.0.0.210", "127.0.0.212", "127.0.0.213"]);
    // A TTL of 1 s: clients have moved 2 s after a drained node left the answers.
    let (st, v) = s.call(Method::PATCH, &format!("/v1/clusters/{cluster}"), Some(json!({"ttl": 1}))).await;
    assert_eq!(st, 200, "{v}");
    let (_, lines) = s.call(Method::GET, &format!("/v1/clusters/{cluster}/lines"), None).await;
    let line = lines["items"][0]["id"].as_i64().unwrap();
    let (st, v) = s
        .call(Method::PATCH, &format!("/v1/clusters/{cluster}/lines/{line}"), Some(json!({"min_healthy": 3})))
        .await;
    assert_eq!(st, 200, "{v}");

    // The pre-flight: the line would answer 2 of 3, below its minimum of 3. Refused, naming it.
    let (st, v) = s.call(Method::POST, &format!("/v1/nodes/{}/drain", nodes[0]), None).await;
    assert_eq!(st, 409, "{v}");
    let reason = v["error"]["reason"].as_str().unwrap();
    assert!(
        reason.contains("line default of video would answer 2 of its 3 addresses, below its minimum of 3"),
        "{reason}"
    );
    let out = s.ctl(&["nodes", "drain", "edge-0"]).await;
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("confirm"), "{out:?}");
    assert_eq!(
        dig(dns, name).await,
        ["127.0.0.210", "127.0.0.212", "127.0.0.213"],
        "refused: nothing changed"
    );
    let (st, v) =
        s.call(Method::POST, &format!("/v1/nodes/{}/drain", nodes[0]), Some(json!({"confirm": "yes"}))).await;
    assert_eq!((st, v["error"]["field"].as_str()), (400, Some("confirm")), "{v}");

    // Confirmed: out of DNS at once, still probed, draining then drained.
    let out = s.ctl(&["nodes", "drain", "edge-0", "--confirm"]).await;
    assert!(out.status.success(), "{out:?}");
    assert_eq!(dig(dns, name).await, ["127.0.0.212", "127.0.0.213"], "out at once");
    let node = format!("/v1/nodes/{}", nodes[0]);
    let (_, v) = s.call(Method::GET, &node, None).await;
    assert_eq!(
        (v["drained"].as_bool(), v["drain"]["cause"]["by"].as_str()),
        (Some(true), Some("node")),
        "{v}"
    );
    s.wait_for(&node, Duration::from_secs(10), |v| v["drain"]["drained"] == true).await;
    let text = s.metrics().await;
    assert!(text.contains("vantage_node_drained{cluster=\"video\",node=\"edge-0\"} 1"), "{text}");
    let list = String::from_utf8_lossy(&s.ctl(&["nodes", "list"]).await.stdout).into_owned();
    assert!(list.lines().any(|l| l.contains("edge-0") && l.contains("drained")), "{list}");
    let (_, before) = s.call(Method::GET, &format!("{node}/results"), None).await;
    tokio::time::sleep(Duration::from_secs(6)).await;
    let (_, after) = s.call(Method::GET, &format!("{node}/results"), None).await;
    assert_ne!(before["items"], after["items"], "still probed: its results move on");
    let (_, events) = s.call(Method::GET, "/v1/events?kind=node_drained", None).await;
    assert!(events.to_string().contains("edge-0 is drained (drained by an operator)"), "{events}");

    // Back: answered again.
    let out = s.ctl(&["nodes", "undrain", "edge-0"]).await;
    assert!(out.status.success(), "{out:?}");
    s.wait_for(&dns_path, Duration::from_secs(10), |v| all_answers(v).len() == 3).await;
    assert_eq!(dig(dns, name).await, ["127.0.0.210", "127.0.0.212", "127.0.0.213"]);
    assert!(!s.metrics().await.contains("vantage_node_drained{"), "no drained node, no series");

    // A whole group, with ctl: refused (every line would answer nothing), then confirmed, put back.
    let out = s.ctl(&["groups", "--cluster", "video", "drain", "pop-1"]).await;
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("group pop-1"), "{out:?}");
    let out = s.ctl(&["groups", "--cluster", "video", "drain", "pop-1", "--confirm"]).await;
    assert!(out.status.success() && String::from_utf8_lossy(&out.stdout).contains("true"), "{out:?}");
    let (_, v) = s.call(Method::GET, &node, None).await;
    assert_eq!(v["drain"]["cause"]["by"], "group", "{v}");
    let out = s.ctl(&["groups", "--cluster", "video", "undrain", "pop-1"]).await;
    assert!(out.status.success(), "{out:?}");
    s.wait_for(&node, Duration::from_secs(10), |v| v["drain"].is_null()).await;
    s.wait_for(&dns_path, Duration::from_secs(10), |v| all_answers(v).len() == 3).await;

    // A window: refused naming the field, then planned with ctl by the node's name.
    let (st, v) = s
        .call(
            Method::POST,
            "/v1/maintenance",
            Some(json!({"name": "x", "duration_s": 60, "nodes": [999_999]})),
        )
        .await;
    assert_eq!((st, v["error"]["field"].as_str()), (400, Some("nodes")), "{v}");
    let out = s
        .ctl(&[
            "maintenance",
            "create",
            "name=swap disks",
            "duration_s=30",
            r#"nodes=["edge-1"]"#,
            "comment=RMA",
        ])
        .await;
    assert!(out.status.success(), "{out:?}");
    let (_, list) = s.call(Method::GET, "/v1/maintenance", None).await;
    let window = list["items"][0].clone();
    let id = window["id"].as_i64().unwrap();
    assert_eq!(
        (window["state"].as_str(), &window["targets"]),
        (Some("open"), &json!(["node edge-1"])),
        "{window}"
    );
    s.wait_for(&dns_path, Duration::from_secs(10), |v| all_answers(v) == ["127.0.0.210", "127.0.0.213"])
        .await;
    assert_eq!(dig(dns, name).await, ["127.0.0.210", "127.0.0.213"]);

    // edge-1 fails during its window: the alert fires, its notification held by the window.
    edges[2].set_status(500);
    let key = format!("address_unreachable/node:{}/127.0.0.212", nodes[1]);
    s.wait_for("/v1/alerts", Duration::from_secs(30), |v| {
        v["held"][&key] == json!({"by": "maintenance", "id": id})
    })
    .await;
    let status = String::from_utf8_lossy(&s.ctl(&["status"]).await.stdout).into_owned();
    assert!(status.contains(&format!("(notification held by maintenance {id})")), "{status}");
    edges[2].set_status(200);

    // Ended early by shortening it: the node comes back once it answers, the window is closed.
    let now = chrono_now();
    let (st, v) =
        s.call(Method::PATCH, &format!("/v1/maintenance/{id}"), Some(json!({"ends_at": now}))).await;
    assert_eq!((st, v["state"].as_str()), (200, Some("closed")), "{v}");
    s.wait_for(&dns_path, Duration::from_secs(30), |v| all_answers(v).len() == 3).await;
    let (_, events) = s.call(Method::GET, "/v1/events?kind=maintenance", None).await;
    let said = events.to_string();
    assert!(said.contains(&format!("maintenance {id} (swap disks) opened: node edge-1")), "{said}");
    assert!(said.contains(&format!("maintenance {id} (swap disks) closed: node edge-1")), "{said}");
}

/// Now, as the API writes times.
fn chrono_now() -> String {
    let ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis();
    vantage_core::Timestamp::from_millis(i64::try_from(ms).unwrap()).to_string()
}

/// Availability as the operator reads it: an edge that stops answering makes an incident of
/// its node, with the time it was down counted against it; `ctl report`, the API and
/// `/metrics` say the same, and the cluster page draws the bars.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_outage_makes_an_incident_in_the_report_the_api_and_metrics() {
    let LabFleet { s, nodes, dns_path, edges, probers: _probers, temp: _temp, .. } =
        LabFleet::start("cdn.report.example", 220).await;
    let subject = format!("node:{}", nodes[2]);
    let path = format!("/v1/availability/{subject}");
    // Known once the ledger follows the published state (every 10 s).
    s.wait_for(&path, Duration::from_secs(20), |v| v["health"] == "up").await;

    edges[3].set_status(500);
    s.wait_for(&dns_path, Duration::from_secs(30), |v| all_answers(v).len() == 2).await;
    s.wait_for(&path, Duration::from_secs(20), |v| v["health"] == "down").await;
    edges[3].set_status(200);
    s.wait_for(&path, Duration::from_secs(40), |v| v["health"] == "up").await;

    let (_, r) = s.call(Method::GET, &format!("{path}?target=99.9"), None).await;
    let day = &r["windows"][0];
    assert_eq!(day["window"], "24h", "{r}");
    assert!(day["down_s"].as_f64().unwrap() >= 5.0, "{r}");
    assert!(day["availability_pct"].as_f64().unwrap() < 100.0, "{r}");
    assert!(
        day["budget_left_pct"].as_f64().unwrap() < 0.0,
        "a few seconds down in minutes is over 99.9 %: {r}"
    );
    let incident = &r["incidents"][0];
    assert!(
        incident["end"].is_string()
            && incident["cause"].as_str().unwrap().contains("every address unreachable"),
        "{r}"
    );
    assert_eq!(r["days"].as_array().unwrap().len(), 90, "{r}");
    let (st, v) = s.call(Method::GET, &format!("{path}?target=100"), None).await;
    assert_eq!((st, v["error"]["field"].as_str()), (400, Some("target")), "{v}");
    let (st, v) = s.call(Method::GET, "/v1/availability/pony:1", None).await;
    assert_eq!((st, v["error"]["field"].as_str()), (400, Some("subject")), "{v}");

    let out = s.ctl(&["report", &subject, "--target", "99.9"]).await;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success() && text.contains("edge-2 (video)") && text.contains("every address unreachable"),
        "{out:?}"
    );
    let out = s.ctl(&["report", "--kind", "line"]).await;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success() && text.contains("line default of video"), "{out:?}");
    let metrics = s.metrics().await;
    let series = format!(
        "vantage_availability_ratio{{kind=\"node\",subject=\"{subject}\",name=\"edge-2 (video)\",window=\"24h\"}}"
    );
    assert!(metrics.lines().any(|l| l.starts_with(&series) && !l.ends_with(" 1.0")), "{metrics}");
}
