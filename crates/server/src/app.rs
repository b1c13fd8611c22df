//! The running control plane's shared state: the control core's owner (where inputs go, and
//! the view it published last, which every reader takes without waiting on a pass), the
//! store, the DNS answer table, and the one path by which configuration changes.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use tokio::sync::mpsc;
use vantage_control::config::{Config, Object};
use vantage_control::mirrors::doors::Doors;
use vantage_control::monitors::SteeringTable;
use vantage_control::view::View;
use vantage_control::{Control, Output, Start};
use vantage_core::address::AddressPolicy;
use vantage_core::fetch::FetchPolicy;
use vantage_store::{FileWrite, LogAs, NewAudit, Store, Write};

use crate::ca::Ca;
use crate::config::ServeConfig;
use crate::error::ApiError;
use crate::metrics::Metrics;
use crate::owner::Owner;
use crate::publishing::Publishers;
use crate::support::now;

/// An audit entry of `actor`'s, its metadata without secrets (the audit log is read through
/// the API and the UI).
fn audit_entry(actor: &Actor, action: &str, object: &str, metadata: serde_json::Value) -> NewAudit {
    let metadata = crate::support::redact(metadata);
    NewAudit { actor: actor.0.clone(), action: action.into(), object: object.into(), metadata }
}

/// A change log number another replica took first: the caller may try again.
fn conflict(e: vantage_store::Error) -> ApiError {
    match e {
        vantage_store::Error::Conflict => ApiError::Conflict(
            "the configuration changed through another replica at the same moment; try again".into(),
        ),
        e => e.into(),
    }
}

/// Who made a change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Actor(pub String);

impl Actor {
    /// The system itself (enrollment, expiry).
    pub(crate) fn system() -> Self {
        Actor("system".into())
    }
}

/// A change to the configuration: objects to save, objects to delete, audit entries.
#[derive(Debug, Default)]
pub(crate) struct Change {
    /// Objects to create or replace, by id.
    pub puts: Vec<(i64, Object)>,
    /// Objects to delete.
    pub deletes: Vec<i64>,
    /// Audit entries (the actor is filled in).
    pub audit: Vec<(String, String, serde_json::Value)>,
    /// Mirror registry files written with it (a fleet file's tenants and mirrors): logged in
    /// the same commit for the other replicas, then written and the registry reloaded.
    pub files: Vec<FileWrite>,
    /// Who made it, when only the change knows: a prober or node enrolling, whose id the
    /// change allocates. `None`: the actor `App::change` was called with.
    pub actor: Option<Actor>,
}

impl Change {
    /// Adds an audit entry: action, object, metadata.
    pub(crate) fn audit(
        &mut self,
        action: impl Into<String>,
        object: impl Into<String>,
        metadata: serde_json::Value,
    ) {
        // Secrets never reach the audit log (it is read through the API and the UI).
        self.audit.push((action.into(), object.into(), crate::support::redact(metadata)));
    }

    /// The change that replaces a settings object there is one of (`settings:{name}`): stored
    /// under `id` once it has one (else a new id of `c`), audited as `action` with before and
    /// after. The same settings again change nothing: no audit entry, no numbered change and
    /// no pass of every cluster at once.
    pub(crate) fn settings(
        c: &mut Config,
        id: Option<i64>,
        name: &str,
        action: &str,
        before: serde_json::Value,
        after: serde_json::Value,
        object: Object,
    ) -> Change {
        if before == after {
            return Change::default();
        }
        let id = id.unwrap_or_else(|| c.allocate());
        let mut ch = Change::default();
        ch.audit(action, format!("settings:{name}"), serde_json::json!({"before": before, "after": after}));
        ch.puts.push((id, object));
        ch
    }
}

/// Shared state of the control plane.
#[derive(Debug)]
pub(crate) struct App {
    /// The control core's owner.
    owner: Owner,
    /// Bumped whenever confirmations wait: every recheck request held open looks again.
    rechecks: tokio::sync::watch::Sender<u64>,
    /// Bumped whenever a view with another configuration is published: open event streams
    /// look again at the admin token they were opened with.
    config_changes: tokio::sync::watch::Receiver<u64>,
    store: Store,
    /// Reports taken in: the results acknowledged and being stored.
    intake: crate::channel::Intake,
    /// What the last object lists wrote, reused for the items that did not change.
    written: crate::api::Written,
    metrics: Arc<Metrics>,
    settings: ServeConfig,
    ca: Ca,
    answers: Arc<vantage_dns::Answers>,
    dns: vantage_dns::DnsSettings,
    /// The geo databases in use (`None`: none configured); the DNS answers are rebuilt with
    /// each new one.
    geo: tokio::sync::watch::Sender<Option<Arc<vantage_dns::GeoDb>>>,
    publishers: Publishers,
    write_lock: tokio::sync::Mutex<()>,
    /// Serialises writes to the mirror registry's files.
    mirrors_lock: tokio::sync::Mutex<()>,
    /// The open event streams.
    events: crate::events::EventHub,
    /// This replica's share of the replication, on a database several replicas share.
    replica: Option<crate::replicas::Replica>,
    /// Where this server's own fetches may go (the probers get the same with their work).
    fetch: FetchPolicy,
    /// Requests counted by region, not yet handed to the control core.
    demand: crate::demand::Pending,
}

/// What [`App::new`] is made of.
#[derive(Debug)]
pub(crate) struct Parts {
    /// What the control core starts from.
    pub start: Start,
    pub store: Store,
    pub metrics: Arc<Metrics>,
    pub settings: ServeConfig,
    pub ca: Ca,
    pub replica: Option<crate::replicas::Replica>,
}

impl App {
    /// State over what was loaded, with the control core's owner and the report intake
    /// started; what the core decides is queued for the driver ([`crate::driver::run`]).
    pub(crate) fn new(p: Parts) -> (Arc<Self>, mpsc::UnboundedReceiver<Output>) {
        let fetch = p.start.fetch.clone();
        let control = Control::new(p.start, now());
        let events = crate::events::EventHub::new(control.event_base());
        let (config_changed, config_changes) = tokio::sync::watch::channel(0);
        let (owner, decided) = Owner::spawn(control, p.metrics.clone(), config_changed);
        let publishers = Publishers::new(p.metrics.clone());
        let dns = vantage_dns::DnsSettings::default();
        let app = Arc::new_cyclic(|me| App {
            owner,
            mirrors_lock: tokio::sync::Mutex::new(()),
            events,
            rechecks: tokio::sync::watch::Sender::new(0),
            config_changes,
            intake: crate::channel::Intake::new(p.store.clone(), me.clone()),
            written: Default::default(),
            store: p.store,
            metrics: p.metrics,
            settings: p.settings,
            ca: p.ca,
            answers: Arc::new(vantage_dns::Answers::new(vantage_dns::AnswerTable::empty(&dns))),
            dns,
            geo: tokio::sync::watch::Sender::new(None),
            publishers,
            write_lock: tokio::sync::Mutex::new(()),
            replica: p.replica,
            fetch,
            demand: Default::default(),
        });
        (app, decided)
    }

    /// Where this server's own fetches may go.
    pub(crate) fn fetch_policy(&self) -> &FetchPolicy {
        &self.fetch
    }

    /// This replica's share of the replication (PostgreSQL only).
    pub(crate) fn replica(&self) -> Option<&crate::replicas::Replica> {
        self.replica.as_ref()
    }

    /// Hands what the core is fed, at `at`, to the other replicas' cores (made only when there
    /// are any), which take it at that time.
    pub(crate) fn relay(&self, at: vantage_core::Timestamp, r: impl FnOnce() -> vantage_control::Relayed) {
        if let Some(replica) = &self.replica {
            replica.relay(at, &r());
        }
    }

    /// Serialises configuration changes: this replica's and those it applies from the others.
    pub(crate) async fn changing(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.write_lock.lock().await
    }

    /// The view the control core's owner published last: what every reader reads.
    pub(crate) fn view(&self) -> Arc<View> {
        self.owner.view()
    }

    /// The control core's owner, to feed it.
    pub(crate) fn owner(&self) -> &Owner {
        &self.owner
    }

    /// Wakes the recheck requests held open.
    pub(crate) fn wake_rechecks(&self) {
        self.rechecks.send_modify(|g| *g = g.wrapping_add(1));
    }

    /// A receiver that sees every later [`wake_rechecks`](Self::wake_rechecks).
    pub(crate) fn rechecks(&self) -> tokio::sync::watch::Receiver<u64> {
        self.rechecks.subscribe()
    }

    /// Where events go live.
    pub(crate) fn events(&self) -> &crate::events::EventHub {
        &self.events
    }

    /// The current configuration.
    pub(crate) fn config(&self) -> Arc<Config> {
        self.view().config.clone()
    }

    /// A receiver that sees every later publication of another configuration.
    pub(crate) fn config_changes(&self) -> tokio::sync::watch::Receiver<u64> {
        let mut rx = self.config_changes.clone();
        rx.borrow_and_update();
        rx
    }

    /// What `/steer/{monitor}` answers.
    pub(crate) fn steering(&self) -> Arc<SteeringTable> {
        self.view().steering.clone()
    }

    /// What doors choose from.
    pub(crate) fn doors(&self) -> Arc<Doors> {
        self.view().doors.clone()
    }

    /// The mirror registry's directory.
    pub(crate) fn mirrors_dir(&self) -> PathBuf {
        self.settings.data_dir.join("mirrors")
    }

    /// Serialises a write to the registry's files and its reload.
    pub(crate) async fn mirrors_write(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.mirrors_lock.lock().await
    }

    /// Audits something `actor` did outside the configuration store (the registry's files).
    pub(crate) async fn audit(&self, actor: &Actor, action: &str, object: &str, metadata: serde_json::Value) {
        if let Err(e) = self.store.commit(&[], &[audit_entry(actor, action, object, metadata)], now()).await {
            tracing::error!(action, object, error = %e, "cannot write audit entry");
        }
    }

    /// Audits what the system itself did.
    pub(crate) async fn audit_system(&self, action: &str, object: &str, metadata: serde_json::Value) {
        self.audit(&Actor::system(), action, object, metadata).await;
    }

    pub(crate) fn store(&self) -> &Store {
        &self.store
    }

    /// Reports taken in, their results being stored.
    pub(crate) fn intake(&self) -> &crate::channel::Intake {
        &self.intake
    }

    /// What the last object lists wrote.
    pub(crate) fn written(&self) -> &crate::api::Written {
        &self.written
    }

    /// The Prometheus registry.
    pub(crate) fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// What the server runs with.
    pub(crate) fn settings(&self) -> &ServeConfig {
        &self.settings
    }

    /// The agent channel's CA.
    pub(crate) fn ca(&self) -> &Ca {
        &self.ca
    }

    /// The built-in DNS server's answers.
    pub(crate) fn answers(&self) -> &Arc<vantage_dns::Answers> {
        &self.answers
    }

    /// The geo databases in use (`None`: none configured).
    pub(crate) fn geo(&self) -> Option<Arc<vantage_dns::GeoDb>> {
        self.geo.borrow().clone()
    }

    /// Requests counted by region, not yet handed to the control core.
    pub(crate) fn demand(&self) -> &crate::demand::Pending {
        &self.demand
    }

    /// Where the geo databases place a client (`None`: none configured). The databases are
    /// taken first, so the look-up holds no lock.
    pub(crate) fn place(&self, ip: std::net::IpAddr) -> Option<vantage_core::geo::Place> {
        self.geo().map(|g| g.locate(ip).place)
    }

    /// Puts `geo` in use: for the doors at once, for DNS with the next table (the driver
    /// rebuilds it on this change).
    pub(crate) fn set_geo(&self, geo: Option<Arc<vantage_dns::GeoDb>>) {
        self.metrics.set_geo(geo.as_deref());
        self.geo.send_replace(geo);
    }

    /// Changes of the geo databases in use.
    pub(crate) fn geo_changes(&self) -> tokio::sync::watch::Receiver<Option<Arc<vantage_dns::GeoDb>>> {
        self.geo.subscribe()
    }

    /// DNS settings (SOA, NS).
    pub(crate) fn dns(&self) -> &vantage_dns::DnsSettings {
        &self.dns
    }

    /// Publisher tasks.
    pub(crate) fn publishers(&self) -> &Publishers {
        &self.publishers
    }

    /// Which scheduling addresses are accepted.
    pub(crate) fn address_policy(&self) -> AddressPolicy {
        AddressPolicy { allow_loopback: self.settings.allow_loopback_addresses }
    }

    /// Makes a change: `f` sees the current configuration (and may allocate ids on it), and
    /// returns the change and a value. The change is written with its audit entries in one
    /// transaction, then handed to the control core. Changes are serialised; a failure
    /// changes nothing.
    pub(crate) async fn change<T>(
        &self,
        actor: &Actor,
        f: impl FnOnce(&mut Config) -> Result<(Change, T), ApiError>,
    ) -> Result<T, ApiError> {
        let _one_at_a_time = self.changing().await;
        // Another replica's changes first: this one is validated against all of them.
        if let Some(r) = &self.replica {
            crate::replicas::changes_locked(self, r).await?;
        }
        let mut next = (*self.config()).clone();
        let (change, out) = f(&mut next)?;
        if change.puts.is_empty()
            && change.deletes.is_empty()
            && change.files.is_empty()
            && change.audit.is_empty()
        {
            // Nothing to write: no commit, and on replicas no numbered change in the log.
            return Ok(out);
        }
        let mut writes = Vec::with_capacity(change.puts.len() + change.deletes.len());
        for (id, o) in &change.puts {
            writes.push(store_write(o, *id)?);
        }
        writes.extend(change.deletes.iter().map(|id| Write::Delete { id: *id }));
        let actor = change.actor.as_ref().unwrap_or(actor);
        let audit: Vec<NewAudit> = change
            .audit
            .into_iter()
            .map(|(action, object, metadata)| NewAudit { actor: actor.0.clone(), action, object, metadata })
            .collect();
        let at = now();
        let place = self.owner.reserve().await?;
        self.commit_numbered(&writes, &change.files, &audit, at).await?;
        Owner::hand_over(place, change.puts, change.deletes, at).await?;
        if !change.files.is_empty() {
            self.write_registry_files(change.files).await?;
        }
        Ok(out)
    }

    /// Writes the registry files a committed change holds, then reloads the registry.
    async fn write_registry_files(&self, files: Vec<FileWrite>) -> Result<(), ApiError> {
        let _files = self.mirrors_write().await;
        let dir = self.mirrors_dir();
        let written = tokio::task::spawn_blocking(move || {
            files.iter().try_for_each(|f| {
                crate::mirrors::put_file(&dir, &f.name, f.text.as_deref())
                    .map_err(|e| format!("{}: {e}", f.name))
            })
        })
        .await
        .map_err(|e| ApiError::Internal(format!("the registry write stopped: {e}")))?;
        // Committed already: the files written before the one that failed stay, and the
        // registry keeps serving what it last loaded until the directory is fixed.
        written.map_err(|e| {
            ApiError::Internal(format!(
                "committed, but the mirror registry file {e}; the registry was not reloaded"
            ))
        })?;
        self.reload_after_write().await
    }

    /// Reloads the registry after a write through the API. The write was checked with the
    /// registry as it was; a reload that fails all the same (a file changed by hand in
    /// between) is a conflict: the write stands, and the previous registry keeps serving until
    /// the directory is fixed.
    pub(crate) async fn reload_after_write(&self) -> Result<(), ApiError> {
        crate::mirrors::reload(self).await.map(drop).map_err(|e| {
            ApiError::Conflict(format!(
                "written, but the registry did not reload because of another file, so the previous one keeps serving: {e}"
            ))
        })
    }

    /// Commits `writes`, registry `files` and `audit` in one transaction; on replicas logged as
    /// the change after the newest this replica applied (the caller holds the change lock and
    /// has applied the others' changes), which it then holds.
    async fn commit_numbered(
        &self,
        writes: &[Write],
        files: &[FileWrite],
        audit: &[NewAudit],
        at: vantage_core::Timestamp,
    ) -> Result<(), ApiError> {
        let log = self.replica.as_ref().map(|r| LogAs {
            seq: r.applied.load(Ordering::Relaxed) + 1,
            origin: &r.origin,
            files,
        });
        self.store.commit_logged(log, writes, audit, at).await.map_err(conflict)?;
        if let (Some(r), Some(log)) = (&self.replica, log) {
            r.applied.store(log.seq, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Logs a registry file written through this replica's API for the other replicas, with
    /// its audit entry, in one commit numbered like a change (the caller holds the change lock
    /// and has applied the others' changes). Without replicas there is nothing to log, and the
    /// audit entry is written as every other write outside the configuration store's is.
    pub(crate) async fn log_registry(
        &self,
        actor: &Actor,
        file: &FileWrite,
        action: &str,
        object: &str,
        metadata: serde_json::Value,
    ) -> Result<(), ApiError> {
        if self.replica.is_none() {
            self.audit(actor, action, object, metadata).await;
            return Ok(());
        }
        let entry = audit_entry(actor, action, object, metadata);
        self.commit_numbered(&[], std::slice::from_ref(file), &[entry], now()).await
    }

    /// Hands a committed change (this replica's, or another's read from the log) to the
    /// control core; returns once the published view holds it.
    pub(crate) async fn apply(
        &self,
        puts: Vec<(i64, Object)>,
        deletes: Vec<i64>,
        at: vantage_core::Timestamp,
    ) -> Result<(), ApiError> {
        Owner::hand_over(self.owner.reserve().await?, puts, deletes, at).await
    }
}

/// The store write that saves `o` under `id`.
fn store_write(o: &Object, id: i64) -> Result<Write, ApiError> {
    Ok(Write::Put {
        id,
        kind: o.kind().to_owned(),
        parent: o.parent(),
        name: o.name(),
        body: o.body().map_err(|e| ApiError::Internal(e.to_string()))?,
    })
}

/// A control plane over a real store (SQLite, `vantage.db`) in a directory of its own, with an
/// admin token; what its core decides goes nowhere.
#[cfg(test)]
pub(crate) async fn lab() -> (tempfile::TempDir, Arc<App>, String) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_sqlite(&dir.path().join("vantage.db")).await.unwrap();
    let ca = Ca::load_or_create(&dir.path().join("ca")).unwrap();
    let settings = ServeConfig { data_dir: dir.path().into(), ..Default::default() };
    let metrics = Arc::new(Metrics::new());
    let parts = Parts { start: Start::default(), store, metrics, settings, ca, replica: None };
    let app = App::new(parts).0;
    let (_, token) = crate::api::create_admin_token(&app, &Actor::system(), "ops", false).await.unwrap();
    (dir, app, token)
}

/// Runs `sql` on the database at `path` from another process, as an operator would.
#[cfg(test)]
pub(crate) fn sqlite3(path: &std::path::Path, sql: &str) {
    let out = std::process::Command::new("sqlite3").arg(path).arg(sql).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}
