//! The running control plane's shared state: the configuration snapshot, the store, the
//! metrics, and the one path by which configuration changes.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use arc_swap::ArcSwap;
use vantage_core::Timestamp;
use vantage_core::address::AddressPolicy;
use vantage_store::{NewAudit, Store, Write};

use crate::config::ServeConfig;
use crate::error::ApiError;
use crate::metrics::Metrics;
use crate::registry::{Config, Object};

/// The wall clock, as the core's time.
pub fn now() -> Timestamp {
    let ms = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis());
    Timestamp::from_millis(i64::try_from(ms).unwrap_or(i64::MAX))
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
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Settings it runs with.
    pub settings: ServeConfig,
    write_lock: tokio::sync::Mutex<()>,
}

impl App {
    /// State over a loaded configuration.
    pub fn new(config: Config, store: Store, metrics: Arc<Metrics>, settings: ServeConfig) -> Self {
        metrics.set_objects(&config);
        App {
            config: ArcSwap::from_pointee(config),
            store,
            metrics,
            settings,
            write_lock: tokio::sync::Mutex::new(()),
        }
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
        for (id, o) in change.puts {
            next.put(id, o, at, at);
        }
        for id in change.deletes {
            next.remove(id);
        }
        self.metrics.set_objects(&next);
        self.config.store(Arc::new(next));
        Ok(out)
    }
}
