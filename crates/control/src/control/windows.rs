//! Maintenance windows opening and closing: the core's own timer, so a window's drain, its
//! held alerts and its events happen at its times whatever else is going on.

use std::collections::BTreeSet;
use std::sync::Arc;

use serde_json::json;
use vantage_core::Timestamp;

use super::Control;
use crate::events::EventKind;

impl Control {
    /// The windows open at `now` against those open before: each that opened or closed (by
    /// its times, a change or a deletion) is told, and the clusters it drains are evaluated
    /// at once with it as their revision's reason; alerts it held are let go.
    pub(super) fn follow_windows(&mut self, now: Timestamp) {
        let c = self.config.clone();
        // The doors take a window's mirrors out of rotation (and back) with it.
        let hosts: BTreeSet<String> = (c.maintenance.values())
            .filter(|m| m.value.is_open(now))
            .flat_map(|m| m.value.mirrors.iter().cloned())
            .collect();
        if &hosts != self.mirrors.in_maintenance() {
            Arc::make_mut(&mut self.mirrors).set_maintenance(&c, hosts);
        }
        let open: BTreeSet<i64> =
            c.maintenance.iter().filter(|(_, m)| m.value.is_open(now)).map(|(id, _)| *id).collect();
        if open == self.open_windows {
            return;
        }
        let closed: Vec<i64> = self.open_windows.difference(&open).copied().collect();
        let opened: Vec<i64> = open.difference(&self.open_windows).copied().collect();
        for (id, verb) in
            closed.iter().map(|id| (*id, "closed")).chain(opened.iter().map(|id| (*id, "opened")))
        {
            let Some(m) = c.maintenance.get(&id).map(|m| &m.value) else {
                let summary = format!("maintenance {id} closed: it was deleted");
                self.events.push(
                    now,
                    EventKind::Maintenance,
                    (None, None),
                    summary,
                    json!({"id": id, "state": verb}),
                );
                continue;
            };
            let what = m.targets(&c).join(", ");
            let summary = format!("maintenance {id} ({}) {verb}: {what}", m.name);
            let details = json!({"id": id, "name": m.name, "state": verb, "targets": m.targets(&c)});
            self.events.push(now, EventKind::Maintenance, (None, None), summary, details);
            for cluster in m.clusters(&c) {
                self.trigger(cluster, Some(format!("Maintenance {} {verb}", m.name)), now, true);
            }
        }
        // A deleted window's clusters were evaluated by the change that deleted it.
        self.open_windows = open;
        self.release_silenced(now);
    }
}
