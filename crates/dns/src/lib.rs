//! Vantage's DNS: the built-in authoritative server and the publishers that push each
//! revision to external DNS servers (SPEC §9).
//!
//! The control plane turns each revision into [`ZoneAnswers`] (one per cluster), builds an
//! [`AnswerTable`] from all of them and [`Answers::store`]s it; the [`DnsServer`] answers
//! from whatever table is current, from memory only. The same [`ZoneAnswers`] go to each
//! [`Publisher`], whose [`PublishOutcome`] is recorded on the revision.
//!
//! This crate reads no storage, no configuration file and no environment: everything comes
//! in as values.

mod client;
mod demand;
mod error;
mod geo;
mod lines;
pub mod listen;
mod memo;
mod metrics;
pub mod publish;
mod server;
mod settings;
mod slow;
mod table;
mod wire;

pub use client::{query_a, query_a_with_ttl};
pub use demand::DnsDemand;
pub use error::Error;
pub use geo::{GeoDb, GeoFileInfo, Located};
pub use metrics::DnsMetrics;
pub use publish::rfc2136::{Rfc2136Config, Rfc2136Publisher, TsigAlgorithm, TsigKey};
pub use publish::{PublishOutcome, PublishStatus, Publisher, RetryPolicy};
pub use server::{DnsConfig, DnsServer};
pub use settings::DnsSettings;
pub use table::{AnswerTable, Answers, ClientAnswer, LineAnswers, ZoneAnswers};
pub use wire::{Answered, Path, Transport, answer_on};

#[cfg(test)]
mod tests;
