//! Demand by region from Vantage's own traffic (SPEC §10a): each door redirect and steering
//! poll whose client a region claims (by its networks, else its places) is counted — in
//! `/metrics` at once, and handed to the control core in batches, where monitors that learn
//! their audience weights weigh by it.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use vantage_control::mirrors::doors::Doors;
use vantage_core::geo::Place;

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
}

impl Source {
    fn label(self) -> &'static str {
        match self {
            Source::Door => "door",
            Source::Steer => "steer",
        }
    }
}

/// Counts not yet handed to the core: a few regions, each counted under a lock held for one
/// addition (as the metric families are).
#[derive(Debug, Default)]
pub(crate) struct Pending(Mutex<BTreeMap<String, u64>>);

impl Pending {
    fn add(&self, region: &str) {
        let mut m = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        *m.entry(region.to_owned()).or_default() += 1;
    }

    fn take(&self) -> Vec<(String, u64)> {
        let mut m = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        std::mem::take(&mut *m).into_iter().collect()
    }
}

/// Counts a request from `client` (placed at `place` by the geo databases) seen at `source`,
/// when a region of `doors` (the published doors the request was answered from) claims it.
pub(crate) fn count(app: &App, doors: &Doors, (client, place): (IpAddr, Option<&Place>), source: Source) {
    if let Some(region) = doors.region_of(client, place) {
        app.metrics().monitors().demand(region, source.label());
        app.demand().add(region);
    }
}

/// Hands the counts to the control core every few seconds, and once more when `stopped`.
pub(crate) async fn hand_over(app: Arc<App>, mut stopped: watch::Receiver<bool>) {
    let mut every = tokio::time::interval(HANDED_EVERY);
    loop {
        let stopping = tokio::select! {
            _ = every.tick() => false,
            _ = stopped.changed() => true,
        };
        let counts = app.demand().take();
        if (!counts.is_empty() && app.owner().tell(Input::Demand(counts)).await.is_err()) || stopping {
            return;
        }
    }
}
