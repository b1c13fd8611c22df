//! Scenario and property tests of the decision core, driven by a virtual clock.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod evaluation;
mod fleet;
mod latency;
mod operator;
mod properties;
mod round_trip;
