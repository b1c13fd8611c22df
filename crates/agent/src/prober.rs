//! The prober loop (§3.2), for `vantage probe` and for nodes that also probe: ask for work,
//! probe every target, report in chunks of at most [`wire::MAX_RESULTS`], and start the next
//! round at the next start of the phase the server gave (one interval after this one started
//! from servers that give none; at once when the round ran longer). The endpoint targets of
//! each work answer go to the endpoint loop (`crate::endpoint`), and confirmations are asked
//! for by the recheck loop (`crate::recheck`): tasks beside the rounds, none waits for another.
//!
//! The loop never ends by itself: a failed round is logged and the next one tries again; a
//! refusal of this identity (401/403: revoked, disabled) is retried less and less often,
//! since an operator may undo it.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;
use vantage_core::check::Check;
use vantage_core::result::ProbeResult;
use vantage_core::settings::ProbeSettings;
use vantage_core::wire::{self, Report, Role, Work};
use vantage_probe::{ProbeTarget, RoundConfig, SourceAddresses, run_round};

use crate::client::{ChannelClient, now};
use crate::endpoint::{EndpointWork, endpoint_loop};
use crate::enroll::{ChannelOptions, connect_with_retry};
use crate::error::{Error, Result};
use crate::recheck::{CurrentWork, recheck_loop};

/// Targets probed at once at most, unless told otherwise (the open-file limit may lower it).
pub const DEFAULT_CONCURRENCY: usize = 10_000;
/// Longest wait between two tries while the server refuses this identity.
const MAX_BACKOFF: Duration = Duration::from_secs(300);

/// How `vantage probe` runs.
#[derive(Debug, Clone)]
pub struct ProberOptions {
    /// The channel and the state directory.
    pub channel: ChannelOptions,
    /// Targets probed at once at most.
    pub concurrency: usize,
    /// Where probe connections leave from (one address per family; none: the kernel picks).
    pub source: SourceAddresses,
}

impl ProberOptions {
    /// Default concurrency, no source addresses.
    pub fn new(channel: ChannelOptions) -> Self {
        ProberOptions { channel, concurrency: DEFAULT_CONCURRENCY, source: SourceAddresses::NONE }
    }
}

/// The endpoints of one prober loop and how its refusals read.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Endpoints {
    work: &'static str,
    pub(crate) report: &'static str,
    pub(crate) recheck: &'static str,
    refused: &'static str,
}

impl Endpoints {
    pub(crate) const PROBER: Endpoints = Endpoints {
        work: wire::PROBER_WORK,
        report: wire::PROBER_REPORT,
        recheck: wire::PROBER_RECHECK,
        refused: "the server refused this prober",
    };
    pub(crate) const NODE: Endpoints = Endpoints {
        work: wire::NODE_WORK,
        report: wire::NODE_REPORT,
        recheck: wire::NODE_RECHECK,
        refused: "the server refused this node's probing",
    };
}

/// Runs `vantage probe` until `shutdown` resolves: raises the open-file limit, enrolls (or
/// loads the saved identity), then probes round after round.
///
/// Returns an error only when it cannot join the channel for a reason that will not pass by
/// itself (a bad option, a CA fingerprint mismatch, a refused token, an unusable state
/// directory). A server that is down is waited for.
pub async fn run_prober(opts: ProberOptions, shutdown: impl Future<Output = ()>) -> Result<()> {
    log_nofile_limit(opts.concurrency);
    run_until(
        &opts.channel,
        Role::Prober,
        |c| prober_loop(c, Endpoints::PROBER, opts.concurrency, opts.source),
        shutdown,
    )
    .await
}

/// Joins the channel as `role` (waiting for a server that is down) and runs `work` with the
/// client, until `shutdown`.
pub(crate) async fn run_until<W: Future<Output = ()>>(
    channel: &ChannelOptions,
    role: Role,
    work: impl FnOnce(Arc<ChannelClient>) -> W,
    shutdown: impl Future<Output = ()>,
) -> Result<()> {
    let run = async {
        work(connect_with_retry(channel, role).await?).await;
        Ok(())
    };
    tokio::select! {
        r = run => r,
        () = shutdown => {
            tracing::info!("stopping");
            Ok(())
        }
    }
}

/// Raises the open-file limit and says what it allows.
pub(crate) fn log_nofile_limit(concurrency: usize) {
    let limit = vantage_probe::raise_nofile_limit();
    let effective = concurrency.min(limit.max_concurrency()).max(1);
    match &limit.error {
        Some(e) => tracing::warn!(soft = limit.soft, hard = limit.hard, effective, "{e}"),
        None => tracing::info!(
            before = limit.before,
            soft = limit.soft,
            hard = limit.hard,
            concurrency,
            effective,
            "open-file limit: up to {effective} targets at once"
        ),
    }
}

/// What a round did.
#[derive(Debug, Clone, Copy)]
struct RoundSummary {
    interval: Duration,
    phase_ms: Option<u64>,
    targets: usize,
    lost_all: usize,
    took: Duration,
    renew_in_s: u64,
}

/// Round after round, with the endpoint loop beside, forever; the caller stops both by
/// dropping (or aborting) it.
pub(crate) async fn prober_loop(
    client: Arc<ChannelClient>,
    ep: Endpoints,
    concurrency: usize,
    source: SourceAddresses,
) {
    let (endpoints, updates) = mpsc::unbounded_channel();
    let (current, work) = watch::channel(None);
    // Tasks of their own, so that no loop waits for another; the set aborts them when this
    // future is dropped.
    let mut beside = JoinSet::new();
    beside.spawn(endpoint_loop(client.clone(), ep.report, concurrency, source, updates));
    beside.spawn(recheck_loop(client.clone(), ep, work));
    let out = Outlets { endpoints: &endpoints, current: &current };
    tokio::select! {
        () = rounds(&client, ep, concurrency, source, out) => {}
        // The endpoint loop ends only by a panic (a bug) while the rounds go on: pass it on.
        Some(Err(e)) = beside.join_next() => {
            if e.is_panic() {
                std::panic::resume_unwind(e.into_panic());
            }
        }
    }
}

/// Where each work answer goes besides the round: its endpoints to the endpoint loop, its
/// targets to the recheck loop.
#[derive(Clone, Copy)]
struct Outlets<'a> {
    endpoints: &'a mpsc::UnboundedSender<EndpointWork>,
    current: &'a watch::Sender<Option<Arc<CurrentWork>>>,
}

/// Round after round, forever.
async fn rounds(
    client: &ChannelClient,
    ep: Endpoints,
    concurrency: usize,
    source: SourceAddresses,
    out: Outlets<'_>,
) {
    let mut interval = Duration::from_secs(u64::from(ProbeSettings::default().interval_s()));
    let mut refusals: u32 = 0;
    let mut last_targets: Option<usize> = None;
    loop {
        let started = Instant::now();
        let wait = match round(client, ep, concurrency, source, out).await {
            Ok(s) => {
                interval = s.interval;
                if refusals > 0 {
                    tracing::info!("the server accepts this identity again");
                }
                refusals = 0;
                if last_targets != Some(s.targets) {
                    tracing::info!(
                        targets = s.targets,
                        lost_all = s.lost_all,
                        took_ms = s.took.as_millis(),
                        interval_s = s.interval.as_secs(),
                        "round done"
                    );
                    last_targets = Some(s.targets);
                } else {
                    tracing::debug!(
                        targets = s.targets,
                        lost_all = s.lost_all,
                        took_ms = s.took.as_millis(),
                        "round done"
                    );
                }
                if let Err(e) = client.renew_if_due(Some(s.renew_in_s)).await {
                    tracing::warn!(error = %e, "certificate renewal failed; trying again next round");
                }
                match s.phase_ms {
                    Some(phase) => next_in_phase(started.elapsed(), interval, phase, now().millis()),
                    None => interval,
                }
            }
            Err(e) if e.is_identity_refused() || matches!(e, Error::Tls { .. }) => {
                refusals = refusals.saturating_add(1);
                let wait = backoff(interval, refusals);
                if e.is_identity_refused() {
                    tracing::warn!(retry_in_s = wait.as_secs(), "{}: {}", ep.refused, e.reason());
                } else {
                    tracing::warn!(error = %e, retry_in_s = wait.as_secs(), "round failed");
                }
                wait
            }
            Err(e) => {
                tracing::warn!(error = %e, retry_in_s = interval.as_secs(), "round failed; trying again next round");
                interval
            }
        };
        tokio::time::sleep_until((started + wait).into()).await;
    }
}

/// The wait from this round's start to the next: the next start of the phase (Unix time in
/// ms modulo the interval) at least half an interval after this round started, so that a
/// round never follows the previous one closely when the phase changes.
fn next_in_phase(elapsed: Duration, interval: Duration, phase_ms: u64, now_ms: i64) -> Duration {
    let interval_ms = u64::try_from(interval.as_millis()).unwrap_or(u64::MAX).max(1);
    let elapsed_ms = u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX);
    let now_ms = u64::try_from(now_ms).unwrap_or(0);
    let mut until = (phase_ms % interval_ms + interval_ms - now_ms % interval_ms) % interval_ms;
    while elapsed_ms + until < interval_ms / 2 {
        until += interval_ms;
    }
    Duration::from_millis(elapsed_ms + until)
}

/// Wait after `n` refusals in a row: twice the interval, doubling, at most [`MAX_BACKOFF`].
fn backoff(interval: Duration, n: u32) -> Duration {
    interval.saturating_mul(1 << n.min(6)).min(MAX_BACKOFF).max(interval)
}

async fn round(
    client: &ChannelClient,
    ep: Endpoints,
    concurrency: usize,
    source: SourceAddresses,
    out: Outlets<'_>,
) -> Result<RoundSummary> {
    let work: Work = client.get(ep.work).await?;
    // First, so that the endpoints do not wait for this round. The endpoint loop outlives
    // the rounds but for a panic, which `prober_loop` passes on.
    let _ = out.endpoints.send(EndpointWork::of(&work));
    let cfg = RoundConfig::from_settings(&work.settings, concurrency, source);
    // Shared with the recheck loop, not copied.
    let current = Arc::new(CurrentWork { targets: targets(&work), round: cfg });
    out.current.send_replace(Some(current.clone()));
    let (t0, started_at) = (Instant::now(), now());
    let results = run_round(&current.targets, &cfg).await;
    let (took, finished_at) = (t0.elapsed(), now());
    let lost_all = results.iter().filter(|r| r.sent() > 0 && r.lost() == r.sent()).count();
    for report in reports(started_at, finished_at, results) {
        client.post_no_content(ep.report, &report).await?;
    }
    Ok(RoundSummary {
        interval: Duration::from_secs(u64::from(work.settings.interval_s())),
        phase_ms: work.phase_ms,
        targets: current.targets.len(),
        lost_all,
        took,
        renew_in_s: work.renew_in_s,
    })
}

/// The round's reports: at most [`wire::MAX_RESULTS`] results each, in target order. A round
/// without targets still makes one (empty) report, so the server knows the prober is at work.
pub(crate) fn reports(
    started_at: vantage_core::Timestamp,
    finished_at: vantage_core::Timestamp,
    mut results: Vec<ProbeResult>,
) -> Vec<Report> {
    let mut out = Vec::with_capacity(results.len() / wire::MAX_RESULTS + 1);
    loop {
        let rest = results.split_off(results.len().min(wire::MAX_RESULTS));
        out.push(Report {
            started_at,
            finished_at,
            version: crate::VERSION.to_owned(),
            results,
            confirmation: false,
        });
        if rest.is_empty() {
            return out;
        }
        results = rest;
    }
}

/// One probe target per work target. A target naming a check the work does not hold is
/// skipped (and logged): the server sent something inconsistent, the rest still counts.
pub(crate) fn targets(work: &Work) -> Vec<ProbeTarget> {
    let checks: Vec<Arc<Check>> = work.checks.iter().cloned().map(Arc::new).collect();
    let fetch = Arc::new(work.fetch.clone());
    let mut skipped = 0usize;
    let out = work
        .targets
        .iter()
        .filter_map(|t| {
            let check = usize::try_from(t.check).ok().and_then(|i| checks.get(i));
            if check.is_none() {
                skipped += 1;
            }
            Some(
                ProbeTarget::listener(t.key.clone(), t.ip, &t.listener, check?.clone())
                    .with_fetch(fetch.clone()),
            )
        })
        .collect();
    if skipped > 0 {
        tracing::warn!(
            skipped,
            checks = checks.len(),
            "work targets naming a check that is not in the work were skipped"
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use vantage_core::check::{CheckInput, Listener, Protocol};

    #[test]
    fn reports_hold_at_most_max_results() {
        let r = |i: usize| ProbeResult {
            target: i.to_string(),
            attempts: Vec::new(),
            hls: None,
            cert_not_after: None,
            failed_at: None,
        };
        let (t0, t1) = (vantage_core::Timestamp::from_secs(1), vantage_core::Timestamp::from_secs(2));
        let out = reports(t0, t1, (0..wire::MAX_RESULTS * 2 + 1).map(r).collect());
        assert_eq!(
            out.iter().map(|r| r.results.len()).collect::<Vec<_>>(),
            [wire::MAX_RESULTS, wire::MAX_RESULTS, 1]
        );
        assert_eq!(out[1].results[0].target, wire::MAX_RESULTS.to_string(), "in target order");
        assert!(out.iter().all(|r| r.started_at == t0 && r.finished_at == t1 && r.version == crate::VERSION));
        let exact = reports(t0, t1, (0..wire::MAX_RESULTS).map(r).collect());
        assert_eq!(exact.len(), 1);
        let empty = reports(t0, t1, Vec::new());
        assert_eq!((empty.len(), empty[0].results.len()), (1, 0));
    }

    #[test]
    fn rounds_start_at_the_phase_and_never_within_half_an_interval() {
        let i = Duration::from_secs(10);
        let ms = Duration::from_millis;
        // A round started at 100_000 + 3_000 (phase 3 s) and took 1 s: the next at 113_000.
        assert_eq!(next_in_phase(ms(1_000), i, 3_000, 104_000), ms(10_000));
        // The phase moved to 5 s: the next start of it, 2 s later, is too close to this round's
        // start (3 s after it), so the one after.
        assert_eq!(next_in_phase(ms(1_000), i, 5_000, 104_000), ms(12_000));
        assert_eq!(next_in_phase(ms(1_000), i, 9_000, 104_000), ms(6_000));
        // A round longer than the interval: the next start of the phase after it ended.
        assert_eq!(next_in_phase(ms(12_500), i, 3_000, 115_500), ms(20_000));
    }

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let i = Duration::from_secs(10);
        assert_eq!(backoff(i, 1), Duration::from_secs(20));
        assert_eq!(backoff(i, 2), Duration::from_secs(40));
        assert_eq!(backoff(i, 10), MAX_BACKOFF);
        assert_eq!(
            backoff(Duration::from_secs(600), 1),
            Duration::from_secs(600),
            "never below the interval"
        );
    }

    #[test]
    fn targets_follow_the_work_and_skip_unknown_checks() {
        let listener = Listener { port: 8443, protocol: Protocol::Https, proxy_protocol: true };
        let t = |key: &str, check| wire::Target {
            key: key.into(),
            ip: "192.0.2.1".parse().unwrap(),
            listener,
            check,
        };
        let work = Work {
            id: 1,
            settings: ProbeSettings::default(),
            checks: vec![Check::parse(CheckInput::default()).unwrap()],
            targets: vec![t("a", 0), t("b", 1)],
            endpoints: Vec::new(),
            check_now: false,
            renew_in_s: 100,
            phase_ms: None,
            fetch: vantage_core::fetch::FetchPolicy::any_address(),
        };
        let out = targets(&work);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].key, "a");
        assert_eq!(out[0].addr, "192.0.2.1:8443".parse().unwrap());
        assert!(out[0].proxy_v1 && out[0].uses_tls());
    }
}
