//! `vantage check URL|HOST:PORT`: probe one target from here with a chosen check and print
//! every attempt's stages and timings, the verdict and the error code.
//!
//! Exit status: 0 healthy, 1 unhealthy, 2 bad arguments (the message names the argument).
//! The verdict follows the probe settings' default loss rule (§3.3): unhealthy when half or
//! more of the attempts are lost.

use std::fmt::Write as _;
use std::net::{IpAddr, SocketAddr};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use vantage_core::check::{Check, CheckInput, Method};
use vantage_core::result::{ErrorCode, ProbeResult, Stages};
use vantage_probe::{AttemptReport, ProbeTarget, SourceAddresses, attempt_from};

/// Loss (%) at which the verdict is unhealthy: the default of the probe settings.
const LOSS_PCT: u32 = 50;

/// Probe a target once from here and print every stage.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// What to probe: a URL (http://…, https://…) or HOST:PORT.
    target: String,
    /// Method: tcp, http, https or hls. Default: the URL's scheme; http for HOST:PORT.
    #[arg(long, value_parser = parse_method)]
    method: Option<Method>,
    /// `Host` header and TLS SNI. Default: the URL's host; health.vantage.invalid for
    /// HOST:PORT.
    #[arg(long)]
    host: Option<String>,
    /// Request path. Default: the URL's path; /.vantage/health for HOST:PORT.
    #[arg(long)]
    path: Option<String>,
    /// Attempts in a row (1–10).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=10))]
    attempts: u32,
    /// Bound of each attempt: 3s, 500ms, or seconds (100 ms to 60 s).
    #[arg(long, default_value = "3s", value_parser = parse_duration)]
    timeout: Duration,
    /// Send a PROXY v1 header first (for listeners that require PROXY protocol).
    #[arg(long)]
    proxy_v1: bool,
    /// hls: the newest segment is stale when older than this many seconds.
    #[arg(long, value_name = "SECONDS")]
    max_age: Option<u32>,
    /// Expected HTTP status.
    #[arg(long, value_name = "STATUS", default_value_t = 200)]
    expect: u16,
    /// TLS: verify the certificate against the host name and the system's trusted roots
    /// (`SSL_CERT_FILE`/`SSL_CERT_DIR` name others) instead of accepting any.
    #[arg(long)]
    verify: bool,
    /// Local address to connect from, at most one per family (repeat, or comma-separated).
    #[arg(long = "source-address", value_name = "IP", value_delimiter = ',')]
    source_addresses: Vec<IpAddr>,
}

/// A refusal of the arguments: printed as it is, exit status 2.
struct BadArgument(String);

/// Runs the subcommand on its own runtime.
pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    Ok(rt.block_on(async move {
        match prepare(&args).await {
            Ok(target) => probe(&args, &target).await,
            Err(BadArgument(msg)) => {
                eprintln!("error: {msg}");
                ExitCode::from(2)
            }
        }
    }))
}

/// `--method`: the method by its API name (shared with `vantage ctl checks create`).
pub(crate) fn parse_method(s: &str) -> Result<Method, String> {
    s.parse::<Method>().map_err(|e| e.reason().to_owned())
}

/// `3s`, `500ms` or `2` (seconds without a unit) in seconds; `None` when it is not a number.
pub(crate) fn seconds(s: &str) -> Option<f64> {
    let (number, scale) = if let Some(n) = s.strip_suffix("ms") {
        (n, 0.001)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1.0)
    } else {
        (s, 1.0)
    };
    number.trim().parse::<f64>().ok().map(|n| n * scale).filter(|v| v.is_finite())
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let secs = seconds(s)
        .filter(|s| (0.1..=60.0).contains(s))
        .ok_or_else(|| format!("must be 100ms to 60s, like 3s or 500ms, got {s:?}"))?;
    Ok(Duration::from_secs_f64(secs))
}

/// The check's field as the argument that set it.
fn flag_of(field: &str) -> &str {
    match field {
        "path" => "--path",
        "host" => "--host",
        "expected_response" => "--expect",
        "max_age_s" => "--max-age",
        "timeout_ms" => "--timeout",
        "method" => "--method",
        other => other,
    }
}

/// Turns the arguments into a target, or says which argument is wrong.
async fn prepare(args: &Args) -> Result<ProbeTarget, BadArgument> {
    let timeout_ms = u32::try_from(args.timeout.as_millis()).unwrap_or(u32::MAX);
    let is_url = args.target.contains("://");
    let input = CheckInput {
        method: args.method,
        // A URL brings its own path and host; the flags then replace them below.
        path: if is_url { None } else { args.path.clone() },
        host: if is_url { None } else { args.host.clone() },
        expected_response: Some(args.expect),
        timeout_ms: Some(timeout_ms),
        max_age_s: args.max_age,
        verify: args.verify.then_some(true),
        ..CheckInput::default()
    };
    let check =
        Check::parse(input).map_err(|e| BadArgument(format!("{}: {}", flag_of(e.field()), e.reason())))?;
    let check = Arc::new(check);

    let mut target = if is_url {
        url_target(args, check).await?
    } else {
        let addr = host_port(&args.target).await?;
        ProbeTarget::new(args.target.clone(), addr, args.method.unwrap_or(Method::Http), check)
    };
    target.proxy_v1 = args.proxy_v1;
    target.timeout = Some(args.timeout);
    Ok(target)
}

async fn url_target(args: &Args, check: Arc<Check>) -> Result<ProbeTarget, BadArgument> {
    let target = ProbeTarget::from_url(args.target.clone(), &args.target, check)
        .await
        .map_err(|e| BadArgument(format!("TARGET: {e}")))?;
    let mut url =
        target.url.clone().ok_or_else(|| BadArgument(format!("TARGET: {:?} is not a URL", args.target)))?;
    if let Some(m @ (Method::Http | Method::Https)) = args.method
        && m != target.method
    {
        return Err(BadArgument(format!("--method: {m} contradicts the URL's scheme {}", url.scheme())));
    }
    // The address is already resolved from the URL; --host and --path change what is asked.
    if let Some(host) = &args.host {
        url.set_host(Some(host)).map_err(|e| BadArgument(format!("--host: {e}")))?;
    }
    if let Some(path) = &args.path {
        let (p, q) = path.split_once('?').unwrap_or((path, ""));
        if !p.starts_with('/') {
            return Err(BadArgument(format!("--path: must start with /, got {path:?}")));
        }
        url.set_path(p);
        url.set_query((!q.is_empty()).then_some(q));
    }
    let target = ProbeTarget { url: Some(url), ..target };
    target.validate().map_err(|e| BadArgument(format!("TARGET: {e}")))?;
    Ok(target)
}

/// `HOST:PORT` (`[v6]:PORT` for IPv6 addresses), resolving a host name.
async fn host_port(s: &str) -> Result<SocketAddr, BadArgument> {
    if let Ok(addr) = s.parse::<SocketAddr>() {
        return Ok(addr);
    }
    let bad = || BadArgument(format!("TARGET: expected a URL or HOST:PORT, got {s:?}"));
    let (host, port) = s.rsplit_once(':').ok_or_else(bad)?;
    let port: u16 = port.parse().map_err(|_| bad())?;
    if host.is_empty() || host.contains(['/', ' ']) {
        return Err(bad());
    }
    let mut addrs = tokio::net::lookup_host((host, port))
        .await
        .map_err(|e| BadArgument(format!("TARGET: cannot resolve {host}: {e}")))?;
    addrs.next().ok_or_else(|| BadArgument(format!("TARGET: {host} has no address")))
}

async fn probe(args: &Args, target: &ProbeTarget) -> ExitCode {
    vantage_probe::install_crypto_provider();
    let source = match SourceAddresses::from_list(&args.source_addresses) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: --source-address: {e}");
            return ExitCode::from(2);
        }
    };
    let spec = target.request_spec();
    let host_header =
        spec.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case("host")).map_or("-", |(_, v)| v.as_str());
    let mut head =
        format!("vantage check {}\n  method {}, address {}", args.target, target.method, target.addr);
    if target.method != Method::Tcp {
        let _ = write!(head, ", {} {}, Host {host_header}", spec.method, spec.target);
    }
    if target.uses_tls() {
        let _ = write!(head, ", SNI {}", target.host());
    }
    if target.proxy_v1 {
        head.push_str(", PROXY v1");
    }
    if let Some(ip) = source.for_peer(target.addr) {
        let _ = write!(head, ", from {ip}");
    }
    let _ = write!(head, ", {} attempt(s), timeout {} ms", args.attempts, args.timeout.as_millis());
    println!("{head}");

    let mut attempts = Vec::new();
    let (mut last_hls, mut cert_not_after) = (None, None);
    for n in 1..=args.attempts {
        let report = attempt_from(target, args.timeout, source).await;
        println!("{}", describe(n, &report, target.addr.is_ipv6()));
        if report.hls.is_some() {
            last_hls = Some(report.clone());
        }
        cert_not_after = report.cert_not_after.or(cert_not_after);
        attempts.push(report.attempt());
    }
    if let Some(r) = last_hls {
        println!("{}", describe_hls(&r));
    }
    if let Some(at) = cert_not_after {
        println!("certificate: not after {at}");
    }
    let result =
        ProbeResult { target: args.target.clone(), attempts, hls: None, cert_not_after, failed_at: None };
    let (sent, lost) = (result.sent(), result.lost());
    let healthy = lost * 100 < LOSS_PCT * sent;
    let mut verdict = format!(
        "verdict: {} — {} of {sent} attempts good (loss {}%, unhealthy at {LOSS_PCT}%)",
        if healthy { "healthy" } else { "unhealthy" },
        sent - lost,
        lost * 100 / sent.max(1),
    );
    if let Some(rtt) = result.median_rtt_ms() {
        let _ = write!(verdict, ", median RTT {rtt:.2} ms");
    }
    println!("{verdict}");
    // Only a failure has an error to name: a line saying there is none reads like one.
    if let Some(code) = result.last_error() {
        println!("error: {code} ({})", code.describe());
    }
    if healthy { ExitCode::SUCCESS } else { ExitCode::from(1) }
}

/// Stages as in `varnishadm backend.list -p`: connected (4 or 6), sent X, received R,
/// good H.
fn stage_letters(s: Stages, ipv6: bool) -> String {
    [
        (Stages::CONNECTED, if ipv6 { '6' } else { '4' }),
        (Stages::SENT, 'X'),
        (Stages::RECEIVED, 'R'),
        (Stages::GOOD, 'H'),
    ]
    .iter()
    .map(|(stage, c)| if s.contains(*stage) { *c } else { '-' })
    .collect()
}

fn ms(d: Option<Duration>) -> String {
    d.map_or_else(|| "-".into(), |d| format!("{:.2} ms", d.as_secs_f64() * 1000.0))
}

fn describe(n: u32, r: &AttemptReport, ipv6: bool) -> String {
    let verdict = r.error.map_or("good", ErrorCode::as_str);
    let t = &r.timings;
    let mut line = format!(
        "attempt {n}: {verdict:<11} stages {}  connect {}  tls {}  first byte {}  total {}",
        stage_letters(r.stages, ipv6),
        ms(t.connect),
        ms(t.tls),
        ms(t.first_byte),
        ms(Some(t.total)),
    );
    if let Some(status) = r.status {
        let _ = write!(line, "  status {status}");
    }
    if let Some(detail) = &r.detail {
        let _ = write!(line, "  ({detail})");
    }
    line
}

fn describe_hls(r: &AttemptReport) -> String {
    let Some(h) = r.hls else {
        return String::new();
    };
    let yes = |b: bool| if b { "yes" } else { "no" };
    let mut line = format!(
        "hls (last attempt): reachable {}, manifest valid {}, segment fetchable {}, segment age {}, manifest first byte {}",
        yes(h.reachable),
        yes(h.manifest_valid),
        yes(h.segment_fetchable),
        h.segment_age_s.map_or_else(|| "unknown".into(), |a| format!("{a:.1} s")),
        h.ttfb_ms.map_or_else(|| "-".into(), |t| format!("{t:.2} ms")),
    );
    if let Some(seg) = &r.segment {
        let status = seg.status.map_or_else(|| "-".into(), |s| s.to_string());
        let _ = write!(line, "\n  newest segment {} -> {status}", seg.url);
    }
    line
}
