//! `vantage serve` as a real process: every object through HTTP and `vantage ctl`, bad input,
//! authentication on every route, restarts, and a crash during a burst of writes.

use reqwest::Method;
use serde_json::{Value, json};

use crate::harness::ServerProcess;

/// Builds one of everything; returns (region, cluster, group, backup group, line, node, rule).
async fn fleet(s: &ServerProcess) -> [i64; 7] {
    let region =
        s.create("/v1/regions", json!({"code": "ap-sg", "name": "Singapore"})).await["id"].as_i64().unwrap();
    let cluster = s
        .create(
            "/v1/clusters",
            json!({"name": "video", "domain": "cdn.example.net", "aliases": ["cdn.example.org"],
                   "listeners": [{"port": 80, "protocol": "http"}, {"port": 443, "protocol": "https", "proxy_protocol": true}]}),
        )
        .await["id"]
        .as_i64()
        .unwrap();
    let group = s
        .create(&format!("/v1/clusters/{cluster}/groups"), json!({"name": "sg-1", "region": region}))
        .await["id"]
        .as_i64()
        .unwrap();
    let backup = s.create(&format!("/v1/clusters/{cluster}/groups"), json!({"name": "sg-2"})).await["id"]
        .as_i64()
        .unwrap();
    let line = s
        .create(
            &format!("/v1/clusters/{cluster}/lines"),
            json!({"name": "default", "group": group, "backup_groups": [backup], "min_healthy": 1}),
        )
        .await["id"]
        .as_i64()
        .unwrap();
    let node =
        s.create("/v1/nodes", json!({"cluster": cluster, "group": group, "name": "edge-1"})).await["id"]
            .as_i64()
            .unwrap();
    let rule = s
        .create(
            &format!("/v1/clusters/{cluster}/rules"),
            json!({"name": "cpu-high", "line": line, "conditions": [{"metric": "cpu", "comparison": ">", "threshold": 90, "for_s": 60}]}),
        )
        .await["id"]
        .as_i64()
        .unwrap();
    [region, cluster, group, backup, line, node, rule]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_object_through_http() {
    let s = ServerProcess::start().await;
    let [region, cluster, group, _, line, node, rule] = fleet(&s).await;

    let (st, v) = s.call(Method::GET, &format!("/v1/regions/{region}"), None).await;
    assert_eq!((st, v["code"].as_str(), v["name"].as_str()), (200, Some("ap-sg"), Some("Singapore")));
    let (_, v) = s.call(Method::GET, &format!("/v1/clusters/{cluster}"), None).await;
    assert_eq!((v["ttl"].as_i64(), v["dns_mode"].as_str()), (Some(30), Some("automatic")));
    assert_eq!(v["listeners"][1]["proxy_protocol"], json!(true));
    let (_, v) = s.call(Method::GET, &format!("/v1/clusters/{cluster}/lines/{line}"), None).await;
    assert_eq!(v["group"].as_i64(), Some(group));
    let (_, v) = s.call(Method::GET, &format!("/v1/clusters/{cluster}/rules/{rule}"), None).await;
    assert_eq!(
        (v["hold_s"].as_i64(), v["action"].as_str(), v["match"].as_str()),
        (Some(300), Some("remove_node"), Some("all"))
    );

    // Changes are merge patches; unchanged fields stay.
    let (st, v) = s
        .call(
            Method::PATCH,
            &format!("/v1/clusters/{cluster}"),
            Some(json!({"ttl": 60, "check": {"path": "/up"}})),
        )
        .await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(
        (v["ttl"].as_i64(), v["check"]["path"].as_str(), v["domain"].as_str()),
        (Some(60), Some("/up"), Some("cdn.example.net"))
    );
    let (st, v) = s.call(Method::PATCH, &format!("/v1/nodes/{node}"), Some(json!({"enabled": false}))).await;
    assert_eq!((st, v["enabled"].as_bool(), v["name"].as_str()), (200, Some(false), Some("edge-1")));
    let (st, v) = s
        .call(
            Method::PATCH,
            &format!("/v1/nodes/{node}"),
            Some(json!({"also_probes": true, "enabled": false})),
        )
        .await;
    assert_eq!((st, v["also_probes"].as_bool()), (200, Some(true)), "{v}");
    let (st, _) = s
        .call(
            Method::PATCH,
            &format!("/v1/clusters/{cluster}/rules/{rule}"),
            Some(json!({"name": "cpu-very-high"})),
        )
        .await;
    assert_eq!(st, 200);

    // Scheduling addresses.
    let (st, v) = s
        .call(
            Method::PUT,
            &format!("/v1/nodes/{node}/addresses"),
            Some(json!([{"ip": "203.0.113.10", "level": "primary"}, {"ip": "198.51.100.10", "level": "backup1"}])),
        )
        .await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["source"], "configured");
    assert_eq!(v["configured"][1], json!({"ip": "198.51.100.10", "level": "backup1"}));

    // Probe settings.
    let (st, v) =
        s.call(Method::PUT, "/v1/settings/probes", Some(json!({"interval_s": 5, "timeout_ms": 1000}))).await;
    assert_eq!((st, v["interval_s"].as_i64(), v["attempts"].as_i64()), (200, Some(5), Some(3)));

    // Lists.
    for (path, n) in [
        ("/v1/regions".to_owned(), 1),
        ("/v1/clusters".to_owned(), 1),
        (format!("/v1/clusters/{cluster}/groups"), 2),
        (format!("/v1/clusters/{cluster}/lines"), 1),
        (format!("/v1/clusters/{cluster}/rules"), 1),
        ("/v1/nodes".to_owned(), 1),
        ("/v1/probers".to_owned(), 0),
    ] {
        let (st, v) = s.call(Method::GET, &path, None).await;
        assert_eq!((st, v["items"].as_array().map(Vec::len)), (200, Some(n)), "{path}");
    }

    // Audit: every change, with the actor.
    let (_, v) = s.call(Method::GET, "/v1/audit?action=node.set_addresses", None).await;
    assert_eq!(v["items"][0]["actor"], "admin:bootstrap");
    assert_eq!(v["items"][0]["object"], format!("node:{node}"));
    let (_, v) = s.call(Method::GET, "/v1/audit?action=scheduling.", None).await;
    let actions: Vec<&str> =
        v["items"].as_array().unwrap().iter().map(|e| e["action"].as_str().unwrap()).collect();
    assert_eq!(actions, ["scheduling.rule_update", "scheduling.rule_create"]);
    let (_, v) = s.call(Method::GET, "/v1/audit?action=system.probes_update", None).await;
    assert_eq!(v["items"][0]["metadata"]["after"]["interval_s"], 5);
    // Also probes is its own entry; the rest of the same patch is the node's update.
    let (_, v) = s.call(Method::GET, "/v1/audit?action=node.set_probe", None).await;
    assert_eq!(
        (&v["items"][0]["object"], &v["items"][0]["metadata"], v["items"].as_array().map(Vec::len)),
        (&json!(format!("node:{node}")), &json!({"before": false, "after": true}), Some(1)),
        "{v}"
    );
    let (_, v) = s.call(Method::GET, "/v1/audit?action=node.update", None).await;
    let updates: Vec<&Value> = v["items"].as_array().unwrap().iter().map(|e| &e["metadata"]).collect();
    assert_eq!(updates, [&json!({"enabled": false}), &json!({"enabled": false})], "{v}");

    // Deletes, in an order the references allow.
    for path in [
        format!("/v1/clusters/{cluster}/rules/{rule}"),
        format!("/v1/nodes/{node}"),
        format!("/v1/clusters/{cluster}/lines/{line}"),
        format!("/v1/clusters/{cluster}"),
        format!("/v1/regions/{region}"),
    ] {
        let (st, v) = s.call(Method::DELETE, &path, None).await;
        assert_eq!(st, 204, "{path}: {v}");
    }
    let (st, _) = s.call(Method::GET, &format!("/v1/clusters/{cluster}/groups/{group}"), None).await;
    assert_eq!(st, 404, "a cluster's groups go with it");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_names_the_field_and_changes_nothing() {
    let s = ServerProcess::start().await;
    let [region, cluster, group, _, line, node, _] = fleet(&s).await;
    let cases: Vec<(Method, String, Value, u16, &str, &str)> = vec![
        (
            Method::POST,
            "/v1/regions".into(),
            json!({"code": "AP SG", "name": "x"}),
            400,
            "code",
            "must be 2 to 32 lower-case",
        ),
        (
            Method::POST,
            "/v1/regions".into(),
            json!({"code": "ap-sg", "name": "Again"}),
            400,
            "code",
            "already exists",
        ),
        (
            Method::POST,
            "/v1/regions".into(),
            json!({"code": "eu", "name": "E", "colour": 1}),
            400,
            "colour",
            "unknown field",
        ),
        (
            Method::POST,
            "/v1/clusters".into(),
            json!({"name": "c2", "domain": "not a domain"}),
            400,
            "domain",
            "not a DNS name",
        ),
        (
            Method::POST,
            "/v1/clusters".into(),
            json!({"name": "c2", "domain": "cdn.example.org"}),
            400,
            "domain",
            "already served by cluster",
        ),
        (
            Method::POST,
            "/v1/clusters".into(),
            json!({"name": "c2", "domain": "c2.example.net", "ttl": 0}),
            400,
            "ttl",
            "must be between 1 and 86400",
        ),
        (
            Method::POST,
            "/v1/clusters".into(),
            json!({"name": "c2", "domain": "c2.example.net", "ttl": "x"}),
            400,
            "ttl",
            r#"must be a whole number, got the text "x""#,
        ),
        (
            Method::PATCH,
            format!("/v1/clusters/{cluster}"),
            json!({"listeners": []}),
            400,
            "listeners",
            "1 to 16 listeners",
        ),
        (
            Method::PATCH,
            format!("/v1/clusters/{cluster}"),
            json!({"check": {"window": 65}}),
            400,
            "check.window",
            "between 1 and 64",
        ),
        (
            Method::POST,
            format!("/v1/clusters/{cluster}/groups"),
            json!({"name": "g", "region": 999}),
            400,
            "region",
            "no region 999",
        ),
        (
            Method::POST,
            format!("/v1/clusters/{cluster}/lines"),
            json!({"name": "l2", "group": 999, "client_networks": ["10.0.0.0/8"]}),
            400,
            "group",
            "no node group 999",
        ),
        (
            Method::POST,
            format!("/v1/clusters/{cluster}/lines"),
            json!({"name": "l2", "group": group}),
            400,
            "client_networks",
            "already the default line",
        ),
        (
            Method::POST,
            format!("/v1/clusters/{cluster}/lines"),
            json!({"name": "l3", "group": group, "client_networks": ["10.0.0.0/33"]}),
            400,
            "client_networks[0]",
            "not an IP network",
        ),
        (
            Method::POST,
            format!("/v1/clusters/{cluster}/lines"),
            json!({"name": "l3", "group": group, "client_networks": ["10.0.0.1/8"]}),
            400,
            "client_networks[0]",
            "10.0.0.1/8 has host bits set: did you mean 10.0.0.0/8?",
        ),
        (
            Method::POST,
            format!("/v1/clusters/{cluster}/rules"),
            json!({"name": "r", "action": "backup_groups", "conditions": [{}]}),
            400,
            "line",
            "The rule needs a line of the cluster's DNS binding",
        ),
        (
            Method::POST,
            format!("/v1/clusters/{cluster}/rules"),
            json!({"name": "r", "line": 999, "conditions": [{}]}),
            400,
            "line",
            "The rule needs a line of the cluster's DNS binding",
        ),
        (
            Method::POST,
            format!("/v1/clusters/{cluster}/rules"),
            json!({"name": "r", "conditions": [{"threshold": -1}]}),
            400,
            "conditions[0].threshold",
            "between 0 and 1000000000000",
        ),
        (
            Method::POST,
            format!("/v1/clusters/{cluster}/rules"),
            json!({"name": "r", "conditions": [{"for_s": 3601}]}),
            400,
            "conditions[0].for_s",
            "between 0 and 3600",
        ),
        (
            Method::POST,
            format!("/v1/clusters/{cluster}/rules"),
            json!({"name": "r", "hold_s": 86401, "conditions": [{}]}),
            400,
            "hold_s",
            "between 0 and 86400",
        ),
        (
            Method::POST,
            "/v1/nodes".into(),
            json!({"cluster": cluster, "group": group, "name": "edge-1"}),
            400,
            "name",
            "already exists",
        ),
        (
            Method::POST,
            "/v1/nodes".into(),
            json!({"cluster": cluster, "group": group, "name": "e2", "speed": 1}),
            400,
            "speed",
            "unknown field",
        ),
        (
            Method::PATCH,
            format!("/v1/nodes/{node}"),
            json!({"also_probes": true, "group": (group + 1)}),
            400,
            "also_probes",
            "Give the node's group a region before the node probes",
        ),
        (
            Method::PUT,
            format!("/v1/nodes/{node}/addresses"),
            json!([{"ip": "10.0.0.0/8"}]),
            400,
            "addresses[0].ip",
            "Not a single unicast IP address: 10.0.0.0/8",
        ),
        (
            Method::PUT,
            format!("/v1/nodes/{node}/addresses"),
            json!([{"ip": "edge.example.net"}]),
            400,
            "addresses[0].ip",
            "Not a single unicast IP address: edge.example.net",
        ),
        (
            Method::PUT,
            format!("/v1/nodes/{node}/addresses"),
            json!([{"ip": "127.0.0.1"}]),
            400,
            "addresses[0].ip",
            "Not a single unicast IP address: 127.0.0.1",
        ),
        (
            Method::PUT,
            format!("/v1/nodes/{node}/addresses"),
            json!([{"ip": "198.51.100.1", "level": "backup1"}]),
            400,
            "addresses",
            "a primary address is required",
        ),
        (
            Method::PUT,
            format!("/v1/nodes/{node}/addresses"),
            json!([{"ip": "198.51.100.1", "level": "backup9"}]),
            400,
            "addresses[0].level",
            r#"must be one of primary, backup1, backup2, got "backup9""#,
        ),
        (
            Method::PUT,
            "/v1/settings/probes".into(),
            json!({"interval_s": 61}),
            400,
            "interval_s",
            "must be between 5 and 60, got 61",
        ),
        (
            Method::PUT,
            "/v1/settings/probes".into(),
            json!({"interval_s": 5, "timeout_ms": 5001}),
            400,
            "timeout_ms",
            "must not be longer than the interval",
        ),
        (
            Method::PUT,
            "/v1/settings/probes".into(),
            json!({"loss_pct": 0}),
            400,
            "loss_pct",
            "between 1 and 100",
        ),
        (Method::GET, "/v1/audit?limit=many".into(), Value::Null, 400, "limit", "whole number"),
        (Method::GET, "/v1/audit?colour=red".into(), Value::Null, 400, "colour", "unknown filter"),
        (
            Method::DELETE,
            format!("/v1/clusters/{cluster}/groups/{group}"),
            Value::Null,
            409,
            "",
            "to this node group",
        ),
        (
            Method::DELETE,
            format!("/v1/clusters/{cluster}/lines/{line}"),
            Value::Null,
            409,
            "",
            "rules still use this line: cpu-high",
        ),
        (Method::DELETE, format!("/v1/clusters/{cluster}"), Value::Null, 409, "", "1 node still belongs"),
        (Method::GET, "/v1/regions/424242".into(), Value::Null, 404, "", "Region 424242 not found"),
    ];
    let before =
        s.call(Method::GET, "/v1/audit?limit=10000", None).await.1["items"].as_array().unwrap().len();
    let _ = region;
    for (method, path, body, status, field, reason) in cases {
        let (st, v) = s.call(method.clone(), &path, (!body.is_null()).then_some(body.clone())).await;
        assert_eq!(st, status, "{method} {path} {body}: {v}");
        let e = &v["error"];
        if !field.is_empty() {
            assert_eq!(e["field"].as_str(), Some(field), "{method} {path} {body}: {v}");
        }
        assert!(e["reason"].as_str().unwrap_or_default().contains(reason), "{method} {path} {body}: {v}");
    }
    let after = s.call(Method::GET, "/v1/audit?limit=10000", None).await.1["items"].as_array().unwrap().len();
    assert_eq!(before, after, "a refused change writes nothing");
    let (_, v) = s.call(Method::GET, &format!("/v1/nodes/{node}/addresses"), None).await;
    assert_eq!(v["source"], "reported");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_v1_route_answers_401_without_a_valid_token() {
    let s = ServerProcess::start().await;
    let (st, doc) = s.call(Method::GET, "/v1/openapi.json", None).await;
    assert_eq!(st, 200);
    let paths = doc["paths"].as_object().unwrap();
    assert!(paths.len() >= 15, "{}", paths.len());
    let client = reqwest::Client::new();
    let mut checked = 0;
    for (path, item) in paths {
        for method in ["get", "post", "put", "patch", "delete"] {
            if item.get(method).is_none() {
                continue;
            }
            let url = format!("{}{}", s.url, path.replace("{id}", "1").replace("{child}", "2"));
            let m: Method = method.to_uppercase().parse().unwrap();
            for auth in [None, Some("vta_wrong"), Some("not-even-a-token")] {
                let mut r = client.request(m.clone(), &url).json(&json!({}));
                if let Some(a) = auth {
                    r = r.bearer_auth(a);
                }
                let resp = r.send().await.unwrap();
                assert_eq!(resp.status().as_u16(), 401, "{method} {path} with {auth:?}");
            }
            checked += 1;
        }
    }
    assert!(checked >= 30, "{checked} routes");
    let resp = client.get(format!("{}/v1/openapi.json", s.url)).send().await.unwrap();
    assert_eq!(resp.status().as_u16(), 401);
    // Health is open; metrics list the fleet, for admin tokens only (a read-only one will do).
    for p in ["/healthz", "/readyz"] {
        assert_eq!(client.get(format!("{}{p}", s.url)).send().await.unwrap().status().as_u16(), 200, "{p}");
    }
    for auth in [None, Some("vta_wrong")] {
        let mut r = client.get(format!("{}/metrics", s.url));
        if let Some(a) = auth {
            r = r.bearer_auth(a);
        }
        let resp = r.send().await.unwrap();
        assert_eq!(resp.status().as_u16(), 401, "/metrics with {auth:?}");
        let body: Value = resp.json().await.unwrap();
        assert_eq!(body["error"]["status"], 401, "{body}");
    }
    let made = s.create("/v1/admin-tokens", json!({"name": "prometheus", "read_only": true})).await;
    let scraper = made["token"].as_str().unwrap().to_owned();
    let metrics = client
        .get(format!("{}/metrics", s.url))
        .bearer_auth(&scraper)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for want in [
        r#"vantage_http_requests_total{route="/v1/openapi.json",method="GET",status="200"} 1"#,
        r#"vantage_http_requests_total{route="/v1/regions/{id}",method="GET",status="401"} 3"#,
        // The bootstrap token and Prometheus' read-only one.
        r#"vantage_objects{kind="admin_token"} 2"#,
        r#"vantage_store_latency_seconds_count{op="commit"}"#,
        "vantage_dns_queries_total",
    ] {
        assert!(metrics.contains(want), "{want} missing from:\n{metrics}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_tokens_are_shown_once_stored_hashed_and_revocable() {
    let s = ServerProcess::start().await;
    let mode = std::fs::metadata(s.dir.join("admin-token")).unwrap();
    assert_eq!(std::os::unix::fs::PermissionsExt::mode(&mode.permissions()) & 0o777, 0o600);
    let v = s.create("/v1/admin-tokens", json!({"name": "ci"})).await;
    let token = v["token"].as_str().unwrap().to_owned();
    assert!(token.starts_with("vta_"));
    let (_, list) = s.call(Method::GET, "/v1/admin-tokens", None).await;
    assert!(!list.to_string().contains(&token), "never listed");
    let db = std::fs::read(s.dir.join("vantage.db")).unwrap();
    assert!(!db.windows(token.len()).any(|w| w == token.as_bytes()), "only a hash is stored");
    let client = reqwest::Client::new();
    let ok = client.get(format!("{}/v1/regions", s.url)).bearer_auth(&token).send().await.unwrap();
    assert_eq!(ok.status().as_u16(), 200);
    let (_, audit) = s.call(Method::GET, "/v1/audit?action=admin_token.create&limit=1", None).await;
    assert_eq!(audit["items"][0]["actor"], "admin:bootstrap");
    let id = v["id"].as_i64().unwrap();
    let (st, _) = s.call(Method::DELETE, &format!("/v1/admin-tokens/{id}"), None).await;
    assert_eq!(st, 204);
    let gone = client.get(format!("{}/v1/regions", s.url)).bearer_auth(&token).send().await.unwrap();
    assert_eq!(gone.status().as_u16(), 401);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_finds_everything() {
    let temp = tempfile::tempdir().unwrap();
    let s = ServerProcess::start_in(temp.path(), &[]).await;
    fleet(&s).await;
    let mut before = Vec::new();
    for p in ["/v1/regions", "/v1/clusters", "/v1/nodes", "/v1/settings/probes", "/v1/admin-tokens"] {
        before.push(s.call(Method::GET, p, None).await.1);
    }
    let token = s.token.clone();
    s.stop().await;
    let s = ServerProcess::start_in(temp.path(), &[]).await;
    assert_eq!(s.token, token, "the admin token file is kept");
    for (i, p) in ["/v1/regions", "/v1/clusters", "/v1/nodes", "/v1/settings/probes", "/v1/admin-tokens"]
        .iter()
        .enumerate()
    {
        assert_eq!(s.call(Method::GET, p, None).await.1, before[i], "{p}");
    }
    // New objects get new ids.
    let r = s.create("/v1/regions", json!({"code": "eu-de", "name": "Frankfurt"})).await;
    assert!(before[2]["items"][0]["id"].as_i64().unwrap() < r["id"].as_i64().unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_during_a_burst_of_writes_loses_no_acknowledged_write() {
    let temp = tempfile::tempdir().unwrap();
    let s = ServerProcess::start_in(temp.path(), &[]).await;
    let acked = std::sync::Arc::new(std::sync::Mutex::new(Vec::<i64>::new()));
    let mut writers = Vec::new();
    for w in 0..8 {
        let url = s.url.clone();
        let token = s.token.clone();
        let acked = acked.clone();
        writers.push(tokio::spawn(async move {
            let client = reqwest::Client::new();
            for i in 0..2000 {
                let body = json!({"code": format!("r{w}-{i}"), "name": format!("Region {w} {i}")});
                match client.post(format!("{url}/v1/regions")).bearer_auth(&token).json(&body).send().await {
                    Ok(resp) if resp.status().as_u16() == 201 => {
                        if let Ok(v) = resp.json::<Value>().await {
                            acked.lock().unwrap().push(v["id"].as_i64().unwrap());
                        }
                    }
                    _ => break,
                }
            }
        }));
    }
    // Let the burst run, then kill the server without warning.
    let started = std::time::Instant::now();
    while acked.lock().unwrap().len() < 200 && started.elapsed() < std::time::Duration::from_secs(30) {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    s.kill9().await;
    for w in writers {
        let _ = w.await;
    }
    let acked = acked.lock().unwrap().clone();
    assert!(acked.len() >= 200, "the burst was acknowledged {} times before the kill", acked.len());
    let s = ServerProcess::start_in(temp.path(), &[]).await;
    let (_, v) = s.call(Method::GET, "/v1/regions", None).await;
    let stored: std::collections::HashSet<i64> =
        v["items"].as_array().unwrap().iter().map(|r| r["id"].as_i64().unwrap()).collect();
    let lost: Vec<i64> = acked.iter().filter(|id| !stored.contains(id)).copied().collect();
    assert!(lost.is_empty(), "{} acknowledged writes lost: {lost:?}", lost.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_object_through_ctl() {
    let s = ServerProcess::start_lab().await;
    let run = |args: Vec<String>| {
        let s = &s;
        async move {
            let refs: Vec<&str> = args.iter().map(String::as_str).collect();
            let out = s.ctl(&refs).await;
            (
                out.status.code(),
                String::from_utf8_lossy(&out.stdout).into_owned(),
                String::from_utf8_lossy(&out.stderr).into_owned(),
            )
        }
    };
    let a = |s: &str| s.split_whitespace().map(str::to_owned).collect::<Vec<_>>();
    let id = |json: &str| serde_json::from_str::<Value>(json).unwrap()["id"].as_i64().unwrap();

    let (code, out, err) = run(a("--json regions create code=ap-sg name=Singapore")).await;
    assert_eq!(code, Some(0), "{err}");
    let region = id(&out);
    let (_, out, _) = run(a("--json clusters create name=video domain=cdn.example.net ttl=60")).await;
    let cluster = id(&out);
    let (_, out, _) =
        run(a(&format!("--json groups --cluster {cluster} create name=sg region={region}"))).await;
    let group = id(&out);
    let (code, out, err) =
        run(a(&format!("--json lines --cluster {cluster} create name=default group={group}"))).await;
    assert_eq!(code, Some(0), "{err}");
    let line = id(&out);
    let (_, out, _) =
        run(a(&format!("--json nodes create cluster={cluster} group={group} name=edge-1"))).await;
    let node = id(&out);
    let (code, _, err) = run(vec![
        "rules".into(),
        "--cluster".into(),
        cluster.to_string(),
        "create".into(),
        "name=hot".into(),
        format!("line={line}"),
        r#"conditions=[{"metric":"cpu","comparison":">","threshold":90}]"#.into(),
    ])
    .await;
    assert_eq!(code, Some(0), "{err}");

    // Tables by default.
    let (code, out, _) = run(a("regions list")).await;
    assert_eq!(code, Some(0));
    assert!(out.starts_with("ID  CODE   NAME       CLIENTS  PROBERS  REQUESTS_DAY\n"), "{out}");
    assert!(out.contains("ap-sg  Singapore  -        0"), "{out}");
    let (_, out, _) = run(a(&format!("rules --cluster {cluster} list"))).await;
    assert!(out.contains("hot") && out.contains("remove_node"), "{out}");

    // Changes, addresses, settings, audit.
    let (code, out, _) = run(a(&format!("clusters update {cluster} ttl=120 check.path=/up"))).await;
    assert_eq!(code, Some(0));
    assert!(out.contains("ttl               120"), "{out}");
    let (code, out, err) =
        run(a(&format!("nodes set-addresses {node} 203.0.113.10 198.51.100.10:backup1"))).await;
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("configured") && out.contains("198.51.100.10"), "{out}");
    let (code, out, _) = run(a("settings set interval_s=5 timeout_ms=1000")).await;
    assert_eq!(code, Some(0));
    assert!(out.contains("interval_s") && out.contains(" 5"), "{out}");
    let (_, out, _) = run(a("audit --action node.set_addresses")).await;
    assert!(out.contains("admin:bootstrap  node.set_addresses"), "{out}");
    let (_, out, _) = run(a("admin-tokens create ci")).await;
    assert!(out.trim().starts_with("vta_"), "{out}");
    let (code, out, err) = run(a(&format!("probers token --name sg-1 --region {region}"))).await;
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.trim().starts_with("vtp_")
            && err.contains("start command: VANTAGE_TOKEN=vtp_")
            && err.contains(" vantage probe --server"),
        "{out}{err}"
    );
    let (_, out, _) = run(a("probers tokens")).await;
    assert!(out.contains("sg-1") && out.contains("valid"), "{out}");
    let (code, out, err) = run(a(&format!("nodes token {node}"))).await;
    assert_eq!(code, Some(0), "{err}");
    assert!(out.trim().starts_with("vtn_"), "{out}");
    let (code, out, err) = run(a(&format!("clusters dns {cluster}"))).await;
    assert_eq!(code, Some(0), "{err}");
    assert!(out.starts_with("cdn.example.net (TTL 120"), "{out}");
    let (code, out, _) = run(a(&format!("clusters revisions {cluster}"))).await;
    assert_eq!(code, Some(0));
    assert!(out.contains("Cluster ") && out.contains(" added"), "{out}");
    // The implicit line reads by its name, as the API and the UI name it.
    assert!(out.contains("default") && !out.contains("line 0"), "{out}");
    let (code, _, err) =
        run(a("webhooks create name=ops url=http://127.0.0.1:9/hook format=alertmanager")).await;
    assert_eq!(code, Some(0), "{err}");
    let (_, out, _) = run(a("webhooks list")).await;
    assert!(out.contains("alertmanager"), "{out}");
    let (code, _, _) = run(a("alerts")).await;
    assert_eq!(code, Some(0));
    let (code, out, _) = run(a(&format!("rules --cluster {cluster} preview"))).await;
    assert_eq!(code, Some(0));
    assert!(out.starts_with("RULE"), "{out}");
    // Each settings object's help offers its own fields only.
    let (_, mirrors, _) = run(a("settings mirrors --help")).await;
    assert!(mirrors.contains("threshold_pct") && !mirrors.contains("probe_budget_per_s"), "{mirrors}");
    let (_, detection, _) = run(a("settings detection --help")).await;
    assert!(detection.contains("probe_budget_per_s") && !detection.contains("threshold_pct"), "{detection}");
    // Beside the rules, each line's all-down policy and what it would answer.
    let outlook = out.lines().skip_while(|l| !l.starts_with("LINE")).nth(1).unwrap_or_default();
    assert!(
        out.contains("IF_ALL_DOWN") && outlook.starts_with("default") && outlook.contains("hold"),
        "{out}"
    );

    // Errors: the server's message, non-zero exit.
    let (code, _, err) = run(a(&format!("nodes set-addresses {node} 10.0.0.0/8"))).await;
    assert_eq!(code, Some(1));
    assert!(err.contains("addresses[0].ip: Not a single unicast IP address: 10.0.0.0/8"), "{err}");
    let (code, _, err) = run(a("clusters create name=x domain=y.example.net ttl=0")).await;
    assert_eq!(code, Some(1));
    assert!(err.contains("ttl: must be between 1 and 86400, got 0"), "{err}");

    // Deletes. The only node of the group the line answers with goes only with --force.
    let (code, _, err) = run(a(&format!("nodes delete {node}"))).await;
    assert_eq!(code, Some(1));
    assert!(err.contains("is the last enabled node of group") && err.contains("--force"), "{err}");
    let (code, _, err) = run(a(&format!("nodes delete {node} --force"))).await;
    assert_eq!(code, Some(0), "{err}");
    let (_, out, _) = run(a("--json nodes list")).await;
    assert_eq!(serde_json::from_str::<Value>(&out).unwrap()["items"], json!([]));
    let (code, _, err) = run(a("--server http://127.0.0.1:9 regions list")).await;
    assert_eq!(code, Some(1));
    assert!(err.contains("cannot reach the server"), "{err}");
}

/// `ctl audit | head -1`: the reader has gone when `ctl` prints, which ends it quietly with
/// success, not with a panic (exit 101).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_that_goes_away_ends_ctl_quietly() {
    let s = ServerProcess::start().await;
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_vantage"))
        .args(["ctl", "audit"])
        .env("VANTAGE_DATA_DIR", &s.dir)
        .env_remove("VANTAGE_URL")
        .env_remove("VANTAGE_ADMIN_TOKEN")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    // The reader closes its end before `ctl` has read the audit log to print.
    drop(child.stdout.take());
    let out = tokio::time::timeout(std::time::Duration::from_secs(10), child.wait_with_output())
        .await
        .expect("ctl ended")
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_stay_out_of_the_audit_and_the_data_directory_is_private() {
    use std::os::unix::fs::PermissionsExt;
    let s = ServerProcess::start().await;
    let secret = "c2VjcmV0LXRzaWcta2V5LWZvci1hdWRpdA==";
    let publisher = json!({"name": "primary", "server": "127.0.0.1:53", "key_name": "vantage",
                           "key_algorithm": "hmac-sha256", "key_secret": secret});
    let c = s
        .create("/v1/clusters", json!({"name": "c", "domain": "cdn.example.net", "publishers": [publisher]}))
        .await;
    // A change that carries the secret again (a patch that changes nothing is not audited).
    let (st, _) = s
        .call(
            Method::PATCH,
            &format!("/v1/clusters/{}", c["id"]),
            Some(json!({"publishers": [publisher], "ttl": 60})),
        )
        .await;
    assert_eq!(st, 200);
    let (_, audit) = s.call(Method::GET, "/v1/audit", None).await;
    let text = audit.to_string();
    assert!(text.contains("cluster.create") && text.contains("cluster.update"), "{text}");
    assert!(!text.contains(secret), "the TSIG secret is not in the audit log: {text}");
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&s.dir), 0o700);
    assert_eq!(mode(&s.dir.join("ca")), 0o700);
    assert_eq!(mode(&s.dir.join("vantage.db")), 0o600);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_of_the_wrong_shape_or_with_unknown_fields_change_nothing() {
    let s = ServerProcess::start().await;
    let [_, _, _, _, _, node, _] = fleet(&s).await;
    let (_, before) = s.call(Method::GET, "/v1/settings/probes", None).await;
    let (st, v) = s.call(Method::PUT, "/v1/settings/probes", Some(json!([]))).await;
    assert_eq!((st, v["error"]["field"].as_str()), (400, Some("body")), "{v}");
    let (_, after) = s.call(Method::GET, "/v1/settings/probes", None).await;
    assert_eq!(before, after, "an array resets nothing");
    let (st, v) = s.call(Method::POST, "/v1/regions", Some(json!(["xx", "X"]))).await;
    assert_eq!((st, v["error"]["field"].as_str()), (400, Some("body")), "{v}");
    let path = format!("/v1/nodes/{node}/addresses");
    let (_, before) = s.call(Method::GET, &path, None).await;
    let (st, v) = s.call(Method::PUT, &path, Some(json!([{"ip": "203.0.113.77", "levle": "backup2"}]))).await;
    assert_eq!(st, 400, "{v}");
    assert!(v["error"]["field"].as_str().unwrap().ends_with("levle"), "{v}");
    let (_, after) = s.call(Method::GET, &path, None).await;
    assert_eq!(before, after);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_before_any_handler_are_json_in_plain_words() {
    let s = ServerProcess::start().await;
    let send = |method: Method, path: &str, content_type: Option<&str>, body: &str| {
        let mut r = s.req(method, path).body(body.to_owned());
        if let Some(t) = content_type {
            r = r.header("content-type", t);
        }
        async move {
            let resp = r.send().await.unwrap();
            let status = resp.status().as_u16();
            let kind = resp.headers().get("content-type").map(|v| v.to_str().unwrap().to_owned());
            let v: Value = resp.json().await.unwrap_or(Value::Null);
            (status, kind, v)
        }
    };
    let cases = [
        (
            send(Method::POST, "/v1/regions", Some("application/json"), "{not json").await,
            400,
            Some("body"),
            "not valid JSON",
        ),
        (
            send(Method::POST, "/v1/regions", Some("text/plain"), r#"{"code":"xx"}"#).await,
            415,
            Some("body"),
            "Content-Type: application/json",
        ),
        (send(Method::GET, "/v1/clusters/abc", None, "").await, 400, Some("path"), r#""abc" is not an id"#),
        (
            send(Method::PATCH, "/v1/settings/probes", Some("application/json"), "{}").await,
            405,
            None,
            "does not take that method",
        ),
        (
            send(Method::PUT, "/v1/settings/probes", Some("application/json"), r#"{"interval_s":"ten"}"#)
                .await,
            400,
            Some("interval_s"),
            "must be a whole number, got the text \"ten\"",
        ),
    ];
    for ((status, kind, v), want_status, field, reason) in cases {
        assert_eq!(status, want_status, "{v}");
        assert_eq!(kind.as_deref(), Some("application/json"), "{v}");
        assert_eq!(v["error"]["status"], want_status, "{v}");
        assert_eq!(v["error"]["field"].as_str(), field, "{v}");
        assert!(v["error"]["reason"].as_str().unwrap().contains(reason), "{v}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_token_reads_everything_and_changes_nothing() {
    let s = ServerProcess::start().await;
    let [region, cluster, ..] = fleet(&s).await;
    let (st, t) =
        s.call(Method::POST, "/v1/admin-tokens", Some(json!({"name": "grafana", "read_only": true}))).await;
    assert_eq!(st, 201, "{t}");
    let token = t["token"].as_str().unwrap().to_owned();
    let as_viewer = |method: Method, path: &str, body: Option<Value>| {
        let mut r = reqwest::Client::new().request(method, format!("{}{path}", s.url)).bearer_auth(&token);
        if let Some(b) = body {
            r = r.json(&b);
        }
        async move {
            let resp = r.send().await.unwrap();
            (resp.status().as_u16(), resp.json::<Value>().await.unwrap_or(Value::Null))
        }
    };
    for path in [
        "/v1/clusters",
        "/v1/nodes",
        "/v1/audit",
        "/v1/settings/detection",
        &format!("/v1/clusters/{cluster}/revisions"),
    ] {
        let (st, v) = as_viewer(Method::GET, path, None).await;
        assert_eq!(st, 200, "{path}: {v}");
    }
    let (_, before) = s.call(Method::GET, "/v1/regions", None).await;
    for (method, path, body) in [
        (Method::POST, "/v1/regions".to_owned(), json!({"code": "xx", "name": "X"})),
        (Method::DELETE, format!("/v1/regions/{region}"), Value::Null),
        (Method::PUT, "/v1/settings/probes".to_owned(), json!({"interval_s": 20})),
        (Method::POST, "/v1/admin-tokens".to_owned(), json!({"name": "escalate"})),
    ] {
        let (st, v) = as_viewer(method.clone(), &path, Some(body)).await;
        assert_eq!(st, 403, "{method} {path}: {v}");
        assert!(v["error"]["reason"].as_str().unwrap().contains("read-only"), "{v}");
    }
    let (_, after) = s.call(Method::GET, "/v1/regions", None).await;
    assert_eq!(before, after, "nothing changed");
    let (_, list) = s.call(Method::GET, "/v1/admin-tokens", None).await;
    assert!(
        list["items"].as_array().unwrap().iter().any(|t| t["name"] == "grafana" && t["read_only"] == true),
        "{list}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_api_and_ui_over_tls_from_the_internal_ca() {
    let temp = tempfile::tempdir().unwrap();
    let s = ServerProcess::start_in(temp.path(), &["--api-tls-internal"]).await;
    assert!(s.url.starts_with("https://127.0.0.1:"), "{}", s.url);
    let ca = std::fs::read(temp.path().join("ca").join("ca.pem")).unwrap();
    let client = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(&ca).unwrap())
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let r = client.get(format!("{}/v1/clusters", s.url)).bearer_auth(&s.token).send().await.unwrap();
    assert_eq!(r.status(), 200);
    // Plain HTTP on the same port gets nowhere.
    let plain = s.url.replacen("https://", "http://", 1);
    let r = reqwest::Client::new().get(format!("{plain}/healthz")).send().await;
    assert!(r.is_err() || !r.unwrap().status().is_success());
    // The session cookie is Secure.
    let r = s.ui_login(&client).await;
    let cookie = r.headers().get("set-cookie").map(|v| v.to_str().unwrap().to_owned()).unwrap_or_default();
    assert!(cookie.contains("HttpOnly") && cookie.ends_with("; Secure"), "{} {cookie:?}", r.status());
    // ctl finds the server and trusts its CA through the data directory.
    let out = s.ctl(&["clusters", "list"]).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}
