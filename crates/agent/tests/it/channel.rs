//! The state directory across starts, option checks, server refusals and renewal.

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use vantage_agent::{
    CERT_FILE, ChannelClient, ChannelOptions, Error, IDENTITY_FILE, Identity, KEY_FILE, StateDir, Url,
    connect, enroll,
};
use vantage_core::wire::{self, Role, Work};

use crate::options;
use crate::support::{ChannelServer, TestCa};

/// A prober enrolled at `server` with its good token `vtp_good`, its state in `dir`.
async fn enrolled(server: &ChannelServer, dir: &std::path::Path) -> ChannelClient {
    connect(&options(dir, server.url(), "vtp_good", server.ca.fingerprint()), Role::Prober).await.unwrap()
}

#[tokio::test]
async fn later_starts_reuse_the_identity_and_ignore_the_token() {
    let server = ChannelServer::start(Role::Prober, "vtp_good").await;
    let dir = tempfile::tempdir().unwrap();
    let first = enrolled(&server, dir.path()).await;
    let saved: Identity =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join(IDENTITY_FILE)).unwrap()).unwrap();
    assert_eq!(&saved, first.identity());
    assert_eq!(saved.server, server.url().to_string());

    // Another token (used or not) and even another pin: the saved identity wins, no enrollment.
    let other_pin = TestCa::new("x").fingerprint();
    let again =
        connect(&options(dir.path(), server.url(), "vtp_spent", other_pin), Role::Prober).await.unwrap();
    assert_eq!(again.identity(), first.identity());
    assert_eq!(again.certificate(), first.certificate());
    assert_eq!(server.requests_to(wire::ENROLL).len(), 1);

    // And without any option but the directory: the saved server URL is used.
    let bare = connect(&ChannelOptions::new(dir.path()), Role::Prober).await.unwrap();
    assert_eq!(bare.server(), &server.url());
    bare.get::<Work>(wire::PROBER_WORK).await.unwrap();
    let mode = std::fs::metadata(dir.path().join(KEY_FILE)).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);

    // The state directory of a prober is not a node's.
    let e = connect(&ChannelOptions::new(dir.path()), Role::Node).await.unwrap_err();
    assert!(matches!(e, Error::Config { option: "--state-dir", .. }), "{e}");
}

#[tokio::test]
async fn first_start_needs_server_token_and_pin_and_checks_them_before_connecting() {
    let server = ChannelServer::start(Role::Prober, "vtp_good").await;
    let dir = tempfile::tempdir().unwrap();
    let good = options(dir.path(), server.url(), "vtp_good", server.ca.fingerprint());
    let cases: Vec<(ChannelOptions, Role, &str)> = vec![
        (ChannelOptions { server: None, ..good.clone() }, Role::Prober, "--server"),
        (ChannelOptions { token: None, ..good.clone() }, Role::Prober, "--token"),
        (ChannelOptions { ca_sha256: None, ..good.clone() }, Role::Prober, "--ca-sha256"),
        (good.clone(), Role::Node, "--token"),
        (
            ChannelOptions {
                server: Some(Url::parse(&format!("http://{}", server.addr)).unwrap()),
                ..good.clone()
            },
            Role::Prober,
            "--server",
        ),
    ];
    for (opts, role, option) in cases {
        let e = connect(&opts, role).await.unwrap_err();
        assert!(matches!(&e, Error::Config { option: o, .. } if *o == option), "{option}: {e}");
    }
    assert_eq!(server.connections(), 0);
    assert!(!format!("{good:?}").contains("vtp_good"), "Debug hides the token");
}

#[tokio::test]
async fn refused_token_shows_the_servers_reason() {
    let server = ChannelServer::start(Role::Prober, "vtp_good").await;
    let dir = tempfile::tempdir().unwrap();
    let e = enroll(&options(dir.path(), server.url(), "vtp_wrong", server.ca.fingerprint()), Role::Prober)
        .await
        .unwrap_err();
    let Error::Refused { status, reason, field } = &e else { panic!("{e}") };
    assert_eq!(
        (*status, reason.as_str(), field.as_deref()),
        (401, "unknown, expired or used token", Some("token"))
    );
    assert!(e.to_string().contains("unknown, expired or used token (field token)"), "{e}");
    assert!(!e.is_transient());
    assert!(!StateDir::new(dir.path()).is_enrolled().unwrap());
}

#[tokio::test]
async fn server_role_must_match() {
    // A server that enrolls a prober token as a node is not followed.
    let server = ChannelServer::start(Role::Node, "vtp_good").await;
    let dir = tempfile::tempdir().unwrap();
    let e = enroll(&options(dir.path(), server.url(), "vtp_good", server.ca.fingerprint()), Role::Prober)
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Protocol { .. }), "{e}");
    assert!(!StateDir::new(dir.path()).is_enrolled().unwrap());
}

#[tokio::test]
async fn server_errors_come_back_as_values() {
    let server = ChannelServer::start(Role::Prober, "vtp_good").await;
    let dir = tempfile::tempdir().unwrap();
    let client = enrolled(&server, dir.path()).await;
    server.script().refuse = Some((403, "this prober is disabled".into()));
    let e = client.get::<Work>(wire::PROBER_WORK).await.unwrap_err();
    assert!(e.is_identity_refused(), "{e}");
    assert_eq!(e.reason(), "this prober is disabled");
    server.script().refuse = None;
    let e = client.get::<Work>(wire::NODE_HEARTBEAT).await.unwrap_err();
    assert!(matches!(e, Error::Refused { status: 404, .. }), "{e}");
    // A 204 where JSON was expected is a protocol error, not a panic.
    let report = wire::Report {
        started_at: vantage_core::Timestamp::from_secs(1),
        finished_at: vantage_core::Timestamp::from_secs(2),
        version: "t".into(),
        results: Vec::new(),
        confirmation: false,
    };
    let e = client.post::<_, Work>(wire::PROBER_REPORT, &report).await.unwrap_err();
    assert!(matches!(e, Error::Protocol { .. }), "{e}");
}

#[tokio::test]
async fn renewal_swaps_key_and_certificate_on_disk_and_in_the_client() {
    let server = ChannelServer::start(Role::Prober, "vtp_good").await;
    let dir = tempfile::tempdir().unwrap();
    let client = enrolled(&server, dir.path()).await;
    let before = client.certificate();
    let key_before = std::fs::read_to_string(dir.path().join(KEY_FILE)).unwrap();

    let renewed = client.renew().await.unwrap();
    assert_ne!(renewed.fingerprint, before.fingerprint);
    assert_eq!(client.certificate(), renewed);
    let renew_call = server.requests_to(wire::RENEW).pop().unwrap();
    assert_eq!(renew_call.client, Some(before.fingerprint), "renewal is asked with the old certificate");

    client.get::<Work>(wire::PROBER_WORK).await.unwrap();
    let last = server.requests_to(wire::PROBER_WORK).pop().unwrap();
    assert_eq!(last.client, Some(renewed.fingerprint), "later calls show the new certificate");

    let key_after = std::fs::read_to_string(dir.path().join(KEY_FILE)).unwrap();
    assert_ne!(key_after, key_before, "a new key");
    let mode = std::fs::metadata(dir.path().join(KEY_FILE)).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    // A restart reads the new pair (and opening checks that they belong together).
    let reopened = ChannelClient::open(StateDir::new(dir.path()), None).unwrap();
    assert_eq!(reopened.certificate().fingerprint, renewed.fingerprint);
    reopened.get::<Work>(wire::PROBER_WORK).await.unwrap();
    assert!(std::fs::read_dir(dir.path()).unwrap().all(|e| {
        let name = e.unwrap().file_name().into_string().unwrap();
        !name.ends_with(".next") && !name.ends_with(".tmp")
    }));
}

#[tokio::test]
async fn renewal_happens_in_the_last_third_or_when_the_server_asks() {
    let server = ChannelServer::start(Role::Prober, "vtp_good").await;
    // Issued 25 of 30 days ago: due.
    server.script().cert_age = Duration::from_secs(25 * 86_400);
    let dir = tempfile::tempdir().unwrap();
    let client = enrolled(&server, dir.path()).await;
    server.script().cert_age = Duration::from_secs(60);
    let renewed = client.renew_if_due(None).await.unwrap().expect("due");
    assert!(
        !renewed.renewal_due(vantage_core::Timestamp::from_secs(
            time::OffsetDateTime::now_utc().unix_timestamp()
        ))
    );
    assert_eq!(client.renew_if_due(None).await.unwrap(), None, "fresh now");
    assert_eq!(client.renew_if_due(Some(3600)).await.unwrap(), None);
    // The server asking right after a renewal is not heeded again.
    assert_eq!(client.renew_if_due(Some(0)).await.unwrap(), None);
    assert_eq!(server.requests_to(wire::RENEW).len(), 1);

    // A fresh start that the server asks to renew does.
    let fresh = ChannelClient::open(StateDir::new(dir.path()), None).unwrap();
    assert!(fresh.renew_if_due(Some(0)).await.unwrap().is_some());
    assert_eq!(server.requests_to(wire::RENEW).len(), 2);
    assert!(dir.path().join(CERT_FILE).exists());
}
