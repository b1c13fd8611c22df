//! Hostile clients against a real `vantage serve`: idle connections, unfinished request heads
//! and a small open-file limit must not stop `/healthz`, the agent channel or DNS, nor grow the
//! server's memory, nor spin a core.

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use tokio::io::AsyncWriteExt;
use tokio::net::{TcpSocket, TcpStream};

use crate::harness::ServerProcess;

/// Connects to `to` from the loopback address `127.0.0.{host}`.
async fn connect_from(host: u8, to: SocketAddr) -> std::io::Result<TcpStream> {
    let socket = TcpSocket::new_v4()?;
    socket.bind(SocketAddr::new(IpAddr::from([127, 0, 0, host]), 0))?;
    socket.connect(to).await
}

/// `n` connections to `to`, spread over sources 127.0.0.{first}… `per_source` at a time.
async fn hold(n: usize, to: SocketAddr, first: u8, per_source: usize) -> Vec<TcpStream> {
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let host = first + u8::try_from(i / per_source).unwrap();
        if let Ok(s) = connect_from(host, to).await {
            out.push(s);
        }
    }
    out
}

/// Whether a query for `example.test A` over TCP from 127.0.0.1 gets an answer within 2 s.
async fn dns_tcp_answers(dns: SocketAddr) -> bool {
    let Ok(mut c) = connect_from(1, dns).await else { return false };
    let mut query = vec![0x12, 0x34, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0];
    query.extend_from_slice(b"\x07example\x04test\x00\x00\x01\x00\x01");
    let mut framed = u16::try_from(query.len()).unwrap().to_be_bytes().to_vec();
    framed.extend_from_slice(&query);
    if c.write_all(&framed).await.is_err() {
        return false;
    }
    let mut len = [0u8; 2];
    let read = tokio::io::AsyncReadExt::read_exact(&mut c, &mut len);
    matches!(tokio::time::timeout(Duration::from_secs(2), read).await, Ok(Ok(_)))
}

fn fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// CPU time the process used, in clock ticks (user + system).
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name, which is in parentheses.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

/// Asks `/healthz` once and fails past `limit`. A starved listener would leave it waiting
/// past the client's 5 s timeout, so a second separates that from a busy 2-core machine.
async fn healthz_within(url: &str, limit: Duration) -> Duration {
    let client = reqwest::Client::builder().timeout(Duration::from_secs(5)).build().unwrap();
    let t = Instant::now();
    let r = client.get(format!("{url}/healthz")).send().await.expect("/healthz answers");
    let took = t.elapsed();
    assert!(r.status().is_success(), "{}", r.status());
    assert!(took <= limit, "/healthz took {took:?}");
    took
}

fn addr(url: &str) -> SocketAddr {
    url.trim_start_matches("http://").trim_start_matches("https://").parse().unwrap()
}

/// Waits until the server holds at most `most` descriptors, at most `limit`.
async fn fds_fall_to(pid: u32, most: usize, limit: Duration) -> usize {
    let t = Instant::now();
    loop {
        let n = fds(pid);
        if n <= most || t.elapsed() > limit {
            return n;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_and_unfinished_heads_are_closed_and_cost_no_memory() {
    let s = ServerProcess::start().await;
    let pid = s.pid();
    let api = addr(&s.url);
    let (agent, _) = s.channel();
    let agent = addr(&agent);
    healthz_within(&s.url, Duration::from_secs(1)).await;
    let (fds_before, rss_before) = (fds(pid), rss_kib(pid));

    // 1,000 idle connections to the admin API and 300 to the agent channel, from other
    // addresses than the operator's.
    let idle_api = hold(1000, api, 2, 60).await;
    let idle_agent = hold(300, agent, 40, 60).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let took = healthz_within(&s.url, Duration::from_secs(1)).await;
    println!(
        "limits: /healthz in {took:?} beside {} + {} idle connections",
        idle_api.len(),
        idle_agent.len()
    );

    // 300 request heads of 390 KB that never end.
    let mut slow = hold(300, api, 60, 60).await;
    let junk = vec![b'a'; 390 << 10];
    for c in &mut slow {
        let _ = c.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: ").await;
        let _ = tokio::time::timeout(Duration::from_millis(50), c.write_all(&junk)).await;
    }
    let took = healthz_within(&s.url, Duration::from_secs(1)).await;
    let grown_mib = rss_kib(pid).saturating_sub(rss_before) / 1024;
    println!("limits: /healthz in {took:?} beside 300 unfinished heads; RSS +{grown_mib} MiB");
    assert!(grown_mib < 40, "RSS grew by {grown_mib} MiB");

    // Every one of them is closed by the header timeout (10 s), though the clients hold on.
    let left = fds_fall_to(pid, fds_before + 8, Duration::from_secs(15)).await;
    println!("limits: descriptors {fds_before} before, {left} after the timeout");
    assert!(left <= fds_before + 8, "{left} descriptors still open (before: {fds_before})");
    drop((idle_api, idle_agent, slow));
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_256_descriptors_idle_tls_clients_cannot_stop_the_api_dns_or_new_agents() {
    let s = ServerProcess::start_with_nofile(256).await;
    let pid = s.pid();
    let (agent, _) = s.channel();
    let agent = addr(&agent);
    // 231 connections to the agent port (no certificate needed) from one address.
    let idle = hold(231, agent, 2, 231).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = cpu_ticks(pid);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let used = cpu_ticks(pid) - before;
    // 2 s is 200 ticks of one core: a spinning accept loop would use about that.
    println!("limits: {} idle channel connections, {used} CPU ticks in 2 s", idle.len());
    assert!(used < 60, "the server used {used} ticks in 2 s");
    healthz_within(&s.url, Duration::from_millis(500)).await;
    // DNS over TCP still answers (the zone is empty: REFUSED, but an answer).
    assert!(dns_tcp_answers(s.dns()).await, "DNS over TCP answers");
    // A new agent can still reach the channel: enrollment with a bad token is refused in
    // plain words, not left unanswered.
    let client = reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .local_address(IpAddr::from([127, 0, 0, 1]))
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let r = client
        .post(format!("https://{agent}/agent/v1/enroll"))
        .json(&serde_json::json!({"token": "vtp_nope", "csr_pem": "", "hostname": "h", "version": "0"}))
        .send()
        .await
        .expect("the channel answers a new agent");
    assert_eq!(r.status().as_u16(), 401);
    drop(idle);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_source_holding_dns_tcp_connections_cannot_lock_the_others_out() {
    let s = ServerProcess::start().await;
    let dns = s.dns();
    let idle = hold(1024, dns, 2, 1024).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(dns_tcp_answers(dns).await, "another client's DNS query over TCP is answered");
    println!("limits: DNS over TCP answers beside {} connections from one address", idle.len());
    drop(idle);
    s.stop().await;
}

/// `GET /healthz` over a new connection from `127.0.0.{host}`: the status line, or `None` when
/// the server closed the connection at once without answering. The connection itself must
/// open: the kernel completes it whatever the server decides.
async fn healthz_from(host: u8, api: SocketAddr) -> Option<String> {
    use tokio::io::AsyncReadExt;
    let mut c = connect_from(host, api).await.expect("the kernel completes the connection");
    // A connection the gate closed may refuse the write (reset): that is no answer either.
    let _ = c.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await;
    let mut got = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), c.read_to_end(&mut got)).await;
    assert!(read.is_ok(), "the server neither answered nor closed within 5 s");
    String::from_utf8_lossy(&got).lines().next().filter(|l| !l.is_empty()).map(str::to_owned)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trusted_load_balancer_is_held_to_the_total_only() {
    let dir = tempfile::tempdir().unwrap();
    let s = ServerProcess::start_in(dir.path(), &["--load-balancers", "127.0.0.77/32"]).await;
    let api = addr(&s.url);
    // More connections than one source may hold on the admin API (64), from the load balancer
    // and from an ordinary client.
    let lb = hold(100, api, 77, 100).await;
    let other = hold(100, api, 78, 100).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let from_lb = healthz_from(77, api).await;
    assert_eq!(from_lb.as_deref(), Some("HTTP/1.1 200 OK"), "the load balancer's next client is served");
    assert_eq!(healthz_from(78, api).await, None, "an ordinary source stays held to its limit");
    drop((lb, other));
    s.stop().await;
}
