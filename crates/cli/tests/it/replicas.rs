//! Three `vantage serve` replicas on one PostgreSQL database behind HAProxy (the shipped
//! `deploy/replicas/haproxy.cfg`), with real probers and edges (SPEC §8): one holds the
//! evaluator lease, all serve the API, the agent channel and DNS; kill -9 the lease holder in
//! the middle of a failover and another finishes it.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Value, json};

use crate::harness::{LabFleet, LabSpec, Place, ServerProcess, dig};
use crate::postgres::FreshDatabase;

/// `url` with an `application_name`, so that the test can tell the replicas' sessions apart.
fn named(url: &str, name: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}application_name={name}")
}

/// Whether `s` holds the evaluator lease (its `/metrics` says so).
async fn evaluator(s: &ServerProcess) -> bool {
    let Ok(r) = s.req(Method::GET, "/metrics").send().await else { return false };
    r.text().await.unwrap_or_default().lines().any(|l| l == "vantage_evaluator_lease 1")
}

/// The revision `s` serves for `cluster` and what `dig` gets from its DNS.
async fn serving(s: &ServerProcess, cluster: i64, domain: &str) -> (Option<u64>, Vec<String>) {
    let (_, v) = s.call(Method::GET, &format!("/v1/clusters/{cluster}/dns"), None).await;
    (v["revision"].as_u64(), dig(s.dns(), domain).await)
}

/// HAProxy with the shipped configuration, its agent channel frontend on `port` in front of
/// `replicas` (the admin API part is left out: the test calls each replica itself).
struct Balancer {
    _child: tokio::process::Child,
    _dir: tempfile::TempDir,
}

impl Balancer {
    async fn start(port: u16, replicas: &[u16]) -> Balancer {
        let shipped = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/replicas/haproxy.cfg"),
        )
        .unwrap();
        let (agent, _api) = shipped.split_once("# The admin API").unwrap();
        let mut conf = agent.replace("bind :8443", &format!("bind 127.0.0.1:{port}"));
        for (i, p) in replicas.iter().enumerate() {
            conf = conf.replace(&format!("10.0.0.1{}:8443", i + 1), &format!("127.0.0.1:{p}"));
        }
        assert!(!conf.contains("10.0.0."), "every replica of the shipped file is placed: {conf}");
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("haproxy.cfg"), conf).unwrap();
        let child = tokio::process::Command::new("haproxy")
            .args(["-db", "-f"])
            .arg(dir.path().join("haproxy.cfg"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("haproxy.log")).unwrap())
            .kill_on_drop(true)
            .spawn()
            .expect("haproxy runs (its Debian package is in .ci/packages)");
        let started = Instant::now();
        while tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "haproxy does not listen on {port}: {}",
                std::fs::read_to_string(dir.path().join("haproxy.log")).unwrap_or_default()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Balancer { _child: child, _dir: dir }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_replicas_serve_one_fleet_and_a_killed_lease_holders_failover_completes() {
    let db = FreshDatabase::new().await;
    let temp = tempfile::tempdir().unwrap();
    let channels: Vec<u16> = (0..3).map(|_| vantage_testkit::free_port().unwrap()).collect();
    let lb = vantage_testkit::free_port().unwrap();
    let _balancer = Balancer::start(lb, &channels).await;
    let domain = "cdn.replicas.example";
    let spec = LabSpec {
        net: Place::Loopback(150),
        database: Some(named(&db.url, "replica_a")),
        server_dir: Some(temp.path().join("a")),
        agent_listen: Some(([127, 0, 0, 1], channels[0]).into()),
        channel: Some(format!("https://127.0.0.1:{lb}")),
        ..LabSpec::default()
    };
    let LabFleet { s: a, edges, cluster, nodes, probers: _probers, temp: _fleet, .. } =
        LabFleet::start_with(domain, spec).await;
    let started = Instant::now();
    while !evaluator(&a).await {
        assert!(started.elapsed() < Duration::from_secs(10), "the first replica holds the lease");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Two more replicas on the same database, from empty data directories: the admin token,
    // the CA and the configuration are the database's.
    let mut others = Vec::new();
    for (i, name) in [(1, "b"), (2, "c")] {
        let dir = temp.path().join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::copy(a.dir.join("admin-token"), dir.join("admin-token")).unwrap();
        let url = named(&db.url, &format!("replica_{name}"));
        let listen = format!("127.0.0.1:{}", channels[i]);
        let args = ["--database", &url, "--allow-loopback-addresses", "--agent-listen", &listen];
        others.push(ServerProcess::start_in(&dir, &args).await);
    }
    let primaries = ["127.0.0.150", "127.0.0.152", "127.0.0.153"];
    let (first, _) = serving(&a, cluster, domain).await;
    for s in &others {
        assert!(!evaluator(s).await, "one lease holder");
        let started = Instant::now();
        while serving(s, cluster, domain).await != (first, primaries.map(String::from).to_vec()) {
            assert!(started.elapsed() < Duration::from_secs(10), "a new replica serves the stored revision");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    // The fleet's figures come from the lease holder only: summed over the replicas, each
    // address counts once.
    let reachable = |text: &str| text.lines().filter(|l| l.starts_with("vantage_address_reachable{")).count();
    assert!(reachable(&a.metrics().await) >= primaries.len(), "the lease holder exports the fleet");
    for s in &others {
        assert_eq!(reachable(&s.metrics().await), 0, "a follower exports only itself");
    }

    // A change through one replica is seen through the others.
    let region = others[1].create("/v1/regions", json!({"code": "sa-br", "name": "São Paulo"})).await;
    for s in [&a, &others[0]] {
        s.wait_for("/v1/regions", Duration::from_secs(2), |v: &Value| {
            v["items"].as_array().is_some_and(|r| r.contains(&region))
        })
        .await;
    }

    // So is a write to the mirror registry's files: every replica writes the same files into
    // its own directory and serves the same registry, and one that starts later (from an empty
    // directory) writes them from the log before it reads them.
    let (st, v) = others[0].call(Method::PUT, "/v1/tenants/t1", Some(json!({"note": "one"}))).await;
    assert_eq!(st, 200, "{v}");
    let mirror = json!({"tenants": ["t1"], "weight": 2, "address": "127.0.0.1:9"});
    let (st, v) = others[0].call(Method::PUT, "/v1/mirrors/m1.example.net", Some(mirror)).await;
    assert_eq!(st, 201, "{v}");
    let dir = temp.path().join("d");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(a.dir.join("admin-token"), dir.join("admin-token")).unwrap();
    let (url, listen) =
        (named(&db.url, "replica_d"), format!("127.0.0.1:{}", vantage_testkit::free_port().unwrap()));
    let late = ServerProcess::start_in(
        &dir,
        &["--database", &url, "--allow-loopback-addresses", "--agent-listen", &listen],
    )
    .await;
    for s in [&a, &others[1], &late] {
        s.wait_for("/v1/mirrors/m1.example.net", Duration::from_secs(2), |v: &Value| {
            v["tenants"] == json!(["t1"]) && v["weight"] == 2
        })
        .await;
        for name in ["m1.example.net.yaml", "tenants.yaml"] {
            let file = |s: &ServerProcess| std::fs::read_to_string(s.dir.join("mirrors").join(name)).unwrap();
            assert_eq!(file(s), file(&others[0]), "{name}");
        }
    }
    late.stop().await;
    // A removal through another replica goes everywhere too.
    let (st, v) = others[1].call(Method::DELETE, "/v1/mirrors/m1.example.net", None).await;
    assert_eq!(st, 204, "{v}");
    for s in [&a, &others[0]] {
        s.wait_for("/v1/mirrors/m1.example.net", Duration::from_secs(2), |v: &Value| {
            v["error"]["status"] == 404
        })
        .await;
        assert!(!s.dir.join("mirrors/m1.example.net.yaml").exists());
    }

    // The primary stops; the lease holder dies once it sees it failing, before its failover
    // (5 s of failing later).
    edges[0].stop().await;
    a.wait_for(&format!("/v1/nodes/{}", nodes[0]), Duration::from_secs(30), |v| {
        v["addresses"][0]["condition"] == "failing"
    })
    .await;
    // (A revision may have shortened the TTL of the suspect address; it still answers it.)
    assert_eq!(serving(&a, cluster, domain).await.1, primaries, "no failover yet");
    let killed = Instant::now();
    a.kill9().await;

    let holder = loop {
        let mut holders = Vec::new();
        for (i, s) in others.iter().enumerate() {
            if evaluator(s).await {
                holders.push(i);
            }
        }
        if let [i] = holders[..] {
            break i;
        }
        assert!(holders.len() < 2, "two lease holders");
        // Two evaluation intervals (10 s each).
        assert!(killed.elapsed() < Duration::from_secs(20), "no replica took the lease");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    println!(
        "replicas: kill -9 of the lease holder → lease taken after {:.2} s",
        killed.elapsed().as_secs_f64()
    );

    // The failover completes on the new holder, and both replicas' DNS answer it within 1 s of
    // each other.
    let want = ["127.0.0.151", "127.0.0.152", "127.0.0.153"].map(String::from).to_vec();
    let mut answered: [Option<Instant>; 2] = [None, None];
    while answered.iter().any(Option::is_none) {
        for (i, s) in others.iter().enumerate() {
            if answered[i].is_none() && dig(s.dns(), domain).await == want {
                answered[i] = Some(Instant::now());
            }
        }
        assert!(
            killed.elapsed() < Duration::from_secs(60),
            "no failover after the holder died: {answered:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let [Some(x), Some(y)] = answered else { unreachable!() };
    let apart = if x > y { x - y } else { y - x };
    println!(
        "replicas: failover in DNS {:.2} s after the kill; the replicas {:.2} s apart",
        x.min(y).duration_since(killed).as_secs_f64(),
        apart.as_secs_f64()
    );
    assert!(apart <= Duration::from_millis(1_200), "the replicas' DNS {apart:?} apart");
    let (b, c) = (serving(&others[0], cluster, domain).await, serving(&others[1], cluster, domain).await);
    assert_eq!(b, c, "the same revision on both");
    assert!(b.0 > first, "a new revision: {b:?} after {first:?}");
    println!("replicas: served revision {:?}", b.0);

    // Revision numbers are unique and without gaps: 1, 2, … as stored.
    let stored = others[holder].stored_revisions(cluster).await;
    let numbers: Vec<u64> =
        stored["items"].as_array().unwrap().iter().map(|r| r["number"].as_u64().unwrap()).collect();
    let newest = numbers[0];
    assert_eq!(numbers, (1..=newest).rev().collect::<Vec<_>>(), "{stored}");
    let survivor = others.remove(1 - holder);
    let holder = others.remove(0);

    // The holder is cut from the database (every session of it ended): it lets the lease go,
    // and whichever replica takes it, DNS keeps answering everywhere.
    let mut admin = db.admin().await;
    let holder_name = if holder.dir.ends_with("b") { "replica_b" } else { "replica_c" };
    sqlx::query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1")
        .bind(holder_name)
        .execute(&mut admin)
        .await
        .unwrap();
    let cut = Instant::now();
    while cut.elapsed() < Duration::from_secs(5) {
        for (s, name) in [(&holder, "the holder cut"), (&survivor, "the survivor")] {
            let answer = dig(s.dns(), domain).await;
            if answer != want {
                let (_, served) = s.call(Method::GET, &format!("/v1/clusters/{cluster}/dns"), None).await;
                let (_, events) = s.call(Method::GET, "/v1/events?since=1m&limit=50", None).await;
                panic!("DNS of {name} answers {answer:?} while the lease moves: {served}\n{events:#}");
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut holders = 0;
    for s in [&holder, &survivor] {
        holders += usize::from(evaluator(s).await);
    }
    assert_eq!(holders, 1, "one lease holder again");
    holder.stop().await;
    survivor.stop().await;
}
