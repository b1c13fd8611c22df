//! Availability: for every address, node, line, mirror and monitor, each change of its health
//! (up, degraded, down, maintenance) with when and why, over the last 90 days; and the
//! reports made of them — the share of time it served over a window (maintenance left out),
//! the error budget left against a target, its incidents, its days. The ledger follows what
//! the passes, the mirrors and the monitors published (with the times they say each state
//! began), is saved with the core's other books and read back at a start, so a report is the
//! same across restarts.

use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;

use serde::{Deserialize, Serialize};
use vantage_core::Timestamp;
use vantage_core::address::Level;
use vantage_core::ids::{ClusterId, LineId, MonitorId, NodeId};
use vantage_core::mirror::MirrorVerdict;
use vantage_core::monitor::GlobalVerdict;
use vantage_core::reachability::{Condition, Reachability};

use std::sync::Arc;

use crate::book::Saving;
use crate::config::Config;
use crate::mirrors::Mirrors;
use crate::monitors::Monitors;
use crate::snapshot::Snapshots;
use vantage_core::evaluate::{FastMap, FastSet, NodeStatus};

/// How long changes are kept.
pub const KEPT_DAYS: i64 = 90;
const DAY_MS: i64 = 86_400_000;
/// Changes kept per subject at most: flapping is damped, so this is days of changes even for
/// the worst subject; past it the oldest go, and its oldest days read as unknown.
const MAX_CHANGES: usize = 2_000;
/// Saved at most this often unless a state changed.
const SAVE_EVERY_MS: i64 = 60_000;
/// How often what is older than [`KEPT_DAYS`] goes.
const PRUNE_EVERY_MS: i64 = 3_600_000;

/// What availability is kept for, typed; written `address:7/192.0.2.1`, `node:7`, `line:1/4`,
/// `mirror:m.example.net`, `monitor:3`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Tracked {
    Address(NodeId, IpAddr),
    Node(NodeId),
    Line(ClusterId, LineId),
    Mirror(String),
    Monitor(MonitorId),
}

impl Tracked {
    /// Every kind, as [`kind`](Self::kind) names them.
    pub const KINDS: [&'static str; 5] = ["address", "node", "line", "mirror", "monitor"];

    /// The cluster it belongs to, for a node, an address or a line.
    pub fn cluster(&self, c: &Config) -> Option<ClusterId> {
        match self {
            Tracked::Address(n, _) | Tracked::Node(n) => c.nodes.get(&n.0).map(|r| r.value.cluster),
            Tracked::Line(cl, _) => Some(*cl),
            Tracked::Mirror(_) | Tracked::Monitor(_) => None,
        }
    }

    /// The node it is or belongs to, for a node or an address.
    fn node(&self) -> Option<NodeId> {
        match self {
            Tracked::Address(n, _) | Tracked::Node(n) => Some(*n),
            Tracked::Line(..) | Tracked::Mirror(_) | Tracked::Monitor(_) => None,
        }
    }

    /// `address`, `node`, `line`, `mirror` or `monitor`.
    pub fn kind(&self) -> &'static str {
        match self {
            Tracked::Address(..) => "address",
            Tracked::Node(_) => "node",
            Tracked::Line(..) => "line",
            Tracked::Mirror(_) => "mirror",
            Tracked::Monitor(_) => "monitor",
        }
    }

    /// Whether it still exists in `c` (a deleted subject is not listed, and its history goes
    /// once 90 days old).
    pub fn exists(&self, c: &Config) -> bool {
        match self {
            Tracked::Address(n, _) | Tracked::Node(n) => c.nodes.contains_key(&n.0),
            Tracked::Line(cl, l) => {
                c.clusters.contains_key(&cl.0) && (l.0 == 0 || c.lines.contains_key(&l.0))
            }
            Tracked::Mirror(h) => c.mirrors.mirrors.contains_key(h),
            Tracked::Monitor(m) => c.monitors.contains_key(&m.0),
        }
    }

    /// Its name in words: `edge-1 (video)`, `192.0.2.1 of edge-1`, `line eu of video`.
    pub fn describe(&self, c: &Config) -> String {
        let cluster =
            |id: ClusterId| c.clusters.get(&id.0).map_or_else(|| id.to_string(), |x| x.value.name.clone());
        let node_cluster =
            |n: NodeId| c.nodes.get(&n.0).map(|x| cluster(x.value.cluster)).unwrap_or_default();
        match self {
            Tracked::Address(n, ip) => format!("{ip} of {} ({})", c.node_name(*n), node_cluster(*n)),
            Tracked::Node(n) => format!("{} ({})", c.node_name(*n), node_cluster(*n)),
            Tracked::Line(cl, l) => {
                let line =
                    c.lines.get(&l.0).map_or_else(|| "default".to_owned(), |x| x.value.line.name.clone());
                format!("line {line} of {}", cluster(*cl))
            }
            Tracked::Mirror(h) => h.clone(),
            Tracked::Monitor(m) => {
                c.monitors.get(&m.0).map_or_else(|| m.to_string(), |x| x.value.name.clone())
            }
        }
    }
}

impl fmt::Display for Tracked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Tracked::Address(n, ip) => write!(f, "address:{n}/{ip}"),
            Tracked::Node(n) => write!(f, "node:{n}"),
            Tracked::Line(c, l) => write!(f, "line:{c}/{l}"),
            Tracked::Mirror(h) => write!(f, "mirror:{h}"),
            Tracked::Monitor(m) => write!(f, "monitor:{m}"),
        }
    }
}

impl std::str::FromStr for Tracked {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || {
            format!(
                "{s:?} is no subject: address:NODE/IP, node:ID, line:CLUSTER/LINE, mirror:HOST or monitor:ID"
            )
        };
        let (kind, rest) = s.split_once(':').ok_or_else(bad)?;
        let num = |t: &str| t.parse::<i64>().map_err(|_| bad());
        Ok(match kind {
            "node" => Tracked::Node(NodeId(num(rest)?)),
            "monitor" => Tracked::Monitor(MonitorId(num(rest)?)),
            "address" => {
                let (n, ip) = rest.split_once('/').ok_or_else(bad)?;
                Tracked::Address(NodeId(num(n)?), ip.parse().map_err(|_| bad())?)
            }
            "line" => {
                let (c, l) = rest.split_once('/').ok_or_else(bad)?;
                Tracked::Line(ClusterId(num(c)?), LineId(num(l)?))
            }
            "mirror" if !rest.is_empty() && !rest.contains(['/', ':']) => {
                Tracked::Mirror(rest.to_ascii_lowercase())
            }
            _ => return Err(bad()),
        })
    }
}

/// A subject's health, as availability counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Health {
    /// Serving as it should.
    Up,
    /// Serving, impaired (a node on a backup level, a mirror or monitor degraded).
    Degraded,
    /// Not serving.
    Down,
    /// Out by the operator's word (drained, disabled, in a maintenance window, blocked by
    /// hand): not counted.
    Maintenance,
    /// Nothing is known of it now (not verified yet, no verdict, no longer published; a
    /// state a later version wrote): not counted.
    #[serde(other)]
    Unknown,
}

/// One change of health.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
pub struct Change {
    /// From when.
    pub at: Timestamp,
    pub health: Health,
    /// Why, in words.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub why: String,
}

/// Every subject's changes of health, oldest first. Each subject's list is shared, so a
/// change copies the map of them and that one list, never the whole history. Keyed by the
/// typed subject: following a pass looks up every node and address of the fleet, which
/// written out and compared as text cost a fifth of a pass at 10,000 nodes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Ledger {
    subjects: BTreeMap<Tracked, Arc<Vec<Change>>>,
    /// Saved subjects this version cannot name (a kind a newer version added), kept as they
    /// were and saved again: going back and forth between versions loses no history.
    unread: Arc<BTreeMap<String, serde_json::Value>>,
    save: Saving,
    pruned_at: Option<Timestamp>,
}

/// Whether node `n` is out by the operator's word in `snap`: disabled, or drained.
fn excused(c: &Config, snap: &crate::snapshot::ClusterSnapshot, n: &NodeId) -> bool {
    c.nodes.get(&n.0).is_some_and(|r| !r.value.node.enabled) || snap.drains.contains_key(n)
}

/// What the ledger last followed of each node: its status (shared with the snapshot it was
/// in), whether it was excused, and since when its level held. A node whose three are the same
/// at the next follow has the healths it had then, which the ledger holds already (the
/// passes share a status that did not change): following a steady fleet of 10,000 nodes
/// looked up each of its 40,000 subjects in the ledger every 10 s, about 11 ms of the core's
/// thread. Kept beside the ledger, never saved: a start follows every node once.
#[derive(Debug, Clone, Default)]
pub(crate) struct Followed(FastMap<NodeId, (Arc<NodeStatus>, bool, Option<Timestamp>)>);

impl Followed {
    /// Whether `node` is as it was followed last.
    fn same(&self, node: NodeId, status: &Arc<NodeStatus>, excused: bool, since: Option<Timestamp>) -> bool {
        self.0.get(&node).is_some_and(|(s, e, t)| Arc::ptr_eq(s, status) && *e == excused && *t == since)
    }
}

/// A subject whose health changed, with since when (when its publisher says) and why.
#[derive(Debug, PartialEq)]
struct Noted {
    subject: Tracked,
    health: Health,
    since: Option<Timestamp>,
    why: String,
}

impl Ledger {
    /// From its saved JSON, subject by subject: one that no longer reads is left out, not
    /// the whole ledger; what was left out is said (for the log).
    pub fn restore(json: &str) -> (Ledger, Vec<String>) {
        #[derive(Deserialize)]
        struct Saved {
            subjects: BTreeMap<String, serde_json::Value>,
        }
        let saved: Saved = match serde_json::from_str(json) {
            Ok(s) => s,
            Err(e) => return (Ledger::default(), vec![format!("the ledger: {e}")]),
        };
        let (mut skipped, mut unread) = (Vec::new(), BTreeMap::new());
        let mut subjects = BTreeMap::new();
        for (k, v) in saved.subjects {
            let Ok(subject) = k.parse::<Tracked>() else {
                unread.insert(k, v);
                continue;
            };
            match serde_json::from_value::<Vec<Change>>(v) {
                Ok(c) => drop(subjects.insert(subject, Arc::new(c))),
                Err(e) => skipped.push(format!("{k}: {e}")),
            }
        }
        (Ledger { subjects, unread: Arc::new(unread), ..Ledger::default() }, skipped)
    }

    /// The changes of `subject`, oldest first.
    pub fn changes(&self, subject: &Tracked) -> &[Change] {
        self.subjects.get(subject).map_or(&[], |c| c.as_slice())
    }

    /// Every subject with its changes, in the order of their written forms (`address:…`
    /// before `line:…`), as lists show them.
    pub fn all(&self) -> impl Iterator<Item = (Tracked, &[Change])> {
        let mut all: Vec<(String, Tracked, &[Change])> =
            self.subjects.iter().map(|(k, v)| (k.to_string(), k.clone(), v.as_slice())).collect();
        all.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        all.into_iter().map(|(_, k, v)| (k, v))
    }

    /// The last health of `subject`.
    fn last(&self, subject: &Tracked) -> Option<Health> {
        self.subjects.get(subject).and_then(|c| c.last()).map(|l| l.health)
    }

    /// Records `n`. Its time is the one its publisher gives when that is after the subject's
    /// last change (a state that began before it was the state then), else `now`; never later
    /// than `now`, never before the last change (a clock set back, a ledger saved ahead).
    fn note(&mut self, n: Noted, now: Timestamp) {
        let changes = Arc::make_mut(self.subjects.entry(n.subject).or_default());
        let last = changes.last();
        let floor = last.map(|l| l.at);
        // A publisher's time is this state's only after serving or degraded: what it says
        // after a maintenance, an unknown or a down (a node failing while drained, a block
        // lifted) may fall inside that span, which would then be counted as this state.
        let trusted = last.is_none_or(|l| matches!(l.health, Health::Up | Health::Degraded));
        let at = match (n.since.filter(|_| trusted), floor) {
            (Some(t), Some(f)) if t > f => t.min(now),
            (Some(t), None) => t.min(now),
            _ => now,
        };
        let at = floor.map_or(at, |f| at.max(f));
        changes.push(Change { at, health: n.health, why: n.why });
        if changes.len() > MAX_CHANGES {
            changes.remove(0);
        }
        self.save.dirty = true;
    }

    /// Drops what is older than [`KEPT_DAYS`], keeping each subject's state at the cut, and
    /// the subjects gone from `c` that changed last before it.
    fn prune(&mut self, c: &Config, now: Timestamp) {
        let cut = now.plus_millis(-KEPT_DAYS * DAY_MS);
        let before = self.subjects.len();
        self.subjects.retain(|k, changes| {
            // Gone from the configuration, or no longer published (an address a node no longer
            // has), for longer than what is kept.
            let gone = !k.exists(c) || changes.last().is_some_and(|l| l.health == Health::Unknown);
            !(gone && changes.last().is_none_or(|l| l.at < cut))
        });
        let mut dirty = self.subjects.len() != before;
        for changes in self.subjects.values_mut() {
            let old = changes.iter().take_while(|c| c.at < cut).count();
            if old > 1 {
                Arc::make_mut(changes).drain(..old - 1);
                dirty = true;
            }
        }
        self.save.dirty |= dirty;
        self.pruned_at = Some(now);
    }

    /// Follows what the last passes, the mirrors and the monitors published at `now`: the
    /// ledger is copied (a published view shares it) only when a subject's health changed,
    /// or to prune it once an hour.
    pub(crate) fn follow(
        (ledger, followed): (&mut Arc<Ledger>, &mut Followed),
        c: &Config,
        snapshots: &Snapshots,
        books: (&Mirrors, &Monitors),
        now: Timestamp,
    ) {
        let noted = ledger.differences(c, snapshots, books, now, followed);
        let prune = ledger.pruned_at.is_none_or(|t| now.millis_since(t) >= PRUNE_EVERY_MS);
        if noted.is_empty() && !prune {
            return;
        }
        let l = Arc::make_mut(ledger);
        for n in noted {
            l.note(n, now);
        }
        if prune {
            l.prune(c, now);
        }
    }

    /// What following `snapshots` at `now` would note from what was `followed`: what it would
    /// note from nothing followed, which looks at every node.
    #[cfg(test)]
    pub(crate) fn assert_follows_as_from_scratch(
        &self,
        followed: &Followed,
        c: &Config,
        snapshots: &Snapshots,
        books: (&Mirrors, &Monitors),
        now: Timestamp,
    ) {
        let kept = self.differences(c, snapshots, books, now, &mut followed.clone());
        let whole = self.differences(c, snapshots, books, now, &mut Followed::default());
        assert_eq!(kept, whole, "following what was followed notes what following every node does");
    }

    /// A lease holder saves what it noted as a follower (its saves went nowhere).
    pub(crate) fn mark_unsaved(ledger: &mut Arc<Ledger>) {
        if !ledger.subjects.is_empty() {
            Arc::make_mut(ledger).save.dirty = true;
        }
    }

    /// The subjects whose health at `now` differs from their last change. A time is passed
    /// on only where the publisher's time is that of this very state. Nodes as they were at
    /// the last follow are not looked at again (`followed`, which then holds this follow's).
    fn differences(
        &self,
        c: &Config,
        snapshots: &Snapshots,
        books: (&Mirrors, &Monitors),
        now: Timestamp,
        followed: &mut Followed,
    ) -> Vec<Noted> {
        let (mut out, mut next, twice) = self.walk(c, snapshots, books, now, followed);
        // A node in two clusters' snapshots (moved, and its old cluster not passed since) is
        // noted from both, in turn: such a follow looks at every node, and what it followed
        // of those is forgotten, so that they are looked at until they are in one snapshot.
        if !twice.is_empty() {
            (out, next, _) = self.walk(c, snapshots, books, now, &Followed::default());
            next.0.retain(|n, _| !twice.contains(n));
        }
        *followed = next;
        out
    }

    /// [`differences`](Self::differences) from what was `followed`, with what this follow
    /// followed and the nodes found in more than one snapshot.
    fn walk(
        &self,
        c: &Config,
        snapshots: &Snapshots,
        (mirrors, monitors): (&Mirrors, &Monitors),
        now: Timestamp,
        followed: &Followed,
    ) -> (Vec<Noted>, Followed, FastSet<NodeId>) {
        let mut out = Vec::new();
        let (mut seen, mut skipped, mut twice) = (FastSet::default(), FastSet::default(), FastSet::default());
        let mut next = Followed::default();
        let mut note = |subject: Tracked, health: Health, since: Option<Timestamp>, why: String| {
            let last = self.last(&subject);
            if last != Some(health) && !(health == Health::Unknown && last.is_none()) {
                out.push(Noted { subject: subject.clone(), health, since, why });
            }
            seen.insert(subject);
        };
        for snap in snapshots.values() {
            for (id, s) in &snap.nodes {
                if !c.nodes.contains_key(&id.0) {
                    continue;
                }
                let excused = excused(c, snap, id);
                let level_since = snap.level_since.get(id).copied();
                let same = followed.same(*id, s, excused, level_since);
                if next.0.insert(*id, (s.clone(), excused, level_since)).is_some() {
                    twice.insert(*id);
                }
                if same {
                    skipped.insert(*id);
                    continue;
                }
                let (health, since, why) = match s.level {
                    _ if excused => (Health::Maintenance, None, "drained or disabled".to_owned()),
                    _ if !s.serving => (
                        Health::Down,
                        None,
                        "not answered: its agent or a required link is not fresh".to_owned(),
                    ),
                    Some(Level::Primary) => (Health::Up, level_since, String::new()),
                    Some(l) => (
                        Health::Degraded,
                        level_since,
                        format!("answered on its {l:?} addresses").to_lowercase(),
                    ),
                    None => (Health::Down, level_since, "every address unreachable".to_owned()),
                };
                note(Tracked::Node(*id), health, since, why);
                for a in &s.addresses {
                    let settled =
                        matches!(a.condition.condition, Condition::Reachable | Condition::Unreachable);
                    let since = a.condition.since.filter(|_| settled);
                    let (health, since, why) = match a.reachability {
                        _ if excused => (Health::Maintenance, None, String::new()),
                        _ if a.condition.condition == Condition::Unverified => {
                            (Health::Unknown, None, String::new())
                        }
                        Reachability::Reachable => (Health::Up, since, String::new()),
                        Reachability::Unreachable => (
                            Health::Down,
                            since,
                            format!(
                                "unreachable: {} of {} probers see it failing",
                                a.verdict.failing, a.verdict.counting
                            ),
                        ),
                    };
                    note(Tracked::Address(*id, a.ip), health, since, why);
                }
            }
            let Some(p) = &snap.published else { continue };
            for (line, records) in &p.records.lines {
                // A line whose every node is drained is out by the operator's word.
                let group = c.lines.get(&line.0).map(|l| l.value.line.group);
                let members: Vec<&NodeId> = snap
                    .nodes
                    .keys()
                    .filter(|n| {
                        group.is_none_or(|g| c.nodes.get(&n.0).is_some_and(|r| r.value.node.group == g))
                    })
                    .collect();
                let drained = !members.is_empty() && members.iter().all(|n| excused(c, snap, n));
                let (health, since, why) = match p.held.get(line) {
                    _ if drained => (Health::Maintenance, None, String::new()),
                    Some(hold) => (Health::Down, None, hold.reason.clone()),
                    None if records.is_empty() => (Health::Down, None, "answers nothing".to_owned()),
                    None => (Health::Up, None, String::new()),
                };
                note(Tracked::Line(p.cluster, *line), health, since, why);
            }
        }
        for (host, state) in mirrors.book().states() {
            let maintenance = mirrors.in_maintenance().contains(host)
                || c.mirrors.mirrors.get(host).is_some_and(|m| m.manual_block);
            let (health, why) = match state.verdict {
                _ if maintenance => (Health::Maintenance, String::new()),
                MirrorVerdict::Live => (Health::Up, String::new()),
                MirrorVerdict::Degraded => (Health::Degraded, "degraded in some regions".to_owned()),
                MirrorVerdict::Blocked => (Health::Down, "blocked".to_owned()),
                MirrorVerdict::Unknown => (Health::Unknown, String::new()),
            };
            let since = state.verdict_since.filter(|_| !maintenance);
            note(Tracked::Mirror(host.clone()), health, since, why);
        }
        for (id, state) in monitors.states() {
            let open = c.maintenance_of(&crate::alerts::AlertAbout::Monitor(*id), now).is_some();
            let (health, since, why) = match state.verdict.as_ref().map(|v| (v.verdict.global, v)) {
                _ if open => (Health::Maintenance, None, String::new()),
                None => (Health::Unknown, None, String::new()),
                Some((GlobalVerdict::Healthy, v)) => (Health::Up, Some(v.at), String::new()),
                Some((GlobalVerdict::Degraded, v)) => {
                    (Health::Degraded, Some(v.at), "degraded for its audience".to_owned())
                }
                Some((GlobalVerdict::Down, v)) => (
                    Health::Down,
                    Some(v.at),
                    format!("down for {:.0} % of its audience", v.verdict.down_weight_pct),
                ),
            };
            note(Tracked::Monitor(*id), health, since, why);
        }
        // What is no longer published (an address a node no longer has) is no longer known.
        // A node as it was has the subjects it had, each seen at a follow before.
        let kept = |k: &Tracked| k.node().is_some_and(|n| skipped.contains(&n));
        let gone: Vec<Tracked> = (self.subjects.iter())
            .filter(|(k, c)| {
                !seen.contains(*k) && !kept(k) && c.last().is_some_and(|l| l.health != Health::Unknown)
            })
            .map(|(k, _)| k.clone())
            .collect();
        out.extend(gone.into_iter().map(|subject| Noted {
            subject,
            health: Health::Unknown,
            since: None,
            why: "no longer published".to_owned(),
        }));
        (out, next, twice)
    }

    /// The ledger to save when its save is due at `now`. It is handed over as it is (shared:
    /// a view shares it already) and made into JSON by its writer, off the core's thread: at
    /// 20,000 nodes that took about 85 ms of it once a minute.
    pub(crate) fn take_save(ledger: &mut Arc<Ledger>, now: Timestamp) -> Option<Arc<Ledger>> {
        if !ledger.save.due(now, SAVE_EVERY_MS) {
            return None;
        }
        Arc::make_mut(ledger).save.taken(now);
        Some(ledger.clone())
    }

    /// The ledger as saved: each subject's changes under its name, and the subjects this
    /// version cannot name as they were read ([`Ledger::restore`] reads it back).
    pub fn to_json(&self) -> serde_json::Result<String> {
        #[derive(Serialize)]
        #[serde(untagged)]
        enum Entry<'a> {
            Read(&'a [Change]),
            Unread(&'a serde_json::Value),
        }
        #[derive(Serialize)]
        struct Saved<'a> {
            subjects: BTreeMap<String, Entry<'a>>,
        }
        let read = self.subjects.iter().map(|(k, v)| (k.to_string(), Entry::Read(v.as_slice())));
        let unread = self.unread.iter().map(|(k, v)| (k.clone(), Entry::Unread(v)));
        serde_json::to_string(&Saved { subjects: unread.chain(read).collect() })
    }
}

/// Time spent in each health over a window, and what it makes.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
pub struct Window {
    pub since: Timestamp,
    pub until: Timestamp,
    pub up_s: f64,
    pub degraded_s: f64,
    pub down_s: f64,
    pub maintenance_s: f64,
    /// Before anything was known of it (before it existed, or before this ledger began).
    pub unknown_s: f64,
    /// Serving (up or degraded) over the time counted — maintenance and unknown left out;
    /// `None` when no time counted.
    pub availability_pct: Option<f64>,
    /// Against the target asked for: the share of the error budget (the down time the target
    /// allows over the time counted) not spent, %; negative once overspent.
    pub budget_left_pct: Option<f64>,
}

/// The time `changes` spend in each health over `[since, until)`, against `target` % when
/// one is given.
pub fn window(changes: &[Change], since: Timestamp, until: Timestamp, target: Option<f64>) -> Window {
    let mut w = Window { since, until, ..Window::default() };
    let mut at = since;
    // Changes are in time order: the window's part is found, not scanned for.
    let first = changes.partition_point(|c| c.at <= since);
    let mut health: Option<Health> = first.checked_sub(1).and_then(|i| changes.get(i)).map(|c| c.health);
    let mut add = |h: Option<Health>, from: Timestamp, to: Timestamp| {
        let s = to.millis_since(from).max(0) as f64 / 1000.0;
        match h {
            Some(Health::Up) => w.up_s += s,
            Some(Health::Degraded) => w.degraded_s += s,
            Some(Health::Down) => w.down_s += s,
            Some(Health::Maintenance) => w.maintenance_s += s,
            Some(Health::Unknown) | None => w.unknown_s += s,
        }
    };
    for c in changes[first..].iter().take_while(|c| c.at < until) {
        add(health, at, c.at);
        (at, health) = (c.at, Some(c.health));
    }
    add(health, at, until);
    let counted = w.up_s + w.degraded_s + w.down_s;
    if counted > 0.0 {
        w.availability_pct = Some(100.0 * (w.up_s + w.degraded_s) / counted);
        // A target is below 100 % (the API refuses others): some down time is allowed.
        w.budget_left_pct = target.filter(|t| *t < 100.0).map(|t| {
            let allowed = counted * (100.0 - t) / 100.0;
            100.0 * (allowed - w.down_s) / allowed
        });
    }
    w
}

/// A time a subject was down.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
pub struct Incident {
    pub start: Timestamp,
    /// `None`: still down.
    pub end: Option<Timestamp>,
    /// Why, as it was said when it began.
    pub cause: String,
}

/// The incidents of `changes` that overlap `[since, until)`, newest first.
pub fn incidents(changes: &[Change], since: Timestamp, until: Timestamp) -> Vec<Incident> {
    let mut out = Vec::new();
    for (i, c) in changes.iter().enumerate() {
        if c.health != Health::Down {
            continue;
        }
        let end = changes[i + 1..].iter().find(|n| n.health != Health::Down).map(|n| n.at);
        if c.at < until && end.is_none_or(|e| e > since) {
            out.push(Incident { start: c.at, end, cause: c.why.clone() });
        }
    }
    out.reverse();
    out
}

/// One UTC day of a report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
pub struct Day {
    /// `2026-12-04`.
    pub date: String,
    /// `None`: nothing counted that day.
    pub availability_pct: Option<f64>,
}

/// Each of the `days` whole UTC days up to and including today, oldest first.
pub fn days(changes: &[Change], days: u32, now: Timestamp) -> Vec<Day> {
    let today = now.millis().div_euclid(DAY_MS) * DAY_MS;
    (0..i64::from(days))
        .rev()
        .map(|d| {
            let start = Timestamp::from_millis(today - d * DAY_MS);
            let end = Timestamp::from_millis(start.millis() + DAY_MS).min(now);
            let date = start.to_string().get(..10).unwrap_or_default().to_owned();
            Day { date, availability_pct: window(changes, start, end, None).availability_pct }
        })
        .collect()
}

/// The windows every report gives: the last 24 hours, 7 days and 30 days.
pub const WINDOWS: [(&str, i64); 3] = [("24h", DAY_MS), ("7d", 7 * DAY_MS), ("30d", 30 * DAY_MS)];

/// A window of a report, named (`24h`, `7d`, `30d`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
pub struct NamedWindow {
    pub window: String,
    #[serde(flatten)]
    pub times: Window,
}

/// One subject's availability at `now`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
pub struct Report {
    /// `node:7`, `address:7/192.0.2.1`, `line:1/4`, `mirror:HOST`, `monitor:3`.
    pub subject: String,
    /// `address`, `node`, `line`, `mirror` or `monitor`.
    pub kind: String,
    /// Its name in words.
    pub name: String,
    /// Its health now and since when (`None`: nothing known yet).
    pub health: Option<Health>,
    pub since: Option<Timestamp>,
    /// The target asked for, %.
    pub target_pct: Option<f64>,
    /// The last 24 h, 7 d and 30 d, in that order.
    pub windows: Vec<NamedWindow>,
    /// Each of the last days (UTC), oldest first: the bars.
    pub days: Vec<Day>,
    /// Its incidents over the last 30 days, newest first (only in a subject's own report).
    pub incidents: Vec<Incident>,
}

impl Ledger {
    /// The report of `subject` at `now`, against `target` %, with `days` daily bars and, when
    /// `with_incidents`, its incidents.
    pub fn report(
        &self,
        c: &Config,
        subject: &Tracked,
        (target, days_asked, with_incidents): (Option<f64>, u32, bool),
        now: Timestamp,
    ) -> Report {
        let changes = self.changes(subject);
        let last = changes.last();
        Report {
            subject: subject.to_string(),
            kind: subject.kind().to_owned(),
            name: subject.describe(c),
            health: last.map(|l| l.health),
            since: last.map(|l| l.at),
            target_pct: target,
            windows: WINDOWS
                .iter()
                .map(|(name, ms)| NamedWindow {
                    window: (*name).to_owned(),
                    times: window(changes, now.plus_millis(-ms), now, target),
                })
                .collect(),
            days: days(changes, days_asked, now),
            incidents: if with_incidents {
                incidents(changes, now.plus_millis(-30 * DAY_MS), now)
            } else {
                Vec::new()
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::ClusterSnapshot;
    use vantage_core::ids::ClusterId;

    /// A node in two clusters' snapshots — moved, its old cluster not passed since — is noted
    /// from both in turn, follow after follow, as a follow of every node notes it; once it is
    /// in one snapshot again, it is followed as any node.
    #[test]
    fn a_node_in_two_snapshots_is_followed_as_from_scratch() {
        let mut now = at(0);
        let mut c = Config::default();
        for (id, o) in crate::fixtures::large_fleet(2, 1).puts {
            c.put(id, o, now, now);
        }
        let node = NodeId(*c.nodes.keys().next().unwrap());
        let status = |level| {
            let s =
                NodeStatus { node, online: true, serving: true, level, held_by: None, addresses: Vec::new() };
            Arc::new(s)
        };
        let snapshot = |level| {
            let nodes = BTreeMap::from([(node, status(level))]);
            Arc::new(ClusterSnapshot { nodes, ..ClusterSnapshot::default() })
        };
        let mut snapshots = Snapshots::from([
            (ClusterId(2), snapshot(Some(Level::Primary))),
            (ClusterId(99), snapshot(None)),
        ]);
        let (mirrors, monitors) = (Mirrors::default(), Monitors::default());
        let (mut ledger, mut followed) = (Arc::new(Ledger::default()), Followed::default());
        let mut healths = Vec::new();
        for step in 0..6 {
            if step == 4 {
                snapshots.remove(&ClusterId(99));
            }
            ledger.assert_follows_as_from_scratch(&followed, &c, &snapshots, (&mirrors, &monitors), now);
            Ledger::follow((&mut ledger, &mut followed), &c, &snapshots, (&mirrors, &monitors), now);
            healths.push(ledger.last(&Tracked::Node(node)));
            now = now.plus_secs(10);
        }
        use Health::{Down, Up};
        assert_eq!(healths, [Some(Down), Some(Up), Some(Down), Some(Up), Some(Up), Some(Up)]);
        let kept = &snapshots[&ClusterId(2)].nodes[&node];
        assert!(followed.same(node, kept, false, None), "in one snapshot again, it is passed over");
    }

    fn at(s: i64) -> Timestamp {
        Timestamp::from_millis(1_800_000_000_000 + s * 1000)
    }

    fn change(s: i64, health: Health) -> Change {
        Change { at: at(s), health, why: format!("{health:?}") }
    }

    #[test]
    fn a_window_counts_each_health_and_leaves_maintenance_out() {
        let changes = [
            change(0, Health::Up),
            change(100, Health::Down),
            change(110, Health::Up),
            change(200, Health::Maintenance),
            change(300, Health::Degraded),
        ];
        let w = window(&changes, at(-50), at(400), Some(99.0));
        assert_eq!(
            (w.unknown_s, w.up_s, w.down_s, w.maintenance_s, w.degraded_s),
            (50.0, 190.0, 10.0, 100.0, 100.0)
        );
        assert_eq!(w.availability_pct, Some(100.0 * 290.0 / 300.0));
        // 1 % of 300 s is 3 s of budget; 10 s were down.
        let left = w.budget_left_pct.unwrap();
        assert!((left - 100.0 * (3.0 - 10.0) / 3.0).abs() < 1e-9, "{left}");
        let w = window(&changes, at(120), at(190), Some(99.0));
        assert_eq!((w.up_s, w.availability_pct, w.budget_left_pct), (70.0, Some(100.0), Some(100.0)));
        assert_eq!(window(&[], at(0), at(10), None).availability_pct, None, "nothing known");
    }

    #[test]
    fn incidents_are_the_down_spans_newest_first() {
        let changes = [
            change(0, Health::Up),
            change(100, Health::Down),
            change(110, Health::Up),
            change(500, Health::Down),
        ];
        let all = incidents(&changes, at(0), at(600));
        assert_eq!(
            all,
            [
                Incident { start: at(500), end: None, cause: "Down".into() },
                Incident { start: at(100), end: Some(at(110)), cause: "Down".into() },
            ]
        );
        assert_eq!(incidents(&changes, at(200), at(400)), [], "none overlaps");
    }

    /// A subject this version cannot name (a kind a newer one added) is kept and saved back
    /// as it was.
    #[test]
    fn a_subject_of_an_unknown_kind_is_saved_back_as_it_was() {
        let json = r#"{"subjects":{"beacon:3":[{"at":"2027-01-01T00:00:00Z","health":"up"}],"node:7":[{"at":"2027-01-01T00:00:00.000Z","health":"down"}]}}"#;
        let (ledger, skipped) = Ledger::restore(json);
        assert!(skipped.is_empty(), "{skipped:?}");
        assert_eq!(ledger.changes(&Tracked::Node(NodeId(7))).len(), 1);
        let mut ledger = Arc::new(ledger);
        Ledger::mark_unsaved(&mut ledger);
        let saved = Ledger::take_save(&mut ledger, Timestamp::from_secs(1_800_000_000)).expect("due");
        let saved: serde_json::Value = serde_json::from_str(&saved.to_json().unwrap()).unwrap();
        let was: serde_json::Value = serde_json::from_str(json).unwrap();
        assert_eq!(saved, was);
    }

    #[test]
    fn subjects_read_back() {
        let ip: IpAddr = "2001:db8::1".parse().unwrap();
        for t in [
            Tracked::Address(NodeId(7), ip),
            Tracked::Node(NodeId(7)),
            Tracked::Line(ClusterId(1), LineId(0)),
            Tracked::Mirror("m.example.net".into()),
            Tracked::Monitor(MonitorId(3)),
        ] {
            assert_eq!(t.to_string().parse::<Tracked>(), Ok(t.clone()), "{t}");
        }
        for bad in ["", "node", "node:x", "pony:1", "line:1", "mirror:", "mirror:a/b"] {
            assert!(bad.parse::<Tracked>().is_err(), "{bad}");
        }
    }
}
