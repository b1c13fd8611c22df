//! Store writes the control core's driver does not wait for: events, saved states (evaluator
//! states, the alert book, mirrors, monitors) and the system's audit entries. A slow or
//! locked database (each write may wait its 10 s busy timeout) must not hold up the next
//! decision, nor what DNS answers. What waits is coalesced — a state saved twice is written
//! once, as its newest, and a cluster's saves by difference as one — and bounded: past
//! [`MAX_WAITING`] events or audit entries the oldest go, with an error in the log. A write
//! storage refuses stays waiting and is tried again, less and less often. Revisions are not
//! here: they are stored in order by the driver, and published after.
//!
//! The driver owns the one [`Saves`]; the writer ([`Writer::run`]) ends once it is dropped —
//! when the driver's task has ended — after writing what is left, so nothing the driver
//! decided last is lost to a stop.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Notify, watch};
use vantage_control::availability::Ledger;
use vantage_control::state_save::StateSave;
use vantage_core::Timestamp;
use vantage_core::evaluate::ClusterState;
use vantage_core::ids::{ClusterId, NodeId};
use vantage_core::reachability::AddressHealth;
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
pub(crate) struct Waiting {
    events: Vec<EventRow>,
    /// With the time each was decided at.
    audit: Vec<(Timestamp, NewAudit)>,
    /// By key, the newest value.
    states: BTreeMap<String, ToSave>,
}

impl Waiting {
    fn is_empty(&self) -> bool {
        self.events.is_empty() && self.audit.is_empty() && self.states.is_empty()
    }

    /// `value` waits under `key`: in place of an older value, or folded into it when both are
    /// a cluster's saves by difference.
    fn put_state(&mut self, key: String, value: ToSave) {
        match (self.states.get_mut(&key), value) {
            (Some(ToSave::Cluster(held)), ToSave::Cluster(newer)) => held.then(*newer),
            (_, value) => drop(self.states.insert(key, value)),
        }
    }
}

/// The key a cluster's state is saved under: the state but its addresses, and under
/// `{key}/` one row per address's hysteresis.
pub(crate) fn cluster_key(cluster: ClusterId) -> String {
    format!("cluster:{cluster}")
}

/// What the keys of a cluster's address rows start with, of the cluster's `key`.
fn rows_of(key: &str) -> String {
    format!("{key}/")
}

/// The key of one address's hysteresis in `cluster`'s saved state.
fn address_key(cluster: ClusterId, (node, ip): (NodeId, IpAddr)) -> String {
    format!("{}{node}/{ip}", rows_of(&cluster_key(cluster)))
}

/// What a saved state's key names: a cluster's state but its addresses, or one address's
/// hysteresis in it.
enum SavedKey {
    Rest(ClusterId),
    Address(ClusterId, (NodeId, IpAddr)),
}

impl SavedKey {
    /// The key `key` read (`None`: no cluster's).
    fn of(key: &str) -> Option<SavedKey> {
        let rest = key.strip_prefix("cluster:")?;
        let Some((cluster, address)) = rest.split_once('/') else {
            return Some(SavedKey::Rest(ClusterId(rest.parse().ok()?)));
        };
        let (node, ip) = address.split_once('/')?;
        Some(SavedKey::Address(
            ClusterId(cluster.parse().ok()?),
            (NodeId(node.parse().ok()?), ip.parse().ok()?),
        ))
    }
}

/// Each cluster's evaluator state as saved (`rows` of the `cluster:` keys): the state but its
/// addresses, and a row per address's hysteresis. A cluster whose state is unreadable starts
/// over; an unreadable address row starts that address over.
pub(crate) fn saved_states(rows: Vec<(String, String)>) -> Vec<(ClusterId, ClusterState)> {
    let mut rests = BTreeMap::new();
    let mut addresses: BTreeMap<ClusterId, Vec<_>> = BTreeMap::new();
    for (key, value) in rows {
        match SavedKey::of(&key) {
            Some(SavedKey::Rest(id)) => match serde_json::from_str::<ClusterState>(&value) {
                Ok(s) => drop(rests.insert(id, s)),
                Err(e) => {
                    tracing::warn!(cluster = %id, error = %e, "stored evaluator state unreadable; starting over");
                }
            },
            Some(SavedKey::Address(id, at)) => match serde_json::from_str::<AddressHealth>(&value) {
                Ok(h) => addresses.entry(id).or_default().push((at, h)),
                Err(e) => {
                    tracing::warn!(cluster = %id, node = %at.0, ip = %at.1, error = %e, "stored address state unreadable; starting it over");
                }
            },
            None => {
                tracing::warn!(%key, "stored evaluator state under a key that names no cluster; left out")
            }
        }
    }
    (rests.into_iter())
        .map(|(id, rest)| (id, StateSave::restore(rest, addresses.remove(&id).unwrap_or_default())))
        .collect()
}

/// What a cluster's save writes: the rows to save, those to delete, and the prefix whose rows
/// all go first (a whole save's).
struct Rows {
    clear: Option<String>,
    puts: Vec<(String, String)>,
    deletes: Vec<String>,
}

impl Rows {
    /// The rows of `save`, in JSON.
    fn of(save: &StateSave) -> serde_json::Result<Rows> {
        let id = save.cluster;
        let mut puts = vec![(cluster_key(id), serde_json::to_string(&save.rest)?)];
        let mut deletes = Vec::new();
        for (key, health) in &save.addresses {
            match health {
                Some(h) => puts.push((address_key(id, *key), serde_json::to_string(h)?)),
                None => deletes.push(address_key(id, *key)),
            }
        }
        let clear = save.whole.then(|| rows_of(&cluster_key(id)));
        Ok(Rows { clear, puts, deletes })
    }
}

/// A state to save: JSON, or a cluster's evaluator state or the availability ledger, turned
/// into JSON only as it is written — off the control core's thread, and only the newest of
/// several handed over meanwhile (at 10,000 nodes a cluster's JSON took longer than the pass
/// that made it). A cluster's is saved by difference: several handed over meanwhile are
/// folded into one.
#[derive(Debug)]
pub(crate) enum ToSave {
    Json(String),
    Cluster(Box<StateSave>),
    Availability(Arc<Ledger>),
    /// A cluster's state, to delete (its rows with it): the cluster is gone.
    Dropped,
}

impl From<String> for ToSave {
    fn from(json: String) -> Self {
        ToSave::Json(json)
    }
}

/// The availability ledger's JSON, made on a blocking thread (or why it cannot be, which a
/// well-formed ledger never is).
async fn ledger_json(ledger: Arc<Ledger>) -> Result<String, String> {
    match tokio::task::spawn_blocking(move || ledger.to_json()).await {
        Ok(made) => made.map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    }
}

/// What the driver and the writer share.
#[derive(Debug, Default)]
struct Shared {
    waiting: Mutex<Waiting>,
    wake: Notify,
}

/// The driver's end (and its consumers'): what it hands over is written by the [`Writer`].
#[derive(Debug, Clone)]
pub(crate) struct Saves {
    shared: Arc<Shared>,
    /// Dropped with the last `Saves`: the writer then finishes.
    _open: Arc<watch::Sender<()>>,
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
    (Saves { shared: shared.clone(), _open: Arc::new(tx) }, Writer { shared, open: rx })
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

    /// Drops the clusters' saves still waiting: this replica lost the evaluator lease, and its
    /// saves by difference would land on the next holder's (one being written, or refused and
    /// tried again, may still land: the next holder's whole saves make that good).
    pub(crate) fn drop_cluster_states(&self) {
        lock(&self.shared.waiting).states.retain(|_, v| !matches!(v, ToSave::Cluster(_)));
    }

    /// Saves `value` under `key` (a newer value replaces one still waiting; a cluster's save by
    /// difference is folded into it).
    pub(crate) fn state(&self, key: String, value: impl Into<ToSave>) {
        lock(&self.shared.waiting).put_state(key, value.into());
        self.shared.wake.notify_one();
    }
}

impl Writer {
    /// Writes what waits, whenever something does, retrying what storage refuses with a
    /// growing pause, until the driver's [`Saves`] is dropped; then once more, briefly.
    pub(crate) async fn run(mut self, store: impl Sink) {
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
        // The last writes get the whole of their time, not the pause the outage had grown to.
        retry = RETRY_FIRST;
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
    async fn flush(&self, sink: &impl Sink) -> bool {
        let w = std::mem::take(&mut *lock(&self.shared.waiting));
        if w.is_empty() {
            return true;
        }
        let mut refused = sink.write(w).await;
        if refused.is_empty() {
            return true;
        }
        let mut w = lock(&self.shared.waiting);
        let newer = std::mem::take(&mut *w);
        bounded(&mut refused.events, newer.events, "events");
        bounded(&mut refused.audit, newer.audit, "audit entries");
        for (key, value) in newer.states {
            refused.put_state(key, value);
        }
        *w = refused;
        false
    }
}

/// Where the writer writes: the store (a stand-in in the tests of its timing).
pub(crate) trait Sink: Send + Sync {
    /// Writes what waits; returns what was refused.
    fn write(&self, w: Waiting) -> impl Future<Output = Waiting> + Send;
}

impl Sink for Store {
    async fn write(&self, w: Waiting) -> Waiting {
        let mut refused = Waiting::default();
        if !w.events.is_empty()
            && let Err(e) = self.insert_events(&w.events).await
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
            if let Err(e) = self.commit(&[], &batch, at).await {
                tracing::warn!(error = %e, waiting = batch.len(), "cannot audit the system's decisions; trying again");
                refused.audit.extend(batch.into_iter().map(|e| (at, e)));
                refused.audit.extend(audit.by_ref());
                break;
            }
        }
        for (key, value) in w.states {
            let made = match value {
                ToSave::Json(json) => Ok(json),
                ToSave::Availability(ledger) => ledger_json(ledger).await,
                ToSave::Cluster(save) => {
                    if let Some(save) = save_cluster(self, save).await {
                        refused.states.insert(key, ToSave::Cluster(save));
                    }
                    continue;
                }
                ToSave::Dropped => {
                    let rows = rows_of(&key);
                    if let Err(e) = self.put_states(Some(&rows), &[], std::slice::from_ref(&key), now()).await
                    {
                        tracing::warn!(key = %key, error = %e, "cannot delete a gone cluster's state; trying again");
                        refused.states.insert(key, ToSave::Dropped);
                    }
                    continue;
                }
            };
            let json = match made {
                Ok(json) => json,
                Err(e) => {
                    tracing::error!(key = %key, error = %e, "cannot turn the state into JSON; it is not saved");
                    continue;
                }
            };
            if let Err(e) = self.put_state(&key, &json, now()).await {
                tracing::warn!(key = %key, error = %e, "cannot save state; trying again");
                refused.states.insert(key, ToSave::Json(json));
            }
        }
        refused
    }
}

/// Saves a cluster's state as rows, made into JSON off the async workers; gives the save back
/// when storage refused it, to be tried again.
async fn save_cluster(store: &Store, save: Box<StateSave>) -> Option<Box<StateSave>> {
    let made = tokio::task::spawn_blocking(move || {
        let rows = Rows::of(&save);
        (save, rows)
    })
    .await;
    let (save, rows) = match made {
        Ok((save, Ok(rows))) => (save, rows),
        Ok((save, Err(e))) => {
            tracing::error!(cluster = %save.cluster, error = %e, "cannot turn the state into JSON; it is not saved");
            return None;
        }
        Err(e) => {
            tracing::error!(error = %e, "cannot turn a cluster's state into JSON; it is not saved");
            return None;
        }
    };
    match store.put_states(rows.clear.as_deref(), &rows.puts, &rows.deletes, now()).await {
        Ok(()) => None,
        Err(e) => {
            tracing::warn!(cluster = %save.cluster, error = %e, "cannot save the cluster's state; trying again");
            Some(save)
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;
    use vantage_store::AuditFilter;

    use super::*;
    use crate::app::sqlite3;

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

    /// A stand-in for storage that refuses the writes `refuses` says (by their number, from
    /// 1), noting when each was tried on the test's clock.
    struct Refusing {
        refuses: fn(usize) -> bool,
        tried: Mutex<Vec<tokio::time::Instant>>,
    }

    impl Refusing {
        fn new(refuses: fn(usize) -> bool) -> Arc<Refusing> {
            Arc::new(Refusing { refuses, tried: Mutex::default() })
        }
    }

    impl Sink for Arc<Refusing> {
        async fn write(&self, w: Waiting) -> Waiting {
            let mut tried = lock(&self.tried);
            tried.push(tokio::time::Instant::now());
            if (self.refuses)(tried.len()) { w } else { Waiting::default() }
        }
    }

    /// The pauses between tries of a refused write: 250 ms, doubling up to 30 s, and from
    /// the first pause again once a write is taken.
    #[tokio::test(start_paused = true)]
    async fn refused_writes_are_tried_again_less_and_less_often() {
        // The first nine tries are refused, the tenth taken, the eleventh refused again.
        let sink = Refusing::new(|n| n <= 9 || n == 11);
        let (saves, writer) = queue();
        let task = tokio::spawn(writer.run(sink.clone()));
        saves.state("k".into(), "1".to_owned());
        while lock(&sink.tried).len() < 10 {
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        saves.state("k".into(), "2".to_owned());
        while lock(&sink.tried).len() < 12 {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let tried = lock(&sink.tried).clone();
        let pauses: Vec<u128> = tried.windows(2).map(|w| (w[1] - w[0]).as_millis()).collect();
        assert_eq!(pauses[..9], [250, 500, 1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000]);
        // The next change is tried at once, and once refused, after the first pause again.
        assert_eq!(pauses[10], 250, "{pauses:?}");
        drop(saves);
        task.await.unwrap();
    }

    /// Once the driver has gone, what waits gets 5 s to be written, from the first pause
    /// again, however long the outage had made the pauses; then the writer gives up.
    #[tokio::test(start_paused = true)]
    async fn the_last_writes_get_their_own_five_seconds() {
        let sink = Refusing::new(|_| true);
        let (saves, writer) = queue();
        let task = tokio::spawn(writer.run(sink.clone()));
        saves.state("k".into(), "1".to_owned());
        tokio::time::sleep(Duration::from_secs(60)).await;
        let before = lock(&sink.tried).len();
        let end = tokio::time::Instant::now();
        drop(saves);
        task.await.unwrap();
        assert_eq!(end.elapsed(), LAST_FLUSH, "gave up after its time");
        let tried = lock(&sink.tried).clone();
        let last: Vec<u128> = tried[before..].iter().map(|t| (*t - end).as_millis()).collect();
        assert_eq!(last, [0, 250, 750, 1_750, 3_750], "tried at once, then from the first pause");
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
        saves.state("k".into(), "1".to_owned());
        // The state was taken: the events and the audit entry were tried, and refused.
        until(|| async { !store.states("k").await.unwrap().is_empty() }).await;
        assert_eq!(store.last_event().await.unwrap(), 0);

        sqlite3(&path, "DROP TRIGGER no_events; DROP TRIGGER no_audit;");
        until(|| async { store.last_event().await.unwrap() == 1 }).await;
        until(|| async { !store.audit(&AuditFilter::default()).await.unwrap().is_empty() }).await;
        let audit = store.audit(&AuditFilter::default()).await.unwrap();
        assert_eq!((audit.len(), audit[0].at), (1, decided), "written once, at the time it was decided");

        saves.events(vec![event(2)]);
        saves.state("k".into(), "2".to_owned());
        drop(saves);
        tokio::time::timeout(Duration::from_secs(10), task).await.unwrap().unwrap();
        assert_eq!(store.last_event().await.unwrap(), 2);
        assert_eq!(store.states("k").await.unwrap(), [("k".to_owned(), "2".to_owned())]);
    }

    /// The availability ledger is handed over as it is and stored as the JSON a start reads
    /// back: the same changes of every subject, one of a kind this version cannot name kept.
    #[tokio::test]
    async fn a_ledger_handed_over_is_stored_as_the_json_a_start_reads() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_sqlite(&dir.path().join("vantage.db")).await.unwrap();
        let json = r#"{"subjects":{"beacon:3":[{"at":"2027-01-01T00:00:00Z","health":"up"}],"node:7":[{"at":"2027-01-01T00:00:00.000Z","health":"down"}]}}"#;
        let (ledger, skipped) = Ledger::restore(json);
        assert!(skipped.is_empty(), "{skipped:?}");
        let (saves, writer) = queue();
        let task = tokio::spawn(writer.run(store.clone()));
        saves.state("availability".into(), ToSave::Availability(Arc::new(ledger.clone())));
        drop(saves);
        tokio::time::timeout(Duration::from_secs(10), task).await.unwrap().unwrap();
        let stored = store.states("availability").await.unwrap();
        let [(key, saved)] = stored.as_slice() else { panic!("{stored:?}") };
        assert_eq!(key, "availability");
        let (read, skipped) = Ledger::restore(saved);
        assert!(skipped.is_empty(), "{skipped:?}");
        assert_eq!(read, ledger);
        let (saved, was): (serde_json::Value, serde_json::Value) =
            (serde_json::from_str(saved).unwrap(), serde_json::from_str(json).unwrap());
        assert_eq!(saved, was);
    }

    /// A cluster's state saved whole, then by difference twice (one save waiting behind the
    /// other, so folded), is what a start reads back: the rest whole, every address as it was
    /// last saved, a forgotten one gone. A state saved whole before addresses had rows of their
    /// own reads back too, and the first save after it replaces it. Once the cluster goes, none
    /// of its state is left.
    #[tokio::test]
    async fn a_state_saved_by_difference_reads_back_as_the_state() {
        use std::collections::BTreeMap;

        use vantage_core::reachability::Reachability;

        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_sqlite(&dir.path().join("vantage.db")).await.unwrap();
        let key = |n: i64| (NodeId(n), IpAddr::from([192, 0, 2, u8::try_from(n).unwrap()]));
        let down = |at: i64| AddressHealth {
            state: Reachability::Unreachable,
            since: Some(Timestamp::from_secs(at)),
            ..AddressHealth::default()
        };
        // Saved before rows: the whole state in one value, which a row left behind does not
        // change (an older version wrote the value after the row).
        let mut old = ClusterState::default();
        old.addresses.insert(key(9), down(9));
        store.put_state("cluster:1", &serde_json::to_string(&old).unwrap(), Timestamp::EPOCH).await.unwrap();
        store
            .put_state("cluster:1/8/192.0.2.8", &serde_json::to_string(&down(8)).unwrap(), Timestamp::EPOCH)
            .await
            .unwrap();
        let read = saved_states;
        assert_eq!(read(store.states("cluster:").await.unwrap()), [(ClusterId(1), old)]);

        let at = |s: i64| Some(Timestamp::from_secs(s));
        let save = |whole, checked: i64, addresses: Vec<((NodeId, IpAddr), Option<AddressHealth>)>| {
            let rest = ClusterState { checked_at: at(checked), ..ClusterState::default() };
            Box::new(StateSave { cluster: ClusterId(1), rest, addresses, whole })
        };
        let write = async |saves: Vec<Box<StateSave>>| {
            let (handing, writer) = queue();
            for s in saves {
                handing.state(cluster_key(ClusterId(1)), ToSave::Cluster(s));
            }
            let task = tokio::spawn(writer.run(store.clone()));
            drop(handing);
            tokio::time::timeout(Duration::from_secs(10), task).await.unwrap().unwrap();
        };
        write(vec![save(
            true,
            1,
            vec![(key(1), Some(down(1))), (key(2), Some(down(2))), (key(3), Some(down(3)))],
        )])
        .await;
        write(vec![
            save(false, 2, vec![(key(2), Some(down(20))), (key(3), None)]),
            save(false, 3, vec![(key(3), Some(down(30))), (key(1), None)]),
        ])
        .await;
        let expected = ClusterState {
            checked_at: at(3),
            addresses: [(key(2), down(20)), (key(3), down(30))].into_iter().collect(),
            ..ClusterState::default()
        };
        assert_eq!(read(store.states("cluster:").await.unwrap()), [(ClusterId(1), expected)]);
        let rows: BTreeMap<String, String> = store.states("cluster:1/").await.unwrap().into_iter().collect();
        assert_eq!(rows.keys().collect::<Vec<_>>(), ["cluster:1/2/192.0.2.2", "cluster:1/3/192.0.2.3"]);
        // The cluster goes: its state and rows with it, another's left.
        store.put_state("cluster:12", "{}", Timestamp::EPOCH).await.unwrap();
        let (handing, writer) = queue();
        handing.state(cluster_key(ClusterId(1)), ToSave::Dropped);
        let task = tokio::spawn(writer.run(store.clone()));
        drop(handing);
        tokio::time::timeout(Duration::from_secs(10), task).await.unwrap().unwrap();
        assert_eq!(store.states("cluster:").await.unwrap(), [("cluster:12".to_owned(), "{}".to_owned())]);
    }
}
