//! Reports taken in. A report is checked against the work its caller holds in the published
//! view and acknowledged as soon as the control core and the store have room for it: the core
//! records it (so that verdicts follow the fleet while storage is slow or down), then its
//! results are stored in the background, in the order the core recorded them (one task takes
//! the core's answers in turn and queues each report's rows behind the ones before, so the
//! latest row stored is the core's latest). The acknowledgement waits for neither a pass nor
//! a commit — a commit of the results waiting takes longer than a prober should be kept. What
//! is acknowledged and not yet stored is bounded ([`IN_FLIGHT`] results): beyond it the next
//! report waits, so a store that cannot keep up slows the probers down instead of filling
//! memory. Results not stored — refused by the store, or by the core when new work came
//! between the check and the recording — are logged and counted (`vantage_results_unstored`),
//! not retried: the next round supersedes them.

use std::collections::BTreeMap;
use std::sync::{Arc, Weak};
use std::time::Duration;

use axum::http::StatusCode;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use vantage_control::identity::Caller;
use vantage_control::target::Subject;
use vantage_control::{Accepted, check_report};
use vantage_core::Timestamp;
use vantage_core::ids::ClusterId;
use vantage_core::wire;
use vantage_store::{ResultRow, ResultWriter, Store};

use crate::app::App;
use crate::error::ApiError;
use crate::owner::{Input, Outcome};

/// A report the core recorded (or refused), on its way to the store: in the core's order.
pub(crate) struct Recorded {
    caller: Caller,
    outcome: Outcome,
    report: wire::Report,
    /// When the core took it: the time the other replicas take it at.
    at: Timestamp,
    /// Its results' room, given back once they are stored.
    room: OwnedSemaphorePermit,
}

/// What the ordered task takes, in the core's order.
enum Queued {
    /// A report recorded (or refused).
    Recorded(Recorded),
    /// A prober or probing node that no longer counts: its latest results go, after the rows
    /// of the reports recorded before.
    Forget(Caller),
    /// Answered once everything queued before is done (the driver's last step at a stop).
    Drained(tokio::sync::oneshot::Sender<()>),
}

/// Where the core sends a report once recorded: the intake's queue, in the core's order.
pub(crate) struct Then {
    queue: UnboundedSender<Queued>,
    room: OwnedSemaphorePermit,
}

impl Then {
    /// Queues the core's answer to the report, taken at `at`, for storing.
    pub(crate) fn send(self, caller: Caller, outcome: Outcome, report: wire::Report, at: Timestamp) {
        let results = report.results.len();
        let recorded = Recorded { caller, outcome, report, at, room: self.room };
        if self.queue.send(Queued::Recorded(recorded)).is_err() {
            // Its reader is gone only with the server.
            tracing::error!(
                ?caller,
                results,
                "a report acknowledged reached the core after the intake stopped"
            );
        }
    }
}

/// Results acknowledged and not yet stored, at most: 50 probers' full reports, what the
/// store's group commit was measured with (`cargo bench -p vantage-store --bench results`),
/// about 250 MB at worst.
const IN_FLIGHT: u32 = 500_000;
/// How long a stopping server waits for the results it acknowledged to be stored.
const SETTLE: Duration = Duration::from_secs(30);

/// The store's side of the intake: the group-commit writer, and the room left for results
/// acknowledged and not yet stored.
#[derive(Debug)]
pub(crate) struct Intake {
    writer: ResultWriter,
    room: Arc<Semaphore>,
    queue: UnboundedSender<Queued>,
}

impl Intake {
    /// Starts the writer and the task storing `app`'s reports in order on the current runtime.
    pub(crate) fn new(store: Store, app: Weak<App>) -> Intake {
        let (queue, recorded) = unbounded_channel();
        tokio::spawn(store_in_order(app, recorded));
        Intake {
            writer: ResultWriter::spawn(store),
            room: Arc::new(Semaphore::new(IN_FLIGHT as usize)),
            queue,
        }
    }

    /// Waits until every acknowledged result is stored or refused, for [`SETTLE`] at most, and
    /// takes no more (at shutdown: a report still arriving is answered 503).
    pub(crate) async fn settled(&self) {
        let all = tokio::time::timeout(SETTLE, self.room.acquire_many(IN_FLIGHT)).await;
        // Closed while the room is held: no report takes it once given back.
        self.room.close();
        if all.is_err() {
            tracing::error!(
                "results acknowledged to probers were still being stored after 30 s; stopping without them"
            );
        }
    }

    /// Deletes the stored latest results of `caller` once the results of every report queued
    /// before are stored.
    pub(crate) fn forget(&self, caller: Caller) {
        if self.queue.send(Queued::Forget(caller)).is_err() {
            tracing::error!(?caller, "a prober's results were to be deleted after the intake stopped");
        }
    }

    /// Waits until everything queued so far is carried out: the deletions the core asked for
    /// last, at a stop, are not lost with the process.
    pub(crate) async fn drained(&self) {
        let (done, drained) = tokio::sync::oneshot::channel();
        if self.queue.send(Queued::Drained(done)).is_ok() {
            let _ = drained.await;
        }
    }

    /// Results acknowledged and not yet stored.
    pub(crate) fn waiting(&self) -> usize {
        IN_FLIGHT as usize - self.room.available_permits()
    }
}

/// Checks a report against the published view (refused: nothing is recorded or stored), waits
/// for room, hands it to the control core and acknowledges it; the core's answer is carried out
/// in the background ([`store_in_order`]).
pub(super) async fn ingest(app: &App, caller: Caller, report: wire::Report) -> Result<StatusCode, ApiError> {
    if report.results.len() > wire::MAX_RESULTS {
        return Err(ApiError::TooLarge(format!(
            "a report carries at most {} results, got {}; send several reports",
            wire::MAX_RESULTS,
            report.results.len()
        )));
    }
    report.check()?;
    let checked = check_report(app.view().probers.get(&caller).map(|p| &p.given), &report)?;
    let count = u32::try_from(report.results.len()).unwrap_or(IN_FLIGHT);
    let intake = app.intake();
    let room = intake.room.clone().acquire_many_owned(count).await.map_err(|_| stopping())?;
    let then = Then { queue: intake.queue.clone(), room };
    app.owner().tell(Input::Report { caller, report, checked, then }).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The intake is closed: the server is stopping.
fn stopping() -> ApiError {
    ApiError::Unavailable("the server is shutting down".into())
}

/// Takes the core's answers in its order: each accepted report's round trips observed, the
/// report relayed to the other replicas, its results queued for the store behind the ones
/// before; its room is given back once they are committed. A prober to forget waits for
/// everything before it to be committed, and what comes after waits for the deletion.
async fn store_in_order(app: Weak<App>, mut queued: UnboundedReceiver<Queued>) {
    while let Some(next) = queued.recv().await {
        let Some(app) = app.upgrade() else { return };
        match next {
            Queued::Recorded(recorded) => store(app, recorded).await,
            Queued::Forget(caller) => forget(&app, caller).await,
            Queued::Drained(done) => {
                let _ = done.send(());
            }
        }
    }
}

/// One report the core answered: observed, relayed and queued for the store if accepted; its
/// room given back once its rows are committed (waited for beside the queue).
async fn store(app: Arc<App>, Recorded { caller, outcome, report, at, room }: Recorded) {
    let Accepted { subjects, rows } = match outcome {
        Ok(accepted) => accepted,
        // The caller fetched new work after the report was checked, and the report names
        // targets it no longer holds.
        Err(e) => {
            tracing::warn!(?caller, error = %e, "a report acknowledged was refused by the control core");
            app.metrics().results_unstored(report.results.len());
            return;
        }
    };
    observe(&app, caller, &subjects, &report);
    app.relay(at, move || vantage_control::Relayed::Report { caller, report });
    let rows: Vec<ResultRow> = rows
        .into_iter()
        .map(|(subject, l)| ResultRow {
            prober: caller.id(),
            target: subject.to_string(),
            at: l.at,
            sent: l.sent,
            lost: l.lost,
            rtt_us: l.rtt_us,
            error: l.error,
            register: l.register,
            hls: l.hls.as_deref().copied(),
        })
        .collect();
    let count = rows.len();
    let committed = app.intake().writer.submit(rows).await;
    tokio::spawn(async move {
        if let Err(e) = async { committed?.await }.await {
            tracing::error!(?caller, results = count, error = %e, "results acknowledged could not be stored");
            app.metrics().results_unstored(count);
        }
        drop(room);
    });
}

/// Deletes `caller`'s latest results after every row queued before is written or refused
/// (the writer takes batches in order: an empty one is answered after theirs). A batch that
/// failed still answers in order, and rows of it may be stored (PostgreSQL commits the latest
/// rows before the history), so the deletion goes ahead.
async fn forget(app: &App, caller: Caller) {
    if let Err(vantage_store::Error::WriterStopped) = app.intake().writer.write(Vec::new()).await {
        tracing::warn!(
            prober = caller.id(),
            "the results writer stopped: a prober's results are left to expire"
        );
        return;
    }
    if let Err(e) = app.store().delete_latest_of(caller.id()).await {
        tracing::warn!(prober = caller.id(), error = %e, "cannot delete the results of a prober");
    }
}

/// The round trips of an accepted report into the metrics.
fn observe(app: &App, caller: Caller, subjects: &[Subject], report: &wire::Report) {
    // Accepted: every target it names was given out, so its labels are configured names.
    let config = app.config();
    // Round trips by the cluster of their target: one histogram look-up per cluster a report
    // names, not per result (a report carries up to 10,000, mostly of one cluster).
    let mut rtts: BTreeMap<ClusterId, Vec<f64>> = BTreeMap::new();
    for (subject, r) in subjects.iter().zip(&report.results) {
        match subject {
            Subject::Address(key) => {
                if let Some(node) = config.nodes.get(&key.node.0) {
                    let good = r.attempts.iter().filter(|a| a.good());
                    rtts.entry(node.value.cluster)
                        .or_default()
                        .extend(good.map(|a| f64::from(a.rtt_us) / 1e6));
                }
            }
            Subject::Mirror(host) => {
                // Attempts that ended before any exchange carry no duration.
                for a in r.attempts.iter().filter(|a| a.rtt_us > 0) {
                    app.metrics().mirrors().check_took(host, f64::from(a.rtt_us) / 1e6);
                }
            }
            // A region's TTFB is its own probers' (another region's probes of its endpoints
            // order that region's players only).
            Subject::Endpoint(k) if k.from.is_none() => {
                if let Some(m) = config.monitors.get(&k.monitor.0)
                    && let Some(ms) = r.hls.and_then(|h| h.ttfb_ms)
                {
                    app.metrics().monitors().ttfb(&m.value.name, &k.region, ms / 1000.0);
                }
            }
            Subject::Endpoint(_) => {}
        }
    }
    for (cluster, seconds) in rtts {
        if let Some(place) = vantage_control::fleet::ProbePlace::of(&config, caller, cluster) {
            app.metrics().probe_rtts(&place, seconds);
        }
    }
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::http::{Method, Request, header};
    use tower::ServiceExt;
    use vantage_control::config::{Object, ProberRecord};
    use vantage_control::fixtures::{good_round, large_fleet};
    use vantage_core::result::{Attempt, ErrorCode, Stages};

    use super::*;
    use crate::app::lab;
    use crate::support::now;

    /// `report` sent as the prober with certificate `fp-0`; the answer's status.
    async fn send(router: &axum::Router, report: &wire::Report) -> StatusCode {
        let mut req = Request::builder()
            .method(Method::POST)
            .uri(wire::PROBER_REPORT)
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(serde_json::to_vec(report).unwrap()))
            .unwrap();
        crate::channel::as_peer(&mut req, "fp-0");
        let sent = tokio::time::timeout(Duration::from_secs(10), router.clone().oneshot(req));
        sent.await.expect("answered without waiting for the core").unwrap().status()
    }

    /// While the core is busy (as in a long pass), a report is refused or acknowledged from
    /// the published view; once the core is free it records the reports and their results are
    /// stored in its order (the later report's rows are the latest), nothing is left waiting,
    /// and once settled (a stop) the intake takes no more.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn reports_are_answered_while_the_core_is_busy_and_stored_in_order() {
        let (_dir, app, _) = lab().await;
        let fleet = large_fleet(2, 1);
        app.apply(fleet.puts, Vec::new(), now()).await.unwrap();
        let caller = fleet.probers[0];
        let work = app.owner().ask(|reply| Input::Work { caller, reply }).await.unwrap();
        let round = good_round(&work, now());
        let results = round[0].results.len();
        assert!(results > 0);
        let router = crate::channel::router(app.clone(), crate::listen::ListenerLimits::of(64).channel);

        let (release, holding) = crate::owner::tests::hold(&app).await;
        let mut stranger = round[0].clone();
        stranger.results[0].target = "n999/203.0.113.9/80".into();
        assert_eq!(send(&router, &stranger).await, StatusCode::BAD_REQUEST, "refused from the view");
        assert_eq!(send(&router, &round[0]).await, StatusCode::NO_CONTENT);
        // The same targets again, every attempt lost: sent after, so stored after.
        let lost = Attempt { stages: Stages::empty(), rtt_us: 0, error: Some(ErrorCode::Timeout) };
        let mut later = round[0].clone();
        later.results.iter_mut().for_each(|r| r.attempts = vec![lost; 3]);
        assert_eq!(send(&router, &later).await, StatusCode::NO_CONTENT);
        assert_eq!(app.intake().waiting(), 2 * results, "acknowledged, not yet stored");
        assert!(app.store().latest().await.unwrap().is_empty(), "the core has not recorded them");

        release.send(()).unwrap();
        holding.await.unwrap().unwrap();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while app.intake().waiting() > 0 {
            assert!(tokio::time::Instant::now() < deadline, "the results are stored");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let latest = app.store().latest().await.unwrap();
        assert_eq!(latest.len(), results, "every result stored, the stranger none");
        assert!(latest.iter().all(|r| r.lost == 3), "the later report is the latest: {latest:?}");
        let recorded = app.owner().read(|c, _| c.addresses().results().targets()).await.unwrap();
        assert_eq!(recorded, results, "and recorded by the core");

        app.intake().settled().await;
        assert_eq!(send(&router, &round[0]).await, StatusCode::SERVICE_UNAVAILABLE, "a stopping server");
    }

    /// A prober disabled just after a report was acknowledged: its results are deleted after
    /// that report's rows are stored, not before (which left them stored, reloaded at a
    /// restart as if the prober still counted).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_disabled_probers_results_go_after_its_last_report_is_stored() {
        let fleet = large_fleet(2_000, 1);
        let prober = fleet.puts.iter().find(|(_, o)| matches!(o, Object::Prober(_))).cloned().unwrap();
        // With its driver running: the deletion is one of the core's outputs.
        let running = crate::bench::Running::start(fleet.puts).await;
        let app = running.app.clone();
        let caller = fleet.probers[0];
        let router = crate::channel::router(app.clone(), crate::listen::ListenerLimits::of(64).channel);
        let (id, Object::Prober(record)) = prober else { unreachable!() };
        let with = |enabled: bool| vec![(id, Object::Prober(ProberRecord { enabled, ..record.clone() }))];
        // The store busy with another prober's results, as under load: the report's rows wait.
        let other = |r: &vantage_core::result::ProbeResult| ResultRow {
            prober: 999_999,
            target: r.target.clone(),
            at: now(),
            sent: 1,
            lost: 0,
            rtt_us: Some(1_000),
            error: None,
            register: Default::default(),
            hls: None,
        };
        // Whether the deletion overtakes the rows is a race: a few rounds make it show.
        for _ in 0..4 {
            app.apply(with(true), Vec::new(), now()).await.unwrap();
            let work = app.owner().ask(|reply| Input::Work { caller, reply }).await.unwrap();
            let (release, holding) = crate::owner::tests::hold(&app).await;
            let round = good_round(&work, now());
            for report in &round {
                assert_eq!(send(&router, report).await, StatusCode::NO_CONTENT);
            }
            let busy: Vec<ResultRow> =
                (0..20).flat_map(|_| round.iter().flat_map(|r| &r.results).map(other)).collect();
            let busy = app.intake().writer.submit(busy).await.unwrap();
            let change = tokio::spawn({
                let (app, disabled) = (app.clone(), with(false));
                async move { app.apply(disabled, Vec::new(), now()).await }
            });
            // The change takes its place behind the reports, is committed, then reaches the owner.
            while app.owner().queued() <= round.len() {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
            release.send(()).unwrap();
            holding.await.unwrap().unwrap();
            change.await.unwrap().unwrap();
            busy.await.unwrap();
            let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
            loop {
                let latest = app.store().latest().await.unwrap();
                let left = latest.iter().filter(|r| r.prober == caller.id()).count();
                if left == 0 && app.intake().waiting() == 0 {
                    break;
                }
                assert!(tokio::time::Instant::now() < deadline, "{left} rows left of a disabled prober");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        // The reports were recorded and their rows stored (then deleted): none was refused.
        assert!(app.metrics().render().contains("vantage_results_unstored_total 0\n"));
    }
}
