//! The drivers of several replicas on one PostgreSQL database (SPEC §8): the evaluator lease,
//! the relay of this replica's observations to the others, and the reader of what the others
//! wrote — their observations, configuration changes and the lease holder's revisions. They
//! move bytes and feed the control core; what a role means is the core's
//! (`vantage_control::Role`).

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use vantage_control::config::Object;
use vantage_control::mirrors::registry::is_registry_file;
use vantage_control::{Relayed, Role, StoredRevision};
use vantage_core::Timestamp;
use vantage_core::evaluate::Records;
use vantage_core::ids::ClusterId;
use vantage_store::{Replication, Store, Written};

use crate::app::App;
use crate::error::ApiError;
use crate::owner::Input;
use crate::support::{now, stopped};

/// How often the lease is tried, or checked while held.
const LEASE_EVERY: Duration = Duration::from_millis(500);
/// A lease check the database does not answer within this long counts as lost.
const LEASE_TIMEOUT: Duration = Duration::from_secs(1);
/// What the others wrote is read at least this often, notifications or not.
const CATCH_UP_EVERY: Duration = Duration::from_secs(1);
/// Relayed observations are kept this long.
const RELAYED_KEPT_MS: i64 = 600_000;
/// Logged changes are kept this long (a replica away longer reloads the whole configuration).
const CHANGES_KEPT_MS: i64 = 7 * 86_400_000;
/// At most this many pages of relayed observations are read in one round, so that the other
/// reads of the round are not held up behind a busy inbox.
const RELAYED_PAGES: usize = 10;
/// At most this many observations wait to be relayed; more are dropped while the database is
/// away (the other replicas then see fewer rounds of this replica's probers).
const RELAY_QUEUE: usize = 10_000;
/// At most this many observations are relayed in one transaction.
const RELAY_BATCH: usize = 500;

/// This replica's share of the replication.
#[derive(Debug)]
pub(crate) struct Replica {
    pub(crate) shared: Replication,
    /// Names this process in what it writes, so it skips its own when reading.
    pub(crate) origin: String,
    /// The newest logged change this replica's configuration holds.
    pub(crate) applied: AtomicI64,
    /// The newest relayed observation read.
    read: AtomicI64,
    /// The lease's epoch while this replica holds it (0: it does not): its revisions are
    /// stored under it.
    pub(crate) epoch: AtomicI64,
    relay: mpsc::Sender<(Timestamp, String)>,
}

impl Replica {
    /// Where this replica stands at start (read before the configuration and observations
    /// are loaded: what comes after is read again, and applying it twice changes nothing),
    /// and the receiver the relay task sends from.
    pub(crate) async fn start(
        store: &Store,
    ) -> Result<Option<(Replica, mpsc::Receiver<(Timestamp, String)>)>, vantage_store::Error> {
        let Some(shared) = store.replication() else { return Ok(None) };
        let applied = AtomicI64::new(shared.changes_head().await?);
        let read = AtomicI64::new(shared.inbox_head().await?);
        let host = crate::support::hostname().unwrap_or_else(|| "host".into());
        let origin = format!("{host}-{}-{}", std::process::id(), now().millis());
        let (relay, rx) = mpsc::channel(RELAY_QUEUE);
        Ok(Some((Replica { shared, origin, applied, read, epoch: AtomicI64::new(0), relay }, rx)))
    }

    /// Relays what this replica's core was fed at `at` to the other replicas'.
    pub(crate) fn relay(&self, at: Timestamp, r: &Relayed) {
        match serde_json::to_string(r) {
            Ok(body) => {
                if self.relay.try_send((at, body)).is_err() {
                    tracing::warn!("relay queue full: an observation does not reach the other replicas");
                }
            }
            Err(e) => tracing::error!(error = %e, "cannot encode an observation to relay"),
        }
    }
}

/// Writes the observations to relay, in batches, until `stop`; then what waits, once.
pub(crate) async fn relay(
    shared: Replication,
    origin: String,
    mut rx: mpsc::Receiver<(Timestamp, String)>,
    mut stop: watch::Receiver<bool>,
) {
    let mut batch = Vec::with_capacity(RELAY_BATCH);
    let mut pause = Duration::from_millis(100);
    loop {
        let n = tokio::select! {
            n = rx.recv_many(&mut batch, RELAY_BATCH) => n,
            () = stopped(&mut stop) => {
                rx.close();
                while rx.recv_many(&mut batch, RELAY_BATCH).await > 0 {}
                let _ = shared.relay(&origin, &batch).await;
                return;
            }
        };
        if n == 0 {
            return;
        }
        while let Err(e) = shared.relay(&origin, &batch).await {
            tracing::warn!(error = %e, waiting = batch.len(), "cannot relay observations; trying again");
            tokio::select! {
                () = tokio::time::sleep(pause) => {}
                () = stopped(&mut stop) => return,
            }
            pause = (pause * 2).min(Duration::from_secs(5));
        }
        pause = Duration::from_millis(100);
        batch.clear();
    }
}

/// Holds the evaluator lease when it can, and tells the core whenever that changes. A replica
/// that takes it reads the stored revisions first, so it numbers after the previous holder.
pub(crate) async fn lease(app: Arc<App>, stop: watch::Receiver<bool>) {
    let Some(replica) = app.replica() else { return };
    hold_lease(&app, replica.shared.lease(), &replica.epoch, &replica.origin, stop).await;
}

/// What the lease task holds the lease with: the shared database's lease (a stand-in in the
/// tests of its timing).
pub(crate) trait Holder: Send {
    /// Takes the lease when it is free, or checks it is still held; whether it is held.
    fn hold(&mut self) -> impl Future<Output = bool> + Send;
    /// The epoch taken, while held.
    fn epoch(&self) -> Option<i64>;
    /// Lets it go.
    fn release(&mut self);
}

impl Holder for vantage_store::Lease {
    fn hold(&mut self) -> impl Future<Output = bool> + Send {
        vantage_store::Lease::hold(self, LEASE_TIMEOUT)
    }

    fn epoch(&self) -> Option<i64> {
        vantage_store::Lease::epoch(self)
    }

    fn release(&mut self) {
        vantage_store::Lease::release(self);
    }
}

/// Tries or checks the lease every [`LEASE_EVERY`] until `stop`, telling the core each change
/// of role once; `epoch` follows what is held.
async fn hold_lease(
    app: &App,
    mut lease: impl Holder,
    epoch: &AtomicI64,
    origin: &str,
    mut stop: watch::Receiver<bool>,
) {
    let mut tick = tokio::time::interval(LEASE_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // The role last told, not the view's: a view published before the core took the last
    // change of role would make a loss right after a take-over go untold.
    let mut told = app.view().role;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = stopped(&mut stop) => break,
        }
        let held = lease.hold().await;
        epoch.store(lease.epoch().unwrap_or(0), Ordering::Relaxed);
        let role = if held { Role::Leader } else { Role::Follower };
        if told == role {
            continue;
        }
        let last_event = if held {
            // Without the stored revisions it could number over them: it waits a turn.
            match taking_over(app).await {
                Ok(last_event) => last_event,
                Err(e) => {
                    tracing::warn!(error = %e, "took the evaluator lease but cannot read the stored revisions; letting it go");
                    lease.release();
                    continue;
                }
            }
        } else {
            0
        };
        tracing::info!(?role, %origin, "evaluator lease changed");
        if app.owner().tell(Input::Lease { role, last_event }).await.is_err() {
            break;
        }
        told = role;
    }
    lease.release();
    epoch.store(0, Ordering::Relaxed);
}

/// Stores a revision: on PostgreSQL under the lease's epoch this replica took, so that nothing
/// it cut is stored once another replica holds the lease.
pub(crate) async fn store_revision(
    app: &App,
    row: &vantage_store::RevisionRow,
) -> Result<(), vantage_store::Error> {
    match app.replica() {
        Some(r) => r.shared.insert_revision(row, r.epoch.load(Ordering::Relaxed)).await,
        None => app.store().insert_revision(row).await,
    }
}

/// What a replica taking the lease reads first: the stored revisions (fed to the core, so it
/// numbers after them) and the newest stored event's id (its events number after it).
async fn taking_over(app: &App) -> Result<u64, ApiError> {
    revisions(app).await?;
    Ok(u64::try_from(app.store().last_event().await?).unwrap_or(0))
}

/// Reads what the other replicas wrote — what a notification names, and everything every
/// second regardless — and feeds it to the core; prunes old relayed rows now and then.
pub(crate) async fn follow(app: Arc<App>, mut stop: watch::Receiver<bool>) {
    let Some(replica) = app.replica() else { return };
    let mut listening = None;
    let mut tick = tokio::time::interval(CATCH_UP_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut rounds: u64 = 0;
    loop {
        if listening.is_none() {
            listening =
                replica.shared.listen().await.map_err(|e| tracing::debug!(error = %e, "cannot listen")).ok();
        }
        let notified = async {
            match listening.as_mut() {
                Some(l) => l.recv().await.map(Some),
                None => std::future::pending().await,
            }
        };
        let what = tokio::select! {
            _ = tick.tick() => None,
            r = notified => match r {
                Ok(w) => w,
                Err(_) => {
                    listening = None;
                    continue;
                }
            },
            () = stopped(&mut stop) => break,
        };
        // Each read on its own: one that fails holds up none of the others.
        if what.is_none_or(|w| w == Written::Changes)
            && let Err(e) = changes(&app).await
        {
            tracing::debug!(error = %e, "cannot read the other replicas' changes");
        }
        if what.is_none_or(|w| w == Written::Inbox)
            && let Err(e) = relayed(&app, replica).await
        {
            tracing::debug!(error = %e, "cannot read the other replicas' observations");
        }
        if what.is_none_or(|w| w == Written::Revisions)
            && let Err(e) = revisions(&app).await
        {
            tracing::debug!(error = %e, "cannot read the stored revisions");
        }
        if what.is_none() {
            rounds += 1;
            if rounds.is_multiple_of(60) {
                let at = now();
                if let Err(e) = replica
                    .shared
                    .prune(at.plus_millis(-RELAYED_KEPT_MS), at.plus_millis(-CHANGES_KEPT_MS))
                    .await
                {
                    tracing::debug!(error = %e, "cannot prune relayed observations");
                }
            }
        }
    }
}

/// Feeds the observations the others relayed since the last read (a few pages at most).
async fn relayed(app: &Arc<App>, replica: &Replica) -> Result<(), ApiError> {
    for _ in 0..RELAYED_PAGES {
        let rows = replica.shared.relayed_after(replica.read.load(Ordering::Relaxed)).await?;
        let Some(last) = rows.last().map(|r| r.id) else { break };
        let relayed: Vec<(Timestamp, Relayed)> = rows
            .iter()
            .filter(|r| r.origin != replica.origin)
            .filter_map(|r| {
                serde_json::from_str(&r.body)
                    .map(|relayed| (r.at, relayed))
                    .map_err(
                        |e| tracing::warn!(id = r.id, error = %e, "a relayed observation does not parse"),
                    )
                    .ok()
            })
            .collect();
        if !relayed.is_empty() {
            app.owner().tell(Input::Relayed(relayed)).await?;
        }
        replica.read.store(last, Ordering::Relaxed);
    }
    Ok(())
}

/// Applies the logged changes after the newest this replica holds, in order (the caller may
/// hold the change lock already: see [`App::change`]).
pub(crate) async fn changes(app: &App) -> Result<(), ApiError> {
    let Some(replica) = app.replica() else { return Ok(()) };
    let _one_at_a_time = app.changing().await;
    changes_locked(app, replica).await
}

/// [`changes`] with the change lock held. Its own changes are applied too when the log has
/// them after `applied` (a commit whose answer was lost); applying one twice changes nothing.
/// A replica that was away longer than the log keeps reloads the whole configuration.
pub(crate) async fn changes_locked(app: &App, replica: &Replica) -> Result<(), ApiError> {
    loop {
        let applied = replica.applied.load(Ordering::Relaxed);
        let logged = replica.shared.changes_after(applied).await?;
        let Some(last) = logged.last().map(|c| c.seq) else { return Ok(()) };
        if logged.first().is_some_and(|c| c.seq > applied + 1) {
            tracing::warn!(
                applied,
                next = logged[0].seq,
                "changes were pruned before this replica read them; reloading the configuration"
            );
            reload(app, replica).await?;
            replica.applied.store(last, Ordering::Relaxed);
            continue;
        }
        for change in logged {
            let mut puts = Vec::new();
            let mut deletes = Vec::new();
            for w in change.writes {
                match w {
                    vantage_store::Write::Put { id, kind, body, .. } => puts.extend(object(id, &kind, &body)),
                    vantage_store::Write::Delete { id } => deletes.push(id),
                }
            }
            app.apply(puts, deletes, change.at).await?;
            if !change.files.is_empty() {
                write_files(app, &change.files).await;
            }
        }
        replica.applied.store(last, Ordering::Relaxed);
    }
}

/// Applies the stored configuration whole: every object put again, every object the store
/// no longer has deleted, and every registry file the log holds written again.
async fn reload(app: &App, replica: &Replica) -> Result<(), ApiError> {
    let rows = app.store().objects().await?;
    let stored: std::collections::BTreeSet<i64> = rows.iter().map(|r| r.id).collect();
    let puts = rows.iter().filter_map(|r| object(r.id, &r.kind, &r.body)).collect();
    let deletes = app.config().ids().difference(&stored).copied().collect();
    app.apply(puts, deletes, now()).await?;
    write_files(app, &replica.shared.logged_files().await?).await;
    Ok(())
}

/// Writes registry files another replica's API wrote (or the log holds) into this replica's
/// directory, then reloads the registry: the same files, so the same registry, everywhere. A
/// file that cannot be written is logged; the reload then says what the directory holds.
async fn write_files(app: &App, files: &[vantage_store::FileWrite]) {
    let _one_at_a_time = app.mirrors_write().await;
    put_files(&app.mirrors_dir(), files);
    // The outcome is logged and counted by the reload itself.
    let _ = crate::mirrors::reload(app).await;
}

/// [`write_files`] without the reload: at start, before the registry is first read. A name
/// read from the database is written only when it is a registry file of the directory, never
/// a path elsewhere.
pub(crate) fn put_files(dir: &std::path::Path, files: &[vantage_store::FileWrite]) {
    for f in files {
        if !is_registry_file(&f.name) {
            tracing::error!(file = %f.name, "a logged mirror registry file is not a file of the directory; skipped");
            continue;
        }
        if let Err(e) = crate::mirrors::put_file(dir, &f.name, f.text.as_deref()) {
            tracing::error!(file = %f.name, error = %e, "cannot write a mirror registry file another replica wrote");
        }
    }
}

/// Object `id` as stored (`kind`, `body`), or `None` with the reason logged: one a newer
/// version wrote is skipped rather than holding up the rest.
fn object(id: i64, kind: &str, body: &str) -> Option<(i64, Object)> {
    Object::parse(kind, body)
        .map_err(|e| tracing::error!(id, error = %e, "a stored object does not parse"))
        .ok()
        .map(|o| (id, o))
}

/// Feeds the newest stored revision of every cluster to a follower's core, which publishes
/// the ones it does not have (the lease holder's are its own: nothing is read).
async fn revisions(app: &App) -> Result<(), ApiError> {
    if app.view().role == Role::Leader {
        return Ok(());
    }
    let stored: Vec<StoredRevision> =
        app.store().latest_revisions().await?.into_iter().map(stored_revision).collect();
    app.owner().tell(Input::Revisions(stored)).await
}

/// A stored revision as the core takes it.
pub(crate) fn stored_revision(r: vantage_store::RevisionRow) -> StoredRevision {
    StoredRevision {
        cluster: ClusterId(r.cluster),
        number: r.number,
        at: r.at,
        reason: r.reason,
        // Records that no longer parse publish nothing until the next revision.
        records: serde_json::from_value::<Records>(r.records).unwrap_or_default(),
        held: serde_json::from_value(r.held).unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::sync::Mutex;

    use super::*;
    use crate::support::lock;

    /// A lease held as its script says, try after try (then as it last said), noting when
    /// each try was made and how often it was let go.
    #[derive(Default)]
    struct Scripted {
        script: VecDeque<bool>,
        held: bool,
        tries: Arc<Mutex<Vec<tokio::time::Instant>>>,
        released: Arc<Mutex<usize>>,
    }

    impl Holder for Scripted {
        fn hold(&mut self) -> impl Future<Output = bool> + Send {
            lock(&self.tries).push(tokio::time::Instant::now());
            self.held = self.script.pop_front().unwrap_or(self.held);
            std::future::ready(self.held)
        }
        fn epoch(&self) -> Option<i64> {
            self.held.then_some(7)
        }
        fn release(&mut self) {
            self.held = false;
            *lock(&self.released) += 1;
        }
    }

    /// On the paused clock: the lease is tried every half second; while held, the epoch is
    /// the one taken; losing it is told to the core (one event: the lease lost); at the stop
    /// it is let go and the epoch cleared.
    #[tokio::test]
    async fn the_lease_is_tried_every_half_second_and_its_loss_told() {
        let (_dir, app, _) = crate::app::lab().await;
        // The store and the owner are set up; from here the test's clock only moves when the
        // task waits for it.
        tokio::time::pause();
        let before = app.owner().read(|c, _| c.last_event_id()).await.unwrap();
        let holder = Scripted { script: [true, true, false, false, false].into(), ..Scripted::default() };
        let (tries, released) = (holder.tries.clone(), holder.released.clone());
        let epoch = AtomicI64::new(0);
        let (stop, stopped) = watch::channel(false);
        let task = hold_lease(&app, holder, &epoch, "test", stopped);
        let check = async {
            while lock(&tries).len() < 2 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            assert_eq!(epoch.load(Ordering::Relaxed), 7, "held: the epoch taken");
            while lock(&tries).len() < 6 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            assert_eq!(epoch.load(Ordering::Relaxed), 0, "lost: no epoch");
            stop.send(true).unwrap();
        };
        tokio::join!(task, check);
        let tries = lock(&tries).clone();
        assert_eq!(tries[1] - tries[0], LEASE_EVERY, "{tries:?}");
        assert!(tries.windows(2).all(|w| w[1] - w[0] >= LEASE_EVERY), "{tries:?}");
        assert_eq!(*lock(&released), 1, "let go at the stop");
        assert_eq!(epoch.load(Ordering::Relaxed), 0);
        // The lease's loss was only told; a read behind it is answered once the owner's view
        // holds it.
        let after = app.owner().read(|c, _| c.last_event_id()).await.unwrap();
        assert_eq!(app.view().role, Role::Follower, "the core was told");
        assert_eq!(after - before, 1, "one event: the lease lost");
    }

    #[test]
    fn logged_files_are_written_only_inside_the_registry_directory() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("mirrors");
        let put = |name: &str| vantage_store::FileWrite { name: name.into(), text: Some("host: x\n".into()) };
        let outside = root.path().join("outside.yaml");
        let absolute = outside.to_string_lossy().into_owned();
        let names =
            ["../outside.yaml", &absolute, ".hidden.yaml", "a\\b.yaml", "notes.txt", "m.example.net.yaml"];
        put_files(&dir, &names.map(put));
        let mut written: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        written.sort();
        assert_eq!(written, ["m.example.net.yaml"]);
        assert!(!outside.exists());
    }
}
