//! From a fleet file to the change that makes the configuration match it: every object parsed
//! and validated as the API does (the same types, the same field-named errors, prefixed with
//! where the object is in the file), names resolved to ids, existing objects found by name,
//! and — with `prune` — what the file no longer holds deleted.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde_json::Map;
use vantage_control::invariants::Refusal;
use vantage_control::mirrors::Tenant;
use vantage_control::mirrors::registry::{
    Registry, TENANTS_FILE, mirror_from_api, mirror_yaml, tenants_yaml,
};
use vantage_core::Timestamp;
use vantage_core::ids::{GroupId, LineId};
use vantage_core::mirror::MirrorSettings;

use super::super::*;
use super::export::{Secrets, object_doc};
use crate::views::{ClusterFile, FleetFile, ObjectName};
use vantage_store::FileWrite;

/// The change a fleet file asks for.
pub(super) struct Desired {
    /// The configuration after it.
    pub next: Config,
    /// Objects created or changed, in the order the file holds them.
    pub puts: Vec<(i64, Object)>,
    /// Objects deleted (with what goes with them).
    pub deletes: Vec<i64>,
    /// Mirror registry files written (`None`: removed).
    pub files: Vec<FileWrite>,
    /// Objects the file does not hold, left as they are (without `prune`).
    pub left: Vec<ObjectName>,
}

/// How a file is applied.
#[derive(Debug, Clone, Copy)]
pub(super) struct Terms {
    /// Objects the file does not hold are deleted.
    pub prune: bool,
    /// Even where that changes what DNS answers beyond the object.
    pub force: bool,
    /// A secret the file gives is compared with the stored one. Off for a read-only caller's
    /// plan: whether the plan says a secret changes would tell whether a guess is the stored
    /// one, so such a plan keeps every stored secret instead.
    pub compare_secrets: bool,
}

/// A list the file holds: objects of its kind (in its cluster) that the file does not name
/// are absent from it.
#[derive(Debug, Clone, Copy)]
enum Scope {
    Regions,
    Checks,
    Webhooks,
    Monitors,
    Clusters,
    Groups(ClusterId),
    Lines(ClusterId),
    Nodes(ClusterId),
    Rules(ClusterId),
}

impl Scope {
    /// The ids of its objects in `c`.
    fn ids(self, c: &Config) -> Vec<i64> {
        match self {
            Scope::Regions => c.regions.keys().copied().collect(),
            Scope::Checks => c.checks.keys().copied().collect(),
            Scope::Webhooks => c.webhooks.keys().copied().collect(),
            Scope::Monitors => c.monitors.keys().copied().collect(),
            Scope::Clusters => c.clusters.keys().copied().collect(),
            Scope::Groups(cl) => c.groups_of(cl).map(|(id, _)| id.0).collect(),
            Scope::Lines(cl) => c.lines_of(cl).map(|(id, _)| id.0).collect(),
            Scope::Nodes(cl) => c.nodes_of(cl).map(|(id, _)| id.0).collect(),
            Scope::Rules(cl) => c.rules_of(cl).map(|(id, _)| id.0).collect(),
        }
    }

    /// The delete checks of its kind: whether an object may be deleted (and what goes with
    /// it), and whether deleting it needs the operator's word (`force`).
    fn delete_checks(self) -> (Deletes, Unforced) {
        fn of<K: Kind>() -> (Deletes, Unforced) {
            (K::check_delete, K::check_unforced_delete)
        }
        match self {
            Scope::Regions => of::<Region>(),
            Scope::Checks => of::<NamedCheck>(),
            Scope::Webhooks => of::<Webhook>(),
            Scope::Monitors => of::<Monitor>(),
            Scope::Clusters => of::<Cluster>(),
            Scope::Groups(_) => of::<GroupRecord>(),
            Scope::Lines(_) => of::<LineRecord>(),
            Scope::Nodes(_) => of::<NodeRecord>(),
            Scope::Rules(_) => of::<RuleRecord>(),
        }
    }
}

type Deletes = fn(i64, &Config) -> Result<Vec<i64>, Refusal>;
type Unforced = fn(i64, &Config) -> Result<(), Refusal>;

/// An error of the object at `at` in the file: its field is named from the file's root.
fn within(at: &str) -> impl Fn(ApiError) -> ApiError + '_ {
    move |e| match e {
        ApiError::Invalid { field, reason } if field.starts_with('[') => {
            ApiError::Invalid { field: format!("{at}{field}"), reason }
        }
        ApiError::Invalid { field, reason } if field == "body" => {
            ApiError::Invalid { field: at.into(), reason }
        }
        ApiError::Invalid { field, reason } => ApiError::Invalid { field: format!("{at}.{field}"), reason },
        ApiError::Conflict(m) => ApiError::invalid(at, m),
        e => e,
    }
}

struct Build<'a> {
    app: &'a App,
    current: &'a Config,
    next: Config,
    puts: Vec<(i64, Object)>,
    /// Where each object the file names is in it.
    paths: BTreeMap<i64, String>,
    /// Each name already seen, by kind and cluster: where.
    seen: BTreeMap<(&'static str, Option<ClusterId>, String), String>,
    /// The current objects by kind, cluster and name (without case): the file's objects are
    /// found in it, so a fleet of any size is matched in one pass.
    names: BTreeMap<(&'static str, Option<ClusterId>, String), i64>,
    scopes: Vec<Scope>,
    terms: Terms,
    files: Vec<FileWrite>,
    left: Vec<ObjectName>,
    now: Timestamp,
}

/// The change that makes `current` what `file` says.
pub(super) fn desired(
    app: &App,
    current: &Config,
    file: &FleetFile,
    terms: Terms,
    now: Timestamp,
) -> Result<Desired, ApiError> {
    let mut b = Build {
        app,
        current,
        next: current.clone(),
        puts: Vec::new(),
        paths: BTreeMap::new(),
        seen: BTreeMap::new(),
        names: names(current),
        scopes: Vec::new(),
        terms,
        files: Vec::new(),
        left: Vec::new(),
        now,
    };
    b.settings(file)?;
    b.top::<Region>(file.regions.as_ref(), "regions", Scope::Regions)?;
    b.top::<NamedCheck>(file.checks.as_ref(), "checks", Scope::Checks)?;
    b.webhooks(file.webhooks.as_ref())?;
    b.top::<Monitor>(file.monitors.as_ref(), "monitors", Scope::Monitors)?;
    b.registry(file)?;
    if let Some(clusters) = &file.clusters {
        b.scopes.push(Scope::Clusters);
        for (i, cf) in clusters.iter().enumerate() {
            b.cluster(&format!("clusters[{i}]"), cf)?;
        }
    }
    b.finish()
}

impl Build<'_> {
    /// The settings the file holds, each replacing the current one when it differs.
    fn settings(&mut self, file: &FleetFile) -> Result<(), ApiError> {
        let Some(s) = &file.settings else { return Ok(()) };
        let parse = |m: &Map<String, Value>| Value::Object(m.clone());
        if let Some(m) = &s.probes {
            let v: ProbeSettings = parse_json(parse(m)).map_err(within("settings.probes"))?;
            self.setting(
                self.current.settings != v,
                self.current.settings_id,
                Object::Settings(v),
                "settings.probes",
            );
        }
        if let Some(m) = &s.detection {
            let v: DetectionSettings = parse_json(parse(m)).map_err(within("settings.detection"))?;
            self.setting(
                self.current.detection != v,
                self.current.detection_id,
                Object::Detection(v),
                "settings.detection",
            );
        }
        if let Some(m) = &s.mirrors {
            let v: MirrorSettings = parse_json(parse(m)).map_err(within("settings.mirrors"))?;
            let changed = self.current.mirror_settings != v;
            self.setting(
                changed,
                self.current.mirror_settings_id,
                Object::MirrorSettings(v),
                "settings.mirrors",
            );
        }
        Ok(())
    }

    fn setting(&mut self, changed: bool, id: Option<i64>, o: Object, at: &str) {
        if !changed {
            return;
        }
        let id = id.unwrap_or_else(|| self.next.allocate());
        self.paths.insert(id, at.into());
        self.next.put(id, o.clone(), self.now, self.now);
        self.puts.push((id, o));
    }

    /// A top-level list of objects the API parses as they are.
    fn top<K: Kind + KeepPrivate + PartialEq>(
        &mut self,
        list: Option<&Vec<Map<String, Value>>>,
        path: &str,
        scope: Scope,
    ) -> Result<(), ApiError> {
        let Some(items) = list else { return Ok(()) };
        self.scopes.push(scope);
        for (i, item) in items.iter().enumerate() {
            let at = format!("{path}[{i}]");
            let value = K::parse(Value::Object(item.clone()), None, self.app).map_err(within(&at))?;
            self.upsert(&at, value, None, Ok)?;
        }
        Ok(())
    }

    /// The notification channels, each `secret` kept by reference ([`stored_secret`]).
    fn webhooks(&mut self, list: Option<&Vec<Map<String, Value>>>) -> Result<(), ApiError> {
        let Some(items) = list else { return Ok(()) };
        self.scopes.push(Scope::Webhooks);
        for (i, item) in items.iter().enumerate() {
            let at = format!("webhooks[{i}]");
            let mut doc = item.clone();
            let name = doc.get("name").and_then(Value::as_str).unwrap_or_default().to_owned();
            let old = self.current.webhooks.values().find(|s| s.value.name.eq_ignore_ascii_case(&name));
            let kept = old.and_then(|s| s.value.secret.as_deref());
            let whose = format!("webhook {name:?}");
            let stored = doc.get("secret").and_then(Value::as_str) == Some("stored");
            stored_secret(
                &mut doc,
                "secret",
                kept,
                &format!("{at}.secret"),
                &whose,
                self.terms.compare_secrets,
            )?;
            let value = Webhook::parse(Value::Object(doc), None, self.app).map_err(within(&at))?;
            // The secret the server holds goes only where it went.
            if stored && old.is_some_and(|o| !o.value.same_destination(&value)) {
                return Err(ApiError::invalid(
                    format!("{at}.secret"),
                    "a channel that delivers elsewhere takes its secret again: give env:NAME or file:PATH",
                ));
            }
            self.upsert(&at, value, None, Ok)?;
        }
        Ok(())
    }

    /// Saves `value` (finished by `finish` once what the file does not hold is kept from the
    /// existing object of the same name), under the existing object's id or a new one.
    fn upsert<K: Kind + KeepPrivate + PartialEq>(
        &mut self,
        at: &str,
        value: K,
        cluster: Option<ClusterId>,
        finish: impl FnOnce(K) -> Result<K, ApiError>,
    ) -> Result<i64, ApiError> {
        let name = value.clone().wrap().name();
        let name_field = if K::NAME == "region" { "code" } else { "name" };
        if let Some(first) = self.seen.insert((K::NAME, cluster, name.to_ascii_lowercase()), at.to_owned()) {
            return Err(ApiError::invalid(
                format!("{at}.{name_field}"),
                format!("{} {name:?} is in the file twice (first at {first})", K::NAME),
            ));
        }
        let existing = (self.names.get(&(K::NAME, cluster, name.to_ascii_lowercase())))
            .and_then(|id| Some((*id, K::map(self.current).get(id)?.value.clone())));
        let (id, value) = match &existing {
            Some((id, old)) => (*id, value.keep_from(old)),
            None => (self.next.allocate(), value),
        };
        let value = finish(value).map_err(within(at))?;
        if existing.is_none_or(|(_, old)| *old != value) {
            self.puts.push((id, value.clone().wrap()));
        }
        self.next.put(id, value.wrap(), self.now, self.now);
        self.paths.insert(id, at.to_owned());
        Ok(id)
    }

    fn cluster(&mut self, at: &str, cf: &ClusterFile) -> Result<(), ApiError> {
        let mut doc = cf.cluster.clone();
        let name = doc.get("name").and_then(Value::as_str).unwrap_or_default().to_owned();
        let old = self.current.clusters.values().find(|s| s.value.name.eq_ignore_ascii_case(&name));
        stored_secrets(&mut doc, old.map(|s| &*s.value), at, self.terms.compare_secrets)?;
        let value = Cluster::parse(Value::Object(doc), None, self.app).map_err(within(at))?;
        let cid = ClusterId(self.upsert(at, value, None, Ok)?);
        if let Some(groups) = &cf.groups {
            self.scopes.push(Scope::Groups(cid));
            for (j, g) in groups.iter().enumerate() {
                let at = format!("{at}.groups[{j}]");
                let mut doc = to_doc(g);
                if let Some(code) = &g.region {
                    doc["region"] = json!(self.region(code, &format!("{at}.region"))?);
                }
                let value = GroupRecord::parse(doc, Some(cid), self.app).map_err(within(&at))?;
                self.upsert(&at, value, Some(cid), Ok)?;
            }
        }
        if let Some(lines) = &cf.lines {
            self.scopes.push(Scope::Lines(cid));
            for (j, l) in lines.iter().enumerate() {
                let at = format!("{at}.lines[{j}]");
                let mut doc = to_doc(l);
                doc["group"] = json!(self.group(cid, &l.group, &format!("{at}.group"))?);
                let backups: Vec<GroupId> = (l.backup_groups.iter().enumerate())
                    .map(|(k, g)| self.group(cid, g, &format!("{at}.backup_groups[{k}]")))
                    .collect::<Result<_, _>>()?;
                doc["backup_groups"] = json!(backups);
                if let Some(code) = &l.latency_region {
                    doc["latency_region"] = json!(self.region(code, &format!("{at}.latency_region"))?);
                }
                let value = LineRecord::parse(doc, Some(cid), self.app).map_err(within(&at))?;
                self.upsert(&at, value, Some(cid), Ok)?;
            }
        }
        if let Some(nodes) = &cf.nodes {
            self.scopes.push(Scope::Nodes(cid));
            for (j, n) in nodes.iter().enumerate() {
                let at = format!("{at}.nodes[{j}]");
                let mut doc = to_doc(n);
                if let Some(o) = doc.as_object_mut() {
                    o.remove("addresses");
                }
                doc["group"] = json!(self.group(cid, &n.group, &format!("{at}.group"))?);
                doc["cluster"] = json!(cid);
                let rows = (n.addresses.iter().enumerate())
                    .map(|(k, a)| {
                        let line = match &a.line {
                            Some(l) => Some(self.line(cid, l, &format!("{at}.addresses[{k}].line"))?),
                            None => None,
                        };
                        let level = a.level.unwrap_or(Level::Primary);
                        Ok(AddressInput { ip: a.ip.clone(), level, trusted: a.trusted, line })
                    })
                    .collect::<Result<Vec<_>, ApiError>>()?;
                // Its errors name `addresses[i]…` themselves.
                let list = AddressList::parse(&rows, self.app.address_policy())
                    .map_err(|e| within(&at)(e.into()))?;
                let value = NodeRecord::parse(doc, None, self.app).map_err(within(&at))?;
                self.upsert(&at, value, Some(cid), |n| Ok(NodeRecord { addresses: list, ..n }))?;
            }
        }
        if let Some(rules) = &cf.rules {
            self.scopes.push(Scope::Rules(cid));
            for (j, r) in rules.iter().enumerate() {
                let at = format!("{at}.rules[{j}]");
                let mut doc = to_doc(r);
                if let Some(l) = &r.line {
                    doc["line"] = json!(self.line(cid, l, &format!("{at}.line"))?);
                }
                for (k, cond) in r.conditions.iter().enumerate() {
                    if let Some(code) = &cond.region {
                        doc["conditions"][k]["region"] =
                            json!(self.region(code, &format!("{at}.conditions[{k}].region"))?);
                    }
                }
                let value = RuleRecord::parse(doc, Some(cid), self.app).map_err(within(&at))?;
                self.upsert(&at, value, Some(cid), Ok)?;
            }
        }
        Ok(())
    }

    /// The tenants and mirrors the file holds: the registry after the change, checked whole
    /// (every mirror's tenants and check exist), and the registry files that make it.
    fn registry(&mut self, file: &FleetFile) -> Result<(), ApiError> {
        if file.tenants.is_none() && file.mirrors.is_none() {
            return Ok(());
        }
        let current = self.current.mirrors.clone();
        let mut next = Registry::clone(&current);
        let mut at_of: BTreeMap<String, String> = BTreeMap::new();
        if let Some(list) = &file.tenants {
            next.tenants.clear();
            for (i, item) in list.iter().enumerate() {
                let at = format!("tenants[{i}]");
                let t = parse_json::<Tenant>(Value::Object(item.clone()))
                    .and_then(|t| Ok(t.parse()?))
                    .map_err(within(&at))?;
                self.named_once("tenant", &t.name, &at)?;
                next.tenants.insert(t.name.clone(), t);
            }
            self.absent_from(&current.tenants, &mut next.tenants, "tenant");
        }
        if let Some(list) = &file.mirrors {
            next.mirrors.clear();
            for (i, item) in list.iter().enumerate() {
                let at = format!("mirrors[{i}]");
                let m = mirror_from_api(Value::Object(item.clone())).map_err(|e| within(&at)(e.into()))?;
                self.named_once("mirror", &m.host, &at)?;
                at_of.insert(m.host.clone(), at);
                next.mirrors.insert(m.host.clone(), m);
            }
            self.absent_from(&current.mirrors, &mut next.mirrors, "mirror");
        }
        for m in next.mirrors.values() {
            if let Err(e) = next.admits(m, &self.next) {
                return Err(match at_of.get(&m.host) {
                    Some(at) => within(at)(e.into()),
                    None => ApiError::Conflict(format!(
                        "mirror {} would be left naming {}: {}",
                        m.host,
                        e.field(),
                        e.reason()
                    )),
                });
            }
        }
        for (host, m) in &next.mirrors {
            if current.mirrors.get(host) != Some(m) {
                self.files.push(FileWrite { name: current.file_of(host), text: Some(mirror_yaml(m)) });
            }
        }
        for host in current.mirrors.keys().filter(|h| !next.mirrors.contains_key(*h)) {
            self.files.push(FileWrite { name: current.file_of(host), text: None });
        }
        if next.tenants != current.tenants {
            self.files.push(FileWrite { name: TENANTS_FILE.into(), text: Some(tenants_yaml(&next.tenants)) });
        }
        self.next.mirrors = Arc::new(next);
        Ok(())
    }

    /// Refuses a tenant or mirror named twice in the file: tenants told apart as the registry
    /// keys them (exactly), mirrors by host (which the registry keeps in lower case).
    fn named_once(&mut self, kind: &'static str, name: &str, at: &str) -> Result<(), ApiError> {
        let field = if kind == "mirror" { "host" } else { "name" };
        match self.seen.insert((kind, None, name.to_owned()), at.to_owned()) {
            Some(first) => Err(ApiError::invalid(
                format!("{at}.{field}"),
                format!("{kind} {name:?} is in the file twice (first at {first})"),
            )),
            None => Ok(()),
        }
    }

    /// Registry entries the file's list does not hold: kept in `next` and listed, or (with
    /// `prune`) left out of it.
    fn absent_from<V: Clone>(
        &mut self,
        current: &BTreeMap<String, V>,
        next: &mut BTreeMap<String, V>,
        kind: &str,
    ) {
        for (key, v) in current {
            if next.contains_key(key) || self.terms.prune {
                continue;
            }
            next.insert(key.clone(), v.clone());
            self.left.push(ObjectName { kind: kind.into(), name: key.clone() });
        }
    }

    /// The region with code `code` after the change.
    fn region(&self, code: &str, field: &str) -> Result<RegionId, ApiError> {
        (self.next.regions.iter())
            .find(|(_, r)| r.value.code.eq_ignore_ascii_case(code))
            .map(|(id, _)| RegionId(*id))
            .ok_or_else(|| ApiError::invalid(field, format!("no region has the code {code:?}")))
    }

    /// The node group `name` of cluster `cid` after the change.
    fn group(&self, cid: ClusterId, name: &str, field: &str) -> Result<GroupId, ApiError> {
        (self.next.groups_of(cid))
            .find(|(_, g)| g.value.group.name.eq_ignore_ascii_case(name))
            .map(|(id, _)| id)
            .ok_or_else(|| ApiError::invalid(field, format!("the cluster has no node group named {name:?}")))
    }

    /// The line `name` of cluster `cid` after the change.
    fn line(&self, cid: ClusterId, name: &str, field: &str) -> Result<LineId, ApiError> {
        (self.next.lines_of(cid))
            .find(|(_, l)| l.value.line.name.eq_ignore_ascii_case(name))
            .map(|(id, _)| id)
            .ok_or_else(|| ApiError::invalid(field, format!("the cluster has no line named {name:?}")))
    }

    /// Deletes (with `prune`) or lists what the file's lists do not hold, children first, then
    /// checks every saved object against the configuration after the whole change. Whether a
    /// delete needs `force` is judged without the lines the change deletes too: a line pruned
    /// with its nodes loses no answer to the operator's surprise.
    fn finish(mut self) -> Result<Desired, ApiError> {
        let terms = self.terms;
        let mut gone_ids = Vec::new();
        let mut listed = BTreeSet::new();
        for scope in self.scopes.iter().rev() {
            for id in scope.ids(self.current) {
                if !self.paths.contains_key(&id) && listed.insert(id) {
                    gone_ids.push((*scope, id));
                }
            }
        }
        let mut left = std::mem::take(&mut self.left);
        let mut deletes = Vec::new();
        if !terms.prune {
            left.extend(
                gone_ids
                    .iter()
                    .filter_map(|(_, id)| object_doc(self.current, *id, Secrets::Masked))
                    .map(|(n, _)| n),
            );
            gone_ids.clear();
        }
        let mut shadow = (!terms.force).then(|| {
            let mut c = self.next.clone();
            gone_ids.iter().filter(|(s, _)| matches!(s, Scope::Lines(_))).for_each(|(_, id)| c.remove(*id));
            c
        });
        let mut deleted = BTreeSet::new();
        for (scope, id) in gone_ids {
            if deleted.contains(&id) {
                continue;
            }
            let name = object_doc(self.current, id, Secrets::Masked)
                .map_or_else(|| format!("object {id}"), |(n, _)| format!("{} {}", n.kind, n.name));
            let refused = |r: Refusal| match r {
                Refusal::Conflict(m) => ApiError::Conflict(format!("cannot delete {name}: {m}")),
                r => r.into(),
            };
            let (check_delete, unforced) = scope.delete_checks();
            if let Some(shadow) = &shadow {
                unforced(id, shadow).map_err(refused)?;
            }
            let cascade = check_delete(id, &self.next).map_err(refused)?;
            for gone in std::iter::once(id).chain(cascade) {
                self.next.remove(gone);
                if let Some(shadow) = &mut shadow {
                    shadow.remove(gone);
                }
                if deleted.insert(gone) {
                    deletes.push(gone);
                }
            }
        }
        for (id, o) in &self.puts {
            let at = self.paths.get(id).map_or("", String::as_str);
            check(o, *id, &self.next).map_err(|r| within(at)(r.into()))?;
        }
        Ok(Desired { next: self.next, puts: self.puts, deletes, files: self.files, left })
    }
}

/// Every object of `c` a fleet file may name, by kind (as [`Kind::NAME`]), cluster and name
/// without case.
fn names(c: &Config) -> BTreeMap<(&'static str, Option<ClusterId>, String), i64> {
    let mut m = BTreeMap::new();
    let mut add = |kind, cluster, name: &str, id: &i64| {
        m.entry((kind, cluster, name.to_ascii_lowercase())).or_insert(*id);
    };
    c.regions.iter().for_each(|(id, s)| add("region", None, &s.value.code, id));
    c.checks.iter().for_each(|(id, s)| add("check", None, &s.value.name, id));
    c.webhooks.iter().for_each(|(id, s)| add("webhook", None, &s.value.name, id));
    c.monitors.iter().for_each(|(id, s)| add("monitor", None, &s.value.name, id));
    c.clusters.iter().for_each(|(id, s)| add("cluster", None, &s.value.name, id));
    c.groups.iter().for_each(|(id, s)| add("group", Some(s.value.cluster), &s.value.group.name, id));
    c.lines.iter().for_each(|(id, s)| add("line", Some(s.value.cluster), &s.value.line.name, id));
    c.nodes.iter().for_each(|(id, s)| add("node", Some(s.value.cluster), &s.value.node.name, id));
    c.rules.iter().for_each(|(id, s)| add("rule", Some(s.value.cluster), &s.value.rule.name, id));
    m
}

/// The cross-object rules of `o` saved as `id` in `c`.
fn check(o: &Object, id: i64, c: &Config) -> Result<(), Refusal> {
    match o {
        Object::Region(v) => v.check(id, c),
        Object::Cluster(v) => v.check(id, c),
        Object::Group(v) => v.check(id, c),
        Object::Line(v) => v.check(id, c),
        Object::Node(v) => v.check(id, c),
        Object::Rule(v) => v.check(id, c),
        Object::Webhook(v) => v.check(id, c),
        Object::Check(v) => v.check(id, c),
        Object::Monitor(v) => v.check(id, c),
        _ => Ok(()),
    }
}

/// Each publisher's `key_secret` ([`stored_secret`]), kept from the publisher of that name.
fn stored_secrets(
    doc: &mut Map<String, Value>,
    old: Option<&Cluster>,
    at: &str,
    compare: bool,
) -> Result<(), ApiError> {
    let Some(Value::Array(publishers)) = doc.get_mut("publishers") else { return Ok(()) };
    let old = old.map(|c| c.publishers.as_slice()).unwrap_or_default();
    for (k, p) in publishers.iter_mut().enumerate() {
        let Some(obj) = p.as_object_mut() else { continue };
        let name = obj.get("name").and_then(Value::as_str).unwrap_or_default().to_owned();
        let kept = old.iter().find(|o| o.name.eq_ignore_ascii_case(&name)).map(|o| o.key_secret.as_str());
        let path = format!("{at}.publishers[{k}].key_secret");
        stored_secret(obj, "key_secret", kept, &path, &format!("publisher {name:?}"), compare)?;
    }
    Ok(())
}

/// A secret field of a fleet file's object: `stored` becomes `kept`, the secret the server
/// holds for the object of that name (`whose`); anything else must be the secret itself
/// (`vantage ctl` resolves `env:` and `file:` before it sends the file). Unless `compare`,
/// a secret the server holds stands.
fn stored_secret(
    obj: &mut Map<String, Value>,
    field: &str,
    kept: Option<&str>,
    path: &str,
    whose: &str,
    compare: bool,
) -> Result<(), ApiError> {
    match obj.get(field).and_then(Value::as_str) {
        Some(_) if !compare && kept.is_some() => {
            obj.insert(field.into(), json!(kept));
        }
        Some("stored") => {
            let stored = kept.ok_or_else(|| {
                ApiError::invalid(
                    path,
                    format!("no secret is stored for {whose}: give it as env:NAME or file:PATH"),
                )
            })?;
            obj.insert(field.into(), json!(stored));
        }
        Some(s) if s.starts_with("env:") || s.starts_with("file:") => {
            return Err(ApiError::invalid(
                path,
                "a secret reference is read by vantage ctl; the API takes the secret itself",
            ));
        }
        _ => {}
    }
    Ok(())
}
