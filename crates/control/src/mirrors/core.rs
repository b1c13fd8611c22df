//! The mirror part of the control core: the book of what probers saw, the doors snapshot, the
//! reload status and the check run, kept consistent with each other. [`crate::Control`] owns
//! one as its mirrors' subject book (`super::findings`).

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::Arc;

use vantage_core::Timestamp;
use vantage_core::result::ProbeResult;

use super::book::{Book, FreshnessReading, VerdictChange};
use super::doors::{DoorMirror, Doors};
use super::latency::LatencyOrders;
use super::registry::Changes;
use super::{CHECK_RUN_EVERY_S, CheckRefused, CheckRun, LoadError, Registry, ReloadStatus};
use crate::config::Config;
use crate::identity::Caller;

/// The derived state is saved at most this often while only counters change.
const SAVED_EVERY_MS: i64 = 10_000;

/// Mirrors, doors, reloads and check runs.
#[derive(Debug, Default, Clone)]
pub struct Mirrors {
    book: Book,
    doors: Arc<Doors>,
    reload: ReloadStatus,
    check_run: Option<CheckRun>,
    save: crate::book::Saving,
    /// When each mirror with a freshness check is next checked.
    freshness_due: BTreeMap<String, Timestamp>,
    /// Hosts an open maintenance window takes out of rotation.
    maintenance: BTreeSet<String>,
    /// The mirror order of each region of the tenants that order by latency.
    latency: LatencyOrders,
}

/// A freshness check to carry out: fetch both trace files, read their times.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FreshnessCheck {
    pub host: String,
    /// The mirror's trace file.
    pub url: String,
    /// Where to connect for it instead of resolving the host.
    pub address: Option<SocketAddr>,
    /// The reference's trace file.
    pub reference: String,
    /// Longest a fetch may take, seconds.
    pub timeout_s: u32,
}

/// Longest a freshness fetch may take, seconds (less when the interval is shorter).
const FRESHNESS_TIMEOUT_S: u32 = 10;

impl Mirrors {
    /// From the saved derived state.
    pub fn new(saved: Option<&str>) -> Mirrors {
        Mirrors { book: Book::restore(saved), ..Mirrors::default() }
    }

    /// What probers saw.
    pub fn book(&self) -> &Book {
        &self.book
    }

    /// What doors choose from.
    pub fn doors(&self) -> Arc<Doors> {
        self.doors.clone()
    }

    /// How the reloads went.
    pub fn reload_status(&self) -> &ReloadStatus {
        &self.reload
    }

    /// The last check run.
    pub fn check_run(&self) -> Option<&CheckRun> {
        self.check_run.as_ref()
    }

    /// Validates the registry files against `c`; the status records the outcome either way.
    pub fn reload(
        &mut self,
        c: &Config,
        files: &[(String, String)],
        now: Timestamp,
    ) -> Result<(Registry, Changes), LoadError> {
        self.reload.at = Some(now);
        self.reload.skipped.clear();
        match Registry::load(files, c) {
            Ok(r) => {
                let changes = r.changes(&c.mirrors);
                self.reload.loaded_at = Some(now);
                self.reload.error = None;
                Ok((r, changes))
            }
            Err(e) => {
                self.reload.error = Some(e.clone());
                self.reload.failures += 1;
                Err(e)
            }
        }
    }

    /// After the configuration or the registry changed: states follow the registry, verdicts
    /// are recomputed, the doors rebuilt; mirrors that gained a freshness check are due now.
    pub fn follow(&mut self, c: &Config, now: Timestamp) -> Vec<VerdictChange> {
        if self.reload.loaded_at.is_none() {
            // No registry has loaded yet (it failed at start): the saved states wait for one
            // rather than being dropped as belonging to no mirror.
            return Vec::new();
        }
        let changes = self.book.follow(c, now);
        self.save.urgent |= !changes.is_empty();
        let with: BTreeSet<&String> =
            c.mirrors.mirrors.iter().filter(|(_, m)| m.freshness.is_some()).map(|(h, _)| h).collect();
        self.freshness_due.retain(|h, _| with.contains(h));
        for h in with {
            self.freshness_due.entry(h.clone()).or_insert(now);
        }
        self.save.dirty = true;
        self.latency.update(c, &self.book, now);
        self.rebuild(c);
        changes
    }

    /// The registry's directory could not be read whole: recorded like a refused reload,
    /// with every file left out (`skipped`, never empty; the first is the error).
    pub fn unreadable(&mut self, skipped: Vec<LoadError>, now: Timestamp) {
        self.reload.at = Some(now);
        self.reload.error = skipped.first().cloned();
        self.reload.skipped = skipped;
        self.reload.failures += 1;
    }

    /// A result for a mirror arrived.
    pub fn record(
        &mut self,
        c: &Config,
        host: &str,
        caller: Caller,
        r: &ProbeResult,
        now: Timestamp,
    ) -> Option<VerdictChange> {
        let (status_changed, change) = self.book.record(c, host, caller, r, now);
        self.save.dirty = true;
        self.save.urgent |= change.is_some();
        if status_changed || change.is_some() {
            self.rebuild(c);
        }
        change
    }

    /// When the next freshness check is due.
    pub fn next_freshness(&self) -> Option<Timestamp> {
        self.freshness_due.values().min().copied()
    }

    /// The freshness checks due at `now`, each scheduled again one interval later.
    pub fn due_freshness(&mut self, c: &Config, now: Timestamp) -> Vec<FreshnessCheck> {
        let mut out = Vec::new();
        for (host, due) in &mut self.freshness_due {
            let Some(m) = c.mirrors.mirrors.get(host) else { continue };
            let Some(f) = m.freshness.as_ref().filter(|_| *due <= now) else { continue };
            *due = now.plus_secs(u64::from(f.interval_s));
            // Where the mirror is probed: its trace file lives where its files do.
            let check = super::book::check_of(c, host);
            let origin = match (m.address, &m.base_url) {
                (Some(a), None) => {
                    format!(
                        "{}://{host}:{}",
                        super::probe_scheme(m, &check, c.mirror_settings.scheme()),
                        a.port()
                    )
                }
                _ => super::probe_origin(m, &check, c.mirror_settings.scheme()),
            };
            out.push(FreshnessCheck {
                host: host.clone(),
                url: format!("{origin}{}", f.path),
                address: m.address,
                reference: f.reference.clone(),
                timeout_s: FRESHNESS_TIMEOUT_S.min(f.interval_s),
            });
        }
        out
    }

    /// A freshness check read `r`; returns the host's staleness when it changed.
    pub fn record_freshness(
        &mut self,
        c: &Config,
        host: &str,
        r: FreshnessReading,
        now: Timestamp,
    ) -> Option<bool> {
        let (stale, changed) = self.book.record_freshness(c, host, r, now)?;
        self.save.dirty = true;
        if changed {
            self.rebuild(c);
        }
        changed.then_some(stale)
    }

    /// Stale regions become `error`.
    pub fn sweep(&mut self, c: &Config, now: Timestamp) -> Vec<VerdictChange> {
        let (any, changes) = self.book.sweep(c, now);
        let reordered = self.latency.update(c, &self.book, now);
        if any || reordered || !changes.is_empty() {
            self.save.dirty = true;
            self.save.urgent |= !changes.is_empty();
            self.rebuild(c);
        }
        changes
    }

    /// The hosts taken out of rotation by open maintenance windows.
    pub fn in_maintenance(&self) -> &BTreeSet<String> {
        &self.maintenance
    }

    /// Open maintenance windows now take `hosts` out of rotation.
    pub fn set_maintenance(&mut self, c: &Config, hosts: BTreeSet<String>) {
        self.maintenance = hosts;
        self.rebuild(c);
    }

    /// A prober or probing node stopped counting.
    pub fn forget(&mut self, caller: Caller) {
        self.book.forget(caller);
    }

    /// An operator asks for a check run of `regions` (`None`: every region). A request naming
    /// an unknown region is refused for that before the rate limit is looked at.
    pub fn start_check(
        &mut self,
        c: &Config,
        regions: Option<Vec<String>>,
        now: Timestamp,
    ) -> Result<&CheckRun, CheckRefused> {
        let regions = match regions {
            None => None,
            Some(list) => {
                let mut set = BTreeSet::new();
                for (i, r) in list.into_iter().enumerate() {
                    if !c.has_region(&r) {
                        return Err(CheckRefused::Invalid(vantage_core::Error::invalid(
                            format!("regions[{i}]"),
                            format!("no region with code {r:?}"),
                        )));
                    }
                    set.insert(r);
                }
                Some(set)
            }
        };
        if let Some(last) = &self.check_run {
            let wait_ms = CHECK_RUN_EVERY_S * 1000 - now.millis_since(last.at);
            if wait_ms > 0 {
                let retry_after_s = u64::try_from((wait_ms + 999) / 1000).unwrap_or(1);
                return Err(CheckRefused::TooSoon { retry_after_s });
            }
        }
        Ok(self.check_run.insert(CheckRun { at: now, regions, told: BTreeSet::new() }))
    }

    /// Whether a check run is under way (the one time [`tell`](Self::tell) changes anything).
    pub fn checking(&self) -> bool {
        self.check_run.is_some()
    }

    /// Whether [`take_save`](Self::take_save) has something to save at `now`.
    pub fn save_due(&self, now: Timestamp) -> bool {
        self.save.due(now, SAVED_EVERY_MS)
    }

    /// Whether `caller`'s work should say "probe every endpoint now".
    pub fn tell(&mut self, c: &Config, caller: Caller) -> bool {
        let region = match caller {
            Caller::Prober(p) => c.probers.get(&p.0).and_then(|p| c.region_code(p.value.region)),
            Caller::Node(_) => None,
        };
        self.check_run.as_mut().is_some_and(|run| run.tell(caller, region))
    }

    /// The derived state to save, when it changed: at once after a verdict changed, else at
    /// most every [`SAVED_EVERY_MS`].
    pub fn take_save(&mut self, now: Timestamp) -> Option<String> {
        if !self.save_due(now) {
            return None;
        }
        self.save.taken(now);
        Some(self.book.save())
    }

    fn rebuild(&mut self, c: &Config) {
        let mirrors = c
            .mirrors
            .mirrors
            .values()
            .map(|m| {
                let state = self.book.state(&m.host);
                DoorMirror {
                    mirror: m.clone(),
                    verdict: state.map(|s| s.verdict).unwrap_or_default(),
                    regions: state.map(|s| s.regions.clone()).unwrap_or_default(),
                    stale: state.and_then(|s| s.freshness.as_ref()).is_some_and(|f| f.stale),
                    in_maintenance: self.maintenance.contains(&m.host),
                }
            })
            .collect();
        let mut networks: Vec<_> = c
            .regions
            .values()
            .flat_map(|r| r.value.client_networks.iter().map(|n| (*n, r.value.code.clone())))
            .collect();
        networks.sort_by_key(|(n, _)| std::cmp::Reverse(n.prefix()));
        let mut places: Vec<_> = (c.regions.values())
            .map(|r| (r.value.places.clone(), r.value.code.clone()))
            .filter(|(p, _)| !p.is_empty())
            .collect();
        places.sort_by(|a, b| a.1.cmp(&b.1));
        self.doors = Arc::new(Doors {
            mirrors,
            tenants: c.mirrors.tenants.clone(),
            networks,
            places,
            settings: c.mirror_settings.clone(),
            latency: self.latency.orders(),
        });
    }
}
