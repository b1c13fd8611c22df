//! Enrollment (§4): the first start turns a single-use token into a client certificate for a
//! key made here; later starts reuse the saved identity and ignore the token.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use reqwest::Url;
use vantage_core::wire::{self, EnrollRequest, EnrollResponse, Role};

use crate::cert::{CertificateInfo, first_cert, new_key};
use crate::client::{ChannelClient, check_server_url, decode, endpoint, exchange, http_client, now};
use crate::error::{Error, Result};
use crate::fingerprint::Fingerprint;
use crate::state::{Identity, StateDir};
use crate::tls::{self, MismatchSlot};

/// Where the channel is and how to join it.
#[derive(Clone, Default)]
pub struct ChannelOptions {
    /// The channel URL (`https://host:8443`). Needed to enroll; later starts use the saved one
    /// unless this is given.
    pub server: Option<Url>,
    /// Single-use enrollment token (`vtp_…` for a prober, `vtn_…` for a node). Needed to
    /// enroll; ignored once enrolled.
    pub token: Option<String>,
    /// SHA-256 of the channel CA certificate. Needed to enroll.
    pub ca_sha256: Option<Fingerprint>,
    /// The state directory.
    pub state_dir: PathBuf,
    /// The host name shown in lists; default: this host's name.
    pub hostname: Option<String>,
}

impl fmt::Debug for ChannelOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The token is a credential: never in logs.
        f.debug_struct("ChannelOptions")
            .field("server", &self.server.as_ref().map(Url::as_str))
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("ca_sha256", &self.ca_sha256)
            .field("state_dir", &self.state_dir)
            .field("hostname", &self.hostname)
            .finish()
    }
}

impl ChannelOptions {
    /// Options for the state directory `state_dir`, nothing else set.
    pub fn new(state_dir: impl Into<PathBuf>) -> Self {
        ChannelOptions { state_dir: state_dir.into(), ..Default::default() }
    }

    fn hostname(&self) -> String {
        self.hostname.clone().unwrap_or_else(crate::host::hostname)
    }
}

fn token_prefix(role: Role) -> &'static str {
    match role {
        Role::Prober => "vtp_",
        Role::Node => "vtn_",
    }
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::Prober => "prober",
        Role::Node => "node",
    }
}

/// Enrolls as `role`: makes a key and a CSR, sends the token over TLS pinned to the CA
/// fingerprint, and saves key, certificate, CA and identity in the state directory.
///
/// A server whose chain lacks the pinned CA gets no request at all:
/// [`Error::FingerprintMismatch`].
pub async fn enroll(opts: &ChannelOptions, role: Role) -> Result<Identity> {
    let server = opts.server.as_ref().ok_or_else(|| {
        Error::config("--server", "required for the first start (enrollment): the agent channel URL, like https://vantage.example.net:8443")
    })?;
    check_server_url(server)?;
    let prefix = token_prefix(role);
    let token = opts.token.as_deref().map(str::trim).filter(|t| !t.is_empty()).ok_or_else(|| {
        Error::config(
            "--token",
            format!("required for the first start (enrollment): a {prefix}… token from the control plane"),
        )
    })?;
    if !token.starts_with(prefix) {
        return Err(Error::config(
            "--token",
            format!(
                "a {} enrolls with a {prefix}… token (vtp_ tokens are for `vantage probe`, vtn_ for `vantage agent`)",
                role_name(role)
            ),
        ));
    }
    let pin = opts.ca_sha256.ok_or_else(|| {
        Error::config(
            "--ca-sha256",
            "required for the first start (enrollment): the channel CA's SHA-256, shown with the token",
        )
    })?;
    let hostname = opts.hostname();
    let new = new_key(&hostname)?;

    let mismatch = MismatchSlot::default();
    let http = http_client(tls::enroll_config(pin, mismatch.clone())?)?;
    let url = endpoint(server, wire::ENROLL)?;
    let request = EnrollRequest {
        token: token.to_owned(),
        csr_pem: new.csr_pem.clone(),
        hostname,
        version: crate::VERSION.to_owned(),
    };
    let sent = exchange(&url, http.post(url.clone()).json(&request)).await;
    if let Some(m) = mismatch.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take() {
        return Err(Error::FingerprintMismatch { actual: m.actual, expected: m.expected });
    }
    let answer: EnrollResponse = decode(&url, &sent?)?;

    let bad = |reason: String| Error::Protocol { url: url.to_string(), reason };
    if answer.role != role {
        return Err(bad(format!(
            "the server enrolled this agent as a {} but it runs as a {}",
            role_name(answer.role),
            role_name(role)
        )));
    }
    let ca = first_cert(&answer.ca_pem).map_err(|r| bad(format!("ca_pem: {r}")))?;
    if Fingerprint::of(&ca) != pin {
        return Err(bad(format!("ca_pem is not the pinned CA (its SHA-256 is {})", Fingerprint::of(&ca))));
    }
    let ca_info = CertificateInfo::from_der(&ca).map_err(|r| bad(format!("ca_pem: {r}")))?;
    let cert = first_cert(&answer.certificate_pem).map_err(|r| bad(format!("certificate_pem: {r}")))?;
    let info = CertificateInfo::from_der(&cert).map_err(|r| bad(format!("certificate_pem: {r}")))?;
    if !info.matches_key(&new.key) {
        return Err(bad("certificate_pem is not for the key sent".into()));
    }
    if !info.issued_by(&ca_info) {
        return Err(bad("certificate_pem is not issued by the channel CA".into()));
    }
    let identity = Identity { id: answer.id, role, name: answer.name, server: server.to_string() };
    let state = StateDir::new(&opts.state_dir);
    state.save_enrollment(&new.key.serialize_pem(), &answer.certificate_pem, &answer.ca_pem, &identity)?;
    tracing::info!(
        id = identity.id,
        name = %identity.name,
        state_dir = %state.path().display(),
        not_after = %info.not_after,
        "enrolled as {}",
        role_name(role)
    );
    Ok(identity)
}

/// The channel client of `role`: the saved identity when the state directory has one (the
/// token, if given, is ignored), else a new enrollment.
pub async fn connect(opts: &ChannelOptions, role: Role) -> Result<ChannelClient> {
    let state = StateDir::new(&opts.state_dir);
    if !state.is_enrolled()? {
        enroll(opts, role).await?;
    } else if opts.token.is_some() {
        tracing::info!(
            state_dir = %state.path().display(),
            "already enrolled: the enrollment token is ignored (delete cert.pem to enroll again)"
        );
    }
    let client = ChannelClient::open(state, opts.server.as_ref())?;
    let identity = client.identity();
    if identity.role != role {
        return Err(Error::config(
            "--state-dir",
            format!(
                "{} holds the identity of {} {:?}, not of a {}",
                client.state().path().display(),
                role_name(identity.role),
                identity.name,
                role_name(role)
            ),
        ));
    }
    if let Some(pin) = opts.ca_sha256.filter(|pin| *pin != client.ca().fingerprint) {
        tracing::warn!(
            given = %pin,
            saved = %client.ca().fingerprint,
            "--ca-sha256 differs from the saved channel CA; the saved CA is trusted"
        );
    }
    let cert = client.certificate();
    if cert.expired(now()) {
        tracing::warn!(
            not_after = %cert.not_after,
            "the client certificate has expired; the server will refuse it. Delete cert.pem in {} and enroll again with a new token",
            client.state().path().display()
        );
    }
    tracing::info!(id = identity.id, name = %identity.name, server = %client.server(), "agent channel ready");
    Ok(client)
}

/// [`connect`], trying again while the failure may pass by itself (server unreachable or
/// failing), with back-off from 1 s to 60 s. Refusals and bad options end it at once.
pub async fn connect_with_retry(opts: &ChannelOptions, role: Role) -> Result<Arc<ChannelClient>> {
    let mut delay = Duration::from_secs(1);
    loop {
        match connect(opts, role).await {
            Ok(client) => return Ok(Arc::new(client)),
            Err(e) if e.is_transient() => {
                tracing::warn!(error = %e, retry_in_s = delay.as_secs(), "cannot join the agent channel yet");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(60));
            }
            Err(e) => return Err(e),
        }
    }
}
