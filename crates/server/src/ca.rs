//! The agent channel's internal CA: created on first start in the data directory, it signs
//! the channel's server certificate and the client certificates of probers and nodes.
//! Probers pin its SHA-256 fingerprint before they send a token.

use std::path::Path;
use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, CertificateSigningRequestParams, DistinguishedName, DnType,
    ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose, SerialNumber,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use time::OffsetDateTime;
use vantage_core::wire::{Role, SERVER_NAME};

use vantage_control::identity::CLIENT_CERT_DAYS;

use crate::auth::sha256_hex;

/// Why the CA could not be loaded or used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CaError {
    /// A CA file.
    #[error("{path}: {source}")]
    Io {
        path: String,
        /// Cause.
        source: std::io::Error,
    },
    /// Certificate work failed.
    #[error("certificate: {0}")]
    Cert(#[from] rcgen::Error),
    /// The TLS configuration could not be built.
    #[error("TLS: {0}")]
    Tls(String),
    /// The database that keeps a shared CA failed.
    #[error("CA in the database: {0}")]
    Store(String),
}

/// The loaded CA.
pub(crate) struct Ca {
    cert_pem: String,
    cert_der: CertificateDer<'static>,
    issuer: Issuer<'static, KeyPair>,
    /// SHA-256 of the CA certificate (DER), hex.
    pub fingerprint: String,
}

impl std::fmt::Debug for Ca {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ca").field("fingerprint", &self.fingerprint).finish_non_exhaustive()
    }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> CaError + '_ {
    move |source| CaError::Io { path: path.display().to_string(), source }
}

/// The server's clock (`support::now`) as certificates write it.
fn now() -> OffsetDateTime {
    let nanos = i128::from(crate::support::now().millis()) * 1_000_000;
    OffsetDateTime::from_unix_timestamp_nanos(nanos).unwrap_or(OffsetDateTime::UNIX_EPOCH)
}

fn random_serial() -> SerialNumber {
    let mut b = [0u8; 16];
    rand::RngCore::fill_bytes(&mut rand::rng(), &mut b);
    b[0] &= 0x7f;
    SerialNumber::from_slice(&b)
}

/// A CA as PEM text, for files or the database.
#[derive(serde::Serialize, serde::Deserialize)]
struct Pems {
    cert: String,
    key: String,
}

/// The state key the CA is kept under in a database that several servers share.
const STATE_KEY: &str = "ca";

impl Ca {
    /// Loads the CA from `dir`, creating it (10 years) when absent.
    pub(crate) fn load_or_create(dir: &Path) -> Result<Ca, CaError> {
        std::fs::create_dir_all(dir).map_err(io(dir))?;
        let cert_path = dir.join("ca.pem");
        let key_path = dir.join("ca.key");
        if !cert_path.exists() {
            let new = Ca::generate()?;
            crate::support::write_private(&key_path, &new.key).map_err(|e| CaError::Tls(e.to_string()))?;
            std::fs::write(&cert_path, &new.cert).map_err(io(&cert_path))?;
        }
        let cert = std::fs::read_to_string(&cert_path).map_err(io(&cert_path))?;
        let key = std::fs::read_to_string(&key_path).map_err(io(&key_path))?;
        Ca::from_pems(&Pems { cert, key }, &cert_path.display().to_string())
    }

    /// The CA of a database several servers share (PostgreSQL): every server signs with the
    /// same one, so an agent enrolled through one is known to all. The first server to start
    /// stores it — the CA of `dir` when it has one (a server moving to the shared database
    /// keeps its agents), else a new one; of several starting at once, one wins and all use
    /// it. Only the certificate is written to `dir` (`ca.pem`, for API clients to trust); the
    /// key stays in the database.
    pub(crate) async fn shared(store: &vantage_store::Store, dir: &Path) -> Result<Ca, CaError> {
        std::fs::create_dir_all(dir).map_err(io(dir))?;
        let stored = store.states(STATE_KEY).await.map_err(|e| CaError::Store(e.to_string()))?;
        let json = match stored.into_iter().find(|(k, _)| k == STATE_KEY) {
            Some((_, json)) => json,
            None => {
                let (cert_path, key_path) = (dir.join("ca.pem"), dir.join("ca.key"));
                let mine = if key_path.exists() {
                    let cert = std::fs::read_to_string(&cert_path).map_err(io(&cert_path))?;
                    let key = std::fs::read_to_string(&key_path).map_err(io(&key_path))?;
                    Pems { cert, key }
                } else {
                    Ca::generate()?
                };
                let json = serde_json::to_string(&mine).map_err(|e| CaError::Tls(e.to_string()))?;
                let now = crate::support::now();
                store.claim_state(STATE_KEY, &json, now).await.map_err(|e| CaError::Store(e.to_string()))?
            }
        };
        let pems: Pems = serde_json::from_str(&json)
            .map_err(|e| CaError::Tls(format!("the database's CA (state {STATE_KEY:?}): {e}")))?;
        let ca = Ca::from_pems(&pems, "the database's CA")?;
        let cert_path = dir.join("ca.pem");
        std::fs::write(&cert_path, &pems.cert).map_err(io(&cert_path))?;
        Ok(ca)
    }

    /// A new CA (10 years).
    fn generate() -> Result<Pems, CaError> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::default();
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, "Vantage agent channel CA");
        dn.push(DnType::OrganizationName, "Vantage");
        params.distinguished_name = dn;
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        params.not_before = now() - time::Duration::minutes(5);
        params.not_after = now() + time::Duration::days(3650);
        params.serial_number = Some(random_serial());
        let cert = params.self_signed(&key)?;
        Ok(Pems { cert: cert.pem(), key: key.serialize_pem() })
    }

    /// The CA of `pems`; `origin` names where they came from in errors.
    fn from_pems(pems: &Pems, origin: &str) -> Result<Ca, CaError> {
        let key = KeyPair::from_pem(&pems.key)?;
        let issuer = Issuer::from_ca_cert_pem(&pems.cert, key)?;
        let der =
            pem_der(&pems.cert).ok_or_else(|| CaError::Tls(format!("{origin} holds no certificate")))?;
        Ok(Ca {
            fingerprint: sha256_hex(&der),
            cert_der: CertificateDer::from(der),
            cert_pem: pems.cert.clone(),
            issuer,
        })
    }

    /// The CA certificate, PEM.
    pub(crate) fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// A rustls server configuration for the channel: a fresh server certificate for
    /// [`SERVER_NAME`] (1 year), the chain with the CA, and client certificates signed by the
    /// CA accepted but not required (enrollment comes without one).
    pub(crate) fn server_config(&self) -> Result<Arc<rustls::ServerConfig>, CaError> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(vec![SERVER_NAME.to_owned(), "localhost".to_owned()])?;
        params.distinguished_name.push(DnType::CommonName, SERVER_NAME);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.not_before = now() - time::Duration::minutes(5);
        params.not_after = now() + time::Duration::days(365);
        params.serial_number = Some(random_serial());
        let cert = params.signed_by(&key, &self.issuer)?;
        let mut roots = rustls::RootCertStore::empty();
        roots.add(self.cert_der.clone()).map_err(|e| CaError::Tls(e.to_string()))?;
        let verifier = rustls::server::WebPkiClientVerifier::builder(Arc::new(roots))
            .allow_unauthenticated()
            .build()
            .map_err(|e| CaError::Tls(e.to_string()))?;
        let chain = vec![cert.der().clone(), self.cert_der.clone()];
        let key_der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let mut config = rustls::ServerConfig::builder()
            .with_client_cert_verifier(verifier)
            .with_single_cert(chain, key_der)
            .map_err(|e| CaError::Tls(e.to_string()))?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }

    /// A rustls configuration for the admin API: a fresh certificate for `names` (host names
    /// or IP addresses) signed by this CA (1 year), no client certificates.
    pub(crate) fn api_server_config(&self, names: Vec<String>) -> Result<Arc<rustls::ServerConfig>, CaError> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(names)?;
        params.distinguished_name.push(DnType::CommonName, "Vantage admin API");
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.not_before = now() - time::Duration::minutes(5);
        params.not_after = now() + time::Duration::days(365);
        params.serial_number = Some(random_serial());
        let cert = params.signed_by(&key, &self.issuer)?;
        let chain = vec![cert.der().clone(), self.cert_der.clone()];
        let key_der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        api_config(chain, key_der)
    }

    /// Signs a client certificate for the public key of `csr_pem`: `CN=<id>`, organisation by
    /// role, client authentication only, 30 days. Returns (PEM, SHA-256 of the DER).
    pub(crate) fn issue_client(
        &self,
        csr_pem: &str,
        id: i64,
        role: Role,
    ) -> Result<(String, String), CaError> {
        let csr = CertificateSigningRequestParams::from_pem(csr_pem)?;
        let mut params = CertificateParams::default();
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, id.to_string());
        dn.push(
            DnType::OrganizationName,
            match role {
                Role::Prober => "Vantage Prober",
                Role::Node => "Vantage Node",
            },
        );
        params.distinguished_name = dn;
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.not_before = now() - time::Duration::minutes(5);
        params.not_after = now() + time::Duration::days(i64::try_from(CLIENT_CERT_DAYS).unwrap_or(30));
        params.serial_number = Some(random_serial());
        let cert = params.signed_by(&csr.public_key, &self.issuer)?;
        Ok((cert.pem(), sha256_hex(cert.der())))
    }
}

/// A rustls configuration for the admin API from the operator's PEM files.
pub(crate) fn api_config_from_files(cert: &Path, key: &Path) -> Result<Arc<rustls::ServerConfig>, CaError> {
    use rustls::pki_types::pem::PemObject;
    let bad = |path: &Path, e: &dyn std::fmt::Display| CaError::Tls(format!("{}: {e}", path.display()));
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .map_err(|e| bad(cert, &e))?
        .collect::<Result<_, _>>()
        .map_err(|e| bad(cert, &e))?;
    if chain.is_empty() {
        return Err(bad(cert, &"holds no certificate"));
    }
    let key_der = PrivateKeyDer::from_pem_file(key).map_err(|e| bad(key, &e))?;
    api_config(chain, key_der)
}

fn api_config(
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
) -> Result<Arc<rustls::ServerConfig>, CaError> {
    let mut config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| CaError::Tls(e.to_string()))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// The DER of the first certificate in a PEM text.
pub(crate) fn pem_der(pem: &str) -> Option<Vec<u8>> {
    use rustls::pki_types::pem::PemObject;
    CertificateDer::from_pem_slice(pem.as_bytes()).ok().map(|c| c.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ca_is_created_once_and_signs_client_certificates() {
        let dir = tempfile::tempdir().unwrap();
        let ca = Ca::load_or_create(dir.path()).unwrap();
        let again = Ca::load_or_create(dir.path()).unwrap();
        assert_eq!(ca.fingerprint, again.fingerprint);
        assert_eq!(ca.fingerprint.len(), 64);
        let key = KeyPair::generate().unwrap();
        let csr = CertificateParams::default().serialize_request(&key).unwrap().pem().unwrap();
        let (pem, fp) = ca.issue_client(&csr, 42, Role::Prober).unwrap();
        assert!(pem.starts_with("-----BEGIN CERTIFICATE-----"));
        assert_eq!(fp, sha256_hex(&pem_der(&pem).unwrap()));
        let mode = std::fs::metadata(dir.path().join("ca.key")).unwrap();
        assert_eq!(std::os::unix::fs::PermissionsExt::mode(&mode.permissions()) & 0o777, 0o600);
        ca.server_config().unwrap();
    }
}
