//! Admin tokens and the audit log over HTTP.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::routing::{delete, get, post};
use axum::{Extension, Json};
use serde_json::{Value, json};
use vantage_core::Timestamp;
use vantage_store::AuditFilter;

use super::{Api, Op};
use crate::app::{Actor, App, Change};
use crate::auth::new_token;
use crate::error::{ApiError, parse_json};
use crate::views::{AdminTokenBody, AdminTokenView, Alerts, AuditView, Items, NewAdminToken};
use vantage_control::config::{AdminToken, Object};

pub(super) fn routes(api: &mut Api) {
    api.add(
        Op::get("/v1/admin-tokens", "admin", "List admin tokens").lists::<AdminTokenView>(),
        get(tokens_list),
    );
    api.add(
        Op::post("/v1/admin-tokens", "admin", "Create an admin token (shown once)")
            .takes::<AdminTokenBody>()
            .creates::<NewAdminToken>(),
        post(tokens_create),
    );
    api.add(Op::delete("/v1/admin-tokens/{id}", "admin", "Revoke an admin token"), delete(tokens_delete));
    api.add(
        Op::get("/v1/audit", "admin", "List audit entries (newest first)").lists::<AuditView>(),
        get(audit),
    );
    api.add(
        Op::get("/v1/alerts", "alerts", "Open and recently resolved alerts").answers::<Alerts>(),
        get(alerts),
    );
}

async fn tokens_list(State(app): State<Arc<App>>) -> Json<Items<AdminTokenView>> {
    let c = app.config();
    let items = c
        .admin_tokens
        .iter()
        .map(|(id, t)| AdminTokenView {
            id: *id,
            name: t.value.name.clone(),
            prefix: t.value.prefix.clone(),
            read_only: t.value.read_only,
            created_at: t.created_at,
        })
        .collect::<Vec<_>>();
    Json(items.into())
}

/// Creates an admin token for `name`; returns (id, token).
pub(crate) async fn create_admin_token(
    app: &App,
    actor: &Actor,
    name: &str,
    read_only: bool,
) -> Result<(i64, String), ApiError> {
    let name = vantage_core::model::display_name("name", name)?;
    let t = new_token("vta");
    app.change(actor, |c| {
        if c.admin_tokens.values().any(|x| x.value.name.eq_ignore_ascii_case(&name)) {
            return Err(ApiError::invalid("name", format!("an admin token named {name:?} already exists")));
        }
        let id = c.allocate();
        let mut ch = Change::default();
        ch.audit(
            "admin_token.create",
            format!("admin_token:{id}"),
            json!({"name": name, "prefix": t.prefix, "read_only": read_only}),
        );
        ch.puts.push((
            id,
            Object::AdminToken(AdminToken {
                name: name.clone(),
                prefix: t.prefix.clone(),
                sha256: t.sha256.clone(),
                read_only,
            }),
        ));
        Ok((ch, id))
    })
    .await
    .map(|id| (id, t.token))
}

async fn tokens_create(
    State(app): State<Arc<App>>,
    Extension(actor): Extension<Actor>,
    Json(body): Json<Value>,
) -> Result<(StatusCode, Json<NewAdminToken>), ApiError> {
    let body: AdminTokenBody = parse_json(body)?;
    let (id, token) = create_admin_token(&app, &actor, &body.name, body.read_only).await?;
    Ok((StatusCode::CREATED, Json(NewAdminToken { id, name: body.name.trim().to_owned(), token })))
}

async fn tokens_delete(
    State(app): State<Arc<App>>,
    Extension(actor): Extension<Actor>,
    Path(id): Path<i64>,
) -> Result<StatusCode, ApiError> {
    app.change(&actor, |c| {
        let t = c
            .admin_tokens
            .get(&id)
            .ok_or_else(|| ApiError::NotFound(format!("Admin token {id} not found")))?;
        if c.admin_tokens.len() == 1 {
            return Err(ApiError::Conflict(
                "this is the last admin token; create another before revoking it".into(),
            ));
        }
        let mut ch = Change::default();
        ch.audit(
            "admin_token.delete",
            format!("admin_token:{id}"),
            json!({"name": t.value.name, "prefix": t.value.prefix}),
        );
        ch.deletes.push(id);
        Ok((ch, ()))
    })
    .await?;
    Ok(StatusCode::NO_CONTENT)
}

fn time(field: &str, v: Option<&String>) -> Result<Option<Timestamp>, ApiError> {
    v.map(|t| t.parse::<Timestamp>().map_err(|e| ApiError::invalid(field, e.to_string()))).transpose()
}

async fn audit(
    State(app): State<Arc<App>>,
    Query(q): Query<BTreeMap<String, String>>,
) -> Result<Json<Items<AuditView>>, ApiError> {
    const KNOWN: [&str; 6] = ["action", "actor", "object", "since", "until", "limit"];
    if let Some(k) = q.keys().find(|k| !KNOWN.contains(&k.as_str())) {
        return Err(ApiError::invalid(k.clone(), format!("unknown filter; use {}", KNOWN.join(", "))));
    }
    let limit = q
        .get("limit")
        .map(|l| {
            l.parse::<u32>()
                .map_err(|_| ApiError::invalid("limit", format!("must be a whole number, got {l:?}")))
        })
        .transpose()?;
    let filter = AuditFilter {
        action: q.get("action").cloned(),
        actor: q.get("actor").cloned(),
        object: q.get("object").cloned(),
        since: time("since", q.get("since"))?,
        until: time("until", q.get("until"))?,
        limit,
    };
    let items = app.store().audit(&filter).await?;
    Ok(Json(
        items
            .into_iter()
            .map(|e| AuditView {
                id: e.id,
                at: e.at,
                actor: e.actor,
                action: e.action,
                object: e.object,
                metadata: e.metadata,
            })
            .collect::<Vec<_>>()
            .into(),
    ))
}

async fn alerts(State(app): State<Arc<App>>) -> Json<Alerts> {
    let view = app.view();
    let (open, recent) = view.alerts.list();
    let now = crate::support::now();
    let held = view.held_alerts(now);
    Json(Alerts { open, recent, held })
}
