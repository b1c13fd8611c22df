//! RFC 2136 publishing to a real Knot DNS, started by the test in a temporary directory with
//! its own configuration, on 127.0.0.1 and a free port.

use std::net::SocketAddr;
use std::time::Duration;

use vantage_dns::{
    PublishStatus, Publisher, RetryPolicy, Rfc2136Config, Rfc2136Publisher, TsigAlgorithm, TsigKey,
};

use vantage_testkit::{KNOT_INITIAL_A, KnotServer, free_port};

use crate::support::{short, video};

const SECRET: &str = "bm90LWEtcmVhbC1zZWNyZXQtanVzdC1mb3ItdGVzdHM=";
const OTHER_SECRET: &str = "YW5vdGhlci1zZWNyZXQtdGhhdC1rbm90LWRvZXMtbm90LWtub3c=";

/// Starts `knotd` serving `cdn.example.test` with updates allowed for key `vantage-key`.
fn knot(algorithm: &str) -> KnotServer {
    KnotServer::start("cdn.example.test", "vantage-key", algorithm, SECRET)
        .expect("knotd runs (Debian package knot)")
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
        let p = publisher(knot.addr(), alg, SECRET, 3);
        assert_eq!(p.target(), format!("rfc2136://{}", knot.addr()));

        let zone = video(9, &["192.0.2.1", "2001:db8::1"]);
        let out = p.publish(&zone).await;
        assert_eq!(out.status, PublishStatus::Published, "{out:?}\n{}", knot.log());
        assert_eq!(out.attempts, 1);
        assert_eq!(out.target, p.target());
        // No lines at Knot: the default line for the domain and the alias in the zone.
        assert_eq!(short(knot.addr(), &["cdn.example.test", "A"]), ["192.0.2.3"]);
        assert_eq!(short(knot.addr(), &["cdn.example.test", "AAAA"]), ["2001:db8::3"]);
        assert_eq!(short(knot.addr(), &["www.cdn.example.test", "A"]), ["192.0.2.3"]);
        assert_eq!(
            short(knot.addr(), &["all.cdn.example.test", "A"]),
            ["192.0.2.1", "192.0.2.2", "192.0.2.3"]
        );
        let ttl = crate::support::dig(knot.addr(), &["cdn.example.test", "A", "+noall", "+answer"]);
        assert!(ttl.contains("\t30\tIN\tA\t192.0.2.3"), "{ttl}");

        // The next revision replaces the RRsets (the old address is gone).
        let mut next = video(10, &["192.0.2.1"]);
        next.lines[2].records = vec!["192.0.2.33".parse().unwrap()];
        let out = p.publish(&next).await;
        assert_eq!(out.status, PublishStatus::Published, "{out:?}");
        assert_eq!(short(knot.addr(), &["cdn.example.test", "A"]), ["192.0.2.33"]);
        assert!(short(knot.addr(), &["cdn.example.test", "AAAA"]).is_empty());
    }
}

#[tokio::test]
async fn a_wrong_key_is_refused_and_the_outcome_says_so() {
    let knot = knot("hmac-sha256");
    let p = publisher(knot.addr(), TsigAlgorithm::HmacSha256, OTHER_SECRET, 4);
    let out = p.publish(&video(9, &["192.0.2.1"])).await;
    let PublishStatus::Failed { reason } = &out.status else { panic!("{out:?}") };
    assert!(reason.contains("NOTAUTH") && reason.contains("BADSIG"), "{reason}");
    // Retrying cannot fix a wrong key: one attempt only.
    assert_eq!(out.attempts, 1);
    assert_eq!(short(knot.addr(), &["cdn.example.test", "A"]), [KNOT_INITIAL_A]);
}

#[tokio::test]
async fn an_unreachable_server_is_retried_then_reported() {
    // Nothing listens on this port (free a moment ago).
    let addr: SocketAddr = ([127, 0, 0, 1], free_port().unwrap()).into();
    let p = publisher(addr, TsigAlgorithm::HmacSha384, SECRET, 3);
    let out = p.publish(&video(9, &["192.0.2.1"])).await;
    let PublishStatus::Failed { reason } = &out.status else { panic!("{out:?}") };
    assert!(reason.contains(&addr.to_string()), "{reason}");
    assert_eq!(out.attempts, 3);
}
