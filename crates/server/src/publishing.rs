//! From revisions to DNS: the answer table of the built-in server is rebuilt whole from every
//! cluster's published records whenever one changes, and each cluster's external servers get
//! its newest revision through their publishers. A publisher works on its own task and always
//! sends the newest records; the outcome of each push is recorded on the revision it carried.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::sync::watch;
use vantage_control::snapshot::{Published, Snapshots};
use vantage_core::ids::ClusterId;
use vantage_core::model::{PublisherSpec, TsigAlgorithm};
use vantage_dns::{
    AnswerTable, Answers, DnsSettings, GeoDb, LineAnswers, PublishOutcome, Publisher, RetryPolicy,
    Rfc2136Config, Rfc2136Publisher, TsigKey, ZoneAnswers,
};
use vantage_store::Store;

use crate::app::App;
use crate::metrics::Metrics;
use crate::owner::Input;
use crate::support::lock;

/// The zone answers of a published revision: records, names and TTL all as of that revision,
/// so the serial always matches what is served.
fn zone(p: &Published) -> ZoneAnswers {
    ZoneAnswers {
        cluster: p.zone.name.clone(),
        domain: p.zone.domain.clone(),
        aliases: p.zone.aliases.clone(),
        ttl: p.zone.ttl,
        serial: p.number,
        lines: p
            .lines()
            .map(|(id, line, records)| LineAnswers {
                name: line.name.clone(),
                client_networks: line.client_networks.clone(),
                places: line.places.clone(),
                records: records.to_vec(),
                ttl: p.records.ttls.get(&id).copied(),
            })
            .collect(),
        all: p.records.all.clone(),
    }
}

/// Rebuilds the answer table from the revisions the snapshots publish (and nothing else),
/// placing clients with `geo`.
pub(crate) fn rebuild(
    answers: &Answers,
    settings: &DnsSettings,
    snapshots: &Snapshots,
    geo: Option<Arc<GeoDb>>,
) {
    let zones = snapshots.values().filter_map(|s| s.published.as_deref()).map(zone).collect();
    let table = AnswerTable::build(zones, settings).with_geo(geo);
    for p in table.problems() {
        tracing::warn!(problem = %p, "DNS answer table");
    }
    answers.store(table);
}

fn publisher(spec: &PublisherSpec) -> Result<Rfc2136Publisher, String> {
    let algorithm = match spec.key_algorithm {
        TsigAlgorithm::HmacSha256 => vantage_dns::TsigAlgorithm::HmacSha256,
        TsigAlgorithm::HmacSha384 => vantage_dns::TsigAlgorithm::HmacSha384,
        TsigAlgorithm::HmacSha512 => vantage_dns::TsigAlgorithm::HmacSha512,
    };
    let key = TsigKey::from_base64(&spec.key_name, algorithm, &spec.key_secret).map_err(|e| e.to_string())?;
    Rfc2136Publisher::new(Rfc2136Config {
        server: spec.server,
        zone: spec.zone.clone(),
        key,
        timeout: Duration::from_secs(5),
        retry: RetryPolicy::default(),
    })
    .map_err(|e| e.to_string())
}

type Job = Option<(u32, ZoneAnswers)>;
/// Publish outcomes by (cluster, revision).
type Outcomes = Arc<Mutex<HashMap<(ClusterId, u32), Vec<PublishOutcome>>>>;
/// Running workers by (cluster, publisher name), with the spec they were made from.
type Workers = Mutex<HashMap<(ClusterId, String), (PublisherSpec, watch::Sender<Job>)>>;

/// Publisher tasks, one per (cluster, publisher).
#[derive(Debug)]
pub(crate) struct Publishers {
    workers: Workers,
    outcomes: Outcomes,
    metrics: Arc<Metrics>,
}

impl Publishers {
    /// No publisher yet; outcomes are counted in `metrics`.
    pub(crate) fn new(metrics: Arc<Metrics>) -> Self {
        Publishers { workers: Workers::default(), outcomes: Outcomes::default(), metrics }
    }

    /// Hands a cluster's newest revision to each of its publishers (starting, replacing or
    /// stopping workers as the cluster's publisher list says).
    pub(crate) fn push(&self, app: &Arc<App>, p: &Published) {
        let (store, c) = (app.store(), &app.config());
        let id = p.cluster;
        let Some(cluster) = c.clusters.get(&id.0) else { return };
        let z = zone(p);
        let mut workers = lock(&self.workers);
        workers.retain(|(cl, name), (spec, _)| {
            *cl != id || cluster.value.publishers.iter().any(|s| &s.name == name && s == spec)
        });
        for spec in &cluster.value.publishers {
            let key = (id, spec.name.clone());
            if !workers.contains_key(&key) {
                match publisher(spec) {
                    Ok(pb) => {
                        self.metrics.publisher(&z.cluster, pb.target());
                        let (tx, rx) = watch::channel(None);
                        tokio::spawn(work(
                            Box::new(pb),
                            rx,
                            (store.clone(), Arc::downgrade(app)),
                            id,
                            self.outcomes.clone(),
                            self.metrics.clone(),
                        ));
                        workers.insert(key.clone(), (spec.clone(), tx));
                    }
                    Err(e) => {
                        tracing::error!(cluster = %cluster.value.name, publisher = %spec.name, error = %e, "publisher not usable");
                        continue;
                    }
                }
            }
            if let Some((_, tx)) = workers.get(&key) {
                tx.send_replace(Some((p.number, z.clone())));
            }
        }
    }
}

/// One publisher's loop: publish the newest job, record the outcome, wait for the next.
async fn work(
    publisher: Box<dyn Publisher>,
    mut rx: watch::Receiver<Job>,
    (store, app): (Store, Weak<App>),
    cluster: ClusterId,
    outcomes: Outcomes,
    metrics: Arc<Metrics>,
) {
    while rx.changed().await.is_ok() {
        let Some((number, zone)) = rx.borrow_and_update().clone() else { continue };
        let outcome = publisher.publish(&zone).await;
        let published = matches!(outcome.status, vantage_dns::PublishStatus::Published);
        metrics.publication(&zone.cluster, &outcome.target, published);
        tracing::info!(cluster = %zone.cluster, revision = number, target = %outcome.target, status = ?outcome.status, attempts = outcome.attempts, "publish");
        // The worker outlives nothing: once the server is gone there is no one to tell.
        if let Some(app) = app.upgrade() {
            let failure = match &outcome.status {
                vantage_dns::PublishStatus::Published => None,
                vantage_dns::PublishStatus::Failed { reason } => Some(reason.as_str()),
            };
            let publication = Input::Publication {
                cluster,
                number,
                target: outcome.target.clone(),
                failure: failure.map(str::to_owned),
            };
            // Stopping: no one is left to tell.
            let _ = app.owner().tell(publication).await;
        }
        let all = {
            let mut o = lock(&outcomes);
            let list = o.entry((cluster, number)).or_default();
            list.retain(|x| x.target != outcome.target);
            list.push(outcome);
            // Keep the outcomes of recent revisions only.
            if o.len() > 1000 {
                let oldest = o.keys().min_by_key(|(_, n)| *n).copied();
                if let Some(k) = oldest {
                    o.remove(&k);
                }
            }
            o.get(&(cluster, number)).cloned().unwrap_or_default()
        };
        let json = serde_json::to_value(&all).unwrap_or_default();
        if let Err(e) = store.set_revision_publish(cluster.0, number, &json).await {
            tracing::warn!(cluster = cluster.0, revision = number, error = %e, "cannot record the publish outcome");
        }
    }
}
