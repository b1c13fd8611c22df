//! The configuration in memory: every object, validated, with the references between them,
//! and the invariants that span objects (unique names, who a certificate belongs to). The
//! server loads it whole from the store at start; a change is checked against the current
//! snapshot, written to the store with its audit entries in one transaction, and only then
//! handed to the control core, which owns the snapshot.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use vantage_core::Timestamp;
use vantage_core::address::AddressList;
use vantage_core::check::Check;
use vantage_core::detection::DetectionSettings;
use vantage_core::ids::{ClusterId, GroupId, LineId, NodeId, RegionId};
use vantage_core::mirror::MirrorSettings;
use vantage_core::model::{Cluster, Line, Node, NodeGroup, Region};
use vantage_core::monitor::Monitor;
use vantage_core::rules::Rule;
use vantage_core::settings::ProbeSettings;

use crate::alerts::{Alert, AlertKey, Hold, Silence, Webhook};
use crate::maintenance::Maintenance;
use crate::mirrors::Registry;
use crate::status_page::StatusPage;

/// A stored object with its times. The object is shared: a change copies the configuration,
/// and with it 10,000 nodes would be 10,000 deep copies (names, addresses) per change instead
/// of pointers.
#[derive(Debug, Clone, PartialEq)]
pub struct Stored<T> {
    /// The object.
    pub value: Arc<T>,
    pub created_at: Timestamp,
    /// Last changed.
    pub updated_at: Timestamp,
}

/// A node group and its cluster.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupRecord {
    pub cluster: ClusterId,
    pub group: NodeGroup,
}

/// A line and its cluster.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LineRecord {
    pub cluster: ClusterId,
    pub line: Line,
}

/// A rule and its cluster.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RuleRecord {
    pub cluster: ClusterId,
    pub rule: Rule,
}

/// A node, its cluster and its configured scheduling addresses.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeRecord {
    pub cluster: ClusterId,
    pub node: Node,
    /// Configured addresses (empty: the reported ones are used).
    pub addresses: AddressList,
    /// SHA-256 of the agent's current client certificate, once enrolled.
    #[serde(default)]
    pub cert_sha256: Option<String>,
    /// When that certificate was issued.
    #[serde(default)]
    pub cert_issued_at: Option<Timestamp>,
    /// The source address of the agent's enrollment connection (its latest one: a node
    /// enrolled again with a new token).
    #[serde(default)]
    pub enrolled_from: Option<std::net::IpAddr>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProberRecord {
    /// Name (at most 64 characters), unique.
    pub name: String,
    pub region: RegionId,
    /// Disabled probers are refused by the channel and their results do not count.
    pub enabled: bool,
    /// SHA-256 of its current client certificate.
    #[serde(default)]
    pub cert_sha256: Option<String>,
    /// When that certificate was issued.
    #[serde(default)]
    pub cert_issued_at: Option<Timestamp>,
}

/// An admin API token (only its hash is kept).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AdminToken {
    /// Name, unique.
    pub name: String,
    /// The first characters, to recognise it.
    pub prefix: String,
    /// SHA-256 of the token, hex.
    pub sha256: String,
    /// May read everything, change nothing (dashboards, on-call viewers).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub read_only: bool,
}

/// A named check (SPEC §3.1): how the mirrors, clusters and monitors that name it are probed.
/// The one named `default` applies to those that name none and have no check of their own.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NamedCheck {
    /// Name (at most 64 characters), unique.
    pub name: String,
    pub check: Check,
}

/// Where the check a cluster or monitor is probed with comes from, in the order they are
/// looked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum CheckSource {
    /// Its own check (`check`).
    Own,
    /// The named check it names (`check_name`).
    Named,
    /// It has no check and names none: the check named `default`.
    Default,
    /// It has no check, names none, and no check is named `default`: the built-in check of
    /// its kind.
    Builtin,
}

/// The check a cluster or monitor is probed with, and where it comes from.
#[derive(Debug, Clone, PartialEq)]
pub struct Probed {
    pub check: Check,
    pub source: CheckSource,
    /// The named check's name (for `named` and `default`).
    pub name: Option<String>,
}

/// Who an enrollment token is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// A `vantage probe` process.
    Prober,
    /// A `vantage agent` on a node.
    Node,
}

/// A single-use enrollment token (only its hash is kept).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EnrollToken {
    /// Prober or node.
    pub role: Role,
    /// Prober name to create (prober tokens).
    pub name: String,
    /// Region of the prober to create (prober tokens).
    pub region: Option<RegionId>,
    /// The node it enrolls (node tokens).
    pub node: Option<NodeId>,
    /// The first characters.
    pub prefix: String,
    /// SHA-256, hex.
    pub sha256: String,
    /// Not valid after.
    pub expires_at: Timestamp,
    /// When it was used; a used token is refused.
    pub used_at: Option<Timestamp>,
}

/// Where an enrollment token stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum TokenState {
    /// It may still be used.
    Valid,
    /// It was used (tokens are single use).
    Used,
    /// Its validity ran out unused.
    Expired,
}

impl EnrollToken {
    /// Where the token stands at `now`.
    pub fn state(&self, now: Timestamp) -> TokenState {
        if self.used_at.is_some() {
            TokenState::Used
        } else if self.expires_at < now {
            TokenState::Expired
        } else {
            TokenState::Valid
        }
    }
}

/// Every kind of stored object.
#[derive(Debug, Clone, PartialEq)]
pub enum Object {
    /// The probe settings (one).
    Settings(ProbeSettings),
    Region(Region),
    Cluster(Cluster),
    /// A node group.
    Group(GroupRecord),
    Line(LineRecord),
    Node(NodeRecord),
    Rule(RuleRecord),
    Prober(ProberRecord),
    /// An admin token.
    AdminToken(AdminToken),
    /// An enrollment token.
    EnrollToken(EnrollToken),
    /// A webhook sink for alerts.
    Webhook(Webhook),
    /// A named check.
    Check(NamedCheck),
    /// The mirror and door settings (one).
    MirrorSettings(MirrorSettings),
    /// The detection settings (one).
    Detection(DetectionSettings),
    /// A video monitor.
    Monitor(Monitor),
    /// A silence of some alerts' notifications.
    Silence(Silence),
    /// A maintenance window.
    Maintenance(Maintenance),
    /// A public status page.
    StatusPage(StatusPage),
}

impl Object {
    /// The kind as stored.
    pub fn kind(&self) -> &'static str {
        match self {
            Object::Settings(_) => "settings",
            Object::Region(_) => "region",
            Object::Cluster(_) => "cluster",
            Object::Group(_) => "group",
            Object::Line(_) => "line",
            Object::Node(_) => "node",
            Object::Rule(_) => "rule",
            Object::Prober(_) => "prober",
            // A kind of its own, so that a server older than read-only tokens refuses to start
            // on one rather than take it for a full admin token.
            Object::AdminToken(t) if t.read_only => "admin_token_read_only",
            Object::AdminToken(_) => "admin_token",
            Object::EnrollToken(_) => "enroll_token",
            Object::Webhook(_) => "webhook",
            Object::Check(_) => "check",
            Object::MirrorSettings(_) => "mirror_settings",
            Object::Detection(_) => "detection_settings",
            Object::Monitor(_) => "monitor",
            Object::Silence(_) => "silence",
            Object::Maintenance(_) => "maintenance",
            Object::StatusPage(_) => "status_page",
        }
    }

    /// The name it is stored and looked up under.
    pub fn name(&self) -> String {
        match self {
            Object::Settings(_) => "probes".into(),
            Object::Region(r) => r.code.clone(),
            Object::Cluster(c) => c.name.clone(),
            Object::Group(g) => g.group.name.clone(),
            Object::Line(l) => l.line.name.clone(),
            Object::Node(n) => n.node.name.clone(),
            Object::Rule(r) => r.rule.name.clone(),
            Object::Prober(p) => p.name.clone(),
            Object::AdminToken(t) => t.name.clone(),
            Object::EnrollToken(t) => t.prefix.clone(),
            Object::Webhook(w) => w.name.clone(),
            Object::Check(c) => c.name.clone(),
            Object::MirrorSettings(_) => "mirrors".into(),
            Object::Detection(_) => "detection".into(),
            Object::Monitor(m) => m.name.clone(),
            // Silences have no name: what they match says what they are.
            Object::Silence(s) => s.matchers.join(" "),
            Object::Maintenance(m) => m.name.clone(),
            Object::StatusPage(p) => p.slug.clone(),
        }
    }

    /// The object it belongs to (a child's cluster, a prober's region).
    pub fn parent(&self) -> Option<i64> {
        match self {
            Object::Group(g) => Some(g.cluster.0),
            Object::Line(l) => Some(l.cluster.0),
            Object::Node(n) => Some(n.cluster.0),
            Object::Rule(r) => Some(r.cluster.0),
            Object::Prober(p) => Some(p.region.0),
            _ => None,
        }
    }

    /// The stored JSON body.
    pub fn body(&self) -> Result<String, serde_json::Error> {
        match self {
            Object::Settings(v) => serde_json::to_string(v),
            Object::Region(v) => serde_json::to_string(v),
            Object::Cluster(v) => serde_json::to_string(v),
            Object::Group(v) => serde_json::to_string(v),
            Object::Line(v) => serde_json::to_string(v),
            Object::Node(v) => serde_json::to_string(v),
            Object::Rule(v) => serde_json::to_string(v),
            Object::Prober(v) => serde_json::to_string(v),
            Object::AdminToken(v) => serde_json::to_string(v),
            Object::EnrollToken(v) => serde_json::to_string(v),
            Object::Webhook(v) => serde_json::to_string(v),
            Object::Check(v) => serde_json::to_string(v),
            Object::MirrorSettings(v) => serde_json::to_string(v),
            Object::Detection(v) => serde_json::to_string(v),
            Object::Monitor(v) => serde_json::to_string(v),
            Object::Silence(v) => serde_json::to_string(v),
            Object::Maintenance(v) => serde_json::to_string(v),
            Object::StatusPage(v) => serde_json::to_string(v),
        }
    }

    /// The object of `kind` stored as `body`, as the store keeps it (and the change log carries it).
    pub fn parse(kind: &str, body: &str) -> Result<Object, String> {
        let e = |e: serde_json::Error| e.to_string();
        Ok(match kind {
            "settings" => Object::Settings(serde_json::from_str(body).map_err(e)?),
            "region" => Object::Region(serde_json::from_str(body).map_err(e)?),
            "cluster" => Object::Cluster(serde_json::from_str(body).map_err(e)?),
            "group" => Object::Group(serde_json::from_str(body).map_err(e)?),
            "line" => Object::Line(serde_json::from_str(body).map_err(e)?),
            "node" => Object::Node(serde_json::from_str(body).map_err(e)?),
            "rule" => Object::Rule(serde_json::from_str(body).map_err(e)?),
            "prober" => Object::Prober(serde_json::from_str(body).map_err(e)?),
            "admin_token" => Object::AdminToken(serde_json::from_str(body).map_err(e)?),
            "admin_token_read_only" => {
                let t: AdminToken = serde_json::from_str(body).map_err(e)?;
                Object::AdminToken(AdminToken { read_only: true, ..t })
            }
            "enroll_token" => Object::EnrollToken(serde_json::from_str(body).map_err(e)?),
            "webhook" => Object::Webhook(serde_json::from_str(body).map_err(e)?),
            "check" => Object::Check(serde_json::from_str(body).map_err(e)?),
            "mirror_settings" => Object::MirrorSettings(serde_json::from_str(body).map_err(e)?),
            "detection_settings" => Object::Detection(serde_json::from_str(body).map_err(e)?),
            "monitor" => Object::Monitor(serde_json::from_str(body).map_err(e)?),
            "silence" => Object::Silence(serde_json::from_str(body).map_err(e)?),
            "maintenance" => Object::Maintenance(serde_json::from_str(body).map_err(e)?),
            "status_page" => Object::StatusPage(serde_json::from_str(body).map_err(e)?),
            other => return Err(format!("unknown kind {other:?}")),
        })
    }
}

/// One stored object as the store hands it back.
#[derive(Debug, Clone, Copy)]
pub struct Row<'a> {
    /// Its id.
    pub id: i64,
    /// Its kind ([`Object::kind`]).
    pub kind: &'a str,
    /// Its name, for the message when the body no longer parses.
    pub name: &'a str,
    /// Its JSON body.
    pub body: &'a str,
    /// When it was created.
    pub created_at: Timestamp,
    /// When it last changed.
    pub updated_at: Timestamp,
}

/// One snapshot of the configuration.
#[derive(Debug, Clone, Default)]
pub struct Config {
    /// Probe settings.
    pub settings: ProbeSettings,
    pub regions: BTreeMap<i64, Stored<Region>>,
    pub clusters: BTreeMap<i64, Stored<Cluster>>,
    /// Node groups.
    pub groups: BTreeMap<i64, Stored<GroupRecord>>,
    pub lines: BTreeMap<i64, Stored<LineRecord>>,
    pub nodes: BTreeMap<i64, Stored<NodeRecord>>,
    pub rules: BTreeMap<i64, Stored<RuleRecord>>,
    pub probers: BTreeMap<i64, Stored<ProberRecord>>,
    /// Admin tokens.
    pub admin_tokens: BTreeMap<i64, Stored<AdminToken>>,
    /// Enrollment tokens.
    pub enroll_tokens: BTreeMap<i64, Stored<EnrollToken>>,
    /// Webhook sinks.
    pub webhooks: BTreeMap<i64, Stored<Webhook>>,
    /// Silences of alerts' notifications.
    pub silences: BTreeMap<i64, Stored<Silence>>,
    /// Maintenance windows.
    pub maintenance: BTreeMap<i64, Stored<Maintenance>>,
    /// Public status pages.
    pub status_pages: BTreeMap<i64, Stored<StatusPage>>,
    /// Named checks of endpoint targets.
    pub checks: BTreeMap<i64, Stored<NamedCheck>>,
    /// Video monitors.
    pub monitors: BTreeMap<i64, Stored<Monitor>>,
    /// Mirror and door settings.
    pub mirror_settings: MirrorSettings,
    /// Confirmation, flap damping and the probe budget.
    pub detection: DetectionSettings,
    /// The mirror registry, from its files (not from the store): swapped whole by a reload
    /// that passed.
    pub mirrors: Arc<Registry>,
    /// Id of the stored settings object, once saved.
    pub settings_id: Option<i64>,
    /// Id of the stored mirror settings, once saved.
    pub mirror_settings_id: Option<i64>,
    /// Id of the stored detection settings, once saved.
    pub detection_id: Option<i64>,
    /// The next id to assign.
    pub next_id: i64,
}

impl Config {
    /// Builds the snapshot from stored rows. A row that no longer parses stops the start with
    /// a message naming it: serving a configuration with an object silently missing would be
    /// worse.
    pub fn load<'a>(rows: impl IntoIterator<Item = Row<'a>>) -> Result<Config, String> {
        let mut c = Config::default();
        let mut max = 0;
        for r in rows {
            let o = Object::parse(r.kind, r.body)
                .map_err(|e| format!("object {} ({} {:?}): {e}", r.id, r.kind, r.name))?;
            c.put(r.id, o, r.created_at, r.updated_at);
            max = max.max(r.id);
        }
        c.next_id = max + 1;
        Ok(c)
    }

    /// Allocates an id.
    pub fn allocate(&mut self) -> i64 {
        let id = self.next_id.max(1);
        self.next_id = id + 1;
        id
    }

    /// Puts an object under `id` (replacing one of the same kind), keeping its creation time.
    pub fn put(&mut self, id: i64, o: Object, created: Timestamp, now: Timestamp) {
        fn upsert<T>(
            m: &mut BTreeMap<i64, Stored<T>>,
            id: i64,
            value: T,
            created: Timestamp,
            now: Timestamp,
        ) {
            let created_at = m.get(&id).map_or(created, |s| s.created_at);
            m.insert(id, Stored { value: Arc::new(value), created_at, updated_at: now });
        }
        match o {
            Object::Settings(v) => {
                self.settings = v;
                self.settings_id = Some(id);
            }
            Object::Region(v) => upsert(&mut self.regions, id, v, created, now),
            Object::Cluster(v) => upsert(&mut self.clusters, id, v, created, now),
            Object::Group(v) => upsert(&mut self.groups, id, v, created, now),
            Object::Line(v) => upsert(&mut self.lines, id, v, created, now),
            Object::Node(v) => upsert(&mut self.nodes, id, v, created, now),
            Object::Rule(v) => upsert(&mut self.rules, id, v, created, now),
            Object::Prober(v) => upsert(&mut self.probers, id, v, created, now),
            Object::AdminToken(v) => upsert(&mut self.admin_tokens, id, v, created, now),
            Object::EnrollToken(v) => upsert(&mut self.enroll_tokens, id, v, created, now),
            Object::Webhook(v) => upsert(&mut self.webhooks, id, v, created, now),
            Object::Check(v) => upsert(&mut self.checks, id, v, created, now),
            Object::Monitor(v) => upsert(&mut self.monitors, id, v, created, now),
            Object::Silence(v) => upsert(&mut self.silences, id, v, created, now),
            Object::Maintenance(v) => upsert(&mut self.maintenance, id, v, created, now),
            Object::StatusPage(v) => upsert(&mut self.status_pages, id, v, created, now),
            Object::MirrorSettings(v) => {
                self.mirror_settings = v;
                self.mirror_settings_id = Some(id);
            }
            Object::Detection(v) => {
                self.detection = v;
                self.detection_id = Some(id);
            }
        }
        self.next_id = self.next_id.max(id + 1);
    }

    /// Removes the object `id`, whatever its kind.
    pub fn remove(&mut self, id: i64) {
        self.regions.remove(&id);
        self.clusters.remove(&id);
        self.groups.remove(&id);
        self.lines.remove(&id);
        self.nodes.remove(&id);
        self.rules.remove(&id);
        self.probers.remove(&id);
        self.admin_tokens.remove(&id);
        self.enroll_tokens.remove(&id);
        self.webhooks.remove(&id);
        self.checks.remove(&id);
        self.monitors.remove(&id);
        self.silences.remove(&id);
        self.maintenance.remove(&id);
        self.status_pages.remove(&id);
    }

    /// The id of every object that can be deleted (every kind but the three settings).
    pub fn ids(&self) -> std::collections::BTreeSet<i64> {
        let keys = [
            self.regions.keys().copied().collect::<Vec<_>>(),
            self.clusters.keys().copied().collect(),
            self.groups.keys().copied().collect(),
            self.lines.keys().copied().collect(),
            self.nodes.keys().copied().collect(),
            self.rules.keys().copied().collect(),
            self.probers.keys().copied().collect(),
            self.admin_tokens.keys().copied().collect(),
            self.enroll_tokens.keys().copied().collect(),
            self.webhooks.keys().copied().collect(),
            self.checks.keys().copied().collect(),
            self.monitors.keys().copied().collect(),
            self.silences.keys().copied().collect(),
            self.maintenance.keys().copied().collect(),
            self.status_pages.keys().copied().collect(),
        ];
        keys.into_iter().flatten().collect()
    }

    /// Objects per kind, for the metrics.
    pub fn counts(&self) -> [(&'static str, usize); 15] {
        [
            ("region", self.regions.len()),
            ("cluster", self.clusters.len()),
            ("group", self.groups.len()),
            ("line", self.lines.len()),
            ("node", self.nodes.len()),
            ("rule", self.rules.len()),
            ("prober", self.probers.len()),
            ("admin_token", self.admin_tokens.len()),
            ("enroll_token", self.enroll_tokens.len()),
            ("webhook", self.webhooks.len()),
            ("check", self.checks.len()),
            ("monitor", self.monitors.len()),
            ("silence", self.silences.len()),
            ("maintenance", self.maintenance.len()),
            ("status_page", self.status_pages.len()),
        ]
    }

    /// What holds back `a`'s notifications at `now`: a silence that matches it (the oldest,
    /// when several do), else an open maintenance window of its subject.
    pub fn hold_of(&self, a: &Alert, now: Timestamp) -> Option<Hold> {
        if let Some((id, _)) = self.silences.iter().find(|(_, s)| s.value.holds(a, now)) {
            return Some(Hold::Silence(*id));
        }
        let key: AlertKey = a.key.parse().ok()?;
        self.maintenance_of(&key.about, now).map(Hold::Maintenance)
    }

    /// The prober named `name`. Names compare without case, like every other name, so that
    /// `tokyo` cannot enroll beside `Tokyo`.
    pub fn prober_named(&self, name: &str) -> Option<i64> {
        self.probers.iter().find(|(_, p)| p.value.name.eq_ignore_ascii_case(name)).map(|(id, _)| *id)
    }

    /// A node's name, or `node N` once it is gone: alerts and events name what they are about.
    pub fn node_name(&self, node: NodeId) -> String {
        self.nodes.get(&node.0).map_or_else(|| format!("node {node}"), |n| n.value.node.name.clone())
    }

    /// The check an endpoint naming `name` is probed with (`None`: `default`): the named
    /// check, else the built-in defaults when the name is `default` and no such check exists.
    /// `None` for a name that is not a check.
    pub fn check_named(&self, name: Option<&str>) -> Option<Check> {
        let name = name.unwrap_or("default");
        match self.check(name) {
            Some(c) => Some(c.clone()),
            None if name.eq_ignore_ascii_case("default") => Some(Check::default()),
            None => None,
        }
    }

    /// The check a cluster's listeners are probed with: its own, else the check it names, else
    /// the check named `default`, else the built-in cluster check.
    pub fn cluster_check(&self, c: &Cluster) -> Probed {
        self.probed(c.check.as_ref(), c.check_name.as_deref(), Check::default)
    }

    /// The check a monitor's endpoints are probed with: its own, else the check it names, else
    /// the check named `default`, else the built-in `hls` check.
    pub fn monitor_check(&self, m: &Monitor) -> Probed {
        self.probed(m.check.as_ref(), m.check_name.as_deref(), vantage_core::monitor::builtin_check)
    }

    /// Own check, named check, `default`, built-in — the first there is. A name that is no
    /// check (the invariants refuse one) is passed over like no name.
    fn probed(&self, own: Option<&Check>, name: Option<&str>, builtin: fn() -> Check) -> Probed {
        if let Some(check) = own {
            return Probed { check: check.clone(), source: CheckSource::Own, name: None };
        }
        if let Some((name, check)) = name.and_then(|n| self.named_check(n)) {
            return Probed { check: check.clone(), source: CheckSource::Named, name: Some(name.to_owned()) };
        }
        match self.named_check("default") {
            Some((name, check)) => {
                Probed { check: check.clone(), source: CheckSource::Default, name: Some(name.to_owned()) }
            }
            None => Probed { check: builtin(), source: CheckSource::Builtin, name: None },
        }
    }

    /// The check named `name` (names compare without case) with its name as stored.
    fn named_check(&self, name: &str) -> Option<(&str, &Check)> {
        self.checks
            .values()
            .find(|c| c.value.name.eq_ignore_ascii_case(name))
            .map(|c| (c.value.name.as_str(), &c.value.check))
    }

    /// The check named `name` (names compare without case), when there is one.
    pub fn check(&self, name: &str) -> Option<&Check> {
        self.checks.values().find(|c| c.value.name.eq_ignore_ascii_case(name)).map(|c| &c.value.check)
    }

    /// Whether a region has code `code`.
    pub fn has_region(&self, code: &str) -> bool {
        self.regions.values().any(|r| r.value.code == code)
    }

    /// The region a prober probes from, by code.
    pub fn region_code(&self, region: RegionId) -> Option<&str> {
        self.regions.get(&region.0).map(|r| r.value.code.as_str())
    }

    /// The region `caller` probes from: a prober's own, a node's group's (none when the group
    /// has no region: such a node does not probe). Enabled or not.
    pub fn region_of(&self, caller: crate::identity::Caller) -> Option<RegionId> {
        match caller {
            crate::identity::Caller::Prober(p) => Some(self.probers.get(&p.0)?.value.region),
            crate::identity::Caller::Node(n) => {
                let group = self.nodes.get(&n.0)?.value.node.group;
                self.groups.get(&group.0)?.value.group.region
            }
        }
    }

    /// The region code an enabled prober probes endpoints from. Node agents probe their
    /// cluster only, so they have none here.
    pub fn prober_region(&self, caller: crate::identity::Caller) -> Option<&str> {
        match caller {
            crate::identity::Caller::Prober(p) => {
                let rec = self.probers.get(&p.0)?;
                rec.value.enabled.then(|| self.region_code(rec.value.region))?
            }
            crate::identity::Caller::Node(_) => None,
        }
    }

    /// The groups of a cluster.
    pub fn groups_of(&self, cluster: ClusterId) -> impl Iterator<Item = (GroupId, &Stored<GroupRecord>)> {
        self.groups.iter().filter(move |(_, g)| g.value.cluster == cluster).map(|(id, g)| (GroupId(*id), g))
    }

    /// The lines of a cluster.
    pub fn lines_of(&self, cluster: ClusterId) -> impl Iterator<Item = (LineId, &Stored<LineRecord>)> {
        self.lines.iter().filter(move |(_, l)| l.value.cluster == cluster).map(|(id, l)| (LineId(*id), l))
    }

    /// The nodes of a cluster.
    pub fn nodes_of(&self, cluster: ClusterId) -> impl Iterator<Item = (NodeId, &Stored<NodeRecord>)> {
        self.nodes.iter().filter(move |(_, n)| n.value.cluster == cluster).map(|(id, n)| (NodeId(*id), n))
    }

    /// The rules of a cluster.
    pub fn rules_of(
        &self,
        cluster: ClusterId,
    ) -> impl Iterator<Item = (vantage_core::ids::RuleId, &Stored<RuleRecord>)> {
        self.rules
            .iter()
            .filter(move |(_, r)| r.value.cluster == cluster)
            .map(|(id, r)| (vantage_core::ids::RuleId(*id), r))
    }
}

/// Ends a sentence about `n` things: "1 prober", "3 probers".
pub fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}
