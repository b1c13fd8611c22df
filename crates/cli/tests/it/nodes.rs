//! The node list as reference 000 describes it, with real agents: a node behind NAT (its
//! agent reports only a private address) reads "No public address", every node shows where
//! its agent connects from and its CPU and memory; *Add source address* adds that address.

use std::time::Duration;

use reqwest::Method;
use serde_json::json;

use crate::harness::{AgentProcess, ServerProcess};

/// The row of `node` in `ctl nodes list`.
fn row<'a>(list: &'a str, node: &str) -> &'a str {
    list.lines()
        .find(|l| l.split_whitespace().nth(3) == Some(node))
        .unwrap_or_else(|| panic!("{node}: {list}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_nat_only_node_reads_no_public_address_until_its_source_address_is_added() {
    let temp = tempfile::tempdir().unwrap();
    let s = ServerProcess::start_in(&temp.path().join("server"), &["--allow-loopback-addresses"]).await;
    let (agent_url, ca) = s.channel();
    let cluster = s.create("/v1/clusters", json!({"name": "c", "domain": "cdn.nodes.example"})).await["id"]
        .as_i64()
        .unwrap();
    let group = s.create(&format!("/v1/clusters/{cluster}/groups"), json!({"name": "g"})).await["id"]
        .as_i64()
        .unwrap();
    let metrics = temp.path().join("metrics.json");
    std::fs::write(&metrics, r#"{"cpu_pct": 42.5, "load1": 0.5, "load5": 0.4, "load15": 0.3, "memory_used_bytes": 1000, "memory_total_bytes": 4000, "egress_mbps": 12.0, "connections": 7}"#).unwrap();
    let mut agents = Vec::new();
    let mut ids = Vec::new();
    for (name, address) in [("behind-nat", "10.0.0.5"), ("edge-222", "127.0.0.222")] {
        let node =
            s.create("/v1/nodes", json!({"cluster": cluster, "group": group, "name": name})).await["id"]
                .as_i64()
                .unwrap();
        let token = s.create("/v1/nodes/tokens", json!({"node": node})).await;
        let args =
            ["--metrics-file", metrics.to_str().unwrap(), "--address", address, "--heartbeat-interval", "1s"];
        agents.push(AgentProcess::start(
            "agent",
            &agent_url,
            token["token"].as_str().unwrap(),
            &ca,
            &temp.path().join(name),
            &args,
            &temp.path().join(format!("{name}.log")),
        ));
        s.wait_for(&format!("/v1/nodes/{node}"), Duration::from_secs(20), |v| v["online"] == true).await;
        ids.push(node);
    }

    // The list: the NAT-only node has no public address (not "healthy", no level); both show
    // where their agents connect from (here, loopback) and their CPU and memory.
    let out = s.ctl(&["nodes", "list"]).await;
    assert!(out.status.success(), "{out:?}");
    let list = String::from_utf8_lossy(&out.stdout).into_owned();
    let header = list.lines().next().unwrap();
    assert!(
        header.contains("ADDRESSES") && header.contains("CONNECTS_FROM") && header.contains("METRICS"),
        "{list}"
    );
    let nat = row(&list, "behind-nat");
    assert!(nat.contains("No public address") && nat.contains("no public address"), "{list}");
    assert!(!nat.contains("healthy") && !nat.contains("none"), "{list}");
    assert!(nat.contains("127.0.0.1") && nat.contains("cpu 42.5% mem 25.0%"), "{list}");
    let edge = row(&list, "edge-222");
    assert!(edge.contains("127.0.0.222") && !edge.contains("public address"), "{list}");
    assert!(edge.contains("cpu 42.5% mem 25.0%"), "{list}");

    // Its details: the source of its enrollment and of its latest heartbeat, and the one it
    // may add.
    let (_, v) = s.call(Method::GET, &format!("/v1/nodes/{}", ids[0]), None).await;
    assert_eq!(v["no_public_address"], true, "{v}");
    assert_eq!(
        (v["enrolled_from"].as_str(), v["connects_from"].as_str()),
        (Some("127.0.0.1"), Some("127.0.0.1")),
        "{v}"
    );
    assert_eq!(v["addable_source"], "127.0.0.1", "{v}");
    assert_eq!(v["usage"]["cpu_pct"], 42.5, "{v}");
    let out = s.ctl(&["nodes", "get", "behind-nat"]).await;
    let details = String::from_utf8_lossy(&out.stdout);
    assert!(details.lines().any(|l| l.starts_with("enrolled_from") && l.ends_with("127.0.0.1")), "{details}");

    // The UI's node list says the same.
    let client = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let login = s.ui_login(&client).await;
    let cookie = login.headers()["set-cookie"].to_str().unwrap().split(';').next().unwrap().to_owned();
    let get = |path: String| {
        let (client, cookie) = (client.clone(), cookie.clone());
        async move { client.get(path).header("cookie", cookie).send().await.unwrap().text().await.unwrap() }
    };
    let page = get(format!("{}/ui/clusters/{cluster}", s.url)).await;
    let from = page.find("data-node=\"behind-nat\"").unwrap_or_else(|| panic!("{page}"));
    let ui_row = &page[from..from + page[from..].find("</tr>").unwrap()];
    assert!(ui_row.contains("No public address") && !ui_row.contains("Healthy"), "{ui_row}");
    assert!(ui_row.contains("127.0.0.1") && ui_row.contains("CPU 42.5 % · Memory 25 %"), "{ui_row}");
    let page = get(format!("{}/ui/nodes/{}", s.url, ids[0])).await;
    assert!(page.contains("Add source address 127.0.0.1"), "{page}");

    // Add source address: bad input names its field and changes nothing.
    let path = format!("/v1/nodes/{}/addresses/source", ids[0]);
    let (st, e) = s.call(Method::POST, &path, Some(json!({"level": "backup9"}))).await;
    assert_eq!((st, e["error"]["field"].as_str()), (400, Some("level")), "{e}");
    // A source address joins at the primary level when the list is empty; a backup alone
    // has no primary.
    let (st, e) = s.call(Method::POST, &path, Some(json!({"level": "backup1"}))).await;
    assert_eq!(st, 400, "{e}");
    let out = s.ctl(&["nodes", "add-source-address", "behind-nat"]).await;
    assert!(out.status.success(), "{out:?}");
    let (_, v) = s.call(Method::GET, &format!("/v1/nodes/{}", ids[0]), None).await;
    assert_eq!(v["no_public_address"], false, "{v}");
    assert_eq!(v["addresses"][0]["ip"], "127.0.0.1", "{v}");
    assert_eq!(
        (v["addresses"][0]["source"].as_str(), v["addresses"][0]["level"].as_str()),
        (Some("configured"), Some("primary")),
        "{v}"
    );
    assert_eq!(v["addable_source"], serde_json::Value::Null, "{v}");
    let (st, e) = s.call(Method::POST, &path, Some(json!({}))).await;
    assert_eq!((st, e["error"]["field"].as_str()), (400, Some("source")), "{e}");
    assert!(e["error"]["reason"].as_str().unwrap().contains("configured already"), "{e}");
    let (_, audit) = s.call(Method::GET, "/v1/audit?action=node.set_addresses", None).await;
    assert!(audit["items"][0]["metadata"]["source"] == "127.0.0.1", "{audit}");
    let out = s.ctl(&["nodes", "list"]).await;
    let list = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(!row(&list, "behind-nat").contains("public address"), "{list}");
}
