//! The probe and detection settings and a node's scheduling addresses: objects without a
//! collection of their own.

use std::net::IpAddr;

use vantage_core::ids::NodeId;

use super::*;

pub(super) async fn settings_get(State(app): State<Arc<App>>) -> Json<ProbeSettings> {
    Json(app.config().settings)
}

pub(super) async fn settings_put(
    (State(app), Extension(actor)): Ctx,
    Json(body): Json<Value>,
) -> Result<Json<ProbeSettings>, ApiError> {
    let settings: ProbeSettings = parse_json(body)?;
    app.change(&actor, |c| {
        let (before, after) = (json!(c.settings), json!(settings));
        Ok((
            Change::settings(
                c,
                c.settings_id,
                "probes",
                "system.probes_update",
                before,
                after,
                Object::Settings(settings),
            ),
            (),
        ))
    })
    .await?;
    Ok(Json(app.config().settings))
}

pub(super) async fn detection_get(State(app): State<Arc<App>>) -> Json<DetectionSettings> {
    Json(app.config().detection)
}

pub(super) async fn detection_put(
    (State(app), Extension(actor)): Ctx,
    Json(body): Json<Value>,
) -> Result<Json<DetectionSettings>, ApiError> {
    let settings: DetectionSettings = parse_json(body)?;
    app.change(&actor, |c| {
        let (before, after) = (json!(c.detection), json!(settings));
        Ok((
            Change::settings(
                c,
                c.detection_id,
                "detection",
                "settings.detection_update",
                before,
                after,
                Object::Detection(settings),
            ),
            (),
        ))
    })
    .await?;
    Ok(Json(app.config().detection))
}

pub(super) async fn addresses_get(
    State(app): State<Arc<App>>,
    Path(id): Path<i64>,
) -> Result<Json<Addresses>, ApiError> {
    let c = app.config();
    let n = find::<NodeRecord>(&c, id, None)?;
    let source =
        if n.value.addresses.is_empty() { AddressSource::Reported } else { AddressSource::Configured };
    Ok(Json(Addresses { source, configured: n.value.addresses.as_slice().to_vec(), warnings: Vec::new() }))
}

pub(super) async fn addresses_put(
    (State(app), Extension(actor)): Ctx,
    Path(id): Path<i64>,
    Json(body): Json<Value>,
) -> Result<Json<Addresses>, ApiError> {
    // A row is named as the validation below names it: `addresses[2].level`, not `[2].level`.
    let rows: Vec<AddressInput> = vantage_core::from_value(body).map_err(|e| match e {
        vantage_core::Error::Invalid { ref field, .. } if field.starts_with('[') => e.within("addresses"),
        e => e,
    })?;
    let list = AddressList::parse(&rows, app.address_policy())?;
    save_addresses(app, &actor, id, |_| Ok((list, json!({})))).await
}

/// *Add source address*: the node's source address (its latest heartbeat's, else its
/// enrollment's) joins its configured addresses at the level asked (primary by default),
/// validated and saved as any address change. Refused while there is none to add: no source
/// address, a private one, or one configured already.
pub(super) async fn addresses_add_source(
    (State(app), Extension(actor)): Ctx,
    Path(id): Path<i64>,
    Json(body): Json<Value>,
) -> Result<Json<Addresses>, ApiError> {
    let b: SourceAddressBody = parse_json(body)?;
    let level = b.level.unwrap_or(Level::Primary);
    let policy = app.address_policy();
    let core = app.clone();
    save_addresses(app, &actor, id, move |n| {
        let core = core.view();
        let (addable, source) = (core.addable_source(NodeId(id)), core.source_address(NodeId(id)));
        let ip = addable.ok_or_else(|| {
            let why = match source {
                None => "its agent has not connected yet: there is no source address".to_owned(),
                Some(ip) if n.addresses.as_slice().iter().any(|a| a.ip == ip) => {
                    format!("the source address {ip} is configured already")
                }
                Some(ip) => format!("the source address {ip} is not public"),
            };
            ApiError::invalid("source", why)
        })?;
        let mut rows: Vec<AddressInput> =
            n.addresses.as_slice().iter().map(|a| AddressInput::from(*a)).collect();
        rows.push(AddressInput { ip: ip.to_string(), level, trusted: false, line: None });
        Ok((AddressList::parse(&rows, policy)?, json!({"source": ip})))
    })
    .await
}

/// Saves the configured addresses `next` makes of a node's (with what the audit should add),
/// audited as `node.set_addresses`; answers them with a warning for the new ones no prober
/// can check yet.
async fn save_addresses(
    app: Arc<App>,
    actor: &Actor,
    id: i64,
    next: impl FnOnce(&NodeRecord) -> Result<(AddressList, Value), ApiError>,
) -> Result<Json<Addresses>, ApiError> {
    let (node, added) = app
        .change(actor, |c| {
            let mut n = NodeRecord::clone(&find::<NodeRecord>(c, id, None)?.value);
            let (list, extra) = next(&n)?;
            let before = n.addresses.clone();
            // The same list again saves nothing (no audit entry, no revision).
            if list == before {
                return Ok((Change::default(), (NodeId(id), Vec::new())));
            }
            let added: Vec<IpAddr> = list
                .as_slice()
                .iter()
                .filter(|a| !a.trusted && !before.as_slice().iter().any(|b| b.ip == a.ip))
                .map(|a| a.ip)
                .collect();
            n.addresses = list.clone();
            // A line's target addresses name a line of the node's own cluster.
            n.check(id, c)?;
            let mut meta = json!({"before": before, "after": list});
            if let (Some(meta), Value::Object(extra)) = (meta.as_object_mut(), extra) {
                meta.extend(extra);
            }
            let mut ch = Change::default();
            ch.audit("node.set_addresses", format!("node:{id}"), meta);
            ch.puts.push((id, Object::Node(n)));
            Ok((ch, (NodeId(id), added)))
        })
        .await?;
    // Reported addresses already verified are not new to the probers: only those that
    // nothing can check serve unseen.
    let unchecked = app.owner().read(move |c, at| c.unchecked_addresses(node, &added, at)).await?;
    let Json(mut saved) = addresses_get(State(app), Path(id)).await?;
    if !unchecked.is_empty() {
        let added: Vec<String> = unchecked.iter().map(ToString::to_string).collect();
        saved.warnings.push(format!(
            "no prober checks this node yet: {} serve{} before any prober has seen {} answer",
            added.join(", "),
            if added.len() == 1 { "s" } else { "" },
            if added.len() == 1 { "it" } else { "them" },
        ));
    }
    Ok(Json(saved))
}
