//! A notification channel's test button: one notice sent now, its outcome answered (the
//! channel's objects themselves are `objects`).

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Extension, Path, State};
use axum::routing::post;
use serde_json::json;

use super::{Api, Op};
use vantage_control::alerts::{Alert, AlertState, WebhookFormat};

use crate::alerts::{send, test_notice};
use crate::app::{Actor, App};
use crate::error::ApiError;
use crate::views::{WebhookTest, WebhookTestRequest};

pub(super) fn routes(api: &mut Api) {
    api.add(
        Op::post(
            "/v1/webhooks/{id}/test",
            "alerts",
            "Send a test notice to a channel now (one attempt, disabled channels too); answers how it went",
        )
        .takes::<WebhookTestRequest>()
        .answers::<WebhookTest>(),
        post(test),
    );
}

async fn test(
    State(app): State<Arc<App>>,
    Extension(actor): Extension<Actor>,
    Path(id): Path<i64>,
    body: Bytes,
) -> Result<Json<WebhookTest>, ApiError> {
    let req: WebhookTestRequest = crate::error::optional_json(&body, 4096)?;
    let note = req.note.map(|n| n.trim().to_owned()).filter(|n| !n.is_empty());
    if note.as_ref().is_some_and(|n| n.chars().count() > 200 || n.chars().any(char::is_control)) {
        return Err(ApiError::invalid("note", "at most 200 printable characters"));
    }
    let c = app.config();
    let sink = c.webhooks.get(&id).ok_or_else(|| ApiError::NotFound(format!("Webhook {id} not found")))?;
    let mut notice = test_notice(&sink.value, &actor.0, crate::support::now());
    if let Some(n) = &note {
        notice.summary = format!("{}: {n}", notice.summary);
    }
    let mut outcome = send(&sink.value, &notice, app.fetch_policy()).await;
    // A PagerDuty test opens an incident: it is resolved at once, so none stays open.
    if outcome.is_ok() && sink.value.format == WebhookFormat::Pagerduty {
        let resolved = Alert { state: AlertState::Resolved, resolved_at: Some(notice.fired_at), ..notice };
        outcome = send(&sink.value, &resolved, app.fetch_policy()).await;
    }
    let error = outcome.err().map(|f| f.to_string());
    let delivered = error.is_none();
    let object = format!("webhook:{id}");
    app.audit(
        &actor,
        "webhook.test",
        &object,
        json!({"name": sink.value.name, "delivered": delivered, "error": error}),
    )
    .await;
    Ok(Json(WebhookTest { delivered, error }))
}
