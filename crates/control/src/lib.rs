//! The control core of `vantage serve`: the configuration snapshot, what probers and agents
//! observed, every cluster's decision state, the alert book, and the snapshots DNS and the API
//! read — one state machine ([`Control`]) driven by events with the time passed in. It holds
//! no socket, no file, no task and no clock, so every decision of the control plane is tested
//! step by step on a virtual clock; `vantage-server` is its driver.

pub mod addresses;
pub mod alerts;
pub mod availability;
mod book;
pub mod config;
pub mod confirm;
mod control;
#[cfg(test)]
mod dice;
pub mod drain;
pub mod effects;
pub mod enrollment;
pub mod events;
mod expiry;
pub mod fixtures;
pub mod fleet;
pub mod identity;
pub mod invariants;
pub mod issued;
pub mod maintenance;
pub mod mirrors;
pub mod monitors;
pub mod observe;
pub mod rates;
mod seen;
pub mod snapshot;
pub mod spread;
pub mod state_save;
pub mod status_page;
pub mod target;
pub mod view;
pub mod work;

pub use control::{
    Accepted, AuditEntry, Checked, ClusterAfter, Control, LineAfter, Output, Relayed, ReportError, Revision,
    Role, Start, StoredRevision, Timing, Upkeep, check_report,
};
