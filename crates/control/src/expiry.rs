//! When latest results fall due for expiry, indexed by time (issue 32): each target is filed
//! under the minute its oldest result turns stale and looked at then, so that expiry walks
//! what is due instead of every result of the fleet once a minute. A target looked at with
//! results still fresh is filed again under its new oldest; one gone meanwhile is dropped.

use std::collections::BTreeMap;

use vantage_core::Timestamp;
use vantage_core::evaluate::FastMap;

use crate::target::TargetKey;

const MINUTE_MS: i64 = 60_000;

/// Targets by the minute their oldest result falls due, each filed once.
#[derive(Debug, Default)]
pub(crate) struct Expiry {
    /// Minute → the targets filed under it (some since filed again elsewhere: skipped).
    due: BTreeMap<i64, Vec<TargetKey>>,
    /// Each filed target's minute: the one entry of `due` that counts.
    filed: FastMap<TargetKey, i64>,
}

impl Expiry {
    /// Files `key`, whose oldest result falls due at `due` (in the minute after: never early).
    pub(crate) fn file(&mut self, key: TargetKey, due: Timestamp) {
        let minute = due.millis().div_euclid(MINUTE_MS) + 1;
        if self.filed.insert(key, minute) != Some(minute) {
            self.due.entry(minute).or_default().push(key);
        }
    }

    /// Whether `key` is filed (its results are looked at when due).
    #[cfg(test)]
    pub(crate) fn is_filed(&self, key: &TargetKey) -> bool {
        self.filed.contains_key(key)
    }

    /// Takes out up to `most` targets due by `now`, the earliest first; the rest of a minute
    /// stays for the next call, so one sweep's work is bounded when a whole fleet fell due
    /// together (a start, or the first hour).
    pub(crate) fn take_due(&mut self, now: Timestamp, most: usize) -> Vec<TargetKey> {
        let now_minute = now.millis().div_euclid(MINUTE_MS);
        let mut out = Vec::new();
        while out.len() < most {
            let Some(mut entry) = self.due.first_entry() else { break };
            let minute = *entry.key();
            if minute > now_minute {
                break;
            }
            let keys = entry.get_mut();
            while out.len() < most
                && let Some(key) = keys.pop()
            {
                if self.filed.get(&key) == Some(&minute) {
                    self.filed.remove(&key);
                    out.push(key);
                }
            }
            if keys.is_empty() {
                entry.remove();
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use vantage_core::ids::NodeId;

    use super::*;

    fn key(n: i64) -> TargetKey {
        TargetKey { node: NodeId(n), ip: "192.0.2.1".parse().unwrap(), port: 80 }
    }

    #[test]
    fn targets_come_due_once_never_early_and_a_bounded_number_at_a_time() {
        let t0 = Timestamp::from_secs(1_800_000_000);
        let mut e = Expiry::default();
        for n in 0..5 {
            e.file(key(n), t0);
        }
        // Filed again later: counts there only.
        e.file(key(0), t0.plus_secs(600));
        e.file(key(1), t0);
        assert!(e.take_due(t0, 10).is_empty(), "not in the minute it falls due");
        let first = e.take_due(t0.plus_secs(60), 3);
        assert_eq!(first.len(), 3);
        let rest = e.take_due(t0.plus_secs(60), 10);
        let mut all: Vec<i64> = first.iter().chain(&rest).map(|k| k.node.0).collect();
        all.sort();
        assert_eq!(all, vec![1, 2, 3, 4], "each once; the one filed again waits");
        assert!(!e.is_filed(&key(1)) && e.is_filed(&key(0)));
        assert!(e.take_due(t0.plus_secs(600), 10).is_empty());
        assert_eq!(e.take_due(t0.plus_secs(660), 10), vec![key(0)]);
        assert!(e.take_due(t0.plus_secs(99_999), 10).is_empty());
    }
}
