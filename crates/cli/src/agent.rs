//! `vantage agent`: runs on an edge node. Enrolls with a node token, sends a heartbeat every
//! 15 s (metrics, addresses, capabilities, links), and probes too while the node has
//! *also probes* on (§2). Settings and exit status as for `vantage probe`.

use std::net::IpAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use vantage_agent::metrics::MetricsSource;
use vantage_agent::{AgentOptions, host};
use vantage_core::evaluate::LinkState;

use crate::check::seconds;
use crate::probe::{ChannelArgs, bad_setting, run_until_stopped};

/// Run the node agent.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    channel: ChannelArgs,
    /// State directory: key (0600), certificate, CA, identity [default: /var/lib/vantage-agent].
    #[arg(long, env = "VANTAGE_STATE_DIR")]
    state_dir: Option<PathBuf>,
    /// Read host metrics from this JSON file (re-read at every heartbeat) instead of /proc.
    #[arg(long, env = "VANTAGE_METRICS_FILE", value_name = "FILE")]
    metrics_file: Option<PathBuf>,
    /// An address of this node (repeat for several); replaces the interface addresses.
    #[arg(long = "address", value_name = "IP", env = "VANTAGE_ADDRESSES", value_delimiter = ',')]
    addresses: Vec<IpAddr>,
    /// A link and its last handshake: NAME=RFC3339, NAME=UNIX-SECONDS or NAME=never (repeat
    /// for several).
    #[arg(long = "link", value_name = "NAME=WHEN", value_parser = host::parse_link)]
    links: Vec<LinkState>,
    /// Time between heartbeats (tests): 1s, 500ms, or seconds.
    #[arg(long, hide = true, default_value = "15s", value_parser = parse_interval)]
    heartbeat_interval: Duration,
}

fn parse_interval(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    match seconds(s) {
        Some(v) if (0.05..=3600.0).contains(&v) => Ok(Duration::from_secs_f64(v)),
        _ => Err(format!("{s:?}: like 15s, 500ms or 2 (50 ms to 1 h)")),
    }
}

pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    let resolved = match args.channel.resolve(args.state_dir, "/var/lib/vantage-agent") {
        Ok(r) => r,
        Err(msg) => return Ok(bad_setting(&msg)),
    };
    let file_links = resolved.file.links.clone().unwrap_or_default();
    let links = if args.links.is_empty() {
        match file_links.iter().map(|l| host::parse_link(l)).collect::<Result<Vec<_>, _>>() {
            Ok(links) => links,
            Err(e) => return Ok(bad_setting(&format!("links: {e}"))),
        }
    } else {
        args.links
    };
    let addresses = if args.addresses.is_empty() {
        resolved.file.addresses.clone().unwrap_or_default()
    } else {
        args.addresses
    };
    let metrics = match args.metrics_file.or_else(|| resolved.file.metrics_file.clone()) {
        Some(path) => MetricsSource::File(path),
        None => MetricsSource::default(),
    };
    resolved.init_logs();
    let opts = AgentOptions {
        metrics,
        addresses,
        links,
        heartbeat_interval: args.heartbeat_interval,
        concurrency: resolved.concurrency,
        source: resolved.source,
        ..AgentOptions::new(resolved.channel)
    };
    run_until_stopped(move |stop| vantage_agent::run_agent(opts, stop))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals() {
        assert_eq!(parse_interval("1s").unwrap(), Duration::from_secs(1));
        assert_eq!(parse_interval("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_interval("15").unwrap(), Duration::from_secs(15));
        assert!(parse_interval("0s").is_err());
        assert!(parse_interval("soon").is_err());
    }
}
