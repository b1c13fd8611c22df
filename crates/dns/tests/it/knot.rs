//! RFC 2136 publishing to a real Knot DNS, started by the test in a temporary directory with
//! its own configuration, on 127.0.0.1 and a free port.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use vantage_dns::{
    PublishStatus, Publisher, RetryPolicy, Rfc2136Config, Rfc2136Publisher, TsigAlgorithm, TsigKey,
};

use crate::support::{Killed, free_port, short, video, wait_until};

const SECRET: &str = "bm90LWEtcmVhbC1zZWNyZXQtanVzdC1mb3ItdGVzdHM=";
const OTHER_SECRET: &str = "YW5vdGhlci1zZWNyZXQtdGhhdC1rbm90LWRvZXMtbm90LWtub3c=";

struct Knot {
    addr: SocketAddr,
    dir: tempfile::TempDir,
    _process: Killed,
}

/// Starts `knotd` serving `cdn.example.test` with updates allowed for key `vantage-key`.
fn knot(algorithm: &str) -> Knot {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display();
    let port = free_port();
    let mut conf = String::new();
    write!(
        conf,
        r#"server:
    rundir: "{d}"
    listen: 127.0.0.1@{port}
    udp-workers: 1
    tcp-workers: 1
    background-workers: 1
log:
  - target: stderr
    any: info
database:
    storage: "{d}/db"
key:
  - id: vantage-key
    algorithm: {algorithm}
    secret: {SECRET}
acl:
  - id: vantage-update
    key: vantage-key
    action: update
control:
    listen: "{d}/knot.sock"
zone:
  - domain: cdn.example.test
    storage: "{d}"
    file: "cdn.example.test.zone"
    acl: vantage-update
    zonefile-sync: -1
"#
    )
    .unwrap();
    std::fs::write(dir.path().join("knot.conf"), conf).unwrap();
    // Knot keeps the journal of updates there and does not create it.
    std::fs::create_dir(dir.path().join("db")).unwrap();
    std::fs::write(
        dir.path().join("cdn.example.test.zone"),
        "$ORIGIN cdn.example.test.\n$TTL 300\n@ SOA ns1 hostmaster 1 3600 600 1209600 300\n@ NS ns1\nns1 A 127.0.0.1\n@ A 192.0.2.250\n",
    )
    .unwrap();
    let log = std::fs::File::create(dir.path().join("knot.log")).unwrap();
    let child = Command::new("knotd")
        .arg("-c")
        .arg(dir.path().join("knot.conf"))
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .expect("knotd runs (Debian package knot)");
    let process = Killed(child);
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let up =
        wait_until(Duration::from_secs(10), || short(addr, &["cdn.example.test", "A"]) == ["192.0.2.250"]);
    assert!(up, "knotd did not come up: {}", log_of(dir.path()));
    Knot { addr, dir, _process: process }
}

fn log_of(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("knot.log")).unwrap_or_default()
}

fn publisher(server: SocketAddr, algorithm: TsigAlgorithm, secret: &str, attempts: u32) -> Rfc2136Publisher {
    Rfc2136Publisher::new(Rfc2136Config {
        server,
        zone: None,
        key: TsigKey::from_base64("vantage-key", algorithm, secret).unwrap(),
        timeout: Duration::from_secs(3),
        retry: RetryPolicy {
            max_attempts: attempts,
            first_delay: Duration::from_millis(50),
            max_delay: Duration::from_millis(200),
        },
    })
    .unwrap()
}

#[tokio::test]
async fn knot_receives_the_revision_and_answers_with_it() {
    for (conf, alg) in
        [("hmac-sha256", TsigAlgorithm::HmacSha256), ("hmac-sha512", TsigAlgorithm::HmacSha512)]
    {
        let knot = knot(conf);
        let p = publisher(knot.addr, alg, SECRET, 3);
        assert_eq!(p.target(), format!("rfc2136://{}", knot.addr));

        let zone = video(9, &["192.0.2.1", "2001:db8::1"]);
        let out = p.publish(&zone).await;
        assert_eq!(out.status, PublishStatus::Published, "{out:?}\n{}", log_of(knot.dir.path()));
        assert_eq!(out.attempts, 1);
        assert_eq!(out.target, p.target());
        // No lines at Knot: the default line for the domain and the alias in the zone.
        assert_eq!(short(knot.addr, &["cdn.example.test", "A"]), ["192.0.2.3"]);
        assert_eq!(short(knot.addr, &["cdn.example.test", "AAAA"]), ["2001:db8::3"]);
        assert_eq!(short(knot.addr, &["www.cdn.example.test", "A"]), ["192.0.2.3"]);
        assert_eq!(short(knot.addr, &["all.cdn.example.test", "A"]), ["192.0.2.1", "192.0.2.2", "192.0.2.3"]);
        let ttl = crate::support::dig(knot.addr, &["cdn.example.test", "A", "+noall", "+answer"]);
        assert!(ttl.contains("\t30\tIN\tA\t192.0.2.3"), "{ttl}");

        // The next revision replaces the RRsets (the old address is gone).
        let mut next = video(10, &["192.0.2.1"]);
        next.lines[2].records = vec!["192.0.2.33".parse().unwrap()];
        let out = p.publish(&next).await;
        assert_eq!(out.status, PublishStatus::Published, "{out:?}");
        assert_eq!(short(knot.addr, &["cdn.example.test", "A"]), ["192.0.2.33"]);
        assert!(short(knot.addr, &["cdn.example.test", "AAAA"]).is_empty());
    }
}

#[tokio::test]
async fn a_wrong_key_is_refused_and_the_outcome_says_so() {
    let knot = knot("hmac-sha256");
    let p = publisher(knot.addr, TsigAlgorithm::HmacSha256, OTHER_SECRET, 4);
    let out = p.publish(&video(9, &["192.0.2.1"])).await;
    let PublishStatus::Failed { reason } = &out.status else { panic!("{out:?}") };
    assert!(reason.contains("NOTAUTH") && reason.contains("BADSIG"), "{reason}");
    // Retrying cannot fix a wrong key: one attempt only.
    assert_eq!(out.attempts, 1);
    assert_eq!(short(knot.addr, &["cdn.example.test", "A"]), ["192.0.2.250"]);
}

#[tokio::test]
async fn an_unreachable_server_is_retried_then_reported() {
    // Nothing listens on this port (free a moment ago).
    let addr: SocketAddr = ([127, 0, 0, 1], free_port()).into();
    let p = publisher(addr, TsigAlgorithm::HmacSha384, SECRET, 3);
    let out = p.publish(&video(9, &["192.0.2.1"])).await;
    let PublishStatus::Failed { reason } = &out.status else { panic!("{out:?}") };
    assert!(reason.contains(&addr.to_string()), "{reason}");
    assert_eq!(out.attempts, 3);
}
