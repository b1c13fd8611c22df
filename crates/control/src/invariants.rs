//! The rules that span objects, checked against the configuration snapshot before a change is
//! stored: names unique (compared without case) among their siblings, references that exist
//! and belong to the same cluster, and what may be deleted (with what goes with it). The admin
//! API asks these; it decides none of them itself.

use vantage_core::Timestamp;
use vantage_core::check::Method;
use vantage_core::ids::{ClusterId, GroupId, LineId, RegionId};
use vantage_core::model::{Cluster, Region};
use vantage_core::monitor::Monitor;

use crate::alerts::{Silence, Webhook};
use crate::config::{
    CheckSource, Config, GroupRecord, LineRecord, NamedCheck, NodeRecord, Object, ProberRecord, RuleRecord,
    plural,
};
use crate::maintenance::Maintenance;
use crate::status_page::StatusPage;

/// Why the configuration refuses a change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// A field names something that clashes or does not exist.
    Invalid {
        /// Dotted path of the field.
        field: String,
        /// Why, in plain words.
        reason: String,
    },
    /// The object is still needed by others.
    Conflict(String),
}

impl Refusal {
    /// A refusal of one field.
    pub fn invalid(field: impl Into<String>, reason: impl Into<String>) -> Self {
        Refusal::Invalid { field: field.into(), reason: reason.into() }
    }
}

impl From<vantage_core::Error> for Refusal {
    fn from(e: vantage_core::Error) -> Self {
        Refusal::invalid(e.field(), e.reason())
    }
}

/// The cross-object rules of one kind of object.
pub trait Invariants: Sized {
    /// Checks names and references against the other objects; `id` is its own id.
    fn check(&self, id: i64, c: &Config) -> Result<(), Refusal>;
    /// Checks that object `id` may be deleted; returns the objects deleted with it.
    fn check_delete(id: i64, c: &Config) -> Result<Vec<i64>, Refusal>;
    /// Checks what deleting object `id` takes the operator's word (`force`) for: a delete that
    /// would change what DNS answers beyond the object itself.
    fn check_unforced_delete(_id: i64, _c: &Config) -> Result<(), Refusal> {
        Ok(())
    }
}

/// "1 prober still belongs", "2 probers still belong": `n` of `noun`, `still` and the verb
/// that agrees with them.
fn still(n: usize, noun: &str, one: &str, many: &str) -> String {
    let verb = if n == 1 { one } else { many };
    format!("{} still {verb}", plural(n, noun, &format!("{noun}s")))
}

/// A `check_name` must name a check.
fn named_check_exists(name: Option<&str>, c: &Config) -> Result<(), Refusal> {
    match name {
        Some(n) if c.check(n).is_none() => {
            Err(Refusal::invalid("check_name", format!("no check named {n:?}")))
        }
        _ => Ok(()),
    }
}

/// Monitors probe with `hls`, `http` or `https`: the check a monitor would be probed with
/// must not be a `tcp` one.
fn monitor_check_probes_content(m: &Monitor, c: &Config) -> Result<(), Refusal> {
    let probed = c.monitor_check(m);
    if probed.check.method() != Some(Method::Tcp) {
        return Ok(());
    }
    let (field, whose) = match probed.source {
        CheckSource::Named => ("check_name", "the check it names"),
        _ => ("check", "the check named `default`, which applies to a monitor without a check,"),
    };
    Err(Refusal::invalid(
        field,
        format!("{whose} probes with tcp; monitors probe endpoints with hls, http or https"),
    ))
}

/// Who names the check `name` (compared without case): mirrors by host, clusters and monitors
/// by name — "mirror m1.example.net", "cluster video".
fn named_by(name: &str, c: &Config) -> Vec<String> {
    let names = |n: Option<&str>| n.is_some_and(|n| n.eq_ignore_ascii_case(name));
    let mirrors = c
        .mirrors
        .mirrors
        .values()
        .filter(|m| names(m.check.as_deref()))
        .map(|m| format!("mirror {}", m.host));
    let clusters = c
        .clusters
        .values()
        .filter(|x| names(x.value.check_name.as_deref()))
        .map(|x| format!("cluster {}", x.value.name));
    let monitors = c
        .monitors
        .values()
        .filter(|x| names(x.value.check_name.as_deref()))
        .map(|x| format!("monitor {}", x.value.name));
    mirrors.chain(clusters).chain(monitors).collect()
}

/// Names must be unique among `siblings` (other than `id` itself).
fn unique<'a>(
    label: &str,
    field: &str,
    name: &str,
    id: i64,
    siblings: impl Iterator<Item = (i64, &'a str)>,
) -> Result<(), Refusal> {
    if siblings.filter(|(i, _)| *i != id).any(|(_, n)| n.eq_ignore_ascii_case(name)) {
        return Err(Refusal::invalid(field, format!("{label} {name:?} already exists")));
    }
    Ok(())
}

fn group_in(c: &Config, cluster: ClusterId, g: GroupId, field: &str) -> Result<(), Refusal> {
    match c.groups.get(&g.0) {
        Some(x) if x.value.cluster == cluster => Ok(()),
        _ => Err(Refusal::invalid(field, format!("no node group {g} in this cluster"))),
    }
}

impl Invariants for Region {
    fn check(&self, id: i64, c: &Config) -> Result<(), Refusal> {
        // Monitors name regions by code: a new code would orphan their regions.
        if let Some(old) = c.regions.get(&id).map(|r| r.value.code.as_str())
            && old != self.code
            && let Some(m) = c.monitors.values().find(|m| m.value.regions.iter().any(|r| r.region == old))
        {
            return Err(Refusal::invalid(
                "code",
                format!("monitor {} watches this region as {old:?}; change the monitor first", m.value.name),
            ));
        }
        unique(
            "A region with code",
            "code",
            &self.code,
            id,
            c.regions.iter().map(|(i, r)| (*i, r.value.code.as_str())),
        )?;
        unique(
            "A region named",
            "name",
            &self.name,
            id,
            c.regions.iter().map(|(i, r)| (*i, r.value.name.as_str())),
        )
    }
    fn check_delete(id: i64, c: &Config) -> Result<Vec<i64>, Refusal> {
        let probers = c.probers.values().filter(|p| p.value.region == RegionId(id)).count();
        if probers > 0 {
            return Err(Refusal::Conflict(format!(
                "{} to this region",
                still(probers, "prober", "belongs", "belong")
            )));
        }
        let code = c.regions.get(&id).map(|r| r.value.code.as_str()).unwrap_or_default();
        let monitors =
            c.monitors.values().filter(|m| m.value.regions.iter().any(|r| r.region == code)).count();
        if monitors > 0 {
            return Err(Refusal::Conflict(format!(
                "{} this region",
                still(monitors, "monitor", "watches", "watch")
            )));
        }
        let groups = c.groups.values().filter(|g| g.value.group.region == Some(RegionId(id))).count();
        if groups > 0 {
            return Err(Refusal::Conflict(format!(
                "{} this region",
                still(groups, "node group", "uses", "use")
            )));
        }
        let lines: Vec<&str> = (c.lines.values())
            .filter(|l| l.value.line.latency_region == Some(RegionId(id)))
            .map(|l| l.value.line.name.as_str())
            .collect();
        if !lines.is_empty() {
            return Err(Refusal::Conflict(format!(
                "lines steer by the latency from this region: {}",
                lines.join(", ")
            )));
        }
        Ok(Vec::new())
    }
}

impl Invariants for Cluster {
    fn check(&self, id: i64, c: &Config) -> Result<(), Refusal> {
        unique(
            "A cluster named",
            "name",
            &self.name,
            id,
            c.clusters.iter().map(|(i, x)| (*i, x.value.name.as_str())),
        )?;
        for (field, zone) in std::iter::once(("domain".to_owned(), self.domain.as_str()))
            .chain(self.aliases.iter().enumerate().map(|(n, a)| (format!("aliases[{n}]"), a.as_str())))
        {
            if let Some((_, other)) =
                c.clusters.iter().find(|(i, x)| **i != id && x.value.zones().any(|z| z == zone))
            {
                return Err(Refusal::invalid(
                    field,
                    format!("{zone} is already served by cluster {:?}", other.value.name),
                ));
            }
        }
        named_check_exists(self.check_name.as_deref(), c)
    }
    fn check_delete(id: i64, c: &Config) -> Result<Vec<i64>, Refusal> {
        let nodes = c.nodes_of(ClusterId(id)).count();
        if nodes > 0 {
            return Err(Refusal::Conflict(format!(
                "{} to this cluster",
                still(nodes, "node", "belongs", "belong")
            )));
        }
        // Its groups, lines and rules go with it.
        let cid = ClusterId(id);
        Ok(c.groups_of(cid)
            .map(|(g, _)| g.0)
            .chain(c.lines_of(cid).map(|(l, _)| l.0))
            .chain(c.rules_of(cid).map(|(r, _)| r.0))
            .collect())
    }
}

impl Invariants for GroupRecord {
    fn check(&self, id: i64, c: &Config) -> Result<(), Refusal> {
        let siblings = c.groups_of(self.cluster).map(|(i, g)| (i.0, g.value.group.name.as_str()));
        unique("A node group named", "name", &self.group.name, id, siblings)?;
        if let Some(r) = self.group.region
            && !c.regions.contains_key(&r.0)
        {
            return Err(Refusal::invalid("region", format!("no region {r}")));
        }
        if self.group.region.is_none() {
            let probing = c
                .nodes
                .values()
                .filter(|n| n.value.node.group == GroupId(id) && n.value.node.also_probes)
                .count();
            if probing > 0 {
                return Err(Refusal::invalid(
                    "region",
                    format!(
                        "{} of this group probe; a group whose nodes probe needs a region",
                        plural(probing, "node", "nodes")
                    ),
                ));
            }
        }
        Ok(())
    }
    fn check_delete(id: i64, c: &Config) -> Result<Vec<i64>, Refusal> {
        let nodes = c.nodes.values().filter(|n| n.value.node.group == GroupId(id)).count();
        if nodes > 0 {
            return Err(Refusal::Conflict(format!(
                "{} to this node group",
                still(nodes, "node", "belongs", "belong")
            )));
        }
        let lines: Vec<&str> = c
            .lines
            .values()
            .filter(|l| {
                l.value.line.group == GroupId(id) || l.value.line.backup_groups.contains(&GroupId(id))
            })
            .map(|l| l.value.line.name.as_str())
            .collect();
        if !lines.is_empty() {
            return Err(Refusal::Conflict(format!("lines still use this node group: {}", lines.join(", "))));
        }
        Ok(Vec::new())
    }
}

impl Invariants for LineRecord {
    fn check(&self, id: i64, c: &Config) -> Result<(), Refusal> {
        let siblings = c.lines_of(self.cluster).map(|(i, l)| (i.0, l.value.line.name.as_str()));
        unique("A line named", "name", &self.line.name, id, siblings)?;
        group_in(c, self.cluster, self.line.group, "group")?;
        for (n, g) in self.line.backup_groups.iter().enumerate() {
            group_in(c, self.cluster, *g, &format!("backup_groups[{n}]"))?;
        }
        if let Some(r) = self.line.latency_region.filter(|r| !c.regions.contains_key(&r.0)) {
            return Err(Refusal::invalid("latency_region", format!("no region {r}")));
        }
        if self.line.is_default()
            && let Some((_, other)) =
                c.lines_of(self.cluster).find(|(i, l)| i.0 != id && l.value.line.is_default())
        {
            return Err(Refusal::invalid(
                "client_networks",
                format!(
                    "line {:?} is already the default line (no client networks, countries, continents or ASNs); give this one networks or places",
                    other.value.line.name
                ),
            ));
        }
        Ok(())
    }
    fn check_delete(id: i64, c: &Config) -> Result<Vec<i64>, Refusal> {
        let rules: Vec<&str> = c
            .rules
            .values()
            .filter(|r| r.value.rule.line == Some(LineId(id)))
            .map(|r| r.value.rule.name.as_str())
            .collect();
        if !rules.is_empty() {
            return Err(Refusal::Conflict(format!("rules still use this line: {}", rules.join(", "))));
        }
        let nodes: Vec<&str> = c
            .nodes
            .values()
            .filter(|n| n.value.addresses.as_slice().iter().any(|a| a.line == Some(LineId(id))))
            .map(|n| n.value.node.name.as_str())
            .collect();
        if !nodes.is_empty() {
            return Err(Refusal::Conflict(format!(
                "nodes still have target addresses on this line: {}",
                nodes.join(", ")
            )));
        }
        Ok(Vec::new())
    }
}

impl Invariants for RuleRecord {
    fn check(&self, id: i64, c: &Config) -> Result<(), Refusal> {
        let siblings = c.rules_of(self.cluster).map(|(i, r)| (i.0, r.value.rule.name.as_str()));
        unique("A rule named", "name", &self.rule.name, id, siblings)?;
        let lines: Vec<LineId> = c.lines_of(self.cluster).map(|(l, _)| l).collect();
        self.rule.check_line(&lines)?;
        for (n, cond) in self.rule.conditions.iter().enumerate() {
            if let Some(r) = cond.region.filter(|r| !c.regions.contains_key(&r.0)) {
                return Err(Refusal::invalid(format!("conditions[{n}].region"), format!("no region {r}")));
            }
        }
        Ok(())
    }
    fn check_delete(_: i64, _: &Config) -> Result<Vec<i64>, Refusal> {
        Ok(Vec::new())
    }
}

/// The lines of `cluster` that answer with `group`: those whose group it is, or every line of a
/// cluster without lines (the implicit default line answers with every group).
fn lines_answering_with(c: &Config, cluster: ClusterId, group: GroupId) -> Vec<String> {
    let lines: Vec<&LineRecord> = c.lines_of(cluster).map(|(_, l)| &*l.value).collect();
    if lines.is_empty() {
        return vec!["default".to_owned()];
    }
    lines.iter().filter(|l| l.line.group == group).map(|l| l.line.name.clone()).collect()
}

impl Invariants for NodeRecord {
    fn check(&self, id: i64, c: &Config) -> Result<(), Refusal> {
        if !c.clusters.contains_key(&self.cluster.0) {
            return Err(Refusal::invalid("cluster", format!("no cluster {}", self.cluster)));
        }
        let siblings = c.nodes_of(self.cluster).map(|(i, n)| (i.0, n.value.node.name.as_str()));
        unique("A node named", "name", &self.node.name, id, siblings)?;
        group_in(c, self.cluster, self.node.group, "group")?;
        for (i, a) in self.addresses.as_slice().iter().enumerate() {
            if let Some(line) = a.line
                && c.lines.get(&line.0).is_none_or(|l| l.value.cluster != self.cluster)
            {
                return Err(Refusal::invalid(
                    format!("addresses[{i}].line"),
                    format!("no line {line} in the node's cluster"),
                ));
            }
        }
        if self.node.also_probes {
            let region = c.groups.get(&self.node.group.0).and_then(|g| g.value.group.region);
            if region.is_none() {
                return Err(Refusal::invalid(
                    "also_probes",
                    "Give the node's group a region before the node probes",
                ));
            }
        }
        Ok(())
    }
    fn check_delete(_: i64, _: &Config) -> Result<Vec<i64>, Refusal> {
        Ok(Vec::new())
    }
    /// The last enabled node of a group a line answers with leaves that line to its all-down
    /// policy: only with `force`.
    fn check_unforced_delete(id: i64, c: &Config) -> Result<(), Refusal> {
        let Some(node) = c.nodes.get(&id).map(|n| &n.value) else { return Ok(()) };
        let (cluster, group) = (node.cluster, node.node.group);
        let others = c.nodes_of(cluster).any(|(other, n)| {
            other.0 != id
                && n.value.node.enabled
                && (n.value.node.group == group || c.lines_of(cluster).next().is_none())
        });
        let lines = lines_answering_with(c, cluster, group);
        if !node.node.enabled || others || lines.is_empty() {
            return Ok(());
        }
        let group_name =
            c.groups.get(&group.0).map_or_else(|| group.to_string(), |g| g.value.group.name.clone());
        let (which, them) = match lines.as_slice() {
            [one] => (format!("line {one} answers"), "that line to its"),
            many => (format!("lines {} answer", many.join(", ")), "those lines to their"),
        };
        Err(Refusal::Conflict(format!(
            "{} is the last enabled node of group {group_name}, which {which} with: deleting it leaves {them} all-down policy. Delete it with force (ctl nodes delete --force), or disable it",
            node.node.name
        )))
    }
}

impl Invariants for ProberRecord {
    fn check(&self, id: i64, c: &Config) -> Result<(), Refusal> {
        unique(
            "A prober named",
            "name",
            &self.name,
            id,
            c.probers.iter().map(|(i, p)| (*i, p.value.name.as_str())),
        )?;
        if !c.regions.contains_key(&self.region.0) {
            return Err(Refusal::invalid("region", format!("no region {}", self.region)));
        }
        Ok(())
    }
    fn check_delete(_: i64, _: &Config) -> Result<Vec<i64>, Refusal> {
        Ok(Vec::new())
    }
}

/// Silences stand alone: nothing names them, they name nothing (a matcher may name what does
/// not exist yet, as a silence made before a maintenance does).
impl Invariants for Silence {
    fn check(&self, _: i64, _: &Config) -> Result<(), Refusal> {
        Ok(())
    }
    fn check_delete(_: i64, _: &Config) -> Result<Vec<i64>, Refusal> {
        Ok(Vec::new())
    }
}

/// A window names nodes, groups and monitors that exist when it is planned or changed; one
/// deleted later (a node replaced during the work) is simply no longer drained by it.
impl Invariants for Maintenance {
    /// What it names exists, or it named it already (a node deleted during its window stays
    /// named, so the window can still be changed or ended).
    fn check(&self, id: i64, c: &Config) -> Result<(), Refusal> {
        let was = c.maintenance.get(&id).map(|m| &m.value);
        let gone = |exists: bool, named_before: bool| !exists && !named_before;
        let node = self
            .nodes
            .iter()
            .find(|n| gone(c.nodes.contains_key(&n.0), was.is_some_and(|w| w.nodes.contains(n))));
        let group = self
            .groups
            .iter()
            .find(|g| gone(c.groups.contains_key(&g.0), was.is_some_and(|w| w.groups.contains(g))));
        let monitor = self
            .monitors
            .iter()
            .find(|m| gone(c.monitors.contains_key(&m.0), was.is_some_and(|w| w.monitors.contains(m))));
        let named = [
            ("nodes", "node", node.map(|n| n.0)),
            ("groups", "node group", group.map(|g| g.0)),
            ("monitors", "monitor", monitor.map(|m| m.0)),
        ];
        match named.into_iter().find_map(|(field, noun, id)| Some((field, noun, id?))) {
            Some((field, noun, id)) => Err(Refusal::invalid(field, format!("no {noun} {id}"))),
            None => Ok(()),
        }
    }
    fn check_delete(_: i64, _: &Config) -> Result<Vec<i64>, Refusal> {
        Ok(Vec::new())
    }
}

/// A page's slug is its own; what it shows exists (a cluster, monitor or tenant deleted later
/// leaves it, unshown).
impl Invariants for StatusPage {
    fn check(&self, id: i64, c: &Config) -> Result<(), Refusal> {
        unique(
            "A status page with slug",
            "slug",
            &self.slug,
            id,
            c.status_pages.iter().map(|(i, p)| (*i, p.value.slug.as_str())),
        )?;
        if let Some((i, cl)) = self.clusters.iter().enumerate().find(|(_, x)| !c.clusters.contains_key(&x.0))
        {
            return Err(Refusal::invalid(format!("clusters[{i}]"), format!("no cluster {cl}")));
        }
        if let Some((i, m)) = self.monitors.iter().enumerate().find(|(_, x)| !c.monitors.contains_key(&x.0)) {
            return Err(Refusal::invalid(format!("monitors[{i}]"), format!("no monitor {m}")));
        }
        if let Some((i, t)) =
            self.tenants.iter().enumerate().find(|(_, t)| !c.mirrors.tenants.contains_key(*t))
        {
            return Err(Refusal::invalid(format!("tenants[{i}]"), format!("no tenant {t:?}")));
        }
        Ok(())
    }
    fn check_delete(_: i64, _: &Config) -> Result<Vec<i64>, Refusal> {
        Ok(Vec::new())
    }
}

impl Invariants for Webhook {
    fn check(&self, id: i64, c: &Config) -> Result<(), Refusal> {
        unique(
            "A webhook named",
            "name",
            &self.name,
            id,
            c.webhooks.iter().map(|(i, w)| (*i, w.value.name.as_str())),
        )
    }
    fn check_delete(_: i64, _: &Config) -> Result<Vec<i64>, Refusal> {
        Ok(Vec::new())
    }
}

impl Invariants for NamedCheck {
    fn check(&self, id: i64, c: &Config) -> Result<(), Refusal> {
        unique(
            "A check named",
            "name",
            &self.name,
            id,
            c.checks.iter().map(|(i, x)| (*i, x.value.name.as_str())),
        )?;
        // A rename would leave the mirrors, clusters and monitors that name the old name
        // without their check.
        if let Some(old) = c.checks.get(&id).map(|x| x.value.name.as_str())
            && !old.eq_ignore_ascii_case(&self.name)
            && let Some(user) = named_by(old, c).first()
        {
            return Err(Refusal::invalid(
                "name",
                format!("{user} names this check as {old:?}; point it at another check first"),
            ));
        }
        // Every monitor probed with this check after the change must still probe content.
        if self.check.method() == Some(Method::Tcp) {
            let mut next = c.clone();
            let created = c.checks.get(&id).map_or(Timestamp::EPOCH, |x| x.created_at);
            next.put(id, Object::Check(self.clone()), created, created);
            if let Some(m) = next
                .monitors
                .values()
                .find(|m| next.monitor_check(&m.value).check.method() == Some(Method::Tcp))
            {
                return Err(Refusal::invalid(
                    "method",
                    format!(
                        "monitor {} is probed with this check; monitors probe endpoints with hls, http or https",
                        m.value.name
                    ),
                ));
            }
        }
        Ok(())
    }
    fn check_delete(id: i64, c: &Config) -> Result<Vec<i64>, Refusal> {
        let Some(name) = c.checks.get(&id).map(|x| x.value.name.as_str()) else { return Ok(Vec::new()) };
        // Mirrors, clusters and monitors without a check use `default`, and fall back to the
        // built-in check of their kind when it goes; one naming a check by name would be left
        // without it.
        let users = named_by(name, c);
        if !users.is_empty() && !name.eq_ignore_ascii_case("default") {
            return Err(Refusal::Conflict(format!(
                "this check is still named by {}; point {} at another check first",
                users.join(", "),
                if users.len() == 1 { "it" } else { "them" }
            )));
        }
        Ok(Vec::new())
    }
}

impl Invariants for Monitor {
    fn check(&self, id: i64, c: &Config) -> Result<(), Refusal> {
        unique(
            "A monitor named",
            "name",
            &self.name,
            id,
            c.monitors.iter().map(|(i, x)| (*i, x.value.name.as_str())),
        )?;
        for (n, r) in self.regions.iter().enumerate() {
            if !c.has_region(&r.region) {
                return Err(Refusal::invalid(
                    format!("regions[{n}].region"),
                    format!("no region with code {:?}", r.region),
                ));
            }
        }
        named_check_exists(self.check_name.as_deref(), c)?;
        monitor_check_probes_content(self, c)
    }
    fn check_delete(_: i64, _: &Config) -> Result<Vec<i64>, Refusal> {
        Ok(Vec::new())
    }
}
