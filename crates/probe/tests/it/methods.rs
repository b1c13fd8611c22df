//! Each method against a server that answers well, and each way a connection can fail.

use std::time::Duration;

use vantage_core::check::CheckInput;
use vantage_core::result::{ErrorCode, Stages};
use vantage_probe::{Method, ProbeTarget, RoundConfig, SourceAddresses, attempt, attempt_from, run_round};
use vantage_testkit::{Behavior, EdgeOptions, EdgeServer, any_loopback, closed_port};

use crate::{check, target};

const T: Duration = Duration::from_secs(2);

fn stages(bits: &[Stages]) -> Stages {
    bits.iter().fold(Stages::empty(), |s, b| s.with(*b))
}

#[tokio::test]
async fn tcp_connects_and_closes() {
    vantage_testkit::init_tracing();
    let server = EdgeServer::start(any_loopback()).await.unwrap();
    let r = attempt(&target(&server, Method::Tcp), T).await;
    assert_eq!(r.error, None, "{r:?}");
    assert_eq!(r.stages, stages(&[Stages::CONNECTED, Stages::GOOD]));
    assert!(r.timings.connect.is_some() && r.timings.tls.is_none());
    assert!(r.attempt().good());
    // The prober sent nothing: the server saw a connection and no request.
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(server.connections(), 1);
    assert!(server.requests().is_empty());
}

#[tokio::test]
async fn http_gets_the_health_path_with_the_health_host() {
    let server = EdgeServer::start(any_loopback()).await.unwrap();
    let r = attempt(&target(&server, Method::Http), T).await;
    assert_eq!(r.error, None, "{r:?}");
    assert_eq!(r.stages, Stages::ALL);
    assert_eq!(r.status, Some(200));
    let t = r.timings;
    assert!(t.connect.is_some() && t.first_byte.is_some() && t.tls.is_none());
    assert!(t.first_byte.unwrap() <= t.total && t.connect.unwrap() <= t.total);
    let seen = server.last_request().unwrap();
    assert_eq!((seen.method.as_str(), seen.target.as_str()), ("GET", "/.vantage/health"));
    assert_eq!(seen.header("host"), Some("health.vantage.invalid"));
    assert_eq!(seen.header("connection"), Some("close"));
    assert!(seen.header("user-agent").unwrap().starts_with("vantage-probe/"));
}

#[tokio::test]
async fn http_uses_the_checks_path_host_and_expected_status() {
    let server = EdgeServer::start_with(any_loopback(), EdgeOptions::new(Behavior::Health).with_status(418))
        .await
        .unwrap();
    let c = check(CheckInput {
        path: Some("/status?probe=1".into()),
        host: Some("edge.example.net".into()),
        expected_response: Some(418),
        ..Default::default()
    });
    let t = ProbeTarget::new("t", server.addr(), Method::Http, c);
    let r = attempt(&t, T).await;
    assert_eq!(r.error, None, "{r:?}");
    let seen = server.last_request().unwrap();
    assert_eq!(seen.target, "/status?probe=1");
    assert_eq!(seen.header("host"), Some("edge.example.net"));
}

#[tokio::test]
async fn raw_request_lines_are_sent() {
    let server = EdgeServer::start(any_loopback()).await.unwrap();
    let c = check(CheckInput {
        request: vec![
            "HEAD /raw HTTP/1.1".into(),
            "Host: example.com".into(),
            "X-Magic: We're fine with this.".into(),
            "Connection: close".into(),
        ],
        ..Default::default()
    });
    let r = attempt(&ProbeTarget::new("t", server.addr(), Method::Http, c), T).await;
    assert_eq!(r.error, None, "{r:?}");
    let seen = server.last_request().unwrap();
    assert_eq!((seen.method.as_str(), seen.target.as_str()), ("HEAD", "/raw"));
    assert_eq!(seen.header("x-magic"), Some("We're fine with this."));
    assert_eq!(seen.header("host"), Some("example.com"));
}

/// A one-connection server on loopback that records every byte of the request head it
/// receives, answers 200 and closes.
async fn recording() -> (std::net::SocketAddr, tokio::sync::oneshot::Receiver<Vec<u8>>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let (mut s, _) = listener.accept().await.unwrap();
        let mut head = Vec::new();
        let mut buf = [0u8; 1024];
        while !head.ends_with(b"\r\n\r\n") {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => head.extend_from_slice(&buf[..n]),
            }
        }
        let _ = s.write_all(b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n").await;
        let _ = tx.send(head);
    });
    (addr, rx)
}

/// Reference 002's `.request`: the lines go out byte for byte as written (version, case,
/// spacing), each ended by CRLF, and one CRLF ends the head.
#[tokio::test]
async fn raw_request_lines_are_sent_byte_for_byte() {
    let (addr, seen) = recording().await;
    let lines =
        ["GET /x?a=1 HTTP/1.0", "host:example.com", "X-Magic:   We're fine with this. ", "connection: close"];
    let c =
        check(CheckInput { request: lines.iter().map(|l| (*l).to_owned()).collect(), ..Default::default() });
    let r = attempt(&ProbeTarget::new("t", addr, Method::Http, c), T).await;
    assert_eq!(r.error, None, "{r:?}");
    let seen = seen.await.unwrap();
    assert_eq!(
        String::from_utf8_lossy(&seen),
        "GET /x?a=1 HTTP/1.0\r\nhost:example.com\r\nX-Magic:   We're fine with this. \r\nconnection: close\r\n\r\n"
    );
}

#[tokio::test]
async fn unexpected_status_is_status() {
    let server = EdgeServer::start_with(any_loopback(), EdgeOptions::new(Behavior::Health).with_status(503))
        .await
        .unwrap();
    let r = attempt(&target(&server, Method::Http), T).await;
    assert_eq!(r.error, Some(ErrorCode::Status), "{r:?}");
    assert_eq!(r.stages, stages(&[Stages::CONNECTED, Stages::SENT, Stages::RECEIVED]));
    assert_eq!(r.status, Some(503));
    assert!(r.detail.unwrap().contains("503"));
    // The status follows the server at run time.
    server.set_status(200);
    assert!(attempt(&target(&server, Method::Http), T).await.good());
}

#[tokio::test]
async fn https_sends_the_host_as_sni_and_times_the_handshake() {
    let server = EdgeServer::start_with(
        any_loopback(),
        EdgeOptions::new(Behavior::Health).with_self_signed_tls().unwrap(),
    )
    .await
    .unwrap();
    let r = attempt(&target(&server, Method::Https), T).await;
    assert_eq!(r.error, None, "{r:?}");
    assert_eq!(r.stages, Stages::ALL);
    let t = r.timings;
    assert!(t.tls.unwrap() > Duration::ZERO && t.tls.unwrap() <= t.total);
    assert_eq!(server.sni(), [Some("health.vantage.invalid".to_owned())]);
    assert_eq!(server.last_request().unwrap().header("host"), Some("health.vantage.invalid"));
}

#[tokio::test]
async fn https_url_target_uses_the_url_host() {
    let server = EdgeServer::start_with(
        any_loopback(),
        EdgeOptions::new(Behavior::Health).with_self_signed_tls().unwrap(),
    )
    .await
    .unwrap();
    let url = format!("https://localhost:{}/up", server.addr().port());
    let mut t = ProbeTarget::from_url("e", &url, check(CheckInput::default())).await.unwrap();
    // localhost may resolve to ::1 first; the server listens on 127.0.0.1.
    t.addr = server.addr();
    assert_eq!(t.method, Method::Https);
    let r = attempt(&t, T).await;
    assert_eq!(r.error, None, "{r:?}");
    assert_eq!(server.sni(), [Some("localhost".to_owned())]);
    let seen = server.last_request().unwrap();
    assert_eq!(seen.target, "/up");
    let host = format!("localhost:{}", server.addr().port());
    assert_eq!(seen.header("host"), Some(host.as_str()));
}

#[tokio::test]
async fn a_peer_that_does_not_speak_tls_is_tls() {
    let server = EdgeServer::start_with(any_loopback(), EdgeOptions::new(Behavior::NotTls)).await.unwrap();
    let r = attempt(&target(&server, Method::Https), T).await;
    assert_eq!(r.error, Some(ErrorCode::Tls), "{r:?}");
    assert!(!r.stages.contains(Stages::CONNECTED), "the handshake is part of connecting");
    assert!(r.timings.connect.is_some() && r.timings.tls.is_none());
}

#[tokio::test]
async fn proxy_v1_header_goes_first() {
    for tls in [false, true] {
        let mut opts = EdgeOptions::new(Behavior::Health).with_proxy_v1();
        if tls {
            opts = opts.with_self_signed_tls().unwrap();
        }
        let server = EdgeServer::start_with(any_loopback(), opts).await.unwrap();
        let method = if tls { Method::Https } else { Method::Http };
        let mut t = target(&server, method);
        t.proxy_v1 = true;
        let r = attempt(&t, T).await;
        assert_eq!(r.error, None, "tls {tls}: {r:?}");
        let seen = server.proxy_headers();
        assert_eq!(seen.len(), 1);
        assert_eq!(seen[0].destination, server.addr());
        assert!(seen[0].source.ip().is_loopback());
        assert_eq!(server.rejected(), 0);

        // Without the header the listener drops the connection before answering.
        t.proxy_v1 = false;
        let r = attempt(&t, T).await;
        assert!(!r.good());
        // The listener closes with the request unread, which the kernel turns into a reset;
        // a TLS client may see the close first, as a failed handshake.
        if tls {
            assert!(matches!(r.error, Some(ErrorCode::Reset | ErrorCode::Tls)), "{r:?}");
        } else {
            assert_eq!(r.error, Some(ErrorCode::Reset), "{r:?}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(server.rejected(), 1);
    }
}

#[tokio::test]
async fn tcp_sends_the_proxy_header_too() {
    let server = EdgeServer::start_with(any_loopback(), EdgeOptions::new(Behavior::Health).with_proxy_v1())
        .await
        .unwrap();
    let mut t = target(&server, Method::Tcp);
    t.proxy_v1 = true;
    assert!(attempt(&t, T).await.good());
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(server.proxy_headers().len(), 1);
}

#[tokio::test]
async fn closed_port_is_refused() {
    let addr = closed_port().unwrap();
    for method in [Method::Tcp, Method::Http, Method::Https, Method::Hls] {
        let t = ProbeTarget::new("t", addr, method, check(CheckInput::default()));
        let r = attempt(&t, T).await;
        assert_eq!(r.error, Some(ErrorCode::Refused), "{method}: {r:?}");
        assert_eq!(r.stages, Stages::empty());
        assert!(r.timings.connect.is_none());
    }
}

#[tokio::test]
async fn a_reset_is_reset() {
    let server = EdgeServer::start_with(any_loopback(), EdgeOptions::new(Behavior::Reset)).await.unwrap();
    let r = attempt(&target(&server, Method::Http), T).await;
    assert_eq!(r.error, Some(ErrorCode::Reset), "{r:?}");
    assert_eq!(r.stages, stages(&[Stages::CONNECTED, Stages::SENT]));
}

#[tokio::test]
async fn silence_is_a_timeout_at_the_timeout() {
    let server = EdgeServer::start_with(any_loopback(), EdgeOptions::new(Behavior::Silent)).await.unwrap();
    let timeout = Duration::from_millis(300);
    let r = attempt(&target(&server, Method::Http), timeout).await;
    assert_eq!(r.error, Some(ErrorCode::Timeout), "{r:?}");
    assert_eq!(r.stages, stages(&[Stages::CONNECTED, Stages::SENT]));
    assert!(r.timings.total >= timeout && r.timings.total < timeout * 3, "{r:?}");
    assert!(r.detail.unwrap().contains("waiting for the response"));
    // A TLS listener that never answers times out in the handshake.
    let r = attempt(&target(&server, Method::Https), timeout).await;
    assert_eq!(r.error, Some(ErrorCode::Timeout), "{r:?}");
    assert!(!r.stages.contains(Stages::CONNECTED));
    assert!(r.detail.unwrap().contains("TLS handshake"));
}

#[tokio::test]
async fn expect_close_waits_for_the_peer_to_close() {
    let server = EdgeServer::start_with(any_loopback(), EdgeOptions::new(Behavior::KeepOpen)).await.unwrap();
    let timeout = Duration::from_millis(300);
    let r = attempt(&target(&server, Method::Http), timeout).await;
    assert_eq!(r.error, Some(ErrorCode::Timeout), "{r:?}");
    assert_eq!(r.status, Some(200));
    assert_eq!(r.stages, stages(&[Stages::CONNECTED, Stages::SENT, Stages::RECEIVED]));
    assert!(r.detail.unwrap().contains("close"));

    let c = check(CheckInput { expect_close: Some(false), ..Default::default() });
    let r = attempt(&ProbeTarget::new("t", server.addr(), Method::Http, c), timeout).await;
    assert_eq!(r.error, None, "{r:?}");
    assert!(r.timings.total < timeout);
}

#[tokio::test]
async fn a_stopped_server_refuses_and_a_restarted_one_answers() {
    let server = EdgeServer::start(any_loopback()).await.unwrap();
    let t = target(&server, Method::Http);
    assert!(attempt(&t, T).await.good());
    server.stop().await;
    assert!(!server.is_running());
    assert_eq!(attempt(&t, T).await.error, Some(ErrorCode::Refused));
    server.restart().await.unwrap();
    assert!(server.is_running());
    assert!(attempt(&t, T).await.good());
}

#[tokio::test]
async fn connections_leave_from_the_source_address_of_their_family() {
    let server = EdgeServer::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let source: SourceAddresses = "127.0.0.2,::1".parse().unwrap();
    for method in [Method::Tcp, Method::Http] {
        let r = attempt_from(&target(&server, method), T, source).await;
        assert_eq!(r.error, None, "{method}: {r:?}");
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    let peers = server.peers();
    assert_eq!(peers.len(), 2);
    assert!(peers.iter().all(|p| p.ip() == "127.0.0.2".parse::<std::net::IpAddr>().unwrap()), "{peers:?}");
    // Without one the kernel picks the target's own address on loopback.
    assert!(attempt(&target(&server, Method::Http), T).await.good());
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(server.peers()[2].ip(), server.addr().ip());

    // A round passes it down too.
    let cfg = RoundConfig { attempts: 2, source, ..RoundConfig::default() };
    let results = run_round(&[target(&server, Method::Http)], &cfg).await;
    assert_eq!(results[0].lost(), 0, "{results:?}");
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(server.peers()[3..].iter().all(|p| p.ip().to_string() == "127.0.0.2"));
}

#[tokio::test]
async fn a_source_address_not_of_this_host_is_unreachable_and_sends_nothing() {
    let server = EdgeServer::start(any_loopback()).await.unwrap();
    // TEST-NET-1: no interface has it, so the bind fails before any packet leaves.
    let source: SourceAddresses = "192.0.2.1".parse().unwrap();
    let r = attempt_from(&target(&server, Method::Http), T, source).await;
    assert_eq!(r.error, Some(ErrorCode::Unreachable), "{r:?}");
    assert_eq!(r.stages, Stages::empty());
    assert!(r.detail.unwrap().contains("192.0.2.1"));
    assert_eq!(server.connections(), 0);
}

#[tokio::test]
async fn https_reports_the_certificate_expiry_and_verifies_only_when_asked() {
    let identity = vantage_testkit::TlsIdentity::self_signed(&["edge.vantage.test"]).unwrap();
    let expiry = vantage_core::Timestamp::from_secs(identity.not_after_s);
    let server =
        EdgeServer::start_with(any_loopback(), EdgeOptions::new(Behavior::Health).with_tls(identity))
            .await
            .unwrap();
    // Not verified (the default): the self-signed certificate is accepted, its expiry kept.
    let r = attempt(&target(&server, Method::Https), T).await;
    assert_eq!(r.error, None, "{r:?}");
    assert_eq!(r.cert_not_after, Some(expiry));
    let results = run_round(&[target(&server, Method::Https)], &RoundConfig::default()).await;
    assert_eq!(results[0].cert_not_after, Some(expiry), "the result carries it");
    // Plain HTTP has none.
    let plain = EdgeServer::start(any_loopback()).await.unwrap();
    assert_eq!(attempt(&target(&plain, Method::Http), T).await.cert_not_after, None);

    // Verified: no trusted root issued it, so the handshake fails as `tls`, before any request.
    let c = check(CheckInput {
        verify: Some(true),
        host: Some("edge.vantage.test".into()),
        ..Default::default()
    });
    let r = attempt(&ProbeTarget::new("t", server.addr(), Method::Https, c), T).await;
    assert_eq!(r.error, Some(ErrorCode::Tls), "{r:?}");
    assert_eq!(r.stages, Stages::empty(), "the handshake is part of connecting");
    assert!(r.detail.as_deref().unwrap().to_lowercase().contains("certificate"), "{r:?}");
    assert_eq!(server.requests().len(), 1 + 3, "only the unverified attempts got through");
}

/// A one-connection server on loopback that reads the request head, writes `chunks` with a
/// pause between them, then closes (or holds the connection until the client goes).
async fn scripted(chunks: &'static [&'static [u8]], close: bool) -> std::net::SocketAddr {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut s, _) = listener.accept().await.unwrap();
        let mut head = Vec::new();
        let mut buf = [0u8; 1024];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => head.extend_from_slice(&buf[..n]),
            }
        }
        for chunk in chunks {
            if s.write_all(chunk).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        if !close {
            while let Ok(n) = s.read(&mut buf).await {
                if n == 0 {
                    break;
                }
            }
        }
    });
    addr
}

#[tokio::test]
async fn health_answers_in_pieces_interim_answers_garbage_and_cut_heads() {
    let all = stages(&[Stages::CONNECTED, Stages::SENT, Stages::RECEIVED]);
    let run = |addr, expect_close| async move {
        let c = check(CheckInput { expect_close: Some(expect_close), ..Default::default() });
        attempt(&ProbeTarget::new("t", addr, Method::Http, c), Duration::from_millis(500)).await
    };
    // A head split across reads, after an interim 100: good, either way of closing.
    const PIECES: &[&[u8]] =
        &[b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 2", b"00 OK\r\nContent-Len", b"gth: 3\r\n\r\nok\n"];
    let r = run(scripted(PIECES, true).await, true).await;
    assert_eq!((r.error, r.status, r.stages), (None, Some(200), Stages::ALL), "{r:?}");
    // expect_close = false: the verdict is the head, even if the peer then holds on.
    let r = run(scripted(PIECES, false).await, false).await;
    assert_eq!((r.error, r.status), (None, Some(200)), "{r:?}");
    assert!(r.timings.total < Duration::from_millis(400), "{r:?}");
    // Not HTTP: status.
    let r = run(scripted(&[b"SSH-2.0-OpenSSH_9.6\r\n"], true).await, true).await;
    assert_eq!((r.error, r.stages), (Some(ErrorCode::Status), all), "{r:?}");
    // A close within the head: reset, with what was received.
    let r = run(scripted(&[b"HTTP/1.1 200 OK\r\nContent-"], true).await, true).await;
    assert_eq!((r.error, r.stages), (Some(ErrorCode::Reset), all), "{r:?}");
    // A close without a byte: reset, nothing received.
    let r = run(scripted(&[], true).await, true).await;
    assert_eq!(r.error, Some(ErrorCode::Reset), "{r:?}");
    assert_eq!(r.stages, stages(&[Stages::CONNECTED, Stages::SENT]));
    // A wrong status does not wait for the close.
    let r = run(scripted(&[b"HTTP/1.1 503 Busy\r\nContent-Length: 0\r\n\r\n"], false).await, true).await;
    assert_eq!((r.error, r.status), (Some(ErrorCode::Status), Some(503)), "{r:?}");
    assert!(r.timings.total < Duration::from_millis(400), "{r:?}");
}

/// Under the fetch policy a prober's work carries, a destination of a refused class is never
/// connected to, whatever the method: the attempt fails with `policy` and says why.
#[tokio::test]
async fn the_fetch_policy_refuses_before_connecting() {
    let server = EdgeServer::start(any_loopback()).await.unwrap();
    let strict = std::sync::Arc::new(vantage_core::fetch::FetchPolicy::default());
    for method in [Method::Tcp, Method::Http, Method::Hls] {
        let r = attempt(&target(&server, method).with_fetch(strict.clone()), T).await;
        assert_eq!((r.error, r.stages), (Some(ErrorCode::Policy), Stages::empty()), "{method:?}: {r:?}");
        assert!(r.detail.unwrap().contains("a loopback address"));
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(server.connections(), 0);
    let lab = vantage_core::fetch::FetchPolicy { allow_loopback: true, ..Default::default() };
    let r = attempt(&target(&server, Method::Http).with_fetch(lab.into()), T).await;
    assert_eq!(r.error, None, "{r:?}");
}
