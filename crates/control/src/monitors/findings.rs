//! The monitors as a subject book: the endpoints of each region's probers, their results,
//! the sweep that makes quiet regions unknown, the save, and the alert policy of a global
//! verdict — `down` critical, `degraded` a warning, `healthy` resolving both — audited.

use std::sync::Arc;

use serde_json::json;
use vantage_core::Timestamp;
use vantage_core::monitor::GlobalVerdict;

use super::{EndpointKey, MonitorChange, Monitors, endpoint_targets};
use crate::alerts::{AlertAbout, AlertKey, AlertKind, Firing, MonitorAlert, RegionState, Severity};
use crate::book::{Asking, Finding, GivenAs, Records, Reported, SubjectBook, Took, Work};
use crate::config::Config;
use crate::control::{AuditEntry, Output};
use crate::identity::Caller;
use crate::observe::{Given, Latest};
use crate::target::Subject;

/// Each global verdict change: its alerts fired and resolved, and its audit entry.
fn verdict_findings(changes: Vec<MonitorChange>, now: Timestamp) -> Vec<Finding> {
    let mut out = Vec::new();
    for ch in changes {
        let about = AlertAbout::Monitor(ch.monitor);
        let down = AlertKey::new(AlertKind::MonitorDown, about.clone());
        let degraded = AlertKey::new(AlertKind::MonitorDegraded, about);
        let regions: Vec<RegionState> =
            ch.regions.iter().map(|(r, h)| RegionState { region: r.clone(), health: *h }).collect();
        let details = |severity| MonitorAlert {
            monitor: ch.name.clone(),
            severity,
            verdict: ch.to.global,
            down_weight_pct: ch.to.down_weight_pct,
            stale_weight_pct: ch.to.stale_weight_pct,
            regions: regions.clone(),
        };
        match ch.to.global {
            GlobalVerdict::Down => {
                out.push(Finding::Resolve(degraded));
                let summary =
                    format!("monitor {} is down ({:.0} % of its audience)", ch.name, ch.to.down_weight_pct);
                let details = details(Severity::Critical);
                out.push(Finding::Fire(Firing::MonitorDown { monitor: ch.monitor, details }, summary));
            }
            GlobalVerdict::Degraded => {
                out.push(Finding::Resolve(down));
                let summary = format!("monitor {} is degraded", ch.name);
                let details = details(Severity::Warning);
                out.push(Finding::Fire(Firing::MonitorDegraded { monitor: ch.monitor, details }, summary));
            }
            GlobalVerdict::Healthy => {
                out.push(Finding::Resolve(down));
                out.push(Finding::Resolve(degraded));
            }
        }
        out.push(Finding::Audit(AuditEntry {
            at: now,
            action: "monitor.verdict".into(),
            object: format!("monitor:{}", ch.monitor),
            metadata: json!({"from": ch.from, "to": ch.to.global, "down_weight_pct": ch.to.down_weight_pct,
                             "stale_weight_pct": ch.to.stale_weight_pct, "regions": regions}),
        }));
    }
    out
}

/// Shared with the published views: changed through `Arc::make_mut`.
impl SubjectBook for Arc<Monitors> {
    /// The endpoints of every monitor region the caller's region is.
    fn issue(&mut self, asking: &Asking, work: &mut Work) {
        let Some(region) = asking.config.prober_region(asking.caller) else { return };
        let (targets, keys) = endpoint_targets(asking.config, region, &mut work.checks);
        work.endpoints.extend(targets);
        work.given.monitors = keys;
    }

    /// Regions whose probers went quiet become unknown; the steering order moves with time.
    fn sweep(&mut self, c: &Config, now: Timestamp) -> Vec<Finding> {
        let mut out = verdict_findings(Arc::make_mut(self).sweep(c, now), now);
        out.push(Finding::Steer);
        out
    }

    /// Monitors that went go, regions that left a monitor go; the steering order follows.
    fn follow(&mut self, c: &Config, _: Timestamp) -> Vec<Finding> {
        Arc::make_mut(self).follow(c);
        vec![Finding::Steer]
    }

    /// Windows hold no prober's own results.
    fn forget(&mut self, _: Caller) {}

    fn take_save(&mut self, now: Timestamp) -> Option<Output> {
        if !self.save_due(now) {
            return None;
        }
        Arc::make_mut(self).take_save(now).map(Output::SaveMonitors)
    }
}

impl Records for Arc<Monitors> {
    type Key = EndpointKey;

    fn given(given: &Given, key: &EndpointKey) -> Option<GivenAs> {
        given.monitors.contains(key).then_some(GivenAs::Named)
    }

    /// The probe joins its region's window; only a monitor's result can move the steering
    /// order (time moves it on the sweep). Stored like a cluster target's.
    fn record(&mut self, c: &Config, key: &EndpointKey, r: Reported, took: &mut Took) {
        let change = Arc::make_mut(self).record(c, key, r.result, r.now);
        took.rows.push((Subject::Endpoint(key.clone()), Latest::after(r.result, r.now, None, 0)));
        took.findings.push(Finding::Steer);
        took.findings.extend(verdict_findings(change.into_iter().collect(), r.now));
    }
}
