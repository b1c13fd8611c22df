//! Publishers: push each revision's records to external DNS servers, and say how it went.
//!
//! A publisher receives the same [`ZoneAnswers`] the built-in server is built from and
//! returns a [`PublishOutcome`] value, which the control plane records on the revision; it
//! never panics and never returns an error the caller must handle. It does not decide what
//! to publish (the revision does) nor when (the control plane calls it for each revision).
//!
//! # Adding a provider
//!
//! A provider (a cloud DNS API, another protocol) is one more module beside [`rfc2136`]:
//! a config struct, a type implementing [`Publisher`], and nothing else. [`with_retries`]
//! gives it bounded exponential back-off and the outcome bookkeeping for free: the module
//! only writes one attempt, returning an [`AttemptError`] that says whether trying again can
//! help. A provider without lines publishes [`ZoneAnswers::default_records`].
//!
//! The trait is object-safe (`Arc<dyn Publisher>` in a list of targets): `publish` returns a
//! boxed future ([`PublishFuture`]) rather than being an `async fn`, which keeps trait
//! objects possible without a macro crate.

pub mod rfc2136;

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use vantage_core::Timestamp;

use crate::table::ZoneAnswers;

/// The future a [`Publisher`] returns.
pub type PublishFuture<'a> = Pin<Box<dyn Future<Output = PublishOutcome> + Send + 'a>>;

/// Something that writes a cluster's records somewhere outside.
pub trait Publisher: Send + Sync + fmt::Debug {
    /// The target as shown to operators and recorded in outcomes (`rfc2136://…`).
    fn target(&self) -> &str;

    /// Publishes `zone` (one cluster's records of one revision), retrying as configured, and
    /// reports the result.
    fn publish<'a>(&'a self, zone: &'a ZoneAnswers) -> PublishFuture<'a>;
}

/// How one publication ended; recorded on the revision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PublishOutcome {
    /// The publisher's [`Publisher::target`].
    pub target: String,
    /// Published, or why not (flattened: `"status": "failed", "reason": …`).
    #[serde(flatten)]
    pub status: PublishStatus,
    /// Attempts made (1 when the first succeeded or failed for good).
    pub attempts: u32,
    /// When the last attempt ended.
    pub finished_at: Timestamp,
}

/// Whether the records reached the target.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum PublishStatus {
    /// The target accepted the records.
    Published,
    /// The last attempt failed; `reason` says how (the peer's RCODE and TSIG error, or the
    /// network error).
    Failed {
        /// In the operator's words.
        reason: String,
    },
}

/// Bounded exponential back-off: wait `first_delay`, then twice as long each time, at most
/// `max_delay`, for at most `max_attempts` attempts in all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all (at least 1).
    pub max_attempts: u32,
    /// Wait before the second attempt.
    pub first_delay: Duration,
    /// Longest wait between attempts.
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 5,
            first_delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(30),
        }
    }
}

impl RetryPolicy {
    /// The wait after failed attempt number `attempt` (1-based).
    pub fn delay_after(&self, attempt: u32) -> Duration {
        let factor = 1u32.checked_shl(attempt.saturating_sub(1)).unwrap_or(u32::MAX);
        self.first_delay.saturating_mul(factor).min(self.max_delay)
    }
}

/// Why one attempt failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptError {
    /// In the operator's words.
    pub reason: String,
    /// Whether another attempt may succeed (network trouble, SERVFAIL) or not (refused,
    /// bad key: the same request will get the same answer).
    pub retryable: bool,
}

impl AttemptError {
    /// A failure worth retrying.
    pub fn transient(reason: impl Into<String>) -> Self {
        AttemptError { reason: reason.into(), retryable: true }
    }

    /// A failure that retrying cannot fix.
    pub fn permanent(reason: impl Into<String>) -> Self {
        AttemptError { reason: reason.into(), retryable: false }
    }
}

/// Runs `attempt` (given the attempt number, 1-based) until it succeeds, fails for good, or
/// the policy's attempts are spent, sleeping the back-off in between.
pub async fn with_retries<F, Fut>(target: &str, policy: &RetryPolicy, mut attempt: F) -> PublishOutcome
where
    F: FnMut(u32) -> Fut,
    Fut: Future<Output = Result<(), AttemptError>>,
{
    let max = policy.max_attempts.max(1);
    let mut n = 0;
    loop {
        n += 1;
        let result = attempt(n).await;
        let status = match result {
            Ok(()) => PublishStatus::Published,
            Err(e) if e.retryable && n < max => {
                tracing::warn!(target, attempt = n, reason = %e.reason, "publishing failed; will retry");
                tokio::time::sleep(policy.delay_after(n)).await;
                continue;
            }
            Err(e) => PublishStatus::Failed { reason: e.reason },
        };
        if let PublishStatus::Failed { reason } = &status {
            tracing::warn!(target, attempts = n, %reason, "publishing failed");
        }
        return PublishOutcome { target: target.to_owned(), status, attempts: n, finished_at: now() };
    }
}

pub(crate) fn now() -> Timestamp {
    let ms = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis());
    Timestamp::from_millis(i64::try_from(ms).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    #[test]
    fn back_off_doubles_up_to_the_cap() {
        let p = RetryPolicy {
            max_attempts: 9,
            first_delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(1),
        };
        let waits: Vec<u128> = (1..=6).map(|n| p.delay_after(n).as_millis()).collect();
        assert_eq!(waits, [100, 200, 400, 800, 1000, 1000]);
        assert_eq!(p.delay_after(200), Duration::from_secs(1));
    }

    #[tokio::test(start_paused = true)]
    async fn transient_failures_are_retried_and_permanent_ones_are_not() {
        let p = RetryPolicy {
            max_attempts: 4,
            first_delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(8),
        };
        let calls = AtomicU32::new(0);
        let out = with_retries("t", &p, |n| {
            calls.fetch_add(1, Ordering::Relaxed);
            async move { if n < 3 { Err(AttemptError::transient("down")) } else { Ok(()) } }
        })
        .await;
        assert_eq!((out.status, out.attempts), (PublishStatus::Published, 3));

        let out = with_retries("t", &p, |_| async { Err(AttemptError::transient("still down")) }).await;
        assert_eq!(out.attempts, 4);
        assert_eq!(out.status, PublishStatus::Failed { reason: "still down".into() });

        let out = with_retries("t", &p, |_| async { Err(AttemptError::permanent("NOTAUTH")) }).await;
        assert_eq!(out.attempts, 1);
        assert_eq!(calls.load(Ordering::Relaxed), 3);
    }
}
