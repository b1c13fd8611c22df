//! Round benchmark of the probe engine, on loopback only.
//!
//! ```sh
//! cargo run --release -p vantage-probe --example round-bench
//! ```
//!
//! 1. 10,000 `http` targets (over 100 addresses 127.1.0.x × 2 ports) served by a local nginx
//!    started here with its own temporary configuration; 3 attempts each, in rounds run one
//!    after the other for at least 5 s of probing, so that a round's start and end do not
//!    weigh. Rounds, wall time, attempts per second, peak RSS of this (the probing) process.
//! 2. Peers against the same nginx, in the same run: `wrk -H 'Connection: close'` (a new
//!    connection per request, the ceiling of this machine) and `prometheus-blackbox-exporter`
//!    (another prober: its `/probe` endpoint driven by wrk with 100 probes in flight; every
//!    probe opens a new connection to nginx). Our attempts/s as a share of each, and the
//!    exporter's peak RSS.
//! 3. 1,000 and 10,000 targets that accept and never answer (listeners on 127.2.0.x whose
//!    kernel completes the handshake and queues the request, like a hung server), 3 attempts,
//!    1 s timeout: round wall time, which must not grow with the count.
//!
//! Every load is bounded: a round by its targets × attempts × timeout, wrk by `-d`, and each
//! phase by a watchdog. The exporter is skipped when it is not installed. Options:
//! `--targets N` (10000), `--http-seconds N` (5, the least probing timed; at most 120),
//! `--wrk-seconds N` (10),
//! `--http-concurrency N` (10000, the round bound of phase 1), `--phases http,silent` (both);
//! `RUST_LOG=debug` shows the round concurrency changing.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use vantage_core::Timestamp;
use vantage_core::check::Check;
use vantage_core::result::{ErrorCode, ProbeResult, Stages};
use vantage_probe::{
    Method, ProbeTarget, RoundConfig, SourceAddresses, effective_concurrency, raise_nofile_limit, run_round,
};

/// Addresses per server: 127.1.0.1–100 (nginx) and 127.2.0.1–100 (silent).
const ADDRESSES: u8 = 100;
/// Ports per address.
const PORTS: u16 = 2;
const NGINX_PORT: u16 = 40_080;
const SILENT_PORT: u16 = 40_090;
/// Where the blackbox exporter listens.
const BLACKBOX: &str = "127.0.0.1:40115";
/// Longest any phase may take.
const WATCHDOG: Duration = Duration::from_secs(180);

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// What to run and how big.
#[derive(Debug)]
struct Options {
    targets: usize,
    http_seconds: u64,
    wrk_seconds: u64,
    http_concurrency: usize,
    http: bool,
    silent: bool,
}

fn main() -> Result<(), BoxError> {
    let args: Vec<String> = std::env::args().collect();
    let opt = |name: &str, default: u64| -> Result<u64, BoxError> {
        match args.iter().position(|a| a == name) {
            Some(i) => Ok(args.get(i + 1).ok_or("missing value")?.parse()?),
            None => Ok(default),
        }
    };
    let phases = match args.iter().position(|a| a == "--phases") {
        Some(i) => args.get(i + 1).ok_or("missing value")?.clone(),
        None => "http,silent".to_owned(),
    };
    let o = Options {
        targets: usize::try_from(opt("--targets", 10_000)?)?,
        http_seconds: opt("--http-seconds", 5)?.min(120),
        wrk_seconds: opt("--wrk-seconds", 10)?,
        http_concurrency: usize::try_from(opt("--http-concurrency", 10_000)?)?,
        http: phases.split(',').any(|p| p == "http"),
        silent: phases.split(',').any(|p| p == "silent"),
    };
    tokio::runtime::Runtime::new()?.block_on(bench(&o))
}

fn listeners(net: u8, base_port: u16) -> Vec<SocketAddr> {
    (1..=ADDRESSES)
        .flat_map(|a| {
            (0..PORTS).map(move |p| SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, net, 0, a)), base_port + p))
        })
        .collect()
}

fn targets_over(listeners: &[SocketAddr], n: usize) -> Vec<ProbeTarget> {
    let check = Arc::new(Check::default());
    (0..n)
        .map(|i| {
            let addr = listeners[i % listeners.len()];
            ProbeTarget::new(format!("t{i}"), addr, Method::Http, check.clone())
        })
        .collect()
}

/// The silent rounds' configuration; the HTTP round differs in timeout and bound only.
const SILENT: RoundConfig = RoundConfig {
    attempts: 3,
    timeout: Duration::from_secs(1),
    concurrency: 10_000,
    source: SourceAddresses::NONE,
};

async fn bench(o: &Options) -> Result<(), BoxError> {
    if std::env::var_os("RUST_LOG").is_some() {
        vantage_testkit::init_tracing();
    }
    let nofile = raise_nofile_limit();
    println!("## machine");
    println!(
        "cpus: {}, {}",
        std::thread::available_parallelism()?,
        first_line("/proc/cpuinfo", "model name")
    );
    println!("kernel: {}", read_trim("/proc/sys/kernel/osrelease"));
    println!("somaxconn: {}", read_trim("/proc/sys/net/core/somaxconn"));
    println!("load average at start: {}", read_trim("/proc/loadavg"));
    println!(
        "open files: soft {} (was {}), hard {}; round bound {} of {} asked{}",
        nofile.soft,
        nofile.before,
        nofile.hard,
        effective_concurrency(&SILENT),
        SILENT.concurrency,
        nofile.error.as_deref().map(|e| format!(" ({e})")).unwrap_or_default()
    );
    if o.http {
        http_phase(o).await?;
    }
    if o.silent {
        silent_phase(o).await?;
    }
    Ok(())
}

/// Phases 1 and 2: our round against nginx, then wrk against the same nginx.
async fn http_phase(o: &Options) -> Result<(), BoxError> {
    let n = o.targets;
    let nginx = Nginx::start(&listeners(1, NGINX_PORT))?;
    println!("nginx: {}", nginx.version);
    let targets = targets_over(&nginx.listeners, n);
    let cfg = RoundConfig { timeout: Duration::from_secs(3), concurrency: o.http_concurrency, ..SILENT };
    // A short warm-up round so the figures do not include nginx's first page faults; the
    // peak RSS is measured from here.
    let _ = phase(run_round(&targets[..n.min(500)], &cfg)).await?;
    reset_peak_rss();
    let least = Duration::from_secs(o.http_seconds);
    // Each round summed as it ends, its results dropped: the peak memory is one round's.
    let rounds = async {
        let (started, mut s, mut rounds) = (Instant::now(), Summary::default(), 0);
        while rounds == 0 || started.elapsed() < least {
            s.add(Summary::of(&run_round(&targets, &cfg).await));
            rounds += 1;
        }
        (s, rounds)
    };
    let ((s, rounds), wall, cpu) = measured(rounds).await?;
    let peak = peak_rss_kib();
    let ours = s.attempts as f64 / wall.as_secs_f64();
    println!(
        "\n## http rounds: {rounds} of {n} targets x 3 attempts, one after the other, nginx on {} listeners",
        nginx.listeners.len()
    );
    println!(
        "wall time: {:.3} s ({:.3} s a round)",
        wall.as_secs_f64(),
        wall.as_secs_f64() / f64::from(rounds)
    );
    println!("cpu seconds of the probing process: {cpu:.2}");
    println!(
        "attempts: {} ({} good, {} lost; errors {:?})",
        s.attempts,
        s.good,
        s.attempts - s.good,
        s.errors
    );
    println!("attempts/s: {ours:.0}");
    println!("peak RSS of the probing process: {:.1} MiB", peak as f64 / 1024.0);

    let health = format!("http://{}/.vantage/health", nginx.listeners[0]);
    let wrk_rps = wrk(&health, &["-H", "Connection: close"], o.wrk_seconds)?;
    println!("\n## wrk -t2 -c100 -d{}s -H 'Connection: close' (same nginx)", o.wrk_seconds);
    println!("wrk requests/s: {wrk_rps:.0}");
    println!("ratio ours/wrk: {:.2}", ours / wrk_rps);

    match Blackbox::start()? {
        None => println!("\n## prometheus-blackbox-exporter: not installed, skipped"),
        Some(bb) => {
            let probe = format!("http://{BLACKBOX}/probe?module=http_2xx&target={health}");
            bb.check(&probe)?;
            let rps = wrk(&probe, &[], o.wrk_seconds)?;
            println!("\n## {} via wrk -t2 -c100 -d{}s on /probe (same nginx)", bb.version, o.wrk_seconds);
            println!("blackbox probes/s: {rps:.0}");
            println!("peak RSS of the exporter: {:.1} MiB", bb.peak_rss_kib() as f64 / 1024.0);
            println!("ratio ours/blackbox: {:.2}", ours / rps);
        }
    }
    Ok(())
}

/// A `prometheus-blackbox-exporter` on [`BLACKBOX`] with an `http_2xx` module (a GET, 2xx
/// expected, IPv4), its configuration in a temporary directory; killed on drop.
struct Blackbox {
    dir: PathBuf,
    child: Child,
    version: String,
}

impl Blackbox {
    fn start() -> Result<Option<Self>, BoxError> {
        let Some(bin) = which("prometheus-blackbox-exporter") else {
            return Ok(None);
        };
        let dir = std::env::temp_dir().join(format!("vantage-bench-blackbox-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let conf = dir.join("blackbox.yml");
        std::fs::write(
            &conf,
            "modules:\n  http_2xx:\n    prober: http\n    timeout: 3s\n    http:\n      preferred_ip_protocol: ip4\n",
        )?;
        let version = Command::new(&bin).arg("--version").output()?;
        let version = [&version.stdout, &version.stderr]
            .iter()
            .find_map(|o| String::from_utf8_lossy(o).lines().next().map(str::to_owned))
            .unwrap_or_else(|| "?".into());
        let child = Command::new(&bin)
            .arg(format!("--config.file={}", conf.display()))
            .arg(format!("--web.listen-address={BLACKBOX}"))
            .arg("--log.level=warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        let bb = Blackbox { dir, child, version };
        let addr: SocketAddr = BLACKBOX.parse()?;
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
            if Instant::now() > deadline {
                return Err("the blackbox exporter did not start listening within 10 s".into());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(Some(bb))
    }

    /// One probe through the exporter must succeed, or its rate means nothing.
    fn check(&self, url: &str) -> Result<(), BoxError> {
        use std::io::{Read, Write};
        let path = url.split_once(BLACKBOX).map(|(_, p)| p).ok_or("not a blackbox URL")?;
        let mut s = std::net::TcpStream::connect(BLACKBOX)?;
        s.set_read_timeout(Some(Duration::from_secs(5)))?;
        write!(s, "GET {path} HTTP/1.1\r\nHost: {BLACKBOX}\r\nConnection: close\r\n\r\n")?;
        let mut body = String::new();
        s.read_to_string(&mut body)?;
        if !body.lines().any(|l| l == "probe_success 1") {
            return Err(format!("the exporter's probe failed: {body}").into());
        }
        Ok(())
    }

    fn peak_rss_kib(&self) -> u64 {
        vm_hwm_kib(&format!("/proc/{}/status", self.child.id()))
    }
}

impl Drop for Blackbox {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Phase 3: silent targets.
async fn silent_phase(o: &Options) -> Result<(), BoxError> {
    let silent = listeners(2, SILENT_PORT);
    for count in [o.targets / 10, o.targets] {
        // Fresh listeners per round: their accept queues start empty.
        let held = silent_listeners(&silent)?;
        let targets = targets_over(&silent, count);
        reset_peak_rss();
        let began = Timestamp::from_system(SystemTime::now());
        let (results, wall, cpu) = measured(run_round(&targets, &SILENT)).await?;
        let s = Summary::of(&results);
        println!("\n## silent round: {count} targets x 3 attempts, 1 s timeout");
        println!("round wall time: {:.3} s", wall.as_secs_f64());
        println!("cpu seconds of the probing process: {cpu:.2}");
        println!(
            "attempts: {} ({} timed out after connecting and sending; errors {:?})",
            s.attempts, s.connected_and_sent, s.errors
        );
        let per_target_ms =
            |r: &ProbeResult| r.attempts.iter().map(|a| u64::from(a.rtt_us)).sum::<u64>() / 1000;
        let slowest = results.iter().map(per_target_ms).max().unwrap_or(0);
        let longest = results.iter().flat_map(|r| &r.attempts).map(|a| a.rtt_us / 1000).max().unwrap_or(0);
        println!("longest attempt: {longest} ms; most time in a target's own attempts: {slowest} ms");
        let mut starts: Vec<i64> = results.iter().filter_map(|r| first_start_ms(r, began)).collect();
        starts.sort_unstable();
        if let (Some(median), Some(last)) = (starts.get(starts.len() / 2), starts.last()) {
            println!(
                "targets' first attempts began after the round's start: median {median} ms, last {last} ms"
            );
        }
        println!("peak RSS of the probing process: {:.1} MiB", peak_rss_kib() as f64 / 1024.0);
        drop(held);
    }
    Ok(())
}

/// Milliseconds from `began` to the start of the target's first attempt, when it failed (its
/// end is `failed_at`, its length the attempt's RTT).
fn first_start_ms(r: &ProbeResult, began: Timestamp) -> Option<i64> {
    let first = r.attempts.first()?;
    Some(r.failed_at?.plus_millis(-i64::from(first.rtt_us / 1000)).millis_since(began))
}

/// Runs `f` under the watchdog; its output, wall time and this process's CPU seconds.
async fn measured<T>(f: impl Future<Output = T>) -> Result<(T, Duration, f64), BoxError> {
    let started = Instant::now();
    let cpu = cpu_seconds();
    let out = phase(f).await?;
    Ok((out, started.elapsed(), cpu_seconds() - cpu))
}

async fn phase<T>(f: impl Future<Output = T>) -> Result<T, BoxError> {
    tokio::time::timeout(WATCHDOG, f).await.map_err(|_| "a phase ran past the watchdog".into())
}

#[derive(Debug, Default)]
struct Summary {
    attempts: usize,
    good: usize,
    connected_and_sent: usize,
    errors: std::collections::BTreeMap<ErrorCode, usize>,
}

impl Summary {
    /// `other`'s counts added to these.
    fn add(&mut self, other: Summary) {
        self.attempts += other.attempts;
        self.good += other.good;
        self.connected_and_sent += other.connected_and_sent;
        for (code, n) in other.errors {
            *self.errors.entry(code).or_insert(0) += n;
        }
    }

    fn of(results: &[ProbeResult]) -> Self {
        let mut s = Summary::default();
        for a in results.iter().flat_map(|r| &r.attempts) {
            s.attempts += 1;
            if a.good() {
                s.good += 1;
            }
            if a.stages.contains(Stages::CONNECTED.with(Stages::SENT)) {
                s.connected_and_sent += 1;
            }
            if let Some(e) = a.error {
                *s.errors.entry(e).or_default() += 1;
            }
        }
        s
    }
}

/// A local nginx with its own configuration in a temporary directory; stopped on drop.
struct Nginx {
    dir: PathBuf,
    child: Child,
    listeners: Vec<SocketAddr>,
    version: String,
}

impl Nginx {
    fn start(listeners: &[SocketAddr]) -> Result<Self, BoxError> {
        let bin = which("nginx").ok_or("nginx is not installed (apt-get install nginx)")?;
        let dir = std::env::temp_dir().join(format!("vantage-bench-nginx-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("logs"))?;
        let listen: String =
            listeners.iter().map(|a| format!("        listen {a} backlog=4096;\n")).collect();
        let conf = format!(
            "worker_processes 2;\nworker_rlimit_nofile 65536;\npid {pid};\nerror_log {dir}/logs/error.log warn;\ndaemon off;\n\
             events {{\n    worker_connections 30000;\n    multi_accept on;\n}}\n\
             http {{\n    access_log off;\n    keepalive_timeout 0;\n    server {{\n{listen}        location / {{ return 200 \"ok\\n\"; }}\n    }}\n}}\n",
            pid = dir.join("nginx.pid").display(),
            dir = dir.display(),
        );
        let conf_path = dir.join("nginx.conf");
        std::fs::write(&conf_path, conf)?;
        let version = Command::new(&bin).arg("-v").output()?;
        let version = String::from_utf8_lossy(&version.stderr).trim().to_owned();
        let child =
            Command::new(&bin).arg("-p").arg(&dir).arg("-c").arg(&conf_path).stdout(Stdio::null()).spawn()?;
        let nginx = Nginx { dir, child, listeners: listeners.to_vec(), version };
        // Bounded wait for the last listener to accept.
        let last = *listeners.last().ok_or("no listeners")?;
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect_timeout(&last, Duration::from_millis(200)).is_err() {
            if Instant::now() > deadline {
                return Err("nginx did not start listening within 10 s".into());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(nginx)
    }

    fn signal_stop(&self) -> Result<(), BoxError> {
        let bin = which("nginx").ok_or("nginx is gone")?;
        Command::new(bin)
            .arg("-p")
            .arg(&self.dir)
            .arg("-c")
            .arg(self.dir.join("nginx.conf"))
            .args(["-s", "stop"])
            .stderr(Stdio::null())
            .status()?;
        Ok(())
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        // `-s stop` takes the workers down with the master; a plain kill of the master would
        // leave them listening.
        if self.signal_stop().is_err() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Runs wrk (2 threads, 100 connections) against `url` and returns its requests/s.
fn wrk(url: &str, extra: &[&str], seconds: u64) -> Result<f64, BoxError> {
    let bin = which("wrk").ok_or("wrk is not installed (apt-get install wrk)")?;
    let out =
        Command::new(bin).args(["-t2", "-c100", &format!("-d{seconds}s")]).args(extra).arg(url).output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| l.strip_prefix("Requests/sec:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| format!("no Requests/sec in wrk's output: {text}").into())
}

/// Listeners that never call accept(): the kernel completes each handshake and queues the
/// request, and nobody answers, as with a hung server. Queued connections hold no descriptor
/// of this process, and no peer process spends CPU beside the prober: as in production, where
/// dead targets are other machines.
fn silent_listeners(addrs: &[SocketAddr]) -> Result<Vec<socket2::Socket>, BoxError> {
    addrs
        .iter()
        .map(|addr| {
            let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
            s.set_reuse_address(true)?;
            s.bind(&(*addr).into())?;
            // 150 connections reach each listener in a round; the kernel caps this at somaxconn.
            s.listen(4096)?;
            Ok(s)
        })
        .collect()
}

fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin".into(), "/usr/bin".into()])
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

fn read_trim(path: impl AsRef<Path>) -> String {
    std::fs::read_to_string(path).map(|s| s.trim().to_owned()).unwrap_or_else(|_| "?".into())
}

fn first_line(path: &str, key: &str) -> String {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(key))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_owned())
        })
        .unwrap_or_else(|| "?".into())
}

/// User + system CPU time of this process, s.
fn cpu_seconds() -> f64 {
    let stat = read_trim("/proc/self/stat");
    let fields: Vec<&str> =
        stat.rsplit_once(')').map(|(_, rest)| rest.split_whitespace().collect()).unwrap_or_default();
    // utime and stime are fields 14 and 15, i.e. 12 and 13 after the command name.
    let ticks: f64 =
        fields.get(11..13).map(|f| f.iter().filter_map(|v| v.parse::<f64>().ok()).sum()).unwrap_or(0.0);
    ticks / 100.0
}

/// Peak resident set of this process since start or the last reset (VmHWM), KiB.
fn peak_rss_kib() -> u64 {
    vm_hwm_kib("/proc/self/status")
}

/// VmHWM of the process whose status file is `status`, KiB.
fn vm_hwm_kib(status: &str) -> u64 {
    read_trim(status)
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Resets VmHWM to the current RSS (Linux: `5` into clear_refs), so a phase's peak is its own.
fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}
