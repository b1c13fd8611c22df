//! Alerts: what fires and resolves (scheduling actions, unreachable addresses, held
//! revisions, probers and node agents gone quiet), the open and recent list, and delivery to
//! webhook sinks — JSON or an Alertmanager-compatible payload — with retries, on a task of its
//! own so that delivery never slows evaluation.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use vantage_core::Timestamp;

use crate::app::now;
use crate::runtime::lock;

/// Resolved alerts kept for the list.
const RECENT: usize = 500;

/// Firing or resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AlertState {
    /// Open.
    Firing,
    /// Closed.
    Resolved,
}

/// One alert.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Alert {
    /// Sequence number.
    pub id: u64,
    /// What it is about; one open alert per key (`scheduling_action/rule:3/node:7`).
    pub key: String,
    /// Kind (`scheduling_action`, `address_unreachable`, `revision_held`, `prober_offline`,
    /// `node_offline`).
    pub kind: String,
    /// State.
    pub state: AlertState,
    /// One line for people.
    pub summary: String,
    /// Details (rule, node, values…).
    pub details: Value,
    /// When it fired.
    pub fired_at: Timestamp,
    /// When it resolved.
    pub resolved_at: Option<Timestamp>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Book {
    next_id: u64,
    open: BTreeMap<String, Alert>,
    recent: VecDeque<Alert>,
}

/// A change to deliver.
#[derive(Debug, Clone)]
pub struct Notice(pub Alert);

/// The alert book.
#[derive(Debug)]
pub struct Alerts {
    book: Mutex<Book>,
    notices: mpsc::UnboundedSender<Notice>,
    dirty: tokio::sync::Notify,
}

impl Alerts {
    /// An empty book whose changes go to `notices`.
    pub fn new(notices: mpsc::UnboundedSender<Notice>) -> Self {
        Alerts { book: Mutex::new(Book::default()), notices, dirty: tokio::sync::Notify::new() }
    }

    /// Restores a saved book.
    pub fn restore(&self, json: &str) {
        match serde_json::from_str::<Book>(json) {
            Ok(b) => *lock(&self.book) = b,
            Err(e) => tracing::warn!(error = %e, "saved alerts unreadable; starting with none"),
        }
    }

    /// The book as JSON, for saving.
    pub fn snapshot(&self) -> String {
        serde_json::to_string(&*lock(&self.book)).unwrap_or_default()
    }

    /// Resolves when the book changed since the last call.
    pub async fn changed(&self) {
        self.dirty.notified().await;
    }

    /// Fires `key` unless it is already open (then only its details are updated).
    pub fn fire(&self, key: String, kind: &str, summary: String, details: Value) {
        let mut b = lock(&self.book);
        if let Some(open) = b.open.get_mut(&key) {
            open.details = details;
            return;
        }
        b.next_id += 1;
        let alert = Alert {
            id: b.next_id,
            key: key.clone(),
            kind: kind.to_owned(),
            state: AlertState::Firing,
            summary,
            details,
            fired_at: now(),
            resolved_at: None,
        };
        tracing::warn!(kind, summary = %alert.summary, "alert firing");
        b.open.insert(key, alert.clone());
        drop(b);
        let _ = self.notices.send(Notice(alert));
        self.dirty.notify_one();
    }

    /// Resolves `key` if it is open.
    pub fn resolve(&self, key: &str) {
        let mut b = lock(&self.book);
        let Some(mut alert) = b.open.remove(key) else { return };
        alert.state = AlertState::Resolved;
        alert.resolved_at = Some(now());
        tracing::info!(kind = %alert.kind, summary = %alert.summary, "alert resolved");
        b.recent.push_front(alert.clone());
        b.recent.truncate(RECENT);
        drop(b);
        let _ = self.notices.send(Notice(alert));
        self.dirty.notify_one();
    }

    /// Open alerts (oldest first) and recently resolved ones (newest first).
    pub fn list(&self) -> (Vec<Alert>, Vec<Alert>) {
        let b = lock(&self.book);
        let mut open: Vec<Alert> = b.open.values().cloned().collect();
        open.sort_by_key(|a| a.id);
        (open, b.recent.iter().cloned().collect())
    }
}

/// A webhook sink.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Webhook {
    /// Name, unique.
    pub name: String,
    /// Where to POST.
    pub url: String,
    /// Payload format.
    #[serde(default)]
    pub format: WebhookFormat,
    /// Disabled sinks get nothing.
    #[serde(default = "yes")]
    pub enabled: bool,
}

fn yes() -> bool {
    true
}

/// Payload of a webhook.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WebhookFormat {
    /// Vantage's JSON: one alert per request.
    #[default]
    Json,
    /// The Alertmanager webhook payload (version 4).
    Alertmanager,
}

impl Webhook {
    /// Validates a sink.
    pub fn check(self) -> Result<Webhook, vantage_core::Error> {
        let name = vantage_core::model::display_name("name", &self.name)?;
        let url = vantage_core::monitor::endpoint_url("url", &self.url)?;
        Ok(Webhook { name, url, ..self })
    }
}

/// The body a sink receives for `a`.
pub fn payload(a: &Alert, format: WebhookFormat) -> Value {
    let status = match a.state {
        AlertState::Firing => "firing",
        AlertState::Resolved => "resolved",
    };
    match format {
        WebhookFormat::Json => json!({
            "status": status,
            "id": a.id,
            "kind": a.kind,
            "key": a.key,
            "summary": a.summary,
            "details": a.details,
            "fired_at": a.fired_at,
            "resolved_at": a.resolved_at,
            "time": a.resolved_at.unwrap_or(a.fired_at),
        }),
        WebhookFormat::Alertmanager => {
            let mut labels = serde_json::Map::new();
            labels.insert("alertname".into(), json!(a.kind));
            if let Value::Object(d) = &a.details {
                for (k, v) in d {
                    if let Some(s) = v.as_str() {
                        labels.insert(k.clone(), json!(s));
                    } else if v.is_number() {
                        labels.insert(k.clone(), json!(v.to_string()));
                    }
                }
            }
            let ends = a.resolved_at.map_or_else(|| "0001-01-01T00:00:00Z".to_owned(), |t| t.to_string());
            json!({
                "version": "4",
                "groupKey": a.key,
                "status": status,
                "receiver": "vantage",
                "groupLabels": {"alertname": a.kind},
                "commonLabels": labels,
                "commonAnnotations": {"summary": a.summary},
                "externalURL": "",
                "truncatedAlerts": 0,
                "alerts": [{
                    "status": status,
                    "labels": labels,
                    "annotations": {"summary": a.summary, "details": a.details.to_string()},
                    "startsAt": a.fired_at.to_string(),
                    "endsAt": ends,
                    "generatorURL": "",
                    "fingerprint": format!("{:016x}", a.id),
                }],
            })
        }
    }
}

/// Delivery attempts per notice and sink.
const ATTEMPTS: u32 = 6;

/// Delivers notices to the enabled sinks `sinks()` returns, each with retries and back-off
/// (0.5 s doubling), each sink on its own task.
pub async fn deliver(
    mut notices: mpsc::UnboundedReceiver<Notice>,
    sinks: Arc<dyn Fn() -> Vec<Webhook> + Send + Sync>,
) {
    let client = match reqwest::Client::builder().timeout(Duration::from_secs(10)).build() {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "webhook client unavailable; alerts will not be delivered");
            return;
        }
    };
    while let Some(Notice(alert)) = notices.recv().await {
        for sink in sinks().into_iter().filter(|s| s.enabled) {
            let body = payload(&alert, sink.format);
            let client = client.clone();
            tokio::spawn(async move {
                let mut wait = Duration::from_millis(500);
                for attempt in 1..=ATTEMPTS {
                    match client.post(&sink.url).json(&body).send().await {
                        Ok(r) if r.status().is_success() => return,
                        Ok(r) => {
                            tracing::warn!(sink = %sink.name, status = r.status().as_u16(), attempt, "webhook refused the alert")
                        }
                        Err(e) => {
                            tracing::warn!(sink = %sink.name, error = %e, attempt, "webhook unreachable")
                        }
                    }
                    tokio::time::sleep(wait).await;
                    wait *= 2;
                }
                tracing::error!(sink = %sink.name, "webhook delivery gave up");
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fire_once_resolve_once() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let a = Alerts::new(tx);
        a.fire("k".into(), "node_offline", "edge-1 offline".into(), json!({"node": "edge-1"}));
        a.fire("k".into(), "node_offline", "edge-1 offline".into(), json!({"node": "edge-1", "n": 2}));
        assert_eq!(a.list().0.len(), 1);
        assert_eq!(a.list().0[0].details["n"], 2);
        a.resolve("k");
        a.resolve("k");
        let (open, recent) = a.list();
        assert!(open.is_empty());
        assert_eq!(recent[0].state, AlertState::Resolved);
        let mut notices = Vec::new();
        while let Ok(n) = rx.try_recv() {
            notices.push(n.0.state);
        }
        assert_eq!(notices, [AlertState::Firing, AlertState::Resolved]);
    }

    #[test]
    fn alertmanager_payload_shape() {
        let a = Alert {
            id: 7,
            key: "k".into(),
            kind: "scheduling_action".into(),
            state: AlertState::Firing,
            summary: "cpu-high · edge-1".into(),
            details: json!({"rule": "cpu-high", "node": "edge-1", "revision": 4}),
            fired_at: Timestamp::from_secs(1_800_000_000),
            resolved_at: None,
        };
        let p = payload(&a, WebhookFormat::Alertmanager);
        assert_eq!(p["version"], "4");
        assert_eq!(p["alerts"][0]["labels"]["alertname"], "scheduling_action");
        assert_eq!(p["alerts"][0]["labels"]["rule"], "cpu-high");
        assert_eq!(p["alerts"][0]["labels"]["revision"], "4");
        assert_eq!(p["alerts"][0]["endsAt"], "0001-01-01T00:00:00Z");
        let j = payload(&a, WebhookFormat::Json);
        assert_eq!((j["status"].as_str(), j["kind"].as_str()), (Some("firing"), Some("scheduling_action")));
    }
}
