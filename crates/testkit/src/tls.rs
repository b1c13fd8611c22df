//! A self-signed TLS identity for test servers, and the rustls server configuration over it.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use rustls::ServerConfig;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// A self-signed certificate and its key. Probers verify certificates only for checks that
/// ask; such a test trusts the certificate itself (as its own root, [`TlsIdentity::cert_pem`]),
/// and then the names matter.
#[derive(Debug, Clone)]
pub struct TlsIdentity {
    /// The certificate, DER.
    pub cert: CertificateDer<'static>,
    /// The certificate, PEM (for a trust store file such as `SSL_CERT_FILE`).
    pub cert_pem: String,
    /// When the certificate expires, seconds since the Unix epoch.
    pub not_after_s: i64,
    key: Arc<PrivatePkcs8KeyDer<'static>>,
}

impl TlsIdentity {
    /// A new key and a certificate for `names`, valid from a day ago for 30 days.
    pub fn self_signed(names: &[&str]) -> io::Result<Self> {
        let mut params =
            rcgen::CertificateParams::new(names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>())
                .map_err(io::Error::other)?;
        let now = time::OffsetDateTime::now_utc();
        params.not_before = now - Duration::from_secs(86_400);
        params.not_after = now + Duration::from_secs(30 * 86_400);
        let not_after_s = params.not_after.unix_timestamp();
        let key = rcgen::KeyPair::generate().map_err(io::Error::other)?;
        let cert = params.self_signed(&key).map_err(io::Error::other)?;
        Ok(TlsIdentity {
            cert: cert.der().clone(),
            cert_pem: cert.pem(),
            not_after_s,
            key: Arc::new(PrivatePkcs8KeyDer::from(key.serialize_der())),
        })
    }

    /// A rustls server configuration presenting this identity (HTTP/1.1 only).
    pub fn server_config(&self) -> io::Result<Arc<ServerConfig>> {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let mut cfg = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(io::Error::other)?
            .with_no_client_auth()
            .with_single_cert(vec![self.cert.clone()], PrivateKeyDer::Pkcs8(self.key.as_ref().clone_key()))
            .map_err(io::Error::other)?;
        cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Arc::new(cfg))
    }
}
