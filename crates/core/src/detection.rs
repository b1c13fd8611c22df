//! Detection settings (`/v1/settings/detection`): how the control plane hurries and tempers
//! the verdicts of §5.1 — cross-region confirmation, escalating flap damping, and the cap on
//! probes per target. One set for the whole control plane; it never travels to the probers
//! (their work carries only what they act on), so older agents keep working.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result, in_range};

/// Validated detection settings. Build with [`DetectionSettings::parse`] or deserialise
/// (which validates).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "DetectionSettingsInput", into = "DetectionSettingsInput")]
pub struct DetectionSettings {
    confirm: bool,
    probe_budget_per_s: u32,
    damping: Damping,
}

/// Detection settings as entered; absent fields take their defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(default, deny_unknown_fields)]
pub struct DetectionSettingsInput {
    /// When one prober's report shows a target change (answering → failing or back), every
    /// other prober that probes it is asked to probe it at once (true).
    pub confirm: bool,
    /// Probes per second per target across every prober at most (1–1000, 10). More probers
    /// than that allows probe each target in turns: a region-balanced subset does.
    pub probe_budget_per_s: u32,
    /// An address that goes unreachable again within this long of coming back flaps, s
    /// (60–86400, 3600).
    pub damping_window_s: u32,
    /// Each flap doubles *answering before reachable*, up to this multiplier (1, 2, 4, 8, 16,
    /// 32 or 64; 8). 1 turns damping off.
    pub damping_max_multiplier: u32,
    /// After this long reachable, the multiplier halves (and again after as long), s
    /// (60–86400, 3600).
    pub damping_stable_s: u32,
}

impl Default for DetectionSettingsInput {
    fn default() -> Self {
        DetectionSettingsInput {
            confirm: true,
            probe_budget_per_s: 10,
            damping_window_s: 3600,
            damping_max_multiplier: 8,
            damping_stable_s: 3600,
        }
    }
}

impl Default for DetectionSettings {
    fn default() -> Self {
        DetectionSettings::parse(DetectionSettingsInput::default())
            .unwrap_or_else(|_| unreachable!("defaults are valid"))
    }
}

impl TryFrom<DetectionSettingsInput> for DetectionSettings {
    type Error = Error;
    fn try_from(i: DetectionSettingsInput) -> Result<Self> {
        DetectionSettings::parse(i)
    }
}

impl From<DetectionSettings> for DetectionSettingsInput {
    fn from(s: DetectionSettings) -> Self {
        DetectionSettingsInput {
            confirm: s.confirm,
            probe_budget_per_s: s.probe_budget_per_s,
            damping_window_s: s.damping.window_s,
            damping_max_multiplier: 1 << s.damping.max_doublings,
            damping_stable_s: s.damping.stable_s,
        }
    }
}

impl DetectionSettings {
    /// Validates every range.
    pub fn parse(i: DetectionSettingsInput) -> Result<Self> {
        let max = i.damping_max_multiplier;
        if !max.is_power_of_two() || max > 64 {
            return Err(Error::invalid(
                "damping_max_multiplier",
                format!("must be 1, 2, 4, 8, 16, 32 or 64, got {max}"),
            ));
        }
        Ok(DetectionSettings {
            confirm: i.confirm,
            probe_budget_per_s: in_range("probe_budget_per_s", i.probe_budget_per_s, 1, 1000)?,
            damping: Damping {
                window_s: in_range("damping_window_s", i.damping_window_s, 60, 86_400)?,
                stable_s: in_range("damping_stable_s", i.damping_stable_s, 60, 86_400)?,
                max_doublings: u8::try_from(max.trailing_zeros()).unwrap_or(0),
            },
        })
    }

    /// Whether a change seen by one prober is confirmed by the others at once.
    pub fn confirm(&self) -> bool {
        self.confirm
    }

    /// Probes per second per target at most.
    pub fn probe_budget_per_s(&self) -> u32 {
        self.probe_budget_per_s
    }

    /// The flap damping policy.
    pub fn damping(&self) -> &Damping {
        &self.damping
    }

    /// How many probers may probe one target with `attempts` attempts every `interval_s`
    /// within the budget (at least one: a target is never left unprobed).
    pub fn probers_per_target(&self, attempts: u32, interval_s: u32) -> usize {
        let per_round = u64::from(self.probe_budget_per_s) * u64::from(interval_s.max(1));
        usize::try_from(per_round / u64::from(attempts.max(1))).unwrap_or(usize::MAX).max(1)
    }
}

/// Escalating flap damping: how long an address that keeps coming back must answer before it
/// is reachable again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Damping {
    window_s: u32,
    stable_s: u32,
    max_doublings: u8,
}

impl Default for Damping {
    fn default() -> Self {
        *DetectionSettings::default().damping()
    }
}

impl Damping {
    /// Going unreachable within this many seconds of coming back is a flap.
    pub fn window_s(&self) -> u32 {
        self.window_s
    }

    /// Seconds reachable after which one doubling is forgiven.
    pub fn stable_s(&self) -> u32 {
        self.stable_s
    }

    /// Doublings at most (log2 of the largest multiplier).
    pub fn max_doublings(&self) -> u8 {
        self.max_doublings
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_round_trip() {
        let s = DetectionSettings::default();
        assert!(s.confirm());
        assert_eq!(s.probe_budget_per_s(), 10);
        assert_eq!(
            (s.damping().window_s(), s.damping().stable_s(), s.damping().max_doublings()),
            (3600, 3600, 3)
        );
        let json = serde_json::to_string(&s).unwrap();
        assert!(json.contains(r#""damping_max_multiplier":8"#), "{json}");
        assert_eq!(serde_json::from_str::<DetectionSettings>(&json).unwrap(), s);
    }

    #[test]
    fn refusals_name_the_field() {
        for (body, reason) in [
            (r#"{"probe_budget_per_s":0}"#, "probe_budget_per_s: must be between 1 and 1000, got 0"),
            (
                r#"{"damping_max_multiplier":3}"#,
                "damping_max_multiplier: must be 1, 2, 4, 8, 16, 32 or 64, got 3",
            ),
            (r#"{"damping_window_s":59}"#, "damping_window_s: must be between 60 and 86400, got 59"),
            (r#"{"damping_stable_s":86401}"#, "damping_stable_s: must be between 60 and 86400, got 86401"),
        ] {
            let e = serde_json::from_str::<DetectionSettings>(body).unwrap_err().to_string();
            assert!(e.contains(reason), "{body}: {e}");
        }
        assert!(serde_json::from_str::<DetectionSettings>(r#"{"confrim":true}"#).is_err(), "unknown field");
    }

    #[test]
    fn the_budget_sets_how_many_probers_share_a_target() {
        let s = DetectionSettings::default();
        // 10/s × 10 s = 100 probes a round, 3 each: 33 probers.
        assert_eq!(s.probers_per_target(3, 10), 33);
        assert_eq!(s.probers_per_target(10, 5), 5);
        let one =
            DetectionSettings::parse(DetectionSettingsInput { probe_budget_per_s: 1, ..Default::default() })
                .unwrap();
        assert_eq!(one.probers_per_target(10, 5), 1, "never zero");
    }
}
