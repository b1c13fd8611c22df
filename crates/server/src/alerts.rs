//! Delivery of alerts to the notification channels — Vantage's JSON, the Alertmanager
//! payload, Slack incoming webhooks, PagerDuty Events API v2 (`http` here) and email over SMTP
//! (`email`) — with retries, on a task of its own so that delivery never slows evaluation,
//! and only where the fetch policy allows. What fires and resolves is the control core's
//! decision (`vantage_control::alerts`), and so is what a channel accepts.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::mpsc;
use vantage_control::alerts::{Alert, AlertKind, AlertState, Webhook, WebhookFormat};
use vantage_core::Timestamp;
use vantage_core::fetch::FetchPolicy;

mod email;

use crate::fetch::FetchError;

/// A change to deliver.
#[derive(Debug, Clone)]
pub(crate) struct Notice(pub Alert);

/// The body an HTTP channel receives for `a`, with the routing key a PagerDuty channel sends
/// (`secret`).
pub(crate) fn payload(a: &Alert, sink: &Webhook) -> Value {
    let status = match a.state {
        AlertState::Firing => "firing",
        AlertState::Resolved => "resolved",
    };
    match sink.format {
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
        // Slack reads `&`, `<` and `>` as markup: written as it asks.
        WebhookFormat::Slack => {
            json!({"text": sink.text(a).replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")})
        }
        WebhookFormat::Pagerduty => {
            let mut event = json!({
                "routing_key": sink.secret,
                "event_action": if a.state == AlertState::Firing { "trigger" } else { "resolve" },
                "dedup_key": a.key,
            });
            if a.state == AlertState::Firing {
                // PagerDuty cuts a summary at 1,024 characters; its severities are these four.
                let severity = match a.details.get("severity").and_then(Value::as_str) {
                    Some("warning") => "warning",
                    Some("info") => "info",
                    _ => "critical",
                };
                event["payload"] = json!({
                    "summary": sink.text(a).chars().take(1024).collect::<String>(),
                    "source": "vantage",
                    "severity": severity,
                    "timestamp": a.fired_at.to_string(),
                    "component": a.kind,
                    "custom_details": a.details,
                });
            }
            event
        }
        // Not posted: `email` writes its own message.
        WebhookFormat::Email => Value::Null,
    }
}

/// Delivery attempts per notice and channel.
const ATTEMPTS: u32 = 6;
/// Longest one attempt may take.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);

/// Why one attempt did not deliver, in words that never carry the channel's secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Failure {
    /// Worth another attempt (unreachable, refused, a 5xx).
    Retry(String),
    /// Nothing another attempt changes (the fetch policy refuses the destination).
    Refused(String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Retry(why) | Failure::Refused(why) => f.write_str(why),
        }
    }
}

impl From<FetchError> for Failure {
    /// A name that does not resolve may later; a refusal stays.
    fn from(e: FetchError) -> Failure {
        match e {
            FetchError::Refused(why) => Failure::Refused(why),
            FetchError::Unresolved(why) => Failure::Retry(why),
        }
    }
}

/// One attempt to deliver `a` to `sink`.
pub(crate) async fn send(sink: &Webhook, a: &Alert, policy: &FetchPolicy) -> Result<(), Failure> {
    if sink.format == WebhookFormat::Email {
        return email::send(sink, a, policy).await;
    }
    // Slack's URL is its secret; the others POST to their `url`.
    let url = match sink.format {
        WebhookFormat::Slack => sink.secret.as_deref(),
        _ => sink.url.as_deref(),
    }
    .ok_or_else(|| Failure::Refused("the channel has no URL".into()))?;
    let builder = reqwest::Client::builder().timeout(ATTEMPT_TIMEOUT);
    let (client, url) = crate::fetch::client_for(policy, url, None, builder).await.map_err(Failure::from)?;
    match client.post(url).json(&payload(a, sink)).send().await {
        Ok(r) if r.status().is_success() => Ok(()),
        // A server error, a timeout or a rate limit may pass; any other refusal stays.
        Ok(r) if r.status().is_server_error() || matches!(r.status().as_u16(), 408 | 429) => {
            Err(Failure::Retry(format!("the channel answered {}", r.status())))
        }
        Ok(r) => Err(Failure::Refused(format!("the channel refused it: {}", r.status()))),
        // Without the URL: Slack's carries its secret.
        Err(e) => Err(Failure::Retry(format!("unreachable: {}", e.without_url()))),
    }
}

/// A test notice an operator sends to `sink` (`by`: who): not an alert of the book.
pub(crate) fn test_notice(sink: &Webhook, by: &str, now: Timestamp) -> Alert {
    Alert {
        id: 0,
        key: format!("test/webhook:{}", sink.name),
        kind: AlertKind::Test,
        state: AlertState::Firing,
        summary: format!("test notice from Vantage to {}, sent by {by}", sink.name),
        details: json!({"webhook": sink.name, "by": by, "severity": "info"}),
        fired_at: now,
        resolved_at: None,
    }
}

/// Delivers notices to the enabled channels `sinks()` returns, each with retries and back-off
/// (0.5 s doubling). Each channel has a queue and a task of its own, so a slow channel slows
/// no other, and its notices arrive in the order they were decided: a resolve never overtakes
/// the firing it ends (PagerDuty would open an incident nothing resolves).
pub(crate) async fn deliver(
    mut notices: mpsc::UnboundedReceiver<Notice>,
    sinks: Arc<dyn Fn() -> Vec<Webhook> + Send + Sync>,
    metrics: Arc<crate::metrics::Metrics>,
    policy: FetchPolicy,
) {
    let policy = Arc::new(policy);
    let mut queues: HashMap<String, mpsc::UnboundedSender<(Webhook, Arc<Alert>)>> = HashMap::new();
    while let Some(Notice(alert)) = notices.recv().await {
        let alert = Arc::new(alert);
        for sink in sinks().into_iter().filter(|s| s.enabled) {
            let queue = queues.entry(sink.name.clone()).or_insert_with(|| {
                let (tx, rx) = mpsc::unbounded_channel();
                tokio::spawn(channel_queue(rx, metrics.clone(), policy.clone()));
                tx
            });
            // The queue's task ends only with the server.
            let _ = queue.send((sink, alert.clone()));
        }
    }
}

/// One channel's deliveries, one after the other.
async fn channel_queue(
    mut queue: mpsc::UnboundedReceiver<(Webhook, Arc<Alert>)>,
    metrics: Arc<crate::metrics::Metrics>,
    policy: Arc<FetchPolicy>,
) {
    while let Some((sink, alert)) = queue.recv().await {
        let delivered = with_retries(&sink, &alert, &policy).await;
        metrics.delivery(&sink.name, delivered);
    }
}

/// Up to [`ATTEMPTS`] attempts; whether one delivered.
async fn with_retries(sink: &Webhook, alert: &Alert, policy: &FetchPolicy) -> bool {
    let mut wait = Duration::from_millis(500);
    for attempt in 1..=ATTEMPTS {
        match send(sink, alert, policy).await {
            Ok(()) => return true,
            Err(Failure::Refused(why)) => {
                tracing::error!(sink = %sink.name, error = %why, "alert not delivered");
                return false;
            }
            Err(Failure::Retry(why)) => {
                tracing::warn!(sink = %sink.name, error = %why, attempt, "alert delivery failed")
            }
        }
        if attempt < ATTEMPTS {
            tokio::time::sleep(wait).await;
            wait *= 2;
        }
    }
    tracing::error!(sink = %sink.name, "alert delivery gave up");
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use vantage_core::Timestamp;

    #[test]
    fn alertmanager_payload_shape() {
        let a = Alert {
            id: 7,
            key: "k".into(),
            kind: AlertKind::SchedulingAction,
            state: AlertState::Firing,
            summary: "cpu-high · edge-1".into(),
            details: json!({"rule": "cpu-high", "node": "edge-1", "revision": 4}),
            fired_at: Timestamp::from_secs(1_800_000_000),
            resolved_at: None,
        };
        let sink = |format, secret: Option<&str>| Webhook {
            name: "ops".into(),
            url: Some("https://hooks.example.net/".into()),
            format,
            enabled: true,
            secret: secret.map(str::to_owned),
            username: None,
            from: None,
            to: Vec::new(),
            template: None,
        };
        let p = payload(&a, &sink(WebhookFormat::Alertmanager, None));
        assert_eq!(p["version"], "4");
        assert_eq!(p["alerts"][0]["labels"]["alertname"], "scheduling_action");
        assert_eq!(p["alerts"][0]["labels"]["rule"], "cpu-high");
        assert_eq!(p["alerts"][0]["labels"]["revision"], "4");
        assert_eq!(p["alerts"][0]["endsAt"], "0001-01-01T00:00:00Z");
        let j = payload(&a, &sink(WebhookFormat::Json, None));
        assert_eq!((j["status"].as_str(), j["kind"].as_str()), (Some("firing"), Some("scheduling_action")));
        let s = payload(&a, &sink(WebhookFormat::Slack, Some("https://hooks.slack.com/services/T/B/X")));
        assert_eq!(s, json!({"text": "[firing] cpu-high · edge-1"}));
        let pd = sink(WebhookFormat::Pagerduty, Some("R0UT1NG"));
        let t = payload(&a, &pd);
        assert_eq!(
            (t["routing_key"].as_str(), t["event_action"].as_str()),
            (Some("R0UT1NG"), Some("trigger"))
        );
        assert_eq!(
            (t["dedup_key"].as_str(), t["payload"]["severity"].as_str()),
            (Some("k"), Some("critical"))
        );
        assert_eq!(t["payload"]["summary"], "[firing] cpu-high · edge-1");
        let resolved =
            Alert { state: AlertState::Resolved, resolved_at: Some(a.fired_at.plus_secs(60)), ..a };
        let r = payload(&resolved, &pd);
        assert_eq!(r, json!({"routing_key": "R0UT1NG", "event_action": "resolve", "dedup_key": "k"}));
    }
}
