//! Cross-region confirmation: when one prober's report shows a target change — answering to
//! failing, or back — the other probers that probe it are asked to probe it at once instead
//! of at their next round, so a strict majority can form within moments rather than within
//! an interval. At most one confirmation per target per interval: a flapping target cannot
//! turn the fleet's probes into a flood.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use vantage_core::Timestamp;

use crate::identity::Caller;
use crate::target::TargetKey;

/// Confirmations asked and not yet collected.
#[derive(Debug, Default)]
pub struct Confirmations {
    /// When a confirmation of each target was last asked.
    asked: HashMap<TargetKey, Timestamp>,
    /// Per prober, the keys (as that prober was given them) to probe at once.
    pending: BTreeMap<Caller, BTreeSet<TargetKey>>,
}

impl Confirmations {
    /// `key` changed in a report: unless it was confirmed within `interval_s`, each of
    /// `others` (a prober and the key it was given the target under) is asked to probe it.
    /// Returns whether anyone was asked.
    pub fn ask(
        &mut self,
        key: TargetKey,
        others: impl IntoIterator<Item = (Caller, TargetKey)>,
        interval_s: u32,
        now: Timestamp,
    ) -> bool {
        let recent = |t: &Timestamp| *t <= now && now.millis_since(*t) < i64::from(interval_s) * 1000;
        if self.asked.get(&key).is_some_and(recent) {
            return false;
        }
        let mut any = false;
        for (caller, given) in others {
            any |= self.pending.entry(caller).or_default().insert(given);
        }
        if any {
            self.asked.insert(key, now);
        }
        any
    }

    /// What `caller` is to probe at once; collected once.
    pub fn take(&mut self, caller: Caller) -> Vec<TargetKey> {
        self.pending.remove(&caller).map(|s| s.into_iter().collect()).unwrap_or_default()
    }

    /// A prober that stops counting loses what waited for it.
    pub fn forget(&mut self, caller: Caller) {
        self.pending.remove(&caller);
    }

    /// Drops the memory of confirmations older than `interval_s`.
    pub fn expire(&mut self, interval_s: u32, now: Timestamp) {
        self.asked.retain(|_, t| t.within_secs_of(now, u64::from(interval_s)));
    }
}
