//! `vantage`: one binary with a subcommand per process.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod agent;
mod check;
mod ctl;
mod demo;
mod follow;
mod probe;
mod serve;

/// Vantage tells the truth about an edge fleet from many places at once, and steers traffic by it.
#[derive(Debug, Parser)]
#[command(name = "vantage", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the control plane: admin API, agent channel, evaluator, DNS.
    Serve(serve::Args),
    /// Drive the admin API from the shell.
    Ctl(ctl::Args),
    /// Run the whole system on this machine: a server, edges and probers, and a failure to watch.
    Demo(demo::Args),
    /// Probe a URL or HOST:PORT once from here and print every stage.
    Check(check::Args),
    /// Run a regional prober: enroll once, then fetch targets, probe and report.
    Probe(probe::Args),
    /// Run the agent of an edge node: heartbeats with metrics, and probing when asked.
    Agent(agent::Args),
}

fn main() -> anyhow::Result<ExitCode> {
    let cli = Cli::parse();
    match cli.command {
        Command::Serve(args) => serve::run(args),
        Command::Ctl(args) => ctl::run(args),
        Command::Demo(args) => demo::run(args),
        Command::Check(args) => check::run(args),
        Command::Probe(args) => probe::run(args),
        Command::Agent(args) => agent::run(args),
    }
}
