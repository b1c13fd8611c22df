//! Store writes the control core's driver does not wait for: events, saved states (evaluator
//! states, the alert book, mirrors, monitors) and the system's audit entries. A slow or
//! locked database (each write may wait its 10 s busy timeout) must not hold up the next
//! decision, nor what DNS answers. What waits is coalesced — a state saved twice is written
//! once, as its newest — and bounded: past [`MAX_WAITING`] events or audit entries the oldest
//! go, with an error in the log. A write storage refuses stays waiting and is tried again,
//! less and less often. Revisions are not here: they are stored in order by the driver, and
//! published after.
//!
//! The driver owns the one [`Saves`]; the writer ([`Writer::run`]) ends once it is dropped —
//! when the driver's task has ended — after writing what is left, so nothing the driver
//! decided last is lost to a stop.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Notify, watch};
use vantage_core::Timestamp;
use vantage_store::{EventRow, NewAudit, Store};

use crate::support::{lock, now};

/// Events, or audit entries, kept waiting for storage at most.
const MAX_WAITING: usize = 10_000;
/// After the driver has ended, what waits gets this long to be written.
const LAST_FLUSH: Duration = Duration::from_secs(5);
/// The first wait after a refused write; it doubles up to [`RETRY_MAX`].
const RETRY_FIRST: Duration = Duration::from_millis(250);
const RETRY_MAX: Duration = Duration::from_secs(30);

/// What waits to be written.
#[derive(Debug, Default)]
struct Waiting {
    events: Vec<EventRow>,
    /// With the time each was decided at.
    audit: Vec<(Timestamp, NewAudit)>,
    /// By key, the newest value.
    states: BTreeMap<String, String>,
}

impl Waiting {
    fn is_empty(&self) -> bool {
        self.events.is_empty() && self.audit.is_empty() && self.states.is_empty()
    }
}

/// What the driver and the writer share.
#[derive(Debug, Default)]
struct Shared {
    waiting: Mutex<Waiting>,
    wake: Notify,
}

/// The driver's end: what it hands over is written by the [`Writer`].
#[derive(Debug)]
pub(crate) struct Saves {
    shared: Arc<Shared>,
    /// Dropped with the driver's `Saves`: the writer then finishes.
    _open: watch::Sender<()>,
}

/// The writer's end, run as a task of its own.
#[derive(Debug)]
pub(crate) struct Writer {
    shared: Arc<Shared>,
    open: watch::Receiver<()>,
}

/// The driver's end and the writer of one queue.
pub(crate) fn queue() -> (Saves, Writer) {
    let shared = Arc::new(Shared::default());
    let (tx, rx) = watch::channel(());
    (Saves { shared: shared.clone(), _open: tx }, Writer { shared, open: rx })
}

/// Appends `more` to `v`, dropping the oldest beyond [`MAX_WAITING`].
fn bounded<T>(v: &mut Vec<T>, more: Vec<T>, what: &str) {
    v.extend(more);
    if v.len() > MAX_WAITING {
        let dropped = v.len() - MAX_WAITING;
        tracing::error!(dropped, "storage too slow for too long: the oldest waiting {what} are dropped");
        v.drain(..dropped);
    }
}

impl Saves {
    pub(crate) fn events(&self, rows: Vec<EventRow>) {
        bounded(&mut lock(&self.shared.waiting).events, rows, "events");
        self.shared.wake.notify_one();
    }

    /// Audit entries, each with the time it was decided at.
    pub(crate) fn audit(&self, entries: Vec<(Timestamp, NewAudit)>) {
        bounded(&mut lock(&self.shared.waiting).audit, entries, "audit entries");
        self.shared.wake.notify_one();
    }

    /// Saves `json` under `key` (a newer value replaces one still waiting).
    pub(crate) fn state(&self, key: String, json: String) {
        lock(&self.shared.waiting).states.insert(key, json);
        self.shared.wake.notify_one();
    }
}

impl Writer {
    /// Writes what waits, whenever something does, retrying what storage refuses with a
    /// growing pause, until the driver's [`Saves`] is dropped; then once more, briefly.
    pub(crate) async fn run(mut self, store: Store) {
        let mut retry = RETRY_FIRST;
        'open: loop {
            tokio::select! {
                () = self.shared.wake.notified() => {}
                // Nothing is ever sent: this is the driver's end being dropped.
                _ = self.open.changed() => break,
            }
            while !self.flush(&store).await {
                tokio::select! {
                    () = tokio::time::sleep(retry) => {}
                    _ = self.open.changed() => break 'open,
                }
                retry = (retry * 2).min(RETRY_MAX);
            }
            retry = RETRY_FIRST;
        }
        let last = async {
            while !self.flush(&store).await {
                tokio::time::sleep(retry).await;
                retry = (retry * 2).min(RETRY_MAX);
            }
        };
        if tokio::time::timeout(LAST_FLUSH, last).await.is_err() {
            tracing::error!("storage did not take the last saves before the stop; they are lost");
        }
    }

    /// Writes everything waiting now; true when all of it was written. What storage refuses
    /// waits again, before anything handed over meanwhile (a state only if no newer one was).
    async fn flush(&self, store: &Store) -> bool {
        let w = std::mem::take(&mut *lock(&self.shared.waiting));
        if w.is_empty() {
            return true;
        }
        let mut refused = Waiting::default();
        if !w.events.is_empty()
            && let Err(e) = store.insert_events(&w.events).await
        {
            tracing::warn!(error = %e, waiting = w.events.len(), "cannot store events (they were streamed); trying again");
            refused.events = w.events;
        }
        // One transaction per decision time: each entry keeps the time it was decided at.
        let mut audit = w.audit.into_iter().peekable();
        while let Some((at, first)) = audit.next() {
            let mut batch = vec![first];
            while let Some((_, e)) = audit.next_if(|(t, _)| *t == at) {
                batch.push(e);
            }
            if let Err(e) = store.commit(&[], &batch, at).await {
                tracing::warn!(error = %e, waiting = batch.len(), "cannot audit the system's decisions; trying again");
                refused.audit.extend(batch.into_iter().map(|e| (at, e)));
                refused.audit.extend(audit.by_ref());
                break;
            }
        }
        for (key, json) in w.states {
            if let Err(e) = store.put_state(&key, &json, now()).await {
                tracing::warn!(key = %key, error = %e, "cannot save state; trying again");
                refused.states.insert(key, json);
            }
        }
        if refused.is_empty() {
            return true;
        }
        let mut w = lock(&self.shared.waiting);
        let newer = std::mem::take(&mut *w);
        bounded(&mut refused.events, newer.events, "events");
        bounded(&mut refused.audit, newer.audit, "audit entries");
        refused.states.extend(newer.states);
        *w = refused;
        false
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::time::Duration;

    use serde_json::json;
    use vantage_store::AuditFilter;

    use super::*;

    /// Runs `sql` on the database at `path` from another process, as an operator would.
    fn sqlite3(path: &Path, sql: &str) {
        let out = std::process::Command::new("sqlite3").arg(path).arg(sql).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }

    fn event(id: i64) -> EventRow {
        EventRow {
            id,
            at: Timestamp::from_secs(1_800_000_000),
            kind: "revision".into(),
            cluster: None,
            node: None,
            summary: format!("event {id}"),
            details: json!({}),
        }
    }

    /// Waits until `f` holds (at most 10 s).
    async fn until<F: Future<Output = bool>>(mut f: impl FnMut() -> F) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while !f().await {
            assert!(tokio::time::Instant::now() < deadline, "timed out");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Writes storage refuses wait and are tried again until it takes them — an audit entry
    /// with the time it was decided at, not the time it was written; and what the driver
    /// handed over last is written once it is gone, before the writer ends.
    #[tokio::test]
    async fn refused_writes_are_retried_and_the_last_ones_written_before_the_end() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("vantage.db");
        let store = Store::open_sqlite(&path).await.unwrap();
        sqlite3(
            &path,
            "CREATE TRIGGER no_events BEFORE INSERT ON events BEGIN SELECT RAISE(ABORT, 'refused'); END; \
             CREATE TRIGGER no_audit BEFORE INSERT ON audit BEGIN SELECT RAISE(ABORT, 'refused'); END;",
        );
        let (saves, writer) = queue();
        let task = tokio::spawn(writer.run(store.clone()));
        let decided = Timestamp::from_secs(1_800_000_000);
        let entry = NewAudit {
            actor: "system".into(),
            action: "mirror.verdict".into(),
            object: "mirror:a".into(),
            metadata: json!({}),
        };
        saves.events(vec![event(1)]);
        saves.audit(vec![(decided, entry)]);
        saves.state("k".into(), "1".into());
        // The state was taken: the events and the audit entry were tried, and refused.
        until(|| async { !store.states("k").await.unwrap().is_empty() }).await;
        assert_eq!(store.last_event().await.unwrap(), 0);

        sqlite3(&path, "DROP TRIGGER no_events; DROP TRIGGER no_audit;");
        until(|| async { store.last_event().await.unwrap() == 1 }).await;
        until(|| async { !store.audit(&AuditFilter::default()).await.unwrap().is_empty() }).await;
        let audit = store.audit(&AuditFilter::default()).await.unwrap();
        assert_eq!((audit.len(), audit[0].at), (1, decided), "written once, at the time it was decided");

        saves.events(vec![event(2)]);
        saves.state("k".into(), "2".into());
        drop(saves);
        tokio::time::timeout(Duration::from_secs(10), task).await.unwrap().unwrap();
        assert_eq!(store.last_event().await.unwrap(), 2);
        assert_eq!(store.states("k").await.unwrap(), [("k".to_owned(), "2".to_owned())]);
    }
}
