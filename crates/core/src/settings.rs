//! Probe settings (§3.3): one set for every prober, picked up next round.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result, in_range};

/// Validated probe settings. Build with [`ProbeSettings::parse`] or deserialise (which validates).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(try_from = "ProbeSettingsInput")]
pub struct ProbeSettings {
    interval_s: u32,
    timeout_ms: u32,
    attempts: u32,
    loss_pct: u32,
    failing_before_unreachable_s: u32,
    answering_before_reachable_s: u32,
}

/// Probe settings as entered; absent fields take their defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(default, deny_unknown_fields)]
pub struct ProbeSettingsInput {
    /// Seconds between the starts of two rounds (5–60, 10).
    pub interval_s: u32,
    /// Longest time one attempt may take, ms (500–10000 and not longer than the interval, 3000).
    pub timeout_ms: u32,
    /// Attempts per target and round (1–10, 3).
    pub attempts: u32,
    /// A prober whose loss on an address reaches this % sees it failing (1–100, 50).
    pub loss_pct: u32,
    /// How long an address fails before it is unreachable, s (5–3600, 30).
    pub failing_before_unreachable_s: u32,
    /// How long an unreachable address answers before it is reachable again, s (5–3600, 60).
    pub answering_before_reachable_s: u32,
}

impl Default for ProbeSettingsInput {
    fn default() -> Self {
        ProbeSettingsInput {
            interval_s: 10,
            timeout_ms: 3000,
            attempts: 3,
            loss_pct: 50,
            failing_before_unreachable_s: 30,
            answering_before_reachable_s: 60,
        }
    }
}

impl Default for ProbeSettings {
    fn default() -> Self {
        // The defaults are inside every range.
        ProbeSettings::from_checked(ProbeSettingsInput::default())
    }
}

impl TryFrom<ProbeSettingsInput> for ProbeSettings {
    type Error = Error;
    fn try_from(i: ProbeSettingsInput) -> Result<Self> {
        ProbeSettings::parse(i)
    }
}

impl From<ProbeSettings> for ProbeSettingsInput {
    fn from(s: ProbeSettings) -> Self {
        ProbeSettingsInput {
            interval_s: s.interval_s,
            timeout_ms: s.timeout_ms,
            attempts: s.attempts,
            loss_pct: s.loss_pct,
            failing_before_unreachable_s: s.failing_before_unreachable_s,
            answering_before_reachable_s: s.answering_before_reachable_s,
        }
    }
}

impl ProbeSettings {
    /// Validates every range of §3.3.
    pub fn parse(i: ProbeSettingsInput) -> Result<Self> {
        in_range("interval_s", i.interval_s, 5, 60)?;
        in_range("timeout_ms", i.timeout_ms, 500, 10_000)?;
        if u64::from(i.timeout_ms) > u64::from(i.interval_s) * 1000 {
            return Err(Error::invalid(
                "timeout_ms",
                format!(
                    "must not be longer than the interval ({} ms), got {}",
                    i.interval_s * 1000,
                    i.timeout_ms
                ),
            ));
        }
        in_range("attempts", i.attempts, 1, 10)?;
        in_range("loss_pct", i.loss_pct, 1, 100)?;
        in_range("failing_before_unreachable_s", i.failing_before_unreachable_s, 5, 3600)?;
        in_range("answering_before_reachable_s", i.answering_before_reachable_s, 5, 3600)?;
        Ok(Self::from_checked(i))
    }

    const fn from_checked(i: ProbeSettingsInput) -> Self {
        ProbeSettings {
            interval_s: i.interval_s,
            timeout_ms: i.timeout_ms,
            attempts: i.attempts,
            loss_pct: i.loss_pct,
            failing_before_unreachable_s: i.failing_before_unreachable_s,
            answering_before_reachable_s: i.answering_before_reachable_s,
        }
    }

    /// Seconds between round starts.
    pub fn interval_s(&self) -> u32 {
        self.interval_s
    }
    /// Timeout per attempt in ms.
    pub fn timeout_ms(&self) -> u32 {
        self.timeout_ms
    }
    /// Attempts per target and round.
    pub fn attempts(&self) -> u32 {
        self.attempts
    }
    /// Loss (%) at which a prober sees an address failing.
    pub fn loss_pct(&self) -> u32 {
        self.loss_pct
    }
    /// Seconds of failing before unreachable.
    pub fn failing_before_unreachable_s(&self) -> u32 {
        self.failing_before_unreachable_s
    }
    /// Seconds of answering before reachable again.
    pub fn answering_before_reachable_s(&self) -> u32 {
        self.answering_before_reachable_s
    }

    /// How long a prober's result counts (§5.1): 3 intervals, at least 15 s.
    pub fn result_fresh_s(&self) -> u64 {
        u64::from(self.interval_s * 3).max(15)
    }

    /// [`result_fresh_s`](Self::result_fresh_s) in milliseconds.
    pub fn result_fresh_ms(&self) -> i64 {
        i64::try_from(self.result_fresh_s()).unwrap_or(i64::MAX).saturating_mul(1000)
    }

    /// Whether a result reported at `reported_at` still counts at `now` (§5.1's freshness):
    /// the one rule every reader of results applies (a pass's walk of a fleet's results with
    /// its bound worked out once, [`fresh_within`]).
    pub fn result_counts(&self, reported_at: crate::Timestamp, now: crate::Timestamp) -> bool {
        fresh_within(reported_at, now, self.result_fresh_ms())
    }

    /// How long a prober stays online without asking or reporting (§3.5): 3 intervals, at least 30 s.
    pub fn prober_online_s(&self) -> u64 {
        u64::from(self.interval_s * 3).max(30)
    }

    /// How far back a removal of records counts as one with the latest for the mass-removal
    /// protection (§5.5): 2 intervals. Probers probe each address at its own moment of the
    /// interval, so one cut (of the probers' own network, say) turns addresses unreachable over
    /// up to an interval, in several passes; counted pass by pass, the first ones would go
    /// before the protection held the rest.
    pub fn removal_window_s(&self) -> u64 {
        2 * u64::from(self.interval_s)
    }
}

/// Whether a result reported at `reported_at` is within `fresh_ms` of `now`, inclusive (see
/// [`ProbeSettings::result_counts`]).
#[inline(always)]
pub fn fresh_within(reported_at: crate::Timestamp, now: crate::Timestamp, fresh_ms: i64) -> bool {
    now.millis_since(reported_at) <= fresh_ms
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(f: impl FnOnce(&mut ProbeSettingsInput)) -> Result<ProbeSettings> {
        let mut i = ProbeSettingsInput::default();
        f(&mut i);
        ProbeSettings::parse(i)
    }

    #[test]
    fn probe_settings_defaults() {
        let s = ProbeSettings::default();
        assert_eq!((s.interval_s(), s.timeout_ms(), s.attempts(), s.loss_pct()), (10, 3000, 3, 50));
        assert_eq!((s.failing_before_unreachable_s(), s.answering_before_reachable_s()), (30, 60));
        let parsed: ProbeSettings = serde_json::from_str("{}").unwrap();
        assert_eq!(parsed, s);
    }

    #[test]
    fn probe_settings_ranges() {
        type Case = (fn(&mut ProbeSettingsInput), &'static str);
        let cases: [Case; 12] = [
            (|i| i.interval_s = 4, "interval_s: must be between 5 and 60, got 4"),
            (|i| i.interval_s = 61, "interval_s: must be between 5 and 60, got 61"),
            (|i| i.timeout_ms = 499, "timeout_ms: must be between 500 and 10000, got 499"),
            (
                |i| {
                    i.interval_s = 60;
                    i.timeout_ms = 10_001
                },
                "timeout_ms: must be between 500 and 10000, got 10001",
            ),
            (|i| i.attempts = 0, "attempts: must be between 1 and 10, got 0"),
            (|i| i.attempts = 11, "attempts: must be between 1 and 10, got 11"),
            (|i| i.loss_pct = 0, "loss_pct: must be between 1 and 100, got 0"),
            (|i| i.loss_pct = 101, "loss_pct: must be between 1 and 100, got 101"),
            (
                |i| i.failing_before_unreachable_s = 4,
                "failing_before_unreachable_s: must be between 5 and 3600, got 4",
            ),
            (
                |i| i.failing_before_unreachable_s = 3601,
                "failing_before_unreachable_s: must be between 5 and 3600, got 3601",
            ),
            (
                |i| i.answering_before_reachable_s = 4,
                "answering_before_reachable_s: must be between 5 and 3600, got 4",
            ),
            (
                |i| i.answering_before_reachable_s = 3601,
                "answering_before_reachable_s: must be between 5 and 3600, got 3601",
            ),
        ];
        for (f, want) in cases {
            assert_eq!(with(f).unwrap_err().to_string(), want);
        }
    }

    #[test]
    fn probe_settings_timeout_not_longer_than_interval() {
        let e = with(|i| {
            i.interval_s = 5;
            i.timeout_ms = 5001
        })
        .unwrap_err();
        assert_eq!(e.to_string(), "timeout_ms: must not be longer than the interval (5000 ms), got 5001");
        assert!(
            with(|i| {
                i.interval_s = 5;
                i.timeout_ms = 5000
            })
            .is_ok()
        );
    }

    #[test]
    fn probe_settings_unknown_fields_are_refused() {
        let e = serde_json::from_str::<ProbeSettings>(r#"{"intervall_s": 5}"#).unwrap_err();
        assert!(e.to_string().contains("intervall_s"), "{e}");
    }

    #[test]
    fn result_and_online_windows() {
        let fast = with(|i| {
            i.interval_s = 5;
            i.timeout_ms = 1000
        })
        .unwrap();
        assert_eq!((fast.result_fresh_s(), fast.prober_online_s()), (15, 30));
        let slow = with(|i| i.interval_s = 20).unwrap();
        assert_eq!((slow.result_fresh_s(), slow.prober_online_s()), (60, 60));
    }
}
