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
use vantage_control::{Relayed, Role, StoredRevision};
use vantage_core::evaluate::Records;
use vantage_core::ids::ClusterId;
use vantage_store::{Replication, Store};

use crate::app::App;
use crate::support::{now, stopped};

/// How often the lease is tried, or checked while held.
const LEASE_EVERY: Duration = Duration::from_millis(500);
/// A lease check the database does not answer within this long counts as lost.
const LEASE_TIMEOUT: Duration = Duration::from_secs(1);
/// What the others wrote is read at least this often, notifications or not.
const CATCH_UP_EVERY: Duration = Duration::from_secs(1);
/// Relayed observations and logged changes are kept this long.
const KEPT_MS: i64 = 600_000;
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
    relay: mpsc::Sender<String>,
}

impl Replica {
    /// Where this replica stands at start (read before the configuration and observations
    /// are loaded: what comes after is read again, and applying it twice changes nothing),
    /// and the receiver the relay task sends from.
    pub(crate) async fn start(
        store: &Store,
    ) -> Result<Option<(Replica, mpsc::Receiver<String>)>, vantage_store::Error> {
        let Some(shared) = store.replication() else { return Ok(None) };
        let applied = AtomicI64::new(shared.changes_head().await?);
        let read = AtomicI64::new(shared.inbox_head().await?);
        let origin = format!("{}-{}-{}", hostname(), std::process::id(), now().millis());
        let (relay, rx) = mpsc::channel(RELAY_QUEUE);
        Ok(Some((Replica { shared, origin, applied, read, relay }, rx)))
    }

    /// Relays what this replica's core was fed to the other replicas'.
    pub(crate) fn relay(&self, r: &Relayed) {
        match serde_json::to_string(r) {
            Ok(body) => {
                if self.relay.try_send(body).is_err() {
                    tracing::warn!("relay queue full: an observation does not reach the other replicas");
                }
            }
            Err(e) => tracing::error!(error = %e, "cannot encode an observation to relay"),
        }
    }
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map_or_else(|_| "host".into(), |h| h.trim().to_owned())
}

/// Writes the observations to relay, in batches, until `stop`; then what waits, once.
pub(crate) async fn relay(
    shared: Replication,
    origin: String,
    mut rx: mpsc::Receiver<String>,
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
                let _ = shared.relay(&origin, now(), &batch).await;
                return;
            }
        };
        if n == 0 {
            return;
        }
        while let Err(e) = shared.relay(&origin, now(), &batch).await {
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
pub(crate) async fn lease(app: Arc<App>, mut stop: watch::Receiver<bool>) {
    let Some(replica) = app.replica() else { return };
    let mut lease = replica.shared.lease();
    let mut tick = tokio::time::interval(LEASE_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = stopped(&mut stop) => break,
        }
        let held = lease.hold(LEASE_TIMEOUT).await;
        let role = if held { Role::Leader } else { Role::Follower };
        if app.control().role() == role {
            continue;
        }
        if held && let Err(e) = revisions(&app).await {
            // Without the stored revisions it could number over them: it waits a turn.
            tracing::warn!(error = %e, "took the evaluator lease but cannot read the stored revisions; letting it go");
            lease.release();
            continue;
        }
        tracing::info!(?role, origin = %replica.origin, "evaluator lease changed");
        app.feed(|c| c.handle_lease(role, now()));
    }
    lease.release();
}

/// Reads what the other replicas wrote — at each notification, and every second regardless —
/// and feeds it to the core; prunes old relayed rows now and then.
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
                Some(l) => l.recv().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = tick.tick() => {}
            r = notified => {
                if r.is_err() {
                    listening = None;
                }
            }
            () = stopped(&mut stop) => break,
        }
        if let Err(e) = catch_up(&app, replica).await {
            tracing::debug!(error = %e, "cannot read what the other replicas wrote");
        }
        rounds += 1;
        if rounds.is_multiple_of(60)
            && let Err(e) = replica.shared.prune(now().plus_millis(-KEPT_MS)).await
        {
            tracing::debug!(error = %e, "cannot prune relayed observations");
        }
    }
}

/// Applies the changes, observations and revisions the others wrote since the last read.
async fn catch_up(app: &Arc<App>, replica: &Replica) -> Result<(), vantage_store::Error> {
    changes(app).await?;
    loop {
        let rows = replica.shared.relayed_after(replica.read.load(Ordering::Relaxed)).await?;
        let Some(last) = rows.last().map(|r| r.id) else { break };
        let relayed: Vec<Relayed> = rows
            .iter()
            .filter(|r| r.origin != replica.origin)
            .filter_map(|r| {
                serde_json::from_str(&r.body)
                    .map_err(
                        |e| tracing::warn!(id = r.id, error = %e, "a relayed observation does not parse"),
                    )
                    .ok()
            })
            .collect();
        if !relayed.is_empty() {
            app.feed(|c| {
                let at = now();
                for r in relayed {
                    c.handle_relayed(r, at);
                }
            });
        }
        replica.read.store(last, Ordering::Relaxed);
    }
    revisions(app).await
}

/// Applies the logged changes after the newest this replica holds, in order (the caller may
/// hold the change lock already: see [`App::change`]).
pub(crate) async fn changes(app: &App) -> Result<(), vantage_store::Error> {
    let Some(replica) = app.replica() else { return Ok(()) };
    let _one_at_a_time = app.changing().await;
    changes_locked(app, replica).await
}

/// [`changes`] with the change lock held.
pub(crate) async fn changes_locked(app: &App, replica: &Replica) -> Result<(), vantage_store::Error> {
    loop {
        let logged = replica.shared.changes_after(replica.applied.load(Ordering::Relaxed)).await?;
        let Some(last) = logged.last().map(|c| c.seq) else { return Ok(()) };
        for change in logged.into_iter().filter(|c| c.origin != replica.origin) {
            let mut puts = Vec::new();
            let mut deletes = Vec::new();
            for w in change.writes {
                match w {
                    vantage_store::Write::Put { id, kind, body, .. } => match Object::parse(&kind, &body) {
                        Ok(o) => puts.push((id, o)),
                        Err(e) => {
                            tracing::error!(seq = change.seq, id, error = %e, "a logged change does not parse")
                        }
                    },
                    vantage_store::Write::Delete { id } => deletes.push(id),
                }
            }
            app.apply(puts, deletes, change.at);
        }
        replica.applied.store(last, Ordering::Relaxed);
    }
}

/// Feeds the newest stored revision of every cluster to the core (a follower publishes the
/// ones it does not have).
async fn revisions(app: &App) -> Result<(), vantage_store::Error> {
    let stored: Vec<StoredRevision> =
        app.store().latest_revisions().await?.into_iter().map(stored_revision).collect();
    app.feed(|c| {
        let at = now();
        for r in stored {
            c.handle_revision(r, at);
        }
    });
    Ok(())
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
    }
}
