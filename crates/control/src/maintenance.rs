//! Maintenance windows: planned work on nodes, node groups, mirrors and monitors. While a
//! window is open its nodes and groups are drained (out of the answers at once, still probed),
//! its mirrors are not redirected to, and the notifications of its targets' alerts are held
//! as a silence holds them. Kept as configuration objects, so every replica sees the same
//! windows and each change is audited; opening and closing are the core's timers.

use serde::{Deserialize, Serialize};
use vantage_core::ids::{ClusterId, GroupId, MonitorId, NodeId};
use vantage_core::model::Node;
use vantage_core::{Error, Timestamp};

use crate::alerts::AlertAbout;
use crate::config::Config;
use crate::drain::DrainCause;

/// Longest a window may last.
pub const MAX_WINDOW_S: u64 = 30 * 86_400;
/// How far ahead a window may be planned.
pub const MAX_AHEAD_S: u64 = 366 * 86_400;
/// Targets of one window at most.
const MAX_TARGETS: usize = 1_000;
const MAX_NAME: usize = 64;
const MAX_COMMENT: usize = 500;

/// A maintenance window as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Maintenance {
    /// What the work is, in a few words (`kernel upgrade`).
    pub name: String,
    /// When it opens: its nodes leave the answers then.
    pub starts_at: Timestamp,
    /// When it closes: they come back.
    pub ends_at: Timestamp,
    /// Nodes drained while it is open.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<NodeId>,
    /// Node groups drained while it is open (every node of each).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<GroupId>,
    /// Mirrors, by host, not redirected to while it is open.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mirrors: Vec<String>,
    /// Monitors whose alerts it holds.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub monitors: Vec<MonitorId>,
    /// Why, in the operator's words.
    #[serde(default)]
    pub comment: String,
    /// Who planned it (the admin token's name).
    pub created_by: String,
}

/// What a new window is asked with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct MaintenanceCreate {
    /// What the work is.
    pub name: String,
    /// When it opens (absent: now).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub starts_at: Option<Timestamp>,
    /// How long it lasts, seconds (or give `ends_at`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_s: Option<u64>,
    /// When it closes (or give `duration_s`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ends_at: Option<Timestamp>,
    #[serde(default)]
    pub nodes: Vec<NodeId>,
    #[serde(default)]
    pub groups: Vec<GroupId>,
    #[serde(default)]
    pub mirrors: Vec<String>,
    #[serde(default)]
    pub monitors: Vec<MonitorId>,
    /// Why.
    #[serde(default)]
    pub comment: String,
}

impl MaintenanceCreate {
    /// The window `by` plans at `now`.
    pub fn maintenance(self, by: &str, now: Timestamp) -> Result<Maintenance, Error> {
        let starts_at = self.starts_at.unwrap_or(now);
        let ends_at = crate::alerts::ends(starts_at, (self.duration_s, self.ends_at), MAX_WINDOW_S)?;
        let m = Maintenance {
            name: self.name,
            starts_at,
            ends_at,
            nodes: self.nodes,
            groups: self.groups,
            mirrors: self.mirrors,
            monitors: self.monitors,
            comment: self.comment,
            created_by: by.to_owned(),
        };
        if m.ends_at <= now {
            return Err(Error::invalid("ends_at", "a new window must end in the future"));
        }
        m.check(now)
    }
}

impl Maintenance {
    /// Validates a window at `now`: a name, an end after its start within 30 days of it, a
    /// start within a year, 1 to 1,000 targets, each named once; mirror hosts lower-cased. A
    /// change may end a window early (an end at or before `now` closes it now).
    pub fn check(mut self, now: Timestamp) -> Result<Maintenance, Error> {
        let name = self.name.trim();
        if name.is_empty() || name.chars().count() > MAX_NAME || name.chars().any(char::is_control) {
            return Err(Error::invalid("name", format!("1 to {MAX_NAME} printable characters")));
        }
        self.name = name.to_owned();
        if self.comment.chars().count() > MAX_COMMENT {
            return Err(Error::invalid("comment", format!("at most {MAX_COMMENT} characters")));
        }
        if self.ends_at <= self.starts_at {
            return Err(Error::invalid("ends_at", "must be after starts_at"));
        }
        if self.ends_at.millis_since(self.starts_at) > i64::try_from(MAX_WINDOW_S * 1000).unwrap_or(i64::MAX)
        {
            return Err(Error::invalid("ends_at", "a window lasts at most 30 days"));
        }
        if self.starts_at.millis_since(now) > i64::try_from(MAX_AHEAD_S * 1000).unwrap_or(i64::MAX) {
            return Err(Error::invalid("starts_at", "a window starts within a year"));
        }
        let targets = self.nodes.len() + self.groups.len() + self.mirrors.len() + self.monitors.len();
        if targets == 0 || targets > MAX_TARGETS {
            return Err(Error::invalid(
                "nodes",
                format!("1 to {MAX_TARGETS} targets in all (nodes, groups, mirrors, monitors)"),
            ));
        }
        for (i, host) in self.mirrors.iter_mut().enumerate() {
            *host = vantage_core::model::dns_name(&format!("mirrors[{i}]"), host)?;
        }
        once("nodes", &self.nodes)?;
        once("groups", &self.groups)?;
        once("mirrors", &self.mirrors)?;
        once("monitors", &self.monitors)?;
        Ok(self)
    }

    /// Open at `now`.
    pub fn is_open(&self, now: Timestamp) -> bool {
        self.state(now) == MaintenanceState::Open
    }

    /// Where it is in its life at `now`.
    pub fn state(&self, now: Timestamp) -> MaintenanceState {
        if now < self.starts_at {
            MaintenanceState::Planned
        } else if now < self.ends_at {
            MaintenanceState::Open
        } else {
            MaintenanceState::Closed
        }
    }

    /// Whether it drains node `node` of group `group`.
    pub fn drains(&self, node: NodeId, group: GroupId) -> bool {
        self.nodes.contains(&node) || self.groups.contains(&group)
    }

    /// The clusters of the nodes and groups it names (those that exist in `c`).
    pub fn clusters(&self, c: &Config) -> std::collections::BTreeSet<ClusterId> {
        let nodes = self.nodes.iter().filter_map(|n| c.nodes.get(&n.0).map(|r| r.value.cluster));
        let groups = self.groups.iter().filter_map(|g| c.groups.get(&g.0).map(|r| r.value.cluster));
        nodes.chain(groups).collect()
    }

    /// Its targets in words (`node edge-1`, `group eu`, `mirror m.example.net`, `monitor live`);
    /// one deleted since reads by its id.
    pub fn targets(&self, c: &Config) -> Vec<String> {
        let nodes = self.nodes.iter().map(|n| match c.nodes.get(&n.0) {
            Some(r) => format!("node {}", r.value.node.name),
            None => format!("node {n}"),
        });
        let groups = self.groups.iter().map(|g| match c.groups.get(&g.0) {
            Some(r) => format!("group {}", r.value.group.name),
            None => format!("group {g}"),
        });
        let mirrors = self.mirrors.iter().map(|h| format!("mirror {h}"));
        let monitors = self.monitors.iter().map(|m| match c.monitors.get(&m.0) {
            Some(r) => format!("monitor {}", r.value.name),
            None => format!("monitor {m}"),
        });
        nodes.chain(groups).chain(mirrors).chain(monitors).collect()
    }

    /// Whether it takes mirror `host` out of the redirects.
    pub fn takes_mirror(&self, host: &str) -> bool {
        self.mirrors.iter().any(|m| m.eq_ignore_ascii_case(host))
    }

    /// Whether an alert about `about` is one of its targets': a node it drains (its
    /// addresses, certificates, agent, a rule's action on it), a line whose group it drains, a
    /// mirror or a monitor it names. Probers are never its targets.
    pub fn covers(&self, about: &AlertAbout, c: &Config) -> bool {
        let group_of = |n: NodeId| c.nodes.get(&n.0).map(|r| r.value.node.group);
        if let Some(node) = about.node() {
            return group_of(node).is_some_and(|g| self.drains(node, g));
        }
        match about {
            AlertAbout::Line { line, .. } => {
                c.lines.get(&line.0).is_some_and(|l| self.groups.contains(&l.value.line.group))
            }
            AlertAbout::Mirror(host) => self.takes_mirror(host),
            AlertAbout::Monitor(m) => self.monitors.contains(m),
            _ => false,
        }
    }
}

/// Where a maintenance window is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum MaintenanceState {
    /// Opens later.
    Planned,
    /// Draining its targets and holding their alerts.
    Open,
    /// Over (kept until deleted, as a record).
    Closed,
}

/// `items` name each target once.
fn once<T: PartialEq + std::fmt::Debug>(field: &str, items: &[T]) -> Result<(), Error> {
    for (i, item) in items.iter().enumerate() {
        if items[..i].contains(item) {
            return Err(Error::invalid(format!("{field}[{i}]"), format!("{item:?} is named twice")));
        }
    }
    Ok(())
}

impl Config {
    /// Why node `node` is drained at `now`, if it is: its own flag first, then its group's,
    /// then the oldest open window that names it or its group.
    pub fn drain_of(&self, node: NodeId, now: Timestamp) -> Option<DrainCause> {
        self.drain_of_node(node, &self.nodes.get(&node.0)?.value.node, now)
    }

    /// [`drain_of`](Self::drain_of) node `node`, whose record `n` is at hand (a pass walking
    /// its cluster's nodes looks none up).
    pub fn drain_of_node(&self, node: NodeId, n: &Node, now: Timestamp) -> Option<DrainCause> {
        // A disabled node is out of everything, probing included: not drained.
        if !n.enabled {
            return None;
        }
        if n.drained {
            return Some(DrainCause::Node);
        }
        if self.groups.get(&n.group.0).is_some_and(|g| g.value.group.drained) {
            return Some(DrainCause::Group);
        }
        self.maintenance
            .iter()
            .find(|(_, m)| m.value.is_open(now) && m.value.drains(node, n.group))
            .map(|(id, _)| DrainCause::Maintenance { id: *id })
    }

    /// The open window that holds the notifications of an alert about `about` at `now` (the
    /// oldest, when several do).
    pub fn maintenance_of(&self, about: &AlertAbout, now: Timestamp) -> Option<i64> {
        self.maintenance
            .iter()
            .find(|(_, m)| m.value.is_open(now) && m.value.covers(about, self))
            .map(|(id, _)| *id)
    }

    /// The mirror hosts of the windows open at `now`: out of the doors' rotation.
    pub fn maintenance_mirrors(&self, now: Timestamp) -> std::collections::BTreeSet<String> {
        (self.maintenance.values())
            .filter(|m| m.value.is_open(now))
            .flat_map(|m| m.value.mirrors.iter().cloned())
            .collect()
    }

    /// The next time after `now` at which a window opens or closes.
    pub fn next_maintenance_edge(&self, now: Timestamp) -> Option<Timestamp> {
        self.maintenance
            .values()
            .flat_map(|m| [m.value.starts_at, m.value.ends_at])
            .filter(|t| *t > now)
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask() -> MaintenanceCreate {
        MaintenanceCreate {
            name: " kernel upgrade ".into(),
            starts_at: None,
            duration_s: Some(3600),
            ends_at: None,
            nodes: vec![NodeId(3)],
            groups: Vec::new(),
            mirrors: vec!["Mirror.Example.NET".into()],
            monitors: Vec::new(),
            comment: String::new(),
        }
    }

    #[test]
    fn a_window_is_checked_field_by_field() {
        let now = Timestamp::from_millis(1_000_000);
        let m = ask().maintenance("ops", now).unwrap();
        assert_eq!((m.name.as_str(), m.starts_at, m.ends_at), ("kernel upgrade", now, now.plus_secs(3600)));
        assert_eq!(m.mirrors, ["mirror.example.net"]);
        assert!(m.is_open(now) && !m.is_open(now.plus_secs(3600)));
        let field = |a: MaintenanceCreate| a.maintenance("ops", now).unwrap_err().field().to_owned();
        assert_eq!(field(MaintenanceCreate { duration_s: None, ..ask() }), "duration_s");
        assert_eq!(field(MaintenanceCreate { duration_s: Some(MAX_WINDOW_S + 1), ..ask() }), "duration_s");
        assert_eq!(field(MaintenanceCreate { name: " ".into(), ..ask() }), "name");
        assert_eq!(field(MaintenanceCreate { nodes: Vec::new(), mirrors: Vec::new(), ..ask() }), "nodes");
        assert_eq!(field(MaintenanceCreate { nodes: vec![NodeId(3), NodeId(3)], ..ask() }), "nodes[1]");
        assert_eq!(field(MaintenanceCreate { mirrors: vec!["a b".into()], ..ask() }), "mirrors[0]");
        let past = MaintenanceCreate { duration_s: None, ends_at: Some(now.plus_millis(-1000)), ..ask() };
        assert_eq!(field(past), "ends_at");
        let far = MaintenanceCreate { starts_at: Some(now.plus_secs(MAX_AHEAD_S + 1)), ..ask() };
        assert_eq!(field(far), "starts_at");
    }
}
