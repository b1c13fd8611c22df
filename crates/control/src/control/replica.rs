//! Several replicas on one database (SPEC §8). Every replica's core is fed every observation —
//! its own and, relayed through the database, every other replica's — so all of them know the
//! fleet alike and evaluate it alike. Only the one holding the evaluator lease decides for the
//! fleet: it cuts revisions, fires alerts and writes what is stored. The others (followers)
//! keep their hysteresis timers and rule states current on the same observations, answer DNS
//! with the lease holder's stored revisions, and can take over between two passes.

use serde::{Deserialize, Serialize};
use vantage_core::Timestamp;
use vantage_core::evaluate::LineLatency;
use vantage_core::ids::NodeId;
use vantage_core::wire;

use super::{Control, Output, StoredRevision};
use crate::events::EventKind;
use crate::identity::Caller;
use crate::mirrors::book::FreshnessReading;
use crate::snapshot::{ClusterSnapshot, Zone};

/// Whose decisions a core's are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Role {
    /// It holds the evaluator lease (or is the only replica): its revisions, alerts and saves
    /// are the fleet's.
    #[default]
    Leader,
    /// Another replica holds the lease: this core evaluates for its own views and a quick
    /// take-over, and publishes what the lease holder stored.
    Follower,
}

/// An observation one replica's core was fed that every other replica's core must be fed too,
/// as it travels between them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Relayed {
    /// See [`Control::handle_enrolled`].
    Enrolled { caller: Caller, hostname: String, version: String },
    /// A prober fetched its work: what it was given is what its reports may carry, whichever
    /// replica they reach.
    Work { caller: Caller },
    /// See [`Control::handle_report`].
    Report { caller: Caller, report: wire::Report },
    /// See [`Control::handle_heartbeat`].
    Heartbeat { node: NodeId, heartbeat: wire::Heartbeat, from: std::net::IpAddr },
    /// See [`Control::handle_freshness`] (only the lease holder fetches trace files).
    Freshness { host: String, reading: FreshnessReading },
    /// See [`Control::handle_check_run`].
    CheckRun { regions: Option<Vec<String>> },
    /// See [`Control::handle_demand`]: requests this replica served, by region, so that every
    /// replica — the lease holder above all, which saves the day — weighs the whole audience.
    Demand { counts: Vec<(String, u64)> },
}

impl Output {
    /// Whether only the lease holder carries this out: what is stored or sent once for the
    /// whole fleet.
    fn leaders_only(&self) -> bool {
        match self {
            Output::Revision(_)
            | Output::Alert(_)
            | Output::SaveAlerts(_)
            | Output::Audit(_)
            | Output::SaveState(_)
            | Output::DropState(_)
            | Output::Upkeep(_)
            | Output::ForgetResults(_)
            | Output::SaveMirrors(_)
            | Output::SaveMonitors(_)
            | Output::SaveAvailability(_)
            | Output::CheckFreshness(_)
            | Output::Publish(_) => true,
            Output::Answers(_)
            | Output::Events(_)
            | Output::LiveEvents(_)
            | Output::Recheck
            | Output::DropUnsaved => false,
        }
    }
}

impl Control {
    /// Whose decisions this core's are.
    pub fn role(&self) -> Role {
        self.role
    }

    /// The evaluator lease was taken or lost. A new lease holder evaluates every cluster at
    /// once — from the states it kept as a follower and the last stored revision, fed to it
    /// before this with [`handle_revision`](Self::handle_revision) — so a change the previous
    /// holder had not published yet is published now, under the next number; its event ids
    /// start after `last_event`, the newest stored one. A replica that lost the lease no longer
    /// stores the revisions it could not store yet: the next holder numbers its own.
    pub fn handle_lease(&mut self, role: Role, last_event: u64, now: Timestamp) {
        if self.role == role {
            return;
        }
        self.role = role;
        let (kind, summary) = match role {
            Role::Leader => {
                self.events.rebase(last_event, now);
                for slot in self.slots.values_mut() {
                    slot.saved_at = None;
                    slot.whole_at = None;
                }
                crate::availability::Ledger::mark_unsaved(&mut self.availability);
                let stored = self.snapshots.values().filter_map(|s| s.published.clone());
                self.outputs.extend(stored.map(Output::Publish).collect::<Vec<_>>());
                self.trigger_all(now);
                (EventKind::LeaseTaken, "this replica holds the evaluator lease".to_owned())
            }
            Role::Follower => {
                self.outputs.retain(|o| !o.leaders_only());
                self.outputs.push_back(Output::DropUnsaved);
                (EventKind::LeaseLost, "this replica no longer holds the evaluator lease".to_owned())
            }
        };
        self.events.push(now, kind, (None, None), summary, serde_json::json!({}));
    }

    /// A revision the lease holder stored. A follower publishes it (DNS answers it) unless it
    /// is the one it already has, or older than one it took before; the lease holder publishes
    /// its own. A replica that lost the lease goes back to the stored revision from any newer
    /// one of its own that was never stored.
    pub fn handle_revision(&mut self, r: StoredRevision, now: Timestamp) {
        if self.role == Role::Leader {
            return;
        }
        let Some(zone) = Zone::of(&self.config, r.cluster) else { return };
        let before = self.snapshots.get(&r.cluster).cloned().unwrap_or_default();
        if before.published.as_ref().is_some_and(|p| p.number == r.number && p.at == r.at) {
            return;
        }
        let Some(slot) = self.slots.get_mut(&r.cluster) else { return };
        if r.number < slot.adopted {
            return;
        }
        slot.adopted = r.number;
        slot.revision = r.number;
        slot.state.publish(Some(r.records.clone()), r.at);
        // The lines steered by latency answer in the holder's order, and go on from it.
        for (line, order) in &r.records.orders {
            let Some(region) = self.config.lines.get(&line.0).and_then(|l| l.value.line.latency_region)
            else {
                continue;
            };
            slot.state.latency.entry(*line).or_insert_with(|| LineLatency::new(region)).adopt(order);
        }
        let cluster = r.cluster;
        let published = r.published(zone);
        let previous = before.published.as_ref().map(|p| &p.records);
        self.events.revision(&published, previous, now);
        let line_since = super::since_lines(&before, Some(&published), now);
        let snapshot = ClusterSnapshot { published: Some(published.into()), line_since, ..(*before).clone() };
        let mut all = crate::snapshot::Snapshots::clone(&self.snapshots);
        all.insert(cluster, std::sync::Arc::new(snapshot));
        self.snapshots = std::sync::Arc::new(all);
        self.outputs.push_back(Output::Answers(self.snapshots.clone()));
        // What follows the published answer (a drained node's progress) follows it at once.
        self.trigger(cluster, None, now, true);
    }

    /// Feeds what another replica was fed. Refusals were answered there; here they only mean
    /// this core saw less than that one (a report for work this core did not see handed out).
    /// It is taken at the time that replica took it (`sent`, never later than `now`): a report
    /// read a moment late makes no streak start late, so a replica taking the lease just after
    /// the holder failed an address over has failed it over too, rather than answering it
    /// again until its own hysteresis catches up.
    pub fn handle_relayed(&mut self, r: Relayed, sent: Timestamp, now: Timestamp) {
        let now = sent.min(now);
        match r {
            Relayed::Enrolled { caller, hostname, version } => {
                self.handle_enrolled(caller, hostname, version, now)
            }
            Relayed::Work { caller } => {
                self.handle_work(caller, now);
            }
            Relayed::Report { caller, report } => {
                let _ = self.handle_report(caller, &report, now);
            }
            Relayed::Heartbeat { node, heartbeat, from } => {
                self.handle_heartbeat(node, heartbeat, from, now);
            }
            Relayed::Freshness { host, reading } => self.handle_freshness(&host, reading, now),
            Relayed::CheckRun { regions } => {
                let _ = self.handle_check_run(regions, now);
            }
            Relayed::Demand { counts } => self.handle_demand(&counts, now),
        }
    }

    /// The next output for this core's role: a follower's leader-only outputs are dropped, and
    /// its events go to its own streams only (the lease holder's are the stored ones).
    pub(super) fn for_role(&self, o: Output) -> Option<Output> {
        match (self.role, o) {
            (Role::Follower, Output::Events(events)) => Some(Output::LiveEvents(events)),
            (Role::Follower, o) if o.leaders_only() => None,
            (_, o) => Some(o),
        }
    }
}
