//! The recent timeline of a cluster or a node: its newest events from `/v1/events`, newest
//! first, each with its time and kind, as the node and cluster pages show them.

use super::*;
use vantage_control::events::{EventKind, FleetEvent};

/// Events a page shows.
const SHOWN: u32 = 20;

/// One row of the timeline.
#[derive(Debug)]
pub(in crate::ui) struct EventRow {
    pub(in crate::ui) at: Markup,
    pub(in crate::ui) kind: Markup,
    pub(in crate::ui) summary: String,
}

/// How a kind reads at a glance: bad news red, good news green, the rest neutral.
fn tone(k: EventKind) -> Tone {
    match k {
        EventKind::AddressUnreachable | EventKind::PublicationFailed | EventKind::AlertFired => Tone::Bad,
        EventKind::AddressFailing | EventKind::AddressUnverified | EventKind::RuleActivated => Tone::Warn,
        EventKind::AddressReachable
        | EventKind::AddressVerified
        | EventKind::AlertResolved
        | EventKind::RuleRecovered
        | EventKind::Published => Tone::Good,
        _ => Tone::Neutral,
    }
}

/// The newest events that `filter` (`cluster=3`, `node=7`) selects, newest first.
pub(in crate::ui) async fn recent(
    api: &Client,
    filter: &str,
    now: Timestamp,
) -> Result<Vec<EventRow>, PageError> {
    let events: Items<FleetEvent> = api.get(&format!("/v1/events?{filter}&limit={SHOWN}")).await?;
    Ok(events
        .items
        .into_iter()
        .rev()
        .map(|e| EventRow {
            at: time(e.at, now),
            kind: badge(tone(e.kind), &e.kind.as_str().replace('_', " ")),
            summary: e.summary,
        })
        .collect())
}
