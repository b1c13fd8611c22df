//! Mirrors and tenants over HTTP (SPEC §6). Their records live in the registry's files: a
//! write is validated against the registry, written to its file, and the whole directory is
//! reloaded through the control core before the answer, so the answer is what now serves.
//! Writes are serialised and audited.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{get, post, put};
use axum::{Extension, Json};
use serde_json::{Value, json};
use vantage_control::config::Config;
use vantage_control::identity::Caller;
use vantage_control::mirrors::book::check_of;
use vantage_control::mirrors::doors::Doors;
use vantage_control::mirrors::registry::{
    Registry, TENANTS_FILE, document, mirror_from_api, mirror_yaml, tenants_yaml,
};
use vantage_control::mirrors::{CheckRefused, LoadError, Tenant};
use vantage_control::view::View;
use vantage_core::mirror::{Mirror, MirrorInput, MirrorSettings, MirrorSettingsInput, RegionStatus};
use vantage_store::FileWrite;

use super::{Api, Op};
use crate::app::{Actor, App, Change};
use crate::error::{ApiError, optional_json, parse_json};
use crate::owner::Input;
use crate::views::{
    BlockRequest, CheckRunRequest, CheckRunView, Items, MirrorList, MirrorProberView, MirrorView, TenantView,
    WindowView,
};

/// Largest record body: a registry file is at most this big.
const MAX_BODY: usize = 64 * 1024;

type Ctx = (State<Arc<App>>, Extension<Actor>);

pub(super) fn routes(api: &mut Api) {
    api.add(
        Op::get("/v1/mirrors", "mirrors", "List mirrors with their verdicts and the last reload")
            .answers::<MirrorList>(),
        get(list),
    );
    api.add(
        Op::post(
            "/v1/mirrors/check",
            "mirrors",
            "Ask the probers to check every mirror now (one run per 60 s)",
        )
        .takes::<CheckRunRequest>()
        .accepts::<CheckRunView>(),
        post(check_run),
    );
    api.add(Op::get("/v1/mirrors/{host}", "mirrors", "Get a mirror").answers::<MirrorView>(), get(one));
    api.add(
        Op::put(
            "/v1/mirrors/{host}",
            "mirrors",
            "Register or replace a mirror (YAML or JSON, without derived fields; with \
             `If-None-Match: *`, only a new one)",
        )
        .takes::<MirrorInput>()
        .puts::<MirrorView>(),
        put(put_mirror),
    );
    api.add(
        Op::patch("/v1/mirrors/{host}", "mirrors", "Change a mirror (JSON merge patch of its fields)")
            .takes::<MirrorInput>()
            .answers::<MirrorView>(),
        axum::routing::patch(patch_mirror),
    );
    api.add(
        Op::delete("/v1/mirrors/{host}", "mirrors", "Deregister a mirror (its file goes)"),
        axum::routing::delete(delete_mirror),
    );
    api.add(
        Op::post("/v1/mirrors/{host}/force-block", "mirrors", "Block a mirror by hand, with a note")
            .takes::<BlockRequest>()
            .answers::<MirrorView>(),
        post(force_block),
    );
    api.add(
        Op::post(
            "/v1/mirrors/{host}/unblock",
            "mirrors",
            "Remove a manual block (the note, optional, is audited)",
        )
        .takes::<BlockRequest>()
        .answers::<MirrorView>(),
        post(unblock),
    );
    api.add(Op::get("/v1/tenants", "mirrors", "List tenants").lists::<TenantView>(), get(tenants));
    api.add(
        Op::put(
            "/v1/tenants/{name}",
            "mirrors",
            "Create or replace a tenant (with `If-None-Match: *`, only a new one)",
        )
        .takes::<Tenant>()
        .answers::<TenantView>(),
        put(put_tenant),
    );
    api.add(
        Op::delete("/v1/tenants/{name}", "mirrors", "Delete a tenant no mirror names"),
        axum::routing::delete(delete_tenant),
    );
    api.add(
        Op::get("/v1/settings/mirrors", "settings", "Get the mirror and door settings")
            .answers::<MirrorSettings>(),
        get(settings_get),
    );
    api.add(
        Op::put("/v1/settings/mirrors", "settings", "Replace the mirror and door settings")
            .takes::<MirrorSettingsInput>()
            .answers::<MirrorSettings>(),
        put(settings_put),
    );
}

/// One mirror as the API shows it, with every prober's opinion.
pub(crate) fn view(c: &Config, core: &View, m: &Mirror) -> MirrorView {
    let book = core.mirrors.book();
    let state = book.state(&m.host);
    let check = check_of(c, &m.host);
    let ipv6 = m.address.is_some_and(|a| a.is_ipv6());
    let mut probers: Vec<MirrorProberView> = book
        .latest_of(&m.host)
        .filter_map(|(caller, l)| {
            let Caller::Prober(p) = caller else { return None };
            let rec = c.probers.get(&p.0)?;
            let healthy = l.register.healthy(check.window(), check.threshold());
            Some(MirrorProberView {
                prober: p.0,
                name: rec.value.name.clone(),
                region: c.region_code(rec.value.region).unwrap_or("?").to_owned(),
                status: RegionStatus::opinion(healthy, l.error),
                error: l.error,
                rtt_ms: l.rtt_us.map(|us| f64::from(us) / 1000.0),
                checked: l.at,
                window: WindowView::of(&l.register, check.window(), check.threshold(), ipv6),
            })
        })
        .collect();
    probers.sort_by(|a, b| (&a.region, &a.name).cmp(&(&b.region, &b.name)));
    MirrorView {
        host: m.host.clone(),
        tenants: m.tenants.clone(),
        weight: m.weight,
        manual_block: m.manual_block,
        manual_note: m.manual_note.clone(),
        check: m.check.clone(),
        address: m.address.map(|a| a.to_string()),
        base_url: m.base_url.clone(),
        verdict: state.map(|s| s.verdict).unwrap_or_default(),
        verdict_since: state.and_then(|s| s.verdict_since),
        last_check: state.and_then(|s| s.last_check),
        blocked_count: state.map_or(0, |s| s.blocked_count),
        total_checked: state.map_or(0, |s| s.total_checked),
        freshness: m.freshness.clone(),
        freshness_state: state.and_then(|s| s.freshness.clone()),
        in_maintenance: core.mirrors.in_maintenance().contains(&m.host),
        regions: state.map(|s| s.regions.clone()).unwrap_or_default(),
        probers,
    }
}

/// Every mirror and the reload status, as one consistent reading.
pub(crate) fn mirror_list(app: &App) -> MirrorList {
    let core = app.view();
    let c = &core.config;
    let mirrors: Vec<MirrorView> = c.mirrors.mirrors.values().map(|m| view(c, &core, m)).collect();
    MirrorList { count: mirrors.len(), mirrors, reload: core.mirrors.reload_status().clone() }
}

async fn list(State(app): State<Arc<App>>) -> Json<MirrorList> {
    Json(mirror_list(&app))
}

fn not_found(host: &str) -> ApiError {
    ApiError::NotFound(format!("no mirror {host:?}"))
}

/// The mirror `host` names (compared as the registry stores hosts: lower-case).
fn find(c: &Config, host: &str) -> Result<Mirror, ApiError> {
    c.mirrors.mirrors.get(&host.to_ascii_lowercase()).cloned().ok_or_else(|| not_found(host))
}

fn answer(app: &App, host: &str) -> Result<Json<MirrorView>, ApiError> {
    let core = app.view();
    let m = core.config.mirrors.mirrors.get(host).ok_or_else(|| not_found(host))?;
    Ok(Json(view(&core.config, &core, m)))
}

async fn one(State(app): State<Arc<App>>, Path(host): Path<String>) -> Result<Json<MirrorView>, ApiError> {
    answer(&app, &host.to_ascii_lowercase())
}

fn io_error(e: std::io::Error) -> ApiError {
    ApiError::Internal(format!("cannot write the mirror registry: {e}"))
}

/// One registry file as a write through the API leaves it (`None`: removed), with the audit
/// entry that says who did what.
struct RegistryWrite {
    file: String,
    text: Option<String>,
    action: &'static str,
    object: String,
    metadata: Value,
}

/// `m`'s file, checked against the registry `c` holds.
fn mirror_write(
    c: &Config,
    m: &Mirror,
    action: &'static str,
    metadata: Value,
) -> Result<RegistryWrite, ApiError> {
    c.mirrors.admits(m, c)?;
    Ok(RegistryWrite {
        file: c.mirrors.file_of(&m.host),
        text: Some(mirror_yaml(m)),
        action,
        object: format!("mirror:{}", m.host),
        metadata,
    })
}

/// Writes one registry file through the API. `f` makes the write from the configuration as
/// it stands once every other replica's changes are applied. The whole directory as the write
/// would leave it is checked first: a write that would keep the registry from loading is
/// refused (409) and written nowhere. Then it is logged for the other replicas with its audit
/// entry (without replicas: audited), written, and the registry reloaded. Logged before it is
/// written, it reaches every replica or none, and nothing serves a write that is then undone.
async fn write_registry<T>(
    app: &App,
    actor: &Actor,
    f: impl FnOnce(&Config) -> Result<(RegistryWrite, T), ApiError>,
) -> Result<T, ApiError> {
    let _changes = app.changing().await;
    if let Some(r) = app.replica() {
        crate::replicas::changes_locked(app, r).await?;
    }
    let _files = app.mirrors_write().await;
    let config = app.config();
    let (w, out) = f(&config)?;
    let dir = app.mirrors_dir();
    let refused = |e: LoadError| {
        ApiError::Conflict(format!(
            "the registry would not load after this write, so nothing was written: {e}"
        ))
    };
    let mut files = crate::mirrors::read_dir(dir.clone())
        .await
        .map_err(|skipped| refused(crate::mirrors::first_skipped(&skipped)))?;
    files.retain(|(name, _)| *name != w.file);
    files.extend(w.text.iter().map(|text| (w.file.clone(), text.clone())));
    files.sort();
    Registry::load(&files, &config).map_err(refused)?;
    let file = FileWrite { name: w.file, text: w.text };
    app.log_registry(actor, &file, w.action, &w.object, w.metadata).await?;
    crate::mirrors::put_file(&dir, &file.name, file.text.as_deref()).map_err(io_error)?;
    app.reload_after_write().await?;
    Ok(out)
}

/// `If-None-Match: *`: the request makes a new object only, and refuses to replace one (a
/// form for a new mirror or tenant must not overwrite an existing one of that name).
fn only_new(headers: &HeaderMap) -> bool {
    headers.get(axum::http::header::IF_NONE_MATCH).is_some_and(|v| v.as_bytes().trim_ascii() == b"*")
}

async fn put_mirror(
    (State(app), Extension(actor)): Ctx,
    Path(host): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<(StatusCode, Json<MirrorView>), ApiError> {
    if body.len() > MAX_BODY {
        return Err(ApiError::TooLarge(format!("a mirror record is at most {MAX_BODY} bytes")));
    }
    let text = std::str::from_utf8(&body).map_err(|_| ApiError::invalid("body", "must be UTF-8 text"))?;
    let mut doc = document(text)?;
    let Some(obj) = doc.as_object_mut() else {
        return Err(ApiError::invalid("body", "must be a mirror record (a map of fields)"));
    };
    let path_host = vantage_core::model::dns_name("host", &host)?;
    match named("host", obj)? {
        Some(h) if !h.trim().trim_end_matches('.').eq_ignore_ascii_case(&path_host) => {
            return Err(ApiError::invalid("host", format!("{h:?} does not match the path ({path_host})")));
        }
        _ => {
            obj.insert("host".into(), Value::String(path_host.clone()));
        }
    }
    let m = mirror_from_api(doc)?;
    let existed = write_registry(&app, &actor, |c| {
        let existed = c.mirrors.mirrors.contains_key(&m.host);
        if existed && only_new(&headers) {
            return Err(ApiError::Conflict(format!(
                "a mirror {} is registered already: change it rather than register it again",
                m.host
            )));
        }
        let action = if existed { "mirror.update" } else { "mirror.create" };
        let metadata = serde_json::to_value(MirrorInput::from(m.clone())).unwrap_or_default();
        Ok((mirror_write(c, &m, action, metadata)?, existed))
    })
    .await?;
    let status = if existed { StatusCode::OK } else { StatusCode::CREATED };
    Ok((status, answer(&app, &m.host)?))
}

/// A mirror changed by a merge patch of its record, read and written in one registry write
/// (so that a block placed meanwhile is never undone by a form that did not show it). Its
/// host is its name: another host is refused.
async fn patch_mirror(
    (State(app), Extension(actor)): Ctx,
    Path(host): Path<String>,
    Json(patch): Json<Value>,
) -> Result<Json<MirrorView>, ApiError> {
    crate::error::object_body(&patch)?;
    let host = write_registry(&app, &actor, |c| {
        let m = find(c, &host)?;
        if let Some(other) = patch.as_object().map(|o| named("host", o)).transpose()?.flatten()
            && !other.trim().trim_end_matches('.').eq_ignore_ascii_case(&m.host)
        {
            return Err(ApiError::invalid(
                "host",
                format!("{other:?} is another mirror: register it, and delete {} if it goes", m.host),
            ));
        }
        let mut doc = serde_json::to_value(MirrorInput::from(m.clone()))
            .map_err(|e| ApiError::Internal(format!("a mirror record as JSON: {e}")))?;
        vantage_core::patch::merge(&mut doc, patch.clone());
        let next = mirror_from_api(doc)?;
        Ok((mirror_write(c, &next, "mirror.update", patch.clone())?, next.host.clone()))
    })
    .await?;
    answer(&app, &host)
}

async fn delete_mirror(
    (State(app), Extension(actor)): Ctx,
    Path(host): Path<String>,
) -> Result<StatusCode, ApiError> {
    write_registry(&app, &actor, |c| {
        let m = find(c, &host)?;
        let file = c.mirrors.file_of(&m.host);
        let object = format!("mirror:{}", m.host);
        Ok((RegistryWrite { file, text: None, action: "mirror.delete", object, metadata: json!({}) }, ()))
    })
    .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The name a body's `field` gives, which the path names too: absent, or a string (any other
/// type is refused rather than replaced by the path's).
fn named<'a>(field: &str, obj: &'a serde_json::Map<String, Value>) -> Result<Option<&'a str>, ApiError> {
    match obj.get(field) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(ApiError::invalid(field, "must be a string")),
    }
}

/// A copy of `m` with a manual block set or lifted (validated like any record).
fn with_block(m: Mirror, block: bool, note: String) -> Result<Mirror, ApiError> {
    let input = MirrorInput { manual_block: block, manual_note: note, ..MirrorInput::from(m) };
    Ok(Mirror::try_from(input)?)
}

async fn force_block(
    (State(app), Extension(actor)): Ctx,
    Path(host): Path<String>,
    Json(body): Json<Value>,
) -> Result<Json<MirrorView>, ApiError> {
    let req: BlockRequest = parse_json(body)?;
    let host = write_registry(&app, &actor, |c| {
        let m = with_block(find(c, &host)?, true, req.note.clone()).map_err(|e| match e {
            ApiError::Invalid { reason, .. } => ApiError::invalid("note", reason),
            other => other,
        })?;
        Ok((mirror_write(c, &m, "mirror.force_block", json!({"note": req.note}))?, m.host))
    })
    .await?;
    answer(&app, &host)
}

async fn unblock(
    (State(app), Extension(actor)): Ctx,
    Path(host): Path<String>,
    body: Bytes,
) -> Result<Json<MirrorView>, ApiError> {
    let req: BlockRequest = optional_json(&body, MAX_BODY)?;
    let host = write_registry(&app, &actor, |c| {
        let m = with_block(find(c, &host)?, false, String::new())?;
        Ok((mirror_write(c, &m, "mirror.unblock", json!({"note": req.note}))?, m.host))
    })
    .await?;
    answer(&app, &host)
}

async fn check_run(
    (State(app), Extension(actor)): Ctx,
    body: Bytes,
) -> Result<(StatusCode, Json<CheckRunView>), ApiError> {
    let req: CheckRunRequest = optional_json(&body, MAX_BODY)?;
    let asked = req.regions.clone();
    let regions = req.regions;
    let run = app.owner().ask(|reply| Input::CheckRun { regions, reply }).await?.map_err(|e| match e {
        CheckRefused::TooSoon { retry_after_s } => ApiError::TooSoon {
            reason: format!("a check run started less than 60 s ago; try again in {retry_after_s} s"),
            retry_after_s,
        },
        CheckRefused::Invalid(e) => e.into(),
    })?;
    app.relay(crate::support::now(), move || vantage_control::Relayed::CheckRun { regions: asked });
    let c = app.config();
    let probers = c
        .probers
        .values()
        .filter(|p| p.value.enabled)
        .filter(|p| {
            run.regions
                .as_ref()
                .is_none_or(|set| c.region_code(p.value.region).is_some_and(|r| set.contains(r)))
        })
        .count();
    let regions: Option<Vec<String>> = run.regions.map(|s| s.into_iter().collect());
    app.audit(&actor, "mirror.check", "mirrors", json!({"regions": regions})).await;
    Ok((
        StatusCode::ACCEPTED,
        Json(CheckRunView { started_at: run.at, regions, probers, mirrors: c.mirrors.mirrors.len() }),
    ))
}

/// A tenant as the API shows it, its latency order read from the doors' own table (`doors`).
fn tenant_view(c: &Config, doors: &Doors, t: &Tenant) -> TenantView {
    TenantView {
        name: t.name.clone(),
        note: t.note.clone(),
        mirrors: c.mirrors.serving(&t.name).count(),
        fallback_to_degraded: t.fallback_to_degraded,
        fallback_url: t.fallback_url.clone(),
        order_by_latency: t.order_by_latency,
        latency_order: (doors.latency.iter())
            .filter(|((tenant, _), _)| *tenant == t.name)
            .map(|((_, region), hosts)| (region.clone(), hosts.clone()))
            .collect(),
    }
}

async fn tenants(State(app): State<Arc<App>>) -> Json<Items<TenantView>> {
    let c = app.config();
    let doors = app.doors();
    Json(c.mirrors.tenants.values().map(|t| tenant_view(&c, &doors, t)).collect::<Vec<_>>().into())
}

/// Writes the tenant file with `f` applied to the current tenants, reloads, and audits.
async fn save_tenants(
    app: &App,
    actor: &Actor,
    action: &'static str,
    name: &str,
    f: impl FnOnce(&Config, &mut std::collections::BTreeMap<String, Tenant>) -> Result<(), ApiError>,
) -> Result<(), ApiError> {
    write_registry(app, actor, |c| {
        let mut tenants = c.mirrors.tenants.clone();
        f(c, &mut tenants)?;
        let write = RegistryWrite {
            file: TENANTS_FILE.into(),
            text: Some(tenants_yaml(&tenants)),
            action,
            object: format!("tenant:{name}"),
            metadata: json!({
                "note": tenants.get(name).map(|t| &t.note),
                "fallback_to_degraded": tenants.get(name).map(|t| t.fallback_to_degraded),
            }),
        };
        Ok((write, ()))
    })
    .await
}

async fn put_tenant(
    (State(app), Extension(actor)): Ctx,
    Path(name): Path<String>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Result<Json<TenantView>, ApiError> {
    let only_new = only_new(&headers);
    crate::error::object_body(&body)?;
    let mut body = body;
    if let Some(obj) = body.as_object_mut() {
        match named("name", obj)? {
            Some(n) if n != name => {
                return Err(ApiError::invalid("name", format!("{n:?} does not match the path ({name})")));
            }
            _ => {
                obj.insert("name".into(), Value::String(name.clone()));
            }
        }
    }
    let t = parse_json::<Tenant>(body)?.parse()?;
    let key = t.name.clone();
    save_tenants(&app, &actor, "tenant.put", &key, |_, tenants| {
        if only_new && tenants.contains_key(&t.name) {
            return Err(ApiError::Conflict(format!(
                "a tenant {} exists already: change it rather than create it again",
                t.name
            )));
        }
        tenants.insert(t.name.clone(), t);
        Ok(())
    })
    .await?;
    let c = app.config();
    let t = c.mirrors.tenants.get(&key).ok_or_else(|| ApiError::NotFound(format!("no tenant {key:?}")))?;
    Ok(Json(tenant_view(&c, &app.doors(), t)))
}

async fn delete_tenant(
    (State(app), Extension(actor)): Ctx,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    save_tenants(&app, &actor, "tenant.delete", &name, |c, tenants| {
        if tenants.remove(&name).is_none() {
            return Err(ApiError::NotFound(format!("no tenant {name:?}")));
        }
        let users: Vec<&str> = c.mirrors.serving(&name).map(|m| m.host.as_str()).collect();
        if !users.is_empty() {
            return Err(ApiError::Conflict(format!("mirrors still name this tenant: {}", users.join(", "))));
        }
        Ok(())
    })
    .await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn settings_get(State(app): State<Arc<App>>) -> Json<MirrorSettings> {
    Json(app.config().mirror_settings.clone())
}

async fn settings_put(
    (State(app), Extension(actor)): Ctx,
    Json(body): Json<Value>,
) -> Result<Json<MirrorSettings>, ApiError> {
    let settings: MirrorSettings = parse_json(body)?;
    app.change(&actor, |c| {
        let (before, after) = (json!(c.mirror_settings), json!(settings));
        let object = vantage_control::config::Object::MirrorSettings(settings);
        Ok((
            Change::settings(
                c,
                c.mirror_settings_id,
                "mirrors",
                "settings.mirrors_update",
                before,
                after,
                object,
            ),
            (),
        ))
    })
    .await?;
    Ok(Json(app.config().mirror_settings.clone()))
}
