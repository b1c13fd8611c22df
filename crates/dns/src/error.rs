//! The one error type of the crate.

use std::io;
use std::net::SocketAddr;

/// Why starting the server or configuring a publisher failed.
///
/// Errors caused by DNS traffic never appear here: a malformed query is dropped or answered
/// FORMERR, and a publisher's failure is a [`crate::PublishOutcome`], not an error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A listening socket could not be created or bound.
    #[error("cannot listen for DNS on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// What the operating system said.
        #[source]
        source: io::Error,
    },
    /// A server thread could not be started.
    #[error("cannot start DNS thread {name}: {source}")]
    Thread {
        /// The thread's name.
        name: String,
        /// What the operating system said.
        #[source]
        source: io::Error,
    },
    /// A setting is invalid (field and reason).
    #[error("{field}: {reason}")]
    Invalid {
        /// The setting.
        field: String,
        /// What is wrong with it.
        reason: String,
    },
}

impl Error {
    pub(crate) fn invalid(field: impl Into<String>, reason: impl Into<String>) -> Self {
        Error::Invalid { field: field.into(), reason: reason.into() }
    }
}
