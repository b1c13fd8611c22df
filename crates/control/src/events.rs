//! The fleet's event stream: one entry per thing an operator follows during an incident — an
//! address starting to fail, becoming unreachable, answering again; a node changing level; a
//! rule acting; a revision with what it changed per line; an alert firing or resolving; a
//! prober or node agent coming online; a push to an external DNS server. The control core
//! makes them as it decides (with the time passed in), numbers them, and the driver stores
//! them and streams them; each carries one sentence for people and its figures for programs.

use std::net::IpAddr;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use vantage_core::Timestamp;
use vantage_core::beside::Beside;
use vantage_core::evaluate::{NodeStatus, Records, came_and_gone};
use vantage_core::ids::{ClusterId, LineId, NodeId};
use vantage_core::reachability::{Condition, sees_failing};

use crate::addresses::Results;
use crate::config::Config;
use crate::identity::Caller;
use crate::snapshot::{ClusterSnapshot, Published, Zone};
use crate::target::TargetKey;

/// What happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// A strict majority of the counting probers sees a reachable address failing: it leaves
    /// DNS when that lasts.
    AddressFailing,
    /// An address was decided unreachable.
    AddressUnreachable,
    /// An unreachable address answers again: it returns to DNS when that lasts.
    AddressRecovering,
    /// An address is reachable again, or no longer failing.
    AddressReachable,
    /// A new address waits for the probers: out of DNS until a strict majority sees it answer
    /// (or serving unverified when no prober checks its cluster).
    AddressUnverified,
    /// A new address was seen answering by a strict majority (or is trusted): DNS may use it.
    AddressVerified,
    /// A node answers with another level (or with none).
    LevelChanged,
    /// A scheduling rule's action started on a node.
    RuleActivated,
    /// A scheduling rule's action on a node ended.
    RuleRecovered,
    /// A rule was changed or removed: its actions ended at once.
    RuleEnded,
    /// A revision was cut.
    Revision,
    /// An alert fired.
    AlertFired,
    /// An alert resolved.
    AlertResolved,
    /// A prober reported after being offline (or for the first time).
    ProberOnline,
    /// A node agent sent a heartbeat after being offline (or for the first time).
    AgentOnline,
    /// A revision reached an external DNS server.
    Published,
    /// A push to an external DNS server failed (after its retries).
    PublicationFailed,
    /// This replica took the evaluator lease: its decisions are the fleet's (SPEC §8).
    LeaseTaken,
    /// This replica lost the evaluator lease: it publishes the lease holder's revisions.
    LeaseLost,
    /// A node left the answers by an operator's drain or a maintenance window (still probed).
    NodeDraining,
    /// A draining node has been out of the answers for twice the TTL: clients have moved.
    NodeDrained,
    /// A drained node is back in the answers (as its health allows).
    NodeUndrained,
    /// A maintenance window opened or closed.
    Maintenance,
}

impl EventKind {
    /// Every kind, for parsing filters.
    pub const ALL: [EventKind; 23] = [
        EventKind::AddressFailing,
        EventKind::AddressUnreachable,
        EventKind::AddressRecovering,
        EventKind::AddressReachable,
        EventKind::AddressUnverified,
        EventKind::AddressVerified,
        EventKind::LevelChanged,
        EventKind::RuleActivated,
        EventKind::RuleRecovered,
        EventKind::RuleEnded,
        EventKind::Revision,
        EventKind::AlertFired,
        EventKind::AlertResolved,
        EventKind::ProberOnline,
        EventKind::AgentOnline,
        EventKind::Published,
        EventKind::PublicationFailed,
        EventKind::LeaseTaken,
        EventKind::LeaseLost,
        EventKind::NodeDraining,
        EventKind::NodeDrained,
        EventKind::NodeUndrained,
        EventKind::Maintenance,
    ];

    /// The API name (`address_failing`).
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::AddressFailing => "address_failing",
            EventKind::AddressUnreachable => "address_unreachable",
            EventKind::AddressRecovering => "address_recovering",
            EventKind::AddressReachable => "address_reachable",
            EventKind::AddressUnverified => "address_unverified",
            EventKind::AddressVerified => "address_verified",
            EventKind::LevelChanged => "level_changed",
            EventKind::RuleActivated => "rule_activated",
            EventKind::RuleRecovered => "rule_recovered",
            EventKind::RuleEnded => "rule_ended",
            EventKind::Revision => "revision",
            EventKind::AlertFired => "alert_fired",
            EventKind::AlertResolved => "alert_resolved",
            EventKind::ProberOnline => "prober_online",
            EventKind::AgentOnline => "agent_online",
            EventKind::Published => "published",
            EventKind::PublicationFailed => "publication_failed",
            EventKind::LeaseTaken => "lease_taken",
            EventKind::LeaseLost => "lease_lost",
            EventKind::NodeDraining => "node_draining",
            EventKind::NodeDrained => "node_drained",
            EventKind::NodeUndrained => "node_undrained",
            EventKind::Maintenance => "maintenance",
        }
    }
}

impl std::str::FromStr for EventKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        EventKind::ALL.into_iter().find(|k| k.as_str() == s).ok_or_else(|| {
            let all: Vec<&str> = EventKind::ALL.iter().map(|k| k.as_str()).collect();
            format!("unknown event kind {s:?}; one of {}", all.join(", "))
        })
    }
}

/// One event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
pub struct FleetEvent {
    /// Sequence number: increasing, never reused (the stream's `Last-Event-ID`).
    pub id: u64,
    /// When the control plane decided it.
    pub at: Timestamp,
    pub kind: EventKind,
    /// The cluster it concerns, if one.
    pub cluster: Option<ClusterId>,
    /// The node it concerns, if one.
    pub node: Option<NodeId>,
    /// One sentence for people, with names (`127.0.0.11 of sin-1a is failing: …`).
    pub summary: String,
    /// The figures behind it (addresses, probers, records per line, alert…).
    pub details: Value,
}

/// Ids a start reserves per millisecond since the epoch (ids stay below 2^53, exact in
/// JavaScript, until the year 2248).
pub const PER_MS: u64 = 1024;

/// Numbers events and keeps them until the driver takes them.
#[derive(Debug, Default)]
pub(crate) struct EventLog {
    /// The id this process's numbering continues after.
    base: u64,
    last_id: u64,
    pending: Vec<FleetEvent>,
}

impl EventLog {
    /// Numbers after both `last_stored` (the newest stored event) and [`PER_MS`] ids per
    /// millisecond since the epoch at `now`, the start: ids then never repeat across restarts,
    /// even when the previous process's last events were never stored or retention deleted
    /// every stored one — it would have to have made more than [`PER_MS`] events a
    /// millisecond on average since its own start (and the clock not be set back) for its ids
    /// to reach this start's.
    pub(crate) fn starting(last_stored: u64, now: Timestamp) -> EventLog {
        let base = u64::try_from(now.millis()).unwrap_or(0).saturating_mul(PER_MS);
        let base = last_stored.max(base);
        EventLog { base, last_id: base, pending: Vec::new() }
    }

    /// Numbers on after `last_stored` and [`PER_MS`] ids per millisecond at `now`, as a new
    /// start would: a replica that takes over the evaluator lease numbers after the previous
    /// holder's stored events, whatever its clock says.
    pub(crate) fn rebase(&mut self, last_stored: u64, now: Timestamp) {
        let at = u64::try_from(now.millis()).unwrap_or(0).saturating_mul(PER_MS);
        self.last_id = self.last_id.max(at).max(last_stored);
    }

    /// The event of revision `p`: why it was cut, what it changed per line since `before`,
    /// and the lines the protection held.
    pub(crate) fn revision(&mut self, p: &Published, before: Option<&Records>, now: Timestamp) {
        let reason = &p.reason;
        let zone = &p.zone;
        let lines = line_changes(before, &p.records, |l| zone.line_name(l));
        let held: std::collections::BTreeMap<String, &vantage_core::answer::LineHold> =
            p.held.iter().map(|(l, hold)| (zone.line_name(*l), hold)).collect();
        let summary =
            format!("revision {} of {}: {reason} — {}", p.number, zone.name, describe_lines(&lines));
        // The revision holds every record; its event lists a line's records, and what it gained
        // and lost, up to [`LISTED`] each (a longer list is left out, never sent empty), and
        // counts them.
        let lines: Vec<Value> = (lines.iter())
            .map(|ch| {
                let mut line = json!({
                    "line": ch.line, "name": ch.name, "record_count": ch.records.len(),
                    "added_count": ch.added.len(), "removed_count": ch.removed.len(),
                });
                for (field, ips) in [("records", &ch.records), ("added", &ch.added), ("removed", &ch.removed)]
                {
                    if ips.len() <= LISTED {
                        line[field] = json!(ips);
                    }
                }
                line
            })
            .collect();
        let details =
            json!({"cluster": zone.name, "number": p.number, "reason": reason, "lines": lines, "held": held});
        self.push(now, EventKind::Revision, (Some(p.cluster), None), summary, details);
    }

    /// The id this process's numbering continues after.
    pub(crate) fn base(&self) -> u64 {
        self.base
    }

    /// The newest id numbered (before any: the one numbering continues after).
    pub(crate) fn last_id(&self) -> u64 {
        self.last_id
    }

    pub(crate) fn push(
        &mut self,
        at: Timestamp,
        kind: EventKind,
        (cluster, node): (Option<ClusterId>, Option<NodeId>),
        summary: String,
        details: Value,
    ) {
        self.last_id += 1;
        self.pending.push(FleetEvent { id: self.last_id, at, kind, cluster, node, summary, details });
    }

    pub(crate) fn take(&mut self) -> Vec<FleetEvent> {
        std::mem::take(&mut self.pending)
    }
}

/// The names of the counting probers whose latest round saw `ip` of `node` failing on any of
/// the cluster's listener ports.
fn failing_probers(c: &Config, results: Results<'_>, node: NodeId, ip: IpAddr, ports: &[u16]) -> Vec<String> {
    let mut names = Vec::new();
    for port in ports {
        for (caller, latest) in results.of(&TargetKey { node, ip, port: *port }) {
            if !sees_failing(latest.sent, latest.lost, &c.settings) {
                continue;
            }
            let name = match caller {
                Caller::Prober(p) => {
                    c.probers.get(&p.0).filter(|p| p.value.enabled).map(|p| p.value.name.clone())
                }
                Caller::Node(n) => c.node_probes(n).then(|| c.node_name(n)),
            };
            if let Some(name) = name.filter(|n| !names.contains(n)) {
                names.push(name);
            }
        }
    }
    names.sort_unstable();
    names
}

/// Seconds from `now` to `at`, for "in N s".
fn secs_until(at: Option<Timestamp>, now: Timestamp) -> Option<i64> {
    at.map(|t| (t.millis_since(now) + 999).div_euclid(1000).max(0))
}

/// When a condition's deadline comes, in words: `in 5 s`, or at the next evaluation once it
/// is due (never `in 0 s`).
fn when(within: Option<i64>) -> String {
    match within {
        Some(s) if s > 0 => format!("in {s} s"),
        _ => "at the next evaluation".to_owned(),
    }
}

/// The events of one pass of cluster `id`: each address whose condition changed (and each
/// unverified one that starts or stops failing) and each node whose level changed since the
/// previous pass (`before`), given the node statuses after it and the addresses DNS answers
/// then (sorted). The first pass after a start (`before` never evaluated) has nothing to
/// compare with; after it, a node or address new to `before` is new to the fleet.
#[allow(clippy::too_many_arguments)]
pub(crate) fn pass_events(
    log: &mut EventLog,
    c: &Config,
    results: Results<'_>,
    id: ClusterId,
    zone: &Zone,
    before: &ClusterSnapshot,
    (after, served): (&[Arc<NodeStatus>], &[IpAddr]),
    now: Timestamp,
) {
    let ports: Vec<u16> = c
        .clusters
        .get(&id.0)
        .map(|cl| cl.value.listeners.iter().map(|l| l.port).collect())
        .unwrap_or_default();
    if before.evaluated_at.is_none() {
        return;
    }
    // A pass's statuses come in node order, as the snapshot's do: walked side by side.
    let mut olds = Beside::new(&before.nodes);
    for n in after {
        let old = olds.get(n.node);
        // The status before, shared again: nothing of it changed.
        if old.is_some_and(|o| Arc::ptr_eq(o, n)) {
            continue;
        }
        let old = old.map(|o| &**o);
        // Named only when there is something to say (a String per node per pass otherwise).
        let node = || c.node_name(n.node);
        let scope = (Some(id), Some(n.node));
        for a in &n.addresses {
            let was = old.and_then(|o| o.addresses.iter().find(|x| x.ip == a.ip));
            let (from, to) = (was.map(|w| w.condition.condition), a.condition.condition);
            // An unverified address is out of DNS whatever it does, but an operator still wants
            // to hear that the probers see it failing (a typo, a closed port).
            let fails_unverified = to == Condition::Unverified && a.verdict.is_failing();
            let failed_unverified = was.is_some_and(|w| w.verdict.is_failing());
            if from == Some(to) && (to != Condition::Unverified || fails_unverified == failed_unverified) {
                continue;
            }
            let node = node();
            let failing = failing_probers(c, results, n.node, a.ip, &ports);
            let (v, ip) = (&a.verdict, a.ip);
            let seen = if failing.is_empty() {
                format!("{} of {} probers see it failing", v.failing, v.counting)
            } else {
                format!("{} of {} probers see it failing ({})", v.failing, v.counting, failing.join(", "))
            };
            let within = secs_until(a.condition.changes_at, now);
            let answering = v.counting - v.failing.min(v.counting);
            // Out of verification, but in DNS by the never-empty rule: both, in one sentence.
            let waits = if served.binary_search(&ip).is_ok() {
                "not yet verified — served anyway: the line has no other address"
            } else {
                "out of DNS until a strict majority of the probers sees it answer"
            };
            let (kind, summary) = match (from, to) {
                (_, Condition::Unverified) if a.in_use => (
                    EventKind::AddressUnverified,
                    format!(
                        "{ip} of {node} is new and serves unverified: no prober checks {} yet",
                        zone.name
                    ),
                ),
                (_, Condition::Unverified) if fails_unverified => (
                    EventKind::AddressUnverified,
                    format!("{ip} of {node} is new and failing: {seen}; {waits}"),
                ),
                (_, Condition::Unverified) => {
                    (EventKind::AddressUnverified, format!("{ip} of {node} is new: {waits}"))
                }
                (None | Some(Condition::Unverified), Condition::Reachable) => {
                    let how = if v.counting == 0 {
                        "trusted, it serves without waiting for the probers".to_owned()
                    } else {
                        format!("{answering} of {} probers see it answer", v.counting)
                    };
                    (EventKind::AddressVerified, format!("{ip} of {node} is verified: {how}"))
                }
                (_, Condition::Failing) => (
                    EventKind::AddressFailing,
                    format!(
                        "{ip} of {node} is failing: {seen}; unreachable {} unless it answers",
                        when(within)
                    ),
                ),
                (Some(Condition::Recovering), Condition::Unreachable) => {
                    (EventKind::AddressUnreachable, format!("{ip} of {node} fails again: {seen}"))
                }
                (_, Condition::Unreachable) => {
                    (EventKind::AddressUnreachable, format!("{ip} of {node} is unreachable: {seen}"))
                }
                (_, Condition::Recovering) => (
                    EventKind::AddressRecovering,
                    format!(
                        "{ip} of {node} answers again: {answering} of {} probers see it answer; reachable {} if it goes on",
                        v.counting,
                        when(within)
                    ),
                ),
                (Some(Condition::Failing), Condition::Reachable) => (
                    EventKind::AddressReachable,
                    format!("{ip} of {node} answers again before it was decided: {seen}"),
                ),
                (_, Condition::Reachable) => {
                    (EventKind::AddressReachable, format!("{ip} of {node} is reachable again"))
                }
            };
            let details = json!({
                "cluster": zone.name, "node": node, "address": ip, "level": a.level,
                "from": from, "to": to, "since": a.condition.since, "changes_at": a.condition.changes_at,
                "failing": v.failing, "counting": v.counting, "probers_failing": failing, "in_use": a.in_use,
            });
            log.push(now, kind, scope, summary, details);
        }
        let Some(old) = old else { continue };
        if n.level != old.level {
            let node = node();
            let word = |l: Option<vantage_core::address::Level>| l.map_or("none", |l| l.as_str());
            let used: Vec<String> =
                n.addresses.iter().filter(|a| a.in_use).map(|a| a.ip.to_string()).collect();
            let summary = match n.level {
                Some(l) => format!(
                    "{node} answers with its {l} addresses ({}), was {}",
                    used.join(" "),
                    word(old.level)
                ),
                // Out of every level, yet still in DNS (the line has nothing better, or holds
                // its records): said so, or this would contradict what DNS answers.
                None => {
                    let still: Vec<String> = n
                        .addresses
                        .iter()
                        .filter(|a| served.binary_search(&a.ip).is_ok())
                        .map(|a| a.ip.to_string())
                        .collect();
                    if still.is_empty() {
                        format!("{node} has no address to answer with (was {})", word(old.level))
                    } else {
                        format!(
                            "{node} has no address it may answer with, but DNS still answers {} (was {})",
                            still.join(" "),
                            word(old.level)
                        )
                    }
                }
            };
            let details =
                json!({"cluster": zone.name, "node": node, "from": old.level, "to": n.level, "in_use": used});
            log.push(now, EventKind::LevelChanged, scope, summary, details);
        }
    }
}

/// What one line's records became, against the previous revision's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
pub struct LineChange {
    pub line: LineId,
    /// Line name as of the newer revision.
    pub name: String,
    /// Its records now.
    #[cfg_attr(feature = "schema", schema(value_type = Vec<String>))]
    pub records: Vec<IpAddr>,
    /// Records it gained.
    #[cfg_attr(feature = "schema", schema(value_type = Vec<String>))]
    pub added: Vec<IpAddr>,
    /// Records it lost.
    #[cfg_attr(feature = "schema", schema(value_type = Vec<String>))]
    pub removed: Vec<IpAddr>,
}

/// Every line of `after`, and lines with records only `before` had, with the records each
/// gained and lost (`before` `None`: everything is new).
pub fn line_changes(
    before: Option<&Records>,
    after: &Records,
    name: impl Fn(LineId) -> String,
) -> Vec<LineChange> {
    let empty = Vec::new();
    let mut ids: Vec<LineId> = after.lines.keys().copied().collect();
    // A line that went is listed when it lost records (not the implicit default line a
    // cluster's first line replaces, which had none).
    if let Some(b) = before {
        ids.extend(
            b.lines.iter().filter(|(l, r)| !r.is_empty() && !after.lines.contains_key(l)).map(|(l, _)| *l),
        );
    }
    ids.into_iter()
        .map(|line| {
            let now = after.lines.get(&line).unwrap_or(&empty);
            let was = before.and_then(|b| b.lines.get(&line)).unwrap_or(&empty);
            let (added, removed) = came_and_gone(was, now);
            LineChange { line, name: name(line), records: now.clone(), added, removed }
        })
        .collect()
}

/// Records an event names one by one, per line and per gain or loss; more are counted.
const LISTED: usize = 16;

/// `local: 127.0.0.12 127.0.0.13 (+127.0.0.12 −127.0.0.11) · default: …`: every line's records,
/// with what changed — counted instead where there are more than [`LISTED`] (`default: 10000
/// records (+20 −1 records)`), so that a line of a large fleet reads as a sentence.
pub fn describe_lines(changes: &[LineChange]) -> String {
    let ips = |v: &[IpAddr]| {
        if v.is_empty() {
            "nothing".to_owned()
        } else if v.len() > LISTED {
            format!("{} records", v.len())
        } else {
            v.iter().map(IpAddr::to_string).collect::<Vec<_>>().join(" ")
        }
    };
    changes
        .iter()
        .map(|ch| {
            let delta: Vec<String> = if ch.added.len() + ch.removed.len() > LISTED {
                vec![format!("+{} −{} records", ch.added.len(), ch.removed.len())]
            } else {
                let added = ch.added.iter().map(|ip| format!("+{ip}"));
                added.chain(ch.removed.iter().map(|ip| format!("−{ip}"))).collect()
            };
            if delta.is_empty() {
                format!("{}: {}", ch.name, ips(&ch.records))
            } else {
                format!("{}: {} ({})", ch.name, ips(&ch.records), delta.join(" "))
            }
        })
        .collect::<Vec<_>>()
        .join(" · ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ips(from: u32, n: u32) -> Vec<IpAddr> {
        (from..from + n).map(|i| IpAddr::from(std::net::Ipv4Addr::from(0x0a00_0000 + i))).collect()
    }

    #[test]
    fn a_large_line_is_counted_and_a_small_one_listed() {
        let small = LineChange {
            line: LineId(1),
            name: "local".into(),
            records: ips(1, 2),
            added: ips(1, 1),
            removed: ips(9, 1),
        };
        let large = LineChange {
            line: LineId(2),
            name: "default".into(),
            records: ips(0, 10_000),
            added: ips(10_000, 1),
            removed: vec![],
        };
        let first = LineChange { added: ips(0, 10_000), ..large.clone() };
        assert_eq!(
            describe_lines(&[small, large, first]),
            "local: 10.0.0.1 10.0.0.2 (+10.0.0.1 −10.0.0.9) · default: 10000 records (+10.0.39.16) · \
             default: 10000 records (+10000 −0 records)"
        );
    }
}

#[cfg(test)]
mod large {
    use vantage_core::result::{Attempt, ErrorCode, Stages};

    use crate::fixtures::{good_round, large_fleet};
    use crate::{Control, Output, Start};

    /// With 20 primaries lost at once, the revision's reason names 16 addresses and counts
    /// the rest, and its line is counted: a sentence, not a list of the fleet.
    #[test]
    fn a_revision_of_many_addresses_names_some_and_counts_the_rest() {
        let mut now = vantage_core::Timestamp::from_secs(1_800_000_000);
        let mut control = Control::new(Start::default(), now);
        let fleet = large_fleet(20, 3);
        control.handle_change(fleet.puts, Vec::new(), now);
        let lost = Attempt { stages: Stages::empty(), rtt_us: 0, error: Some(ErrorCode::Timeout) };
        let mut reasons = Vec::new();
        for round in 0..8 {
            for p in &fleet.probers {
                let work = control.handle_work(*p, now);
                for mut report in good_round(&work, now) {
                    // Every node's primary (the first of its three addresses) is lost.
                    let primary = |t: &str| {
                        let ip = t.split('/').nth(1).and_then(|ip| ip.parse::<std::net::Ipv4Addr>().ok());
                        ip.is_some_and(|ip| u32::from(ip) % 4 == 0)
                    };
                    for r in report.results.iter_mut().filter(|r| round > 1 && primary(&r.target)) {
                        r.attempts = vec![lost; r.attempts.len()];
                    }
                    control.handle_report(*p, &report, now).expect("a report");
                }
            }
            control.handle_timeout(now);
            while let Some(o) = control.poll_output() {
                if let Output::Revision(r) = o {
                    reasons.push(r.published.reason.clone());
                }
            }
            now = now.plus_secs(10);
        }
        let reason = reasons.iter().find(|r| r.contains("unreachable")).expect("the primaries went down");
        assert!(reason.contains("; 4 more addresses; line "), "{reason}");
        assert!(reason.matches(" unreachable").count() == 16, "{reason}");
        assert!(reason.contains(" 20 addresses out"), "{reason}");
    }
}
