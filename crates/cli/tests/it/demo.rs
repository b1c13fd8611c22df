//! `vantage demo` as a process, the way a newcomer runs it (on free ports, so a developer's
//! own demo on 8080/8053 is never disturbed): it serves, its DNS answers, its scripted failure
//! moves the answer to the backup address and back, and once it ends — by `--duration` or by
//! a signal — nothing it started is running or listening.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// A running `vantage demo`, its standard output collected line by line.
struct Demo {
    child: Child,
    ready: Value,
    lines: Arc<Mutex<Vec<String>>>,
    /// Reads stdout into `lines` until the process closes it.
    reader: Option<tokio::task::JoinHandle<()>>,
    log: PathBuf,
    _log_dir: tempfile::TempDir,
}

impl Demo {
    /// Starts `vantage demo ARGS… --api-listen 127.0.0.1:0 --dns-listen 127.0.0.1:PORT` (a
    /// port `dig` never takes as its own, see `free_port`) and waits for its `ready` line.
    async fn start(args: &[&str]) -> Demo {
        let log_dir = tempfile::tempdir().unwrap();
        let log = log_dir.path().join("demo.log");
        let mut child = Command::new(env!("CARGO_BIN_EXE_vantage"))
            .arg("demo")
            .args(args)
            .args(["--api-listen", "127.0.0.1:0", "--dns-listen"])
            .arg(format!("127.0.0.1:{}", vantage_testkit::free_port().unwrap()))
            .args(["--log-level", "info"])
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let mut reader = BufReader::new(child.stdout.take().unwrap()).lines();
        let sink = lines.clone();
        let reader = tokio::spawn(async move {
            while let Ok(Some(line)) = reader.next_line().await {
                sink.lock().unwrap().push(line);
            }
        });
        let started = Instant::now();
        let ready = loop {
            let found =
                lines.lock().unwrap().iter().find_map(|l| l.strip_prefix("ready ").map(str::to_owned));
            if let Some(json) = found {
                break serde_json::from_str::<Value>(&json).unwrap();
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "no ready line: {:?}\n{}",
                lines.lock().unwrap(),
                std::fs::read_to_string(&log).unwrap_or_default()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        Demo { child, ready, lines, reader: Some(reader), log, _log_dir: log_dir }
    }

    fn addr(&self, key: &str) -> SocketAddr {
        let s = self.ready[key].as_str().unwrap();
        s.trim_start_matches("http://").trim_start_matches("https://").parse().unwrap()
    }

    /// Every listening address the demo announced: API, agent channel, DNS, edges.
    fn tcp_addrs(&self) -> Vec<SocketAddr> {
        let port = u16::try_from(self.ready["edge_port"].as_u64().unwrap()).unwrap();
        let mut v = vec![self.addr("api"), self.addr("agent"), self.addr("dns")];
        for ip in self.ready["edges"].as_array().unwrap() {
            v.push(SocketAddr::new(ip.as_str().unwrap().parse::<IpAddr>().unwrap(), port));
        }
        v
    }

    fn output(&self) -> String {
        self.lines.lock().unwrap().join("\n")
    }

    /// What went wrong, for assertion messages.
    fn story(&self) -> String {
        format!("{}\n--- log ---\n{}", self.output(), std::fs::read_to_string(&self.log).unwrap_or_default())
    }

    /// `dig @dns NAME A +short EXTRA…`, sorted.
    async fn dig(&self, name: &str, extra: &[&str]) -> Vec<String> {
        let dns = self.addr("dns");
        let out = Command::new("dig")
            .args([format!("@{}", dns.ip()), "-p".into(), dns.port().to_string(), name.into(), "A".into()])
            .args(["+short", "+time=1", "+tries=1"])
            .args(extra)
            .output()
            .await
            .expect("dig (bind9-dnsutils) is installed");
        let mut v: Vec<String> = String::from_utf8_lossy(&out.stdout).lines().map(str::to_owned).collect();
        v.sort();
        v
    }

    /// Polls `dig` until it answers `want`; the time it took.
    async fn dig_until(&self, name: &str, extra: &[&str], want: &[&str], limit: Duration) -> Duration {
        let started = Instant::now();
        loop {
            let got = self.dig(name, extra).await;
            if got == want {
                return started.elapsed();
            }
            assert!(
                started.elapsed() < limit,
                "{name} {extra:?} answered {got:?}, not {want:?}, within {limit:?}\n{}",
                self.story()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits until the output holds `needle` (the narrator polls twice a second).
    async fn wait_for_output(&self, needle: &str, limit: Duration) {
        let started = Instant::now();
        while !self.output().contains(needle) {
            assert!(started.elapsed() < limit, "no {needle:?} within {limit:?}\n{}", self.story());
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits for the process to end by itself, and for its last lines to be read; its exit
    /// code.
    async fn wait(&mut self, limit: Duration) -> i32 {
        let status = tokio::time::timeout(limit, self.child.wait()).await;
        let status =
            status.unwrap_or_else(|_| panic!("the demo did not stop within {limit:?}\n{}", self.story()));
        // The pipe may still hold what the process printed last (`data kept in …`).
        if let Some(reader) = self.reader.take() {
            let _ = tokio::time::timeout(Duration::from_secs(5), reader).await;
        }
        status.unwrap().code().unwrap_or(-1)
    }

    /// Sends `signal` (INT, TERM) to the process.
    async fn signal(&self, signal: &str) {
        let pid = self.child.id().unwrap();
        let st = Command::new("kill").arg(format!("-{signal}")).arg(pid.to_string()).status().await.unwrap();
        assert!(st.success());
    }
}

/// True when something accepts TCP connections on `addr`.
fn listening(addr: SocketAddr) -> bool {
    std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_ok()
}

/// Every address can be bound again: TCP for all, UDP as well for DNS.
fn assert_all_free(demo: &Demo) {
    for a in demo.tcp_addrs() {
        assert!(!listening(a), "{a} still accepts connections");
        std::net::TcpListener::bind(a).unwrap_or_else(|e| panic!("{a} cannot be bound again: {e}"));
    }
    let dns = demo.addr("dns");
    std::net::UdpSocket::bind(dns).unwrap_or_else(|e| panic!("DNS {dns}/udp cannot be bound again: {e}"));
}

/// Revisions the narrator printed for health changes.
fn health_revisions(out: &str) -> usize {
    out.lines().filter(|l| l.contains("] revision ") && l.contains("Node health changed")).count()
}

/// The number of seconds between `before` and `after` in the narrator's output.
fn after(out: &str, before: &str, after: &str) -> f64 {
    let line = out
        .lines()
        .find(|l| l.contains(before) && l.contains(after))
        .unwrap_or_else(|| panic!("no {before:?}: {out}"));
    let from = line.find(before).unwrap() + before.len();
    let to = line.find(after).unwrap();
    line[from..to].parse().unwrap()
}

const LOCAL: [&str; 2] = ["127.0.0.11", "127.0.0.13"];
const LOCAL_ON_BACKUP: [&str; 2] = ["127.0.0.12", "127.0.0.13"];
const DEFAULT: [&str; 2] = ["127.0.0.14", "127.0.0.16"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_for_its_duration_answers_dns_then_leaves_nothing_listening() {
    let mut demo = Demo::start(&["--duration", "20s", "--no-failure"]).await;
    let data = PathBuf::from(demo.ready["data_dir"].as_str().unwrap());
    assert!(data.join("server").join("admin-token").is_file(), "{}", demo.story());
    // Everything it announced is there while it runs.
    for a in demo.tcp_addrs() {
        assert!(listening(a), "{a} is not listening\n{}", demo.story());
    }
    let api = demo.ready["api"].as_str().unwrap().to_owned();
    let health = reqwest::get(format!("{api}/healthz")).await.unwrap();
    assert_eq!(health.status(), 200);
    let edge = SocketAddr::new("127.0.0.12".parse().unwrap(), demo.tcp_addrs()[3].port());
    let body = reqwest::get(format!("http://{edge}/.vantage/health")).await.unwrap();
    assert_eq!((body.status().as_u16(), body.text().await.unwrap()), (200, "ok\n".to_owned()));
    // DNS: this machine gets the local line; a client elsewhere (ECS) the default line.
    // Each line's addresses serve once the probers have seen them answer: a prober whose
    // round began before the last node was saved sees it a round later.
    demo.dig_until("cdn.demo.test", &[], &LOCAL, Duration::from_secs(15)).await;
    demo.dig_until("cdn.demo.test", &["+subnet=192.0.2.0/24"], &DEFAULT, Duration::from_secs(15)).await;
    demo.dig_until(
        "all.cdn.demo.test",
        &[],
        &["127.0.0.11", "127.0.0.13", "127.0.0.14", "127.0.0.16"],
        Duration::from_secs(15),
    )
    .await;
    // The probers enroll and report.
    let token = demo.ready["token"].as_str().unwrap().to_owned();
    let started = Instant::now();
    loop {
        let v: Value = reqwest::Client::new()
            .get(format!("{api}/v1/probers"))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let items = v["items"].as_array().unwrap();
        if items.len() == 3 && items.iter().all(|p| p["status"] == "online" && p["targets"] == 6) {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(15), "probers: {v}\n{}", demo.story());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // A quiet fleet reads no hold: not in `ctl status`, not in any alert, not in the story.
    let status =
        crate::vantage_env(&["ctl", "status"], &[("VANTAGE_URL", &api), ("VANTAGE_ADMIN_TOKEN", &token)])
            .await;
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(status.status.success() && text.contains("(cdn.demo.test)"), "{status:?}");
    assert!(!text.contains("held"), "{text}");

    let code = demo.wait(Duration::from_secs(40)).await;
    assert_eq!(code, 0, "{}", demo.story());
    let out = demo.output();
    assert!(
        out.contains("(--duration): stopping") && out.contains("nothing of the demo is running"),
        "{out}"
    );
    assert!(!out.contains("stopped: connections to it are refused"), "--no-failure: {out}");
    assert!(!out.contains("held") && !out.contains("kept its records"), "a quiet fleet holds nothing: {out}");
    assert_all_free(&demo);
    assert!(!data.exists(), "the data directory {} is deleted", data.display());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_scripted_failure_moves_dns_to_the_backup_and_back_and_a_signal_stops_everything() {
    let mut demo = Demo::start(&["--fail-after", "15s", "--down-for", "20s", "--keep-data"]).await;
    let data = PathBuf::from(demo.ready["data_dir"].as_str().unwrap());
    demo.dig_until("cdn.demo.test", &[], &LOCAL, Duration::from_secs(15)).await;

    // The edge stops at +15 s; with 5 s rounds and 5 s failing-before-unreachable the answer
    // moves to the backup within about 5–15 s.
    demo.dig_until("cdn.demo.test", &[], &LOCAL_ON_BACKUP, Duration::from_secs(45)).await;
    assert!(demo.output().contains("edge 127.0.0.11 (sin-1a's primary) stopped"), "{}", demo.story());
    let second = Duration::from_secs(2);
    demo.wait_for_output("127.0.0.11 of sin-1a is unreachable", second).await;
    demo.wait_for_output("sin-1a answers with its backup1 addresses (127.0.0.12), was primary", second).await;
    // The other line and `all.` follow.
    assert_eq!(demo.dig("cdn.demo.test", &["+subnet=192.0.2.0/24"]).await, DEFAULT);
    assert_eq!(
        demo.dig("all.cdn.demo.test", &[]).await,
        ["127.0.0.12", "127.0.0.13", "127.0.0.14", "127.0.0.16"]
    );

    // Back at +35 s: the primary returns after 5 s of answering.
    demo.dig_until("cdn.demo.test", &[], &LOCAL, Duration::from_secs(45)).await;
    assert!(demo.output().contains("edge 127.0.0.11 is back"), "{}", demo.story());
    demo.wait_for_output("127.0.0.11 of sin-1a is reachable again", second).await;
    demo.wait_for_output("sin-1a answers with its primary addresses (127.0.0.11), was backup1", second).await;
    let started = Instant::now();
    while health_revisions(&demo.output()) < 2 {
        assert!(started.elapsed() < second, "one revision to the backup, one back: {}", demo.story());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The narrator's own stop watch (its DNS poll may come a moment after our dig): never
    // before 5 s of failing (or answering), and soon after.
    demo.wait_for_output("s after edge 127.0.0.11 stopped)", second).await;
    demo.wait_for_output("s after edge 127.0.0.11 came back)", second).await;
    let failover =
        after(&demo.output(), "127.0.0.12 127.0.0.13 to this machine (", " s after edge 127.0.0.11 stopped");
    let recovery = after(
        &demo.output(),
        "127.0.0.11 127.0.0.13 to this machine (",
        " s after edge 127.0.0.11 came back",
    );
    println!(
        "demo: DNS on the backup {failover:.1} s after the edge stopped, on the primary {recovery:.1} s after it came back"
    );
    for (what, s) in [("failover", failover), ("recovery", recovery)] {
        assert!((5.0..=20.0).contains(&s), "{what} took {s} s: {}", demo.story());
    }

    // Its log is a file here: plain text, no terminal colours.
    let log = std::fs::read_to_string(&demo.log).unwrap();
    assert!(!log.contains('\x1b'), "colour codes in a log file: {log}");

    // Ctrl-C stops it all.
    demo.signal("INT").await;
    let code = demo.wait(Duration::from_secs(20)).await;
    assert_eq!(code, 0, "{}", demo.story());
    assert!(demo.output().contains("stopping (signal)"), "{}", demo.story());
    assert_all_free(&demo);
    // --keep-data: kept and named.
    assert!(data.join("server").join("vantage.db").is_file(), "{}", demo.story());
    assert!(demo.output().contains(&format!("data kept in {}", data.display())), "{}", demo.story());
    std::fs::remove_dir_all(&data).unwrap();
}

/// The demo's fleet as a file: exported, planned and applied back, nothing changes (the
/// round trip an operator makes when moving a running fleet into git).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn its_fleet_exports_to_a_file_that_applies_back_as_no_change() {
    let mut demo = Demo::start(&["--duration", "60s", "--no-failure"]).await;
    let data = PathBuf::from(demo.ready["data_dir"].as_str().unwrap()).join("server");
    let files = tempfile::tempdir().unwrap();
    let file = files.path().join("fleet.yaml");
    let ctl = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_vantage"))
            .arg("ctl")
            .args(args)
            .env("VANTAGE_DATA_DIR", &data)
            .env_remove("VANTAGE_URL")
            .env_remove("VANTAGE_ADMIN_TOKEN")
            .output()
            .unwrap()
    };
    let out = ctl(&["export", "-o", file.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains("clusters:") && text.contains("nodes:"), "{text}");
    for command in ["plan", "apply"] {
        let out = ctl(&[command, "-f", file.to_str().unwrap()]);
        let printed = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{command}: {printed}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(printed.starts_with("No changes"), "{command}: {printed}");
    }
    demo.signal("TERM").await;
    demo.wait(Duration::from_secs(20)).await;
}
