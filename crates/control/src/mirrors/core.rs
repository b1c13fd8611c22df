//! The mirror part of the control core: the book of what probers saw, the doors snapshot, the
//! reload status and the check run, kept consistent with each other. [`crate::Control`] owns
//! one and turns the verdict changes it returns into alerts and audit entries.

use std::collections::BTreeSet;
use std::sync::Arc;

use vantage_core::Timestamp;
use vantage_core::result::ProbeResult;

use super::book::{Book, VerdictChange};
use super::doors::{DoorMirror, Doors};
use super::registry::Changes;
use super::{CHECK_RUN_EVERY_S, CheckRefused, CheckRun, LoadError, Registry, ReloadStatus};
use crate::config::Config;
use crate::identity::Caller;

/// The derived state is saved at most this often while only counters change.
const SAVED_EVERY_MS: i64 = 10_000;

/// Mirrors, doors, reloads and check runs.
#[derive(Debug, Default)]
pub struct Mirrors {
    book: Book,
    doors: Arc<Doors>,
    reload: ReloadStatus,
    check_run: Option<CheckRun>,
    dirty: bool,
    doors_changed: bool,
    saved_at: Option<Timestamp>,
}

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
    /// are recomputed, the doors rebuilt.
    pub fn follow(&mut self, c: &Config, now: Timestamp) -> Vec<VerdictChange> {
        let changes = self.book.follow(c, now);
        self.dirty = true;
        self.rebuild(c);
        changes
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
        self.dirty = true;
        if status_changed || change.is_some() {
            self.rebuild(c);
        }
        change
    }

    /// Stale regions become `error`.
    pub fn sweep(&mut self, c: &Config, now: Timestamp) -> Vec<VerdictChange> {
        let (any, changes) = self.book.sweep(c, now);
        if any || !changes.is_empty() {
            self.dirty = true;
            self.rebuild(c);
        }
        changes
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
                    if !c.regions.values().any(|x| x.value.code == r) {
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

    /// Whether `caller`'s work should say "probe every endpoint now".
    pub fn tell(&mut self, c: &Config, caller: Caller) -> bool {
        let region = match caller {
            Caller::Prober(p) => c.probers.get(&p.0).and_then(|p| c.region_code(p.value.region)),
            Caller::Node(_) => None,
        };
        self.check_run.as_mut().is_some_and(|run| run.tell(caller, region))
    }

    /// Whether the doors snapshot was rebuilt since the last call.
    pub fn take_doors_changed(&mut self) -> bool {
        std::mem::take(&mut self.doors_changed)
    }

    /// The derived state to save, when it changed: at once when `now_too`, else at most every
    /// [`SAVED_EVERY_MS`].
    pub fn take_save(&mut self, now: Timestamp, now_too: bool) -> Option<String> {
        let due = now_too || self.saved_at.is_none_or(|t| now.millis_since(t) >= SAVED_EVERY_MS);
        if !(self.dirty && due) {
            return None;
        }
        self.dirty = false;
        self.saved_at = Some(now);
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
                }
            })
            .collect();
        let mut networks: Vec<_> = c
            .regions
            .values()
            .flat_map(|r| r.value.client_networks.iter().map(|n| (*n, r.value.code.clone())))
            .collect();
        networks.sort_by_key(|(n, _)| std::cmp::Reverse(n.prefix()));
        self.doors_changed = true;
        self.doors = Arc::new(Doors {
            mirrors,
            tenants: c.mirrors.tenants.keys().cloned().collect(),
            networks,
            settings: c.mirror_settings.clone(),
        });
    }
}
