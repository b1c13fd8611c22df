//! Keys, certificate requests and what the agent reads from certificates (validity, public
//! key, fingerprint). Keys are made here and never leave the host: only the CSR's public key
//! goes to the server.

use rcgen::{CertificateParams, DistinguishedName, DnType, KeyPair, PublicKeyData};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use vantage_core::Timestamp;

use crate::error::{Error, Result};
use crate::fingerprint::Fingerprint;

/// A new key and the PEM certificate request for it.
pub(crate) struct NewKey {
    pub(crate) key: KeyPair,
    pub(crate) csr_pem: String,
}

impl std::fmt::Debug for NewKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The private key stays out of logs.
        f.debug_struct("NewKey").finish_non_exhaustive()
    }
}

/// Makes an ECDSA P-256 key and a CSR for it. The server takes only the public key from the
/// request (it names the certificate itself), so the subject is informative.
pub(crate) fn new_key(hostname: &str) -> Result<NewKey> {
    let key = KeyPair::generate().map_err(|e| Error::Certificate(format!("cannot make a key: {e}")))?;
    let mut params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, hostname);
    params.distinguished_name = dn;
    let csr = params
        .serialize_request(&key)
        .map_err(|e| Error::Certificate(format!("cannot make a certificate request: {e}")))?;
    let csr_pem =
        csr.pem().map_err(|e| Error::Certificate(format!("cannot encode the certificate request: {e}")))?;
    Ok(NewKey { key, csr_pem })
}

/// What the agent needs to know about a certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertificateInfo {
    /// SHA-256 of the DER.
    pub fingerprint: Fingerprint,
    /// The subject's common name (for a channel client certificate: the prober or node id).
    pub common_name: Option<String>,
    /// Start of validity.
    pub not_before: Timestamp,
    /// End of validity.
    pub not_after: Timestamp,
    /// The subject public key (the BIT STRING of the SubjectPublicKeyInfo).
    public_key: Vec<u8>,
    /// Subject and issuer names, DER.
    subject: Vec<u8>,
    issuer: Vec<u8>,
}

impl CertificateInfo {
    /// Reads a DER certificate.
    pub fn from_der(der: &[u8]) -> std::result::Result<Self, String> {
        let (_, cert) =
            x509_parser::parse_x509_certificate(der).map_err(|e| format!("not an X.509 certificate: {e}"))?;
        let validity = cert.validity();
        let common_name =
            cert.subject().iter_common_name().next().and_then(|cn| cn.as_str().ok()).map(str::to_owned);
        Ok(CertificateInfo {
            fingerprint: Fingerprint::of(der),
            common_name,
            not_before: Timestamp::from_secs(validity.not_before.timestamp()),
            not_after: Timestamp::from_secs(validity.not_after.timestamp()),
            public_key: cert.public_key().subject_public_key.data.to_vec(),
            subject: cert.subject().as_raw().to_vec(),
            issuer: cert.issuer().as_raw().to_vec(),
        })
    }

    /// When renewal is due: once less than a third of the certificate's life remains (§4).
    pub fn renew_at(&self) -> Timestamp {
        let life = self.not_after.millis_since(self.not_before).max(0);
        self.not_after.plus_millis(-(life / 3))
    }

    /// True when less than a third of the certificate's life remains at `now`.
    pub fn renewal_due(&self, now: Timestamp) -> bool {
        now >= self.renew_at()
    }

    /// True when the certificate has expired at `now`.
    pub fn expired(&self, now: Timestamp) -> bool {
        now > self.not_after
    }

    /// True when `ca` names itself as this certificate's issuer. (The signature is checked by
    /// the server that accepts the certificate; this catches an answer mixed up with another
    /// CA's before it replaces a working certificate.)
    pub(crate) fn issued_by(&self, ca: &CertificateInfo) -> bool {
        self.issuer == ca.subject
    }

    /// True when the certificate is for `key`'s public key.
    pub(crate) fn matches_key(&self, key: &KeyPair) -> bool {
        self.public_key == key.der_bytes()
    }
}

/// The one certificate of a PEM text (the first, when there are several).
pub(crate) fn first_cert(pem: &str) -> std::result::Result<CertificateDer<'static>, String> {
    CertificateDer::pem_slice_iter(pem.as_bytes())
        .next()
        .ok_or_else(|| "no PEM certificate".to_owned())?
        .map_err(|e| format!("not a PEM certificate: {e}"))
}

/// A key from PEM (PKCS #8, as [`new_key`] writes it).
pub(crate) fn key_from_pem(pem: &str) -> std::result::Result<KeyPair, String> {
    KeyPair::from_pem(pem).map_err(|e| format!("not a usable private key: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renewal_is_due_in_the_last_third() {
        let info = CertificateInfo {
            fingerprint: Fingerprint::of(b"x"),
            common_name: None,
            not_before: Timestamp::from_secs(0),
            not_after: Timestamp::from_secs(30 * 86_400),
            public_key: Vec::new(),
            subject: Vec::new(),
            issuer: Vec::new(),
        };
        assert_eq!(info.renew_at(), Timestamp::from_secs(20 * 86_400));
        assert!(!info.renewal_due(Timestamp::from_secs(20 * 86_400 - 1)));
        assert!(info.renewal_due(Timestamp::from_secs(20 * 86_400)));
        assert!(!info.expired(Timestamp::from_secs(30 * 86_400)));
        assert!(info.expired(Timestamp::from_secs(30 * 86_400 + 1)));
    }

    #[test]
    fn csr_carries_the_key() {
        let k = new_key("host-1").unwrap();
        let parsed = rcgen::CertificateSigningRequestParams::from_pem(&k.csr_pem).unwrap();
        assert_eq!(parsed.public_key.der_bytes(), k.key.der_bytes());
        assert!(format!("{k:?}").starts_with("NewKey"));
    }
}
