//! How many targets a round runs at once, adapted while it runs. Pure: fed the attempts
//! completed per tick, so it is tested with virtual time.
//!
//! A round must finish in about `attempts × timeout` whatever the number of targets when the
//! targets are slow or dead: then every target has to run at once (up to the configured bound).
//! But when targets answer fast, thousands of connections in flight buy nothing: they queue
//! behind each other in this process (inflating the RTTs it measures), cost memory per
//! connection, and arrive at the peers as a burst. So a round starts at [`INITIAL`] targets
//! at once and opens up only where that pays:
//!
//! - nothing completes for two ticks in a row (20 ms) while targets wait to start: everything
//!   in flight is waiting on peers (dead, silent or distant targets), so quadruple at once;
//! - attempts are slow (their mean time, by Little's law the limit divided by the completion
//!   rate, is above [`FAST`]): try double the limit, and keep it only when the completion
//!   rate grew by half as much (by half for a doubling); otherwise go back, and try again
//!   only after a while.
//!
//! The limit never passes the configured bound.

use std::time::Duration;

/// Targets at once when a round starts.
pub(crate) const INITIAL: usize = 256;
/// Attempts whose mean time is below this are fast: more at once would only queue. Loaded
/// local peers stay below it; targets across a network are above it.
pub(crate) const FAST: Duration = Duration::from_millis(50);
/// How often the round feeds [`Admission::tick`].
pub(crate) const TICK: Duration = Duration::from_millis(10);
/// A larger limit pays when the completion rate grows by this share of the limit's growth
/// (by half for a doubling). Targets bound by network time give all of it; a busy machine's
/// noise stays well below half.
const GAIN_SHARE: f64 = 0.5;
/// Ticks in a row without a completion that show every target in flight is waiting. Two, so
/// that a tick which ran before this process got round to its completions (after it was not
/// scheduled for a while, say) is never enough on its own.
const QUIET_TICKS: u32 = 2;
/// Growth of the limit when nothing completes: quick, since every target in flight is waiting.
const QUIET_GROWTH: usize = 4;
/// Measurement windows to wait after a larger limit that did not pay.
const BACKOFF: u32 = 16;

/// The adaptive limit of one round.
#[derive(Debug, Clone)]
pub(crate) struct Admission {
    cap: usize,
    limit: usize,
    /// The measurement window at the current limit.
    window_done: u64,
    window_time: Duration,
    /// While a larger limit is tried: the limit and completion rate before it.
    trial: Option<(usize, f64)>,
    /// Windows left before the next trial.
    backoff: u32,
    /// Ticks in a row without a completion.
    quiet: u32,
}

impl Admission {
    /// A round that may run at most `cap` targets at once.
    pub(crate) fn new(cap: usize) -> Self {
        let cap = cap.max(1);
        Admission {
            cap,
            limit: INITIAL.min(cap),
            window_done: 0,
            window_time: Duration::ZERO,
            trial: None,
            backoff: 0,
            quiet: 0,
        }
    }

    /// Targets that may run at once now.
    pub(crate) fn limit(&self) -> usize {
        self.limit
    }

    /// One tick: `done` attempts completed in the last `dt`; `saturated` when targets were
    /// waiting to start because the limit was reached. Returns the new limit.
    pub(crate) fn tick(&mut self, done: u64, dt: Duration, saturated: bool) -> usize {
        self.quiet = if done == 0 { self.quiet + 1 } else { 0 };
        if !saturated {
            // The limit is not what holds the round back: nothing to learn.
            self.reset_window();
            return self.limit;
        }
        if self.quiet >= QUIET_TICKS {
            self.quiet = 0;
            self.trial = None;
            self.grow(QUIET_GROWTH);
            return self.limit;
        }
        self.window_done += done;
        self.window_time += dt;
        if self.window_done == 0 {
            return self.limit;
        }
        let rate = self.window_done as f64 / self.window_time.as_secs_f64();
        let mean = Duration::from_secs_f64(self.limit as f64 / rate);
        // Judge a limit only after its attempts had time to complete.
        if self.window_time < (TICK * 3).max(mean * 2) {
            return self.limit;
        }
        self.reset_window();
        let kept = match self.trial.take() {
            Some((old, before)) if rate < before * self.gain_needed(old) => {
                // The larger limit did not pay: back, and wait before trying again.
                self.limit = old;
                self.backoff = BACKOFF;
                return self.limit;
            }
            Some(_) => true,
            None => false,
        };
        if !kept && self.backoff > 0 {
            self.backoff -= 1;
        } else if mean > FAST {
            self.try_double(rate);
        }
        self.limit
    }

    /// The growth of the completion rate that a move from `old` to the current limit must
    /// bring to be kept.
    fn gain_needed(&self, old: usize) -> f64 {
        1.0 + (self.limit as f64 / old.max(1) as f64 - 1.0) * GAIN_SHARE
    }

    fn try_double(&mut self, rate: f64) {
        if self.limit < self.cap {
            self.trial = Some((self.limit, rate));
            self.double();
        }
    }

    fn double(&mut self) {
        self.grow(2);
    }

    fn grow(&mut self, factor: usize) {
        self.limit = self.limit.saturating_mul(factor).min(self.cap);
        self.reset_window();
    }

    fn reset_window(&mut self) {
        self.window_done = 0;
        self.window_time = Duration::ZERO;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Drives an admission against a model of the targets: `rate(limit)` attempts per second
    /// complete when `limit` run at once. Returns the limit after each tick.
    fn run(cap: usize, ticks: usize, rate: impl Fn(usize) -> f64) -> Vec<usize> {
        let mut a = Admission::new(cap);
        let mut carry = 0.0;
        (0..ticks)
            .map(|_| {
                carry += rate(a.limit()) * TICK.as_secs_f64();
                let done = carry.floor();
                carry -= done;
                a.tick(done as u64, TICK, true)
            })
            .collect()
    }

    #[test]
    fn dead_targets_open_everything_within_a_tenth_of_a_second() {
        let limits = run(10_000, 6, |_| 0.0);
        assert_eq!(limits, [256, 1024, 1024, 4096, 4096, 10_000], "x4 every two quiet ticks");
    }

    #[test]
    fn a_saturated_local_server_keeps_the_initial_limit() {
        // 15,000 attempts/s however many run at once: each takes limit/15k s, 17 ms at 256.
        let limits = run(10_000, 300, |_| 15_000.0);
        assert!(limits.iter().all(|&l| l == INITIAL), "{limits:?}");
    }

    #[test]
    fn a_slow_saturated_server_is_tried_now_and_then_and_kept_at_the_initial_limit() {
        // 2,000 attempts/s at any limit: attempts take 128 ms at 256, more is not faster.
        let limits = run(10_000, 1000, |_| 2_000.0);
        assert!(limits.iter().all(|&l| l <= 2 * INITIAL), "{limits:?}");
        let at_initial = limits.iter().filter(|&&l| l == INITIAL).count();
        assert!(at_initial > 800, "trials are rare: {at_initial} of 1000 ticks");
        assert_eq!(*limits.last().unwrap(), INITIAL);
    }

    #[test]
    fn distant_targets_get_the_concurrency_they_need() {
        // Every attempt takes 100 ms (network RTT): the rate grows with the limit.
        let limits = run(10_000, 400, |l| l as f64 / 0.1);
        assert_eq!(*limits.last().unwrap(), 10_000, "{limits:?}");
        let reached = limits.iter().position(|&l| l == 10_000).unwrap();
        assert!(reached < 150, "ramp takes {reached} ticks");
    }

    #[test]
    fn a_steady_limit_grows_again_when_completions_stop() {
        let mut a = Admission::new(10_000);
        for _ in 0..50 {
            a.tick(150, TICK, true);
        }
        assert_eq!(a.limit(), INITIAL);
        a.tick(0, TICK, true);
        a.tick(0, TICK, true);
        assert_eq!(a.limit(), 4 * INITIAL);
    }

    #[test]
    fn one_quiet_tick_between_busy_ones_is_not_quiet() {
        // A tick that ran before this process got round to its completions (it was not
        // scheduled for 50 ms) sees none; the next one sees them all.
        let mut a = Admission::new(10_000);
        for _ in 0..20 {
            a.tick(0, TICK * 5, true);
            a.tick(900, TICK, true);
        }
        assert_eq!(a.limit(), INITIAL);
    }

    #[test]
    fn an_unsaturated_round_or_a_small_cap_does_not_grow() {
        let mut a = Admission::new(10_000);
        for _ in 0..50 {
            a.tick(0, TICK, false);
        }
        assert_eq!(a.limit(), INITIAL);
        let mut small = Admission::new(100);
        assert_eq!(small.limit(), 100);
        for _ in 0..10 {
            small.tick(0, TICK, true);
            small.tick(1_000, TICK, true);
        }
        assert_eq!(small.limit(), 100);
        assert_eq!(Admission::new(0).limit(), 1);
    }
}
