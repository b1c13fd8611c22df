//! Vantage's decision core: the domain types of the specification and every decision made
//! from them, pure. Nothing here does I/O or reads a clock: each decision takes `now`, so the
//! rules are tested step by step with a virtual clock.
//!
//! Validated types follow "parse, don't validate": a value that exists is valid, and every
//! refusal is an [`Error`] naming the field and the reason.

pub mod address;
pub mod answer;
pub mod beside;
pub mod check;
pub mod demand;
pub mod detection;
mod error;
pub mod evaluate;
pub mod fetch;
pub mod geo;
mod hash;
pub mod ids;
pub mod limits;
pub mod mirror;
pub mod model;
pub mod monitor;
pub mod net;
pub mod patch;
pub mod plain;
pub mod reachability;
pub mod result;
pub mod rules;
pub mod settings;
pub mod steering;
pub mod strict;
pub mod time;
pub mod window;
pub mod wire;

pub use error::{Error, Result, from_value};
pub use time::Timestamp;
#[cfg(feature = "schema")]
mod schema;
