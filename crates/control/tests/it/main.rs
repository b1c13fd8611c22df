//! The control core on a virtual clock: every decision that moved out of the server's drivers,
//! scenario by scenario (SPEC §3.2, §3.4, §3.5, §5.5, §9).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod lab;

mod availability;
mod certificates;
mod changes;
mod checks;
mod detection;
mod dry_run;
mod enrollment;
mod events;
mod fleet;
mod identity;
mod invariants;
mod maintenance;
mod mirrors;
mod monitors;
mod nodes;
mod online;
mod probers;
mod publish;
mod replicas;
mod reports;
mod schedule;
mod silences;
mod verify;
mod view;
