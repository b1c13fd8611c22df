//! Confirmations (the control plane's cross-region confirmation): a request held open on the
//! channel until the server asks this prober to probe some of its targets at once, because
//! another prober saw them change. Each answer becomes a small round of those targets, beside
//! the regular rounds (it never adds attempts to a round already running), reported like any
//! round but marked as a confirmation.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use vantage_core::wire::Recheck;
use vantage_probe::{ProbeTarget, RoundConfig, run_round};

use crate::client::{ChannelClient, now};
use crate::prober::{Endpoints, reports};

/// What the last work answer said to probe, as the rounds run it.
#[derive(Debug, Clone)]
pub(crate) struct CurrentWork {
    pub(crate) targets: Vec<ProbeTarget>,
    pub(crate) round: RoundConfig,
}

/// Pause after a failed recheck request before the next, so a server that is down or refuses
/// is not asked in a tight loop.
const RETRY: Duration = Duration::from_secs(5);
/// Pause after a server without the recheck route (older than this agent) answered 404.
const UNSUPPORTED_RETRY: Duration = Duration::from_secs(300);

/// Asks for confirmations forever; the caller stops it by dropping it.
pub(crate) async fn recheck_loop(
    client: Arc<ChannelClient>,
    ep: Endpoints,
    mut work: watch::Receiver<Option<Arc<CurrentWork>>>,
) {
    // Nothing to confirm before the first work answer.
    if work.wait_for(Option::is_some).await.is_err() {
        return;
    }
    loop {
        let asked: Recheck = match client.get(ep.recheck).await {
            Ok(r) => r,
            Err(e) => {
                let wait = if matches!(e, crate::Error::Refused { status: 404, .. }) {
                    UNSUPPORTED_RETRY
                } else {
                    RETRY
                };
                tracing::debug!(error = %e, retry_in_s = wait.as_secs(), "recheck request failed");
                tokio::time::sleep(wait).await;
                continue;
            }
        };
        if asked.targets.is_empty() {
            continue;
        }
        let Some(current) = work.borrow().clone() else { continue };
        let wanted: HashSet<&str> = asked.targets.iter().map(String::as_str).collect();
        let targets: Vec<ProbeTarget> =
            current.targets.iter().filter(|t| wanted.contains(t.key.as_str())).cloned().collect();
        tracing::debug!(asked = asked.targets.len(), probing = targets.len(), "confirming");
        if targets.is_empty() {
            continue;
        }
        let started_at = now();
        let results = run_round(&targets, &current.round).await;
        for mut report in reports(started_at, now(), results) {
            // Said, so that the server keeps these few targets out of the last round's figures.
            report.confirmation = true;
            if let Err(e) = client.post_no_content(ep.report, &report).await {
                tracing::warn!(error = %e, "confirmation report failed");
            }
        }
    }
}
