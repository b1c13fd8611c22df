//! Mirrors and doors end to end: `vantage serve`, real `vantage probe` processes in four
//! regions (each leaving from its own loopback source address), and mirror edges that answer
//! each region as a censor or a provider would — with a block page, a reset, or silence. The
//! registry's files are edited by hand as an operator would.

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::harness::{AgentProcess, ServerProcess};

/// How a mirror edge answers a region.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Face {
    /// `200 welcome`.
    Serve,
    /// `200` with a block page.
    BlockPage,
    /// A reset right after the connection (a middlebox's RST).
    Reset,
    /// Accepts and never answers.
    Silent,
    /// Answers `welcome` with this status (a 404 of a mirror without the path, a 451 of a
    /// provider's legal block).
    Answer(u16),
    /// `200 welcome` after this many milliseconds (a mirror far from the region).
    Slow(u64),
}

const BLOCK_PAGE: &str = "<h1>Access denied by order of the regulator</h1>";

/// A mirror's trace file (`/trace`): the time of its last sync, as text.
type Trace = Arc<std::sync::Mutex<String>>;

/// The request line of every request an edge read, in order.
type Requests = Arc<std::sync::Mutex<Vec<String>>>;

/// A mirror edge on 127.0.0.1 that answers each source address with its face (`Serve` for any
/// other).
async fn edge(faces: &[(IpAddr, Face)]) -> SocketAddr {
    edge_with_trace(faces, Trace::default()).await
}

/// [`edge`], serving `trace` at `/trace`.
async fn edge_with_trace(faces: &[(IpAddr, Face)], trace: Trace) -> SocketAddr {
    edge_logged(faces, trace, Requests::default()).await
}

/// [`edge_with_trace`], logging the request lines it reads to `requests`.
async fn edge_logged(faces: &[(IpAddr, Face)], trace: Trace, requests: Requests) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let faces: Arc<HashMap<IpAddr, Face>> = Arc::new(faces.iter().copied().collect());
    tokio::spawn(async move {
        loop {
            let Ok((mut conn, peer)) = listener.accept().await else { return };
            let face = faces.get(&peer.ip()).copied().unwrap_or(Face::Serve);
            let (trace, requests) = (trace.clone(), requests.clone());
            tokio::spawn(async move {
                match face {
                    Face::Reset => {
                        // Linger 0 turns the close into an RST.
                        let _ = socket2::SockRef::from(&conn).set_linger(Some(Duration::ZERO));
                    }
                    Face::Silent => tokio::time::sleep(Duration::from_secs(30)).await,
                    Face::Serve | Face::BlockPage | Face::Answer(_) | Face::Slow(_) => {
                        let mut buf = [0u8; 4096];
                        let mut seen = Vec::new();
                        while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                            match conn.read(&mut buf).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => seen.extend_from_slice(&buf[..n]),
                            }
                        }
                        let line = seen.split(|b| *b == b'\r').next().unwrap_or_default();
                        requests.lock().unwrap().push(String::from_utf8_lossy(line).into_owned());
                        let body = if face == Face::BlockPage {
                            BLOCK_PAGE.to_owned()
                        } else if seen.starts_with(b"GET /trace ") {
                            trace.lock().unwrap().clone()
                        } else {
                            "welcome".to_owned()
                        };
                        let status = match face {
                            Face::Answer(status) => status,
                            _ => 200,
                        };
                        if let Face::Slow(ms) = face {
                            tokio::time::sleep(Duration::from_millis(ms)).await;
                        }
                        let head = format!(
                            "HTTP/1.1 {status} Whatever\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                            body.len()
                        );
                        let _ = conn.write_all(format!("{head}{body}").as_bytes()).await;
                    }
                }
            });
        }
    });
    addr
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

async fn put(s: &ServerProcess, path: &str, body: Value) -> Value {
    let (st, v) = s.call(Method::PUT, path, Some(body)).await;
    assert!(st == 200 || st == 201, "PUT {path}: {st} {v}");
    v
}

fn verdicts(v: &Value) -> BTreeMap<String, String> {
    v["mirrors"]
        .as_array()
        .map(|list| {
            list.iter()
                .map(|m| (m["host"].as_str().unwrap().to_owned(), m["verdict"].as_str().unwrap().to_owned()))
                .collect()
        })
        .unwrap_or_default()
}

/// Follows no redirect; where `/go/…` sent the visitor (or the status and body).
async fn go(
    client: &reqwest::Client,
    s: &ServerProcess,
    path: &str,
    xff: Option<&str>,
) -> Result<String, (u16, String)> {
    let mut r = client.get(format!("{}{path}", s.url));
    if let Some(x) = xff {
        r = r.header("x-forwarded-for", x);
    }
    let resp = r.send().await.unwrap();
    if resp.status() == 302 {
        return Ok(resp.headers()["location"].to_str().unwrap().to_owned());
    }
    Err((resp.status().as_u16(), resp.text().await.unwrap()))
}

/// A prober `p0` in `region` that probes from `source`, its state and log under `dir`.
async fn prober_from(
    s: &ServerProcess,
    region: &Value,
    dir: &std::path::Path,
    source: IpAddr,
) -> AgentProcess {
    prober_named(s, "p0", region, dir, source).await
}

/// A prober `name` in `region` that probes from `source`, its state and log under `dir`.
async fn prober_named(
    s: &ServerProcess,
    name: &str,
    region: &Value,
    dir: &std::path::Path,
    source: IpAddr,
) -> AgentProcess {
    let (agent, ca) = s.channel();
    let t = s.create("/v1/probers/tokens", json!({"name": name, "region": region["id"]})).await;
    AgentProcess::start(
        "probe",
        &agent,
        t["token"].as_str().unwrap(),
        &ca,
        &dir.join(name),
        &["--hostname", name, "--source-address", &source.to_string()],
        &dir.join(format!("{name}.log")),
    )
}

fn no_redirects(from: Option<IpAddr>) -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .local_address(from)
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mirrors_seen_from_four_regions_and_the_doors_that_follow_them() {
    let temp = tempfile::tempdir().unwrap();
    let s = ServerProcess::start_in(&temp.path().join("server"), &["--allow-loopback-addresses"]).await;
    let fast = json!({"interval_s": 5, "timeout_ms": 1000, "attempts": 1});
    put(&s, "/v1/settings/probes", fast).await;
    // The edges speak plain HTTP: redirects and freshness checks too.
    put(&s, "/v1/settings/mirrors", json!({"scheme": "http"})).await;
    // Region ru1's visitors come from 127.0.3.0/24.
    let mut regions = Vec::new();
    for code in ["us1", "de1", "ru1", "cn1"] {
        let nets = if code == "ru1" { json!(["127.0.3.0/24"]) } else { json!([]) };
        let r = s.create("/v1/regions", json!({"code": code, "name": code, "client_networks": nets})).await;
        regions.push(r["id"].as_i64().unwrap());
    }
    let source = |i: usize| ip(&format!("127.0.1.{}", i + 1));
    let (ru, cn) = (source(2), source(3));
    s.create(
        "/v1/checks",
        json!({"name": "default", "method": "http", "path": "/", "interval_s": 1, "timeout_ms": 800, "block_pattern": "Access denied"}),
    )
    .await;
    for t in ["t1", "t2", "t3"] {
        put(&s, &format!("/v1/tenants/{t}"), json!({"note": format!("tenant {t}")})).await;
    }
    let unix_now = || std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let live2_trace = Trace::default();
    *live2_trace.lock().unwrap() = unix_now().to_string();
    let reference_trace = Trace::default();
    let reference = edge_with_trace(&[], reference_trace.clone()).await;
    let mirrors = [
        ("live1", vec!["t1"], 1, edge(&[]).await),
        ("live2", vec!["t1"], 3, edge_with_trace(&[], live2_trace.clone()).await),
        ("zero", vec!["t1"], 0, edge(&[]).await),
        ("other", vec!["t2"], 1, edge(&[]).await),
        ("blocked", vec!["t1"], 1, edge(&[(ru, Face::Reset), (cn, Face::BlockPage)]).await),
        ("slow-cn", vec!["t1", "t3"], 1, edge(&[(cn, Face::Silent)]).await),
        ("reset-ru", vec!["t3"], 1, edge(&[(ru, Face::Reset)]).await),
    ];
    for (name, tenants, weight, addr) in &mirrors {
        let body = json!({"tenants": tenants, "weight": weight, "address": addr.to_string()});
        let (st, v) = s.call(Method::PUT, &format!("/v1/mirrors/{name}.example.net"), Some(body)).await;
        assert_eq!(st, 201, "{v}");
    }
    // Probers in every region leave IPv6 from an address this host does not have: an IPv6
    // mirror fails on their side (`error`) without a packet sent.
    let unusable = "[::1]:9";
    put(&s, "/v1/mirrors/errors.example.net", json!({"tenants": ["t2"], "address": unusable})).await;
    let (agent, ca) = s.channel();
    let mut probers = Vec::new();
    for (i, region) in regions.iter().enumerate() {
        let name = format!("p{i}");
        let t = s.create("/v1/probers/tokens", json!({"name": name, "region": region})).await;
        let v4 = source(i).to_string();
        let v6 = format!("2001:db8::{}", i + 1);
        probers.push(AgentProcess::start(
            "probe",
            &agent,
            t["token"].as_str().unwrap(),
            &ca,
            &temp.path().join(&name),
            &["--hostname", &name, "--source-address", &v4, "--source-address", &v6],
            &temp.path().join(format!("{name}.log")),
        ));
    }
    let expected: BTreeMap<String, String> = [
        ("live1", "live"),
        ("live2", "live"),
        ("zero", "live"),
        ("other", "live"),
        ("blocked", "blocked"),
        ("slow-cn", "degraded"),
        ("reset-ru", "degraded"),
        ("errors", "unknown"),
    ]
    .iter()
    .map(|(h, v)| (format!("{h}.example.net"), (*v).to_owned()))
    .collect();
    let took = s
        .wait_for("/v1/mirrors", Duration::from_secs(40), |v| {
            let all_regions = v["mirrors"]
                .as_array()
                .is_some_and(|l| l.iter().all(|m| m["regions"].as_object().is_some_and(|r| r.len() == 4)));
            all_regions && verdicts(v) == expected
        })
        .await;
    eprintln!("verdicts settled in {took:?}");
    let (_, blocked) = s.call(Method::GET, "/v1/mirrors/blocked.example.net", None).await;
    assert_eq!(blocked["regions"]["ru1"]["status"], "refused", "{blocked}");
    assert_eq!(blocked["regions"]["cn1"]["status"], "blocked-inferred", "{blocked}");
    assert_eq!(blocked["regions"]["us1"]["status"], "ok");
    assert!(blocked["regions"]["us1"]["latency"].as_u64().is_some());
    assert_eq!(blocked["probers"].as_array().unwrap().len(), 4, "{blocked}");
    assert!(blocked["blocked_count"].as_u64().unwrap() > 0);
    let (_, slow) = s.call(Method::GET, "/v1/mirrors/slow-cn.example.net", None).await;
    assert_eq!(slow["regions"]["cn1"]["status"], "timeout");
    let (_, errors) = s.call(Method::GET, "/v1/mirrors/errors.example.net", None).await;
    assert!(errors["regions"].as_object().unwrap().values().all(|r| r["status"] == "error"), "{errors}");

    // The doors: only the live mirrors of the tenant with a weight, by weight (1 : 3).
    let client = no_redirects(None);
    let mut counts: BTreeMap<String, u32> = BTreeMap::new();
    let mut tasks = tokio::task::JoinSet::new();
    let shared = Arc::new((client.clone(), s.url.clone()));
    for worker in 0..8 {
        let shared = shared.clone();
        tasks.spawn(async move {
            let mut seen: BTreeMap<String, u32> = BTreeMap::new();
            for i in 0..1250 {
                let url = format!("{}/go/t1/pool/main/file-{worker}-{i}.deb?arch=amd64", shared.1);
                let resp = shared.0.get(url).send().await.unwrap();
                assert_eq!(resp.status(), 302);
                let location = resp.headers()["location"].to_str().unwrap().to_owned();
                assert!(
                    location.ends_with(&format!("/pool/main/file-{worker}-{i}.deb?arch=amd64")),
                    "{location}"
                );
                let host = location.trim_start_matches("http://").split('/').next().unwrap().to_owned();
                *seen.entry(host).or_default() += 1;
            }
            seen
        });
    }
    while let Some(seen) = tasks.join_next().await {
        for (h, n) in seen.unwrap() {
            *counts.entry(h).or_default() += n;
        }
    }
    assert_eq!(
        counts.keys().cloned().collect::<Vec<_>>(),
        ["live1.example.net", "live2.example.net"],
        "{counts:?}"
    );
    let share = f64::from(counts["live1.example.net"]) / 10_000.0;
    assert!((share - 0.25).abs() <= 0.02, "weights 1 and 3 over 10,000 redirects: {counts:?}");
    assert_eq!(go(&client, &s, "/go/t2/x", None).await.unwrap(), "http://other.example.net/x");
    // A tenant that does not exist is a mistyped link, not an outage.
    let (status, reason) = go(&client, &s, "/go/nobody/x", None).await.unwrap_err();
    assert_eq!((status, reason.trim()), (404, "no such tenant"));

    // Tenant t3 has no live mirror: doors keep only live ones, so none serves it…
    let (status, _) = go(&client, &s, "/go/t3/a", None).await.unwrap_err();
    assert_eq!(status, 503, "degraded mirrors serve no tenant that did not opt in");
    // …until it opts in: then the degraded ones serve, but never where they fail — a visitor
    // from ru1's networks is kept from the mirror ru1 resets, without asking.
    let t3 = put(&s, "/v1/tenants/t3", json!({"note": "tenant t3", "fallback_to_degraded": true})).await;
    assert_eq!(t3["fallback_to_degraded"], true, "{t3}");
    let from_ru = no_redirects(Some(ip("127.0.3.9")));
    for _ in 0..40 {
        assert_eq!(go(&from_ru, &s, "/go/t3/a", None).await.unwrap(), "http://slow-cn.example.net/a");
    }
    let mut anywhere = std::collections::BTreeSet::new();
    for _ in 0..80 {
        anywhere.insert(go(&client, &s, "/go/t3/a", None).await.unwrap());
    }
    assert_eq!(anywhere.len(), 2, "from no region both serve: {anywhere:?}");
    // X-Forwarded-For is believed only from trusted proxies.
    let spoofed: std::collections::BTreeSet<String> = {
        let mut set = std::collections::BTreeSet::new();
        for _ in 0..80 {
            set.insert(go(&client, &s, "/go/t3/a", Some("127.0.3.9")).await.unwrap());
        }
        set
    };
    assert_eq!(spoofed.len(), 2, "an untrusted peer's X-Forwarded-For is ignored");
    put(&s, "/v1/settings/mirrors", json!({"scheme": "http", "trusted_proxies": ["127.0.0.1/32"]})).await;
    for _ in 0..40 {
        assert_eq!(
            go(&client, &s, "/go/t3/a", Some("127.0.3.9")).await.unwrap(),
            "http://slow-cn.example.net/a"
        );
    }
    let (st, choice) = s.call(Method::GET, "/v1/doors/select?tenant=t3&exclude_regions=ru1", None).await;
    assert_eq!((st, choice["host"].as_str()), (200, Some("slow-cn.example.net")), "{choice}");
    let (st, _) = s.call(Method::GET, "/v1/doors/select?tenant=t3&exclude_regions=ru1,cn1", None).await;
    assert_eq!(st, 503);

    // A mirror a week behind its reference is stale and leaves rotation; it returns after a
    // check finds it synced.
    *reference_trace.lock().unwrap() = unix_now().to_string();
    *live2_trace.lock().unwrap() = (unix_now() - 7 * 86_400).to_string();
    let live2 = mirrors[1].3;
    let freshness = json!({"path": "/trace", "reference": format!("http://{reference}/trace"), "max_lag_s": 600, "interval_s": 5});
    let body = json!({"tenants": ["t1"], "weight": 3, "address": live2.to_string(), "freshness": freshness});
    put(&s, "/v1/mirrors/live2.example.net", body).await;
    s.wait_for("/v1/mirrors/live2.example.net", Duration::from_secs(10), |v| {
        v["freshness_state"]["stale"] == true
    })
    .await;
    for _ in 0..40 {
        assert_eq!(go(&client, &s, "/go/t1/x", None).await.unwrap(), "http://live1.example.net/x");
    }
    let (_, v) = s.call(Method::GET, "/v1/mirrors/live2.example.net", None).await;
    assert_eq!(v["verdict"], "live", "stale is about files, not reachability: {v}");
    assert!(v["freshness_state"]["lag_s"].as_i64().unwrap() >= 7 * 86_400 - 60, "{v}");
    *live2_trace.lock().unwrap() = unix_now().to_string();
    *reference_trace.lock().unwrap() = unix_now().to_string();
    s.wait_for("/v1/mirrors/live2.example.net", Duration::from_secs(15), |v| {
        v["freshness_state"]["stale"] == false
    })
    .await;
    let mut back = std::collections::BTreeSet::new();
    for _ in 0..80 {
        back.insert(go(&client, &s, "/go/t1/x", None).await.unwrap());
    }
    assert!(back.contains("http://live2.example.net/x"), "{back:?}");

    // A manual block takes a mirror out of rotation at once.
    let (st, v) = s
        .call(Method::POST, "/v1/mirrors/live2.example.net/force-block", Some(json!({"note": "ticket 7"})))
        .await;
    assert_eq!((st, v["verdict"].as_str()), (200, Some("blocked")), "{v}");
    for _ in 0..40 {
        assert_eq!(go(&client, &s, "/go/t1/x", None).await.unwrap(), "http://live1.example.net/x");
    }

    let metrics = s.metrics().await;
    for line in [
        // One convention for every verdict gauge: higher is healthier, unknown -1.
        r#"vantage_mirror_verdict{host="live1.example.net"} 2"#,
        r#"vantage_mirror_verdict{host="slow-cn.example.net"} 1"#,
        r#"vantage_mirror_verdict{host="blocked.example.net"} 0"#,
        r#"vantage_mirror_verdict{host="errors.example.net"} -1"#,
        r#"vantage_mirror_regions_failing{host="blocked.example.net"} 2"#,
        r#"vantage_mirror_regions_failing{host="errors.example.net"} 4"#,
        "vantage_mirror_manual_blocked 1",
        r#"vantage_door_redirects_total{tenant="t1",outcome="redirected"}"#,
        r#"vantage_door_redirects_total{tenant="(unknown)",outcome="unknown_tenant"} 1"#,
        r#"vantage_mirror_check_duration_seconds_count{host="live1.example.net"}"#,
        r#"vantage_mirror_stale{host="live2.example.net"} 0"#,
    ] {
        assert!(metrics.contains(line), "{line} in\n{metrics}");
    }
    let (_, alerts) = s.call(Method::GET, "/v1/alerts", None).await;
    assert!(alerts.to_string().contains("mirror blocked.example.net is blocked"), "{alerts}");
    for p in probers {
        p.kill().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_registry_files_the_api_and_a_restart() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("server");
    let s = ServerProcess::start_in(&dir, &["--allow-loopback-addresses"]).await;
    let files = dir.join("mirrors");
    put(&s, "/v1/tenants/t1", json!({})).await;
    // A tenant's opt-in to degraded mirrors is a boolean, and unknown fields are refused.
    for (body, field) in [
        (json!({"fallback_to_degraded": "yes"}), "fallback_to_degraded"),
        (json!({"fallback": true}), "fallback"),
    ] {
        let (st, v) = s.call(Method::PUT, "/v1/tenants/t1", Some(body.clone())).await;
        assert_eq!((st, v["error"]["field"].as_str()), (400, Some(field)), "{body}: {v}");
    }
    let (_, t1) = s.call(Method::GET, "/v1/tenants", None).await;
    assert_eq!(t1["items"][0]["fallback_to_degraded"], false, "unchanged, off by default: {t1}");
    // Derived fields, unknown tenants and bad values are refused by name, and change nothing.
    let refusals = [
        (json!({"verdict": "live"}), "verdict"),
        (json!({"regions": {}}), "regions"),
        (json!({"tenants": ["nobody"]}), "tenants[0]"),
        (json!({"weight": -1}), "weight"),
        (json!({"wieght": 1}), "wieght"),
        (json!({"host": "other.example.net"}), "host"),
    ];
    for (body, field) in refusals {
        let (st, v) = s.call(Method::PUT, "/v1/mirrors/m1.example.net", Some(body.clone())).await;
        assert_eq!((st, v["error"]["field"].as_str()), (400, Some(field)), "{body}: {v}");
    }
    assert!(!files.join("m1.example.net.yaml").exists());
    // A YAML body.
    let resp = s
        .req(Method::PUT, "/v1/mirrors/m1.example.net")
        .header("content-type", "application/yaml")
        .body("tenants: [t1]\nweight: 2\n")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 201);
    let text = std::fs::read_to_string(files.join("m1.example.net.yaml")).unwrap();
    assert!(text.contains("weight: 2"), "{text}");
    // An operator's own file is picked up.
    std::fs::write(files.join("m2.example.net.yaml"), "host: m2.example.net\nweight: 5\n").unwrap();
    s.wait_for("/v1/mirrors", Duration::from_secs(10), |v| v["count"] == 2).await;
    // A broken file aborts the whole reload: the previous registry keeps serving, the log and
    // the API name the file and the field, and the failure is counted.
    std::fs::write(files.join("m3.example.net.yaml"), "host: m3.example.net\nweight: heavy\n").unwrap();
    std::fs::write(files.join("m2.example.net.yaml"), "host: m2.example.net\nweight: 6\n").unwrap();
    s.wait_for("/v1/mirrors", Duration::from_secs(10), |v| !v["reload"]["error"].is_null()).await;
    let (_, list) = s.call(Method::GET, "/v1/mirrors", None).await;
    assert_eq!(list["reload"]["error"]["file"], "m3.example.net.yaml", "{list}");
    assert_eq!(list["reload"]["error"]["field"], "weight", "{list}");
    assert_eq!(list["count"], 2);
    // Reading the files is no change: the watch does not reload again by itself.
    let failures = list["reload"]["failures"].as_u64().unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let (_, later) = s.call(Method::GET, "/v1/mirrors", None).await;
    assert_eq!(later["reload"]["failures"].as_u64(), Some(failures), "{later}");
    // A write through the API that file would keep from loading is refused by name, and
    // writes nothing.
    let (st, v) = s.call(Method::PUT, "/v1/mirrors/m4.example.net", Some(json!({"weight": 1}))).await;
    assert_eq!(st, 409, "{v}");
    assert!(v["error"]["reason"].as_str().is_some_and(|r| r.contains("m3.example.net.yaml")), "{v}");
    assert!(!files.join("m4.example.net.yaml").exists());
    let (_, m2) = s.call(Method::GET, "/v1/mirrors/m2.example.net", None).await;
    assert_eq!(m2["weight"], 5, "the change in the same reload did not take either");
    let log = std::fs::read_to_string(dir.with_extension("log")).unwrap();
    assert!(log.contains("m3.example.net.yaml") && log.contains("weight"), "{log}");
    let metrics = s.metrics().await;
    assert!(metrics.contains("vantage_mirror_registry_reload_errors_total"), "{metrics}");
    assert!(!metrics.contains("vantage_mirror_registry_reload_errors_total 0"), "{metrics}");
    std::fs::remove_file(files.join("m3.example.net.yaml")).unwrap();
    s.wait_for("/v1/mirrors/m2.example.net", Duration::from_secs(10), |v| v["weight"] == 6).await;
    let (_, list) = s.call(Method::GET, "/v1/mirrors", None).await;
    assert!(list["reload"]["error"].is_null(), "{list}");

    // A manual block survives a restart; the check run is one per minute across callers.
    let (st, v) = s
        .call(Method::POST, "/v1/mirrors/m1.example.net/force-block", Some(json!({"note": "ticket 12345"})))
        .await;
    assert_eq!((st, v["verdict"].as_str()), (200, Some("blocked")), "{v}");
    let (st, _) = s.call(Method::POST, "/v1/mirrors/check", None).await;
    assert_eq!(st, 202);
    let resp = s.req(Method::POST, "/v1/mirrors/check").send().await.unwrap();
    assert_eq!(resp.status(), 429);
    let wait: u64 = resp.headers()["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=60).contains(&wait), "{wait}");
    let (st, v) = s.call(Method::POST, "/v1/mirrors/check", Some(json!({"regions": ["mars"]}))).await;
    assert_eq!((st, v["error"]["field"].as_str()), (400, Some("regions[0]")), "{v}");
    let s = {
        let _ = s.stop().await;
        ServerProcess::start_in(&dir, &["--allow-loopback-addresses"]).await
    };
    let (_, m1) = s.call(Method::GET, "/v1/mirrors/m1.example.net", None).await;
    assert_eq!(
        (m1["manual_block"].as_bool(), m1["manual_note"].as_str()),
        (Some(true), Some("ticket 12345")),
        "{m1}"
    );
    assert_eq!(m1["verdict"], "blocked");
    let (st, v) = s.call(Method::POST, "/v1/mirrors/m1.example.net/unblock", None).await;
    assert_eq!((st, v["manual_block"].as_bool()), (200, Some(false)), "{v}");
    // A tenant a mirror names cannot go; a mirror's file goes with it.
    let (st, _) = s.call(Method::DELETE, "/v1/tenants/t1", None).await;
    assert_eq!(st, 409);
    let (st, _) = s.call(Method::DELETE, "/v1/mirrors/m2.example.net", None).await;
    assert_eq!(st, 204);
    assert!(!files.join("m2.example.net.yaml").exists());
    let (_, audit) = s.call(Method::GET, "/v1/audit", None).await;
    let text = audit.to_string();
    for action in [
        "mirror.create",
        "mirror.force_block",
        "mirror.check",
        "mirror.unblock",
        "mirror.delete",
        "tenant.put",
        "mirror.reload",
    ] {
        assert!(text.contains(action), "{action} audited: {text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn any_answer_keeps_a_mirror_live_but_a_status_its_check_names_blocks_it() {
    let temp = tempfile::tempdir().unwrap();
    let s = ServerProcess::start_in(&temp.path().join("server"), &["--allow-loopback-addresses"]).await;
    put(&s, "/v1/settings/mirrors", json!({"scheme": "http"})).await;
    let region = s.create("/v1/regions", json!({"code": "us1", "name": "us1"})).await;
    let source = ip("127.0.1.1");
    // No check is named `default`: the 404 mirror names none and gets the built-in one.
    s.create(
        "/v1/checks",
        json!({"name": "legal", "method": "http", "path": "/", "interval_s": 1, "block_statuses": [451]}),
    )
    .await;
    let (st, v) =
        s.call(Method::POST, "/v1/checks", Some(json!({"name": "bad", "block_statuses": [403, 4510]}))).await;
    assert_eq!((st, v["error"]["field"].as_str()), (400, Some("block_statuses[1]")), "{v}");
    let requests = Requests::default();
    let not_found = edge_logged(&[(source, Face::Answer(404))], Trace::default(), requests.clone()).await;
    let legal = edge(&[(source, Face::Answer(451))]).await;
    let unnamed = edge(&[(source, Face::Answer(451))]).await;
    for (host, addr, check) in
        [("notfound", not_found, None), ("legal", legal, Some("legal")), ("unnamed", unnamed, None)]
    {
        let body = json!({"address": addr.to_string(), "check": check});
        put(&s, &format!("/v1/mirrors/{host}.example.net"), body).await;
    }
    let prober = prober_from(&s, &region, temp.path(), source).await;
    let expected: BTreeMap<String, String> =
        [("notfound", "live"), ("legal", "blocked"), ("unnamed", "live")]
            .iter()
            .map(|(h, v)| (format!("{h}.example.net"), (*v).to_owned()))
            .collect();
    s.wait_for("/v1/mirrors", Duration::from_secs(30), |v| verdicts(v) == expected).await;
    let (_, legal) = s.call(Method::GET, "/v1/mirrors/legal.example.net", None).await;
    assert_eq!(legal["regions"]["us1"]["status"], "blocked-inferred", "{legal}");
    let (_, not_found) = s.call(Method::GET, "/v1/mirrors/notfound.example.net", None).await;
    assert_eq!(not_found["regions"]["us1"]["status"], "ok", "a 404 is an HTTP answer: {not_found}");
    let seen = requests.lock().unwrap().clone();
    assert!(!seen.is_empty() && seen.iter().all(|l| l == "GET / HTTP/1.1"), "probed at its root: {seen:?}");
    let (_, alerts) = s.call(Method::GET, "/v1/alerts", None).await;
    let text = alerts.to_string();
    assert!(text.contains("mirror legal.example.net is blocked"), "{alerts}");
    assert!(!text.contains("notfound.example.net") && !text.contains("unnamed.example.net"), "{alerts}");
    prober.kill().await;
}

/// A mirror network's mirror with its files under a path prefix: probed there, and doors join
/// visitors' paths under it with one slash; a tenant whose mirrors are all out goes to its
/// fallback origin, said in a header and a metric.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_base_path_is_probed_and_joined_and_a_tenant_without_mirrors_falls_back() {
    let temp = tempfile::tempdir().unwrap();
    let s = ServerProcess::start_in(&temp.path().join("server"), &["--allow-loopback-addresses"]).await;
    let region = s.create("/v1/regions", json!({"code": "us1", "name": "us1"})).await;
    s.create("/v1/checks", json!({"name": "default", "method": "http", "path": "/", "interval_s": 1})).await;
    let source = ip("127.0.1.2");
    let requests = Requests::default();
    let edge = edge_logged(&[(source, Face::Serve)], Trace::default(), requests.clone()).await;
    put(&s, "/v1/tenants/debian", json!({})).await;
    let origin = json!({"fallback_url": "http://origin.example.net/debian"});
    put(&s, "/v1/tenants/later", origin).await;
    let base = format!("http://m1.example.net:{}/debian", edge.port());
    let body = json!({"address": edge.to_string(), "tenants": ["debian"], "base_url": base});
    put(&s, "/v1/mirrors/m1.example.net", body).await;
    let prober = prober_from(&s, &region, temp.path(), source).await;
    let live: BTreeMap<String, String> = [("m1.example.net".to_owned(), "live".to_owned())].into();
    s.wait_for("/v1/mirrors", Duration::from_secs(30), |v| verdicts(v) == live).await;
    let seen = requests.lock().unwrap().clone();
    assert!(seen.iter().all(|l| l == "GET /debian/ HTTP/1.1"), "probed at its base: {seen:?}");

    let client = no_redirects(None);
    let at = |rest: &str| format!("{base}/{rest}");
    for (path, want) in [
        ("/go/debian/pool/main/x.deb?arch=amd64", at("pool/main/x.deb?arch=amd64")),
        ("/go/debian/", at("")),
        ("/go/debian/?a=1", at("?a=1")),
        ("/go/debian", at("")),
    ] {
        assert_eq!(go(&client, &s, path, None).await.unwrap(), want, "{path}");
    }
    let r = client.get(format!("{}/go/later/pool/x.deb", s.url)).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 302);
    assert_eq!(r.headers()["location"], "http://origin.example.net/debian/pool/x.deb");
    assert_eq!(r.headers()["x-vantage-door"], "fallback");
    assert_eq!(r.headers()["cache-control"], "no-store");
    let metrics = s.metrics().await;
    assert!(
        metrics.contains(r#"vantage_door_redirects_total{tenant="later",outcome="fallback"} 1"#),
        "{metrics}"
    );
    prober.kill().await;
}

/// A tenant ordered by latency (SPEC §10a): each region's visitors go to the mirror that
/// region's probers measure fastest — here each mirror is near one region and far from the
/// other — while a tenant that does not ask is still served by weight; the tenants API, the
/// tenants page's source and the redirects agree.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_ordered_by_latency_sends_each_region_to_its_nearest_mirror() {
    let temp = tempfile::tempdir().unwrap();
    let s = ServerProcess::start_in(&temp.path().join("server"), &["--allow-loopback-addresses"]).await;
    put(&s, "/v1/settings/mirrors", json!({"scheme": "http"})).await;
    s.create("/v1/checks", json!({"name": "default", "method": "http", "path": "/", "interval_s": 1})).await;
    let (eu_src, us_src) = (ip("127.0.6.1"), ip("127.0.6.2"));
    let eu = s
        .create("/v1/regions", json!({"code": "eu1", "name": "eu1", "client_networks": ["127.0.7.0/24"]}))
        .await;
    let us = s
        .create("/v1/regions", json!({"code": "us1", "name": "us1", "client_networks": ["127.0.8.0/24"]}))
        .await;
    let near_eu = edge(&[(eu_src, Face::Serve), (us_src, Face::Slow(300))]).await;
    let near_us = edge(&[(eu_src, Face::Slow(300)), (us_src, Face::Serve)]).await;
    put(&s, "/v1/tenants/debian", json!({"order_by_latency": true})).await;
    put(&s, "/v1/tenants/plain", json!({})).await;
    for (host, at) in [("a.example.net", near_us), ("b.example.net", near_eu)] {
        put(
            &s,
            &format!("/v1/mirrors/{host}"),
            json!({"address": at.to_string(), "tenants": ["debian", "plain"]}),
        )
        .await;
    }
    let _probers = (
        prober_named(&s, "p-eu", &eu, temp.path(), eu_src).await,
        prober_named(&s, "p-us", &us, temp.path(), us_src).await,
    );
    let want = json!({"eu1": ["b.example.net", "a.example.net"], "us1": ["a.example.net", "b.example.net"]});
    s.wait_for("/v1/tenants", Duration::from_secs(60), |v| {
        v["items"]
            .as_array()
            .is_some_and(|t| t.iter().any(|t| t["name"] == "debian" && t["latency_order"] == want))
    })
    .await;
    let (_, tenants) = s.call(Method::GET, "/v1/tenants", None).await;
    let plain = tenants["items"].as_array().unwrap().iter().find(|t| t["name"] == "plain").unwrap().clone();
    assert_eq!((&plain["order_by_latency"], plain.get("latency_order")), (&json!(false), None), "{tenants}");

    let (from_eu, from_us) = (no_redirects(Some(ip("127.0.7.9"))), no_redirects(Some(ip("127.0.8.9"))));
    let mut seen: BTreeMap<(&str, &str), BTreeMap<String, u32>> = BTreeMap::new();
    for _ in 0..20 {
        for (who, client) in [("eu", &from_eu), ("us", &from_us)] {
            for tenant in ["debian", "plain"] {
                let to = go(client, &s, &format!("/go/{tenant}/x"), None).await.unwrap();
                let host = to.split('/').nth(2).unwrap().split(':').next().unwrap().to_owned();
                *seen.entry((who, tenant)).or_default().entry(host).or_default() += 1;
            }
        }
    }
    assert_eq!(seen[&("eu", "debian")], [("b.example.net".to_owned(), 20)].into(), "{seen:?}");
    assert_eq!(seen[&("us", "debian")], [("a.example.net".to_owned(), 20)].into(), "{seen:?}");
    assert_eq!(seen[&("eu", "plain")].len(), 2, "by weight, both: {seen:?}");
    // `ctl tenants list` shows each region's order as the API does.
    let out = s.ctl(&["--json", "tenants", "list"]).await;
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(listed.to_string().contains(r#""eu1":["b.example.net","a.example.net"]"#), "{listed}");

    // Every redirect counted its visitor's region (SPEC §10a), and so does a steering poll: a
    // monitor that learns its weights weighs eu1 by 60 of the 100 requests, not 1 of 4.
    let tv = json!({"name": "tv", "weighting": "learned", "learned_floor_pct": 0, "regions": [
        {"region": "eu1", "weight": 1, "endpoints": ["http://127.0.0.1:9/tv.m3u8"]},
        {"region": "us1", "weight": 3, "endpoints": ["http://127.0.0.1:9/tv.m3u8"]}]});
    let tv = s.create("/v1/monitors", tv).await["id"].as_i64().unwrap();
    for _ in 0..20 {
        let r = from_eu.get(format!("{}/steer/tv", s.url)).send().await.unwrap();
        assert_eq!(r.status(), 200);
    }
    let metrics = s.metrics().await;
    for (region, source, n) in [("eu1", "door", 40), ("us1", "door", 40), ("eu1", "steer", 20)] {
        let line = format!(r#"vantage_demand_requests_total{{region="{region}",source="{source}"}} {n}"#);
        assert!(metrics.contains(&line), "no {line:?} in:\n{metrics}");
    }
    let learned = |v: &Value| {
        v["weights"]["learned"]
            .as_array()
            .map(|l| l.iter().map(|x| x.as_f64().unwrap().round()).collect::<Vec<_>>())
    };
    s.wait_for(&format!("/v1/monitors/{tv}/verdict"), Duration::from_secs(15), |v| {
        learned(v) == Some(vec![60.0, 40.0])
    })
    .await;
    let (_, v) = s.call(Method::GET, &format!("/v1/monitors/{tv}/verdict"), None).await;
    assert_eq!(
        (&v["weighting"], &v["weights"]["configured"]),
        (&json!("learned"), &json!([25.0, 75.0])),
        "{v}"
    );
    assert_eq!(v["weights"]["effective"], v["weights"]["learned"], "{v}");
    assert_eq!(v["demand"], json!([60, 40]), "{v}");
    let metrics = s.metrics().await;
    assert!(metrics.contains(r#"vantage_demand_day_requests{region="eu1"} 60"#), "{metrics}");
    // The regions list says the same: the day's requests of each region.
    let (_, regions) = s.call(Method::GET, "/v1/regions", None).await;
    let day: BTreeMap<&str, &Value> = (regions["items"].as_array().unwrap().iter())
        .map(|r| (r["code"].as_str().unwrap(), &r["requests_day"]))
        .collect();
    assert_eq!((day["eu1"], day["us1"]), (&json!(60), &json!(40)), "{regions}");
    assert!(
        metrics.contains(
            r#"vantage_monitor_region_weight_ratio{monitor="tv",region="eu1",weights="learned"} 0.6"#
        ),
        "{metrics}"
    );

    // A monitor steered by the client's region (SPEC §7): each CDN is near one region, so each
    // region's players get their own CDN first — everyone's order cannot say that, both CDNs
    // answer their own region as fast — in the verdict view and in each player's manifest.
    let near = json!({"name": "near", "steer_by_client_region": true, "steering_ttl_s": 1, "regions": [
        {"region": "eu1", "weight": 1, "endpoints": [format!("http://{near_eu}/live")], "pathway": "cdn-eu"},
        {"region": "us1", "weight": 1, "endpoints": [format!("http://{near_us}/live")], "pathway": "cdn-us"}]});
    let near = s.create("/v1/monitors", near).await["id"].as_i64().unwrap();
    let want = json!({"eu1": ["cdn-eu", "cdn-us"], "us1": ["cdn-us", "cdn-eu"]});
    s.wait_for(&format!("/v1/monitors/{near}/verdict"), Duration::from_secs(30), |v| {
        v["pathway_priority_by_region"] == want
    })
    .await;
    for (client, first) in [(&from_eu, "cdn-eu"), (&from_us, "cdn-us")] {
        let manifest: Value =
            client.get(format!("{}/steer/near", s.url)).send().await.unwrap().json().await.unwrap();
        assert_eq!(manifest["PATHWAY-PRIORITY"][0], first, "{manifest}");
    }
    let out = s.ctl(&["monitors", "verdict", "near"]).await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("players in us1: cdn-us > cdn-eu"), "{text}");
}
