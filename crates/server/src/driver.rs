//! The control core's driver: carries out, in order, what the core decided (its owner,
//! [`crate::owner`], queues it) — revisions stored then pushed to the publishers, the DNS
//! answer table rebuilt, alerts delivered and saved, audit entries and evaluator states
//! written, the store's upkeep handed to its own task ([`crate::upkeep`]). It runs beside the
//! owner, so storage that is slow never holds up a pass. It decides nothing; the one thing it keeps is the I/O
//! concern of revisions the store refused, which wait in memory and are stored, in order,
//! once it takes writes again.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::json;
use tokio::sync::{mpsc, watch};
use vantage_control::events::FleetEvent;
use vantage_control::{Output, Revision, Upkeep};
use vantage_core::ids::ClusterId;
use vantage_store::{EventRow, NewAudit, RevisionRow};

use crate::alerts::Notice;
use crate::app::App;
use crate::owner::Input;
use crate::saves::Saves;
use crate::support::stopped;

/// At most this many unsaved revisions are kept per cluster; the oldest go first.
const MAX_UNSAVED: usize = 1_000;

/// Where the outputs the driver does not carry out itself go: alerts to delivery, saves to
/// their writer, upkeep to its task.
struct Consumers {
    notices: mpsc::UnboundedSender<Notice>,
    saves: Saves,
    upkeep: mpsc::UnboundedSender<Upkeep>,
}

/// Runs until `stop`, then carries out what the core decided before it (the owner is asked
/// to queue everything first); `saves` goes with it (its writer then writes what is left and
/// ends), and the upkeep task ends once it has done what it was handed.
pub(crate) async fn run(
    app: Arc<App>,
    mut decided: mpsc::UnboundedReceiver<Output>,
    notices: mpsc::UnboundedSender<Notice>,
    saves: Saves,
    mut stop: watch::Receiver<bool>,
) {
    let (upkeep, work) = mpsc::unbounded_channel();
    let upkept = tokio::spawn(crate::upkeep::run(app.store().clone(), work));
    let to = Consumers { notices, saves, upkeep };
    let mut unsaved: BTreeMap<ClusterId, Vec<RevisionRow>> = BTreeMap::new();
    loop {
        let o = tokio::select! {
            o = decided.recv() => o,
            _ = stopped(&mut stop) => break,
        };
        let Some(o) = o else { break };
        execute(&app, o, &to, &mut unsaved).await;
        // What waits behind it first: then the revisions storage refused, once per batch.
        while let Ok(o) = decided.try_recv() {
            execute(&app, o, &to, &mut unsaved).await;
        }
        for rows in unsaved.values_mut() {
            store_unsaved(&app, rows).await;
        }
        unsaved.retain(|_, rows| !rows.is_empty());
    }
    // What was decided until now (a change's outputs, the last events and states) is carried
    // out before `saves` is dropped.
    if app.owner().ask(Input::Flush).await.is_ok() {
        while let Ok(o) = decided.try_recv() {
            execute(&app, o, &to, &mut unsaved).await;
        }
    }
    drop(to);
    // Its end only: the task stops after the work already handed to it.
    let _ = upkept.await;
}

async fn execute(
    app: &Arc<App>,
    o: Output,
    to: &Consumers,
    unsaved: &mut BTreeMap<ClusterId, Vec<RevisionRow>>,
) {
    let saves = &to.saves;
    match o {
        Output::Revision(r) => revision(app, r, unsaved).await,
        Output::Answers(snapshots) => crate::publishing::rebuild(app.answers(), app.dns(), &snapshots),
        Output::Alert(a) => {
            match a.state {
                vantage_control::alerts::AlertState::Firing => {
                    tracing::warn!(kind = %a.kind, summary = %a.summary, "alert firing")
                }
                vantage_control::alerts::AlertState::Resolved => {
                    tracing::info!(kind = %a.kind, summary = %a.summary, "alert resolved")
                }
            }
            // Delivery stops only at shutdown; an alert then has nowhere to go.
            let _ = to.notices.send(Notice(a));
        }
        Output::SaveAlerts(json) => saves.state("alerts".into(), json),
        Output::Audit(entries) => saves.audit(
            entries
                .into_iter()
                .map(|e| {
                    let entry = NewAudit {
                        actor: "system".into(),
                        action: e.action,
                        object: e.object,
                        metadata: e.metadata,
                    };
                    (e.at, entry)
                })
                .collect(),
        ),
        Output::SaveMirrors(json) => saves.state("mirrors".into(), json),
        Output::SaveMonitors(json) => saves.state("monitors".into(), json),
        Output::Recheck => app.wake_rechecks(),
        Output::CheckFreshness(checks) => crate::freshness::spawn(app, checks),
        Output::SaveState { cluster, json } => saves.state(format!("cluster:{cluster}"), json),
        Output::Upkeep(w) => {
            // Gone only once the driver itself ends.
            let _ = to.upkeep.send(w);
        }
        Output::Events(events) => {
            saves.events(events.iter().map(event_row).collect());
            live(app, events);
        }
        Output::LiveEvents(events) => live(app, events),
        Output::Publish(p) => app.publishers().push(app, &p),
        Output::DropUnsaved => {
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

/// Logs events and hands them to the open streams.
fn live(app: &App, events: Vec<FleetEvent>) {
    for e in events {
        tracing::info!(kind = e.kind.as_str(), id = e.id, "{}", e.summary);
        app.events().publish(e);
    }
}

fn event_row(e: &FleetEvent) -> EventRow {
    EventRow {
        id: i64::try_from(e.id).unwrap_or(i64::MAX),
        at: e.at,
        kind: e.kind.as_str().to_owned(),
        cluster: e.cluster.map(|c| c.0),
        node: e.node.map(|n| n.0),
        summary: e.summary.clone(),
        details: e.details.clone(),
    }
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
