//! `vantage demo`: the whole system on one machine, in this one process, with no set-up and
//! no root (§2). A server on a temporary data directory (lab mode: loopback scheduling
//! addresses allowed), six edge HTTP servers on 127.0.0.11–16, a fleet made through the admin
//! API, three probers in three named regions, and a scripted failure and recovery of one edge,
//! narrated as it happens. Ctrl-C (or `--duration`) stops every task and listener it started
//! and deletes the data directory (unless `--keep-data`).
//!
//! Scripts and tests read the one line that starts with `ready `: a JSON object with the
//! addresses chosen (`api`, `dns`, `agent`, `edges`, `edge_port`, `data_dir`, `token`…).

mod edge;
mod fleet;
mod narrate;

use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, UdpSocket};
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, anyhow};
use serde_json::json;
use tokio::sync::{Mutex, watch};
use tokio::task::JoinHandle;
use vantage_agent::{ChannelOptions, Fingerprint, ProberOptions, Url};
use vantage_server::{LogFormat, ServeConfig, Server};

use self::edge::Edge;
use self::fleet::{Api, Fleet, NODES};
use self::narrate::Out;

/// Run the whole system on this machine: server, edges, probers, and a failure to watch.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Stop after this long (90s, 5m, 1h30m) [default: run until Ctrl-C].
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    duration: Option<Duration>,
    /// No scripted failure: the fleet just runs.
    #[arg(long)]
    no_failure: bool,
    /// Keep the data directory (database, CA, admin token) at exit and print its path.
    #[arg(long)]
    keep_data: bool,
    /// Admin API address [default: 127.0.0.1:8080, or a free port when that is taken].
    #[arg(long, value_name = "ADDR")]
    api_listen: Option<SocketAddr>,
    /// DNS address, UDP and TCP [default: 127.0.0.1:8053, or a free port when that is taken].
    #[arg(long, value_name = "ADDR")]
    dns_listen: Option<SocketAddr>,
    /// Agent channel address [default: a free port on 127.0.0.1].
    #[arg(long, value_name = "ADDR")]
    agent_listen: Option<SocketAddr>,
    /// Log filter for the server and the probers (logs go to standard error; the demo
    /// narrates alerts itself).
    #[arg(long, default_value = "warn,vantage_server::alerts=error")]
    log_level: String,
    /// When the scripted failure starts, from the demo's start.
    #[arg(long, hide = true, default_value = "60s", value_parser = parse_duration)]
    fail_after: Duration,
    /// How long the failed edge stays down.
    #[arg(long, hide = true, default_value = "60s", value_parser = parse_duration)]
    down_for: Duration,
}

/// `90`, `90s`, `500ms`, `5m`, `1h30m`: a sum of numbers with units (seconds without one).
fn parse_duration(s: &str) -> Result<Duration, String> {
    let bad = || format!("{s:?}: a duration like 90s, 5m, 1h30m or 500ms");
    let t = s.trim();
    if t.is_empty() {
        return Err(bad());
    }
    if let Ok(secs) = t.parse::<u64>() {
        return Ok(Duration::from_secs(secs));
    }
    let mut total = Duration::ZERO;
    let mut rest = t;
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
        let n: u64 = rest[..digits].parse().map_err(|_| bad())?;
        rest = &rest[digits..];
        let unit_len = rest.find(|c: char| c.is_ascii_digit()).unwrap_or(rest.len());
        let unit = match &rest[..unit_len] {
            "ms" => Duration::from_millis(n),
            "s" => Duration::from_secs(n),
            "m" => Duration::from_secs(n.saturating_mul(60)),
            "h" => Duration::from_secs(n.saturating_mul(3600)),
            _ => return Err(bad()),
        };
        total = total.saturating_add(unit);
        rest = &rest[unit_len..];
    }
    Ok(total)
}

const DEFAULT_API: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 8080);
const DEFAULT_DNS: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 8053);

/// True when `addr` can be bound now (TCP, and UDP too when `udp`).
fn free(addr: SocketAddr, udp: bool) -> bool {
    TcpListener::bind(addr).is_ok() && (!udp || UdpSocket::bind(addr).is_ok())
}

/// The address asked for; else `default` when free; else a free port on its host. The second
/// value is true when the default was taken.
fn choose(asked: Option<SocketAddr>, default: SocketAddr, udp: bool) -> (SocketAddr, bool) {
    match asked {
        Some(a) => (a, false),
        None if free(default, udp) => (default, false),
        None => (SocketAddr::new(default.ip(), 0), true),
    }
}

/// A free TCP port on 127.0.0.1 now (for the agent channel, so the start commands the server
/// prints name a real port).
fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?.local_addr()?.port())
}

/// How to call this binary in the commands the demo prints: `vantage` when that is on `PATH`,
/// else its full path (as after `cargo run`).
fn vantage_command() -> String {
    let Ok(exe) = std::env::current_exe() else { return "vantage".into() };
    let exe = exe.canonicalize().unwrap_or(exe);
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            if dir.join("vantage").canonicalize().is_ok_and(|p| p == exe) {
                return "vantage".into();
            }
        }
    }
    exe.display().to_string()
}

pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    crate::serve::init_logs(LogFormat::Text, &args.log_level);
    let rt = tokio::runtime::Runtime::new()?;
    let outcome = rt.block_on(demo(args));
    // After a second signal tasks may still run: do not wait for them.
    rt.shutdown_timeout(Duration::from_secs(1));
    outcome?;
    Ok(ExitCode::SUCCESS)
}

/// Everything the demo started besides the server.
#[derive(Default)]
struct Parts {
    edges: Arc<Mutex<Vec<Edge>>>,
    probers: Vec<JoinHandle<()>>,
    tasks: Vec<JoinHandle<()>>,
}

async fn demo(args: Args) -> anyhow::Result<()> {
    let out = Arc::new(Out::new());
    let data = tempfile::Builder::new()
        .prefix("vantage-demo-")
        .tempdir()
        .context("cannot make a temporary directory")?;
    let (api_listen, api_taken) = choose(args.api_listen, DEFAULT_API, false);
    let (dns_listen, dns_taken) = choose(args.dns_listen, DEFAULT_DNS, true);
    let agent_listen = match args.agent_listen {
        Some(a) => a,
        None => SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), free_port()?),
    };
    let settings = ServeConfig {
        data_dir: data.path().join("server"),
        api_listen,
        agent_listen,
        dns_listen,
        log_level: args.log_level.clone(),
        allow_loopback_addresses: true,
        ..ServeConfig::default()
    };
    let server = Server::start(settings).await.context("cannot start the server")?;
    if api_taken {
        println!("{DEFAULT_API} is taken: the admin API listens on {} instead.", server.api_addr());
    }
    if dns_taken {
        println!("{DEFAULT_DNS} is taken: DNS listens on {} instead.", server.dns_addr());
    }

    let (stop, stopped) = watch::channel(false);
    let mut parts = Parts::default();
    let outcome = tokio::select! {
        r = run_fleet(&server, &args, data.path(), &mut parts, stopped, out.clone()) => r,
        () = crate::serve::stop_signal() => {
            println!();
            out.say("stopping (signal)");
            Ok(())
        }
    };
    if let Err(e) = &outcome {
        out.say(&format!("the demo failed: {e:#}; stopping"));
    }
    tokio::select! {
        () = shut_down(server, parts, stop, &out) => {}
        () = crate::serve::stop_signal() => {
            // Everything runs in this process: leaving it ends every task and listener.
            out.say("stopping at once (second signal)");
            return outcome;
        }
    }
    if args.keep_data {
        let kept = data.keep();
        out.say(&format!("data kept in {}", kept.display()));
    } else {
        let path = data.path().to_owned();
        data.close().with_context(|| format!("cannot delete {}", path.display()))?;
        out.say(&format!("deleted {}", path.display()));
    }
    out.say("stopped: nothing of the demo is running or listening any more");
    outcome
}

/// Stops the narrator and the story, the probers, the edges and the server, in that order.
async fn shut_down(server: Server, parts: Parts, stop: watch::Sender<bool>, out: &Out) {
    let _ = stop.send(true);
    for t in parts.tasks.into_iter().chain(parts.probers) {
        let abort = t.abort_handle();
        if tokio::time::timeout(Duration::from_secs(5), t).await.is_err() {
            abort.abort();
        }
    }
    for e in parts.edges.lock().await.iter_mut() {
        e.stop().await;
    }
    if tokio::time::timeout(Duration::from_secs(15), server.shutdown()).await.is_err() {
        out.say("the server did not stop within 15 s; leaving anyway");
    }
}

/// Starts the edges, makes the fleet, starts the probers, prints how to watch, and runs the
/// story until `--duration` has passed (forever without it).
async fn run_fleet(
    server: &Server,
    args: &Args,
    data: &Path,
    parts: &mut Parts,
    stopped: watch::Receiver<bool>,
    out: Arc<Out>,
) -> anyhow::Result<()> {
    let local = |a: SocketAddr| {
        if a.ip().is_unspecified() { SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), a.port()) } else { a }
    };
    let api_url = format!("http://{}", local(server.api_addr()));
    let agent_url = format!("https://{}", local(server.agent_addr()));
    let dns = local(server.dns_addr());
    let token_file =
        server.admin_token_file().map_or_else(|| data.join("server").join("admin-token"), Path::to_path_buf);
    let token = std::fs::read_to_string(&token_file)
        .with_context(|| format!("cannot read {}", token_file.display()))?
        .trim()
        .to_owned();
    let api = Api::new(api_url.clone(), token.clone())?;

    let edge_ips = fleet::edge_ips();
    let edges = edge::start_all(&edge_ips).context("cannot start the edge servers on 127.0.0.11–16")?;
    let port = edges.first().map(Edge::addr).ok_or_else(|| anyhow!("no edges"))?.port();
    *parts.edges.lock().await = edges;

    let fleet = fleet::create(&api, port).await?;
    let fingerprint: Fingerprint =
        server.ca_fingerprint().parse().map_err(|e| anyhow!("the server's CA fingerprint: {e}"))?;
    let server_url = Url::parse(&agent_url)?;
    for (i, e) in fleet.enrollments.iter().enumerate() {
        let channel = ChannelOptions {
            server: Some(server_url.clone()),
            token: Some(e.token.clone()),
            ca_sha256: Some(fingerprint),
            state_dir: data.join("probers").join(e.name),
            hostname: Some(e.name.to_owned()),
        };
        let opts = ProberOptions { concurrency: 64, ..ProberOptions::new(channel) };
        let mut stop = stopped.clone();
        let name = e.name;
        // Independent probers do not start their rounds together: a third of an interval apart.
        let delay = Duration::from_secs(fleet::INTERVAL_S) * u32::try_from(i)? / 3;
        parts.probers.push(tokio::spawn(async move {
            tokio::select! {
                () = tokio::time::sleep(delay) => {}
                _ = stop.wait_for(|s| *s) => return,
            }
            let shutdown = async move {
                let _ = stop.wait_for(|s| *s).await;
            };
            if let Err(e) = vantage_agent::run_prober(opts, shutdown).await {
                tracing::error!(prober = name, error = %e, "prober stopped");
            }
        }));
    }

    print_banner(&Banner {
        api_url: &api_url,
        agent_url: &agent_url,
        dns,
        token: &token,
        data,
        keep_data: args.keep_data,
        port,
        fleet: &fleet,
        ca: server.ca_fingerprint(),
        story: (!args.no_failure).then_some((args.fail_after, args.down_for)),
        duration: args.duration,
    });
    let ready = json!({
        "api": api_url,
        "agent": agent_url,
        "dns": dns.to_string(),
        "token": token,
        "ca_sha256": server.ca_fingerprint(),
        "data_dir": data,
        "cluster": fleet.cluster,
        "domain": fleet::DOMAIN,
        "edge_port": port,
        "edges": edge_ips,
        "nodes": NODES.iter().map(|n| json!({
            "name": n.name,
            "primary": fleet::loopback(n.primary),
            "backup": n.backup.map(fleet::loopback),
        })).collect::<Vec<_>>(),
    });
    println!("ready {ready}");
    println!();

    parts.tasks.push(tokio::spawn(narrate::run(api, dns, out.clone(), stopped.clone())));
    if !args.no_failure {
        let story = story(parts.edges.clone(), args.fail_after, args.down_for, out.clone(), stopped);
        parts.tasks.push(tokio::spawn(story));
    }
    match args.duration {
        Some(d) => {
            tokio::time::sleep_until((out.start() + d).into()).await;
            out.say(&format!("{} s have passed (--duration): stopping", d.as_secs()));
        }
        None => std::future::pending::<()>().await,
    }
    Ok(())
}

/// What the banner shows.
struct Banner<'a> {
    api_url: &'a str,
    agent_url: &'a str,
    dns: SocketAddr,
    token: &'a str,
    data: &'a Path,
    keep_data: bool,
    port: u16,
    fleet: &'a Fleet,
    ca: &'a str,
    story: Option<(Duration, Duration)>,
    duration: Option<Duration>,
}

fn print_banner(b: &Banner<'_>) {
    let vantage = vantage_command();
    let dig = format!("dig @{} -p {}", b.dns.ip(), b.dns.port());
    let d = fleet::DOMAIN;
    let fate = if b.keep_data { "kept at exit" } else { "deleted at exit; --keep-data keeps it" };
    println!(
        "Vantage demo: the whole system in this one process, on loopback addresses. Ctrl-C stops it all."
    );
    println!();
    println!("  admin API      {}   token {}", b.api_url, b.token);
    println!("  web UI         {}/ui   (log in with the token)", b.api_url);
    println!("  DNS            {} (UDP and TCP)", b.dns);
    println!("  agent channel  {}   CA SHA-256 {}", b.agent_url, b.ca);
    println!("  data           {} ({fate})", b.data.display());
    println!();
    println!(
        "The fleet: cluster \"demo\" serves {d}; edges answer GET /.vantage/health on HTTP port {}.",
        b.port
    );
    for (g, (group, region)) in fleet::GROUPS.iter().enumerate() {
        let nodes: Vec<String> = NODES
            .iter()
            .filter(|n| n.group == g)
            .map(|n| match n.backup {
                Some(bk) => {
                    format!("{} {} (backup {})", n.name, fleet::loopback(n.primary), fleet::loopback(bk))
                }
                None => format!("{} {}", n.name, fleet::loopback(n.primary)),
            })
            .collect();
        let region = fleet::REGIONS[*region].1;
        println!("  node group {group} ({region}):  {}", nodes.join(",  "));
    }
    println!(
        "  line local     clients in {} (you) → sin-1, then fra-1 when sin-1 has no healthy address",
        fleet::LOCAL_NETWORK
    );
    println!("  line default   every other client → fra-1, then sin-1");
    let probers: Vec<String> =
        b.fleet.enrollments.iter().map(|e| format!("{} ({})", e.name, e.region)).collect();
    println!("  probers        {}, running in this process", probers.join(", "));
    println!(
        "  probe settings every {} s, {} attempts of at most {} ms; unreachable after {} s failing, reachable after {} s answering",
        fleet::INTERVAL_S,
        fleet::ATTEMPTS,
        fleet::TIMEOUT_MS,
        fleet::FAILING_BEFORE_UNREACHABLE_S,
        fleet::ANSWERING_BEFORE_REACHABLE_S
    );
    println!();
    println!("Watch it from another terminal:");
    println!("  {dig} {d} +short                        # your line (local)");
    println!("  {dig} {d} +short +subnet=192.0.2.0/24   # as a client elsewhere (default line)");
    println!("  {dig} all.{d} +short                    # every line");
    println!("  export VANTAGE_URL={} VANTAGE_ADMIN_TOKEN={}", b.api_url, b.token);
    let (cluster, node) = (b.fleet.cluster, b.fleet.nodes.first().copied().unwrap_or_default());
    println!("  {vantage} ctl probers list");
    println!("  {vantage} ctl nodes results {node}           # what each prober sees of {}", NODES[0].name);
    println!("  {vantage} ctl clusters revisions {cluster}");
    println!("  {vantage} ctl clusters dns {cluster}");
    println!("  {vantage} ctl alerts");
    println!("  {vantage} ctl events --follow            # what happens, as it happens");
    println!();
    let first = NODES[0];
    match b.story {
        Some((fail, down)) => println!(
            "The story: at +{} s edge {} ({}'s primary) stops; at +{} s it comes back.",
            fail.as_secs(),
            fleet::loopback(first.primary),
            first.name,
            (fail + down).as_secs()
        ),
        None => println!("No scripted failure (--no-failure)."),
    }
    match b.duration {
        Some(d) => println!("The demo stops at +{} s (--duration), or on Ctrl-C.", d.as_secs()),
        None => println!("The demo runs until Ctrl-C."),
    }
    println!();
}

/// The scripted failure: the first node's primary edge stops at `fail_after` and comes back
/// `down_for` later, each step narrated with what will happen and when.
async fn story(
    edges: Arc<Mutex<Vec<Edge>>>,
    fail_after: Duration,
    down_for: Duration,
    out: Arc<Out>,
    mut stop: watch::Receiver<bool>,
) {
    let node = NODES[0];
    let (primary, backup) = (fleet::loopback(node.primary), node.backup.map(fleet::loopback));
    let backup = backup.map_or_else(|| "its backup".to_owned(), |b| b.to_string());
    let at = out.start() + fail_after;
    tokio::select! {
        () = tokio::time::sleep_until(at.into()) => {}
        _ = stop.wait_for(|s| *s) => return,
    }
    if let Some(e) = edges.lock().await.iter_mut().find(|e| e.addr().ip() == primary) {
        e.stop().await;
    }
    out.event(format!("edge {primary} stopped"));
    out.say(&format!("edge {primary} ({}'s primary) stopped: connections to it are refused now.", node.name));
    out.more(&format!(
        "Each prober sees it at its next round (every {} s). Once a majority (2 of 3) sees it failing and it",
        fleet::INTERVAL_S
    ));
    out.more(&format!(
        "keeps failing for {} s, the next revision moves {} to its backup {backup} and DNS answers that",
        fleet::FAILING_BEFORE_UNREACHABLE_S,
        node.name
    ));
    out.more(&format!(
        "at once: expect it {}–{} s from now.",
        fleet::FAILING_BEFORE_UNREACHABLE_S,
        fleet::FAILING_BEFORE_UNREACHABLE_S + 2 * fleet::INTERVAL_S
    ));
    tokio::select! {
        () = tokio::time::sleep_until((at + down_for).into()) => {}
        _ = stop.wait_for(|s| *s) => return,
    }
    let restarted = match edges.lock().await.iter_mut().find(|e| e.addr().ip() == primary) {
        Some(e) => e.restart().await,
        None => Ok(()),
    };
    if let Err(e) = restarted {
        out.say(&format!("edge {primary} cannot listen again: {e}"));
        return;
    }
    out.event(format!("edge {primary} came back"));
    out.say(&format!("edge {primary} is back: it answers the health check again."));
    out.more(&format!(
        "Probers see it answer at their next round; once a majority has seen it answering for {} s,",
        fleet::ANSWERING_BEFORE_REACHABLE_S
    ));
    out.more(&format!(
        "{} goes back to its primary: expect it {}–{} s from now.",
        node.name,
        fleet::ANSWERING_BEFORE_REACHABLE_S,
        fleet::ANSWERING_BEFORE_REACHABLE_S + 2 * fleet::INTERVAL_S
    ));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A log sink for the tests.
    #[derive(Clone, Default)]
    struct Logged(Arc<std::sync::Mutex<Vec<u8>>>);

    impl std::io::Write for Logged {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// The demo narrates alerts itself: its default log filter keeps the server's alert lines,
    /// and only those, off standard error.
    #[test]
    fn the_default_log_leaves_alerts_to_the_narration() {
        use clap::Parser;
        #[derive(clap::Parser)]
        struct Demo {
            #[command(flatten)]
            args: Args,
        }
        let level = Demo::parse_from(["demo"]).args.log_level;
        let logged = Logged::default();
        let sink = logged.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(&level))
            .with_writer(move || sink.clone())
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            tracing::warn!(target: vantage_server::ALERT_LOG_TARGET, "alert firing");
            tracing::warn!(target: "vantage_server::driver", "a warning of the server's");
        });
        let text = String::from_utf8(logged.0.lock().unwrap().clone()).unwrap();
        assert!(!text.contains("alert firing") && text.contains("a warning of the server's"), "{text}");
    }

    #[test]
    fn durations() {
        for (s, d) in [
            ("90", 90_000),
            ("90s", 90_000),
            ("500ms", 500),
            ("5m", 300_000),
            ("1h30m", 5_400_000),
            ("1m30s", 90_000),
        ] {
            assert_eq!(parse_duration(s), Ok(Duration::from_millis(d)), "{s}");
        }
        for bad in ["", "s", "5x", "1.5m", "-3s", "m5"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_taken_default_falls_back_to_a_free_port_and_an_asked_address_is_kept() {
        let held = TcpListener::bind("127.0.0.1:0").unwrap();
        let taken = held.local_addr().unwrap();
        assert_eq!(choose(None, taken, false), (SocketAddr::new(taken.ip(), 0), true));
        assert_eq!(choose(Some(taken), DEFAULT_API, false), (taken, false));
        let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
        let udp_taken = udp.local_addr().unwrap();
        if TcpListener::bind(udp_taken).is_ok() {
            assert!(choose(None, udp_taken, true).1, "UDP counts for DNS");
            assert_eq!(choose(None, udp_taken, false), (udp_taken, false), "not for the API");
        }
        drop(held);
        assert_eq!(choose(None, taken, false), (taken, false));
    }
}
