//! `vantage check`: exit status 0 healthy, 1 unhealthy, 2 bad arguments, and what it prints.

use vantage_testkit::{Behavior, EdgeOptions, EdgeServer, any_loopback, closed_port, hls_paths};

use crate::{text, vantage, vantage_env};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthy_url_exits_0_and_prints_every_attempt() {
    let server = EdgeServer::start(any_loopback()).await.unwrap();
    let url = server.url("/.vantage/health");
    let out = vantage(&["check", &url, "--attempts", "2", "--timeout", "2s"]).await;
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("method http"), "{stdout}");
    assert!(stdout.contains("attempt 1: good"), "{stdout}");
    assert!(stdout.contains("attempt 2: good"), "{stdout}");
    assert!(!stdout.contains("attempt 3"), "{stdout}");
    assert!(stdout.contains("stages 4XRH"), "{stdout}");
    assert!(stdout.contains("status 200"), "{stdout}");
    assert!(stdout.contains("verdict: healthy — 2 of 2 attempts good"), "{stdout}");
    assert!(!stdout.contains("error"), "no error line when every attempt was good: {stdout}");
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_port_uses_the_given_path_and_host() {
    let server = EdgeServer::start(any_loopback()).await.unwrap();
    let addr = server.addr().to_string();
    let out =
        vantage(&["check", &addr, "--path", "/up?x=1", "--host", "edge.example.net", "--attempts", "1"])
            .await;
    assert_eq!(out.status.code(), Some(0), "{:?}", text(&out));
    let seen = server.last_request().unwrap();
    assert_eq!(seen.target, "/up?x=1");
    assert_eq!(seen.header("host"), Some("edge.example.net"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_with_proxy_v1_prints_the_handshake() {
    let server = EdgeServer::start_with(
        any_loopback(),
        EdgeOptions::new(Behavior::Health).with_self_signed_tls().unwrap().with_proxy_v1(),
    )
    .await
    .unwrap();
    let addr = server.addr().to_string();
    let out = vantage(&["check", &addr, "--method", "https", "--proxy-v1", "--attempts", "1"]).await;
    let (stdout, _) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("SNI health.vantage.invalid"), "{stdout}");
    assert!(stdout.contains("PROXY v1"), "{stdout}");
    assert!(!stdout.contains("tls -"), "handshake time printed: {stdout}");
    assert_eq!(server.proxy_headers().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_status_exits_1_with_the_error_code() {
    let server = EdgeServer::start_with(any_loopback(), EdgeOptions::new(Behavior::Health).with_status(503))
        .await
        .unwrap();
    let out = vantage(&["check", &server.url("/"), "--attempts", "3"]).await;
    let (stdout, _) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("attempt 3: status"), "{stdout}");
    assert!(stdout.contains("status 503"), "{stdout}");
    assert!(stdout.contains("verdict: unhealthy — 0 of 3"), "{stdout}");
    assert!(stdout.contains("error: status (Unexpected status)"), "{stdout}");

    // The same server is healthy for a check that expects its status.
    let out = vantage(&["check", &server.url("/"), "--expect", "503", "--attempts", "1"]).await;
    assert_eq!(out.status.code(), Some(0), "{:?}", text(&out));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_and_timeout_exit_1() {
    let closed = closed_port().unwrap().to_string();
    let out = vantage(&["check", &closed, "--method", "tcp", "--attempts", "1"]).await;
    let (stdout, _) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("error: refused"), "{stdout}");

    let silent = EdgeServer::start_with(any_loopback(), EdgeOptions::new(Behavior::Silent)).await.unwrap();
    let addr = silent.addr().to_string();
    let out = vantage(&["check", &addr, "--timeout", "200ms", "--attempts", "2"]).await;
    let (stdout, _) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("attempt 2: timeout"), "{stdout}");
    assert!(stdout.contains("stages 4X--"), "{stdout}");
    assert!(stdout.contains("error: timeout (Timed out)"), "{stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hls_prints_the_tuple_and_judges_freshness() {
    let origin = EdgeServer::start_with(any_loopback(), EdgeOptions::new(Behavior::Hls)).await.unwrap();
    let fresh = origin.url(hls_paths::FRESH);
    let out = vantage(&["check", &fresh, "--method", "hls", "--max-age", "30", "--attempts", "1"]).await;
    let (stdout, _) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("manifest valid yes, segment fetchable yes"), "{stdout}");
    assert!(stdout.contains("/live/fresh/3.ts -> 206"), "{stdout}");

    let stale = origin.url(hls_paths::STALE);
    let out = vantage(&["check", &stale, "--method", "hls", "--max-age", "30", "--attempts", "1"]).await;
    let (stdout, _) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("error: stale (Stale segment)"), "{stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_arguments_exit_2_naming_the_argument() {
    let cases: &[(&[&str], &str)] = &[
        (&["check", "127.0.0.1:9", "--attempts", "0"], "--attempts"),
        (&["check", "127.0.0.1:9", "--attempts", "11"], "--attempts"),
        (&["check", "127.0.0.1:9", "--method", "ftp"], "--method"),
        (&["check", "127.0.0.1:9", "--timeout", "soon"], "--timeout"),
        (&["check", "127.0.0.1:9", "--timeout", "90s"], "--timeout"),
        (&["check", "127.0.0.1:9", "--path", "health"], "--path"),
        (&["check", "127.0.0.1:9", "--expect", "42"], "--expect"),
        (&["check", "127.0.0.1:9", "--max-age", "0"], "--max-age"),
        (&["check", "http://127.0.0.1:9/", "--method", "https"], "--method"),
        (&["check", "ftp://127.0.0.1:9/"], "TARGET"),
        (&["check", "no-port-here"], "TARGET"),
        (&["check"], "<TARGET>"),
    ];
    for (args, named) in cases {
        let out = vantage(args).await;
        let (stdout, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stdout}{stderr}");
        assert!(stderr.contains(named), "{args:?} should name {named}: {stderr}");
        assert!(stdout.is_empty(), "{args:?}: nothing probed: {stdout}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn source_address_is_where_the_connection_comes_from() {
    let server = EdgeServer::start(any_loopback()).await.unwrap();
    let addr = server.addr().to_string();
    let out = vantage(&["check", &addr, "--source-address", "127.0.0.2", "--attempts", "1"]).await;
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("from 127.0.0.2"), "{stdout}");
    assert_eq!(server.peers().iter().map(|p| p.ip().to_string()).collect::<Vec<_>>(), ["127.0.0.2"]);
    let out = vantage(&["check", &addr, "--source-address", "127.0.0.2,127.0.0.3"]).await;
    assert_eq!(out.status.code(), Some(2), "{:?}", text(&out));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_checks_the_certificate_against_the_trusted_roots_and_the_name() {
    let identity = vantage_testkit::TlsIdentity::self_signed(&["localhost"]).unwrap();
    let roots = tempfile::tempdir().unwrap();
    let ca = roots.path().join("roots.pem");
    std::fs::write(&ca, &identity.cert_pem).unwrap();
    let server =
        EdgeServer::start_with(any_loopback(), EdgeOptions::new(Behavior::Health).with_tls(identity))
            .await
            .unwrap();
    let url = format!("https://localhost:{}/", server.addr().port());
    let env = [("SSL_CERT_FILE", ca.to_str().unwrap())];
    // Trusted, and issued to the name: good, with the expiry printed.
    let out = vantage_env(&["check", &url, "--verify", "--attempts", "1"], &env).await;
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("certificate: not after 20"), "{stdout}");
    // Another name: the certificate does not cover it.
    let addr = server.addr().to_string();
    let out =
        vantage_env(&["check", &addr, "--method", "https", "--host", "edge.other.test", "--verify"], &env)
            .await;
    let (stdout, _) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("error: tls"), "{stdout}");
    // Without --verify the same name is fine.
    let out = vantage_env(&["check", &addr, "--method", "https", "--host", "edge.other.test"], &env).await;
    assert_eq!(out.status.code(), Some(0), "{:?}", text(&out));
}
