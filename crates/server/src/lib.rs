//! The Vantage control plane: admin API, configuration registry, storage, metrics.
//!
//! [`Server::start`] binds the listeners and runs until [`Server::shutdown`].

mod alerts;
mod api;
mod app;
mod auth;
mod ca;
mod channel;
pub mod config;
mod error;
mod evaluator;
mod metrics;
mod publishing;
mod registry;
mod runtime;
mod server;
mod ui;

pub use app::now;
pub use config::{LogFormat, ServeConfig};
pub use server::{Server, StartError};
