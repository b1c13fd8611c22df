//! TLS for `https` and HTTPS `hls` targets: SNI = the check's host, no session resumption so
//! that every attempt measures a full handshake. By default the certificate is accepted
//! whatever it is (a health probe asks "does the listener answer", and health endpoints often
//! have self-signed certificates); a check with `verify` has it verified against the host name
//! and the system's trusted roots (rustls-native-certs: the platform store, or the files
//! `SSL_CERT_FILE`/`SSL_CERT_DIR` name, as OpenSSL clients read them). Either way the
//! certificate's expiry is read after the handshake, for the result.

use std::net::IpAddr;
use std::sync::{Arc, OnceLock};

use rustls::client::Resumption;
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, ClientConnection, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio_rustls::TlsConnector;
use vantage_core::Timestamp;

/// Installs aws-lc-rs as the process's rustls crypto provider unless one is installed
/// already. Safe to call any number of times, from any thread.
pub fn install_crypto_provider() {
    if CryptoProvider::get_default().is_none() {
        // Losing a race with another installer is fine: a provider is in place either way.
        let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    }
}

/// The connector every attempt shares, verifying certificates or not (each built once, the
/// verifying one only when a check asks for it; a failure is kept and reported by each
/// attempt as a `tls` error).
pub(crate) fn connector(verify: bool) -> Result<TlsConnector, String> {
    static ANY: OnceLock<Result<Arc<ClientConfig>, String>> = OnceLock::new();
    static VERIFYING: OnceLock<Result<Arc<ClientConfig>, String>> = OnceLock::new();
    let cell = if verify { &VERIFYING } else { &ANY };
    cell.get_or_init(|| build_config(verify))
        .as_ref()
        .map(|c| TlsConnector::from(c.clone()))
        .map_err(Clone::clone)
}

fn build_config(verify: bool) -> Result<Arc<ClientConfig>, String> {
    install_crypto_provider();
    let provider = CryptoProvider::get_default()
        .cloned()
        .unwrap_or_else(|| Arc::new(rustls::crypto::aws_lc_rs::default_provider()));
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS configuration: {e}"))?;
    let builder = if verify {
        let verifier = WebPkiServerVerifier::builder_with_provider(Arc::new(system_roots()?), provider)
            .build()
            .map_err(|e| format!("TLS certificate verifier: {e}"))?;
        builder.with_webpki_verifier(verifier)
    } else {
        let verifier = AcceptAnyCertificate { algorithms: provider.signature_verification_algorithms };
        builder.dangerous().with_custom_certificate_verifier(Arc::new(verifier))
    };
    let mut cfg = builder.with_no_client_auth();
    cfg.resumption = Resumption::disabled();
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(cfg))
}

/// The system's trusted roots. Certificates of the store that do not parse are skipped (a
/// store often holds a few); no root at all makes every verifying attempt fail.
fn system_roots() -> Result<RootCertStore, String> {
    let found = rustls_native_certs::load_native_certs();
    let mut roots = RootCertStore::empty();
    let (added, _skipped) = roots.add_parsable_certificates(found.certs);
    if added == 0 {
        let why = found.errors.first().map(|e| format!(" ({e})")).unwrap_or_default();
        return Err(format!("no trusted root certificates to verify against{why}"));
    }
    Ok(roots)
}

/// When the certificate the peer showed expires (its `notAfter`), when it showed one that
/// parses.
pub(crate) fn not_after(conn: &ClientConnection) -> Option<Timestamp> {
    let der = conn.peer_certificates()?.first()?;
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    Some(Timestamp::from_secs(cert.validity().not_after.timestamp()))
}

/// The name to send as SNI: the host when it is a DNS name or an IP literal (rustls sends no
/// SNI for an IP), else the target's address.
pub(crate) fn server_name(host: &str, addr: IpAddr) -> ServerName<'static> {
    let host = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
    ServerName::try_from(host.to_owned()).unwrap_or(ServerName::IpAddress(addr.into()))
}

/// Accepts any certificate, but still checks the handshake signatures against it, so the
/// peer must hold the key of the certificate it shows.
#[derive(Debug)]
struct AcceptAnyCertificate {
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for AcceptAnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sni_is_the_host_name_or_no_sni_for_addresses() {
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        assert_eq!(
            server_name("health.vantage.invalid", ip),
            ServerName::try_from("health.vantage.invalid").unwrap()
        );
        assert!(matches!(
            server_name("[::1]", ip),
            ServerName::IpAddress(a) if IpAddr::from(a) == "::1".parse::<IpAddr>().unwrap()
        ));
        assert!(matches!(server_name("bad name!", ip), ServerName::IpAddress(_)));
    }

    #[test]
    fn provider_install_is_idempotent() {
        install_crypto_provider();
        install_crypto_provider();
        assert!(CryptoProvider::get_default().is_some());
        assert!(connector(false).is_ok());
    }
}
