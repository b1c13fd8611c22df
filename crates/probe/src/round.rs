//! Rounds (§3.2): every target gets `attempts` attempts in a row, each bounded by the
//! timeout; many targets run at once under a bound, so that a round of unreachable targets
//! takes about `attempts × timeout` whatever their number (up to the bound).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use tokio::task::JoinSet;
use tokio::time::MissedTickBehavior;
use vantage_core::Timestamp;
use vantage_core::result::ProbeResult;
use vantage_core::settings::ProbeSettings;

use crate::admission::{self, Admission};
use crate::attempt::{attempt_with, prepare};
use crate::limit::nofile_limit;
use crate::source::SourceAddresses;
use crate::target::ProbeTarget;

/// How a round runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoundConfig {
    /// Attempts per target (1–10 in the settings).
    pub attempts: u32,
    /// Bound of each attempt, for targets without their own.
    pub timeout: Duration,
    /// Targets probed at once at most. A round starts with fewer and opens up to this many
    /// while the targets are slow (see [`run_round`]); the open-file limit lowers it when it
    /// must (see [`effective_concurrency`]).
    pub concurrency: usize,
    /// Where the round's connections leave from.
    pub source: SourceAddresses,
}

impl Default for RoundConfig {
    /// The defaults of §3.3 (3 attempts of at most 3 s), 10,000 targets at once.
    fn default() -> Self {
        RoundConfig {
            attempts: 3,
            timeout: Duration::from_millis(3000),
            concurrency: 10_000,
            source: SourceAddresses::default(),
        }
    }
}

impl RoundConfig {
    /// The round of the probe settings, with `concurrency` targets at once, from `source`.
    pub fn from_settings(settings: &ProbeSettings, concurrency: usize, source: SourceAddresses) -> Self {
        RoundConfig {
            attempts: settings.attempts(),
            timeout: Duration::from_millis(u64::from(settings.timeout_ms())),
            concurrency,
            source,
        }
    }
}

/// Targets a round really probes at once: the configured bound, lowered to what the
/// open-file limit allows (each attempt in flight holds a socket). Logs a warning, once per
/// process, when the limit lowers it.
pub fn effective_concurrency(cfg: &RoundConfig) -> usize {
    static WARNED: AtomicBool = AtomicBool::new(false);
    let limit = nofile_limit();
    let max = limit.max_concurrency();
    if cfg.concurrency > max && !WARNED.swap(true, Ordering::Relaxed) {
        tracing::warn!(
            wanted = cfg.concurrency,
            effective = max,
            soft = limit.soft,
            hard = limit.hard,
            "round concurrency capped by the open-file limit; rounds with more targets take longer"
        );
    }
    cfg.concurrency.min(max).max(1)
}

/// Probes every target once per round and returns one result per target, in target order.
///
/// Targets start 256 at a time, and more at once while that pays (the `admission` module
/// says when): up to [`effective_concurrency`] when targets are slow or dead, so
/// that such a round takes about `attempts × timeout` whatever its size.
pub async fn run_round(targets: &[ProbeTarget], cfg: &RoundConfig) -> Vec<ProbeResult> {
    let mut admission = Admission::new(effective_concurrency(cfg));
    let completed = Arc::new(AtomicU64::new(0));
    let mut seen = 0;
    let mut ticker = tokio::time::interval(admission::TICK);
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut last_tick = Instant::now();
    let mut tasks = JoinSet::new();
    let mut results: Vec<Option<ProbeResult>> = vec![None; targets.len()];
    let mut next = 0;
    loop {
        while next < targets.len() && tasks.len() < admission.limit() {
            let target = targets[next].clone();
            let (attempts, timeout) = (cfg.attempts, target.timeout.unwrap_or(cfg.timeout));
            let (i, completed, source) = (next, completed.clone(), cfg.source);
            tasks.spawn(
                async move { (i, probe_target(&target, attempts, timeout, source, &completed).await) },
            );
            next += 1;
        }
        if tasks.is_empty() {
            break;
        }
        tokio::select! {
            // Finished tasks are reaped at once, so their memory goes with them.
            joined = tasks.join_next() => match joined {
                Some(Ok((i, result))) => results[i] = Some(result),
                // A panic in an attempt is a bug: surface it where the round was asked for.
                Some(Err(e)) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                // Cancelled by a runtime shutting down: the slot stays without attempts.
                Some(Err(_)) | None => {}
            },
            _ = ticker.tick() => {
                let now = Instant::now();
                let total = completed.load(Ordering::Relaxed);
                let saturated = next < targets.len() && tasks.len() >= admission.limit();
                let before = admission.limit();
                let after = admission.tick(total - seen, now - last_tick, saturated);
                if after != before {
                    tracing::debug!(before, after, started = next, "round concurrency changed");
                }
                (seen, last_tick) = (total, now);
            }
        }
    }
    results
        .into_iter()
        .zip(targets)
        .map(|(r, t)| {
            r.unwrap_or_else(|| ProbeResult {
                target: t.key.clone(),
                attempts: Vec::new(),
                hls: None,
                cert_not_after: None,
                failed_at: None,
            })
        })
        .collect()
}

async fn probe_target(
    target: &ProbeTarget,
    attempts: u32,
    timeout: Duration,
    source: SourceAddresses,
    completed: &AtomicU64,
) -> ProbeResult {
    let mut out = Vec::with_capacity(usize::try_from(attempts).unwrap_or(0));
    let (mut hls, mut cert_not_after, mut failed_at) = (None, None, None);
    let request = prepare(target);
    for _ in 0..attempts {
        let report = attempt_with(target, request.as_ref(), timeout, source).await;
        let attempt = report.attempt();
        if !attempt.good() && failed_at.is_none() {
            failed_at = Some(Timestamp::from_system(SystemTime::now()));
        }
        out.push(attempt);
        completed.fetch_add(1, Ordering::Relaxed);
        if report.hls.is_some() {
            hls = report.hls;
        }
        if report.cert_not_after.is_some() {
            cert_not_after = report.cert_not_after;
        }
    }
    ProbeResult { target: target.key.clone(), attempts: out, hls, cert_not_after, failed_at }
}
