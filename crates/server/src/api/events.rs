//! The event stream over HTTP: `GET /v1/events` lists stored events (oldest first, filtered by
//! cluster, node, kind and time), and `GET /v1/events/stream` follows them as server-sent
//! events — first the stored ones the client asks for (`Last-Event-ID`, `after` or `since`),
//! then each one as the control core decides it.

use std::collections::{BTreeMap, VecDeque};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::{Extension, Query, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::routing::get;
use futures_util::Stream;
use tokio::sync::broadcast::error::RecvError;
use vantage_control::events::{EventKind, FleetEvent};
use vantage_core::Timestamp;
use vantage_core::ids::{ClusterId, NodeId};
use vantage_store::{EventFilter, EventRow};

use super::{Api, Op, TokenId};
use crate::app::App;
use crate::error::ApiError;
use crate::events::MAX_STREAMS;
use crate::support::now;
use crate::views::{EventGap, Items};

/// Events a list answers unless `limit` says otherwise.
const DEFAULT_LIMIT: u32 = 200;
/// Stored events a stream reads at once while it catches up (page after page, oldest first).
const PAGE: u32 = 1_000;
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
            "Follow events as server-sent events (text/event-stream): every one after Last-Event-ID, after= or since= (oldest first, however many), then each as it happens; same filters as /v1/events. An event `gap` (data: EventGap) says events may be missing; the stream ends when its admin token is deleted",
        )
        .streams::<FleetEvent, EventGap>()
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
        self.since.is_none_or(|t| e.at >= t)
            && self.cluster.is_none_or(|c| e.cluster == Some(c))
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

/// One item a stream sends.
#[derive(Debug)]
enum Item {
    Event(Arc<FleetEvent>),
    Gap(EventGap),
}

/// One stream's place: what to send before waiting for more, and how far it got.
struct Cursor {
    filter: Filter,
    pending: VecDeque<Item>,
    /// Every event up to this id was sent, or does not match.
    last: u64,
    /// Storage was read up to this id (every matching event up to it is sent or pending).
    paged: u64,
    /// Recent events or storage are still to be read before waiting for live ones.
    catching_up: bool,
    /// `last` is the client's, not one this stream sent: whether storage still has it is
    /// checked once (if not, what followed it may be gone too).
    check_resume: bool,
    rx: tokio::sync::broadcast::Receiver<Arc<FleetEvent>>,
    /// The admin token the stream was opened with, checked again at every configuration change.
    token: TokenId,
    config: tokio::sync::watch::Receiver<u64>,
    app: Arc<App>,
    _permit: tokio::sync::OwnedSemaphorePermit,
}

impl Cursor {
    /// Reads what follows the stream's place: the hub's recent events when they reach back
    /// that far, else one page of storage (oldest first: the next call reads the next one),
    /// and once storage is read to its end, the recent events after it. Whatever cannot be
    /// read becomes a `gap`. Called only with nothing pending.
    async fn catch_up(&mut self) {
        self.last = self.last.max(self.paged);
        let recent = self.app.events().recent(self.last);
        if self.last > recent.newest {
            let resume = recent.held_from.saturating_sub(1).min(recent.newest);
            let last = self.last;
            self.gap(
                last,
                resume,
                format!(
                    "event {} is newer than any this server made (newest {}): another database, or a clock set back; the stream goes on with the recent events",
                    self.last, recent.newest
                ),
            );
            self.last = resume;
            self.paged = resume;
            return;
        }
        if recent.covers(self.last) {
            self.take_recent(recent.events);
            return;
        }
        let app = self.app.clone();
        let store = app.store();
        // An id of this process is either stored or held, or the gap below says so; and an
        // id a gap told a client to resume from was never an event's: only an older client
        // id is looked up.
        if std::mem::take(&mut self.check_resume) && self.last > 0 && self.last < recent.base {
            let probe = EventFilter { after: Some(id_of(self.last - 1)), limit: 1, ..EventFilter::default() };
            match store.events_after(&probe).await {
                Ok(rows) if rows.first().is_some_and(|r| r.id == id_of(self.last)) => {}
                Ok(_) => {
                    let last = self.last;
                    self.gap(last, last, format!("event {last} is no longer stored (past the retention) or never was: events after it may be missing"));
                }
                Err(e) => tracing::warn!(error = %e, "event stream: cannot read stored events"),
            }
        }
        // Read before the page: every event up to it was stored when the page was read.
        let stored = store.last_event().await.map(|id| u64::try_from(id).unwrap_or(0));
        let mut f = self.filter.store();
        f.after = Some(id_of(self.last));
        f.limit = PAGE;
        let page = match (stored, store.events_after(&f).await) {
            (Ok(stored), Ok(page)) => Ok((stored, page)),
            (Err(e), _) | (_, Err(e)) => Err(e),
        };
        let (stored, page) = match page {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(error = %e, "event stream: cannot read stored events");
                let resume = recent.held_from.saturating_sub(1);
                let last = self.last;
                self.gap(
                    last,
                    resume,
                    format!("storage cannot be read ({e}): events after {last} may be missing"),
                );
                self.paged = resume;
                self.take_recent(self.app.events().recent(resume).events);
                return;
            }
        };
        let full = page.len() >= PAGE as usize;
        self.paged = page.last().map_or(self.last, |r| u64::try_from(r.id).unwrap_or(0));
        self.pending.extend(page.into_iter().filter_map(event_of).map(|e| Item::Event(Arc::new(e))));
        if full {
            return;
        }
        // Storage is read to its end: the recent events must follow on from it. Ids up to
        // the start's base that are neither stored nor held cannot be told from ids never
        // made (a start's numbering jumps); this process's own can.
        let covered = self.paged.max(stored).max(recent.base);
        let recent = self.app.events().recent(covered);
        if !recent.covers(covered) {
            let resume = recent.held_from.saturating_sub(1);
            self.gap(
                covered,
                resume,
                format!("events {} to {resume} are neither stored yet nor still held", covered + 1),
            );
        }
        self.paged = self.paged.max(covered);
        self.take_recent(recent.events);
    }

    /// Queues the matching ones of `events` (the hub's, reaching back far enough) and goes live.
    fn take_recent(&mut self, events: Vec<Arc<FleetEvent>>) {
        self.pending.extend(events.into_iter().filter(|e| self.filter.matches(e)).map(Item::Event));
        self.catching_up = false;
    }

    /// Queues a gap: events after `after` (the last one queued before it) up to `resume` may
    /// be missing.
    fn gap(&mut self, after: u64, resume: u64, reason: String) {
        tracing::info!(after, resume, %reason, "event stream: gap");
        self.pending.push_back(Item::Gap(EventGap { after, resume, reason }));
    }

    /// Whether the stream's admin token is gone (marking the configuration seen); a revoked
    /// token ends the stream.
    fn revoked(&mut self) -> bool {
        self.config.borrow_and_update();
        let gone = !self.app.config().admin_tokens.contains_key(&self.token.0);
        if gone {
            tracing::info!(token = self.token.0, "event stream: its admin token is gone; closing it");
        }
        gone
    }

    async fn next(mut self) -> Option<(Result<Event, Infallible>, Cursor)> {
        loop {
            match self.pending.pop_front() {
                Some(Item::Event(e)) if e.id > self.last => {
                    self.last = e.id;
                    return Some((Ok(sse(&e)), self));
                }
                Some(Item::Event(_)) => continue,
                Some(Item::Gap(g)) => {
                    self.last = g.resume;
                    let data = serde_json::to_string(&g).unwrap_or_default();
                    return Some((
                        Ok(Event::default().id(g.resume.to_string()).event("gap").data(data)),
                        self,
                    ));
                }
                None => {}
            }
            if self.catching_up {
                // A long replay looks at its token between pages too.
                if self.config.has_changed().unwrap_or(true) && self.revoked() {
                    return None;
                }
                self.catch_up().await;
                continue;
            }
            tokio::select! {
                r = self.rx.recv() => match r {
                    Ok(e) if e.id > self.last && self.filter.matches(&e) => {
                        self.last = e.id;
                        return Some((Ok(sse(&e)), self));
                    }
                    Ok(_) => {}
                    Err(RecvError::Lagged(_)) => self.catching_up = true,
                    Err(RecvError::Closed) => return None,
                },
                changed = self.config.changed() => {
                    if changed.is_err() || self.revoked() {
                        return None;
                    }
                }
            }
        }
    }
}

/// An event id as storage keeps it.
fn id_of(id: u64) -> i64 {
    i64::try_from(id).unwrap_or(i64::MAX)
}

fn sse(e: &FleetEvent) -> Event {
    let data = serde_json::to_string(e).unwrap_or_default();
    Event::default().id(e.id.to_string()).event(e.kind.as_str()).data(data)
}

async fn stream(
    State(app): State<Arc<App>>,
    Extension(token): Extension<TokenId>,
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
    // Without a place to resume from, the stream is live only. The catching up is done by
    // the stream itself: the answer's head goes out at once.
    let last = filter.after.unwrap_or(0);
    // A token deleted between its check and this subscription is caught at the first look.
    let mut config = app.config_changes();
    config.mark_changed();
    let cursor = Cursor {
        catching_up: filter.after.is_some() || filter.since.is_some(),
        check_resume: filter.after.is_some(),
        filter,
        pending: VecDeque::new(),
        last,
        paged: last,
        rx,
        token,
        config,
        app,
        _permit: permit,
    };
    let events = futures_util::stream::unfold(cursor, Cursor::next);
    Ok(Sse::new(events).keep_alive(KeepAlive::new().interval(KEEP_ALIVE)))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use axum::body::Body;
    use axum::http::Request;
    use futures_util::StreamExt;
    use serde_json::json;
    use tower::ServiceExt;
    use vantage_control::Start;
    use vantage_store::Store;

    use super::*;
    use crate::app::{Actor, Parts};

    /// A control plane over a real store in a directory of its own, with its router and an
    /// admin token.
    struct Lab {
        _dir: tempfile::TempDir,
        app: Arc<App>,
        router: axum::Router,
        token: (i64, String),
        /// The id this process numbers after.
        base: u64,
    }

    async fn lab() -> Lab {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_sqlite(&dir.path().join("vantage.db")).await.unwrap();
        let ca = crate::ca::Ca::load_or_create(&dir.path().join("ca")).unwrap();
        let settings = crate::config::ServeConfig { data_dir: dir.path().into(), ..Default::default() };
        let metrics = Arc::new(crate::metrics::Metrics::new());
        // Nothing here is carried out: the streams are fed by hand.
        let (app, _decided) =
            App::new(Parts { start: Start::default(), store, metrics, settings, ca, replica: None });
        let token = crate::api::create_admin_token(&app, &Actor::system(), "ops", false).await.unwrap();
        let base = app.view().event_base;
        Lab { _dir: dir, router: crate::api::router(app.clone()), app, token, base }
    }

    fn event(id: u64) -> FleetEvent {
        FleetEvent {
            id,
            at: Timestamp::from_secs(1_800_000_000).plus_millis(i64::try_from(id % 1_000_000).unwrap()),
            kind: EventKind::Revision,
            cluster: Some(ClusterId(3)),
            node: None,
            summary: format!("event {id}"),
            details: json!({}),
        }
    }

    async fn store(app: &App, ids: impl Iterator<Item = u64>) {
        let rows: Vec<EventRow> = ids
            .map(event)
            .map(|e| EventRow {
                id: i64::try_from(e.id).unwrap(),
                at: e.at,
                kind: e.kind.as_str().into(),
                cluster: e.cluster.map(|c| c.0),
                node: None,
                summary: e.summary,
                details: e.details,
            })
            .collect();
        app.store().insert_events(&rows).await.unwrap();
    }

    /// An open stream's body, read block by block.
    struct Reader {
        body: axum::body::BodyDataStream,
        buf: String,
    }

    impl Reader {
        async fn open(router: &axum::Router, token: &str, last_event_id: Option<u64>) -> Reader {
            let mut req =
                Request::get("/v1/events/stream").header("authorization", format!("Bearer {token}"));
            if let Some(id) = last_event_id {
                req = req.header("last-event-id", id.to_string());
            }
            let resp = router.clone().oneshot(req.body(Body::empty()).unwrap()).await.unwrap();
            assert_eq!(resp.status(), 200);
            Reader { body: resp.into_body().into_data_stream(), buf: String::new() }
        }

        /// The next `(event, id)` (comments skipped); `None` when the stream ended.
        async fn next(&mut self) -> Option<(String, u64)> {
            loop {
                if let Some(end) = self.buf.find("\n\n") {
                    let block: String = self.buf.drain(..end + 2).collect();
                    let field = |name: &str| {
                        block.lines().find_map(|l| l.strip_prefix(name)).map(|v| v.trim().to_owned())
                    };
                    match (field("event:"), field("id:")) {
                        (Some(kind), Some(id)) => return Some((kind, id.parse().unwrap())),
                        _ => continue,
                    }
                }
                let chunk = tokio::time::timeout(Duration::from_secs(10), self.body.next()).await.unwrap()?;
                self.buf.push_str(std::str::from_utf8(&chunk.unwrap()).unwrap());
            }
        }

        async fn ids(&mut self, n: usize) -> Vec<u64> {
            let mut ids = Vec::with_capacity(n);
            while ids.len() < n {
                let (kind, id) = self.next().await.unwrap();
                assert_eq!(kind, "revision", "after {:?}", ids.last());
                ids.push(id);
            }
            ids
        }
    }

    /// A client resuming with far more than a page of stored events after its id gets every
    /// one, oldest first, then the recent ones not stored yet; one that fell behind the live
    /// channel as well.
    #[tokio::test]
    async fn a_resumed_or_lagging_stream_skips_no_event() {
        let Lab { _dir, app, router, token: (_, token), base } = lab().await;
        store(&app, 1..=2_500).await;
        for id in base + 1..=base + 3 {
            app.events().publish(event(id));
        }
        let mut resumed = Reader::open(&router, &token, Some(10)).await;
        let want: Vec<u64> = (11..=2_500).chain(base + 1..=base + 3).collect();
        assert_eq!(resumed.ids(want.len()).await, want);

        // A stream that does not read while 2,000 events go by (the channel holds 1,024):
        // the first 1,000 were stored meanwhile (and the 3 before), the newest 1,024 are
        // still held.
        let mut lagging = Reader::open(&router, &token, Some(base + 3)).await;
        let burst = base + 4..=base + 2_003;
        store(&app, base + 1..=base + 1_003).await;
        for id in burst.clone() {
            app.events().publish(event(id));
        }
        assert_eq!(lagging.ids(2_000).await, burst.clone().collect::<Vec<_>>());
        assert_eq!(
            resumed.ids(2_000).await,
            burst.collect::<Vec<_>>(),
            "the live stream too, though it lagged"
        );
    }

    /// What cannot be replayed is said: a resume point past the retention, or newer than any
    /// event this server made (another database), reads as a `gap` before what follows.
    #[tokio::test]
    async fn missing_events_read_as_a_gap() {
        let Lab { _dir, app, router, token: (_, token), base } = lab().await;
        store(&app, 1..=300).await;
        // Retention deleted 1 to 99.
        app.store().delete_events_before(event(100).at).await.unwrap();
        app.events().publish(event(base + 1));
        let mut old = Reader::open(&router, &token, Some(50)).await;
        assert_eq!(old.next().await, Some(("gap".into(), 50)));
        let want: Vec<u64> = (100..=300).chain([base + 1]).collect();
        assert_eq!(old.ids(want.len()).await, want);

        let mut stale = Reader::open(&router, &token, Some(base + 500)).await;
        assert_eq!(stale.next().await, Some(("gap".into(), base)), "resumes with the recent events");
        assert_eq!(stale.ids(1).await, [base + 1]);
    }

    /// A stream opened with a token ends when the token is deleted.
    #[tokio::test]
    async fn a_revoked_token_ends_its_stream() {
        let Lab { _dir, app, router, token: (_, admin), base } = lab().await;
        let (id, token) =
            crate::api::create_admin_token(&app, &Actor::system(), "watcher", true).await.unwrap();
        let mut stream = Reader::open(&router, &token, None).await;
        app.events().publish(event(base + 1));
        assert_eq!(stream.ids(1).await, [base + 1]);
        let delete = Request::delete(format!("/v1/admin-tokens/{id}"))
            .header("authorization", format!("Bearer {admin}"))
            .body(Body::empty())
            .unwrap();
        assert_eq!(router.clone().oneshot(delete).await.unwrap().status(), 204);
        assert_eq!(stream.next().await, None, "the stream ended");
    }
}
