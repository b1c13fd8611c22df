//! The configuration in the fleet file's form: every object by name, references by the name
//! (or region code) of what they name, secrets never in the clear.

use serde_json::Map;
use vantage_core::ids::{GroupId, LineId, RegionId};
use vantage_core::mirror::{Mirror, MirrorInput};
use vantage_core::rules::ConditionInput;

use super::super::*;
use crate::views::{
    AddressFile, ClusterFile, ConditionFile, FleetFile, GroupFile, LineFile, NodeFile, ObjectName, RuleFile,
    SettingsFile,
};

/// How a secret (a publisher's `key_secret`, a channel's `secret`) is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Secrets {
    /// `stored`: what `ctl export` writes, and what keeps the server's secret on apply.
    Stored,
    /// `(secret)`: what a plan shows.
    Masked,
    /// A digest of the secret, so that a changed secret changes the document (the revision
    /// and the plan's comparison); never shown.
    Digest,
}

/// The whole configuration as a fleet file.
pub(super) fn export(c: &Config, secrets: Secrets) -> FleetFile {
    let docs =
        |ids: Vec<i64>| ids.into_iter().filter_map(|id| as_map(object_doc(c, id, secrets)?.1)).collect();
    let clusters = c
        .clusters
        .keys()
        .filter_map(|id| {
            let cluster = ClusterId(*id);
            Some(ClusterFile {
                cluster: as_map(object_doc(c, *id, secrets)?.1)?,
                groups: Some(c.groups_of(cluster).map(|(_, s)| group_file(c, &s.value)).collect()),
                lines: Some(c.lines_of(cluster).map(|(_, s)| line_file(c, &s.value)).collect()),
                nodes: Some(c.nodes_of(cluster).map(|(_, s)| node_file(c, &s.value)).collect()),
                rules: Some(c.rules_of(cluster).map(|(_, s)| rule_file(c, &s.value)).collect()),
            })
        })
        .collect();
    FleetFile {
        settings: Some(SettingsFile {
            probes: as_map(to_doc(&c.settings)),
            detection: as_map(to_doc(&c.detection)),
            mirrors: as_map(to_doc(&c.mirror_settings)),
        }),
        regions: Some(docs(c.regions.keys().copied().collect())),
        checks: Some(docs(c.checks.keys().copied().collect())),
        webhooks: Some(docs(c.webhooks.keys().copied().collect())),
        monitors: Some(docs(c.monitors.keys().copied().collect())),
        clusters: Some(clusters),
        tenants: Some(c.mirrors.tenants.values().filter_map(|t| as_map(to_doc(t))).collect()),
        mirrors: Some(c.mirrors.mirrors.values().filter_map(|m| as_map(mirror_doc(m))).collect()),
    }
}

/// A mirror as its record in the file: the operator's fields.
pub(super) fn mirror_doc(m: &Mirror) -> Value {
    to_doc(&MirrorInput::from(m.clone()))
}

fn as_map(v: Value) -> Option<Map<String, Value>> {
    match v {
        Value::Object(m) => Some(m),
        _ => None,
    }
}

/// The settings object stored under `id`, by its name in the file (`probes`, `detection`,
/// `mirrors`), and its document.
pub(super) fn settings_doc(c: &Config, id: i64) -> Option<(&'static str, Value)> {
    if c.settings_id == Some(id) {
        Some(("probes", to_doc(&c.settings)))
    } else if c.detection_id == Some(id) {
        Some(("detection", to_doc(&c.detection)))
    } else if c.mirror_settings_id == Some(id) {
        Some(("mirrors", to_doc(&c.mirror_settings)))
    } else {
        None
    }
}

/// Object `id` as the file writes it (a cluster without its children), with its kind and
/// name; `None` when it is no object the file holds (a prober, a token).
pub(super) fn object_doc(c: &Config, id: i64, secrets: Secrets) -> Option<(ObjectName, Value)> {
    let named = |kind: &str, name: String| ObjectName { kind: kind.into(), name };
    let in_cluster = |cluster: ClusterId, name: &str| {
        let cl = c.clusters.get(&cluster.0).map_or_else(|| format!("#{cluster}"), |s| s.value.name.clone());
        format!("{cl}/{name}")
    };
    if let Some((name, doc)) = settings_doc(c, id) {
        return Some((named("settings", name.into()), doc));
    }
    if let Some(s) = c.regions.get(&id) {
        return Some((named("region", s.value.code.clone()), s.value.doc()));
    }
    if let Some(s) = c.checks.get(&id) {
        return Some((named("check", s.value.name.clone()), s.value.doc()));
    }
    if let Some(s) = c.webhooks.get(&id) {
        let mut doc = s.value.doc();
        if let Some(secret) = doc.get_mut("secret") {
            *secret = written_secret(secret.as_str().unwrap_or_default(), secrets);
        }
        return Some((named("webhook", s.value.name.clone()), doc));
    }
    if let Some(s) = c.monitors.get(&id) {
        return Some((named("monitor", s.value.name.clone()), s.value.doc()));
    }
    if let Some(s) = c.clusters.get(&id) {
        let mut doc = s.value.doc();
        if let Some(publishers) = doc.get_mut("publishers").and_then(Value::as_array_mut) {
            for p in publishers {
                if let Some(secret) = p.get_mut("key_secret") {
                    *secret = written_secret(secret.as_str().unwrap_or_default(), secrets);
                }
            }
        }
        return Some((named("cluster", s.value.name.clone()), doc));
    }
    if let Some(s) = c.groups.get(&id) {
        let name = in_cluster(s.value.cluster, &s.value.group.name);
        return Some((named("group", name), to_doc(&group_file(c, &s.value))));
    }
    if let Some(s) = c.lines.get(&id) {
        let name = in_cluster(s.value.cluster, &s.value.line.name);
        return Some((named("line", name), to_doc(&line_file(c, &s.value))));
    }
    if let Some(s) = c.nodes.get(&id) {
        let name = in_cluster(s.value.cluster, &s.value.node.name);
        return Some((named("node", name), to_doc(&node_file(c, &s.value))));
    }
    if let Some(s) = c.rules.get(&id) {
        let name = in_cluster(s.value.cluster, &s.value.rule.name);
        return Some((named("rule", name), to_doc(&rule_file(c, &s.value))));
    }
    None
}

fn group_file(c: &Config, g: &GroupRecord) -> GroupFile {
    GroupFile {
        name: g.group.name.clone(),
        region: g.group.region.map(|r| region_code(c, r)),
        drained: g.group.drained,
    }
}

fn line_file(c: &Config, l: &LineRecord) -> LineFile {
    let l = &l.line;
    LineFile {
        name: l.name.clone(),
        group: group_name(c, l.group),
        backup_groups: l.backup_groups.iter().map(|g| group_name(c, *g)).collect(),
        min_healthy: Some(l.min_healthy),
        client_networks: l.client_networks.iter().map(ToString::to_string).collect(),
        countries: l.places.countries.iter().map(ToString::to_string).collect(),
        continents: l.places.continents.iter().map(ToString::to_string).collect(),
        asns: l.places.asns.clone(),
        all_down: Some(l.all_down),
        latency_region: l.latency_region.map(|r| region_code(c, r)),
    }
}

fn node_file(c: &Config, n: &NodeRecord) -> NodeFile {
    let addresses = (n.addresses.as_slice().iter())
        .map(|a| {
            let row = AddressInput::from(*a);
            AddressFile {
                ip: row.ip,
                level: Some(row.level),
                trusted: row.trusted,
                line: row.line.map(|l| line_name(c, l)),
            }
        })
        .collect();
    let node = &n.node;
    NodeFile {
        name: node.name.clone(),
        group: group_name(c, node.group),
        enabled: Some(node.enabled),
        also_probes: Some(node.also_probes),
        drained: node.drained,
        addresses,
    }
}

fn rule_file(c: &Config, r: &RuleRecord) -> RuleFile {
    let r = &r.rule;
    let condition = |k: &vantage_core::rules::Condition| {
        let k = ConditionInput::from(*k);
        ConditionFile {
            metric: Some(k.metric),
            comparison: Some(k.comparison),
            threshold: Some(k.threshold),
            for_s: Some(k.for_s),
            aggregate: k.aggregate,
            region: k.region.map(|r| region_code(c, r)),
        }
    };
    RuleFile {
        name: r.name.clone(),
        line: r.line.map(|l| line_name(c, l)),
        action: Some(r.action),
        match_mode: Some(r.match_mode),
        hold_s: Some(r.hold_s),
        recover_s: Some(r.recover_s),
        enabled: Some(r.enabled),
        conditions: r.conditions.iter().map(condition).collect(),
    }
}

/// A secret as the file writes it in `mode`.
fn written_secret(secret: &str, mode: Secrets) -> Value {
    match mode {
        Secrets::Stored => json!("stored"),
        Secrets::Masked => json!("(secret)"),
        Secrets::Digest => json!(format!("sha256:{}", crate::auth::sha256_hex(secret.as_bytes()))),
    }
}

/// A reference the store holds by id, by the name it is written with. A dangling one (the
/// invariants refuse them) reads `#id` rather than vanishing.
fn region_code(c: &Config, r: RegionId) -> String {
    c.regions.get(&r.0).map_or_else(|| format!("#{r}"), |s| s.value.code.clone())
}

fn group_name(c: &Config, g: GroupId) -> String {
    c.groups.get(&g.0).map_or_else(|| format!("#{g}"), |s| s.value.group.name.clone())
}

fn line_name(c: &Config, l: LineId) -> String {
    c.lines.get(&l.0).map_or_else(|| format!("#{l}"), |s| s.value.line.name.clone())
}
