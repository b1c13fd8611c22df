//! Revisions stored in order, then pushed to their clusters' publishers — the one consumer of
//! the core's outputs that waits on storage, so it runs on a task of its own: a store that is
//! slow or locked (each write may wait its busy timeout) holds up no alert, event or DNS
//! answer decided after it. The one thing it keeps is the I/O concern of revisions the store
//! refused, which wait in memory and are stored, in order, once it takes writes again.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio::sync::mpsc;
use vantage_control::Revision;
use vantage_control::snapshot::Published;
use vantage_control::state_save::StateSave;
use vantage_core::ids::ClusterId;
use vantage_store::RevisionRow;

use crate::app::App;
use crate::saves::{Saves, ToSave};

/// At most this many unsaved revisions are kept per cluster; the oldest go first.
const MAX_UNSAVED: usize = 1_000;
/// A revision's log line lists its addresses up to this many.
const LOGGED_RECORDS: usize = 16;
/// How often revisions the store refused are tried again while nothing new arrives.
const RETRY_EVERY: Duration = Duration::from_secs(1);

/// What the revisions' task is handed, in the core's order.
#[derive(Debug)]
pub(crate) enum Work {
    /// Store it (after any that wait), then push it.
    Store(Revision),
    /// Push this stored revision again (the lease was taken over).
    Publish(Arc<Published>),
    /// A cluster's evaluator state, saved once the revisions cut before it are stored: saved
    /// ahead of them, a restart would hold the holds and rule states of a revision never
    /// stored beside the records of the one before.
    SaveState(Box<StateSave>),
    /// The cluster is gone: its saved state goes, and any save of it still waiting with it.
    DropState(ClusterId),
    /// The lease was lost: what waits is the next holder's to number.
    DropUnsaved,
}

/// What waits: each cluster's revisions the store refused, oldest first, and its newest
/// state, which waits for them.
#[derive(Debug, Default)]
struct Waiting {
    revisions: BTreeMap<ClusterId, Vec<RevisionRow>>,
    states: BTreeMap<ClusterId, StateSave>,
}

/// Carries out `work` until the driver drops its end, then tries once more to store what
/// waits. Refused revisions are tried again a second after the store was last tried, not at
/// once: each try may wait out the store's busy timeout, and the pushes behind it with it.
pub(crate) async fn run(app: Arc<App>, mut work: mpsc::UnboundedReceiver<Work>, saves: Saves) {
    let mut waiting = Waiting::default();
    // When the store was last tried.
    let mut tried = tokio::time::Instant::now();
    loop {
        let received = if waiting.revisions.is_empty() {
            Ok(work.recv().await)
        } else {
            tokio::time::timeout_at(tried + RETRY_EVERY, work.recv()).await
        };
        match received {
            Ok(Some(w)) => {
                carry_out(&app, w, &mut waiting, &saves).await;
                while let Ok(w) = work.try_recv() {
                    carry_out(&app, w, &mut waiting, &saves).await;
                }
                tried = tokio::time::Instant::now();
            }
            Ok(None) => break,
            // A second without work while revisions wait: they are tried again.
            Err(_) => {
                retry(&app, &mut waiting).await;
                tried = tokio::time::Instant::now();
            }
        }
        hand_states(&mut waiting, &saves);
    }
    retry(&app, &mut waiting).await;
    hand_states(&mut waiting, &saves);
    if !waiting.states.is_empty() {
        tracing::warn!(
            clusters = waiting.states.len(),
            "states not saved: their revisions could not be stored"
        );
    }
}

async fn carry_out(app: &Arc<App>, w: Work, waiting: &mut Waiting, saves: &Saves) {
    match w {
        Work::Store(r) => revision(app, r, &mut waiting.revisions).await,
        Work::Publish(p) => app.publishers().push(app, &p),
        Work::SaveState(save) => {
            StateSave::fold_into(&mut waiting.states, *save);
            hand_states(waiting, saves);
        }
        Work::DropState(cluster) => {
            waiting.states.remove(&cluster);
            saves.state(crate::saves::cluster_key(cluster), ToSave::Dropped);
        }
        Work::DropUnsaved => {
            let dropped: usize = waiting.revisions.values().map(Vec::len).sum();
            if dropped > 0 {
                tracing::warn!(
                    dropped,
                    "lost the evaluator lease: revisions not stored are left to the next holder"
                );
            }
            *waiting = Waiting::default();
            saves.drop_cluster_states();
        }
    }
}

/// Hands to the writer the states of clusters whose revisions are all stored.
fn hand_states(waiting: &mut Waiting, saves: &Saves) {
    for (cluster, save) in std::mem::take(&mut waiting.states) {
        if waiting.revisions.get(&cluster).is_some_and(|rows| !rows.is_empty()) {
            waiting.states.insert(cluster, save);
        } else {
            saves.state(crate::saves::cluster_key(cluster), ToSave::Cluster(Box::new(save)));
        }
    }
}

/// Tries every cluster's waiting revisions once.
async fn retry(app: &App, waiting: &mut Waiting) {
    for rows in waiting.revisions.values_mut() {
        store_unsaved(app, rows).await;
    }
    waiting.revisions.retain(|_, rows| !rows.is_empty());
}

/// Stores a revision (after any that wait before it), then hands it to the cluster's
/// publishers, which record their outcome on it. While storage is down the answer still
/// changes (DNS serves from memory) and the revision waits to be stored.
async fn revision(app: &Arc<App>, r: Revision, unsaved: &mut BTreeMap<ClusterId, Vec<RevisionRow>>) {
    let p = &r.published;
    // The addresses only while a line of them stays readable: a large fleet's would be a
    // line of hundreds of kilobytes per revision (its event says what changed).
    let all = &p.records.all;
    let addresses = (all.len() <= LOGGED_RECORDS).then_some(all);
    tracing::info!(cluster = %p.zone.name, revision = p.number, reason = %p.reason, record_count = all.len(), records = ?addresses, "revision");
    app.metrics().revision(&p.zone.name, r.cause());
    let rows = unsaved.entry(p.cluster).or_default();
    rows.push(RevisionRow {
        cluster: p.cluster.0,
        number: p.number,
        at: p.at,
        reason: p.reason.clone(),
        records: serde_json::to_value(&p.records).unwrap_or_default(),
        held: serde_json::to_value(&p.held).unwrap_or_default(),
        publish: json!([]),
    });
    store_unsaved(app, rows).await;
    app.publishers().push(app, p);
}

/// Stores the waiting revisions, oldest first, and stops at the first one storage refuses
/// (keeping at most [`MAX_UNSAVED`]). Revisions refused because another replica holds the
/// evaluator lease are dropped: they are that replica's to number.
async fn store_unsaved(app: &App, unsaved: &mut Vec<RevisionRow>) {
    let mut stored = 0;
    for row in unsaved.iter() {
        match crate::replicas::store_revision(app, row).await {
            Ok(()) => stored += 1,
            Err(vantage_store::Error::Fenced) => {
                tracing::warn!(
                    cluster = row.cluster,
                    revision = row.number,
                    dropped = unsaved.len() - stored,
                    "another replica holds the evaluator lease: revisions not stored are left to it"
                );
                unsaved.clear();
                return;
            }
            Err(e) => {
                tracing::error!(cluster = row.cluster, revision = row.number, waiting = unsaved.len() - stored, error = %e, "cannot store revision; it is kept to be stored later");
                break;
            }
        }
    }
    unsaved.drain(..stored);
    if unsaved.len() > MAX_UNSAVED {
        let dropped = unsaved.len() - MAX_UNSAVED;
        tracing::error!(dropped, "storage down too long: the oldest unsaved revisions are dropped");
        unsaved.drain(..dropped);
    }
}
