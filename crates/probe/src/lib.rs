//! Vantage's probe engine (§3.1–3.2): every check method, and rounds over many targets.
//!
//! - [`attempt`] makes one attempt against a [`ProbeTarget`] — `tcp`, `http`, `https` (SNI =
//!   the check's host, certificate verified only for checks with `verify`, its expiry
//!   reported) or `hls` (manifest, newest segment, its age),
//!   with a PROXY v1 header first on listeners that require one, and for `http`/`https`
//!   checks with a block-page pattern the body searched for it — and returns an
//!   [`AttemptReport`]: the stages reached, the time of each, and on failure exactly one
//!   [`ErrorCode`](vantage_core::result::ErrorCode).
//! - [`run_round`] gives every target its attempts in a row, many targets at once under a
//!   bound, and returns one [`ProbeResult`](vantage_core::result::ProbeResult) per target.
//!   A round starts 256 targets at once and opens up to the bound while the targets are slow
//!   or dead, so a round of dead targets takes about `attempts × timeout` whatever its size,
//!   while fast targets are not drowned in thousands of connections at once.
//! - [`SourceAddresses`] (in [`RoundConfig`], or [`attempt_from`]) binds connections to one
//!   local address per family, for multi-homed probe hosts.
//! - [`raise_nofile_limit`] lifts the open-file limit that bounds a round; call it once at
//!   start.
//!
//! Sockets are opened here (so connect, TLS and first byte are timed apart). A health check
//! (`http`, `https`) is one request per connection, spoken by a small state machine with
//! `httparse` for the response head (the `health` module says why); `hls` speaks HTTP through
//! hyper. TLS is rustls with the aws-lc-rs provider. Decisions about the results (loss,
//! reachability, window registers) belong to `vantage-core`, not here.

mod admission;
mod attempt;
mod block;
mod classify;
mod error;
mod health;
pub mod hls;
mod limit;
mod round;
mod source;
mod target;
mod tls;
mod wire;

pub use attempt::{AttemptReport, SegmentReport, Timings, attempt, attempt_from};
pub use error::{Error, Result};
pub use limit::{NofileLimit, nofile_limit, raise_nofile_limit};
pub use round::{RoundConfig, effective_concurrency, run_round};
pub use source::{SourceAddresses, SourceAddressesError};
pub use target::ProbeTarget;
pub use tls::install_crypto_provider;
pub use url::Url;
pub use vantage_core::check::Method;
