//! Endpoint targets (a mirror host, a video edge; SPEC §3.1, §3.4): each probed on its own
//! check's interval, one attempt each time, beside the cluster rounds and independently of
//! them, and reported to the same report path as the rounds are.
//!
//! [`EndpointSchedule`] decides when each endpoint is due, on a clock it is handed (no tokio,
//! no sockets), so every rule of it is tested step by step. [`endpoint_loop`] drives it: it
//! takes the endpoints of each work answer from the round loop, starts the attempts that
//! come due (at most `concurrency` at once, from the source addresses), and reports the
//! results of the attempts that came due together in one report once all of them are in.
//! Reports go out one after the other from a short queue, so a slow or absent server never
//! holds back the attempts.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc::error::TrySendError;
use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinSet;
use vantage_core::Timestamp;
use vantage_core::check::Check;
use vantage_core::fetch::FetchPolicy;
use vantage_core::result::{Attempt, ErrorCode, ProbeResult, Stages};
use vantage_core::wire::{EndpointTarget, Report, Work};
use vantage_probe::{ProbeTarget, RoundConfig, SourceAddresses, Url, attempt_from, effective_concurrency};

use crate::client::{ChannelClient, now};
use crate::prober::reports;

/// Reports waiting to be posted at most; past it, the newest are dropped (and that is
/// logged): results that cannot reach the server in time are not worth a growing backlog.
const REPORT_QUEUE: usize = 64;

/// What the round loop hands over from each work answer.
#[derive(Debug)]
pub(crate) struct EndpointWork {
    endpoints: Vec<EndpointTarget>,
    /// The work's checks, which the endpoints name by index (none when there are no
    /// endpoints: nothing to look up).
    checks: Vec<Check>,
    check_now: bool,
    /// Where the attempts may connect.
    fetch: Arc<FetchPolicy>,
}

impl EndpointWork {
    pub(crate) fn of(work: &Work) -> Self {
        let checks = if work.endpoints.is_empty() { Vec::new() } else { work.checks.clone() };
        EndpointWork {
            endpoints: work.endpoints.clone(),
            checks,
            check_now: work.check_now,
            fetch: Arc::new(work.fetch.clone()),
        }
    }
}

/// An endpoint whose attempt is to start now.
#[derive(Debug)]
pub(crate) struct Due {
    pub(crate) key: String,
    /// Which version of the endpoint this is (see [`EndpointSchedule::finished`]).
    pub(crate) generation: u64,
    pub(crate) url: String,
    pub(crate) address: Option<SocketAddr>,
    pub(crate) check: Arc<Check>,
    /// Any HTTP answer is good unless it is a block page ([`EndpointTarget::any_status`]).
    pub(crate) any_status: bool,
    /// Other hosts its `hls` chain may lead to ([`EndpointTarget::allowed_hosts`]).
    pub(crate) allowed_hosts: Vec<String>,
}

/// What a finished attempt is to the schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Finished {
    /// The endpoint has left the work, or changed, since the attempt started: the result is
    /// of nothing the server asks for now, and is dropped.
    Stale,
    /// Report the result. `first_failure`: no target could be made of the endpoint (its URL
    /// does not parse or resolve), and its last attempt had one; say so once, not every
    /// interval.
    Report { first_failure: bool },
}

#[derive(Debug)]
struct Entry {
    url: String,
    address: Option<SocketAddr>,
    check: Arc<Check>,
    any_status: bool,
    allowed_hosts: Vec<String>,
    generation: u64,
    /// When the next attempt is due.
    next: Instant,
    in_flight: bool,
    /// The last attempt found no target to make.
    failing: bool,
}

/// When each endpoint of the latest work is due.
///
/// An endpoint is due at once when it first appears, and again when its URL, its address or
/// its check changes; then every `interval_s` of its check, on that grid (a late wake does not
/// shift it; one more than an interval late starts a new grid rather than catching up). An
/// endpoint whose attempt is still running when it comes due again skips that turn, as
/// Varnish's prober does: a slow or silent endpoint never has more than one attempt of this
/// prober in flight, whatever its timeout.
#[derive(Debug, Default)]
pub(crate) struct EndpointSchedule {
    entries: BTreeMap<String, Entry>,
    generations: u64,
}

impl EndpointSchedule {
    /// Takes the endpoints of a work answer: new ones are due at once, gone ones are
    /// dropped, changed ones are due at once as new ones, the rest keep their turn. An
    /// endpoint naming a check the work does not hold is skipped (the server sent something
    /// inconsistent); of two with one key, the first counts. Returns how many were skipped.
    pub(crate) fn update(&mut self, endpoints: &[EndpointTarget], checks: &[Check], now: Instant) -> usize {
        let checks: Vec<Arc<Check>> = checks.iter().cloned().map(Arc::new).collect();
        let mut entries = BTreeMap::new();
        let mut skipped = 0;
        for e in endpoints {
            let Some(check) = usize::try_from(e.check).ok().and_then(|i| checks.get(i)) else {
                skipped += 1;
                continue;
            };
            if entries.contains_key(&e.key) {
                continue;
            }
            let entry = match self.entries.remove(&e.key) {
                Some(old)
                    if old.url == e.url
                        && old.address == e.address
                        && *old.check == **check
                        && old.any_status == e.any_status
                        && old.allowed_hosts == e.allowed_hosts =>
                {
                    old
                }
                _ => {
                    self.generations += 1;
                    Entry {
                        url: e.url.clone(),
                        address: e.address,
                        check: check.clone(),
                        any_status: e.any_status,
                        allowed_hosts: e.allowed_hosts.clone(),
                        generation: self.generations,
                        next: now,
                        in_flight: false,
                        failing: false,
                    }
                }
            };
            entries.insert(e.key.clone(), entry);
        }
        self.entries = entries;
        skipped
    }

    /// A check run: every endpoint is due now, but for those with an attempt in flight
    /// (that attempt is the fresh one).
    pub(crate) fn check_now(&mut self, now: Instant) {
        for e in self.entries.values_mut().filter(|e| !e.in_flight) {
            e.next = now;
        }
    }

    /// The endpoints due at `now`, in key order, each now counted as in flight until
    /// [`EndpointSchedule::finished`].
    pub(crate) fn due(&mut self, now: Instant) -> Vec<Due> {
        let mut out = Vec::new();
        for (key, e) in &mut self.entries {
            if e.next > now {
                continue;
            }
            let interval = Duration::from_secs(u64::from(e.check.interval_s()));
            e.next += interval;
            if e.next <= now {
                e.next = now + interval;
            }
            if e.in_flight {
                continue;
            }
            e.in_flight = true;
            out.push(Due {
                key: key.clone(),
                generation: e.generation,
                url: e.url.clone(),
                address: e.address,
                check: e.check.clone(),
                any_status: e.any_status,
                allowed_hosts: e.allowed_hosts.clone(),
            });
        }
        out
    }

    /// When the next endpoint is due; `None` without endpoints.
    pub(crate) fn next_due(&self) -> Option<Instant> {
        self.entries.values().map(|e| e.next).min()
    }

    /// The attempt of `generation` of `key` has finished; `unusable`: no target could be
    /// made of the endpoint.
    pub(crate) fn finished(&mut self, key: &str, generation: u64, unusable: bool) -> Finished {
        match self.entries.get_mut(key) {
            Some(e) if e.generation == generation => {
                e.in_flight = false;
                let first_failure = unusable && !e.failing;
                e.failing = unusable;
                Finished::Report { first_failure }
            }
            _ => Finished::Stale,
        }
    }

    /// Endpoints scheduled.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }
}

/// The results of the attempts that came due together.
#[derive(Debug)]
struct Batch {
    started_at: Timestamp,
    pending: usize,
    results: Vec<ProbeResult>,
}

/// One finished attempt.
#[derive(Debug)]
struct Probed {
    batch: u64,
    key: String,
    generation: u64,
    url: String,
    result: ProbeResult,
    /// Why no target could be made of the endpoint, when none could.
    unusable: Option<String>,
}

/// Probes the endpoints of the latest work on their schedule and posts the results to
/// `report`, until `updates` closes (the round loop is gone) or the task is aborted.
pub(crate) async fn endpoint_loop(
    client: Arc<ChannelClient>,
    report: &'static str,
    concurrency: usize,
    source: SourceAddresses,
    updates: mpsc::UnboundedReceiver<EndpointWork>,
) {
    let (queue, queued) = mpsc::channel(REPORT_QUEUE);
    let cfg = RoundConfig { concurrency, source, ..RoundConfig::default() };
    // The driver owns the queue's sender: once it ends, the poster ends too.
    tokio::join!(drive(updates, effective_concurrency(&cfg), source, queue), post(client, report, queued));
}

async fn drive(
    mut updates: mpsc::UnboundedReceiver<EndpointWork>,
    concurrency: usize,
    source: SourceAddresses,
    queue: mpsc::Sender<Report>,
) {
    let mut d = Driver {
        schedule: EndpointSchedule::default(),
        permits: Arc::new(Semaphore::new(concurrency)),
        source,
        fetch: Arc::default(),
        probes: JoinSet::new(),
        batches: HashMap::new(),
        batch_ids: 0,
        queue,
        dropping: false,
    };
    loop {
        d.start_due();
        let wake = d.schedule.next_due();
        tokio::select! {
            update = updates.recv() => match update {
                Some(work) => d.apply(&work),
                None => return,
            },
            Some(joined) = d.probes.join_next() => match joined {
                Ok(probed) => d.finished(probed),
                // A panic in an attempt is a bug: surface it (the prober loop passes it on).
                Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                // Cancelled: the runtime is shutting down.
                Err(_) => {}
            },
            () = sleep_until(wake) => {}
        }
    }
}

/// The endpoint loop's state between its events.
#[derive(Debug)]
struct Driver {
    schedule: EndpointSchedule,
    /// Held by each attempt while it runs: the bound counts attempts, not endpoints waiting.
    permits: Arc<Semaphore>,
    source: SourceAddresses,
    /// The latest work's fetch policy.
    fetch: Arc<FetchPolicy>,
    probes: JoinSet<Probed>,
    batches: HashMap<u64, Batch>,
    batch_ids: u64,
    queue: mpsc::Sender<Report>,
    /// The queue was full at the last report: the drops are logged once.
    dropping: bool,
}

impl Driver {
    /// Starts the attempts due now, as one batch.
    fn start_due(&mut self) {
        let due = self.schedule.due(Instant::now());
        if due.is_empty() {
            return;
        }
        self.batch_ids += 1;
        let batch = Batch { started_at: now(), pending: due.len(), results: Vec::with_capacity(due.len()) };
        self.batches.insert(self.batch_ids, batch);
        for d in due {
            let fetch = self.fetch.clone();
            self.probes.spawn(probe(d, self.batch_ids, (self.source, fetch), self.permits.clone()));
        }
    }

    /// Takes the endpoints of a work answer.
    fn apply(&mut self, work: &EndpointWork) {
        self.fetch = work.fetch.clone();
        let before = self.schedule.len();
        let skipped = self.schedule.update(&work.endpoints, &work.checks, Instant::now());
        if skipped > 0 {
            tracing::warn!(
                skipped,
                checks = work.checks.len(),
                "endpoint targets naming a check that is not in the work were skipped"
            );
        }
        if self.schedule.len() != before {
            tracing::info!(endpoints = self.schedule.len(), "endpoint targets");
        }
        if work.check_now {
            tracing::info!(endpoints = self.schedule.len(), "check run: probing every endpoint now");
            self.schedule.check_now(Instant::now());
        }
    }

    /// Books a finished attempt, and reports its batch once the batch is complete.
    fn finished(&mut self, p: Probed) {
        let Some(batch) = self.batches.get_mut(&p.batch) else { return };
        batch.pending -= 1;
        match self.schedule.finished(&p.key, p.generation, p.unusable.is_some()) {
            Finished::Stale => {}
            Finished::Report { first_failure } => {
                if first_failure {
                    tracing::warn!(
                        endpoint = %p.key,
                        url = %p.url,
                        error = p.unusable.as_deref().unwrap_or_default(),
                        "endpoint cannot be probed; it is reported unreachable until it can"
                    );
                }
                batch.results.push(p.result);
            }
        }
        if batch.pending > 0 {
            return;
        }
        let Some(batch) = self.batches.remove(&p.batch) else { return };
        if batch.results.is_empty() {
            return;
        }
        for report in reports(batch.started_at, now(), batch.results) {
            match self.queue.try_send(report) {
                Ok(()) => self.dropping = false,
                Err(TrySendError::Full(_)) => {
                    if !self.dropping {
                        tracing::warn!(
                            queued = REPORT_QUEUE,
                            "endpoint reports are not getting through; dropping the newest"
                        );
                    }
                    self.dropping = true;
                }
                // The poster ends only after the driver: not while it runs.
                Err(TrySendError::Closed(_)) => {}
            }
        }
    }
}

/// Sleeps until `at`, or forever without it.
async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

/// One attempt at an endpoint, bounded by its check's timeout from the moment it may start
/// (resolving the URL's host included). An endpoint no target can be made of (a URL that
/// does not parse, a host that does not resolve in time) gets one failed attempt:
/// `unreachable`, no stage reached.
async fn probe(
    due: Due,
    batch: u64,
    (source, fetch): (SourceAddresses, Arc<FetchPolicy>),
    permits: Arc<Semaphore>,
) -> Probed {
    // The semaphore is never closed; were it, the attempt would go ahead unbounded.
    let _permit = permits.acquire_owned().await.ok();
    let timeout = Duration::from_millis(u64::from(due.check.timeout_ms()));
    let started = Instant::now();
    let (result, unusable) = match target(&due, fetch, timeout).await {
        Ok(t) => {
            let report = attempt_from(&t, timeout.saturating_sub(started.elapsed()), source).await;
            let result = ProbeResult {
                target: due.key.clone(),
                attempts: vec![report.attempt()],
                hls: report.hls,
                cert_not_after: report.cert_not_after,
                failed_at: None,
            };
            (result, None)
        }
        Err(why) => {
            let attempt = Attempt { stages: Stages::empty(), rtt_us: 0, error: Some(ErrorCode::Unreachable) };
            let result = ProbeResult {
                target: due.key.clone(),
                attempts: vec![attempt],
                hls: None,
                cert_not_after: None,
                failed_at: None,
            };
            (result, Some(why))
        }
    };
    Probed { batch, key: due.key, generation: due.generation, url: due.url, result, unusable }
}

/// The probe target of an endpoint: at its address when it has one, else at the first
/// address its URL's host resolves to within `timeout`.
async fn target(due: &Due, fetch: Arc<FetchPolicy>, timeout: Duration) -> Result<ProbeTarget, String> {
    let (key, check) = (due.key.clone(), due.check.clone());
    let made = match due.address {
        Some(addr) => {
            let url = Url::parse(&due.url).map_err(|e| format!("url {:?}: {e}", due.url))?;
            ProbeTarget::endpoint(key, url, addr, check).map_err(|e| e.to_string())
        }
        None => match tokio::time::timeout(timeout, ProbeTarget::from_url(key, &due.url, check)).await {
            Ok(made) => made.map_err(|e| e.to_string()),
            Err(_) => {
                Err(format!("url {:?}: the host did not resolve within {} ms", due.url, timeout.as_millis()))
            }
        },
    };
    made.map(|t| ProbeTarget {
        any_status: due.any_status,
        allowed_hosts: due.allowed_hosts.clone(),
        fetch,
        ..t
    })
}

/// Posts the queued reports one after the other, in order. A failure is logged when it
/// starts and when it ends, not for every report in between.
async fn post(client: Arc<ChannelClient>, path: &'static str, mut queued: mpsc::Receiver<Report>) {
    let mut failing = false;
    while let Some(report) = queued.recv().await {
        match client.post_no_content(path, &report).await {
            Ok(()) if failing => {
                tracing::info!("endpoint reports get through again");
                failing = false;
            }
            Ok(()) => {}
            Err(e) if failing => tracing::debug!(error = %e, "endpoint report failed"),
            Err(e) => {
                tracing::warn!(error = %e, "endpoint report failed; its results are lost");
                failing = true;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vantage_core::check::CheckInput;

    fn check(interval_s: u32) -> Check {
        Check::parse(CheckInput { interval_s: Some(interval_s), ..Default::default() }).unwrap()
    }

    fn ep(key: &str, url: &str, check: u32) -> EndpointTarget {
        EndpointTarget {
            key: key.into(),
            url: url.into(),
            address: None,
            check,
            any_status: false,
            allowed_hosts: Vec::new(),
        }
    }

    fn keys(due: &[Due]) -> Vec<&str> {
        due.iter().map(|d| d.key.as_str()).collect()
    }

    fn s(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    /// Finishes every attempt in `due` (target made).
    fn finish(sched: &mut EndpointSchedule, due: &[Due]) {
        for d in due {
            assert_eq!(
                sched.finished(&d.key, d.generation, false),
                Finished::Report { first_failure: false }
            );
        }
    }

    #[test]
    fn new_endpoints_are_due_at_once_then_every_interval_of_their_check() {
        let t0 = Instant::now();
        let mut sched = EndpointSchedule::default();
        assert_eq!(sched.next_due(), None);
        let checks = [check(1), check(5)];
        let skipped = sched.update(&[ep("a", "http://a/", 0), ep("b", "http://b/", 1)], &checks, t0);
        assert_eq!((skipped, sched.len()), (0, 2));
        assert_eq!(sched.next_due(), Some(t0));
        let due = sched.due(t0);
        assert_eq!(keys(&due), ["a", "b"]);
        assert_eq!(due[1].check.interval_s(), 5);
        assert!(sched.due(t0).is_empty(), "once per turn");
        finish(&mut sched, &due);
        assert_eq!(sched.next_due(), Some(t0 + s(1)));
        assert!(sched.due(t0 + Duration::from_millis(999)).is_empty());
        for i in 1..5 {
            let due = sched.due(t0 + s(i));
            assert_eq!(keys(&due), ["a"], "at {i} s");
            finish(&mut sched, &due);
        }
        let due = sched.due(t0 + s(5));
        assert_eq!(keys(&due), ["a", "b"]);
        finish(&mut sched, &due);
        assert_eq!(sched.next_due(), Some(t0 + s(6)));
    }

    #[test]
    fn a_late_wake_keeps_the_grid_and_a_long_gap_starts_a_new_one() {
        let t0 = Instant::now();
        let mut sched = EndpointSchedule::default();
        sched.update(&[ep("a", "http://a/", 0)], &[check(10)], t0);
        for at in [t0, t0 + s(10) + Duration::from_millis(300)] {
            let due = sched.due(at);
            assert_eq!(keys(&due), ["a"]);
            finish(&mut sched, &due);
        }
        assert_eq!(sched.next_due(), Some(t0 + s(20)), "still on the grid after a late wake");
        let gap = t0 + s(45);
        let due = sched.due(gap);
        finish(&mut sched, &due);
        assert_eq!(sched.next_due(), Some(gap + s(10)), "no burst to catch up");
    }

    #[test]
    fn an_endpoint_in_flight_skips_its_turn() {
        let t0 = Instant::now();
        let mut sched = EndpointSchedule::default();
        sched.update(&[ep("slow", "http://a/", 0)], &[check(1)], t0);
        let first = sched.due(t0);
        assert_eq!(keys(&first), ["slow"]);
        assert!(sched.due(t0 + s(1)).is_empty(), "still in flight at its next turn");
        assert!(sched.due(t0 + s(2)).is_empty());
        finish(&mut sched, &first);
        assert!(sched.due(t0 + s(2) + Duration::from_millis(500)).is_empty(), "waits for its turn");
        assert_eq!(keys(&sched.due(t0 + s(3))), ["slow"]);
    }

    #[test]
    fn removed_endpoints_are_dropped_and_their_late_results_are_stale() {
        let t0 = Instant::now();
        let mut sched = EndpointSchedule::default();
        let checks = [check(1)];
        sched.update(&[ep("a", "http://a/", 0), ep("b", "http://b/", 0)], &checks, t0);
        let due = sched.due(t0);
        sched.update(&[ep("a", "http://a/", 0)], &checks, t0 + Duration::from_millis(100));
        assert_eq!(sched.len(), 1);
        assert_eq!(sched.finished("b", due[1].generation, false), Finished::Stale);
        assert_eq!(sched.finished("a", due[0].generation, false), Finished::Report { first_failure: false });
        assert_eq!(keys(&sched.due(t0 + s(1))), ["a"]);
        sched.update(&[], &checks, t0 + s(2));
        assert_eq!((sched.len(), sched.next_due()), (0, None));
    }

    #[test]
    fn unchanged_endpoints_keep_their_turn_and_changed_ones_are_due_at_once() {
        let t0 = Instant::now();
        let mut sched = EndpointSchedule::default();
        let checks = [check(30), check(60)];
        let a = ep("a", "http://a/", 0);
        sched.update(std::slice::from_ref(&a), &checks, t0);
        let first = sched.due(t0);
        finish(&mut sched, &first);
        // The same endpoint again (its check moved to another index, unchanged): no new turn.
        let moved = [check(60), check(30)];
        sched.update(&[EndpointTarget { check: 1, ..a.clone() }], &moved, t0 + s(1));
        assert!(sched.due(t0 + s(1)).is_empty());
        assert_eq!(sched.next_due(), Some(t0 + s(30)));

        for changed in [
            EndpointTarget { url: "http://a/other".into(), ..a.clone() },
            EndpointTarget { address: Some("127.0.0.1:80".parse().unwrap()), ..a.clone() },
            EndpointTarget { check: 1, ..a.clone() },
            EndpointTarget { any_status: true, ..a.clone() },
        ] {
            let t = t0 + s(2);
            sched.update(std::slice::from_ref(&changed), &checks, t);
            let due = sched.due(t);
            assert_eq!(keys(&due), ["a"], "{changed:?}");
            assert_eq!(
                (due[0].url.as_str(), due[0].address, due[0].any_status),
                (changed.url.as_str(), changed.address, changed.any_status)
            );
            assert!(due[0].generation > first[0].generation);
            finish(&mut sched, &due);
        }
        // A change while an attempt is in flight: the new version is due at once, and the old
        // attempt's result is stale.
        let t = t0 + s(100);
        let old = sched.due(t);
        sched.update(&[EndpointTarget { url: "http://a/new".into(), ..a.clone() }], &checks, t);
        let new = sched.due(t);
        assert_eq!(keys(&new), ["a"]);
        assert_eq!(sched.finished("a", old[0].generation, false), Finished::Stale);
        assert_eq!(sched.finished("a", new[0].generation, false), Finished::Report { first_failure: false });
    }

    #[test]
    fn a_check_run_makes_every_endpoint_due_but_those_in_flight() {
        let t0 = Instant::now();
        let mut sched = EndpointSchedule::default();
        let checks = [check(3600)];
        sched.update(&[ep("a", "http://a/", 0), ep("b", "http://b/", 0)], &checks, t0);
        let due = sched.due(t0);
        finish(&mut sched, &due[..1]);
        let t = t0 + s(10);
        assert!(sched.due(t).is_empty());
        sched.check_now(t);
        assert_eq!(sched.next_due(), Some(t));
        assert_eq!(keys(&sched.due(t)), ["a"], "b's attempt is still running");
    }

    #[test]
    fn unknown_checks_are_skipped_and_the_first_of_a_key_counts() {
        let t0 = Instant::now();
        let mut sched = EndpointSchedule::default();
        let skipped = sched.update(
            &[ep("a", "http://a/", 0), ep("b", "http://b/", 7), ep("a", "http://elsewhere/", 0)],
            &[check(5)],
            t0,
        );
        assert_eq!((skipped, sched.len()), (1, 1));
        assert_eq!(sched.due(t0)[0].url, "http://a/");
    }

    #[test]
    fn an_unusable_endpoint_is_a_first_failure_once_per_stretch() {
        let t0 = Instant::now();
        let mut sched = EndpointSchedule::default();
        sched.update(&[ep("a", "not a url", 0)], &[check(1)], t0);
        let mut at = |i: u64, unusable: bool| {
            let due = sched.due(t0 + s(i));
            sched.finished("a", due[0].generation, unusable)
        };
        assert_eq!(at(0, true), Finished::Report { first_failure: true });
        assert_eq!(at(1, true), Finished::Report { first_failure: false });
        assert_eq!(at(2, false), Finished::Report { first_failure: false });
        assert_eq!(at(3, true), Finished::Report { first_failure: true }, "a new stretch");
    }
}
