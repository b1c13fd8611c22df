//! The event stream over HTTP: `GET /v1/events` lists stored events (oldest first, filtered by
//! cluster, node, kind and time), and `GET /v1/events/stream` follows them as server-sent
//! events — first the stored ones the client asks for (`Last-Event-ID`, `after` or `since`),
//! then each one as the control core decides it.

use std::collections::{BTreeMap, VecDeque};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::routing::get;
use futures_util::Stream;
use tokio::sync::broadcast::error::RecvError;
use vantage_control::events::{EventKind, FleetEvent};
use vantage_core::Timestamp;
use vantage_core::ids::{ClusterId, NodeId};
use vantage_store::{EventFilter, EventRow};

use super::{Api, Op};
use crate::app::App;
use crate::error::ApiError;
use crate::events::MAX_STREAMS;
use crate::support::now;
use crate::views::Items;

/// Events a list answers unless `limit` says otherwise.
const DEFAULT_LIMIT: u32 = 200;
/// Stored events a stream replays before it goes live.
const REPLAY: u32 = 1_000;
/// A comment line this often keeps a quiet stream (and the proxies on its way) open.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

pub(super) fn routes(api: &mut Api) {
    api.add(
        Op::get(
            "/v1/events",
            "events",
            "Stored events, oldest first (cluster, node, kind=a,b, since=RFC 3339 time or 15m/2h/1d, after=id, limit)",
        )
        .lists::<FleetEvent>()
        .unavailable_when("storage is unavailable"),
        get(list),
    );
    api.add(
        Op::get(
            "/v1/events/stream",
            "events",
            "Follow events as server-sent events (text/event-stream): the stored ones after Last-Event-ID, after= or since=, then each as it happens; same filters as /v1/events",
        )
        .unavailable_when("too many streams are open"),
        get(stream),
    );
}

/// What a list or a stream is filtered by.
#[derive(Debug, Clone, Default)]
struct Filter {
    cluster: Option<ClusterId>,
    node: Option<NodeId>,
    kinds: Vec<EventKind>,
    since: Option<Timestamp>,
    after: Option<u64>,
    limit: u32,
}

impl Filter {
    fn parse(q: &BTreeMap<String, String>, now: Timestamp) -> Result<Filter, ApiError> {
        const KNOWN: [&str; 6] = ["cluster", "node", "kind", "since", "after", "limit"];
        if let Some(k) = q.keys().find(|k| !KNOWN.contains(&k.as_str())) {
            return Err(ApiError::invalid(k.clone(), format!("unknown filter; use {}", KNOWN.join(", "))));
        }
        let whole = |field: &'static str| {
            q.get(field)
                .map(|v| {
                    v.parse::<u64>()
                        .map_err(|_| ApiError::invalid(field, format!("must be a whole number, got {v:?}")))
                })
                .transpose()
        };
        let id = |field: &'static str| {
            whole(field)?
                .map(|v| i64::try_from(v).map_err(|_| ApiError::invalid(field, "too large")))
                .transpose()
        };
        let kinds = match q.get("kind") {
            None => Vec::new(),
            Some(list) => list
                .split(',')
                .map(|k| k.trim().parse::<EventKind>().map_err(|e| ApiError::invalid("kind", e)))
                .collect::<Result<_, _>>()?,
        };
        let limit = match whole("limit")? {
            None => DEFAULT_LIMIT,
            Some(n @ 1..=10_000) => u32::try_from(n).unwrap_or(DEFAULT_LIMIT),
            Some(n) => return Err(ApiError::invalid("limit", format!("1 to 10000, got {n}"))),
        };
        Ok(Filter {
            cluster: id("cluster")?.map(ClusterId),
            node: id("node")?.map(NodeId),
            kinds,
            since: q.get("since").map(|s| since(s, now)).transpose()?,
            after: whole("after")?,
            limit,
        })
    }

    fn store(&self) -> EventFilter {
        EventFilter {
            cluster: self.cluster.map(|c| c.0),
            node: self.node.map(|n| n.0),
            since: self.since,
            after: self.after.map(|a| i64::try_from(a).unwrap_or(i64::MAX)),
            kinds: self.kinds.iter().map(|k| k.as_str().to_owned()).collect(),
            limit: self.limit,
        }
    }

    fn matches(&self, e: &FleetEvent) -> bool {
        self.cluster.is_none_or(|c| e.cluster == Some(c))
            && self.node.is_none_or(|n| e.node == Some(n))
            && (self.kinds.is_empty() || self.kinds.contains(&e.kind))
    }
}

/// `since`: an RFC 3339 time, or how long ago (`90s`, `15m`, `2h`, `1d`).
fn since(s: &str, now: Timestamp) -> Result<Timestamp, ApiError> {
    if let Ok(t) = s.parse::<Timestamp>() {
        return Ok(t);
    }
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (n, unit) = s.split_at(split);
    let unit_ms: i64 = match unit {
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => 0,
    };
    match n.parse::<i64>() {
        Ok(n) if unit_ms > 0 && n <= 3_650 * 86_400 => Ok(now.plus_millis(-n * unit_ms)),
        _ => Err(ApiError::invalid(
            "since",
            format!("an RFC 3339 time or how long ago (90s, 15m, 2h, 1d), got {s:?}"),
        )),
    }
}

/// A stored event as the API shows it; a row whose kind this version does not know (written
/// by a newer one) is left out.
fn event_of(r: EventRow) -> Option<FleetEvent> {
    Some(FleetEvent {
        id: u64::try_from(r.id).ok()?,
        at: r.at,
        kind: r.kind.parse().ok()?,
        cluster: r.cluster.map(ClusterId),
        node: r.node.map(NodeId),
        summary: r.summary,
        details: r.details,
    })
}

async fn list(
    State(app): State<Arc<App>>,
    Query(q): Query<BTreeMap<String, String>>,
) -> Result<Json<Items<FleetEvent>>, ApiError> {
    let f = Filter::parse(&q, now())?;
    let rows = app.store().events(&f.store()).await?;
    Ok(Json(rows.into_iter().filter_map(event_of).collect::<Vec<_>>().into()))
}

/// One stream's place: events to send before waiting for more, and the last one sent.
struct Cursor {
    filter: Filter,
    pending: VecDeque<FleetEvent>,
    last: u64,
    rx: tokio::sync::broadcast::Receiver<Arc<FleetEvent>>,
    app: Arc<App>,
    _permit: tokio::sync::OwnedSemaphorePermit,
}

impl Cursor {
    /// Reads what storage has after the last event sent (a replay, or a stream that fell
    /// behind the live channel).
    async fn replay(&mut self) {
        let mut f = self.filter.store();
        f.limit = REPLAY;
        if self.last > 0 || self.filter.since.is_none() {
            f.after = Some(i64::try_from(self.last).unwrap_or(i64::MAX));
            f.since = None;
        }
        match self.app.store().events(&f).await {
            Ok(rows) => self.pending.extend(rows.into_iter().filter_map(event_of)),
            Err(e) => tracing::warn!(error = %e, "event stream: cannot read stored events"),
        }
    }

    async fn next(mut self) -> Option<(Result<Event, Infallible>, Cursor)> {
        loop {
            if let Some(e) = self.pending.pop_front() {
                if e.id <= self.last {
                    continue;
                }
                self.last = e.id;
                return Some((Ok(sse(&e)), self));
            }
            match self.rx.recv().await {
                Ok(e) if e.id > self.last && self.filter.matches(&e) => {
                    self.last = e.id;
                    return Some((Ok(sse(&e)), self));
                }
                Ok(_) => {}
                Err(RecvError::Lagged(_)) => self.replay().await,
                Err(RecvError::Closed) => return None,
            }
        }
    }
}

fn sse(e: &FleetEvent) -> Event {
    let data = serde_json::to_string(e).unwrap_or_default();
    Event::default().id(e.id.to_string()).event(e.kind.as_str()).data(data)
}

async fn stream(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Query(q): Query<BTreeMap<String, String>>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let mut filter = Filter::parse(&q, now())?;
    if let Some(v) = headers.get("last-event-id") {
        let id = v.to_str().ok().and_then(|s| s.trim().parse::<u64>().ok());
        filter.after = Some(id.ok_or_else(|| ApiError::invalid("Last-Event-ID", "must be an event id"))?);
    }
    let Some((permit, rx)) = app.events().open() else {
        return Err(ApiError::Unavailable(format!("{MAX_STREAMS} event streams are open; close one first")));
    };
    // Without a place to resume from, the stream is live only: the channel holds nothing
    // from before it was opened.
    let replay = filter.after.is_some() || filter.since.is_some();
    let last = filter.after.unwrap_or(0);
    let mut cursor = Cursor { filter, pending: VecDeque::new(), last, rx, app, _permit: permit };
    if replay {
        cursor.replay().await;
    }
    let events = futures_util::stream::unfold(cursor, Cursor::next);
    Ok(Sse::new(events).keep_alive(KeepAlive::new().interval(KEEP_ALIVE)))
}
