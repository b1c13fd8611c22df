//! Delivery of alerts to webhook sinks — JSON or an Alertmanager-compatible payload — with
//! retries, on a task of its own so that delivery never slows evaluation. What fires and
//! resolves is the control core's decision (`vantage_control::alerts`).

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::mpsc;
use vantage_control::alerts::{Alert, AlertState, Webhook, WebhookFormat};
use vantage_core::fetch::FetchPolicy;

/// A change to deliver.
#[derive(Debug, Clone)]
pub(crate) struct Notice(pub Alert);

/// The body a sink receives for `a`.
pub(crate) fn payload(a: &Alert, format: WebhookFormat) -> Value {
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
/// (0.5 s doubling), each sink on its own task, only where the fetch policy allows.
pub(crate) async fn deliver(
    mut notices: mpsc::UnboundedReceiver<Notice>,
    sinks: Arc<dyn Fn() -> Vec<Webhook> + Send + Sync>,
    metrics: Arc<crate::metrics::Metrics>,
    policy: FetchPolicy,
) {
    let policy = Arc::new(policy);
    while let Some(Notice(alert)) = notices.recv().await {
        for sink in sinks().into_iter().filter(|s| s.enabled) {
            let body = payload(&alert, sink.format);
            let metrics = metrics.clone();
            let policy = policy.clone();
            tokio::spawn(async move {
                let builder = reqwest::Client::builder().timeout(Duration::from_secs(10));
                let (client, url) = match crate::fetch::client_for(&policy, &sink.url, None, builder).await {
                    Ok(made) => made,
                    Err(e) => {
                        tracing::error!(sink = %sink.name, error = %e, "webhook not delivered");
                        metrics.delivery(&sink.name, false);
                        return;
                    }
                };
                let mut wait = Duration::from_millis(500);
                for attempt in 1..=ATTEMPTS {
                    match client.post(url.clone()).json(&body).send().await {
                        Ok(r) if r.status().is_success() => {
                            metrics.delivery(&sink.name, true);
                            return;
                        }
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
                metrics.delivery(&sink.name, false);
            });
        }
    }
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
            kind: vantage_control::alerts::AlertKind::SchedulingAction,
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
