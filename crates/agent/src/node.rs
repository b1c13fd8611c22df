//! The node agent (`vantage agent`): a heartbeat every [`wire::HEARTBEAT_S`] with host
//! metrics, addresses, capabilities and links; and, while the server's answer says
//! `also_probes`, the prober loop against the node endpoints.

use std::future::Future;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::JoinSet;
use vantage_core::evaluate::LinkState;
use vantage_core::wire::{self, Heartbeat, HeartbeatReply, Role};
use vantage_probe::SourceAddresses;

use crate::client::ChannelClient;
use crate::enroll::ChannelOptions;
use crate::error::Result;
use crate::metrics::{MetricsSource, Sampler};
use crate::prober::{DEFAULT_CONCURRENCY, Endpoints, log_nofile_limit, prober_loop, run_until};

/// Capability: the heartbeat carries host metrics.
pub const CAP_METRICS: &str = "metrics-v1";
pub use vantage_core::wire::CAP_PROBE_HEALTH;
/// Longest wait between two heartbeats while the server refuses this node.
const MAX_BACKOFF: Duration = Duration::from_secs(300);

/// How `vantage agent` runs.
#[derive(Debug, Clone)]
pub struct AgentOptions {
    /// The channel and the state directory.
    pub channel: ChannelOptions,
    /// Where host metrics come from.
    pub metrics: MetricsSource,
    /// The node's addresses; empty: the host's interface addresses, found at every heartbeat.
    pub addresses: Vec<IpAddr>,
    /// Links and their last handshakes.
    pub links: Vec<LinkState>,
    /// Time between heartbeats ([`wire::HEARTBEAT_S`]; shorter in tests).
    pub heartbeat_interval: Duration,
    /// Targets probed at once at most while the node also probes.
    pub concurrency: usize,
    /// Where probe connections leave from while the node also probes.
    pub source: SourceAddresses,
}

impl AgentOptions {
    /// Metrics from `/proc`, discovered addresses, no links, the standard heartbeat.
    pub fn new(channel: ChannelOptions) -> Self {
        AgentOptions {
            channel,
            metrics: MetricsSource::default(),
            addresses: Vec::new(),
            links: Vec::new(),
            heartbeat_interval: Duration::from_secs(wire::HEARTBEAT_S),
            concurrency: DEFAULT_CONCURRENCY,
            source: SourceAddresses::NONE,
        }
    }
}

/// Runs `vantage agent` until `shutdown` resolves: enrolls (or loads the saved identity),
/// then heartbeats, probing too while the server asks for it.
///
/// Returns an error only when it cannot join the channel for a reason that will not pass by
/// itself; a server that is down or refuses heartbeats is retried.
pub async fn run_agent(opts: AgentOptions, shutdown: impl Future<Output = ()>) -> Result<()> {
    run_until(&opts.channel, Role::Node, |c| heartbeat_loop(c, &opts), shutdown).await
}

/// The prober loop of a node, on or off as the server says. Dropping it stops the loop.
#[derive(Debug, Default)]
struct Probing {
    task: JoinSet<()>,
    limit_logged: bool,
}

impl Probing {
    async fn set(&mut self, on: bool, client: &Arc<ChannelClient>, opts: &AgentOptions) {
        let concurrency = opts.concurrency;
        // A loop that ended (it only ends by panicking) is started again below.
        while let Some(done) = self.task.try_join_next() {
            if let Err(e) = done {
                tracing::error!(error = %e, "the prober loop stopped unexpectedly");
            }
        }
        match (on, self.task.is_empty()) {
            (true, true) => {
                if !self.limit_logged {
                    log_nofile_limit(concurrency);
                    self.limit_logged = true;
                }
                tracing::info!("the server asks this node to probe too: prober loop started");
                self.task.spawn(prober_loop(client.clone(), Endpoints::NODE, concurrency, opts.source));
            }
            (false, false) => {
                self.task.abort_all();
                while self.task.join_next().await.is_some() {}
                tracing::info!("the server no longer asks this node to probe: prober loop stopped");
            }
            _ => {}
        }
    }
}

async fn heartbeat_loop(client: Arc<ChannelClient>, opts: &AgentOptions) {
    let hostname = opts.channel.hostname.clone().unwrap_or_else(crate::host::hostname);
    let mut beat = Beat {
        sampler: Sampler::new(opts.metrics.clone()),
        last_metrics_error: None,
        last_address_error: None,
    };
    let mut probing = Probing::default();
    let mut refusals: u32 = 0;
    let mut accepted_once = false;
    loop {
        let started = Instant::now();
        let heartbeat = beat.heartbeat(opts, &hostname);
        let wait = match client.post::<_, HeartbeatReply>(wire::NODE_HEARTBEAT, &heartbeat).await {
            Ok(reply) => {
                if refusals > 0 || !accepted_once {
                    tracing::info!(
                        addresses = heartbeat.addresses.len(),
                        metrics = heartbeat.metrics.is_some(),
                        also_probes = reply.also_probes,
                        "heartbeat accepted"
                    );
                }
                (refusals, accepted_once) = (0, true);
                probing.set(reply.also_probes, &client, opts).await;
                if let Err(e) = client.renew_if_due(Some(reply.renew_in_s)).await {
                    tracing::warn!(error = %e, "certificate renewal failed; trying again next heartbeat");
                }
                opts.heartbeat_interval
            }
            Err(e) if e.is_identity_refused() => {
                refusals = refusals.saturating_add(1);
                let wait = opts
                    .heartbeat_interval
                    .saturating_mul(1 << refusals.min(6))
                    .min(MAX_BACKOFF)
                    .max(opts.heartbeat_interval);
                tracing::warn!(retry_in_s = wait.as_secs(), "the server refused this node: {}", e.reason());
                wait
            }
            Err(e) => {
                tracing::warn!(error = %e, "heartbeat failed; trying again next heartbeat");
                opts.heartbeat_interval
            }
        };
        tokio::time::sleep_until((started + wait).into()).await;
    }
}

/// What one heartbeat needs between beats.
struct Beat {
    sampler: Sampler,
    last_metrics_error: Option<String>,
    last_address_error: Option<String>,
}

impl Beat {
    fn heartbeat(&mut self, opts: &AgentOptions, hostname: &str) -> Heartbeat {
        let metrics = match self.sampler.sample() {
            Ok(m) => {
                if self.last_metrics_error.take().is_some() {
                    tracing::info!("host metrics readable again");
                }
                Some(m)
            }
            Err(e) => {
                // Logged when it changes, not every heartbeat.
                let text = e.to_string();
                if self.last_metrics_error.as_deref() != Some(&text) {
                    tracing::warn!(error = %text, "heartbeats go without host metrics");
                    self.last_metrics_error = Some(text);
                }
                None
            }
        };
        let addresses = if opts.addresses.is_empty() {
            match crate::host::discover_addresses() {
                Ok(a) => {
                    self.last_address_error = None;
                    a
                }
                Err(e) => {
                    let text = e.to_string();
                    if self.last_address_error.as_deref() != Some(&text) {
                        tracing::warn!(error = %text, "cannot list the host's addresses");
                        self.last_address_error = Some(text);
                    }
                    Vec::new()
                }
            }
        } else {
            opts.addresses.clone()
        };
        let mut capabilities = Vec::with_capacity(2);
        if metrics.is_some() {
            capabilities.push(CAP_METRICS.to_owned());
        }
        capabilities.push(CAP_PROBE_HEALTH.to_owned());
        Heartbeat {
            version: crate::VERSION.to_owned(),
            hostname: hostname.to_owned(),
            metrics,
            addresses,
            capabilities,
            links: opts.links.clone(),
        }
    }
}
