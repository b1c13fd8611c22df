//! The Vantage control plane: admin API, configuration registry, storage, metrics.
//!
//! [`Server::start`] binds the listeners and runs until [`Server::shutdown`].

mod alerts;
mod api;
mod app;
mod auth;
#[cfg(test)]
mod bench;
mod ca;
mod channel;
pub mod config;
mod demand;
mod driver;
mod error;
mod events;
mod fetch;
mod freshness;
mod geo;
mod listen;
mod metrics;
mod mirrors;
mod owner;
mod public;
mod publishing;
mod replicas;
mod revisions;
mod saves;
mod server;
mod support;
mod ui;
mod upkeep;
pub mod views;
mod watched;

pub use config::{LogFormat, ServeConfig};
pub use server::{Server, StartError};
pub use support::now;

/// The log target of alerts firing and resolving, which a log filter names to keep them out.
pub const ALERT_LOG_TARGET: &str = "vantage_server::alerts";
