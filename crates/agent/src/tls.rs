//! TLS of the agent channel: how the agent decides it talks to its own control plane.
//!
//! - At enrollment the agent trusts nothing yet but the CA fingerprint the operator pinned.
//!   [`PinnedCaVerifier`] looks for a certificate with that fingerprint in the chain the
//!   server presents and refuses the handshake when there is none, so the token is never sent
//!   to an impostor; then it verifies the server's certificate against that CA.
//! - Afterwards the saved CA is the only root ([`channel_config`]), and the agent presents its
//!   client certificate.
//!
//! Either way the server's certificate is verified for [`wire::SERVER_NAME`], whatever host
//! the URL names: the channel may be reached by IP, through NAT, or under several names, and
//! its CA is private to it.

use std::sync::{Arc, Mutex};

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, OtherError, RootCertStore, SignatureScheme,
};
use vantage_core::wire;

use crate::error::{Error, Result};
use crate::fingerprint::Fingerprint;

/// The process's crypto provider (aws-lc-rs, installed once for the whole process).
pub(crate) fn provider() -> Arc<CryptoProvider> {
    vantage_probe::install_crypto_provider();
    CryptoProvider::get_default()
        .cloned()
        .unwrap_or_else(|| Arc::new(rustls::crypto::aws_lc_rs::default_provider()))
}

fn channel_name() -> Result<ServerName<'static>> {
    ServerName::try_from(wire::SERVER_NAME)
        .map_err(|e| Error::Certificate(format!("{}: {e}", wire::SERVER_NAME)))
}

/// The fingerprint the server's chain had instead of the pinned one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("CA fingerprint mismatch: the server's CA is {actual}, expected {expected}")]
pub(crate) struct Mismatch {
    pub(crate) actual: Fingerprint,
    pub(crate) expected: Fingerprint,
}

/// Where the enrollment verifier leaves a mismatch for the caller: rustls reports a
/// verifier's error to the peer and up through the HTTP client as text, and the caller wants
/// it as a value.
pub(crate) type MismatchSlot = Arc<Mutex<Option<Mismatch>>>;

/// The enrollment verifier: pinned CA fingerprint, then WebPKI verification for the channel's
/// name against that CA.
#[derive(Debug)]
pub(crate) struct PinnedCaVerifier {
    pin: Fingerprint,
    name: ServerName<'static>,
    provider: Arc<CryptoProvider>,
    mismatch: MismatchSlot,
}

impl ServerCertVerifier for PinnedCaVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let chain = || std::iter::once(end_entity).chain(intermediates);
        let Some(ca) = chain().find(|c| Fingerprint::of(c) == self.pin) else {
            // The chain ends with the issuer closest to the root: that is the CA to show.
            let last = intermediates.last().unwrap_or(end_entity);
            let m = Mismatch { actual: Fingerprint::of(last), expected: self.pin };
            *self.mismatch.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(m);
            return Err(rustls::Error::InvalidCertificate(CertificateError::Other(OtherError(Arc::new(m)))));
        };
        let mut roots = RootCertStore::empty();
        roots.add(ca.clone().into_owned())?;
        let verifier = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), self.provider.clone())
            .build()
            .map_err(|e| rustls::Error::General(format!("pinned CA: {e}")))?;
        verifier.verify_server_cert(end_entity, intermediates, &self.name, ocsp_response, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider.signature_verification_algorithms.supported_schemes()
    }
}

/// WebPKI verification against the saved CA, for the channel's name instead of the URL's host.
#[derive(Debug)]
struct ChannelVerifier {
    inner: Arc<WebPkiServerVerifier>,
    name: ServerName<'static>,
}

impl ServerCertVerifier for ChannelVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        self.inner.verify_server_cert(end_entity, intermediates, &self.name, ocsp_response, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

fn finish(mut cfg: ClientConfig) -> ClientConfig {
    // The channel speaks HTTP/1.1 (the HTTP client is built without HTTP/2).
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    cfg
}

/// The client configuration of an enrollment: no client certificate, the pinned CA.
pub(crate) fn enroll_config(pin: Fingerprint, mismatch: MismatchSlot) -> Result<ClientConfig> {
    let provider = provider();
    let verifier = PinnedCaVerifier { pin, name: channel_name()?, provider: provider.clone(), mismatch };
    let cfg = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Certificate(format!("TLS set-up: {e}")))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth();
    Ok(finish(cfg))
}

/// The client configuration of an enrolled agent: the saved CA as the only root, the client
/// certificate and its key.
pub(crate) fn channel_config(
    ca: CertificateDer<'static>,
    cert: CertificateDer<'static>,
    key: PrivateKeyDer<'static>,
) -> Result<ClientConfig> {
    let provider = provider();
    let mut roots = RootCertStore::empty();
    roots.add(ca).map_err(|e| Error::Certificate(format!("the saved CA: {e}")))?;
    let inner = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|e| Error::Certificate(format!("the saved CA: {e}")))?;
    let verifier = ChannelVerifier { inner, name: channel_name()? };
    let cfg = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Certificate(format!("TLS set-up: {e}")))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_client_auth_cert(vec![cert], key)
        .map_err(|e| Error::Certificate(format!("the client certificate: {e}")))?;
    Ok(finish(cfg))
}
