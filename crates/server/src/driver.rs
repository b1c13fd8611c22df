//! The control core's driver: hands what the core decided (its owner, [`crate::owner`],
//! queues it) to the consumer of each kind of output, so that none waits behind another —
//! revisions to their task, stored in order then pushed, with the evaluator states saved after
//! the revisions cut before them ([`crate::revisions`]); the DNS answer
//! table rebuilt on a task of its own from the newest snapshots; the store's upkeep to its task
//! ([`crate::upkeep`]); alerts to delivery; saves, audit entries and events to the writer
//! ([`crate::saves`]); events to the open streams. It runs beside the owner and decides
//! nothing.

use std::sync::Arc;

use tokio::sync::{mpsc, watch};
use vantage_control::events::FleetEvent;
use vantage_control::snapshot::Snapshots;
use vantage_control::{Output, Upkeep};
use vantage_store::{EventRow, NewAudit};

use crate::alerts::Notice;
use crate::app::App;
use crate::owner::Input;
use crate::revisions::Work;
use crate::saves::{Saves, ToSave};
use crate::support::stopped;

/// Where the outputs go.
struct Consumers {
    notices: mpsc::UnboundedSender<Notice>,
    saves: Saves,
    upkeep: mpsc::UnboundedSender<Upkeep>,
    revisions: mpsc::UnboundedSender<Work>,
    /// The newest snapshots to answer DNS from (a rebuild takes the newest; none is queued).
    answers: watch::Sender<Option<Arc<Snapshots>>>,
}

/// Runs until `stop`, then hands on what the core decided before it (the owner is asked to
/// queue everything first); `saves` goes with it (its writer then writes what is left and
/// ends), and the other consumers end once they have done what they were handed.
pub(crate) async fn run(
    app: Arc<App>,
    mut decided: mpsc::UnboundedReceiver<Output>,
    notices: mpsc::UnboundedSender<Notice>,
    saves: Saves,
    mut stop: watch::Receiver<bool>,
) {
    let (upkeep, work) = mpsc::unbounded_channel();
    let upkept = tokio::spawn(crate::upkeep::run(app.store().clone(), work));
    let (revisions, stored) = mpsc::unbounded_channel();
    let storing = tokio::spawn(crate::revisions::run(app.clone(), stored, saves.clone()));
    let (answers, newest) = watch::channel(None);
    let answering = tokio::spawn(answer(app.clone(), newest));
    let to = Consumers { notices, saves, upkeep, revisions, answers };
    loop {
        let o = tokio::select! {
            o = decided.recv() => o,
            _ = stopped(&mut stop) => break,
        };
        let Some(o) = o else { break };
        hand_on(&app, o, &to);
    }
    // What was decided until now (a change's outputs, the last events and states) is handed
    // on before `saves` is dropped.
    if app.owner().ask(Input::Flush).await.is_ok() {
        while let Ok(o) = decided.try_recv() {
            hand_on(&app, o, &to);
        }
    }
    drop(to);
    // Their ends only: each stops after the work already handed to it; the intake (its own
    // task, shared with the reports) carries out the deletions handed to it.
    let _ = tokio::join!(upkept, storing, answering, app.intake().drained());
}

/// Rebuilds the DNS answer table whenever newer snapshots arrive or the geo databases change,
/// until the driver ends.
async fn answer(app: Arc<App>, mut newest: watch::Receiver<Option<Arc<Snapshots>>>) {
    let mut geo = app.geo_changes();
    // Databases put in use between the start's table and this subscription are built in now.
    geo.mark_changed();
    // The snapshots answered last, for a table rebuilt with new geo databases: before the first
    // ones, those the start answered from.
    let mut last = app.view().snapshots.clone();
    loop {
        tokio::select! {
            changed = newest.changed() => {
                if changed.is_err() {
                    return;
                }
                let Some(snapshots) = newest.borrow_and_update().clone() else { continue };
                last = snapshots;
            }
            changed = geo.changed() => {
                if changed.is_err() {
                    return;
                }
            }
        }
        let db = geo.borrow_and_update().clone();
        crate::publishing::rebuild(app.answers(), app.dns(), &last, db);
    }
}

/// Hands one output to its consumer; nothing here waits.
fn hand_on(app: &Arc<App>, o: Output, to: &Consumers) {
    let saves = &to.saves;
    // A consumer's end is gone only once the driver itself ends.
    match o {
        Output::Revision(r) => {
            let _ = to.revisions.send(Work::Store(r));
        }
        Output::Publish(p) => {
            let _ = to.revisions.send(Work::Publish(p));
        }
        Output::DropUnsaved => {
            let _ = to.revisions.send(Work::DropUnsaved);
        }
        Output::Answers(snapshots) => {
            let _ = to.answers.send(Some(snapshots));
        }
        Output::Alert(a) => {
            // Under the alerts' own target, which a log filter names to keep them out (the
            // demo narrates them itself).
            match a.state {
                vantage_control::alerts::AlertState::Firing => {
                    tracing::warn!(target: crate::ALERT_LOG_TARGET, kind = %a.kind, summary = %a.summary, "alert firing")
                }
                vantage_control::alerts::AlertState::Resolved => {
                    tracing::info!(target: crate::ALERT_LOG_TARGET, kind = %a.kind, summary = %a.summary, "alert resolved")
                }
            }
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
        Output::SaveAvailability(ledger) => saves.state("availability".into(), ToSave::Availability(ledger)),
        Output::Recheck => app.wake_rechecks(),
        Output::CheckFreshness(checks) => crate::freshness::spawn(app, checks),
        Output::SaveState(save) => {
            let _ = to.revisions.send(Work::SaveState(save));
        }
        Output::DropState(cluster) => {
            let _ = to.revisions.send(Work::DropState(cluster));
        }
        Output::Upkeep(w) => {
            let _ = to.upkeep.send(w);
        }
        Output::ForgetResults(caller) => app.intake().forget(caller),
        Output::Events(events) => {
            saves.events(events.iter().map(event_row).collect());
            live(app, events);
        }
        Output::LiveEvents(events) => live(app, events),
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use serde_json::json;
    use sqlx::Connection;
    use vantage_control::Revision;
    use vantage_control::alerts::{Alert, AlertKind, AlertState};
    use vantage_control::snapshot::{ClusterSnapshot, Published, Zone};
    use vantage_control::state_save::StateSave;
    use vantage_core::evaluate::Records;
    use vantage_core::ids::ClusterId;

    use super::*;
    use crate::support::now;

    /// While another connection holds the database's write lock (every write then waits its
    /// busy timeout), only the revision waits: the alert decided after it is delivered and DNS
    /// answers the revision at once; it is stored once the lock goes. A revision the store
    /// refuses is tried again, with the state that follows it held back until it is stored.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_locked_store_holds_up_only_the_revision() {
        let (dir, app, _) = crate::app::lab().await;
        let url = format!("sqlite://{}", dir.path().join("vantage.db").display());
        let mut other = sqlx::SqliteConnection::connect(&url).await.unwrap();
        sqlx::query("BEGIN IMMEDIATE").execute(&mut other).await.unwrap();

        let (decide, decided) = mpsc::unbounded_channel();
        let (notices, mut delivered) = mpsc::unbounded_channel();
        let (saves, writer) = crate::saves::queue();
        let written = tokio::spawn(writer.run(app.store().clone()));
        let (stop, stopped) = watch::channel(false);
        let driver = tokio::spawn(run(app.clone(), decided, notices, saves, stopped));

        let zone = Zone {
            name: "video".into(),
            domain: "cdn.example.net".into(),
            aliases: Vec::new(),
            ttl: 30,
            lines: BTreeMap::new(),
        };
        let at = now();
        let revision = |number| {
            Arc::new(Published {
                cluster: ClusterId(1),
                number,
                at,
                reason: format!("revision {number}"),
                records: Records::default(),
                held: BTreeMap::new(),
                zone: zone.clone(),
            })
        };
        let published = revision(1);
        let snapshot = ClusterSnapshot { published: Some(published.clone()), ..ClusterSnapshot::default() };
        let alert = Alert {
            id: 1,
            key: "node_offline/node:1".into(),
            kind: AlertKind::NodeOffline,
            state: AlertState::Firing,
            summary: "node edge-1 is offline (no heartbeat)".into(),
            details: json!({"node": "edge-1", "last_heartbeat": null}),
            fired_at: at,
            resolved_at: None,
        };
        decide.send(Output::Revision(Revision { published })).unwrap();
        decide.send(Output::Answers(Arc::new(BTreeMap::from([(ClusterId(1), Arc::new(snapshot))])))).unwrap();
        decide.send(Output::Alert(alert)).unwrap();

        let Notice(a) = tokio::time::timeout(Duration::from_secs(2), delivered.recv())
            .await
            .expect("the alert waited for the store")
            .unwrap();
        assert_eq!(a.kind, AlertKind::NodeOffline);
        let started = tokio::time::Instant::now();
        while !app.answers().load().zone_names().contains(&"cdn.example.net") {
            assert!(started.elapsed() < Duration::from_secs(2), "DNS waited for the store");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(app.store().revisions(1, 10).await.unwrap().is_empty(), "stored through the lock");

        sqlx::query("ROLLBACK").execute(&mut other).await.unwrap();
        stored(&app, 1).await;

        // A store that refuses the next revision outright: the evaluator state cut after it
        // waits for it (saved first, a restart would hold the holds and rule states of a
        // revision never stored, and serve the one before), and both go in,
        // in order, a second or so after the store takes writes again.
        let db = dir.path().join("vantage.db");
        crate::app::sqlite3(
            &db,
            "CREATE TRIGGER no_revisions BEFORE INSERT ON revisions BEGIN SELECT RAISE(ABORT, 'refused'); END;",
        );
        decide.send(Output::Revision(Revision { published: revision(2) })).unwrap();
        // The state of the pass that cut revision 2.
        let after =
            vantage_core::evaluate::ClusterState { checked_at: Some(revision(2).at), ..Default::default() };
        let json = serde_json::to_string(&after).unwrap();
        let save = StateSave { cluster: ClusterId(1), rest: after, addresses: Vec::new(), whole: true };
        decide.send(Output::SaveState(Box::new(save))).unwrap();
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(app.store().states("cluster:").await.unwrap().is_empty(), "saved ahead of its revision");
        crate::app::sqlite3(&db, "DROP TRIGGER no_revisions;");
        let took = stored(&app, 2).await;
        assert!(took <= Duration::from_secs(3), "tried again after {took:?}");
        let started = tokio::time::Instant::now();
        while app.store().states("cluster:").await.unwrap().is_empty() {
            assert!(started.elapsed() < Duration::from_secs(10), "the state was never saved");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        stop.send(true).unwrap();
        driver.await.unwrap();
        written.await.unwrap();
        assert_eq!(app.store().states("cluster:").await.unwrap(), [("cluster:1".to_owned(), json)]);
    }

    /// Waits until the store holds `n` revisions of cluster 1 (at most 10 s); how long it took.
    async fn stored(app: &App, n: usize) -> Duration {
        let started = tokio::time::Instant::now();
        while app.store().revisions(1, 10).await.unwrap().len() < n {
            assert!(started.elapsed() < Duration::from_secs(10), "revision {n} never stored");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        started.elapsed()
    }
}
