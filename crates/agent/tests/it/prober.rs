//! `run_prober` against the stand-in channel and real edge servers on loopback.

use std::future::Future;
use std::net::IpAddr;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use vantage_agent::{Error, ProberOptions, run_prober};
use vantage_core::check::{Check, CheckInput, Listener, Protocol};
use vantage_core::result::ErrorCode;
use vantage_core::settings::{ProbeSettings, ProbeSettingsInput};
use vantage_core::wire::{self, Role, Target, Work};
use vantage_testkit::{EdgeServer, any_loopback, closed_port};

use crate::options;
use crate::support::{ChannelServer, TestCa, eventually};

/// A running `run_prober` and the switch that stops it.
pub(crate) struct Running {
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<vantage_agent::Result<()>>,
}

impl Running {
    pub(crate) fn start<F>(
        run: impl FnOnce(std::pin::Pin<Box<dyn Future<Output = ()> + Send>>) -> F,
    ) -> Running
    where
        F: Future<Output = vantage_agent::Result<()>> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel::<()>();
        let shutdown = Box::pin(async move {
            let _ = rx.await;
        });
        Running { stop: Some(tx), task: tokio::spawn(run(shutdown)) }
    }

    pub(crate) fn is_running(&self) -> bool {
        !self.task.is_finished()
    }

    /// Stops it and returns what it returned; it must stop within 2 s.
    pub(crate) async fn stop(mut self) -> vantage_agent::Result<()> {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        tokio::time::timeout(Duration::from_secs(2), self.task).await.expect("stops promptly").unwrap()
    }
}

fn work_for(targets: &[(&str, u16)]) -> Work {
    let settings = ProbeSettings::parse(ProbeSettingsInput {
        interval_s: 5,
        timeout_ms: 500,
        attempts: 2,
        ..Default::default()
    })
    .unwrap();
    let ip: IpAddr = "127.0.0.1".parse().unwrap();
    Work {
        id: 42,
        settings,
        checks: vec![Check::parse(CheckInput::default()).unwrap()],
        targets: targets
            .iter()
            .map(|(key, port)| Target {
                key: (*key).to_owned(),
                ip,
                listener: Listener { port: *port, protocol: Protocol::Http, proxy_protocol: false },
                check: 0,
            })
            .collect(),
        endpoints: Vec::new(),
        check_now: false,
        renew_in_s: 86_400,
        phase_ms: None,
        fetch: vantage_core::fetch::FetchPolicy::any_address(),
    }
}

#[tokio::test]
async fn rounds_probe_the_work_report_and_keep_the_pace() {
    vantage_testkit::init_tracing();
    let edge = EdgeServer::start(any_loopback()).await.unwrap();
    let closed = closed_port().unwrap();
    let server = ChannelServer::start(Role::Prober, "vtp_good").await;
    server.script().work = work_for(&[("up", edge.addr().port()), ("down", closed.port())]);
    let dir = tempfile::tempdir().unwrap();
    // Probes leave from 127.0.0.2 (the edge and the targets are on 127.0.0.1).
    let opts = ProberOptions {
        concurrency: 64,
        source: "127.0.0.2".parse().unwrap(),
        ..ProberOptions::new(options(dir.path(), server.url(), "vtp_good", server.ca.fingerprint()))
    };
    let running = Running::start(move |stop| run_prober(opts, stop));

    eventually(10, "a report", || !server.log.reports.lock().unwrap().is_empty()).await;
    let (path, report) = server.log.reports.lock().unwrap()[0].clone();
    assert_eq!(path, wire::PROBER_REPORT);
    assert_eq!(report.version, vantage_agent::VERSION);
    assert!(report.started_at <= report.finished_at);
    assert!(!report.confirmation, "a round is not a confirmation");
    let by_key = |k: &str| report.results.iter().find(|r| r.target == k).unwrap().clone();
    let (up, down) = (by_key("up"), by_key("down"));
    assert_eq!((up.sent(), up.lost()), (2, 0), "{up:?}");
    assert_eq!((down.sent(), down.lost()), (2, 2), "{down:?}");
    assert_eq!(down.last_error(), Some(ErrorCode::Refused));
    assert_eq!(edge.requests().len(), 2, "the edge saw the round's attempts");
    let peers = edge.peers();
    assert!(peers.iter().all(|p| p.ip().to_string() == "127.0.0.2"), "{peers:?}");

    // The next round starts one interval (5 s) after the first one started.
    eventually(10, "a second round", || server.requests_to(wire::PROBER_WORK).len() >= 2).await;
    let asks = server.requests_to(wire::PROBER_WORK);
    let gap = asks[1].at - asks[0].at;
    // (The first request's arrival includes a TLS handshake the second one does not need.)
    assert!(gap >= Duration::from_millis(4700) && gap < Duration::from_millis(8000), "{gap:?}");
    // Beside them, one recheck request, which this server (like one older than the agent) does
    // not know: the agent does not ask again for minutes.
    let rechecks = server.requests_to(wire::PROBER_RECHECK).len();
    let paths: Vec<String> = server
        .requests()
        .iter()
        .map(|s| s.path.clone())
        .filter(|p| p != wire::PROBER_RECHECK)
        .take(3)
        .collect();
    assert_eq!(paths, [wire::ENROLL, wire::PROBER_WORK, wire::PROBER_REPORT]);
    assert_eq!(rechecks, 1);
    running.stop().await.unwrap();
}

#[tokio::test]
async fn refusals_and_outages_do_not_end_the_loop() {
    let server = ChannelServer::start(Role::Prober, "vtp_good").await;
    server.script().refuse = Some((403, "this prober is disabled".into()));
    let dir = tempfile::tempdir().unwrap();
    let opts = ProberOptions::new(options(dir.path(), server.url(), "vtp_good", server.ca.fingerprint()));
    let running = Running::start(move |stop| run_prober(opts, stop));
    eventually(10, "a refused request for work", || !server.requests_to(wire::PROBER_WORK).is_empty()).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(running.is_running(), "a refusal does not end the prober");
    assert!(server.log.reports.lock().unwrap().is_empty());
    running.stop().await.unwrap();

    // A channel that is not there yet is waited for.
    let nowhere = closed_port().unwrap();
    let url = vantage_agent::Url::parse(&format!("https://{nowhere}")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let opts = ProberOptions::new(options(dir.path(), url, "vtp_good", TestCa::new("x").fingerprint()));
    let running = Running::start(move |stop| run_prober(opts, stop));
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(running.is_running(), "an unreachable server is retried");
    running.stop().await.unwrap();
}

#[tokio::test]
async fn a_wrong_pin_ends_the_prober_with_the_mismatch() {
    let server = ChannelServer::start(Role::Prober, "vtp_good").await;
    let dir = tempfile::tempdir().unwrap();
    let opts =
        ProberOptions::new(options(dir.path(), server.url(), "vtp_good", TestCa::new("x").fingerprint()));
    let e = tokio::time::timeout(Duration::from_secs(5), run_prober(opts, std::future::pending()))
        .await
        .expect("ends at once")
        .unwrap_err();
    assert!(matches!(e, Error::FingerprintMismatch { .. }), "{e}");
    assert!(server.requests().is_empty());
}

#[tokio::test]
async fn the_loop_renews_when_the_work_says_so() {
    let server = ChannelServer::start(Role::Prober, "vtp_good").await;
    server.script().work = Work { renew_in_s: 0, ..work_for(&[]) };
    let dir = tempfile::tempdir().unwrap();
    let opts = ProberOptions::new(options(dir.path(), server.url(), "vtp_good", server.ca.fingerprint()));
    let running = Running::start(move |stop| run_prober(opts, stop));
    eventually(10, "a renewal", || !server.requests_to(wire::RENEW).is_empty()).await;
    let renew = server.requests_to(wire::RENEW)[0].clone();
    // An empty round still reports, so the server knows the prober works.
    let reports = server.log.reports.lock().unwrap().clone();
    assert_eq!(reports.len(), 1);
    assert!(reports[0].1.results.is_empty());
    eventually(10, "the new certificate on disk", || {
        let pem = std::fs::read_to_string(dir.path().join("cert.pem")).unwrap();
        let der: rustls::pki_types::CertificateDer<'static> =
            rustls::pki_types::pem::PemObject::from_pem_slice(pem.as_bytes()).unwrap();
        Some(vantage_agent::Fingerprint::of(&der)) != renew.client
    })
    .await;
    running.stop().await.unwrap();
}
