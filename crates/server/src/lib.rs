//! The Vantage control plane: admin API, configuration registry, storage, metrics.
//!
//! [`Server::start`] binds the listeners and runs until [`Server::shutdown`].

mod api;
mod app;
mod auth;
pub mod config;
mod error;
mod metrics;
mod registry;
mod server;

pub use app::now;
pub use config::{LogFormat, ServeConfig};
pub use server::{Server, StartError};
