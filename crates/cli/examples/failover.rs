//! Failover measured end to end: an edge fails, and the clock runs until the built-in DNS
//! server stops answering its address and until an RFC 2136 peer (a real Knot DNS, started
//! here) serves the new records; then the edge comes back and the clock runs again.
//!
//! ```text
//! cargo run --release -p vantage --example failover -- [--reps 5] [--settings fast|default|both]
//!                                                       [--failure refused|hang|both]
//! ```
//!
//! Everything runs on 127.0.0.0/8: a control plane (`Server::start`, lab mode, ephemeral
//! ports), three probers in three regions (`run_prober`, started together: the server gives
//! each a phase a third of an interval apart, and asks the others to confirm at once what one
//! of them sees change), four edge HTTP servers on 127.0.0.21–24 (one node has
//! 127.0.0.21 as primary and 127.0.0.22 as backup), and `knotd` with a TSIG key, set as the
//! cluster's publisher. Each repetition waits a random part of an interval (so the failure
//! falls anywhere in the probers' rounds), then fails the primary, and once both DNS servers
//! answer the backup, waits a random part of an interval again and brings it back:
//!
//! - `refused`: its listener closes (a crashed server process: connections are refused);
//! - `hang`: a server that accepts and never answers takes its place (a hung server, like a
//!   host that drops packets: each attempt runs into the timeout).
//!
//! Flap damping is off (`damping_max_multiplier` 1): every repetition fails the same edge
//! again within minutes, and the recoveries would otherwise grow 2×, 4×, 8×.
//!
//! The built-in DNS server and Knot are asked every 20 ms (UDP, from 127.0.0.1); the admin
//! API every 250 ms for the breakdown (first failing result, strict majority, revision). The
//! worst case for clients is the latest moment an answer naming the dead edge may still be
//! handed out by a resolver: the time of each such answer of the built-in server plus its TTL.
//! Needs `knotd` (Debian package `knot`).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};
use reqwest::Method;
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use vantage_agent::{ChannelOptions, Fingerprint, ProberOptions, Url};
use vantage_core::Timestamp;
use vantage_server::{ServeConfig, Server};
use vantage_testkit::{Behavior, EdgeOptions, EdgeServer, KnotServer};

const DOMAIN: &str = "cdn.bench.test";
const KEY: &str = "vantage-key";
const SECRET: &str = "bm90LWEtcmVhbC1zZWNyZXQtanVzdC1mb3ItdGVzdHM=";
const PRIMARY: [u8; 4] = [127, 0, 0, 21];
const BACKUP: [u8; 4] = [127, 0, 0, 22];
const OTHERS: [[u8; 4]; 2] = [[127, 0, 0, 23], [127, 0, 0, 24]];
/// Longest wait for one change before the run is declared broken.
const LIMIT: Duration = Duration::from_secs(300);

#[derive(Debug, Clone, Copy, PartialEq)]
enum Preset {
    /// The fastest settings §3.3 allows.
    Fast,
    Default,
}

impl Preset {
    fn name(self) -> &'static str {
        match self {
            Preset::Fast => "fastest allowed (5 s interval, 1 s timeout, 5 s / 5 s)",
            Preset::Default => "default (10 s interval, 3 s timeout, 30 s / 60 s)",
        }
    }

    fn settings(self) -> Value {
        match self {
            Preset::Fast => json!({"interval_s": 5, "timeout_ms": 1000, "attempts": 3, "loss_pct": 50,
                "failing_before_unreachable_s": 5, "answering_before_reachable_s": 5}),
            Preset::Default => json!({"interval_s": 10, "timeout_ms": 3000, "attempts": 3, "loss_pct": 50,
                "failing_before_unreachable_s": 30, "answering_before_reachable_s": 60}),
        }
    }

    fn interval(self) -> Duration {
        Duration::from_secs(if self == Preset::Fast { 5 } else { 10 })
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Failure {
    Refused,
    Hang,
}

#[derive(Debug)]
struct Opts {
    reps: usize,
    presets: Vec<Preset>,
    failures: Vec<Failure>,
}

fn opts() -> anyhow::Result<Opts> {
    let mut o =
        Opts { reps: 5, presets: vec![Preset::Fast, Preset::Default], failures: vec![Failure::Refused] };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().ok_or_else(|| anyhow!("{a} needs a value"));
        match a.as_str() {
            "--reps" => o.reps = value()?.parse().context("--reps")?,
            "--settings" => {
                o.presets = match value()?.as_str() {
                    "fast" => vec![Preset::Fast],
                    "default" => vec![Preset::Default],
                    "both" => vec![Preset::Fast, Preset::Default],
                    other => bail!("--settings {other}: fast, default or both"),
                }
            }
            "--failure" => {
                o.failures = match value()?.as_str() {
                    "refused" => vec![Failure::Refused],
                    "hang" => vec![Failure::Hang],
                    "both" => vec![Failure::Refused, Failure::Hang],
                    other => bail!("--failure {other}: refused, hang or both"),
                }
            }
            other => bail!("unknown argument {other}; see the top of crates/cli/examples/failover.rs"),
        }
    }
    Ok(o)
}

/// The A records `server` answers for `name` (asked from 127.0.0.1), sorted.
async fn query_a(server: SocketAddr, name: &str) -> anyhow::Result<Vec<IpAddr>> {
    vantage_dns::query_a(server, name, Duration::from_secs(1)).await.map_err(anyhow::Error::msg)
}

fn ips(list: &[[u8; 4]]) -> Vec<IpAddr> {
    let mut v: Vec<IpAddr> = list.iter().map(|o| IpAddr::from(*o)).collect();
    v.sort();
    v
}

/// The admin API.
struct Api {
    base: String,
    token: String,
    http: reqwest::Client,
}

impl Api {
    async fn call(&self, method: Method, path: &str, body: Option<Value>) -> anyhow::Result<Value> {
        let mut r =
            self.http.request(method.clone(), format!("{}{path}", self.base)).bearer_auth(&self.token);
        if let Some(b) = body {
            r = r.json(&b);
        }
        let resp = r.send().await.with_context(|| format!("{method} {path}"))?;
        let status = resp.status();
        let v: Value = resp.json().await.unwrap_or(Value::Null);
        if !status.is_success() {
            bail!("{method} {path}: {status}: {v}");
        }
        Ok(v)
    }

    async fn id(&self, path: &str, body: Value) -> anyhow::Result<i64> {
        let v = self.call(Method::POST, path, Some(body)).await?;
        v["id"].as_i64().ok_or_else(|| anyhow!("POST {path}: no id in {v}"))
    }
}

/// One control plane with its fleet.
struct Bench {
    server: Server,
    api: Api,
    dns: SocketAddr,
    cluster: i64,
    node: i64,
    primary: EdgeServer,
    _others: Vec<EdgeServer>,
    stop: watch::Sender<bool>,
    probers: Vec<JoinHandle<()>>,
    _dir: tempfile::TempDir,
}

async fn setup(preset: Preset, knot: SocketAddr) -> anyhow::Result<Bench> {
    let dir = tempfile::tempdir()?;
    let any = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
    let server = Server::start(ServeConfig {
        data_dir: dir.path().join("server"),
        api_listen: any,
        agent_listen: any,
        dns_listen: any,
        allow_loopback_addresses: true,
        log_level: "warn".into(),
        ..ServeConfig::default()
    })
    .await?;
    let token = std::fs::read_to_string(dir.path().join("server").join("admin-token"))?.trim().to_owned();
    let api = Api { base: format!("http://{}", server.api_addr()), token, http: reqwest::Client::new() };
    api.call(Method::PUT, "/v1/settings/probes", Some(preset.settings())).await?;
    // Every repetition fails the same edge again within minutes: flap damping would lengthen
    // each recovery (2×, 4×, 8×). The benchmark measures the base timers.
    api.call(Method::PUT, "/v1/settings/detection", Some(json!({"damping_max_multiplier": 1}))).await?;

    // Edges: one port free on every address.
    let primary = EdgeServer::start(SocketAddr::new(IpAddr::from(PRIMARY), 0)).await?;
    let port = primary.addr().port();
    let mut others = Vec::new();
    for ip in [BACKUP, OTHERS[0], OTHERS[1]] {
        others.push(EdgeServer::start(SocketAddr::new(IpAddr::from(ip), port)).await?);
    }

    let mut regions = Vec::new();
    for (code, name) in [("ap-sg", "Singapore"), ("eu-de", "Frankfurt"), ("us-va", "Virginia")] {
        regions.push(api.id("/v1/regions", json!({"code": code, "name": name})).await?);
    }
    let cluster = api
        .id(
            "/v1/clusters",
            json!({"name": "bench", "domain": DOMAIN, "listeners": [{"port": port, "protocol": "http"}],
                   "publishers": [{"name": "knot", "server": knot.to_string(), "key_name": KEY,
                                   "key_algorithm": "hmac-sha256", "key_secret": SECRET}]}),
        )
        .await?;
    let group = api.id(&format!("/v1/clusters/{cluster}/groups"), json!({"name": "pop-1"})).await?;
    api.id(&format!("/v1/clusters/{cluster}/lines"), json!({"name": "default", "group": group})).await?;
    let mut node = 0;
    let addresses = [
        json!([{"ip": IpAddr::from(PRIMARY), "level": "primary"}, {"ip": IpAddr::from(BACKUP), "level": "backup1"}]),
        json!([{"ip": IpAddr::from(OTHERS[0])}]),
        json!([{"ip": IpAddr::from(OTHERS[1])}]),
    ];
    for (i, a) in addresses.into_iter().enumerate() {
        let id = api
            .id("/v1/nodes", json!({"cluster": cluster, "group": group, "name": format!("edge-{i}")}))
            .await?;
        api.call(Method::PUT, &format!("/v1/nodes/{id}/addresses"), Some(a)).await?;
        if i == 0 {
            node = id;
        }
    }

    let (stop, stopped) = watch::channel(false);
    let fingerprint: Fingerprint =
        server.ca_fingerprint().parse().map_err(|e| anyhow!("CA fingerprint: {e}"))?;
    let url = Url::parse(&format!("https://{}", server.agent_addr()))?;
    let mut probers = Vec::new();
    for (i, region) in regions.iter().enumerate() {
        let t = api
            .call(
                Method::POST,
                "/v1/probers/tokens",
                Some(json!({"name": format!("p{i}"), "region": region})),
            )
            .await?;
        let channel = ChannelOptions {
            server: Some(url.clone()),
            token: t["token"].as_str().map(str::to_owned),
            ca_sha256: Some(fingerprint),
            state_dir: dir.path().join(format!("p{i}")),
            hostname: Some(format!("p{i}")),
        };
        let opts = ProberOptions { concurrency: 64, ..ProberOptions::new(channel) };
        let mut stop = stopped.clone();
        probers.push(tokio::spawn(async move {
            let shutdown = async move {
                let _ = stop.wait_for(|s| *s).await;
            };
            if let Err(e) = vantage_agent::run_prober(opts, shutdown).await {
                eprintln!("prober p{i}: {e}");
            }
        }));
    }
    let dns = server.dns_addr();
    Ok(Bench { server, api, dns, cluster, node, primary, _others: others, stop, probers, _dir: dir })
}

impl Bench {
    async fn stop(self) {
        let _ = self.stop.send(true);
        for p in self.probers {
            let _ = p.await;
        }
        self.server.shutdown().await;
    }

    /// Waits until both DNS servers answer `want` and stay so for `settle`.
    async fn wait_for(&self, knot: SocketAddr, want: &[IpAddr], settle: Duration) -> anyhow::Result<()> {
        let started = Instant::now();
        let mut since: Option<Instant> = None;
        loop {
            let ok = query_a(self.dns, DOMAIN).await.ok().as_deref() == Some(want)
                && query_a(knot, DOMAIN).await.ok().as_deref() == Some(want);
            match (ok, since) {
                (true, Some(s)) if s.elapsed() >= settle => return Ok(()),
                (true, None) => since = Some(Instant::now()),
                (false, _) => since = None,
                _ => {}
            }
            if started.elapsed() > LIMIT {
                bail!("the DNS servers did not settle on {want:?}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn probers_online(&self) -> anyhow::Result<()> {
        let started = Instant::now();
        loop {
            let v = self.api.call(Method::GET, "/v1/probers", None).await?;
            let items = v["items"].as_array().cloned().unwrap_or_default();
            if items.len() == 3 && items.iter().all(|p| p["status"] == "online" && !p["last_round"].is_null())
            {
                return Ok(());
            }
            if started.elapsed() > LIMIT {
                bail!("probers not online: {v}");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The newest revision: its number, when it was cut, and whether it still names the
    /// primary (a revision that only shortens the TTL while the primary is suspect does).
    async fn newest_revision(&self) -> anyhow::Result<(u64, Option<Timestamp>, bool)> {
        let v = self
            .api
            .call(Method::GET, &format!("/v1/clusters/{}/revisions?limit=1", self.cluster), None)
            .await?;
        let item = &v["items"][0];
        let primary = json!(IpAddr::from(PRIMARY).to_string());
        let names_primary = item["records"]["all"].as_array().is_some_and(|a| a.contains(&primary));
        Ok((
            item["number"].as_u64().unwrap_or(0),
            serde_json::from_value(item["at"].clone()).ok(),
            names_primary,
        ))
    }
}

/// Seconds from `t0` (server clock, ms) to `t`.
fn secs(t0: Timestamp, t: Timestamp) -> f64 {
    // Milliseconds of a run that lasts minutes: exact in an f64.
    t.millis_since(t0) as f64 / 1000.0
}

/// One failure and recovery, in seconds from the failure (or the recovery).
#[derive(Debug, Clone, Copy)]
struct Sample {
    /// A prober's first failing result.
    seen: f64,
    /// A strict majority of probers sees the address failing (the evaluator's `failing_from`).
    majority: f64,
    /// The revision that moves to the backup.
    revision: f64,
    /// The built-in DNS server answers the backup.
    dns: f64,
    /// Knot answers the backup.
    knot: f64,
    /// Until when a resolver could still hand out an answer naming the dead edge: the latest
    /// answer of the built-in server naming it, plus its TTL.
    clients: f64,
    /// After the edge is back: the built-in DNS server answers the primary again.
    back_dns: f64,
    /// After the edge is back: Knot answers the primary again.
    back_knot: f64,
}

async fn once(b: &mut Bench, knot: SocketAddr, preset: Preset, failure: Failure) -> anyhow::Result<Sample> {
    let healthy = ips(&[PRIMARY, OTHERS[0], OTHERS[1]]);
    let failed = ips(&[BACKUP, OTHERS[0], OTHERS[1]]);
    let primary = IpAddr::from(PRIMARY);
    // Anywhere in the probers' rounds.
    let phase = preset.interval().mul_f64(rand::random::<f64>());
    tokio::time::sleep(phase).await;
    let (revision_before, _, _) = b.newest_revision().await?;

    let (t0, ts0) = (Instant::now(), vantage_server::now());
    let mut hung = None;
    b.primary.stop().await;
    if failure == Failure::Hang {
        let opts = EdgeOptions::new(Behavior::Silent);
        hung = Some(EdgeServer::start_with(b.primary.addr(), opts).await?);
    }
    let (mut dns, mut knot_at, mut seen, mut majority, mut revision) = (None, None, None::<f64>, None, None);
    let mut clients = 0.0f64;
    let mut last_api = Instant::now() - Duration::from_secs(1);
    while dns.is_none() || knot_at.is_none() || revision.is_none() || majority.is_none() {
        if dns.is_none() {
            let asked = t0.elapsed().as_secs_f64();
            match vantage_dns::query_a_with_ttl(b.dns, DOMAIN, Duration::from_secs(1)).await {
                Ok((answer, _)) if answer == failed => dns = Some(asked),
                Ok((answer, ttl)) if answer.contains(&primary) => {
                    clients = clients.max(asked + f64::from(ttl))
                }
                _ => {}
            }
        }
        if knot_at.is_none() && query_a(knot, DOMAIN).await.ok().as_ref() == Some(&failed) {
            knot_at = Some(t0.elapsed().as_secs_f64());
        }
        if last_api.elapsed() >= Duration::from_millis(250) {
            last_api = Instant::now();
            let results = b.api.call(Method::GET, &format!("/v1/nodes/{}/results", b.node), None).await?;
            for r in results["items"].as_array().map(Vec::as_slice).unwrap_or_default() {
                let failing = r["address"] == primary.to_string() && !r["error"].is_null();
                if let (true, Ok(at)) = (failing, serde_json::from_value::<Timestamp>(r["checked"].clone()))
                    && at >= ts0
                {
                    let t = secs(ts0, at);
                    seen = Some(seen.map_or(t, |x| x.min(t)));
                }
            }
            let node = b.api.call(Method::GET, &format!("/v1/nodes/{}", b.node), None).await?;
            for a in node["addresses"].as_array().map(Vec::as_slice).unwrap_or_default() {
                if a["ip"] == primary.to_string()
                    && majority.is_none()
                    && let Ok(at) = serde_json::from_value::<Timestamp>(a["probers"]["failing_from"].clone())
                {
                    majority = Some(secs(ts0, at));
                }
            }
            if revision.is_none()
                && let (n, Some(at), false) = b.newest_revision().await?
                && n > revision_before
            {
                revision = Some(secs(ts0, at));
            }
        }
        if t0.elapsed() > LIMIT {
            bail!("no failover within {LIMIT:?} (dns {dns:?}, knot {knot_at:?}, revision {revision:?})");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // Back, again anywhere in the probers' rounds (the failover ended in step with them).
    tokio::time::sleep(preset.interval().mul_f64(rand::random::<f64>())).await;
    if let Some(h) = hung.take() {
        h.stop().await;
        drop(h);
    }
    b.primary.restart().await?;
    let t1 = Instant::now();
    let (mut back_dns, mut back_knot) = (None, None);
    while back_dns.is_none() || back_knot.is_none() {
        if back_dns.is_none() && query_a(b.dns, DOMAIN).await.ok().as_ref() == Some(&healthy) {
            back_dns = Some(t1.elapsed().as_secs_f64());
        }
        if back_knot.is_none() && query_a(knot, DOMAIN).await.ok().as_ref() == Some(&healthy) {
            back_knot = Some(t1.elapsed().as_secs_f64());
        }
        if t1.elapsed() > LIMIT {
            bail!("no recovery within {LIMIT:?}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(Sample {
        // A round may report before the 250 ms poll sees it fail: then it is not known.
        seen: seen.unwrap_or(f64::NAN),
        majority: majority.unwrap_or_default(),
        revision: revision.unwrap_or_default(),
        dns: dns.unwrap_or_default(),
        knot: knot_at.unwrap_or_default(),
        clients,
        back_dns: back_dns.unwrap_or_default(),
        back_knot: back_knot.unwrap_or_default(),
    })
}

/// min / median / max.
fn summary(v: &[f64]) -> String {
    let mut v: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return "-".into();
    }
    v.sort_by(f64::total_cmp);
    let median = if v.len() % 2 == 1 { v[v.len() / 2] } else { (v[v.len() / 2 - 1] + v[v.len() / 2]) / 2.0 };
    format!("{:.1} / {:.1} / {:.1}", v[0], median, v[v.len() - 1])
}

async fn run(o: Opts) -> anyhow::Result<()> {
    let knot =
        KnotServer::start(DOMAIN, KEY, "hmac-sha256", SECRET).context("knotd (Debian package knot)")?;
    let cpus = std::thread::available_parallelism().map_or(0, usize::from);
    println!("failover end to end: {} repetitions per case, {cpus} CPUs, knotd at {}", o.reps, knot.addr());
    let healthy = ips(&[PRIMARY, OTHERS[0], OTHERS[1]]);
    for &preset in &o.presets {
        for &failure in &o.failures {
            println!();
            println!("## settings {}, failure: {failure:?}", preset.name());
            let mut b = setup(preset, knot.addr()).await?;
            b.probers_online().await?;
            b.wait_for(knot.addr(), &healthy, Duration::from_secs(1)).await?;
            println!("rep  seen  majority  revision  DNS     Knot    clients | back: DNS  Knot");
            let mut all = Vec::new();
            for rep in 1..=o.reps {
                let s = once(&mut b, knot.addr(), preset, failure).await?;
                println!(
                    "{rep:>3}  {:>4.1}  {:>8.1}  {:>8.1}  {:>6.2}  {:>6.2}  {:>6.1}  |       {:>5.2}  {:>5.2}",
                    s.seen, s.majority, s.revision, s.dns, s.knot, s.clients, s.back_dns, s.back_knot
                );
                all.push(s);
                // Every address reachable again and the answers settled before the next one.
                b.wait_for(knot.addr(), &healthy, Duration::from_secs(1)).await?;
            }
            let col = |f: fn(&Sample) -> f64| summary(&all.iter().map(f).collect::<Vec<_>>());
            println!("min / median / max (s):");
            println!("  first failing result      {}", col(|s| s.seen));
            println!("  strict majority failing   {}", col(|s| s.majority));
            println!("  revision                  {}", col(|s| s.revision));
            println!("  built-in DNS answers it   {}", col(|s| s.dns));
            println!("  Knot (RFC 2136) serves it {}", col(|s| s.knot));
            println!("  clients may still use it  {}", col(|s| s.clients));
            println!("  back: built-in DNS        {}", col(|s| s.back_dns));
            println!("  back: Knot                {}", col(|s| s.back_knot));
            b.stop().await;
        }
    }
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let o = opts()?;
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(run(o))
}
