//! `vantage`: one binary with a subcommand per process.

use clap::Parser;

/// Vantage tells the truth about an edge fleet from many places at once, and steers traffic by it.
#[derive(Debug, Parser)]
#[command(name = "vantage", version, about, long_about = None)]
struct Cli {}

fn main() -> anyhow::Result<()> {
    let _cli = Cli::parse();
    Ok(())
}
