//! Test support: running `dig`, finding free ports, and child processes killed on drop.

use std::net::{IpAddr, SocketAddr, TcpListener, UdpSocket};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use vantage_dns::{LineAnswers, ZoneAnswers};

/// An empty home directory, so `dig` reads no `~/.digrc` of the user running the tests.
fn empty_home() -> &'static Path {
    static HOME: OnceLock<tempfile::TempDir> = OnceLock::new();
    HOME.get_or_init(|| tempfile::tempdir().expect("temp dir")).path()
}

/// Runs `dig @server -p port ARGS` (one try, 2 s) and returns its output.
pub fn dig(server: SocketAddr, args: &[&str]) -> String {
    let out = Command::new("dig")
        .arg("-r")
        .arg(format!("@{}", server.ip()))
        .arg("-p")
        .arg(server.port().to_string())
        .args(["+time=2", "+tries=1"])
        .args(args)
        .env("HOME", empty_home())
        .stdin(Stdio::null())
        .output()
        .expect("dig runs (Debian package bind9-dnsutils)");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `dig +short`, sorted.
pub fn short(server: SocketAddr, args: &[&str]) -> Vec<String> {
    let mut a = vec!["+short"];
    a.extend_from_slice(args);
    let mut lines: Vec<String> =
        dig(server, &a).lines().map(str::to_owned).filter(|l| !l.is_empty()).collect();
    lines.sort();
    lines
}

/// A port free on 127.0.0.1 for both UDP and TCP (at the time of asking).
pub fn free_port() -> u16 {
    for _ in 0..50 {
        let udp = UdpSocket::bind("127.0.0.1:0").expect("bind UDP");
        let port = udp.local_addr().expect("addr").port();
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port on 127.0.0.1");
}

/// Polls `f` until it is true or `limit` passes.
pub fn wait_until(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// A child process killed and reaped when dropped.
#[derive(Debug)]
pub struct Killed(pub Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn ip(s: &str) -> IpAddr {
    s.parse().expect("IP address")
}

pub fn line(name: &str, nets: &[&str], records: &[&str]) -> LineAnswers {
    LineAnswers {
        name: name.into(),
        client_networks: nets.iter().map(|n| n.parse().expect("network")).collect(),
        records: records.iter().map(|r| ip(r)).collect(),
    }
}

/// The cluster most tests serve: a line for loopback clients (so `dig` from 127.0.0.1 picks
/// it), a line for 198.51.100.0/24 (reached with `+subnet`), and a default line.
pub fn video(serial: u32, local: &[&str]) -> ZoneAnswers {
    let mut all: Vec<IpAddr> = local.iter().map(|r| ip(r)).collect();
    all.extend(["192.0.2.2", "192.0.2.3", "2001:db8::2", "2001:db8::3"].iter().map(|r| ip(r)));
    ZoneAnswers {
        cluster: "video".into(),
        domain: "cdn.example.test".into(),
        aliases: vec!["www.cdn.example.test".into(), "video.other.test".into()],
        ttl: 30,
        serial,
        lines: vec![
            line("local", &["127.0.0.0/8", "::1/128"], local),
            line("asia", &["198.51.100.0/24", "2001:db8:1::/48"], &["192.0.2.2", "2001:db8::2"]),
            line("default", &[], &["192.0.2.3", "2001:db8::3"]),
        ],
        all,
    }
}
