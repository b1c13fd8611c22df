//! The state directory: the agent's identity across restarts.
//!
//! | file | what | mode |
//! |---|---|---|
//! | `key.pem` | the private key, made on this host, never sent | 0600 |
//! | `cert.pem` | the client certificate the server issued for it | 0644 |
//! | `ca.pem` | the channel CA, the only root trusted from enrollment on | 0644 |
//! | `identity.json` | `{id, role, name, server}` | 0644 |
//!
//! `cert.pem` is written last at enrollment: its presence means "enrolled". Every file is
//! written to a temporary name and renamed into place. A renewal replaces key and certificate
//! together: both are first written as `key.pem.next` and `cert.pem.next`, then renamed in
//! that order; [`StateDir::load`] finishes a swap a crash interrupted, so key and
//! certificate on disk always belong together.

use std::fs::{self, DirBuilder, File, OpenOptions, Permissions};
use std::io::{ErrorKind, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use vantage_core::wire::Role;

use crate::error::{Error, Result};

/// The private key.
pub const KEY_FILE: &str = "key.pem";
/// The client certificate.
pub const CERT_FILE: &str = "cert.pem";
/// The channel CA certificate.
pub const CA_FILE: &str = "ca.pem";
/// Who this agent is.
pub const IDENTITY_FILE: &str = "identity.json";

const KEY_MODE: u32 = 0o600;
const PUBLIC_MODE: u32 = 0o644;
const DIR_MODE: u32 = 0o700;

/// Who the agent is on the channel, as `identity.json` keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    /// Prober or node id (the certificate's CN).
    pub id: i64,
    /// Prober or node.
    pub role: Role,
    /// The prober's or node's name.
    pub name: String,
    /// The channel URL it enrolled with (or was last told to use).
    pub server: String,
}

/// Everything a start reads from the state directory.
#[derive(Clone)]
pub(crate) struct Saved {
    pub(crate) identity: Identity,
    pub(crate) key_pem: String,
    pub(crate) cert_pem: String,
    pub(crate) ca_pem: String,
}

impl std::fmt::Debug for Saved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The private key stays out of logs.
        f.debug_struct("Saved").field("identity", &self.identity).finish_non_exhaustive()
    }
}

/// The state directory of one prober or node agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateDir {
    path: PathBuf,
}

impl StateDir {
    /// The directory at `path` (created, mode 0700, when first written).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        StateDir { path: path.into() }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A file of the directory.
    pub fn file(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    /// True when the directory holds a certificate, i.e. enrollment happened (after finishing
    /// a renewal a crash interrupted).
    pub fn is_enrolled(&self) -> Result<bool> {
        self.recover_swap()?;
        exists(&self.file(CERT_FILE))
    }

    /// Reads the saved identity.
    pub fn identity(&self) -> Result<Identity> {
        let path = self.file(IDENTITY_FILE);
        let text = read(&path)?;
        serde_json::from_str(&text).map_err(|e| Error::invalid(&path, e))
    }

    /// Reads identity, key, certificate and CA.
    pub(crate) fn load(&self) -> Result<Saved> {
        self.recover_swap()?;
        Ok(Saved {
            identity: self.identity()?,
            key_pem: read(&self.file(KEY_FILE))?,
            cert_pem: read(&self.file(CERT_FILE))?,
            ca_pem: read(&self.file(CA_FILE))?,
        })
    }

    /// Saves a new enrollment: key, CA and identity first, the certificate last.
    pub(crate) fn save_enrollment(
        &self,
        key_pem: &str,
        cert_pem: &str,
        ca_pem: &str,
        identity: &Identity,
    ) -> Result<()> {
        self.create()?;
        // A half-finished renewal of an earlier identity must not be completed over this one.
        for stale in [format!("{KEY_FILE}.next"), format!("{CERT_FILE}.next")] {
            remove_if_exists(&self.file(&stale))?;
        }
        write_atomic(&self.file(KEY_FILE), key_pem.as_bytes(), KEY_MODE)?;
        write_atomic(&self.file(CA_FILE), ca_pem.as_bytes(), PUBLIC_MODE)?;
        self.save_identity(identity)?;
        write_atomic(&self.file(CERT_FILE), cert_pem.as_bytes(), PUBLIC_MODE)
    }

    /// Rewrites `identity.json` (a new server URL, say).
    pub(crate) fn save_identity(&self, identity: &Identity) -> Result<()> {
        let path = self.file(IDENTITY_FILE);
        let mut json = serde_json::to_vec_pretty(identity).map_err(|e| Error::invalid(&path, e))?;
        json.push(b'\n');
        write_atomic(&path, &json, PUBLIC_MODE)
    }

    /// Replaces key and certificate as one: both staged, then renamed key first.
    pub(crate) fn save_renewal(&self, key_pem: &str, cert_pem: &str) -> Result<()> {
        let (key_next, cert_next) = self.next_files();
        write_atomic(&key_next, key_pem.as_bytes(), KEY_MODE)?;
        write_atomic(&cert_next, cert_pem.as_bytes(), PUBLIC_MODE)?;
        self.recover_swap()
    }

    fn next_files(&self) -> (PathBuf, PathBuf) {
        (self.file(&format!("{KEY_FILE}.next")), self.file(&format!("{CERT_FILE}.next")))
    }

    /// Finishes or undoes a renewal swap. `cert.pem.next` is written only once
    /// `key.pem.next` is complete, so: both staged → rename both; only the certificate →
    /// the key was renamed already, rename the certificate; only the key → the certificate
    /// never arrived, drop the key (the old pair is intact).
    fn recover_swap(&self) -> Result<()> {
        let (key_next, cert_next) = self.next_files();
        let (key_staged, cert_staged) = (exists(&key_next)?, exists(&cert_next)?);
        if cert_staged {
            if key_staged {
                rename(&key_next, &self.file(KEY_FILE))?;
            }
            rename(&cert_next, &self.file(CERT_FILE))?;
            sync_dir(&self.path)?;
        } else if key_staged {
            remove_if_exists(&key_next)?;
        }
        Ok(())
    }

    fn create(&self) -> Result<()> {
        DirBuilder::new().recursive(true).mode(DIR_MODE).create(&self.path).map_err(Error::state(&self.path))
    }
}

fn read(path: &Path) -> Result<String> {
    fs::read_to_string(path).map_err(Error::state(path))
}

fn exists(path: &Path) -> Result<bool> {
    path.try_exists().map_err(Error::state(path))
}

fn rename(from: &Path, to: &Path) -> Result<()> {
    fs::rename(from, to).map_err(Error::state(to))
}

fn remove_if_exists(path: &Path) -> Result<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != ErrorKind::NotFound => Err(Error::state(path)(e)),
        _ => Ok(()),
    }
}

fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(Error::state(dir))
}

/// Writes `data` to `path` through a temporary file in the same directory, with `mode` from
/// the start (a key is never readable by others, not even for a moment).
fn write_atomic(path: &Path, data: &[u8], mode: u32) -> Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let write = || -> std::io::Result<()> {
        let mut f = OpenOptions::new().write(true).create(true).truncate(true).mode(mode).open(&tmp)?;
        // `mode` applies only to a file the call creates; a leftover temporary keeps its own.
        f.set_permissions(Permissions::from_mode(mode))?;
        f.write_all(data)?;
        f.sync_all()
    };
    write().map_err(Error::state(&tmp))?;
    rename(&tmp, path)?;
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => sync_dir(dir),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity() -> Identity {
        Identity { id: 7, role: Role::Prober, name: "sg-1".into(), server: "https://h:8443".into() }
    }

    #[test]
    fn enrollment_files_and_modes() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::new(dir.path().join("state"));
        assert!(!state.is_enrolled().unwrap());
        state.save_enrollment("KEY", "CERT", "CA", &identity()).unwrap();
        assert!(state.is_enrolled().unwrap());
        let mode = |f: &str| fs::metadata(state.file(f)).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(KEY_FILE), 0o600);
        assert_eq!(mode(CERT_FILE), 0o644);
        assert_eq!(fs::metadata(state.path()).unwrap().permissions().mode() & 0o777, 0o700);
        let saved = state.load().unwrap();
        assert_eq!(
            (saved.key_pem.as_str(), saved.cert_pem.as_str(), saved.ca_pem.as_str()),
            ("KEY", "CERT", "CA")
        );
        assert_eq!(saved.identity, identity());
        assert!(!format!("{saved:?}").contains("KEY"), "Debug leaks the key");
    }

    #[test]
    fn renewal_swaps_both_and_recovers_interrupted_swaps() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::new(dir.path());
        state.save_enrollment("K1", "C1", "CA", &identity()).unwrap();
        state.save_renewal("K2", "C2").unwrap();
        let saved = state.load().unwrap();
        assert_eq!((saved.key_pem.as_str(), saved.cert_pem.as_str()), ("K2", "C2"));
        let (key_next, cert_next) = state.next_files();
        assert!(!key_next.exists() && !cert_next.exists());

        // Crash after staging both: the next start completes the swap.
        fs::write(&key_next, "K3").unwrap();
        fs::write(&cert_next, "C3").unwrap();
        let saved = state.load().unwrap();
        assert_eq!((saved.key_pem.as_str(), saved.cert_pem.as_str()), ("K3", "C3"));

        // Crash after renaming the key: the certificate follows.
        fs::write(state.file(KEY_FILE), "K4").unwrap();
        fs::write(&cert_next, "C4").unwrap();
        let saved = state.load().unwrap();
        assert_eq!((saved.key_pem.as_str(), saved.cert_pem.as_str()), ("K4", "C4"));

        // Crash before the certificate was staged: the old pair stays.
        fs::write(&key_next, "K5").unwrap();
        let saved = state.load().unwrap();
        assert_eq!((saved.key_pem.as_str(), saved.cert_pem.as_str()), ("K4", "C4"));
        assert!(!key_next.exists());
    }

    #[test]
    fn leftover_temporary_gets_the_key_mode() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::new(dir.path());
        let tmp = state.file("key.pem.tmp");
        fs::write(&tmp, "old").unwrap();
        fs::set_permissions(&tmp, Permissions::from_mode(0o644)).unwrap();
        state.save_enrollment("KEY", "CERT", "CA", &identity()).unwrap();
        assert_eq!(fs::metadata(state.file(KEY_FILE)).unwrap().permissions().mode() & 0o777, 0o600);
    }

    #[test]
    fn unreadable_identity_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::new(dir.path());
        fs::write(state.file(IDENTITY_FILE), "{").unwrap();
        let e = state.identity().unwrap_err();
        assert!(e.to_string().contains("identity.json"), "{e}");
    }
}
