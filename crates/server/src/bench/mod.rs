//! Benchmarks of the server's own time (run as ignored tests, `--release`): a real `App` on a
//! SQLite store with its driver and store writer running, requests sent through the routers
//! the listeners serve, without sockets or TLS. (`Running` also serves tests that need the
//! core's outputs carried out.)

mod contention;
mod creation;
mod reading;

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, header};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tower::ServiceExt;
use vantage_control::Start;
use vantage_control::config::Object;
use vantage_control::fixtures::good_round;
use vantage_control::identity::Caller;
use vantage_core::wire;
use vantage_store::Store;

use crate::app::{Actor, App, Parts};
use crate::owner::Input;
use crate::support::now;

/// A server holding a fleet, its driver and store writer running.
pub(crate) struct Running {
    pub(crate) app: Arc<App>,
    /// An admin token for the API.
    pub(super) token: String,
    /// The database file.
    pub(super) db: std::path::PathBuf,
    stop: tokio::sync::watch::Sender<bool>,
    driver: JoinHandle<()>,
    writer: JoinHandle<()>,
    _dir: tempfile::TempDir,
}

impl Running {
    /// A server in a new directory holding `puts`.
    pub(crate) async fn start(puts: Vec<(i64, Object)>) -> Running {
        let dir = tempfile::tempdir().expect("a directory");
        let db = dir.path().join("vantage.db");
        let store = Store::open_sqlite(&db).await.expect("a store");
        let ca = crate::ca::Ca::load_or_create(&dir.path().join("ca")).expect("a CA");
        let settings = crate::config::ServeConfig { data_dir: dir.path().into(), ..Default::default() };
        let metrics = Arc::new(crate::metrics::Metrics::new());
        let (app, decided) =
            App::new(Parts { start: Start::default(), store, metrics, settings, ca, replica: None });
        app.apply(puts, Vec::new(), now()).await.expect("the fleet");
        let (_, token) =
            crate::api::create_admin_token(&app, &Actor::system(), "bench", false).await.expect("a token");
        let (notices, mut notice_rx) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move { while notice_rx.recv().await.is_some() {} });
        let (saves, writer) = crate::saves::queue();
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let driver = tokio::spawn(crate::driver::run(app.clone(), decided, notices, saves, stopped));
        let writer = tokio::spawn(writer.run(app.store().clone()));
        Running { app, token, db, stop, driver, writer, _dir: dir }
    }

    /// Every one of `probers` asks for its work and reports its full round, every target
    /// answering, through the channel's routes (as the fixture's probers, `fp-{i}`); then two
    /// passes run, so the fleet's addresses are verified and published, and every result is
    /// stored, so that what is timed next does not share the machine with storing them.
    pub(super) async fn record_rounds(&self, probers: &[Caller]) {
        let app = &self.app;
        let channel = crate::channel::router(app.clone(), crate::listen::ListenerLimits::of(4096).channel);
        for (i, caller) in probers.iter().enumerate() {
            let work = app.owner().ask(|reply| Input::Work { caller: *caller, reply }).await.expect("work");
            for report in good_round(&work, now()) {
                let mut req = Request::post(wire::PROBER_REPORT)
                    .header(header::CONTENT_TYPE, "application/json")
                    .body(Body::from(serde_json::to_vec(&report).expect("json")))
                    .expect("a request");
                crate::channel::as_peer(&mut req, &format!("fp-{i}"));
                timed(&channel, req).await;
            }
        }
        let passes = app.view().passes;
        while app.view().passes < passes + 2 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        app.intake().drained().await;
    }

    /// Stops the driver and the writer, once they are done.
    pub(super) async fn stop(self) {
        self.stop.send_replace(true);
        self.driver.await.expect("the driver");
        self.writer.await.expect("the writer");
    }
}

/// Times of one kind of request, sorted.
fn summary(name: &str, mut times: Vec<Duration>) -> String {
    times.sort();
    let at =
        |q: f64| times.get(((times.len() as f64 - 1.0) * q).round() as usize).copied().unwrap_or_default();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    format!(
        "{name}: {} requests, p50 {:.1} ms, p99 {:.1} ms, worst {:.1} ms",
        times.len(),
        ms(at(0.5)),
        ms(at(0.99)),
        ms(at(1.0))
    )
}

/// Sends `req` through `router` and reads the whole answer; how long it took, and the body.
async fn timed(router: &axum::Router, req: Request<Body>) -> (Duration, axum::body::Bytes) {
    let started = Instant::now();
    let resp = router.clone().oneshot(req).await.expect("the router answers");
    let status = resp.status();
    let body = axum::body::to_bytes(resp.into_body(), usize::MAX).await.expect("a body");
    assert!(status.is_success(), "{status}: {}", String::from_utf8_lossy(&body));
    (started.elapsed(), body)
}
