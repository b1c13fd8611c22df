//! Test support: `dig` (from the shared testkit), polling, and the zones the tests publish.

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use vantage_dns::{LineAnswers, ZoneAnswers};

/// Runs `dig @server -p port ARGS` and returns its output.
pub(crate) fn dig(server: SocketAddr, args: &[&str]) -> String {
    vantage_testkit::dig(server, args).expect("dig runs (Debian package bind9-dnsutils)")
}

/// `dig +short`, sorted.
pub(crate) fn short(server: SocketAddr, args: &[&str]) -> Vec<String> {
    vantage_testkit::dig_short(server, args)
}

/// Polls `f` until it is true or `limit` passes.
pub(crate) fn wait_until(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

pub(crate) fn ip(s: &str) -> IpAddr {
    s.parse().expect("IP address")
}

pub(crate) fn line(name: &str, nets: &[&str], records: &[&str]) -> LineAnswers {
    LineAnswers {
        name: name.into(),
        client_networks: nets.iter().map(|n| n.parse().expect("network")).collect(),
        places: Default::default(),
        records: records.iter().map(|r| ip(r)).collect(),
        ttl: None,
    }
}

/// The cluster most tests serve: a line for loopback clients (so `dig` from 127.0.0.1 picks
/// it), a line for 198.51.100.0/24 (reached with `+subnet`), and a default line.
pub(crate) fn video(serial: u32, local: &[&str]) -> ZoneAnswers {
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
