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
use vantage_core::ids::ClusterId;
use vantage_store::RevisionRow;

use crate::app::App;

/// At most this many unsaved revisions are kept per cluster; the oldest go first.
const MAX_UNSAVED: usize = 1_000;
/// How often revisions the store refused are tried again while nothing new arrives.
const RETRY_EVERY: Duration = Duration::from_secs(1);

/// What the revisions' task is handed, in the core's order.
#[derive(Debug)]
pub(crate) enum Work {
    /// Store it (after any that wait), then push it.
    Store(Revision),
    /// Push this stored revision again (the lease was taken over).
    Publish(Arc<Published>),
    /// The lease was lost: what waits is the next holder's to number.
    DropUnsaved,
}

/// Carries out `work` until the driver drops its end, then tries once more to store what
/// waits.
pub(crate) async fn run(app: Arc<App>, mut work: mpsc::UnboundedReceiver<Work>) {
    let mut unsaved: BTreeMap<ClusterId, Vec<RevisionRow>> = BTreeMap::new();
    loop {
        let next = if unsaved.is_empty() {
            work.recv().await
        } else {
            match tokio::time::timeout(RETRY_EVERY, work.recv()).await {
                Ok(w) => w,
                // Nothing new: the waiting ones are tried again below.
                Err(_) => {
                    retry(&app, &mut unsaved).await;
                    continue;
                }
            }
        };
        let Some(w) = next else { break };
        carry_out(&app, w, &mut unsaved).await;
        while let Ok(w) = work.try_recv() {
            carry_out(&app, w, &mut unsaved).await;
        }
        retry(&app, &mut unsaved).await;
    }
    retry(&app, &mut unsaved).await;
}

async fn carry_out(app: &Arc<App>, w: Work, unsaved: &mut BTreeMap<ClusterId, Vec<RevisionRow>>) {
    match w {
        Work::Store(r) => revision(app, r, unsaved).await,
        Work::Publish(p) => app.publishers().push(app, &p),
        Work::DropUnsaved => {
            let dropped: usize = unsaved.values().map(Vec::len).sum();
            if dropped > 0 {
                tracing::warn!(
                    dropped,
                    "lost the evaluator lease: revisions not stored are left to the next holder"
                );
            }
            unsaved.clear();
        }
    }
}

/// Tries every cluster's waiting revisions once.
async fn retry(app: &App, unsaved: &mut BTreeMap<ClusterId, Vec<RevisionRow>>) {
    for rows in unsaved.values_mut() {
        store_unsaved(app, rows).await;
    }
    unsaved.retain(|_, rows| !rows.is_empty());
}

/// Stores a revision (after any that wait before it), then hands it to the cluster's
/// publishers, which record their outcome on it. While storage is down the answer still
/// changes (DNS serves from memory) and the revision waits to be stored.
async fn revision(app: &Arc<App>, r: Revision, unsaved: &mut BTreeMap<ClusterId, Vec<RevisionRow>>) {
    let p = &r.published;
    tracing::info!(cluster = %p.zone.name, revision = p.number, reason = %p.reason, records = ?p.records.all, "revision");
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
