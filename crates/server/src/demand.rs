//! Demand by region from Vantage's own traffic (SPEC §10a): each door redirect and steering
//! poll whose client a region claims (by its networks, else its places) is counted — in
//! `/metrics` at once, and handed to the control core in batches, where monitors that learn
//! their audience weights weigh by it. The DNS server counts its address answers by the
//! client's network ([`vantage_dns::DnsDemand`]); each network is placed in a region here,
//! once per hand-over, off the query path.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use vantage_control::mirrors::doors::Doors;
use vantage_core::geo::Place;
use vantage_dns::DnsMetrics;

use crate::app::App;
use crate::owner::Input;

/// How often the counts go to the control core.
const HANDED_EVERY: Duration = Duration::from_secs(5);

/// Where Vantage saw a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    /// A door's redirect (`/go`).
    Door,
    /// A player's steering poll (`/steer`).
    Steer,
    /// An address answer of the DNS server, by the client subnet or the resolver.
    Dns,
}

impl Source {
    fn label(self) -> &'static str {
        match self {
            Source::Door => "door",
            Source::Steer => "steer",
            Source::Dns => "dns",
        }
    }
}

/// Counts not yet handed to the core: a few regions, each counted under a lock held for one
/// addition (as the metric families are).
#[derive(Debug, Default)]
pub(crate) struct Pending(Mutex<BTreeMap<String, u64>>);

impl Pending {
    fn add(&self, region: &str, n: u64) {
        let mut m = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        *m.entry(region.to_owned()).or_default() += n;
    }

    fn take(&self) -> Vec<(String, u64)> {
        let mut m = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        std::mem::take(&mut *m).into_iter().collect()
    }
}

/// Counts a request from `client` (placed at `place` by the geo databases) seen at `source`,
/// when a region of `doors` (the published doors the request was answered from) claims it;
/// returns that region.
pub(crate) fn count<'d>(
    app: &App,
    doors: &'d Doors,
    (client, place): (IpAddr, Option<&Place>),
    source: Source,
) -> Option<&'d str> {
    count_n(app, doors, (client, place), source, 1)
}

fn count_n<'d>(
    app: &App,
    doors: &'d Doors,
    (client, place): (IpAddr, Option<&Place>),
    source: Source,
    n: u64,
) -> Option<&'d str> {
    let region = doors.region_of(client, place)?;
    app.metrics().monitors().demand(region, source.label(), n);
    app.demand().add(region, n);
    Some(region)
}

/// Places the networks the DNS server counted since the last call in their regions (a geo
/// look-up each, on a blocking thread: up to 16,384 of them).
async fn place_dns(app: &Arc<App>, dns: &Arc<DnsMetrics>) {
    let (app, dns) = (app.clone(), dns.clone());
    let placed = tokio::task::spawn_blocking(move || {
        let doors = app.doors();
        for (network, n) in dns.demand().take() {
            count_n(&app, &doors, (network, app.place(network).as_ref()), Source::Dns, n);
        }
    });
    if let Err(e) = placed.await {
        tracing::warn!(error = %e, "placing the DNS demand failed");
    }
}

/// Hands the counts to the control core every few seconds, and once more when `stopped`.
pub(crate) async fn hand_over(app: Arc<App>, dns: Arc<DnsMetrics>, mut stopped: watch::Receiver<bool>) {
    let mut every = tokio::time::interval(HANDED_EVERY);
    loop {
        let stopping = tokio::select! {
            _ = every.tick() => false,
            _ = stopped.changed() => true,
        };
        place_dns(&app, &dns).await;
        let counts = app.demand().take();
        if !counts.is_empty() {
            app.relay(crate::support::now(), || vantage_control::Relayed::Demand { counts: counts.clone() });
        }
        if (!counts.is_empty() && app.owner().tell(Input::Demand(counts)).await.is_err()) || stopping {
            return;
        }
    }
}
