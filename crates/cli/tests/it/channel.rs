//! The agent channel with real `vantage probe` and `vantage agent` processes: enrollment,
//! the prober list, node heartbeats, and every kind of bad input refused with nothing stored.

use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};
use vantage_agent::{ChannelClient, Error as AgentError, StateDir};
use vantage_core::result::{Attempt, ProbeResult, Stages};
use vantage_core::wire;

use crate::harness::{AgentProcess, ServerProcess};

fn refused_with(e: AgentError, status: u16, text: &str) {
    match e {
        AgentError::Refused { status: s, reason, .. } => {
            assert_eq!(s, status, "{reason}");
            assert!(reason.contains(text), "{reason:?} lacks {text:?}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// A refusal in the channel's JSON error shape, naming `field`.
fn refused_on(e: AgentError, status: u16, field: &str) {
    match e {
        AgentError::Refused { status: s, field: f, reason } => {
            assert_eq!((s, f.as_deref()), (status, Some(field)), "{reason}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}

fn result(target: &str) -> ProbeResult {
    ProbeResult {
        target: target.into(),
        attempts: vec![Attempt { stages: Stages::ALL, rtt_us: 900, error: None }],
        hls: None,
        cert_not_after: None,
        failed_at: None,
    }
}

fn report(results: Vec<ProbeResult>) -> wire::Report {
    let now = vantage_server::now();
    wire::Report { started_at: now, finished_at: now, version: "test".into(), results, confirmation: false }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn enrollment_roles_and_bad_input_are_refused_and_nothing_is_stored() {
    let temp = tempfile::tempdir().unwrap();
    let s = ServerProcess::start_in(&temp.path().join("server"), &["--allow-loopback-addresses"]).await;
    let (agent_url, ca) = s.channel();

    // No region yet.
    let (st, v) = s.call(Method::POST, "/v1/probers/tokens", Some(json!({"name": "p"}))).await;
    assert_eq!((st, v["error"]["reason"].as_str()), (400, Some("Create a region first")), "{v}");
    let region =
        s.create("/v1/regions", json!({"code": "ap-sg", "name": "Singapore"})).await["id"].as_i64().unwrap();
    let (st, v) = s
        .call(
            Method::POST,
            "/v1/probers/tokens",
            Some(json!({"name": "p", "region": region, "valid_for_s": 60})),
        )
        .await;
    assert_eq!((st, v["error"]["field"].as_str()), (400, Some("valid_for_s")), "{v}");
    let (st, v) = s
        .call(Method::POST, "/v1/probers/tokens", Some(json!({"name": "x".repeat(65), "region": region})))
        .await;
    assert_eq!((st, v["error"]["field"].as_str()), (400, Some("name")), "{v}");

    // A token for "P1" made before any prober exists: names compare without case, so it
    // cannot enroll beside "p1" later.
    let upper = s.create("/v1/probers/tokens", json!({"name": "P1", "region": region})).await;

    // A wrong CA fingerprint: the prober refuses to send its token.
    let t = s.create("/v1/probers/tokens", json!({"name": "p1", "region": region})).await;
    assert!(t["token"].as_str().unwrap().starts_with("vtp_"));
    assert_eq!(t["ca_sha256"].as_str(), Some(ca.as_str()));
    assert_eq!(t["server"].as_str(), Some(agent_url.as_str()), "the port the channel really listens on");
    let command = t["command"].as_str().unwrap();
    assert!(command.starts_with("VANTAGE_TOKEN=vtp_") && command.contains(" vantage probe --server"), "{t}");
    assert!(!command.contains("--token"), "the token stays off the command line: {command}");
    let token = t["token"].as_str().unwrap().to_owned();
    let wrong = "00".repeat(32);
    let state1 = temp.path().join("p1");
    let p = AgentProcess::start(
        "probe",
        &agent_url,
        &token,
        &wrong,
        &state1,
        &[],
        &temp.path().join("p1-wrong.log"),
    );
    assert_ne!(p.wait(Duration::from_secs(20)).await, Some(0));
    let log = std::fs::read_to_string(temp.path().join("p1-wrong.log")).unwrap();
    assert!(log.contains("CA fingerprint mismatch"), "{log}");
    let (_, tokens) = s.call(Method::GET, "/v1/probers/tokens", None).await;
    assert_eq!(tokens["items"][0]["state"], "valid", "the token was never sent: {tokens}");

    // The right one enrolls; the key stays on the host (0600).
    let prober =
        AgentProcess::start("probe", &agent_url, &token, &ca, &state1, &[], &temp.path().join("p1.log"));
    // Online once it asked for work with its new certificate (its first round is reported).
    s.wait_for("/v1/probers", Duration::from_secs(20), |v| {
        v["items"][0]["status"] == "online" && !v["items"][0]["last_round"].is_null()
    })
    .await;
    let key = std::fs::metadata(state1.join("key.pem")).unwrap();
    assert_eq!(std::os::unix::fs::PermissionsExt::mode(&key.permissions()) & 0o777, 0o600);
    let (_, audit) = s.call(Method::GET, "/v1/audit?action=probe.", None).await;
    let entries: Vec<(&str, &str)> = audit["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (a["action"].as_str().unwrap(), a["actor"].as_str().unwrap()))
        .collect();
    let (_, probers) = s.call(Method::GET, "/v1/probers", None).await;
    let pid = &probers["items"][0]["id"];
    assert_eq!(
        entries,
        [
            ("probe.enroll", format!("prober:{pid}").as_str()),
            ("probe.token_create", "admin:bootstrap"),
            ("probe.token_create", "admin:bootstrap")
        ],
        "the prober enrolls itself"
    );

    // A used token is refused.
    let again = AgentProcess::start(
        "probe",
        &agent_url,
        &token,
        &ca,
        &temp.path().join("p1b"),
        &[],
        &temp.path().join("p1b.log"),
    );
    assert_ne!(again.wait(Duration::from_secs(20)).await, Some(0));
    let log = std::fs::read_to_string(temp.path().join("p1b.log")).unwrap();
    assert!(log.contains("already used"), "{log}");

    // "P1" is "p1": no new token for it, and the earlier one does not enroll.
    let (st, v) =
        s.call(Method::POST, "/v1/probers/tokens", Some(json!({"name": "P1", "region": region}))).await;
    assert_eq!((st, v["error"]["field"].as_str()), (400, Some("name")), "{v}");
    let twin = AgentProcess::start(
        "probe",
        &agent_url,
        upper["token"].as_str().unwrap(),
        &ca,
        &temp.path().join("p1-upper"),
        &[],
        &temp.path().join("p1-upper.log"),
    );
    assert_ne!(twin.wait(Duration::from_secs(20)).await, Some(0));
    let log = std::fs::read_to_string(temp.path().join("p1-upper.log")).unwrap();
    assert!(log.contains("already exists"), "{log}");
    let (_, probers) = s.call(Method::GET, "/v1/probers", None).await;
    assert_eq!(probers["items"].as_array().map(Vec::len), Some(1), "{probers}");

    // A node: cluster, group with a region, node, token, `vantage agent` with a metrics file.
    let cluster = s.create("/v1/clusters", json!({"name": "c", "domain": "cdn.test.example"})).await["id"]
        .as_i64()
        .unwrap();
    let group = s
        .create(&format!("/v1/clusters/{cluster}/groups"), json!({"name": "g", "region": region}))
        .await["id"]
        .as_i64()
        .unwrap();
    let node =
        s.create("/v1/nodes", json!({"cluster": cluster, "group": group, "name": "edge-1"})).await["id"]
            .as_i64()
            .unwrap();
    let nt = s.create("/v1/nodes/tokens", json!({"node": node})).await;
    assert!(nt["token"].as_str().unwrap().starts_with("vtn_"));
    let metrics = temp.path().join("metrics.json");
    std::fs::write(&metrics, r#"{"cpu_pct": 42.5, "load1": 0.5, "load5": 0.4, "load15": 0.3, "memory_used_bytes": 1000, "memory_total_bytes": 4000, "egress_mbps": 12.0, "connections": 7}"#).unwrap();
    let state_n = temp.path().join("n1");
    let agent = AgentProcess::start(
        "agent",
        &agent_url,
        nt["token"].as_str().unwrap(),
        &ca,
        &state_n,
        &[
            "--metrics-file",
            metrics.to_str().unwrap(),
            "--address",
            "127.0.0.20",
            "--heartbeat-interval",
            "1s",
        ],
        &temp.path().join("n1.log"),
    );
    let n = s.wait_for(&format!("/v1/nodes/{node}"), Duration::from_secs(20), |v| v["online"] == true).await;
    let _ = n;
    let (_, v) = s.call(Method::GET, &format!("/v1/nodes/{node}"), None).await;
    assert_eq!(v["metrics"]["cpu_pct"], 42.5, "{v}");
    assert_eq!(v["reported_addresses"], json!(["127.0.0.20"]), "{v}");
    assert_eq!(
        v["addresses"][0]["source"], "reported",
        "reported addresses are used while none are configured: {v}"
    );
    assert!(v["capabilities"].as_array().unwrap().iter().any(|c| c == "metrics-v1"), "{v}");
    // This agent answers the health endpoint: the cluster's listeners follow its check.
    let (_, v) = s.call(Method::GET, &format!("/v1/clusters/{cluster}"), None).await;
    assert!(v.get("tcp_fallback").is_none(), "{v}");

    // Each role may call only its own endpoints.
    let prober_client = ChannelClient::open(StateDir::new(&state1), None).unwrap();
    let node_client = ChannelClient::open(StateDir::new(&state_n), None).unwrap();
    let e = node_client.get::<wire::Work>(wire::PROBER_WORK).await.unwrap_err();
    refused_with(e, 403, "a node certificate cannot call prober endpoints");
    let hb = wire::Heartbeat {
        version: "t".into(),
        hostname: "h".into(),
        metrics: None,
        addresses: vec![],
        capabilities: vec![],
        links: vec![],
    };
    let e = prober_client.post::<_, wire::HeartbeatReply>(wire::NODE_HEARTBEAT, &hb).await.unwrap_err();
    refused_with(e, 403, "a prober certificate cannot call node endpoints");
    // An agent without probe-health-v1 (as an older one would report): the cluster's
    // listeners are probed by TCP connect, and the cluster says why.
    agent.kill().await;
    let older = wire::Heartbeat { addresses: vec!["127.0.0.20".parse().unwrap()], ..hb.clone() };
    node_client.post::<_, wire::HeartbeatReply>(wire::NODE_HEARTBEAT, &older).await.unwrap();
    let why = "listeners are probed by TCP connect: the agent of node edge-1 does not report probe-health-v1";
    let (_, v) = s.call(Method::GET, &format!("/v1/clusters/{cluster}"), None).await;
    assert_eq!(v["tcp_fallback"], why, "{v}");
    let out = s.ctl(&["clusters", "get", "c"]).await;
    assert!(String::from_utf8_lossy(&out.stdout).contains(why), "{out:?}");
    let e = node_client.get::<wire::Work>(wire::NODE_WORK).await.unwrap_err();
    refused_with(e, 403, "this node does not probe");

    // Reports: too many results, and targets it was not given; nothing is stored.
    let work: wire::Work = prober_client.get(wire::PROBER_WORK).await.unwrap();
    assert_eq!(work.targets.len(), 1, "127.0.0.20 × port 80");
    let method = work.checks[work.targets[0].check as usize].method();
    assert_eq!(method, Some(vantage_core::check::Method::Tcp), "the fallback");
    let key = work.targets[0].key.clone();
    let pid = work.id;
    let (_, before) = s.call(Method::GET, &format!("/v1/probers/{pid}/results"), None).await;
    let too_many: Vec<ProbeResult> = (0..=wire::MAX_RESULTS).map(|_| result(&key)).collect();
    let e = prober_client.post_no_content(wire::PROBER_REPORT, &report(too_many)).await.unwrap_err();
    refused_with(e, 413, "at most 10000 results");
    let e = prober_client
        .post_no_content(wire::PROBER_REPORT, &report(vec![result(&key), result("n999/203.0.113.9/80")]))
        .await
        .unwrap_err();
    refused_with(e, 400, "was not given to this prober");
    // Hostile endpoint reports: negative figures, a positional tuple, unknown fields; each
    // refused in the JSON error shape, naming its field.
    let hls = json!({"reachable": true, "manifest_valid": true, "segment_fetchable": true});
    let hostile = [
        (json!({"segment_age_s": -5}), "results[0].hls.segment_age_s"),
        (json!({"ttfb_ms": -1}), "results[0].hls.ttfb_ms"),
        (json!([true, true, true, -5]), "results[0].hls"),
        (json!({"extra": 1}), "results[0].hls.extra"),
    ];
    for (detail, field) in hostile {
        let mut body = serde_json::to_value(report(vec![result(&key)])).unwrap();
        body["results"][0]["hls"] = match detail {
            Value::Object(extra) => {
                let mut h = hls.clone();
                h.as_object_mut().unwrap().extend(extra);
                h
            }
            tuple => tuple,
        };
        let e = prober_client.post_no_content(wire::PROBER_REPORT, &body).await.unwrap_err();
        refused_on(e, 400, field);
    }
    let mut body = serde_json::to_value(report(vec![result(&key)])).unwrap();
    body["results"][0]["note"] = json!("x");
    refused_on(
        prober_client.post_no_content(wire::PROBER_REPORT, &body).await.unwrap_err(),
        400,
        "results[0].note",
    );
    let (_, after) = s.call(Method::GET, &format!("/v1/probers/{pid}/results"), None).await;
    assert_eq!(before, after, "a refused report stores nothing");

    // Disabling a prober deletes its results and the channel refuses it; deleting revokes it.
    s.wait_for(&format!("/v1/probers/{pid}/results"), Duration::from_secs(20), |v| {
        !v["items"].as_array().unwrap().is_empty()
    })
    .await;
    let (st, _) = s.call(Method::PATCH, &format!("/v1/probers/{pid}"), Some(json!({"enabled": false}))).await;
    assert_eq!(st, 200);
    let (_, v) = s.call(Method::GET, &format!("/v1/probers/{pid}/results"), None).await;
    assert_eq!(v["items"], json!([]));
    let e = prober_client.get::<wire::Work>(wire::PROBER_WORK).await.unwrap_err();
    refused_with(e, 403, "is disabled");
    let (_, list) = s.call(Method::GET, "/v1/probers", None).await;
    assert_eq!(list["items"][0]["status"], "disabled");
    let (st, v) = s.call(Method::DELETE, &format!("/v1/regions/{region}"), None).await;
    assert_eq!(
        (st, v["error"]["reason"].as_str()),
        (409, Some("1 prober still belongs to this region")),
        "{v}"
    );
    // Renewal stays open to a disabled prober: a new certificate for a new key; the old one
    // stops working at once.
    let old = ChannelClient::open(StateDir::new(&state1), None).unwrap();
    let before_fp = prober_client.certificate().fingerprint;
    let renewed = prober_client.renew().await.unwrap();
    assert_ne!(renewed.fingerprint, before_fp);
    assert_eq!(renewed.common_name.as_deref(), Some(pid.to_string().as_str()), "CN=<id>");
    let e = prober_client.get::<wire::Work>(wire::PROBER_WORK).await.unwrap_err();
    refused_with(e, 403, "is disabled");
    let e = old.get::<wire::Work>(wire::PROBER_WORK).await.unwrap_err();
    refused_with(e, 401, "unknown or revoked certificate");
    let (_, audit) = s.call(Method::GET, "/v1/audit?action=probe.certificate_renew", None).await;
    assert_eq!(audit["items"].as_array().unwrap().len(), 1, "{audit}");

    let (st, _) = s.call(Method::DELETE, &format!("/v1/probers/{pid}"), None).await;
    assert_eq!(st, 204);
    let e = prober_client.get::<wire::Work>(wire::PROBER_WORK).await.unwrap_err();
    refused_with(e, 401, "unknown or revoked certificate");
    prober.kill().await;
    let _: Option<Value> = None;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_are_bounded_per_route_and_unknown_callers_are_refused_before_theirs_is_read() {
    let s = ServerProcess::start().await;
    let (agent_url, _) = s.channel();
    // No client certificate; the channel's own certificate is for its internal name.
    // A fresh connection per request: the server closes one whose body it refused to read,
    // and a pooled connection could be reused just as it closes.
    let client = reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    let post = |path: &str, len: usize| {
        client
            .post(format!("{agent_url}{path}"))
            .header("content-type", "application/json")
            .body(vec![b' '; len])
            .send()
    };
    // An enrollment is a few hundred bytes: 413, or the connection closes under the sender
    // (the refusal may reach it only after it wrote into the closed connection).
    match post(wire::ENROLL, 64 << 10).await {
        Ok(r) => assert_eq!(r.status(), 413, "an enrollment is a few hundred bytes"),
        Err(e) => assert!(e.is_request(), "enroll: {e}"),
    }
    for path in [wire::PROBER_REPORT, wire::NODE_HEARTBEAT, wire::NODE_REPORT] {
        let r = post(path, 1 << 10).await.unwrap();
        assert_eq!(r.status(), 401, "{path}: no certificate");
        // A big body is not read: the refusal comes first, or the connection closes under
        // the sender.
        match post(path, 8 << 20).await {
            Ok(r) => assert_eq!(r.status(), 401, "{path}"),
            Err(e) => assert!(e.is_request(), "{path}: {e}"),
        }
    }
    let r = client.get(format!("{agent_url}{}", wire::PROBER_WORK)).send().await.unwrap();
    assert_eq!(r.status(), 401);
    // Renewal without a certificate is refused before its body is read, and every refusal
    // of the channel is its JSON error shape.
    let r = post(wire::RENEW, 1 << 10).await.unwrap();
    assert_eq!(r.status(), 401, "renew: no certificate");
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["status"], 401, "{v}");
    let r = client
        .post(format!("{agent_url}{}", wire::ENROLL))
        .header("content-type", "application/json")
        .body(r#"["vte_x", "csr", "h", "1"]"#)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let v: Value = r.json().await.unwrap();
    assert_eq!(
        (v["error"]["status"].as_u64(), v["error"]["field"].as_str()),
        (Some(400), Some("body")),
        "{v}"
    );
    let r = client.put(format!("{agent_url}{}", wire::PROBER_REPORT)).send().await.unwrap();
    assert_eq!(r.status(), 405);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["status"], 405, "{v}");
}
