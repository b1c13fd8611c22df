//! A stand-in for the control plane's agent channel: a CA made with rcgen, and a real HTTPS
//! server on 127.0.0.1 (rustls + hyper) that accepts client certificates of that CA the way the
//! channel does (optional at the TLS layer, required by every endpoint but enrollment), signs
//! CSRs, hands out work and records everything it sees.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rcgen::{
    BasicConstraints, CertificateParams, CertificateSigningRequestParams, CertifiedIssuer, DistinguishedName,
    DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose,
};
use rustls::RootCertStore;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::server::WebPkiClientVerifier;
use serde::Serialize;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;
use vantage_agent::{Fingerprint, Url};
use vantage_core::settings::ProbeSettings;
use vantage_core::wire::{
    self, EnrollRequest, EnrollResponse, ErrorBody, ErrorDetail, Heartbeat, HeartbeatReply, RenewRequest,
    RenewResponse, Report, Role, Work,
};

/// A certificate authority.
pub(crate) struct TestCa {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl TestCa {
    pub(crate) fn new(name: &str) -> Self {
        let mut params = CertificateParams::default();
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, name);
        params.distinguished_name = dn;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages =
            vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
        let now = time::OffsetDateTime::now_utc();
        params.not_before = now - time::Duration::days(1);
        params.not_after = now + time::Duration::days(3650);
        TestCa { issuer: CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap() }
    }

    pub(crate) fn der(&self) -> CertificateDer<'static> {
        self.issuer.der().clone()
    }

    pub(crate) fn pem(&self) -> String {
        self.issuer.pem()
    }

    pub(crate) fn fingerprint(&self) -> Fingerprint {
        Fingerprint::of(self.issuer.der())
    }

    /// A server certificate for `name` and its key.
    pub(crate) fn server_cert(&self, name: &str) -> (CertificateDer<'static>, PrivateKeyDer<'static>) {
        let mut params = CertificateParams::new(vec![name.to_owned()]).unwrap();
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let now = time::OffsetDateTime::now_utc();
        params.not_before = now - time::Duration::hours(1);
        params.not_after = now + time::Duration::days(365);
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        (cert.der().clone(), PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())))
    }

    /// A client certificate (`CN=<id>`, client auth only) for the CSR's key, valid from
    /// `now - age` for `life`.
    pub(crate) fn sign_csr(&self, csr_pem: &str, id: i64, age: Duration, life: Duration) -> String {
        let csr = CertificateSigningRequestParams::from_pem(csr_pem).unwrap();
        let mut params = CertificateParams::default();
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, id.to_string());
        params.distinguished_name = dn;
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        let now = time::OffsetDateTime::now_utc();
        params.not_before = now - age;
        params.not_after = params.not_before + life;
        let signed = CertificateSigningRequestParams { params, public_key: csr.public_key }
            .signed_by(&self.issuer)
            .unwrap();
        signed.pem()
    }
}

/// One HTTP request the server received.
#[derive(Debug, Clone)]
pub(crate) struct Seen {
    pub method: Method,
    pub path: String,
    /// Fingerprint of the client certificate of the connection, when it showed one.
    pub client: Option<Fingerprint>,
    pub at: std::time::Instant,
}

/// What the server answers; tests change it while agents run.
pub(crate) struct Script {
    /// The one token that enrolls (single use).
    pub token: Option<String>,
    pub role: Role,
    pub id: i64,
    /// Client certificates issued: valid from `now - age` for `life`.
    pub cert_age: Duration,
    pub cert_life: Duration,
    pub work: Work,
    pub reply: HeartbeatReply,
    /// Every request needing a client certificate gets this error instead.
    pub refuse: Option<(u16, String)>,
}

/// Everything the server saw.
#[derive(Default)]
pub(crate) struct Log {
    pub connections: AtomicU64,
    pub requests: Mutex<Vec<Seen>>,
    pub reports: Mutex<Vec<(String, Report)>>,
    pub heartbeats: Mutex<Vec<Heartbeat>>,
    pub enroll_requests: Mutex<Vec<EnrollRequest>>,
}

pub(crate) struct ChannelServer {
    pub addr: SocketAddr,
    pub ca: Arc<TestCa>,
    pub script: Arc<Mutex<Script>>,
    pub log: Arc<Log>,
    task: JoinHandle<()>,
}

impl Drop for ChannelServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Work with the default settings and no targets.
pub(crate) fn empty_work(id: i64) -> Work {
    Work {
        id,
        settings: ProbeSettings::default(),
        checks: Vec::new(),
        targets: Vec::new(),
        endpoints: Vec::new(),
        check_now: false,
        renew_in_s: 86_400,
        phase_ms: None,
        fetch: vantage_core::fetch::FetchPolicy::any_address(),
    }
}

impl ChannelServer {
    /// A server with its own CA, presenting `[leaf for agent.vantage.invalid, CA]`.
    pub(crate) async fn start(role: Role, token: &str) -> ChannelServer {
        let ca = Arc::new(TestCa::new("Vantage test channel CA"));
        let (leaf, key) = ca.server_cert(wire::SERVER_NAME);
        let chain = vec![leaf, ca.der()];
        ChannelServer::start_with(ca, chain, key, role, token).await
    }

    /// A server presenting `chain` (leaf first) and trusting client certificates of `ca`.
    pub(crate) async fn start_with(
        ca: Arc<TestCa>,
        chain: Vec<CertificateDer<'static>>,
        key: PrivateKeyDer<'static>,
        role: Role,
        token: &str,
    ) -> ChannelServer {
        vantage_probe::install_crypto_provider();
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let mut roots = RootCertStore::empty();
        roots.add(ca.der()).unwrap();
        let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
            .allow_unauthenticated()
            .build()
            .unwrap();
        let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_client_cert_verifier(verifier)
            .with_single_cert(chain, key)
            .unwrap();
        cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
        let acceptor = TlsAcceptor::from(Arc::new(cfg));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let script = Arc::new(Mutex::new(Script {
            token: Some(token.to_owned()),
            role,
            id: 42,
            cert_age: Duration::from_secs(3600),
            cert_life: Duration::from_secs(30 * 86_400),
            work: empty_work(42),
            reply: HeartbeatReply { also_probes: false, renew_in_s: 86_400 },
            refuse: None,
        }));
        let log = Arc::new(Log::default());
        let task = tokio::spawn(accept_loop(listener, acceptor, ca.clone(), script.clone(), log.clone()));
        ChannelServer { addr, ca, script, log, task }
    }

    /// `https://127.0.0.1:PORT`: an address, not the channel's name, as agents behind NAT see it.
    pub(crate) fn url(&self) -> Url {
        Url::parse(&format!("https://{}", self.addr)).unwrap()
    }

    pub(crate) fn requests(&self) -> Vec<Seen> {
        self.log.requests.lock().unwrap().clone()
    }

    pub(crate) fn requests_to(&self, path: &str) -> Vec<Seen> {
        self.requests().into_iter().filter(|s| s.path == path).collect()
    }

    pub(crate) fn connections(&self) -> u64 {
        self.log.connections.load(Ordering::SeqCst)
    }

    pub(crate) fn script(&self) -> std::sync::MutexGuard<'_, Script> {
        self.script.lock().unwrap()
    }
}

async fn accept_loop(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    ca: Arc<TestCa>,
    script: Arc<Mutex<Script>>,
    log: Arc<Log>,
) {
    loop {
        let Ok((tcp, _)) = listener.accept().await else { continue };
        log.connections.fetch_add(1, Ordering::SeqCst);
        let (acceptor, ca, script, log) = (acceptor.clone(), ca.clone(), script.clone(), log.clone());
        tokio::spawn(async move {
            // A refused handshake is what some tests want: nothing more happens.
            let Ok(tls) = acceptor.accept(tcp).await else { return };
            let client =
                tls.get_ref().1.peer_certificates().and_then(|c| c.first()).map(|c| Fingerprint::of(c));
            let service = service_fn(move |req| {
                let (ca, script, log) = (ca.clone(), script.clone(), log.clone());
                async move { Ok::<_, Infallible>(handle(req, client, &ca, &script, &log).await) }
            });
            let _ =
                hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(tls), service).await;
        });
    }
}

fn json<T: Serialize>(status: StatusCode, body: &T) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(serde_json::to_vec(body).unwrap())))
        .unwrap()
}

fn error(status: u16, field: Option<&str>, reason: &str) -> Response<Full<Bytes>> {
    let body = ErrorBody {
        error: ErrorDetail { status, field: field.map(str::to_owned), reason: reason.to_owned() },
    };
    json(StatusCode::from_u16(status).unwrap(), &body)
}

async fn handle(
    req: Request<Incoming>,
    client: Option<Fingerprint>,
    ca: &TestCa,
    script: &Mutex<Script>,
    log: &Log,
) -> Response<Full<Bytes>> {
    let (method, path) = (req.method().clone(), req.uri().path().to_owned());
    log.requests.lock().unwrap().push(Seen {
        method: method.clone(),
        path: path.clone(),
        client,
        at: std::time::Instant::now(),
    });
    let body = req.into_body().collect().await.unwrap().to_bytes();
    if path == wire::ENROLL && method == Method::POST {
        let Ok(enroll) = serde_json::from_slice::<EnrollRequest>(&body) else {
            return error(400, None, "not an enrollment request");
        };
        log.enroll_requests.lock().unwrap().push(enroll.clone());
        let mut s = script.lock().unwrap();
        if s.token.as_deref() != Some(enroll.token.as_str()) {
            return error(401, Some("token"), "unknown, expired or used token");
        }
        s.token = None;
        let certificate_pem = ca.sign_csr(&enroll.csr_pem, s.id, s.cert_age, s.cert_life);
        let answer =
            EnrollResponse { id: s.id, role: s.role, name: "sg-1".into(), certificate_pem, ca_pem: ca.pem() };
        return json(StatusCode::OK, &answer);
    }
    if client.is_none() {
        return error(401, None, "a client certificate is required");
    }
    let s = script.lock().unwrap();
    if let Some((status, reason)) = &s.refuse {
        return error(*status, None, reason);
    }
    match (method, path.as_str()) {
        (Method::POST, wire::RENEW) => {
            let renew: RenewRequest = serde_json::from_slice(&body).unwrap();
            let certificate_pem = ca.sign_csr(&renew.csr_pem, s.id, s.cert_age, s.cert_life);
            json(StatusCode::OK, &RenewResponse { certificate_pem })
        }
        (Method::GET, wire::PROBER_WORK | wire::NODE_WORK) => json(StatusCode::OK, &s.work),
        (Method::POST, wire::PROBER_REPORT | wire::NODE_REPORT) => {
            let report: Report = serde_json::from_slice(&body).unwrap();
            log.reports.lock().unwrap().push((path.clone(), report));
            Response::builder().status(StatusCode::NO_CONTENT).body(Full::new(Bytes::new())).unwrap()
        }
        (Method::POST, wire::NODE_HEARTBEAT) => {
            let hb: Heartbeat = serde_json::from_slice(&body).unwrap();
            log.heartbeats.lock().unwrap().push(hb);
            json(StatusCode::OK, &s.reply)
        }
        _ => error(404, None, "no such endpoint"),
    }
}

/// Waits until `cond` holds, at most `secs` seconds.
pub(crate) async fn eventually(secs: u64, what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    while !cond() {
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
