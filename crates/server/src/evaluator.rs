//! The evaluator: the only writer of decisions. Every cluster is evaluated every 10 s, right
//! after a report that concerns it (at most every 2 s per cluster), at once after a
//! configuration change, and exactly when one of its timers runs out. Each pass feeds the
//! core's `evaluate` with the configuration and the latest results, then stores the revisions
//! it cuts, publishes their records, and keeps the cluster's state for the next pass.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use vantage_core::Timestamp;
use vantage_core::answer::LineSpec;
use vantage_core::evaluate::{AddressView, ClusterState, ClusterView, Event, NodeView, Records, evaluate};
use vantage_core::ids::{ClusterId, RuleId};
use vantage_core::reachability::{Observation, Observations, ProberView};
use vantage_core::rules::Rule;
use vantage_store::{NewAudit, RevisionRow};

use crate::app::{App, now};
use crate::channel::{addresses_in_use, node_probes};
use crate::registry::Config;
use crate::runtime::{lock, target_key};

/// A request to evaluate a cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Trigger {
    /// Which cluster.
    pub cluster: ClusterId,
    /// Why, when the change comes from configuration or an agent (revision reason).
    pub reason: Option<&'static str>,
    /// Skip the 2 s spacing of report triggers.
    pub immediate: bool,
}

impl Trigger {
    /// A report concerning `cluster` arrived.
    pub fn report(cluster: ClusterId) -> Self {
        Trigger { cluster, reason: None, immediate: false }
    }
}

/// Reports trigger a cluster at most this often.
const REPORT_SPACING: Duration = Duration::from_secs(2);

/// The published records of a cluster: the newest revision.
#[derive(Debug, Clone, PartialEq)]
pub struct Published {
    /// Revision number.
    pub number: u32,
    /// When it was made.
    pub at: Timestamp,
    /// Its records.
    pub records: Records,
}

struct Cluster {
    state: ClusterState,
    revision: u32,
    due: Instant,
    last: Option<Instant>,
    reason: Option<&'static str>,
    saved: Instant,
    /// Revisions cut and published while storage refused them, oldest first: stored as soon as
    /// it takes writes again.
    unsaved: Vec<RevisionRow>,
}

impl Cluster {
    fn new(state: ClusterState, now: Instant) -> Self {
        Cluster { state, revision: 0, due: now, last: None, reason: None, saved: now, unsaved: Vec::new() }
    }
}

/// At most this many unsaved revisions are kept per cluster; the oldest go first.
const MAX_UNSAVED: usize = 1_000;

/// Loads each cluster's state and newest revision from the store.
async fn load(app: &App) -> HashMap<ClusterId, Cluster> {
    let mut out: HashMap<ClusterId, Cluster> = HashMap::new();
    let now = Instant::now();
    let fresh = |state| Cluster::new(state, now);
    match app.store.states("cluster:").await {
        Ok(rows) => {
            for (key, value) in rows {
                let Some(id) = key.strip_prefix("cluster:").and_then(|i| i.parse().ok()) else { continue };
                match serde_json::from_str::<ClusterState>(&value) {
                    Ok(s) => {
                        out.insert(ClusterId(id), fresh(s));
                    }
                    Err(e) => {
                        tracing::warn!(cluster = id, error = %e, "stored evaluator state unreadable; starting over")
                    }
                }
            }
        }
        Err(e) => tracing::warn!(error = %e, "cannot load evaluator states"),
    }
    match app.store.latest_revisions().await {
        Ok(revs) => {
            let mut published = HashMap::new();
            for r in revs {
                let id = ClusterId(r.cluster);
                let records: Records = serde_json::from_value(r.records.clone()).unwrap_or_default();
                let c = out.entry(id).or_insert_with(|| fresh(ClusterState::default()));
                c.revision = r.number;
                // The published records survive a restart even when the state did not.
                c.state.published.get_or_insert_with(|| records.clone());
                published.insert(id, Published { number: r.number, at: r.at, records });
            }
            app.set_published(published);
        }
        Err(e) => tracing::warn!(error = %e, "cannot load revisions"),
    }
    out
}

/// Runs until `stop`.
pub async fn run(
    app: Arc<App>,
    mut triggers: mpsc::UnboundedReceiver<Trigger>,
    mut stop: watch::Receiver<bool>,
    loaded: tokio::sync::oneshot::Sender<()>,
) {
    let interval = Duration::from_secs(app.settings.evaluation_interval_s.max(1));
    let mut clusters = load(&app).await;
    let _ = loaded.send(());
    loop {
        let config = app.config();
        let now_i = Instant::now();
        clusters.retain(|id, _| config.clusters.contains_key(&id.0));
        for id in config.clusters.keys() {
            clusters.entry(ClusterId(*id)).or_insert_with(|| Cluster::new(ClusterState::default(), now_i));
        }
        let next = clusters.values().map(|c| c.due).min().unwrap_or(now_i + interval);
        tokio::select! {
            t = triggers.recv() => match t {
                Some(t) => note(&mut clusters, t),
                None => return,
            },
            _ = tokio::time::sleep_until(next) => {}
            _ = crate::app::stopped(&mut stop) => return,
        }
        while let Ok(t) = triggers.try_recv() {
            note(&mut clusters, t);
        }
        let now_i = Instant::now();
        let due: Vec<ClusterId> =
            clusters.iter().filter(|(_, c)| c.due <= now_i).map(|(id, _)| *id).collect();
        for id in due {
            let config = app.config();
            let Some(c) = clusters.get_mut(&id) else { continue };
            let deadline = pass(&app, &config, id, c).await;
            let now_i = Instant::now();
            c.last = Some(now_i);
            c.due = now_i + interval;
            if let Some(d) = deadline {
                let wait = u64::try_from(d.millis_since(now()).max(0)).unwrap_or(0);
                c.due = c.due.min(now_i + Duration::from_millis(wait));
            }
        }
    }
}

fn note(clusters: &mut HashMap<ClusterId, Cluster>, t: Trigger) {
    let Some(c) = clusters.get_mut(&t.cluster) else { return };
    let now = Instant::now();
    let at = if t.immediate { now } else { c.last.map_or(now, |l| (l + REPORT_SPACING).max(now)) };
    c.due = c.due.min(at);
    if c.reason.is_none() {
        c.reason = t.reason;
    }
}

/// The prober table: every prober, then every node that probes. Observations index it.
fn probers(c: &Config) -> (Vec<ProberView>, HashMap<i64, u32>) {
    let mut views = Vec::new();
    let mut index = HashMap::new();
    for (id, p) in &c.probers {
        index.insert(*id, u32::try_from(views.len()).unwrap_or(u32::MAX));
        views.push(ProberView { region: p.value.region, active: p.value.enabled });
    }
    for (id, n) in &c.nodes {
        let Some(region) = c.groups.get(&n.value.node.group.0).and_then(|g| g.value.group.region) else {
            continue;
        };
        index.insert(*id, u32::try_from(views.len()).unwrap_or(u32::MAX));
        views.push(ProberView { region, active: node_probes(c, *id) });
    }
    (views, index)
}

/// One pass of one cluster; returns its next deadline.
/// What a cluster's view is built from: its lines, rules, nodes with their latest results,
/// and the prober table the results index.
pub struct ViewParts {
    lines: Vec<LineSpec>,
    rules: Vec<(RuleId, Rule)>,
    nodes: Vec<NodeView>,
    probers: Vec<ProberView>,
}

impl ViewParts {
    /// Gathers a cluster's parts from the configuration and the runtime.
    pub fn gather(app: &App, c: &Config, id: ClusterId) -> Option<ViewParts> {
        let cluster = &c.clusters.get(&id.0)?.value;
        let (probers, index) = probers(c);
        let lines = c
            .lines_of(id)
            .map(|(lid, l)| LineSpec {
                id: lid,
                group: Some(l.value.line.group),
                backup_groups: l.value.line.backup_groups.clone(),
                min_healthy: l.value.line.min_healthy,
            })
            .collect();
        let rules = c.rules_of(id).map(|(rid, r)| (rid, r.value.rule.clone())).collect();
        let results = lock(&app.runtime.results);
        let agents = lock(&app.runtime.nodes);
        let nodes = c
            .nodes_of(id)
            .map(|(nid, n)| {
                let agent = agents.get(&nid.0);
                let addresses =
                    addresses_in_use(&n.value.addresses, agent.map(|a| &a.addresses), app.address_policy())
                        .as_slice()
                        .iter()
                        .map(|a| {
                            let mut obs = Vec::new();
                            for l in &cluster.listeners {
                                let Some(per) = results.get(&target_key(nid.0, a.ip, l.port)) else {
                                    continue;
                                };
                                for (prober, latest) in per {
                                    let Some(&p) = index.get(prober) else { continue };
                                    obs.push(Observation {
                                        prober: p,
                                        sent: latest.sent,
                                        lost: latest.lost,
                                        rtt_ms: latest.rtt_us.map(|us| us as f32 / 1000.0),
                                        reported_at: latest.at,
                                    });
                                }
                            }
                            AddressView { address: *a, observations: Observations::new(obs) }
                        })
                        .collect();
                NodeView {
                    id: nid,
                    name: n.value.node.name.clone(),
                    group: n.value.node.group,
                    enabled: n.value.node.enabled,
                    last_heartbeat: agent.and_then(|a| a.last_heartbeat),
                    links: agent.map(|a| a.links.clone()).unwrap_or_default(),
                    metrics: agent.and_then(|a| a.metrics),
                    addresses,
                }
            })
            .collect();
        Some(ViewParts { lines, rules, nodes, probers })
    }

    /// The view over these parts.
    pub fn view<'a>(
        &'a self,
        c: &'a Config,
        cluster: &'a vantage_core::model::Cluster,
        reason: Option<&'a str>,
    ) -> ClusterView<'a> {
        ClusterView {
            settings: &c.settings,
            cluster,
            lines: &self.lines,
            nodes: &self.nodes,
            probers: &self.probers,
            rules: &self.rules,
            reason,
        }
    }
}

/// One pass of one cluster; returns its next deadline.
async fn pass(app: &App, c: &Config, id: ClusterId, cl: &mut Cluster) -> Option<Timestamp> {
    let cluster = &c.clusters.get(&id.0)?.value;
    let parts = ViewParts::gather(app, c, id)?;
    let reason = cl.reason.take();
    let view = parts.view(c, cluster, reason);
    let rules = &parts.rules;
    let at = now();
    let out = evaluate(&view, &mut cl.state, at);
    app.set_rule_states(id, &cl.state);
    {
        let mut statuses = lock(&app.runtime.statuses);
        for s in &out.nodes {
            statuses.insert(s.node, s.clone());
        }
        statuses.retain(|n, _| c.nodes.get(&n.0).is_none_or(|r| r.value.cluster == id));
    }
    let changed = !out.revisions.is_empty() || !out.events.is_empty();
    let base = cl.revision;
    let mut storing = true;
    for draft in &out.revisions {
        cl.revision += 1;
        cl.unsaved.push(RevisionRow {
            cluster: id.0,
            number: cl.revision,
            at,
            reason: draft.reason.clone(),
            records: serde_json::to_value(&draft.records).unwrap_or_default(),
            held: serde_json::to_value(&draft.held).unwrap_or_default(),
            publish: json!([]),
        });
        // Stored before it is published, so that publishers can record their outcome on it.
        // While storage is down the answer still changes (DNS serves from memory) and the
        // revision waits to be stored; one refused write per pass is enough to know.
        storing = storing && store_unsaved(app, &mut cl.unsaved).await;
        tracing::info!(cluster = %cluster.name, revision = cl.revision, reason = %draft.reason, records = ?draft.records.all, "revision");
        app.publish(id, Published { number: cl.revision, at, records: draft.records.clone() });
    }
    if out.revisions.is_empty() && !cl.unsaved.is_empty() {
        store_unsaved(app, &mut cl.unsaved).await;
    }
    let audit: Vec<NewAudit> =
        out.events.iter().filter_map(|e| alert(app, c, id, cluster, base, rules, e)).collect();
    if !audit.is_empty()
        && let Err(e) = app.store.commit(&[], &audit, at).await
    {
        tracing::error!(cluster = id.0, error = %e, "cannot audit scheduling events");
    }
    if changed || cl.saved.elapsed() > Duration::from_secs(60) {
        match serde_json::to_string(&cl.state) {
            Ok(text) => {
                if let Err(e) = app.store.put_state(&format!("cluster:{}", id.0), &text, at).await {
                    tracing::warn!(cluster = id.0, error = %e, "cannot save evaluator state");
                }
                cl.saved = Instant::now();
            }
            Err(e) => tracing::warn!(error = %e, "cannot encode evaluator state"),
        }
    }
    out.next_deadline
}

/// Stores the waiting revisions, oldest first, and stops at the first one storage refuses
/// (keeping at most [`MAX_UNSAVED`]). Returns whether all of them are stored.
async fn store_unsaved(app: &App, unsaved: &mut Vec<RevisionRow>) -> bool {
    let mut stored = 0;
    let mut ok = true;
    for row in unsaved.iter() {
        if let Err(e) = app.store.insert_revision(row).await {
            tracing::error!(cluster = row.cluster, revision = row.number, waiting = unsaved.len() - stored, error = %e, "cannot store revision; it is kept to be stored later");
            ok = false;
            break;
        }
        stored += 1;
    }
    unsaved.drain(..stored);
    if unsaved.len() > MAX_UNSAVED {
        let dropped = unsaved.len() - MAX_UNSAVED;
        tracing::error!(dropped, "storage down too long: the oldest unsaved revisions are dropped");
        unsaved.drain(..dropped);
    }
    ok
}

/// Fires or resolves the alert of an event, and returns the audit entry of a rule activation
/// or recovery (actor System).
fn alert(
    app: &App,
    c: &Config,
    cluster_id: ClusterId,
    cluster: &vantage_core::model::Cluster,
    base: u32,
    rules: &[(RuleId, Rule)],
    e: &Event,
) -> Option<NewAudit> {
    let node_name = |n: vantage_core::ids::NodeId| {
        c.nodes.get(&n.0).map_or_else(|| format!("node {n}"), |r| r.value.node.name.clone())
    };
    let line_name = |l: vantage_core::ids::LineId| {
        c.lines.get(&l.0).map_or_else(|| "default".to_owned(), |r| r.value.line.name.clone())
    };
    let key =
        |rule: RuleId, node: vantage_core::ids::NodeId| format!("scheduling_action/rule:{rule}/node:{node}");
    match e {
        Event::RuleActivated(ev) | Event::RuleRecovered(ev) => {
            let activated = matches!(e, Event::RuleActivated(_));
            let conditions: Vec<serde_json::Value> = rules
                .iter()
                .find(|(r, _)| *r == ev.rule)
                .map(|(_, r)| {
                    r.conditions
                        .iter()
                        .zip(&ev.values)
                        .map(|(cond, v)| json!({"metric": cond.metric, "value": v, "comparison": cond.comparison, "threshold": cond.threshold}))
                        .collect()
                })
                .unwrap_or_default();
            let details = json!({
                "cluster": cluster.name,
                "rule": ev.rule_name,
                "node": ev.node_name,
                "action": ev.action,
                "line": ev.line.map(line_name),
                "values": conditions,
                "revision": base + u32::try_from(ev.revision).unwrap_or(0) + 1,
                "no_effect": ev.no_effect,
            });
            if activated {
                let summary = format!("{} · {}", ev.rule_name, ev.node_name);
                app.alerts.fire(key(ev.rule, ev.node), "scheduling_action", summary, details.clone());
            } else {
                app.alerts.resolve(&key(ev.rule, ev.node));
            }
            Some(NewAudit {
                actor: "system".into(),
                action: if activated { "scheduling.activate" } else { "scheduling.recover" }.into(),
                object: format!("node:{}", ev.node),
                metadata: details,
            })
        }
        Event::RuleEnded { rule, nodes, .. } => {
            for n in nodes {
                app.alerts.resolve(&key(*rule, *n));
            }
            None
        }
        Event::AddressUnreachable { node, ip } => {
            let summary = format!("{ip} of {} is unreachable", node_name(*node));
            let details =
                json!({"cluster": cluster.name, "node": node_name(*node), "address": ip.to_string()});
            app.alerts.fire(
                format!("address_unreachable/node:{node}/{ip}"),
                "address_unreachable",
                summary,
                details,
            );
            None
        }
        Event::AddressReachable { node, ip } => {
            app.alerts.resolve(&format!("address_unreachable/node:{node}/{ip}"));
            None
        }
        Event::Held { line, reason } => {
            let summary = format!("records of {} line {} held: {reason}", cluster.name, line_name(*line));
            let details = json!({"cluster": cluster.name, "line": line_name(*line), "reason": reason});
            app.alerts.fire(
                format!("revision_held/cluster:{cluster_id}/line:{line}"),
                "revision_held",
                summary,
                details,
            );
            None
        }
        Event::HoldReleased { line } => {
            app.alerts.resolve(&format!("revision_held/cluster:{cluster_id}/line:{line}"));
            None
        }
    }
}
