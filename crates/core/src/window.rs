//! The window register (§3.4): the last 64 attempts of one (prober, target) as bit strips,
//! with the Varnish semantics of window, threshold and initial.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::result::{Attempt, Stages};

/// Slots in the register.
pub const SLOTS: u32 = 64;

/// Weight of a new RTT in the running average once warmed up (Varnish uses 4).
const AVG_RATE: u8 = 4;

/// The last 64 attempts of one target as seen by one prober. Bit 0 is the newest attempt.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct WindowRegister {
    /// Attempts whose connection (and handshake) succeeded.
    pub connected: u64,
    /// Attempts whose request was sent.
    pub sent: u64,
    /// Attempts that received a response.
    pub received: u64,
    /// Good attempts.
    pub good: u64,
    /// Running average RTT of good attempts, ms: a figure to read, in the 4 bytes a float
    /// takes (issue 32: a fleet holds millions of registers), averaged in double precision.
    pub avg_rtt_ms: f32,
    /// Good attempts averaged so far, capped at the averaging rate: a whole number, kept in a
    /// byte (issue 32: a fleet holds millions of registers), read from the float it was saved
    /// as before.
    #[serde(deserialize_with = "whole_rate")]
    rate: u8,
    /// Slots holding an attempt (or an `initial` one assumed), the newest ones: the others
    /// are empty, which a clear bit alone cannot tell from a failed attempt. A register saved
    /// before this was kept reads as full.
    #[serde(default = "full")]
    filled: u8,
}

fn full() -> u8 {
    SLOTS as u8
}

/// The averaging rate as saved: a whole number, or the float it was saved as before.
fn whole_rate<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u8, D::Error> {
    let rate = f64::deserialize(d)?;
    Ok(rate.clamp(0.0, f64::from(AVG_RATE)).round() as u8)
}

impl WindowRegister {
    /// A register for a target seen for the first time: `initial` good attempts assumed, so
    /// that a target becomes healthy after `threshold - initial` good attempts.
    pub fn new(initial: u8) -> Self {
        let mut r = WindowRegister::default();
        for _ in 0..initial.min(64) {
            r.shift();
            r.good |= 1;
        }
        r
    }

    /// A register restored from storage, `filled` of its slots holding attempts (`None`, as
    /// stored before that was: all of them). The averaging rate resumes from the number of
    /// good attempts kept (at most the averaging rate).
    pub fn from_parts(
        connected: u64,
        sent: u64,
        received: u64,
        good: u64,
        avg_rtt_ms: f64,
        filled: Option<u8>,
    ) -> Self {
        let rate = good.count_ones().min(u32::from(AVG_RATE)) as u8;
        let filled = filled.unwrap_or_else(full).min(full());
        WindowRegister { connected, sent, received, good, avg_rtt_ms: avg_rtt_ms as f32, rate, filled }
    }

    /// Slots holding an attempt, newest first (at most 64).
    pub fn filled(&self) -> u8 {
        self.filled
    }

    fn shift(&mut self) {
        self.filled = self.filled.saturating_add(1).min(full());
        self.connected <<= 1;
        self.sent <<= 1;
        self.received <<= 1;
        self.good <<= 1;
    }

    /// Shifts in one attempt.
    pub fn push(&mut self, a: &Attempt) {
        self.shift();
        let s = a.stages;
        self.connected |= u64::from(s.contains(Stages::CONNECTED));
        self.sent |= u64::from(s.contains(Stages::SENT));
        self.received |= u64::from(s.contains(Stages::RECEIVED));
        if a.good() {
            self.good |= 1;
            if self.rate < AVG_RATE {
                self.rate += 1;
            }
            let avg = f64::from(self.avg_rtt_ms);
            self.avg_rtt_ms = (avg + (f64::from(a.rtt_us) / 1000.0 - avg) / f64::from(self.rate)) as f32;
        }
    }

    /// Good attempts among the newest `window` slots.
    pub fn good_in(&self, window: u8) -> u32 {
        (self.good & mask(window)).count_ones()
    }

    /// Healthy iff the good attempts among the last `window` are at least `threshold`.
    pub fn healthy(&self, window: u8, threshold: u8) -> bool {
        self.good_in(window) >= u32::from(threshold)
    }

    /// A text rendering like `varnishadm backend.list -p`: oldest to newest, one strip per stage.
    /// `ipv6` picks the digit of the connected strip.
    pub fn render(&self, window: u8, threshold: u8, ipv6: bool) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "Current states  good: {:2} threshold: {:2} window: {:2}",
            self.good_in(window),
            threshold,
            window
        );
        let _ = writeln!(out, "Average response time of good attempts: {:.3} ms", self.avg_rtt_ms);
        let _ = writeln!(out, "Oldest {} Newest", "=".repeat(50));
        let strips = [
            (self.connected, if ipv6 { '6' } else { '4' }, "Connected"),
            (self.sent, 'X', "Sent"),
            (self.received, 'R', "Received"),
            (self.good, 'H', "Good"),
        ];
        for (bits, c, label) in strips {
            let _ = writeln!(out, "{} {label}", strip(bits, c, self.filled));
        }
        out
    }
}

/// Marks an empty slot of a strip (no attempt yet), as `-` marks a failed stage.
pub const EMPTY: char = '.';

/// The 64 slots of `bits`, oldest first: `c` for set, `-` for clear, [`EMPTY`] for the slots
/// beyond the newest `filled`, which hold no attempt.
pub fn strip(bits: u64, c: char, filled: u8) -> String {
    (0..SLOTS)
        .rev()
        .map(|i| match bits >> i & 1 {
            _ if i >= u32::from(filled) => EMPTY,
            1 => c,
            _ => '-',
        })
        .collect()
}

fn mask(window: u8) -> u64 {
    match u32::from(window) {
        0 => 0,
        w if w >= SLOTS => u64::MAX,
        w => (1u64 << w) - 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::ErrorCode;

    fn good(rtt_us: u32) -> Attempt {
        Attempt { stages: Stages::ALL, rtt_us, error: None }
    }
    fn bad() -> Attempt {
        Attempt { stages: Stages::CONNECTED.with(Stages::SENT), rtt_us: 0, error: Some(ErrorCode::Timeout) }
    }

    /// Varnish: `.window = 60; .threshold = 45; .initial = 43` is healthy after two good probes.
    #[test]
    fn window_60_threshold_45_initial_43_healthy_after_two_good_probes() {
        let mut r = WindowRegister::new(43);
        assert!(!r.healthy(60, 45));
        r.push(&good(500));
        assert!(!r.healthy(60, 45), "one good probe is not enough");
        r.push(&good(500));
        assert!(r.healthy(60, 45));
        assert_eq!(r.good_in(60), 45);
    }

    /// Default `.initial` (threshold − 1) keeps a new target unhealthy until its first good probe.
    #[test]
    fn default_initial_needs_one_good_probe() {
        let mut r = WindowRegister::new(2);
        assert!(!r.healthy(8, 3));
        r.push(&good(1000));
        assert!(r.healthy(8, 3));
    }

    #[test]
    fn window_healthy_iff_good_in_window_reaches_threshold() {
        let mut r = WindowRegister::new(0);
        for _ in 0..5 {
            r.push(&good(1000));
        }
        assert!(r.healthy(5, 4));
        r.push(&bad());
        assert!(r.healthy(5, 4), "4 of the last 5 good");
        r.push(&bad());
        assert!(!r.healthy(5, 4), "3 of the last 5 good");
        // Attempts older than the window do not count.
        for _ in 0..5 {
            r.push(&bad());
        }
        assert_eq!(r.good_in(5), 0);
        assert_eq!(r.good_in(64), 5);
    }

    #[test]
    fn register_keeps_64_attempts() {
        let mut r = WindowRegister::new(0);
        for _ in 0..100 {
            r.push(&good(1000));
        }
        assert_eq!(r.good_in(64), 64);
        assert_eq!(r.good.count_ones(), 64);
    }

    #[test]
    fn render_shows_strips_oldest_to_newest() {
        let mut r = WindowRegister::new(0);
        r.push(&good(793));
        r.push(&bad());
        let text = r.render(5, 4, false);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "Current states  good:  1 threshold:  4 window:  5");
        assert_eq!(lines[1], "Average response time of good attempts: 0.793 ms");
        assert!(lines[2].starts_with("Oldest ====") && lines[2].ends_with(" Newest"));
        // The 62 slots before the first attempt are empty, not failed.
        assert_eq!(lines[3], format!("{}44 Connected", ".".repeat(62)));
        assert_eq!(lines[4], format!("{}XX Sent", ".".repeat(62)));
        assert_eq!(lines[5], format!("{}R- Received", ".".repeat(62)));
        assert_eq!(lines[6], format!("{}H- Good", ".".repeat(62)));
    }

    #[test]
    fn empty_slots_differ_from_failed_attempts_until_the_register_is_full() {
        // Two assumed good attempts, then a refusal (nothing connected).
        let mut r = WindowRegister::new(2);
        r.push(&Attempt { stages: Stages::empty(), rtt_us: 0, error: Some(ErrorCode::Refused) });
        assert_eq!(r.filled(), 3);
        assert_eq!(strip(r.good, 'H', r.filled()), format!("{}HH-", ".".repeat(61)));
        assert_eq!(strip(r.connected, '4', r.filled()), format!("{}---", ".".repeat(61)));
        for _ in 0..100 {
            r.push(&good(1000));
        }
        assert_eq!(r.filled(), 64);
        assert_eq!(strip(r.good, 'H', r.filled()), "H".repeat(64));
        // Registers stored before the count was kept read as full, as they were shown.
        let old = WindowRegister::from_parts(0, 0, 0, 1, 1.0, None);
        assert_eq!(strip(old.good, 'H', old.filled()), format!("{}H", "-".repeat(63)));
        let saved = serde_json::json!({"connected": 0, "sent": 0, "received": 0, "good": 1, "avg_rtt_ms": 1.0, "rate": 1.0});
        assert_eq!(serde_json::from_value::<WindowRegister>(saved).unwrap().filled(), 64);
        // The averaging rate, saved as a float before it was kept in a byte, reads either way.
        let mut warmed = WindowRegister::new(0);
        warmed.push(&good(1000));
        let as_float = serde_json::json!({"connected": 1, "sent": 1, "received": 1, "good": 1,
            "avg_rtt_ms": 1.0, "rate": 1.0, "filled": 1});
        assert_eq!(serde_json::from_value::<WindowRegister>(as_float).unwrap(), warmed);
        let again = serde_json::to_value(warmed).unwrap();
        assert_eq!(serde_json::from_value::<WindowRegister>(again).unwrap(), warmed);
        // An average saved in double precision reads as the nearest float.
        let precise = serde_json::json!({"connected": 1, "sent": 1, "received": 1, "good": 1,
            "avg_rtt_ms": 12.345678901, "rate": 1, "filled": 1});
        assert_eq!(serde_json::from_value::<WindowRegister>(precise).unwrap().avg_rtt_ms, 12.345679);
    }

    #[test]
    fn average_rtt_of_good_attempts_only() {
        let mut r = WindowRegister::new(0);
        r.push(&good(2000));
        r.push(&bad());
        assert_eq!(r.avg_rtt_ms, 2.0);
        r.push(&good(4000));
        assert_eq!(r.avg_rtt_ms, 3.0, "mean of the first good attempts");
    }
}
