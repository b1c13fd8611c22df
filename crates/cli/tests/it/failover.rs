//! The whole loop with real processes: one server, three probers in three regions, four edge
//! HTTP servers on loopback addresses, and a node that moves to its backup address when its
//! primary's edge stops — and back when it returns. One prober alone changes nothing.

use std::time::Duration;

use reqwest::Method;

use crate::harness::{LabFleet, all_answers, dig, lock_storage};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn primary_down_moves_to_backup_within_11s_and_back_and_one_prober_changes_nothing() {
    // `temp` holds the server's and the probers' directories: bound, so it lives to the end.
    let LabFleet { s, edges, cluster, nodes, mut probers, dns_path: dns, temp: _temp, .. } =
        LabFleet::start("cdn.test.example", 10).await;
    let (_, probers_list) = s.call(Method::GET, "/v1/probers", None).await;
    assert_eq!(probers_list["items"][0]["targets"], 4, "every address × listener");

    // `ctl events --follow` runs through the whole failover, as an operator's terminal would.
    let follow = s.ctl_running(&["events", "--follow", "--cluster", "video"]);
    // It is following once it has printed the cluster's recent events (the fleet's start made
    // some).
    follow.line(Duration::from_secs(10), |l| !l.trim().is_empty()).await;

    // The primary's edge stops: connections are refused.
    edges[0].stop().await;
    let stopped = std::time::Instant::now();
    // The first prober whose round sees it makes the server ask the two others to probe it at
    // once: their refusals arrive within moments, not a third and two thirds of an interval
    // (1.7 s and 3.3 s) later at their own phases.
    let mut first_refused = std::collections::BTreeMap::new();
    while first_refused.len() < 3 && stopped.elapsed() < Duration::from_secs(15) {
        let (_, results) = s.call(Method::GET, "/v1/nodes?x=1", None).await;
        let node = results["items"][0]["id"].clone();
        let (_, results) = s.call(Method::GET, &format!("/v1/nodes/{node}/results"), None).await;
        for r in results["items"].as_array().unwrap() {
            if r["address"] == "127.0.0.10" && r["error"] == "refused" {
                let at: vantage_core::Timestamp = serde_json::from_value(r["checked"].clone()).unwrap();
                first_refused.entry(r["prober"].to_string()).or_insert(at);
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let times: Vec<_> = first_refused.values().copied().collect();
    let spread = times.iter().max().unwrap().millis_since(*times.iter().min().unwrap());
    println!("failover: the three probers' first refusals within {spread} ms");
    assert!(times.len() == 3 && spread <= 500, "{first_refused:?}");
    // Before the verdict the address is still reachable and in DNS, but failing, with when it
    // turns unreachable: in the node's view, in `ctl nodes addresses` and in /metrics.
    let node = format!("/v1/nodes/{}", nodes[0]);
    s.wait_for(&node, Duration::from_secs(5), |v| {
        let a = &v["addresses"][0];
        a["condition"] == "failing" && a["reachability"] == "reachable" && a["changes_at"].is_string()
    })
    .await;
    // The stream said so as the pass decided it, with who sees it.
    let failing = follow
        .line(Duration::from_secs(10), |l| {
            l.contains("address_failing") && l.contains("127.0.0.10 of edge-0 is failing: ")
        })
        .await;
    println!("failover: ctl events --follow printed\n{failing}");
    assert!(
        failing.contains(" of 3 probers see it failing (") && failing.contains("unreachable in "),
        "{failing}"
    );
    let out = s.ctl(&["nodes", "addresses", &nodes[0].to_string()]).await;
    let table = String::from_utf8_lossy(&out.stdout);
    let row = table.lines().find(|l| l.starts_with("127.0.0.10 ")).unwrap_or_default();
    assert!(row.contains("failing — unreachable in ") && row.contains(" of 3"), "{table}");
    let out = s.ctl(&["status"]).await;
    let status = String::from_utf8_lossy(&out.stdout);
    assert!(
        status
            .lines()
            .any(|l| l.contains("127.0.0.10 primary  failing — unreachable in") && l.ends_with(", in DNS")),
        "{status}"
    );
    // How long it has failed stands apart from when it turns, and no count reads as a fault.
    assert!(status.contains(", failing for "), "{status}");
    assert!(!status.contains(" in 0s") && !status.contains(" 0 other"), "{status}");
    let text = s.metrics().await;
    assert!(
        text.lines().any(|l| l.starts_with("vantage_address_failing{")
            && l.contains("address=\"127.0.0.10\"")
            && l.ends_with(" 1")),
        "{text}"
    );
    s.wait_for(&dns, Duration::from_secs(30), |v| {
        let a = all_answers(v);
        a.contains(&"127.0.0.11".to_owned()) && !a.contains(&"127.0.0.10".to_owned())
    })
    .await;
    let failover = stopped.elapsed();
    println!("failover: primary stopped → backup published in {:.1} s", failover.as_secs_f64());
    assert!(failover <= Duration::from_secs(11), "took {failover:?}");
    // The built-in DNS answers the new records.
    assert_eq!(dig(s.dns(), "cdn.test.example").await, ["127.0.0.11", "127.0.0.12", "127.0.0.13"]);
    // The stored list catches up with what DNS serves (it is stored right after).
    let revisions = format!("/v1/clusters/{cluster}/revisions");
    s.wait_for(&revisions, Duration::from_secs(5), |v| v["items"][0]["records"]["all"][0] == "127.0.0.11")
        .await;
    let (_, revs) = s.call(Method::GET, &revisions, None).await;
    assert_eq!(
        revs["items"][0]["reason"],
        "Node health changed: 127.0.0.10 of edge-0 unreachable; line default: 127.0.0.11 in, 127.0.0.10 out"
    );
    // The stream follows with the verdict, the level and the revision with its records per line.
    follow
        .line(Duration::from_secs(10), |l| {
            l.contains("address_unreachable") && l.contains("127.0.0.10 of edge-0 is unreachable: 3 of 3")
        })
        .await;
    follow
        .line(Duration::from_secs(10), |l| {
            l.contains("level_changed")
                && l.contains("edge-0 answers with its backup1 addresses (127.0.0.11), was primary")
        })
        .await;
    follow
        .line(Duration::from_secs(10), |l| {
            l.contains("revision")
                && l.ends_with("default: 127.0.0.11 127.0.0.12 127.0.0.13 (+127.0.0.11 −127.0.0.10)")
        })
        .await;
    // The stored list says the same, in order, for the node.
    // (Stored by a task of their own, a moment after they were streamed.)
    let stored = format!("/v1/events?node={}&since=15m", nodes[0]);
    s.wait_for(&stored, Duration::from_secs(5), |v| {
        v["items"].as_array().is_some_and(|e| e.iter().any(|e| e["kind"] == "address_unreachable"))
    })
    .await;
    let (_, events) = s.call(Method::GET, &stored, None).await;
    let kinds: Vec<&str> =
        events["items"].as_array().unwrap().iter().map(|e| e["kind"].as_str().unwrap()).collect();
    let at = |k: &str| kinds.iter().position(|x| *x == k).unwrap_or_else(|| panic!("no {k}: {events}"));
    assert!(
        at("address_failing") < at("address_unreachable")
            && kinds.iter().rposition(|x| *x == "level_changed") > Some(at("address_unreachable")),
        "{kinds:?}"
    );
    let (status, refused) = s.call(Method::GET, "/v1/events?kind=nonsense", None).await;
    assert_eq!((status, refused["error"]["field"].as_str()), (400, Some("kind")), "{refused}");
    // The difference across the failover, line by line, with the revisions in between.
    let n = revs["items"][0]["number"].as_u64().unwrap();
    let out = s.ctl(&["clusters", "diff", &cluster.to_string(), &(n - 2).to_string(), &n.to_string()]).await;
    let diff = String::from_utf8_lossy(&out.stdout);
    println!("failover: ctl clusters diff reads\n{diff}");
    assert!(
        diff.contains("\nline default  127.0.0.11 127.0.0.12 127.0.0.13  (+127.0.0.11 −127.0.0.10)\n"),
        "{diff}"
    );
    assert!(
        diff.contains("failing, TTL 15 s")
            && diff.contains("127.0.0.10 of edge-0 unreachable; line default:"),
        "{diff}"
    );
    let path = |a: u64, b: u64| format!("/v1/clusters/{cluster}/revisions/{a}/diff/{b}");
    let (status, refused) = s.call(Method::GET, &path(n, n), None).await;
    assert_eq!((status, refused["error"]["field"].as_str()), (400, Some("to")), "{refused}");
    let (status, _) = s.call(Method::GET, &path(n, n + 1000), None).await;
    assert_eq!(status, 404);
    let (_, node) = s.call(Method::GET, "/v1/nodes?x=1", None).await;
    let edge0 = &node["items"].as_array().unwrap()[0];
    assert_eq!(edge0["addresses"][0]["reachability"], "unreachable", "{edge0}");
    assert_eq!(edge0["addresses"][1]["in_use"], true, "{edge0}");
    // Since when: the node's level and the line's records date from the failover's revision.
    let (_, served) = s.call(Method::GET, &dns, None).await;
    assert_eq!(served["lines"][0]["since"], revs["items"][0]["at"], "{served}");
    assert_eq!(edge0["level_since"], revs["items"][0]["at"], "{edge0}");
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

    // `ctl status` on one screen: the probers, the alert, what DNS answers and why, and the
    // node that is not healthy, with since when.
    let out = s.ctl(&["status"]).await;
    let status = String::from_utf8_lossy(&out.stdout);
    println!("failover: ctl status reads\n{status}");
    assert!(out.status.success(), "{status}{}", String::from_utf8_lossy(&out.stderr));
    assert!(status.starts_with("probers   3 of 3 online\nalerts    1 firing\n"), "{status}");
    assert!(status.contains("address_unreachable") && status.contains("127.0.0.10 of edge-0 is unreachable"));
    assert!(status.contains(": Node health changed: 127.0.0.10 of edge-0 unreachable;"), "{status}");
    assert!(status.contains("  line    default  127.0.0.11 127.0.0.12 127.0.0.13  since "), "{status}");
    assert!(
        status
            .lines()
            .any(|l| l.contains("127.0.0.10 primary  unreachable since") && l.ends_with("3 of 3 failing")),
        "{status}"
    );
    assert!(status.trim_end().ends_with("2 other nodes healthy"), "{status}");

    // `/metrics` says the same.
    let text = s.metrics().await;
    let series = |name: &str, address: &str| {
        text.lines()
            .find(|l| l.starts_with(name) && l.contains(&format!("address=\"{address}\"")))
            .unwrap_or_else(|| panic!("no {name} for {address} in:\n{text}"))
            .rsplit(' ')
            .next()
            .unwrap()
            .to_owned()
    };
    assert_eq!(series("vantage_address_reachable{", "127.0.0.10"), "0");
    assert_eq!(series("vantage_address_reachable{", "127.0.0.11"), "1");
    assert_eq!(series("vantage_address_probers_failing{", "127.0.0.10"), "3");
    // The first outage is no flap; every probed address:port has a measured probe rate.
    assert_eq!(series("vantage_address_damping_multiplier{", "127.0.0.10"), "1");
    assert!(text.contains("vantage_target_probe_rate{target=\"127.0.0.10:"), "{text}");
    assert!(
        text.lines().any(|l| l.starts_with("vantage_node_level{")
            && l.contains("node=\"edge-0\"")
            && l.ends_with(" 1")),
        "{text}"
    );
    assert!(text.contains("vantage_alerts_firing{kind=\"address_unreachable\"} 1"), "{text}");
    assert!(text.lines().any(|l| l.starts_with("vantage_prober_online{") && l.ends_with(" 1")), "{text}");

    // It comes back: primary again after answering-before-reachable.
    edges[0].restart().await.unwrap();
    let recovery = s
        .wait_for(&dns, Duration::from_secs(30), |v| all_answers(v).contains(&"127.0.0.10".to_owned()))
        .await;
    println!("recovery: primary restarted → primary published in {:.1} s", recovery.as_secs_f64());
    assert!(recovery >= Duration::from_secs(5), "not before answering-before-reachable: {recovery:?}");
    follow
        .line(Duration::from_secs(10), |l| {
            l.contains("address_recovering") && l.contains("127.0.0.10 of edge-0 answers again: ")
        })
        .await;
    follow
        .line(Duration::from_secs(10), |l| {
            l.contains("address_reachable") && l.contains("127.0.0.10 of edge-0 is reachable again")
        })
        .await;
    follow
        .line(Duration::from_secs(10), |l| {
            l.contains("alert_resolved") && l.contains("alert resolved after ")
        })
        .await;
    println!("failover: ctl events --follow printed in all\n{}", follow.text());

    // One prober alone: stop it; with results from the two others nothing changes. (DNS takes
    // a revision before it is stored: the stored list catches up with what DNS serves first.)
    let (_, served) = s.call(Method::GET, &dns, None).await;
    let n = served["revision"].as_i64().unwrap();
    s.wait_for(&revisions, Duration::from_secs(5), |v| v["items"][0]["number"].as_i64() == Some(n)).await;
    probers.pop().unwrap().kill().await;
    // Its results stop counting after 15 s; it is offline after 30 s (3 intervals, at least 30 s).
    tokio::time::sleep(Duration::from_secs(32)).await;
    let (_, after) = s.call(Method::GET, &revisions, None).await;
    assert_eq!(after["items"][0]["number"].as_i64().unwrap(), n, "{after}");
    let (_, v) = s.call(Method::GET, &dns, None).await;
    assert_eq!(all_answers(&v), ["127.0.0.10", "127.0.0.12", "127.0.0.13"]);
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
    // `ctl alerts` says how long the resolved outage lasted.
    let out = s.ctl(&["alerts"]).await;
    let alerts = String::from_utf8_lossy(&out.stdout);
    let row = alerts
        .lines()
        .find(|l| l.contains("resolved") && l.contains("address_unreachable"))
        .unwrap_or_default();
    assert!(!row.ends_with('-') && !row.ends_with("so far") && row.ends_with('s'), "{alerts}");
    s.wait_for("/v1/alerts", Duration::from_secs(20), |v| {
        v["open"].as_array().is_some_and(|o| {
            o.iter().any(|a| a["kind"] == "prober_offline" && a["summary"] == "prober prober-2 is offline")
        })
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn with_storage_locked_verdicts_still_follow_the_fleet_into_dns() {
    let LabFleet { s, edges, cluster, probers: _probers, dns_path: _, temp: _temp, .. } =
        LabFleet::start("cdn.locked.example", 40).await;
    let lock = lock_storage(&s.dir).await;
    edges[0].stop().await;
    // Reports' results cannot be stored, but verdicts come from memory: the backup still reaches
    // the built-in DNS, which takes a revision before the driver tries to store it.
    let started = std::time::Instant::now();
    let want = ["127.0.0.41", "127.0.0.42", "127.0.0.43"];
    while dig(s.dns(), "cdn.locked.example").await != want {
        assert!(started.elapsed() < Duration::from_secs(60), "no failover with storage locked");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    println!(
        "storage locked: primary stopped → backup in DNS after {:.1} s",
        started.elapsed().as_secs_f64()
    );
    // Storage back: the revision that waited in memory is stored, with its own time and reason.
    drop(lock);
    s.wait_for(&format!("/v1/clusters/{cluster}/revisions"), Duration::from_secs(30), |v| {
        v["items"][0]["records"]["all"] == serde_json::json!(want)
            && v["items"][0]["reason"]
                .as_str()
                .is_some_and(|r| r.starts_with("Node health changed: 127.0.0.40 of edge-0 unreachable"))
    })
    .await;
}
