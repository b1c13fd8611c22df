//! What the probers have seen of each mirror (SPEC §6): each prober's window register over
//! its endpoint attempts, each region's status from its probers' opinions, and the verdict,
//! recomputed on every region update. The region map and the counters are saved, so that a
//! restart does not empty the doors while the probers look again.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};
use vantage_core::Timestamp;
use vantage_core::check::Check;
use vantage_core::mirror::{MirrorVerdict, RegionObservation, RegionStatus, region_status, verdict};
use vantage_core::result::ProbeResult;

use crate::config::Config;
use crate::identity::Caller;
use crate::observe::Latest;

/// An opinion older than this many check intervals no longer counts (nor less than
/// [`MIN_FRESH_S`]): its prober went quiet, and its region should not look healthy on old news.
const FRESH_INTERVALS: i64 = 3;
/// Shortest freshness window, s.
const MIN_FRESH_S: i64 = 30;

/// One mirror's derived state.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct MirrorState {
    /// Region code → latest status.
    pub regions: BTreeMap<String, RegionObservation>,
    /// The verdict from the regions and the manual block.
    pub verdict: MirrorVerdict,
    /// Since when the verdict holds.
    pub verdict_since: Option<Timestamp>,
    /// The last region update.
    pub last_check: Option<Timestamp>,
    /// Region updates that were failing, since the mirror was registered.
    pub blocked_count: u64,
    /// Region updates, since the mirror was registered.
    pub total_checked: u64,
    /// The last freshness check, for mirrors that have one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub freshness: Option<FreshnessState>,
}

/// Where a mirror's freshness stands. Unknown freshness (never checked, or every check failed
/// to read a time) is not stale; a stale mirror returns to doors only after a fresh check.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
pub struct FreshnessState {
    /// The last check.
    pub checked_at: Option<Timestamp>,
    /// Seconds behind the reference at the last check that read both times.
    pub lag_s: Option<i64>,
    /// Further behind than `max_lag_s`: out of door rotation.
    pub stale: bool,
    /// Why the last check read no lag (the mirror's or the reference's file).
    pub error: Option<String>,
}

/// What one freshness check read: the time of each trace file, or why not.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FreshnessReading {
    /// The mirror's trace time.
    pub mirror: Result<Timestamp, String>,
    /// The reference's trace time.
    pub reference: Result<Timestamp, String>,
}

impl MirrorState {
    /// Regions whose status is not `ok` (reference 004's `regions_failing`): `error` too,
    /// although the verdict does not count it, since a region that cannot measure is one an
    /// operator should look at.
    pub fn regions_failing(&self) -> usize {
        self.regions.values().filter(|r| r.status != RegionStatus::Ok).count()
    }
}

/// A verdict that changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerdictChange {
    pub host: String,
    /// Before.
    pub from: MirrorVerdict,
    /// After.
    pub to: MirrorVerdict,
    /// Whether an operator's block decides it.
    pub manual: bool,
}

/// Every mirror's state and every prober's latest endpoint result.
#[derive(Debug, Default, Clone)]
pub struct Book {
    states: BTreeMap<String, MirrorState>,
    /// Latest result by mirror, then by prober: a region update reads one mirror's.
    latest: HashMap<String, HashMap<Caller, Latest>>,
}

impl Book {
    /// A book restored from its saved JSON (unreadable: empty, and the probers refill it).
    pub fn restore(saved: Option<&str>) -> Book {
        let states = saved.and_then(|s| serde_json::from_str(s).ok()).unwrap_or_default();
        Book { states, latest: HashMap::new() }
    }

    /// The saved form.
    pub fn save(&self) -> String {
        serde_json::to_string(&self.states).unwrap_or_default()
    }

    /// One mirror's state.
    pub fn state(&self, host: &str) -> Option<&MirrorState> {
        self.states.get(host)
    }

    /// Every mirror's state.
    pub fn states(&self) -> &BTreeMap<String, MirrorState> {
        &self.states
    }

    /// A prober's latest result for a mirror.
    pub fn latest(&self, host: &str, caller: Caller) -> Option<&Latest> {
        self.latest.get(host)?.get(&caller)
    }

    /// Every prober's latest result for `host`.
    pub fn latest_of<'a>(&'a self, host: &'a str) -> impl Iterator<Item = (Caller, &'a Latest)> + 'a {
        self.latest.get(host).into_iter().flatten().map(|(c, l)| (*c, l))
    }

    /// A result of `caller` for `host` arrived: its register advances, the caller's region is
    /// recomputed, then the verdict. Says whether a region's status changed, and how the
    /// verdict did.
    pub fn record(
        &mut self,
        c: &Config,
        host: &str,
        caller: Caller,
        r: &ProbeResult,
        now: Timestamp,
    ) -> (bool, Option<VerdictChange>) {
        if !c.mirrors.mirrors.contains_key(host) {
            // Deregistered while the report was on its way.
            return (false, None);
        }
        let check = check_of(c, host);
        let per = self.latest.entry(host.to_owned()).or_default();
        let latest = Latest::after(r, now, per.get(&caller), check.initial());
        per.insert(caller, latest);
        self.states.entry(host.to_owned()).or_default();
        let Some(region) = c.prober_region(caller) else { return (false, None) };
        let changed = self.update_region(c, host, region, now, true);
        (changed, self.decide(c, host, now))
    }

    /// Regions whose opinions went stale become `error`; says whether any did, and returns
    /// the verdicts that changed.
    pub fn sweep(&mut self, c: &Config, now: Timestamp) -> (bool, Vec<VerdictChange>) {
        let hosts: Vec<String> = self.states.keys().cloned().collect();
        let (mut any, mut out) = (false, Vec::new());
        for host in hosts {
            let regions: Vec<String> = self.states[&host].regions.keys().cloned().collect();
            for region in regions {
                any |= self.update_region(c, &host, &region, now, false);
            }
            out.extend(self.decide(c, &host, now));
        }
        (any, out)
    }

    /// A freshness check of `host` read `r`; returns whether the mirror is stale now and
    /// whether that changed.
    pub fn record_freshness(
        &mut self,
        c: &Config,
        host: &str,
        r: FreshnessReading,
        now: Timestamp,
    ) -> Option<(bool, bool)> {
        let max_lag_s = i64::from(c.mirrors.mirrors.get(host)?.freshness.as_ref()?.max_lag_s);
        let state = self.states.entry(host.to_owned()).or_default();
        let f = state.freshness.get_or_insert_with(FreshnessState::default);
        let was = f.stale;
        f.checked_at = Some(now);
        match (r.mirror, r.reference) {
            (Ok(m), Ok(reference)) => {
                let lag_s = (reference.millis_since(m) / 1000).max(0);
                f.lag_s = Some(lag_s);
                f.stale = lag_s > max_lag_s;
                f.error = None;
            }
            (Err(e), _) => f.error = Some(format!("mirror: {e}")),
            (_, Err(e)) => f.error = Some(format!("reference: {e}")),
        }
        Some((f.stale, f.stale != was))
    }

    /// Mirrors that left the registry go; mirrors that joined start `unknown`; every verdict is
    /// recomputed (a manual block or the threshold may have changed). A mirror whose freshness
    /// check went drops its freshness state.
    pub fn follow(&mut self, c: &Config, now: Timestamp) -> Vec<VerdictChange> {
        self.states.retain(|h, _| c.mirrors.mirrors.contains_key(h));
        for (h, s) in &mut self.states {
            if c.mirrors.mirrors.get(h).is_some_and(|m| m.freshness.is_none()) {
                s.freshness = None;
            }
        }
        self.latest.retain(|h, _| c.mirrors.mirrors.contains_key(h));
        let hosts: Vec<String> = c.mirrors.mirrors.keys().cloned().collect();
        hosts.into_iter().filter_map(|h| self.decide(c, &h, now)).collect()
    }

    /// Drops every endpoint result of `caller` (a disabled or deleted prober).
    pub fn forget(&mut self, caller: Caller) {
        for per in self.latest.values_mut() {
            per.remove(&caller);
        }
    }

    /// Recomputes `region` of `host` from the fresh opinions of its probers; true when its
    /// status changed. A sweep leaves a region alone while it still has fresh opinions, and
    /// counts nothing.
    fn update_region(&mut self, c: &Config, host: &str, region: &str, now: Timestamp, counted: bool) -> bool {
        let check = check_of(c, host);
        let fresh_ms = (i64::from(check.interval_s()) * FRESH_INTERVALS).max(MIN_FRESH_S) * 1000;
        let opinions: Vec<(RegionStatus, Option<u32>)> = self
            .latest_of(host)
            .filter(|(caller, l)| {
                now.millis_since(l.at) <= fresh_ms && c.prober_region(*caller) == Some(region)
            })
            .map(|(_, l)| {
                let healthy = l.register.healthy(check.window(), check.threshold());
                (RegionStatus::opinion(healthy, l.error), l.rtt_us.map(|us| us.div_ceil(1000)))
            })
            .collect();
        let Some(state) = self.states.get_mut(host) else { return false };
        if !counted && !opinions.is_empty() {
            return false;
        }
        // A region measured within the freshness window keeps its status even without an
        // opinion in memory: after a restart the saved regions serve until the probers report.
        if !counted && state.regions.get(region).is_some_and(|o| now.millis_since(o.at) <= fresh_ms) {
            return false;
        }
        let (status, latency) = region_status(&opinions);
        let before = state.regions.get(region).map(|o| o.status);
        if !counted && before == Some(status) {
            return false;
        }
        let at = if counted { now } else { state.regions.get(region).map_or(now, |o| o.at) };
        state.regions.insert(region.to_owned(), RegionObservation { status, latency, at });
        if counted {
            state.last_check = Some(now);
            state.total_checked += 1;
            state.blocked_count += u64::from(status.is_failing());
        }
        before != Some(status)
    }

    fn decide(&mut self, c: &Config, host: &str, now: Timestamp) -> Option<VerdictChange> {
        let mirror = c.mirrors.mirrors.get(host)?;
        let state = self.states.entry(host.to_owned()).or_default();
        let to = verdict(mirror.manual_block, &state.regions, c.mirror_settings.threshold_pct());
        let from = state.verdict;
        if state.verdict_since.is_some() && from == to {
            return None;
        }
        state.verdict = to;
        state.verdict_since = Some(now);
        (from != to).then(|| VerdictChange { host: host.to_owned(), from, to, manual: mirror.manual_block })
    }
}

/// The check a mirror is probed with: the check it names, else the one named `default`, else
/// (no such check, or its check went away) [`super::builtin_check`].
pub fn check_of(c: &Config, host: &str) -> Check {
    let name = c.mirrors.mirrors.get(host).and_then(|m| m.check.as_deref()).unwrap_or("default");
    c.check(name).cloned().unwrap_or_else(super::builtin_check)
}
