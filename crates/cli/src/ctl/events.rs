//! `vantage ctl events`: the fleet's events as lines to read during an incident — the stored
//! ones first, then, with `--follow`, each as the server decides it.

use std::time::SystemTime;

use vantage_control::events::FleetEvent;
use vantage_core::Timestamp;
use vantage_server::views::Items;

use crate::follow::Streamed;

use super::args::EventArgs;
use super::client::Client;
use super::query;

/// Stored events printed before following, unless `--limit` or `--since` says otherwise.
const RECENT: u32 = 20;

/// Prints the events of `a`'s filters, `cluster` and `node` being its flags resolved to ids.
pub(super) async fn events(
    c: &Client,
    a: &EventArgs,
    (cluster, node): (Option<i64>, Option<i64>),
    json: bool,
) -> anyhow::Result<()> {
    let mut filters: Vec<(&str, String)> = Vec::new();
    if let Some(id) = cluster {
        filters.push(("cluster", id.to_string()));
    }
    if let Some(id) = node {
        filters.push(("node", id.to_string()));
    }
    if let Some(k) = &a.kind {
        filters.push(("kind", k.clone()));
    }
    let mut list = filters.clone();
    if let Some(s) = &a.since {
        list.push(("since", s.clone()));
    }
    let limit = a.limit.unwrap_or(if a.since.is_some() { 200 } else { RECENT });
    list.push(("limit", limit.to_string()));
    // The newest stored event of all, read before the list: following after it misses
    // nothing the list could not show, even when the list is empty.
    let newest: Option<Items<FleetEvent>> =
        if a.follow { Some(c.get("/v1/events?limit=1").await?) } else { None };
    let stored: Items<FleetEvent> = c.get(&format!("/v1/events{}", query(&list))).await?;
    let today = date(Timestamp::from_system(SystemTime::now()));
    for e in &stored.items {
        print_event(e, json, &today);
    }
    if !a.follow {
        return Ok(());
    }
    // The stream resumes after the last event printed; with none printed, after the newest
    // stored before the list was read (or from the first: none was).
    let newest = newest.and_then(|n| n.items.last().map(|e| e.id));
    let after = stored.items.last().map(|e| e.id).or(newest).unwrap_or(0);
    let src = c.source(query(&filters).trim_start_matches('?').to_owned());
    let refused = crate::follow::follow(
        &src,
        Some(after),
        |s| match s {
            Streamed::Event(e) => print_event(&e, json, &date(Timestamp::from_system(SystemTime::now()))),
            Streamed::Gap(g) => {
                eprintln!("event stream: events after {} may be missing: {}", g.after, g.reason)
            }
        },
        |err| eprintln!("event stream: {err:#}; opening it again"),
    )
    .await;
    Err(refused.context("the server refuses the event stream"))
}

/// `2026-12-01`.
fn date(t: Timestamp) -> String {
    t.to_string().chars().take(10).collect()
}

/// One line: `20:31:07  address_failing     127.0.0.10 of edge-0 is failing: …`, the date
/// before the time when it is not today's; or the event as one JSON line.
fn print_event(e: &FleetEvent, json: bool, today: &str) {
    let line = if json {
        serde_json::to_string(e).unwrap_or_default()
    } else {
        let at = e.at.to_string();
        let day = date(e.at);
        let time: String = at.chars().skip(11).take(8).collect();
        let when = if day == today { time } else { format!("{day} {time}") };
        format!("{when}  {:<19} {}", e.kind.as_str(), e.summary)
    };
    // `ctl`'s own println!: a closed output (`| head`) ends the command quietly.
    println!("{line}");
}
