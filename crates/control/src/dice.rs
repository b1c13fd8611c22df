//! A small deterministic generator (xorshift) for the tests that drive the core through
//! random steps, so that a failure replays from its seed, and the steps they share.

use crate::config::{Object, ProberRecord};

/// The generator's state (never 0).
pub(crate) struct Dice(pub(crate) u64);

impl Dice {
    /// A number in `0..n`.
    pub(crate) fn roll(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }

    /// A change to one of the first `probers` probers of
    /// [`large_fleet`](crate::fixtures::large_fleet): deleted one time in three, else put
    /// (back), disabled one time in three. Its id, and the change's puts and deletes.
    pub(crate) fn prober_change(&mut self, probers: u64) -> (i64, Vec<(i64, Object)>, Vec<i64>) {
        let k = self.roll(probers);
        let id = 101 + k as i64;
        if self.roll(3) == 0 {
            return (id, Vec::new(), vec![id]);
        }
        let rec = ProberRecord {
            name: format!("p{k}"),
            region: vantage_core::ids::RegionId(1),
            enabled: self.roll(3) > 0,
            cert_sha256: Some(format!("fp-{k}")),
            cert_issued_at: None,
        };
        (id, vec![(id, Object::Prober(rec))], Vec::new())
    }
}
