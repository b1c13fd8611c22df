//! The control core's owner: one thread of its own holds the [`Control`] — no lock around it —
//! so a pass never blocks an async worker. Handlers send it typed [`Input`]s over a bounded
//! channel (where they must answer from its decision, the answer comes back on a oneshot);
//! after each batch of inputs and the passes that follow, it publishes one immutable
//! [`View`] that every reader takes without waiting, and hands what the core decided to the
//! driver task, which carries it out. It reads the clock and moves data; it decides nothing.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use tokio::sync::{mpsc, oneshot, watch};
use vantage_control::config::Object;
use vantage_control::identity::Caller;
use vantage_control::mirrors::book::FreshnessReading;
use vantage_control::mirrors::registry::Changes;
use vantage_control::mirrors::{CheckRefused, CheckRun, LoadError};
use vantage_control::view::View;
use vantage_control::{Accepted, Checked, Control, Output, Relayed, ReportError, Role, StoredRevision};
use vantage_core::Timestamp;
use vantage_core::ids::{ClusterId, NodeId};
use vantage_core::wire;

use crate::error::ApiError;
use crate::metrics::Metrics;
use crate::support::now;

/// Inputs that may wait for the owner; a sender waits beyond (reports and heartbeats slow
/// down instead of piling up in memory).
const WAITING: usize = 4_096;
/// Inputs handled in one batch at most, so a flood never delays a pass that is due.
const BATCH: usize = 1_024;

/// A reading of the core that needs more than a [`View`] holds (every latest result, the
/// clusters' states): run by the owner between inputs, never changing anything.
type Read = Box<dyn FnOnce(&Control, Timestamp, &mut Answers) + Send>;

/// What a report's results are about with the results to store, or why it is refused.
pub(crate) type Outcome = Result<Accepted, ReportError>;

/// What the control core is fed: each event it decides on, with where its answer goes.
pub(crate) enum Input {
    /// A change committed to the store (at `at`); `done` once the published view holds it.
    Change { puts: Vec<(i64, Object)>, deletes: Vec<i64>, at: Timestamp, done: oneshot::Sender<()> },
    /// A prober or node enrolled; `done` once the view holds what it said.
    Enrolled { caller: Caller, hostname: String, version: String, done: oneshot::Sender<()> },
    /// A prober asks for its work.
    Work { caller: Caller, reply: oneshot::Sender<wire::Work> },
    /// A report, `checked` against a published view and acknowledged; what the core made of
    /// it (the results to store, or the refusal) goes on to the intake's queue, in order.
    Report { caller: Caller, report: wire::Report, checked: Checked, then: crate::channel::Then },
    /// A node agent's heartbeat, from `from`.
    Heartbeat {
        node: NodeId,
        heartbeat: wire::Heartbeat,
        from: IpAddr,
        reply: oneshot::Sender<wire::HeartbeatReply>,
    },
    /// A prober collects the confirmations asked of it.
    Rechecks { caller: Caller, reply: oneshot::Sender<wire::Recheck> },
    /// The evaluator lease changed hands.
    Lease { role: Role, last_event: u64 },
    /// The newest stored revisions (a follower publishes those it lacks).
    Revisions(Vec<StoredRevision>),
    /// What the other replicas were fed, each with when the one that received it took it.
    Relayed(Vec<(Timestamp, Relayed)>),
    /// The mirror registry's files as read (or why they could not be).
    Registry {
        files: Result<Vec<(String, String)>, Vec<LoadError>>,
        reply: oneshot::Sender<Result<Changes, LoadError>>,
    },
    /// An operator starts a mirror check run.
    CheckRun { regions: Option<Vec<String>>, reply: oneshot::Sender<Result<CheckRun, CheckRefused>> },
    /// A mirror's trace file was read.
    Freshness { host: String, reading: FreshnessReading },
    /// Requests from each region's clients since the last batch (region code, how many).
    Demand(Vec<(String, u64)>),
    /// A publisher pushed a revision (or failed to).
    Publication { cluster: ClusterId, number: u32, target: String, failure: Option<String> },
    /// A reading of the whole core.
    Read(Read),
    /// Answered once everything decided so far is in the driver's queue (at shutdown).
    Flush(oneshot::Sender<()>),
}

/// What a handler holds of the owner: where inputs go, and the view it published last.
#[derive(Debug)]
pub(crate) struct Owner {
    inputs: mpsc::Sender<Input>,
    view: Arc<ArcSwap<View>>,
}

/// The owner's stopping point: it is gone (the server is stopping).
fn gone() -> ApiError {
    ApiError::Unavailable("the control core has stopped: the server is shutting down".into())
}

impl Owner {
    /// Starts the owner's thread over `control`; what the core decides goes to the returned
    /// queue, in order. `config_changes` is bumped whenever a view with another configuration
    /// is published.
    pub(crate) fn spawn(
        mut control: Control,
        metrics: Arc<Metrics>,
        config_changes: watch::Sender<u64>,
    ) -> (Owner, mpsc::UnboundedReceiver<Output>) {
        let (inputs, rx) = mpsc::channel(WAITING);
        let (outputs, decided) = mpsc::unbounded_channel();
        let view = Arc::new(ArcSwap::from_pointee(control.view(now())));
        metrics.set_objects(&view.load().config);
        let published = view.clone();
        let run = move || {
            // A runtime of the thread's own, for its timer and its channel only.
            match tokio::runtime::Builder::new_current_thread().enable_time().build() {
                Ok(rt) => rt.block_on(run(
                    control,
                    rx,
                    Publish { view: published, metrics, config_changes },
                    outputs,
                )),
                Err(e) => tracing::error!(error = %e, "cannot start the control core's thread"),
            }
        };
        if let Err(e) = std::thread::Builder::new().name("vantage-control".into()).spawn(run) {
            tracing::error!(error = %e, "cannot start the control core's thread");
        }
        (Owner { inputs, view }, decided)
    }

    /// Inputs waiting for the owner, and places taken for them.
    #[cfg(test)]
    pub(crate) fn queued(&self) -> usize {
        self.inputs.max_capacity() - self.inputs.capacity()
    }

    /// The view published last.
    pub(crate) fn view(&self) -> Arc<View> {
        self.view.load_full()
    }

    /// Feeds an input that needs no answer.
    pub(crate) async fn tell(&self, input: Input) -> Result<(), ApiError> {
        self.inputs.send(input).await.map_err(|_| gone())
    }

    /// A place in the input queue, taken before a change is committed: once committed, the
    /// change reaches the core through it at once, even if the request that made it is
    /// dropped meanwhile (a deadline, a client gone).
    pub(crate) async fn reserve(&self) -> Result<mpsc::OwnedPermit<Input>, ApiError> {
        self.inputs.clone().reserve_owned().await.map_err(|_| gone())
    }

    /// Hands a committed change to the core through its `place`; returns once the published
    /// view holds it.
    pub(crate) async fn hand_over(
        place: mpsc::OwnedPermit<Input>,
        puts: Vec<(i64, Object)>,
        deletes: Vec<i64>,
        at: Timestamp,
    ) -> Result<(), ApiError> {
        let (done, held) = oneshot::channel();
        place.send(Input::Change { puts, deletes, at, done });
        held.await.map_err(|_| gone())
    }

    /// Feeds the input `make` builds around a reply, and waits for the answer.
    pub(crate) async fn ask<T>(&self, make: impl FnOnce(oneshot::Sender<T>) -> Input) -> Result<T, ApiError> {
        let (tx, rx) = oneshot::channel();
        self.tell(make(tx)).await?;
        rx.await.map_err(|_| gone())
    }

    /// Reads what only the whole core holds (every latest result, the clusters' states):
    /// waits for the owner between two inputs, on this task only.
    pub(crate) async fn read<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Control, Timestamp) -> T + Send + 'static,
    ) -> Result<T, ApiError> {
        self.ask(|reply| Input::Read(Box::new(move |c, at, answers| answers.push(reply, f(c, at))))).await
    }
}

/// Where a view goes.
struct Publish {
    view: Arc<ArcSwap<View>>,
    metrics: Arc<Metrics>,
    config_changes: watch::Sender<u64>,
}

impl Publish {
    /// Publishes the core's view at `at`; a new configuration is counted and announced.
    fn publish(&self, control: &mut Control, at: Timestamp) {
        let view = control.view(at);
        let config_changed = !Arc::ptr_eq(&self.view.load().config, &view.config);
        if config_changed {
            self.metrics.set_objects(&view.config);
        }
        self.view.store(Arc::new(view));
        if config_changed {
            self.config_changes.send_modify(|g| *g = g.wrapping_add(1));
        }
    }
}

/// The owner's loop: until every sender is gone, wait for an input or the core's next timer,
/// take the batch that waits, run the timers, publish, hand the outputs on, then answer.
async fn run(
    mut control: Control,
    mut inputs: mpsc::Receiver<Input>,
    publish: Publish,
    outputs: mpsc::UnboundedSender<Output>,
) {
    let mut answers = Answers::default();
    loop {
        // The core's next timer, or the moment its view's figures turn a second old.
        let next = control.poll_timeout().map_or(control.view_expires(), |t| t.min(control.view_expires()));
        let wait = next.millis_since(now()).clamp(0, 60_000);
        let first = tokio::select! {
            input = inputs.recv() => match input {
                Some(input) => Some(input),
                None => break,
            },
            () = tokio::time::sleep(Duration::from_millis(u64::try_from(wait).unwrap_or(0))) => None,
        };
        let turn = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let batch = first.into_iter().chain(std::iter::from_fn(|| inputs.try_recv().ok())).take(BATCH);
            for input in batch {
                handle(&mut control, input, &mut answers);
            }
            // Timed only when a cluster was due: most wake-ups (a report spaced 2 s from the
            // last pass, a change) evaluate nothing and would drown the passes in zeros.
            let (passes, started) = (control.passes(), tokio::time::Instant::now());
            control.handle_timeout(now());
            if control.passes() > passes {
                publish.metrics.evaluation(started.elapsed());
            }
            publish.publish(&mut control, now());
            while let Some(o) = control.poll_output() {
                // The driver is gone only at shutdown, after asking for the last outputs.
                let _ = outputs.send(o);
            }
        }));
        match turn {
            // Answered once the view holds what they changed and their outputs are queued.
            Ok(()) => answers.send(),
            // A bug in one input or pass costs that batch (its askers get an error; reports
            // it took before the panic are on their way to the store), as a poisoned lock
            // once cost one request; the core goes on with the next.
            Err(_) => {
                tracing::error!("the control core panicked in this batch; its requests were refused");
                answers.drop_all();
            }
        }
    }
}

/// The answers of a batch, sent once its view is published: an asker that reads the view
/// next (a `GET` after a `PUT`) reads what its input changed.
#[derive(Default)]
pub(crate) struct Answers(Vec<Box<dyn FnOnce() + Send>>);

impl Answers {
    /// Keeps `value` for `reply`.
    fn push<T: Send + 'static>(&mut self, reply: oneshot::Sender<T>, value: T) {
        // An asker that is gone (a closed connection) is not waiting.
        self.0.push(Box::new(move || {
            let _ = reply.send(value);
        }));
    }

    fn send(&mut self) {
        self.0.drain(..).for_each(|a| a());
    }

    /// Drops every answer: each asker hears the core is gone for its request.
    fn drop_all(&mut self) {
        self.0.clear();
    }
}

/// Feeds one input to the core at the time it is handled; its answer waits in `answers`.
fn handle(c: &mut Control, input: Input, answers: &mut Answers) {
    let at = now();
    match input {
        Input::Change { puts, deletes, at, done } => {
            c.handle_change(puts, deletes, at);
            answers.push(done, ());
        }
        Input::Enrolled { caller, hostname, version, done } => {
            c.handle_enrolled(caller, hostname, version, at);
            answers.push(done, ());
        }
        Input::Work { caller, reply } => answers.push(reply, c.handle_work(caller, at)),
        Input::Report { caller, report, checked, then } => {
            let outcome = c.handle_checked(caller, &report, checked, at);
            then.send(caller, outcome, report, at);
        }
        Input::Heartbeat { node, heartbeat, from, reply } => {
            answers.push(reply, c.handle_heartbeat(node, heartbeat, from, at))
        }
        Input::Rechecks { caller, reply } => answers.push(reply, c.take_rechecks(caller)),
        Input::Lease { role, last_event } => c.handle_lease(role, last_event, at),
        Input::Revisions(stored) => stored.into_iter().for_each(|r| c.handle_revision(r, at)),
        Input::Relayed(relayed) => relayed.into_iter().for_each(|(sent, r)| c.handle_relayed(r, sent, at)),
        Input::Registry { files, reply } => {
            let outcome = match files {
                Ok(files) => c.handle_registry(&files, at),
                Err(skipped) => {
                    let first = crate::mirrors::first_skipped(&skipped);
                    c.handle_unreadable_registry(skipped, at);
                    Err(first)
                }
            };
            answers.push(reply, outcome);
        }
        Input::CheckRun { regions, reply } => answers.push(reply, c.handle_check_run(regions, at)),
        Input::Freshness { host, reading } => c.handle_freshness(&host, reading, at),
        Input::Demand(counts) => c.handle_demand(&counts, at),
        Input::Publication { cluster, number, target, failure } => {
            c.handle_publication(cluster, number, &target, failure.as_deref(), at)
        }
        Input::Read(f) => f(c, at, answers),
        Input::Flush(done) => answers.push(done, ()),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use axum::body::Body;
    use axum::http::Request;
    use tower::ServiceExt;

    use super::*;
    use crate::app::{Actor, lab};

    /// A panic in one batch refuses that batch's requests; the owner goes on with the next.
    #[tokio::test]
    async fn a_panic_costs_its_batch_not_the_owner() {
        let (_dir, app, _) = lab().await;
        let refused = app.owner().read(|_, _| -> u64 { panic!("a bug in a reading") }).await;
        assert!(matches!(refused, Err(ApiError::Unavailable(_))), "{refused:?}");
        let passes = app.owner().read(|c, _| c.passes()).await.unwrap();
        assert_eq!(passes, app.view().passes, "still owned, still published");
        crate::api::create_admin_token(&app, &Actor::system(), "after", false).await.unwrap();
        assert_eq!(app.config().admin_tokens.len(), 2);
    }

    /// Holds the owner (as a long pass holds it) until the returned sender says so; the task
    /// ends once it is let go.
    pub(crate) async fn hold(
        app: &Arc<crate::app::App>,
    ) -> (std::sync::mpsc::Sender<()>, tokio::task::JoinHandle<Result<(), ApiError>>) {
        let (release, held) = std::sync::mpsc::channel::<()>();
        let (entered, busy) = oneshot::channel();
        let holding = tokio::spawn({
            let app = app.clone();
            async move {
                app.owner()
                    .read(move |_, _| {
                        let _ = entered.send(());
                        let _ = held.recv();
                    })
                    .await
            }
        });
        busy.await.unwrap();
        (release, holding)
    }

    /// While the owner is held (as a long pass holds it), every reader still answers from the
    /// last view, and a write waits for the owner, then lands.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn readers_answer_from_the_view_while_the_owner_is_busy() {
        let (_dir, app, token) = lab().await;

        let (release, holding) = hold(&app).await;
        let router = crate::api::router(app.clone());
        for uri in ["/v1/nodes", "/v1/clusters", "/v1/probers", "/v1/alerts", "/v1/mirrors", "/metrics"] {
            let req = Request::get(uri)
                .header("authorization", format!("Bearer {token}"))
                .body(Body::empty())
                .unwrap();
            let resp = tokio::time::timeout(Duration::from_secs(10), router.clone().oneshot(req))
                .await
                .unwrap_or_else(|_| panic!("{uri} waited for the owner"))
                .unwrap();
            assert!(resp.status().is_success(), "{uri}: {}", resp.status());
        }
        let write = tokio::spawn({
            let app = app.clone();
            async move { crate::api::create_admin_token(&app, &Actor::system(), "later", true).await }
        });
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(!write.is_finished(), "a change is the owner's to take");
        release.send(()).unwrap();
        holding.await.unwrap().unwrap();
        write.await.unwrap().unwrap();
        assert_eq!(app.config().admin_tokens.len(), 2, "the view holds the change once it is answered");
    }
}
