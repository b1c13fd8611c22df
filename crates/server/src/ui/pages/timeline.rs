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

/// What the history charts of a node mark from `since` to `until`: its addresses' outages
/// (unreachable until reachable again, or still) and its cluster's revisions.
pub(in crate::ui) async fn marks(
    api: &Client,
    (cluster, node): (i64, i64),
    (since, until): (Timestamp, Timestamp),
) -> Result<Vec<chart::Mark>, PageError> {
    let from = urlencode(&since.to_string());
    let outages: Items<FleetEvent> = api
        .get(&format!(
            "/v1/events?node={node}&kind=address_unreachable,address_reachable&since={from}&limit=1000"
        ))
        .await?;
    let revisions: Items<FleetEvent> =
        api.get(&format!("/v1/events?cluster={cluster}&kind=revision&since={from}&limit=200")).await?;
    let mut marks = Vec::new();
    let mut open: BTreeMap<String, Timestamp> = BTreeMap::new();
    for e in outages.items {
        let address = e.details["address"].as_str().unwrap_or_default().to_owned();
        match e.kind {
            EventKind::AddressUnreachable => {
                open.entry(address).or_insert(e.at);
            }
            _ => {
                // Reachable again: the outage began where it opened, or before the range.
                let began = open.remove(&address).unwrap_or(since);
                let label = format!("{address} unreachable for {}", span(e.at.millis_since(began)));
                marks.push(chart::Mark { at: began, until: Some(e.at), label });
            }
        }
    }
    for (address, began) in open {
        let label = format!("{address} unreachable since {}", format::absolute(began));
        marks.push(chart::Mark { at: began, until: Some(until), label });
    }
    for e in revisions.items {
        marks.push(chart::Mark { at: e.at, until: None, label: e.summary });
    }
    Ok(marks)
}
