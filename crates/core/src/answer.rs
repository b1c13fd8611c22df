//! Levels (§5.2) and the answer of a line (§5.3): which addresses a node answers with, and
//! which records a line publishes, each outcome with its reason.

use std::collections::HashMap;
use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use crate::address::{Level, SchedulingAddress};
use crate::ids::{GroupId, LineId, NodeId, RegionId};
use crate::model::{AllDown, DnsMode};

/// The addresses a node answers with.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct InUse {
    /// The level in use; `None` when no address is usable.
    pub level: Option<Level>,
    /// The addresses of that level that DNS may use.
    pub ips: Vec<IpAddr>,
}

/// Levels: the reachable addresses of the lowest level that has any. With `backup_ip` (a
/// *switch to backup IP* action in effect) at least backup1, unless the node has no reachable
/// backup address. Manual mode: every primary address, reachability ignored.
pub fn in_use(addresses: &[(SchedulingAddress, bool)], backup_ip: bool, mode: DnsMode) -> InUse {
    if mode == DnsMode::Manual {
        let ips: Vec<IpAddr> =
            addresses.iter().filter(|(a, _)| a.level == Level::Primary).map(|(a, _)| a.ip).collect();
        return InUse { level: (!ips.is_empty()).then_some(Level::Primary), ips };
    }
    let lowest_reachable =
        |min: Level| addresses.iter().filter(|(a, ok)| *ok && a.level >= min).map(|(a, _)| a.level).min();
    let natural = lowest_reachable(Level::Primary);
    let level = match natural {
        Some(Level::Primary) if backup_ip => lowest_reachable(Level::Backup1).or(natural),
        other => other,
    };
    let ips = match level {
        Some(l) => addresses.iter().filter(|(a, ok)| *ok && a.level == l).map(|(a, _)| a.ip).collect(),
        None => Vec::new(),
    };
    InUse { level, ips }
}

/// Where a rule's effect applies.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Scope {
    #[default]
    Nowhere,
    /// Every line.
    Everywhere,
    /// These lines.
    Lines(Vec<LineId>),
}

impl Scope {
    /// Adds a rule's line (`None`: every line). Lines are kept in order, so that a scope
    /// compares equal however its rules were added.
    pub fn add(&mut self, line: Option<LineId>) {
        match (line, &mut *self) {
            (_, Scope::Everywhere) => {}
            (None, _) => *self = Scope::Everywhere,
            (Some(l), Scope::Nowhere) => *self = Scope::Lines(vec![l]),
            (Some(l), Scope::Lines(v)) => {
                if let Err(i) = v.binary_search(&l) {
                    v.insert(i, l);
                }
            }
        }
    }

    /// True when the scope covers `line`.
    pub fn covers(&self, line: LineId) -> bool {
        match self {
            Scope::Nowhere => false,
            Scope::Everywhere => true,
            Scope::Lines(v) => v.contains(&line),
        }
    }

    /// True when the scope is empty.
    pub fn is_nowhere(&self) -> bool {
        *self == Scope::Nowhere
    }
}

/// What a line answer needs to know of one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeFacts {
    /// The node.
    pub id: NodeId,
    /// Its group.
    pub group: GroupId,
    /// Enabled by the operator.
    pub enabled: bool,
    /// Its agent is connected (heartbeat within 3 × 15 s).
    pub online: bool,
    /// Enabled and, where the cluster requires it, connected with fresh links.
    pub serving: bool,
    /// In-use addresses without a backup-IP action.
    pub in_use: InUse,
    /// In-use addresses under a backup-IP action (same as `in_use` when it has no effect).
    pub in_use_backup: InUse,
    /// Primary addresses, for the never-empty fallback.
    pub primaries: Vec<IpAddr>,
    /// Target addresses by line, each with whether DNS may use it: on such a line they stand
    /// in for the node's in-use addresses, with no level switching.
    pub targets: Vec<(LineId, IpAddr, bool)>,
}

impl NodeFacts {
    /// Adds to `out` the usable addresses this node answers `line` with under `e`: none when
    /// it does not serve or (automatic mode) a remove-node action takes it from the line; its
    /// target addresses on a line that has some; else its in-use addresses, those of a
    /// backup-IP action where one covers the line.
    pub fn answers_into(&self, line: LineId, e: &Effects, mode: DnsMode, out: &mut Vec<IpAddr>) {
        let automatic = mode == DnsMode::Automatic;
        if !self.serving || (automatic && e.removed.covers(line)) {
            return;
        }
        if self.targets.iter().any(|(l, _, _)| *l == line) {
            out.extend(self.targets.iter().filter(|(l, _, ok)| *l == line && *ok).map(|(_, ip, _)| *ip));
            return;
        }
        let ips =
            if automatic && e.backup_ip.covers(line) { &self.in_use_backup.ips } else { &self.in_use.ips };
        out.extend_from_slice(ips);
    }
}

/// A line that answers by its all-down policy, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
pub struct LineHold {
    /// The policy the line answers by.
    pub policy: AllDown,
    /// Why.
    pub reason: String,
}

impl LineHold {
    /// What a revision's reason says of the line called `name`.
    pub fn describe(&self, name: &str) -> String {
        match self.policy {
            AllDown::Hold => format!("line {name} held: {}", self.reason),
            policy => format!("line {name} all down ({}): {}", policy.as_str(), self.reason),
        }
    }
}

/// Read as stored: a plain reason is a hold (revisions and states stored before the other
/// policies existed).
impl<'de> Deserialize<'de> for LineHold {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Stored {
            Reason(String),
            Full { policy: AllDown, reason: String },
        }
        Ok(match Stored::deserialize(d)? {
            Stored::Reason(reason) => LineHold { policy: AllDown::Hold, reason },
            Stored::Full { policy, reason } => LineHold { policy, reason },
        })
    }
}

/// The rule actions in effect on one node.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Effects {
    /// Lines a remove-node action takes it from.
    pub removed: Scope,
    /// Lines where a backup-IP action applies.
    pub backup_ip: Scope,
}

/// Node indices per group, so a line visits only its own nodes.
#[derive(Debug, Clone, Default)]
pub struct GroupIndex(HashMap<GroupId, Vec<usize>>);

impl GroupIndex {
    /// The places among the facts of `group`'s nodes.
    pub fn members(&self, group: GroupId) -> &[usize] {
        self.0.get(&group).map_or(&[], Vec::as_slice)
    }

    /// Indexes `nodes` by group.
    pub fn new(nodes: &[NodeFacts]) -> Self {
        let mut m: HashMap<GroupId, Vec<usize>> = HashMap::new();
        for (i, n) in nodes.iter().enumerate() {
            m.entry(n.group).or_default().push(i);
        }
        GroupIndex(m)
    }
}

/// A line as the answer needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineSpec {
    /// The line.
    pub id: LineId,
    /// Its name, for the reasons of revisions (`default` for the implicit line).
    pub name: String,
    /// Its group; `None` for the implicit default line of a cluster without lines (every group).
    pub group: Option<GroupId>,
    /// Backup groups in order.
    pub backup_groups: Vec<GroupId>,
    /// Minimum healthy addresses.
    pub min_healthy: u32,
    /// What it answers when health leaves it with nothing healthy.
    pub all_down: AllDown,
    /// Latency steering: the region whose probers order its groups (none: as configured).
    pub latency: Option<LatencySpec>,
}

impl LineSpec {
    /// Its groups in the order it tries them: its own, then its backups.
    pub fn groups(&self) -> impl Iterator<Item = GroupId> + '_ {
        self.group.into_iter().chain(self.backup_groups.iter().copied())
    }
}

/// What latency steering of a line needs: the region whose probers measure, and the names
/// its reasons give the region and the line's groups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LatencySpec {
    pub region: RegionId,
    /// The region's code.
    pub region_name: String,
    /// The line's groups by name.
    pub group_names: Vec<(GroupId, String)>,
}

impl LatencySpec {
    /// The name of group `g`, or its id where it is not named.
    pub fn group_name(&self, g: GroupId) -> String {
        self.group_names
            .iter()
            .find(|(x, _)| *x == g)
            .map_or_else(|| format!("group {g}"), |(_, n)| n.clone())
    }
}

/// Where a line's records came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Source {
    /// The line's own group.
    Group,
    /// A backup group (below the minimum, or a switch-to-backup-groups action).
    BackupGroup { group: GroupId },
    /// The previous records were kept.
    Held {
        /// Why.
        reason: String,
    },
    /// The line's all-down policy (`online` or `nodata`) answered instead of health.
    AllDown {
        /// Which policy.
        policy: AllDown,
        /// Why.
        reason: String,
    },
    /// Never empty: no previous records and no healthy address, so a fallback tier.
    Fallback {
        /// Which tier.
        tier: String,
    },
}

impl Source {
    /// The all-down policy this answer is by, with its reason, when it is by one.
    pub fn hold(&self) -> Option<LineHold> {
        match self {
            Source::Held { reason } => Some(LineHold { policy: AllDown::Hold, reason: reason.clone() }),
            Source::AllDown { policy, reason } => Some(LineHold { policy: *policy, reason: reason.clone() }),
            _ => None,
        }
    }
}

/// The answer of one line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineAnswer {
    /// Records, sorted, no duplicates.
    pub records: Vec<IpAddr>,
    /// Where they came from.
    pub source: Source,
    /// A switch-to-backup-groups action was requested but no backup group has the minimum.
    pub backup_groups_unavailable: bool,
}

/// Everything the answer of a line reads.
#[derive(Debug, Clone, Copy)]
pub struct LineContext<'a> {
    /// Every node of the cluster.
    pub nodes: &'a [NodeFacts],
    /// The nodes by group.
    pub groups: &'a GroupIndex,
    /// Rule effects per node, aligned with `nodes` (shorter: no effect on the rest).
    pub effects: &'a [Effects],
    /// DNS mode.
    pub mode: DnsMode,
    /// Mass-removal limit, %.
    pub mass_removal_pct: u32,
    /// Addresses that answer but wait for the probers' verification, sorted: leaving the
    /// records for that is no removal by health (they were never verified to leave).
    pub pending: &'a [IpAddr],
}

impl LineContext<'_> {
    /// The nodes of `group` (every node for `None`) with their index.
    fn in_group(&self, group: Option<GroupId>) -> Box<dyn Iterator<Item = (usize, &NodeFacts)> + '_> {
        match group {
            None => Box::new(self.nodes.iter().enumerate()),
            Some(g) => Box::new(
                self.groups.0.get(&g).into_iter().flatten().filter_map(|&i| Some((i, self.nodes.get(i)?))),
            ),
        }
    }

    /// The healthy addresses of `group` on `line`, sorted, no duplicates.
    fn healthy(&self, line: LineId, group: Option<GroupId>) -> Vec<IpAddr> {
        let none = Effects::default();
        // Room for an address a node, most nodes' answer: grown one doubling at a time, a
        // large line's list was copied again and again, on fresh pages, at every stage.
        let nodes = group.map_or(self.nodes.len(), |g| self.groups.0.get(&g).map_or(0, Vec::len));
        let mut out: Vec<IpAddr> = Vec::with_capacity(nodes);
        for (i, n) in self.in_group(group) {
            n.answers_into(line, self.effects.get(i).unwrap_or(&none), self.mode, &mut out);
        }
        out.sort_unstable();
        out.dedup();
        // A line that answers a few of many nodes does not keep the room of all of them in
        // every revision and snapshot that holds its list.
        if out.capacity() > 2 * out.len() {
            out.shrink_to_fit();
        }
        out
    }

    /// The answer of `line`. `switch_to_backup` is a switch-to-backup-groups action in effect;
    /// `previous` the line's records over the removal window, oldest first, the published ones
    /// last (empty: nothing to protect, as when never published).
    pub fn answer(&self, line: &LineSpec, switch_to_backup: bool, previous: &[&[IpAddr]]) -> LineAnswer {
        let automatic = self.mode == DnsMode::Automatic;
        let min = line.min_healthy as usize;
        let mut records = self.healthy(line.id, line.group);
        let mut source = Source::Group;
        let mut backup_groups_unavailable = false;
        // Manual mode applies neither rules nor backup groups.
        let wants_backup = automatic && (records.len() < min || switch_to_backup);
        if wants_backup {
            let found = line.backup_groups.iter().find_map(|&g| {
                let r = self.healthy(line.id, Some(g));
                (r.len() >= min).then_some((g, r))
            });
            match found {
                Some((g, r)) => {
                    records = r;
                    source = Source::BackupGroup { group: g };
                }
                None => backup_groups_unavailable = switch_to_backup,
            }
        }
        if let Some((kept, reason)) = self.hold(previous, &records) {
            return self.all_down(line, kept, reason, records, source, backup_groups_unavailable);
        }
        if records.is_empty() {
            return match line.all_down {
                AllDown::Nodata if automatic => LineAnswer {
                    records,
                    source: Source::AllDown { policy: AllDown::Nodata, reason: "no healthy address".into() },
                    backup_groups_unavailable,
                },
                _ => self.fallback(line, backup_groups_unavailable),
            };
        }
        LineAnswer { records, source, backup_groups_unavailable }
    }

    /// The answer by `line`'s all-down policy when health would leave it empty or take too
    /// much of it at once (`kept`, `reason`): `hold` keeps `kept`; `online` adds every online
    /// node of the cluster to what is healthy, and holds when no node is online; `nodata` fails
    /// closed when nothing is healthy, and otherwise lets the removal through, for what is left
    /// is healthy.
    fn all_down(
        &self,
        line: &LineSpec,
        kept: &[IpAddr],
        reason: String,
        healthy: Vec<IpAddr>,
        source: Source,
        backup_groups_unavailable: bool,
    ) -> LineAnswer {
        let held = |reason: String| LineAnswer {
            records: kept.to_vec(),
            source: Source::Held { reason },
            backup_groups_unavailable,
        };
        match line.all_down {
            AllDown::Hold => held(reason),
            AllDown::Online => {
                let mut records = self.primaries_of(None, |n| n.enabled && n.online);
                if records.is_empty() {
                    return held(format!("{reason}; no node is online, so keeping the previous records"));
                }
                records.extend(healthy);
                records.sort_unstable();
                records.dedup();
                LineAnswer {
                    records,
                    source: Source::AllDown {
                        policy: AllDown::Online,
                        reason: format!("{reason}; answering every online node"),
                    },
                    backup_groups_unavailable,
                }
            }
            AllDown::Nodata if healthy.is_empty() => LineAnswer {
                records: healthy,
                source: Source::AllDown { policy: AllDown::Nodata, reason: "no healthy address".into() },
                backup_groups_unavailable,
            },
            AllDown::Nodata => LineAnswer { records: healthy, source, backup_groups_unavailable },
        }
    }

    /// Mass-removal protection: the records to keep instead of `next`, and why, when `next`
    /// must not replace them. `next` is measured against each of `previous` (the window), and
    /// of those it must not replace the fullest is kept (the newest of equals): a cut noticed
    /// over a few passes is held like one noticed in a single pass, with the records from before
    /// it began, and a hold goes on keeping them once they have left the window.
    fn hold<'p>(&self, previous: &[&'p [IpAddr]], next: &[IpAddr]) -> Option<(&'p [IpAddr], String)> {
        previous
            .iter()
            .filter(|p| !p.is_empty())
            .filter_map(|prev| Some((*prev, self.hold_reason(prev, next)?)))
            .max_by_key(|(kept, _)| kept.len())
    }

    /// Why `next` must not replace `prev`, if it must not. An empty answer is held when health
    /// took an address away (not when every address left only waits to be verified); otherwise
    /// the net removal (records removed by health minus records added in their place) may not
    /// exceed the limit.
    fn hold_reason(&self, prev: &[IpAddr], next: &[IpAddr]) -> Option<String> {
        debug_assert!(prev.is_sorted() && next.is_sorted(), "a line's records are sorted");
        let removed = not_in(not_in(prev.iter(), next), self.pending).count();
        if next.is_empty() {
            return (removed > 0).then(|| "no healthy address; keeping the previous records".into());
        }
        if self.mode == DnsMode::Manual {
            return None;
        }
        let added = not_in(next.iter(), prev).count();
        let net = removed.saturating_sub(added);
        (net * 100 > self.mass_removal_pct as usize * prev.len()).then(|| {
            format!(
                "would remove {net} of {} records at once (more than the mass-removal limit of {} %)",
                prev.len(),
                self.mass_removal_pct
            )
        })
    }

    /// Never empty while the cluster has enabled nodes: online enabled nodes of the line's
    /// group, then its enabled nodes, then the same over the whole cluster. A node the operator
    /// disabled is never answered.
    fn fallback(&self, line: &LineSpec, backup_groups_unavailable: bool) -> LineAnswer {
        type Tier = (&'static str, Option<GroupId>, fn(&NodeFacts) -> bool);
        let tiers: [Tier; 4] = [
            ("online nodes of the group", line.group, |n| n.enabled && n.online),
            ("enabled nodes of the group", line.group, |n| n.enabled),
            ("online nodes of the cluster", None, |n| n.enabled && n.online),
            ("enabled nodes of the cluster", None, |n| n.enabled),
        ];
        for (tier, group, pick) in tiers {
            let records = self.primaries_of(group, pick);
            if !records.is_empty() {
                return LineAnswer {
                    records,
                    source: Source::Fallback { tier: tier.into() },
                    backup_groups_unavailable,
                };
            }
        }
        LineAnswer {
            records: Vec::new(),
            source: Source::Fallback { tier: "no enabled node has an address".into() },
            backup_groups_unavailable,
        }
    }

    /// The primary addresses of the nodes of `group` (every group for `None`) that `pick`
    /// takes, sorted, no duplicates.
    fn primaries_of(&self, group: Option<GroupId>, pick: fn(&NodeFacts) -> bool) -> Vec<IpAddr> {
        let mut records: Vec<IpAddr> = self
            .in_group(group)
            .filter(|(_, n)| pick(n))
            .flat_map(|(_, n)| n.primaries.iter().copied())
            .collect();
        records.sort_unstable();
        records.dedup();
        records
    }
}

/// Of `items` (ascending), those `sorted` (ascending) does not hold: one walk of both, so that
/// comparing a line's records with the window's costs their length, not that times its
/// logarithm — a pass where many rules act compares them once per activation (issue 32).
pub(crate) fn not_in<'a>(
    items: impl Iterator<Item = &'a IpAddr> + 'a,
    sorted: &'a [IpAddr],
) -> impl Iterator<Item = &'a IpAddr> + 'a {
    let mut j = 0;
    items.filter(move |ip| {
        while sorted.get(j).is_some_and(|s| s < *ip) {
            j += 1;
        }
        sorted.get(j) != Some(*ip)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn addr(s: &str, level: Level) -> SchedulingAddress {
        SchedulingAddress { ip: ip(s), level, trusted: false, line: None }
    }

    /// The walk of both lists finds what a search of the second for each of the first finds,
    /// over random sorted lists of v4 and v6 addresses, empty ones and equal ones included.
    #[test]
    fn what_one_list_lacks_is_found_in_one_walk() {
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        let mut roll = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        for _ in 0..2_000 {
            let mut list = |len: u64| {
                let mut v: Vec<IpAddr> = (0..roll(len))
                    .map(|_| match roll(3) {
                        0 => IpAddr::from([0x2001, 0xdb8, 0, 0, 0, 0, 0, roll(40) as u16]),
                        _ => IpAddr::from([192, 0, 2, roll(60) as u8]),
                    })
                    .collect();
                v.sort_unstable();
                v.dedup();
                v
            };
            let (a, b) = (list(50), list(50));
            let walked: Vec<&IpAddr> = not_in(a.iter(), &b).collect();
            let searched: Vec<&IpAddr> = a.iter().filter(|ip| b.binary_search(ip).is_err()).collect();
            assert_eq!(walked, searched, "{a:?} against {b:?}");
        }
    }

    #[test]
    fn level_lowest_with_a_reachable_address() {
        let a = [(addr("203.0.113.10", Level::Primary), true), (addr("198.51.100.10", Level::Backup1), true)];
        assert_eq!(
            in_use(&a, false, DnsMode::Automatic),
            InUse { level: Some(Level::Primary), ips: vec![ip("203.0.113.10")] }
        );
        let a =
            [(addr("203.0.113.10", Level::Primary), false), (addr("198.51.100.10", Level::Backup1), true)];
        assert_eq!(
            in_use(&a, false, DnsMode::Automatic),
            InUse { level: Some(Level::Backup1), ips: vec![ip("198.51.100.10")] }
        );
        let a = [
            (addr("203.0.113.10", Level::Primary), false),
            (addr("198.51.100.10", Level::Backup1), false),
            (addr("192.0.2.1", Level::Backup2), true),
        ];
        assert_eq!(in_use(&a, false, DnsMode::Automatic).level, Some(Level::Backup2));
    }

    #[test]
    fn level_every_address_unreachable_means_no_address() {
        let a =
            [(addr("203.0.113.10", Level::Primary), false), (addr("198.51.100.10", Level::Backup1), false)];
        assert_eq!(in_use(&a, false, DnsMode::Automatic), InUse { level: None, ips: vec![] });
    }

    #[test]
    fn level_backup_ip_action_means_at_least_backup1() {
        let a = [
            (addr("203.0.113.10", Level::Primary), true),
            (addr("198.51.100.10", Level::Backup1), false),
            (addr("192.0.2.1", Level::Backup2), true),
        ];
        assert_eq!(in_use(&a, true, DnsMode::Automatic).level, Some(Level::Backup2));
        // No reachable backup: unchanged.
        let a =
            [(addr("203.0.113.10", Level::Primary), true), (addr("198.51.100.10", Level::Backup1), false)];
        assert_eq!(in_use(&a, true, DnsMode::Automatic).level, Some(Level::Primary));
    }

    #[test]
    fn level_manual_mode_uses_primaries_only_without_reachability() {
        let a = [
            (addr("203.0.113.10", Level::Primary), false),
            (addr("203.0.113.11", Level::Primary), true),
            (addr("198.51.100.10", Level::Backup1), true),
        ];
        let u = in_use(&a, true, DnsMode::Manual);
        assert_eq!(u.ips, vec![ip("203.0.113.10"), ip("203.0.113.11")]);
    }

    fn node(id: i64, group: i64, ips: &[&str]) -> NodeFacts {
        let ips: Vec<IpAddr> = ips.iter().map(|s| ip(s)).collect();
        let u = InUse { level: (!ips.is_empty()).then_some(Level::Primary), ips: ips.clone() };
        NodeFacts {
            id: NodeId(id),
            group: GroupId(group),
            enabled: true,
            online: true,
            serving: true,
            in_use: u.clone(),
            in_use_backup: u,
            primaries: ips,
            targets: Vec::new(),
        }
    }

    fn line(min: u32, backups: &[i64]) -> LineSpec {
        LineSpec {
            id: LineId(1),
            name: "local".into(),
            group: Some(GroupId(1)),
            backup_groups: backups.iter().map(|g| GroupId(*g)).collect(),
            min_healthy: min,
            all_down: AllDown::Hold,
            latency: None,
        }
    }

    fn answer_with(
        nodes: &[NodeFacts],
        effects: &[Effects],
        mode: DnsMode,
        line: &LineSpec,
        switch: bool,
        prev: Option<&[IpAddr]>,
    ) -> LineAnswer {
        let groups = GroupIndex::new(nodes);
        LineContext { nodes, groups: &groups, effects, mode, mass_removal_pct: 50, pending: &[] }.answer(
            line,
            switch,
            prev.as_slice(),
        )
    }

    fn answer(nodes: &[NodeFacts], line: &LineSpec, switch: bool, prev: Option<&[IpAddr]>) -> LineAnswer {
        answer_with(nodes, &[], DnsMode::Automatic, line, switch, prev)
    }

    fn ips(list: &[&str]) -> Vec<IpAddr> {
        list.iter().map(|s| ip(s)).collect()
    }

    #[test]
    fn line_answers_with_its_group() {
        let nodes =
            [node(1, 1, &["203.0.113.1"]), node(2, 1, &["203.0.113.2"]), node(3, 2, &["198.51.100.1"])];
        let a = answer(&nodes, &line(1, &[2]), false, None);
        assert_eq!(a.records, ips(&["203.0.113.1", "203.0.113.2"]));
        assert_eq!(a.source, Source::Group);
    }

    #[test]
    fn line_below_minimum_uses_first_backup_group_with_the_minimum() {
        let mut nodes = vec![
            node(1, 1, &["203.0.113.1"]),
            node(2, 2, &["198.51.100.1"]),
            node(3, 3, &["192.0.2.1"]),
            node(4, 3, &["192.0.2.2"]),
        ];
        nodes[0].in_use = InUse::default(); // group 1 has no healthy address
        let a = answer(&nodes, &line(2, &[2, 3]), false, None);
        assert_eq!(a.records, ips(&["192.0.2.1", "192.0.2.2"]), "group 2 has only one address");
        assert_eq!(a.source, Source::BackupGroup { group: GroupId(3) });
    }

    #[test]
    fn line_switch_to_backup_groups_action() {
        let nodes = [node(1, 1, &["203.0.113.1"]), node(2, 2, &["198.51.100.1"])];
        let a = answer(&nodes, &line(1, &[2]), true, Some(&ips(&["203.0.113.1"])));
        assert_eq!(a.records, ips(&["198.51.100.1"]));
        // Without a backup group the action has no effect, and says so.
        let a = answer(&nodes, &line(1, &[]), true, None);
        assert_eq!(a.records, ips(&["203.0.113.1"]));
        assert!(a.backup_groups_unavailable);
    }

    #[test]
    fn line_removed_nodes_leave_the_records() {
        let nodes = vec![node(1, 1, &["203.0.113.1"]), node(2, 1, &["203.0.113.2"])];
        let mut effects = vec![Effects { removed: Scope::Lines(vec![LineId(1)]), ..Default::default() }];
        let a = answer_with(&nodes, &effects, DnsMode::Automatic, &line(1, &[]), false, None);
        assert_eq!(a.records, ips(&["203.0.113.2"]));
        effects[0].removed = Scope::Lines(vec![LineId(9)]);
        let a = answer_with(&nodes, &effects, DnsMode::Automatic, &line(1, &[]), false, None);
        assert_eq!(a.records.len(), 2);
    }

    #[test]
    fn line_mass_removal_protection_keeps_previous_records() {
        let mut nodes =
            vec![node(1, 1, &["203.0.113.1"]), node(2, 1, &["203.0.113.2"]), node(3, 1, &["203.0.113.3"])];
        let prev = ips(&["203.0.113.1", "203.0.113.2", "203.0.113.3"]);
        nodes[0].in_use = InUse::default();
        nodes[1].in_use = InUse::default();
        let a = answer(&nodes, &line(1, &[]), false, Some(&prev));
        assert_eq!(a.records, prev);
        assert_eq!(
            a.source,
            Source::Held {
                reason: "would remove 2 of 3 records at once (more than the mass-removal limit of 50 %)"
                    .into()
            }
        );
        // Removing one of three is fine.
        nodes[1] = node(2, 1, &["203.0.113.2"]);
        let a = answer(&nodes, &line(1, &[]), false, Some(&prev));
        assert_eq!(a.records, ips(&["203.0.113.2", "203.0.113.3"]));
    }

    #[test]
    fn line_removal_spread_over_the_window_is_held_with_the_records_from_before_it() {
        let mut nodes =
            vec![node(1, 1, &["203.0.113.1"]), node(2, 1, &["203.0.113.2"]), node(3, 1, &["203.0.113.3"])];
        let before = ips(&["203.0.113.1", "203.0.113.2", "203.0.113.3"]);
        let published = ips(&["203.0.113.2", "203.0.113.3"]);
        nodes[0].in_use = InUse::default();
        nodes[1].in_use = InUse::default();
        let window: [&[IpAddr]; 2] = [&before, &published];
        let groups = GroupIndex::new(&nodes);
        let ctx = LineContext {
            nodes: &nodes,
            groups: &groups,
            effects: &[],
            mode: DnsMode::Automatic,
            mass_removal_pct: 50,
            pending: &[],
        };
        // One of two against the published records, but two of three within the window.
        let a = ctx.answer(&line(1, &[]), false, &window);
        assert_eq!(a.records, before);
        assert_eq!(
            a.source,
            Source::Held {
                reason: "would remove 2 of 3 records at once (more than the mass-removal limit of 50 %)"
                    .into()
            }
        );
        // Once the records from before have left the window, the same removal goes through.
        let a = ctx.answer(&line(1, &[]), false, &window[1..]);
        assert_eq!(a.records, ips(&["203.0.113.3"]));
        assert_eq!(a.source, Source::Group);
    }

    #[test]
    fn line_replacing_an_address_is_not_a_mass_removal() {
        let mut nodes = vec![node(1, 1, &["203.0.113.10"])];
        nodes[0].in_use = InUse { level: Some(Level::Backup1), ips: ips(&["198.51.100.10"]) };
        let a = answer(&nodes, &line(1, &[]), false, Some(&ips(&["203.0.113.10"])));
        assert_eq!(a.records, ips(&["198.51.100.10"]));
    }

    #[test]
    fn line_empty_answer_keeps_previous_records() {
        let mut nodes = vec![node(1, 1, &["203.0.113.1"])];
        nodes[0].in_use = InUse::default();
        let a = answer(&nodes, &line(1, &[]), false, Some(&ips(&["203.0.113.1"])));
        assert_eq!(a.records, ips(&["203.0.113.1"]));
        assert!(matches!(a.source, Source::Held { .. }));
    }

    #[test]
    fn line_never_empty_falls_back_to_online_then_every_node() {
        let mut nodes = vec![node(1, 1, &["203.0.113.1"]), node(2, 1, &["203.0.113.2"])];
        for n in &mut nodes {
            n.in_use = InUse::default();
        }
        nodes[1].online = false;
        let a = answer(&nodes, &line(1, &[]), false, None);
        assert_eq!(a.records, ips(&["203.0.113.1"]));
        assert_eq!(a.source, Source::Fallback { tier: "online nodes of the group".into() });
        nodes[0].online = false;
        let a = answer(&nodes, &line(1, &[]), false, None);
        assert_eq!(a.records, ips(&["203.0.113.1", "203.0.113.2"]));
        // A line whose group has no node falls back to the cluster.
        let other = LineSpec { group: Some(GroupId(7)), ..line(1, &[]) };
        assert_eq!(answer(&nodes, &other, false, None).records.len(), 2);
        // A node the operator disabled is never answered, not even to keep the line filled.
        nodes[1].enabled = false;
        let a = answer(&nodes, &line(1, &[]), false, None);
        assert_eq!(a.records, ips(&["203.0.113.1"]));
        nodes[0].enabled = false;
        let a = answer(&nodes, &line(1, &[]), false, None);
        assert!(a.records.is_empty(), "{a:?}");
    }

    #[test]
    fn line_manual_mode_ignores_rules_and_backup_groups() {
        let nodes = vec![node(1, 1, &["203.0.113.1"]), node(2, 2, &["198.51.100.1"])];
        let effects = [Effects { removed: Scope::Everywhere, backup_ip: Scope::Everywhere }];
        let a = answer_with(&nodes, &effects, DnsMode::Manual, &line(1, &[2]), true, None);
        assert_eq!(a.records, ips(&["203.0.113.1"]));
    }

    #[test]
    fn line_waiting_for_verification_is_no_removal_to_hold() {
        let mut nodes = vec![node(1, 1, &["203.0.113.1"])];
        nodes[0].in_use = InUse::default();
        let groups = GroupIndex::new(&nodes);
        let pending = ips(&["203.0.113.1"]);
        let ctx = LineContext {
            nodes: &nodes,
            groups: &groups,
            effects: &[],
            mode: DnsMode::Automatic,
            mass_removal_pct: 50,
            pending: &pending,
        };
        let prev = ips(&["203.0.113.1"]);
        let a = ctx.answer(&line(1, &[]), false, &[&prev]);
        assert_eq!(a.records, prev);
        assert_eq!(a.source, Source::Fallback { tier: "online nodes of the group".into() });
    }

    #[test]
    fn line_all_down_policies() {
        let mut nodes =
            vec![node(1, 1, &["203.0.113.1"]), node(2, 1, &["203.0.113.2"]), node(3, 2, &["198.51.100.1"])];
        for n in &mut nodes[..2] {
            n.in_use = InUse::default();
        }
        nodes[1].online = false;
        let prev = ips(&["203.0.113.1", "203.0.113.2"]);
        let with = |policy| LineSpec { all_down: policy, ..line(1, &[]) };
        // hold: the previous records.
        let a = answer(&nodes, &with(AllDown::Hold), false, Some(&prev));
        assert_eq!(a.records, prev);
        assert_eq!(a.source.hold().map(|h| h.policy), Some(AllDown::Hold));
        // online: every online node of the cluster, whatever its group.
        let a = answer(&nodes, &with(AllDown::Online), false, Some(&prev));
        assert_eq!(a.records, ips(&["198.51.100.1", "203.0.113.1"]));
        assert_eq!(a.source.hold().map(|h| h.policy), Some(AllDown::Online));
        // nodata: nothing, with or without previous records.
        for p in [Some(prev.as_slice()), None] {
            let a = answer(&nodes, &with(AllDown::Nodata), false, p);
            assert!(a.records.is_empty());
            assert_eq!(a.source.hold().map(|h| h.policy), Some(AllDown::Nodata));
        }
        // online with no node online holds.
        for n in &mut nodes {
            n.online = false;
        }
        let a = answer(&nodes, &with(AllDown::Online), false, Some(&prev));
        assert_eq!(a.records, prev);
        assert!(matches!(a.source, Source::Held { .. }));
    }

    #[test]
    fn line_nodata_lets_a_mass_removal_through_to_what_is_healthy() {
        let mut nodes =
            vec![node(1, 1, &["203.0.113.1"]), node(2, 1, &["203.0.113.2"]), node(3, 1, &["203.0.113.3"])];
        nodes[0].in_use = InUse::default();
        nodes[1].in_use = InUse::default();
        let prev = ips(&["203.0.113.1", "203.0.113.2", "203.0.113.3"]);
        let l = LineSpec { all_down: AllDown::Nodata, ..line(1, &[]) };
        let a = answer(&nodes, &l, false, Some(&prev));
        assert_eq!(a.records, ips(&["203.0.113.3"]));
        assert_eq!(a.source, Source::Group);
    }

    #[test]
    fn a_stored_plain_reason_reads_as_a_hold() {
        let h: LineHold = serde_json::from_str(r#""no healthy address""#).unwrap();
        assert_eq!(h, LineHold { policy: AllDown::Hold, reason: "no healthy address".into() });
        let h: LineHold = serde_json::from_str(r#"{"policy":"nodata","reason":"x"}"#).unwrap();
        assert_eq!(h.policy, AllDown::Nodata);
    }
}
