//! TLS pinning: the token goes only to a server whose chain holds the pinned CA and whose
//! certificate that CA issued for the channel's name; afterwards the saved CA is the only root
//! and the agent shows its client certificate.

use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;

use vantage_agent::{ChannelClient, Error, Fingerprint, KEY_FILE, StateDir, connect, enroll};
use vantage_core::wire::{self, Role, Work};

use crate::options;
use crate::support::{ChannelServer, TestCa};

#[tokio::test]
async fn wrong_fingerprint_is_refused_before_any_request() {
    vantage_testkit::init_tracing();
    let server = ChannelServer::start(Role::Prober, "vtp_good").await;
    let dir = tempfile::tempdir().unwrap();
    let other = TestCa::new("someone else").fingerprint();
    let e = enroll(&options(dir.path(), server.url(), "vtp_good", other), Role::Prober).await.unwrap_err();
    match &e {
        Error::FingerprintMismatch { actual, expected } => {
            assert_eq!(*actual, server.ca.fingerprint());
            assert_eq!(*expected, other);
        }
        e => panic!("expected a fingerprint mismatch, got {e}"),
    }
    assert_eq!(
        e.to_string(),
        format!("CA fingerprint mismatch: the server's CA is {}, expected {other}", server.ca.fingerprint())
    );
    assert!(server.connections() >= 1, "the agent did connect");
    assert!(server.requests().is_empty(), "yet the server saw no request: {:?}", server.requests());
    assert!(server.log.enroll_requests.lock().unwrap().is_empty(), "the token was not sent");
    assert!(!dir.path().join(KEY_FILE).exists(), "nothing is saved");
}

#[tokio::test]
async fn impostor_showing_the_real_ca_in_its_chain_is_refused() {
    // The CA certificate is public: an impostor can put it in its chain. Its own leaf is not
    // signed by that CA, so verification fails before any request.
    let real = TestCa::new("real");
    let impostor = Arc::new(TestCa::new("impostor"));
    let (leaf, key) = impostor.server_cert(wire::SERVER_NAME);
    let server =
        ChannelServer::start_with(impostor, vec![leaf, real.der()], key, Role::Prober, "vtp_good").await;
    let dir = tempfile::tempdir().unwrap();
    let e = enroll(&options(dir.path(), server.url(), "vtp_good", real.fingerprint()), Role::Prober)
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Tls { .. }), "{e}");
    assert!(server.requests().is_empty());
}

#[tokio::test]
async fn certificate_for_another_name_is_refused() {
    let ca = Arc::new(TestCa::new("real"));
    let (leaf, key) = ca.server_cert("evil.example");
    let server =
        ChannelServer::start_with(ca.clone(), vec![leaf, ca.der()], key, Role::Prober, "vtp_good").await;
    let dir = tempfile::tempdir().unwrap();
    let e = enroll(&options(dir.path(), server.url(), "vtp_good", ca.fingerprint()), Role::Prober)
        .await
        .unwrap_err();
    let Error::Tls { reason, .. } = &e else { panic!("expected a TLS error, got {e}") };
    assert!(reason.to_lowercase().contains("name"), "{reason}");
    assert!(server.requests().is_empty());
}

#[tokio::test]
async fn pinned_ca_enrolls_then_calls_use_the_client_certificate() {
    let server = ChannelServer::start(Role::Prober, "vtp_good").await;
    let dir = tempfile::tempdir().unwrap();
    // The pin as openssl prints it: upper case with colons.
    let pin_text = hex_colons(server.ca.fingerprint());
    let pin: Fingerprint = pin_text.parse().unwrap();
    // The URL names 127.0.0.1, the certificate agent.vantage.invalid: verified all the same.
    let identity = enroll(&options(dir.path(), server.url(), "vtp_good", pin), Role::Prober).await.unwrap();
    assert_eq!((identity.id, identity.role, identity.name.as_str()), (42, Role::Prober, "sg-1"));
    let seen = server.requests();
    assert_eq!(seen.len(), 1);
    assert_eq!((&seen[0].method, seen[0].path.as_str()), (&hyper::Method::POST, wire::ENROLL));
    assert_eq!(seen[0].client, None, "enrollment shows no client certificate");
    let sent = server.log.enroll_requests.lock().unwrap()[0].clone();
    assert_eq!((sent.token.as_str(), sent.hostname.as_str()), ("vtp_good", "probe-host-1"));
    assert_eq!(sent.version, vantage_agent::VERSION);
    let mode = std::fs::metadata(dir.path().join(KEY_FILE)).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    assert!(!sent.csr_pem.contains("PRIVATE KEY"));

    let client = connect(&options(dir.path(), server.url(), "vtp_good", pin), Role::Prober).await.unwrap();
    let work: Work = client.get(wire::PROBER_WORK).await.unwrap();
    assert_eq!(work.id, 42);
    let on_disk = std::fs::read_to_string(dir.path().join("cert.pem")).unwrap();
    let der = rustls::pki_types::pem::PemObject::from_pem_slice(on_disk.as_bytes())
        .map(|c: rustls::pki_types::CertificateDer<'static>| Fingerprint::of(&c))
        .unwrap();
    let last = server.requests_to(wire::PROBER_WORK).pop().unwrap();
    assert_eq!(last.client, Some(der), "the server sees the saved client certificate");
    assert_eq!(client.certificate().fingerprint, der);
    assert_eq!(client.certificate().common_name.as_deref(), Some("42"));
    assert_eq!(client.ca().fingerprint, server.ca.fingerprint());
}

#[tokio::test]
async fn after_enrollment_the_saved_ca_is_the_only_root() {
    let server = ChannelServer::start(Role::Prober, "vtp_good").await;
    let dir = tempfile::tempdir().unwrap();
    enroll(&options(dir.path(), server.url(), "vtp_good", server.ca.fingerprint()), Role::Prober)
        .await
        .unwrap();
    // Another channel (another CA) at another address: the saved identity does not trust it.
    let other = ChannelServer::start(Role::Prober, "vtp_good").await;
    let client = ChannelClient::open(StateDir::new(dir.path()), Some(&other.url())).unwrap();
    let e = client.get::<Work>(wire::PROBER_WORK).await.unwrap_err();
    assert!(matches!(e, Error::Tls { .. }), "{e}");
    assert!(other.requests().is_empty());
}

fn hex_colons(fp: Fingerprint) -> String {
    fp.as_bytes().iter().map(|b| format!("{b:02X}")).collect::<Vec<_>>().join(":")
}
