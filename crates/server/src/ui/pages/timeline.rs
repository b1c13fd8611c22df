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
    let events: Items<FleetEvent> = api.get_stored(&format!("/v1/events?{filter}&limit={SHOWN}")).await?;
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
    let changes: Items<FleetEvent> = api
        .get_stored(&format!(
            "/v1/events?node={node}&kind=address_unreachable,address_reachable&since={from}&limit=1000"
        ))
        .await?;
    let revisions: Items<FleetEvent> =
        api.get_stored(&format!("/v1/events?cluster={cluster}&kind=revision&since={from}&limit=200")).await?;
    let mut marks = outages(changes.items, (since, until));
    for e in revisions.items {
        marks.push(chart::Mark { at: e.at, until: None, label: e.summary });
    }
    Ok(marks)
}

/// The outages among an address's `address_unreachable` and `address_reachable` events, oldest
/// first, from `since` to `until`: each unreachable until reachable again, or still.
fn outages(events: Vec<FleetEvent>, (since, until): (Timestamp, Timestamp)) -> Vec<chart::Mark> {
    let mut marks = Vec::new();
    let mut open: BTreeMap<String, Timestamp> = BTreeMap::new();
    for e in events {
        let address = e.details["address"].as_str().unwrap_or_default().to_owned();
        match e.kind {
            EventKind::AddressUnreachable => {
                open.entry(address).or_insert(e.at);
            }
            _ => {
                // Reachable again: the outage began where it opened, or before the range. An
                // address that answered again while only failing was never out.
                let from = e.details["from"].as_str();
                if !matches!(from, Some("unreachable" | "recovering")) && !open.contains_key(&address) {
                    continue;
                }
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
    marks
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: Timestamp = Timestamp::from_secs(1_800_000_000);

    fn event(kind: EventKind, at: Timestamp, from: &str) -> FleetEvent {
        FleetEvent {
            id: 1,
            at,
            kind,
            cluster: None,
            node: None,
            summary: String::new(),
            details: serde_json::json!({"address": "192.0.2.1", "from": from}),
        }
    }

    #[test]
    fn an_address_that_only_failed_draws_no_outage() {
        let (since, until) = (T0, T0.plus_secs(900));
        let answered = event(EventKind::AddressReachable, T0.plus_secs(60), "failing");
        assert!(outages(vec![answered], (since, until)).is_empty());
        // Back from an outage that began before the range: shaded from the range's start.
        let back = event(EventKind::AddressReachable, T0.plus_secs(60), "recovering");
        let marks = outages(vec![back], (since, until));
        assert_eq!(marks.iter().map(|m| (m.at, m.until)).collect::<Vec<_>>(), [(T0, Some(T0.plus_secs(60)))]);
        // One that opens in the range and is still on runs to its end.
        let out = event(EventKind::AddressUnreachable, T0.plus_secs(100), "failing");
        let marks = outages(vec![out], (since, until));
        assert_eq!(
            marks.iter().map(|m| (m.at, m.until)).collect::<Vec<_>>(),
            [(T0.plus_secs(100), Some(until))]
        );
    }
}
