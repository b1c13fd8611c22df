//! Scheduling rules end to end, with real processes: node metrics from `vantage agent
//! --metrics-file`, probe loss from real probers, DNS records, revisions, audit, the preview
//! and webhook receivers that get firing and resolved alerts.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Value, json};
use vantage_testkit::EdgeServer;

use crate::harness::{AgentProcess, ServerProcess, all_answers};
use crate::receivers::{SmtpSink, receiver};

/// When a revision was made.
fn at(revision: &Value) -> vantage_core::Timestamp {
    revision["at"].as_str().unwrap().parse().unwrap()
}

fn cpu(path: &std::path::Path, pct: f64) {
    let m = json!({"cpu_pct": pct, "load1": 0.5, "load5": 0.4, "load15": 0.3, "memory_used_bytes": 1, "memory_total_bytes": 4,
                   "egress_mbps": 1.0, "connections": 3});
    std::fs::write(path, m.to_string()).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cpu_rule_removes_a_node_recovers_after_hold_and_recover_and_alerts_webhooks() {
    let temp = tempfile::tempdir().unwrap();
    let s = ServerProcess::start_in(&temp.path().join("server"), &["--allow-loopback-addresses"]).await;
    let hooks = receiver().await;
    s.create("/v1/webhooks", json!({"name": "json", "url": format!("{}/json", hooks.url)})).await;
    s.create(
        "/v1/webhooks",
        json!({"name": "am", "url": format!("{}/am", hooks.url), "format": "alertmanager"}),
    )
    .await;
    // A Slack channel, PagerDuty and email (to a local SMTP server) get the same alerts.
    let mail = SmtpSink::start().await;
    s.create(
        "/v1/webhooks",
        json!({"name": "slack", "format": "slack", "secret": format!("{}/slack", hooks.url)}),
    )
    .await;
    let pd = json!({"name": "pd", "format": "pagerduty", "url": format!("{}/pd", hooks.url), "secret": "R0UT1NGKEY"});
    s.create("/v1/webhooks", pd).await;
    let email = json!({"name": "mail", "format": "email", "url": format!("smtp://{}", mail.addr),
                       "from": "vantage@example.net", "to": ["oncall@example.net"], "template": "{status}: {kind} {key}"});
    s.create("/v1/webhooks", email).await;
    let (st, v) =
        s.call(Method::POST, "/v1/webhooks", Some(json!({"name": "bad", "url": "gopher://x"}))).await;
    assert_eq!((st, v["error"]["field"].as_str()), (400, Some("url")), "{v}");

    let cluster = s.create("/v1/clusters", json!({"name": "c", "domain": "cdn.test.example"})).await["id"]
        .as_i64()
        .unwrap();
    let group = s.create(&format!("/v1/clusters/{cluster}/groups"), json!({"name": "g"})).await["id"]
        .as_i64()
        .unwrap();
    let line = s
        .create(&format!("/v1/clusters/{cluster}/lines"), json!({"name": "default", "group": group}))
        .await["id"]
        .as_i64()
        .unwrap();
    let mut nodes = Vec::new();
    for (i, ip) in ["127.0.0.31", "127.0.0.32", "127.0.0.33"].iter().enumerate() {
        let n = s
            .create("/v1/nodes", json!({"cluster": cluster, "group": group, "name": format!("edge-{i}")}))
            .await["id"]
            .as_i64()
            .unwrap();
        s.call(Method::PUT, &format!("/v1/nodes/{n}/addresses"), Some(json!([{"ip": ip}]))).await;
        nodes.push(n);
    }
    let (agent_url, ca) = s.channel();
    let token =
        s.create("/v1/nodes/tokens", json!({"node": nodes[0]})).await["token"].as_str().unwrap().to_owned();
    let metrics = temp.path().join("metrics.json");
    cpu(&metrics, 10.0);
    let _agent = AgentProcess::start(
        "agent",
        &agent_url,
        &token,
        &ca,
        &temp.path().join("agent"),
        &["--metrics-file", metrics.to_str().unwrap(), "--heartbeat-interval", "1s"],
        &temp.path().join("agent.log"),
    );
    let dns = format!("/v1/clusters/{cluster}/dns");
    s.wait_for(&dns, Duration::from_secs(20), |v| {
        all_answers(v) == ["127.0.0.31", "127.0.0.32", "127.0.0.33"]
    })
    .await;
    s.wait_for(&format!("/v1/nodes/{}", nodes[0]), Duration::from_secs(20), |v| {
        v["metrics"]["cpu_pct"] == 10.0
    })
    .await;

    let rule = s
        .create(
            &format!("/v1/clusters/{cluster}/rules"),
            json!({"name": "cpu-high", "line": line, "hold_s": 8, "recover_s": 3,
                   "conditions": [{"metric": "cpu", "comparison": ">", "threshold": 90, "for_s": 2}]}),
        )
        .await["id"]
        .as_i64()
        .unwrap();
    let (_, p) = s.call(Method::GET, &format!("/v1/clusters/{cluster}/preview"), None).await;
    let row = p["items"].as_array().unwrap().iter().find(|r| r["node"] == nodes[0]).unwrap().clone();
    assert_eq!(
        (row["status"].as_str(), row["outcome_text"].as_str()),
        (Some("idle"), Some("No change")),
        "{p}"
    );
    let other = p["items"].as_array().unwrap().iter().find(|r| r["node"] == nodes[1]).unwrap().clone();
    assert_eq!(other["conditions"][0]["value"], Value::Null, "a node without an agent has no data: {p}");
    // Each line, beside the rules: its policy, answering by health now.
    let outlook = &p["lines"][0];
    assert_eq!((&outlook["line"], &outlook["all_down"]), (&json!(line), &json!("hold")), "{p}");
    assert!(outlook.get("applies_now").is_none(), "{p}");

    // CPU above 90 % for the for-time: the node leaves the records.
    cpu(&metrics, 97.0);
    let removed =
        s.wait_for(&dns, Duration::from_secs(20), |v| all_answers(v) == ["127.0.0.32", "127.0.0.33"]).await;
    println!("cpu rule: removed {:.1} s after the CPU went up (for 2 s)", removed.as_secs_f64());
    assert!(removed >= Duration::from_secs(2), "not before the for-time: {removed:?}");
    let revs = s.stored_revisions(cluster).await;
    let activated_at = at(&revs["items"][0]);
    assert_eq!(
        revs["items"][0]["reason"], "Scheduling: cpu-high on edge-0 — remove the node activated",
        "{revs}"
    );
    let revision = revs["items"][0]["number"].clone();
    // The system's audit entries are written by a task of their own, a moment after.
    let path = "/v1/audit?action=scheduling.activate";
    s.wait_for(path, Duration::from_secs(5), |v| v["items"].as_array().is_some_and(|i| !i.is_empty())).await;
    let (_, audit) = s.call(Method::GET, path, None).await;
    let a = &audit["items"][0];
    assert_eq!(
        (a["actor"].as_str(), a["object"].as_str()),
        (Some("system"), Some(format!("node:{}", nodes[0]).as_str()))
    );
    assert_eq!(a["metadata"]["action"], "remove_node");
    assert_eq!(a["metadata"]["line"], "default");
    assert_eq!(a["metadata"]["values"][0]["value"], 97.0);
    assert_eq!(a["metadata"]["revision"], revision);
    let (_, alerts) = s.call(Method::GET, "/v1/alerts", None).await;
    assert_eq!(alerts["open"][0]["kind"], "scheduling_action", "{alerts}");
    assert_eq!(alerts["open"][0]["summary"], "cpu-high · edge-0");
    hooks
        .wait(Duration::from_secs(10), |got| {
            got.iter().any(|(k, v)| {
                k == "json"
                    && v["status"] == "firing"
                    && v["details"]["rule"] == "cpu-high"
                    && v["details"]["node"] == "edge-0"
            }) && got.iter().any(|(k, v)| {
                k == "am"
                    && v["status"] == "firing"
                    && v["alerts"][0]["labels"]["alertname"] == "scheduling_action"
            }) && got.iter().any(|(k, v)| k == "slack" && v["text"] == "[firing] cpu-high · edge-0")
                && got.iter().any(|(k, v)| {
                    k == "pd"
                        && v["event_action"] == "trigger"
                        && v["routing_key"] == "R0UT1NGKEY"
                        && v["payload"]["summary"] == "[firing] cpu-high · edge-0"
                        && v["payload"]["severity"] == "critical"
                })
        })
        .await;
    mail.wait(Duration::from_secs(10), |m| {
        m.iter().any(|t| {
            t.contains("Subject: firing: scheduling_action scheduling_action/rule:")
                && t.contains("To: oncall@example.net")
        })
    })
    .await;
    // Deliveries and the revision are counted in `/metrics`.
    let started = Instant::now();
    loop {
        let m = s.metrics().await;
        let delivered = |hook: &str| {
            m.contains(&format!(
                "vantage_webhook_deliveries_total{{webhook=\"{hook}\",outcome=\"delivered\"}}"
            ))
        };
        if ["json", "am", "slack", "pd", "mail"].into_iter().all(delivered) {
            assert!(m.contains(r#"cause="scheduling"}"#), "{m}");
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(5), "{m}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (_, p) = s.call(Method::GET, &format!("/v1/clusters/{cluster}/preview"), None).await;
    let row = p["items"].as_array().unwrap().iter().find(|r| r["node"] == nodes[0]).unwrap().clone();
    assert_eq!(
        (row["status"].as_str(), row["outcome_text"].as_str()),
        (Some("active"), Some("In effect")),
        "{p}"
    );
    // A draft previewed in the rule's place: the same behaviour (another name) keeps its
    // state, as a save would; another threshold starts fresh; nothing is saved either way.
    let draft = |threshold: f64| {
        json!({"name": "cpu-renamed", "line": line, "hold_s": 8, "recover_s": 3,
               "conditions": [{"metric": "cpu", "comparison": ">", "threshold": threshold, "for_s": 2}]})
    };
    let in_place = format!("/v1/clusters/{cluster}/rules/{rule}/preview");
    let status_of = |p: &Value| {
        let row = p["items"].as_array().unwrap().iter().find(|r| r["node"] == nodes[0]).cloned();
        row.and_then(|r| r["status"].as_str().map(str::to_owned)).unwrap_or_default()
    };
    let (code, p) = s.call(Method::POST, &in_place, Some(draft(90.0))).await;
    assert_eq!((code, status_of(&p)), (200, "active".to_owned()), "{p}");
    let (code, p) = s.call(Method::POST, &in_place, Some(draft(99.0))).await;
    assert_eq!((code, status_of(&p)), (200, "idle".to_owned()), "{p}");
    // A new rule drafted: a fresh state, its conditions' values read now.
    let (code, p) = s.call(Method::POST, &format!("/v1/clusters/{cluster}/preview"), Some(draft(50.0))).await;
    let row = p["items"].as_array().unwrap().iter().find(|r| r["node"] == nodes[0]).unwrap().clone();
    assert_eq!(
        (code, row["rule"].as_i64(), row["conditions"][0]["value"].as_f64()),
        (200, Some(0), Some(97.0)),
        "{p}"
    );
    // Refused as a save would be: by field, or not found.
    let mut bad = draft(90.0);
    bad["conditions"][0]["region"] = json!(999);
    let (code, p) = s.call(Method::POST, &in_place, Some(bad)).await;
    assert_eq!((code, p["error"]["field"].as_str()), (400, Some("conditions[0].region")), "{p}");
    let (code, _) = s
        .call(Method::POST, &format!("/v1/clusters/{cluster}/rules/999999/preview"), Some(draft(90.0)))
        .await;
    assert_eq!(code, 404);
    // A rule of another cluster is not this one's.
    let other =
        s.create("/v1/clusters", json!({"name": "c2", "domain": "cdn2.test.example"})).await["id"].clone();
    let (code, _) =
        s.call(Method::POST, &format!("/v1/clusters/{other}/rules/{rule}/preview"), Some(draft(90.0))).await;
    assert_eq!(code, 404);
    // A read-only token previews a draft (it writes nothing), and saves nothing.
    let ro = s.create("/v1/admin-tokens", json!({"name": "review", "read_only": true})).await["token"]
        .as_str()
        .unwrap()
        .to_owned();
    let with_ro = |path: String| {
        let (url, ro, body) = (format!("{}{}", s.url.trim_end_matches('/'), path), ro.clone(), draft(90.0));
        async move {
            reqwest::Client::new()
                .post(url)
                .bearer_auth(ro)
                .json(&body)
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }
    };
    assert_eq!(with_ro(format!("/v1/clusters/{cluster}/rules/{rule}/preview")).await, 200);
    assert_eq!(with_ro(format!("/v1/clusters/{cluster}/rules")).await, 403);
    // The same from `ctl`: the rule changed by a patch, by name; a new one from its fields.
    let out = s.ctl(&["rules", "--cluster", "c", "preview", "--rule", "cpu-high", "hold_s=30"]).await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains("edge-0") && text.contains("active"), "{text}");
    let out = s
        .ctl(&[
            "rules",
            "--cluster",
            "c",
            "preview",
            "--json",
            "name=new",
            "conditions=[{\"metric\":\"cpu\",\"comparison\":\">\",\"threshold\":50}]",
        ])
        .await;
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    assert!(v["items"].as_array().is_some_and(|i| i.iter().any(|r| r["node_name"] == "edge-0")), "{v}");
    let (_, r) = s.call(Method::GET, &format!("/v1/clusters/{cluster}/rules/{rule}"), None).await;
    assert_eq!(r["name"], "cpu-high", "a preview saves nothing: {r}");
    let (_, r) = s.call(Method::GET, &format!("/v1/clusters/{cluster}/rules/{rule}"), None).await;
    assert_eq!(r["acting_on"], json!(["edge-0"]));

    // Renaming keeps the action.
    let n = revs["items"][0]["number"].as_i64().unwrap();
    s.call(
        Method::PATCH,
        &format!("/v1/clusters/{cluster}/rules/{rule}"),
        Some(json!({"name": "cpu-very-high"})),
    )
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (_, revs) = s.call(Method::GET, &format!("/v1/clusters/{cluster}/revisions"), None).await;
    assert_eq!(revs["items"][0]["number"].as_i64().unwrap(), n, "renaming publishes nothing: {revs}");

    // CPU back to normal: recovers after recover-after (3 s) and hold-at-least (8 s).
    cpu(&metrics, 10.0);
    let cool = Instant::now();
    s.wait_for(&dns, Duration::from_secs(30), |v| all_answers(v).len() == 3).await;
    let cleared = cool.elapsed();
    let revs = s.stored_revisions(cluster).await;
    // The server's own times: the recovery revision is at least hold-at-least after the activation.
    let held_ms = at(&revs["items"][0]).millis_since(activated_at);
    println!(
        "cpu rule: restored {:.1} s after activation, {:.1} s after the CPU went down",
        held_ms as f64 / 1000.0,
        cleared.as_secs_f64()
    );
    assert!(held_ms >= 8000 && cleared >= Duration::from_secs(3), "{held_ms} ms, {cleared:?}");
    assert_eq!(
        revs["items"][0]["reason"], "Scheduling: cpu-very-high on edge-0 — remove the node recovered",
        "{revs}"
    );
    hooks
        .wait(Duration::from_secs(10), |got| {
            let trigger = got.iter().find(|(k, v)| k == "pd" && v["event_action"] == "trigger");
            got.iter().any(|(k, v)| k == "json" && v["status"] == "resolved")
                && got.iter().any(|(k, v)| k == "slack" && v["text"] == "[resolved] cpu-high · edge-0")
                && got.iter().any(|(k, v)| {
                    k == "pd"
                        && *v
                            == json!({"routing_key": "R0UT1NGKEY", "event_action": "resolve",
                                        "dedup_key": trigger.map(|t| t.1["dedup_key"].clone())})
                })
        })
        .await;
    mail.wait(Duration::from_secs(10), |m| {
        m.iter().any(|t| t.contains("Subject: resolved: scheduling_action"))
    })
    .await;
    // The system's audit entries are written by a task of their own, a moment after.
    let path = "/v1/audit?action=scheduling.recover";
    s.wait_for(path, Duration::from_secs(5), |v| v["items"].as_array().is_some_and(|i| !i.is_empty())).await;
    let (_, audit) = s.call(Method::GET, path, None).await;
    assert_eq!(audit["items"][0]["actor"], "system");

    // Active again, then a change of its conditions ends the action at once.
    cpu(&metrics, 97.0);
    s.wait_for(&dns, Duration::from_secs(20), |v| all_answers(v).len() == 2).await;
    let (st, _) = s
        .call(
            Method::PATCH,
            &format!("/v1/clusters/{cluster}/rules/{rule}"),
            Some(json!({"conditions": [{"metric": "cpu", "comparison": ">", "threshold": 98, "for_s": 2}]})),
        )
        .await;
    assert_eq!(st, 200);
    let ended = s.wait_for(&dns, Duration::from_secs(10), |v| all_answers(v).len() == 3).await;
    assert!(ended < Duration::from_secs(3), "at once: {ended:?}");
    let revs = s.stored_revisions(cluster).await;
    assert_eq!(revs["items"][0]["reason"], "Scheduling: cpu-very-high changed, its actions ended", "{revs}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn probe_loss_seen_from_one_region_switches_a_line_to_its_backup_group() {
    let temp = tempfile::tempdir().unwrap();
    let s = ServerProcess::start_in(&temp.path().join("server"), &["--allow-loopback-addresses"]).await;
    // Reachability waits an hour, so what moves the line is the rule alone.
    s.call(
        Method::PUT,
        "/v1/settings/probes",
        Some(json!({"interval_s": 5, "timeout_ms": 1000, "attempts": 2, "failing_before_unreachable_s": 3600, "answering_before_reachable_s": 5})),
    )
    .await;
    let east = s.create("/v1/regions", json!({"code": "cn-east", "name": "East China"})).await["id"]
        .as_i64()
        .unwrap();
    let quiet = s.create("/v1/regions", json!({"code": "cn-west", "name": "West China"})).await["id"]
        .as_i64()
        .unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let primary = EdgeServer::start(([127, 0, 0, 41], port).into()).await.unwrap();
    let _backup = EdgeServer::start(([127, 0, 0, 42], port).into()).await.unwrap();
    let cluster = s
        .create("/v1/clusters", json!({"name": "c", "domain": "cdn.test.example", "listeners": [{"port": port, "protocol": "http"}]}))
        .await["id"]
        .as_i64()
        .unwrap();
    let g1 = s.create(&format!("/v1/clusters/{cluster}/groups"), json!({"name": "telecom-east"})).await["id"]
        .as_i64()
        .unwrap();
    let g2 = s.create(&format!("/v1/clusters/{cluster}/groups"), json!({"name": "backup"})).await["id"]
        .as_i64()
        .unwrap();
    let line = s
        .create(
            &format!("/v1/clusters/{cluster}/lines"),
            json!({"name": "telecom-east", "group": g1, "backup_groups": [g2]}),
        )
        .await["id"]
        .as_i64()
        .unwrap();
    for (g, ip) in [(g1, "127.0.0.41"), (g2, "127.0.0.42")] {
        let n = s
            .create("/v1/nodes", json!({"cluster": cluster, "group": g, "name": format!("edge-{ip}")}))
            .await["id"]
            .as_i64()
            .unwrap();
        s.call(Method::PUT, &format!("/v1/nodes/{n}/addresses"), Some(json!([{"ip": ip}]))).await;
    }
    s.create(
        &format!("/v1/clusters/{cluster}/rules"),
        json!({"name": "east-loss", "line": line, "action": "backup_groups", "hold_s": 0, "recover_s": 5,
               "conditions": [{"metric": "probe_loss", "comparison": ">=", "threshold": 50, "for_s": 5, "aggregate": "avg", "region": east}]}),
    )
    .await;
    s.create(
        &format!("/v1/clusters/{cluster}/rules"),
        json!({"name": "west-loss", "line": line, "action": "backup_groups",
               "conditions": [{"metric": "probe_loss", "comparison": ">=", "threshold": 50, "for_s": 5, "region": quiet}]}),
    )
    .await;
    let _p = s.start_prober("east-1", east, temp.path()).await;
    let dns = format!("/v1/clusters/{cluster}/dns");
    s.wait_for(&dns, Duration::from_secs(20), |v| all_answers(v) == ["127.0.0.41"]).await;
    s.wait_for(&format!("/v1/nodes?cluster={cluster}"), Duration::from_secs(30), |_| true).await;
    s.wait_for("/v1/probers", Duration::from_secs(30), |v| !v["items"][0]["last_round"].is_null()).await;

    primary.stop().await;
    let switched = s.wait_for(&dns, Duration::from_secs(40), |v| all_answers(v) == ["127.0.0.42"]).await;
    println!(
        "probe-loss rule: line switched to its backup group {:.1} s after the edge stopped",
        switched.as_secs_f64()
    );
    let revs = s.stored_revisions(cluster).await;
    assert_eq!(
        revs["items"][0]["reason"],
        "Scheduling: east-loss on edge-127.0.0.41 — switch to backup groups activated",
        "{revs}"
    );
    let (_, p) = s.call(Method::GET, &format!("/v1/clusters/{cluster}/preview"), None).await;
    let west: Vec<&Value> =
        p["items"].as_array().unwrap().iter().filter(|r| r["rule_name"] == "west-loss").collect();
    assert!(
        !west.is_empty() && west.iter().all(|r| r["conditions"][0]["value"].is_null()),
        "no prober in that region: {p}"
    );
    let (_, node) = s.call(Method::GET, &format!("/v1/nodes?cluster={cluster}"), None).await;
    assert!(
        node["items"].as_array().unwrap().iter().all(|n| n["addresses"][0]["reachability"] == "reachable"),
        "{node}"
    );
}
