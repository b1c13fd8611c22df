//! Test support for Vantage: real servers on loopback that behave like the edges a prober
//! meets, and a tracing set-up for tests.
//!
//! Every server is an [`EdgeServer`]: it binds a loopback address, serves one
//! [`Behavior`] (a health endpoint, an HLS origin, a peer that resets, one that never
//! answers, one that does not speak TLS, one that never closes, one with a chunked body),
//! optionally behind TLS with a self-signed certificate and behind a required PROXY v1
//! header, and can be stopped and restarted on the same address to script failures. Health
//! answers carry a body of the test's choosing (a block page, say).
//!
//! [`KnotServer`] runs a real Knot DNS that accepts RFC 2136 updates, and [`dig`] queries
//! any DNS server the way an operator would. [`write_mmdb`] makes geo databases.
//!
//! This crate is a dev-dependency only. It never binds or connects outside 127.0.0.0/8 and
//! ::1: callers hand it loopback addresses, and [`EdgeServer::start_with`] refuses others.
// Test support: a fixture that cannot start stops the test.
#![allow(clippy::expect_used)]

mod dns;
mod geo;
mod hls;
mod server;
mod tls;

pub use dns::{KNOT_INITIAL_A, KnotServer, dig, dig_short, free_port};
pub use geo::{GeoEntry, write_mmdb, write_mmdb_ipv4};
pub use hls::paths as hls_paths;
pub use server::{Behavior, EdgeOptions, EdgeServer, ProxySeen, SeenRequest};
pub use tls::TlsIdentity;

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener};

/// Sets up `tracing` for tests once per process: `RUST_LOG` filters (default `warn`), and
/// output goes through the test harness's capture.
pub fn init_tracing() {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn"));
    // A second call finds a subscriber in place; that is the idempotence wanted here.
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_test_writer().try_init();
}

/// A loopback address whose port nobody listens on: a connection to it is refused.
///
/// The port was free a moment ago and the kernel does not hand it out again soon, so the
/// refusal is dependable in tests.
pub fn closed_port() -> std::io::Result<SocketAddr> {
    let l = TcpListener::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0))?;
    let addr = l.local_addr()?;
    drop(l);
    Ok(addr)
}

/// `127.0.0.1:0`: where a test server binds when any port will do.
pub fn any_loopback() -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, 0))
}
