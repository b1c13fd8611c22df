//! The running control plane's shared state: the configuration snapshot, the store, the
//! metrics, and the one path by which configuration changes.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use std::collections::{BTreeSet, HashMap};

use arc_swap::ArcSwap;
use tokio::sync::mpsc;
use vantage_core::Timestamp;
use vantage_core::address::AddressPolicy;
use vantage_core::ids::ClusterId;
use vantage_store::{NewAudit, ResultWriter, Store, Write};

use crate::alerts::Alerts;
use crate::ca::Ca;
use crate::config::ServeConfig;
use crate::error::ApiError;
use crate::evaluator::{Published, Trigger};
use crate::metrics::Metrics;
use crate::registry::{Config, Object};
use crate::runtime::Runtime;

/// The wall clock, as the core's time.
pub fn now() -> Timestamp {
    let ms = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis());
    Timestamp::from_millis(i64::try_from(ms).unwrap_or(i64::MAX))
}

/// Resolves once `stop` is true. (The guard `wait_for` returns is dropped here, so a task
/// that awaits this stays `Send`.)
pub async fn stopped(stop: &mut tokio::sync::watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

/// Who made a change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Actor(pub String);

impl Actor {
    /// The system itself (evaluator, expiry).
    pub fn system() -> Self {
        Actor("system".into())
    }
}

/// A change to the configuration: objects to save, objects to delete, audit entries.
#[derive(Debug, Default)]
pub struct Change {
    /// Objects to create or replace, by id.
    pub puts: Vec<(i64, Object)>,
    /// Objects to delete.
    pub deletes: Vec<i64>,
    /// Audit entries (the actor is filled in).
    pub audit: Vec<(String, String, serde_json::Value)>,
}

impl Change {
    /// Adds an audit entry: action, object, metadata.
    pub fn audit(
        &mut self,
        action: impl Into<String>,
        object: impl Into<String>,
        metadata: serde_json::Value,
    ) {
        self.audit.push((action.into(), object.into(), metadata));
    }
}

/// Shared state of the control plane.
#[derive(Debug)]
pub struct App {
    config: ArcSwap<Config>,
    /// The store.
    pub store: Store,
    /// Group commit of results.
    pub results: ResultWriter,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Settings it runs with.
    pub settings: ServeConfig,
    /// The agent channel's CA.
    pub ca: Ca,
    /// Results, agents and statuses in memory.
    pub runtime: Runtime,
    /// Open and recent alerts.
    pub alerts: Alerts,
    /// The built-in DNS server's answers.
    pub answers: Arc<vantage_dns::Answers>,
    /// DNS settings (SOA, NS).
    pub dns: vantage_dns::DnsSettings,
    /// Publisher tasks.
    pub publishers: crate::publishing::Publishers,
    /// When this process started (alerts about silence wait one window after it).
    pub started: Timestamp,
    triggers: mpsc::UnboundedSender<Trigger>,
    published: ArcSwap<HashMap<ClusterId, Published>>,
    rule_states: ArcSwap<HashMap<ClusterId, Arc<vantage_core::evaluate::ClusterState>>>,
    write_lock: tokio::sync::Mutex<()>,
}

/// What [`App::new`] is made of.
#[derive(Debug)]
pub struct Parts {
    /// Loaded configuration.
    pub config: Config,
    /// Store.
    pub store: Store,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Settings.
    pub settings: ServeConfig,
    /// CA.
    pub ca: Ca,
    /// Where evaluation triggers go.
    pub triggers: mpsc::UnboundedSender<Trigger>,
    /// Where alert changes go.
    pub notices: mpsc::UnboundedSender<crate::alerts::Notice>,
}

impl App {
    /// State over a loaded configuration.
    pub fn new(p: Parts) -> Self {
        p.metrics.set_objects(&p.config);
        App {
            config: ArcSwap::from_pointee(p.config),
            results: ResultWriter::spawn(p.store.clone()),
            store: p.store,
            metrics: p.metrics,
            settings: p.settings,
            ca: p.ca,
            runtime: Runtime::default(),
            alerts: Alerts::new(p.notices),
            answers: Arc::new(vantage_dns::Answers::new(vantage_dns::AnswerTable::empty(
                &vantage_dns::DnsSettings::default(),
            ))),
            dns: vantage_dns::DnsSettings::default(),
            publishers: crate::publishing::Publishers::default(),
            started: now(),
            triggers: p.triggers,
            published: ArcSwap::from_pointee(HashMap::new()),
            rule_states: ArcSwap::from_pointee(HashMap::new()),
            write_lock: tokio::sync::Mutex::new(()),
        }
    }

    /// Asks the evaluator to look at a cluster.
    pub fn trigger(&self, t: Trigger) {
        // The evaluator only stops at shutdown; a trigger then has nothing left to do.
        let _ = self.triggers.send(t);
    }

    /// Asks the evaluator to look at every cluster (probers changed).
    pub fn trigger_all(&self) {
        for id in self.config().clusters.keys() {
            self.trigger(Trigger { cluster: ClusterId(*id), reason: None, immediate: true });
        }
    }

    /// The published records of every cluster.
    pub fn published(&self) -> Arc<HashMap<ClusterId, Published>> {
        self.published.load_full()
    }

    /// Replaces every cluster's published records (at start).
    pub fn set_published(&self, all: HashMap<ClusterId, Published>) {
        self.published.store(Arc::new(all));
        self.rebuild_answers();
    }

    /// Publishes a cluster's new revision: the built-in DNS answers it at once, and its
    /// publishers push it to the external servers.
    pub fn publish(&self, cluster: ClusterId, p: Published) {
        self.published.rcu(|m| {
            let mut m = HashMap::clone(m);
            m.insert(cluster, p.clone());
            m
        });
        self.rebuild_answers();
        self.publishers.push(&self.store, &self.config(), cluster, &p);
    }

    /// Keeps a copy of a cluster's evaluator state after a pass, for the preview and the
    /// rule list.
    pub fn set_rule_states(&self, cluster: ClusterId, state: &vantage_core::evaluate::ClusterState) {
        let copy = Arc::new(state.clone());
        self.rule_states.rcu(|m| {
            let mut m = HashMap::clone(m);
            m.insert(cluster, copy.clone());
            m
        });
    }

    /// A cluster's evaluator state as of its last pass.
    pub fn rule_states(&self, cluster: ClusterId) -> Arc<vantage_core::evaluate::ClusterState> {
        self.rule_states.load().get(&cluster).cloned().unwrap_or_default()
    }

    /// Rebuilds the DNS answer table from the configuration and the published records.
    pub fn rebuild_answers(&self) {
        crate::publishing::rebuild(&self.answers, &self.dns, &self.config(), &self.published());
    }

    /// The current configuration.
    pub fn config(&self) -> Arc<Config> {
        self.config.load_full()
    }

    /// Which scheduling addresses are accepted.
    pub fn address_policy(&self) -> AddressPolicy {
        AddressPolicy { allow_loopback: self.settings.allow_loopback_addresses }
    }

    /// Makes a change: `f` sees the current configuration (and may allocate ids on it), and
    /// returns the change and a value. The change is written with its audit entries in one
    /// transaction, then swapped in. Changes are serialised; a failure changes nothing.
    pub async fn change<T>(
        &self,
        actor: &Actor,
        f: impl FnOnce(&mut Config) -> Result<(Change, T), ApiError>,
    ) -> Result<T, ApiError> {
        let _one_at_a_time = self.write_lock.lock().await;
        let mut next = (*self.config.load_full()).clone();
        let (change, out) = f(&mut next)?;
        let mut writes = Vec::with_capacity(change.puts.len() + change.deletes.len());
        for (id, o) in &change.puts {
            writes.push(o.write(*id)?);
        }
        writes.extend(change.deletes.iter().map(|id| Write::Delete { id: *id }));
        let audit: Vec<NewAudit> = change
            .audit
            .into_iter()
            .map(|(action, object, metadata)| NewAudit { actor: actor.0.clone(), action, object, metadata })
            .collect();
        let at = now();
        self.store.commit(&writes, &audit, at).await?;
        let before = self.config.load_full();
        let effects = Effects::of(&before, &change.puts, &change.deletes);
        for (id, o) in change.puts {
            next.put(id, o, at, at);
        }
        for id in change.deletes {
            next.remove(id);
        }
        self.metrics.set_objects(&next);
        self.config.store(Arc::new(next));
        // Names, aliases and TTLs come from the configuration.
        self.rebuild_answers();
        self.apply(effects).await;
        Ok(out)
    }

    /// Side effects of a committed change: results of probers that stopped counting are
    /// deleted, and the clusters it touches are evaluated at once.
    async fn apply(&self, e: Effects) {
        for p in e.forget {
            self.runtime.forget_prober(p);
            if let Err(err) = self.store.delete_latest_of(p).await {
                tracing::warn!(prober = p, error = %err, "cannot delete the results of a prober");
            }
        }
        if e.all {
            self.trigger_all();
        }
        for (cluster, reason) in e.clusters {
            self.trigger(Trigger { cluster, reason, immediate: true });
        }
    }
}

/// What a change means beyond the objects it saves.
#[derive(Debug, Default)]
struct Effects {
    /// Probers (or probing nodes) whose results must go.
    forget: BTreeSet<i64>,
    /// Evaluate every cluster.
    all: bool,
    /// Clusters to evaluate, with the reason of the change.
    clusters: Vec<(ClusterId, Option<&'static str>)>,
}

const BINDING_SAVED: Option<&str> = Some("Binding saved");

impl Effects {
    fn of(before: &Config, puts: &[(i64, Object)], deletes: &[i64]) -> Effects {
        let mut e = Effects::default();
        for (id, o) in puts {
            match o {
                Object::Settings(_) => e.all = true,
                Object::Prober(p) => {
                    e.all = true;
                    if !p.enabled {
                        e.forget.insert(*id);
                    }
                }
                Object::Cluster(_) => e.clusters.push((ClusterId(*id), BINDING_SAVED)),
                Object::Group(g) => e.clusters.push((g.cluster, BINDING_SAVED)),
                Object::Line(l) => e.clusters.push((l.cluster, BINDING_SAVED)),
                Object::Rule(r) => e.clusters.push((r.cluster, None)),
                Object::Node(n) => {
                    e.clusters.push((n.cluster, BINDING_SAVED));
                    if !n.node.also_probes || !n.node.enabled {
                        e.forget.insert(*id);
                    }
                    e.all |= before
                        .nodes
                        .get(id)
                        .is_some_and(|old| old.value.node.also_probes != n.node.also_probes);
                }
                Object::Region(_) | Object::AdminToken(_) | Object::EnrollToken(_) | Object::Webhook(_) => {}
            }
        }
        for id in deletes {
            if before.probers.contains_key(id) {
                e.forget.insert(*id);
                e.all = true;
            }
            if let Some(n) = before.nodes.get(id) {
                e.forget.insert(*id);
                e.clusters.push((n.value.cluster, BINDING_SAVED));
                e.all |= n.value.node.also_probes;
            }
            for (cluster, map_has) in [
                (before.groups.get(id).map(|g| g.value.cluster), true),
                (before.lines.get(id).map(|l| l.value.cluster), true),
                (before.rules.get(id).map(|r| r.value.cluster), false),
            ] {
                if let Some(c) = cluster {
                    e.clusters.push((c, if map_has { BINDING_SAVED } else { None }));
                }
            }
        }
        e
    }
}
