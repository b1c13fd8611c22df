//! The alert book: one open alert per key, fired and resolved by the control core's decisions
//! with the time passed in, and the recently resolved ones. Delivery to the notification
//! channels is the server's; their configuration (`channel`) is here because it is a
//! configuration object.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use vantage_core::Timestamp;

mod channel;
mod kind;
mod silence;

pub use channel::{
    DEFAULT_TEMPLATE, HIDDEN, PAGERDUTY_EVENTS_URL, SmtpServer, Webhook, WebhookFormat, render,
};
pub use kind::{
    AddressDown, AlertAbout, AlertKey, AlertKind, CertificateExpiry, ConditionValue, Firing, LineHeld,
    MirrorBlocked, MirrorStale, MonitorAlert, NodeSilent, ProberSilent, RegionState, RuleAction, Severity,
};
pub(crate) use silence::ends;
pub use silence::{MAX_SILENCE_S, Silence, SilenceCreate};

/// What holds an alert's notification back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(tag = "by", content = "id", rename_all = "snake_case")]
pub enum Hold {
    /// A silence (by id).
    Silence(i64),
    /// An open maintenance window of its subject (by id).
    Maintenance(i64),
}

impl std::fmt::Display for Hold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Hold::Silence(id) => write!(f, "silence {id}"),
            Hold::Maintenance(id) => write!(f, "maintenance {id}"),
        }
    }
}

/// Resolved alerts kept for the list.
const RECENT: usize = 500;

/// Firing or resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum AlertState {
    /// Open.
    Firing,
    /// Closed.
    Resolved,
}

/// One alert.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
pub struct Alert {
    /// Sequence number.
    pub id: u64,
    /// What it is about; one open alert per key ([`AlertKey`], `scheduling_action/rule:3/node:7`).
    pub key: String,
    pub kind: AlertKind,
    /// Firing or resolved.
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

/// Open alerts by key and the recently resolved ones; saved whole as JSON.
#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
pub struct AlertBook {
    next_id: u64,
    open: BTreeMap<String, Alert>,
    recent: VecDeque<Alert>,
    /// Open alerts whose firing a silence held back: told when it ends, and their resolve
    /// never told (nobody heard they fired).
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    held: BTreeSet<String>,
}

impl AlertBook {
    /// Fires `key` unless it is already open (then only its details are updated). Returns the
    /// alert to deliver when it is new.
    pub fn fire(
        &mut self,
        key: String,
        kind: AlertKind,
        summary: String,
        details: Value,
        now: Timestamp,
    ) -> Option<Alert> {
        if let Some(open) = self.open.get_mut(&key) {
            open.details = details;
            return None;
        }
        self.next_id += 1;
        let alert = Alert {
            id: self.next_id,
            key: key.clone(),
            kind,
            state: AlertState::Firing,
            summary,
            details,
            fired_at: now,
            resolved_at: None,
        };
        self.open.insert(key, alert.clone());
        Some(alert)
    }

    /// Resolves `key` if it is open; returns the resolved alert to deliver.
    pub fn resolve(&mut self, key: &str, now: Timestamp) -> Option<Alert> {
        let mut alert = self.open.remove(key)?;
        alert.state = AlertState::Resolved;
        alert.resolved_at = Some(now);
        self.recent.push_front(alert.clone());
        self.recent.truncate(RECENT);
        Some(alert)
    }

    /// The details of the open alert `key` (`None`: not open).
    pub fn open_details(&self, key: &str) -> Option<&Value> {
        self.open.get(key).map(|a| &a.details)
    }

    /// Open alerts (oldest first) and recently resolved ones (newest first).
    pub fn list(&self) -> (Vec<Alert>, Vec<Alert>) {
        let mut open: Vec<Alert> = self.open.values().cloned().collect();
        open.sort_by_key(|a| a.id);
        (open, self.recent.iter().cloned().collect())
    }

    /// Whether `key` is open.
    pub fn is_open(&self, key: &str) -> bool {
        self.open.contains_key(key)
    }

    /// The open alert `key`.
    pub fn open(&self, key: &str) -> Option<&Alert> {
        self.open.get(key)
    }

    /// A silence held back the notification of `key` firing.
    pub fn hold(&mut self, key: &str) {
        self.held.insert(key.to_owned());
    }

    /// Whether the firing of `key` was held back; it is not any more.
    pub fn release(&mut self, key: &str) -> bool {
        self.held.remove(key)
    }

    /// The keys whose firing a silence holds back.
    pub fn held(&self) -> impl Iterator<Item = &String> {
        self.held.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fire_once_resolve_once() {
        let t = Timestamp::from_secs(1_800_000_000);
        let mut b = AlertBook::default();
        assert!(
            b.fire("k".into(), AlertKind::NodeOffline, "edge-1 offline".into(), json!({"node": "edge-1"}), t)
                .is_some()
        );
        assert!(
            b.fire("k".into(), AlertKind::NodeOffline, "x".into(), json!({"node": "edge-1", "n": 2}), t)
                .is_none()
        );
        assert_eq!(b.list().0.len(), 1);
        assert_eq!(b.list().0[0].details["n"], 2);
        let resolved = b.resolve("k", t.plus_secs(5)).expect("open");
        assert_eq!(resolved.resolved_at, Some(t.plus_secs(5)));
        assert!(b.resolve("k", t).is_none());
        let (open, recent) = b.list();
        assert!(open.is_empty());
        assert_eq!(recent[0].state, AlertState::Resolved);
    }
}
