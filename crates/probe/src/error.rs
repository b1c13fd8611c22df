//! The error type of the probe engine. Failed attempts are not errors: they are results with
//! an [`vantage_core::result::ErrorCode`]. This type covers what stops a target from being
//! probed at all.

/// Why a target could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The endpoint URL is not usable.
    #[error("url {url:?}: {reason}")]
    Url {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The host name of the URL did not resolve.
    #[error("cannot resolve {host}: {source}")]
    Resolve {
        /// The host name.
        host: String,
        /// The resolver's error.
        #[source]
        source: std::io::Error,
    },
    /// The check's request cannot be expressed as an HTTP request.
    #[error("request: {0}")]
    Request(String),
}

/// Result with the probe engine's [`enum@Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
