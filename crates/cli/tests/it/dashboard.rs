//! The Grafana dashboard against a real Prometheus (Debian's `prometheus`) scraping real
//! `vantage serve` replicas on one PostgreSQL database: every panel of
//! `deploy/grafana/vantage.json` shows data for a fleet with edges, probers, a mirror behind a
//! door, a live HLS monitor and DNS queries; and when a second replica is added, no figure
//! about the fleet doubles (the lease holder alone exports them), while the per-replica
//! panels gain the new replica's series.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Value, json};
use vantage_testkit::{Behavior, EdgeOptions, EdgeServer, hls_paths};

use crate::harness::{LabFleet, LabSpec, Place, ServerProcess, dig};
use crate::metrics::{dashboard, dashboard_expressions, families, metric_names, offered};
use crate::postgres::FreshDatabase;

/// A Prometheus scraping some `vantage serve` replicas every second.
struct Prometheus {
    url: String,
    dir: PathBuf,
    token_file: PathBuf,
    _child: tokio::process::Child,
}

/// A configuration scraping `targets` (`host:port` of each replica's API) every second with
/// the admin token in `token_file`.
fn config(token_file: &Path, targets: &[&str]) -> String {
    format!(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n\
         scrape_configs:\n  - job_name: vantage\n    authorization:\n      credentials_file: {}\n    \
         static_configs:\n      - targets: {}\n",
        token_file.display(),
        serde_json::to_string(targets).unwrap()
    )
}

impl Prometheus {
    async fn start(dir: &Path, token_file: &Path, targets: &[&str]) -> Prometheus {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join("prometheus.yml"), config(token_file, targets)).unwrap();
        let port = vantage_testkit::free_port().unwrap();
        let child = tokio::process::Command::new("prometheus")
            .arg(format!("--config.file={}", dir.join("prometheus.yml").display()))
            .arg(format!("--storage.tsdb.path={}", dir.join("data").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--web.enable-lifecycle")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("prometheus.log")).unwrap())
            .kill_on_drop(true)
            .spawn()
            .expect("prometheus runs (Debian package prometheus, in .ci/packages)");
        let p = Prometheus {
            url: format!("http://127.0.0.1:{port}"),
            dir: dir.to_owned(),
            token_file: token_file.to_owned(),
            _child: child,
        };
        let started = Instant::now();
        while !reqwest::get(format!("{}/-/ready", p.url)).await.is_ok_and(|r| r.status().is_success()) {
            assert!(started.elapsed() < Duration::from_secs(30), "prometheus is not ready: {}", p.log());
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        p
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("prometheus.log")).unwrap_or_default()
    }

    /// Scrapes `targets` from now on.
    async fn retarget(&self, targets: &[&str]) {
        std::fs::write(self.dir.join("prometheus.yml"), config(&self.token_file, targets)).unwrap();
        let r = reqwest::Client::new().post(format!("{}/-/reload", self.url)).send().await.unwrap();
        assert!(r.status().is_success(), "reload: {}", r.text().await.unwrap_or_default());
    }

    /// Evaluates `expr` now: each series' labels (without the target's `instance` and `job`)
    /// and value.
    async fn query(&self, expr: &str) -> Vec<(BTreeMap<String, String>, f64)> {
        let r = reqwest::Client::new()
            .get(format!("{}/api/v1/query", self.url))
            .query(&[("query", expr)])
            .timeout(Duration::from_secs(10))
            .send()
            .await
            .unwrap();
        let v: Value = r.json().await.unwrap();
        assert_eq!(v["status"], "success", "{expr}: {v}");
        v["data"]["result"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                let mut labels: BTreeMap<String, String> =
                    serde_json::from_value(s["metric"].clone()).unwrap_or_default();
                labels.remove("instance");
                labels.remove("job");
                let value = s["value"][1].as_str().unwrap().parse().unwrap_or(f64::NAN);
                (labels, value)
            })
            .collect()
    }
}

/// One query of a panel.
struct Target {
    panel: String,
    /// The expression with Grafana's variables given: every cluster, a rate window of ten
    /// 1 s scrapes.
    expr: String,
    /// Whether it charts each replica (its legend names the `instance`).
    per_replica: bool,
}

/// Every panel's queries.
fn targets() -> Vec<Target> {
    let dashboard = dashboard();
    let mut out = Vec::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        for t in panel["targets"].as_array().into_iter().flatten() {
            out.push(Target {
                panel: panel["title"].as_str().unwrap().to_owned(),
                expr: t["expr"]
                    .as_str()
                    .unwrap()
                    .replace("$__rate_interval", "10s")
                    .replace("$cluster", ".*"),
                per_replica: t["legendFormat"].as_str().is_some_and(|l| l.contains("{{instance}}")),
            });
        }
    }
    out
}

/// The panels none of whose queries has data yet.
async fn empty_panels(p: &Prometheus, targets: &[Target]) -> Vec<String> {
    let mut with_data = BTreeMap::<&str, bool>::new();
    for t in targets {
        let has = !p.query(&t.expr).await.is_empty();
        *with_data.entry(t.panel.as_str()).or_default() |= has;
    }
    with_data.into_iter().filter(|(_, has)| !has).map(|(panel, _)| panel.to_owned()).collect()
}

/// What each replica counts of what it served itself, which a panel rightly sums over the
/// replicas (and the lease, which each exports of itself).
const SERVED: [&str; 9] = [
    "vantage_door_redirects_total",
    "vantage_dns_line_answers_total",
    "vantage_dns_queries_total",
    "vantage_dns_truncated_total",
    "vantage_dns_dropped_total",
    "vantage_probe_rtt_seconds_bucket",
    "vantage_monitor_ttfb_seconds_bucket",
    "vantage_evaluation_duration_seconds_bucket",
    "vantage_evaluator_lease",
];

/// The fleet's metrics the panels chart: every metric of a query that is not per replica,
/// but what replicas serve themselves. Each must come from one replica only, or a panel
/// summing over the replicas counts it twice.
fn fleet_metrics(targets: &[Target]) -> BTreeSet<String> {
    targets
        .iter()
        .filter(|t| !t.per_replica)
        .flat_map(|t| metric_names(&t.expr))
        .filter(|n| !SERVED.contains(&n.as_str()))
        .collect()
}

/// The fleet metrics exported by a number of replicas other than one, with that number.
async fn not_from_one_replica(p: &Prometheus, metrics: &BTreeSet<String>) -> Vec<(String, usize)> {
    let mut out = Vec::new();
    for m in metrics {
        let replicas = p.query(&format!("count by (instance) ({{__name__=\"{m}\"}})")).await.len();
        if replicas != 1 {
            out.push((m.clone(), replicas));
        }
    }
    out
}

/// Waits until `f` holds for `expr`'s only value, at most 60 s.
async fn until_value(p: &Prometheus, expr: &str, f: impl Fn(f64) -> bool) {
    let started = Instant::now();
    loop {
        let r = p.query(expr).await;
        if let [(_, v)] = r.as_slice()
            && f(*v)
        {
            return;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "{expr}: {r:?}\n{}", p.log());
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// `/go` and `/steer` requests, and DNS queries, each a few times.
async fn traffic(s: &ServerProcess, domain: &str) {
    let client = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    for _ in 0..3 {
        let r = client.get(format!("{}/go/t1/pool/x.deb", s.url)).send().await.unwrap();
        assert_eq!(r.status().as_u16(), 302, "{:?}", r.text().await);
        let r = client.get(format!("{}/steer/live", s.url)).send().await.unwrap();
        assert_eq!(r.status().as_u16(), 200);
        assert!(!dig(s.dns(), domain).await.is_empty());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_panel_has_data_in_prometheus_and_no_fleet_figure_doubles_with_a_second_replica() {
    let db = FreshDatabase::new().await;
    let temp = tempfile::tempdir().unwrap();
    let domain = "cdn.dashboard.example";
    let spec = LabSpec {
        net: Place::Loopback(190),
        database: Some(db.url.clone()),
        server_dir: Some(temp.path().join("a")),
        ..LabSpec::default()
    };
    let LabFleet { s: a, edges, cluster, probers: _probers, temp: _fleet, .. } =
        LabFleet::start_with(domain, spec).await;

    // A mirror behind a door, a live HLS monitor, a webhook and a publisher nobody answers.
    let put = |path: &'static str, body: Value| {
        let a = &a;
        async move {
            let (st, v) = a.call(Method::PUT, path, Some(body)).await;
            assert!(st == 200 || st == 201, "{path}: {v}");
        }
    };
    put("/v1/settings/mirrors", json!({"scheme": "http"})).await;
    put("/v1/tenants/t1", json!({})).await;
    let mirror = EdgeServer::start(([127, 0, 0, 1], 0).into()).await.unwrap();
    put("/v1/mirrors/m1.example.net", json!({"tenants": ["t1"], "address": mirror.addr().to_string()})).await;
    let origin =
        EdgeServer::start_with(([127, 0, 0, 1], 0).into(), EdgeOptions::new(Behavior::Hls)).await.unwrap();
    let check = json!({"method": "hls", "interval_s": 1, "timeout_ms": 900});
    let endpoint = origin.url(hls_paths::FRESH);
    a.create(
        "/v1/monitors",
        json!({"name": "live", "check": check, "steering_ttl_s": 5, "regions": [
            {"region": "ap-sg", "weight": 1, "endpoints": [endpoint], "pathway": "cdn-a"}]}),
    )
    .await;
    a.create("/v1/webhooks", json!({"name": "ops", "url": "http://127.0.0.1:9/hook"})).await;
    let closed = vantage_testkit::free_port().unwrap();
    let publishers = json!({"publishers": [{"name": "secondary", "server": format!("127.0.0.1:{closed}"),
        "key_name": "vantage", "key_algorithm": "hmac-sha256", "key_secret": "c2VjcmV0LXNlY3JldC1zZWNyZXQ="}]});
    let (st, v) = a.call(Method::PATCH, &format!("/v1/clusters/{cluster}"), Some(publishers)).await;
    assert_eq!(st, 200, "{v}");
    // One address down, so that the fleet's counts are not all zero.
    edges[3].stop().await;

    let token_file = temp.path().join("prometheus-token");
    std::fs::write(&token_file, &a.token).unwrap();
    let host = |s: &ServerProcess| s.url.trim_start_matches("http://").to_owned();
    let prometheus = Prometheus::start(&temp.path().join("prometheus"), &token_file, &[&host(&a)]).await;
    let targets = targets();
    assert!(targets.len() >= 40, "{}", targets.len());

    // One replica: every panel shows data once the fleet settled (the address counted down,
    // the mirror and the monitor judged).
    until_value(&prometheus, "count(vantage_address_reachable == 0)", |v| v == 1.0).await;
    until_value(&prometheus, "count(vantage_mirror_verdict == 2)", |v| v == 1.0).await;
    until_value(&prometheus, "count(vantage_monitor_verdict == 2)", |v| v == 1.0).await;
    let started = Instant::now();
    loop {
        traffic(&a, domain).await;
        let empty = empty_panels(&prometheus, &targets).await;
        if empty.is_empty() {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(90), "panels without data: {empty:?}");
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    // The traffic was counted (a counter at 0 is data too), and every metric the dashboard
    // names, its variables included, is one the server offers.
    until_value(&prometheus, "sum(vantage_door_redirects_total{outcome=\"redirected\"})", |v| v >= 3.0).await;
    until_value(&prometheus, "sum(vantage_dns_line_answers_total{cluster=\"video\"})", |v| v >= 3.0).await;
    let exposition = a.metrics().await;
    let families = families(&exposition);
    let used: BTreeSet<String> = dashboard_expressions().iter().flat_map(|e| metric_names(e)).collect();
    let missing: Vec<&String> = used.iter().filter(|n| !offered(n, &families)).collect();
    assert!(missing.is_empty(), "the dashboard asks for {missing:?}, which /metrics does not have");
    let fleet = fleet_metrics(&targets);
    assert!(fleet.len() >= 15, "{fleet:?}");
    let wrong = not_from_one_replica(&prometheus, &fleet).await;
    assert!(wrong.is_empty(), "one replica, yet (metric, replicas exporting it): {wrong:?}");

    // A second replica on the same database, scraped too.
    let dir = temp.path().join("b");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(a.dir.join("admin-token"), dir.join("admin-token")).unwrap();
    let b = ServerProcess::start_in(&dir, &["--database", &db.url, "--allow-loopback-addresses"]).await;
    prometheus.retarget(&[&host(&a), &host(&b)]).await;
    until_value(&prometheus, "count(up == 1)", |v| v == 2.0).await;
    until_value(&prometheus, "count(vantage_evaluator_lease)", |v| v == 2.0).await;
    until_value(&prometheus, "sum(vantage_evaluator_lease)", |v| v == 1.0).await;
    // Both replicas' series over a whole rate window.
    tokio::time::sleep(Duration::from_secs(11)).await;
    traffic(&b, domain).await;
    // The follower exports none of the fleet's figures: no panel counts anything twice.
    let wrong = not_from_one_replica(&prometheus, &fleet).await;
    assert!(wrong.is_empty(), "two replicas, and (metric, replicas exporting it): {wrong:?}");
    // The per-replica panels show both.
    let cpu = prometheus.query("process_resident_memory_bytes").await;
    assert_eq!(cpu.len(), 2, "{cpu:?}");
    b.stop().await;
}
