//! The mirrors as a subject book: their work, results, sweep and save, and the alert policy
//! of their verdicts — `mirror_blocked` while the probers (not an operator) block a mirror,
//! `mirror_stale` while a freshness check finds it behind its reference — with the audit
//! entry of each change.

use std::sync::Arc;

use serde_json::json;
use vantage_core::Timestamp;

use super::book::VerdictChange;
use super::{Mirrors, endpoint_targets};
use crate::alerts::{Firing, MirrorBlocked, MirrorStale};
use crate::book::{Asking, Finding, GivenAs, Records, Reported, SubjectBook, Took, Work};
use crate::config::Config;
use crate::control::{AuditEntry, Output};
use crate::identity::Caller;
use crate::observe::Given;

impl Mirrors {
    /// Each verdict change: its alert fired or resolved, and its audit entry.
    pub(crate) fn verdict_findings(&self, changes: Vec<VerdictChange>, now: Timestamp) -> Vec<Finding> {
        let mut out = Vec::new();
        for ch in changes {
            let failing = self.book().state(&ch.host).map(|s| {
                s.regions
                    .iter()
                    .filter(|(_, o)| o.status.is_failing())
                    .map(|(r, _)| r.clone())
                    .collect::<Vec<_>>()
            });
            let firing =
                Firing::MirrorBlocked(MirrorBlocked { host: ch.host.clone(), regions: failing.clone() });
            out.push(if ch.to == vantage_core::mirror::MirrorVerdict::Blocked && !ch.manual {
                Finding::Fire(firing, format!("mirror {} is blocked", ch.host))
            } else {
                Finding::Resolve(firing.key())
            });
            out.push(Finding::Audit(AuditEntry {
                at: now,
                action: "mirror.verdict".into(),
                object: format!("mirror:{}", ch.host),
                metadata: json!({"from": ch.from, "to": ch.to, "manual": ch.manual, "failing_regions": failing}),
            }));
        }
        out
    }

    /// A freshness check found `host` stale (with an alert) or fresh again.
    pub(crate) fn freshness_findings(&self, host: &str, stale: bool, now: Timestamp) -> Vec<Finding> {
        let lag_s = self.book().state(host).and_then(|s| s.freshness.as_ref()).and_then(|f| f.lag_s);
        let firing = Firing::MirrorStale(MirrorStale { host: host.to_owned(), lag_s });
        let alert = if stale {
            let summary = format!("mirror {host} is stale ({} s behind its reference)", lag_s.unwrap_or(0));
            Finding::Fire(firing, summary)
        } else {
            Finding::Resolve(firing.key())
        };
        let audit = Finding::Audit(AuditEntry {
            at: now,
            action: "mirror.freshness".into(),
            object: format!("mirror:{host}"),
            metadata: json!({"stale": stale, "lag_s": lag_s}),
        });
        vec![alert, audit]
    }
}

/// Shared with the published views: changed through `Arc::make_mut` (copied whenever a view
/// still holds it: at every sweep, and at every result).
impl SubjectBook for Arc<Mirrors> {
    /// Every mirror, probed from every region by the probers there; node agents probe their
    /// cluster only.
    fn issue(&mut self, asking: &Asking, work: &mut Work) {
        let (c, caller) = (asking.config, asking.caller);
        if !matches!(caller, Caller::Prober(_)) {
            return;
        }
        let endpoints = endpoint_targets(c, &mut work.checks);
        if endpoints.is_empty() {
            return;
        }
        work.check_now |= self.checking() && Arc::make_mut(self).tell(c, caller);
        work.given.endpoints = c.mirrors.mirrors.keys().cloned().collect();
        work.endpoints.extend(endpoints);
    }

    /// Regions whose probers went quiet become `error`.
    fn sweep(&mut self, c: &Config, now: Timestamp) -> Vec<Finding> {
        let changes = Arc::make_mut(self).sweep(c, now);
        self.verdict_findings(changes, now)
    }

    fn follow(&mut self, c: &Config, now: Timestamp) -> Vec<Finding> {
        let changes = Arc::make_mut(self).follow(c, now);
        self.verdict_findings(changes, now)
    }

    fn forget(&mut self, caller: Caller) {
        Arc::make_mut(self).forget(caller);
    }

    fn take_save(&mut self, now: Timestamp) -> Option<Output> {
        if !self.save_due(now) {
            return None;
        }
        Arc::make_mut(self).take_save(now).map(Output::SaveMirrors)
    }
}

impl Records for Arc<Mirrors> {
    /// A mirror, by host.
    type Key = String;

    fn given(given: &Given, host: &String) -> Option<GivenAs> {
        given.endpoints.contains(host).then_some(GivenAs::Named)
    }

    /// The result joins its region's; a verdict that changed alerts and is audited. Mirror
    /// results are kept in the saved state, not stored one by one.
    fn record(&mut self, c: &Config, host: &String, r: Reported, took: &mut Took) {
        let change = Arc::make_mut(self).record(c, host, r.caller, r.result, r.now);
        took.findings.extend(self.verdict_findings(change.into_iter().collect(), r.now));
    }
}
