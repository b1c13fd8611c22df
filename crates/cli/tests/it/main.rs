//! Integration tests of the `vantage` binary: each module runs the built binary against real
//! local servers (vantage-testkit). Nothing here sends traffic outside 127.0.0.0/8, except
//! to the network namespaces and interfaces that `netlab` makes for the test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod channel;
mod check;
mod control_plane;
mod ctl_incident;
mod ctl_mirrors;
mod ctl_monitors;
mod dashboard;
mod demo;
mod dns;
mod edges;
mod faces;
mod failover;
mod faults;
mod fleet;
mod geo;
mod harness;
mod honest;
mod hostile;
mod latency;
mod limits;
mod maintenance;
mod metrics;
mod mirrors;
mod monitors;
mod named_checks;
mod netlab;
mod nodes;
mod notifications;
mod openapi;
mod players;
mod postgres;
mod readme;
mod receivers;
mod replicas;
mod rules;
mod status_pages;
mod steering;
mod ui;
mod verify;

use std::process::Output;

/// Runs `vantage ARGS…` to completion.
pub(crate) async fn vantage(args: &[&str]) -> Output {
    vantage_env(args, &[]).await
}

/// [`vantage`] with extra environment variables.
pub(crate) async fn vantage_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_vantage"))
        .args(args)
        .envs(env.iter().copied())
        .kill_on_drop(true)
        .output()
        .await
        .expect("the vantage binary runs")
}

/// Standard output and error as text.
pub(crate) fn text(out: &Output) -> (String, String) {
    (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}
