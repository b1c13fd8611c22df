//! Maintenance windows opening and closing: the core's own timer, so a window's drain, its
//! held alerts and its events happen at its times whatever else is going on.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::json;
use vantage_core::Timestamp;

use super::Control;
use crate::config::Config;
use crate::events::EventKind;

/// The windows open at `now`, by id, with their names (a deleted one is still told by name).
pub(super) fn open_windows(c: &Config, now: Timestamp) -> BTreeMap<i64, String> {
    (c.maintenance.iter())
        .filter(|(_, m)| m.value.is_open(now))
        .map(|(id, m)| (*id, m.value.name.clone()))
        .collect()
}

impl Control {
    /// The windows open at `now` against those open before: each that opened or closed (by
    /// its times, a change or a deletion) is told — to each cluster it drains, else to the
    /// fleet — and the clusters it drains are evaluated at once with it as their revision's
    /// reason; alerts it held are let go. The doors follow its mirrors.
    pub(super) fn follow_windows(&mut self, now: Timestamp) {
        let c = self.config.clone();
        self.follow_window_mirrors(now);
        let open = open_windows(&c, now);
        if open == self.open_windows {
            return;
        }
        let closed = self.open_windows.iter().filter(|(id, _)| !open.contains_key(id));
        let opened = open.iter().filter(|(id, _)| !self.open_windows.contains_key(id));
        let told: Vec<(i64, String, &str)> = (closed.map(|(id, n)| (*id, n.clone(), "closed")))
            .chain(opened.map(|(id, n)| (*id, n.clone(), "opened")))
            .collect();
        for (id, name, verb) in told {
            let Some(m) = c.maintenance.get(&id).map(|m| &m.value) else {
                // Deleted: the change that deleted it evaluated its clusters.
                let summary = format!("maintenance {id} ({name}) closed: it was deleted");
                let details = json!({"id": id, "name": name, "state": verb});
                self.events.push(now, EventKind::Maintenance, (None, None), summary, details);
                continue;
            };
            let summary = format!("maintenance {id} ({name}) {verb}: {}", m.targets(&c).join(", "));
            let details = json!({"id": id, "name": name, "state": verb, "targets": m.targets(&c)});
            let clusters = m.clusters(&c);
            // Told to each cluster it drains (its feed shows it), else to the fleet.
            let places: Vec<Option<vantage_core::ids::ClusterId>> =
                if clusters.is_empty() { vec![None] } else { clusters.iter().copied().map(Some).collect() };
            for place in places {
                self.events.push(
                    now,
                    EventKind::Maintenance,
                    (place, None),
                    summary.clone(),
                    details.clone(),
                );
            }
            for cluster in clusters {
                self.trigger(cluster, Some(format!("Maintenance {name} {verb}")), now, true);
            }
        }
        self.open_windows = open;
        self.release_silenced(now);
    }

    /// The doors take the open windows' mirrors out of rotation (and back) with them.
    pub(super) fn follow_window_mirrors(&mut self, now: Timestamp) {
        let hosts = self.config.maintenance_mirrors(now);
        if &hosts != self.mirrors.in_maintenance() {
            let c = self.config.clone();
            Arc::make_mut(&mut self.mirrors).set_maintenance(&c, hosts);
        }
    }
}
