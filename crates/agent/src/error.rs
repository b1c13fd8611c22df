//! The crate's one error type. Every failure the channel can meet is a value here: nothing the
//! server (or an impostor) sends can make the agent panic.

use std::fmt;
use std::io;
use std::path::PathBuf;

use crate::fingerprint::Fingerprint;

/// What went wrong talking to the agent channel, or keeping the agent's state.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An option is missing or malformed (the message names it).
    #[error("{option}: {reason}")]
    Config {
        /// The option, as the operator writes it (`--token`…).
        option: &'static str,
        /// Why it is refused.
        reason: String,
    },
    /// The server's certificate chain holds no certificate with the pinned fingerprint: the
    /// handshake was abandoned before any request, so the token was not sent.
    #[error("CA fingerprint mismatch: the server's CA is {actual}, expected {expected}")]
    FingerprintMismatch {
        /// Fingerprint of the last certificate of the chain the server presented.
        actual: Fingerprint,
        /// The pinned fingerprint (`--ca-sha256`).
        expected: Fingerprint,
    },
    /// The server answered with an error status.
    #[error("{}", refusal(.status, .reason, .field))]
    Refused {
        /// HTTP status.
        status: u16,
        /// The server's reason (from its JSON error body, else the status text).
        reason: String,
        /// The field at fault, when the server names one.
        field: Option<String>,
    },
    /// The server could not be reached, or the exchange broke off.
    #[error("cannot reach {url}: {reason}")]
    Unreachable {
        /// What was asked.
        url: String,
        /// Why it failed (the whole cause chain).
        reason: String,
    },
    /// The TLS handshake failed (certificate not for the channel's name, not signed by the
    /// channel's CA, client certificate refused…).
    #[error("TLS with {url} failed: {reason}")]
    Tls {
        /// What was asked.
        url: String,
        /// Why it failed (the whole cause chain).
        reason: String,
    },
    /// The server's answer does not follow the channel protocol.
    #[error("unexpected answer from {url}: {reason}")]
    Protocol {
        /// What was asked.
        url: String,
        /// What is wrong with the answer.
        reason: String,
    },
    /// A file of the state directory cannot be read or written.
    #[error("{}: {source}", path.display())]
    State {
        /// The file or directory.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// A file of the state directory holds something unusable.
    #[error("{}: {reason}", path.display())]
    StateInvalid {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// A key, a certificate request or the TLS set-up could not be made.
    #[error("certificate: {0}")]
    Certificate(String),
    /// Host metrics cannot be read.
    #[error("metrics: {}: {reason}", path.display())]
    Metrics {
        /// The file read.
        path: PathBuf,
        /// Why it cannot be used.
        reason: String,
    },
}

impl Error {
    /// True when the server refused this identity: its certificate is revoked, or the prober or
    /// node is disabled or deleted (HTTP 401 or 403). An operator may undo that, so loops keep
    /// asking, less often.
    pub fn is_identity_refused(&self) -> bool {
        matches!(self, Error::Refused { status: 401 | 403, .. })
    }

    /// True when trying again later may succeed without anyone changing anything: the server
    /// is unreachable, overloaded or failing (5xx, 429).
    pub fn is_transient(&self) -> bool {
        match self {
            Error::Unreachable { .. } => true,
            Error::Refused { status, .. } => *status >= 500 || *status == 429,
            _ => false,
        }
    }

    /// The server's reason for a refusal, or the whole message for other errors.
    pub fn reason(&self) -> String {
        match self {
            Error::Refused { reason, field: Some(f), .. } => format!("{reason} (field {f})"),
            Error::Refused { reason, .. } => reason.clone(),
            other => other.to_string(),
        }
    }

    pub(crate) fn state(path: impl Into<PathBuf>) -> impl FnOnce(io::Error) -> Error {
        let path = path.into();
        move |source| Error::State { path, source }
    }

    pub(crate) fn invalid(path: impl Into<PathBuf>, reason: impl fmt::Display) -> Error {
        Error::StateInvalid { path: path.into(), reason: reason.to_string() }
    }

    pub(crate) fn config(option: &'static str, reason: impl Into<String>) -> Error {
        Error::Config { option, reason: reason.into() }
    }
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

fn refusal(status: &u16, reason: &str, field: &Option<String>) -> String {
    match field {
        Some(field) => format!("the server refused the request (HTTP {status}): {reason} (field {field})"),
        None => format!("the server refused the request (HTTP {status}): {reason}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_show_reason_and_field() {
        let e = Error::Refused { status: 400, reason: "expired".into(), field: Some("token".into()) };
        assert_eq!(e.to_string(), "the server refused the request (HTTP 400): expired (field token)");
        assert_eq!(e.reason(), "expired (field token)");
        assert!(!e.is_identity_refused() && !e.is_transient());
        let e = Error::Refused { status: 403, reason: "disabled".into(), field: None };
        assert!(e.is_identity_refused());
        assert!(Error::Refused { status: 503, reason: String::new(), field: None }.is_transient());
        assert!(Error::Unreachable { url: "u".into(), reason: "r".into() }.is_transient());
    }
}
