//! Integration tests of the probe engine against real servers on loopback (vantage-testkit).
//! Nothing here sends traffic outside 127.0.0.0/8.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod block;
mod hls;
mod methods;
mod round;

use std::sync::Arc;

use vantage_core::check::{Check, CheckInput, Method};
use vantage_probe::ProbeTarget;
use vantage_testkit::EdgeServer;

/// A check from its input.
pub(crate) fn check(input: CheckInput) -> Arc<Check> {
    Arc::new(Check::parse(input).expect("valid check"))
}

/// A target at the server's address with the default check.
pub(crate) fn target(server: &EdgeServer, method: Method) -> ProbeTarget {
    ProbeTarget::new("t", server.addr(), method, check(CheckInput::default()))
}
