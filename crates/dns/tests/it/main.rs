//! Integration tests of vantage-dns against real DNS software: `dig` against the built-in
//! server, and a real Knot DNS (`knotd`) receiving RFC 2136 updates. One test binary.

// Setup that fails should stop the test loudly; clippy.toml allows unwrap inside #[test]
// functions, and this extends it to the helpers of this test binary.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod knot;
mod server;
mod support;
