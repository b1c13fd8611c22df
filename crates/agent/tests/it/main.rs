//! Integration tests of the agent channel client against a real HTTPS server on 127.0.0.1
//! (tests/it/support.rs) and of the host metrics readers. Nothing here leaves 127.0.0.0/8.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod agent;
mod channel;
mod endpoints;
mod metrics;
mod prober;
mod support;
mod tls;

use std::path::Path;

use vantage_agent::{ChannelOptions, Fingerprint, Url};

/// Enrollment options for `server` with `token`, pinned to `pin`, state in `dir`.
pub(crate) fn options(dir: &Path, url: Url, token: &str, pin: Fingerprint) -> ChannelOptions {
    ChannelOptions {
        server: Some(url),
        token: Some(token.to_owned()),
        ca_sha256: Some(pin),
        state_dir: dir.to_owned(),
        hostname: Some("probe-host-1".to_owned()),
    }
}
