//! [`ChannelClient`]: JSON over HTTPS with mutual TLS to the control plane, as an enrolled
//! prober or node, and certificate renewal (new key, `POST` [`wire::RENEW`], swap on disk and
//! in the client).

use std::error::Error as StdError;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use arc_swap::ArcSwap;
use bytes::Bytes;
use rcgen::KeyPair;
use reqwest::{StatusCode, Url};
use rustls::ClientConfig;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use serde::Serialize;
use serde::de::DeserializeOwned;
use vantage_core::Timestamp;
use vantage_core::wire::{self, ErrorBody, RenewRequest, RenewResponse};

use crate::cert::{CertificateInfo, first_cert, key_from_pem, new_key};
use crate::error::{Error, Result};
use crate::state::{CA_FILE, CERT_FILE, Identity, KEY_FILE, StateDir};
use crate::tls;

/// How long one exchange may take. Reports of 10,000 results are a few megabytes.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// A server asking for renewal (`renew_in_s` = 0) again this soon after one is not heeded,
/// so a server that keeps asking cannot make the agent renew every round.
const MIN_RENEWAL_GAP: Duration = Duration::from_secs(300);

/// The current time as a [`Timestamp`].
pub(crate) fn now() -> Timestamp {
    Timestamp::from_system(SystemTime::now())
}

/// An HTTP client over a prepared TLS configuration. Redirects are not followed: the channel
/// never redirects, and following one could carry a token elsewhere.
pub(crate) fn http_client(tls: ClientConfig) -> Result<reqwest::Client> {
    reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(CONNECT_TIMEOUT)
        .timeout(REQUEST_TIMEOUT)
        .user_agent(concat!("vantage-agent/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| Error::Certificate(format!("HTTP client: {e}")))
}

/// Checks that a channel URL can be used: HTTPS with a host.
pub(crate) fn check_server_url(url: &Url) -> Result<()> {
    if url.scheme() != "https" || url.host_str().is_none() {
        return Err(Error::config("--server", format!("{url}: the agent channel URL is https://HOST:PORT")));
    }
    Ok(())
}

/// `path` on the server.
pub(crate) fn endpoint(base: &Url, path: &str) -> Result<Url> {
    base.join(path).map_err(|e| Error::config("--server", format!("{base}: {e}")))
}

/// Sends a request; the body of a 2xx answer, else the server's refusal as an error.
pub(crate) async fn exchange(url: &Url, request: reqwest::RequestBuilder) -> Result<Bytes> {
    let response = request.send().await.map_err(|e| transport(url, &e))?;
    let status = response.status();
    let body = response.bytes().await.map_err(|e| transport(url, &e))?;
    if status.is_success() { Ok(body) } else { Err(refusal(status, &body)) }
}

/// Decodes a JSON answer.
pub(crate) fn decode<T: DeserializeOwned>(url: &Url, body: &[u8]) -> Result<T> {
    serde_json::from_slice(body)
        .map_err(|e| Error::Protocol { url: url.to_string(), reason: format!("not the expected JSON: {e}") })
}

/// The error of a non-2xx answer: the channel's JSON error body when there is one.
fn refusal(status: StatusCode, body: &[u8]) -> Error {
    if let Ok(ErrorBody { error }) = serde_json::from_slice::<ErrorBody>(body) {
        return Error::Refused { status: status.as_u16(), reason: error.reason, field: error.field };
    }
    // Not the channel's format (a proxy, say): the status text and the start of the body.
    let text = String::from_utf8_lossy(body);
    let excerpt: String = text.trim().chars().take(200).collect();
    let mut reason = status.canonical_reason().unwrap_or("error").to_owned();
    if !excerpt.is_empty() {
        reason = format!("{reason}: {excerpt}");
    }
    Error::Refused { status: status.as_u16(), reason, field: None }
}

/// A transport failure with its whole cause chain, told apart as TLS or not.
pub(crate) fn transport(url: &Url, e: &reqwest::Error) -> Error {
    let mut parts: Vec<String> = Vec::new();
    let mut is_tls = false;
    let mut cur: Option<&(dyn StdError + 'static)> = e.source();
    while let Some(err) = cur {
        is_tls |= err.downcast_ref::<rustls::Error>().is_some();
        let text = err.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        // `io::Error::source` skips the error it wraps; the TLS error is often that one.
        cur = match err.downcast_ref::<std::io::Error>() {
            Some(io) => io.get_ref().map(|inner| inner as &(dyn StdError + 'static)),
            None => err.source(),
        };
    }
    let reason = if parts.is_empty() { e.to_string() } else { parts.join(": ") };
    let url = url.to_string();
    if is_tls { Error::Tls { url, reason } } else { Error::Unreachable { url, reason } }
}

/// One mutual-TLS client and the certificate it presents.
#[derive(Debug)]
struct Session {
    http: reqwest::Client,
    cert: CertificateInfo,
}

impl Session {
    fn new(
        ca: &CertificateDer<'static>,
        cert: CertificateDer<'static>,
        key: &KeyPair,
        info: CertificateInfo,
    ) -> Result<Self> {
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let http = http_client(tls::channel_config(ca.clone(), cert, key)?)?;
        Ok(Session { http, cert: info })
    }
}

/// The agent channel as an enrolled prober or node: the saved identity, its certificate for
/// mutual TLS, and the saved CA as the only root.
///
/// Cheap to share behind an [`Arc`]; renewal swaps the certificate for every user at once.
#[derive(Debug)]
pub struct ChannelClient {
    base: Url,
    state: StateDir,
    identity: Identity,
    ca: CertificateDer<'static>,
    ca_info: CertificateInfo,
    session: ArcSwap<Session>,
    /// Held while renewing; remembers when the last renewal happened.
    renewing: tokio::sync::Mutex<Option<Instant>>,
}

impl ChannelClient {
    /// Opens the identity saved in `state`. `server` replaces the saved channel URL (and is
    /// saved) when given.
    pub fn open(state: StateDir, server: Option<&Url>) -> Result<ChannelClient> {
        let saved = state.load()?;
        let key = key_from_pem(&saved.key_pem).map_err(|r| Error::invalid(state.file(KEY_FILE), r))?;
        let cert = first_cert(&saved.cert_pem).map_err(|r| Error::invalid(state.file(CERT_FILE), r))?;
        let info = CertificateInfo::from_der(&cert).map_err(|r| Error::invalid(state.file(CERT_FILE), r))?;
        if !info.matches_key(&key) {
            return Err(Error::invalid(
                state.file(CERT_FILE),
                format!("the certificate is not for the key in {KEY_FILE}"),
            ));
        }
        let ca = first_cert(&saved.ca_pem).map_err(|r| Error::invalid(state.file(CA_FILE), r))?;
        let ca_info = CertificateInfo::from_der(&ca).map_err(|r| Error::invalid(state.file(CA_FILE), r))?;
        let mut identity = saved.identity;
        let saved_url = Url::parse(&identity.server).ok();
        let base = match (server, saved_url) {
            (Some(given), saved) => {
                if saved.as_ref() != Some(given) {
                    tracing::info!(from = %identity.server, to = %given, "the channel URL changed; saving the new one");
                    identity.server = given.to_string();
                    state.save_identity(&identity)?;
                }
                given.clone()
            }
            (None, Some(saved)) => saved,
            (None, None) => {
                return Err(Error::invalid(
                    state.file(crate::state::IDENTITY_FILE),
                    format!("server {:?} is not a URL (give --server)", identity.server),
                ));
            }
        };
        check_server_url(&base)?;
        let session = Session::new(&ca, cert, &key, info)?;
        Ok(ChannelClient {
            base,
            state,
            identity,
            ca,
            ca_info,
            session: ArcSwap::from_pointee(session),
            renewing: tokio::sync::Mutex::new(None),
        })
    }

    /// Who this agent is.
    pub fn identity(&self) -> &Identity {
        &self.identity
    }

    /// The channel URL.
    pub fn server(&self) -> &Url {
        &self.base
    }

    /// The state directory.
    pub fn state(&self) -> &StateDir {
        &self.state
    }

    /// The client certificate presented now.
    pub fn certificate(&self) -> CertificateInfo {
        self.session.load().cert.clone()
    }

    /// The channel CA.
    pub fn ca(&self) -> &CertificateInfo {
        &self.ca_info
    }

    /// `GET path` → JSON.
    pub async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T> {
        let url = endpoint(&self.base, path)?;
        let http = self.session.load().http.clone();
        let body = exchange(&url, http.get(url.clone())).await?;
        decode(&url, &body)
    }

    /// `POST path` with a JSON body → JSON.
    pub async fn post<B: Serialize + ?Sized, T: DeserializeOwned>(&self, path: &str, body: &B) -> Result<T> {
        let url = endpoint(&self.base, path)?;
        let http = self.session.load().http.clone();
        let answer = exchange(&url, http.post(url.clone()).json(body)).await?;
        decode(&url, &answer)
    }

    /// `POST path` with a JSON body, for endpoints that answer 204 (any 2xx is accepted and
    /// its body ignored).
    pub async fn post_no_content<B: Serialize + ?Sized>(&self, path: &str, body: &B) -> Result<()> {
        let url = endpoint(&self.base, path)?;
        let http = self.session.load().http.clone();
        exchange(&url, http.post(url.clone()).json(body)).await.map(drop)
    }

    /// Renews now: a new key made here, its CSR to [`wire::RENEW`], then key and certificate
    /// replaced together on disk and in this client. On any failure the current pair stays.
    pub async fn renew(&self) -> Result<CertificateInfo> {
        let mut last = self.renewing.lock().await;
        self.renew_locked(&mut last).await
    }

    /// Renews when less than a third of the certificate's life remains, or when the server
    /// says so (`server_renew_in_s` = 0, from [`wire::Work`] or [`wire::HeartbeatReply`]).
    /// Returns the new certificate when it renewed.
    pub async fn renew_if_due(&self, server_renew_in_s: Option<u64>) -> Result<Option<CertificateInfo>> {
        let before = self.certificate();
        let locally_due = before.renewal_due(now());
        if !locally_due && server_renew_in_s != Some(0) {
            return Ok(None);
        }
        let mut last = self.renewing.lock().await;
        if self.certificate().fingerprint != before.fingerprint {
            // Renewed by another task while this one waited.
            return Ok(None);
        }
        if !locally_due && last.is_some_and(|t| t.elapsed() < MIN_RENEWAL_GAP) {
            return Ok(None);
        }
        self.renew_locked(&mut last).await.map(Some)
    }

    async fn renew_locked(&self, last: &mut Option<Instant>) -> Result<CertificateInfo> {
        let new = new_key(&self.identity.name)?;
        let answer: RenewResponse =
            self.post(wire::RENEW, &RenewRequest { csr_pem: new.csr_pem.clone() }).await?;
        let url = endpoint(&self.base, wire::RENEW)?;
        let bad = |reason: String| Error::Protocol { url: url.to_string(), reason };
        let der = first_cert(&answer.certificate_pem).map_err(|r| bad(format!("certificate_pem: {r}")))?;
        let info = CertificateInfo::from_der(&der).map_err(|r| bad(format!("certificate_pem: {r}")))?;
        if !info.matches_key(&new.key) {
            return Err(bad("the renewed certificate is not for the key sent".into()));
        }
        if !info.issued_by(&self.ca_info) {
            return Err(bad("the renewed certificate is not issued by the channel CA".into()));
        }
        let session = Session::new(&self.ca, der, &new.key, info.clone())?;
        self.state.save_renewal(&new.key.serialize_pem(), &answer.certificate_pem)?;
        self.session.store(Arc::new(session));
        *last = Some(Instant::now());
        tracing::info!(
            fingerprint = %info.fingerprint,
            not_after = %info.not_after,
            "client certificate renewed"
        );
        Ok(info)
    }
}
