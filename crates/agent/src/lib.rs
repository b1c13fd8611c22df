//! The client side of Vantage's agent channel (§2, §3.2, §4): how a regional prober
//! (`vantage probe`) and an edge node's agent (`vantage agent`) join the control plane and
//! work with it.
//!
//! - Identity: a state directory ([`StateDir`]) with a key made on this host, the client
//!   certificate the server issued for it, the channel CA and [`Identity`]. [`enroll`] makes
//!   it from a single-use token over TLS pinned to the CA's SHA-256 ([`Fingerprint`]): a
//!   server without that CA gets no request, so never the token. [`connect`] loads it on
//!   later starts (ignoring the token).
//! - [`ChannelClient`]: JSON over mutual TLS, the saved CA as the only root, the server's
//!   certificate verified for [`wire::SERVER_NAME`](vantage_core::wire::SERVER_NAME)
//!   whatever host the URL names; renewal once less than a third of the certificate's life
//!   remains.
//! - [`run_prober`]: rounds of work → probe → report, paced by the probe settings at the phase
//!   the server gives, and beside them the work's endpoint targets, each on its own check's
//!   interval, and the confirmations the server asks for.
//! - [`run_agent`]: heartbeats with [`metrics`], addresses, capabilities and links; probing
//!   too while the server says so.
//!
//! The message types and paths are `vantage_core::wire`'s; probing is `vantage_probe`'s.
//! Nothing here reads the environment or the command line: callers hand in option structs.

mod cert;
mod client;
mod endpoint;
mod enroll;
mod error;
mod fingerprint;
pub mod host;
pub mod metrics;
mod node;
mod prober;
mod recheck;
mod state;
mod tls;

pub use cert::CertificateInfo;
pub use client::ChannelClient;
pub use enroll::{ChannelOptions, connect, connect_with_retry, enroll};
pub use error::{Error, Result};
pub use fingerprint::{Fingerprint, FingerprintParseError};
pub use node::{AgentOptions, CAP_METRICS, CAP_PROBE_HEALTH, run_agent};
pub use prober::{DEFAULT_CONCURRENCY, ProberOptions, run_prober};
pub use reqwest::Url;
pub use state::{CA_FILE, CERT_FILE, IDENTITY_FILE, Identity, KEY_FILE, StateDir};

/// The agent's version, sent in enrollment, reports and heartbeats.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
