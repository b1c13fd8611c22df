//! Probes per second each target receives from the whole fleet, measured from the reports
//! (the budget plans it; this shows what really arrives), over windows of a minute.

use std::net::{IpAddr, SocketAddr};

use vantage_core::Timestamp;
use vantage_core::evaluate::FastMap;

/// Length of a measuring window.
const WINDOW_MS: i64 = 60_000;

#[derive(Debug, Clone, Copy)]
struct Window {
    start: Timestamp,
    attempts: u64,
    /// Attempts per second over the last full window.
    rate: f64,
}

/// Attempts reported per `ip:port`.
#[derive(Debug, Default)]
pub struct ProbeRates {
    targets: FastMap<(IpAddr, u16), Window>,
}

impl ProbeRates {
    /// `attempts` attempts on `ip:port` were reported at `now`.
    pub fn record(&mut self, ip: IpAddr, port: u16, attempts: u32, now: Timestamp) {
        let w = self.targets.entry((ip, port)).or_insert(Window { start: now, attempts: 0, rate: 0.0 });
        roll(w, now);
        w.attempts += u64::from(attempts);
    }

    /// Reads `ip:port`'s window, returning a figure of it only so that the read is made (see
    /// `Seen::touch`).
    pub fn touch(&self, ip: IpAddr, port: u16) -> u64 {
        self.targets.get(&(ip, port)).map_or(0, |w| w.attempts)
    }

    /// Every target's rate at `now`, attempts per second over the last full minute.
    pub fn rates(&self, now: Timestamp) -> Vec<(SocketAddr, f64)> {
        let mut out: Vec<(SocketAddr, f64)> = self
            .targets
            .iter()
            .filter(|(_, w)| now.millis_since(w.start) < 2 * WINDOW_MS)
            .map(|(&(ip, port), w)| {
                let mut w = *w;
                roll(&mut w, now);
                (SocketAddr::new(ip, port), w.rate)
            })
            .collect();
        out.sort_by_key(|(a, _)| *a);
        out
    }

    /// Forgets targets silent for a whole window.
    pub fn prune(&mut self, now: Timestamp) {
        self.targets.retain(|_, w| now.millis_since(w.start) < 2 * WINDOW_MS);
    }
}

/// Closes the window once a minute has passed; a window left long ago counts as silent.
fn roll(w: &mut Window, now: Timestamp) {
    let elapsed = now.millis_since(w.start);
    if elapsed >= 2 * WINDOW_MS {
        *w = Window { start: now, attempts: 0, rate: 0.0 };
    } else if elapsed >= WINDOW_MS {
        w.rate = w.attempts as f64 * 1000.0 / elapsed as f64;
        *w = Window { start: now, attempts: 0, rate: w.rate };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attempts_per_second_over_a_minute() {
        let t0 = Timestamp::from_secs(1_800_000_000);
        let ip: IpAddr = "192.0.2.1".parse().unwrap();
        let mut r = ProbeRates::default();
        // Three probers × 3 attempts every 10 s: 0.9/s.
        for s in (0..60).step_by(10) {
            for _ in 0..3 {
                r.record(ip, 80, 3, t0.plus_secs(s));
            }
        }
        assert_eq!(r.rates(t0.plus_secs(59))[0].1, 0.0, "the first minute is not over");
        r.record(ip, 80, 0, t0.plus_secs(60));
        let rates = r.rates(t0.plus_secs(60));
        assert_eq!(rates, [(SocketAddr::new(ip, 80), 0.9)]);
        assert!(r.rates(t0.plus_secs(200)).is_empty(), "silent targets read nothing");
        r.prune(t0.plus_secs(200));
        assert!(r.targets.is_empty(), "and are forgotten");
    }
}
