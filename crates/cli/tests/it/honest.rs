//! What Vantage says and what it answers agree: a quiet fleet reads no hold anywhere; a
//! line's target address stands in for a node's scheduling address there; and a node the
//! operator deletes leaves DNS (`dig`) in the next revision — the last enabled one a line
//! answers with only with `--force`, and then the line answers nothing rather than the deleted
//! node's address.

use std::time::Duration;

use reqwest::Method;

use crate::harness::{LabFleet, all_answers, dig};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_quiet_fleet_reads_no_hold_and_deleted_nodes_leave_dns() {
    let LabFleet { s, nodes, cluster, dns_path, probers: _probers, edges: _edges, temp: _temp, .. } =
        LabFleet::start("cdn.honest.example", 200).await;
    let dns = s.dns();
    let name = "cdn.honest.example";
    assert_eq!(dig(dns, name).await, ["127.0.0.200", "127.0.0.202", "127.0.0.203"]);

    // A quiet fleet, from its first revision on: nothing held, no hold alert, `ctl status` and
    // the revisions say so.
    let (_, revisions) = s.call(Method::GET, &format!("/v1/clusters/{cluster}/revisions"), None).await;
    for r in revisions["items"].as_array().unwrap() {
        assert_eq!(r["held"], serde_json::json!({}), "{r}");
        assert!(!r["reason"].as_str().unwrap().contains("held"), "{r}");
    }
    let (_, alerts) = s.call(Method::GET, "/v1/alerts", None).await;
    assert!(!alerts.to_string().contains("revision_held"), "{alerts}");
    let status = s.ctl(&["status"]).await;
    assert!(status.status.success(), "{status:?}");
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(!text.contains("held") && !text.contains("note"), "{text}");

    // A target address of the line for edge-2: on that line it answers with the target
    // instead of its scheduling address, once the probers have verified it.
    let out = s.ctl(&["nodes", "set-addresses", "edge-2", "127.0.0.203", "127.0.0.201@default"]).await;
    assert!(out.status.success(), "{out:?}");
    s.wait_for(&dns_path, Duration::from_secs(20), |v| {
        all_answers(v) == ["127.0.0.200", "127.0.0.201", "127.0.0.202"]
    })
    .await;
    assert_eq!(dig(dns, name).await, ["127.0.0.200", "127.0.0.201", "127.0.0.202"]);
    let (st, v) = s
        .call(
            Method::PUT,
            &format!("/v1/nodes/{}/addresses", nodes[2]),
            Some(serde_json::json!([{"ip": "127.0.0.203"}, {"ip": "127.0.0.204", "line": 999_999}])),
        )
        .await;
    assert_eq!((st, v["error"]["field"].as_str()), (400, Some("addresses[1].line")), "{v}");

    // Two of three go at once: that is the operator, not health, so no protection holds them.
    for id in &nodes[..2] {
        let out = s.ctl(&["nodes", "delete", &id.to_string()]).await;
        assert!(out.status.success(), "{out:?}");
    }
    s.wait_for(&dns_path, Duration::from_secs(10), |v| all_answers(v) == ["127.0.0.201"]).await;
    assert_eq!(dig(dns, name).await, ["127.0.0.201"]);

    // The last enabled node of the group the line answers with: refused, naming the line.
    let last = nodes[2];
    let (st, v) = s.call(Method::DELETE, &format!("/v1/nodes/{last}"), None).await;
    assert_eq!(st, 409, "{v}");
    let reason = v["error"]["reason"].as_str().unwrap();
    assert!(reason.contains("last enabled node of group pop-1, which line default answers with"), "{reason}");
    let out = s.ctl(&["nodes", "delete", "edge-2"]).await;
    assert!(!out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--force"), "{out:?}");
    let (st, v) = s.call(Method::DELETE, &format!("/v1/nodes/{last}?force=maybe"), None).await;
    assert_eq!((st, v["error"]["field"].as_str()), (400, Some("force")), "{v}");
    assert_eq!(dig(dns, name).await, ["127.0.0.201"], "a refused delete changes nothing");

    // With force it goes, and DNS answers nothing rather than the address taken out.
    let out = s.ctl(&["nodes", "delete", "edge-2", "--force"]).await;
    assert!(out.status.success(), "{out:?}");
    s.wait_for(&dns_path, Duration::from_secs(10), |v| all_answers(v).is_empty()).await;
    assert!(dig(dns, name).await.is_empty());
    // And keeps answering nothing: no later pass puts it back.
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert!(dig(dns, name).await.is_empty());
    let (_, revisions) = s.call(Method::GET, &format!("/v1/clusters/{cluster}/revisions"), None).await;
    let newest = &revisions["items"][0];
    assert!(newest["reason"].as_str().unwrap().contains("line default answers no records"), "{newest}");
    let (_, audit) = s.call(Method::GET, "/v1/audit?action=node.delete", None).await;
    assert!(audit.to_string().contains("\"force\":true"), "{audit}");
}
