//! Store writes the control core's driver does not wait for: events, saved states (evaluator
//! states, the alert book, mirrors, monitors) and the system's audit entries. A slow or
//! locked database (each write may wait its 10 s busy timeout) must not hold up the next
//! decision, nor what DNS answers. What waits is coalesced — a state saved twice is written
//! once, as its newest — and bounded: past [`MAX_WAITING`] events or audit entries the oldest
//! go, with an error in the log. Revisions are not here: they are stored in order by the
//! driver, and published after.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Notify, watch};
use vantage_store::{EventRow, NewAudit, Store};

use crate::support::{lock, now, stopped};

/// Events, or audit entries, kept waiting for storage at most.
const MAX_WAITING: usize = 10_000;
/// After a stop, what waits gets this long to be written.
const LAST_FLUSH: Duration = Duration::from_secs(5);

/// What waits to be written.
#[derive(Debug, Default)]
struct Waiting {
    events: Vec<EventRow>,
    audit: Vec<NewAudit>,
    /// By key, the newest value.
    states: BTreeMap<String, String>,
}

impl Waiting {
    fn is_empty(&self) -> bool {
        self.events.is_empty() && self.audit.is_empty() && self.states.is_empty()
    }
}

/// The queue and its writer task.
#[derive(Debug, Clone, Default)]
pub(crate) struct Saves {
    waiting: Arc<Mutex<Waiting>>,
    wake: Arc<Notify>,
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
        bounded(&mut lock(&self.waiting).events, rows, "events");
        self.wake.notify_one();
    }

    pub(crate) fn audit(&self, entries: Vec<NewAudit>) {
        bounded(&mut lock(&self.waiting).audit, entries, "audit entries");
        self.wake.notify_one();
    }

    /// Saves `json` under `key` (a newer value replaces one still waiting).
    pub(crate) fn state(&self, key: String, json: String) {
        lock(&self.waiting).states.insert(key, json);
        self.wake.notify_one();
    }

    /// Writes what waits, whenever something does, until `stop` (then once more, briefly).
    pub(crate) async fn run(self, store: Store, mut stop: watch::Receiver<bool>) {
        loop {
            tokio::select! {
                () = self.wake.notified() => {}
                () = stopped(&mut stop) => break,
            }
            self.flush(&store).await;
        }
        if tokio::time::timeout(LAST_FLUSH, self.flush(&store)).await.is_err() {
            tracing::error!("storage did not take the last saves before the stop");
        }
    }

    /// Writes everything waiting now; what fails is logged and not retried (a newer state
    /// follows, and events were streamed already).
    async fn flush(&self, store: &Store) {
        let w = std::mem::take(&mut *lock(&self.waiting));
        if w.is_empty() {
            return;
        }
        if !w.events.is_empty()
            && let Err(e) = store.insert_events(&w.events).await
        {
            tracing::warn!(error = %e, dropped = w.events.len(), "cannot store events (they were streamed)");
        }
        if !w.audit.is_empty()
            && let Err(e) = store.commit(&[], &w.audit, now()).await
        {
            tracing::error!(error = %e, dropped = w.audit.len(), "cannot audit the system's decisions");
        }
        for (key, json) in &w.states {
            if let Err(e) = store.put_state(key, json, now()).await {
                tracing::warn!(key = %key, error = %e, "cannot save state; a newer one follows");
            }
        }
    }
}
